/* x86_64: canonical halves, CPL 3, CR3, and the 4-level page walk. */
#include "arch_x86_64.h"
#include "unwind.h"

#include <elf.h>
#include <errno.h>

#define PTE_PRESENT 0x1ull
#define PTE_HUGE    0x80ull
#define PTE_ADDR    0x000ffffffffff000ull /* bits 51..12; NX and flag bits masked off */

/* 4 KiB, 2 MiB and 1 GiB pages. */
static int page_walk(uint64_t cr3, uint64_t vaddr, prof_arch_phys_read_fn read_phys, void *ctx,
                     uint64_t *paddr, uint64_t *page_size)
{
    static const int shifts[] = {39, 30, 21, 12};
    if ((uint64_t)((int64_t)(vaddr << 16) >> 16) != vaddr)
        return -EFAULT; /* non-canonical */
    uint64_t table = cr3 & PTE_ADDR;
    for (int level = 0; level < 4; level++) {
        uint64_t entry, size = 1ull << shifts[level];
        uint64_t index = (vaddr >> shifts[level]) & 511;
        if (read_phys(ctx, table + index * 8, &entry) < 0 || !(entry & PTE_PRESENT))
            return -EFAULT;
        table = entry & PTE_ADDR;
        /* PS in a PDPTE (1 GiB) or PDE (2 MiB) ends the walk; level 3 is always a 4 KiB page. */
        if (level == 3 || ((level == 1 || level == 2) && (entry & PTE_HUGE))) {
            *paddr = (table & ~(size - 1)) | (vaddr & (size - 1));
            *page_size = size;
            return 0;
        }
    }
    return -EFAULT;
}

const struct prof_arch prof_arch_x86_64 = {
    .name = "x86_64",
    .elf_machine = EM_X86_64,
    /* User code below 0x0000800000000000, the kernel from 0xffff800000000000 up. */
    .split = {.user_end = UINT64_C(0x0000800000000000),
              .kernel_start = UINT64_C(0xffff800000000000)},
    .pc_reg = UNW_RIP,
    .sp_reg = UNW_RSP,
    .user_privilege = 3,
    .as_root_mask = X86_CR3_ADDR_MASK,
    .page_walk = page_walk,
};
