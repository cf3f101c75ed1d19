/* `qprof report`: reads a record file and writes any output from it, symbolized offline with
 * the files given now (perf report's habit: record once, report many ways). */
#include "cli.h"
#include "qp_file.h"
#include "symbols.h"

#include <errno.h>
#include <getopt.h>
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct report_options {
    const char *input;
    const char *kernel;
    const char *user_dirs[PROF_MAX_USER_DIRS];
    int n_user_dirs;
    const char *outputs[PROF_MAX_OUTPUTS];
    int n_outputs;
    const char *format;
    enum prof_mode_filter mode_filter;
    uint64_t cpu_mask;
    GArray *pids;              /* uint32_t; empty: every process */
    double time_from, time_to; /* seconds since the start; to < 0: no end */
    bool per_cpu;
    int top;
};

static void report_help(FILE *out)
{
    fputs("Usage: qprof report [-i FILE] [OPTIONS] [-o OUTPUT]...\n"
          "Reads a record file (qprof record -o FILE, or qprof -o FILE.data) and writes the\n"
          "profile in any format, symbolized with the files given now. Prints a summary.\n"
          "\n"
          "  -i, --input FILE       the record file [qprof.data]\n"
          "  -o, --output FILE      as for qprof: .folded/.txt, .speedscope.json, .pb.gz, .svg;\n"
          "                         repeatable; \"-\" is folded stacks on stdout\n"
          "  --format NAME          folded, speedscope, pprof or svg, whatever the names say\n"
          "  --kernel ELF|MAP       kernel symbols (default: the file recorded, if it exists)\n"
          "  --user-dir DIR         user binaries, matched by .text hash; repeatable (default:\n"
          "                         the files recorded, if they exist and still match)\n"
          "  --kernel-only          only samples taken in kernel mode (incl. idle)\n"
          "  --user-only            only samples taken in user mode\n"
          "  --cpus LIST            only these vCPUs, e.g. 0,2-3\n"
          "  --pid LIST             only these processes, e.g. 1,3\n"
          "  --time START-END       only samples between START and END seconds of the run\n"
          "                         (either may be left out: 2- or -5.5)\n"
          "  --per-cpu              root stacks at their vCPU\n"
          "  --top N                rows in the summary's top lists [10]\n"
          "  -h, --help             this text\n"
          "\n"
          "Exit status: 0 success, 1 the file cannot be read (corrupt, or from a newer qprof)\n"
          "or an output cannot be written, 2 usage error.\n"
          "\n"
          "EXAMPLES\n"
          "  qprof record --samples 5000 -o qprof.data\n"
          "  qprof report -i qprof.data -o profile.speedscope.json -o flame.svg\n"
          "  qprof report --pid 3 --kernel-only --kernel build/kernel.elf -o sys.folded\n",
          out);
}

static int usage(const char *what)
{
    fprintf(stderr, "qprof report: %s\nTry 'qprof report --help' for more information.\n", what);
    return PROF_EXIT_USAGE;
}

static bool parse_pids(const char *text, GArray *pids)
{
    gchar **parts = g_strsplit(text, ",", -1);
    bool ok = parts[0] != NULL;
    for (gchar **p = parts; ok && *p; p++) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(*p, &end, 10);
        ok = !errno && end != *p && !*end && v > 0 && v <= UINT32_MAX;
        uint32_t pid = (uint32_t)v;
        if (ok)
            g_array_append_val(pids, pid);
    }
    g_strfreev(parts);
    return ok;
}

static bool parse_time_range(const char *text, double *from, double *to)
{
    const char *dash = strchr(text, '-');
    if (!dash)
        return false;
    char *end;
    *from = 0;
    *to = -1;
    if (dash != text) {
        *from = strtod(text, &end);
        if (end != dash || *from < 0)
            return false;
    }
    if (dash[1]) {
        *to = strtod(dash + 1, &end);
        if (*end || *to < *from)
            return false;
    }
    return true;
}

enum {
    R_KERNEL = 1000,
    R_USER_DIR,
    R_KONLY,
    R_UONLY,
    R_CPUS,
    R_PID,
    R_TIME,
    R_PER_CPU,
    R_TOP,
    R_FORMAT
};

static const struct option report_long[] = {
    {"input", required_argument, NULL, 'i'},
    {"output", required_argument, NULL, 'o'},
    {"format", required_argument, NULL, R_FORMAT},
    {"kernel", required_argument, NULL, R_KERNEL},
    {"user-dir", required_argument, NULL, R_USER_DIR},
    {"kernel-only", no_argument, NULL, R_KONLY},
    {"user-only", no_argument, NULL, R_UONLY},
    {"cpus", required_argument, NULL, R_CPUS},
    {"pid", required_argument, NULL, R_PID},
    {"time", required_argument, NULL, R_TIME},
    {"per-cpu", no_argument, NULL, R_PER_CPU},
    {"top", required_argument, NULL, R_TOP},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Applies one option; returns -1 when it was fine, else the exit code. */
static int apply(struct report_options *o, int c, const char *arg, const char *flag)
{
    struct qp_error err = {0};
    switch (c) {
    case 'i':
        o->input = arg;
        return -1;
    case 'o':
        if (o->n_outputs == PROF_MAX_OUTPUTS)
            return usage("-o: too many outputs");
        o->outputs[o->n_outputs++] = arg;
        return -1;
    case R_FORMAT:
        if (out_format_from_name(arg) < 0 || out_format_from_name(arg) == OUT_RECORD)
            return usage("--format: not one of folded, speedscope, pprof, svg");
        o->format = arg;
        return -1;
    case R_KERNEL:
        o->kernel = arg;
        return -1;
    case R_USER_DIR:
        if (o->n_user_dirs == PROF_MAX_USER_DIRS)
            return usage("--user-dir: too many directories");
        o->user_dirs[o->n_user_dirs++] = arg;
        return -1;
    case R_KONLY:
    case R_UONLY:
        o->mode_filter = c == R_KONLY ? PROF_KERNEL_ONLY : PROF_USER_ONLY;
        return -1;
    case R_CPUS:
        if (prof_parse_cpu_list(arg, &o->cpu_mask, &err) != 0)
            return usage(err.msg);
        return -1;
    case R_PID:
        return parse_pids(arg, o->pids) ? -1 : usage("--pid: not a list of pids like 1,3");
    case R_TIME:
        return parse_time_range(arg, &o->time_from, &o->time_to)
                   ? -1
                   : usage("--time: not a range of seconds like 2-5.5, 2- or -5.5");
    case R_PER_CPU:
        o->per_cpu = true;
        return -1;
    case R_TOP:
        o->top = atoi(arg);
        return o->top >= 0 ? -1 : usage("--top: not a count");
    case 'h':
        report_help(stdout);
        return PROF_EXIT_OK;
    default:
        return usage(flag);
    }
}

static int parse(int argc, char **argv, struct report_options *o)
{
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":i:o:h", report_long, NULL)) != -1) {
        char flag[160];
        snprintf(flag, sizeof flag, "%s '%s'",
                 c == ':' ? "option needs a value:" : "unknown option", argv[optind - 1]);
        int rc = apply(o, c == ':' || c == '?' ? 0 : c, optarg, flag);
        if (rc >= 0)
            return rc;
    }
    if (optind < argc)
        return usage("unexpected argument");
    return -1;
}

/* ---- Filters ------------------------------------------------------------------------------ */

static bool keep(const struct out_record *r, const struct out_stack *s, void *ctx)
{
    const struct report_options *o = ctx;
    bool user = s->mode == OUT_MODE_USER;
    if ((o->mode_filter == PROF_KERNEL_ONLY && user) || (o->mode_filter == PROF_USER_ONLY && !user))
        return false;
    if (r->cpu < 64 && !((o->cpu_mask >> r->cpu) & 1))
        return false;
    double t = r->time_ns / 1e9;
    if (t < o->time_from || (o->time_to >= 0 && t > o->time_to))
        return false;
    if (o->pids->len == 0)
        return true;
    for (guint i = 0; i < o->pids->len; i++)
        if (g_array_index(o->pids, uint32_t, i) == s->pid)
            return true;
    return false;
}

/* ---- Symbols ------------------------------------------------------------------------------ */

struct report_symbols {
    const out_profile *profile;
    sym_store *store;
    GPtrArray *tables; /* module index -> sym_table * (owned unless from the store), may be NULL */
    GPtrArray *owned;
};

/* Whether a file the record names may be opened: one that is missing here is quietly left out
 * (the record came from another machine), one that is not a regular file or is too large
 * (a FIFO would block, /dev/zero never ends) is left out with a line saying so. The symbol
 * readers check again when they open it (qp_file_open_read): this is only for the message. */
static bool record_file_usable(const char *path)
{
    struct qp_error err = {0};
    int fd = qp_file_open_read(path, QP_FILE_MAX_ELF, NULL, &err);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    if (fd != -ENOENT && fd != -EACCES) {
        fputs("qprof report: not reading a file the record names: ", stderr);
        qp_file_fput_escaped(err.msg, stderr);
        fputc('\n', stderr);
    }
    return false;
}

static sym_table *open_kernel(const char *path)
{
    sym_table *t = NULL;
    if (sym_table_open_elf(path, &t, NULL) == 0 && sym_table_count(t) > 0)
        return t;
    sym_table_free(t);
    t = NULL;
    return sym_table_open_map(path, &t, NULL) == 0 ? t : NULL;
}

/* A recorded user binary: the --user-dir file with its .text hash, else the file it was
 * recorded from when that still has the same .text. */
static const sym_table *user_table(struct report_symbols *rs, const struct out_module *m)
{
    const sym_table *t = m->text_hash ? sym_store_find(rs->store, m->text_hash) : NULL;
    if (t || !m->path[0] || !record_file_usable(m->path))
        return t;
    sym_table *own = NULL;
    if (sym_table_open_elf(m->path, &own, NULL) == 0 && sym_table_text_hash(own) == m->text_hash) {
        g_ptr_array_add(rs->owned, own);
        return own;
    }
    sym_table_free(own);
    return NULL;
}

static int load_symbols(struct report_symbols *rs, const struct report_options *o)
{
    rs->store = sym_store_new();
    rs->tables = g_ptr_array_new();
    rs->owned = g_ptr_array_new_with_free_func((GDestroyNotify)sym_table_free);
    for (int i = 0; i < o->n_user_dirs; i++) {
        struct qp_error err = {0};
        if (sym_store_add_dir(rs->store, o->user_dirs[i], &err) < 0) {
            fprintf(stderr, "qprof report: --user-dir %s: %s\n", o->user_dirs[i], err.msg);
            return -1;
        }
    }
    for (size_t i = 0; i < out_profile_module_count(rs->profile); i++) {
        const struct out_module *m = out_profile_module(rs->profile, (uint32_t)i);
        const sym_table *t = NULL;
        if (m->kernel) {
            const char *path = o->kernel                                   ? o->kernel
                               : m->path[0] && record_file_usable(m->path) ? m->path
                                                                           : NULL;
            sym_table *k = path ? open_kernel(path) : NULL;
            if (o->kernel && !k) {
                struct qp_error why = {0};
                int fd = qp_file_open_read(o->kernel, QP_FILE_MAX_ELF, NULL, &why);
                if (fd >= 0)
                    close(fd);
                fprintf(stderr, "qprof report: --kernel %s: no symbols could be read%s%s\n",
                        o->kernel, fd < 0 ? ": " : "", fd < 0 ? why.msg : "");
                return -1;
            }
            if (k)
                g_ptr_array_add(rs->owned, k);
            t = k;
        } else {
            t = user_table(rs, m);
        }
        g_ptr_array_add(rs->tables, (gpointer)t);
    }
    return 0;
}

static int symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                     struct out_symbol *sym)
{
    struct report_symbols *rs = ctx;
    uint32_t index = (uint32_t)(m - out_profile_module(rs->profile, 0));
    const sym_table *t = index < rs->tables->len ? g_ptr_array_index(rs->tables, index) : NULL;
    struct sym_info info;
    if (!t || sym_lookup(t, exact || pc == 0 ? pc : pc - 1, &info) != 0)
        return -ENOENT;
    *sym = (struct out_symbol){.function = info.name, .offset = pc - info.start};
    sym_lookup_line(t, exact || pc == 0 ? pc : pc - 1, &sym->file, &sym->line);
    return 0;
}

static void free_symbols(struct report_symbols *rs)
{
    if (rs->owned)
        g_ptr_array_free(rs->owned, TRUE);
    if (rs->tables)
        g_ptr_array_free(rs->tables, TRUE);
    sym_store_free(rs->store);
}

/* ---- The report --------------------------------------------------------------------------- */

static enum out_format format_for(const struct report_options *o, const char *path)
{
    if (o->format)
        return (enum out_format)out_format_from_name(o->format);
    int f = out_format_from_path(path);
    return f < 0 || f == OUT_RECORD ? OUT_FOLDED : (enum out_format)f;
}

static int write_all(const struct report_options *o, const out_profile *p, out_names *n,
                     const prof_agg *agg)
{
    struct out_write_opts wo = {.per_cpu = o->per_cpu};
    int rc = 0;
    for (int i = 0; i < o->n_outputs; i++) {
        struct qp_error err = {0};
        enum out_format f = format_for(o, o->outputs[i]);
        if (out_write_file(p, n, f, &wo, o->outputs[i], &err) != 0) {
            fprintf(stderr, "qprof report: %s\n", err.msg);
            rc = -1;
        } else if (strcmp(o->outputs[i], "-") != 0) {
            fprintf(stderr, "qprof report: wrote %zu stacks (%" PRIu64 " samples) to %s\n",
                    prof_agg_unique(agg), prof_agg_total(agg), o->outputs[i]);
        }
    }
    return rc;
}

/* What the recording run said about the guest's state (the record's notes), said again: a
 * profile of a guest that was nearly frozen or paused by someone else must not look clean. */
/* The notes are the record's text (a record may come from anyone, its warnings quote the
 * guest): printed with control characters escaped, so escape sequences reach no terminal. */
static const struct run_note {
    const char *key, *before, *after;
} run_notes[] = {
    {"warning=", "the recording run warned: ", ""},
    {"guest_running_pct=", "the guest ran ", "% of the sampling time"},
    {"address_space=", "address space ", ""},
    {"paused_by_other_intervals=", "the guest was paused by another client for ",
     " sampling intervals"},
};

static void print_run_notes(const char *meta, FILE *f)
{
    char **lines = g_strsplit(meta ? meta : "", "\n", -1);
    for (char **l = lines; *l; l++) {
        for (size_t i = 0; i < sizeof run_notes / sizeof run_notes[0]; i++) {
            const struct run_note *n = &run_notes[i];
            if (!g_str_has_prefix(*l, n->key))
                continue;
            fprintf(f, "qprof report: %s", n->before);
            qp_file_fput_escaped(*l + strlen(n->key), f);
            fprintf(f, "%s\n", n->after);
        }
    }
    g_strfreev(lines);
}

static int run_report(struct report_options *o)
{
    out_profile *p = NULL;
    char *meta = NULL;
    struct qp_error err = {0};
    if (out_record_read(o->input, &p, &meta, &err) != 0) {
        fprintf(stderr, "qprof report: %s\n", err.msg);
        return PROF_EXIT_RUNTIME;
    }
    size_t recorded = out_profile_sample_count(p);
    out_profile_filter(p, keep, o);
    struct report_symbols rs = {.profile = p};
    int rc = load_symbols(&rs, o) == 0 ? PROF_EXIT_OK : PROF_EXIT_RUNTIME;
    out_names *n = out_names_new(p, symbolize, &rs);
    prof_agg *agg = prof_agg_new();
    if (rc == PROF_EXIT_OK && prof_agg_from_profile(agg, p, n, o->per_cpu, &err) != 0) {
        fprintf(stderr, "qprof report: %s\n", err.msg);
        rc = PROF_EXIT_RUNTIME;
    }
    if (rc == PROF_EXIT_OK && write_all(o, p, n, agg) != 0)
        rc = PROF_EXIT_RUNTIME;
    if (rc == PROF_EXIT_OK) {
        FILE *f = o->n_outputs ? stderr : stdout;
        fprintf(f, "\nqprof report: %s: %zu samples recorded, %zu kept by the filters\n", o->input,
                recorded, out_profile_sample_count(p));
        print_run_notes(meta, f);
        prof_agg_print_report(agg, f, o->top);
    }
    prof_agg_free(agg);
    out_names_free(n);
    free_symbols(&rs);
    out_profile_free(p);
    g_free(meta);
    return rc;
}

int prof_report_main(int argc, char **argv)
{
    struct report_options o = {.input = "qprof.data",
                               .cpu_mask = UINT64_MAX,
                               .time_to = -1,
                               .top = 10,
                               .pids = g_array_new(FALSE, FALSE, sizeof(uint32_t))};
    int rc = parse(argc, argv, &o);
    if (rc < 0)
        rc = run_report(&o);
    g_array_free(o.pids, TRUE);
    return rc;
}
