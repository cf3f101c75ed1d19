/* riscv64 low-half kernel, M-mode (boot.S calls mstart on each hart's boot stack, paging off):
 * opens the machine to S-mode, starts the hart's M-mode timer and sets where mret goes. */
#include "lowhalf.h"

#define MSTATUS_MPP_MASK (3ull << 11)
#define MSTATUS_MPP_S    (1ull << 11)
#define MSTATUS_MIE      (1ull << 3)
#define MIE_MTIE         (1ull << 7)
#define TICK_CYCLES      (TIMEBASE_HZ / TIMER_HZ)

void timervec(void);
void kmain(uint64_t hartid, uint64_t dtb_pa);
void ap_main(uint64_t hartid);
void mstart(uint64_t hartid);

/* timervec's per-hart scratch: a1..a3 saved, &mtimecmp, the interval (boot.S's offsets). */
struct mscratch {
    uint64_t save[3];
    uint64_t mtimecmp;
    uint64_t interval;
};
static struct mscratch mscratch[NCPU];

/* The CLINT interrupts this hart in M-mode every TICK_CYCLES; timervec passes each tick on to
 * S-mode as a software interrupt. */
static void timer_init(uint64_t hart)
{
    volatile uint64_t *mtimecmp = (volatile uint64_t *)CLINT_MTIMECMP(hart);
    *mtimecmp = *(volatile uint64_t *)CLINT_MTIME + TICK_CYCLES;
    mscratch[hart].mtimecmp = (uint64_t)mtimecmp;
    mscratch[hart].interval = TICK_CYCLES;
    csr_write(mscratch, (uint64_t)&mscratch[hart]);
    csr_write(mtvec, (uint64_t)timervec);
    csr_set(mstatus, MSTATUS_MIE);
    csr_set(mie, MIE_MTIE);
}

void mstart(uint64_t hartid)
{
    /* S and U mode may reach all memory (one NAPOT region over everything). */
    csr_write(pmpaddr0, 0x3fffffffffffffull);
    csr_write(pmpcfg0, 0x1f);
    /* Every exception and every S-mode interrupt goes to S-mode. */
    csr_write(medeleg, 0xffff);
    csr_write(mideleg, 0x222);
    csr_write(mcounteren, 7); /* S and U mode may read time */
    csr_write(satp, 0);
    timer_init(hartid);
    /* APs wait here, in M-mode, until hart 0 has set the kernel up. */
    if (hartid != 0)
        while (!__atomic_load_n(&ap_go, __ATOMIC_ACQUIRE))
            ;
    uint64_t status = csr_read(mstatus);
    csr_write(mstatus, (status & ~MSTATUS_MPP_MASK) | MSTATUS_MPP_S);
    csr_write(mepc, hartid == 0 ? (uint64_t)kmain : (uint64_t)ap_main);
}
