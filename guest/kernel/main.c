/* Kernel entry after long mode: set up the machine, start the programs named on the command
 * line (run=a,b,c; default spin,spin,sys), then become the idle loop. abi_fault= and
 * reset_run= are test aids (guest/README.md). */
#include "kernel.h"

struct program {
    const char *name;
    const uint8_t *start, *end;
};

extern const uint8_t prog_spin_start[], prog_spin_end[];
extern const uint8_t prog_sys_start[], prog_sys_end[];

static const struct program programs[] = {
    {"spin", prog_spin_start, prog_spin_end},
    {"sys", prog_sys_start, prog_sys_end},
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

static void start_programs(const char *cmdline)
{
    size_t len;
    const char *list = run_list(cmdline, &len);
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && list[j] != ',')
            j++;
        const struct program *prog = find_program(list + i, j - i);
        if (!prog) {
            kprintf("unknown program '");
            kputs_n(list + i, j - i);
            kprintf("'\n");
        } else {
            int pid = proc_spawn(prog->name, prog->start, (size_t)(prog->end - prog->start));
            if (pid < 0)
                kprintf("cannot start %s\n", prog->name);
            else
                kprintf("start pid=%d name=%s\n", pid, prog->name);
        }
        i = j + 1;
    }
}

void kmain(uint64_t start_info_pa);
void kmain(uint64_t start_info_pa)
{
    serial_init();
    kprintf("qprof-guest: boot\n");
    abi_init();
    arch_init();
    mm_init(V2P(__kernel_end), 64ull << 20);
    proc_init();

    const char *cmdline = "";
    const uint32_t *info = P2V(start_info_pa);
    if (start_info_pa && info[0] == 0x336ec578) { /* hvm_start_info magic */
        uint64_t cmd_pa = *(const uint64_t *)((const uint8_t *)info + 24);
        if (cmd_pa)
            cmdline = P2V(cmd_pa);
    }
    kprintf("cmdline: %s\n", cmdline);
    kprintf("qprof_abi at %p, kernel text %p-%p\n", &qprof_abi, __text_start, __text_end);
    apply_abi_fault(cmdline);
    start_programs(cmdline);
    kprintf("ready\n");
    idle_loop();
}
