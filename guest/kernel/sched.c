/* Processes and the round-robin scheduler shared by all CPUs (both kernels build this file).
 * What differs per architecture sits behind the hooks kcommon.h lists: a new address space,
 * mapping a user page, a new process's first register frame, the switch of kernel stack and
 * page tables, the wait for an interrupt, and what the global tick does besides waking. */
#if defined(GUEST_LOWHALF)
#include "riscv64-lowhalf/lowhalf.h"
#elif defined(__riscv)
#include "riscv64/rv.h"
#elif defined(__aarch64__)
#include "aarch64/a64.h"
#else
#include "kernel.h"
#endif

/* One run queue for all CPUs: procs[] under sched_lock. A process is RUNNING on at most one
 * CPU; the lock is held across swtch and released by the context switched to (xv6's rule), so
 * no other CPU can pick a process whose registers are still being saved. */
static struct proc procs[MAX_PROCS];
static struct spinlock sched_lock;
struct cpu cpus[MAX_CPUS];
static int next_pid = 1;

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
    memcpy(p->name, name, n < sizeof p->name - 1 ? n : sizeof p->name - 1);
    proc_space_new(p);
    uint64_t entry = elf_load(p, elf, elf_size);
    if (!entry)
        return -1;
    for (uint64_t va = USER_STACK_TOP - USER_STACK_SIZE; va < USER_STACK_TOP; va += 4096)
        proc_map_user_page(p, va, frame_alloc(), ELF_PF_R | ELF_PF_W);
    proc_map_user_page(p, USER_CLOCK_VA, V2P(&clock_page), ELF_PF_R);

    /* Kernel stack: 4 contiguous frames (the bump allocator hands them out in order). */
    uint64_t kpa = frame_alloc();
    for (int i = 1; i < KSTACK_SIZE / 4096; i++)
        frame_alloc();
    p->kstack_lo = (uint64_t)P2V(kpa);
    p->kstack_hi = p->kstack_lo + KSTACK_SIZE;
    proc_init_frames(p, entry);
    p->pid = next_pid++;
    p->pin = pin;
    spin_lock(&sched_lock); /* an idle CPU may pick it up at once */
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
    arch_switch_space(next);
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
void sched_unlock(void)
{
    spin_unlock(&sched_lock);
}

/* The boot CPU's tick: the only place the global tick advances. */
void timer_tick(void)
{
    spin_lock(&sched_lock);
    clock_page.ticks++;
    for (int i = 0; i < MAX_PROCS; i++)
        if (procs[i].state == P_SLEEPING && procs[i].wake_tick <= clock_page.ticks)
            procs[i].state = P_RUNNABLE;
    uint64_t now = clock_page.ticks;
    spin_unlock(&sched_lock);
    arch_after_tick(now);
}

struct proc *sched_take_waiting(void)
{
    struct proc *victim = 0;
    spin_lock(&sched_lock);
    for (int i = 0; i < MAX_PROCS && !victim; i++)
        if (procs[i].state == P_RUNNABLE || procs[i].state == P_SLEEPING)
            victim = &procs[i]; /* not current anywhere: its stack and tables are free */
    if (victim)
        victim->state = P_DEAD;
    spin_unlock(&sched_lock);
    return victim;
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

/* A CPU's boot context becomes its idle loop: wait until an interrupt makes something runnable
 * (the tick handler switches away from here). The caller has published the idle slot. */
void idle_loop(void)
{
    for (;;) {
        irq_off();
        schedule();
        arch_wait_for_interrupt();
    }
}
