/* Processes, the round-robin scheduler shared by all CPUs, and the qprof ABI header and boot
 * slot (the ELF loader is exec.c, the slots' publishing abi.c, both shared with riscv64). */
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

/* ---- processes ---- */
/* One run queue for all CPUs: procs[] under sched_lock. A process is RUNNING on at most one
 * CPU; the lock is held across swtch and released by the context switched to (xv6's rule), so
 * no other CPU can pick a process whose registers are still being saved. */
static struct proc procs[MAX_PROCS];
static struct spinlock sched_lock;
struct cpu cpus[MAX_CPUS];
static int next_pid = 1;

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

void proc_map_segment_page(struct proc *p, uint64_t va, uint64_t pa, uint32_t elf_flags)
{
    map_page(p->cr3, va, pa, PTE_U | (elf_flags & 2 ? PTE_W : 0));
}

int proc_spawn(const char *name, const uint8_t *elf, size_t elf_size, int pin)
{
    struct proc *p = 0;
    for (int i = 0; i < MAX_PROCS && !p; i++)
        if (procs[i].state == P_FREE)
            p = &procs[i];
    if (!p)
        return -1;
    memset(p, 0, sizeof *p);
    size_t n = strlen(name);
    memcpy(p->name, name, n < QPROF_ABI_NAME_LEN - 1 ? n : QPROF_ABI_NAME_LEN - 1);
    p->cr3 = pml4_new();
    uint64_t entry = elf_load(p, elf, elf_size);
    if (!entry)
        return -1;
    for (uint64_t va = USER_STACK_TOP - USER_STACK_SIZE; va < USER_STACK_TOP; va += 4096)
        map_page(p->cr3, va, frame_alloc(), PTE_U | PTE_W);
    map_page(p->cr3, USER_CLOCK_VA, V2P(&clock_page), PTE_U);

    /* Kernel stack: 4 contiguous frames (the bump allocator hands them out in order). */
    uint64_t kpa = frame_alloc();
    for (int i = 1; i < KSTACK_SIZE / 4096; i++)
        frame_alloc();
    p->kstack_lo = (uint64_t)P2V(kpa);
    p->kstack_hi = p->kstack_lo + KSTACK_SIZE;

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
    p->pid = next_pid++;
    p->pin = pin;
    spin_lock(&sched_lock); /* an idle AP may pick it up at once */
    p->state = P_RUNNABLE;
    spin_unlock(&sched_lock);
    return p->pid;
}

/* Round robin: the next runnable process after this CPU's current that may run here (not
 * pinned elsewhere), or the CPU's idle context. */
static struct proc *pick_next(struct cpu *c)
{
    int start = c->proc == &c->idle ? MAX_PROCS - 1 : (int)(c->proc - procs);
    for (int k = 1; k <= MAX_PROCS; k++) {
        struct proc *p = &procs[(start + k) % MAX_PROCS];
        if (p->state == P_RUNNABLE && (p->pin < 0 || p->pin == c->id))
            return p;
    }
    return &c->idle;
}

/* sched_lock held. Everything per-CPU is done before swtch: when swtch returns, this context
 * may be running on another CPU. */
static NOINLINE void switch_to(struct cpu *c, struct proc *next)
{
    struct proc *prev = c->proc;
    if (next == prev)
        return;
    c->proc = next;
    tss_set_rsp0(next->kstack_hi);
    write_cr3(next->cr3);
    abi_publish(c->abi, next, next == &c->idle);
    swtch(&prev->ksp, next->ksp);
}

/* sched_lock held: gives up the CPU (current stays RUNNABLE unless it sleeps or died). */
static void sched_locked(void)
{
    struct cpu *c = this_cpu();
    struct proc *prev = c->proc;
    if (prev != &c->idle && prev->state == P_RUNNING)
        prev->state = P_RUNNABLE;
    struct proc *next = pick_next(c);
    if (next != &c->idle)
        next->state = P_RUNNING;
    switch_to(c, next);
}

void schedule(void)
{
    spin_lock(&sched_lock);
    sched_locked();
    spin_unlock(&sched_lock);
}

/* A new process's first code (proc_first_entry) releases the lock its first switch took. */
void sched_unlock(void);
void sched_unlock(void)
{
    spin_unlock(&sched_lock);
}

/* The boot CPU's PIT tick: the only place the global tick advances. */
void timer_tick(void)
{
    spin_lock(&sched_lock);
    clock_page.ticks++;
    for (int i = 0; i < MAX_PROCS; i++)
        if (procs[i].state == P_SLEEPING && procs[i].wake_tick <= clock_page.ticks)
            procs[i].state = P_RUNNABLE;
    uint64_t now = clock_page.ticks;
    spin_unlock(&sched_lock);
    recycle_tick(now);
    smp_tick_others();
    schedule();
}

const char *proc_retire_one(int *pid)
{
    struct proc *victim = 0;
    spin_lock(&sched_lock);
    for (int i = 0; i < MAX_PROCS && !victim; i++)
        if (procs[i].state == P_RUNNABLE || procs[i].state == P_SLEEPING)
            victim = &procs[i]; /* not current anywhere: its stack and tables are free */
    if (victim)
        victim->state = P_DEAD;
    spin_unlock(&sched_lock);
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

void proc_sleep_until(uint64_t tick)
{
    spin_lock(&sched_lock);
    if (tick > clock_page.ticks) {
        current->wake_tick = tick;
        current->state = P_SLEEPING;
        sched_locked();
    }
    spin_unlock(&sched_lock);
}

void proc_exit(int code)
{
    kprintf("exit pid=%d name=%s code=%d\n", current->pid, current->name, code);
    spin_lock(&sched_lock);
    current->state = P_DEAD;
    sched_locked();
    panic("dead process scheduled");
}

/* A CPU's boot context becomes its idle loop: halt until an interrupt makes something runnable
 * (the tick handler switches away from here). The caller has published the idle slot. */
void idle_loop(void)
{
    for (;;) {
        __asm__ volatile("cli");
        schedule();
        __asm__ volatile("sti; hlt; cli" ::: "memory");
    }
}
