/* The plugin target, what the summary says of the plugin: the trigger that sampled and why,
 * intervals not sampled, samples lost to a full ring. */
#include "target_plugin_internal.h"

#include <glib.h>
#include <stdio.h>

const char *tp_describe(const void *impl)
{
    const struct target_plugin *t = impl;
    return t->direct ? "captured by the plugin, code from the RAM file"
           : t->pmem ? "captured by the plugin, code from " TARGET_PMEM_NAME
                     : "captured by the plugin";
}

/* Auto's reason, with what its rule weighed (qprof_ring.h, qpr_auto_trigger). */
static void auto_line(struct target_plugin *t, const char *name, uint32_t wake_ns,
                      double interval_ns)
{
    const struct qpr_header *h = t->status;
    unsigned cpus = atomic_load(&h->host_cpus), threads = atomic_load(&h->vcpu_threads);
    unsigned own = atomic_load(&h->timer_own_cpus);
    const char *s = threads == 1 ? "" : "s";
    if (!cpus) {
        snprintf(t->trigger_line, sizeof t->trigger_line,
                 "%s (auto: the host CPUs QEMU may use are not known)", name);
    } else if (cpus <= threads && own) {
        snprintf(t->trigger_line, sizeof t->trigger_line,
                 "%s (auto: %u host CPU%s for %u vCPU thread%s, %u of them the timer thread's "
                 "alone: its wake-ups run beside the guest, not in its time)",
                 name, cpus, cpus == 1 ? "" : "s", threads, s, own);
    } else if (qpr_auto_spare_cpu(threads, cpus, own)) {
        snprintf(t->trigger_line, sizeof t->trigger_line,
                 "%s (auto: %u host CPUs for %u vCPU thread%s: the timer's wake-ups run beside "
                 "the guest, not in its time)",
                 name, cpus, threads, s);
    } else {
        double share = qpr_timer_guest_share(wake_ns, (uint64_t)interval_ns, cpus);
        snprintf(t->trigger_line, sizeof t->trigger_line,
                 "%s (auto: %u host CPU%s for %u vCPU thread%s, none to spare: a timer wake-up "
                 "takes %.1f us from a thread on its CPU here, %.1f%% of the guest's CPUs at "
                 "this interval, %s the counter's %.0f%%)",
                 name, cpus, cpus == 1 ? "" : "s", threads, s, wake_ns / 1e3, 100 * share,
                 share > QPR_COUNTER_GUEST_COST ? "over" : "within", 100 * QPR_COUNTER_GUEST_COST);
    }
}

/* Which trigger sampled, and why: from what the plugin put in the shared header. */
const char *tp_trigger(void *impl)
{
    struct target_plugin *t = impl;
    const struct qpr_header *h = t->status;
    uint32_t trigger = atomic_load(&h->trigger), reason = atomic_load(&h->trigger_reason);
    uint32_t wake_ns = atomic_load(&h->wake_cost_ns);
    const char *name = trigger == QPR_TRIGGER_COUNTER ? "counter" : "timer";
    double interval_ns = t->interval_ns ? (double)t->interval_ns : 1e7;
    switch (reason) {
    case QPR_REASON_ASKED:
        snprintf(t->trigger_line, sizeof t->trigger_line, "%s (--plugin-trigger)", name);
        break;
    case QPR_REASON_LOADED:
        snprintf(t->trigger_line, sizeof t->trigger_line,
                 "%s (QEMU loaded the plugin with trigger=%s)", name, name);
        break;
    case QPR_REASON_INSNS:
        snprintf(t->trigger_line, sizeof t->trigger_line, "%s (--period-insns)", name);
        break;
    case QPR_REASON_RULE:
        auto_line(t, name, wake_ns, interval_ns);
        break;
    case QPR_REASON_UNMEASURED:
        snprintf(t->trigger_line, sizeof t->trigger_line,
                 "%s (auto, before the plugin had measured this host's wake-up cost)", name);
        break;
    default:
        snprintf(t->trigger_line, sizeof t->trigger_line, "%s", name);
    }
    return t->trigger_line;
}

uint64_t tp_missed(const void *impl)
{
    return ((const struct target_plugin *)impl)->missed;
}

/* Kish's effective sample size: a capture repeated k times is one observation weighing k + 1. */
uint64_t tp_independent(const void *impl)
{
    const struct target_plugin *t = impl;
    if (t->weight_squares <= 0)
        return 0;
    return (uint64_t)(t->weight_sum * t->weight_sum / t->weight_squares + 0.5);
}

uint64_t tp_paused_intervals(const void *impl)
{
    const struct target_plugin *t = impl;
    uint64_t us = t->paused_us;
    if (t->paused_since_us) {
        int64_t now = g_get_real_time(), from = MAX(t->paused_since_us, t->open_us);
        us += now > from ? (uint64_t)(now - from) : 0;
    }
    return us * 1000 / t->interval_ns;
}

uint64_t tp_lost(const void *impl)
{
    const struct target_plugin *t = impl;
    uint64_t lost = 0;
    for (uint32_t i = 0; i < t->n_vcpus; i++)
        lost += atomic_load_explicit(&t->ring[i]->lost, memory_order_relaxed) - t->lost_at_open[i];
    return lost;
}
