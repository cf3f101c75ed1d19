/* The kernel handle's small cache of guest-physical pages (page-table entries, stack words),
 * refilled once per stop: its own file, since both the kernel handle and the architectures'
 * page walks (lx_arch_*.c), which the handle calls through its table, read through it. */
#include "lx_internal.h"

#include <string.h>

#define PAGE_MASK4K UINT64_C(0xfff)

/* len bytes at pa, within one 4 KiB page, through the page cache. */
int lx__cached_read(lx_kernel *k, uint64_t pa, void *buf, size_t len)
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
