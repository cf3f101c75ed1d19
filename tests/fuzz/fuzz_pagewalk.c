/* Fuzz target: prof_arch_x86_64.page_walk (arch/), the x86_64 page-table walker of the direct
 * memory backend, over page tables the guest controls.
 *
 * Input: cr3 (8 bytes LE), vaddr (8 bytes LE), then guest-physical memory from address 0.
 * fuzz_phys_read serves the input and fails outside it. A translation must keep vaddr's offset in
 * its page, and the walk must read at most one entry per level. */
#include <errno.h>
#include <string.h>

#include "arch.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 16)
        return 0;
    uint64_t cr3 = fuzz_le(data, size, 0, 8), vaddr = fuzz_le(data, size, 8, 8);
    struct fuzz_phys ph = {.mem = data + 16, .len = size - 16};
    uint64_t paddr = 0, page_size = 0;
    int rc = prof_arch_x86_64.page_walk(cr3, vaddr, fuzz_phys_read, &ph, &paddr, &page_size);
    FUZZ_ASSERT(ph.reads <= 4);
    FUZZ_ASSERT(rc == 0 || rc == -EFAULT);
    if (rc == 0) {
        FUZZ_ASSERT(page_size == 1ull << 12 || page_size == 1ull << 21 || page_size == 1ull << 30);
        FUZZ_ASSERT((paddr & (page_size - 1)) == (vaddr & (page_size - 1)));
        FUZZ_ASSERT(paddr < 1ull << 52); /* MAXPHYADDR */
    }
    return 0;
}
