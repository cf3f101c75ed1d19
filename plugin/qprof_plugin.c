/* qprof-plugin.so: samples a QEMU 10 TCG guest from inside QEMU, without stopping it.
 *
 *   qemu-system-x86_64 ... -plugin build/qprof-plugin.so,socket=./qprof-plugin
 *
 * Two triggers (qprof_ring.h, enum qpr_trigger); both end in a conditional callback on a
 * per-vCPU scoreboard entry, which runs on the vCPU's own thread at the start of a translation
 * block (a consistent instant) and takes the sample:
 * - timer (time-based sampling, qprof's --interval): a host thread wakes once per jittered
 *   interval and sets every running vCPU's entry to the threshold; every block only compares it
 *   (a load and a branch). The plugin loaded costs the guest almost nothing, and sampling costs
 *   the timer thread's wake-ups plus the captures. (A POSIX timer per vCPU signalling the vCPU's
 *   own thread measured about twice the cost: docs/plugin.md.)
 * - counter (--period-insns, and --interval by instruction counts): every block adds its
 *   instruction count to the entry inline; the callback checks the clock against the vCPU's
 *   jittered deadline or takes a sample every ~N instructions, and re-arms the counter. The
 *   re-arm distance adapts to the instruction rate, so the clock is read about eight times per
 *   interval. The inline add on every block is what this costs, sampling or not (bench/plugin.sh).
 * Each qprof's configuration says which (or auto: the timer, unless there is no host CPU to spare
 * beside the vCPU threads and its wake-ups, at the cost measured when QEMU loaded the plugin,
 * would take more of the guest's CPUs than the counter does: qprof_ring.h, qpr_auto_trigger);
 * trigger=auto|timer|counter of -plugin is the default for a qprof that leaves it to the plugin.
 * The blocks' code is chosen when they are translated, so a change of trigger resets the plugin
 * (QEMU's code cache flushed, the callbacks registered again) from the next vCPU callback, which
 * the listener provokes by setting every vCPU's entry to the threshold. With no qprof connected
 * the blocks carry the timer's compare only, unless QEMU loaded the plugin with trigger=counter.
 * A sample reads the registers and the stack from sp, page by page up to the first unmapped page
 * (a read that runs into an unmapped page fails whole), plus one window qprof names (the demo
 * guest's ABI table), in kernel mode the user stack (qpr_user_sp), and the chained windows an OS
 * adapter asks for (a Linux kernel's current task: qpr_capture_windows), into the vCPU's own ring
 * in a memfd shared with qprof (qprof_ring.h): no allocation (buffers are sized at vCPU init), no
 * syscall, no lock shared between vCPUs. A full ring drops the sample and counts it.
 *
 * A listener thread serves the unix socket: one qprof at a time gets the memfd and sends its
 * configuration; when it goes away, sampling is disarmed (the counter's threshold is then 2^24
 * instructions away, a callback per ~16M instructions) and the next qprof is served.
 *
 * Who may connect, and what a client can do (docs/security.md): the socket is 0600 and
 * only peers of QEMU's uid are served (allow-uid=N or any-user=on of -plugin allow more, and
 * make it 0666); a client maps the rings read-only and writes only its read positions, which
 * the plugin takes as untrusted numbers (qprof_shm.c); every read from a client has a deadline;
 * rates below QPR_MIN_INTERVAL_NS and QPR_MIN_PERIOD_INSNS are raised to them; changes that
 * flush the code cache are served at most once per QPR_RESET_GAP_NS.
 *
 * qprof --exact's instruction counts per block live in qprof_exact.c; this file hands it each
 * translated block and the socket's exact-count requests, and resets the plugin when it asks. */
#define _GNU_SOURCE
#include "qpr_qemu_api.h"

#include "qprof_exact.h"
#include "qprof_ring.h"
#include "qprof_shm.h"
#include "qprof_wakecost.h"

#include <errno.h>
#include <glib.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* The counter fires at FIRE; re-arming sets it to FIRE - distance. */
#define FIRE              (UINT64_C(1) << 62)
#define DISARMED_DISTANCE (UINT64_C(1) << 24)
#define MIN_DISTANCE      64
#define MAX_DISTANCE      (UINT64_C(1) << 22)
#define FIRST_DISTANCE    1000
#define PAGE              4096u
/* The timer's wake-up cost is measured at load with this many sleeps of this length. */
#define CALIBRATION_WAKES       200
#define CALIBRATION_INTERVAL_NS 100000
/* The timer thread sleeps at most this long at once (it looks at the configuration between). */
#define TIMER_SLICE_NS 50000000

/* What one vCPU's thread keeps; only that thread touches it after init. */
struct vcpu {
    bool ready;
    GArray *all_regs; /* every register the vCPU has (qemu_plugin_reg_descriptor), by name */
    struct qemu_plugin_register *reg[QPR_MAX_REGS]; /* the configuration's reg_names */
    GByteArray *buf; /* QPR_STACK_MAX bytes reserved: reads never grow it */
    /* where a sample is captured, then copied into the ring: never in the shared slot, whose
     * lengths a reader could have changed under the capture */
    struct qpr_sample *scratch;
    uint64_t rng;
    uint64_t gen; /* the configuration generation this vCPU last saw */
    struct qpr_config cfg;
    uint64_t deadline_ns, last_check_ns, distance, insns;
    _Atomic uint64_t idle_since_ns; /* the timer thread reads it */
    /* the timer trigger: deadlines the timer thread flagged since this vCPU's last sample */
    _Atomic uint32_t flagged;
    /* when the timer thread raised the first of those flags (0: none pending) */
    _Atomic uint64_t flagged_at_ns;
    uint32_t trigger_seen; /* plugin.trigger at this vCPU's last callback */
    /* the vCPU's host thread (0: not known yet), from vCPU init (QEMU 10.0 runs it there; a
     * QEMU that runs it elsewhere gives a wrong guess), then from its first block callback,
     * which runs there in every QEMU */
    _Atomic pid_t tid;
    _Atomic bool tid_from_callback;
};

/* The plugin's whole state: one instance per QEMU process, as QEMU loads a plugin once. */
static struct {
    qemu_plugin_id_t id;
    struct qemu_plugin_scoreboard *counters;
    qemu_plugin_u64 counter;
    uint32_t n_vcpus;
    struct vcpu *vcpus;
    qps_shared *shm;
    _Atomic uint32_t wake_cost_ns; /* measured at load; the header has a copy for qprof */
    char *socket_path;
    dev_t socket_dev; /* the socket this plugin made at socket_path, unlinked at exit */
    ino_t socket_ino;
    int listen_fd;
    /* Peers served besides QEMU's own uid: allow-uid=N (-1: none) and any-user=on. */
    int64_t allow_uid;
    bool any_user;
    uint64_t last_reset_ns; /* the listener's latest change that flushes the code cache */
    pthread_t listener;
    /* The listener publishes a configuration by writing cfg[(gen + 1) & 1] and then storing
     * gen + 1 with release; 0 means disarmed. Two buffers, so a vCPU copying one is not
     * overwritten by the next connection's configuration. */
    struct qpr_config cfg[2];
    _Atomic uint64_t gen;
    uint64_t last_gen;
    /* The trigger the blocks' code carries now (enum qpr_trigger, TIMER or COUNTER): changed
     * only by a reset, while no vCPU runs. The latest configuration's wish, and the default
     * for a configuration that leaves it to the plugin (trigger= of -plugin). */
    _Atomic uint32_t trigger;
    _Atomic uint32_t want_trigger, want_reason;
    uint32_t loaded_trigger;
    _Atomic bool resetting; /* a reset was asked for and has not run yet */
    /* The timer thread waits on timer_cond while there is nothing to time (no qprof, sampling
     * by instructions, or the counter trigger in place). */
    pthread_t timer_thread;
    _Atomic pid_t timer_tid;
    pthread_mutex_t timer_lock;
    pthread_cond_t timer_cond;
} plugin = {.listen_fd = -1,
            .allow_uid = -1,
            .timer_lock = PTHREAD_MUTEX_INITIALIZER,
            .timer_cond = PTHREAD_COND_INITIALIZER};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t next_random(struct vcpu *v)
{
    v->rng ^= v->rng << 13, v->rng ^= v->rng >> 7, v->rng ^= v->rng << 17; /* xorshift64 */
    return v->rng;
}

/* (0.5 + u) * x for u uniform in [0, 1): qprof's --interval jitter, so that samples do not lock
 * onto a periodic guest timer. */
static uint64_t jittered(struct vcpu *v, uint64_t x)
{
    return x / 2 + (uint64_t)((double)(next_random(v) >> 11) / 9007199254740992.0 * (double)x);
}

static void rearm(unsigned idx, uint64_t distance)
{
    qemu_plugin_u64_set(plugin.counter, idx, FIRE - distance);
}

static void read_registers(struct vcpu *v, struct qpr_sample *s)
{
    s->regs_valid = 0;
    for (uint32_t i = 0; i < v->cfg.n_regs; i++) {
        if (!v->reg[i])
            continue;
        int n = qpr_read_register(v->reg[i], v->buf);
        if (n <= 0 || n > 8)
            continue;
        uint64_t val = 0;
        memcpy(&val, v->buf->data, (size_t)n); /* target byte order: little-endian, all three */
        s->regs[i] = val;
        s->regs_valid |= UINT64_C(1) << i;
    }
}

/* The configuration's registers by name, among those this vCPU has (NULL: none so named). */
static void map_registers(struct vcpu *v)
{
    memset(v->reg, 0, sizeof v->reg);
    for (uint32_t i = 0; i < v->cfg.n_regs; i++)
        for (guint k = 0; v->all_regs && k < v->all_regs->len; k++) {
            qemu_plugin_reg_descriptor *d =
                &g_array_index(v->all_regs, qemu_plugin_reg_descriptor, k);
            if (strcmp(d->name, v->cfg.reg_names[i]) == 0) {
                v->reg[i] = d->handle;
                break;
            }
        }
}

/* len bytes at addr into out, page by page, stopping at the first page that does not read:
 * returns the bytes read from the start. */
static uint32_t read_window(struct vcpu *v, uint64_t addr, uint32_t len, uint8_t *out)
{
    uint32_t got = 0;
    while (got < len) {
        uint64_t at = addr + got;
        uint32_t chunk = PAGE - (uint32_t)(at & (PAGE - 1));
        if (chunk > len - got)
            chunk = len - got;
        if (!qemu_plugin_read_memory_vaddr(at, v->buf, chunk))
            break;
        memcpy(out + got, v->buf->data, chunk);
        got += chunk;
    }
    return got;
}

static bool read_guest_u64(void *ctx, uint64_t addr, uint64_t *out)
{
    struct vcpu *v = ctx;
    if (!qemu_plugin_read_memory_vaddr(addr, v->buf, 8))
        return false;
    memcpy(out, v->buf->data, 8);
    return true;
}

/* In kernel mode: the user stack of this instant, found from what was just captured
 * (qpr_user_sp says where). qprof finds the user registers by the kernel's CFI or the saved
 * frame and uses this window only where the addresses agree; a stack it does not find here ends
 * marked truncated, never read later from memory that has changed. */
static void chase_user_stack(struct vcpu *v, unsigned idx, struct qpr_sample *s)
{
    uint64_t usp = 0;
    if (!v->cfg.ustack_bytes || !qpr_user_sp(s, &v->cfg, idx, read_guest_u64, v, &usp))
        return;
    s->ustack_addr = usp;
    s->ustack_len = read_window(v, usp, v->cfg.ustack_bytes, s->ustack);
}

/* read_window for qpr_capture_windows. */
static uint32_t read_window_cb(void *ctx, uint64_t addr, uint32_t len, uint8_t *out)
{
    return read_window(ctx, addr, len, out);
}

/* The age of a sample's flag in us, saturating (qpr_sample.flag_age_us). */
static uint32_t flag_age_us(uint64_t now, uint64_t since)
{
    if (!since || since >= now)
        return 0;
    uint64_t us = (now - since) / 1000;
    return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void take_sample(unsigned idx, struct vcpu *v, uint64_t t0, uint32_t periods,
                        uint32_t trigger, uint64_t flag_ns)
{
    if (!qps_reserve(plugin.shm, idx))
        return;
    struct qpr_sample *s = v->scratch;
    s->kind = QPR_KIND_SAMPLE;
    s->trigger = trigger;
    s->flag_age_us = flag_age_us(t0, flag_ns);
    s->periods = periods;
    s->vcpu = idx;
    s->time_ns = t0;
    s->idle_ns = 0;
    s->insns = v->insns;
    read_registers(v, s);
    s->stack_addr = s->regs[v->cfg.sp_reg];
    s->stack_len = 0;
    if (s->regs_valid >> v->cfg.sp_reg & 1)
        s->stack_len = read_window(v, s->stack_addr, v->cfg.stack_bytes, s->stack);
    s->extra_addr = v->cfg.extra_addr;
    s->extra_len = 0;
    if (v->cfg.extra_len)
        s->extra_len = read_window(v, v->cfg.extra_addr, v->cfg.extra_len, s->extra);
    s->ustack_addr = 0;
    s->ustack_len = 0;
    qpr_capture_windows(s, &v->cfg, read_window_cb, v); /* first: the user stack may be there */
    if ((s->regs_valid >> v->cfg.mode_reg & 1) && !qpr_user_mode(s, &v->cfg))
        chase_user_stack(v, idx, s);
    qps_publish(plugin.shm, idx, s, t0); /* which sets the slot's cost_ns, the copy included */
}

/* A new configuration: copy it, start the deadline afresh. False when disarmed. */
static bool refresh_config(struct vcpu *v, uint64_t now)
{
    uint64_t gen = atomic_load_explicit(&plugin.gen, memory_order_acquire);
    if (gen == v->gen)
        return gen != 0;
    v->gen = gen;
    if (!gen)
        return false;
    v->cfg = plugin.cfg[gen & 1];
    map_registers(v);
    v->insns = 0;
    v->distance = FIRST_DISTANCE;
    v->last_check_ns = now;
    v->deadline_ns = now + jittered(v, v->cfg.interval_ns);
    return true;
}

/* The counter's next distance for time-based sampling: about an eighth of an interval at the
 * instruction rate seen since the last check. */
static uint64_t adapt_distance(struct vcpu *v, uint64_t now)
{
    uint64_t dt = now - v->last_check_ns;
    v->last_check_ns = now;
    if (dt == 0)
        return v->distance;
    double per_ns = (double)v->distance / (double)dt;
    double want = per_ns * (double)v->cfg.interval_ns / 8;
    uint64_t d = want < MIN_DISTANCE   ? MIN_DISTANCE
                 : want > MAX_DISTANCE ? MAX_DISTANCE
                                       : (uint64_t)want;
    /* no more than doubling per check: one idle-inflated dt must not stall sampling */
    if (d > 2 * v->distance)
        d = 2 * v->distance;
    return d;
}

static void apply_pending_reset(void);

static void on_counter(unsigned int idx, void *userdata)
{
    (void)userdata;
    if (idx >= plugin.n_vcpus || !plugin.vcpus[idx].ready)
        return;
    struct vcpu *v = &plugin.vcpus[idx];
    if (!atomic_load_explicit(&v->tid_from_callback, memory_order_relaxed)) {
        atomic_store_explicit(&v->tid, gettid(), memory_order_relaxed);
        atomic_store_explicit(&v->tid_from_callback, true, memory_order_release);
    }
    uint64_t now = now_ns();
    apply_pending_reset(); /* a change of trigger, or --exact started or ended */
    uint32_t trigger = atomic_load_explicit(&plugin.trigger, memory_order_relaxed);
    if (v->trigger_seen != trigger) { /* the blocks changed under this vCPU: start afresh */
        v->trigger_seen = trigger;
        v->gen = 0;
        atomic_store_explicit(&v->flagged, 0, memory_order_relaxed);
        atomic_store_explicit(&v->flagged_at_ns, 0, memory_order_relaxed);
    }
    if (!refresh_config(v, now)) {
        rearm(idx, DISARMED_DISTANCE);
        atomic_store_explicit(&v->flagged, 0, memory_order_relaxed);
        atomic_store_explicit(&v->flagged_at_ns, 0, memory_order_relaxed);
        return;
    }
    if (trigger == QPR_TRIGGER_TIMER) { /* the timer thread said this vCPU's deadline passed */
        rearm(idx, DISARMED_DISTANCE);
        /* after the re-arm: a flag set from here on fires again; 0 means this fire's deadlines
         * went with the previous sample */
        uint32_t periods = atomic_exchange_explicit(&v->flagged, 0, memory_order_relaxed);
        /* second: a flag raised between the two leaves no time, and its sample an age of 0
         * (unknown, never moved) rather than this one's */
        uint64_t at = atomic_exchange_explicit(&v->flagged_at_ns, 0, memory_order_relaxed);
        if (periods)
            take_sample(idx, v, now, periods > QPR_MAX_PERIODS ? QPR_MAX_PERIODS : periods,
                        QPR_TRIGGER_TIMER, at);
        return;
    }
    v->insns += v->distance;
    if (!v->cfg.interval_ns) {
        take_sample(idx, v, now, 1, QPR_TRIGGER_COUNTER, 0);
        v->distance = jittered(v, v->cfg.period_insns);
        rearm(idx, v->distance ? v->distance : 1);
        return;
    }
    if (now >= v->deadline_ns) {
        /* Deadlines that passed while the thread was not running stand with this sample: the
         * vCPU was where this sample finds it for all of them. */
        uint64_t late = (now - v->deadline_ns) / v->cfg.interval_ns;
        uint32_t periods = late >= QPR_MAX_PERIODS ? QPR_MAX_PERIODS : (uint32_t)late + 1;
        take_sample(idx, v, now, periods, QPR_TRIGGER_COUNTER, v->deadline_ns);
        uint64_t next =
            v->deadline_ns + late * v->cfg.interval_ns + jittered(v, v->cfg.interval_ns);
        v->deadline_ns = next > now ? next : now + jittered(v, v->cfg.interval_ns) / 2;
    }
    v->distance = adapt_distance(v, now);
    rearm(idx, v->distance);
}

/* hlt: the vCPU thread sleeps. Its idle time goes to qprof as one record when it wakes. */
static void on_idle(QPR_VCPU_CB_PARAMS(idx))
{
    if (idx < plugin.n_vcpus && plugin.vcpus[idx].ready)
        atomic_store_explicit(&plugin.vcpus[idx].idle_since_ns, now_ns(), memory_order_relaxed);
}

/* Waking: the idle span as one record (the counter trigger; with the timer, idle ticks stand in).
 */
static void on_resume(QPR_VCPU_CB_PARAMS(idx))
{
    if (idx >= plugin.n_vcpus || !plugin.vcpus[idx].ready)
        return;
    struct vcpu *v = &plugin.vcpus[idx];
    uint64_t now = now_ns();
    uint64_t since = atomic_exchange_explicit(&v->idle_since_ns, 0, memory_order_relaxed);
    if (!since ||
        atomic_load_explicit(&plugin.trigger, memory_order_relaxed) != QPR_TRIGGER_COUNTER ||
        v->trigger_seen != QPR_TRIGGER_COUNTER || !refresh_config(v, now))
        return; /* the timer: idle ticks instead */
    if (qps_reserve(plugin.shm, idx)) {
        struct qpr_sample *s = v->scratch;
        memset(s, 0, offsetof(struct qpr_sample, stack)); /* no windows */
        s->kind = QPR_KIND_IDLE;
        s->vcpu = idx;
        s->time_ns = now;
        s->idle_ns = now - since;
        s->insns = v->insns;
        qps_publish(plugin.shm, idx, s, 0);
    }
    /* the waiting time was handed over whole: the next running sample is an interval away */
    v->deadline_ns = now + jittered(v, v->cfg.interval_ns);
    v->last_check_ns = now;
}

static void on_tb_trans(QPR_TB_TRANS_CB_PARAMS(tb))
{
    uint64_t n = qemu_plugin_tb_n_insns(tb);
    if (atomic_load_explicit(&plugin.trigger, memory_order_relaxed) == QPR_TRIGGER_COUNTER)
        qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, QEMU_PLUGIN_INLINE_ADD_U64,
                                                          plugin.counter, n);
    qemu_plugin_register_vcpu_tb_exec_cond_cb(tb, on_counter, QEMU_PLUGIN_CB_R_REGS,
                                              QEMU_PLUGIN_COND_GE, plugin.counter, FIRE, NULL);
    exact_on_tb_trans(tb);
}

static void on_vcpu_init(QPR_VCPU_CB_PARAMS(idx))
{
    if (idx >= plugin.n_vcpus)
        return;
    struct vcpu *v = &plugin.vcpus[idx];
    v->all_regs = qemu_plugin_get_registers(); /* kept: QEMU interns the names */
    v->buf = g_byte_array_sized_new(QPR_STACK_MAX);
    v->scratch = g_new0(struct qpr_sample, 1);
    v->rng = 0x9e3779b97f4a7c15u ^ ((uint64_t)idx << 32) ^ now_ns();
    atomic_store_explicit(&v->tid, gettid(), memory_order_relaxed); /* a first guess */
    rearm(idx, DISARMED_DISTANCE);
    v->ready = true;
}

/* Of the periods deadlines up to now, one interval apart, those a vCPU waiting since `since`
 * waited through: at least this one. */
static uint32_t idle_ticks(uint64_t periods, uint64_t interval, uint64_t now, uint64_t since)
{
    uint64_t waited = now > since && interval ? (now - since) / interval + 1 : 1;
    return (uint32_t)MIN(periods, waited);
}

/* The timer trigger: at each jittered deadline, one wake-up for all vCPUs: a running vCPU is
 * flagged (its next block takes the sample), a waiting one gets an idle tick. Deadlines that
 * passed while the host did not run this thread go with the next flag, which qprof counts as
 * that many samples, as it does for a vCPU thread the host did not run; a waiting vCPU gets a
 * tick for each of them it was waiting through (idle_ticks), so that a late timer thread weighs
 * busy and idle alike. */
static void timer_tick(uint64_t periods, uint64_t interval)
{
    uint64_t now = now_ns();
    for (uint32_t i = 0; i < plugin.n_vcpus; i++) {
        struct vcpu *v = &plugin.vcpus[i];
        if (!v->ready)
            continue;
        /* idle and running are both sampled here, at the timer's own pace, so that a late timer
         * thread does not tilt the busy share */
        uint64_t since = atomic_load_explicit(&v->idle_since_ns, memory_order_relaxed);
        if (since) {
            qps_idle_tick(plugin.shm, i, idle_ticks(periods, interval, now, since));
        } else {
            /* the first flag's time stays until the sample takes it (its age, the skid) */
            uint64_t none = 0;
            atomic_compare_exchange_strong_explicit(&v->flagged_at_ns, &none, now,
                                                    memory_order_relaxed, memory_order_relaxed);
            atomic_fetch_add_explicit(&v->flagged, (uint32_t)periods, memory_order_relaxed);
            qemu_plugin_u64_set(plugin.counter, i, FIRE);
        }
    }
}

/* What one wake-up of this thread costs a vCPU thread that shares its host CPU, at the sleep
 * length a high rate uses: measured beside a busy thread on this thread's CPU, as it is more
 * than this thread's own CPU time (qprof_wakecost.c: 50 us against 16 us on a nested 2-core VM;
 * the own time alone was 2-3 us on bare metal). */
static void measure_wake_cost(void)
{
    struct qpw_cost c = qpw_measure(CALIBRATION_WAKES, CALIBRATION_INTERVAL_NS);
    uint32_t cost = (uint32_t)MIN(c.taken_ns, UINT32_MAX);
    atomic_store(&plugin.wake_cost_ns, cost);
    atomic_store(&qps_header(plugin.shm)->wake_cost_ns, cost);
}

static void wake_timer(void)
{
    pthread_mutex_lock(&plugin.timer_lock);
    pthread_cond_broadcast(&plugin.timer_cond);
    pthread_mutex_unlock(&plugin.timer_lock);
}

/* The interval to time now, 0 when there is nothing to time. */
static uint64_t timed_interval(void)
{
    uint64_t gen = atomic_load_explicit(&plugin.gen, memory_order_acquire);
    if (!gen || atomic_load_explicit(&plugin.trigger, memory_order_relaxed) != QPR_TRIGGER_TIMER)
        return 0;
    return plugin.cfg[gen & 1].interval_ns;
}

/* Blocks until there is something to time; its interval. */
static uint64_t wait_for_work(void)
{
    uint64_t interval;
    pthread_mutex_lock(&plugin.timer_lock);
    while (!(interval = timed_interval()))
        pthread_cond_wait(&plugin.timer_cond, &plugin.timer_lock);
    pthread_mutex_unlock(&plugin.timer_lock);
    return interval;
}

static void *timer_main(void *arg)
{
    (void)arg;
    struct vcpu rng = {.rng = 0x2545f4914f6cdd1du ^ now_ns()}; /* only for jittered() */
    /* named, so that its CPU time can be told from QEMU's threads (bench/plugin.sh) */
    pthread_setname_np(pthread_self(), "qprof-timer");
    atomic_store(&plugin.timer_tid, gettid());
    measure_wake_cost();
    uint64_t deadline = 0, gen = 0;
    for (;;) {
        uint64_t interval = timed_interval(), now = now_ns();
        if (!interval) {
            deadline = 0;
            interval = wait_for_work();
            now = now_ns();
        }
        if (gen != atomic_load(&plugin.gen)) { /* a new configuration times from now */
            gen = atomic_load(&plugin.gen);
            deadline = 0;
        }
        if (!deadline) {
            deadline = now + jittered(&rng, interval);
        } else if (now >= deadline) {
            uint64_t late = (now - deadline) / interval;
            timer_tick(late >= QPR_MAX_PERIODS ? QPR_MAX_PERIODS : late + 1, interval);
            deadline += late * interval + jittered(&rng, interval);
            if (deadline <= now)
                deadline = now + jittered(&rng, interval) / 2;
        }
        /* a long interval is slept in slices, so that the next configuration is seen */
        uint64_t until = MIN(deadline, now_ns() + TIMER_SLICE_NS);
        struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
    return NULL;
}

/* --- changing the trigger: the blocks' code, so by a reset --- */

/* Every vCPU's next block calls on_counter (which asks for a pending reset, or finds a new
 * configuration) instead of waiting for its deadline or 2^24 instructions. */
static void kick_vcpus(void)
{
    for (uint32_t i = 0; i < plugin.n_vcpus; i++)
        qemu_plugin_u64_set(plugin.counter, i, FIRE);
}

static void register_running_callbacks(qemu_plugin_id_t id);

/* In QEMU's exclusive section after the code cache was flushed: no vCPU runs, no block is left. */
static void after_reset(QPR_DONE_CB_PARAMS)
{
    exact_on_reset();
    uint32_t want = atomic_load(&plugin.want_trigger);
    atomic_store(&plugin.trigger, want);
    struct qpr_header *h = qps_header(plugin.shm);
    atomic_store(&h->trigger, want);
    atomic_store(&h->trigger_reason, atomic_load(&plugin.want_reason));
    atomic_store(&plugin.resetting, false);
    register_running_callbacks(plugin.id);
    kick_vcpus(); /* each vCPU takes in the change at its first block */
    wake_timer();
}

/* From a vCPU callback (a reset needs a vCPU thread to flush from). */
static void apply_pending_reset(void)
{
    bool trigger_changed = atomic_load_explicit(&plugin.want_trigger, memory_order_relaxed) !=
                           atomic_load_explicit(&plugin.trigger, memory_order_relaxed);
    if (!trigger_changed && !exact_reset_wanted())
        return;
    if (atomic_exchange(&plugin.resetting, true))
        return; /* asked for already */
    qpr_reset(plugin.id, after_reset);
}

/* Adds the CPUs thread tid may run on to set; false when it cannot be read (tid 0 reads the
 * calling thread's, as sched_getaffinity does). */
static bool add_affinity(pid_t tid, cpu_set_t *set)
{
    cpu_set_t one;
    if (sched_getaffinity(tid, sizeof one, &one) != 0)
        return false;
    CPU_OR(set, set, &one);
    return true;
}

/* What auto's rule weighs, read now, since CPUs can be given and taken while QEMU runs (taskset,
 * cgroups): the host CPUs the vCPU threads and the timer thread may use together, how many vCPU
 * threads there are, and how many of those CPUs the timer thread has to itself. A vCPU not seen
 * running yet counts as a thread of its own that may use what QEMU's main thread may. 0 CPUs: not
 * known. */
static void count_host_cpus(uint32_t *host_cpus, uint32_t *threads, uint32_t *timer_own)
{
    cpu_set_t set, timer_set;
    CPU_ZERO(&set);
    CPU_ZERO(&timer_set);
    bool known = add_affinity(atomic_load(&plugin.timer_tid), &timer_set);
    *threads = 0;
    for (uint32_t i = 0; i < plugin.n_vcpus && known; i++) {
        pid_t tid = atomic_load_explicit(&plugin.vcpus[i].tid, memory_order_relaxed);
        bool seen = false;
        for (uint32_t j = 0; j < i && tid; j++)
            seen |= atomic_load_explicit(&plugin.vcpus[j].tid, memory_order_relaxed) == tid;
        if (seen)
            continue; /* without MTTCG one thread runs every vCPU */
        *threads += 1;
        known = add_affinity(tid ? tid : getpid(), &set);
    }
    cpu_set_t own; /* the timer's CPUs that no vCPU thread may use */
    CPU_XOR(&own, &timer_set, &set);
    CPU_AND(&own, &own, &timer_set);
    CPU_OR(&set, &set, &timer_set);
    *host_cpus = known ? (uint32_t)CPU_COUNT(&set) : 0;
    *timer_own = known ? (uint32_t)CPU_COUNT(&own) : 0;
}

/* Before auto's first choice: each vCPU's own thread, from a block callback it is made to take
 * now, where vCPU init's guess is all there is. With the timer's compare only, no block calls
 * back until a qprof connects, and the first qprof's auto counted the main thread's CPUs for the
 * vCPUs (before vCPU init gave a guess): a vCPU pinned apart from the rest looked like no CPU to
 * spare (e2e_plugin_pinned_auto). Waits at most LEARN_TIDS_NS (a vCPU in hlt takes no block:
 * its guess stands). Only the listener waits. */
#define LEARN_TIDS_NS 50000000
static void learn_vcpu_threads(void)
{
    uint64_t until = now_ns() + LEARN_TIDS_NS;
    for (bool asked = false;; asked = true) {
        bool all = true;
        for (uint32_t i = 0; i < plugin.n_vcpus; i++)
            all &= !plugin.vcpus[i].ready ||
                   atomic_load_explicit(&plugin.vcpus[i].tid_from_callback, memory_order_acquire);
        if (all || now_ns() >= until)
            return;
        if (!asked)
            kick_vcpus();
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Which trigger a configuration gets, and why. */
static uint32_t choose_trigger(const struct qpr_config *c, uint32_t *reason)
{
    if (!c->interval_ns) {
        *reason = QPR_REASON_INSNS;
        return QPR_TRIGGER_COUNTER;
    }
    if (c->trigger == QPR_TRIGGER_TIMER || c->trigger == QPR_TRIGGER_COUNTER) {
        *reason = QPR_REASON_ASKED;
        return c->trigger;
    }
    if (plugin.loaded_trigger != QPR_TRIGGER_AUTO) {
        *reason = QPR_REASON_LOADED;
        return plugin.loaded_trigger;
    }
    uint32_t wake_ns = atomic_load(&plugin.wake_cost_ns);
    if (!wake_ns) {
        *reason = QPR_REASON_UNMEASURED;
        return QPR_TRIGGER_TIMER;
    }
    *reason = QPR_REASON_RULE;
    learn_vcpu_threads();
    uint32_t host_cpus, threads, timer_own;
    count_host_cpus(&host_cpus, &threads, &timer_own);
    struct qpr_header *h = qps_header(plugin.shm);
    atomic_store(&h->host_cpus, (uint16_t)MIN(host_cpus, UINT16_MAX));
    atomic_store(&h->vcpu_threads, (uint16_t)MIN(threads, UINT16_MAX));
    atomic_store(&h->timer_own_cpus, (uint16_t)MIN(timer_own, UINT16_MAX));
    return qpr_auto_trigger(wake_ns, c->interval_ns, threads, host_cpus, timer_own);
}

static void want_trigger(uint32_t trigger, uint32_t reason)
{
    atomic_store(&plugin.want_reason, reason);
    atomic_store(&plugin.want_trigger, trigger);
    if (trigger != atomic_load(&plugin.trigger)) {
        kick_vcpus();
        return;
    }
    struct qpr_header *h = qps_header(plugin.shm); /* in place already: no reset to say so */
    atomic_store(&h->trigger, trigger);
    atomic_store(&h->trigger_reason, reason);
}

/* --- the socket side (listener thread) --- */

/* The hello, with the rings' fd and the session's tails fd when status is QPR_OK. */
static int send_hello(int fd, uint32_t status, int tails_fd)
{
    struct qpr_hello h = {.magic = QPR_MAGIC,
                          .version = QPR_VERSION,
                          .status = status,
                          .n_vcpus = plugin.n_vcpus,
                          .map_size = qps_map_size(plugin.shm)};
    snprintf(h.qemu_version, sizeof h.qemu_version, "plugin API %d", QEMU_PLUGIN_VERSION);
    h.flags = QPR_HELLO_EXACT;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof h};
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (status == QPR_OK) {
        int fds[2] = {qps_ring_fd(plugin.shm), tails_fd};
        memset(&ctl, 0, sizeof ctl);
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof fds);
        memcpy(CMSG_DATA(c), fds, sizeof fds);
    }
    return sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof h ? 0 : -1;
}

/* Before a change that flushes QEMU's code cache: waits until QPR_RESET_GAP_NS has passed since
 * the previous one, so that no client makes QEMU retranslate everything without end. Only the
 * listener (this client, and the next ones queued behind it) waits. */
static void pace_reset(void)
{
    uint64_t now = now_ns(), due = plugin.last_reset_ns + QPR_RESET_GAP_NS;
    if (plugin.last_reset_ns && now < due) {
        struct timespec ts = {(time_t)(due / 1000000000u), (long)(due % 1000000000u)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        now = now_ns();
    }
    plugin.last_reset_ns = now;
}

/* The rates of a configuration, raised to the floors (qprof_ring.h) and told to qprof in the
 * header. */
static void apply_rate_floors(struct qpr_config *c)
{
    if (!c->interval_ns && !c->period_insns)
        c->interval_ns = 1000000;
    if (c->interval_ns && c->interval_ns < QPR_MIN_INTERVAL_NS)
        c->interval_ns = QPR_MIN_INTERVAL_NS;
    if (c->interval_ns > QPR_MAX_INTERVAL_NS)
        c->interval_ns = QPR_MAX_INTERVAL_NS;
    if (!c->interval_ns && c->period_insns < QPR_MIN_PERIOD_INSNS)
        c->period_insns = QPR_MIN_PERIOD_INSNS;
    if (c->period_insns > QPR_MAX_PERIOD_INSNS)
        c->period_insns = QPR_MAX_PERIOD_INSNS;
    struct qpr_header *h = qps_header(plugin.shm);
    atomic_store(&h->interval_ns, c->interval_ns);
    atomic_store(&h->period_insns, c->interval_ns ? 0 : c->period_insns);
}

static void publish_config(const struct qpr_config *c)
{
    uint64_t gen = ++plugin.last_gen;
    struct qpr_config *dst = &plugin.cfg[gen & 1];
    *dst = *c;
    if (dst->stack_bytes > QPR_STACK_MAX)
        dst->stack_bytes = QPR_STACK_MAX;
    if (dst->ustack_bytes > QPR_STACK_MAX)
        dst->ustack_bytes = QPR_STACK_MAX;
    if (dst->extra_len > QPR_EXTRA_MAX)
        dst->extra_len = QPR_EXTRA_MAX;
    if (dst->ustack_win > QPR_WINDOWS)
        dst->ustack_win = 0;
    /* registers: indexes past the names read none (names this QEMU lacks read none either) */
    if (dst->n_regs > QPR_MAX_REGS || dst->sp_reg >= dst->n_regs || dst->mode_reg >= dst->n_regs)
        dst->n_regs = dst->sp_reg = dst->mode_reg = 0;
    if (dst->ustack_reg >= dst->n_regs)
        dst->ustack_reg = QPR_MAX_REGS;
    for (uint32_t k = 0; k < 2; k++)
        if (dst->percpu_reg[k] >= dst->n_regs)
            dst->percpu_reg[k] = QPR_MAX_REGS;
    bool percpu = dst->percpu_reg[0] < QPR_MAX_REGS || dst->percpu_reg[1] < QPR_MAX_REGS;
    for (uint32_t i = 0; i < QPR_MAX_REGS; i++)
        dst->reg_names[i][QPR_REG_NAME - 1] = 0;
    uint32_t win_total = 0;
    for (uint32_t i = 0; i < QPR_WINDOWS; i++) { /* a bad chain ends the list */
        struct qpr_window *w = &dst->win[i];
        if (w->len > QPR_WIN_BYTES - win_total || (w->base == QPR_WIN_POINTER && w->from >= i) ||
            w->base > QPR_WIN_POINTER || (w->base == QPR_WIN_KERNEL_PERCPU && !percpu))
            w->len = 0;
        if (!w->len) {
            memset(&dst->win[i], 0, sizeof dst->win[0] * (QPR_WINDOWS - i));
            break;
        }
        win_total += w->len;
    }
    apply_rate_floors(dst);
    uint32_t reason, trigger = choose_trigger(dst, &reason);
    if (trigger != atomic_load(&plugin.trigger))
        pace_reset();
    atomic_store_explicit(&plugin.gen, gen, memory_order_release);
    want_trigger(trigger, reason);
    wake_timer();
}

/* No qprof: nothing sampled, and the blocks back to the cheap compare (unless QEMU loaded the
 * plugin with trigger=counter). */
static void disarm(void)
{
    uint32_t trigger =
        plugin.loaded_trigger == QPR_TRIGGER_COUNTER ? QPR_TRIGGER_COUNTER : QPR_TRIGGER_TIMER;
    atomic_store_explicit(&plugin.gen, 0, memory_order_release);
    if (trigger != atomic_load(&plugin.trigger) || exact_reset_wanted())
        pace_reset(); /* a client that connects and leaves in a loop flushes no faster */
    want_trigger(trigger, QPR_REASON_NONE);
    wake_timer();
}

/* Whether the peer on fd may be served: QEMU's own uid, or one -plugin allowed. */
static bool peer_allowed(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred)
        return false;
    return plugin.any_user || cred.uid == geteuid() ||
           (plugin.allow_uid >= 0 && (int64_t)cred.uid == plugin.allow_uid);
}

/* Deadlines on fd: a read that has started waits at most QPR_CLIENT_DEADLINE_MS for the rest
 * (recv then returns short, which ends the session), a send five times that for a client that
 * does not read. */
static void set_deadlines(int fd)
{
    struct timeval rcv = {QPR_CLIENT_DEADLINE_MS / 1000, QPR_CLIENT_DEADLINE_MS % 1000 * 1000};
    struct timeval snd = {5 * QPR_CLIENT_DEADLINE_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd);
}

/* A second client while one is served: told it is busy, or not allowed. */
static void turn_away(void)
{
    int other = accept4(plugin.listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (other < 0)
        return;
    set_deadlines(other);
    send_hello(other, peer_allowed(other) ? QPR_BUSY : QPR_DENIED, -1);
    close(other);
}

/* One message of the session; false when it ends the session. */
static bool serve_message(int fd)
{
    struct qpr_config c;
    ssize_t n = recv(fd, &c, sizeof c, MSG_WAITALL); /* SO_RCVTIMEO bounds the wait */
    if (n != (ssize_t)sizeof c)
        return false;
    if (exact_is_request(&c)) {
        if (((const struct qpr_exact_request *)&c)->op == QPR_EXACT_START)
            pace_reset();
        if (exact_serve(fd, &c) != 0)
            return false;
        if (exact_reset_wanted())
            kick_vcpus(); /* counting starts at the next block, not the next sample */
        return true;
    }
    if (c.magic != QPR_MAGIC || c.version != QPR_VERSION)
        return false;
    publish_config(&c);
    return true;
}

/* Serves one qprof until it closes the socket or sends something malformed. */
static void serve(int fd)
{
    int tails_fd = qps_session_open(plugin.shm);
    if (tails_fd < 0)
        return;
    int rc = send_hello(fd, QPR_OK, tails_fd);
    close(tails_fd); /* the client's now; the plugin keeps its own mapping */
    if (rc != 0)
        return;
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                              {.fd = plugin.listen_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        /* This qprof first: one that was killed just as the next one connected has hung up,
         * and the next must be served, not told that one is here already. */
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !serve_message(fd))
            return;
        if (p[1].revents & POLLIN) /* a second qprof: told that one is here already */
            turn_away();
    }
}

static void *listener_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "qprof-listener");
    for (;;) {
        int fd = accept4(plugin.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL;
        }
        set_deadlines(fd);
        if (peer_allowed(fd))
            serve(fd);
        else
            send_hello(fd, QPR_DENIED, -1);
        exact_disconnected();
        disarm();
        qps_session_close(plugin.shm); /* after disarm: the vCPUs' next samples go nowhere */
        close(fd);
    }
}

/* The listening socket at path, mode 0600 (0666 when -plugin allows other uids: the peer check
 * limits them then). Only a socket already there is replaced (a QEMU's that ended); anything
 * else is left alone and refused. The mode is set before listen(), so no one connects through a
 * wider one. -errno, with -EEXIST for a path that is taken by something else. */
static int open_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return -EEXIST;
        unlink(path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    mode_t mode = plugin.any_user || plugin.allow_uid >= 0 ? 0666 : 0600;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || chmod(path, mode) != 0 ||
        lstat(path, &st) != 0 || listen(fd, 4) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    plugin.socket_dev = st.st_dev;
    plugin.socket_ino = st.st_ino;
    return fd;
}

static int open_shared(const char *target)
{
    int rc = 0;
    plugin.shm = qps_shared_new(plugin.n_vcpus, target, &rc);
    if (!plugin.shm)
        return rc;
    qps_header(plugin.shm)->api_version = QEMU_PLUGIN_VERSION;
    return 0;
}

static void on_exit_cb(QPR_EXIT_CB_PARAMS)
{
    disarm();
    struct stat st; /* only the socket this plugin made: another QEMU may have taken the path */
    if (plugin.socket_path && lstat(plugin.socket_path, &st) == 0 &&
        st.st_dev == plugin.socket_dev && st.st_ino == plugin.socket_ino)
        unlink(plugin.socket_path);
}

/* Every callback but vCPU init: at install, and again after each reset. */
static void register_running_callbacks(qemu_plugin_id_t id)
{
    qpr_register_vcpu_idle_cb(id, on_idle);
    qpr_register_vcpu_resume_cb(id, on_resume);
    qpr_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qpr_register_atexit_cb(id, on_exit_cb);
}

/* Says on stderr why the plugin cannot load; QEMU then refuses -plugin. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "qprof-plugin: %s\n", line); /* qemu_plugin_outs is silent without -d plugin */
    return -1;
}

/* allow-uid=N and any-user=on: who besides QEMU's own uid may connect. 0, or -1 for an
 * argument that is neither. */
static int parse_user_option(const char *arg)
{
    if (strcmp(arg, "any-user=on") == 0) {
        plugin.any_user = true;
        return 0;
    }
    if (!g_str_has_prefix(arg, "allow-uid="))
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long uid = strtoull(arg + strlen("allow-uid="), &end, 10);
    if (errno || !end || *end || end == arg + strlen("allow-uid=") || uid >= UINT32_MAX)
        return -1;
    plugin.allow_uid = (int64_t)uid;
    return 0;
}

/* The QEMU targets qprof has an architecture table for (arch/), which qprof checks the header's
 * target name against again. The plugin itself decides nothing by architecture (qprof's
 * configuration names the registers and the capture's steps), but it reads registers of at
 * most 8 bytes as little-endian and cannot ask qprof before a client connects: a QEMU for
 * another target is refused as it loads the plugin, not at the first qprof. */
#define KNOWN_TARGETS "x86_64, riscv64, aarch64"

static bool known_target(const char *name)
{
    g_auto(GStrv) names = g_strsplit(KNOWN_TARGETS, ", ", -1);
    return g_strv_contains((const char *const *)names, name);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    const char *socket_path = NULL;
    plugin.loaded_trigger = QPR_TRIGGER_AUTO;
    for (int i = 0; i < argc; i++) {
        if (g_str_has_prefix(argv[i], "socket="))
            socket_path = argv[i] + strlen("socket=");
        else if (strcmp(argv[i], "trigger=auto") == 0)
            plugin.loaded_trigger = QPR_TRIGGER_AUTO;
        else if (strcmp(argv[i], "trigger=timer") == 0)
            plugin.loaded_trigger = QPR_TRIGGER_TIMER;
        else if (strcmp(argv[i], "trigger=counter") == 0)
            plugin.loaded_trigger = QPR_TRIGGER_COUNTER;
        else if (parse_user_option(argv[i]) != 0)
            return fail("unknown argument %s (expected socket=PATH, trigger=auto|timer|counter, "
                        "allow-uid=N, any-user=on)",
                        argv[i]);
    }
    /* the blocks carry the timer's compare until a qprof asks for more */
    plugin.trigger = plugin.want_trigger =
        plugin.loaded_trigger == QPR_TRIGGER_COUNTER ? QPR_TRIGGER_COUNTER : QPR_TRIGGER_TIMER;
    if (!socket_path || !*socket_path)
        return fail("needs socket=PATH (-plugin qprof-plugin.so,socket=PATH)");
    if (!info->system_emulation)
        return fail("%s: only system emulation is supported", info->target_name);
    if (!known_target(info->target_name))
        return fail("%s: qprof samples %s guests", info->target_name, KNOWN_TARGETS);
    plugin.id = id;
    plugin.n_vcpus = (uint32_t)info->system.max_vcpus;
    if (plugin.n_vcpus > QPR_MAX_VCPUS)
        plugin.n_vcpus = QPR_MAX_VCPUS;
    plugin.vcpus = g_new0(struct vcpu, plugin.n_vcpus);
    plugin.socket_path = g_strdup(socket_path);
    int rc = open_shared(info->target_name);
    if (rc)
        return fail("shared memory: %s", strerror(-rc));
    plugin.listen_fd = open_socket(socket_path);
    if (plugin.listen_fd == -EEXIST)
        return fail("socket=%s: something that is not a socket is there; not replaced (remove it, "
                    "or name another path)",
                    socket_path);
    if (plugin.listen_fd < 0)
        return fail("socket %s: %s", socket_path, strerror(-plugin.listen_fd));
    plugin.counters = qemu_plugin_scoreboard_new(sizeof(uint64_t));
    plugin.counter = qemu_plugin_scoreboard_u64(plugin.counters);
    qps_header(plugin.shm)->trigger = plugin.trigger;
    exact_init();
    if (pthread_create(&plugin.listener, NULL, listener_main, NULL) != 0)
        return fail("listener thread: %s", strerror(errno));
    pthread_detach(plugin.listener);
    if (pthread_create(&plugin.timer_thread, NULL, timer_main, NULL) != 0)
        return fail("timer thread: %s", strerror(errno));
    pthread_detach(plugin.timer_thread);
    qpr_register_vcpu_init_cb(id, on_vcpu_init);
    register_running_callbacks(id);
    return 0;
}
