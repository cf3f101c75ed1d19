/* The kernel handle: translation of kernel addresses through the kernel's own page table
 * (init_top_pgt), with a small cache of translations per stop. */
#define _GNU_SOURCE
#include "lx_internal.h"

#include <errno.h>
#include <string.h>

#define PTE_PRESENT UINT64_C(0x1)
#define PTE_HUGE    UINT64_C(0x80)
#define PTE_ADDR    UINT64_C(0x000ffffffffff000)
#define PAGE_MASK4K UINT64_C(0xfff)

/* len bytes at pa, within one 4 KiB page, through the page cache. */
static int cached_read(lx_kernel *k, uint64_t pa, void *buf, size_t len)
{
    uint64_t page = pa & ~PAGE_MASK4K;
    /* A read across the page's end (a page-table root from a garbage vmcoreinfo is not even
     * 8-byte aligned) is no cached page's: read it as it is. */
    if ((pa & PAGE_MASK4K) + len > 4096)
        return k->phys->read(k->phys->ctx, pa, buf, len);
    for (int i = 0; i < LX_PAGE_CACHE; i++) {
        if (k->cached_pa[i] == page + 1) {
            memcpy(buf, k->cached[i] + (pa & PAGE_MASK4K), len);
            return 0;
        }
    }
    unsigned slot = k->next_victim++ % LX_PAGE_CACHE;
    if (!k->cached[slot])
        k->cached[slot] = g_malloc(4096);
    k->cached_pa[slot] = 0;
    int rc = k->phys->read(k->phys->ctx, page, k->cached[slot], 4096);
    if (rc)
        return k->phys->read(k->phys->ctx, pa, buf, len); /* a page only partly RAM */
    k->cached_pa[slot] = page + 1;
    memcpy(buf, k->cached[slot] + (pa & PAGE_MASK4K), len);
    return 0;
}

static bool canonical(uint64_t va, int levels)
{
    int bits = levels == 5 ? 57 : 48;
    int64_t sext = (int64_t)(va << (64 - bits)) >> (64 - bits);
    return (uint64_t)sext == va;
}

/* The walk itself: 4 or 5 levels, 1 GiB and 2 MiB pages; *size: the page's. */
static int walk(lx_kernel *k, uint64_t va, uint64_t *pa, uint64_t *size)
{
    if (!canonical(va, k->levels))
        return -EFAULT;
    uint64_t table = k->pgd_paddr;
    for (int level = k->levels - 1; level >= 0; level--) {
        int shift = 12 + 9 * level;
        uint64_t entry;
        if (cached_read(k, table + ((va >> shift) & 511) * 8, &entry, 8) != 0 ||
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

int lx__translate(lx_kernel *k, uint64_t kva, uint64_t *paddr, uint64_t *contiguous)
{
    uint64_t page = kva & ~PAGE_MASK4K;
    struct lx_tlb_entry *e = &k->tlb[(page >> 12) % LX_TLB_SIZE];
    uint64_t pa, size;
    if (e->va_page == page && page) {
        pa = e->pa_page, size = e->page_size;
    } else {
        int rc = walk(k, page, &pa, &size);
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
        if ((small ? cached_read(k, pa, dst, n) : k->phys->read(k->phys->ctx, pa, dst, n)) != 0)
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
                            "init_uts_ns at 0x%llx is unreadable through init_top_pgt "
                            "(phys_base 0x%llx): not a usable vmcoreinfo",
                            (unsigned long long)k->vi.init_uts_ns,
                            (unsigned long long)k->vi.phys_base);
    if (!memmem(uts, sizeof uts, k->vi.osrelease, strlen(k->vi.osrelease) + 1))
        return qp_error_set(err, -EPROTO,
                            "init_uts_ns does not hold release %s: a stale vmcoreinfo copy?",
                            k->vi.osrelease);
    return 0;
}

int lx_kernel_open(const struct lx_vmcoreinfo *vi, const struct lx_phys *p, lx_kernel **out,
                   struct qp_error *err)
{
    if (vi->init_top_pgt < LX_START_KERNEL_MAP)
        return qp_error_set(err, -EPROTO,
                            "vmcoreinfo: init_top_pgt 0x%llx is not in the kernel image",
                            (unsigned long long)vi->init_top_pgt);
    lx_kernel *k = g_new0(lx_kernel, 1);
    k->vi = *vi;
    k->phys = p;
    k->levels = vi->pgtable_l5 ? 5 : 4;
    k->pgd_paddr = vi->init_top_pgt - LX_START_KERNEL_MAP + vi->phys_base;
    int rc = check_uts(k, err);
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
