/* Fuzz target: the parsers of guest memory that tell a kernel's layouts apart by shape.
 *
 * Input: one byte of mode, then bytes taken as
 *   mode bit 0 clear: a kernel image searched for the 5.x kallsyms tables (lx__kallsyms_scan;
 *     mode bit 1: two-byte name lengths). A find must lie inside the image, in the order the
 *     kernel emits the tables;
 *   mode bit 0 set: an ORC entry table (6 bytes each) whose layout lx__orc_layout_of tells from
 *     its contents; every entry is then decoded in that layout (or any, when none fits) and the
 *     normalised entry must use only the register numbers and types the unwinder knows. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "lx_internal.h"

static void kallsyms(const uint8_t *img, size_t len, bool big)
{
    struct lx_kallsyms_at at;
    if (lx__kallsyms_scan(img, len, big, &at) != 0)
        return;
    FUZZ_ASSERT(at.token_index + 512 <= len);
    FUZZ_ASSERT(at.token_table < at.token_index);
    FUZZ_ASSERT(at.names < at.token_table && at.num_syms + 8 == at.names);
    FUZZ_ASSERT(at.relative_base + 8 == at.num_syms && at.offsets < at.relative_base);
}

static void orc(const uint8_t *raw, size_t len)
{
    size_t n = len / 6;
    enum lx_orc_layout l = lx__orc_layout_of(raw, n);
    FUZZ_ASSERT(l == LX_ORC_UNKNOWN || n > 0);
    for (size_t i = 0; i < n; i++) {
        for (int any = LX_ORC_UNKNOWN; any <= LX_ORC_SIGNAL_REGS; any++) {
            struct lx_orc o =
                lx__orc_decode(raw + 6 * i, l != LX_ORC_UNKNOWN ? l : (enum lx_orc_layout)any);
            FUZZ_ASSERT(o.sp_reg < 16 && o.bp_reg < 16 && o.type <= 2);
            FUZZ_ASSERT(!o.end || o.sp_reg == 0 || l == LX_ORC_END_BIT || any == LX_ORC_END_BIT);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    /* A copy of exactly the input's length, so that ASan sees any read past it. */
    uint8_t *copy = malloc(size - 1 ? size - 1 : 1);
    memcpy(copy, data + 1, size - 1);
    if (mode & 1)
        orc(copy, size - 1);
    else
        kallsyms(copy, size - 1, mode & 2);
    free(copy);
    return 0;
}
