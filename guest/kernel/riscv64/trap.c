/* riscv64: trap dispatch (the timer, system calls, faults), the system calls, the UART. */
#include "rv.h"

#define CAUSE_INTERRUPT (1ull << 63)
#define IRQ_S_TIMER     5
#define CAUSE_ECALL_U   8
#define TICK_CYCLES     (TIMEBASE_HZ / TIMER_HZ)
#define CSR_STIMECMP    "0x14d"

/* ---- UART (ns16550a at 0x10000000, polled) ---- */
void serial_putc(char c)
{
    volatile uint8_t *uart = (volatile uint8_t *)UART_VA;
    while (!(uart[5] & 0x20))
        ;
    uart[0] = (uint8_t)c;
}

/* ---- timer: each hart its own (Sstc's stimecmp), at TIMER_HZ ---- */
static void timer_arm(void)
{
    uint64_t next = csr_read(time) + TICK_CYCLES;
    __asm__ volatile("csrw " CSR_STIMECMP ", %0" ::"r"(next));
}

void trap_init_hart(void)
{
    csr_write(stvec, (uint64_t)trap_entry);
    csr_write(sscratch, (uint64_t)this_cpu()); /* entry.S: always this hart's struct cpu */
    csr_set(sstatus, SSTATUS_SUM);             /* system calls read user buffers */
    csr_set(sie, SIE_STIE);
    timer_arm();
}

static void timer_interrupt(void)
{
    timer_arm();
    if (this_cpu()->id == 0)
        timer_tick();
    schedule();
}

/* Interrupts are off here (the hardware cleared SIE); sys_work turns them on for its work. */
void trap_dispatch(struct qprof_abi_regs_riscv64 *regs)
{
    int from_user = !(regs->status & SSTATUS_SPP);
    if (from_user)
        abi_enter_from_user(regs);
    if (regs->cause == (CAUSE_INTERRUPT | IRQ_S_TIMER)) {
        timer_interrupt();
    } else if (regs->cause == CAUSE_ECALL_U) {
        regs->pc += 4;
        syscall_dispatch(regs);
    } else if (from_user) {
        kprintf("fault pid=%d name=%s: scause %lx sepc %lx stval %lx\n", current->pid,
                current->name, regs->cause, regs->pc, regs->tval);
        proc_exit(-1);
    } else {
        panic("kernel trap: scause %lx sepc %lx stval %lx", regs->cause, regs->pc, regs->tval);
    }
    if (from_user)
        abi_return_to_user();
}
