/* Processes, the round-robin scheduler shared by all CPUs, the ELF loader, and each CPU's
 * qprof ABI slot. */
#include "kernel.h"

/* ---- qprof ABI ---- */
__attribute__((section(".qprof_abi"), aligned(4096), used)) struct qprof_abi qprof_abi;

static enum abi_fault abi_fault;

/* Every CPU writes only its own slot (index = its APIC ID), so the seqlock needs no atomics. */
static inline void abi_write_begin(struct qprof_abi_cpu *slot)
{
    slot->seq++;
    barrier();
}

static inline void abi_write_end(struct qprof_abi_cpu *slot)
{
    barrier();
    slot->seq++;
}

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

/* cpu_count = max APIC ID + 1 of the running CPUs; every started AP has published its slot
 * before it reported online, so magic (last) makes a complete structure valid. */
void abi_publish_header(int cpu_count)
{
    qprof_abi.cpu_count = (uint32_t)cpu_count;
    barrier();
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

/* Publishes p (or the idle context when p is the idle proc) as current in this CPU's slot. */
static void abi_publish(struct qprof_abi_cpu *slot, struct proc *p, int idle)
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
    slot->cr3 = p->cr3;
    slot->kstack_lo = p->kstack_lo;
    slot->kstack_hi = p->kstack_hi;
    slot->regs_arch = QPROF_ABI_ARCH_X86_64;
    slot->regs_size = sizeof(struct qprof_abi_regs);
    if (abi_fault != ABI_FAULT_NONE)
        abi_fault_slot(slot);
    abi_write_end(slot);
}

void abi_publish_idle(void)
{
    struct cpu *c = this_cpu();
    abi_publish(c->abi, &c->idle, 1);
}

void abi_enter_from_user(struct qprof_abi_regs *regs)
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

/* ---- processes ---- */
/* One run queue for all CPUs: procs[] under sched_lock. A process is RUNNING on at most one
 * CPU; the lock is held across swtch and released by the context switched to (xv6's rule), so
 * no other CPU can pick a process whose registers are still being saved. */
static struct proc procs[MAX_PROCS];
static struct spinlock sched_lock;
struct cpu cpus[MAX_CPUS];
static int next_pid = 1;
static uint64_t exec_generation;

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

struct elf64_ehdr {
    uint8_t ident[16];
    uint16_t type, machine;
    uint32_t version;
    uint64_t entry, phoff, shoff;
    uint32_t flags;
    uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
};

struct elf64_phdr {
    uint32_t type, flags;
    uint64_t offset, vaddr, paddr, filesz, memsz, align;
};

struct elf64_shdr {
    uint32_t name, type;
    uint64_t flags, addr, offset, size;
    uint32_t link, info;
    uint64_t addralign, entsize;
};

/* Copies [src, src+filesz) to user va and zero-fills up to memsz, allocating pages as needed. */
static void load_segment(struct proc *p, const uint8_t *src, uint64_t va, uint64_t filesz,
                         uint64_t memsz, int writable)
{
    uint64_t start = va & ~4095ull, end = (va + memsz + 4095) & ~4095ull;
    for (uint64_t page = start; page < end; page += 4096) {
        uint64_t pa = frame_alloc();
        map_page(p->cr3, page, pa, PTE_U | (writable ? PTE_W : 0));
        uint8_t *dst = P2V(pa);
        for (uint64_t off = 0; off < 4096; off++) {
            uint64_t a = page + off;
            if (a >= va && a < va + filesz)
                dst[off] = src[a - va];
        }
    }
}

/* Fills text/eh_frame ranges from the section headers. */
static void find_sections(struct proc *p, const uint8_t *elf, size_t size)
{
    const struct elf64_ehdr *eh = (const void *)elf;
    if (!eh->shoff || eh->shstrndx >= eh->shnum ||
        eh->shoff + eh->shnum * sizeof(struct elf64_shdr) > size)
        return;
    const struct elf64_shdr *sh = (const void *)(elf + eh->shoff);
    const char *names = (const char *)elf + sh[eh->shstrndx].offset;
    for (int i = 0; i < eh->shnum; i++) {
        const char *n = names + sh[i].name;
        if (strcmp(n, ".text") == 0) {
            p->text_addr = sh[i].addr;
            p->text_size = sh[i].size;
        } else if (strcmp(n, ".eh_frame") == 0) {
            p->eh_frame_addr = sh[i].addr;
            p->eh_frame_size = sh[i].size;
        }
    }
}

/* Loads a static image into p's address space; returns the entry point or 0. ET_EXEC goes to
 * its link address; ET_DYN (a static PIE) to USER_PIE_BASE, with no relocations applied: the
 * demo's PIE program has none (all its code is pc-relative and its data holds no pointers). */
static uint64_t elf_load(struct proc *p, const uint8_t *elf, size_t size)
{
    const struct elf64_ehdr *eh = (const void *)elf;
    if (size < sizeof *eh || memcmp(eh->ident, "\177ELF", 4) != 0 || eh->ident[4] != 2 ||
        (eh->type != 2 && eh->type != 3) || eh->machine != 62)
        return 0;
    uint64_t bias = eh->type == 3 ? USER_PIE_BASE : 0;
    uint64_t lowest = ~0ull;
    for (int i = 0; i < eh->phnum; i++) {
        const struct elf64_phdr *ph = (const void *)(elf + eh->phoff + i * eh->phentsize);
        if (ph->type != 1 /* PT_LOAD */ || ph->offset + ph->filesz > size)
            continue;
        load_segment(p, elf + ph->offset, ph->vaddr + bias, ph->filesz, ph->memsz, ph->flags & 2);
        if (ph->vaddr < lowest)
            lowest = ph->vaddr;
    }
    /* ET_EXEC at its link address (lowest mapped VA informative only); ET_DYN at the bias */
    p->load_base = bias;
    (void)lowest;
    find_sections(p, elf, size);
    p->text_addr += bias;
    if (p->eh_frame_addr)
        p->eh_frame_addr += bias;
    p->generation = ++exec_generation;
    return eh->entry + bias;
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
