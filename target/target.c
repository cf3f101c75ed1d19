/* The target handle: a backend's table and its state, so that callers never see which. */
#include "target.h"

#include <glib.h>
#include <stdio.h>

struct prof_target {
    const struct prof_target_ops *ops;
    void *impl;
};

int prof_target_open(const struct prof_target_ops *ops, const struct prof_target_open_opts *o,
                     prof_target **out, struct qp_error *err)
{
    void *impl = NULL;
    int rc = ops->open(o, &impl, err);
    if (rc)
        return rc;
    prof_target *t = g_new0(prof_target, 1);
    t->ops = ops;
    t->impl = impl;
    *out = t;
    return 0;
}

void prof_target_free(prof_target *t)
{
    if (!t)
        return;
    t->ops->free(t->impl);
    g_free(t);
}

int prof_target_sample(prof_target *t, prof_target_stopped_fn fn, void *ctx,
                       struct prof_target_stats *stats, struct qp_error *err)
{
    return t->ops->sample(t->impl, t, fn, ctx, stats, err);
}

int prof_target_read(prof_target *t, const struct prof_vcpu *cpu, struct prof_mem_req *reqs,
                     size_t n, struct qp_error *err)
{
    return t->ops->read(t->impl, cpu, reqs, n, err);
}

int prof_target_read_phys(prof_target *t, uint64_t paddr, void *buf, size_t len,
                          struct qp_error *err)
{
    if (!t->ops->read_phys)
        return qp_error_set(err, -ENOTSUP, "the %s target cannot read guest-physical memory",
                            t->ops->name);
    return t->ops->read_phys(t->impl, paddr, buf, len, err);
}

int prof_target_ram_ranges(prof_target *t, struct prof_ram_range *out, int max, int *n,
                           struct qp_error *err)
{
    *n = 0;
    if (!t->ops->ram_ranges)
        return qp_error_set(err, -ENOTSUP, "the %s target cannot list guest RAM", t->ops->name);
    return t->ops->ram_ranges(t->impl, out, max, n, err);
}

bool prof_target_running(prof_target *t)
{
    return t->ops->running(t->impl);
}

int prof_target_vcpu_count(const prof_target *t)
{
    return t->ops->vcpu_count ? t->ops->vcpu_count(t->impl) : -1;
}

uint64_t prof_target_round_trips(const prof_target *t)
{
    return t->ops->round_trips(t->impl);
}

bool prof_target_captures(const prof_target *t)
{
    return t->ops->captures;
}

uint64_t prof_target_lost(const prof_target *t)
{
    return t->ops->lost ? t->ops->lost(t->impl) : 0;
}

int prof_target_exact_counts(prof_target *t, struct prof_exact_counts *out, struct qp_error *err)
{
    if (!t->ops->exact_counts)
        return qp_error_set(err, -ENOTSUP,
                            "exact instruction counts need --plugin (%s cannot "
                            "count instructions)",
                            t->ops->transport);
    return t->ops->exact_counts(t->impl, out, err);
}

int prof_target_set_capture(prof_target *t, const struct prof_capture_plan *plan,
                            struct qp_error *err)
{
    if (!t->ops->set_capture)
        return qp_error_set(err, -ENOTSUP, "%s captures nothing at a sample's instant",
                            t->ops->transport);
    return t->ops->set_capture(t->impl, plan, err);
}

void prof_exact_counts_clear(struct prof_exact_counts *c)
{
    g_free(c->blocks);
    *c = (struct prof_exact_counts){0};
}

uint64_t prof_target_independent(const prof_target *t)
{
    return t->ops->independent ? t->ops->independent(t->impl) : 0;
}

uint64_t prof_target_paused_intervals(const prof_target *t)
{
    return t->ops->paused_intervals ? t->ops->paused_intervals(t->impl) : 0;
}

uint64_t prof_target_missed(const prof_target *t)
{
    return t->ops->missed ? t->ops->missed(t->impl) : 0;
}

uint64_t prof_target_resets(const prof_target *t)
{
    return t->ops->resets ? t->ops->resets(t->impl) : 0;
}

const char *prof_target_transport(const prof_target *t)
{
    return t->ops->transport ? t->ops->transport : t->ops->name;
}

const char *prof_target_round_trip_name(const prof_target *t)
{
    return t->ops->round_trip_name ? t->ops->round_trip_name : "round trips";
}

bool prof_target_reads_cost_round_trips(const prof_target *t)
{
    return t->ops->reads_cost_round_trips(t->impl);
}

double prof_target_usual_round_trip_ms(const prof_target *t)
{
    return t->ops->round_trip_ms;
}

const char *prof_target_version(const prof_target *t)
{
    return t->ops->version(t->impl);
}

const char *prof_target_describe(const prof_target *t)
{
    return t->ops->describe(t->impl);
}

const char *prof_target_trigger(const prof_target *t)
{
    return t->ops->trigger ? t->ops->trigger(t->impl) : NULL;
}

const struct prof_addr_split *prof_target_split(const prof_target *t)
{
    return &prof_target_arch(t)->split;
}

const struct prof_arch *prof_target_arch(const prof_target *t)
{
    return t->ops->arch_of ? t->ops->arch_of(t->impl) : t->ops->arch;
}

int prof_target_open_transport(const struct prof_transport_choice *c, prof_target **out,
                               struct qp_error *err)
{
    if (c->transport == PROF_TRANSPORT_PLUGIN) {
        struct prof_target_open_opts to = {
            .address = c->plugin_address,
            .timeout_s = c->timeout_s,
            .qmp_address = c->qmp_socket_given ? c->qmp_socket : NULL,
            .interval_ns = c->interval_ns,
            .period_insns = c->period_insns,
            .plugin_trigger = c->plugin_trigger,
            .abi_addr = c->abi_addr,
            .exact = c->exact,
        };
        return prof_target_open(&prof_target_plugin_ops, &to, out, err);
    }
    bool gdb = c->transport == PROF_TRANSPORT_GDB ||
               (c->transport == PROF_TRANSPORT_AUTO && c->gdb_address);
    if (gdb) {
        struct prof_target_open_opts to = {
            .address = c->gdb_address,
            .memory_backend = c->memory_backend,
            .timeout_s = c->timeout_s,
            .qmp_address = c->qmp_socket_given ? c->qmp_socket : NULL,
        };
        int rc = prof_target_open(&prof_target_gdb_ops, &to, out, err);
        if (rc == 0 || c->transport == PROF_TRANSPORT_GDB || !c->qmp_socket_given)
            return rc;
        fprintf(stderr, "qprof: %s; sampling through QMP instead\n", err ? err->msg : "");
        if (err)
            *err = (struct qp_error){0};
    }
    struct prof_target_open_opts to = {
        .address = c->qmp_socket, .memory_backend = c->memory_backend, .timeout_s = c->timeout_s};
    return prof_target_open(&prof_target_qmp_ops, &to, out, err);
}
