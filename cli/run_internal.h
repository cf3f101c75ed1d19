/* Private to cli/run*.c: one run's state, shared by
 *   run.c          the sampling loop (signals, jittered deadlines, samples, the record file) and
 *                  the run's start and finish (outputs, --exact)
 *   run_health.c   what the loop checks as it goes (slow samples, a frozen guest, lost samples,
 *                  failures, a guest paused by someone else) and says once, on stderr and into
 *                  the record
 *   run_summary.c  the summary printed at the end
 * run.c calls the other two; they call nothing back. */
#ifndef RUN_INTERNAL_H
#define RUN_INTERNAL_H

#include "cli_internal.h"

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Failed samples by kind: the codes listed in run_health.c, and "other". */
#define RUN_FAILURE_KINDS 7
extern const char *const run_failure_names[RUN_FAILURE_KINDS];

struct run_state {
    const struct prof_options *o;
    prof_session *session;
    const prof_target *target; /* the session's, opened by setup.c beside it */
    prof_agg *agg; /* the folded view of the profile, for the summary (made at the end) */
    double last_sample;
    out_recorder *recorder; /* with a record file: written as sampling goes */
    double last_flush;
    bool record_failed;
    struct prof_hist paused;
    uint64_t samples, failed, round_trips;
    uint64_t failed_by_code[RUN_FAILURE_KINDS]; /* indexed by failure_slot */
    char last_failure[QP_ERROR_MSG_MAX];
    double start, last_progress;
    double first_done; /* when the first sample was in: one-time loads (a Linux guest's kernel
                          tables) are behind it */
    bool warned_slow, qemu_gone, paused_by_other;
    bool warned_cost, warned_frozen, warned_lost;
    uint64_t paused_total_ns;  /* the guest's paused time summed over the samples */
    double first_paused_ms[5]; /* samples 2 to 6 (the first may load a kernel's tables) */
    GString *warnings;         /* every warning given, for the record */
    int consecutive_failures;
    uint64_t paused_intervals; /* intervals skipped while someone else had the guest paused */
    bool have_exact;           /* --exact's counts were taken (exact) */
    struct prof_exact_summary exact;
    const struct prof_run_hooks *hooks; /* a live view's (qprof top), NULL for a plain run */
};

/* ---- run_health.c ---- */
/* A warning on stderr (once per kind, the caller decides) that also goes into the record. */
void run_warn(struct run_state *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void run_progress_line(struct run_state *r, double now, bool final);
void run_warn_if_slow(struct run_state *r, double now);
void run_check_first_samples_cost(struct run_state *r);
void run_check_frozen(struct run_state *r, double now);
void run_check_lost(struct run_state *r);
/* A failed sample: counted by kind; the run stops when the connection is gone or after 10 in a
 * row (r->qemu_gone). */
void run_record_failure(struct run_state *r, const struct qp_error *err);
void run_note_paused_by_other(struct run_state *r, bool paused);

/* ---- run_summary.c ---- */
void run_print_summary(const struct run_state *r, double elapsed, FILE *f);
/* --exact: the totals and the top functions by instructions. */
void run_print_exact(const struct run_state *r, out_names *names, FILE *f);

#endif
