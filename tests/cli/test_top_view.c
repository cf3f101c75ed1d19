/* qprof top's numbers (cli/top_view.c) on a hand-built profile, without QEMU or a terminal:
 * self and total shares, the kernel/user, process and vCPU filters, the time range, the vCPU
 * split, the processes and a function's caller chains. */
#define _GNU_SOURCE
#include "harness.h"
#include "output.h"
#include "top_view.h"

#include <glib.h>
#include <string.h>

#define KERNEL_BASE 0xffffffff80100000ull
#define SEC         1000000000ull

/* User functions at 0x401000 + 0x100 * i in both binaries, the kernel's at KERNEL_BASE + 0x1000 *
 * (i + 1). */
static int symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                     struct out_symbol *sym)
{
    static const char *const user[] = {"_start", "main", "compute", "hot_a", "hot_b"};
    static const char *const kernel[] = {"sys_work", "kwork_mix"};
    (void)ctx;
    uint64_t at = exact ? pc : pc - 1;
    uint64_t base = m->kernel ? KERNEL_BASE + 0x1000 : 0x401000, step = m->kernel ? 0x1000 : 0x100;
    int n = m->kernel ? 2 : 5;
    for (int i = 0; i < n; i++) {
        uint64_t start = base + step * i;
        if (at >= start && at < start + 0x100) {
            *sym = (struct out_symbol){m->kernel ? kernel[i] : user[i], pc - start, NULL, 0};
            return 0;
        }
    }
    return -1;
}

static void add(out_profile *p, uint64_t time, uint32_t cpu, uint32_t pid, const char *comm,
                uint8_t mode, const struct out_frame *frames, int n, int n_user, int times)
{
    struct out_sample s = {.time_ns = time,
                           .weight_ns = SEC / 100,
                           .cpu = cpu,
                           .pid = pid,
                           .mode = mode,
                           .user_stop = UNW_STOP_OUTERMOST,
                           .kernel_stop = UNW_STOP_OUTERMOST,
                           .n_frames = n,
                           .n_user = n_user,
                           .frames = frames};
    g_strlcpy(s.comm, comm, sizeof s.comm);
    for (int i = 0; i < times; i++)
        out_profile_add(p, &s);
}

/* At 1 s on cpu0: spin in hot_a 3 times, hot_b once; at 2 s on cpu1: sys in the kernel twice;
 * at 3 s: cpu0 idle. */
static out_profile *hand_built(void)
{
    out_profile *p = out_profile_new();
    struct out_module kernel = {.name = "kernel.elf", .base = KERNEL_BASE, .kernel = true};
    struct out_module spin = {.name = "spin", .base = 0x400000};
    struct out_module sys = {.name = "sys", .base = 0x400000};
    uint32_t mk = out_profile_add_module(p, &kernel), ms = out_profile_add_module(p, &spin),
             my = out_profile_add_module(p, &sys);
    struct out_frame hot_a[] = {{0x401005, ms, false, false},
                                {0x401105, ms, false, false},
                                {0x401205, ms, false, false},
                                {0x401310, ms, true, false}};
    struct out_frame hot_b[] = {{0x401005, ms, false, false},
                                {0x401105, ms, false, false},
                                {0x401205, ms, false, false},
                                {0x401410, ms, true, false}};
    struct out_frame in_kernel[] = {{0x401005, my, false, false},
                                    {0x401105, my, false, false},
                                    {KERNEL_BASE + 0x1010, mk, false, true},
                                    {KERNEL_BASE + 0x2010, mk, true, true}};
    add(p, 1 * SEC, 0, 1, "spin", OUT_MODE_USER, hot_a, 4, 4, 3);
    add(p, 1 * SEC, 0, 1, "spin", OUT_MODE_USER, hot_b, 4, 4, 1);
    add(p, 2 * SEC, 1, 2, "sys", OUT_MODE_KERNEL, in_kernel, 4, 2, 2);
    add(p, 3 * SEC, 0, 0, "", OUT_MODE_IDLE, NULL, 0, 0, 1);
    return p;
}

static const struct top_row *row_named(top_view *v, const char *name, const char *module)
{
    const struct top_row *rows;
    size_t n = top_view_rows(v, &rows);
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0 && strcmp(rows[i].module, module) == 0)
            return &rows[i];
    return NULL;
}

static void test_all(top_view *v)
{
    struct top_filter f = {.cpu = -1};
    top_view_update(v, &f, 0, 10 * SEC);
    CHECK_INT(top_view_in_range(v), 7);
    CHECK_INT(top_view_counted(v), 7);
    const struct top_row *rows;
    REQUIRE(top_view_rows(v, &rows) == 9); /* 5 of spin, 2 of sys, 2 of the kernel */
    CHECK_STR(rows[0].name, "hot_a");
    CHECK_INT(rows[0].self, 3);
    const struct top_row *main_spin = row_named(v, "main", "spin");
    REQUIRE(main_spin);
    CHECK_INT(main_spin->self, 0);
    CHECK_INT(main_spin->total, 4);
    const struct top_row *mix = row_named(v, "kwork_mix", "kernel.elf");
    REQUIRE(mix && mix->kernel);
    CHECK_INT(mix->self, 2);
    const struct top_proc *procs;
    REQUIRE(top_view_procs(v, &procs) == 3);
    CHECK_STR(procs[0].root, "spin (1)");
    CHECK_INT(procs[0].count, 4);
    const struct top_cpu *cpus;
    REQUIRE(top_view_cpus(v, &cpus) == 2);
    CHECK_INT(cpus[0].user, 4);
    CHECK_INT(cpus[0].idle, 1);
    CHECK_INT(cpus[1].kernel, 2);
    /* by total, the callers come first */
    f.sort = TOP_SORT_TOTAL;
    top_view_update(v, &f, 0, 10 * SEC);
    top_view_rows(v, &rows);
    CHECK_INT(rows[0].total, 4);
    CHECK_MSG(strcmp(rows[0].name, "hot_a") != 0, "sorted by self under s total");
}

static void test_filters(top_view *v)
{
    struct top_filter f = {.cpu = -1, .mode = TOP_KERNEL};
    top_view_update(v, &f, 0, 10 * SEC);
    CHECK_INT(top_view_counted(v), 3); /* the kernel's two and the idle one */
    const struct top_row *rows;
    size_t n = top_view_rows(v, &rows);
    CHECK_INT(n, 2);
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(rows[i].kernel, "%s under k", rows[i].name);
    f = (struct top_filter){.cpu = -1, .mode = TOP_USER};
    top_view_update(v, &f, 0, 10 * SEC);
    CHECK_INT(top_view_counted(v), 4);
    CHECK_MSG(!row_named(v, "main", "sys"), "a kernel-mode sample's user frames under u");
    f = (struct top_filter){.cpu = -1, .root = "sys (2)"};
    top_view_update(v, &f, 0, 10 * SEC);
    CHECK_INT(top_view_counted(v), 2);
    CHECK_MSG(!row_named(v, "hot_a", "spin"), "spin's hot_a under p sys");
    CHECK_MSG(row_named(v, "main", "sys"), "sys's main missing under p sys");
    f = (struct top_filter){.cpu = 1};
    top_view_update(v, &f, 0, 10 * SEC);
    CHECK_INT(top_view_counted(v), 2);
    CHECK_INT(top_view_in_range(v), 7); /* the vCPU bars see every vCPU */
    /* the range: from 2 s on, spin's samples are out */
    f = (struct top_filter){.cpu = -1};
    top_view_update(v, &f, 2 * SEC, 10 * SEC);
    CHECK_INT(top_view_counted(v), 3);
    CHECK_MSG(!row_named(v, "hot_a", "spin"), "hot_a out of the range still counted");
}

static void test_callers(top_view *v)
{
    struct top_filter f = {.cpu = -1};
    top_view_update(v, &f, 0, 10 * SEC);
    const struct top_caller *callers;
    REQUIRE(top_view_callers(v, 0, 10, &callers) == 1); /* row 0: hot_a */
    CHECK_STR(callers[0].chain, "hot_a <- compute <- main <- _start");
    CHECK_STR(callers[0].root, "spin (1)");
    CHECK_INT(callers[0].count, 3);
    /* kwork_mix under k: the kernel frames only */
    f.mode = TOP_KERNEL;
    top_view_update(v, &f, 0, 10 * SEC);
    const struct top_row *rows;
    top_view_rows(v, &rows);
    CHECK_STR(rows[0].name, "kwork_mix");
    REQUIRE(top_view_callers(v, 0, 10, &callers) == 1);
    CHECK_STR(callers[0].chain, "kwork_mix <- sys_work");
}

int main(void)
{
    out_profile *p = hand_built();
    out_names *names = out_names_new(p, symbolize, NULL);
    top_view *v = top_view_new(p, names);
    test_all(v);
    test_filters(v);
    test_callers(v);
    top_view_free(v);
    out_names_free(names);
    out_profile_free(p);
    return harness_result();
}
