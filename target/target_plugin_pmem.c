/* The plugin target, without --qmp-socket: the QEMU process's memory (the socket's peer) as
 * guest RAM, found by the first captures: their windows, read again through a candidate mapping
 * and the guest's page tables, must match (mem_process.h). */
#include "target_plugin_internal.h"

#include <glib.h>
#include <stdio.h>

#define WITNESSES      8
#define WITNESS_WAIT_S 5.0

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
            if (tp_vcpu_from_sample(t, &t->cur, &ignored) != 0)
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
void tp_open_pmem_alone(struct target_plugin *t, double timeout)
{
    struct target_pmem_witness *w = g_new0(struct target_pmem_witness, WITNESSES);
    struct qp_error perr = {0};
    pid_t pid = 0;
    int n = 0, seen = 0, rc = target_pmem_peer_pid(t->fd, &pid, &perr);
    if (!rc)
        rc = target_pmem_may_read(pid, &perr);
    uint64_t deadline = tp_now_ns() + (uint64_t)(MIN(timeout, WITNESS_WAIT_S) * 1e9);
    while (!rc && (n = peek_witnesses(t, w, &seen)) < WITNESSES && tp_now_ns() < deadline &&
           !tp_peer_gone(t)) {
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
