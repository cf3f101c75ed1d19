/* Process memory set up through the gdbstub alone (mem_process.h): the layout from the
 * monitor's `info mtree -f` (qRcmd), the proof against `m` packets in physical mode. */
#include "gdb.h"
#include "mem_process.h"

#include <errno.h>
#include <glib.h>

static int gdb_transport(void *ctx, uint64_t paddr, void *buf, size_t len)
{
    struct gdb_mem_req r = {.vaddr = paddr, .len = len, .buf = buf};
    struct qp_error ignored = {0};
    if (gdb_mem_read_many(ctx, 0, &r, 1, &ignored) != 0 || r.rc != 0 || r.got != len)
        return -EIO;
    return 0;
}

/* QEMU's gdbstub reads guest-physical memory with `m` while Qqemu.PhyMemMode is 1 (QEMU 4.1 and
 * later); it is set back to 0 on every path, or the samples' reads would be physical too. */
static int prove_physical(gdb_client *g, pid_t pid, const struct target_pmem_range *ranges, int n,
                          target_pmem **out, struct qp_error *err)
{
    int rc = gdb_command(g, "Qqemu.PhyMemMode:1", NULL, NULL, err);
    if (rc)
        return qp_error_prefix(err, "the gdbstub reads no physical memory");
    rc = target_pmem_open(pid, ranges, n, gdb_transport, g, out, err);
    struct qp_error off_err = {0};
    if (gdb_command(g, "Qqemu.PhyMemMode:0", NULL, NULL, &off_err) != 0) {
        target_pmem_free(*out);
        *out = NULL;
        return qp_error_set(err, -EIO, "%s", off_err.msg);
    }
    return rc;
}

int target_pmem_open_gdb(gdb_client *g, target_pmem **out, struct qp_error *err)
{
    pid_t pid = 0;
    char *mtree = NULL;
    *out = NULL;
    int rc = target_pmem_peer_pid(gdb_socket_fd(g), &pid, err);
    if (!rc)
        rc = target_pmem_may_read(pid, err);
    if (!rc)
        rc = gdb_monitor(g, "info mtree -f", &mtree, err);
    if (!rc) {
        struct target_pmem_range ranges[TARGET_PMEM_MAX_RANGES];
        int n = target_pmem_parse_mtree(mtree, ranges, TARGET_PMEM_MAX_RANGES, NULL);
        rc = prove_physical(g, pid, ranges, n, out, err);
    }
    g_free(mtree);
    return rc;
}
