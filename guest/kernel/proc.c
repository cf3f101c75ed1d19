/* Processes, the round-robin scheduler, the ELF loader, and the qprof ABI slot of CPU 0. */
#include "kernel.h"

/* ---- qprof ABI ---- */
__attribute__((section(".qprof_abi"), aligned(4096), used)) struct qprof_abi qprof_abi;

static struct qprof_abi_cpu *const abi_cpu = &qprof_abi.cpu[0];
static enum abi_fault abi_fault;

static inline void abi_write_begin(void)
{
    abi_cpu->seq++;
    barrier();
}

static inline void abi_write_end(void)
{
    barrier();
    abi_cpu->seq++;
}

void abi_init(void)
{
    qprof_abi.version = QPROF_ABI_VERSION;
    qprof_abi.size = sizeof(struct qprof_abi);
    qprof_abi.cpu_count = 1; /* only the boot CPU runs; other vCPUs are never started */
    qprof_abi.cpu_slot_size = sizeof(struct qprof_abi_cpu);
    qprof_abi.kernel_text_addr = (uint64_t)__text_start;
    qprof_abi.kernel_text_size = (uint64_t)(__text_end - __text_start);
    qprof_abi.boot_id = rdtsc() ^ 0x9e3779b97f4a7c15ull;
    abi_write_begin();
    abi_cpu->state = QPROF_CPU_KERNEL;
    abi_cpu->cr3 = read_cr3();
    abi_cpu->kstack_lo = (uint64_t)boot_stack_lo;
    abi_cpu->kstack_hi = (uint64_t)boot_stack_hi;
    abi_write_end();
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
 * for every slot past the first. Every slot gets the per-slot fault, the unused ones too. */
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
        slot->seq++;
        barrier();
        abi_fault_slot(slot);
        barrier();
        slot->seq++;
    }
}

/* Publishes p (or the idle context when p is the idle proc) as current in slot 0. */
static void abi_publish(struct proc *p, int idle)
{
    abi_write_begin();
    abi_cpu->state = idle ? QPROF_CPU_IDLE : QPROF_CPU_USER;
    abi_cpu->pid = (uint32_t)p->pid;
    memcpy(abi_cpu->name, p->name, QPROF_ABI_NAME_LEN);
    abi_cpu->text_addr = p->text_addr;
    abi_cpu->text_size = p->text_size;
    abi_cpu->eh_frame_addr = p->eh_frame_addr;
    abi_cpu->eh_frame_size = p->eh_frame_size;
    abi_cpu->load_base = p->load_base;
    abi_cpu->generation = p->generation;
    abi_cpu->user_regs = p->user_regs;
    abi_cpu->cr3 = p->cr3;
    abi_cpu->kstack_lo = p->kstack_lo;
    abi_cpu->kstack_hi = p->kstack_hi;
    if (abi_fault != ABI_FAULT_NONE)
        abi_fault_slot(abi_cpu);
    abi_write_end();
}

void abi_enter_from_user(struct qprof_abi_regs *regs)
{
    current->user_regs = (uint64_t)regs;
    abi_write_begin();
    abi_cpu->user_regs = (uint64_t)regs;
    abi_write_end();
}

void abi_return_to_user(void)
{
    current->user_regs = 0;
    abi_write_begin();
    abi_cpu->user_regs = 0;
    abi_write_end();
}

/* ---- processes ---- */
static struct proc procs[MAX_PROCS];
static struct proc idle_proc; /* the boot stack context; pid 0 */
struct proc *current = &idle_proc;
static int next_pid = 1;
static uint64_t exec_generation;

void proc_init(void)
{
    idle_proc.pid = 0;
    idle_proc.state = P_RUNNABLE;
    idle_proc.kstack_lo = (uint64_t)boot_stack_lo;
    idle_proc.kstack_hi = (uint64_t)boot_stack_hi;
    idle_proc.cr3 = kernel_pml4_pa();
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

/* Loads a static ET_EXEC image into p's address space; returns the entry point or 0. */
static uint64_t elf_load(struct proc *p, const uint8_t *elf, size_t size)
{
    const struct elf64_ehdr *eh = (const void *)elf;
    if (size < sizeof *eh || memcmp(eh->ident, "\177ELF", 4) != 0 || eh->ident[4] != 2 ||
        eh->type != 2 || eh->machine != 62)
        return 0;
    uint64_t lowest = ~0ull;
    for (int i = 0; i < eh->phnum; i++) {
        const struct elf64_phdr *ph = (const void *)(elf + eh->phoff + i * eh->phentsize);
        if (ph->type != 1 /* PT_LOAD */ || ph->offset + ph->filesz > size)
            continue;
        load_segment(p, elf + ph->offset, ph->vaddr, ph->filesz, ph->memsz, ph->flags & 2);
        if (ph->vaddr < lowest)
            lowest = ph->vaddr;
    }
    p->load_base = 0; /* ET_EXEC at its link address; lowest mapped VA is informative only */
    (void)lowest;
    find_sections(p, elf, size);
    p->generation = ++exec_generation;
    return eh->entry;
}

int proc_spawn(const char *name, const uint8_t *elf, size_t elf_size)
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
    p->state = P_RUNNABLE;
    return p->pid;
}

/* Round robin: the next runnable process after current, or the idle context. */
static struct proc *pick_next(void)
{
    int start = current == &idle_proc ? MAX_PROCS - 1 : (int)(current - procs);
    for (int k = 1; k <= MAX_PROCS; k++) {
        struct proc *p = &procs[(start + k) % MAX_PROCS];
        if (p->state == P_RUNNABLE)
            return p;
    }
    return &idle_proc;
}

static NOINLINE void switch_to(struct proc *next)
{
    struct proc *prev = current;
    if (next == prev)
        return;
    current = next;
    tss_set_rsp0(next->kstack_hi);
    write_cr3(next->cr3);
    abi_publish(next, next == &idle_proc);
    swtch(&prev->ksp, next->ksp);
}

void schedule(void)
{
    switch_to(pick_next());
}

void timer_tick(void)
{
    clock_page.ticks++;
    for (int i = 0; i < MAX_PROCS; i++)
        if (procs[i].state == P_SLEEPING && procs[i].wake_tick <= clock_page.ticks)
            procs[i].state = P_RUNNABLE;
    schedule();
}

void proc_sleep_until(uint64_t tick)
{
    if (tick <= clock_page.ticks)
        return;
    current->wake_tick = tick;
    current->state = P_SLEEPING;
    schedule();
}

void proc_exit(int code)
{
    kprintf("exit pid=%d name=%s code=%d\n", current->pid, current->name, code);
    current->state = P_DEAD;
    schedule();
    panic("dead process scheduled");
}

/* The boot context becomes the idle loop: halt until an interrupt makes something runnable
 * (the timer handler switches away from here). */
void idle_loop(void)
{
    abi_publish(&idle_proc, 1);
    for (;;) {
        __asm__ volatile("cli");
        schedule();
        __asm__ volatile("sti; hlt; cli" ::: "memory");
    }
}
