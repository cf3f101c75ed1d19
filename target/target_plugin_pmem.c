/* The plugin target, without --qmp-socket: the QEMU process's memory (the socket's peer) as
 * guest RAM, found by the first captures: their windows, read again through a candidate mapping
 * and the guest's page tables, must match (mem_process.h). */
#include "target_plugin_internal.h"

#include <glib.h>
#include <stdio.h>

#define WITNESSES 8

/* A captured window as a witness of what the guest's memory held (its first bytes). */
static void add_witness(struct target_pmem_witness *w, int *n, const struct prof_vcpu *v,
                        uint64_t vaddr, const uint8_t *bytes, uint32_t len)
{
    if (!len || *n >= WITNESSES || !v->paging64 || v->unwalkable)
        return; /* a walk proves nothing where it does not know the translation */
    struct target_pmem_witness *x = &w[(*n)++];
    x->root = v->as_root;
    x->mmu = v->mmu;
    x->vaddr = vaddr;
    x->len = MIN(len, (uint32_t)TARGET_PMEM_WITNESS_LEN);
    memcpy(x->bytes, bytes, x->len);
}

#define PMEM_RETRIES 30

#define PROOF_WAIT_S 5.0

/* The plugin alone can say where guest RAM lies in QEMU by what it captured: QEMU is the
 * socket's peer, and a mapping is taken when the captured windows read back through it (the
 * rules of mem_process.h). A refusal by who QEMU is (another user's, ptrace refused) is one line,
 * and user code then stays unread as before. The first samples are taken off the rings as
 * witnesses until a proof holds (or PROOF_WAIT_S passed), and passed over, as samples before
 * sampling began, with the idle ticks counted meanwhile: peeking without taking them would see
 * only what the rings held, and a guest still booting fills them with samples too early to prove
 * anything by while nothing newer arrives. Without a proof by then, the samples as they are
 * delivered go on proving (tp_witness_sample), and the ones before it name no user code. */
void tp_open_pmem_alone(struct target_plugin *t, double timeout)
{
    struct qp_error perr = {0};
    pid_t pid = 0;
    int rc = target_pmem_peer_pid(t->fd, &pid, &perr);
    if (!rc)
        rc = target_pmem_may_read(pid, &perr);
    if (rc) {
        fprintf(stderr, "qprof: process memory: %s; user code is not read\n", perr.msg);
        return;
    }
    t->pmem_tries_left = PMEM_RETRIES;
    t->pmem_w = g_new0(struct target_pmem_witness, WITNESSES);
    t->pmem_wn = 0;
    uint64_t deadline = qp_now_ns() + (uint64_t)(MIN(timeout, PROOF_WAIT_S) * 1e9);
    while (t->pmem_w && qp_now_ns() < deadline && !tp_peer_gone(t)) {
        struct qp_error ignored = {0};
        if (!tp_next_record(t)) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        } else if (t->cur.kind == QPR_KIND_SAMPLE &&
                   tp_vcpu_from_sample(t, &t->cur, &ignored) == 0) {
            tp_witness_sample(t);
        }
    }
    for (uint32_t i = 0; i < t->n_vcpus; i++)
        t->idle_ticks_seen[i] = atomic_load_explicit(&t->ring[i]->idle_ticks, memory_order_relaxed);
}

/* The sample just delivered (t->cur, t->vcpu) lends its windows as witnesses, and every
 * WITNESSES of them are a proof, at most PMEM_RETRIES times (a proof by windows of a guest still
 * booting can fail); the samples before it name no user code. The last failure says why, once. */
void tp_witness_sample(struct target_plugin *t)
{
    if (t->pmem || t->pmem_tries_left <= 0 || !t->pmem_w)
        return;
    uint32_t sl = MIN(t->cur.stack_len, (uint32_t)QPR_STACK_MAX);
    uint32_t el = MIN(t->cur.extra_len, (uint32_t)QPR_EXTRA_MAX);
    add_witness(t->pmem_w, &t->pmem_wn, &t->vcpu, t->cur.stack_addr, t->cur.stack, sl);
    add_witness(t->pmem_w, &t->pmem_wn, &t->vcpu, t->cur.extra_addr, t->cur.extra, el);
    if (t->pmem_wn < WITNESSES)
        return;
    struct qp_error perr = {0};
    pid_t pid = 0;
    int rc = target_pmem_peer_pid(t->fd, &pid, &perr);
    if (!rc)
        rc = target_pmem_open_witnessed(pid, t->arch, t->pmem_w, t->pmem_wn, &t->pmem, &perr);
    t->pmem_wn = 0;
    if (!rc || --t->pmem_tries_left == 0) {
        if (rc)
            fprintf(stderr, "qprof: process memory: %s; user code is not read\n", perr.msg);
        g_free(t->pmem_w);
        t->pmem_w = NULL;
    }
}
