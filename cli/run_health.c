/* What the sampling loop checks as it goes and says once: samples slower than the interval or
 * far dearer than the transport's requests, a guest nearly frozen by sampling, a capturing
 * target's lost samples, failures (and when they end the run), a guest someone else paused. */
#include "qp_file.h"
#include "run_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const int failure_codes[] = {-ETIMEDOUT, -EPIPE, -EREMOTEIO, -EPROTO, -EFAULT, -EINTR, -EIO};
const char *const run_failure_names[RUN_FAILURE_KINDS] = {"QEMU did not answer in time",
                                                          "connection lost",
                                                          "QEMU rejected a command",
                                                          "malformed reply",
                                                          "guest memory unreadable",
                                                          "interrupted",
                                                          "other"};
_Static_assert(sizeof failure_codes / sizeof failure_codes[0] == RUN_FAILURE_KINDS,
               "a name for every failure code");

/* The slot of a failure code; the last slot ("other") takes every code not listed. */
static int failure_slot(int code)
{
    for (int i = 0; i < RUN_FAILURE_KINDS - 1; i++)
        if (failure_codes[i] == code)
            return i;
    return RUN_FAILURE_KINDS - 1;
}

static bool connection_lost(int code)
{
    return code == -EPIPE || code == -ECONNRESET || code == -ENOTCONN || code == -ECONNREFUSED;
}

void run_progress_line(struct run_state *r, double now, bool final)
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

void run_warn_if_slow(struct run_state *r, double now)
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

void run_warn(struct run_state *r, const char *fmt, ...)
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
void run_check_first_samples_cost(struct run_state *r)
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
    run_warn(
        r,
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
void run_check_frozen(struct run_state *r, double now)
{
    if (r->warned_frozen || r->samples < 20 || now - r->start < 0.5 ||
        prof_target_captures(r->target))
        return;
    double share = running_share(r, now);
    if (share >= PROF_FROZEN_SHARE)
        return;
    r->warned_frozen = true;
    run_warn(
        r,
        "the guest ran only %.0f%% of the time while qprof sampled (paused %.1f ms per sample "
        "at a %.3g ms interval): samples of a nearly frozen guest land where the last one did, "
        "so this profile is not trustworthy; raise --interval or make samples cheaper",
        100 * share, prof_hist_percentile(&r->paused, 50) / 1e6, r->o->interval_ms);
}

/* A capturing target drops what its ring cannot hold while qprof falls behind: said once, as
 * it happens (the summary gives the total). */
void run_check_lost(struct run_state *r)
{
    if (r->warned_lost || !prof_target_captures(r->target))
        return;
    uint64_t lost = prof_target_lost(r->target);
    if (!lost)
        return;
    r->warned_lost = true;
    run_warn(r,
             "the plugin's ring was full: %" PRIu64 " samples lost so far (qprof fell behind the "
             "guest; the guest was not slowed); the summary gives the total",
             lost);
}

void run_record_failure(struct run_state *r, const struct qp_error *err)
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
void run_note_paused_by_other(struct run_state *r, bool paused)
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
