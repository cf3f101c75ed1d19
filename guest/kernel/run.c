/* The command line's options and the run= list (both kernels build this file): each kernel
 * supplies its embedded programs (programs[], programs_count) and the list to run. */
#if defined(GUEST_LOWHALF)
#include "riscv64-lowhalf/lowhalf.h"
#elif defined(__riscv)
#include "riscv64/rv.h"
#elif defined(__aarch64__)
#include "aarch64/a64.h"
#else
#include "kernel.h"
#endif

const struct program *find_program(const char *name, size_t len)
{
    for (size_t i = 0; i < programs_count; i++)
        if (strlen(programs[i].name) == len && strncmp(programs[i].name, name, len) == 0)
            return &programs[i];
    return 0;
}

/* Returns the value of option `key` ("run=") in cmdline, up to the next space, or NULL. */
const char *cmdline_value(const char *cmdline, const char *key, size_t *len)
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

/* One run= entry: NAME or NAME@CPU (pinned to the CPU with that APIC or hart ID). Returns the
 * program or NULL; *pin is -1 when unpinned. */
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

/* list: comma-separated run= entries (not NUL-terminated); each is started or reported. */
void start_programs(const char *list, size_t len)
{
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
