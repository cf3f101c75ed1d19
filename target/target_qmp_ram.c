/* Virtual memory from QEMU's shared RAM file through an arch table's page walk
 * (target_qmp_ram.h): the gdbstub target's and the QMP target's. */
#include "target_qmp_ram.h"

#include <errno.h>

#define PAGE_SIZE 4096u

int target_qmp_phys_word(void *ctx, uint64_t paddr, uint64_t *val)
{
    struct qp_error ignored = {0};
    return qmp_phys_read(ctx, paddr, val, sizeof *val, &ignored) == 0 ? 0 : -EFAULT;
}

void target_qmp_read_walked(qmp_client *q, const struct prof_arch *a, uint64_t root,
                            const struct prof_vcpu *cpu, struct prof_mem_req *r)
{
    r->got = 0;
    r->rc = 0;
    /* Nothing lies past the top of the address space: the read ends there, never wraps to 0. */
    if (r->vaddr && r->len > 0 - r->vaddr)
        r->len = 0 - r->vaddr;
    while (!cpu->unwalkable && r->got < r->len) {
        uint64_t va = r->vaddr + r->got, pa = va, page = PAGE_SIZE;
        /* translation off (riscv64 M-mode, aarch64 with SCTLR_EL1.M clear): physical = virtual */
        if (cpu->paging64 &&
            prof_arch_page_walk(a, root, &cpu->mmu, va, target_qmp_phys_word, q, &pa, &page) != 0)
            break;
        size_t len = (size_t)(page - va % page);
        if (len > r->len - r->got)
            len = r->len - r->got;
        struct qp_error ignored = {0};
        if (qmp_phys_read(q, pa, (uint8_t *)r->buf + r->got, len, &ignored) != 0)
            break;
        r->got += len;
    }
    if (r->got == 0 && r->len > 0)
        r->rc = -EFAULT;
}
