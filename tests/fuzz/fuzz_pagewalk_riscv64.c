/* Fuzz target: prof_arch_riscv64.page_walk and cpu_state (arch/), the Sv39/Sv48/Sv57 walker
 * over page tables and a satp the guest controls.
 *
 * Input: satp (8 bytes LE), vaddr (8 bytes LE), then guest-physical memory from address 0.
 * fuzz_phys_read serves the input and fails outside it. A translation must keep vaddr's offset in
 * its page; the walk reads at most one entry per level of satp's mode (none for a mode it does
 * not know, which it refuses with -ENOTSUP); cpu_state refuses the same modes with a message. */
#include <errno.h>
#include <string.h>

#include "arch.h"
#include "fuzz.h"

static int get_reg(void *ctx, const char *name, uint64_t *val)
{
    *val = strcmp(name, "priv") == 0 ? 1 : *(const uint64_t *)ctx;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 16)
        return 0;
    uint64_t satp = fuzz_le(data, size, 0, 8), vaddr = fuzz_le(data, size, 8, 8);
    struct fuzz_phys ph = {.mem = data + 16, .len = size - 16};
    uint64_t paddr = 0, page_size = 0, mode = satp >> 60;
    int rc = prof_arch_riscv64.page_walk(satp, vaddr, fuzz_phys_read, &ph, &paddr, &page_size);
    unsigned levels = mode == 8 ? 3 : mode == 9 ? 4 : mode == 10 ? 5 : 0;
    bool known = mode == 0 || levels > 0;
    FUZZ_ASSERT(ph.reads <= levels);
    FUZZ_ASSERT(known ? rc == 0 || rc == -EFAULT : rc == -ENOTSUP);
    if (rc == 0) {
        FUZZ_ASSERT(page_size >= 4096 && (page_size & (page_size - 1)) == 0);
        FUZZ_ASSERT(page_size <= (levels ? 1ull << (12 + 9 * (levels - 1)) : 4096));
        FUZZ_ASSERT((paddr & (page_size - 1)) == (vaddr & (page_size - 1)));
        FUZZ_ASSERT(mode == 0 || paddr < 1ull << 56); /* a PPN is 44 bits */
    }
    struct prof_arch_cpu_state st;
    struct qp_error err = {0};
    int src = prof_arch_riscv64.cpu_state(get_reg, &satp, &st, &err);
    FUZZ_ASSERT(known ? src == 0 : src == -ENOTSUP && err.msg[0] && !strchr(err.msg, '\n'));
    return 0;
}
