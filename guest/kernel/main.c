/* Kernel entry after long mode: set up the machine, start the programs named on the command
 * line (run=a,b,c; default spin,spin,sys), then become the idle loop. */
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

/* Returns the value of "run=" in cmdline (up to the next space), or the default. */
static const char *run_list(const char *cmdline, size_t *len)
{
    for (const char *p = cmdline; p && *p; p++) {
        if ((p == cmdline || p[-1] == ' ') && strncmp(p, "run=", 4) == 0) {
            p += 4;
            size_t n = 0;
            while (p[n] && p[n] != ' ')
                n++;
            *len = n;
            return p;
        }
    }
    *len = strlen(DEFAULT_RUN);
    return DEFAULT_RUN;
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
    start_programs(cmdline);
    kprintf("ready\n");
    idle_loop();
}
