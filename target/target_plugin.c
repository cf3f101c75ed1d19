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
 * - the registers: x86_64's are the ring's fixed QPR_REGS; riscv64's and aarch64's are asked for
 *   by the names the arch table reads over the gdbstub, and read back through it by name.
 *
 * A VM paused by someone else (a monitor's `stop`) looks to the plugin like vCPUs that wait in
 * hlt. QMP's STOP and RESUME events, which QEMU stamps, tell the two apart: with --qmp-socket
 * the paused part of the waiting gives no idle samples, and is counted as skipped intervals as
 * the other targets count theirs; without it a pause shows as idle. */
#include "target.h"
#include "arch.h"
#include "arch_x86_64.h"
#include "mem_process.h"
#include "target_qmp_ram.h"
#include "target_vcpu.h"

#include "qprof/guest_abi.h"
#include "qmp.h"
#include "qprof_ring.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <json.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A pause someone else made, in QEMU's wall-clock stamps (us). */
struct pause_span {
    int64_t from_us, to_us;
};

#define MAX_PAUSES 64
/* The vCPUs stop before QEMU stamps STOP and wake after it stamps RESUME (their threads wait
 * for the host to run them): waiting this close to a pause is the pause's. */
#define PAUSE_SLACK_US 50000

/* The vCPU behind a delivered prof_vcpu: the captured sample and the MMU view for RAM reads. */
struct plugin_cpu {
    const struct qpr_sample *s; /* NULL for an idle sample */
    struct qmp_regs mmu;
};

struct target_plugin {
    int fd;
    /* The rings, mapped read-only (the plugin alone writes them), and this session's read
     * positions, the only memory qprof writes. The rings' pointers and the header's status
     * words are taken once at open, from the layout checked there: nothing in the header is
     * read as a size or an offset again. */
    const void *map;
    size_t map_size;
    struct qpr_tails *tails;
    const struct qpr_ring *ring[QPR_MAX_VCPUS];
    const struct qpr_header *status; /* trigger, trigger_reason, wake_cost_ns only */
    uint32_t n_vcpus;
    /* The guest's architecture, from QEMU's target name in the ring's header: x86_64's
     * registers are the ring's QPR_REGS, the others' are read through the arch table by name. */
    const struct prof_arch *arch;
    uint64_t tail[QPR_MAX_VCPUS];
    uint64_t lost_at_open[QPR_MAX_VCPUS];
    uint64_t idle_ticks_seen[QPR_MAX_VCPUS]; /* trigger=timer's idle samples taken over */
    uint64_t interval_ns, period_insns;
    uint32_t trigger; /* enum qpr_trigger asked for (--plugin-trigger) */
    bool exact;       /* --exact: the plugin counts instructions per block */
    uint64_t idle_carry_ns[QPR_MAX_VCPUS];
    uint32_t next_ring;
    int idle_vcpu; /* idle samples still to deliver for this vCPU */
    uint64_t idle_pending;
    uint64_t missed; /* intervals that passed while the host did not run a vCPU's thread */
    /* QMP of --qmp-socket, NULL without: its STOP and RESUME events tell a pause (someone
     * else's `stop`) from a halt, which the plugin alone cannot (both are a vCPU thread that
     * waits). With `direct`, its backend also maps the RAM file. */
    qmp_client *qmp;
    bool direct;
    /* Without the RAM file, code read out of the QEMU process (mem_process.h), which the
     * plugin's socket's peer is; NULL when not in use. */
    target_pmem *pmem;
    struct pause_span pauses[MAX_PAUSES]; /* the latest ended pauses, oldest overwritten */
    unsigned n_pauses;
    int64_t paused_since_us; /* QEMU's STOP stamp of the pause going on; 0: running */
    int64_t open_us;         /* wall clock at open: pauses count from here */
    int64_t real_minus_mono_us;
    uint64_t paused_us;    /* ended pauses' time since open, for the skipped intervals */
    struct qpr_config cfg; /* what the plugin was last sent */
    /* Samples the plugin took before it had the OS adapter's windows (set_capture), passed
     * over: their task cannot be read at their instant any more. */
    uint64_t before_plan;
    struct qpr_sample cur; /* a copy: the ring slot is released at once */
    struct plugin_cpu cpu;
    struct prof_vcpu vcpu;
    char version[48];
    char trigger_line[256];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* QEMU refuses a plugin built for a plugin API it does not take ("plugin requires API version
 * 4, but this QEMU supports only a minimum version of 7") and exits: all qprof sees is no socket.
 */
#define INSTALL_HINT                                                                               \
    "start QEMU 9.2 to 11.x (plugin API 4 to 7) with -plugin build/qprof-plugin.so,socket=PATH, "  \
    "the plugin built against that QEMU's own qemu-plugin.h ('xtask/xtask build' takes the "       \
    "system QEMU's; if QEMU said 'plugin requires API version N', rebuild it for that QEMU; "      \
    "Debian 12's 7.2 cannot load it, xtask/qemu10.sh fetches 10.0)"

static int connect_socket(const char *address, struct qp_error *err)
{
    const char *path = g_str_has_prefix(address, "unix:") ? address + 5 : address;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return qp_error_set(err, -ENAMETOOLONG, "--plugin %s: path too long", address);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return qp_error_set(err, -errno, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        return qp_error_set(err, -ECONNREFUSED, "no qprof plugin answers at %s (%s): " INSTALL_HINT,
                            path, strerror(e));
    }
    return fd;
}

/* The plugin's hello and the two memfds beside it (fds[0] the rings', fds[1] the tails'), -1
 * for one not sent. */
static int receive_hello(struct target_plugin *t, const char *address, int fds[2],
                         struct qpr_hello *h, double timeout_s, struct qp_error *err)
{
    struct pollfd p = {.fd = t->fd, .events = POLLIN};
    if (poll(&p, 1, (int)(timeout_s * 1000)) <= 0)
        return qp_error_set(err, -ETIMEDOUT,
                            "%s said nothing in %.0f s: not a qprof plugin socket? " INSTALL_HINT,
                            address, timeout_s);
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = h, .iov_len = sizeof *h};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(t->fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
    fds[0] = fds[1] = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n > 0 && c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(2 * sizeof(int)) && fds[0] < 0)
            memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
    if (n != (ssize_t)sizeof *h || h->magic != QPR_MAGIC)
        return qp_error_set(err, -EPROTO,
                            "%s is not a qprof plugin socket (QMP's or the "
                            "gdbstub's?): " INSTALL_HINT,
                            address);
    if (h->version != QPR_VERSION)
        return qp_error_set(err, -EPROTO,
                            "the plugin at %s speaks version %u, this qprof %u: load the "
                            "qprof-plugin.so built with this qprof",
                            address, h->version, QPR_VERSION);
    if (h->status == QPR_BUSY)
        return qp_error_set(err, -EBUSY, "another qprof is sampling through the plugin at %s",
                            address);
    if (h->status == QPR_DENIED)
        return qp_error_set(err, -EACCES,
                            "the plugin at %s serves QEMU's own user only (this qprof runs as uid "
                            "%u; -plugin ...,allow-uid=%u lets it in)",
                            address, (unsigned)geteuid(), (unsigned)geteuid());
    if (t->exact && !(h->flags & QPR_HELLO_EXACT))
        return qp_error_set(err, -ENOTSUP,
                            "the plugin at %s cannot count instructions (--exact): load the "
                            "qprof-plugin.so built with this qprof",
                            address);
    if (fds[0] < 0 || fds[1] < 0 || h->n_vcpus == 0 || h->n_vcpus > QPR_MAX_VCPUS ||
        h->map_size != qpr_map_size(h->n_vcpus))
        return qp_error_set(err, -EPROTO, "the plugin at %s sent an unusable ring", address);
    return 0;
}

/* Maps the rings read-only and the tails read-write (closing both fds), checks the rings'
 * layout and takes their pointers once. */
static int map_rings(struct target_plugin *t, const int fds[2], const struct qpr_hello *h,
                     struct qp_error *err)
{
    t->map_size = h->map_size;
    void *map = mmap(NULL, t->map_size, PROT_READ, MAP_SHARED, fds[0], 0);
    int map_errno = errno;
    void *tails = mmap(NULL, sizeof *t->tails, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
    int tails_errno = errno;
    close(fds[0]);
    close(fds[1]);
    t->map = map == MAP_FAILED ? NULL : map;
    t->tails = tails == MAP_FAILED ? NULL : tails;
    if (!t->map || !t->tails)
        return qp_error_set(err, -(t->map ? tails_errno : map_errno),
                            "mapping the plugin's ring: %s",
                            strerror(t->map ? tails_errno : map_errno));
    const struct qpr_header *hd = t->map;
    if (hd->magic != QPR_MAGIC || hd->n_vcpus != h->n_vcpus || hd->slots != QPR_SLOTS ||
        hd->sample_size != sizeof(struct qpr_sample) || hd->ring_size != sizeof(struct qpr_ring) ||
        hd->ring_offset != qpr_map_size(0))
        return qp_error_set(err, -EPROTO,
                            "the plugin's ring has another layout: load the "
                            "qprof-plugin.so built with this qprof");
    t->n_vcpus = h->n_vcpus;
    char target[sizeof hd->target + 1] = {0};
    memcpy(target, hd->target, sizeof hd->target);
    t->arch = prof_arch_by_name(target);
    if (!t->arch)
        return qp_error_set(err, -ENOTSUP, "the plugin runs in a QEMU for %s; qprof knows %s",
                            target, prof_arch_known_names());
    snprintf(t->version, sizeof t->version, "QEMU 9.2+ (plugin API %u)", hd->api_version);
    t->status = hd;
    /* Start from where the plugin set this session's tails: what an earlier qprof left unread
     * is not this run's. */
    for (uint32_t i = 0; i < t->n_vcpus; i++) {
        const struct qpr_ring *r = (const void *)((const char *)t->map + qpr_ring_offset(i));
        t->ring[i] = r;
        t->tail[i] = atomic_load_explicit(&t->tails->v[i].tail, memory_order_relaxed);
        t->lost_at_open[i] = atomic_load_explicit(&r->lost, memory_order_relaxed);
        t->idle_ticks_seen[i] = atomic_load_explicit(&r->idle_ticks, memory_order_relaxed);
    }
    return 0;
}

/* Adds register name to c's list: its index, or -1 when the list is full. */
static int add_reg(struct qpr_config *c, const char *name)
{
    for (uint32_t i = 0; i < c->n_regs; i++)
        if (strcmp(c->reg_names[i], name) == 0)
            return (int)i;
    if (c->n_regs >= QPR_MAX_REGS || strlen(name) >= QPR_REG_NAME)
        return -1;
    snprintf(c->reg_names[c->n_regs], QPR_REG_NAME, "%s", name);
    return (int)c->n_regs++;
}

/* The registers to read at each sample: x86_64's QPR_REGS (their indexes are the ring's), the
 * others' general and state registers as their arch table names them. */
static int config_registers(const struct prof_arch *a, struct qpr_config *c, struct qp_error *err)
{
    static const char *const x86[] = {
#define QPR_NAME(id, name) name,
        QPR_REGS(QPR_NAME)
#undef QPR_NAME
    };
    if (a == &prof_arch_x86_64) {
        for (size_t i = 0; i < sizeof x86 / sizeof x86[0]; i++)
            add_reg(c, x86[i]);
        c->arch = QPR_ARCH_X86_64, c->sp_reg = QPR_RSP, c->mode_reg = QPR_CS;
        c->ustack_reg = QPR_MAX_REGS;
        c->mode_mask = 3, c->mode_user = 3;
        return 0;
    }
    c->arch = a == &prof_arch_riscv64 ? QPR_ARCH_RISCV64 : QPR_ARCH_AARCH64;
    int sp = -1, mode;
    for (int i = 0; i < a->n_gdb_regs; i++) {
        int k = add_reg(c, a->gdb_regs[i].gdb_name);
        if (a->gdb_regs[i].slot == a->sp_reg)
            sp = k;
    }
    for (int i = 0; a->gdb_state_regs[i]; i++)
        add_reg(c, a->gdb_state_regs[i]);
    mode = add_reg(c, a->capture_mode_reg);
    if (sp < 0 || mode < 0)
        return qp_error_set(err, -ENOTSUP, "%s: more registers than the plugin takes", a->name);
    c->sp_reg = (uint32_t)sp, c->mode_reg = (uint32_t)mode;
    /* an entry from user mode may leave the user sp in a register until the kernel saved it */
    int usp = a->capture_user_sp_reg ? add_reg(c, a->capture_user_sp_reg) : -1;
    c->ustack_reg = usp >= 0 ? (uint32_t)usp : QPR_MAX_REGS;
    c->mode_mask = a->capture_mode_mask, c->mode_user = a->capture_mode_user;
    return 0;
}

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
    int rc = config_registers(t->arch, &c, err);
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
        /* the plugin reads it where no CPU-pushed interrupt frame says (not on x86_64) */
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
    _Static_assert((int)PROF_CAPTURE_KERNEL_PERCPU == (int)QPR_WIN_KERNEL_GS &&
                       (int)PROF_CAPTURE_POINTER == (int)QPR_WIN_POINTER,
                   "one numbering of window bases");
    for (int i = 0; i < plan->n && t->arch != &prof_arch_x86_64; i++)
        if (plan->w[i].base == PROF_CAPTURE_KERNEL_PERCPU)
            return qp_error_set(err, -ENOTSUP,
                                "the plugin captures a kernel's per-CPU area on x86_64 guests "
                                "only (this one is %s): samples keep no task",
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

/* QMP beside the plugin: the RAM file when it is shared (code of user processes), and in any
 * case the events that say when someone else paused the guest. */
static int open_qmp(struct target_plugin *t, const char *address, double timeout,
                    struct qp_error *err)
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
static void take_pause_events(struct target_plugin *t)
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
    take_pause_events(t);
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
static uint64_t paused_part_ns(struct target_plugin *t, const struct qpr_sample *s)
{
    if (!t->qmp)
        return 0;
    int64_t end = wall_us(t, s->time_ns);
    uint64_t ns = (uint64_t)paused_within_us(t, end - (int64_t)(s->idle_ns / 1000), end) * 1000;
    return ns > s->idle_ns ? s->idle_ns : ns;
}

/* Intervals a sample stands for beyond its own that the vCPU's thread did not run: a pause
 * that caught the vCPU between checks (not in a wait) shows so too, and is not the host's. */
static uint64_t unrun_periods(struct target_plugin *t, const struct qpr_sample *s)
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

/* --- Without --qmp-socket: code out of the QEMU process, proved against the captures --- */

#define WITNESSES      8
#define WITNESS_WAIT_S 5.0

static int vcpu_from_sample(struct target_plugin *t, const struct qpr_sample *s,
                            struct qp_error *err);
static bool peer_gone(struct target_plugin *t);

/* A captured window as a witness of what the guest's memory held (its first bytes). */
static void add_witness(struct target_pmem_witness *w, int *n, const struct prof_vcpu *v,
                        uint64_t vaddr, const uint8_t *bytes, uint32_t len)
{
    if (!len || *n >= WITNESSES || !v->paging64)
        return;
    struct target_pmem_witness *x = &w[(*n)++];
    x->root = v->as_root;
    x->mmu = v->mmu;
    x->vaddr = vaddr;
    x->len = MIN(len, (uint32_t)TARGET_PMEM_WITNESS_LEN);
    memcpy(x->bytes, bytes, x->len);
}

/* Witnesses from the samples waiting in the rings, read in place (the plugin does not write a
 * slot before qprof's tail passes it; the tails are not moved, so these samples are still
 * delivered). t->cur serves as the scratch copy. */
static int peek_witnesses(struct target_plugin *t, struct target_pmem_witness *w, int *seen)
{
    int n = 0;
    *seen = 0;
    for (uint32_t i = 0; i < t->n_vcpus && n < WITNESSES; i++) {
        uint64_t head = atomic_load_explicit(&t->ring[i]->head, memory_order_acquire);
        for (uint64_t at = t->tail[i]; at != head && n < WITNESSES; at++) {
            const struct qpr_sample *slot = &t->ring[i]->slots[at % QPR_SLOTS];
            memcpy(&t->cur, slot, offsetof(struct qpr_sample, stack));
            if (t->cur.kind != QPR_KIND_SAMPLE)
                continue;
            struct qp_error ignored = {0};
            if (vcpu_from_sample(t, &t->cur, &ignored) != 0)
                continue;
            (*seen)++;
            uint32_t sl = MIN(t->cur.stack_len, (uint32_t)QPR_STACK_MAX);
            uint32_t el = MIN(t->cur.extra_len, (uint32_t)QPR_EXTRA_MAX);
            add_witness(w, &n, &t->vcpu, t->cur.stack_addr, slot->stack, sl);
            add_witness(w, &n, &t->vcpu, t->cur.extra_addr, slot->extra, el);
        }
    }
    return n;
}

/* The plugin alone can say where guest RAM lies in QEMU by what it captured: QEMU is the
 * socket's peer, and a mapping is taken when the captured windows read back through it (the
 * rules of mem_process.h). Waits for the first samples; a refusal is one line, and user code then
 * stays unread as before. */
static void open_pmem_alone(struct target_plugin *t, double timeout)
{
    struct target_pmem_witness *w = g_new0(struct target_pmem_witness, WITNESSES);
    struct qp_error perr = {0};
    pid_t pid = 0;
    int n = 0, seen = 0, rc = target_pmem_peer_pid(t->fd, &pid, &perr);
    if (!rc)
        rc = target_pmem_may_read(pid, &perr);
    uint64_t deadline = now_ns() + (uint64_t)(MIN(timeout, WITNESS_WAIT_S) * 1e9);
    while (!rc && (n = peek_witnesses(t, w, &seen)) < WITNESSES && now_ns() < deadline &&
           !peer_gone(t)) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (!rc && n < 3)
        rc = qp_error_set(&perr, -ENODATA,
                          "the plugin captured %d samples in %.0f s (the guest idles?), too few "
                          "to find guest RAM in QEMU by",
                          seen, MIN(timeout, WITNESS_WAIT_S));
    if (!rc)
        rc = target_pmem_open_witnessed(pid, t->arch, w, n, &t->pmem, &perr);
    if (rc)
        fprintf(stderr, "qprof: process memory: %s; user code is not read\n", perr.msg);
    g_free(w);
}

/* --- --exact: requests on the socket, answered at once by the plugin's listener --- */

uint64_t prof_target_code_hash(const void *code, size_t len)
{
    return qpr_code_hash(QPR_CODE_HASH_INIT, code, len);
}

/* len bytes of the plugin's answer, within timeout_s. */
static int recv_exactly(struct target_plugin *t, void *buf, size_t len, double timeout_s,
                        struct qp_error *err)
{
    char *p = buf;
    while (len) {
        struct pollfd pf = {.fd = t->fd, .events = POLLIN};
        int ready = poll(&pf, 1, (int)(timeout_s * 1000));
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return qp_error_set(err, -ETIMEDOUT, "the plugin did not answer in %.0f s", timeout_s);
        ssize_t n = recv(t->fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return qp_error_set(err, -EPIPE, "QEMU closed the plugin's socket (QEMU exited?)");
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int exact_request(struct target_plugin *t, uint32_t op, struct qpr_exact_reply *reply,
                         struct qp_error *err)
{
    struct qpr_exact_request q = {.magic = QPR_EXACT_MAGIC, .version = QPR_VERSION, .op = op};
    if (send(t->fd, &q, sizeof q, MSG_NOSIGNAL) != (ssize_t)sizeof q)
        return qp_error_set(err, -EPIPE, "asking the plugin for exact counts: %s", strerror(errno));
    int rc = recv_exactly(t, reply, sizeof *reply, 30, err);
    if (rc == 0 && (reply->magic != QPR_EXACT_MAGIC || reply->version != QPR_VERSION ||
                    reply->n_blocks > (1u << 24)))
        rc = qp_error_set(err, -EPROTO, "the plugin's exact counts are malformed");
    return rc;
}

static int tp_exact_counts(void *impl, struct prof_exact_counts *out, struct qp_error *err)
{
    struct target_plugin *t = impl;
    struct qpr_exact_reply r;
    *out = (struct prof_exact_counts){0};
    if (!t->exact)
        return qp_error_set(err, -EINVAL, "the plugin target was opened without --exact");
    int rc = exact_request(t, QPR_EXACT_DUMP, &r, err);
    if (rc)
        return rc;
    struct qpr_exact_block *raw = g_new(struct qpr_exact_block, r.n_blocks ? r.n_blocks : 1);
    rc = recv_exactly(t, raw, r.n_blocks * sizeof *raw, 30, err);
    if (rc == 0) {
        out->blocks = g_new(struct prof_exact_block, r.n_blocks ? r.n_blocks : 1);
        for (uint32_t i = 0; i < r.n_blocks; i++)
            out->blocks[i] = (struct prof_exact_block){.pc = raw[i].vaddr,
                                                       .code_hash = raw[i].code_hash,
                                                       .insns = raw[i].insns,
                                                       .n_insns = raw[i].n_insns,
                                                       .n_bytes = raw[i].n_bytes};
        out->n = r.n_blocks;
        out->counting = r.counting;
        out->counted_s = r.since_ns && now_ns() > r.since_ns ? (now_ns() - r.since_ns) / 1e9 : 0;
        out->unplaced_insns = r.overflow_insns;
    }
    g_free(raw);
    return rc;
}

static void tp_free(void *impl)
{
    struct target_plugin *t = impl;
    if (!t)
        return;
    target_pmem_free(t->pmem);
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
    int rc = t->fd = connect_socket(o->address, err);
    if (rc >= 0)
        rc = receive_hello(t, o->address, fds, &h, timeout, err);
    if (rc >= 0) {
        rc = map_rings(t, fds, &h, err);
    } else {
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0)
                close(fds[i]);
    }
    if (rc >= 0 && o->qmp_address)
        rc = open_qmp(t, o->qmp_address, timeout, err);
    if (rc >= 0)
        rc = send_config(t, o, err);
    if (rc >= 0 && !t->qmp)
        open_pmem_alone(t, timeout);
    struct qpr_exact_reply started;
    if (rc >= 0 && t->exact) /* counting starts at the next callback on a running vCPU */
        rc = exact_request(t, QPR_EXACT_START, &started, err);
    if (rc < 0) {
        tp_free(t);
        return rc;
    }
    *impl = t;
    return 0;
}

/* A prof_arch_reg_fn over a captured sample, by the configuration's register names. */
struct captured_regs {
    const struct qpr_config *cfg;
    const struct qpr_sample *s;
};

static int captured_reg(void *ctx, const char *name, uint64_t *val)
{
    const struct captured_regs *c = ctx;
    for (uint32_t i = 0; i < c->cfg->n_regs && i < QPR_MAX_REGS; i++)
        if (strcmp(c->cfg->reg_names[i], name) == 0) {
            if (!(c->s->regs_valid >> i & 1))
                return -ENODATA;
            *val = c->s->regs[i];
            return 0;
        }
    return -ENOENT;
}

/* riscv64 and aarch64: through the arch table, as the gdbstub target reads the same registers. */
static int vcpu_from_named_regs(struct target_plugin *t, const struct qpr_sample *s,
                                struct qp_error *err)
{
    struct prof_vcpu *v = &t->vcpu;
    struct captured_regs c = {.cfg = &t->cfg, .s = s};
    int rc = target_vcpu_from_regs(t->arch, captured_reg, &c, v, err);
    if (rc)
        return rc;
    v->index = (int)s->vcpu;
    memset(&t->cpu.mmu, 0, sizeof t->cpu.mmu);
    t->cpu.s = s;
    v->target_cpu = &t->cpu;
    return 0;
}

static int vcpu_from_sample(struct target_plugin *t, const struct qpr_sample *s,
                            struct qp_error *err)
{
    if (t->arch != &prof_arch_x86_64)
        return vcpu_from_named_regs(t, s, err);
    struct prof_vcpu *v = &t->vcpu;
    struct unw_regs *u = &v->regs;
    const uint64_t *q = s->regs;
    memset(v, 0, sizeof *v);
    u->r[UNW_RAX] = q[QPR_RAX], u->r[UNW_RDX] = q[QPR_RDX], u->r[UNW_RCX] = q[QPR_RCX];
    u->r[UNW_RBX] = q[QPR_RBX], u->r[UNW_RSI] = q[QPR_RSI], u->r[UNW_RDI] = q[QPR_RDI];
    u->r[UNW_RBP] = q[QPR_RBP], u->r[UNW_RSP] = q[QPR_RSP], u->r[UNW_R8] = q[QPR_R8];
    u->r[UNW_R9] = q[QPR_R9], u->r[UNW_R10] = q[QPR_R10], u->r[UNW_R11] = q[QPR_R11];
    u->r[UNW_R12] = q[QPR_R12], u->r[UNW_R13] = q[QPR_R13], u->r[UNW_R14] = q[QPR_R14];
    u->r[UNW_R15] = q[QPR_R15], u->r[UNW_RIP] = q[QPR_RIP];
    v->index = (int)s->vcpu;
    v->pc = q[QPR_RIP];
    v->sp = q[QPR_RSP];
    v->privilege = (int)(q[QPR_CS] & 3);
    v->user = v->privilege == 3;
    v->paging64 = (q[QPR_CR0] & X86_CR0_PG) && (q[QPR_EFER] & X86_EFER_LMA);
    v->as_root = q[QPR_CR3] & X86_CR3_ADDR_MASK;
    v->gs_base = q[QPR_GS_BASE];
    v->la57 = (q[QPR_CR4] & X86_CR4_LA57) != 0;
    memset(&t->cpu.mmu, 0, sizeof t->cpu.mmu);
    t->cpu.mmu.cpu_index = (int)s->vcpu;
    t->cpu.mmu.cr0 = q[QPR_CR0], t->cpu.mmu.cr3 = q[QPR_CR3], t->cpu.mmu.cr4 = q[QPR_CR4];
    t->cpu.mmu.long_mode = v->paging64;
    t->cpu.s = s;
    v->target_cpu = &t->cpu;
    return 0;
}

/* A vCPU that waited in hlt: an idle sample per interval it waited. */
static void idle_vcpu(struct target_plugin *t, int index)
{
    struct prof_vcpu *v = &t->vcpu;
    memset(v, 0, sizeof *v);
    v->index = index;
    v->halted = true;
    v->paging64 = true;
    t->cpu.s = NULL;
    v->target_cpu = &t->cpu;
}

/* trigger=timer: idle ticks the timer thread counted since last seen, as pending idle samples. */
static bool take_idle_ticks(struct target_plugin *t)
{
    for (uint32_t i = 0; i < t->n_vcpus; i++) {
        uint64_t n = atomic_load_explicit(&t->ring[i]->idle_ticks, memory_order_relaxed);
        if (n != t->idle_ticks_seen[i]) {
            uint64_t ticks = n - t->idle_ticks_seen[i];
            t->idle_ticks_seen[i] = n;
            take_pause_events(t);
            if (t->paused_since_us)
                continue; /* frozen by someone else's `stop`, not idle: no samples */
            t->idle_pending = ticks;
            t->idle_vcpu = (int)i;
            return true;
        }
    }
    return false;
}

/* Takes the next record off the rings (round robin over vCPUs); false when all are empty. */
static bool next_record(struct target_plugin *t)
{
    for (uint32_t k = 0; k < t->n_vcpus; k++) {
        uint32_t i = (t->next_ring + k) % t->n_vcpus;
        const struct qpr_ring *r = t->ring[i];
        if (atomic_load_explicit(&r->head, memory_order_acquire) == t->tail[i])
            continue;
        const struct qpr_sample *slot = &r->slots[t->tail[i] % QPR_SLOTS];
        /* the fixed part and the windows' used bytes, not 36 KiB per sample */
        memcpy(&t->cur, slot, offsetof(struct qpr_sample, stack));
        if (t->cur.stack_len > QPR_STACK_MAX)
            t->cur.stack_len = 0;
        if (t->cur.extra_len > QPR_EXTRA_MAX)
            t->cur.extra_len = 0;
        if (t->cur.ustack_len > QPR_STACK_MAX)
            t->cur.ustack_len = 0;
        memcpy(t->cur.stack, slot->stack, t->cur.stack_len);
        memcpy(t->cur.extra, slot->extra, t->cur.extra_len);
        memcpy(t->cur.ustack, slot->ustack, t->cur.ustack_len);
        for (int w = 0; w < QPR_WINDOWS; w++) {
            uint32_t off = t->cur.win_off[w], len = t->cur.win_len[w];
            if (off > QPR_WIN_BYTES || len > QPR_WIN_BYTES - off)
                t->cur.win_len[w] = len = 0;
            if (len)
                memcpy(t->cur.win_bytes + off, slot->win_bytes + off, len);
        }
        t->cur.vcpu = i; /* the ring says which vCPU, not the slot */
        atomic_store_explicit(&t->tails->v[i].tail, ++t->tail[i], memory_order_release);
        t->next_ring = i + 1;
        return true;
    }
    return false;
}

/* The plugin's socket says EOF or an error: QEMU is gone. */
static bool peer_gone(struct target_plugin *t)
{
    struct pollfd p = {.fd = t->fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return false;
    char c;
    return (p.revents & (POLLHUP | POLLERR)) || recv(t->fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* How long sample() waits for the guest to execute anything before saying it did not run. */
#define WAIT_RUN_NS UINT64_C(1000000000)

static int tp_sample(void *impl, prof_target *handle, prof_target_stopped_fn fn, void *ctx,
                     struct prof_target_stats *stats, struct qp_error *err)
{
    struct target_plugin *t = impl;
    if (stats)
        *stats = (struct prof_target_stats){0};
    uint64_t start = now_ns();
    while (t->idle_pending == 0) {
        if (take_idle_ticks(t))
            break;
        if (!next_record(t)) {
            if (peer_gone(t))
                return qp_error_set(err, -EPIPE, "QEMU closed the plugin's socket (QEMU exited?)");
            take_pause_events(t);
            if (t->paused_since_us) {
                /* someone else's `stop`: nothing runs, nothing to sample, nothing to resume */
                struct timespec ts = {0, 10000000};
                nanosleep(&ts, NULL);
                if (stats)
                    stats->was_paused = true;
                return 0;
            }
            if (now_ns() - start > WAIT_RUN_NS) {
                if (stats)
                    stats->was_paused = true; /* no vCPU executed anything: paused */
                return 0;
            }
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (t->cur.kind == QPR_KIND_SAMPLE && t->cfg.win[0].len && !t->cur.win_asked) {
            t->before_plan++;
            continue;
        }
        if (t->cur.kind == QPR_KIND_SAMPLE) {
            int rc = vcpu_from_sample(t, &t->cur, err);
            if (rc)
                return rc;
            t->vcpu.flag_age_us = t->cur.flag_age_us;
            t->vcpu.flag_trigger = t->cur.trigger == QPR_TRIGGER_TIMER     ? PROF_FLAG_TIMER
                                   : t->cur.trigger == QPR_TRIGGER_COUNTER ? PROF_FLAG_COUNTER
                                                                           : PROF_FLAG_NONE;
            if (stats)
                stats->paused_ns = t->cur.cost_ns; /* the capture's time on that vCPU alone */
            /* Counted, not repeated: one capture standing for several intervals would weigh
             * one instant many times (measured: hot-loop shares off by 8 points under MTTCG
             * on an overcommitted host). */
            t->missed += unrun_periods(t, &t->cur);
            return fn(handle, &t->vcpu, 1, ctx, err);
        }
        if (t->cur.kind == QPR_KIND_IDLE) {
            uint64_t *carry = &t->idle_carry_ns[t->cur.vcpu];
            *carry += t->cur.idle_ns - paused_part_ns(t, &t->cur);
            t->idle_pending = *carry / t->interval_ns;
            *carry %= t->interval_ns;
            t->idle_vcpu = (int)t->cur.vcpu;
        }
    }
    t->idle_pending--;
    idle_vcpu(t, t->idle_vcpu);
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
         * RAM file serves only what does not change under a running process, its code. */
        if (t->pmem && !q->instant) {
            bool x86 = t->arch == &prof_arch_x86_64;
            if (!x86 || cpu->paging64 || !(pc->mmu.cr0 & X86_CR0_PG)) /* not 32-bit paging */
                target_pmem_read_walked(t->pmem, t->arch, cpu->as_root, cpu, q);
        } else if (t->direct && !q->instant && t->arch != &prof_arch_x86_64) {
            target_qmp_read_walked(t->qmp, t->arch, cpu->as_root, cpu, q);
        } else if (t->direct && !q->instant) {
            struct qmp_mem_req r = {.vaddr = q->vaddr, .len = q->len, .buf = q->buf};
            int rc = qmp_mem_read_many(t->qmp, &pc->mmu, &r, 1, err);
            q->got = r.got;
            q->rc = rc ? rc : r.rc;
        }
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

static const char *tp_describe(const void *impl)
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
    const char *s = threads == 1 ? "" : "s";
    if (!cpus) {
        snprintf(t->trigger_line, sizeof t->trigger_line,
                 "%s (auto: the host CPUs QEMU may use are not known)", name);
    } else if (qpr_auto_spare_cpu(threads, cpus)) {
        snprintf(t->trigger_line, sizeof t->trigger_line,
                 "%s (auto: %u host CPUs for %u vCPU thread%s: the timer's wake-ups run beside "
                 "the guest, not in its time)",
                 name, cpus, threads, s);
    } else {
        double share = qpr_timer_guest_share(wake_ns, (uint64_t)interval_ns, cpus);
        snprintf(t->trigger_line, sizeof t->trigger_line,
                 "%s (auto: %u host CPU%s for %u vCPU thread%s, none to spare: a timer wake-up "
                 "costs %.1f us here, %.1f%% of the guest's CPUs at this interval, %s the "
                 "counter's %.0f%%)",
                 name, cpus, cpus == 1 ? "" : "s", threads, s, wake_ns / 1e3, 100 * share,
                 share > QPR_COUNTER_GUEST_COST ? "over" : "within", 100 * QPR_COUNTER_GUEST_COST);
    }
}

/* Which trigger sampled, and why: from what the plugin put in the shared header. */
static const char *tp_trigger(void *impl)
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

static uint64_t tp_missed(const void *impl)
{
    return ((const struct target_plugin *)impl)->missed;
}

static uint64_t tp_paused_intervals(const void *impl)
{
    const struct target_plugin *t = impl;
    uint64_t us = t->paused_us;
    if (t->paused_since_us) {
        int64_t now = g_get_real_time(), from = MAX(t->paused_since_us, t->open_us);
        us += now > from ? (uint64_t)(now - from) : 0;
    }
    return us * 1000 / t->interval_ns;
}

static uint64_t tp_lost(const void *impl)
{
    const struct target_plugin *t = impl;
    uint64_t lost = 0;
    for (uint32_t i = 0; i < t->n_vcpus; i++)
        lost += atomic_load_explicit(&t->ring[i]->lost, memory_order_relaxed) - t->lost_at_open[i];
    return lost;
}

const struct prof_target_ops prof_target_plugin_ops = {
    .name = "plugin",
    .transport = "plugin",
    .round_trip_name = "round trips",
    .round_trip_ms = 0,
    .captures = true,
    .arch = &prof_arch_x86_64, /* until open reads the ring's header: tp_arch */
    .arch_of = tp_arch,
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
    .paused_intervals = tp_paused_intervals,
    .exact_counts = tp_exact_counts,
    .set_capture = tp_set_capture,
    .reads_cost_round_trips = tp_reads_cost,
    .version = tp_version,
    .describe = tp_describe,
    .trigger = tp_trigger,
    .free = tp_free,
};
