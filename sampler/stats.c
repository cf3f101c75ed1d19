#include "sampler.h"

#include <glib.h>

#include <math.h>

/* Buckets 0..1023 hold 1 us each (0..1 ms); from 1 ms on each bucket is 1% wider than the last,
 * so 2048 buckets reach about 26 s with flat memory. */
#define HIST_LINEAR  1024
#define HIST_BUCKETS (sizeof(((struct prof_hist *)0)->buckets) / sizeof(uint64_t))

static size_t hist_bucket(uint64_t ns)
{
    uint64_t us = ns / 1000;
    if (us < HIST_LINEAR)
        return (size_t)us;
    size_t b = HIST_LINEAR + (size_t)(log((double)us / HIST_LINEAR) / log(1.01));
    return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;
}

/* Lower edge of a bucket, in ns. */
static uint64_t hist_bucket_floor(size_t b)
{
    if (b < HIST_LINEAR)
        return (uint64_t)b * 1000;
    return (uint64_t)(HIST_LINEAR * pow(1.01, (double)(b - HIST_LINEAR)) * 1000);
}

void prof_hist_add(struct prof_hist *h, uint64_t ns)
{
    h->buckets[hist_bucket(ns)]++;
    h->count++;
    if (ns > h->max_ns)
        h->max_ns = ns;
}

uint64_t prof_hist_percentile(const struct prof_hist *h, double p)
{
    if (h->count == 0)
        return 0;
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (size_t b = 0; b < HIST_BUCKETS; b++) {
        seen += h->buckets[b];
        if (seen >= rank) {
            /* Report the middle of the bucket, never above the largest value seen. */
            uint64_t lo = hist_bucket_floor(b), hi = hist_bucket_floor(b + 1);
            uint64_t mid = lo + (hi - lo) / 2;
            return mid < h->max_ns ? mid : h->max_ns;
        }
    }
    return h->max_ns;
}

double prof_guest_running_share(uint64_t paused_ns, double wall_s)
{
    if (wall_s <= 0)
        return 1.0;
    double share = 1.0 - (double)paused_ns / 1e9 / wall_s;
    return share < 0 ? 0 : share > 1 ? 1 : share;
}

bool prof_paused_far_above_usual(double paused_ms, double round_trips, double round_trip_ms)
{
    double usual = round_trips * round_trip_ms;
    return paused_ms >= 5.0 && paused_ms >= 20.0 * usual;
}

static void count_proc(struct prof_cpu_counts *n, const struct out_sample *o)
{
    for (int i = 0; i < PROF_CPU_TOP_PROCS; i++) {
        struct prof_cpu_proc *p = &n->procs[i];
        if (!p->count) {
            *p = (struct prof_cpu_proc){.pid = o->pid, .count = 1};
            g_strlcpy(p->comm, o->comm, sizeof p->comm);
            return;
        }
        if (p->pid == o->pid && strcmp(p->comm, o->comm) == 0) {
            p->count++;
            return;
        }
    }
    n->other_procs++;
}

void prof_counters_add_sample(struct prof_capture_counters *c, const struct out_sample *o)
{
    if (o->cpu >= PROF_MAX_VCPUS)
        return;
    struct prof_cpu_counts *n = &c->cpu[o->cpu];
    if (o->mode == OUT_MODE_IDLE)
        n->idle++;
    else if (o->mode == OUT_MODE_BOOT)
        n->boot++;
    else if (o->mode == OUT_MODE_USER)
        n->user++;
    else
        n->kernel++;
    if (o->pid)
        count_proc(n, o);
    if ((int)o->cpu >= c->cpus_seen)
        c->cpus_seen = (int)o->cpu + 1;
}
