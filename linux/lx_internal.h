/* Private to linux/: the kernel handle's state, shared by its source files. */
#ifndef LX_INTERNAL_H
#define LX_INTERNAL_H

#include "linux.h"

#include <glib.h>

#define LX_START_KERNEL_MAP UINT64_C(0xffffffff80000000)
#define LX_TLB_SIZE         64
#define LX_PAGE_CACHE       16 /* physical pages kept per stop: page tables, stack pages */

struct lx_tlb_entry {
    uint64_t va_page, pa_page; /* 4 KiB granules; va_page 0 = empty */
    uint64_t page_size;        /* of the page the granule lies in */
};

/* One ORC entry, normalised (v1 layout). */
struct lx_orc {
    int16_t sp_offset, bp_offset;
    uint8_t sp_reg, bp_reg, type;
    bool end;
};

struct lx_kernel {
    struct lx_vmcoreinfo vi;
    const struct lx_phys *phys;
    uint64_t pgd_paddr;
    int levels;
    struct lx_tlb_entry tlb[LX_TLB_SIZE];
    /* Small reads (page-table entries, stack words) are served from whole pages read once per
     * stop: one round trip per page instead of one per word with a backend that has them. */
    uint64_t cached_pa[LX_PAGE_CACHE]; /* page addresses + 1; 0 = empty */
    uint8_t *cached[LX_PAGE_CACHE];
    unsigned next_victim;
    /* kallsyms */
    bool have_syms;
    struct lx_symbol *syms;
    size_t n_syms;
    GStringChunk *names;
    GHashTable *by_name; /* name -> struct lx_symbol * (the first of that name) */
    /* ORC */
    uint64_t *orc_ip; /* absolute addresses, ascending */
    struct lx_orc *orc;
    size_t n_orc;
    uint64_t text_start, text_end; /* _text.._etext */
    uint64_t init_start, init_end; /* _sinittext.._einittext */
    const struct lx_modules *mods; /* loaded modules' ORC (lx_kernel_use_modules), borrowed */
};

/* Translates kva through the kernel page table: 0 with *paddr and the bytes physically
 * contiguous from there (to the end of its page), or -EFAULT. */
int lx__translate(lx_kernel *k, uint64_t kva, uint64_t *paddr, uint64_t *contiguous);

/* ORC helpers shared by lx_orc.c (vmlinux) and lx_module.c (modules). */
struct lx_modules;
/* The entry of ip in a module's text (NULL when no module text holds ip, or no entry). */
const struct lx_orc *lx__modules_orc_find(const struct lx_modules *m, uint64_t ip);
/* The rightmost entry of a sorted table whose ip is <= ip (on equal ips the last); NULL when
 * none. */
const struct lx_orc *lx__orc_search(const uint64_t *ips, const struct lx_orc *orc, size_t n,
                                    uint64_t ip);
/* Decodes one 6-byte version-1 entry. */
struct lx_orc lx__orc_decode(const uint8_t *e);

#endif
