/* The plugin target, pauses someone else made (a monitor's `stop`), from the STOP and RESUME
 * events of --qmp-socket's QMP, which QEMU stamps: the paused part of a vCPU's waiting is no
 * idle time, and intervals the host did not run a vCPU thread are filled by the sample that
 * ended them. */
#include "target_plugin_internal.h"
#include "target_qmp_ram.h"

#include <glib.h>
#include <json.h>
#include <stdio.h>

/* QMP beside the plugin: the RAM file when it is shared (code of user processes), and in any
 * case the events that say when someone else paused the guest. */
int tp_open_qmp(struct target_plugin *t, const char *address, double timeout, struct qp_error *err)
{
    int rc = target_qmp_open_beside(address, timeout, TARGET_QMP_RAM_PREFERRED, &t->qmp, &t->direct,
                                    err);
    if (rc)
        return rc;
    struct qp_error perr = {0};
    if (!t->direct && target_pmem_open_qmp(t->qmp, t->fd, &t->pmem, &perr) != 0)
        fprintf(stderr, "qprof: process memory: %s; user code is not read\n", perr.msg);
    struct timespec mono, real;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &real);
    t->real_minus_mono_us = ((int64_t)real.tv_sec - (int64_t)mono.tv_sec) * 1000000 +
                            ((int64_t)real.tv_nsec - (int64_t)mono.tv_nsec) / 1000;
    t->open_us = g_get_real_time();
    bool running = true;
    if (qmp_query_running(t->qmp, &running, err) != 0)
        return qp_error_prefix(err, "--qmp-socket");
    if (!running)
        t->paused_since_us = 1; /* paused before qprof came: all the waiting so far is pause */
    return 0;
}

/* Takes in the STOP and RESUME events that arrived (no round trip). */
void tp_take_pause_events(struct target_plugin *t)
{
    if (!t->qmp)
        return;
    qmp_guest_running(t->qmp); /* reads what is on the socket */
    struct qmp_event ev;
    while (qmp_pop_event(t->qmp, &ev) == 1) {
        int64_t us = ev.ts_sec * 1000000 + ev.ts_usec;
        if (strcmp(ev.name, "STOP") == 0 && !t->paused_since_us) {
            t->paused_since_us = us > 0 ? us : 1;
        } else if (strcmp(ev.name, "RESUME") == 0 && t->paused_since_us) {
            struct pause_span p = {t->paused_since_us, us};
            t->pauses[t->n_pauses++ % MAX_PAUSES] = p;
            int64_t from = MAX(p.from_us, t->open_us);
            if (p.to_us > from)
                t->paused_us += (uint64_t)(p.to_us - from);
            t->paused_since_us = 0;
        }
        json_object_put(ev.data);
    }
}

static int64_t overlap_us(int64_t a0, int64_t a1, int64_t b0, int64_t b1)
{
    int64_t lo = MAX(a0, b0), hi = MIN(a1, b1);
    return hi > lo ? hi - lo : 0;
}

/* How much of [start_us, end_us) (wall clock) someone else had the guest paused. */
static int64_t paused_within_us(struct target_plugin *t, int64_t start_us, int64_t end_us)
{
    tp_take_pause_events(t);
    int64_t us = 0;
    unsigned n = MIN(t->n_pauses, MAX_PAUSES);
    for (unsigned i = 0; i < n; i++)
        us += overlap_us(start_us, end_us, t->pauses[i].from_us - PAUSE_SLACK_US,
                         t->pauses[i].to_us + PAUSE_SLACK_US);
    if (t->paused_since_us)
        us += overlap_us(start_us, end_us, t->paused_since_us - PAUSE_SLACK_US, INT64_MAX);
    return us;
}

static int64_t wall_us(const struct target_plugin *t, uint64_t mono_ns)
{
    return (int64_t)(mono_ns / 1000) + t->real_minus_mono_us;
}

/* The part of an idle record's waiting that was someone else's pause: the guest did not
 * halt then, it was frozen, and a paused VM gives no samples. */
uint64_t tp_paused_part_ns(struct target_plugin *t, const struct qpr_sample *s)
{
    if (!t->qmp)
        return 0;
    int64_t end = wall_us(t, s->time_ns);
    uint64_t ns = (uint64_t)paused_within_us(t, end - (int64_t)(s->idle_ns / 1000), end) * 1000;
    return ns > s->idle_ns ? s->idle_ns : ns;
}

/* Intervals a sample stands for beyond its own that the vCPU's thread did not run: a pause
 * that caught the vCPU between checks (not in a wait) shows so too, and is not the host's. */
uint64_t tp_unrun_periods(struct target_plugin *t, const struct qpr_sample *s)
{
    if (s->periods <= 1 || s->periods > QPR_MAX_PERIODS)
        return 0;
    uint64_t n = s->periods - 1;
    if (!t->qmp || t->period_insns)
        return n;
    int64_t end = wall_us(t, s->time_ns);
    int64_t span = (int64_t)(n * t->interval_ns / 1000);
    uint64_t paused = (uint64_t)paused_within_us(t, end - span, end) * 1000 / t->interval_ns;
    return paused >= n ? 0 : n - paused;
}

/* How many times the sample about to be delivered (t->cur) is to be repeated, its weight noted
 * for tp_independent. */
uint64_t tp_capture_repeats(struct target_plugin *t)
{
    uint64_t unrun = tp_unrun_periods(t, &t->cur);
    double w = (double)(unrun + 1);
    t->weight_sum += w;
    t->weight_squares += w * w;
    return unrun;
}

/* The last delivered sample again, for an interval its vCPU's thread did not run (unrun periods,
 * set when it was delivered): a stopping target would have found the vCPU there, so the busy
 * vCPU weighs its time, not the share of it the host ran its thread, as an idle vCPU gets a
 * tick per interval it waited. The session adds the sample it built again, moved off a kernel
 * entry as the first was; false when nothing is left to repeat. */
bool tp_repeat_unrun(struct target_plugin *t, struct prof_target_stats *stats)
{
    if (!t->repeats_left)
        return false;
    t->repeats_left--;
    t->missed++;
    if (stats)
        stats->repeated = true;
    return true;
}
