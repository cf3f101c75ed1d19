/* riscv64 low-half kernel: traps from user mode (usertrap, entered from the trampoline on the
 * process's kernel stack and the kernel's table) and the way back (usertrapret), traps from
 * kernel mode (kerneltrap, from kernelvec), the tick, the UART. */
#include "lowhalf.h"

#define CAUSE_INTERRUPT (1ull << 63)
#define IRQ_S_SOFT      1
#define CAUSE_ECALL_U   8

/* ---- UART (ns16550a at 0x10000000, polled; one-to-one before and after paging) ---- */
void serial_putc(char c)
{
    volatile uint8_t *uart = (volatile uint8_t *)UART_VA;
    while (!(uart[5] & 0x20))
        ;
    uart[0] = (uint8_t)c;
}

void trap_init_hart(void)
{
    csr_write(stvec, (uint64_t)kernelvec);
    csr_set(sie, SIE_SSIE);
}

/* M-mode's timervec raised SSIP: the hart's tick. */
static void timer_interrupt(void)
{
    csr_clear(sip, SIP_SSIP);
    if (this_cpu()->id == 0)
        timer_tick();
    schedule();
}

/* From uservec: sp is the process's kernel stack, satp the kernel's table, interrupts off. */
void usertrap(void)
{
    csr_write(stvec, (uint64_t)kernelvec);
    struct proc *p = current;
    struct trapframe *tf = p->trapframe;
    uint64_t cause = csr_read(scause);
    if (cause == CAUSE_ECALL_U) {
        tf->epc += 4;
        syscall_dispatch(tf);
    } else if (cause == (CAUSE_INTERRUPT | IRQ_S_SOFT)) {
        timer_interrupt();
    } else {
        kprintf("fault pid=%d name=%s: scause %lx sepc %lx stval %lx\n", p->pid, p->name, cause,
                tf->epc, csr_read(stval));
        proc_exit(-1);
    }
    usertrapret();
}

/* To user mode through userret at its TRAMPOLINE address; the trapframe gets what the next
 * uservec needs (this hart's struct cpu: the process may run on another hart each time). */
void usertrapret(void)
{
    struct proc *p = current;
    irq_off();
    csr_write(stvec, TRAMPOLINE + (uint64_t)(uservec - trampoline));
    p->trapframe->kernel_satp = kernel_satp();
    p->trapframe->kernel_sp = p->kstack_hi;
    p->trapframe->kernel_trap = (uint64_t)usertrap;
    p->trapframe->kernel_tp = (uint64_t)this_cpu();
    uint64_t status = csr_read(sstatus);
    status &= ~SSTATUS_SPP;
    status |= SSTATUS_SPIE;
    csr_write(sstatus, status);
    csr_write(sepc, p->trapframe->epc);
    uint64_t satp = SATP_SV39 | (V2P(p->pagetable) >> 12);
    void (*ret)(uint64_t) = (void (*)(uint64_t))(TRAMPOLINE + (uint64_t)(userret - trampoline));
    ret(satp);
    __builtin_unreachable();
}

/* From kernelvec, on the interrupted kernel stack. schedule() may run other contexts, which
 * change sstatus.SPP/SPIE: they are put back for kernelvec's sret (sepc is in its frame). */
void kerneltrap(void)
{
    uint64_t status = csr_read(sstatus), cause = csr_read(scause);
    if (!(status & SSTATUS_SPP))
        panic("kerneltrap: not from supervisor mode");
    if (cause == (CAUSE_INTERRUPT | IRQ_S_SOFT))
        timer_interrupt();
    else
        panic("kernel trap: scause %lx sepc %lx stval %lx", cause, csr_read(sepc), csr_read(stval));
    csr_write(sstatus, status);
}
