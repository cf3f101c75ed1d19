/* The pprof writer on a hand-built profile, decoded back: gzip on disk, string_table[0] "", the
 * sample and period types, samples aggregated per (stack, vCPU) with leaf-first locations and
 * the root last, labels, one location per (module, pc), mappings with build ids and what their
 * symbols resolved, and the same stacks and counts as the folded output.
 *
 * `test_out_pprof --write FILE` only writes that profile (for the `go tool pprof` check). */
#define _GNU_SOURCE
#include "harness.h"
#include "output.h"

#include "profile.pb-c.h"

#include <glib.h>
#include <string.h>
#include <zlib.h>

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Function pb_function;
typedef Perftools__Profiles__Mapping pb_mapping;

#define KERNEL_BASE 0xffffffff80100000ull

/* spin's functions at 0x401000 + 0x100 * i, the kernel's at KERNEL_BASE + 0x1000 * (i + 1); the
 * third module ("blob") has no symbols. */
static int symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                     struct out_symbol *sym)
{
    static const char *const spin[] = {"_start", "main", "hot_a", "cold_b"};
    static const char *const kernel[] = {"isr128", "sys_work"};
    uint64_t at = exact ? pc : pc - 1;
    if (m->kernel) {
        for (int i = 0; i < 2; i++) {
            uint64_t start = KERNEL_BASE + 0x1000 * (i + 1);
            if (at >= start && at < start + 0x100) {
                *sym = (struct out_symbol){kernel[i], pc - start, "kernel.c", 100 + i};
                return 0;
            }
        }
        return -1;
    }
    if (strcmp(m->name, "spin") != 0)
        return -1;
    for (int i = 0; i < 4; i++) {
        uint64_t start = 0x401000 + 0x100 * i;
        if (at >= start && at < start + 0x100) {
            *sym = (struct out_symbol){spin[i], pc - start, "spin.c", 10 + i};
            return 0;
        }
    }
    return -1;
}

static void add(out_profile *p, uint64_t time, uint64_t weight, uint32_t cpu, uint32_t pid,
                const char *comm, uint8_t mode, const struct out_frame *frames, int n, int n_user,
                uint8_t user_stop, uint8_t kernel_stop)
{
    struct out_sample s = {.time_ns = time,
                           .weight_ns = weight,
                           .cpu = cpu,
                           .pid = pid,
                           .mode = mode,
                           .user_stop = user_stop,
                           .kernel_stop = kernel_stop,
                           .n_frames = n,
                           .n_user = n_user,
                           .frames = frames};
    g_strlcpy(s.comm, comm, sizeof s.comm);
    out_profile_add(p, &s);
}

/* hot_a is the hottest function by flat time (4000 ns of 11000), cold_b next (2000 ns). */
static out_profile *hand_built(void)
{
    out_profile *p = out_profile_new();
    struct out_module kernel = {
        .name = "kernel.elf", .text_hash = 0xabcdef0123456789, .base = KERNEL_BASE, .kernel = true};
    struct out_module spin = {
        .name = "spin", .path = "/guest/spin", .text_hash = 0x1234, .base = 0x400000};
    struct out_module blob = {.name = "blob", .base = 0x700000};
    uint32_t mk = out_profile_add_module(p, &kernel), ms = out_profile_add_module(p, &spin),
             mb = out_profile_add_module(p, &blob);
    struct out_frame hot[] = {
        {0x401005, ms, false, false}, {0x401150, ms, false, false}, {0x401210, ms, true, false}};
    struct out_frame cold[] = {
        {0x401005, ms, false, false}, {0x401150, ms, false, false}, {0x401310, ms, true, false}};
    struct out_frame sys[] = {{0x401005, ms, false, false},
                              {0x401150, ms, false, false},
                              {KERNEL_BASE + 0x1000, mk, true, true},
                              {KERNEL_BASE + 0x2010, mk, true, true}};
    struct out_frame unsym[] = {{0x401005, ms, false, false}, {0x405000, ms, true, false}};
    struct out_frame unknown[] = {{0x7777, OUT_NO_MODULE, true, false}};
    struct out_frame in_blob[] = {{0x700010, mb, true, false}};
    const uint8_t U = OUT_MODE_USER, OK = UNW_STOP_OUTERMOST;
    add(p, 1000, 1000, 0, 1, "spin", U, hot, 3, 3, OK, OK);
    add(p, 1000, 2000, 1, 1, "spin", U, cold, 3, 3, OK, OK);
    add(p, 2000, 1000, 0, 1, "spin", U, hot, 3, 3, OK, OK);
    add(p, 2000, 1000, 1, 2, "sys", OUT_MODE_KERNEL, sys, 4, 2, OK, UNW_STOP_MEMORY);
    add(p, 3000, 1000, 0, 1, "spin", U, hot, 3, 3, OK, OK);
    add(p, 3000, 1000, 1, 1, "spin", U, hot, 3, 3, OK, OK);
    add(p, 4000, 1000, 0, 0, "", OUT_MODE_IDLE, NULL, 0, 0, OK, OK);
    add(p, 4000, 1000, 1, 0, "", U, unknown, 1, 1, UNW_STOP_NO_CFI, OK);
    add(p, 5000, 1000, 0, 1, "spin", U, unsym, 2, 2, OK, OK);
    add(p, 5000, 1000, 1, 3, "blob", U, in_blob, 1, 1, OK, OK);
    return p;
}

static int write_pprof(const out_profile *p, const char *path)
{
    out_names *n = out_names_new(p, symbolize, NULL);
    struct out_write_opts o = {.interval_ns = 1000000, .title = "hand-built"};
    struct qp_error err = {0};
    int rc = out_write_file(p, n, OUT_PPROF, &o, path, &err);
    if (rc)
        fprintf(stderr, "writing %s: %s\n", path, err.msg);
    out_names_free(n);
    return rc;
}

/* gunzip: pprof files must be gzip on disk, so read them only through gzip. */
static GByteArray *gunzip_file(const char *path)
{
    FILE *raw = fopen(path, "rb");
    REQUIRE(raw != NULL);
    unsigned char magic[2] = {0};
    CHECK_INT(fread(magic, 1, 2, raw), 2);
    fclose(raw);
    CHECK(magic[0] == 0x1f && magic[1] == 0x8b);
    gzFile gz = gzopen(path, "rb");
    REQUIRE(gz != NULL);
    GByteArray *out = g_byte_array_new();
    unsigned char buf[4096];
    int got;
    while ((got = gzread(gz, buf, sizeof buf)) > 0)
        g_byte_array_append(out, buf, (guint)got);
    CHECK_INT(got, 0);
    gzclose(gz);
    return out;
}

static const char *str(const pb_profile *pb, int64_t index)
{
    return index >= 0 && (size_t)index < pb->n_string_table ? pb->string_table[index] : "(bad)";
}

static const pb_location *location(const pb_profile *pb, uint64_t id)
{
    for (size_t i = 0; i < pb->n_location; i++)
        if (pb->location[i]->id == id)
            return pb->location[i];
    return NULL;
}

static const pb_function *function(const pb_profile *pb, uint64_t id)
{
    for (size_t i = 0; i < pb->n_function; i++)
        if (pb->function[i]->id == id)
            return pb->function[i];
    return NULL;
}

static const pb_function *location_function(const pb_profile *pb, const pb_location *l)
{
    REQUIRE(l != NULL && l->n_line == 1);
    const pb_function *f = function(pb, l->line[0]->function_id);
    REQUIRE(f != NULL);
    return f;
}

/* The location whose function is name (NULL when none, or when several are). */
static const pb_location *location_named(const pb_profile *pb, const char *name)
{
    const pb_location *found = NULL;
    for (size_t i = 0; i < pb->n_location; i++)
        if (strcmp(str(pb, location_function(pb, pb->location[i])->name), name) == 0) {
            if (found)
                return NULL;
            found = pb->location[i];
        }
    return found;
}

/* "leaf;...;root" */
static char *sample_names(const pb_profile *pb, const pb_sample *s)
{
    GString *out = g_string_new(NULL);
    for (size_t i = 0; i < s->n_location_id; i++) {
        const pb_location *l = location(pb, s->location_id[i]);
        g_string_append_printf(out, "%s%s", i ? ";" : "",
                               l ? str(pb, location_function(pb, l)->name) : "(no location)");
    }
    return g_string_free(out, FALSE);
}

/* "pid=1 comm=spin cpu=0[index]": the labels in order, a number's unit in brackets. */
static char *sample_labels(const pb_profile *pb, const pb_sample *s)
{
    GString *out = g_string_new(NULL);
    for (size_t i = 0; i < s->n_label; i++) {
        const Perftools__Profiles__Label *l = s->label[i];
        if (l->str)
            g_string_append_printf(out, "%s%s=%s", i ? " " : "", str(pb, l->key), str(pb, l->str));
        else
            g_string_append_printf(out, "%s%s=%" PRId64, i ? " " : "", str(pb, l->key), l->num);
        if (l->num_unit)
            g_string_append_printf(out, "[%s]", str(pb, l->num_unit));
    }
    return g_string_free(out, FALSE);
}

static void check_samples(const pb_profile *pb)
{
    static const struct {
        const char *names, *labels;
        int64_t count, ns;
    } expected[] = {
        {"hot_a;main;_start;spin (1)", "pid=1 comm=spin cpu=0[index]", 3, 3000},
        {"cold_b;main;_start;spin (1)", "pid=1 comm=spin cpu=1[index]", 1, 2000},
        {"sys_work;isr128;[truncated];main;_start;sys (2)", "pid=2 comm=sys cpu=1[index]", 1, 1000},
        {"hot_a;main;_start;spin (1)", "pid=1 comm=spin cpu=1[index]", 1, 1000},
        {"idle", "cpu=0[index]", 1, 1000},
        {"0x7777;[truncated];[unknown process]", "cpu=1[index]", 1, 1000},
        {"spin+0x5000;_start;spin (1)", "pid=1 comm=spin cpu=0[index]", 1, 1000},
        {"blob+0x10;blob (3)", "pid=3 comm=blob cpu=1[index]", 1, 1000},
    };
    size_t n = sizeof expected / sizeof expected[0];
    REQUIRE(pb->n_sample == n);
    for (size_t i = 0; i < n; i++) {
        const pb_sample *s = pb->sample[i];
        char *names = sample_names(pb, s), *labels = sample_labels(pb, s);
        CHECK_STR(names, expected[i].names);
        CHECK_STR(labels, expected[i].labels);
        REQUIRE(s->n_value == 2);
        CHECK_INT(s->value[0], expected[i].count);
        CHECK_INT(s->value[1], expected[i].ns);
        g_free(names);
        g_free(labels);
    }
}

static void check_locations(const pb_profile *pb)
{
    /* 9 code locations (one per module and pc), one "[truncated]", five roots */
    CHECK_INT(pb->n_location, 15);
    CHECK_INT(pb->n_function, 15);
    const pb_location *l = location_named(pb, "hot_a");
    REQUIRE(l != NULL);
    CHECK_INT(l->mapping_id, 2);
    CHECK_U64(l->address, 0x401210);
    CHECK_INT(l->line[0]->line, 12);
    CHECK_STR(str(pb, location_function(pb, l)->filename), "spin.c");
    l = location_named(pb, "sys_work");
    REQUIRE(l != NULL);
    CHECK_INT(l->mapping_id, 1);
    CHECK_U64(l->address, KERNEL_BASE + 0x2010);
    CHECK_INT(l->line[0]->line, 101);
    l = location_named(pb, "spin+0x5000");
    REQUIRE(l != NULL);
    CHECK_INT(l->mapping_id, 2);
    CHECK_U64(l->address, 0x405000);
    CHECK_INT(l->line[0]->line, 0);
    CHECK_INT(location_function(pb, l)->filename, 0);
    l = location_named(pb, "0x7777");
    REQUIRE(l != NULL);
    CHECK_INT(l->mapping_id, 0);
    CHECK_U64(l->address, 0x7777);
    static const char *const not_code[] = {"[truncated]", "spin (1)",          "sys (2)",
                                           "idle",        "[unknown process]", "blob (3)"};
    for (size_t i = 0; i < sizeof not_code / sizeof not_code[0]; i++) {
        l = location_named(pb, not_code[i]);
        CHECK_MSG(l != NULL && l->mapping_id == 0 && l->address == 0,
                  "%s: one location, no mapping, no address", not_code[i]);
    }
}

static void check_mappings(const pb_profile *pb)
{
    REQUIRE(pb->n_mapping == 3);
    const pb_mapping *m = pb->mapping[0];
    CHECK_INT(m->id, 1);
    CHECK_STR(str(pb, m->filename), "kernel.elf");
    CHECK_STR(str(pb, m->build_id), "abcdef0123456789");
    CHECK_U64(m->memory_start, KERNEL_BASE);
    CHECK_U64(m->memory_limit, KERNEL_BASE + 0x2011);
    CHECK(m->has_functions && m->has_filenames && m->has_line_numbers);
    m = pb->mapping[1];
    CHECK_INT(m->id, 2);
    CHECK_STR(str(pb, m->filename), "/guest/spin");
    CHECK_STR(str(pb, m->build_id), "0000000000001234");
    CHECK_U64(m->memory_start, 0x400000);
    CHECK_U64(m->memory_limit, 0x405001);
    CHECK(m->has_functions);
    m = pb->mapping[2];
    CHECK_INT(m->id, 3);
    CHECK_STR(str(pb, m->filename), "blob");
    CHECK_INT(m->build_id, 0); /* no .text hash known */
    CHECK(!m->has_functions && !m->has_filenames && !m->has_line_numbers);
}

static void check_header(const pb_profile *pb)
{
    REQUIRE(pb->n_string_table > 0);
    CHECK_STR(pb->string_table[0], "");
    REQUIRE(pb->n_sample_type == 2);
    CHECK_STR(str(pb, pb->sample_type[0]->type), "samples");
    CHECK_STR(str(pb, pb->sample_type[0]->unit), "count");
    CHECK_STR(str(pb, pb->sample_type[1]->type), "cpu");
    CHECK_STR(str(pb, pb->sample_type[1]->unit), "nanoseconds");
    REQUIRE(pb->period_type != NULL);
    CHECK_STR(str(pb, pb->period_type->type), "cpu");
    CHECK_STR(str(pb, pb->period_type->unit), "nanoseconds");
    CHECK_INT(pb->period, 1000000);
    CHECK_INT(pb->duration_nanos, 5000); /* the first sample's interval starts at 0 */
    CHECK_INT(pb->time_nanos, 0);
    REQUIRE(pb->n_comment == 1);
    CHECK_STR(str(pb, pb->comment[0]), "hand-built");
}

/* The folded text the pprof samples make (root first, counts summed over vCPUs), sorted. */
static char *folded_from_pprof(const pb_profile *pb)
{
    GHashTable *counts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (size_t i = 0; i < pb->n_sample; i++) {
        const pb_sample *s = pb->sample[i];
        GString *line = g_string_new(NULL);
        for (size_t k = s->n_location_id; k-- > 0;) {
            const pb_location *l = location(pb, s->location_id[k]);
            g_string_append_printf(line, "%s%s", line->len ? ";" : "",
                                   str(pb, location_function(pb, l)->name));
        }
        gpointer old = g_hash_table_lookup(counts, line->str);
        g_hash_table_insert(counts, g_string_free(line, FALSE),
                            GSIZE_TO_POINTER(GPOINTER_TO_SIZE(old) + (gsize)s->value[0]));
    }
    GList *keys = g_list_sort(g_hash_table_get_keys(counts), (GCompareFunc)strcmp);
    GString *out = g_string_new(NULL);
    for (GList *k = keys; k; k = k->next)
        g_string_append_printf(out, "%s %zu\n", (char *)k->data,
                               GPOINTER_TO_SIZE(g_hash_table_lookup(counts, k->data)));
    g_list_free(keys);
    g_hash_table_destroy(counts);
    return g_string_free(out, FALSE);
}

static char *folded_text(const out_profile *p)
{
    out_names *n = out_names_new(p, symbolize, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_INT(out_write(p, n, OUT_FOLDED, NULL, f, NULL), 0);
    fclose(f);
    out_names_free(n);
    return buf;
}

static void test_pprof_contents(void)
{
    out_profile *p = hand_built();
    char dir[] = "/tmp/test_out_pprof.XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char *path = g_build_filename(dir, "p.pb.gz", NULL);
    REQUIRE(write_pprof(p, path) == 0);
    GByteArray *raw = gunzip_file(path);
    pb_profile *pb = perftools__profiles__profile__unpack(NULL, raw->len, raw->data);
    REQUIRE(pb != NULL);
    check_header(pb);
    check_samples(pb);
    check_locations(pb);
    check_mappings(pb);
    char *from_pprof = folded_from_pprof(pb), *folded = folded_text(p);
    CHECK_STR(from_pprof, folded);
    g_free(from_pprof);
    free(folded);
    perftools__profiles__profile__free_unpacked(pb, NULL);
    g_byte_array_free(raw, TRUE);
    unlink(path);
    rmdir(dir);
    g_free(path);
    out_profile_free(p);
}

/* No samples: still a valid profile with its types, and "" first. */
static void test_pprof_empty(void)
{
    out_profile *p = out_profile_new();
    char dir[] = "/tmp/test_out_pprof.XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char *path = g_build_filename(dir, "empty.pb.gz", NULL);
    REQUIRE(write_pprof(p, path) == 0);
    GByteArray *raw = gunzip_file(path);
    pb_profile *pb = perftools__profiles__profile__unpack(NULL, raw->len, raw->data);
    REQUIRE(pb != NULL);
    CHECK_INT(pb->n_sample, 0);
    CHECK_INT(pb->n_sample_type, 2);
    CHECK_INT(pb->duration_nanos, 0);
    REQUIRE(pb->n_string_table > 0);
    CHECK_STR(pb->string_table[0], "");
    perftools__profiles__profile__free_unpacked(pb, NULL);
    g_byte_array_free(raw, TRUE);
    unlink(path);
    rmdir(dir);
    g_free(path);
    out_profile_free(p);
}

/* --exact's counts: a third sample type, instructions; one leaf-only sample per counted block
 * under its binary's root, 0 samples and 0 ns; the sampled stacks 0 instructions; cpu stays the
 * default view. */
static void test_pprof_exact(void)
{
    out_profile *p = hand_built();
    out_profile_add_exact(p, 1, 0x401210, 3000);           /* spin's hot_a */
    out_profile_add_exact(p, 0, KERNEL_BASE + 0x2010, 70); /* sys_work */
    char dir[] = "/tmp/test_out_pprof.XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char *path = g_build_filename(dir, "exact.pb.gz", NULL);
    REQUIRE(write_pprof(p, path) == 0);
    GByteArray *raw = gunzip_file(path);
    pb_profile *pb = perftools__profiles__profile__unpack(NULL, raw->len, raw->data);
    REQUIRE(pb != NULL);
    REQUIRE(pb->n_sample_type == 3);
    CHECK_STR(str(pb, pb->sample_type[2]->type), "instructions");
    CHECK_STR(str(pb, pb->sample_type[2]->unit), "count");
    CHECK_STR(str(pb, pb->default_sample_type), "cpu");
    REQUIRE(pb->n_sample == 10);
    for (size_t i = 0; i < 8; i++) {
        REQUIRE(pb->sample[i]->n_value == 3);
        CHECK_INT(pb->sample[i]->value[2], 0);
    }
    static const struct {
        const char *names, *labels;
        int64_t insns;
    } expected[] = {{"hot_a;spin", "binary=spin", 3000}, {"sys_work;kernel", "binary=kernel", 70}};
    for (size_t i = 0; i < 2; i++) {
        const pb_sample *s = pb->sample[8 + i];
        char *names = sample_names(pb, s), *labels = sample_labels(pb, s);
        CHECK_STR(names, expected[i].names);
        CHECK_STR(labels, expected[i].labels);
        REQUIRE(s->n_value == 3);
        CHECK_INT(s->value[0], 0);
        CHECK_INT(s->value[1], 0);
        CHECK_INT(s->value[2], expected[i].insns);
        g_free(names);
        g_free(labels);
    }
    perftools__profiles__profile__free_unpacked(pb, NULL);
    g_byte_array_free(raw, TRUE);
    unlink(path);
    rmdir(dir);
    g_free(path);
    out_profile_free(p);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write") == 0) {
        out_profile *p = hand_built();
        int rc = write_pprof(p, argv[2]);
        out_profile_free(p);
        return rc ? 1 : 0;
    }
    test_pprof_contents();
    test_pprof_empty();
    test_pprof_exact();
    return harness_result();
}
