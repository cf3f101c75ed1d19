/* Process memory set up through a QMP client (mem_process.h): the layout from `info mtree -f`,
 * the proof against pmemsave. */
#include "mem_process.h"

#include <errno.h>
#include <stdlib.h>

static int qmp_transport(void *ctx, uint64_t paddr, void *buf, size_t len)
{
    struct qp_error ignored = {0};
    return qmp_phys_read(ctx, paddr, buf, len, &ignored);
}

/* Another user's QEMU cannot write pmemsave's file into qprof's private directory. */
static int qmp_transport_hmp(void *ctx, uint64_t paddr, void *buf, size_t len)
{
    struct qp_error ignored = {0};
    return qmp_phys_read_hmp(ctx, paddr, buf, len, &ignored);
}

int target_pmem_open_qmp(qmp_client *q, int sock, target_pmem **out, struct qp_error *err)
{
    pid_t pid = 0;
    char *mtree = NULL;
    int rc = target_pmem_peer_pid(sock, &pid, err);
    if (!rc)
        rc = target_pmem_may_read(pid, err);
    if (!rc)
        rc = qmp_hmp(q, "info mtree -f", -1, &mtree, err);
    if (!rc) {
        struct target_pmem_range ranges[TARGET_PMEM_MAX_RANGES];
        int n = target_pmem_parse_mtree(mtree, ranges, TARGET_PMEM_MAX_RANGES, NULL);
        rc = target_pmem_open(
            pid, ranges, n,
            target_pmem_peer_is_other_user(sock) ? qmp_transport_hmp : qmp_transport, q, out, err);
    }
    free(mtree);
    return rc;
}

int target_pmem_reverify_qmp(target_pmem *pm, qmp_client *q, struct qp_error *err)
{
    return target_pmem_reverify(
        pm, target_pmem_peer_is_other_user(qmp_socket_fd(q)) ? qmp_transport_hmp : qmp_transport, q,
        err);
}
