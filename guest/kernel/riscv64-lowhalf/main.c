/* riscv64 low-half kernel, S-mode entry (from start.c's mret, paging off): read the command
 * line and the hart count from the device tree, build and load the kernel's table, start the
 * other harts, start the programs named by run= (default spin,spin,sys), then become hart 0's
 * idle loop. The serial milestones are the other demo kernels'. */
#include "lowhalf.h"

extern const uint8_t prog_spin_start[], prog_spin_end[];
extern const uint8_t prog_sys_start[], prog_sys_end[];

const struct program programs[] = {
    {"spin", prog_spin_start, prog_spin_end},
    {"sys", prog_sys_start, prog_sys_end},
};

const size_t programs_count = sizeof programs / sizeof programs[0];

#define DEFAULT_RUN "spin,spin,sys"

static char cmdline_buf[1024];
volatile uint64_t ap_go;
static volatile int harts_online = 1;

/* run= or the default */
static const char *run_list(const char *cmdline, size_t *len)
{
    const char *list = cmdline_value(cmdline, "run=", len);
    if (list)
        return list;
    *len = strlen(DEFAULT_RUN);
    return DEFAULT_RUN;
}

/* This hart's struct cpu (tp from now on) and its idle context, on its boot stack. */
static void cpu_init(int hart)
{
    struct cpu *c = &cpus[hart];
    uint64_t stack_lo = (uint64_t)boot_stacks + (uint64_t)hart * BOOT_STACK_SIZE;
    c->id = hart;
    c->idle.pid = 0;
    c->idle.state = P_RUNNING;
    c->idle.pin = hart;
    c->idle.kstack_lo = stack_lo;
    c->idle.kstack_hi = stack_lo + BOOT_STACK_SIZE;
    memcpy(c->idle.name, "idle", 5);
    c->proc = &c->idle;
    __asm__ volatile("mv tp, %0" ::"r"(c));
}

/* Another hart, in S-mode on its boot stack once hart 0 set ap_go. */
void ap_main(uint64_t hartid);
void ap_main(uint64_t hartid)
{
    int hart = (int)hartid; /* < NCPU: boot.S parks the others in M-mode */
    kvm_init_hart();
    cpu_init(hart);
    trap_init_hart();
    cpus[hart].online = 1;
    __atomic_fetch_add(&harts_online, 1, __ATOMIC_SEQ_CST);
    idle_loop();
}

/* Lets the other harts go (they wait in start.c) and waits up to 5 s for them. */
static void smp_start(int harts)
{
    int usable = harts < NCPU ? harts : NCPU;
    if (harts > NCPU)
        kprintf("smp: %d cpus with hart ID >= %d left halted\n", harts - NCPU, NCPU);
    __atomic_store_n(&ap_go, 1, __ATOMIC_RELEASE);
    uint64_t deadline = csr_read(time) + 5ull * TIMEBASE_HZ;
    while (harts_online < usable && csr_read(time) < deadline)
        ;
    if (harts_online < usable)
        kprintf("smp: %d of %d cpus started within 5 s\n", harts_online, usable);
    kprintf("smp: %d cpus online\n", harts_online);
}

void kmain(uint64_t hartid, uint64_t dtb_pa);
void kmain(uint64_t hartid, uint64_t dtb_pa)
{
    (void)hartid; /* 0: start.c sends only hart 0 here */
    kprintf("qprof-guest: boot\n");
    cpu_init(0);
    cpus[0].online = 1;
    /* The device tree lies in RAM past what the kernel's table maps: read it before paging. */
    int harts = fdt_scan((const uint8_t *)dtb_pa, cmdline_buf, sizeof cmdline_buf);
    kvm_init();
    kvm_init_hart();
    kprintf("cmdline: %s\n", cmdline_buf);
    kprintf("lowhalf kernel text %p-%p\n", __text_start, __text_end);
    if (harts > 1)
        smp_start(harts);
    trap_init_hart();
    size_t run_len;
    const char *run = run_list(cmdline_buf, &run_len);
    start_programs(run, run_len);
    kprintf("ready\n");
    idle_loop();
}
