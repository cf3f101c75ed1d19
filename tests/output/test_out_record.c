/* The record file: a hand-built profile written in several syncs reads back identical (modules,
 * stacks, samples, meta, folded text); a file cut at any byte loads a prefix, and cut inside
 * the last chunk loads exactly the chunks before it; a flipped byte stops loading at its chunk;
 * chunk types the reader does not know are skipped; a newer format, a garbage header and a
 * corrupt header fail with -EPROTO and a clear message; a writer killed with SIGKILL while it
 * records leaves a file that loads at least what it had flushed. */
#define _GNU_SOURCE
#include "harness.h"
#include "output.h"

#include <glib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static char tmp_dir[] = "/tmp/test_out_record.XXXXXX";

static char *tmp_path(const char *name)
{
    return g_build_filename(tmp_dir, name, NULL);
}

static int symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                     struct out_symbol *sym)
{
    static const char *const spin[] = {"_start", "main", "hot_a"};
    uint64_t at = exact ? pc : pc - 1;
    if (m->kernel || at < 0x401000 || at >= 0x401300)
        return -1;
    int i = (int)((at - 0x401000) / 0x100);
    *sym = (struct out_symbol){spin[i], at - (0x401000 + 0x100 * i), "spin.c", 10 + i};
    return 0;
}

static char *folded_text(const out_profile *p)
{
    out_names *n = out_names_new(p, symbolize, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct out_write_opts o = {.per_cpu = true};
    CHECK_INT(out_write(p, n, OUT_FOLDED, &o, f, NULL), 0);
    fclose(f);
    out_names_free(n);
    return buf;
}

static off_t file_size(const char *path)
{
    struct stat st;
    REQUIRE(stat(path, &st) == 0);
    return st.st_size;
}

static GByteArray *slurp(const char *path)
{
    gchar *data;
    gsize len;
    REQUIRE(g_file_get_contents(path, &data, &len, NULL));
    return g_byte_array_new_take((guint8 *)data, len);
}

/* Plain stdio: g_file_set_contents may fsync, and the cut loops write a file per byte. */
static void spew(const char *path, const uint8_t *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f != NULL);
    REQUIRE(fwrite(data, 1, len, f) == len);
    REQUIRE(fclose(f) == 0);
}

/* How much of the profile a file holds: counts of modules, stacks and samples. */
struct state {
    size_t modules, stacks, samples;
};

static struct state state_of(const out_profile *p)
{
    return (struct state){out_profile_module_count(p), out_profile_stack_count(p),
                          out_profile_sample_count(p)};
}

static bool stacks_equal(const struct out_stack *a, const struct out_stack *b)
{
    if (a->pid != b->pid || strcmp(a->comm, b->comm) != 0 || a->mode != b->mode ||
        a->user_stop != b->user_stop || a->kernel_stop != b->kernel_stop ||
        a->n_frames != b->n_frames || a->n_user != b->n_user)
        return false;
    for (int i = 0; i < a->n_frames; i++)
        if (a->frames[i].pc != b->frames[i].pc || a->frames[i].module != b->frames[i].module ||
            a->frames[i].exact != b->frames[i].exact || a->frames[i].kernel != b->frames[i].kernel)
            return false;
    return true;
}

static bool modules_equal(const struct out_module *a, const struct out_module *b)
{
    return strcmp(a->name, b->name) == 0 && strcmp(a->path, b->path) == 0 &&
           a->text_hash == b->text_hash && a->base == b->base && a->kernel == b->kernel;
}

/* loaded holds exactly the first s.modules modules, s.stacks stacks and s.samples samples of
 * original. */
static bool holds_prefix(const out_profile *original, const out_profile *loaded, struct state s)
{
    struct state got = state_of(loaded);
    if (got.modules != s.modules || got.stacks != s.stacks || got.samples != s.samples)
        return false;
    for (uint32_t i = 0; i < s.modules; i++)
        if (!modules_equal(out_profile_module(original, i), out_profile_module(loaded, i)))
            return false;
    for (uint32_t i = 0; i < s.stacks; i++)
        if (!stacks_equal(out_profile_stack(original, i), out_profile_stack(loaded, i)))
            return false;
    return s.samples == 0 || memcmp(out_profile_samples(original), out_profile_samples(loaded),
                                    s.samples * sizeof(struct out_record)) == 0;
}

static void add(out_profile *p, uint64_t time, uint32_t cpu, uint32_t pid, const char *comm,
                uint8_t mode, const struct out_frame *frames, int n, int n_user,
                uint8_t kernel_stop)
{
    struct out_sample s = {.time_ns = time,
                           .weight_ns = 1000,
                           .cpu = cpu,
                           .pid = pid,
                           .mode = mode,
                           .kernel_stop = kernel_stop,
                           .n_frames = n,
                           .n_user = n_user,
                           .frames = frames};
    g_strlcpy(s.comm, comm, sizeof s.comm);
    out_profile_add(p, &s);
}

#define META "qprof=0.1\nqemu=8.2.0\nhz=997\n"

/* The file the tests below cut and corrupt: four syncs, each ending at a known size.
 * 1: two modules, two stacks, three samples; 2: two samples (one SAMPLES chunk); 3: a module, a
 * stack, samples; 4 (in close): three samples (one SAMPLES chunk). */
struct recording {
    out_profile *profile;
    char *path;
    off_t header_end, end[4];
    struct state after[4];
};

static void record_phases(struct recording *rec)
{
    out_profile *p = out_profile_new();
    rec->profile = p;
    rec->path = tmp_path("phases.qprof");
    out_recorder *r = NULL;
    struct qp_error err = {0};
    REQUIRE(out_recorder_open(rec->path, META, &r, &err) == 0);
    rec->header_end = file_size(rec->path);

    struct out_module kernel = {.name = "kernel.elf",
                                .path = "/guest/kernel.elf",
                                .text_hash = 0xabcdef0123456789,
                                .base = 0xffffffff80100000,
                                .kernel = true};
    struct out_module spin = {.name = "spin", .text_hash = 0x1234, .base = 0x400000};
    uint32_t mk = out_profile_add_module(p, &kernel), ms = out_profile_add_module(p, &spin);
    struct out_frame hot[] = {
        {0x401005, ms, false, false}, {0x401150, ms, false, false}, {0x401210, ms, true, false}};
    struct out_frame sys[] = {{0x401005, ms, false, false},
                              {0xffffffff80101000, mk, true, true},
                              {0xffffffff80102010, mk, true, true}};
    add(p, 1000, 0, 1, "spin", OUT_MODE_USER, hot, 3, 3, UNW_STOP_OUTERMOST);
    add(p, 1000, 1, 1, "spin", OUT_MODE_KERNEL, sys, 3, 1, UNW_STOP_MEMORY);
    add(p, 2000, 0, 1, "spin", OUT_MODE_USER, hot, 3, 3, UNW_STOP_OUTERMOST);
    CHECK_INT(out_recorder_sync(r, p, &err), 0);
    CHECK_INT(out_recorder_flush(r, &err), 0);
    rec->end[0] = file_size(rec->path);
    rec->after[0] = state_of(p);

    add(p, 3000, 0, 1, "spin", OUT_MODE_USER, hot, 3, 3, UNW_STOP_OUTERMOST);
    add(p, 3000, 1, 1, "spin", OUT_MODE_KERNEL, sys, 3, 1, UNW_STOP_MEMORY);
    CHECK_INT(out_recorder_sync(r, p, &err), 0);
    CHECK_INT(out_recorder_flush(r, &err), 0);
    rec->end[1] = file_size(rec->path);
    rec->after[1] = state_of(p);

    struct out_module blob = {.name = "blob", .path = "/guest/blob", .base = 0x700000};
    uint32_t mb = out_profile_add_module(p, &blob);
    struct out_frame in_blob[] = {{0x700010, mb, true, false}};
    add(p, 4000, 0, 3, "blob", OUT_MODE_USER, in_blob, 1, 1, UNW_STOP_OUTERMOST);
    add(p, 4000, 1, 0, "", OUT_MODE_IDLE, NULL, 0, 0, UNW_STOP_OUTERMOST);
    CHECK_INT(out_recorder_sync(r, p, &err), 0);
    CHECK_INT(out_recorder_flush(r, &err), 0);
    rec->end[2] = file_size(rec->path);
    rec->after[2] = state_of(p);

    add(p, 5000, 0, 3, "blob", OUT_MODE_USER, in_blob, 1, 1, UNW_STOP_OUTERMOST);
    add(p, 5000, 1, 1, "spin", OUT_MODE_USER, hot, 3, 3, UNW_STOP_OUTERMOST);
    add(p, 6000, 0, 0, "", OUT_MODE_IDLE, NULL, 0, 0, UNW_STOP_OUTERMOST);
    CHECK_INT(out_recorder_close(r, p, &err), 0);
    rec->end[3] = file_size(rec->path);
    rec->after[3] = state_of(p);
    CHECK_INT(rec->after[3].modules, 3);
    CHECK_INT(rec->after[3].stacks, 4);
    CHECK_INT(rec->after[3].samples, 10);
}

static void recording_free(struct recording *rec)
{
    unlink(rec->path);
    g_free(rec->path);
    out_profile_free(rec->profile);
}

/* Reads path, expecting success; returns the profile (caller frees). */
static out_profile *read_ok(const char *path)
{
    out_profile *p = NULL;
    struct qp_error err = {0};
    int rc = out_record_read(path, &p, NULL, &err);
    CHECK_MSG(rc == 0, "reading %s: %d %s", path, rc, err.msg);
    REQUIRE(p != NULL);
    return p;
}

static void test_round_trip(const struct recording *rec)
{
    out_profile *p = NULL;
    char *meta = NULL;
    struct qp_error err = {0};
    REQUIRE(out_record_read(rec->path, &p, &meta, &err) == 0);
    CHECK(holds_prefix(rec->profile, p, rec->after[3]));
    CHECK_STR(meta, META);
    char *want = folded_text(rec->profile), *got = folded_text(p);
    CHECK_STR(got, want);
    CHECK_MSG(strstr(got, "cpu1;spin (1);_start;[truncated];kernel.elf+0x1000;kernel.elf+0x2010 "
                          "2\n"),
              "folded text:\n%s", got);
    free(want);
    free(got);
    g_free(meta);
    out_profile_free(p);
}

/* Every cut loads a prefix that grows with the cut; cut anywhere inside the last chunk, exactly
 * the three first syncs; cut at a sync's end, exactly that sync's state. */
static void test_truncation(const struct recording *rec)
{
    GByteArray *whole = slurp(rec->path);
    char *cut_path = tmp_path("cut.qprof");
    struct state last = {0};
    int failures_before = harness_failures;
    for (off_t cut = rec->header_end; cut <= rec->end[3] && harness_failures == failures_before;
         cut++) {
        spew(cut_path, whole->data, (size_t)cut);
        out_profile *p = read_ok(cut_path);
        struct state now = state_of(p);
        CHECK_MSG(now.modules >= last.modules && now.stacks >= last.stacks &&
                      now.samples >= last.samples,
                  "cut at %jd loads less than a shorter cut", (intmax_t)cut);
        CHECK_MSG(holds_prefix(rec->profile, p, now), "cut at %jd: not a prefix", (intmax_t)cut);
        for (int k = 0; k < 4; k++)
            if (cut == rec->end[k])
                CHECK_MSG(holds_prefix(rec->profile, p, rec->after[k]), "cut at sync %d's end",
                          k + 1);
        if (cut >= rec->end[2] && cut < rec->end[3])
            CHECK_MSG(holds_prefix(rec->profile, p, rec->after[2]),
                      "cut at %jd inside the last chunk", (intmax_t)cut);
        last = now;
        out_profile_free(p);
    }
    /* cut inside the header: not a readable file */
    for (off_t cut = 0; cut < rec->header_end; cut++) {
        spew(cut_path, whole->data, (size_t)cut);
        out_profile *p = NULL;
        struct qp_error err = {0};
        CHECK_INT(out_record_read(cut_path, &p, NULL, &err), -EPROTO);
        CHECK(p == NULL);
    }
    unlink(cut_path);
    g_free(cut_path);
    g_byte_array_free(whole, TRUE);
}

/* Sync 2 wrote one chunk: flipping any of its bytes leaves sync 1's state. */
static void test_flipped_byte(const struct recording *rec)
{
    GByteArray *whole = slurp(rec->path);
    char *bad_path = tmp_path("flipped.qprof");
    int failures_before = harness_failures;
    for (off_t at = rec->end[0]; at < rec->end[1] && harness_failures == failures_before; at++) {
        whole->data[at] ^= 0xff;
        spew(bad_path, whole->data, whole->len);
        whole->data[at] ^= 0xff;
        out_profile *p = read_ok(bad_path);
        CHECK_MSG(holds_prefix(rec->profile, p, rec->after[0]), "byte %jd flipped", (intmax_t)at);
        out_profile_free(p);
    }
    /* a flip in the first chunk (the first module): nothing loads, but the file opens */
    whole->data[rec->header_end + 10] ^= 0x01;
    spew(bad_path, whole->data, whole->len);
    out_profile *p = read_ok(bad_path);
    CHECK(holds_prefix(rec->profile, p, (struct state){0, 0, 0}));
    out_profile_free(p);
    unlink(bad_path);
    g_free(bad_path);
    g_byte_array_free(whole, TRUE);
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A valid chunk of type 99, inserted between syncs 3 and 4, is skipped. */
static void test_unknown_chunk(const struct recording *rec)
{
    GByteArray *whole = slurp(rec->path);
    uint8_t chunk[8 + 5 + 4];
    put_le32(chunk, 99);
    put_le32(chunk + 4, 5);
    memcpy(chunk + 8, "later", 5);
    put_le32(chunk + 13, (uint32_t)crc32(0, chunk, 13));
    GByteArray *edited = g_byte_array_new();
    g_byte_array_append(edited, whole->data, (guint)rec->end[2]);
    g_byte_array_append(edited, chunk, sizeof chunk);
    g_byte_array_append(edited, whole->data + rec->end[2], whole->len - (guint)rec->end[2]);
    char *path = tmp_path("unknown.qprof");
    spew(path, edited->data, edited->len);
    out_profile *p = read_ok(path);
    CHECK(holds_prefix(rec->profile, p, rec->after[3]));
    out_profile_free(p);
    unlink(path);
    g_free(path);
    g_byte_array_free(edited, TRUE);
    g_byte_array_free(whole, TRUE);
}

static void expect_eproto(const char *path, const char *message_part)
{
    out_profile *p = NULL;
    char *meta = NULL;
    struct qp_error err = {0};
    CHECK_INT(out_record_read(path, &p, &meta, &err), -EPROTO);
    CHECK_INT(err.code, -EPROTO);
    CHECK_MSG(strstr(err.msg, message_part) != NULL, "message \"%s\" lacks \"%s\"", err.msg,
              message_part);
    CHECK_MSG(strstr(err.msg, path) != NULL, "message \"%s\" does not name the file", err.msg);
    CHECK(p == NULL && meta == NULL);
}

static void test_bad_headers(const struct recording *rec)
{
    GByteArray *whole = slurp(rec->path);
    char *path = tmp_path("bad.qprof");

    put_le32(whole->data + 8, 7); /* the format version */
    spew(path, whole->data, whole->len);
    expect_eproto(path, "written by a newer qprof (format 7, this qprof reads up to 1)");
    put_le32(whole->data + 8, 1);

    whole->data[20] ^= 0x20; /* a byte of the meta text */
    spew(path, whole->data, whole->len);
    expect_eproto(path, "corrupt record file: header checksum mismatch");
    whole->data[20] ^= 0x20;

    put_le32(whole->data + 12, 0x7fffffff); /* the meta length */
    spew(path, whole->data, whole->len);
    expect_eproto(path, "corrupt record file");

    static const char garbage[] = "this is a folded file, not a record 1\n";
    spew(path, (const uint8_t *)garbage, sizeof garbage - 1);
    expect_eproto(path, "not a qprof record file");
    spew(path, (const uint8_t *)"", 0);
    expect_eproto(path, "not a qprof record file");

    out_profile *p = NULL;
    struct qp_error err = {0};
    char *missing = tmp_path("missing.qprof");
    CHECK_INT(out_record_read(missing, &p, NULL, &err), -ENOENT);
    CHECK(strstr(err.msg, missing) != NULL);
    g_free(missing);
    unlink(path);
    g_free(path);
    g_byte_array_free(whole, TRUE);
}

static bool keep_cpu0(const struct out_record *r, const struct out_stack *s, void *ctx)
{
    return r->cpu == 0;
}

/* A profile that shrinks under the recorder is an error that close reports again, while what was
 * recorded before it is still written; close(NULL) is a no-op; a recorder on a path it cannot
 * create fails at open. */
static void test_recorder_errors(void)
{
    char *path = tmp_path("shrink.qprof");
    out_profile *p = out_profile_new();
    out_recorder *r = NULL;
    struct qp_error err = {0};
    REQUIRE(out_recorder_open(path, NULL, &r, &err) == 0);
    add(p, 1000, 0, 0, "", OUT_MODE_IDLE, NULL, 0, 0, UNW_STOP_OUTERMOST);
    add(p, 1000, 1, 0, "", OUT_MODE_IDLE, NULL, 0, 0, UNW_STOP_OUTERMOST);
    CHECK_INT(out_recorder_sync(r, p, &err), 0);
    out_profile_filter(p, keep_cpu0, NULL);
    CHECK_INT(out_recorder_sync(r, p, &err), -EINVAL);
    CHECK(strstr(err.msg, "must only grow") != NULL);
    CHECK_INT(out_recorder_flush(r, NULL), 0);
    memset(&err, 0, sizeof err);
    CHECK_INT(out_recorder_close(r, p, &err), -EINVAL);
    CHECK(strstr(err.msg, "must only grow") != NULL);
    CHECK_INT(out_recorder_close(NULL, NULL, NULL), 0);
    char *meta = NULL;
    out_profile *loaded = NULL;
    CHECK_INT(out_record_read(path, &loaded, &meta, NULL), 0);
    CHECK_STR(meta, "");                            /* no meta given */
    CHECK_INT(out_profile_sample_count(loaded), 2); /* the first sync's */
    g_free(meta);
    out_profile_free(loaded);
    out_profile_free(p);
    unlink(path);
    g_free(path);

    char *no_dir = tmp_path("no/such/dir.qprof");
    r = NULL;
    CHECK_INT(out_recorder_open(no_dir, NULL, &r, &err), -ENOENT);
    CHECK(r == NULL && strstr(err.msg, no_dir) != NULL);
    g_free(no_dir);
}

/* The child records sample i as (time (i + 1) * 1000, cpu i % 2) on one of two stacks, syncing
 * and flushing every 16 samples, until killed (or after 60 s, should the parent die). */
static void killed_writer_child(const char *path)
{
    out_profile *p = out_profile_new();
    struct out_module spin = {.name = "spin", .base = 0x400000};
    uint32_t ms = out_profile_add_module(p, &spin);
    struct out_frame frames[] = {{0x401005, ms, false, false}, {0x401210, ms, true, false}};
    out_recorder *r = NULL;
    if (out_recorder_open(path, "child=1\n", &r, NULL) != 0)
        _exit(2);
    time_t give_up = time(NULL) + 60;
    for (uint64_t i = 0; i < 5000000 && time(NULL) < give_up; i++) {
        add(p, (i + 1) * 1000, (uint32_t)(i % 2), 1, "spin", OUT_MODE_USER, frames,
            1 + (int)(i % 2), 1 + (int)(i % 2), UNW_STOP_OUTERMOST);
        if (i % 16 == 15 &&
            (out_recorder_sync(r, p, NULL) != 0 || out_recorder_flush(r, NULL) != 0))
            _exit(3);
    }
    _exit(4);
}

static size_t samples_in(const char *path)
{
    out_profile *p = NULL;
    if (out_record_read(path, &p, NULL, NULL) != 0)
        return 0; /* the child has not written its header yet */
    size_t n = out_profile_sample_count(p);
    out_profile_free(p);
    return n;
}

static void test_killed_writer(void)
{
    enum { N = 2000 };
    char *path = tmp_path("killed.qprof");
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0)
        killed_writer_child(path);
    /* poll the file until it holds N samples; the deadline only guards against a stuck child */
    struct timespec poll_interval = {0, 5 * 1000 * 1000};
    size_t seen = 0;
    for (time_t deadline = time(NULL) + 60; seen < N && time(NULL) < deadline;) {
        seen = samples_in(path);
        if (seen < N)
            nanosleep(&poll_interval, NULL);
    }
    CHECK_INT(kill(child, SIGKILL), 0);
    int status = 0;
    CHECK_INT(waitpid(child, &status, 0), child);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
              "the child was to be killed, but exited with status %d", status);
    REQUIRE(seen >= N);

    out_profile *p = NULL;
    char *meta = NULL;
    struct qp_error err = {0};
    CHECK_INT(out_record_read(path, &p, &meta, &err), 0);
    REQUIRE(p != NULL);
    size_t n = out_profile_sample_count(p);
    CHECK_MSG(n >= N, "loaded %zu samples after the kill, fewer than the %d seen before", n, N);
    CHECK_STR(meta, "child=1\n");
    CHECK_INT(out_profile_stack_count(p), 2);
    const struct out_record *r = out_profile_samples(p);
    bool in_order = true;
    for (size_t i = 0; i < n; i++)
        in_order = in_order && r[i].time_ns == (i + 1) * 1000 && r[i].cpu == i % 2 &&
                   r[i].stack == i % 2 && r[i].weight_ns == 1000;
    CHECK_MSG(in_order, "the loaded samples are not the ones the child recorded");
    fprintf(stderr, "killed writer: %zu samples seen before the kill, %zu loaded after\n", seen, n);
    g_free(meta);
    out_profile_free(p);
    unlink(path);
    g_free(path);
}

/* Whether the victim still holds exactly "victim\n". */
static bool victim_intact(const char *victim)
{
    char *text = NULL;
    bool ok = g_file_get_contents(victim, &text, NULL, NULL) && strcmp(text, "victim\n") == 0;
    g_free(text);
    return ok;
}

/* Symlinks planted where qprof writes (issue 34): at the record path (O_NOFOLLOW refuses it), at
 * the temporary name out_write_file used to use (PATH.tmp.PID, fopen followed it and truncated
 * the victim), and at the output path itself (the rename replaces the link). The victim file
 * is never written. */
static void test_planted_symlinks(const struct recording *rec)
{
    char *victim = tmp_path("victim"), *record = tmp_path("planted.qprof");
    char *out = tmp_path("planted.folded");
    char *old_tmp = g_strdup_printf("%s.tmp.%d", out, (int)getpid());
    REQUIRE(g_file_set_contents(victim, "victim\n", -1, NULL));
    REQUIRE(symlink(victim, record) == 0 && symlink(victim, old_tmp) == 0);
    out_recorder *r = NULL;
    struct qp_error err = {0};
    CHECK_INT(out_recorder_open(record, META, &r, &err), -ELOOP);
    CHECK_MSG(strstr(err.msg, "symbolic link") != NULL, "message: %s", err.msg);
    CHECK(victim_intact(victim));
    out_names *n = out_names_new(rec->profile, symbolize, NULL);
    struct out_write_opts o = {0};
    CHECK_INT(out_write_file(rec->profile, n, OUT_FOLDED, &o, out, &err), 0);
    CHECK_MSG(victim_intact(victim), "the victim was written through %s", old_tmp);
    struct stat st;
    CHECK(lstat(out, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0);
    CHECK_INT(out_check_writable(out, &err), 0);
    /* a link at the output path itself: replaced, not followed */
    unlink(out);
    REQUIRE(symlink(victim, out) == 0);
    CHECK_INT(out_write_file(rec->profile, n, OUT_FOLDED, &o, out, &err), 0);
    CHECK(victim_intact(victim));
    CHECK(lstat(out, &st) == 0 && S_ISREG(st.st_mode));
    out_names_free(n);
    unlink(out), unlink(old_tmp), unlink(record), unlink(victim);
    g_free(out), g_free(old_tmp), g_free(record), g_free(victim);
}

/* --exact's counts and kept code (written at the end of a run) come back as written; a file
 * cut inside the CODE chunk keeps the samples and the counts before it, and a code chunk naming
 * a module the file does not have stops the reader there. */
static void test_exact_and_code(void)
{
    out_profile *p = out_profile_new();
    char *path = tmp_path("extras.qprof");
    struct out_module kernel = {.name = "kernel", .kernel = true};
    uint32_t mk = out_profile_add_module(p, &kernel);
    struct out_frame leaf[] = {{0xffffffff81001004, mk, true, true}};
    add(p, 1000, 0, 0, "", OUT_MODE_KERNEL, leaf, 1, 0, UNW_STOP_OUTERMOST);
    out_recorder *r = NULL;
    REQUIRE(out_recorder_open(path, META, &r, NULL) == 0);
    CHECK_INT(out_recorder_sync(r, p, NULL), 0);
    out_profile_add_exact(p, mk, 0xffffffff81001000, 1234);
    out_profile_add_exact(p, OUT_NO_MODULE, 0x401000, 99);
    static const uint8_t code[] = {0x55, 0x48, 0x89, 0xe5, 0x31, 0xc0, 0x5d, 0xc3};
    struct out_code kept = {.module = mk,
                            .machine = 62,
                            .addr = 0xffffffff81001000,
                            .name = "clear_user",
                            .bytes = code,
                            .len = sizeof code};
    CHECK(out_profile_add_code(p, &kept));
    CHECK(!out_profile_add_code(p, &kept)); /* once per function */
    CHECK_INT(out_recorder_close(r, p, NULL), 0);
    out_profile *q = read_ok(path);
    CHECK_INT(out_profile_exact_count(q), 2);
    CHECK_U64(out_profile_exact(q)[0].insns, 1234);
    CHECK_INT(out_profile_exact(q)[1].module, OUT_NO_MODULE);
    const struct out_code *c = out_profile_code_at(q, mk, 0xffffffff81001007);
    REQUIRE(c != NULL);
    CHECK_STR(c->name, "clear_user");
    CHECK_INT(c->machine, 62);
    CHECK_INT(c->len, sizeof code);
    CHECK(memcmp(c->bytes, code, sizeof code) == 0);
    CHECK(out_profile_code_at(q, mk, 0xffffffff81001008) == NULL);
    out_profile_free(q);
    /* cut one byte short: the CODE chunk is torn, what came before stays */
    GByteArray *bytes = slurp(path);
    spew(path, bytes->data, bytes->len - 1);
    q = read_ok(path);
    CHECK_INT(out_profile_sample_count(q), 1);
    CHECK_INT(out_profile_exact_count(q), 2);
    CHECK_INT(out_profile_code_count(q), 0);
    out_profile_free(q);
    g_byte_array_free(bytes, TRUE);
    unlink(path);
    g_free(path);
    out_profile_free(p);
}

int main(void)
{
    REQUIRE(mkdtemp(tmp_dir) != NULL);
    struct recording rec = {0};
    record_phases(&rec);
    test_round_trip(&rec);
    test_truncation(&rec);
    test_flipped_byte(&rec);
    test_unknown_chunk(&rec);
    test_bad_headers(&rec);
    test_planted_symlinks(&rec);
    recording_free(&rec);
    test_recorder_errors();
    test_killed_writer();
    test_exact_and_code();
    rmdir(tmp_dir);
    return harness_result();
}
