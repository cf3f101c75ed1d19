/* Each CPU's qprof ABI slot and the header's completion (both kernels build this file); what
 * differs per architecture is the register frame (trap_frame_t, ARCH_ELF_MACHINE) and the page
 * table root a slot names (proc_page_root), see kcommon.h. */
#if defined(__riscv)
#include "riscv64/rv.h"
#elif defined(__aarch64__)
#include "aarch64/a64.h"
#else
#include "kernel.h"
#endif

__attribute__((section(".qprof_abi"), aligned(4096), used)) struct qprof_abi qprof_abi;

static enum abi_fault abi_fault;

/* cpu_count = max CPU ID + 1 of the running CPUs; every started CPU has published its slot
 * before it reported online, so magic (last) makes a complete structure valid. */
void abi_publish_header(int cpu_count)
{
    qprof_abi.cpu_count = (uint32_t)cpu_count;
    abi_wmb();
    qprof_abi.magic = QPROF_ABI_MAGIC; /* last */
}

/* Spoils the per-slot fields that the chosen fault names; the slot must be open for writing. */
static void abi_fault_slot(struct qprof_abi_cpu *slot)
{
    if (abi_fault == ABI_FAULT_TEXT)
        slot->text_size = 0x7fffffffffffull;
    else if (abi_fault == ABI_FAULT_NAME)
        memcpy(slot->name, "evil;name\nqprof!", QPROF_ABI_NAME_LEN); /* 16 bytes, no NUL */
}

/* The header fields are spoiled once; the bytes of the slots stay where sizeof says, so with
 * the stride fault a reader that trusts the declared cpu_slot_size would read the wrong bytes
 * for every slot past the first. Every slot gets the per-slot fault, the unused ones too.
 * Called on the boot CPU before any process exists: the APs sit in their idle loops and do not
 * write their slots until they first switch to a process. */
void abi_set_fault(enum abi_fault fault)
{
    abi_fault = fault;
    if (fault == ABI_FAULT_SIZE)
        qprof_abi.size = 16;
    else if (fault == ABI_FAULT_STRIDE)
        qprof_abi.cpu_slot_size = sizeof(struct qprof_abi_cpu) + 64;
    else if (fault == ABI_FAULT_COUNT)
        qprof_abi.cpu_count = 0xffffffffu;
    for (int i = 0; i < QPROF_ABI_MAX_CPUS; i++) {
        struct qprof_abi_cpu *slot = &qprof_abi.cpu[i];
        abi_write_begin(slot);
        abi_fault_slot(slot);
        abi_write_end(slot);
    }
}

void abi_publish(struct qprof_abi_cpu *slot, struct proc *p, int idle)
{
    abi_write_begin(slot);
    slot->state = idle ? QPROF_CPU_IDLE : QPROF_CPU_USER;
    slot->pid = (uint32_t)p->pid;
    memcpy(slot->name, p->name, QPROF_ABI_NAME_LEN);
    slot->text_addr = p->text_addr;
    slot->text_size = p->text_size;
    slot->eh_frame_addr = p->eh_frame_addr;
    slot->eh_frame_size = p->eh_frame_size;
    slot->load_base = p->load_base;
    slot->generation = p->generation;
    slot->user_regs = p->user_regs;
    slot->cr3 = proc_page_root(p);
    slot->kstack_lo = p->kstack_lo;
    slot->kstack_hi = p->kstack_hi;
    slot->regs_arch = ARCH_ELF_MACHINE;
    slot->regs_size = sizeof(trap_frame_t);
    if (abi_fault != ABI_FAULT_NONE)
        abi_fault_slot(slot);
    abi_write_end(slot);
}

void abi_publish_idle(void)
{
    struct cpu *c = this_cpu();
    abi_publish(c->abi, &c->idle, 1);
}

void abi_enter_from_user(trap_frame_t *regs)
{
    struct cpu *c = this_cpu();
    c->proc->user_regs = (uint64_t)regs;
    abi_write_begin(c->abi);
    c->abi->user_regs = (uint64_t)regs;
    abi_write_end(c->abi);
}

void abi_return_to_user(void)
{
    struct cpu *c = this_cpu();
    c->proc->user_regs = 0;
    abi_write_begin(c->abi);
    c->abi->user_regs = 0;
    abi_write_end(c->abi);
}
