/* The gdbstub target: QEMU's -gdb socket, every architecture arch/ has a table for (the one
 * target.xml names). The gdb/ module does the protocol work (interrupt, pipelined Hg/g for every
 * vCPU, pipelined `m`, continue); this file turns its register sets into struct prof_vcpu by the
 * names in the architecture's table and maps the stub's answers onto the target seam. Whether
 * a vCPU waits in hlt comes from qThreadExtraInfo ("[halted ]"), asked in the same write as the
 * registers: one more packet per vCPU, no more round trips. */
#include "target.h"
#include "mem_process.h"
#include "target_qmp_ram.h"
#include "target_vcpu.h"

#include "gdb.h"
#include "qmp.h"
#include "qp_clock.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* What tg_read needs of one vCPU, behind prof_vcpu.target_cpu. */
struct gdb_cpu {
    int thread;       /* index into the stub's thread list */
    uint64_t as_root; /* the address-space root at the stop */
};

struct target_gdb {
    gdb_client *gdb;
    const struct prof_arch *arch; /* the one target.xml names */
    /* The QMP client of --qmp-socket, NULL without: its events tell qprof's stops from anyone
     * else's, and, when `direct`, its backend maps the RAM file (else memory is `m` packets). */
    qmp_client *qmp;
    bool direct;
    /* Virtual memory from the RAM file, through the arch table's page walk from the stop's root
     * (target_qmp_read_walked). Without the RAM file, `m` packets (QEMU translates; on riscv64
     * with the vCPU's own privilege, so a hart in U mode cannot read kernel memory that way). */
    bool direct_virtual;
    /* Else guest RAM read out of the QEMU process (mem_process.h), NULL when not in use; with
     * QMP, proved again after each reset it reports (pmem_resets: the count last proved at). */
    target_pmem *pmem;
    uint64_t pmem_resets;
    bool state_changed; /* this sample's reads saw another CR3 than its registers */
    /* Someone else paused the guest (QMP's events say so, or the stub sent a stop nobody here
     * asked for): no sample and no continue until it runs again. */
    bool foreign_pause;
    /* When qprof last resumed the guest (wall clock, us): a QMP STOP stamped later is someone
     * else's, one stamped earlier is qprof's own whose RESUME is still on its way. */
    int64_t last_continue_us;
    struct gdb_cpu cpus[PROF_MAX_VCPUS];
    struct prof_vcpu vcpus[PROF_MAX_VCPUS];
};

/* With a QMP socket too, memory comes from the shared RAM file that QMP finds (the same
 * discovery as the QMP target's direct backend), with no round trip; without, or when the RAM
 * is not a shared file, through pipelined `m` packets. --memory direct makes that an error;
 * memsave and hmp are QMP's ways and mean `m` packets here. */
static int open_ram(struct target_gdb *t, const struct prof_target_open_opts *o,
                    struct qp_error *err)
{
    const char *want = o->memory_backend ? o->memory_backend : "auto";
    bool direct = strcmp(want, "direct") == 0;
    if (strcmp(want, "process") == 0)
        want = "memsave"; /* QMP then only tells pauses and serves the proof */
    bool try_direct = direct || strcmp(want, "auto") == 0;
    if (!o->qmp_address)
        return direct ? qp_error_set(err, -EINVAL,
                                     "--memory direct through the gdbstub needs --qmp-socket "
                                     "too: QMP finds the shared RAM file")
                      : 0;
    enum target_qmp_ram_use ram = direct       ? TARGET_QMP_RAM_REQUIRED
                                  : try_direct ? TARGET_QMP_RAM_PREFERRED
                                               : TARGET_QMP_RAM_UNUSED;
    return target_qmp_open_beside(o->qmp_address, o->timeout_s ? o->timeout_s : 5, ram, &t->qmp,
                                  &t->direct, err);
}

static bool tdesc_has(const void *ctx, const char *name)
{
    return gdb_tdesc_find(ctx, name) >= 0;
}

/* The architecture from target.xml's <architecture> ("riscv:rv64"). A stub that names none is
 * known by a register only one architecture has (prof_arch_for_gdb_regs: QEMU's x86 description
 * may leave the element out), and refused otherwise: sampling a guest whose registers qprof
 * cannot name would fail every sample. */
static int choose_arch(struct target_gdb *t, struct qp_error *err)
{
    const struct gdb_tdesc *d = gdb_target(t->gdb);
    if (d->arch[0])
        t->arch = prof_arch_for_gdb(d->arch);
    else
        t->arch = prof_arch_for_gdb_regs(tdesc_has, d);
    if (!t->arch)
        return qp_error_set(err, -ENOTSUP, "the gdbstub's guest is %s%s: qprof knows %s",
                            d->arch[0] ? d->arch
                                       : "of an architecture its target.xml does not name",
                            d->arch[0] ? " (target.xml)" : "", prof_arch_known_names());
    gdb_want_registers(t->gdb, t->arch->gdb_state_regs);
    t->direct_virtual = t->direct;
    return 0;
}

static bool wants_process(const char *want)
{
    return !want || strcmp(want, "auto") == 0 || strcmp(want, "process") == 0;
}

/* Process memory (mem_process.h), when the RAM file is not mapped: forced by --memory process,
 * else auto's choice before `m` packets, with one line saying why where it cannot be had. With
 * QMP the proof reads through pmemsave; without, through the stub in physical mode while the
 * attach holds the guest stopped. */
static int open_process_memory(struct target_gdb *t, const char *want, struct qp_error *err)
{
    bool forced = want && strcmp(want, "process") == 0;
    if (t->direct || !wants_process(want))
        return 0;
    struct qp_error perr = {0};
    int rc = t->qmp ? target_pmem_open_qmp(t->qmp, gdb_socket_fd(t->gdb), &t->pmem, &perr)
                    : target_pmem_open_gdb(t->gdb, &t->pmem, &perr);
    if (rc == 0) {
        t->pmem_resets = t->qmp ? qmp_resets(t->qmp) : 0;
        return 0;
    }
    if (forced)
        return qp_error_set(err, rc, "--memory process: %s", perr.msg);
    fprintf(stderr, "qprof: process memory: %s; reading through gdbstub m packets instead\n",
            perr.msg);
    return 0;
}

static int tg_open(const struct prof_target_open_opts *o, void **impl, struct qp_error *err)
{
    struct target_gdb *t = g_new0(struct target_gdb, 1);
    struct gdb_open_opts go = {
        .timeout_s = o->timeout_s ? o->timeout_s : 5, .guard = true, .thread_state = true};
    int rc = open_ram(t, o, err);
    /* QEMU stops the guest on attach and says T02 whether or not it ran before: only QMP can
     * tell a guest paused before (by a monitor, or -S) from one that ran, and such a guest must
     * stay paused, also after a -S start. */
    t->foreign_pause = t->qmp && !qmp_guest_running(t->qmp);
    /* the proof over the stub alone reads while the attach's stop lasts */
    bool hold = !t->direct && !t->qmp && wants_process(o->memory_backend);
    go.keep_stopped = t->foreign_pause || hold;
    if (!rc)
        rc = gdb_open(o->address, &go, &t->gdb, err);
    if (!rc)
        rc = choose_arch(t, err);
    if (!rc)
        rc = open_process_memory(t, o->memory_backend, err);
    if (!rc && hold && !t->foreign_pause)
        rc = gdb_continue(t->gdb, err);
    if (rc) {
        gdb_free(t->gdb);
        qmp_free(t->qmp);
        target_pmem_free(t->pmem);
        g_free(t);
        return rc;
    }
    if (t->foreign_pause)
        gdb_disown_stop(t->gdb);
    if (!t->foreign_pause)
        t->last_continue_us = g_get_real_time(); /* gdb_open resumed it after attaching */
    *impl = t;
    return 0;
}

/* Without QMP, a guest someone else paused tells nothing when it runs again; QEMU ignores a 0x03
 * while it is paused, so an interrupt with a short deadline finds out (and stops it for a
 * sample if it runs). Generous: QEMU answers a 0x03 within a millisecond. */
#define PROBE_MS 200

/* Whether QMP's events say the guest runs (or qprof's own resume is still on its way). */
static bool qmp_says_running(struct target_gdb *t)
{
    return qmp_guest_running(t->qmp) || qmp_last_stop_us(t->qmp) < t->last_continue_us;
}

/* A stop reply can answer qprof's 0x03 or be QEMU's word of a monitor's `stop` that landed
 * just before it (QEMU then drops the 0x03): QMP's STOP event for this stop tells which, by
 * its stamp. Waiting for it costs a few microseconds of the paused time; without it, that
 * `stop` would be undone by this sample's continue. */
static bool stopped_before(struct target_gdb *t, int64_t interrupt_us)
{
    /* Only a STOP after the guest last started counts: an earlier one (a pause that has ended
     * since) says nothing of this stop. */
    int64_t started_us = MAX(t->last_continue_us, qmp_last_resume_us(t->qmp));
    int64_t stop_us = 0;
    if (qmp_wait_stop_after(t->qmp, started_us, 50, &stop_us, NULL) != 0)
        return false; /* no event in time: take the stop as this sample's */
    return stop_us < interrupt_us;
}

/* Whether the guest is still paused by someone else; false when it runs again (then, over the
 * gdbstub alone, it is stopped for this sample already). */
static int still_paused_by_other(struct target_gdb *t, struct qp_error *err)
{
    if (t->qmp) {
        if (qmp_says_running(t))
            return 0;
        int rc = gdb_poll_stop(t->gdb, err); /* the stub's T02 for that pause: not ours */
        if (rc > 0)
            gdb_disown_stop(t->gdb);
        return rc < 0 ? rc : 1;
    }
    struct gdb_stop stop;
    struct qp_error probe = {0};
    int rc = gdb_interrupt_within(t->gdb, PROBE_MS, &stop, &probe);
    if (rc == -ETIMEDOUT)
        return 1;
    if (rc < 0)
        return qp_error_set(err, rc, "%s", probe.msg);
    if (stop.unasked) {
        gdb_disown_stop(t->gdb);
        return 1;
    }
    return 0;
}

struct reg_lookup {
    const gdb_client *gdb;
    const struct gdb_regset *set;
};

static int lookup_reg(void *ctx, const char *name, uint64_t *val)
{
    const struct reg_lookup *l = ctx;
    return gdb_reg_get(l->gdb, l->set, name, val);
}

/* The general registers by the names in the architecture's table, then what its privileged
 * registers say. */
static int vcpu_from_regs(const struct target_gdb *t, const struct gdb_regset *set,
                          struct gdb_cpu *cpu, struct prof_vcpu *v, struct qp_error *err)
{
    struct reg_lookup l = {t->gdb, set};
    int rc = target_vcpu_from_regs(t->arch, lookup_reg, &l, v, err);
    if (rc)
        return rc;
    v->index = set->thread;
    v->halted = set->halted == 1;
    v->target_cpu = cpu;
    cpu->thread = set->thread;
    cpu->as_root = v->as_root;
    return 0;
}

/* Stopped: every vCPU's registers, then fn. */
static int tg_stopped(struct target_gdb *t, prof_target *handle, prof_target_stopped_fn fn,
                      void *ctx, struct qp_error *err)
{
    struct gdb_regset sets[PROF_MAX_VCPUS];
    int n = 0;
    memset(sets, 0, sizeof sets);
    int rc = gdb_read_registers_all(t->gdb, sets, PROF_MAX_VCPUS, &n, err);
    for (int i = 0; !rc && i < n; i++)
        rc = vcpu_from_regs(t, &sets[i], &t->cpus[i], &t->vcpus[i], err);
    for (int i = 0; i < n; i++)
        gdb_regset_clear(&sets[i]);
    if (rc)
        return rc;
    return fn(handle, t->vcpus, n, ctx, err);
}

/* A reset QMP reported may come with guest RAM mapped anew: the mapping is proved again before
 * the next read through it; where it no longer proves, `m` packets serve from then on. */
static void reverify_after_reset(struct target_gdb *t)
{
    if (!t->pmem || !t->qmp || qmp_resets(t->qmp) == t->pmem_resets)
        return;
    struct qp_error perr = {0};
    t->pmem_resets = qmp_resets(t->qmp);
    if (target_pmem_reverify_qmp(t->pmem, t->qmp, &perr) == 0)
        return;
    fprintf(stderr,
            "qprof: process memory, after a reset: %s; reading through gdbstub m packets from "
            "now on\n",
            perr.msg);
    target_pmem_free(t->pmem);
    t->pmem = NULL;
}

static int tg_sample(void *impl, prof_target *handle, prof_target_stopped_fn fn, void *ctx,
                     struct prof_target_stats *stats, struct qp_error *err)
{
    struct target_gdb *t = impl;
    reverify_after_reset(t);
    uint64_t trips0 = gdb_round_trips(t->gdb);
    uint64_t t0 = qp_now_ns();
    t->state_changed = false;
    /* QEMU sends every monitor a STOP and a RESUME per sample; the RAM file's QMP client must
     * take them off its socket (no round trip), or QEMU buffers them without bound. */
    bool running = !t->qmp || qmp_says_running(t);
    int rc = 0;
    if (t->foreign_pause || !running) {
        rc = still_paused_by_other(t, err);
        t->foreign_pause = rc == 1;
        if (rc != 0) {
            if (stats)
                *stats = (struct prof_target_stats){
                    .round_trips = (unsigned)(gdb_round_trips(t->gdb) - trips0),
                    .was_paused = rc == 1};
            return rc < 0 ? rc : 0;
        }
        t0 = qp_now_ns();
    }
    struct gdb_stop stop = {0};
    int64_t interrupt_us = g_get_real_time();
    struct qp_error ierr = {0};
    rc = gdb_interrupt(t->gdb, &stop, &ierr);
    /* QEMU drops a 0x03 while a monitor's `stop` holds the guest: over the stub alone, no
     * answer is how such a pause shows (a QEMU that is gone closes the socket instead). Later
     * samples probe until it runs again. */
    bool ignored = rc == -ETIMEDOUT && !t->qmp;
    if (rc && !ignored)
        qp_error_set(err, rc, "%s", ierr.msg);
    if (!rc && !stop.unasked && t->qmp && stopped_before(t, interrupt_us))
        stop.unasked = true;
    if (ignored || (!rc && stop.unasked)) {
        rc = 0;
        /* The stub said the guest stopped before this sample asked: a monitor's `stop` (or
         * another cause) that this sample must not undo. */
        gdb_disown_stop(t->gdb);
        t->foreign_pause = true;
        if (stats)
            *stats = (struct prof_target_stats){
                .round_trips = (unsigned)(gdb_round_trips(t->gdb) - trips0), .was_paused = true};
        return 0;
    }
    if (!rc)
        rc = tg_stopped(t, handle, fn, ctx, err);
    /* Whatever the session made of reads from another state, it is not this stop's sample. */
    if (!rc && t->state_changed)
        rc = qp_error_set(err, -EAGAIN,
                          "the machine was reset during the sample (%s changed): dropped",
                          t->arch->gdb_root_reg);
    /* Resume on every path; the first error is the one reported. */
    if (gdb_stopped(t->gdb)) {
        struct qp_error cerr = {0};
        t->last_continue_us = g_get_real_time();
        int crc = gdb_continue(t->gdb, rc ? &cerr : err);
        if (!rc)
            rc = crc;
    }
    if (stats)
        *stats = (struct prof_target_stats){
            .paused_ns = qp_now_ns() - t0,
            .round_trips = (unsigned)(gdb_round_trips(t->gdb) - trips0),
            .was_paused = false,
        };
    return rc;
}

/* QEMU answers a whole `m` with E14 when any byte of it is unmapped, so each request is split
 * at page boundaries (all pieces still go in one write): a read that runs off the end of a
 * mapping keeps the pages before it. */
#define PAGE_SIZE 4096u

/* Through the QEMU process or the RAM file, with the arch table's walk from the stop's root (a
 * vCPU in a mode it does not serve reads nothing rather than wrong bytes); else `m` packets. */
static int tg_read(void *impl, const struct prof_vcpu *cpu, struct prof_mem_req *reqs, size_t n,
                   struct qp_error *err)
{
    struct target_gdb *t = impl;
    const struct gdb_cpu *gc = cpu->target_cpu;
    if (t->pmem || t->direct_virtual) {
        for (size_t i = 0; i < n; i++)
            if (t->pmem)
                target_pmem_read_walked(t->pmem, t->arch, gc->as_root, cpu, &reqs[i]);
            else
                target_qmp_read_walked(t->qmp, t->arch, gc->as_root, cpu, &reqs[i]);
        return 0;
    }
    size_t n_parts = 0;
    for (size_t i = 0; i < n; i++)
        n_parts += reqs[i].len ? (reqs[i].vaddr % PAGE_SIZE + reqs[i].len - 1) / PAGE_SIZE + 1 : 1;
    struct gdb_mem_req *gr = g_new(struct gdb_mem_req, n_parts ? n_parts : 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t off = 0;
        do {
            uint64_t va = reqs[i].vaddr + off;
            size_t len = PAGE_SIZE - va % PAGE_SIZE;
            if (len > reqs[i].len - off)
                len = reqs[i].len - off;
            gr[k++] =
                (struct gdb_mem_req){.vaddr = va, .len = len, .buf = (uint8_t *)reqs[i].buf + off};
            off += len;
        } while (off < reqs[i].len);
    }
    /* QEMU translates `m` addresses with the vCPU's state now, not at the stop: a reset by
     * another client mid-sample (CR3 or satp back to 0) would have these reads come from
     * another address space than the registers. The root read after them in the same write
     * tells. */
    uint64_t root_after = 0, mask = t->arch->as_root_mask;
    bool have_root = false;
    int rc = gdb_mem_read_then_reg(t->gdb, gc->thread, gr, k, t->arch->gdb_root_reg, &root_after,
                                   &have_root, err);
    if (rc == 0 && have_root && (root_after & mask) != (gc->as_root & mask)) {
        t->state_changed = true;
        rc = qp_error_set(err, -EAGAIN,
                          "the vCPU's %s changed during the sample (0x%llx, then 0x%llx): the "
                          "machine was reset; the sample is dropped",
                          t->arch->gdb_root_reg, (unsigned long long)gc->as_root,
                          (unsigned long long)root_after);
    }
    k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t got = 0, off = 0;
        bool whole = true;
        int first_rc = 0;
        do {
            struct gdb_mem_req *p = &gr[k++];
            if (off == 0)
                first_rc = p->rc;
            if (whole && !rc && p->rc == 0)
                got += p->got;
            if (p->rc != 0 || p->got < p->len)
                whole = false;
            off += p->len;
        } while (off < reqs[i].len);
        reqs[i].got = rc ? 0 : got;
        /* An E reply at the first byte is the unmapped case. */
        reqs[i].rc = rc ? rc : first_rc == -EIO ? -EFAULT : first_rc;
    }
    g_free(gr);
    return rc;
}

/* Guest-physical memory (how the Linux adapter finds the kernel while the guest runs) comes
 * from the shared RAM file only: the stub reads physical memory only while the guest is
 * stopped (Qqemu.PhyMemMode), and a scan of all of RAM that way would hold it paused for
 * seconds. */
static int tg_read_phys(void *impl, uint64_t paddr, void *buf, size_t len, struct qp_error *err)
{
    struct target_gdb *t = impl;
    if (t->pmem)
        return target_pmem_phys(t->pmem, paddr, buf, len)
                   ? qp_error_set(err, -EFAULT, "guest-physical 0x%llx is not RAM (%s)",
                                  (unsigned long long)paddr, TARGET_PMEM_NAME)
                   : 0;
    if (!t->direct)
        return qp_error_set(err, -ENOTSUP,
                            "guest-physical memory through the gdbstub needs --qmp-socket too "
                            "(the shared RAM file)");
    return qmp_phys_read(t->qmp, paddr, buf, len, err);
}

static int tg_ram_ranges(void *impl, struct prof_ram_range *out, int max, int *n,
                         struct qp_error *err)
{
    struct target_gdb *t = impl;
    *n = 0;
    if (t->pmem)
        return target_pmem_ram_ranges(t->pmem, out, max, n);
    if (!t->direct)
        return qp_error_set(err, -ENOTSUP,
                            "listing guest RAM through the gdbstub needs --qmp-socket too "
                            "(the shared RAM file)");
    return target_qmp_ram_ranges(t->qmp, out, max, n, err);
}

/* QMP's events say it without a round trip; over the gdbstub alone only a sample's interrupt
 * can find out, so the sample is tried (and reports the pause). */
static bool tg_running(void *impl)
{
    struct target_gdb *t = impl;
    return t->qmp ? qmp_says_running(t) : true;
}

static uint64_t tg_round_trips(const void *impl)
{
    const struct target_gdb *t = impl;
    return gdb_round_trips(t->gdb);
}

/* Only QMP sees resets: the stub says nothing of them. */
static uint64_t tg_resets(const void *impl)
{
    const struct target_gdb *t = impl;
    return t->qmp ? qmp_resets(t->qmp) : 0;
}

static bool tg_reads_cost_round_trips(const void *impl)
{
    const struct target_gdb *t = impl;
    return !t->direct_virtual && !t->pmem;
}

static const char *tg_version(const void *impl)
{
    const struct target_gdb *t = impl;
    /* the stub does not say which QEMU it is; QMP does */
    return t->qmp ? qmp_qemu_version(t->qmp) : "(gdbstub)";
}

static const char *tg_describe(const void *impl)
{
    const struct target_gdb *t = impl;
    return t->direct_virtual ? "direct" : t->pmem ? TARGET_PMEM_NAME : "gdbstub m packets";
}

static const struct prof_arch *tg_arch(const void *impl)
{
    const struct target_gdb *t = impl;
    return t->arch;
}

static void tg_free(void *impl)
{
    struct target_gdb *t = impl;
    if (!t)
        return;
    gdb_free(t->gdb); /* stops if running, detaches: QEMU resumes the guest */
    qmp_free(t->qmp);
    target_pmem_free(t->pmem);
    g_free(t);
}

const struct prof_target_ops prof_target_gdb_ops = {
    .name = "gdb",
    .transport = "gdbstub",
    /* one write of pipelined packets (or a ^C) and the replies to it */
    .round_trip_name = "gdbstub round trips",
    .round_trip_ms = 0.05, /* a register or 2 KiB memory read ~0.035 ms */
    .arch_of = tg_arch,    /* target.xml's, once open */
    .open = tg_open,
    .sample = tg_sample,
    .read = tg_read,
    .running = tg_running,
    .read_phys = tg_read_phys,
    .ram_ranges = tg_ram_ranges,
    .round_trips = tg_round_trips,
    .resets = tg_resets,
    .reads_cost_round_trips = tg_reads_cost_round_trips,
    .version = tg_version,
    .describe = tg_describe,
    .free = tg_free,
};
