/* The speedscope writer on hand-built profiles, read back with json-c: the exact frames (file and
 * line where the symbolizer gave them, markers and roots as frames), one sampled profile per
 * process or per vCPU, stacks root-first, samples in time order with their weights.
 *
 * With a directory argument it also writes the files it checked there (*.speedscope.json), for
 * tests/output/speedscope_schema.sh to validate against speedscope's published schema. */
#define _GNU_SOURCE
#include "harness.h"
#include "output.h"

#include <glib.h>
#include <json-c/json.h>
#include <string.h>

static const char *out_dir; /* where to leave the files, NULL: nowhere */

/* spin's functions from 0x401000 and the kernel's from 0xffffffff80101000, 0x100 bytes each;
 * the line grows by one per 16 bytes into a function, so two PCs of main differ in line. */
static int symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                     struct out_symbol *sym)
{
    uint64_t at = exact ? pc : pc - 1;
    static const struct {
        uint64_t start;
        const char *name;
        int line;
    } spin[] = {{0x401000, "_start", 10}, {0x401100, "main", 20}, {0x401200, "hot_a", 30}},
      kernel[] = {{0xffffffff80101000, "isr128", 100}, {0xffffffff80102000, "sys_work", 200}};
    const typeof(spin[0]) *t = m->kernel ? kernel : spin;
    int n = m->kernel ? 2 : 3;
    for (int i = 0; i < n; i++)
        if (at >= t[i].start && at < t[i].start + 0x100) {
            *sym =
                (struct out_symbol){t[i].name, pc - t[i].start, m->kernel ? "kernel.c" : "spin.c",
                                    t[i].line + (int)((at - t[i].start) / 0x10)};
            return 0;
        }
    return -1;
}

static char *speedscope_text(const out_profile *p, const struct out_write_opts *o,
                             const char *file_name)
{
    out_names *n = out_names_new(p, symbolize, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct qp_error err = {0};
    CHECK_INT(out_write(p, n, OUT_SPEEDSCOPE, o, f, &err), 0);
    fclose(f);
    out_names_free(n);
    if (out_dir) {
        char *path = g_build_filename(out_dir, file_name, NULL);
        CHECK(g_file_set_contents(path, buf, (gssize)len, NULL));
        g_free(path);
    }
    return buf;
}

static json_object *parse(const char *text)
{
    json_object *doc = json_tokener_parse(text);
    REQUIRE(doc != NULL);
    REQUIRE(json_object_is_type(doc, json_type_object));
    return doc;
}

static json_object *get(json_object *obj, const char *key)
{
    json_object *v = NULL;
    CHECK_MSG(json_object_object_get_ex(obj, key, &v), "no key \"%s\"", key);
    return v;
}

static const char *plain(json_object *v)
{
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
}

static int by_string(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The object's keys, sorted, comma-separated: checks that nothing else is there. */
static char *keys_of(json_object *obj)
{
    GPtrArray *keys = g_ptr_array_new();
    json_object_object_foreach(obj, key, value)
    {
        (void)value;
        g_ptr_array_add(keys, key);
    }
    g_ptr_array_sort(keys, by_string);
    g_ptr_array_add(keys, NULL);
    char *text = g_strjoinv(",", (char **)keys->pdata);
    g_ptr_array_free(keys, TRUE);
    return text;
}

struct want_frame {
    const char *name, *file;
    int line;
};

static void check_frames(json_object *doc, const struct want_frame *want, size_t n_want)
{
    json_object *frames = get(get(doc, "shared"), "frames");
    REQUIRE(json_object_is_type(frames, json_type_array));
    CHECK_INT(json_object_array_length(frames), n_want);
    for (size_t i = 0; i < n_want && i < json_object_array_length(frames); i++) {
        json_object *fr = json_object_array_get_idx(frames, i);
        CHECK_STR(json_object_get_string(get(fr, "name")), want[i].name);
        char *keys = keys_of(fr);
        CHECK_STR(keys, want[i].file ? "file,line,name" : "name");
        g_free(keys);
        if (want[i].file) {
            CHECK_STR(json_object_get_string(get(fr, "file")), want[i].file);
            CHECK_INT(json_object_get_int(get(fr, "line")), want[i].line);
        }
    }
}

struct want_profile {
    const char *name;
    uint64_t start, end;
    const char *samples, *weights; /* as compact JSON */
};

static void check_profiles(json_object *doc, const struct want_profile *want, size_t n_want)
{
    json_object *profiles = get(doc, "profiles");
    REQUIRE(json_object_is_type(profiles, json_type_array));
    CHECK_INT(json_object_array_length(profiles), n_want);
    for (size_t i = 0; i < n_want && i < json_object_array_length(profiles); i++) {
        json_object *prof = json_object_array_get_idx(profiles, i);
        char *keys = keys_of(prof);
        CHECK_STR(keys, "endValue,name,samples,startValue,type,unit,weights");
        g_free(keys);
        CHECK_STR(json_object_get_string(get(prof, "type")), "sampled");
        CHECK_STR(json_object_get_string(get(prof, "unit")), "nanoseconds");
        CHECK_STR(json_object_get_string(get(prof, "name")), want[i].name);
        CHECK_U64(json_object_get_uint64(get(prof, "startValue")), want[i].start);
        CHECK_U64(json_object_get_uint64(get(prof, "endValue")), want[i].end);
        CHECK_STR(plain(get(prof, "samples")), want[i].samples);
        CHECK_STR(plain(get(prof, "weights")), want[i].weights);
    }
}

static void check_top(json_object *doc, const char *name, int active)
{
    char *keys = keys_of(doc);
    CHECK_STR(keys, "$schema,activeProfileIndex,exporter,name,profiles,shared");
    g_free(keys);
    CHECK_STR(json_object_get_string(get(doc, "$schema")),
              "https://www.speedscope.app/file-format-schema.json");
    CHECK_STR(json_object_get_string(get(doc, "name")), name);
    CHECK_STR(json_object_get_string(get(doc, "exporter")), "qprof");
    CHECK_INT(json_object_get_int(get(doc, "activeProfileIndex")), active);
}

/* Two vCPUs, five roots: a process in a system call whose kernel part was cut short ("ev"il\x",
 * pid 2), spin (pid 1) at two PCs of main and once in code without a symbol, idle, the kernel
 * on no process's behalf, and user code of no known process whose walk failed. */
static out_profile *two_cpus(void)
{
    out_profile *p = out_profile_new();
    struct out_module kernel = {.name = "kernel.elf", .kernel = true, .base = 0xffffffff80100000};
    struct out_module spin = {.name = "spin", .base = 0x400000, .text_hash = 0x1234};
    uint32_t mk = out_profile_add_module(p, &kernel), ms = out_profile_add_module(p, &spin);
    struct out_frame a[] = {
        {0x401005, ms, false, false}, {0x401150, ms, false, false}, {0x401210, ms, true, false}};
    struct out_frame e[] = {
        {0x401005, ms, false, false}, {0x401160, ms, false, false}, {0x401210, ms, true, false}};
    struct out_frame f[] = {
        {0x401005, ms, false, false}, {0x401150, ms, false, false}, {0x402000, ms, true, false}};
    struct out_frame b[] = {{0x401005, ms, false, false},
                            {0x401150, ms, false, false},
                            {0xffffffff80101000, mk, true, true},
                            {0xffffffff80102010, mk, true, true}};
    struct out_frame d[] = {{0xffffffff80101020, mk, true, true}};
    struct out_frame g[] = {{0x7777, OUT_NO_MODULE, true, false}};
    struct out_sample spin_at = {.weight_ns = 1000,
                                 .pid = 1,
                                 .comm = "spin",
                                 .mode = OUT_MODE_USER,
                                 .n_frames = 3,
                                 .n_user = 3};
    struct out_sample s[] = {
        {.time_ns = 1000,
         .weight_ns = 1000,
         .cpu = 0,
         .pid = 2,
         .comm = "ev\"il\\x",
         .mode = OUT_MODE_KERNEL,
         .kernel_stop = UNW_STOP_MEMORY,
         .n_frames = 4,
         .n_user = 2,
         .frames = b},
        spin_at,
        {.time_ns = 2000, .weight_ns = 1000, .cpu = 0, .mode = OUT_MODE_IDLE},
        spin_at,
        {.time_ns = 3000,
         .weight_ns = 1000,
         .cpu = 0,
         .mode = OUT_MODE_KERNEL,
         .n_frames = 1,
         .frames = d},
        spin_at,
        {.time_ns = 4000,
         .weight_ns = 1000,
         .cpu = 0,
         .mode = OUT_MODE_USER,
         .user_stop = UNW_STOP_NO_CFI,
         .n_frames = 1,
         .n_user = 1,
         .frames = g},
        spin_at,
        spin_at,
    };
    static const uint64_t spin_times[] = {1000, 2000, 3000, 4000, 5000};
    struct out_frame *spin_frames[] = {a, a, e, f, a};
    int k = 0;
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        if (s[i].pid == 1) {
            s[i].time_ns = spin_times[k];
            s[i].cpu = 1;
            s[i].frames = spin_frames[k];
            if (k == 3)
                s[i].weight_ns = 1500;
            k++;
        }
        out_profile_add(p, &s[i]);
    }
    CHECK_INT(out_profile_sample_count(p), 9);
    return p;
}

static void test_per_process(void)
{
    out_profile *p = two_cpus();
    struct out_write_opts o = {.title = "two \"cpus\""};
    char *text = speedscope_text(p, &o, "per-process.speedscope.json");
    json_object *doc = parse(text);
    check_top(doc, "two \"cpus\"", 1); /* spin has the most samples */
    static const struct want_frame frames[] = {
        {"ev\"il\\x (2)", NULL, 0},  /* 0: the root is a frame */
        {"_start", "spin.c", 10},    /* 1 */
        {"main", "spin.c", 24},      /* 2: lines 24 and 25 seen: the lowest */
        {"[truncated]", NULL, 0},    /* 3: the marker, kernel and user alike */
        {"isr128", "kernel.c", 100}, /* 4: 100 and 102 seen */
        {"sys_work", "kernel.c", 201},
        {"spin (1)", NULL, 0}, /* 6 */
        {"hot_a", "spin.c", 31},
        {"spin+0x2000", NULL, 0}, /* 8: no symbol, no file */
        {"idle", NULL, 0},
        {"kernel", NULL, 0},
        {"[unknown process]", NULL, 0},
        {"0x7777", NULL, 0}, /* 12 */
    };
    check_frames(doc, frames, sizeof frames / sizeof frames[0]);
    static const struct want_profile profiles[] = {
        {"ev\"il\\x (2)", 0, 1000, "[[0,1,2,3,4,5]]", "[1000]"},
        {"spin (1)", 0, 5000, "[[6,1,2,7],[6,1,2,7],[6,1,2,7],[6,1,2,8],[6,1,2,7]]",
         "[1000,1000,1000,1500,1000]"},
        {"idle", 1000, 2000, "[[9]]", "[1000]"},
        {"kernel", 2000, 3000, "[[10,4]]", "[1000]"},
        {"[unknown process]", 3000, 4000, "[[11,3,12]]", "[1000]"},
    };
    check_profiles(doc, profiles, sizeof profiles / sizeof profiles[0]);
    json_object_put(doc);
    free(text);
    out_profile_free(p);
}

static void test_per_cpu(void)
{
    out_profile *p = two_cpus();
    struct out_write_opts o = {.per_cpu = true};
    char *text = speedscope_text(p, &o, "per-cpu.speedscope.json");
    json_object *doc = parse(text);
    check_top(doc, "qprof", 1);
    static const struct want_frame frames[] = {
        {"ev\"il\\x (2)", NULL, 0}, {"_start", "spin.c", 10},    {"main", "spin.c", 24},
        {"[truncated]", NULL, 0},   {"isr128", "kernel.c", 100}, {"sys_work", "kernel.c", 201},
        {"idle", NULL, 0},          {"kernel", NULL, 0},         {"[unknown process]", NULL, 0},
        {"0x7777", NULL, 0},        {"spin (1)", NULL, 0},       {"hot_a", "spin.c", 31},
        {"spin+0x2000", NULL, 0},
    };
    check_frames(doc, frames, sizeof frames / sizeof frames[0]);
    /* each vCPU's stacks still start at the process root: what ran there, in time order */
    static const struct want_profile profiles[] = {
        {"cpu0", 0, 4000, "[[0,1,2,3,4,5],[6],[7,4],[8,3,9]]", "[1000,1000,1000,1000]"},
        {"cpu1", 0, 5000, "[[10,1,2,11],[10,1,2,11],[10,1,2,11],[10,1,2,12],[10,1,2,11]]",
         "[1000,1000,1000,1500,1000]"},
    };
    check_profiles(doc, profiles, sizeof profiles / sizeof profiles[0]);
    json_object_put(doc);
    free(text);
    out_profile_free(p);
}

/* Records read from a file or merged may come out of time order: the writer sorts each profile
 * (stably: equal times keep their order), vCPU 10 sorts after vCPU 2, and each weight stays with
 * its sample. */
static void test_time_order(void)
{
    out_profile *p = out_profile_new();
    struct out_stack idle = {.mode = OUT_MODE_IDLE}, kernel = {.mode = OUT_MODE_KERNEL};
    uint32_t si = out_profile_intern(p, &idle), sk = out_profile_intern(p, &kernel);
    static const struct out_record r[] = {
        {300, 30, 10, 0}, {100, 10, 10, 0}, {200, 21, 2, 1}, {200, 20, 10, 1}, {100, 11, 10, 0},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        struct out_record rec = r[i];
        rec.stack = rec.stack ? sk : si;
        out_profile_add_record(p, &rec);
    }
    struct out_write_opts o = {.per_cpu = false};
    char *text = speedscope_text(p, &o, "time-order.speedscope.json");
    json_object *doc = parse(text);
    check_top(doc, "qprof", 0);
    static const struct want_frame frames[] = {{"idle", NULL, 0}, {"kernel", NULL, 0}};
    check_frames(doc, frames, 2);
    static const struct want_profile by_process[] = {
        {"idle", 90, 300, "[[0],[0],[0]]", "[10,11,30]"},
        {"kernel", 179, 200, "[[1],[1]]", "[21,20]"},
    };
    check_profiles(doc, by_process, 2);
    json_object_put(doc);
    free(text);

    o.per_cpu = true;
    text = speedscope_text(p, &o, "time-order-cpu.speedscope.json");
    doc = parse(text);
    check_top(doc, "qprof", 1);
    static const struct want_profile by_cpu[] = {
        {"cpu2", 179, 200, "[[0]]", "[21]"},
        {"cpu10", 90, 300, "[[1],[1],[0],[1]]", "[10,11,20,30]"},
    };
    static const struct want_frame cpu_frames[] = {{"kernel", NULL, 0}, {"idle", NULL, 0}};
    check_frames(doc, cpu_frames, 2);
    check_profiles(doc, by_cpu, 2);
    json_object_put(doc);
    free(text);
    out_profile_free(p);
}

/* JSON must be UTF-8 and escape what the guest or the user chose: a comm that is not UTF-8, a
 * title with quotes, a backslash and a control character. An empty profile is still a file. */
static void test_escaping_and_empty(void)
{
    out_profile *p = out_profile_new();
    struct out_write_opts o = {.title = "a \"b\" \\ c\x01/"};
    char *text = speedscope_text(p, &o, "empty.speedscope.json");
    json_object *doc = parse(text);
    check_top(doc, "a \"b\" \\ c\x01/", 0);
    check_frames(doc, NULL, 0);
    check_profiles(doc, NULL, 0);
    CHECK(strstr(text, "\\u0001") != NULL);
    json_object_put(doc);
    free(text);

    struct out_sample s = {
        .time_ns = 5, .weight_ns = 7, .pid = 3, .comm = "bad\xff</>", .mode = OUT_MODE_KERNEL};
    out_profile_add(p, &s);
    o.title = NULL;
    text = speedscope_text(p, &o, "utf8.speedscope.json");
    CHECK(g_utf8_validate(text, -1, NULL));
    doc = parse(text);
    static const struct want_frame frames[] = {{"bad\xef\xbf\xbd</> (3)", NULL, 0}};
    check_frames(doc, frames, 1);
    static const struct want_profile profiles[] = {
        {"bad\xef\xbf\xbd</> (3)", 0, 5, "[[0]]", "[7]"},
    };
    check_profiles(doc, profiles, 1);
    json_object_put(doc);
    free(text);
    out_profile_free(p);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        out_dir = argv[1];
    test_per_process();
    test_per_cpu();
    test_time_order();
    test_escaping_and_empty();
    return harness_result();
}
