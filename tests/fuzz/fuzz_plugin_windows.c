/* Fuzz target: the chained windows qprof-plugin.so captures for an OS adapter
 * (qpr_capture_windows, qpr_window_base, plugin/qprof_ring.h) and the user stack pointer it then
 * finds in them (qpr_window_usp): each window's address comes from the GS bases or from a
 * pointer in an earlier window, whose bytes the guest controls. The configuration names the two
 * x86_64 registers that may hold the kernel's per-CPU base, as qprof's does.
 *
 * Input: the GS bases' valid bits (1 byte: bit 0 gs_base, bit 1 k_gs_base), gs_base and
 * k_gs_base (8 bytes each), the guest memory image's address and the stack window's (8 bytes
 * each), QPR_WINDOWS window specs of 10 bytes (base, from: 1 byte each; from_off, len: 2 bytes;
 * add: 4 bytes, signed), ustack_win (1 byte) and ustack_win_off (2 bytes), then the guest
 * memory image. The stack window is the image's bytes from the stack address on. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "qprof_ring.h"

#define SPEC   10
#define HEADER (1 + 8 * 4 + QPR_WINDOWS * SPEC + 3)

struct image {
    uint64_t addr;
    const uint8_t *bytes;
    size_t len;
};

/* The image's bytes at addr, up to its end (past it: unmapped). */
static uint32_t read_image(void *ctx, uint64_t addr, uint32_t len, uint8_t *out)
{
    const struct image *m = ctx;
    if (addr < m->addr || addr - m->addr >= m->len)
        return 0;
    size_t avail = m->len - (addr - m->addr);
    uint32_t n = avail < len ? (uint32_t)avail : len;
    memcpy(out, m->bytes + (addr - m->addr), n);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    struct qpr_sample *s = calloc(1, sizeof *s);
    struct qpr_config c = {.n_regs = 2,
                           .percpu_reg = {0, 1},
                           .kernel_start = UINT64_C(0xffff800000000000),
                           .reg_names = {"gs_base", "k_gs_base"}};
    s->regs_valid = ((data[0] & 1) ? 1u : 0) | ((data[0] & 2) ? 2u : 0);
    s->regs[0] = fuzz_le(data, size, 1, 8);
    s->regs[1] = fuzz_le(data, size, 9, 8);
    struct image m = {
        .addr = fuzz_le(data, size, 17, 8), .bytes = data + HEADER, .len = size - HEADER};
    s->stack_addr = fuzz_le(data, size, 25, 8);
    s->stack_len = read_image(&m, s->stack_addr, QPR_STACK_MAX, s->stack);
    for (int i = 0; i < QPR_WINDOWS; i++) {
        size_t at = 33 + (size_t)i * SPEC;
        c.win[i] = (struct qpr_window){.base = data[at],
                                       .from = data[at + 1],
                                       .from_off = (uint32_t)fuzz_le(data, size, at + 2, 2),
                                       .len = (uint32_t)fuzz_le(data, size, at + 4, 2),
                                       .add = (int32_t)(uint32_t)fuzz_le(data, size, at + 6, 4)};
    }
    c.ustack_win = data[HEADER - 3];
    c.ustack_win_off = (uint32_t)fuzz_le(data, size, HEADER - 2, 2);

    qpr_capture_windows(s, &c, read_image, &m);
    uint32_t total = 0;
    for (int i = 0; i < QPR_WINDOWS; i++) {
        FUZZ_ASSERT(s->win_len[i] <= c.win[i].len);
        FUZZ_ASSERT(s->win_off[i] <= QPR_WIN_BYTES &&
                    s->win_len[i] <= QPR_WIN_BYTES - s->win_off[i]);
        total += s->win_len[i];
    }
    FUZZ_ASSERT(total <= QPR_WIN_BYTES);
    FUZZ_ASSERT(s->win_asked <= QPR_WINDOWS);

    uint64_t usp = 0;
    if (qpr_window_usp(s, &c, &usp) != QPR_USP_NONE) {
        FUZZ_ASSERT(usp && usp < (UINT64_C(1) << 47));
        int found = 0; /* one of the captured windows' words */
        for (uint32_t off = 0; off + 8 <= total && !found; off++)
            found = memcmp(s->win_bytes + off, &usp, 8) == 0;
        FUZZ_ASSERT(found);
    }
    free(s);
    return 0;
}
