/* The host CPU work a QMP sample does inside the pause to read x86_64's registers: QEMU's
 * `info registers -a` text parsed by qmp/'s qmp_parse_registers (the QMP target's path until
 * issue 36) against the arch table's monitor_parse, then every register by name and
 * monitor_cpu_state (the path since). No QEMU.
 * Usage: monitor_parse_bench TRANSCRIPT [PARSES]   (tests/data/qemu-transcripts/
 * info_registers_a_smp2.txt: two vCPUs); three rounds, microseconds per parse. */
#include "arch.h"
#include "qmp.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static struct qmp_regs regs[QMP_MAX_CPUS];
static struct prof_arch_monitor_cpu mon[QMP_MAX_CPUS];

static uint64_t by_qmp(const char *text)
{
    int n = 0;
    qmp_parse_registers(text, regs, QMP_MAX_CPUS, &n, NULL);
    return regs[0].rip;
}

static uint64_t by_table(const struct prof_arch *a, const char *text)
{
    int n = 0;
    uint64_t sum = 0, v = 0;
    a->monitor_parse(text, mon, QMP_MAX_CPUS, &n, NULL);
    for (int c = 0; c < n; c++) {
        struct prof_arch_cpu_state st = {0};
        for (int r = 0; r < a->n_gdb_regs; r++)
            prof_arch_monitor_reg(&mon[c], a->gdb_regs[r].gdb_name, &v), sum += v;
        a->monitor_cpu_state(prof_arch_monitor_reg, &mon[c], &st, NULL);
        sum += st.as_root;
    }
    return sum;
}

int main(int argc, char **argv)
{
    static char text[1 << 16];
    FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
    if (!f) {
        fprintf(stderr, "usage: monitor_parse_bench TRANSCRIPT [PARSES]\n");
        return 2;
    }
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    long parses = argc > 2 ? strtol(argv[2], NULL, 10) : 100000;
    volatile uint64_t sink = 0;
    for (int round = 0; round < 3; round++) {
        double t0 = now_s();
        for (long i = 0; i < parses; i++)
            sink += by_qmp(text);
        double t1 = now_s();
        for (long i = 0; i < parses; i++)
            sink += by_table(&prof_arch_x86_64, text);
        double t2 = now_s();
        printf(
            "per parse: qmp_parse_registers %.2f us, monitor_parse + registers by name %.2f us\n",
            (t1 - t0) / (double)parses * 1e6, (t2 - t1) / (double)parses * 1e6);
    }
    return sink == 1; /* never: keeps the loops */
}
