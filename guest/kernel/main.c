/* Kernel entry after long mode: set up the machine, start the other CPUs, start the programs
 * named on the command line (run=a,b@1,c; default spin,spin,sys), then become the boot CPU's
 * idle loop. abi_fault=, reset_run= and recycle= are test aids (guest/README.md). */
#include "kernel.h"

extern const uint8_t prog_spin_start[], prog_spin_end[];
extern const uint8_t prog_sys_start[], prog_sys_end[];
extern const uint8_t prog_spin_pie_start[], prog_spin_pie_end[];

const struct program programs[] = {
    {"spin", prog_spin_start, prog_spin_end},
    {"sys", prog_sys_start, prog_sys_end},
    {"spin-pie", prog_spin_pie_start, prog_spin_pie_end}, /* spin, position-independent */
};

const size_t programs_count = sizeof programs / sizeof programs[0];

#define DEFAULT_RUN "spin,spin,sys"

/* CMOS RAM survives a reset (QEMU keeps it for the life of the process, as a battery would), so
 * a byte there counts the boots of this machine. Used only with reset_run=. */
#define CMOS_INDEX      0x70
#define CMOS_DATA       0x71
#define CMOS_BOOT_COUNT 0x7e /* unused by QEMU's pc machine and SeaBIOS */

static unsigned count_boot(void)
{
    outb(CMOS_INDEX, CMOS_BOOT_COUNT);
    unsigned boots = inb(CMOS_DATA) + 1u;
    outb(CMOS_INDEX, CMOS_BOOT_COUNT);
    outb(CMOS_DATA, (uint8_t)boots);
    return boots;
}

/* The program list: run= (or the default); with reset_run=, that list instead on every boot
 * after the first, so that a test can see a reset give pids to other programs. */
static const char *run_list(const char *cmdline, size_t *len)
{
    size_t reset_len;
    const char *reset_list = cmdline_value(cmdline, "reset_run=", &reset_len);
    if (reset_list) {
        unsigned boots = count_boot();
        kprintf("boot %u of this machine\n", boots);
        if (boots > 1) {
            *len = reset_len;
            return reset_list;
        }
    }
    const char *list = cmdline_value(cmdline, "run=", len);
    if (list)
        return list;
    *len = strlen(DEFAULT_RUN);
    return DEFAULT_RUN;
}

static const char *const abi_fault_names[] = {
    [ABI_FAULT_SIZE] = "size", [ABI_FAULT_STRIDE] = "stride", [ABI_FAULT_TEXT] = "text",
    [ABI_FAULT_NAME] = "name", [ABI_FAULT_COUNT] = "count",
};

/* abi_fault=VARIANT: publish a hostile qprof_abi (see guest/README.md). */
static void apply_abi_fault(const char *cmdline)
{
    size_t len;
    const char *name = cmdline_value(cmdline, "abi_fault=", &len);
    if (!name)
        return;
    for (int f = ABI_FAULT_SIZE; f <= ABI_FAULT_COUNT; f++) {
        if (strlen(abi_fault_names[f]) == len && strncmp(abi_fault_names[f], name, len) == 0) {
            abi_set_fault((enum abi_fault)f);
            kprintf("qprof_abi fault: %s\n", abi_fault_names[f]);
            return;
        }
    }
    kprintf("unknown abi_fault '");
    kputs_n(name, len);
    kprintf("'\n");
}

/* recycle=TICKS (a test aid): every TICKS ticks a process no CPU runs is retired and the other
 * demo program started in its place, in its freed top-level page table: the same address-space
 * root now holds another process (what a kernel that frees and reuses page tables does). */
static uint64_t recycle_ticks;

static void parse_recycle(const char *cmdline)
{
    size_t len;
    const char *v = cmdline_value(cmdline, "recycle=", &len);
    for (size_t i = 0; v && i < len && v[i] >= '0' && v[i] <= '9'; i++)
        recycle_ticks = recycle_ticks * 10 + (uint64_t)(v[i] - '0');
}

void recycle_tick(uint64_t tick)
{
    if (!recycle_ticks || tick % recycle_ticks)
        return;
    char name[QPROF_ABI_NAME_LEN];
    int old_pid = 0;
    const char *retired = proc_retire_one(&old_pid);
    if (!retired)
        return;
    memcpy(name, retired, sizeof name); /* the slot is reused by the spawn */
    const struct program *next =
        strcmp(name, "spin") == 0 ? find_program("sys", 3) : find_program("spin", 4);
    int pid = proc_spawn(next->name, next->start, (size_t)(next->end - next->start), -1);
    kprintf("recycle pid=%d name=%s -> pid=%d name=%s\n", old_pid, name, pid, next->name);
}

/* The command line is copied: the page it sits in is not reserved, and AP start-up writes the
 * trampoline into low memory. */
static char cmdline_buf[1024];

/* hvm_start_info (Xen's PVH start info): magic at 0, cmdline_paddr at 24, rsdp_paddr at 32. */
static const char *read_start_info(uint64_t start_info_pa, uint64_t *rsdp_pa)
{
    const uint8_t *info = P2V(start_info_pa);
    *rsdp_pa = 0;
    if (!start_info_pa || *(const uint32_t *)info != 0x336ec578)
        return "";
    uint64_t cmd_pa = *(const uint64_t *)(info + 24);
    *rsdp_pa = *(const uint64_t *)(info + 32);
    if (!cmd_pa)
        return "";
    const char *src = P2V(cmd_pa);
    size_t n = 0;
    while (n < sizeof cmdline_buf - 1 && src[n]) {
        cmdline_buf[n] = src[n];
        n++;
    }
    cmdline_buf[n] = 0;
    return cmdline_buf;
}

void kmain(uint64_t start_info_pa);
void kmain(uint64_t start_info_pa)
{
    serial_init();
    kprintf("qprof-guest: boot\n");
    int bsp = (int)cpuid_apic_id();
    if (bsp >= MAX_CPUS)
        panic("boot CPU has APIC ID %d, qprof_abi has %d slots", bsp, MAX_CPUS);
    arch_init(bsp); /* loads the TSS that makes cpu_id() work */
    lapic_map();
    cpu_init_idle(bsp, (uint64_t)boot_stack_lo, (uint64_t)boot_stack_hi);
    abi_init(bsp);
    mm_init(V2P(__kernel_end), 64ull << 20);

    uint64_t rsdp_pa;
    const char *cmdline = read_start_info(start_info_pa, &rsdp_pa);
    kprintf("cmdline: %s\n", cmdline);
    kprintf("qprof_abi at %p, kernel text %p-%p\n", &qprof_abi, __text_start, __text_end);
    smp_init(rsdp_pa);
    abi_publish_header(smp_cpu_limit);
    apply_abi_fault(cmdline);
    parse_recycle(cmdline);
    size_t run_len;
    const char *run = run_list(cmdline, &run_len);
    start_programs(run, run_len);
    kprintf("ready\n");
    abi_publish_idle();
    idle_loop();
}
