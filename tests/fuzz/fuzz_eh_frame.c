/* Fuzz target: .eh_frame bytes as the profiler reads them out of guest memory
 * (unw_space_add_eh_frame, which checks them first), then a walk over a small synthetic stack
 * and a CFI dump at the starting pc.
 *
 * Input (little-endian):
 *   0   u64  text address
 *   8   u32  text size
 *   12  u32  pc offset into the text
 *   16  u64  address of the .eh_frame bytes in the guest
 *   24  ...  the .eh_frame bytes
 * A table the check accepts must walk quickly and without leaks (libFuzzer's -timeout,
 * -rss_limit_mb and leak detection catch what slips through). */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "arch.h"
#include "unwind.h"

#define HEADER_LEN  24
#define STACK_ADDR  0x7ffffff00000ull
#define STACK_WORDS 64

static FILE *devnull(void)
{
    static FILE *fp;
    if (fp == NULL)
        fp = fopen("/dev/null", "w");
    FUZZ_ASSERT(fp != NULL);
    return fp;
}

/* A frame pointer chain whose return addresses fall in the text. */
static void fill_stack(uint64_t *stack, uint64_t text, uint64_t text_size)
{
    for (unsigned i = 0; i < STACK_WORDS; i++)
        stack[i] = i % 2 == 0 ? STACK_ADDR + 8 * (i + 2) : text + (i * 0x35) % text_size;
}

static void walk(unw_space *s, uint64_t pc, uint64_t text, uint64_t text_size)
{
    uint64_t stack[STACK_WORDS];
    fill_stack(stack, text, text_size);
    struct unw_regs regs = {0};
    regs.r[UNW_RIP] = pc;
    regs.r[UNW_RSP] = STACK_ADDR;
    regs.r[UNW_RBP] = STACK_ADDR;
    struct unw_memory mem = {.snapshot_addr = STACK_ADDR,
                             .snapshot = stack,
                             .snapshot_len = sizeof stack,
                             .stack_lo = STACK_ADDR,
                             .stack_hi = STACK_ADDR + sizeof stack};
    struct unw_frame frames[32];
    struct unw_result res = {.frames = frames};
    FUZZ_ASSERT(unw_unwind(s, &regs, &mem, 32, &res, NULL) == 0);
    FUZZ_ASSERT(res.n_frames >= 0 && res.n_frames <= 32);
    unw_dump_cfi(s, pc, devnull(), NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER_LEN)
        return 0;
    uint64_t text = fuzz_le(data, size, 0, 8), text_size = fuzz_le(data, size, 8, 4);
    uint64_t pc = text + (text_size ? fuzz_le(data, size, 12, 4) % text_size : 0);
    uint64_t eh_frame_addr = fuzz_le(data, size, 16, 8);
    const uint8_t *eh_frame = data + HEADER_LEN;
    size_t len = size - HEADER_LEN;

    unw_space *s = NULL;
    FUZZ_ASSERT(
        unw_space_new(prof_arch_x86_64.unwind, "user", 0x1000, 0x800000000000ull, &s, NULL) == 0);
    struct qp_error err = {0};
    int checked = unw_cfi_check_eh_frame(eh_frame, len, NULL);
    int rc = unw_space_add_eh_frame(s, "fuzz", text, text_size, eh_frame_addr, eh_frame, len, &err);
    FUZZ_ASSERT(rc == 0 || err.msg[0] != '\0');
    FUZZ_ASSERT(checked == 0 || rc < 0);
    if (text_size > 0)
        walk(s, pc, text, text_size);
    unw_space_free(s);
    return 0;
}
