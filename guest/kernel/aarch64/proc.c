/* aarch64: physical frames and the TTBR0 tables of each process, the qprof ABI header, each
 * CPU's idle context and first slot contents, and the hooks of the shared scheduler (../sched.c)
 * and ELF loader (../exec.c): TTBR0_EL1 instead of CR3, the stage-1 permissions, the register
 * frame. */
#include "a64.h"

/* The tick counter alone in a page every process maps read-only at USER_CLOCK_VA. */
union clock_page clock_page __attribute__((aligned(4096)));

void abi_init(void)
{
    qprof_abi.version = QPROF_ABI_VERSION;
    qprof_abi.size = sizeof(struct qprof_abi);
    qprof_abi.cpu_count = 1;
    qprof_abi.cpu_slot_size = sizeof(struct qprof_abi_cpu);
    qprof_abi.kernel_text_addr = (uint64_t)__text_start;
    qprof_abi.kernel_text_size = (uint64_t)(__text_end - __text_start);
    qprof_abi.boot_id = sysreg_read(cntvct_el0) ^ 0x9e3779b97f4a7c15ull;
}

/* ---- physical frames and stage-1 tables ---- */
static uint64_t next_frame, frames_end;
static struct spinlock frame_lock;

/* qprof_abi's page becomes readable at EL0 (and so writable: no AP encoding gives EL1 write
 * with EL0 read), so that QEMU's translation with a vCPU's own privilege reaches it when that
 * vCPU is stopped in user code: over QMP on aarch64 there is no other way to read it. A change
 * of permissions alone needs no break-before-make. */
static void abi_page_open(void)
{
    uint64_t *e = &boot_ttbr1_l3[(V2P(&qprof_abi) >> 12) & 511];
    *e |= D_AP_EL0 | D_PXN;
    __asm__ volatile("dsb ishst\n\ttlbi vmalle1is\n\tdsb ish\n\tisb" ::: "memory");
}

void mm_init(void)
{
    next_frame = (V2P(__kernel_end) + 4095) & ~4095ull;
    frames_end = RAM_PHYS + RAM_USED;
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

/* Levels 1..3 of a 39-bit TTBR0 half (T0SZ 25): 9 bits each above the 4K page. */
static void map_page(uint64_t root_pa, uint64_t va, uint64_t pa, uint64_t attrs)
{
    uint64_t *table = P2V(root_pa);
    for (int level = 1; level < 3; level++) {
        uint64_t *e = &table[(va >> (12 + 9 * (3 - level))) & 511];
        if (!(*e & D_VALID))
            *e = frame_alloc() | D_TABLE;
        table = P2V(*e & D_ADDR);
    }
    table[(va >> 12) & 511] = pa | attrs | D_TABLE | D_AF | D_ISH | D_ATTR(0);
}

/* ---- processes: the aarch64 hooks of ../sched.c and ../exec.c ---- */
void cpu_init(int id, uint64_t stack_lo, uint64_t stack_hi)
{
    struct cpu *c = &cpus[id];
    c->id = id;
    c->abi = &qprof_abi.cpu[id];
    c->idle.pid = 0;
    c->idle.state = P_RUNNING;
    c->idle.pin = id;
    c->idle.kstack_lo = stack_lo;
    c->idle.kstack_hi = stack_hi;
    c->idle.ttbr0 = V2P(boot_ttbr0_l1);
    c->next_ttbr0 = c->idle.ttbr0;
    c->proc = &c->idle;
    sysreg_write(tpidr_el1, c);
    abi_write_begin(c->abi);
    c->abi->state = QPROF_CPU_KERNEL;
    c->abi->cr3 = c->idle.ttbr0;
    c->abi->kstack_lo = stack_lo;
    c->abi->kstack_hi = stack_hi;
    c->abi->regs_arch = QPROF_ABI_ARCH_AARCH64;
    c->abi->regs_size = sizeof(struct qprof_abi_regs_aarch64);
    abi_write_end(c->abi);
}

/* The kernel lives in the TTBR1 half: a process's table holds its user pages only. */
void proc_space_new(struct proc *p)
{
    p->ttbr0 = frame_alloc();
}

void proc_map_user_page(struct proc *p, uint64_t va, uint64_t pa, uint32_t elf_flags)
{
    uint64_t attrs = D_AP_EL0 | D_PXN | (elf_flags & ELF_PF_W ? 0 : D_AP_RO) |
                     (elf_flags & ELF_PF_X ? 0 : D_UXN);
    map_page(p->ttbr0, va, pa, attrs);
}

/* The user frame the trap return starts p from (EL0t, interrupts unmasked there), at the top of
 * its kernel stack where its entries from EL0 will save, under the frame swtch pops into
 * proc_first_entry. */
void proc_init_frames(struct proc *p, uint64_t entry)
{
    struct qprof_abi_regs_aarch64 *r = (void *)(p->kstack_hi - sizeof *r);
    memset(r, 0, sizeof *r);
    r->pc = entry;
    r->sp = USER_STACK_TOP;
    r->pstate = 0;          /* EL0t, DAIF clear */
    r->esr = 0x15ull << 26; /* as if it came from an svc */
    p->user_regs = (uint64_t)r;
    uint64_t *sp = (uint64_t *)r - 12; /* swtch's frame: x29, x30, then x19..x28 */
    memset(sp, 0, 12 * 8);
    sp[1] = (uint64_t)proc_first_entry;
    p->ksp = (uint64_t)sp;
}
