/* The kernel handle: translation of kernel addresses through the kernel's own page table
 * (x86_64's init_top_pgt, arm64's swapper_pg_dir: the walk is the architecture table's), with a
 * small cache of translations per stop. */
#define _GNU_SOURCE
#include "lx_internal.h"

#include <errno.h>
#include <string.h>

#define PAGE_MASK4K UINT64_C(0xfff)

int lx__translate(lx_kernel *k, uint64_t kva, uint64_t *paddr, uint64_t *contiguous)
{
    uint64_t page = kva & ~PAGE_MASK4K;
    struct lx_tlb_entry *e = &k->tlb[(page >> 12) % LX_TLB_SIZE];
    uint64_t pa, size;
    if (e->va_page == page && page) {
        pa = e->pa_page, size = e->page_size;
    } else {
        int rc = k->arch->walk(k, page, &pa, &size);
        if (rc)
            return rc;
        *e = (struct lx_tlb_entry){page, pa, size};
    }
    *paddr = pa | (kva & PAGE_MASK4K);
    /* To the end of the page holding kva (2 MiB or 1 GiB pages map the kernel image). */
    *contiguous = size - (kva & (size - 1));
    return 0;
}

int lx_kernel_read(lx_kernel *k, uint64_t kva, void *buf, size_t len)
{
    uint8_t *dst = buf;
    while (len > 0) {
        uint64_t pa, contiguous;
        if (lx__translate(k, kva, &pa, &contiguous) != 0)
            return -EFAULT;
        size_t n = contiguous < len ? (size_t)contiguous : len;
        bool small = n <= 64 && (pa & PAGE_MASK4K) + n <= 4096;
        if ((small ? lx__cached_read(k, pa, dst, n) : k->phys->read(k->phys->ctx, pa, dst, n)) != 0)
            return -EFAULT;
        dst += n, kva += n, len -= n;
    }
    return 0;
}

int lx_kernel_virt_to_phys(lx_kernel *k, uint64_t kva, uint64_t *paddr)
{
    uint64_t contiguous;
    return lx__translate(k, kva, paddr, &contiguous) ? -EFAULT : 0;
}

void lx_kernel_forget_translations(lx_kernel *k)
{
    memset(k->tlb, 0, sizeof k->tlb);
    memset(k->cached_pa, 0, sizeof k->cached_pa);
}

/* init_uts_ns starts with struct new_utsname, whose release field must be the OSRELEASE of the
 * vmcoreinfo just found: a check that the page table, phys_base and the note agree. */
static int check_uts(lx_kernel *k, struct qp_error *err)
{
    char uts[512];
    if (!k->vi.init_uts_ns)
        return 0;
    if (lx_kernel_read(k, k->vi.init_uts_ns, uts, sizeof uts) != 0)
        return qp_error_set(err, -EFAULT,
                            "init_uts_ns at 0x%llx is unreadable through the kernel page table "
                            "(%s, at guest-physical 0x%llx): not a usable vmcoreinfo",
                            (unsigned long long)k->vi.init_uts_ns, k->arch->name,
                            (unsigned long long)k->pgd_paddr);
    if (!memmem(uts, sizeof uts, k->vi.osrelease, strlen(k->vi.osrelease) + 1))
        return qp_error_set(err, -EPROTO,
                            "init_uts_ns does not hold release %s: a stale vmcoreinfo copy?",
                            k->vi.osrelease);
    return 0;
}

int lx_kernel_open(const struct lx_vmcoreinfo *vi, const struct lx_phys *p, lx_kernel **out,
                   struct qp_error *err)
{
    const struct lx_arch *arch = lx__arch_of(vi);
    if (!arch)
        return qp_error_set(err, -EPROTO, "vmcoreinfo names no kernel page table qprof can use");
    lx_kernel *k = g_new0(lx_kernel, 1);
    k->vi = *vi;
    k->arch = arch;
    k->phys = p;
    int rc = arch->setup(k, err);
    if (!rc)
        rc = check_uts(k, err);
    if (rc) {
        lx_kernel_free(k);
        return rc;
    }
    *out = k;
    return 0;
}

void lx_kernel_free(lx_kernel *k)
{
    if (!k)
        return;
    for (int i = 0; i < LX_PAGE_CACHE; i++)
        g_free(k->cached[i]);
    g_free(k->syms);
    if (k->names)
        g_string_chunk_free(k->names);
    if (k->by_name)
        g_hash_table_destroy(k->by_name);
    g_free(k->orc_ip);
    g_free(k->orc);
    g_free(k);
}

const struct lx_vmcoreinfo *lx_kernel_vmcoreinfo(const lx_kernel *k)
{
    return &k->vi;
}

const char *lx_kernel_arch_name(const lx_kernel *k)
{
    return k->arch->name;
}

uint64_t lx_kernel_image_paddr(const lx_kernel *k, uint64_t kva)
{
    return k->arch->image_paddr(&k->vi, kva);
}

bool lx_kernel_unwinds_by_fp(const lx_kernel *k)
{
    return k->arch->fp != NULL;
}

int lx_kernel_regs_to_pt(const lx_kernel *k, const uint64_t *regs, struct lx_pt_regs *p)
{
    if (!k->arch->regs_to_pt)
        return -ENOTSUP;
    k->arch->regs_to_pt(regs, p);
    return 0;
}

int lx_kernel_regs_from_pt(const lx_kernel *k, const struct lx_pt_regs *p, uint64_t *regs)
{
    if (!k->arch->regs_from_pt)
        return -ENOTSUP;
    memset(regs, 0, LX_GREGS * sizeof *regs);
    k->arch->regs_from_pt(p, regs);
    return 0;
}

bool lx_kernel_current_in_percpu(const lx_kernel *k, uint32_t *iret_off)
{
    *iret_off = k->arch->pt_regs_iret;
    return k->arch->current_in_percpu;
}

const struct lx_arch *lx__arch_of(const struct lx_vmcoreinfo *vi)
{
    static const struct lx_arch *const all[] = {&lx_arch_x86_64, &lx_arch_arm64, &lx_arch_riscv64};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->fits(vi))
            return all[i];
    return NULL;
}
