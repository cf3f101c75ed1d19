/* Fuzz target: where qprof-plugin.so finds a kernel-mode sample's user stack pointer
 * (qpr_user_sp, plugin/qprof_ring.h), over captured windows whose bytes the guest controls:
 * the kernel stack from sp and the ABI table, at guest-chosen addresses.
 *
 * Input: vCPU (1 byte), the configuration's chase_off, chase_stride, chase_add and
 * kstack_top_off (2 bytes each), the stack window's address and the extra window's (8 bytes
 * each), the stack window's length (2 bytes), then the stack window's bytes and the extra
 * window's. A pointer found is a user-half address, read from inside the stack window. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "qprof_ring.h"

#define HEADER 27

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    struct qpr_sample *s = calloc(1, sizeof *s);
    struct qpr_config c = {.chase_off = (uint32_t)fuzz_le(data, size, 1, 2),
                           .chase_stride = (uint32_t)fuzz_le(data, size, 3, 2),
                           .chase_add = (uint32_t)fuzz_le(data, size, 5, 2),
                           .kstack_top_off = (uint32_t)fuzz_le(data, size, 7, 2),
                           .ustack_bytes = QPR_STACK_MAX,
                           .ustack_reg = QPR_MAX_REGS,
                           .iret_frame = 1}; /* an x86_64 guest's, as qprof configures it */
    uint32_t vcpu = data[0];
    s->stack_addr = fuzz_le(data, size, 9, 8);
    s->extra_addr = fuzz_le(data, size, 17, 8);
    size_t stack_len = (size_t)fuzz_le(data, size, 25, 2), rest = size - HEADER;
    if (stack_len > rest)
        stack_len = rest;
    if (stack_len > QPR_STACK_MAX)
        stack_len = QPR_STACK_MAX;
    size_t extra_len = rest - stack_len < QPR_EXTRA_MAX ? rest - stack_len : QPR_EXTRA_MAX;
    memcpy(s->stack, data + HEADER, stack_len);
    memcpy(s->extra, data + HEADER + stack_len, extra_len);
    s->stack_len = (uint32_t)stack_len;
    s->extra_len = (uint32_t)extra_len;
    uint64_t usp = 0;
    enum qpr_usp_from from = qpr_user_sp(s, &c, vcpu, NULL, NULL, &usp);
    if (from != QPR_USP_NONE) {
        FUZZ_ASSERT(usp && usp < (UINT64_C(1) << 47));
        /* the value is one of the stack window's words */
        int found = 0;
        for (size_t off = 0; off + 8 <= stack_len && !found; off++)
            found = memcmp(s->stack + off, &usp, 8) == 0;
        FUZZ_ASSERT(found);
    }
    free(s);
    return 0;
}
