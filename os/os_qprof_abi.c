/* The adapter for the demo guest: one struct qprof_abi (docs/guest-abi.md) at a kernel address,
 * read in one go per stop. prof_abi_check and prof_abi_slot (os_qprof_abi_check.c) parse it; this
 * file decides when a slot can be believed and reads the user register frame a slot points to. */
#include "os.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

struct os_abi {
    struct prof_os_config cfg;
    uint64_t boot_id;
    struct qprof_abi abi; /* the header; slots are read from bytes at the guest's stride */
    uint8_t *bytes;       /* PROF_ABI_MAX_BYTES */
    size_t len;
    bool have_abi; /* this stop's copy passed the checks */
    /* This copy was read after the sample's instant (a capturing target whose vCPU could not
     * read the kernel's page at the instant): only a user slot that names the address space the
     * vCPU was in is believed. */
    bool late;
};

static int abi_open(const struct prof_os_config *cfg, void **impl, struct qp_error *err)
{
    (void)err; /* nothing here can fail */
    struct os_abi *a = g_new0(struct os_abi, 1);
    a->cfg = *cfg;
    a->bytes = g_malloc0(PROF_ABI_MAX_BYTES);
    *impl = a;
    return 0;
}

static void abi_free(void *impl)
{
    struct os_abi *a = impl;
    if (!a)
        return;
    g_free(a->bytes);
    g_free(a);
}

static void reject(struct prof_os_refresh *out, const struct qp_error *why)
{
    out->rejected = true;
    g_strlcpy(out->reject_reason, why->msg, sizeof out->reject_reason);
}

/* The table as the sample's instant had it; for a vCPU in user mode whose capture could not read
 * it (the plugin reads with the vCPU's own privilege, and riscv64's user mode cannot read a
 * kernel page), a later copy, which slot_for believes only where it names the address space
 * the sample was in. */
static int read_table(struct os_abi *a, const struct prof_vcpu *cpu, const struct prof_os_mem *mem,
                      size_t len, size_t *got)
{
    a->late = false;
    if (mem->read(mem->ctx, cpu, a->cfg.abi_addr, a->bytes, len, got) == 0)
        return 0;
    if (!mem->captured || !cpu->user || !cpu->as_root || !mem->read_unchanging)
        return -EFAULT;
    a->late = true;
    return mem->read_unchanging(mem->ctx, cpu, a->cfg.abi_addr, a->bytes, len, got);
}

static bool read_abi(struct os_abi *a, const struct prof_vcpu *cpu, const struct prof_os_mem *mem,
                     struct prof_os_refresh *out)
{
    size_t got = 0, need = 0;
    struct qp_error why = {0};
    if (!a->cfg.abi_addr || read_table(a, cpu, mem, sizeof(struct qprof_abi), &got) != 0)
        return false;
    int rc = prof_abi_check(a->bytes, got, &a->abi, &need, &why);
    if (rc == -ENODATA && need <= PROF_ABI_MAX_BYTES && got == sizeof(struct qprof_abi)) {
        /* a guest whose slots are larger than ours: copy the layout it declares */
        read_table(a, cpu, mem, need, &got);
        rc = prof_abi_check(a->bytes, got, &a->abi, &need, &why);
    }
    if (rc == -EPROTO || rc == -ENODATA)
        reject(out, &why);
    if (rc)
        return false;
    a->len = got;
    out->kernel_text_addr = a->abi.kernel_text_addr;
    if (a->abi.boot_id != a->boot_id) {
        /* The guest rebooted: pids and generations start over. The first boot seen is none. */
        out->reset = a->boot_id != 0;
        a->boot_id = a->abi.boot_id;
    }
    return true;
}

/* The ABI lives in kernel memory, which any vCPU in 64-bit mode maps; the first one serves. */
static void abi_refresh(void *impl, const struct prof_vcpu *cpus, int n_cpus,
                        const struct prof_os_mem *mem, struct prof_os_refresh *out)
{
    struct os_abi *a = impl;
    a->have_abi = false;
    for (int i = 0; i < n_cpus && !a->have_abi; i++)
        if (cpus[i].paging64)
            a->have_abi = read_abi(a, &cpus[i], mem, out);
    out->published = a->have_abi;
}

/* A slot is usable when the kernel was not halfway through rewriting it, and, for a process,
 * when it describes the address space the vCPU is in: a context switch loads CR3 and republishes
 * the slot a few instructions apart, and a sample between the two would otherwise read one
 * process's stack through another's page tables. */
static bool slot_for(const struct os_abi *a, const struct prof_vcpu *cpu,
                     struct qprof_abi_cpu *slot)
{
    /* The guest indexes its slots by APIC ID, its own name for the CPU; a vCPU past the slots
     * the guest keeps has none (prof_abi_slot refuses it) and is sampled without a process. */
    unsigned id = prof_vcpu_guest_id(cpu);
    if (!a->have_abi || prof_abi_slot(a->bytes, a->len, &a->abi, id, slot) != 0)
        return false;
    if (slot->seq & 1)
        return false;
    /* a later copy: good for a process only, and only the one whose address space this is */
    if (a->late &&
        (slot->state != QPROF_CPU_USER || !slot->cr3 || !cpu->as_root ||
         (slot->cr3 & a->cfg.arch->as_root_mask) != (cpu->as_root & a->cfg.arch->as_root_mask)))
        return false;
    /* A transport that gives no root (QMP on aarch64: as_root 0) leaves the stack bounds below
     * to catch a switch. */
    if (slot->state == QPROF_CPU_USER && slot->cr3 && cpu->as_root &&
        (slot->cr3 & a->cfg.arch->as_root_mask) != (cpu->as_root & a->cfg.arch->as_root_mask))
        return false;
    /* The same in kernel mode for the stack: a switch publishes the next process (and loads its
     * CR3) before it moves to that process's kernel stack, and a sample between the two has
     * the previous process's kernel stack under the next one's slot, whose saved user frame
     * and name are not this stack's. An sp in the user half is no kernel stack at all: a trap
     * from user mode before its entry swapped stacks (riscv64's trap_entry starts on the user's
     * sp), which is this slot's process, every register still its own. */
    bool on_kernel_half = cpu->sp >= a->cfg.arch->split.user_end;
    if (slot->state == QPROF_CPU_USER && !cpu->user && slot->kstack_hi && on_kernel_half &&
        (cpu->sp < slot->kstack_lo || cpu->sp >= slot->kstack_hi))
        return false;
    return true;
}

static enum prof_task_state task_state(uint32_t state)
{
    switch (state) {
    case QPROF_CPU_OFFLINE:
        return PROF_TASK_OFFLINE;
    case QPROF_CPU_IDLE:
        return PROF_TASK_IDLE;
    case QPROF_CPU_KERNEL:
        return PROF_TASK_KERNEL;
    case QPROF_CPU_USER:
        return PROF_TASK_USER;
    default:
        return PROF_TASK_UNKNOWN;
    }
}

static void abi_task(void *impl, const struct prof_vcpu *cpu, int i, struct prof_task *out)
{
    (void)i;
    struct qprof_abi_cpu slot;
    if (!slot_for(impl, cpu, &slot))
        return;
    out->known = true;
    out->state = task_state(slot.state);
    out->kstack_lo = slot.kstack_lo;
    out->kstack_hi = slot.kstack_hi;
    if (out->state != PROF_TASK_USER)
        return;
    out->pid = slot.pid;
    g_strlcpy(out->comm, slot.name, sizeof out->comm);
    out->has_image = true;
    out->image = (struct prof_image_id){.text_addr = slot.text_addr,
                                        .text_size = slot.text_size,
                                        .eh_frame_addr = slot.eh_frame_addr,
                                        .eh_frame_size = slot.eh_frame_size,
                                        .load_base = slot.load_base,
                                        .generation = slot.generation};
    out->user_regs_at = slot.user_regs;
    out->user_regs_arch = slot.regs_arch;
}

/* The stack from sp up to the top of the context's kernel stack when the slot's bounds hold sp
 * and fit; the guest's numbers are not trusted further than that. */
static size_t abi_kernel_stack_len(void *impl, const struct prof_vcpu *cpu,
                                   const struct prof_task *t, size_t max)
{
    (void)impl;
    uint64_t sp = cpu->sp;
    if (t->known && t->kstack_hi > sp && t->kstack_lo <= sp && t->kstack_hi - sp <= max)
        return t->kstack_hi - sp;
    return max;
}

/* The frame's shape comes from the slot (regs_arch, checked against the guest's architecture
 * in abi_task), its size from ours. */
static int abi_user_regs(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                         const struct prof_os_mem *mem, struct unw_regs *u)
{
    const struct os_abi *a = impl;
    uint8_t frame[PROF_ABI_MAX_FRAME];
    size_t got = 0, size = prof_abi_frame_size(t->user_regs_arch, a->cfg.arch->elf_machine);
    if (size == 0)
        return -EPROTO;
    if (mem->read(mem->ctx, cpu, t->user_regs_at, frame, size, &got) != 0 || got != size)
        return -EFAULT;
    int rc = prof_abi_frame_regs(frame, size, t->user_regs_arch, a->cfg.arch->elf_machine,
                                 a->cfg.split.user_end, u);
    return rc == -EFAULT ? -EPROTO : rc; /* not a frame saved on entry from user mode */
}

const struct prof_os_ops prof_os_qprof_abi_ops = {
    .name = "qprof-abi",
    .open = abi_open,
    .free = abi_free,
    .refresh = abi_refresh,
    .task = abi_task,
    .kernel_stack_len = abi_kernel_stack_len,
    .user_regs = abi_user_regs,
};
