/* x86_64: the qprof ABI header and boot slot, each CPU's idle context, and the hooks of the
 * shared scheduler (sched.c) and ELF loader (exec.c): address spaces, a new process's frames,
 * retiring a process (recycle=). The slots' publishing is abi.c. */
#include "kernel.h"

/* The header without magic, and the boot CPU's slot; abi_publish_header completes it once
 * every AP is up. */
void abi_init(int boot_cpu)
{
    qprof_abi.version = QPROF_ABI_VERSION;
    qprof_abi.size = sizeof(struct qprof_abi);
    qprof_abi.cpu_count = (uint32_t)boot_cpu + 1;
    qprof_abi.cpu_slot_size = sizeof(struct qprof_abi_cpu);
    qprof_abi.kernel_text_addr = (uint64_t)__text_start;
    qprof_abi.kernel_text_size = (uint64_t)(__text_end - __text_start);
    qprof_abi.boot_id = rdtsc() ^ 0x9e3779b97f4a7c15ull;
    struct qprof_abi_cpu *slot = &qprof_abi.cpu[boot_cpu];
    abi_write_begin(slot);
    slot->state = QPROF_CPU_KERNEL;
    slot->cr3 = read_cr3();
    slot->kstack_lo = (uint64_t)boot_stack_lo;
    slot->kstack_hi = (uint64_t)boot_stack_hi;
    slot->regs_arch = QPROF_ABI_ARCH_X86_64;
    slot->regs_size = sizeof(struct qprof_abi_regs);
    abi_write_end(slot);
}

/* ---- processes: the x86_64 hooks of sched.c and exec.c ---- */
/* cpu's idle context (pid 0) lives on the given boot/idle stack; it starts as current. */
void cpu_init_idle(int cpu, uint64_t stack_lo, uint64_t stack_hi)
{
    struct cpu *c = &cpus[cpu];
    c->id = cpu;
    c->abi = &qprof_abi.cpu[cpu];
    c->idle.pid = 0;
    c->idle.state = P_RUNNING;
    c->idle.pin = cpu;
    c->idle.kstack_lo = stack_lo;
    c->idle.kstack_hi = stack_hi;
    c->idle.cr3 = kernel_pml4_pa();
    c->proc = &c->idle;
}

void proc_space_new(struct proc *p)
{
    p->cr3 = pml4_new();
}

void proc_map_user_page(struct proc *p, uint64_t va, uint64_t pa, uint32_t elf_flags)
{
    map_page(p->cr3, va, pa, PTE_U | (elf_flags & ELF_PF_W ? PTE_W : 0));
}

/* The user frame the return from an interrupt starts p from (interrupts on), under the frame
 * swtch pops into proc_first_entry. */
void proc_init_frames(struct proc *p, uint64_t entry)
{
    struct qprof_abi_regs *r = (void *)(p->kstack_hi - sizeof *r);
    memset(r, 0, sizeof *r);
    r->rip = entry;
    r->cs = SEL_UCODE;
    r->rflags = 0x202;
    r->rsp = USER_STACK_TOP;
    r->ss = SEL_UDATA;
    r->vector = SYSCALL_VECTOR;
    p->user_regs = (uint64_t)r;
    uint64_t *sp = (uint64_t *)r;
    *--sp = (uint64_t)proc_first_entry; /* swtch's ret */
    for (int i = 0; i < 6; i++)
        *--sp = 0; /* rbp rbx r12-r15 */
    p->ksp = (uint64_t)sp;
}

const char *proc_retire_one(int *pid)
{
    struct proc *victim = sched_take_waiting();
    if (!victim)
        return 0;
    *pid = victim->pid;
    pml4_free(victim->cr3);
    victim->state = P_FREE; /* proc_spawn may take the slot */
    return victim->name;
}

/* An AP's tick (the IPI the boot CPU forwards): preemption only. */
void cpu_tick(void)
{
    schedule();
}
