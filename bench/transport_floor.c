/* transport_floor: the raw cost of one sample through each of QEMU's interfaces, with the
 * project's own client code and no profiler work, on one guest. qprof's paused time over a
 * transport divided by this floor is what qprof itself adds.
 *
 *   qmp        qmp_sample: `stop` + `info registers -a` written together, then `cont` (qprof's
 *              QMP transaction with no memory read); paused time from QEMU's STOP/RESUME events
 *   qmp-mem    the same plus one 8 KiB `memsave` at vCPU 0's stack pointer (QMP without a shared
 *              RAM file)
 *   gdb        gdb_interrupt (^C) + gdb_read_registers_all (`Hg`+`g` for every vCPU in one
 *              write) + gdb_continue; paused time on the client clock, from before the ^C to
 *              after the `c` is written (QEMU's own events are not visible to a gdb client)
 *   gdb-state  the same with qThreadExtraInfo for every vCPU in the same write (what qprof
 *              sends: it tells a halted vCPU)
 *   gdb-mem    gdb plus 8 KiB at vCPU 0's stack pointer in pipelined `m` packets
 *
 * Usage: transport_floor -q QMP_SOCKET -g GDB_ADDRESS [-n SAMPLES] MODE...
 * Prints one line per mode: "MODE p50_us=.. p99_us=.. rate=.. trips=.. stop_p50_us=.." (stop:
 * gdb modes only, the ^C alone). Nothing sleeps between samples: closed loop. The QMP modes run
 * while no gdb client is attached (a QMP stop would otherwise reach the gdb client as a stop
 * reply it did not ask for). */
#define _GNU_SOURCE
#include "gdb.h"
#include "qmp.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STACK_READ 8192

struct figures {
    uint64_t *paused_ns, *stop_ns;
    size_t n;
    uint64_t round_trips;
    double elapsed_s;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double percentile_us(uint64_t *v, size_t n, double p)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_u64);
    size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return (double)v[i] / 1000.0;
}

static void print_figures(const char *mode, struct figures *f, size_t asked)
{
    printf("%s p50_us=%.0f p99_us=%.0f rate=%.0f trips=%.1f", mode,
           percentile_us(f->paused_ns, f->n, 50), percentile_us(f->paused_ns, f->n, 99),
           f->elapsed_s > 0 ? (double)f->n / f->elapsed_s : 0.0,
           f->n ? (double)f->round_trips / (double)f->n : 0.0);
    if (f->stop_ns)
        printf(" stop_p50_us=%.0f", percentile_us(f->stop_ns, f->n, 50));
    printf(" failed=%zu\n", asked - f->n);
}

/* ---- QMP ---------------------------------------------------------------------------------- */

static int qmp_read_stack(qmp_client *c, const struct qmp_regs *cpus, int n_cpus, void *ctx,
                          struct qp_error *err)
{
    (void)n_cpus;
    static uint8_t buf[STACK_READ];
    size_t got = 0;
    bool *read_memory = ctx;
    if (!*read_memory)
        return 0;
    /* A stack that ends before 8 KiB fails the read as a whole; what matters is the cost. */
    qmp_mem_read(c, &cpus[0], cpus[0].rsp, buf, sizeof buf, &got, NULL);
    (void)err;
    return 0;
}

static int run_qmp(const char *path, bool memory, size_t n, struct figures *f)
{
    struct qmp_open_opts o = {.timeout_s = 5, .backend = memory ? QMP_MEM_MEMSAVE : QMP_MEM_AUTO};
    struct qp_error err = {0};
    qmp_client *c = NULL;
    if (qmp_open(path, &o, &c, &err) != 0) {
        fprintf(stderr, "transport_floor: %s\n", err.msg);
        return -1;
    }
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        struct qmp_sample_stats st = {0};
        if (qmp_sample(c, qmp_read_stack, &memory, &st, &err) != 0 || st.was_paused)
            continue;
        f->paused_ns[f->n++] = st.paused_ns;
        f->round_trips += st.round_trips;
    }
    f->elapsed_s = (double)(now_ns() - t0) / 1e9;
    qmp_free(c);
    return 0;
}

/* ---- gdbstub ------------------------------------------------------------------------------ */

static int gdb_one(gdb_client *c, bool memory, uint64_t *paused, uint64_t *stop)
{
    static uint8_t buf[STACK_READ];
    struct gdb_regset sets[GDB_MAX_THREADS];
    int n = 0;
    uint64_t t0 = now_ns();
    int rc = gdb_interrupt(c, NULL, NULL);
    *stop = now_ns() - t0;
    if (rc == 0)
        rc = gdb_read_registers_all(c, sets, GDB_MAX_THREADS, &n, NULL);
    if (rc == 0 && memory && n > 0) {
        uint64_t rsp = 0;
        gdb_reg_get(c, &sets[0], "rsp", &rsp);
        struct gdb_mem_req r = {.vaddr = rsp, .len = sizeof buf, .buf = buf};
        rc = gdb_mem_read_many(c, 0, &r, 1, NULL);
    }
    for (int i = 0; i < n; i++)
        gdb_regset_clear(&sets[i]);
    int crc = gdb_continue(c, NULL);
    *paused = now_ns() - t0;
    return rc ? rc : crc;
}

static int run_gdb(const char *address, bool state, bool memory, size_t n, struct figures *f)
{
    struct gdb_open_opts o = {.timeout_s = 5, .thread_state = state};
    struct qp_error err = {0};
    gdb_client *c = NULL;
    if (gdb_open(address, &o, &c, &err) != 0) {
        fprintf(stderr, "transport_floor: %s\n", err.msg);
        return -1;
    }
    uint64_t trips0 = gdb_round_trips(c), t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        if (gdb_one(c, memory, &f->paused_ns[f->n], &f->stop_ns[f->n]) == 0)
            f->n++;
    }
    f->elapsed_s = (double)(now_ns() - t0) / 1e9;
    f->round_trips = gdb_round_trips(c) - trips0;
    gdb_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    const char *qmp_path = NULL, *gdb_address = NULL;
    size_t n = 300;
    int opt;
    while ((opt = getopt(argc, argv, "q:g:n:")) != -1) {
        if (opt == 'q')
            qmp_path = optarg;
        else if (opt == 'g')
            gdb_address = optarg;
        else if (opt == 'n')
            n = strtoul(optarg, NULL, 10);
        else
            goto usage;
    }
    if (optind >= argc || n == 0)
        goto usage;
    int rc = 0;
    for (int m = optind; m < argc && rc == 0; m++) {
        const char *mode = argv[m];
        struct figures f = {.paused_ns = calloc(n, 8), .stop_ns = NULL};
        bool gdb = strncmp(mode, "gdb", 3) == 0;
        if (gdb)
            f.stop_ns = calloc(n, 8);
        if (strcmp(mode, "qmp") == 0 || strcmp(mode, "qmp-mem") == 0)
            rc = qmp_path ? run_qmp(qmp_path, strcmp(mode, "qmp-mem") == 0, n, &f) : -1;
        else if (gdb && (strcmp(mode, "gdb") == 0 || strcmp(mode, "gdb-state") == 0 ||
                         strcmp(mode, "gdb-mem") == 0))
            rc = gdb_address ? run_gdb(gdb_address, strcmp(mode, "gdb-state") == 0,
                                       strcmp(mode, "gdb-mem") == 0, n, &f)
                             : -1;
        else
            rc = -1;
        if (rc == 0)
            print_figures(mode, &f, n);
        else
            fprintf(stderr, "transport_floor: mode %s failed (or its socket was not given)\n",
                    mode);
        free(f.paused_ns);
        free(f.stop_ns);
    }
    return rc ? 1 : 0;
usage:
    fprintf(stderr, "usage: transport_floor -q QMP_SOCKET -g GDB_ADDRESS [-n SAMPLES] "
                    "qmp|qmp-mem|gdb|gdb-state|gdb-mem...\n");
    return 2;
}
