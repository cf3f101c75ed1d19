/* aarch64 kernel entry (EL1, from boot.S): read the command line from the device tree, start the
 * other CPUs through PSCI, start the programs named by run= (default spin,spin,sys), then become
 * CPU 0's idle loop. The serial milestones are the x86_64 kernel's. */
#include "a64.h"

extern const uint8_t prog_spin_start[], prog_spin_end[];
extern const uint8_t prog_sys_start[], prog_sys_end[];

const struct program programs[] = {
    {"spin", prog_spin_start, prog_spin_end},
    {"sys", prog_sys_start, prog_sys_end},
};

const size_t programs_count = sizeof programs / sizeof programs[0];

#define DEFAULT_RUN     "spin,spin,sys"
#define PSCI_CPU_ON     0xc4000003ull
#define PSCI_SUCCESS    0
#define PSCI_ALREADY_ON (-4)

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

static volatile int cpus_online = 1;

static uint64_t boot_stack_lo(int cpu)
{
    return (uint64_t)boot_stacks + (uint64_t)cpu * BOOT_STACK_SIZE;
}

/* Another CPU, in EL1 on its boot stack once PSCI started it. */
void ap_main(uint64_t index);
void ap_main(uint64_t index)
{
    int cpu = (int)index; /* < MAX_CPUS: kmain starts no more */
    cpu_init(cpu, boot_stack_lo(cpu), boot_stack_lo(cpu) + BOOT_STACK_SIZE);
    trap_init_cpu();
    abi_publish_idle();
    cpus[cpu].online = 1;
    __atomic_fetch_add(&cpus_online, 1, __ATOMIC_SEQ_CST);
    idle_loop();
}

/* PSCI through the hvc conduit, which QEMU's virt machine names in its device tree (/psci,
 * method "hvc") when the guest starts at EL1. */
static int64_t psci_cpu_on(uint64_t mpidr, uint64_t entry_pa, uint64_t context)
{
    register uint64_t x0 __asm__("x0") = PSCI_CPU_ON;
    register uint64_t x1 __asm__("x1") = mpidr;
    register uint64_t x2 __asm__("x2") = entry_pa;
    register uint64_t x3 __asm__("x3") = context;
    __asm__ volatile("hvc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x3) : "memory");
    return (int64_t)x0;
}

/* Starts CPUs 1..cpus-1 (MPIDR Aff0 = index on virt) and waits up to 5 s for them. */
static int smp_start(int cpus)
{
    int usable = cpus < MAX_CPUS ? cpus : MAX_CPUS;
    if (cpus > MAX_CPUS)
        kprintf("smp: %d cpus past index %d left off (qprof_abi has %d slots)\n", cpus - MAX_CPUS,
                MAX_CPUS - 1, MAX_CPUS);
    for (int i = 1; i < usable; i++) {
        int64_t rc = psci_cpu_on((uint64_t)i, V2P(secondary_entry), (uint64_t)i);
        if (rc != PSCI_SUCCESS && rc != PSCI_ALREADY_ON)
            kprintf("smp: PSCI CPU_ON %d: %ld\n", i, (long)rc);
    }
    uint64_t freq = sysreg_read(cntfrq_el0);
    uint64_t deadline = sysreg_read(cntvct_el0) + 5 * freq;
    while (cpus_online < usable && sysreg_read(cntvct_el0) < deadline)
        ;
    if (cpus_online < usable)
        kprintf("smp: %d of %d cpus started within 5 s\n", cpus_online, usable);
    kprintf("smp: %d cpus online\n", cpus_online);
    return usable;
}

void kmain(uint64_t index);
void kmain(uint64_t index)
{
    (void)index; /* 0: boot.S sends only CPU 0 here */
    kprintf("qprof-guest: boot\n");
    cpu_init(0, boot_stack_lo(0), boot_stack_lo(0) + BOOT_STACK_SIZE);
    cpus[0].online = 1;
    abi_init();
    mm_init();
    /* QEMU puts the device tree at the start of RAM for a kernel that is not Linux's Image. */
    int cpus = fdt_scan(P2V(RAM_PHYS), cmdline_buf, sizeof cmdline_buf);
    kprintf("cmdline: %s\n", cmdline_buf);
    kprintf("qprof_abi at %p, kernel text %p-%p\n", &qprof_abi, __text_start, __text_end);
    int count = cpus > 1 ? smp_start(cpus) : 1;
    abi_publish_header(count);
    trap_init_cpu();
    size_t run_len;
    const char *run = run_list(cmdline_buf, &run_len);
    start_programs(run, run_len);
    kprintf("ready\n");
    abi_publish_idle();
    idle_loop();
}
