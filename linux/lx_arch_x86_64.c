/* x86_64 for the kernel handle: the 4- and 5-level page walk from init_top_pgt, the image at
 * __START_KERNEL_map + phys_base; kernel stacks by ORC (lx_orc.c). */
#include "lx_internal.h"
#include "lx_module.h"

#include <errno.h>
#include <stddef.h>

#define PTE_PRESENT UINT64_C(0x1)
#define PTE_HUGE    UINT64_C(0x80)
#define PTE_ADDR    UINT64_C(0x000ffffffffff000)

static bool fits(const struct lx_vmcoreinfo *vi)
{
    return vi->init_top_pgt && vi->have_phys_base;
}

static uint64_t image_paddr(const struct lx_vmcoreinfo *vi, uint64_t kva)
{
    return kva - LX_START_KERNEL_MAP + vi->phys_base;
}

static int setup(lx_kernel *k, struct qp_error *err)
{
    if (k->vi.init_top_pgt < LX_START_KERNEL_MAP)
        return qp_error_set(err, -EPROTO,
                            "vmcoreinfo: init_top_pgt 0x%llx is not in the kernel image",
                            (unsigned long long)k->vi.init_top_pgt);
    k->levels = k->vi.pgtable_l5 ? 5 : 4;
    k->pgd_paddr = image_paddr(&k->vi, k->vi.init_top_pgt);
    return 0;
}

static bool canonical(uint64_t va, int levels)
{
    int bits = levels == 5 ? 57 : 48;
    int64_t sext = (int64_t)(va << (64 - bits)) >> (64 - bits);
    return (uint64_t)sext == va;
}

/* 4 or 5 levels, 1 GiB and 2 MiB pages; *size: the page's. */
static int walk(lx_kernel *k, uint64_t va, uint64_t *pa, uint64_t *size)
{
    if (!canonical(va, k->levels))
        return -EFAULT;
    uint64_t table = k->pgd_paddr;
    for (int level = k->levels - 1; level >= 0; level--) {
        int shift = 12 + 9 * level;
        uint64_t entry;
        if (lx__cached_read(k, table + ((va >> shift) & 511) * 8, &entry, 8) != 0 ||
            !(entry & PTE_PRESENT))
            return -EFAULT;
        table = entry & PTE_ADDR;
        if (level == 0 || ((level == 1 || level == 2) && (entry & PTE_HUGE))) {
            *size = UINT64_C(1) << shift;
            *pa = (table & ~(*size - 1)) | (va & (*size - 1));
            return 0;
        }
    }
    return -EFAULT;
}

/* MODULES_VADDR..MODULES_END: fixed, the same with 4- and 5-level paging. */
static int module_area(const lx_kernel *k, uint64_t *start, uint64_t *end)
{
    (void)k;
    *start = LX_MODULES_START;
    *end = LX_MODULES_END;
    return 0;
}

/* x86_64's DWARF register numbers (the System V psABI's), the slots of an LX_GREGS array. */
enum { RAX, RDX, RCX, RBX, RSI, RDI, RBP, RSP, R8, R9, R10, R11, R12, R13, R14, R15, RIP };

static void regs_to_pt(const uint64_t *r, struct lx_pt_regs *p)
{
    *p = (struct lx_pt_regs){.r15 = r[R15],
                             .r14 = r[R14],
                             .r13 = r[R13],
                             .r12 = r[R12],
                             .bp = r[RBP],
                             .bx = r[RBX],
                             .r11 = r[R11],
                             .r10 = r[R10],
                             .r9 = r[R9],
                             .r8 = r[R8],
                             .ax = r[RAX],
                             .cx = r[RCX],
                             .dx = r[RDX],
                             .si = r[RSI],
                             .di = r[RDI],
                             .ip = r[RIP],
                             .sp = r[RSP]};
}

static void regs_from_pt(const struct lx_pt_regs *p, uint64_t *r)
{
    r[R15] = p->r15, r[R14] = p->r14, r[R13] = p->r13, r[R12] = p->r12;
    r[RBP] = p->bp, r[RBX] = p->bx, r[R11] = p->r11, r[R10] = p->r10;
    r[R9] = p->r9, r[R8] = p->r8, r[RAX] = p->ax, r[RCX] = p->cx;
    r[RDX] = p->dx, r[RSI] = p->si, r[RDI] = p->di, r[RIP] = p->ip, r[RSP] = p->sp;
}

const struct lx_arch lx_arch_x86_64 = {
    .name = "x86_64",
    .fits = fits,
    .setup = setup,
    .walk = walk,
    .image_paddr = image_paddr,
    .fp = NULL,
    .module_area = module_area,
    .regs_to_pt = regs_to_pt,
    .regs_from_pt = regs_from_pt,
    /* current_task, or pcpu_hot.current_task, found from the GS base */
    .current_in_percpu = true,
    .pt_regs_iret = offsetof(struct lx_pt_regs, ip),
};
