/* Reading the guest's struct qprof_abi: the header checks and the per-vCPU slots, from the bytes
 * copied out of guest memory. Nothing here trusts the guest: sizes, counts and the slot stride
 * it declares are checked against what was copied before anything is indexed. */
#include "os.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define HEADER_SIZE offsetof(struct qprof_abi, cpu)

int prof_abi_check(const void *bytes, size_t len, struct qprof_abi *hdr, size_t *need,
                   struct qp_error *err)
{
    if (len < HEADER_SIZE)
        return qp_error_set(err, -EPROTO, "only %zu bytes, the header alone is %zu", len,
                            (size_t)HEADER_SIZE);
    memset(hdr, 0, sizeof *hdr);
    memcpy(hdr, bytes, HEADER_SIZE);
    if (hdr->magic != QPROF_ABI_MAGIC)
        return qp_error_set(err, -EAGAIN, "no magic (not published yet)");
    if (hdr->version != QPROF_ABI_VERSION)
        return qp_error_set(err, -EPROTO, "version %u, this qprof reads version %u", hdr->version,
                            QPROF_ABI_VERSION);
    if (hdr->cpu_count == 0 || hdr->cpu_count > QPROF_ABI_MAX_CPUS)
        return qp_error_set(err, -EPROTO, "cpu_count %u is not 1..%u", hdr->cpu_count,
                            QPROF_ABI_MAX_CPUS);
    if (hdr->cpu_slot_size < sizeof(struct qprof_abi_cpu) || hdr->cpu_slot_size % 8 ||
        hdr->cpu_slot_size > PROF_ABI_MAX_SLOT)
        return qp_error_set(err, -EPROTO, "cpu_slot_size %u is not a multiple of 8 from %zu to %u",
                            hdr->cpu_slot_size, sizeof(struct qprof_abi_cpu), PROF_ABI_MAX_SLOT);
    size_t layout = HEADER_SIZE + (size_t)hdr->cpu_count * hdr->cpu_slot_size;
    if (hdr->size < sizeof(struct qprof_abi) || hdr->size < layout)
        return qp_error_set(
            err, -EPROTO, "size %u is smaller than the struct (%zu) or its %u slots of %u bytes",
            hdr->size, sizeof(struct qprof_abi), hdr->cpu_count, hdr->cpu_slot_size);
    *need = layout;
    if (len < layout)
        return qp_error_set(err, -ENODATA, "%zu bytes copied, the slots need %zu", len, layout);
    return 0;
}

int prof_abi_slot(const void *bytes, size_t len, const struct qprof_abi *hdr, unsigned cpu,
                  struct qprof_abi_cpu *out)
{
    if (cpu >= hdr->cpu_count)
        return -ENOENT;
    /* The declared stride, not ours: a newer guest appends fields to each slot. */
    size_t at = HEADER_SIZE + (size_t)cpu * hdr->cpu_slot_size;
    if (at > len || len - at < sizeof *out)
        return -ENODATA;
    memcpy(out, (const char *)bytes + at, sizeof *out);
    out->name[QPROF_ABI_NAME_LEN - 1] = '\0';
    return 0;
}
