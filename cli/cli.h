/* cli: the qprof command line on top of the sampling core. main.c, options.c (every option,
 * --help), run.c (the run: the sampling loop with jittered intervals, signals, progress,
 * outputs, the summary), and one file per offline subcommand: report.c (`qprof report`),
 * diff.c (`qprof diff`), annotate.c (`qprof annotate`), which share load.c (cli_internal.h).
 *
 * Functions returning int return 0 on success or a negative errno-style code and fill the
 * optional err (common/qp_error.h).
 */
#ifndef CLI_H
#define CLI_H

#include "sampler.h"

#include <stdint.h>
#include <stdio.h>

/* Fills o with every option's default. */
void prof_options_init(struct prof_options *o);

enum { PROF_EXIT_OK = 0, PROF_EXIT_RUNTIME = 1, PROF_EXIT_USAGE = 2 };

/* Parses argv into o. Returns -1 when the caller should go on and run, else the exit code to
 * exit with right away (0 after --help/--version, PROF_EXIT_USAGE after a usage error, which
 * has been printed to stderr as one line plus a hint). */
int prof_parse_args(int argc, char **argv, struct prof_options *o);

void prof_print_help(FILE *out);

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

#endif
