/* The plugin target: samples that qprof-plugin.so (plugin/) captured inside QEMU 10 on each
 * vCPU's own thread while the guest ran. Nothing here stops the guest: sample() hands the
 * session the next captured instant from the shared rings (one vCPU, as it was at that instant),
 * and read() serves the memory captured with it.
 *
 * What is read at the sample's instant and what later, and why that is consistent:
 * - registers, the stack window from sp (clipped at the first unmapped page), the demo guest's
 *   qprof_abi table (the extra window) and, for a sample taken in kernel mode, the user stack
 *   the ABI's saved frame points to: all captured by the plugin at the instant, on the vCPU's
 *   thread, before the vCPU executes another instruction. A read inside these windows is served
 *   from them.
 * - anything else (a process's .text and .eh_frame, copied to identify its binary) is read later
 *   through the sample's captured CR3 (satp, TTBR0): from the guest's RAM file when --qmp-socket
 *   names QEMU's monitor and RAM is a shared file, else out of the QEMU process (the socket's
 *   peer; without QMP its RAM is found by the first captures, open_pmem_alone). That is
 *   consistent for memory the guest does not write while the process lives: the image is keyed
 *   by the ABI's generation, which changes whenever an executable is loaded, and a copy that
 *   tore anyway fails the hash match (no name, never a wrong one). Where neither can be read,
 *   the binary stays unidentified.
 * - the registers: asked for by the names the arch table reads over the gdbstub (and those only
 *   a capture needs), and read back through it by name (target_plugin_regs.c).
 *
 * A VM paused by someone else (a monitor's `stop`) looks to the plugin like vCPUs that wait in
 * hlt. QMP's STOP and RESUME events, which QEMU stamps, tell the two apart: with --qmp-socket
 * the paused part of the waiting gives no idle samples, and is counted as skipped intervals as
 * the other targets count theirs; without it a pause shows as idle. */
#include "target_plugin_internal.h"
#include "target_qmp_ram.h"

#include "qprof/guest_abi.h"

#include <glib.h>
#include <json.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* What to capture: the registers, the stack, the demo ABI's table and the user stack its slot
 * leads to. */
static int send_config(struct target_plugin *t, const struct prof_target_open_opts *o,
                       struct qp_error *err)
{
    struct qpr_config c = {.magic = QPR_MAGIC,
                           .version = QPR_VERSION,
                           .interval_ns = o->period_insns ? 0 : o->interval_ns,
                           .period_insns = o->period_insns,
                           .stack_bytes = QPR_STACK_MAX,
                           .trigger = t->trigger};
    int rc = tp_config_registers(t->arch, &c, err);
    if (rc)
        return rc;
    if (o->abi_addr) {
        c.extra_addr = o->abi_addr;
        c.extra_len = sizeof(struct qprof_abi);
        c.chase_off = offsetof(struct qprof_abi, cpu) + offsetof(struct qprof_abi_cpu, user_regs);
        c.chase_stride = sizeof(struct qprof_abi_cpu);
        c.chase_add = t->arch->abi_frame.sp_off;
        c.ustack_bytes = QPR_STACK_MAX;
        c.kstack_top_off =
            offsetof(struct qprof_abi, cpu) + offsetof(struct qprof_abi_cpu, kstack_hi);
        /* the plugin reads it where no CPU-pushed interrupt frame says (!iret_frame) */
        c.top_frame_size = t->arch->abi_frame.size;
    }
    c.user_end = t->arch->split.user_end;
    _Static_assert(sizeof(struct qprof_abi) <= QPR_EXTRA_MAX, "the ABI fits the extra window");
    t->cfg = c;
    if (send(t->fd, &c, sizeof c, MSG_NOSIGNAL) != (ssize_t)sizeof c)
        return qp_error_set(err, -EPIPE, "configuring the plugin: %s", strerror(errno));
    return 0;
}

/* The OS adapter's windows (prof_capture_plan), sent as a new configuration: the plugin takes
 * them from its vCPUs' next samples on (each vCPU restarts its interval then). */
static int tp_set_capture(void *impl, const struct prof_capture_plan *plan, struct qp_error *err)
{
    struct target_plugin *t = impl;
    _Static_assert(PROF_CAPTURE_WINDOWS == QPR_WINDOWS, "one window table");
    _Static_assert(PROF_CAPTURE_BYTES == QPR_WIN_BYTES, "one window budget");
    _Static_assert((int)PROF_CAPTURE_KERNEL_PERCPU == (int)QPR_WIN_KERNEL_PERCPU &&
                       (int)PROF_CAPTURE_POINTER == (int)QPR_WIN_POINTER,
                   "one numbering of window bases");
    for (int i = 0; i < plan->n && t->cfg.percpu_reg[0] >= QPR_MAX_REGS; i++)
        if (plan->w[i].base == PROF_CAPTURE_KERNEL_PERCPU)
            return qp_error_set(err, -ENOTSUP,
                                "the plugin captures a kernel's per-CPU area only where a "
                                "register holds its base, and %s's table names none: samples "
                                "keep no task",
                                t->arch->name);
    struct qpr_config c = t->cfg;
    memset(c.win, 0, sizeof c.win);
    c.ustack_win = c.ustack_win_off = 0;
    for (int i = 0; i < plan->n && i < QPR_WINDOWS; i++)
        c.win[i] = (struct qpr_window){.base = (uint32_t)plan->w[i].base,
                                       .from = plan->w[i].from,
                                       .from_off = plan->w[i].from_off,
                                       .len = plan->w[i].len,
                                       .add = plan->w[i].add};
    if (plan->user_frame_window && !c.chase_stride) { /* the demo ABI's chase comes first */
        c.ustack_win = plan->user_frame_window;
        c.ustack_win_off = plan->user_frame_off;
        c.ustack_bytes = QPR_STACK_MAX;
    }
    t->cfg = c;
    if (send(t->fd, &c, sizeof c, MSG_NOSIGNAL) != (ssize_t)sizeof c)
        return qp_error_set(err, -EPIPE, "configuring the plugin: %s", strerror(errno));
    return 0;
}

static void tp_free(void *impl)
{
    struct target_plugin *t = impl;
    if (!t)
        return;
    target_pmem_free(t->pmem);
    g_free(t->pmem_w);
    if (t->map)
        munmap((void *)t->map, t->map_size);
    if (t->tails)
        munmap(t->tails, sizeof *t->tails);
    if (t->before_plan)
        fprintf(stderr,
                "qprof: %" PRIu64 " samples the plugin took before it had the OS adapter's "
                "windows were passed over (their task could not be read at their instant)\n",
                t->before_plan);
    if (t->fd >= 0)
        close(t->fd); /* the plugin disarms when its socket closes */
    qmp_free(t->qmp);
    g_free(t);
}

static int tp_open(const struct prof_target_open_opts *o, void **impl, struct qp_error *err)
{
    struct target_plugin *t = g_new0(struct target_plugin, 1);
    t->interval_ns = o->interval_ns ? o->interval_ns : 10000000;
    t->period_insns = o->period_insns;
    _Static_assert((int)PROF_PLUGIN_TRIGGER_AUTO == (int)QPR_TRIGGER_AUTO &&
                       (int)PROF_PLUGIN_TRIGGER_TIMER == (int)QPR_TRIGGER_TIMER &&
                       (int)PROF_PLUGIN_TRIGGER_COUNTER == (int)QPR_TRIGGER_COUNTER,
                   "one numbering of triggers");
    t->trigger = (uint32_t)o->plugin_trigger;
    t->exact = o->exact;
    t->idle_vcpu = -1;
    int fds[2] = {-1, -1};
    struct qpr_hello h;
    double timeout = o->timeout_s ? o->timeout_s : 5;
    int rc = t->fd = tp_connect_socket(o->address, err);
    if (rc >= 0)
        rc = tp_receive_hello(t, o->address, fds, &h, timeout, err);
    if (rc >= 0) {
        rc = tp_map_rings(t, fds, &h, err);
    } else {
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0)
                close(fds[i]);
    }
    if (rc >= 0 && o->qmp_address)
        rc = tp_open_qmp(t, o->qmp_address, timeout, err);
    if (rc >= 0)
        rc = send_config(t, o, err);
    if (rc >= 0 && !t->qmp)
        tp_open_pmem_alone(t, timeout);
    struct qpr_exact_reply started;
    if (rc >= 0 && t->exact) /* counting starts at the next callback on a running vCPU */
        rc = tp_exact_request(t, QPR_EXACT_START, &started, err);
    if (rc < 0) {
        tp_free(t);
        return rc;
    }
    *impl = t;
    return 0;
}

/* How long sample() waits for the guest to execute anything before saying it did not run. */
#define WAIT_RUN_NS UINT64_C(1000000000)

static int tp_sample(void *impl, prof_target *handle, prof_target_stopped_fn fn, void *ctx,
                     struct prof_target_stats *stats, struct qp_error *err)
{
    struct target_plugin *t = impl;
    if (stats)
        *stats = (struct prof_target_stats){0};
    if (tp_repeat_unrun(t, stats))
        return 0;
    uint64_t start = qp_now_ns();
    while (t->idle_pending == 0) {
        if (tp_take_idle_ticks(t))
            break;
        if (!tp_next_record(t)) {
            if (tp_peer_gone(t))
                return qp_error_set(err, -EPIPE, "QEMU closed the plugin's socket (QEMU exited?)");
            tp_take_pause_events(t);
            if (t->paused_since_us) {
                /* someone else's `stop`: nothing runs, nothing to sample, nothing to resume */
                struct timespec ts = {0, 10000000};
                nanosleep(&ts, NULL);
                if (stats)
                    stats->was_paused = true;
                return 0;
            }
            if (qp_now_ns() - start > WAIT_RUN_NS) {
                if (stats)
                    stats->was_paused = true; /* no vCPU executed anything: paused */
                return 0;
            }
            uint64_t wait = qpr_drain_wait_ns(t->period_insns ? 0 : t->interval_ns);
            struct timespec ts = {(time_t)(wait / 1000000000u), (long)(wait % 1000000000u)};
            nanosleep(&ts, NULL);
            continue;
        }
        if (t->cur.kind == QPR_KIND_SAMPLE && t->cfg.win[0].len && !t->cur.win_asked) {
            t->before_plan++;
            continue;
        }
        if (t->cur.kind == QPR_KIND_SAMPLE) {
            int rc = tp_vcpu_from_sample(t, &t->cur, err);
            if (rc)
                return rc;
            t->vcpu.flag_age_us = t->cur.flag_age_us;
            t->vcpu.flag_trigger = t->cur.trigger == QPR_TRIGGER_TIMER     ? PROF_FLAG_TIMER
                                   : t->cur.trigger == QPR_TRIGGER_COUNTER ? PROF_FLAG_COUNTER
                                                                           : PROF_FLAG_NONE;
            if (stats)
                stats->paused_ns = t->cur.cost_ns; /* the capture's time on that vCPU alone */
            uint64_t unrun = tp_capture_repeats(t);
            tp_witness_sample(t);
            rc = fn(handle, &t->vcpu, 1, ctx, err);
            t->repeats_left = rc ? 0 : unrun; /* tp_repeat_unrun */
            return rc;
        }
        if (t->cur.kind == QPR_KIND_IDLE) {
            uint64_t *carry = &t->idle_carry_ns[t->cur.vcpu];
            *carry += t->cur.idle_ns - tp_paused_part_ns(t, &t->cur);
            t->idle_pending = *carry / t->interval_ns;
            *carry %= t->interval_ns;
            t->idle_vcpu = (int)t->cur.vcpu;
        }
    }
    t->idle_pending--;
    tp_idle_vcpu(t, t->idle_vcpu);
    return fn(handle, &t->vcpu, 1, ctx, err);
}

/* Serves [vaddr, vaddr + len) from one captured window when it starts inside it. */
static bool from_window(struct prof_mem_req *q, uint64_t addr, const uint8_t *bytes, uint32_t n)
{
    if (!n || q->vaddr < addr || q->vaddr - addr >= n)
        return false;
    size_t off = q->vaddr - addr, take = n - off < q->len ? n - off : q->len;
    memcpy(q->buf, bytes + off, take);
    q->got = take;
    q->rc = 0;
    return true;
}

/* The same from the chained windows (the OS adapter's). */
static bool from_windows(struct prof_mem_req *q, const struct qpr_sample *s)
{
    for (int w = 0; w < QPR_WINDOWS; w++)
        if (from_window(q, s->win_addr[w], s->win_bytes + s->win_off[w], s->win_len[w]))
            return true;
    return false;
}

static int tp_read(void *impl, const struct prof_vcpu *cpu, struct prof_mem_req *reqs, size_t n,
                   struct qp_error *err)
{
    struct target_plugin *t = impl;
    const struct plugin_cpu *pc = cpu->target_cpu;
    const struct qpr_sample *s = pc ? pc->s : NULL;
    (void)err; /* a read that fails leaves its request's rc: the others go on */
    for (size_t i = 0; i < n; i++) {
        struct prof_mem_req *q = &reqs[i];
        q->got = 0;
        q->rc = q->len ? -EFAULT : 0;
        if (!q->len || !s)
            continue;
        if (from_window(q, s->stack_addr, s->stack, s->stack_len) ||
            from_window(q, s->extra_addr, s->extra, s->extra_len) ||
            from_window(q, s->ustack_addr, s->ustack, s->ustack_len) || from_windows(q, s))
            continue;
        /* A stack outside the windows is not this instant's any more (the guest ran on): the
         * RAM file serves only what does not change under a running process, its code; and
         * nothing where the walk does not know the vCPU's translation (no wrong bytes). */
        if (q->instant || cpu->unwalkable)
            continue;
        if (t->pmem)
            target_pmem_read_walked(t->pmem, t->arch, cpu->as_root, cpu, q);
        else if (t->direct)
            target_qmp_read_walked(t->qmp, t->arch, cpu->as_root, cpu, q);
    }
    return 0;
}

static bool tp_running(void *impl)
{
    (void)impl;
    return true; /* a guest that runs nothing shows as no records (stats.was_paused) */
}

static const struct prof_arch *tp_arch(const void *impl)
{
    return ((const struct target_plugin *)impl)->arch;
}

static int tp_vcpu_count(const void *impl)
{
    return (int)((const struct target_plugin *)impl)->n_vcpus;
}

static int tp_read_phys(void *impl, uint64_t paddr, void *buf, size_t len, struct qp_error *err)
{
    struct target_plugin *t = impl;
    if (t->pmem)
        return target_pmem_phys(t->pmem, paddr, buf, len)
                   ? qp_error_set(err, -EFAULT, "guest-physical 0x%llx is not RAM (%s)",
                                  (unsigned long long)paddr, TARGET_PMEM_NAME)
                   : 0;
    if (!t->direct)
        return qp_error_set(err, -ENOTSUP,
                            "the plugin target reads guest-physical memory only with "
                            "--qmp-socket (the RAM file)");
    return qmp_phys_read(t->qmp, paddr, buf, len, err);
}

static int tp_ram_ranges(void *impl, struct prof_ram_range *out, int max, int *n,
                         struct qp_error *err)
{
    struct target_plugin *t = impl;
    if (t->pmem)
        return target_pmem_ram_ranges(t->pmem, out, max, n);
    if (!t->direct)
        return qp_error_set(err, -ENOTSUP, "the plugin target lists RAM only with --qmp-socket");
    return target_qmp_ram_ranges(t->qmp, out, max, n, err);
}

static uint64_t tp_round_trips(const void *impl)
{
    (void)impl;
    return 0;
}

static bool tp_reads_cost(const void *impl)
{
    (void)impl;
    return false;
}

static const char *tp_version(const void *impl)
{
    return ((const struct target_plugin *)impl)->version;
}

const struct prof_target_ops prof_target_plugin_ops = {
    .name = "plugin",
    .transport = "plugin",
    .round_trip_name = "round trips",
    .round_trip_ms = 0,
    .captures = true,
    .arch_of = tp_arch, /* from the ring's header: open knows it */
    .open = tp_open,
    .sample = tp_sample,
    .read = tp_read,
    .running = tp_running,
    .vcpu_count = tp_vcpu_count,
    .read_phys = tp_read_phys,
    .ram_ranges = tp_ram_ranges,
    .round_trips = tp_round_trips,
    .lost = tp_lost,
    .missed = tp_missed,
    .independent = tp_independent,
    .paused_intervals = tp_paused_intervals,
    .exact_counts = tp_exact_counts,
    .set_capture = tp_set_capture,
    .reads_cost_round_trips = tp_reads_cost,
    .version = tp_version,
    .describe = tp_describe,
    .trigger = tp_trigger,
    .free = tp_free,
};
