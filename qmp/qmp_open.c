/* Opening and freeing a QMP client: the connection (qmp_client.c), then the memory backend
 * (qmp_mem.c) on top of it; freed in the reverse order. Kept apart so that the connection code
 * never calls into the backends, which send their requests through it. */
#include "qmp_internal.h"

int qmp_open(const char *address, const struct qmp_open_opts *opts, qmp_client **out,
             struct qp_error *err)
{
    qmp_client *c = NULL;
    int rc = qmp__connect(address, opts, &c, err);
    if (rc < 0)
        return rc;
    rc = qmp__pick_backend(c, opts ? opts->backend : QMP_MEM_AUTO, err);
    if (rc < 0) {
        qmp_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void qmp_free(qmp_client *c)
{
    if (!c)
        return;
    qmp__direct_close(c);
    qmp__memsave_close(c);
    qmp__disconnect(c);
}
