/* Fuzz target lx_maple: lx_vma_find, lx_vma_for_each, lx_task_read and lx_current_task over a
 * fake kernel memory image, with the Debian 12 6.1 offsets.
 *
 * Input: 8 bytes little-endian lookup address, then the memory image, mapped at FAKE_BASE
 * (0xffff888000000000). The mm_struct, the task and the per-CPU base all sit at FAKE_BASE, so
 * the maple root is image bytes 8..15 (mm_mt 0, ma_root 8). Seeds: `test_lx_task seed DIR`
 * writes images of the trees the unit tests build.
 *
 * Invariants: no crash, no sanitizer report, every call returns (the walks are bounded); a VMA
 * found holds the address; the whole-tree walk gives VMAs in order without overlap; names and
 * comm are NUL-terminated. */
#include "fake_mem.h"
#include "fuzz.h"

static int check_order(void *ctx, const struct lx_vma *v)
{
    uint64_t *prev_end = ctx;
    FUZZ_ASSERT(v->start >= *prev_end);
    FUZZ_ASSERT(memchr(v->name, '\0', sizeof(v->name)) != NULL);
    *prev_end = v->end;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 16 || size > (1u << 20))
        return 0;
    struct lx_offsets o;
    lx_offsets_debian12_6_1(&o);
    struct fake_mem m = {.bytes = malloc(size - 8), .size = size - 8};
    if (!m.bytes)
        return 0;
    memcpy(m.bytes, data + 8, size - 8);
    struct lx_reader r = fake_reader(&m);
    uint64_t addr = fuzz_le(data, size, 0, 8);

    struct lx_vma v;
    if (lx_vma_find(&o, &r, FAKE_BASE, addr, &v, NULL) == 0) {
        FUZZ_ASSERT(v.start <= addr && addr < v.end);
        FUZZ_ASSERT(memchr(v.name, '\0', sizeof(v.name)) != NULL);
    }
    uint64_t prev_end = 0;
    m.reads = 0;
    lx_vma_for_each(&o, &r, FAKE_BASE, check_order, &prev_end, NULL);
    FUZZ_ASSERT(m.reads <= 1 + LX_MT_MAX_NODES + 5 * LX_VMA_MAX);

    struct lx_task_info t;
    if (lx_task_read(&o, &r, FAKE_BASE, &t, NULL) == 0)
        FUZZ_ASSERT(t.comm[15] == '\0' && t.pid >= 0);
    uint64_t task;
    if (lx_current_task(&o, &r, FAKE_BASE, &task, NULL) == 0)
        FUZZ_ASSERT(lx_is_kernel_addr(task));
    free(m.bytes);
    return 0;
}
