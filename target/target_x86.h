/* Private to the x86_64 target backends (target_qmp.c, target_gdb.c): the architecture facts
 * both turn into struct prof_vcpu and struct prof_addr_split. */
#ifndef PROF_TARGET_X86_H
#define PROF_TARGET_X86_H

#include "qmp.h"
#include "target.h"

#include <stdint.h>

/* CR3 bits 12..51 hold the top-level table's physical address; the rest are flags and PCID. */
#define X86_CR3_ADDR_MASK UINT64_C(0x000ffffffffff000)
#define X86_CR0_PG        (UINT64_C(1) << 31)
#define X86_CR4_LA57      (UINT64_C(1) << 12)
#define X86_EFER_LMA      (UINT64_C(1) << 10)

/* Canonical halves: user code below 0x0000800000000000, the kernel from 0xffff800000000000 up. */
#define X86_64_ADDR_SPLIT                                                                          \
    {                                                                                              \
        .user_end = UINT64_C(0x0000800000000000), .kernel_start = UINT64_C(0xffff800000000000)     \
    }

/* Both backends read guest RAM through a QMP client's direct backend: its RAM ranges, as the
 * target seam gives them. */
static inline int x86_qmp_ram_ranges(qmp_client *q, struct prof_ram_range *out, int max, int *n,
                                     struct qp_error *err)
{
    struct qmp_ram_range r[16];
    int rc = qmp_ram_ranges(q, r, max < 16 ? max : 16, n, err);
    for (int i = 0; rc == 0 && i < *n; i++)
        out[i] = (struct prof_ram_range){r[i].start, r[i].end};
    return rc;
}

#endif
