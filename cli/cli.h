/* cli: the qprof command line on top of the sampling core. main.c, options.c (every option,
 * --help), setup.c (the target, OS adapter and session chosen from the options; cli_internal.h),
 * run.c (the run: the sampling loop with jittered intervals, signals, progress, outputs; its
 * health checks in run_health.c, the summary in run_summary.c, sharing run_internal.h), and one
 * file per subcommand: report.c (`qprof report`), diff.c
 * (`qprof diff`) and annotate.c (`qprof annotate`), which share load.c (cli_internal.h), and
 * top.c (`qprof top`, riding on run.c's loop through prof_run_hooks; top_view.c and top_text.c
 * are its numbers and its lines).
 *
 * Functions returning int return 0 on success or a negative errno-style code and fill the
 * optional err (common/qp_error.h).
 */
#ifndef CLI_H
#define CLI_H

#include "sampler.h"

#include <stdint.h>
#include <stdio.h>

#define PROF_MAX_USER_DIRS 8
#define PROF_MAX_OUTPUTS   8

/* Every option with its default (prof_options_init). */
struct prof_options {
    const char *qmp_socket;                  /* --qmp-socket, "./qmp-socket" */
    bool qmp_socket_given;                   /* --qmp-socket was on the command line */
    const char *gdb_address;                 /* --gdb: the gdbstub target instead of QMP */
    enum prof_transport transport;           /* --transport, PROF_TRANSPORT_AUTO */
    const char *plugin_address;              /* --plugin: qprof-plugin.so's socket (QEMU 10) */
    uint64_t period_insns;                   /* --period-insns: plugin samples by instructions */
    enum prof_plugin_trigger plugin_trigger; /* --plugin-trigger, AUTO */
    bool plugin_trigger_given;
    const char *output;                    /* the first -o, NULL: summary only; "-": stdout */
    const char *outputs[PROF_MAX_OUTPUTS]; /* every -o: format by extension or --format */
    int n_outputs;
    const char *format;   /* --format: overrides the extensions; NULL */
    bool per_cpu;         /* --per-cpu: stacks rooted at cpuN */
    const char *record;   /* `qprof record`, or an -o naming a .data/.qprof file: the record
                             file, streamed to disk while sampling */
    double interval_ms;   /* --interval, 10 */
    double duration_s;    /* --duration, 5; 0 = until Ctrl-C (or --samples) */
    uint64_t max_samples; /* --samples, 0 = no limit; without --duration no time limit */
    bool one_shot;        /* --one-shot */
    bool show_addresses;  /* --show-addresses */
    bool verbose;         /* --verbose */
    enum prof_mode_filter mode_filter;         /* --kernel-only / --user-only */
    const char *kernel;                        /* --kernel ELF|System.map */
    int64_t kernel_slide;                      /* --kernel-slide */
    const char *user_dirs[PROF_MAX_USER_DIRS]; /* --user-dir, repeatable */
    int n_user_dirs;
    int max_depth;              /* --max-depth, 128 */
    uint64_t cpu_mask;          /* --cpus, all */
    uint64_t abi_addr;          /* --abi-addr, 0: the kernel ELF's qprof_abi symbol */
    const char *memory_backend; /* --memory auto|direct|memsave|hmp */
    enum prof_os_choice os;     /* --os, PROF_OS_AUTO */
    const char *vmcoreinfo;     /* --vmcoreinfo FILE (Linux guests), NULL: scan guest RAM */
    const char *current;        /* --current EXPR (--os none), NULL: none */
    const char *current_pid;    /* --current-pid FIELD, NULL: "pid" */
    const char *current_name;   /* --current-name FIELD, NULL: "name", else "comm" */
    const char *percpu_offsets; /* --percpu-offsets TABLE, NULL: "__per_cpu_offset" */
    const char *user_regs;      /* --user-regs EXPR[:ROLE=FIELD,...] (--os none), NULL: none */
    const char *sysroot; /* --sysroot DIR: the guest's root filesystem, NULL: user leaf only */
    int top;             /* --top, 10 */
    bool progress;       /* live progress line (on a terminal unless --no-progress;
                            --progress forces it, e.g. into a log file) */
    bool exact;          /* --exact: count every instruction per function (--plugin) */
};

/* Fills o with every option's default. */
void prof_options_init(struct prof_options *o);

enum { PROF_EXIT_OK = 0, PROF_EXIT_RUNTIME = 1, PROF_EXIT_USAGE = 2 };

/* Parses argv into o. Returns -1 when the caller should go on and run, else the exit code to
 * exit with right away (0 after --help/--version, PROF_EXIT_USAGE after a usage error, which
 * has been printed to stderr as one line plus a hint). */
int prof_parse_args(int argc, char **argv, struct prof_options *o);

void prof_print_help(FILE *out);

/* `qprof top`'s own options (the rest are prof_options'). */
struct prof_top_options {
    double delay_s;  /* -d: seconds between refreshes [1] */
    double window_s; /* --window: the table's sliding window [5] */
    int count;       /* -n: refreshes before the end, 0 = until q */
    bool batch;      /* --batch: text snapshots instead of the full-screen view */
};

/* Defaults for `qprof top`: prof_options_init's, but sampling until q, no progress line. */
void prof_top_options_init(struct prof_options *o, struct prof_top_options *t);
/* prof_parse_args for `qprof top ARGS` (argv[0] "top"): its options too, --help its own. */
int prof_parse_top_args(int argc, char **argv, struct prof_options *o, struct prof_top_options *t);
void prof_print_top_help(FILE *out);

/* Parses "0,2-3" into a bit mask of vCPUs. */
int prof_parse_cpu_list(const char *text, uint64_t *mask, struct qp_error *err);

/* When to take the next sample (seconds, same clock as now): the previous deadline plus the mean
 * interval jittered by +-50%. When sampling fell behind, a random fraction (under half) of an
 * interval from now instead of at once: a sample started right after the previous one would
 * leave the guest running for the nearly constant time qprof spends between samples, and
 * constant gaps alias with periodic guest work. u01 and u02 are uniform random numbers in [0, 1].
 */
double prof_next_deadline(double prev_deadline, double now, double interval_s, double u01,
                          double u02);

/* `qprof record`: the one -o is the record file (whatever its name); checks and sets
 * o->record. Returns 0, or -1 after printing a usage error. */
int prof_options_for_record(struct prof_options *o);

/* `qprof report ARGS` (argv[0] is "report"): returns the process exit code. */
int prof_report_main(int argc, char **argv);

/* `qprof diff ARGS` (argv[0] is "diff"): returns the process exit code. */
int prof_diff_main(int argc, char **argv);

/* `qprof annotate ARGS` (argv[0] is "annotate"): returns the process exit code. */
int prof_annotate_main(int argc, char **argv);

/* The whole `qprof` run for parsed options: returns the process exit code. */
int prof_main(const struct prof_options *o);

/* ---- The run's seam for a live view (run.c; `qprof top` in top.c) ------------------------ */

/* One run: the session, the sampling loop and its health checks (struct run_state). */
typedef struct run_state prof_run;

/* How the run is doing so far; the strings are borrowed until the next sample. */
struct prof_run_status {
    double elapsed_s;         /* since sampling began */
    uint64_t samples, failed; /* stops (captures) taken, and failed */
    uint64_t paused_total_ns; /* the guest's paused time for samples, summed (a capturing
                                 target: the capture time on the vCPU threads) */
    bool captures;            /* the target captures inside QEMU (the plugin): nothing pauses */
    bool paused_by_other;     /* someone else holds the guest paused: nothing is sampled */
    bool qemu_gone;           /* the connection is lost: the loop ends */
    const char *warnings;     /* every warning given so far, "warning=TEXT\n" lines */
    const char *last_failure; /* the last failed sample's message, "" when none */
};

void prof_run_get_status(const prof_run *r, struct prof_run_status *out);
/* The run's session (borrowed for the run's lifetime, i.e. within the hooks' calls). */
prof_session *prof_run_session(prof_run *r);
/* The target the run samples through (borrowed, as the session). */
const prof_target *prof_run_target(const prof_run *r);

/* A view that rides on the run. The guest is never stopped while a hook runs. */
struct prof_run_hooks {
    /* Once, before the first sample (the session is open). Nonzero: no sampling, exit 1. */
    int (*start)(void *ctx, prof_run *r);
    /* After every sample attempt (and each stop that was someone else's pause); now is the
     * run's monotonic clock in seconds. Returns true to end the run as Ctrl-C would. */
    bool (*tick)(void *ctx, prof_run *r, double now);
    /* Once, after the loop, before the outputs, the record and the summary are written (and
     * after a failed start): what start set up is undone here. */
    void (*end)(void *ctx, prof_run *r);
    void *ctx;
    bool summary_with_outputs_only; /* the summary only beside -o (then on stderr) */
};

/* prof_main with a view riding on the loop (hooks NULL: prof_main). */
int prof_run_main(const struct prof_options *o, const struct prof_run_hooks *hooks);

/* `qprof top ARGS` (argv[0] is "top"): returns the process exit code. */
int prof_top_main(int argc, char **argv);

#endif
