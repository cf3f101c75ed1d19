/* Fuzz target: the guest ABI reader (prof_abi_check, prof_abi_slot) over the bytes of a struct
 * qprof_abi as copied out of guest memory, which the guest controls entirely, and the user
 * register frames a slot points to (prof_abi_frame_regs), x86_64's, riscv64's and aarch64's.
 *
 * Input: the copied bytes. Every slot the check admits is read; a read never leaves the copy,
 * and an accepted header's layout fits in what was copied. The same bytes, as a frame of each
 * shape a slot's regs_arch names, decode only when their size and architecture agree, and then
 * to a user pc. */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "os.h"

#define USER_END UINT64_C(0x0000800000000000)

static void check_frame(const uint8_t *data, size_t size, uint32_t regs_arch)
{
    static const uint16_t machines[] = {EM_X86_64, EM_RISCV, EM_AARCH64};
    for (size_t m = 0; m < sizeof machines / sizeof machines[0]; m++) {
        size_t want = prof_abi_frame_size(regs_arch, machines[m]);
        FUZZ_ASSERT(want <= PROF_ABI_MAX_FRAME);
        size_t len = size < PROF_ABI_MAX_FRAME ? size : PROF_ABI_MAX_FRAME;
        struct unw_regs u;
        int rc = prof_abi_frame_regs(data, len, regs_arch, machines[m], USER_END, &u);
        FUZZ_ASSERT(rc == 0 || rc == -EPROTO || rc == -EFAULT);
        if (rc == -EPROTO)
            FUZZ_ASSERT(want == 0 || len != want);
        if (rc == 0) {
            FUZZ_ASSERT(want == len);
            uint64_t pc = machines[m] == EM_X86_64 ? u.r[UNW_RIP] : u.r[32];
            FUZZ_ASSERT(pc < USER_END);
            if (machines[m] == EM_RISCV)
                FUZZ_ASSERT(u.r[0] == 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the input as a frame of every shape, before the header decides anything */
    static const uint32_t shapes[] = {QPROF_ABI_ARCH_UNSET, QPROF_ABI_ARCH_X86_64,
                                      QPROF_ABI_ARCH_RISCV64, QPROF_ABI_ARCH_AARCH64};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        check_frame(data, size, shapes[k]);
    struct qprof_abi hdr;
    size_t need = 0;
    struct qp_error err = {0};
    int rc = prof_abi_check(data, size, &hdr, &need, &err);
    FUZZ_ASSERT(rc == 0 || err.msg[0] != '\0');
    if (rc == -ENODATA)
        FUZZ_ASSERT(need > size && need <= PROF_ABI_MAX_BYTES);
    if (rc != 0)
        return 0;
    FUZZ_ASSERT(need <= size && hdr.cpu_count >= 1 && hdr.cpu_count <= QPROF_ABI_MAX_CPUS);
    for (unsigned cpu = 0; cpu <= QPROF_ABI_MAX_CPUS; cpu++) {
        struct qprof_abi_cpu slot;
        int s = prof_abi_slot(data, size, &hdr, cpu, &slot);
        FUZZ_ASSERT(s == 0 || cpu >= hdr.cpu_count);
        if (s == 0) {
            FUZZ_ASSERT(memchr(slot.name, '\0', sizeof slot.name) != NULL);
            /* a first-revision slot reads regs_arch as 0 */
            if (hdr.cpu_slot_size < sizeof slot)
                FUZZ_ASSERT(slot.regs_arch == 0 && slot.regs_size == 0);
            check_frame(data, size, slot.regs_arch);
        }
    }
    return 0;
}
