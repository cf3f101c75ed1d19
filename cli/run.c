/* The qprof run: the sampling loop with jittered intervals and signals, then the outputs (the
 * health checks are run_health.c's, the summary run_summary.c's). */
#define _GNU_SOURCE /* ppoll */
#include "run_internal.h"
#include "qp_file.h"
#include "qp_log.h"

#include <errno.h>
#include <glib.h>
#include <stdarg.h>
#include <stdlib.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

/* The stop signals stay blocked except while the loop sleeps (sleep_until unblocks them
 * atomically with ppoll): a signal that arrived just before the sleep would otherwise be noticed
 * only after a whole --interval. A sample in progress always finishes, so the guest is resumed
 * before qprof acts on the signal. */
static sigset_t sleep_mask;

static void install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaction(stop_signals[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void block_stop_signals(void)
{
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaddset(&block, stop_signals[i]);
    sigprocmask(SIG_BLOCK, &block, &sleep_mask);
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigdelset(&sleep_mask, stop_signals[i]);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sleeps until deadline or a stop signal, whichever comes first. */
static void sleep_until(double deadline)
{
    double left = deadline - now_s();
    if (left < 0)
        left = 0;
    struct timespec ts = {(time_t)left, (long)((left - (time_t)left) * 1e9)};
    ppoll(NULL, 0, &ts, &sleep_mask); /* a pending signal returns at once with EINTR */
}

/* The jitter keeps samples from locking onto a periodic guest timer (which would over- or
 * under-sample whatever runs at that phase). */
double prof_next_deadline(double prev_deadline, double now, double interval_s, double u01,
                          double u02)
{
    double next = prev_deadline + interval_s * (0.5 + u01);
    if (next < now)
        next = now + interval_s * 0.5 * u02;
    return next;
}

static double uniform01(void)
{
    return (double)random() / RAND_MAX;
}

static void take_sample(struct run_state *r)
{
    struct qp_error err = {0};
    bool taken = false;
    double now = now_s();
    /* A captured sample stands for one interval of its vCPU's time, wherever it was drained. */
    bool captured = prof_target_captures(r->target);
    double weight = r->samples && !captured ? now - r->last_sample : r->o->interval_ms / 1000.0;
    if (prof_session_sample(r->session, (uint64_t)((now - r->start) * 1e9),
                            (uint64_t)(weight * 1e9), &taken, &err) != 0) {
        if (!(stop_signal && err.code == -EINTR))
            run_record_failure(r, &err);
        return;
    }
    r->consecutive_failures = 0;
    run_note_paused_by_other(r, !taken);
    if (!taken)
        return;
    r->last_sample = now;
    if (!r->samples++)
        r->first_done = now_s();
    /* a capturing target's repeated delivery of one capture (its periods) cost nothing more */
    if (!captured || prof_session_last_stats(r->session)->paused_ns)
        prof_hist_add(&r->paused, prof_session_last_stats(r->session)->paused_ns);
    r->paused_total_ns += prof_session_last_stats(r->session)->paused_ns;
    r->round_trips += prof_session_last_stats(r->session)->round_trips;
    if (r->samples >= 2 && r->samples <= 6)
        r->first_paused_ms[r->samples - 2] = prof_session_last_stats(r->session)->paused_ns / 1e6;
}

/* The record file gets what was sampled at least once a second, so that a run killed outright
 * loses at most the last second. */
static void record_some(struct run_state *r, double now)
{
    if (!r->recorder || r->record_failed || now - r->last_flush < 1.0)
        return;
    struct qp_error err = {0};
    if (out_recorder_sync(r->recorder, prof_session_profile(r->session), &err) != 0 ||
        out_recorder_flush(r->recorder, &err) != 0) {
        r->record_failed = true;
        fprintf(stderr, "\nqprof: %s: %s\n", r->o->record, err.msg);
    }
    r->last_flush = now;
}

static void sampling_loop(struct run_state *r)
{
    double interval = r->o->interval_ms / 1000.0;
    double end = r->o->duration_s > 0 ? r->start + r->o->duration_s : 0;
    double next = r->start;
    uint64_t limit = r->o->max_samples;
    block_stop_signals();
    while (!stop_signal && !r->qemu_gone && !(limit && r->samples >= limit)) {
        double now = now_s();
        if (end && now >= end)
            break;
        take_sample(r);
        if (limit && r->samples >= limit)
            break;
        now = now_s();
        if (r->hooks && r->hooks->tick(r->hooks->ctx, r, now))
            break;
        record_some(r, now);
        run_progress_line(r, now, false);
        run_warn_if_slow(r, now);
        run_check_first_samples_cost(r);
        run_check_frozen(r, now);
        run_check_lost(r);
        if (prof_target_captures(r->target)) {
            sleep_until(now); /* only to take a pending stop signal: the target paces itself */
            continue;
        }
        next = prof_next_deadline(next, now, interval, uniform01(), uniform01());
        if (end && next > end)
            next = end;
        sleep_until(next);
    }
}

static int one_shot(prof_session *s)
{
    struct qp_error err = {0};
    if (prof_session_one_shot(s, stdout, &err) != 0) {
        fprintf(stderr, "qprof: %s\n", err.msg);
        return PROF_EXIT_RUNTIME;
    }
    return PROF_EXIT_OK;
}

static enum out_format format_of(const struct prof_options *o, const char *path)
{
    if (o->format)
        return (enum out_format)out_format_from_name(o->format);
    int f = out_format_from_path(path);
    return f < 0 || f == OUT_RECORD ? OUT_FOLDED : (enum out_format)f;
}

/* --exact: the counts into the profile, at the end (while the guest still runs). */
static bool take_exact_counts(struct run_state *r)
{
    struct qp_error err = {0};
    if (!r->o->exact)
        return true;
    if (prof_session_exact(r->session, &r->exact, &err) != 0) {
        fprintf(stderr, "qprof: --exact: %s\n", err.msg);
        return false;
    }
    r->have_exact = true;
    if (!r->exact.counting)
        fprintf(stderr, "qprof: --exact: the plugin had not put its counters in place yet (no "
                        "vCPU ran since qprof connected): nothing counted\n");
    return true;
}

/* --exact's flat profile beside each folded -o (pprof outputs hold it themselves). */
static bool write_exact_outputs(struct run_state *r, out_names *names)
{
    bool ok = true;
    for (int i = 0; r->have_exact && i < r->o->n_outputs; i++) {
        const char *path = r->o->outputs[i];
        if (format_of(r->o, path) != OUT_FOLDED)
            continue;
        if (strcmp(path, "-") == 0) {
            fprintf(stderr, "qprof: --exact: no flat profile beside -o - (name a file, or a "
                            ".pb.gz)\n");
            continue;
        }
        struct qp_error err = {0};
        char *exact_path = out_exact_path(path);
        if (out_write_exact_file(prof_session_profile(r->session), names, exact_path, &err)) {
            fprintf(stderr, "qprof: %s\n", err.msg);
            ok = false;
        } else {
            fprintf(stderr, "qprof: wrote exact instruction counts of %zu blocks to %s\n",
                    r->exact.blocks, exact_path);
        }
        g_free(exact_path);
    }
    return ok;
}

/* Writes every -o; returns false when one could not be written. */
static bool write_outputs(struct run_state *r, out_names *names)
{
    const struct prof_options *o = r->o;
    struct out_write_opts wo = {.per_cpu = o->per_cpu,
                                .interval_ns = (uint64_t)(o->interval_ms * 1e6)};
    bool ok = true;
    for (int i = 0; i < o->n_outputs; i++) {
        struct qp_error err = {0};
        enum out_format f = format_of(o, o->outputs[i]);
        if (out_write_file(prof_session_profile(r->session), names, f, &wo, o->outputs[i], &err) !=
            0) {
            fprintf(stderr, "qprof: %s\n", err.msg);
            ok = false;
        } else if (strcmp(o->outputs[i], "-") != 0) {
            fprintf(stderr, "qprof: wrote %zu stacks (%" PRIu64 " samples) to %s\n",
                    prof_agg_unique(r->agg), prof_agg_total(r->agg), o->outputs[i]);
        }
    }
    return ok;
}

/* How the run went, for `qprof report` to say again: what the summary says about the guest's
 * state, and every warning given. */
static void record_run_notes(struct run_state *r, double elapsed)
{
    GString *notes = g_string_new(NULL);
    g_string_append_printf(notes, "samples=%" PRIu64 "\nfailed=%" PRIu64 "\n", r->samples,
                           r->failed);
    if (r->samples)
        g_string_append_printf(notes, "guest_running_pct=%.1f\npaused_p50_ms=%.3f\n",
                               100 * prof_guest_running_share(r->paused_total_ns, elapsed),
                               prof_hist_percentile(&r->paused, 50) / 1e6);
    if (r->paused_intervals)
        g_string_append_printf(notes, "paused_by_other_intervals=%" PRIu64 "\n",
                               r->paused_intervals);
    g_string_append(notes, r->warnings->str);
    prof_session_describe_aspaces(r->session, notes);
    out_recorder_notes(r->recorder, notes->str);
    g_string_free(notes, TRUE);
}

static int finish(struct run_state *r)
{
    double elapsed = now_s() - r->start;
    run_progress_line(r, now_s(), true);
    int exit_code = r->qemu_gone ? PROF_EXIT_RUNTIME : PROF_EXIT_OK;
    FILE *summary = r->o->n_outputs || r->o->record ? stderr : stdout;
    bool quiet = r->hooks && r->hooks->summary_with_outputs_only && summary == stdout;
    if (stop_signal)
        fprintf(stderr, "qprof: interrupted by %s after %.1f s; writing what was sampled\n",
                strsignal(stop_signal), elapsed);
    if (!take_exact_counts(r))
        exit_code = PROF_EXIT_RUNTIME;
    /* Names are looked up here, once per distinct PC, for every output and the summary. */
    out_names *names = prof_session_names(r->session);
    struct qp_error err = {0};
    if (prof_agg_from_profile(r->agg, prof_session_profile(r->session), names, r->o->per_cpu,
                              &err) != 0)
        fprintf(stderr, "qprof: %s\n", err.msg);
    if (!write_outputs(r, names) || !write_exact_outputs(r, names))
        exit_code = PROF_EXIT_RUNTIME;
    if (r->recorder) {
        record_run_notes(r, elapsed);
        if (out_recorder_close(r->recorder, prof_session_profile(r->session), &err) != 0 ||
            r->record_failed) {
            if (!r->record_failed)
                fprintf(stderr, "qprof: %s: %s\n", r->o->record, err.msg);
            exit_code = PROF_EXIT_RUNTIME;
        } else {
            fprintf(stderr, "qprof: recorded %" PRIu64 " samples to %s (qprof report -i %s)\n",
                    prof_agg_total(r->agg), r->o->record, r->o->record);
        }
    }
    if (!quiet) {
        run_print_summary(r, elapsed, summary);
        run_print_exact(r, names, summary);
    }
    out_names_free(names);
    return exit_code;
}

static int open_recorder(struct run_state *r)
{
    char *meta = g_strdup_printf("qprof=%s\nqemu=%s\ninterval_ms=%g\n", QPROF_VERSION,
                                 prof_session_qemu_version(r->session), r->o->interval_ms);
    struct qp_error err = {0};
    int rc = out_recorder_open(r->o->record, meta, &r->recorder, &err);
    g_free(meta);
    if (rc != 0)
        fprintf(stderr, "qprof: %s\n", err.msg);
    return rc;
}

/* Before sampling: every output can be created (a long run must not end in a write error). */
static int check_outputs(const struct prof_options *o)
{
    for (int i = 0; i < o->n_outputs; i++) {
        struct qp_error err = {0};
        if (out_check_writable(o->outputs[i], &err) != 0) {
            fprintf(stderr, "qprof: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

/* A machine with more vCPUs than one stop can hold is sampled on its first ones: say so once,
 * before the run, rather than leave the rest silently out of the profile. */
static void warn_vcpu_limit(const prof_target *t)
{
    int n = prof_target_vcpu_count(t);
    if (n > PROF_MAX_VCPUS)
        fprintf(stderr,
                "qprof: the guest has %d vCPUs; qprof samples the first %d (--cpus chooses "
                "among 0-%d)\n",
                n, PROF_MAX_VCPUS, PROF_MAX_VCPUS - 1);
}

prof_session *prof_run_session(prof_run *r)
{
    return r->session;
}

const prof_target *prof_run_target(const prof_run *r)
{
    return r->target;
}

void prof_run_get_status(const prof_run *r, struct prof_run_status *out)
{
    const prof_target *t = r->target;
    *out = (struct prof_run_status){.elapsed_s = now_s() - r->start,
                                    .samples = r->samples,
                                    .failed = r->failed,
                                    .paused_total_ns = r->paused_total_ns,
                                    .captures = prof_target_captures(t),
                                    .paused_by_other = r->paused_by_other,
                                    .qemu_gone = r->qemu_gone,
                                    .warnings = r->warnings->str,
                                    .last_failure = r->last_failure};
}

int prof_main(const struct prof_options *o)
{
    return prof_run_main(o, NULL);
}

int prof_run_main(const struct prof_options *o, const struct prof_run_hooks *hooks)
{
    install_signal_handlers();
    srandom((unsigned)(time(NULL) ^ getpid()));
    struct prof_setup setup = {0};
    struct qp_error err = {0};
    /* Every info message below the session is one --verbose asked for. */
    qp_log_set_threshold(o->verbose ? QP_LOG_DEBUG : QP_LOG_WARN);
    if (!o->one_shot && check_outputs(o) != 0)
        return PROF_EXIT_RUNTIME;
    if (prof_setup_open(o, &setup, &err) != 0) {
        fprintf(stderr, "qprof: %s\n", err.msg);
        return PROF_EXIT_RUNTIME;
    }
    warn_vcpu_limit(setup.target);
    if (o->one_shot) {
        int rc = one_shot(setup.session);
        prof_setup_close(&setup);
        return rc;
    }
    struct run_state r = {.o = o,
                          .session = setup.session,
                          .target = setup.target,
                          .agg = prof_agg_new(),
                          .warnings = g_string_new(NULL),
                          .hooks = hooks};
    if (o->record && open_recorder(&r) != 0) {
        g_string_free(r.warnings, TRUE);
        prof_agg_free(r.agg);
        prof_setup_close(&setup);
        return PROF_EXIT_RUNTIME;
    }
    r.start = now_s();
    if (o->progress && o->max_samples)
        fprintf(stderr, "qprof: taking %" PRIu64 " samples every ~%.3g ms; Ctrl-C stops early\n",
                o->max_samples, o->interval_ms);
    else if (o->progress && o->duration_s > 0)
        fprintf(stderr, "qprof: sampling every ~%.3g ms for %.3g s; Ctrl-C stops early\n",
                o->interval_ms, o->duration_s);
    else if (o->progress)
        fprintf(stderr, "qprof: sampling every ~%.3g ms until Ctrl-C\n", o->interval_ms);
    bool hooks_failed = hooks && hooks->start(hooks->ctx, &r) != 0;
    if (!hooks_failed)
        sampling_loop(&r);
    if (hooks)
        hooks->end(hooks->ctx, &r);
    int rc = finish(&r);
    if (hooks_failed)
        rc = PROF_EXIT_RUNTIME;
    g_string_free(r.warnings, TRUE);
    prof_agg_free(r.agg);
    prof_setup_close(&setup);
    return rc;
}
