/* The plugin target, --exact: requests on the plugin's socket, answered at once by its listener
 * (the per-block instruction counts and their code). */
#include "target_plugin_internal.h"

#include <glib.h>
#include <poll.h>
#include <sys/socket.h>

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

int tp_exact_request(struct target_plugin *t, uint32_t op, struct qpr_exact_reply *reply,
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

int tp_exact_counts(void *impl, struct prof_exact_counts *out, struct qp_error *err)
{
    struct target_plugin *t = impl;
    struct qpr_exact_reply r;
    *out = (struct prof_exact_counts){0};
    if (!t->exact)
        return qp_error_set(err, -EINVAL, "the plugin target was opened without --exact");
    int rc = tp_exact_request(t, QPR_EXACT_DUMP, &r, err);
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
        out->counted_s =
            r.since_ns && qp_now_ns() > r.since_ns ? (qp_now_ns() - r.since_ns) / 1e9 : 0;
        out->unplaced_insns = r.overflow_insns;
    }
    g_free(raw);
    return rc;
}
