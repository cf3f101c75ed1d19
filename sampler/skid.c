/* Skid under a capturing target (skid.h). */
#include "skid.h"

int prof_skid_bucket(uint32_t age_us)
{
    static const uint32_t limit[PROF_AGE_BUCKETS - 1] = {10, 20, 50, 100, 200, 1000, 10000};
    int b = 0;
    while (b < PROF_AGE_BUCKETS - 1 && age_us >= limit[b])
        b++;
    return b;
}

/* Only the timer's flag can wait on a descheduled thread and be taken by the first block after
 * an interrupt's delivery: the counter comes due by instructions the vCPU executes, so the
 * first block after a delivery takes it only by chance, as it takes any other block. */
bool prof_skid_aged(const struct cpu_capture *c)
{
    return c->vcpu.flag_trigger == PROF_FLAG_TIMER && c->vcpu.flag_age_us >= PROF_SKID_AGE_US;
}

enum prof_skid prof_skid_check(bool at_entry, const struct cpu_capture *c,
                               struct prof_stack_counters *counters)
{
    uint32_t t = c->vcpu.flag_trigger;
    if (t != PROF_FLAG_TIMER && t != PROF_FLAG_COUNTER)
        return PROF_SKID_NONE;
    int b = prof_skid_bucket(c->vcpu.flag_age_us);
    counters->flag_age[t - 1][b]++;
    if (!at_entry || !c->have_entry_regs)
        return PROF_SKID_NONE;
    counters->entry_flag_age[t - 1][b]++;
    if (!prof_skid_aged(c))
        return PROF_SKID_NONE;
    counters->skid_moved++;
    return PROF_SKID_MOVED;
}
