/* The profile model and the folded writer on hand-built samples: interning, roots, truncation
 * markers, names once per distinct PC, per-vCPU roots, exact folded text. */
#define _GNU_SOURCE
#include "harness.h"
#include "output.h"

#include <glib.h>
#include <string.h>

static int symbolize_calls;

/* spin's functions at fixed addresses: 0x401000 _start, 0x401100 main, 0x401200 hot_a. */
static int symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                     struct out_symbol *sym)
{
    symbolize_calls++;
    uint64_t at = exact ? pc : pc - 1;
    static const struct {
        uint64_t start;
        const char *name;
    } spin[] = {{0x401000, "_start"}, {0x401100, "main"}, {0x401200, "hot_a"}},
      kernel[] = {{0xffffffff80101000, "isr128"}, {0xffffffff80102000, "sys_work"}};
    const typeof(spin[0]) *t = m->kernel ? kernel : spin;
    int n = m->kernel ? 2 : 3;
    for (int i = n - 1; i >= 0; i--)
        if (at >= t[i].start && at < t[i].start + 0x100) {
            *sym = (struct out_symbol){t[i].name, pc - t[i].start, "spin.c", 10 + i};
            return 0;
        }
    return -1;
}

static char *folded_text(const out_profile *p, bool per_cpu)
{
    out_names *n = out_names_new(p, symbolize, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct out_write_opts o = {.per_cpu = per_cpu};
    CHECK_INT(out_write(p, n, OUT_FOLDED, &o, f, NULL), 0);
    fclose(f);
    out_names_free(n);
    return buf;
}

static void test_profile_and_folded(void)
{
    out_profile *p = out_profile_new();
    struct out_module kernel = {.name = "kernel.elf", .kernel = true, .base = 0xffffffff80100000};
    struct out_module spin = {.name = "spin", .base = 0x400000, .text_hash = 0x1234};
    uint32_t mk = out_profile_add_module(p, &kernel), ms = out_profile_add_module(p, &spin);
    CHECK_INT(mk, 0);
    CHECK_INT(ms, 1);
    struct out_frame user[] = {
        {0x401005, ms, false, false}, {0x401150, ms, false, false}, {0x401210, ms, true, false}};
    struct out_sample s = {.time_ns = 1000,
                           .weight_ns = 1000,
                           .cpu = 0,
                           .pid = 1,
                           .comm = "spin",
                           .mode = OUT_MODE_USER,
                           .n_frames = 3,
                           .n_user = 3,
                           .frames = user};
    uint32_t id = out_profile_add(p, &s);
    s.time_ns = 2000;
    CHECK_INT(out_profile_add(p, &s), id); /* interned */
    /* a system call: user frames, then the kernel part cut short, on vCPU 1 */
    struct out_frame sys[] = {{0x401005, ms, false, false},
                              {0x401150, ms, false, false},
                              {0xffffffff80101000, mk, true, true},
                              {0xffffffff80102010, mk, true, true}};
    struct out_sample k = {.time_ns = 2000,
                           .weight_ns = 1000,
                           .cpu = 1,
                           .pid = 2,
                           .comm = "evil;name\n",
                           .mode = OUT_MODE_KERNEL,
                           .n_frames = 4,
                           .n_user = 2,
                           .kernel_stop = UNW_STOP_MEMORY,
                           .frames = sys};
    out_profile_add(p, &k);
    struct out_sample idle = {.time_ns = 3000, .weight_ns = 1000, .cpu = 0, .mode = OUT_MODE_IDLE};
    out_profile_add(p, &idle);
    struct out_frame unknown[] = {{0x7777, OUT_NO_MODULE, true, false}};
    struct out_sample anon = {.time_ns = 3000,
                              .weight_ns = 1000,
                              .cpu = 1,
                              .mode = OUT_MODE_USER,
                              .n_frames = 1,
                              .n_user = 1,
                              .user_stop = UNW_STOP_NO_CFI,
                              .frames = unknown};
    out_profile_add(p, &anon);
    CHECK_INT(out_profile_sample_count(p), 5);
    CHECK_INT(out_profile_stack_count(p), 4);

    symbolize_calls = 0;
    char *text = folded_text(p, false);
    CHECK_STR(text, "[unknown process];[truncated];0x7777 1\n"
                    "evil_name_ (2);_start;main;[truncated];isr128;sys_work 1\n"
                    "idle 1\n"
                    "spin (1);_start;main;hot_a 2\n");
    /* distinct (module, pc, exact): 0x401005, 0x401150, 0x401210, two kernel PCs */
    CHECK_INT(symbolize_calls, 5);
    free(text);
    text = folded_text(p, true);
    CHECK(strstr(text, "cpu0;spin (1);_start;main;hot_a 2\n") != NULL);
    CHECK(strstr(text, "cpu1;[unknown process];[truncated];0x7777 1\n") != NULL);
    free(text);

    uint64_t counts[4], weights[4];
    out_profile_stack_totals(p, counts, weights);
    CHECK_U64(counts[id], 2);
    CHECK_U64(weights[id], 2000);
    out_profile_free(p);
}

static void test_formats_by_name(void)
{
    CHECK_INT(out_format_from_path("x.folded"), OUT_FOLDED);
    CHECK_INT(out_format_from_path("a/b.speedscope.json"), OUT_SPEEDSCOPE);
    CHECK_INT(out_format_from_path("p.pb.gz"), OUT_PPROF);
    CHECK_INT(out_format_from_path("f.svg"), OUT_SVG);
    CHECK_INT(out_format_from_path("qprof.data"), OUT_RECORD);
    CHECK_INT(out_format_from_path("x.json"), -1);
    CHECK_INT(out_format_from_name("pprof"), OUT_PPROF);
    CHECK_INT(out_format_from_name("nope"), -1);
}

/* --exact's flat profile: blocks summed per (module, pc), then per function; leaf-only lines
 * rooted at the binary, sorted by text; the summary's order by instructions. */
static void test_exact_flat_profile(void)
{
    out_profile *p = out_profile_new();
    struct out_module kernel = {.name = "kernel.elf", .kernel = true};
    struct out_module spin = {.name = "spin", .base = 0x400000};
    uint32_t mk = out_profile_add_module(p, &kernel), ms = out_profile_add_module(p, &spin);
    out_profile_add_exact(p, ms, 0x401200, 3000); /* hot_a, two blocks */
    out_profile_add_exact(p, ms, 0x401210, 600);
    out_profile_add_exact(p, ms, 0x401200, 400);          /* the first block again: summed */
    out_profile_add_exact(p, ms, 0x401100, 7);            /* main */
    out_profile_add_exact(p, mk, 0xffffffff80102010, 50); /* sys_work */
    out_profile_add_exact(p, OUT_NO_MODULE, 0x500000, 9);
    CHECK_U64(out_profile_exact_count(p), 5);
    out_names *n = out_names_new(p, symbolize, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_INT(out_write_exact_folded(p, n, f, NULL), 0);
    fclose(f);
    CHECK_STR(buf, "[unknown user code];0x500000 9\n"
                   "kernel;sys_work 50\n"
                   "spin;hot_a 4000\n"
                   "spin;main 7\n");
    size_t n_lines = 0;
    struct out_exact_line *lines = out_exact_lines(p, n, &n_lines);
    CHECK_U64(n_lines, 4);
    CHECK_STR(lines[0].leaf->name, "hot_a");
    CHECK_STR(lines[3].leaf->name, "main");
    g_free(lines);
    free(buf);
    out_names_free(n);
    out_profile_free(p);
    char *path = out_exact_path("out/stack.folded");
    CHECK_STR(path, "out/stack.exact.folded");
    g_free(path);
    path = out_exact_path("a.b/stack");
    CHECK_STR(path, "a.b/stack.exact");
    g_free(path);
    path = out_exact_path(".hidden");
    CHECK_STR(path, ".hidden.exact");
    g_free(path);
}

int main(void)
{
    test_profile_and_folded();
    test_exact_flat_profile();
    test_formats_by_name();
    return harness_result();
}
