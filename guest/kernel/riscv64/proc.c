/* riscv64: processes, the round-robin scheduler shared by all harts, page tables, and the
 * qprof ABI header and each hart's first slot contents (the ELF loader is ../exec.c, the slots'
 * publishing ../abi.c, both shared with x86_64). The same rules as the x86_64 kernel's proc.c
 * (one run queue under one lock held across swtch, a slot written only by its own hart); what
 * differs is the register frame, satp instead of CR3, and the Sv39 tables. */
#include "rv.h"

/* The tick counter alone in a page every process maps read-only at USER_CLOCK_VA. */
union clock_page clock_page __attribute__((aligned(4096)));

static uint64_t kernel_satp(void)
{
    return SATP_SV39 | (V2P(boot_root) >> 12);
}

void abi_init(void)
{
    qprof_abi.version = QPROF_ABI_VERSION;
    qprof_abi.size = sizeof(struct qprof_abi);
    qprof_abi.cpu_count = 1;
    qprof_abi.cpu_slot_size = sizeof(struct qprof_abi_cpu);
    qprof_abi.kernel_text_addr = (uint64_t)__text_start;
    qprof_abi.kernel_text_size = (uint64_t)(__text_end - __text_start);
    qprof_abi.boot_id = csr_read(time) ^ 0x9e3779b97f4a7c15ull;
}

/* ---- physical frames and Sv39 tables ---- */
static uint64_t next_frame, frames_end;
static struct spinlock frame_lock;

void mm_init(void)
{
    next_frame = (V2P(__kernel_end) + 4095) & ~4095ull;
    frames_end = KERNEL_PHYS + RAM_USED;
}

uint64_t frame_alloc(void)
{
    uint64_t flags = irq_save();
    spin_lock(&frame_lock);
    if (next_frame >= frames_end)
        panic("out of memory");
    uint64_t pa = next_frame;
    next_frame += 4096;
    spin_unlock(&frame_lock);
    irq_restore(flags);
    memset(P2V(pa), 0, 4096);
    return pa;
}

/* A fresh root sharing the kernel half (the boot table's upper 256 entries). */
static uint64_t root_new(void)
{
    uint64_t pa = frame_alloc();
    uint64_t *root = P2V(pa);
    for (int i = 256; i < 512; i++)
        root[i] = boot_root[i];
    return pa;
}

static void map_page(uint64_t root_pa, uint64_t va, uint64_t pa, uint64_t flags)
{
    uint64_t *table = P2V(root_pa);
    for (int level = 2; level > 0; level--) {
        uint64_t *e = &table[(va >> (12 + 9 * level)) & 511];
        if (!(*e & PTE_V))
            *e = (frame_alloc() >> 12) << 10 | PTE_V;
        table = P2V((*e >> 10) << 12);
    }
    table[(va >> 12) & 511] = (pa >> 12) << 10 | flags | PTE_V | PTE_A | PTE_D;
}

/* ---- processes ---- */
static struct proc procs[MAX_PROCS];
static struct spinlock sched_lock;
struct cpu cpus[MAX_CPUS];
static int next_pid = 1;

void cpu_init(int hart, uint64_t stack_lo, uint64_t stack_hi)
{
    struct cpu *c = &cpus[hart];
    c->id = hart;
    c->abi = &qprof_abi.cpu[hart];
    c->idle.pid = 0;
    c->idle.state = P_RUNNING;
    c->idle.pin = hart;
    c->idle.kstack_lo = stack_lo;
    c->idle.kstack_hi = stack_hi;
    c->idle.satp = kernel_satp();
    c->proc = &c->idle;
    __asm__ volatile("mv tp, %0" ::"r"(c));
    abi_write_begin(c->abi);
    c->abi->state = QPROF_CPU_KERNEL;
    c->abi->cr3 = c->idle.satp;
    c->abi->kstack_lo = stack_lo;
    c->abi->kstack_hi = stack_hi;
    c->abi->regs_arch = QPROF_ABI_ARCH_RISCV64;
    c->abi->regs_size = sizeof(struct qprof_abi_regs_riscv64);
    abi_write_end(c->abi);
}

void proc_map_segment_page(struct proc *p, uint64_t va, uint64_t pa, uint32_t elf_flags)
{
    uint64_t perm = PTE_U | PTE_R | (elf_flags & 2 ? PTE_W : 0) | (elf_flags & 1 ? PTE_X : 0);
    map_page((p->satp & ((1ull << 44) - 1)) << 12, va, pa, perm);
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
    uint64_t root = root_new();
    p->satp = SATP_SV39 | (root >> 12);
    uint64_t entry = elf_load(p, elf, elf_size);
    if (!entry)
        return -1;
    for (uint64_t va = USER_STACK_TOP - USER_STACK_SIZE; va < USER_STACK_TOP; va += 4096)
        map_page(root, va, frame_alloc(), PTE_U | PTE_R | PTE_W);
    map_page(root, USER_CLOCK_VA, V2P(&clock_page), PTE_U | PTE_R);

    uint64_t kpa = frame_alloc();
    for (int i = 1; i < KSTACK_SIZE / 4096; i++)
        frame_alloc();
    p->kstack_lo = (uint64_t)P2V(kpa);
    p->kstack_hi = p->kstack_lo + KSTACK_SIZE;

    /* The user frame trap_return starts it from: U mode, interrupts on there. */
    struct qprof_abi_regs_riscv64 *r = (void *)(p->kstack_hi - sizeof *r);
    memset(r, 0, sizeof *r);
    r->pc = entry;
    r->sp = USER_STACK_TOP;
    r->status = SSTATUS_SPIE | SSTATUS_SUM;
    r->cause = 8;
    p->user_regs = (uint64_t)r;
    uint64_t *sp = (uint64_t *)r - 14; /* swtch's frame: ra at +104, s0..s11 below */
    memset(sp, 0, 14 * 8);
    sp[13] = (uint64_t)proc_first_entry;
    p->ksp = (uint64_t)sp;
    p->pid = next_pid++;
    p->pin = pin;
    spin_lock(&sched_lock);
    p->state = P_RUNNABLE;
    spin_unlock(&sched_lock);
    return p->pid;
}

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

static NOINLINE void switch_to(struct cpu *c, struct proc *next)
{
    struct proc *prev = c->proc;
    if (next == prev)
        return;
    c->proc = next;
    csr_write(satp, next->satp);
    __asm__ volatile("sfence.vma" ::: "memory");
    abi_publish(c->abi, next, next == &c->idle);
    swtch(&prev->ksp, next->ksp);
}

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

void sched_unlock(void);
void sched_unlock(void)
{
    spin_unlock(&sched_lock);
}

/* Hart 0's tick: the only place the global tick advances. */
void timer_tick(void)
{
    spin_lock(&sched_lock);
    clock_page.ticks++;
    for (int i = 0; i < MAX_PROCS; i++)
        if (procs[i].state == P_SLEEPING && procs[i].wake_tick <= clock_page.ticks)
            procs[i].state = P_RUNNABLE;
    spin_unlock(&sched_lock);
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

void idle_loop(void)
{
    for (;;) {
        irq_off();
        schedule();
        irq_on();
        __asm__ volatile("wfi" ::: "memory");
    }
}
