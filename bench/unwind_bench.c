/* unwind_bench: time unw_unwind (and unwind + symbolize) on a captured 16-frame stack.
 *
 * Captures a fixture stopped at the bottom of its call chain (ptrace, as the tests do), then
 * walks the same registers and stack snapshot many times through one long-lived unw_space, the
 * way the profiler walks each sample. Usage: unwind_bench [FIXTURE [ITERATIONS]] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture.h"
#include "symbols.h"
#include "arch.h"
#include "unwind.h"

#define DEPTH 16

#ifndef UNW_BENCH_FIXTURE
#define UNW_BENCH_FIXTURE "tests/unwind/unw_fixture_nofp"
#endif

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

struct bench {
    unw_space *space;
    sym_table *syms;
    const struct capture *c;
    struct unw_memory mem;
    struct unw_frame frames[DEPTH];
    struct unw_result res;
};

static int unwind_once(struct bench *b)
{
    b->res = (struct unw_result){.frames = b->frames};
    return unw_unwind(b->space, &b->c->regs, &b->mem, DEPTH, &b->res, NULL);
}

static size_t symbolize(struct bench *b)
{
    size_t named = 0;
    for (int i = 0; i < b->res.n_frames; i++) {
        const struct unw_frame *f = &b->frames[i];
        struct sym_info info;
        named += sym_lookup(b->syms, f->activation ? f->pc : f->pc - 1, &info) == 0;
    }
    return named;
}

/* Returns ns per iteration. */
static double run(struct bench *b, long iterations, bool with_symbols, size_t *named)
{
    double t0 = now_ns();
    for (long i = 0; i < iterations; i++) {
        if (unwind_once(b) != 0)
            return -1;
        if (with_symbols)
            *named += symbolize(b);
    }
    return (now_ns() - t0) / (double)iterations;
}

static int setup(struct bench *b, const char *fixture, struct capture *c)
{
    struct qp_error err = {0};
    int rc = capture_fixture(fixture, "chain", 0, c);
    if (rc < 0) {
        fprintf(stderr, "capturing %s failed (%s)%s\n", fixture, strerror(-rc),
                rc == -EPERM ? ": ptrace not permitted" : "");
        return rc;
    }
    b->c = c;
    b->mem = (struct unw_memory){
        .snapshot_addr = c->stack_addr, .snapshot = c->stack, .snapshot_len = c->stack_len};
    rc = unw_space_new(prof_arch_x86_64.unwind, "user", 0x1000, 0x800000000000ull, &b->space, &err);
    if (rc == 0)
        rc = unw_space_add_elf(b->space, fixture, 0, &err);
    if (rc == 0)
        rc = sym_table_open_elf(fixture, &b->syms, &err);
    if (rc < 0)
        fprintf(stderr, "%s\n", err.msg);
    return rc;
}

int main(int argc, char **argv)
{
    const char *fixture = argc > 1 ? argv[1] : UNW_BENCH_FIXTURE;
    long iterations = argc > 2 ? strtol(argv[2], NULL, 10) : 200000;
    struct bench b = {0};
    struct capture c;
    int rc = setup(&b, fixture, &c);
    if (rc == 0 && (unwind_once(&b) != 0 || b.res.n_frames != DEPTH)) {
        fprintf(stderr, "expected %d frames, got %d (%s)\n", DEPTH, b.res.n_frames,
                unw_stop_str(b.res.stop));
        rc = -EIO;
    }
    if (rc == 0) {
        size_t named = 0;
        run(&b, iterations / 10 + 1, true, &named); /* warm caches */
        double unwind_ns = run(&b, iterations, false, &named);
        named = 0;
        double both_ns = run(&b, iterations, true, &named);
        printf("unwind_bench: %s, %d frames, %ld iterations\n", fixture, DEPTH, iterations);
        printf("  unwind only:           %8.2f us/stack\n", unwind_ns / 1000);
        printf("  unwind + symbolize:    %8.2f us/stack (%.1f of %d frames named)\n",
               both_ns / 1000, (double)named / (double)iterations, DEPTH);
        printf("  target:                   20.00 us/stack\n");
    }
    sym_table_free(b.syms);
    unw_space_free(b.space);
    capture_release(&c);
    return rc == 0 ? 0 : 1;
}
