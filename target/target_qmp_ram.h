/* Private to the target backends that read guest RAM through a QMP client (target_qmp.c, and
 * target_gdb.c when it has a QMP socket). The architecture's facts are in arch/. */
#ifndef PROF_TARGET_QMP_RAM_H
#define PROF_TARGET_QMP_RAM_H

#include "qmp.h"
#include "target.h"

#include <stdint.h>

/* Both backends read guest RAM through a QMP client's direct backend: its RAM ranges, as the
 * target seam gives them. */
static inline int target_qmp_ram_ranges(qmp_client *q, struct prof_ram_range *out, int max, int *n,
                                        struct qp_error *err)
{
    struct qmp_ram_range r[16];
    int rc = qmp_ram_ranges(q, r, max < 16 ? max : 16, n, err);
    for (int i = 0; rc == 0 && i < *n; i++)
        out[i] = (struct prof_ram_range){r[i].start, r[i].end};
    return rc;
}

#endif
