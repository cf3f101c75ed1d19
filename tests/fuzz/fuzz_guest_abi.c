/* Fuzz target: the guest ABI reader (prof_abi_check, prof_abi_slot) over the bytes of a struct
 * qprof_abi as copied out of guest memory, which the guest controls entirely.
 *
 * Input: the copied bytes. Every slot the check admits is read; a read never leaves the copy,
 * and an accepted header's layout fits in what was copied. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "os.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
        if (s == 0)
            FUZZ_ASSERT(memchr(slot.name, '\0', sizeof slot.name) != NULL);
    }
    return 0;
}
