/* The qprof run: sampling loop with jittered intervals, signals, progress, output, summary. */
#define _GNU_SOURCE /* ppoll */
#include "cli_internal.h"
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

static const int failure_codes[] = {-ETIMEDOUT, -EPIPE, -EREMOTEIO, -EPROTO, -EFAULT, -EINTR, -EIO};
static const char *const failure_names[] = {"QEMU did not answer in time",
                                            "connection lost",
                                            "QEMU rejected a command",
                                            "malformed reply",
                                            "guest memory unreadable",
                                            "interrupted",
                                            "other"};

#define N_FAILURE_KINDS (int)(sizeof failure_names / sizeof failure_names[0])
_Static_assert(sizeof failure_codes / sizeof failure_codes[0] == N_FAILURE_KINDS,
               "a name for every failure code");

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
    uint64_t failed_by_code[N_FAILURE_KINDS]; /* indexed by failure_slot */
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

/* The slot of a failure code; the last slot ("other") takes every code not listed. */
static int failure_slot(int code)
{
    for (int i = 0; i < N_FAILURE_KINDS - 1; i++)
        if (failure_codes[i] == code)
            return i;
    return N_FAILURE_KINDS - 1;
}

static bool connection_lost(int code)
{
    return code == -EPIPE || code == -ECONNRESET || code == -ENOTCONN || code == -ECONNREFUSED;
}

static void progress_line(struct run_state *r, double now, bool final)
{
    if (!r->o->progress || (!final && now - r->last_progress < 0.25))
        return;
    r->last_progress = now;
    double elapsed = now - r->start;
    fprintf(stderr, "\rqprof: %6.1f s  %8" PRIu64 " samples  %7.1f/s  paused p50 %.2f ms%s",
            elapsed, r->samples, elapsed > 0 ? r->samples / elapsed : 0.0,
            prof_hist_percentile(&r->paused, 50) / 1e6, final ? "\n" : "   ");
    fflush(stderr);
}

static void warn_if_slow(struct run_state *r, double now)
{
    double elapsed = now - r->first_done;
    double target = 1000.0 / r->o->interval_ms;
    if (r->warned_slow || r->samples < 20 || elapsed < 0.5 || r->paused_intervals ||
        prof_target_captures(r->target)) /* paced by the guest's own vCPU time */
        return;
    double achieved = (r->samples - 1) / elapsed;
    if (achieved < 0.8 * target) {
        r->warned_slow = true;
        if (r->o->progress)
            fputc('\n', stderr);
        fprintf(stderr,
                "qprof: a sample takes longer than the %.3g ms interval: achieving %.0f "
                "samples/s instead of %.0f\n",
                r->o->interval_ms, achieved, target);
    }
}

/* A warning on stderr (once per kind, the caller decides) that also goes into the record. */
static void warn(struct run_state *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct run_state *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (r->o->progress)
        fputc('\n', stderr);
    fputs("qprof: ", stderr); /* a warning may quote the guest: escaped, as report prints it */
    qp_file_fput_escaped(text, stderr);
    fputc('\n', stderr);
    g_string_append_printf(r->warnings, "warning=%s\n", text);
    g_free(text);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* After the first few samples: is a sample far dearer than this transport's requests usually
 * are? Over TCP that was Nagle's algorithm meeting delayed ACKs (40 ms a reply); whatever the
 * cause, a user must not wait for the summary to learn that the guest is crawling. */
static void check_first_samples_cost(struct run_state *r)
{
    if (prof_target_captures(r->target))
        return; /* nothing waits on a transport */
    if (r->warned_cost || r->samples != 6)
        return;
    r->warned_cost = true;
    double sorted[5];
    memcpy(sorted, r->first_paused_ms, sizeof sorted);
    qsort(sorted, 5, sizeof sorted[0], compare_doubles);
    const prof_target *t = r->target;
    double trips = (double)r->round_trips / (double)r->samples;
    double usual = prof_target_usual_round_trip_ms(t);
    if (!prof_paused_far_above_usual(sorted[2], trips, usual))
        return;
    warn(r,
         "each sample pauses the guest for %.1f ms, far above the ~%.1f ms that %.0f %s usually "
         "take: the connection to QEMU is slow (a remote or throttled link, a proxy, a TCP peer "
         "that delays its ACKs) or this host is overloaded; the guest crawls while qprof samples "
         "and the profile will be sparse",
         sorted[2], trips * usual, trips, prof_target_round_trip_name(t));
}

/* The share of wall time the guest ran since sampling began. */
static double running_share(const struct run_state *r, double now)
{
    return prof_guest_running_share(r->paused_total_ns, now - r->start);
}

/* A guest that barely runs between samples is caught at the same instruction every time: the
 * profile looks confident and is wrong. */
static void check_frozen(struct run_state *r, double now)
{
    if (r->warned_frozen || r->samples < 20 || now - r->start < 0.5 ||
        prof_target_captures(r->target))
        return;
    double share = running_share(r, now);
    if (share >= PROF_FROZEN_SHARE)
        return;
    r->warned_frozen = true;
    warn(r,
         "the guest ran only %.0f%% of the time while qprof sampled (paused %.1f ms per sample "
         "at a %.3g ms interval): samples of a nearly frozen guest land where the last one did, "
         "so this profile is not trustworthy; raise --interval or make samples cheaper",
         100 * share, prof_hist_percentile(&r->paused, 50) / 1e6, r->o->interval_ms);
}

/* A capturing target drops what its ring cannot hold while qprof falls behind: said once, as
 * it happens (the summary gives the total). */
static void check_lost(struct run_state *r)
{
    if (r->warned_lost || !prof_target_captures(r->target))
        return;
    uint64_t lost = prof_target_lost(r->target);
    if (!lost)
        return;
    r->warned_lost = true;
    warn(r,
         "the plugin's ring was full: %" PRIu64 " samples lost so far (qprof fell behind the "
         "guest; the guest was not slowed); the summary gives the total",
         lost);
}

static void record_failure(struct run_state *r, const struct qp_error *err)
{
    r->failed++;
    r->failed_by_code[failure_slot(err->code)]++;
    r->consecutive_failures++;
    g_strlcpy(r->last_failure, err->msg, sizeof r->last_failure);
    if (r->o->verbose)
        fprintf(stderr, "\nqprof: sample failed: %s\n", err->msg);
    if (connection_lost(err->code) || r->consecutive_failures >= 10) {
        r->qemu_gone = true;
        if (r->o->progress)
            fputc('\n', stderr);
        fprintf(stderr, "qprof: stopping: %s\n", err->msg);
    }
}

/* Someone else paused the guest: there is nothing to profile, and qprof must not resume what it
 * did not pause. Says so once per pause. */
static void note_paused_by_other(struct run_state *r, bool paused)
{
    if (paused && !r->paused_by_other) {
        if (r->o->progress)
            fputc('\n', stderr);
        fprintf(stderr, "qprof: the guest is paused by another client: not sampling until it "
                        "runs again (qprof leaves it paused)\n");
    } else if (!paused && r->paused_by_other) {
        if (r->o->progress)
            fputc('\n', stderr);
        fprintf(stderr, "qprof: the guest runs again: sampling\n");
    }
    r->paused_by_other = paused;
    /* a capturing target counts a pause's intervals from QEMU's stamps, not from these calls */
    const prof_target *t = r->target;
    if (prof_target_captures(t))
        r->paused_intervals = prof_target_paused_intervals(t);
    else if (paused)
        r->paused_intervals++;
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
            record_failure(r, &err);
        return;
    }
    r->consecutive_failures = 0;
    note_paused_by_other(r, !taken);
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
        progress_line(r, now, false);
        warn_if_slow(r, now);
        check_first_samples_cost(r);
        check_frozen(r, now);
        check_lost(r);
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

static void print_failures(const struct run_state *r, FILE *f)
{
    if (!r->failed)
        return;
    fprintf(f, "failed samples: %" PRIu64 " (", r->failed);
    const char *sep = "";
    for (int i = 0; i < N_FAILURE_KINDS; i++) {
        if (r->failed_by_code[i]) {
            fprintf(f, "%s%s: %" PRIu64, sep, failure_names[i], r->failed_by_code[i]);
            sep = ", ";
        }
    }
    fputs("); last: ", f);
    qp_file_fput_escaped(r->last_failure, f);
    fputc('\n', f);
}

static void print_truncations(const struct prof_stack_counters *c, FILE *f)
{
    uint64_t total = 0;
    for (int i = 0; i < UNW_STOP_COUNT; i++)
        total += c->truncated[i];
    if (!total)
        return;
    fprintf(f, "truncated stacks: %" PRIu64 " (", total);
    const char *sep = "";
    for (int i = 0; i < UNW_STOP_COUNT; i++) {
        if (c->truncated[i]) {
            fprintf(f, "%s%s: %" PRIu64, sep, unw_stop_str(i), c->truncated[i]);
            sep = ", ";
        }
    }
    fprintf(f, ")\n");
}

/* Kernel stacks the OS adapter unwound (Linux: ORC): how many reached where a kernel stack
 * starts (the entry from user mode, or a kernel thread's or the boot stack's first frame). */
static void print_kernel_completeness(const struct prof_stack_counters *c, FILE *f)
{
    if (!c->kernel_stacks)
        return;
    fprintf(f,
            "kernel stacks by %s: %" PRIu64
            ", complete (reach a user entry or a task's start): %.1f%%\n",
            c->kernel_stacks_by_fp == c->kernel_stacks ? "frame pointers"
            : c->kernel_stacks_by_fp                   ? "ORC or frame pointers"
                                                       : "ORC",
            c->kernel_stacks, 100.0 * c->kernel_stacks_complete / c->kernel_stacks);
}

static void print_sysroot_use(const struct prof_stack_counters *c,
                              const struct prof_sysroot_counters *sr, FILE *f)
{
    if (c->sysroot_stacks)
        fprintf(f,
                "user stacks by --sysroot: %" PRIu64 ", complete (reach the outermost frame): "
                "%.1f%%\n",
                c->sysroot_stacks, 100.0 * c->sysroot_stacks_complete / c->sysroot_stacks);
    if (c->memory_stacks)
        fprintf(f,
                "user stacks by the guest's own .eh_frame: %" PRIu64
                ", complete (reach the outermost frame): %.1f%%\n",
                c->memory_stacks, 100.0 * c->memory_stacks_complete / c->memory_stacks);
    if (sr->sysroot_files_unused)
        fprintf(f,
                "guest files not used from --sysroot (missing there, or another build): %" PRIu64
                "\n",
                sr->sysroot_files_unused);
}

/* Under TCG a share of these well above the entry code's real cost means the stops were taken
 * late and the code that runs just after system calls or faults is under-sampled. */
static void print_kernel_entries(const struct prof_stack_counters *c, uint64_t vcpu_samples,
                                 FILE *f)
{
    if (!c->at_kernel_entry)
        return;
    double share = vcpu_samples ? 100.0 * c->at_kernel_entry / vcpu_samples : 0;
    fprintf(f, "on the first instruction of a kernel entry from user space: %" PRIu64 " (%.1f%%)\n",
            c->at_kernel_entry, share);
    if (share >= 1.0)
        fprintf(f,
                "  under TCG most of these are stops QEMU took when the vCPU entered the kernel,\n"
                "  not where it was: code right after system calls is under-sampled\n"
                "  (docs/accuracy.md: \"TCG and the moment of a sample\")\n");
}

/* A capturing target's samples by how long their trigger waited, and the ones that waited across
 * a kernel entry's delivery and were moved back to the context it interrupted (sampler/skid.h,
 * docs/plugin.md "The moment of a sample"). */
static void print_flag_ages(const struct prof_stack_counters *c, FILE *f)
{
    static const char *const trigger[2] = {"timer", "counter"};
    static const char *const bucket[PROF_AGE_BUCKETS] = {"<10us",  "<20us", "<50us", "<100us",
                                                         "<200us", "<1ms",  "<10ms", ">=10ms"};
    for (int t = 0; t < 2; t++) {
        uint64_t all = 0;
        for (int b = 0; b < PROF_AGE_BUCKETS; b++)
            all += c->flag_age[t][b];
        if (!all)
            continue;
        fprintf(f, "%s samples by how long they waited for the vCPU:", trigger[t]);
        for (int b = 0; b < PROF_AGE_BUCKETS; b++)
            fprintf(f, " %s %" PRIu64, bucket[b], c->flag_age[t][b]);
        fprintf(f, "\n  of them on the first instruction of a kernel entry from user space:");
        for (int b = 0; b < PROF_AGE_BUCKETS; b++)
            fprintf(f, " %s %" PRIu64, bucket[b], c->entry_flag_age[t][b]);
        fputc('\n', f);
    }
    if (c->skid_moved || c->skid_unplaced)
        fprintf(f,
                "samples moved from a kernel entry to the interrupted context: %" PRIu64
                " (not placed, left marked: %" PRIu64 ")\n",
                c->skid_moved, c->skid_unplaced);
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* One line per sampled vCPU when there are several: how busy each was and with what, the way
 * perf's --sort cpu shows an imbalance. */
static void print_per_cpu(const struct prof_capture_counters *c, FILE *f)
{
    int sampled = 0;
    for (int i = 0; i < c->cpus_seen; i++) {
        const struct prof_cpu_counts *n = &c->cpu[i];
        sampled += n->user + n->kernel + n->idle + n->boot > 0;
    }
    if (sampled < 2)
        return;
    fprintf(f, "per vCPU (busy = user + kernel):\n");
    for (int i = 0; i < c->cpus_seen; i++) {
        const struct prof_cpu_counts *n = &c->cpu[i];
        uint64_t all = n->user + n->kernel + n->idle + n->boot;
        if (!all)
            continue;
        fprintf(f, "  cpu%-3d busy %5.1f%% (user %5.1f%%, kernel %5.1f%%)  idle %5.1f%%", i,
                pct(all - n->idle, all), pct(n->user, all), pct(n->kernel + n->boot, all),
                pct(n->idle, all));
        const char *sep = "  ";
        for (int k = 0; k < PROF_CPU_TOP_PROCS && n->procs[k].count; k++) {
            fputs(sep, f);
            qp_file_fput_escaped(n->procs[k].comm, f); /* the guest's name for it */
            fprintf(f, " (%" PRIu32 ") %.1f%%", n->procs[k].pid, pct(n->procs[k].count, all));
            sep = ", ";
        }
        if (n->other_procs)
            fprintf(f, "%sothers %.1f%%", sep, pct(n->other_procs, all));
        fputc('\n', f);
    }
}

/* A capturing target: what capturing cost the vCPUs' threads, and what it could not take. */
static void print_capture_costs(const struct run_state *r, double elapsed, FILE *f)
{
    const prof_target *t = r->target;
    fprintf(f,
            "captured inside QEMU, the guest never stopped: capture cost on the vCPU thread p50 "
            "%.1f us, p99 %.1f us, max %.1f us; samples lost to a full ring: %" PRIu64
            " (transport: %s, memory: %s)\n",
            prof_hist_percentile(&r->paused, 50) / 1e3, prof_hist_percentile(&r->paused, 99) / 1e3,
            r->paused.max_ns / 1e3, prof_target_lost(t), prof_target_transport(t),
            prof_target_describe(t));
    fprintf(f, "capture time, summed over the vCPUs: %.2f%% of the sampling time\n",
            100 * (1 - prof_guest_running_share(r->paused_total_ns, elapsed)));
    const char *trigger = prof_target_trigger(t);
    if (trigger)
        fprintf(f, "plugin trigger: %s\n", trigger);
    if (prof_target_missed(t))
        fprintf(f,
                "intervals without a sample because the host did not run a vCPU thread, or the "
                "plugin's timer, in time: %" PRIu64
                " (an overcommitted host; the vCPUs' counts differ by that)\n",
                prof_target_missed(t));
}

/* A stopping target: how long the guest stood still. */
static void print_pause_costs(const struct run_state *r, double elapsed, FILE *f)
{
    fprintf(f,
            "guest paused per sample: p50 %.3f ms, p99 %.3f ms, max %.3f ms; %.1f %s per "
            "sample (transport: %s, memory: %s)\n",
            prof_hist_percentile(&r->paused, 50) / 1e6, prof_hist_percentile(&r->paused, 99) / 1e6,
            r->paused.max_ns / 1e6, (double)r->round_trips / r->samples,
            prof_target_round_trip_name(r->target), prof_target_transport(r->target),
            prof_target_describe(r->target));
    double share = prof_guest_running_share(r->paused_total_ns, elapsed);
    fprintf(f, "guest running: %.1f%% of the sampling time (paused the rest for samples)%s\n",
            100 * share,
            share < PROF_FROZEN_SHARE ? ": nearly frozen, the profile is not trustworthy" : "");
}

static void print_summary(const struct run_state *r, double elapsed, FILE *f)
{
    const struct prof_capture_counters *c = prof_session_capture_counters(r->session);
    const struct prof_stack_counters *st = prof_session_stack_counters(r->session);
    fprintf(f, "\nqprof: %" PRIu64 " samples in %.2f s (%.1f samples/s), %" PRIu64 " failed\n",
            r->samples, elapsed, elapsed > 0 ? r->samples / elapsed : 0.0, r->failed);
    print_failures(r, f);
    if (r->samples && prof_target_captures(r->target))
        print_capture_costs(r, elapsed, f);
    else if (r->samples)
        print_pause_costs(r, elapsed, f);
    fprintf(f, "vCPU stacks: %" PRIu64 " (idle %" PRIu64 "), unique stacks: %zu\n", c->vcpu_samples,
            c->idle, prof_agg_unique(r->agg));
    if (c->dropped_by_filter)
        fprintf(f, "dropped by --%s: %" PRIu64 "\n",
                r->o->mode_filter == PROF_KERNEL_ONLY ? "kernel-only" : "user-only",
                c->dropped_by_filter);
    if (st->no_process_info)
        fprintf(f,
                "stacks without process information (no qprof_abi, no slot for the vCPU, or "
                "mid-update): %" PRIu64 "\n",
                st->no_process_info);
    if (r->paused_intervals)
        fprintf(f, "guest paused by another client: %" PRIu64 " sampling intervals skipped\n",
                r->paused_intervals);
    /* QMP's RESET events count every reset of the machine (QEMU reports two for one
     * system_reset of a SeaBIOS guest); the OS adapter's own marks (a new boot_id, vmcoreinfo
     * bytes that changed) count what a gdbstub alone cannot see, but also fire while a new boot
     * settles (a vmcoreinfo found mid-boot, then moved), so they count only without QMP. */
    uint64_t resets = c->machine_resets ? c->machine_resets : c->resets;
    if (resets)
        fprintf(f, "guest reset %" PRIu64 " time(s) during the run (process caches cleared)\n",
                resets);
    if (c->reset_straddles)
        fprintf(f, "samples dropped because the guest reset while they were read: %" PRIu64 "\n",
                c->reset_straddles);
    if (c->abi_rejected) {
        fprintf(f, "qprof_abi rejected: %" PRIu64 " times; last: ", c->abi_rejected);
        qp_file_fput_escaped(c->abi_reject_reason, f);
        fputc('\n', f);
    }
    if (c->budget_hits)
        fprintf(f,
                "paused-time budget hit in %" PRIu64 " samples (reads cut at %u requests / %zu "
                "KiB per sample)\n",
                c->budget_hits, PROF_BUDGET_REQUESTS, PROF_BUDGET_BYTES >> 10);
    if (c->kstack_window_grown)
        fprintf(f,
                "kernel stack window (--os none) grew %" PRIu64 " time(s): a kernel stack reached "
                "past it\n",
                c->kstack_window_grown);
    uint64_t roots_reused = prof_session_aspace_counters(r->session)->aspace_roots_reused;
    if (roots_reused)
        fprintf(f,
                "address-space roots given to a new process (--os none, their code changed): "
                "%" PRIu64 "\n",
                roots_reused);
    print_per_cpu(c, f);
    print_truncations(st, f);
    print_kernel_completeness(st, f);
    print_sysroot_use(st, prof_session_sysroot_counters(r->session), f);
    print_kernel_entries(st, c->vcpu_samples, f);
    print_flag_ages(st, f);
    prof_agg_print_report(r->agg, f, r->o->top);
}

/* --exact: the totals and the top functions by instructions. */
static void print_exact(const struct run_state *r, out_names *names, FILE *f)
{
    const struct prof_exact_summary *e = &r->exact;
    if (!r->have_exact || !e->counting)
        return;
    fprintf(f,
            "exact instructions (--exact, counted for %.2f s, %zu blocks): %" PRIu64
            " (kernel %.1f%%, user %.1f%%",
            e->counted_s, e->blocks, e->insns, pct(e->kernel, e->insns), pct(e->user, e->insns));
    if (e->shared_user)
        fprintf(f, ", code several binaries share %.1f%%", pct(e->shared_user, e->insns));
    if (e->unknown_user)
        fprintf(f, ", user code of no --user-dir binary %.1f%%", pct(e->unknown_user, e->insns));
    if (e->unplaced)
        fprintf(f, ", blocks beyond the plugin's table %.1f%%", pct(e->unplaced, e->insns));
    fprintf(f, ")\n");
    size_t n = 0;
    struct out_exact_line *lines = out_exact_lines(prof_session_profile(r->session), names, &n);
    if (n && r->o->top)
        fprintf(f, "top functions by exact instructions:\n");
    for (size_t i = 0; i < n && i < (size_t)r->o->top; i++)
        fprintf(f, "  %6.2f%%  %14" PRIu64 "  %s;%s\n", pct(lines[i].insns, e->insns),
                lines[i].insns, lines[i].root, lines[i].leaf->name);
    g_free(lines);
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
    progress_line(r, now_s(), true);
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
        print_summary(r, elapsed, summary);
        print_exact(r, names, summary);
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
