/* riscv64 kernel entry (S-mode, from boot.S): read the command line and the hart count from the
 * device tree, start the other harts, start the programs named by run= (default spin,spin,sys),
 * then become hart 0's idle loop. The serial milestones are the x86_64 kernel's. */
#include "rv.h"

extern const uint8_t prog_spin_start[], prog_spin_end[];
extern const uint8_t prog_sys_start[], prog_sys_end[];

const struct program programs[] = {
    {"spin", prog_spin_start, prog_spin_end},
    {"sys", prog_sys_start, prog_sys_end},
};

const size_t programs_count = sizeof programs / sizeof programs[0];

#define DEFAULT_RUN "spin,spin,sys"

static char cmdline_buf[1024];

/* run= or the default */
static const char *run_list(const char *cmdline, size_t *len)
{
    const char *list = cmdline_value(cmdline, "run=", len);
    if (list)
        return list;
    *len = strlen(DEFAULT_RUN);
    return DEFAULT_RUN;
}

static volatile int harts_online = 1;

static uint64_t boot_stack_lo(int hart)
{
    return (uint64_t)boot_stacks + (uint64_t)hart * BOOT_STACK_SIZE;
}

/* Another hart, in S-mode on its boot stack once hart 0 set ap_go. */
void ap_main(uint64_t hartid);
void ap_main(uint64_t hartid)
{
    int hart = (int)hartid;        /* < MAX_CPUS: boot.S parks the others in M-mode */
    csr_set(sstatus, SSTATUS_SUM); /* before the qprof_abi slot: a user page (proc.c) */
    cpu_init(hart, boot_stack_lo(hart), boot_stack_lo(hart) + BOOT_STACK_SIZE);
    trap_init_hart();
    abi_publish_idle();
    cpus[hart].online = 1;
    __atomic_fetch_add(&harts_online, 1, __ATOMIC_SEQ_CST);
    idle_loop();
}

/* Starts the other harts (parked in boot.S) and waits up to 5 s for them. */
static int smp_start(int harts)
{
    int usable = harts < MAX_CPUS ? harts : MAX_CPUS;
    if (harts > MAX_CPUS)
        kprintf("smp: %d cpus with hart ID >= %d left halted (qprof_abi has %d slots)\n",
                harts - MAX_CPUS, MAX_CPUS, MAX_CPUS);
    __atomic_store_n(&ap_go, 1, __ATOMIC_RELEASE);
    uint64_t deadline = csr_read(time) + 5ull * TIMEBASE_HZ;
    while (harts_online < usable && csr_read(time) < deadline)
        ;
    if (harts_online < usable)
        kprintf("smp: %d of %d cpus started within 5 s\n", harts_online, usable);
    kprintf("smp: %d cpus online\n", harts_online);
    return usable;
}

void kmain(uint64_t hartid, uint64_t dtb_pa);
void kmain(uint64_t hartid, uint64_t dtb_pa)
{
    (void)hartid; /* 0: boot.S sends only hart 0 here */
    kprintf("qprof-guest: boot\n");
    csr_set(sstatus, SSTATUS_SUM); /* before the qprof_abi table: a user page from mm_init on */
    cpu_init(0, boot_stack_lo(0), boot_stack_lo(0) + BOOT_STACK_SIZE);
    cpus[0].online = 1;
    abi_init();
    mm_init();
    int harts = fdt_scan(dtb_pa ? P2V(dtb_pa) : 0, cmdline_buf, sizeof cmdline_buf);
    kprintf("cmdline: %s\n", cmdline_buf);
    kprintf("qprof_abi at %p, kernel text %p-%p\n", &qprof_abi, __text_start, __text_end);
    int count = harts > 1 ? smp_start(harts) : 1;
    abi_publish_header(count);
    trap_init_hart();
    size_t run_len;
    const char *run = run_list(cmdline_buf, &run_len);
    start_programs(run, run_len);
    kprintf("ready\n");
    abi_publish_idle();
    idle_loop();
}
