/* Fuzz target: unw_unwind over arbitrary registers and stack bytes, in a space loaded once from
 * the unwinding fixture (FUZZ_FIXTURE, built by tests/unwind), the way the profiler keeps one
 * long-lived space and walks it every sample.
 *
 * Input (little-endian):
 *   0    u8   flags: 1 rip taken raw (else text start + rip offset % text size),
 *                    2 stack bounds known, 4 snapshot holds only half the stack (the rest is
 *                    fetched), 8 no read function, 16 also dump the CFI at rip;
 *                    bits 5..7: the depth limit is 128 >> their value
 *   2    u16  rsp: words above the stack start
 *   4    u32  rip offset into .text
 *   8    16 x u64 registers in DWARF order rax..r15 (rsp is replaced)
 *   136  u64  raw rip
 *   144  u64  stack start address
 *   152  ...  stack bytes
 * The walk must stay within what it may read and report frames inside the space. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "symbols.h"
#include "arch.h"
#include "unwind.h"

#define SPACE_LO   0x1000ull
#define SPACE_HI   0x800000000000ull
#define HEADER_LEN 152

struct stack_mem {
    uint64_t addr;
    const uint8_t *bytes;
    size_t len;
    uint64_t lo, hi; /* bounds promised to the unwinder, 0/0 for none */
    unsigned reads;
};

static int read_stack(void *ctx, uint64_t addr, void *buf, size_t len, size_t *got)
{
    struct stack_mem *m = ctx;
    m->reads++;
    if (m->lo || m->hi)
        FUZZ_ASSERT(addr >= m->lo && addr <= m->hi && len <= m->hi - addr);
    if (addr < m->addr || addr - m->addr >= m->len)
        return -EFAULT;
    size_t off = addr - m->addr;
    *got = m->len - off < len ? m->len - off : len;
    memcpy(buf, m->bytes + off, *got);
    return 0;
}

struct fixture {
    unw_space *space;
    uint64_t text, text_size;
    FILE *devnull;
};

static const struct fixture *fixture(void)
{
    static struct fixture fx;
    if (fx.space)
        return &fx;
    struct qp_error err = {0};
    sym_table *t = NULL;
    if (unw_space_new(prof_arch_x86_64.unwind, "user", SPACE_LO, SPACE_HI, &fx.space, &err) < 0 ||
        unw_space_add_elf(fx.space, FUZZ_FIXTURE, 0, &err) < 0 ||
        sym_table_open_elf(FUZZ_FIXTURE, &t, &err) < 0) {
        fprintf(stderr, "fuzz_unwind_stack: %s\n", err.msg);
        abort();
    }
    fx.text = sym_table_text_addr(t);
    fx.text_size = sym_table_text_size(t);
    sym_table_free(t);
    fx.devnull = fopen("/dev/null", "w");
    FUZZ_ASSERT(fx.text_size > 0 && fx.devnull != NULL);
    return &fx;
}

static void check_result(const struct unw_result *res, int max_depth, uint64_t rip,
                         const struct stack_mem *m)
{
    FUZZ_ASSERT(res->n_frames >= 0 && res->n_frames <= max_depth);
    FUZZ_ASSERT((unsigned)res->stop < UNW_STOP_COUNT);
    FUZZ_ASSERT(res->memory_fetches == m->reads);
    for (int i = 0; i < res->n_frames; i++) {
        const struct unw_frame *f = &res->frames[i];
        FUZZ_ASSERT(f->pc != 0 && f->pc >= SPACE_LO && f->pc < SPACE_HI);
        FUZZ_ASSERT(i > 0 || (f->pc == rip && f->activation && f->method == UNW_BY_REGS));
    }
    if (res->stop == UNW_STOP_LEFT_SPACE) {
        FUZZ_ASSERT(res->next_pc < SPACE_LO || res->next_pc >= SPACE_HI);
        FUZZ_ASSERT(res->next_regs_known & (1u << UNW_RIP));
        FUZZ_ASSERT(res->next_regs.r[UNW_RIP] == res->next_pc);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER_LEN)
        return 0;
    const struct fixture *fx = fixture();
    uint8_t flags = data[0];
    struct unw_regs regs;
    for (int i = 0; i < 16; i++)
        regs.r[i] = fuzz_le(data, size, 8 + 8 * (size_t)i, 8);
    regs.r[UNW_RIP] = flags & 1 ? fuzz_le(data, size, 136, 8)
                                : fx->text + fuzz_le(data, size, 4, 4) % fx->text_size;
    struct stack_mem m = {
        .addr = fuzz_le(data, size, 144, 8), .bytes = data + HEADER_LEN, .len = size - HEADER_LEN};
    regs.r[UNW_RSP] = m.addr + 8 * fuzz_le(data, size, 2, 2);
    if (flags & 2) {
        m.lo = m.addr;
        m.hi = m.addr + m.len < m.addr ? UINT64_MAX : m.addr + m.len;
    }
    struct unw_memory mem = {.read = flags & 8 ? NULL : read_stack,
                             .ctx = &m,
                             .snapshot_addr = m.addr,
                             .snapshot = m.bytes,
                             .snapshot_len = flags & 4 ? m.len / 2 : m.len,
                             .stack_lo = m.lo,
                             .stack_hi = m.hi};
    int max_depth = UNW_DEFAULT_MAX_DEPTH >> (flags >> 5); /* 128 .. 1 */
    struct unw_frame frames[UNW_DEFAULT_MAX_DEPTH];
    struct unw_result res = {.frames = frames};
    struct qp_error err = {0};
    FUZZ_ASSERT(unw_unwind(fx->space, &regs, &mem, max_depth, &res, &err) == 0);
    check_result(&res, max_depth, regs.r[UNW_RIP], &m);
    if (flags & 16)
        unw_dump_cfi(fx->space, regs.r[UNW_RIP], fx->devnull, NULL);
    return 0;
}
