/* `qprof diff BASE NEW`: what changed between two profiles (perf diff's question), from records
 * or folded files. Both are reduced to folded stacks whose roots name processes without their
 * pids, since two boots give the same program other pids; frames are matched by name, so a
 * rebuilt binary (another .text hash, its own --user-dir file) still lines up function by
 * function. Shares are fractions of each profile's own samples, so runs of different lengths
 * compare. */
#include "cli_internal.h"
#include "qp_file.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct diff_options {
    const char *paths[2]; /* BASE, NEW */
    const char *outputs[PROF_MAX_OUTPUTS];
    int n_outputs;
    const char *diff_base; /* --diff-base: BASE's pprof file beside NEW's -o .pb.gz */
    int top;
    struct prof_load_opts load;
};

/* One profile, as folded stacks and what is counted from them. */
struct diff_side {
    const char *path;
    out_profile *profile; /* NULL for a folded file */
    prof_syms *syms;
    out_names *names;
    GHashTable *stacks;   /* folded text, roots by name (owned) -> uint64_t * samples */
    GHashTable *prefixes; /* every leading part of a stack ("root;a;b") -> samples through it */
    GHashTable *self;     /* function name -> samples with it as the leaf */
    GHashTable *total;    /* function name -> samples with it anywhere (once per stack) */
    uint64_t samples;
};

static void diff_help(FILE *out)
{
    fprintf(out,
            "Usage: qprof diff [OPTIONS] BASE NEW [-o OUTPUT]...\n"
            "Compares two profiles, each a record file (qprof record) or a folded file: prints\n"
            "a table of functions with their self and total share of samples in BASE and in NEW\n"
            "and the change in points, the largest change first; functions only one profile\n"
            "has are marked new or vanished. Shares are of each profile's own sample count.\n"
            "Processes are matched by name (pids differ between boots), functions by name\n"
            "(a rebuilt binary lines up).\n"
            "\n"
            "  -o, --output FILE      also write, by extension: .svg a differential flame graph\n"
            "                         (NEW's shape, red grew, blue shrank), .folded/.txt\n"
            "                         flamegraph.pl's difffolded form (\"STACK BASE NEW\", BASE's\n"
            "                         counts scaled to NEW's total like difffolded -n), .pb.gz\n"
            "                         NEW as pprof (needs --diff-base); repeatable\n"
            "  --diff-base FILE.pb.gz BASE as pprof, for go tool pprof -diff_base FILE NEW.pb.gz\n"
            "  --top N                rows of the table, 0 for all [40]\n"
            "%s"
            "                         (the filters apply to record files; --comm also to the\n"
            "                         roots of folded files)\n"
            "  -h, --help             this text\n"
            "\n"
            "The SVG and pprof outputs need record files (NEW, and BASE for pprof).\n"
            "Exit status: 0 success, 1 a file cannot be read or an output cannot be written,\n"
            "2 usage error.\n"
            "\n"
            "EXAMPLES\n"
            "  qprof diff before.data after.data\n"
            "  qprof diff --comm spin before.data after.data -o diff.svg\n"
            "  qprof diff before.data after.data -o after.pb.gz --diff-base before.pb.gz\n"
            "  go tool pprof -top -diff_base before.pb.gz after.pb.gz\n",
            prof_load_help);
}

static int usage(const char *what)
{
    return prof_cli_usage("diff", what);
}

enum { D_DIFF_BASE = PROF_LOAD_END, D_TOP };

static const struct option diff_long[] = {
    {"output", required_argument, NULL, 'o'}, {"diff-base", required_argument, NULL, D_DIFF_BASE},
    {"top", required_argument, NULL, D_TOP},  PROF_LOAD_LONG_OPTIONS,
    {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
};

/* Applies one option; returns -1 when it was fine, else the exit code. */
static int apply(void *opts, int c, const char *arg, const char *flag)
{
    struct diff_options *o = opts;
    switch (c) {
    case 'o':
        if (o->n_outputs == PROF_MAX_OUTPUTS)
            return usage("-o: too many outputs");
        o->outputs[o->n_outputs++] = arg;
        return -1;
    case D_DIFF_BASE:
        o->diff_base = arg;
        return -1;
    case D_TOP:
        o->top = atoi(arg);
        return o->top >= 0 ? -1 : usage("--top: not a count");
    case 'h':
        diff_help(stdout);
        return PROF_EXIT_OK;
    }
    return prof_load_option_or_usage("diff", &o->load, c, arg, flag);
}

static bool is_pprof(const char *path)
{
    return out_format_from_path(path) == OUT_PPROF;
}

static int check_outputs(const struct diff_options *o)
{
    int n_pprof = 0;
    for (int i = 0; i < o->n_outputs; i++) {
        int f = out_format_from_path(o->outputs[i]);
        if (f != OUT_SVG && f != OUT_FOLDED && f != OUT_PPROF)
            return usage("-o: not a .svg, .folded, .txt or .pb.gz file");
        n_pprof += f == OUT_PPROF;
    }
    if (n_pprof > 1)
        return usage("-o: one .pb.gz at most (NEW's; BASE's is --diff-base)");
    if ((n_pprof == 1) != (o->diff_base != NULL))
        return usage("a .pb.gz -o and --diff-base FILE.pb.gz go together");
    if (o->diff_base && !is_pprof(o->diff_base))
        return usage("--diff-base: not a .pb.gz file");
    return -1;
}

static int parse(int argc, char **argv, struct diff_options *o)
{
    int rc = prof_cli_parse(argc, argv, ":o:h", diff_long, apply, o);
    if (rc >= 0)
        return rc;
    if (argc - optind != 2)
        return usage("two profiles wanted: BASE NEW");
    o->paths[0] = argv[optind];
    o->paths[1] = argv[optind + 1];
    return check_outputs(o);
}

/* ---- Loading: either kind of file into folded stacks -------------------------------------- */

static void add_count(GHashTable *h, const char *key, uint64_t n)
{
    uint64_t *count = g_hash_table_lookup(h, key);
    if (!count) {
        count = g_new0(uint64_t, 1);
        g_hash_table_insert(h, g_strdup(key), count);
    }
    *count += n;
}

static uint64_t count_of(GHashTable *h, const char *key)
{
    uint64_t *count = g_hash_table_lookup(h, key);
    return count ? *count : 0;
}

static GHashTable *counts_new(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

static bool is_record(const char *path)
{
    char magic[8] = {0};
    return prof_load_read_head(path, magic, sizeof magic) == 0 &&
           memcmp(magic, "QPROFREC", sizeof magic) == 0;
}

/* The record's samples the filters keep, one folded text per distinct stack. */
static int fold_record(struct diff_side *d, const struct prof_load_opts *o, struct qp_error *err)
{
    if (prof_load_record(d->path, o, &d->profile, NULL, NULL, err) != 0)
        return -1;
    d->syms = prof_syms_new(d->profile, o, err);
    if (!d->syms)
        return -1;
    d->names = out_names_new(d->profile, prof_syms_symbolize, d->syms);
    size_t n_stacks = out_profile_stack_count(d->profile);
    uint64_t *per_stack = g_new0(uint64_t, n_stacks + 1);
    out_profile_stack_totals(d->profile, per_stack, NULL);
    GString *text = g_string_new(NULL);
    GPtrArray *shown = g_ptr_array_new();
    for (uint32_t id = 0; id < n_stacks; id++) {
        if (!per_stack[id])
            continue;
        const struct out_stack *s = out_profile_stack(d->profile, id);
        char root[64];
        g_string_assign(text, out_stack_root_as(s, true, root, sizeof root));
        g_ptr_array_set_size(shown, out_stack_display_len(s));
        out_stack_display(d->names, s, (const struct out_name **)shown->pdata);
        for (guint i = 0; i < shown->len; i++)
            g_string_append_printf(text, ";%s", ((const struct out_name *)shown->pdata[i])->name);
        add_count(d->stacks, text->str, per_stack[id]);
    }
    g_ptr_array_free(shown, TRUE);
    g_string_free(text, TRUE);
    g_free(per_stack);
    return 0;
}

static bool comm_kept(const struct prof_load_opts *o, const char *stack)
{
    size_t root_len = strcspn(stack, ";");
    for (guint i = 0; i < o->comms->len; i++) {
        const char *comm = g_ptr_array_index(o->comms, i);
        if (strlen(comm) == root_len && strncmp(stack, comm, root_len) == 0)
            return true;
    }
    return o->comms->len == 0;
}

/* "STACK COUNT" lines (flamegraph.pl's stackcollapse output, qprof's .folded). */
static int fold_file(struct diff_side *d, const struct prof_load_opts *o, struct qp_error *err)
{
    char *text = NULL;
    if (prof_load_read_text(d->path, QP_FILE_MAX_TEXT, &text, err) != 0)
        return -1;
    gchar **lines = g_strsplit(text, "\n", -1);
    int rc = 0;
    for (guint i = 0; lines[i]; i++) {
        char *space = strrchr(lines[i], ' '), *end = NULL;
        if (!lines[i][0])
            continue;
        uint64_t n = space ? strtoull(space + 1, &end, 10) : 0;
        if (!space || end == space + 1 || *end) {
            rc = qp_error_set(err, -EPROTO, "%s:%u: not a folded line (\"STACK COUNT\")", d->path,
                              i + 1);
            break;
        }
        *space = '\0';
        if (comm_kept(o, lines[i]))
            add_count(d->stacks, lines[i], n);
    }
    g_strfreev(lines);
    g_free(text);
    return rc ? -1 : 0;
}

/* Self and total samples per function, and samples per leading part of a stack (the SVG's
 * boxes), from one folded stack. */
static void count_stack(struct diff_side *d, const char *stack, uint64_t n, GHashTable *seen)
{
    gchar **frames = g_strsplit(stack, ";", -1);
    GString *prefix = g_string_new(NULL);
    g_hash_table_remove_all(seen);
    for (guint i = 0; frames[i]; i++) {
        if (i)
            g_string_append_c(prefix, ';');
        g_string_append(prefix, frames[i]);
        add_count(d->prefixes, prefix->str, n);
        if (i == 0) /* the root is a process, not a function */
            continue;
        if (g_hash_table_add(seen, frames[i]))
            add_count(d->total, frames[i], n);
        if (!frames[i + 1])
            add_count(d->self, frames[i], n);
    }
    g_string_free(prefix, TRUE);
    g_strfreev(frames);
    d->samples += n;
}

static int load_side(struct diff_side *d, const struct prof_load_opts *o)
{
    struct qp_error err = {0};
    d->stacks = counts_new();
    d->prefixes = counts_new();
    d->self = counts_new();
    d->total = counts_new();
    int rc = is_record(d->path) ? fold_record(d, o, &err) : fold_file(d, o, &err);
    if (rc != 0) {
        fprintf(stderr, "qprof diff: %s\n", err.msg);
        return -1;
    }
    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, d->stacks);
    while (g_hash_table_iter_next(&it, &key, &value))
        count_stack(d, key, *(uint64_t *)value, seen);
    g_hash_table_destroy(seen);
    return 0;
}

static void side_free(struct diff_side *d)
{
    if (d->stacks) {
        g_hash_table_destroy(d->stacks);
        g_hash_table_destroy(d->prefixes);
        g_hash_table_destroy(d->self);
        g_hash_table_destroy(d->total);
    }
    out_names_free(d->names);
    prof_syms_free(d->syms);
    out_profile_free(d->profile);
}

/* ---- The table ---------------------------------------------------------------------------- */

struct diff_row {
    const char *function;
    double self[2], total[2]; /* percent of BASE's, NEW's samples */
};

static double share(GHashTable *h, const char *key, uint64_t samples)
{
    return samples ? 100.0 * (double)count_of(h, key) / (double)samples : 0;
}

static double change(const struct diff_row *r)
{
    return fmax(fabs(r->total[1] - r->total[0]), fabs(r->self[1] - r->self[0]));
}

static int by_change(const void *a, const void *b)
{
    const struct diff_row *x = a, *y = b;
    double cx = change(x), cy = change(y);
    if (cx != cy)
        return cx < cy ? 1 : -1;
    return strcmp(x->function, y->function);
}

/* The keys of both tables, as a set (borrowed keys). */
static GHashTable *union_keys(GHashTable *a, GHashTable *b)
{
    GHashTable *all = g_hash_table_new(g_str_hash, g_str_equal);
    GHashTable *both[] = {a, b};
    for (int side = 0; side < 2; side++) {
        GHashTableIter it;
        gpointer key;
        g_hash_table_iter_init(&it, both[side]);
        while (g_hash_table_iter_next(&it, &key, NULL))
            g_hash_table_add(all, key);
    }
    return all;
}

static GArray *rows_of(const struct diff_side *d)
{
    GArray *rows = g_array_new(FALSE, FALSE, sizeof(struct diff_row));
    GHashTable *names = union_keys(d[0].total, d[1].total);
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, names);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        struct diff_row r = {.function = key};
        for (int side = 0; side < 2; side++) {
            r.self[side] = share(d[side].self, key, d[side].samples);
            r.total[side] = share(d[side].total, key, d[side].samples);
        }
        g_array_append_val(rows, r);
    }
    g_hash_table_destroy(names);
    g_array_sort(rows, by_change);
    return rows;
}

static const char *status_of(const struct diff_side *d, const char *function)
{
    if (!count_of(d[0].total, function))
        return "new";
    return count_of(d[1].total, function) ? "" : "vanished";
}

static void print_table(const struct diff_side *d, int top, FILE *f)
{
    GArray *rows = rows_of(d);
    fprintf(f, "# BASE %s: %" PRIu64 " samples\n# NEW  %s: %" PRIu64 " samples\n", d[0].path,
            d[0].samples, d[1].path, d[1].samples);
    fprintf(f, "# shares are percent of each profile's samples; changes in points (NEW - BASE)\n");
    fprintf(f, "%9s %9s %9s %9s %8s %8s  %-8s %s\n", "base self", "base tot", "new self", "new tot",
            "d self", "d total", "status", "function");
    for (guint i = 0; i < rows->len && (top == 0 || i < (guint)top); i++) {
        const struct diff_row *r = &g_array_index(rows, struct diff_row, i);
        fprintf(f, "%8.2f%% %8.2f%% %8.2f%% %8.2f%% %+8.2f %+8.2f  %-8s %s\n", r->self[0],
                r->total[0], r->self[1], r->total[1], r->self[1] - r->self[0],
                r->total[1] - r->total[0], status_of(d, r->function), r->function);
    }
    if (top && rows->len > (guint)top)
        fprintf(f, "# %u more functions (--top 0 shows them all)\n", rows->len - (guint)top);
    g_array_free(rows, TRUE);
}

/* ---- Outputs ------------------------------------------------------------------------------ */

static int by_text(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* flamegraph.pl's difffolded.pl -n: "STACK BASE NEW" for every stack of either, BASE's counts
 * scaled to NEW's total so that the two columns compare. */
static int write_difffolded(const struct diff_side *d, const char *path, struct qp_error *err)
{
    GHashTable *all = union_keys(d[0].stacks, d[1].stacks);
    guint n = 0;
    gpointer *keys = g_hash_table_get_keys_as_array(all, &n);
    qsort(keys, n, sizeof *keys, by_text);
    double scale = d[0].samples ? (double)d[1].samples / (double)d[0].samples : 1;
    GString *text = g_string_new(NULL);
    for (guint i = 0; i < n; i++)
        g_string_append_printf(text, "%s %.0f %" PRIu64 "\n", (const char *)keys[i],
                               round((double)count_of(d[0].stacks, keys[i]) * scale),
                               count_of(d[1].stacks, keys[i]));
    GError *gerr = NULL;
    int rc = 0;
    if (!g_file_set_contents(path, text->str, (gssize)text->len, &gerr)) {
        rc = qp_error_set(err, -EIO, "%s", gerr->message);
        g_error_free(gerr);
    }
    g_string_free(text, TRUE);
    g_free(keys);
    g_hash_table_destroy(all);
    return rc;
}

/* The SVG's colours: a box's change of share, relative to the largest change of any box. */
struct diff_fill {
    const struct diff_side *d;
    double max_change; /* fraction of samples; 0: nothing changed */
    GString *key;
};

static double prefix_change(const struct diff_side *d, const char *prefix, uint64_t new_count)
{
    double base = d[0].samples ? (double)count_of(d[0].prefixes, prefix) / (double)d[0].samples : 0;
    return (double)new_count / (double)(d[1].samples ? d[1].samples : 1) - base;
}

static double largest_change(const struct diff_side *d)
{
    double max = 0;
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, d[1].prefixes);
    while (g_hash_table_iter_next(&it, &key, &value))
        max = fmax(max, fabs(prefix_change(d, key, *(uint64_t *)value)));
    return max;
}

static bool diff_fill(void *ctx, const char *const *path, int depth, uint64_t count, uint64_t total,
                      char *fill, size_t cap)
{
    struct diff_fill *df = ctx;
    (void)total;
    g_string_truncate(df->key, 0);
    for (int i = 0; i < depth; i++)
        g_string_append_printf(df->key, "%s%s", i ? ";" : "", path[i]);
    double c = prefix_change(df->d, df->key->str, count);
    double strength = df->max_change > 0 ? fmin(1, fabs(c) / df->max_change) : 0;
    unsigned pale = (unsigned)lround(235 - 195 * strength);
    if (c > 0)
        snprintf(fill, cap, "rgb(255,%u,%u)", pale, pale);
    else if (c < 0)
        snprintf(fill, cap, "rgb(%u,%u,255)", pale, pale);
    else
        snprintf(fill, cap, "rgb(235,235,235)");
    return true;
}

static const char *const diff_legend[] = {
    "rgb(255,40,40)", "grew", "rgb(40,40,255)", "shrank", "rgb(235,235,235)", "unchanged", NULL};

static int write_svg(const struct diff_side *d, const char *path, struct qp_error *err)
{
    struct diff_fill df = {.d = d, .max_change = largest_change(d), .key = g_string_new(NULL)};
    char *title = g_strdup_printf("qprof diff: %s -> %s (full colour: %.2f points)", d[0].path,
                                  d[1].path, 100 * df.max_change);
    struct out_write_opts wo = {.title = title,
                                .roots_by_name = true,
                                .svg_fill = diff_fill,
                                .svg_fill_ctx = &df,
                                .svg_legend = diff_legend};
    int rc = out_write_file(d[1].profile, d[1].names, OUT_SVG, &wo, path, err);
    g_free(title);
    g_string_free(df.key, TRUE);
    return rc;
}

static int write_pprof(const struct diff_side *d, const char *path, const char *base_path,
                       struct qp_error *err)
{
    struct out_write_opts wo = {.roots_by_name = true};
    int rc = out_write_file(d[1].profile, d[1].names, OUT_PPROF, &wo, path, err);
    return rc ? rc : out_write_file(d[0].profile, d[0].names, OUT_PPROF, &wo, base_path, err);
}

static int write_one(const struct diff_options *o, const struct diff_side *d, const char *path)
{
    struct qp_error err = {0};
    int f = out_format_from_path(path), rc;
    bool records = d[1].profile && (f == OUT_SVG || d[0].profile);
    if (f != OUT_FOLDED && !records) {
        fprintf(stderr, "qprof diff: %s: needs record files, not folded ones\n", path);
        return -1;
    }
    if (f == OUT_SVG)
        rc = write_svg(d, path, &err);
    else if (f == OUT_PPROF)
        rc = write_pprof(d, path, o->diff_base, &err);
    else
        rc = write_difffolded(d, path, &err);
    if (rc != 0)
        fprintf(stderr, "qprof diff: %s\n", err.msg);
    else
        fprintf(stderr, "qprof diff: wrote %s%s%s\n", path, f == OUT_PPROF ? " and " : "",
                f == OUT_PPROF ? o->diff_base : "");
    return rc;
}

static int run_diff(const struct diff_options *o)
{
    struct diff_side d[2] = {{.path = o->paths[0]}, {.path = o->paths[1]}};
    int rc = load_side(&d[0], &o->load) == 0 && load_side(&d[1], &o->load) == 0 ? PROF_EXIT_OK
                                                                                : PROF_EXIT_RUNTIME;
    if (rc == PROF_EXIT_OK)
        print_table(d, o->top, stdout);
    for (int i = 0; rc == PROF_EXIT_OK && i < o->n_outputs; i++)
        if (write_one(o, d, o->outputs[i]) != 0)
            rc = PROF_EXIT_RUNTIME;
    side_free(&d[0]);
    side_free(&d[1]);
    return rc;
}

int prof_diff_main(int argc, char **argv)
{
    struct diff_options o = {.top = 40};
    prof_load_opts_init(&o.load);
    int rc = parse(argc, argv, &o);
    if (rc < 0)
        rc = run_diff(&o);
    prof_load_opts_clear(&o.load);
    return rc;
}
