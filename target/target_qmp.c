/* The QMP target: QEMU's monitor socket, for every architecture whose table reads QEMU's
 * `info registers` text (query-target's "arch" chooses). The qmp/ module does the protocol work
 * (stop, `info registers -a`, memory, a cont on every path); the arch table parses the text
 * (monitor_parse) into the gdbstub's register names, and the vCPU is filled as the gdbstub
 * target fills it. Memory comes from the QEMU process or the shared RAM file through the
 * table's page walk, or through QEMU's own translation by the vCPU (memsave or HMP reads):
 * always so where the text lacks the translation registers (monitor_translated). */
#include "target.h"
#include "mem_process.h"
#include "target_qmp_ram.h"
#include "target_vcpu.h"

#include "qmp.h"

#include <errno.h>
#include <json-c/json.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

struct target_qmp {
    qmp_client *qmp;
    const struct prof_arch *arch; /* query-target's; prof_arch_unnamed() when QEMU does not say */
    /* The stop's registers as the arch table parsed them (g_new, PROF_MAX_VCPUS), behind
     * prof_vcpu.target_cpu. */
    struct prof_arch_monitor_cpu *mcpus;
    struct prof_vcpu vcpus[PROF_MAX_VCPUS];
    /* From query-cpus-fast at open: QEMU's cpu-index -> the guest's own number for the vCPU
     * (the arch table's qom_cpu_id property: x86's APIC ID), which is how the guest numbers its
     * CPUs (and its qprof_abi slots). They differ as soon as the topology is not a power of two
     * per level, e.g. -smp 6,sockets=2,cores=3. */
    uint32_t apic_of[PROF_MAX_VCPUS];
    bool apic_known[PROF_MAX_VCPUS];
    int n_vcpus; /* -1: QEMU did not say */
    /* Guest RAM read out of the QEMU process (mem_process.h), NULL when not in use; proved
     * again after each reset QMP reports (pmem_resets: the count it was last proved at). */
    target_pmem *pmem;
    uint64_t pmem_resets;
    prof_target *handle;
    prof_target_stopped_fn fn;
    void *fn_ctx;
};

static enum qmp_mem_backend backend_by_name(const char *name)
{
    if (!name)
        return QMP_MEM_AUTO;
    if (strcmp(name, "direct") == 0)
        return QMP_MEM_DIRECT;
    if (strcmp(name, "memsave") == 0)
        return QMP_MEM_MEMSAVE;
    if (strcmp(name, "hmp") == 0)
        return QMP_MEM_HMP;
    return QMP_MEM_AUTO;
}

/* The property (the arch table's qom_cpu_id) of the vCPU object at qom_path; -1 when QEMU does
 * not say. */
static int64_t guest_cpu_id_of(qmp_client *q, const char *qom_path, const char *property)
{
    struct json_object *args = json_object_new_object(), *ret = NULL;
    json_object_object_add(args, "path", json_object_new_string(qom_path));
    json_object_object_add(args, "property", json_object_new_string(property));
    struct qp_error err = {0};
    int64_t id = -1;
    if (qmp_execute(q, "qom-get", args, &ret, &err) == 0 && json_object_is_type(ret, json_type_int))
        id = json_object_get_int64(ret);
    json_object_put(ret);
    json_object_put(args);
    return id >= 0 && id <= UINT32_MAX ? id : -1;
}

/* Once per run, before the first stop: how many vCPUs there are and the guest's own numbers for
 * them. A QEMU that lacks either command (or a peer that is not QEMU), or an architecture whose
 * guests go by the cpu-index, leaves the cpu-index as the guest's number. */
static void learn_topology(struct target_qmp *t)
{
    t->n_vcpus = -1;
    struct json_object *ret = NULL;
    struct qp_error err = {0};
    if (qmp_execute(t->qmp, "query-cpus-fast", NULL, &ret, &err) != 0 ||
        !json_object_is_type(ret, json_type_array)) {
        json_object_put(ret);
        return;
    }
    size_t n = json_object_array_length(ret);
    t->n_vcpus = n > INT32_MAX ? INT32_MAX : (int)n;
    for (size_t i = 0; i < n; i++) {
        struct json_object *cpu = json_object_array_get_idx(ret, i), *idx, *path;
        if (!json_object_object_get_ex(cpu, "cpu-index", &idx) ||
            !json_object_object_get_ex(cpu, "qom-path", &path))
            continue;
        int64_t index = json_object_get_int64(idx);
        if (index < 0 || index >= PROF_MAX_VCPUS || !t->arch->qom_cpu_id)
            continue;
        int64_t id = guest_cpu_id_of(t->qmp, json_object_get_string(path), t->arch->qom_cpu_id);
        if (id >= 0) {
            t->apic_of[index] = (uint32_t)id;
            t->apic_known[index] = true;
        }
    }
    json_object_put(ret);
}

/* The architecture from query-target. A QMP that does not say (an old QEMU, a test's fake) is
 * taken for prof_arch_unnamed()'s. One whose `info registers` text its arch table does not read
 * is refused at open, in one line, rather than sampled as nonsense. */
static int choose_arch(struct target_qmp *t, struct qp_error *err)
{
    struct json_object *ret = NULL, *arch = NULL;
    struct qp_error qerr = {0};
    int rc = 0;
    t->arch = prof_arch_unnamed();
    if (qmp_execute(t->qmp, "query-target", NULL, &ret, &qerr) == 0 &&
        json_object_object_get_ex(ret, "arch", &arch)) {
        const char *name = json_object_get_string(arch);
        t->arch = prof_arch_by_name(name);
        if (!t->arch || !t->arch->monitor_parse)
            rc = qp_error_set(err, -ENOTSUP,
                              "this QEMU is qemu-system-%s: qprof samples it through its gdbstub "
                              "only (start it with -gdb, then give --gdb)",
                              name);
    }
    json_object_put(ret);
    return rc;
}

/* Whether memory comes through QEMU's translation by the vCPU (memsave, HMP) rather than the
 * arch table's page walk, always: aarch64, whose `info registers` gives no TTBRs to walk from. */
static bool qemu_translates(const struct target_qmp *t)
{
    return t->arch->monitor_translated;
}

/* aarch64: no root to walk from, so the RAM file cannot serve virtual reads; auto takes HMP
 * reads (which QEMU translates with the vCPU's own regime and exception level), direct is
 * refused. HMP rather than memsave: a user stack window crosses the stack's unmapped top, where
 * memsave fails whole and is redone page by page (8.5 round trips a sample on the aarch64 demo
 * guest, p50 21-24 ms paused against HMP's 6 round trips and 4.6-6.7 ms, alternating runs on one
 * boot), while HMP's `x` stops at the first unreadable address. */
static int check_translated_memory(struct target_qmp *t, enum qmp_mem_backend asked,
                                   struct qp_error *err)
{
    if (asked == QMP_MEM_DIRECT)
        return qp_error_set(err, -ENOTSUP,
                            "%s over QMP cannot read memory through the shared RAM file: QEMU's "
                            "`info registers` gives no %s or TCR_EL1 to walk from; use --memory "
                            "auto, memsave or hmp (QEMU translates), or the gdbstub (--gdb)",
                            t->arch->name, t->arch->gdb_root_reg);
    if (qmp_mem_backend_in_use(t->qmp) == QMP_MEM_DIRECT)
        return qmp_mem_set_backend(t->qmp, QMP_MEM_HMP, err);
    return 0;
}

/* Where QEMU's text lacks what the arch table infers from the page tables (riscv64: the
 * privilege mode, monitor_complete), qprof reads them from the shared RAM file; memsave and HMP
 * reads would cost round trips per table entry. So the RAM file is required there. */
static int check_memory(struct target_qmp *t, enum qmp_mem_backend asked, struct qp_error *err)
{
    if (t->pmem)
        return 0;
    if (qemu_translates(t))
        return check_translated_memory(t, asked, err);
    if (!t->arch->monitor_complete || qmp_mem_backend_in_use(t->qmp) == QMP_MEM_DIRECT)
        return 0;
    return qp_error_set(err, -ENOTSUP,
                        "%s over QMP needs the guest RAM in a shared file (QEMU -object "
                        "memory-backend-file,...,share=on -machine memory-backend=...), and "
                        "--memory auto or direct: qprof walks %s's page tables itself",
                        t->arch->name, t->arch->gdb_root_reg);
}

int target_qmp_open_beside(const char *address, double timeout_s, enum target_qmp_ram_use ram,
                           qmp_client **out, bool *direct, struct qp_error *err)
{
    struct qmp_open_opts qo = {.timeout_s = timeout_s, .backend = QMP_MEM_DIRECT};
    struct qp_error derr = {0};
    int rc = -1;
    if (ram != TARGET_QMP_RAM_UNUSED)
        rc = qmp_open(address, &qo, out, ram == TARGET_QMP_RAM_REQUIRED ? err : &derr);
    if (rc && ram == TARGET_QMP_RAM_REQUIRED)
        return qp_error_prefix(err, "the shared RAM file, through QMP");
    *direct = rc == 0;
    if (rc) {
        qo.backend = QMP_MEM_HMP;
        if ((rc = qmp_open(address, &qo, out, err)) != 0)
            return qp_error_prefix(err, "--qmp-socket");
    }
    return 0;
}

/* Process memory (mem_process.h): forced by --memory process, and auto's choice after the RAM
 * file, before memsave. Where auto cannot have it, one line says why and memsave serves. QMP
 * stays the proof's other side (pmemsave) and the way back when a later proof fails. Not on
 * aarch64: QMP gives no translation registers to walk from. */
static int open_process_memory(struct target_qmp *t, const char *want, struct qp_error *err)
{
    bool forced = want && strcmp(want, "process") == 0;
    bool chosen = (!want || strcmp(want, "auto") == 0) &&
                  qmp_mem_backend_in_use(t->qmp) != QMP_MEM_DIRECT && !qemu_translates(t);
    if (forced && qemu_translates(t))
        return qp_error_set(err, -ENOTSUP,
                            "--memory process: %s over QMP gives no %s to walk from; use the "
                            "gdbstub (--gdb)",
                            t->arch->name, t->arch->gdb_root_reg);
    if (!forced && !chosen)
        return 0;
    struct qp_error perr = {0};
    int rc = target_pmem_open_qmp(t->qmp, qmp_socket_fd(t->qmp), &t->pmem, &perr);
    if (rc == 0) {
        t->pmem_resets = qmp_resets(t->qmp);
        return 0;
    }
    if (forced)
        return qp_error_set(err, rc, "--memory process: %s", perr.msg);
    /* memsave's files lie in qprof's private directory, which another user's QEMU cannot write
     * (every read would fail, and stacks come out unnamed): HMP's reads need no file. */
    if (qmp_mem_backend_in_use(t->qmp) == QMP_MEM_MEMSAVE &&
        target_pmem_peer_is_other_user(qmp_socket_fd(t->qmp)) &&
        (rc = qmp_mem_set_backend(t->qmp, QMP_MEM_HMP, err)) != 0)
        return rc;
    fprintf(stderr, "qprof: process memory: %s; reading through %s instead\n", perr.msg,
            qmp_mem_backend_name(qmp_mem_backend_in_use(t->qmp)));
    return 0;
}

static int tq_open(const struct prof_target_open_opts *o, void **impl, struct qp_error *err)
{
    struct target_qmp *t = g_new0(struct target_qmp, 1);
    bool process = o->memory_backend && strcmp(o->memory_backend, "process") == 0;
    struct qmp_open_opts qo = {.timeout_s = o->timeout_s ? o->timeout_s : 5,
                               .backend =
                                   process ? QMP_MEM_MEMSAVE : backend_by_name(o->memory_backend),
                               .guard = true};
    int rc = qmp_open(o->address, &qo, &t->qmp, err);
    if (!rc && (rc = choose_arch(t, err)) == 0 &&
        (rc = open_process_memory(t, o->memory_backend, err)) == 0)
        rc = check_memory(t, qo.backend, err);
    if (rc && t->qmp)
        qmp_free(t->qmp);
    if (rc)
        target_pmem_free(t->pmem);
    if (rc) {
        g_free(t);
        return rc;
    }
    learn_topology(t);
    t->mcpus = g_new0(struct prof_arch_monitor_cpu, PROF_MAX_VCPUS);
    *impl = t;
    return 0;
}

static void set_apic_id(const struct target_qmp *t, struct prof_vcpu *v)
{
    if (v->index >= 0 && v->index < PROF_MAX_VCPUS && t->apic_known[v->index]) {
        v->apic_known = true;
        v->apic_id = t->apic_of[v->index];
    }
}

/* The arch table reads the text, infers what QEMU does not print (riscv64: the privilege mode,
 * whether the vCPU waits halted), and the vCPU is filled by the table's register names, as over
 * the gdbstub. */
static int tq_stopped_text(qmp_client *q, const char *text, void *ctx, struct qp_error *err)
{
    struct target_qmp *t = ctx;
    const struct prof_arch *a = t->arch;
    int n = 0;
    int rc = a->monitor_parse(text, t->mcpus, PROF_MAX_VCPUS, &n, err);
    for (int i = 0; !rc && i < n; i++) {
        struct prof_arch_monitor_cpu *m = &t->mcpus[i];
        struct prof_vcpu *v = &t->vcpus[i];
        /* what the text lacks comes from page tables: through the process when it serves */
        if (a->monitor_complete &&
            (rc = t->pmem ? a->monitor_complete(m, target_pmem_phys_word, t->pmem, err)
                          : a->monitor_complete(m, target_qmp_phys_word, q, err)))
            break;
        if ((rc = target_vcpu_from_monitor(a, prof_arch_monitor_reg, m, v, err)))
            break;
        v->index = m->cpu_index;
        v->halted = m->halted;
        v->target_cpu = m;
        set_apic_id(t, v);
    }
    return rc ? rc : t->fn(t->handle, t->vcpus, n, t->fn_ctx, err);
}

/* A reset may have QEMU map guest RAM anew (a hot-plug, a migration's remap): before reading
 * through the process again, the mapping is proved again; where it no longer proves, memsave
 * serves from then on, and one line says so. The guest runs meanwhile, as at open. */
static void reverify_after_reset(struct target_qmp *t)
{
    if (!t->pmem || qmp_resets(t->qmp) == t->pmem_resets)
        return;
    struct qp_error perr = {0};
    t->pmem_resets = qmp_resets(t->qmp);
    if (target_pmem_reverify_qmp(t->pmem, t->qmp, &perr) == 0)
        return;
    fprintf(stderr, "qprof: process memory, after a reset: %s; reading through %s from now on\n",
            perr.msg, qmp_mem_backend_name(qmp_mem_backend_in_use(t->qmp)));
    target_pmem_free(t->pmem);
    t->pmem = NULL;
}

static int tq_sample(void *impl, prof_target *handle, prof_target_stopped_fn fn, void *ctx,
                     struct prof_target_stats *stats, struct qp_error *err)
{
    struct target_qmp *t = impl;
    struct qmp_sample_stats qs = {0};
    reverify_after_reset(t);
    t->handle = handle;
    t->fn = fn;
    t->fn_ctx = ctx;
    int rc = qmp_sample_text(t->qmp, tq_stopped_text, t, &qs, err);
    if (stats)
        *stats = (struct prof_target_stats){
            .paused_ns = qs.paused_ns, .round_trips = qs.round_trips, .was_paused = qs.was_paused};
    return rc;
}

/* Whether reads walk the page tables themselves: through the RAM file, or through it still
 * where QEMU would translate with the vCPU's own privilege (riscv64: a hart in U mode cannot
 * read the kernel that way). Else QEMU translates (memsave, HMP). */
static bool reads_walk(const struct target_qmp *t)
{
    return !qemu_translates(t) &&
           (qmp_mem_backend_in_use(t->qmp) == QMP_MEM_DIRECT || t->arch->gdb_reads_by_privilege);
}

/* Through the QEMU process or the RAM file, the arch table's walk from the stop's root (a vCPU
 * in a mode it does not serve reads nothing rather than wrong bytes); else through QEMU's
 * translation by the vCPU, memsave or HMP, for which a vCPU is only its cpu-index. */
static int tq_read(void *impl, const struct prof_vcpu *cpu, struct prof_mem_req *reqs, size_t n,
                   struct qp_error *err)
{
    struct target_qmp *t = impl;
    if (t->pmem || reads_walk(t)) {
        for (size_t i = 0; i < n; i++)
            if (t->pmem)
                target_pmem_read_walked(t->pmem, t->arch, cpu->as_root, cpu, &reqs[i]);
            else
                target_qmp_read_walked(t->qmp, t->arch, cpu->as_root, cpu, &reqs[i]);
        return 0;
    }
    const struct qmp_regs by_index = {.cpu_index = cpu->index}, *q = &by_index;
    if (n == 1) {
        reqs[0].rc =
            qmp_mem_read(t->qmp, q, reqs[0].vaddr, reqs[0].buf, reqs[0].len, &reqs[0].got, err);
        return 0;
    }
    struct qmp_mem_req *qr = g_new(struct qmp_mem_req, n ? n : 1);
    for (size_t i = 0; i < n; i++)
        qr[i] =
            (struct qmp_mem_req){.vaddr = reqs[i].vaddr, .len = reqs[i].len, .buf = reqs[i].buf};
    int rc = qmp_mem_read_many(t->qmp, q, qr, n, err);
    for (size_t i = 0; i < n; i++) {
        reqs[i].got = qr[i].got;
        reqs[i].rc = rc ? rc : qr[i].rc;
    }
    g_free(qr);
    return rc;
}

static int tq_read_phys(void *impl, uint64_t paddr, void *buf, size_t len, struct qp_error *err)
{
    struct target_qmp *t = impl;
    if (t->pmem)
        return target_pmem_phys(t->pmem, paddr, buf, len)
                   ? qp_error_set(err, -EFAULT, "guest-physical 0x%llx is not RAM (%s)",
                                  (unsigned long long)paddr, TARGET_PMEM_NAME)
                   : 0;
    return qmp_phys_read(t->qmp, paddr, buf, len, err);
}

static int tq_ram_ranges(void *impl, struct prof_ram_range *out, int max, int *n,
                         struct qp_error *err)
{
    struct target_qmp *t = impl;
    if (t->pmem)
        return target_pmem_ram_ranges(t->pmem, out, max, n);
    /* Without the RAM file qmp/ infers the ranges from a PC's layout, which is no aarch64
     * machine's (virt puts devices where a PC has RAM): none rather than reads of device
     * registers. */
    if (qemu_translates(t) && qmp_mem_backend_in_use(t->qmp) != QMP_MEM_DIRECT) {
        *n = 0;
        return qp_error_set(err, -ENOTSUP,
                            "%s over QMP: qprof cannot tell where guest RAM lies (no --memory "
                            "direct here)",
                            t->arch->name);
    }
    return target_qmp_ram_ranges(t->qmp, out, max, n, err);
}

static bool tq_running(void *impl)
{
    struct target_qmp *t = impl;
    return qmp_guest_running(t->qmp);
}

static int tq_vcpu_count(const void *impl)
{
    const struct target_qmp *t = impl;
    return t->n_vcpus;
}

static uint64_t tq_round_trips(const void *impl)
{
    const struct target_qmp *t = impl;
    return qmp_round_trips(t->qmp);
}

static uint64_t tq_resets(const void *impl)
{
    const struct target_qmp *t = impl;
    return qmp_resets(t->qmp);
}

static bool tq_reads_cost_round_trips(const void *impl)
{
    const struct target_qmp *t = impl;
    return !t->pmem && qmp_mem_backend_in_use(t->qmp) != QMP_MEM_DIRECT;
}

static const char *tq_version(const void *impl)
{
    const struct target_qmp *t = impl;
    return qmp_qemu_version(t->qmp);
}

static const char *tq_describe(const void *impl)
{
    const struct target_qmp *t = impl;
    enum qmp_mem_backend b = qmp_mem_backend_in_use(t->qmp);
    if (t->pmem)
        return TARGET_PMEM_NAME;
    if (qemu_translates(t))
        return b == QMP_MEM_HMP ? "hmp, translated by QEMU at each vCPU's exception level"
                                : "memsave, translated by QEMU at each vCPU's exception level";
    return qmp_mem_backend_name(b);
}

static const struct prof_arch *tq_arch(const void *impl)
{
    const struct target_qmp *t = impl;
    return t->arch;
}

static void tq_free(void *impl)
{
    struct target_qmp *t = impl;
    if (!t)
        return;
    qmp_free(t->qmp);
    target_pmem_free(t->pmem);
    g_free(t->mcpus);
    g_free(t);
}

const struct prof_target_ops prof_target_qmp_ops = {
    .name = "qmp",
    .transport = "QMP",
    .round_trip_name = "QMP round trips",
    .round_trip_ms = 0.3, /* info registers ~0.3 ms, stop and cont ~0.12 ms each */
    .arch_of = tq_arch,   /* query-target's, once open */
    .open = tq_open,
    .sample = tq_sample,
    .read = tq_read,
    .running = tq_running,
    .vcpu_count = tq_vcpu_count,
    .read_phys = tq_read_phys,
    .ram_ranges = tq_ram_ranges,
    .round_trips = tq_round_trips,
    .resets = tq_resets,
    .reads_cost_round_trips = tq_reads_cost_round_trips,
    .version = tq_version,
    .describe = tq_describe,
    .free = tq_free,
};
