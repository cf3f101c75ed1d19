/* aarch64: exception dispatch (the timer's interrupt, system calls, faults), the GICv2 and the
 * generic timer, the UART. */
#include "a64.h"

#define ESR_EC(esr)    ((esr) >> 26)
#define EC_SVC64       0x15
#define ESR_IRQ        (~0ull) /* entry.S: the frame of an interrupt */
#define GICD_CTLR      0x000
#define GICD_ISENABLER 0x100
#define GICD_IPRIORITY 0x400
#define GICC_CTLR      0x000
#define GICC_PMR       0x004
#define GICC_IAR       0x00c
#define GICC_EOIR      0x010
#define SPURIOUS       1023

static inline void mmio_write32(uint64_t addr, uint32_t v)
{
    *(volatile uint32_t *)addr = v;
}
static inline uint32_t mmio_read32(uint64_t addr)
{
    return *(volatile uint32_t *)addr;
}

/* ---- UART (PL011 at 0x09000000, polled; QEMU's needs no set-up) ---- */
void serial_putc(char c)
{
    while (mmio_read32(UART_VA + 0x18) & (1u << 5)) /* FR.TXFF */
        ;
    mmio_write32(UART_VA, (uint8_t)c);
}

/* ---- timer: each CPU its own EL1 virtual timer, at TIMER_HZ ---- */
static uint64_t tick_counts;

static void timer_arm(void)
{
    sysreg_write(cntv_tval_el0, tick_counts);
    sysreg_write(cntv_ctl_el0, 1); /* enabled, not masked */
}

/* The distributor once (CPU 0 first), then this CPU's banked PPI enable and priority and its
 * CPU interface. */
void trap_init_cpu(void)
{
    sysreg_write(vbar_el1, (uint64_t)vectors);
    __asm__ volatile("isb" ::: "memory");
    if (this_cpu()->id == 0)
        mmio_write32(GICD_VA + GICD_CTLR, 1);
    volatile uint8_t *prio = (volatile uint8_t *)(GICD_VA + GICD_IPRIORITY);
    prio[TIMER_IRQ] = 0xa0;
    mmio_write32(GICD_VA + GICD_ISENABLER, 1u << TIMER_IRQ);
    mmio_write32(GICC_VA + GICC_PMR, 0xff);
    mmio_write32(GICC_VA + GICC_CTLR, 1);
    tick_counts = sysreg_read(cntfrq_el0) / TIMER_HZ;
    timer_arm();
}

static void irq_interrupt(void)
{
    uint32_t iar = mmio_read32(GICC_VA + GICC_IAR), id = iar & 0x3ff;
    if (id == SPURIOUS)
        return;
    mmio_write32(GICC_VA + GICC_EOIR, iar);
    if (id != TIMER_IRQ)
        return;
    timer_arm();
    if (this_cpu()->id == 0)
        timer_tick();
    schedule();
}

/* Interrupts are masked here (the exception masked them); sys_work unmasks them for its work. */
void trap_dispatch(struct qprof_abi_regs_aarch64 *regs)
{
    int from_user = (regs->pstate & 0xf) == 0;
    if (from_user)
        abi_enter_from_user(regs);
    if (regs->esr == ESR_IRQ) {
        irq_interrupt();
    } else if (ESR_EC(regs->esr) == EC_SVC64 && from_user) {
        syscall_dispatch(regs); /* ELR_EL1 already points past the svc */
    } else if (from_user) {
        kprintf("fault pid=%d name=%s: esr %lx elr %lx far %lx\n", current->pid, current->name,
                regs->esr, regs->pc, regs->far);
        proc_exit(-1);
    } else {
        panic("kernel trap: esr %lx elr %lx far %lx", regs->esr, regs->pc, regs->far);
    }
    if (from_user)
        abi_return_to_user();
}
