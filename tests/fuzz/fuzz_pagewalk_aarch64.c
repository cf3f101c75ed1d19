/* Fuzz target: prof_arch_aarch64's page walk (prof_arch_page_walk) and cpu_state (arch/), the
 * VMSAv8-64 walker of both halves over page tables, TTBRs and a TCR_EL1 the guest controls.
 *
 * Input: TTBR0_EL1, TTBR1_EL1, TCR_EL1, vaddr (8 bytes LE each), then guest-physical memory from
 * address 0. fuzz_phys_read serves the input and fails outside it. A translation must keep
 * vaddr's offset in its page, a page or block size the granule allows; the walk reads at most
 * four entries, none when the half's granule is reserved or its TnSZ outside 16..39 (then
 * -ENOTSUP); cpu_state refuses the same TCRs, for a half that walks, with a one-line message. */
#include <errno.h>
#include <string.h>

#include "arch.h"
#include "fuzz.h"

struct regs {
    uint64_t ttbr0, ttbr1, tcr;
};

static int get_reg(void *ctx, const char *name, uint64_t *val)
{
    const struct regs *r = ctx;
    if (strcmp(name, "cpsr") == 0)
        *val = 0x3c5; /* EL1h */
    else if (strcmp(name, "SCTLR") == 0)
        *val = 1; /* M: translation on */
    else if (strcmp(name, "TTBR0_EL1") == 0)
        *val = r->ttbr0;
    else if (strcmp(name, "TTBR1_EL1") == 0)
        *val = r->ttbr1;
    else if (strcmp(name, "TCR_EL1") == 0)
        *val = r->tcr;
    else
        return -ENOENT;
    return 0;
}

/* The half's page shift (12, 14, 16) when the walk knows its shape, else 0. */
static int known_shape(uint64_t tcr, int high)
{
    static const int tg0[4] = {12, 16, 14, 0}, tg1[4] = {0, 14, 12, 16};
    int g = high ? tg1[(tcr >> 30) & 3] : tg0[(tcr >> 14) & 3];
    int tnsz = (int)((high ? tcr >> 16 : tcr) & 0x3f);
    return tnsz >= 16 && tnsz <= 39 ? g : 0;
}

static bool size_allowed(uint64_t size, int g)
{
    switch (g) {
    case 12:
        return size == 1ull << 12 || size == 1ull << 21 || size == 1ull << 30;
    case 14:
        return size == 1ull << 14 || size == 1ull << 25;
    default:
        return size == 1ull << 16 || size == 1ull << 29;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 32)
        return 0;
    struct regs r = {fuzz_le(data, size, 0, 8), fuzz_le(data, size, 8, 8),
                     fuzz_le(data, size, 16, 8)};
    uint64_t vaddr = fuzz_le(data, size, 24, 8);
    struct fuzz_phys ph = {.mem = data + 32, .len = size - 32};
    struct prof_arch_mmu mmu = {.root_hi = r.ttbr1, .control = r.tcr};
    uint64_t paddr = 0, page_size = 0;
    int rc = prof_arch_page_walk(&prof_arch_aarch64, r.ttbr0, &mmu, vaddr, fuzz_phys_read, &ph,
                                 &paddr, &page_size);
    int high = (int)(vaddr >> 55) & 1, g = known_shape(r.tcr, high);
    FUZZ_ASSERT(ph.reads <= 4);
    FUZZ_ASSERT(g ? rc == 0 || rc == -EFAULT : rc == -ENOTSUP && ph.reads == 0);
    if (rc == 0) {
        FUZZ_ASSERT(size_allowed(page_size, g));
        FUZZ_ASSERT((paddr & (page_size - 1)) == (vaddr & (page_size - 1)));
        FUZZ_ASSERT(paddr < 1ull << 48);
    }
    /* Without TCR_EL1 no shape is known */
    FUZZ_ASSERT(prof_arch_aarch64.page_walk(r.ttbr0, vaddr, fuzz_phys_read, &ph, &paddr,
                                            &page_size) == -ENOTSUP);
    struct prof_arch_cpu_state st;
    struct qp_error err = {0};
    int src = prof_arch_aarch64.cpu_state(get_reg, &r, &st, &err);
    bool walkable = (known_shape(r.tcr, 0) || (r.tcr & 1ull << 7)) &&
                    (known_shape(r.tcr, 1) || (r.tcr & 1ull << 23));
    FUZZ_ASSERT(walkable ? src == 0 && st.paging && st.privilege == 2
                         : src == -ENOTSUP && err.msg[0] && !strchr(err.msg, '\n'));
    return 0;
}
