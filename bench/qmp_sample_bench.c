/* qmp_sample_bench: guest-paused time of one qprof sample through each memory backend.
 *
 * A sample = stop + `info registers -a` (all vCPUs) + a 4 KiB stack window at RSP + the 944-byte
 * struct qprof_abi + cont, the reads in one qmp_mem_read_many call. Compared with a bare
 * stop + info registers + cont. Paused time comes from QEMU's STOP/RESUME timestamps.
 *
 * Usage: qmp_sample_bench [-n SAMPLES] [-q QMP_SOCKET] [-a ABI_VA]
 *   Without -q it boots the demo guest (build/guest/kernel.elf) with shared RAM. */
#define _GNU_SOURCE
#include "qmp.h"
#include "qprof/guest_abi.h"
#include "vm.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bench_opts {
    int samples;
    const char *qmp_path;
    uint64_t abi_va;
};

struct read_ctx {
    uint8_t stack[4096];
    uint8_t abi[sizeof(struct qprof_abi)];
    size_t bytes;
};

static int read_sample(qmp_client *c, const struct qmp_regs *cpus, int n_cpus, void *ctx,
                       struct qp_error *err)
{
    struct read_ctx *r = ctx;
    const uint64_t *abi_va = (const uint64_t *)(r + 1);
    struct qmp_mem_req reqs[] = {
        {.vaddr = cpus[0].rsp, .len = sizeof r->stack, .buf = r->stack},
        {.vaddr = *abi_va, .len = sizeof r->abi, .buf = r->abi},
    };
    int rc = qmp_mem_read_many(c, &cpus[0], reqs, 2, err);
    r->bytes += reqs[0].got + reqs[1].got;
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs n samples (after 10 warm-up ones) and prints one table row. */
static int bench_row(qmp_client *c, const char *label, qmp_sample_fn fn, void *ctx, int n)
{
    uint64_t *paused = calloc(n, sizeof *paused);
    unsigned trips = 0;
    struct qp_error err = {0};
    struct qmp_sample_stats st;
    for (int i = 0; i < 10; i++)
        if (qmp_sample(c, fn, ctx, &st, &err) < 0)
            goto fail;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        if (qmp_sample(c, fn, ctx, &st, &err) < 0)
            goto fail;
        paused[i] = st.paused_ns;
        trips += st.round_trips;
    }
    double elapsed = now_s() - t0;
    qsort(paused, n, sizeof *paused, cmp_u64);
    printf("| %s | %.0f | %.0f | %.1f | %.0f |\n", label, paused[n / 2] / 1e3,
           paused[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1] / 1e3, (double)trips / n,
           n / elapsed);
    free(paused);
    return 0;
fail:
    fprintf(stderr, "%s: %s\n", label, err.msg);
    free(paused);
    return -1;
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
    int opt;
    while ((opt = getopt(argc, argv, "n:q:a:h")) != -1) {
        switch (opt) {
        case 'n':
            o->samples = atoi(optarg);
            if (o->samples < 1) {
                fprintf(stderr, "-n: need a positive number of samples\n");
                return -1;
            }
            break;
        case 'q':
            o->qmp_path = optarg;
            break;
        case 'a':
            o->abi_va = strtoull(optarg, NULL, 0);
            break;
        default:
            fprintf(stderr, "usage: %s [-n SAMPLES] [-q QMP_SOCKET] [-a ABI_VA]\n", argv[0]);
            return -1;
        }
    }
    return 0;
}

static int run(qmp_client *c, const struct bench_opts *o)
{
    struct {
        struct read_ctx r;
        uint64_t abi_va;
    } *ctx = calloc(1, sizeof *ctx);
    ctx->abi_va = o->abi_va;
    static const enum qmp_mem_backend backends[] = {QMP_MEM_DIRECT, QMP_MEM_MEMSAVE, QMP_MEM_HMP};
    printf("QEMU %s, %d samples per row\n\n", qmp_qemu_version(c), o->samples);
    printf("| sample | paused median (us) | paused p99 (us) | round trips | samples/s |\n");
    printf("|---|---|---|---|---|\n");
    int rc = bench_row(c, "bare: stop + info registers -a + cont", NULL, NULL, o->samples);
    for (size_t b = 0; rc == 0 && b < sizeof backends / sizeof backends[0]; b++) {
        struct qp_error err = {0};
        if (qmp_mem_set_backend(c, backends[b], &err) < 0) {
            printf("| %s | unavailable: %s | | | |\n", qmp_mem_backend_name(backends[b]), err.msg);
            continue;
        }
        char label[96];
        snprintf(label, sizeof label, "%s: regs + 4 KiB stack + %zu B qprof_abi",
                 qmp_mem_backend_name(backends[b]), sizeof(struct qprof_abi));
        rc = bench_row(c, label, read_sample, ctx, o->samples);
    }
    free(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    struct bench_opts o = {.samples = 500, .abi_va = 0xffffffff8010d000ull};
    if (parse_args(argc, argv, &o) < 0)
        return 2;
    test_vm *vm = NULL;
    const char *path = o.qmp_path;
    if (!path) {
        struct vm_opts vo = {.shared_ram = true};
        int rc = vm_start(&vo, &vm);
        if (rc != 0 || vm_wait_serial(vm, "ready", 120) < 0) {
            fprintf(stderr, "could not boot the demo guest\n");
            vm_stop(vm);
            return 1;
        }
        path = vm_qmp_path(vm);
    }
    qmp_client *c = NULL;
    struct qp_error err = {0};
    int rc = qmp_open(path, NULL, &c, &err);
    if (rc < 0)
        fprintf(stderr, "%s\n", err.msg);
    else
        rc = run(c, &o);
    qmp_free(c);
    vm_stop(vm);
    return rc < 0 ? 1 : 0;
}
