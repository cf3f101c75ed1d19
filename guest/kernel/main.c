/* Kernel entry after long mode: set up the machine, start the other CPUs, start the programs
 * named on the command line (run=a,b@1,c; default spin,spin,sys), then become the boot CPU's
 * idle loop. abi_fault=, reset_run= and recycle= are test aids (guest/README.md). */
#include "kernel.h"

struct program {
    const char *name;
    const uint8_t *start, *end;
};

extern const uint8_t prog_spin_start[], prog_spin_end[];
extern const uint8_t prog_sys_start[], prog_sys_end[];
extern const uint8_t prog_spin_pie_start[], prog_spin_pie_end[];

static const struct program programs[] = {
    {"spin", prog_spin_start, prog_spin_end},
    {"sys", prog_sys_start, prog_sys_end},
    {"spin-pie", prog_spin_pie_start, prog_spin_pie_end}, /* spin, position-independent */
};

#define DEFAULT_RUN "spin,spin,sys"

static const struct program *find_program(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++)
        if (strlen(programs[i].name) == len && strncmp(programs[i].name, name, len) == 0)
            return &programs[i];
    return 0;
}

/* Returns the value of option `key` ("run=") in cmdline, up to the next space, or NULL. */
static const char *cmdline_value(const char *cmdline, const char *key, size_t *len)
{
    size_t key_len = strlen(key);
    for (const char *p = cmdline; p && *p; p++) {
        if ((p == cmdline || p[-1] == ' ') && strncmp(p, key, key_len) == 0) {
            p += key_len;
            size_t n = 0;
            while (p[n] && p[n] != ' ')
                n++;
            *len = n;
            return p;
        }
    }
    return 0;
}

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

/* One run= entry: NAME or NAME@CPU (pinned to the CPU with that APIC ID). Returns the program
 * or NULL; *pin is -1 when unpinned. */
static const struct program *parse_entry(const char *entry, size_t len, int *pin)
{
    size_t name_len = 0;
    while (name_len < len && entry[name_len] != '@')
        name_len++;
    *pin = -1;
    if (name_len < len) {
        size_t digits = len - name_len - 1;
        if (digits == 0 || digits > 3)
            return 0;
        int cpu = 0;
        for (size_t k = name_len + 1; k < len; k++) {
            if (entry[k] < '0' || entry[k] > '9')
                return 0;
            cpu = cpu * 10 + (entry[k] - '0');
        }
        *pin = cpu;
    }
    return find_program(entry, name_len);
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

static void start_programs(const char *cmdline)
{
    size_t len;
    const char *list = run_list(cmdline, &len);
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && list[j] != ',')
            j++;
        int pin;
        const struct program *prog = parse_entry(list + i, j - i, &pin);
        if (!prog) {
            kprintf("unknown program '");
            kputs_n(list + i, j - i);
            kprintf("'\n");
        } else {
            int pid = proc_spawn(prog->name, prog->start, (size_t)(prog->end - prog->start), pin);
            if (pid < 0)
                kprintf("cannot start %s\n", prog->name);
            else if (pin < 0)
                kprintf("start pid=%d name=%s\n", pid, prog->name);
            else
                kprintf("start pid=%d name=%s cpu=%d%s\n", pid, prog->name, pin,
                        pin < MAX_CPUS && cpus[pin].online ? "" : " (not online: never runs)");
        }
        i = j + 1;
    }
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
    start_programs(cmdline);
    kprintf("ready\n");
    abi_publish_idle();
    idle_loop();
}
