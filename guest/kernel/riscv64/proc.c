/* riscv64: physical frames and Sv39 tables, the qprof ABI header, each hart's idle context and
 * first slot contents, and the hooks of the shared scheduler (../sched.c) and ELF loader
 * (../exec.c): satp instead of CR3, the Sv39 permissions, the register frame. */
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

/* qprof_abi's page becomes readable in U-mode (and so writable: Sv39's U bit is the same for
 * reads and writes), so that QEMU's translation with a hart's own privilege reaches it while the
 * hart runs user code: qprof-plugin.so reads it so at the sample's instant (as aarch64's guest
 * opens it at EL0). The kernel's 1 GiB page is split for that, into 2 MiB pages and 4 KiB ones
 * around the table, with the same addresses and permissions; the kernel reaches a user page
 * through sstatus.SUM, which every hart sets before it touches the table (main.c). */
static void abi_page_open(void)
{
    const uint64_t kernel = PTE_V | PTE_R | PTE_W | PTE_X | PTE_G | PTE_A | PTE_D;
    uint64_t abi_pa = V2P(&qprof_abi), mega = (abi_pa - KERNEL_PHYS) >> 21;
    uint64_t l1_pa = frame_alloc(), l0_pa = frame_alloc();
    uint64_t *l1 = P2V(l1_pa), *l0 = P2V(l0_pa);
    for (uint64_t i = 0; i < 512; i++)
        l1[i] = ((KERNEL_PHYS + (i << 21)) >> 12) << 10 | kernel;
    for (uint64_t i = 0; i < 512; i++) {
        uint64_t pa = KERNEL_PHYS + (mega << 21) + (i << 12);
        l0[i] = (pa >> 12) << 10 |
                (pa == abi_pa ? PTE_V | PTE_R | PTE_W | PTE_U | PTE_G | PTE_A | PTE_D : kernel);
    }
    l1[mega] = (l0_pa >> 12) << 10 | PTE_V;
    boot_root[(KERNEL_VMA >> 30) & 511] = (l1_pa >> 12) << 10 | PTE_V;
    __asm__ volatile("sfence.vma" ::: "memory");
}

void mm_init(void)
{
    next_frame = (V2P(__kernel_end) + 4095) & ~4095ull;
    frames_end = KERNEL_PHYS + RAM_USED;
    abi_page_open();
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

/* ---- processes: the riscv64 hooks of ../sched.c and ../exec.c ---- */
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

void proc_space_new(struct proc *p)
{
    p->satp = SATP_SV39 | (root_new() >> 12);
}

void proc_map_user_page(struct proc *p, uint64_t va, uint64_t pa, uint32_t elf_flags)
{
    uint64_t perm =
        PTE_U | PTE_R | (elf_flags & ELF_PF_W ? PTE_W : 0) | (elf_flags & ELF_PF_X ? PTE_X : 0);
    map_page((p->satp & ((1ull << 44) - 1)) << 12, va, pa, perm);
}

/* The user frame trap_return starts p from (U mode, interrupts on there), under the frame
 * swtch pops into proc_first_entry. */
void proc_init_frames(struct proc *p, uint64_t entry)
{
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
}
