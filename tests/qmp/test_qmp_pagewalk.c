/* The direct backend's page-table walker on a synthetic in-memory page table. */
#include "arch.h"
#include "harness.h"
#include "qmp.h"
#include "qmp_internal.h"

#define RAM_SIZE (64u << 20)
#define P        0x1ull
#define RW       0x2ull
#define US       0x4ull
#define PS       0x80ull
#define NX       (1ull << 63)

static uint8_t *ram;

static int read_phys(void *ctx, uint64_t paddr, uint64_t *val)
{
    if (paddr + 8 > RAM_SIZE)
        return -EFAULT;
    memcpy(val, ram + paddr, 8);
    return 0;
}

static void set(uint64_t table, unsigned index, uint64_t entry)
{
    memcpy(ram + table + index * 8, &entry, 8);
}

static unsigned idx(uint64_t va, int shift)
{
    return (va >> shift) & 511;
}

static int walk(uint64_t cr3, uint64_t va, uint64_t *pa, uint64_t *size)
{
    return prof_arch_x86_64.page_walk(cr3, va, read_phys, NULL, pa, size);
}

/* info mtree ranges from QEMU are checked, and a range ending at 2^64 - 1 (QEMU prints
 * "0000000000000000-ffffffffffffffff" for some regions) is served without its length wrapping
 * to 0: the read loop made no progress, forever. */
static void test_direct_ranges(void)
{
    static uint8_t file[64 << 10];
    for (size_t i = 0; i < sizeof file; i++)
        file[i] = (uint8_t)i;
    struct qmp_direct d = {.map = file, .map_len = sizeof file};
    qmp__parse_mtree(&d,
                     "FlatView #0\n AS \"memory\", root: system\n"
                     "  0000000000000000-ffffffffffffffff (prio 0, ram): ram @0000000000000000\n"
                     "  0000000000002000-0000000000001000 (prio 0, ram): ram @0000000000000000\n"
                     "  0000000000003000-0000000000003fff (prio 0, ram): ram @ffffffffffffff00\n",
                     "ram");
    CHECK_INT(d.n_ranges, 1);        /* the reversed and the wrapping-offset ranges are refused */
    struct qmp_regs real_mode = {0}; /* paging off: virtual = physical */
    uint8_t buf[32];
    struct qmp_mem_req r = {.vaddr = 0, .len = sizeof buf, .buf = buf};
    qmp__direct_read(&d, &real_mode, &r);
    CHECK_INT(r.rc, 0);
    CHECK_U64(r.got, sizeof buf);
    CHECK_INT(buf[0], 0x00);
    CHECK_INT(buf[31], 0x1f);
    /* past the file's end: nothing, and no loop */
    r = (struct qmp_mem_req){.vaddr = sizeof file - 8, .len = sizeof buf, .buf = buf};
    qmp__direct_read(&d, &real_mode, &r);
    CHECK_U64(r.got, 8);
}

int main(void)
{
    test_direct_ranges();
    ram = calloc(1, RAM_SIZE);
    REQUIRE(ram);
    const uint64_t pml4 = 0x1000, pdpt = 0x2000, pd = 0x3000, pt = 0x4000, pdpt_hi = 0x5000;
    const uint64_t cr3 = pml4 | 0x18; /* PWT/PCD bits in CR3 are not part of the address */

    /* user 0x401000: a 4 KiB page between an empty entry and a not-present one */
    const uint64_t user = 0x400000;
    set(pml4, idx(user, 39), pdpt | P | RW | US);
    set(pdpt, idx(user, 30), pd | P | RW | US);
    set(pd, idx(user, 21), pt | P | RW | US);
    set(pt, idx(user + 0x1000, 12), 0x123000 | P | US | NX | (1ull << 62) /* PKEY bits */);
    set(pt, idx(user + 0x2000, 12), 0x200000 | RW); /* not present */

    /* 2 MiB page at 0x40000000 -> 0x600000 */
    set(pdpt, idx(0x40000000, 30), 0x6000 | P);
    set(0x6000, 0, 0x600000 | P | PS | NX | 0x1000 /* PAT bit of a 2M entry */);

    /* kernel 0xffffffff80000000: 1 GiB page -> 0 */
    const uint64_t kern = 0xffffffff80000000ull;
    set(pml4, idx(kern, 39), pdpt_hi | P);
    set(pdpt_hi, idx(kern, 30), 0x0 | P | PS | NX);

    uint64_t pa = 0, size = 0;
    CHECK_INT(walk(cr3, user + 0x10c0, &pa, &size), 0);
    CHECK_U64(pa, 0x1230c0);
    CHECK_U64(size, 4096);
    CHECK_INT(walk(cr3, user + 0x2008, &pa, &size), -EFAULT);
    CHECK_INT(walk(cr3, user, &pa, &size), -EFAULT); /* zero entry */
    CHECK_INT(walk(cr3, 0x40123456, &pa, &size), 0);
    CHECK_U64(pa, 0x723456);
    CHECK_U64(size, 2u << 20);
    CHECK_INT(walk(cr3, kern + 0x1234567, &pa, &size), 0);
    CHECK_U64(pa, 0x1234567);
    CHECK_U64(size, 1u << 30);
    CHECK_INT(walk(cr3, 0x7fff00000000ull, &pa, &size), -EFAULT);     /* PML4 entry not present */
    CHECK_INT(walk(cr3, 0x0000800000000000ull, &pa, &size), -EFAULT); /* non-canonical */
    /* a table outside RAM ends the walk cleanly */
    set(pd, idx(0x600000, 21), 0x7ff0000000ull | P);
    CHECK_INT(walk(cr3, 0x600000, &pa, &size), -EFAULT);
    free(ram);
    return harness_result();
}
