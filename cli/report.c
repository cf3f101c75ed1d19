/* `qprof report`: reads a record file and writes any output from it, symbolized offline with
 * the files given now (perf report's habit: record once, report many ways). */
#include "cli_internal.h"
#include "qp_file.h"

#include <errno.h>
#include <getopt.h>
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct report_options {
    const char *input;
    const char *outputs[PROF_MAX_OUTPUTS];
    int n_outputs;
    const char *format;
    struct prof_load_opts load; /* the samples and symbol files (cli_internal.h) */
    bool per_cpu;
    int top;
};

static void report_help(FILE *out)
{
    fprintf(out,
            "Usage: qprof report [-i FILE] [OPTIONS] [-o OUTPUT]...\n"
            "Reads a record file (qprof record -o FILE, or qprof -o FILE.data) and writes the\n"
            "profile in any format, symbolized with the files given now. Prints a summary.\n"
            "\n"
            "  -i, --input FILE       the record file [qprof.data]\n"
            "  -o, --output FILE      as for qprof: .folded/.txt, .speedscope.json, .pb.gz, .svg;\n"
            "                         repeatable; \"-\" is folded stacks on stdout\n"
            "  --format NAME          folded, speedscope, pprof or svg, whatever the names say\n"
            "%s"
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
            prof_load_help);
}

static int usage(const char *what)
{
    return prof_cli_usage("report", what);
}

enum { R_PER_CPU = PROF_LOAD_END, R_TOP, R_FORMAT };

static const struct option report_long[] = {
    {"input", required_argument, NULL, 'i'},
    {"output", required_argument, NULL, 'o'},
    {"format", required_argument, NULL, R_FORMAT},
    PROF_LOAD_LONG_OPTIONS,
    {"per-cpu", no_argument, NULL, R_PER_CPU},
    {"top", required_argument, NULL, R_TOP},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Applies one option; returns -1 when it was fine, else the exit code. */
static int apply(void *opts, int c, const char *arg, const char *flag)
{
    struct report_options *o = opts;
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
    case R_PER_CPU:
        o->per_cpu = true;
        return -1;
    case R_TOP:
        o->top = atoi(arg);
        return o->top >= 0 ? -1 : usage("--top: not a count");
    case 'h':
        report_help(stdout);
        return PROF_EXIT_OK;
    }
    return prof_load_option_or_usage("report", &o->load, c, arg, flag);
}

static int parse(int argc, char **argv, struct report_options *o)
{
    int rc = prof_cli_parse(argc, argv, ":i:o:h", report_long, apply, o);
    if (rc >= 0)
        return rc;
    if (optind < argc)
        return usage("unexpected argument");
    return -1;
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
    out_profile_filter(p, prof_load_keep, &o->load);
    prof_syms *syms = prof_syms_new(p, &o->load, &err);
    int rc = syms ? PROF_EXIT_OK : PROF_EXIT_RUNTIME;
    if (!syms)
        fprintf(stderr, "qprof report: %s\n", err.msg);
    out_names *n = out_names_new(p, syms ? prof_syms_symbolize : NULL, syms);
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
    prof_syms_free(syms);
    out_profile_free(p);
    g_free(meta);
    return rc;
}

int prof_report_main(int argc, char **argv)
{
    struct report_options o = {.input = "qprof.data", .top = 10};
    prof_load_opts_init(&o.load);
    int rc = parse(argc, argv, &o);
    if (rc < 0)
        rc = run_report(&o);
    prof_load_opts_clear(&o.load);
    return rc;
}
