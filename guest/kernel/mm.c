/* Physical frames (a bump allocator: the demo never frees) and 4-level page tables.
 * The kernel half is PML4[511] only: 0xffffffff80000000 + pa for pa < 1 GiB (2 MiB pages). */
#include "kernel.h"

extern uint64_t boot_pml4[512];

static uint64_t next_free, free_end;

void mm_init(uint64_t free_start_pa, uint64_t free_end_pa)
{
    next_free = (free_start_pa + 4095) & ~4095ull;
    free_end = free_end_pa;
    boot_pml4[0] = 0; /* drop the identity map used while switching to long mode */
    write_cr3(read_cr3());
}

uint64_t frame_alloc(void)
{
    if (next_free + 4096 > free_end)
        panic("out of physical memory");
    uint64_t pa = next_free;
    next_free += 4096;
    memset(P2V(pa), 0, 4096);
    return pa;
}

uint64_t kernel_pml4_pa(void)
{
    return V2P(boot_pml4);
}

/* One freed top-level table, handed out again first (recycle=: a new process gets the root of
 * one that was retired). The lower tables it pointed to are not freed: memory is never reused
 * otherwise. */
static uint64_t freed_pml4;

void pml4_free(uint64_t pa)
{
    freed_pml4 = pa;
}

uint64_t pml4_new(void)
{
    uint64_t pa = freed_pml4 ? freed_pml4 : frame_alloc();
    freed_pml4 = 0;
    uint64_t *pml4 = P2V(pa);
    for (int i = 0; i < 256; i++)
        pml4[i] = 0;
    for (int i = 256; i < 512; i++)
        pml4[i] = boot_pml4[i];
    return pa;
}

static uint64_t *next_level(uint64_t *table, int index, uint64_t flags)
{
    if (!(table[index] & PTE_P))
        table[index] = frame_alloc() | PTE_P | PTE_W | (flags & PTE_U);
    return P2V(table[index] & 0x000ffffffffff000ull);
}

void map_page(uint64_t pml4_pa, uint64_t va, uint64_t pa, uint64_t flags)
{
    uint64_t *t = P2V(pml4_pa);
    t = next_level(t, (va >> 39) & 511, flags);
    t = next_level(t, (va >> 30) & 511, flags);
    t = next_level(t, (va >> 21) & 511, flags);
    t[(va >> 12) & 511] = pa | flags | PTE_P;
}
