/* riscv64 low-half kernel: physical frames, the kernel's Sv39 table and each process's, and the
 * hooks of the shared scheduler (../sched.c) and ELF loader (../exec.c). The kernel's table maps
 * RAM and the UART one-to-one, the trampoline at TRAMPOLINE and the kernel stacks below it; a
 * process's table maps its program, stack and clock page, its trapframe at TRAPFRAME and the
 * trampoline, and nothing else of the kernel. */
#include "lowhalf.h"

/* The tick counter alone in a page every process maps read-only at USER_CLOCK_VA. */
union clock_page clock_page __attribute__((aligned(4096)));

static uint64_t next_frame, frames_end;
static struct spinlock frame_lock;
static uint64_t *kernel_pagetable;
static int kstacks_used;

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

/* The leaf PTE for va in the table at root, with the tables above it created as needed. */
static uint64_t *walk_create(uint64_t *root, uint64_t va)
{
    uint64_t *table = root;
    for (int level = 2; level > 0; level--) {
        uint64_t *e = &table[(va >> (12 + 9 * level)) & 511];
        if (!(*e & PTE_V))
            *e = (frame_alloc() >> 12) << 10 | PTE_V;
        table = P2V((*e >> 10) << 12);
    }
    return &table[(va >> 12) & 511];
}

static void map_page(uint64_t *root, uint64_t va, uint64_t pa, uint64_t flags)
{
    *walk_create(root, va) = (pa >> 12) << 10 | flags | PTE_V | PTE_A | PTE_D;
}

static void map_range(uint64_t *root, uint64_t va, uint64_t pa, uint64_t size, uint64_t flags)
{
    for (uint64_t off = 0; off < size; off += 4096)
        map_page(root, va + off, pa + off, flags);
}

/* Before paging (satp 0): RAM up to RAM_USED one-to-one, the kernel's text executable and the
 * rest not; the UART; the trampoline. Kernel stacks are added per process. */
void kvm_init(void)
{
    next_frame = (V2P(__kernel_end) + 4095) & ~4095ull;
    frames_end = KERNEL_PHYS + RAM_USED;
    kernel_pagetable = P2V(frame_alloc());
    uint64_t text_end = V2P(__text_end);
    map_range(kernel_pagetable, KERNEL_PHYS, KERNEL_PHYS, text_end - KERNEL_PHYS,
              PTE_R | PTE_X | PTE_G);
    map_range(kernel_pagetable, text_end, text_end, KERNEL_PHYS + RAM_USED - text_end,
              PTE_R | PTE_W | PTE_G);
    map_page(kernel_pagetable, UART_VA, UART_VA, PTE_R | PTE_W | PTE_G);
    map_page(kernel_pagetable, TRAMPOLINE, V2P(trampoline), PTE_R | PTE_X | PTE_G);
}

uint64_t kernel_satp(void)
{
    return SATP_SV39 | (V2P(kernel_pagetable) >> 12);
}

void kvm_init_hart(void)
{
    __asm__ volatile("sfence.vma zero, zero" ::: "memory");
    csr_write(satp, kernel_satp());
    __asm__ volatile("sfence.vma zero, zero" ::: "memory");
}

/* The physical address behind user va in root, or 0 when it is not a user-readable page. */
static uint64_t user_pa(uint64_t *root, uint64_t va)
{
    uint64_t *table = root;
    for (int level = 2; level > 0; level--) {
        uint64_t e = table[(va >> (12 + 9 * level)) & 511];
        if (!(e & PTE_V) || (e & (PTE_R | PTE_W | PTE_X)))
            return 0; /* no table, or a huge page: the kernel makes none in a user table */
        table = P2V((e >> 10) << 12);
    }
    uint64_t e = table[(va >> 12) & 511];
    if ((e & (PTE_V | PTE_U | PTE_R)) != (PTE_V | PTE_U | PTE_R))
        return 0;
    return ((e >> 10) << 12) | (va & 4095);
}

int copyin(void *dst, uint64_t src, size_t n)
{
    uint8_t *out = dst;
    while (n) {
        uint64_t pa = user_pa(current->pagetable, src);
        if (!pa)
            return -1;
        size_t chunk = 4096 - (src & 4095);
        if (chunk > n)
            chunk = n;
        memcpy(out, P2V(pa), chunk);
        out += chunk;
        src += chunk;
        n -= chunk;
    }
    return 0;
}

/* ---- the hooks of ../sched.c and ../exec.c ---- */
void proc_space_new(struct proc *p)
{
    p->pagetable = P2V(frame_alloc());
    uint64_t tf_pa = frame_alloc();
    p->trapframe = P2V(tf_pa);
    map_page(p->pagetable, TRAMPOLINE, V2P(trampoline), PTE_R | PTE_X);
    map_page(p->pagetable, TRAPFRAME, tf_pa, PTE_R | PTE_W);
}

void proc_map_user_page(struct proc *p, uint64_t va, uint64_t pa, uint32_t elf_flags)
{
    uint64_t perm =
        PTE_U | PTE_R | (elf_flags & ELF_PF_W ? PTE_W : 0) | (elf_flags & ELF_PF_X ? PTE_X : 0);
    map_page(p->pagetable, va, pa, perm);
}

/* sched.c gave p KSTACK_SIZE of contiguous frames at p->kstack_lo (one-to-one); the kernel runs
 * on them at a slot of their own below the trampoline instead, a guard page under each, so
 * that p->kstack_lo/hi become those high addresses. The first frame usertrapret needs is
 * the trapframe's, filled on the way out; under it swtch's frame, which returns into
 * proc_first_entry. */
void proc_init_frames(struct proc *p, uint64_t entry)
{
    if (kstacks_used >= KSTACK_SLOTS)
        panic("out of kernel stack slots");
    uint64_t top = KSTACK_TOP(kstacks_used++);
    map_range(kernel_pagetable, top - KSTACK_SIZE, V2P(p->kstack_lo), KSTACK_SIZE,
              PTE_R | PTE_W | PTE_G);
    __asm__ volatile("sfence.vma zero, zero" ::: "memory");
    p->kstack_lo = top - KSTACK_SIZE;
    p->kstack_hi = top;
    memset(p->trapframe, 0, sizeof *p->trapframe);
    p->trapframe->epc = entry;
    p->trapframe->sp = USER_STACK_TOP;
    uint64_t *sp = (uint64_t *)p->kstack_hi - 14; /* swtch's frame: ra at +104, s0..s11 below */
    memset(sp, 0, 14 * 8);
    sp[13] = (uint64_t)proc_first_entry;
    p->ksp = (uint64_t)sp;
}
