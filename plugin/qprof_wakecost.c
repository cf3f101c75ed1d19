/* A timer thread that wakes every 100 us costs its host CPU more than its own CPU time: the
 * timer interrupt, the two context switches and, on a VM, the exits that re-arm the timer, and
 * the caches the interrupted thread then refills. None of it is charged to the sleeping thread.
 * On a nested 2-core VM a 100 us sleeper took 16-17 us of its own CPU per wake-up and cost a
 * busy thread on its CPU 50-53 us (docs/plugin.md, "Everything on one host CPU": the timer cost
 * the guest 56-61% at 10 kHz there, the counter 10-13%). So the cost auto weighs is measured as
 * a busy thread sees it, in turns of long sleeps and short ones:
 * - where the busy thread had the CPU to itself while the sleeper slept long, what its progress
 *   per wall second fell by, per wake-up: everything the wake-ups took from it;
 * - else (QEMU's vCPU may be booting on that CPU, and the two share it in changing parts) the
 *   sleeper's own CPU time plus what the busy thread's progress per CPU second of its own fell
 *   by: a lower bound, as the wake-ups then interrupt the other thread too. */
#define _GNU_SOURCE
#include "qprof_wakecost.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#define ROUNDS     4
#define SPIN_BATCH 256 /* loop passes between looks at the phase */

enum { SLEEP_LONG, WAKE_OFTEN, STOP };

struct probe {
    cpu_set_t cpu;
    _Atomic int phase;
    _Atomic bool running;
    /* the busy thread's loop passes and its own CPU time in each of the first two phases,
     * written by it alone and read after it is joined */
    uint64_t passes[2], cpu_ns[2];
};

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *busy_main(void *arg)
{
    struct probe *p = arg;
    pthread_setname_np(pthread_self(), "qprof-probe");
    if (sched_setaffinity(0, sizeof p->cpu, &p->cpu) != 0) {
        atomic_store(&p->phase, STOP);
        return NULL;
    }
    int now = atomic_load(&p->phase);
    uint64_t since = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    atomic_store(&p->running, true);
    volatile uint64_t sink = 0;
    while (now != STOP) {
        for (int i = 0; i < SPIN_BATCH; i++)
            sink += (uint64_t)i;
        p->passes[now]++;
        int next = atomic_load_explicit(&p->phase, memory_order_relaxed);
        if (next != now) { /* the CPU clock is read at phase changes only */
            uint64_t t = clock_ns(CLOCK_THREAD_CPUTIME_ID);
            p->cpu_ns[now] += t - since;
            since = t;
            now = next;
        }
    }
    return NULL;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

/* ROUNDS turns of a long sleep and of per_round short ones, while p's busy thread counts; the
 * wall time of each kind into wall_ns. */
static void take_turns(struct probe *p, int per_round, uint64_t interval_ns, uint64_t wall_ns[2])
{
    wall_ns[0] = wall_ns[1] = 0;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
        atomic_store(&p->phase, SLEEP_LONG);
        sleep_ns((uint64_t)per_round * interval_ns);
        uint64_t t1 = clock_ns(CLOCK_MONOTONIC);
        atomic_store(&p->phase, WAKE_OFTEN);
        for (int i = 0; i < per_round; i++)
            sleep_ns(interval_ns);
        wall_ns[0] += t1 - t0;
        wall_ns[1] += clock_ns(CLOCK_MONOTONIC) - t1;
    }
    atomic_store(&p->phase, STOP);
}

/* The busy thread's loss per wake-up from its counts (the comment at the top); own_ns: the
 * sleeper's own CPU time per wake-up. */
static uint64_t loss_per_wake(const struct probe *p, const uint64_t wall_ns[2], int wakes,
                              uint64_t own_ns)
{
    bool alone = p->cpu_ns[0] >= wall_ns[0] / 10 * 9;
    const uint64_t *per = alone ? wall_ns : p->cpu_ns;
    double rate_long = (double)p->passes[0] / (double)per[0];
    double rate_often = (double)p->passes[1] / (double)per[1];
    double lost = rate_often < rate_long ? 1 - rate_often / rate_long : 0;
    uint64_t loss = (uint64_t)(lost * (double)per[1] / (double)wakes);
    if (!alone)
        loss += own_ns;
    return loss > own_ns ? loss : own_ns;
}

/* What a busy thread on this thread's CPU loses per wake-up; 0 when it could not run there. */
static uint64_t taken_per_wake(int wakes, uint64_t interval_ns, uint64_t own_ns)
{
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0)
        return 0;
    int cpu = sched_getcpu();
    if (cpu < 0 || !CPU_ISSET(cpu, &mine))
        return 0;
    struct probe p = {.phase = SLEEP_LONG};
    CPU_ZERO(&p.cpu);
    CPU_SET(cpu, &p.cpu);
    if (sched_setaffinity(0, sizeof p.cpu, &p.cpu) != 0)
        return 0;
    uint64_t taken = 0;
    pthread_t busy;
    if (pthread_create(&busy, NULL, busy_main, &p) == 0) {
        while (!atomic_load(&p.running) && atomic_load(&p.phase) != STOP)
            sleep_ns(interval_ns);
        int per_round = wakes / ROUNDS > 0 ? wakes / ROUNDS : 1;
        bool ran = atomic_load(&p.phase) != STOP;
        uint64_t wall_ns[2] = {0, 0};
        if (ran)
            take_turns(&p, per_round, interval_ns, wall_ns);
        pthread_join(busy, NULL);
        if (ran && p.passes[0] && p.cpu_ns[0] && p.passes[1] && p.cpu_ns[1] && wall_ns[0] &&
            wall_ns[1])
            taken = loss_per_wake(&p, wall_ns, per_round * ROUNDS, own_ns);
    }
    sched_setaffinity(0, sizeof mine, &mine);
    return taken;
}

struct qpw_cost qpw_measure(int wakes, uint64_t interval_ns)
{
    struct qpw_cost c = {0};
    uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < wakes; i++)
        sleep_ns(interval_ns);
    c.own_ns = wakes > 0 ? (clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0) / (uint64_t)wakes : 0;
    if (!c.own_ns)
        c.own_ns = 1;
    uint64_t taken = taken_per_wake(wakes, interval_ns, c.own_ns);
    c.probed = taken > 0;
    c.taken_ns = taken ? taken : c.own_ns;
    return c;
}
