/* Reading the guest's struct qprof_abi: the header checks and the per-vCPU slots, from the bytes
 * copied out of guest memory. Nothing here trusts the guest: sizes, counts and the slot stride
 * it declares are checked against what was copied before anything is indexed. */
#include "arch.h"
#include "os.h"

#include <elf.h>
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
    /* The first revision's slots (no regs_arch) are still read: as x86_64's. */
    if (hdr->cpu_slot_size < QPROF_ABI_CPU_V1_SIZE || hdr->cpu_slot_size % 8 ||
        hdr->cpu_slot_size > PROF_ABI_MAX_SLOT)
        return qp_error_set(err, -EPROTO, "cpu_slot_size %u is not a multiple of 8 from %u to %u",
                            hdr->cpu_slot_size, QPROF_ABI_CPU_V1_SIZE, PROF_ABI_MAX_SLOT);
    size_t layout = HEADER_SIZE + (size_t)hdr->cpu_count * hdr->cpu_slot_size;
    if (hdr->size < QPROF_ABI_V1_SIZE || hdr->size < layout)
        return qp_error_set(err, -EPROTO,
                            "size %u is smaller than the struct (%u) or its %u slots of %u bytes",
                            hdr->size, QPROF_ABI_V1_SIZE, hdr->cpu_count, hdr->cpu_slot_size);
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
    /* A slot of an older revision is shorter: the fields it lacks read as 0. */
    size_t have = hdr->cpu_slot_size < sizeof *out ? hdr->cpu_slot_size : sizeof *out;
    if (at > len || len - at < have)
        return -ENODATA;
    memset(out, 0, sizeof *out);
    memcpy(out, (const char *)bytes + at, have);
    out->name[QPROF_ABI_NAME_LEN - 1] = '\0';
    return 0;
}

size_t prof_abi_frame_size(uint32_t regs_arch, uint16_t elf_machine)
{
    const struct prof_arch *a = prof_arch_for_elf(elf_machine);
    if (!a || !a->abi_frame.to_regs)
        return 0;
    const struct prof_arch_abi_frame *f = &a->abi_frame;
    return regs_arch == f->regs_arch || (regs_arch == QPROF_ABI_ARCH_UNSET && f->unset_is_mine)
               ? f->size
               : 0;
}

int prof_abi_frame_regs(const void *frame, size_t len, uint32_t regs_arch, uint16_t elf_machine,
                        uint64_t user_end, struct unw_regs *u)
{
    size_t size = prof_abi_frame_size(regs_arch, elf_machine);
    if (size == 0 || len != size)
        return -EPROTO;
    memset(u, 0, sizeof *u);
    uint64_t pc = prof_arch_for_elf(elf_machine)->abi_frame.to_regs(frame, u);
    return pc < user_end ? 0 : -EFAULT;
}
