#include "sampler.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct prof_agg {
    GHashTable *counts; /* folded stack (owned) -> uint64_t count (boxed in a pointer) */
    uint64_t total;
};

prof_agg *prof_agg_new(void)
{
    prof_agg *a = g_new0(prof_agg, 1);
    a->counts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    return a;
}

void prof_agg_free(prof_agg *a)
{
    if (!a)
        return;
    g_hash_table_destroy(a->counts);
    g_free(a);
}

void prof_agg_add(prof_agg *a, const char *folded, uint64_t count)
{
    uint64_t *slot = g_hash_table_lookup(a->counts, folded);
    if (!slot) {
        slot = g_new0(uint64_t, 1);
        g_hash_table_insert(a->counts, g_strdup(folded), slot);
    }
    *slot += count;
    a->total += count;
}

uint64_t prof_agg_total(const prof_agg *a)
{
    return a->total;
}

size_t prof_agg_unique(const prof_agg *a)
{
    return g_hash_table_size(a->counts);
}

uint64_t prof_agg_count(const prof_agg *a, const char *folded)
{
    const uint64_t *slot = g_hash_table_lookup(a->counts, folded);
    return slot ? *slot : 0;
}

struct stack_entry {
    const char *stack;
    uint64_t count;
};

static int by_stack_text(const void *x, const void *y)
{
    return strcmp(((const struct stack_entry *)x)->stack, ((const struct stack_entry *)y)->stack);
}

static int by_count_desc(const void *x, const void *y)
{
    const struct stack_entry *a = x, *b = y;
    if (a->count != b->count)
        return a->count < b->count ? 1 : -1;
    return strcmp(a->stack, b->stack);
}

/* A snapshot of the table as an array, for sorting. Caller frees with g_free. */
static struct stack_entry *entries_of(const prof_agg *a, size_t *n)
{
    *n = g_hash_table_size(a->counts);
    struct stack_entry *e = g_new(struct stack_entry, *n ? *n : 1);
    GHashTableIter it;
    gpointer key, value;
    size_t i = 0;
    g_hash_table_iter_init(&it, a->counts);
    while (g_hash_table_iter_next(&it, &key, &value))
        e[i++] = (struct stack_entry){key, *(uint64_t *)value};
    return e;
}

int prof_agg_write(const prof_agg *a, FILE *f, struct qp_error *err)
{
    size_t n;
    struct stack_entry *e = entries_of(a, &n);
    qsort(e, n, sizeof *e, by_stack_text);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s %" PRIu64 "\n", e[i].stack, e[i].count);
    g_free(e);
    errno = 0;
    if (fflush(f) != 0 || ferror(f))
        return qp_error_set(err, errno ? -errno : -EIO, "writing folded stacks: %s",
                            strerror(errno ? errno : EIO));
    return 0;
}

/* Parses "stack COUNT": the count is after the last space. */
static int add_folded_line(prof_agg *a, char *line)
{
    line[strcspn(line, "\r\n")] = '\0';
    if (!*line)
        return 0;
    char *space = strrchr(line, ' ');
    if (!space || space == line)
        return -1;
    char *end;
    errno = 0;
    unsigned long long count = strtoull(space + 1, &end, 10);
    if (errno || *end || end == space + 1)
        return -1;
    *space = '\0';
    prof_agg_add(a, line, count);
    return 0;
}

int prof_agg_read_file(prof_agg *a, const char *path, struct qp_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return qp_error_set(err, -errno, "cannot read %s: %s", path, strerror(errno));
    int rc = prof_agg_read_stream(a, f, path, err);
    fclose(f);
    return rc;
}

int prof_agg_read_stream(prof_agg *a, FILE *f, const char *path, struct qp_error *err)
{
    char *line = NULL;
    size_t cap = 0;
    int rc = 0, lineno = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        if (add_folded_line(a, line) != 0) {
            rc = qp_error_set(err, -EINVAL, "%s:%d: not a folded stack line", path, lineno);
            break;
        }
    }
    free(line);
    return rc;
}

int prof_agg_from_profile(prof_agg *a, const out_profile *p, out_names *n, bool per_cpu,
                          struct qp_error *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct out_write_opts o = {.per_cpu = per_cpu};
    int rc = out_write(p, n, OUT_FOLDED, &o, f, err);
    fclose(f);
    if (rc == 0) {
        f = fmemopen(text, len ? len : 1, "r");
        rc = prof_agg_read_stream(a, f, "(profile)", err);
        fclose(f);
    }
    free(text);
    return rc;
}

/* ---- Report ------------------------------------------------------------------------------ */

struct func_count {
    uint64_t self, total;
};

/* Adds one stack's samples to per-function self/total counts (frames after the root). A function
 * that recurs in one stack is counted once in its total. */
static void count_functions(GHashTable *funcs, const char *stack, uint64_t count)
{
    gchar **frames = g_strsplit(stack, ";", -1);
    guint n = g_strv_length(frames);
    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 1; i < n; i++) {
        struct func_count *fc = g_hash_table_lookup(funcs, frames[i]);
        if (!fc) {
            fc = g_new0(struct func_count, 1);
            g_hash_table_insert(funcs, g_strdup(frames[i]), fc);
        }
        if (!g_hash_table_contains(seen, frames[i])) {
            g_hash_table_add(seen, frames[i]);
            fc->total += count;
        }
        if (i == n - 1)
            fc->self += count;
    }
    g_hash_table_destroy(seen);
    g_strfreev(frames);
}

struct func_entry {
    const char *name;
    struct func_count c;
    bool by_self;
};

static int func_cmp(const void *x, const void *y)
{
    const struct func_entry *a = x, *b = y;
    uint64_t va = a->by_self ? a->c.self : a->c.total, vb = b->by_self ? b->c.self : b->c.total;
    if (va != vb)
        return va < vb ? 1 : -1;
    return strcmp(a->name, b->name);
}

static void print_functions(GHashTable *funcs, uint64_t total, bool by_self, FILE *f, int top)
{
    size_t n = g_hash_table_size(funcs), i = 0;
    struct func_entry *e = g_new(struct func_entry, n ? n : 1);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, funcs);
    while (g_hash_table_iter_next(&it, &key, &value))
        e[i++] = (struct func_entry){key, *(struct func_count *)value, by_self};
    qsort(e, n, sizeof *e, func_cmp);
    fprintf(f, "\nTop functions by %s time:\n   self  total  function\n",
            by_self ? "self" : "total");
    for (i = 0; i < n && (int)i < top; i++)
        fprintf(f, " %5.1f%% %5.1f%%  %s\n", 100.0 * e[i].c.self / total,
                100.0 * e[i].c.total / total, e[i].name);
    g_free(e);
}

static void print_roots(const struct stack_entry *e, size_t n, uint64_t total, FILE *f, int top)
{
    GHashTable *roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(e[i].stack, ";");
        char *root = g_strndup(e[i].stack, len);
        uint64_t *c = g_hash_table_lookup(roots, root);
        if (!c) {
            c = g_new0(uint64_t, 1);
            g_hash_table_insert(roots, root, c);
        } else {
            g_free(root);
        }
        *c += e[i].count;
    }
    size_t nr;
    struct stack_entry *r = g_new(struct stack_entry, g_hash_table_size(roots) + 1);
    GHashTableIter it;
    gpointer key, value;
    nr = 0;
    g_hash_table_iter_init(&it, roots);
    while (g_hash_table_iter_next(&it, &key, &value))
        r[nr++] = (struct stack_entry){key, *(uint64_t *)value};
    qsort(r, nr, sizeof *r, by_count_desc);
    fprintf(f, "\nSamples by process:\n");
    for (size_t i = 0; i < nr && (int)i < top; i++)
        fprintf(f, " %5.1f%% %8" PRIu64 "  %s\n", 100.0 * r[i].count / total, r[i].count,
                r[i].stack);
    g_free(r);
    g_hash_table_destroy(roots);
}

void prof_agg_print_report(const prof_agg *a, FILE *f, int top)
{
    uint64_t total = a->total;
    if (total == 0) {
        fprintf(f, "No samples.\n");
        return;
    }
    size_t n;
    struct stack_entry *e = entries_of(a, &n);
    print_roots(e, n, total, f, top);

    qsort(e, n, sizeof *e, by_count_desc);
    fprintf(f, "\nTop stacks:\n");
    for (size_t i = 0; i < n && (int)i < top; i++)
        fprintf(f, " %5.1f%% %8" PRIu64 "  %s\n", 100.0 * e[i].count / total, e[i].count,
                e[i].stack);

    GHashTable *funcs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (size_t i = 0; i < n; i++)
        count_functions(funcs, e[i].stack, e[i].count);
    print_functions(funcs, total, true, f, top);
    print_functions(funcs, total, false, f, top);
    g_hash_table_destroy(funcs);
    g_free(e);
}

/* ---- Names ------------------------------------------------------------------------------- */

size_t prof_sanitize_name(const char *name, char *out, size_t cap)
{
    size_t i = 0;
    if (cap == 0)
        return 0;
    for (; name[i] && i + 1 < cap; i++) {
        unsigned char ch = (unsigned char)name[i];
        out[i] = (ch == ';' || ch < 0x20 || ch == 0x7f) ? '_' : (char)ch;
    }
    out[i] = '\0';
    return i;
}
