/* Private to the target backends that read guest RAM through a QMP client (target_qmp.c, and
 * target_gdb.c and target_plugin.c when they have a QMP socket). The architecture's facts are in
 * arch/. */
#ifndef PROF_TARGET_QMP_RAM_H
#define PROF_TARGET_QMP_RAM_H

#include "qmp.h"
#include "target.h"

#include <stdbool.h>
#include <stdint.h>

/* How target_qmp_open_beside treats QEMU's shared RAM file. */
enum target_qmp_ram_use {
    TARGET_QMP_RAM_REQUIRED,  /* --memory direct: no RAM file is an error */
    TARGET_QMP_RAM_PREFERRED, /* auto: the RAM file when QEMU shares one */
    TARGET_QMP_RAM_UNUSED,    /* memory comes another way: QMP only for its events */
};

/* Opens the QMP client that a gdbstub or plugin target keeps beside it: with the direct backend
 * when the RAM file is wanted and shared (*direct true), else with the HMP backend, which needs
 * no setup and is never used for reads there: QMP's STOP and RESUME events still tell who paused
 * the guest. Errors are prefixed "--qmp-socket" (for a required RAM file, "the shared RAM file,
 * through QMP"). */
int target_qmp_open_beside(const char *address, double timeout_s, enum target_qmp_ram_use ram,
                           qmp_client **out, bool *direct, struct qp_error *err);

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

/* One read of virtual memory through the RAM file of q's direct backend: the arch table's page
 * walk from root (the stop's address-space root; cpu->mmu for the rest of its context; physical
 * = virtual when cpu->paging64 is false, as in riscv64 M mode), page by page. r->got stops at
 * the first page that does not translate or is not RAM; r->rc is -EFAULT when none did, and
 * for every read of a vCPU in a mode the walk does not serve (cpu->unwalkable). */
void target_qmp_read_walked(qmp_client *q, const struct prof_arch *a, uint64_t root,
                            const struct prof_vcpu *cpu, struct prof_mem_req *r);

/* A prof_arch_phys_read_fn over q's direct backend (ctx: the qmp_client). */
int target_qmp_phys_word(void *ctx, uint64_t paddr, uint64_t *val);

#endif
