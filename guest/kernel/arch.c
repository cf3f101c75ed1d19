/* x86_64 plumbing: COM1, GDT with one TSS per CPU, IDT, 8259 PIC, 8254 PIT, and the interrupt
 * dispatcher. */
#include "kernel.h"

#define COM1 0x3f8

/* The tick counter has a page to itself, mapped read-only into every process at USER_CLOCK_VA,
 * so user code reads the time without a system call (like the data page of Linux's vDSO).
 * It matters to the profiler's ratio tests: under TCG, QEMU can take a pending stop late, at
 * the next system call the vCPU makes (docs/accuracy.md, "TCG and the moment of a sample"), so a
 * hot loop that asked the kernel for the time between batches would see its samples shift. */
union clock_page clock_page __attribute__((aligned(4096)));

void serial_init(void)
{
    outb(COM1 + 1, 0x00); /* no interrupts: output is polled */
    outb(COM1 + 3, 0x80); /* DLAB */
    outb(COM1 + 0, 0x01); /* 115200 baud */
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x03); /* 8N1 */
    outb(COM1 + 2, 0xc7); /* FIFO */
    outb(COM1 + 4, 0x03);
}

void serial_putc(char c)
{
    while (!(inb(COM1 + 5) & 0x20))
        ;
    outb(COM1, (uint8_t)c);
}

/* ---- GDT and TSS ---- */
struct __attribute__((packed)) tss64 {
    uint32_t reserved0;
    uint64_t rsp0, rsp1, rsp2;
    uint64_t reserved1;
    uint64_t ist[7];
    uint64_t reserved2;
    uint16_t reserved3, iomap_base;
};

/* One GDT for all CPUs: the four code/data segments, then a 16-byte TSS descriptor per CPU
 * (selector SEL_TSS + 16 * APIC ID). Each CPU writes only its own descriptor. */
static struct tss64 tss[MAX_CPUS];
static uint64_t gdt[5 + 2 * MAX_CPUS] __attribute__((aligned(16)));

struct __attribute__((packed)) desc_ptr {
    uint16_t limit;
    uint64_t base;
};

void tss_set_rsp0(uint64_t rsp0)
{
    tss[cpu_id()].rsp0 = rsp0;
}

static void gdt_fill_segments(void)
{
    gdt[0] = 0;
    gdt[1] = 0x00af9a000000ffffull; /* 0x08 kernel code */
    gdt[2] = 0x00cf92000000ffffull; /* 0x10 kernel data */
    gdt[3] = 0x00cff2000000ffffull; /* 0x18 user data (DPL 3) */
    gdt[4] = 0x00affa000000ffffull; /* 0x20 user code (DPL 3, 64-bit) */
}

/* Installs cpu's TSS descriptor, loads the GDT, reloads the segment registers and the task
 * register (which from now on names the CPU, see cpu_id). */
static void gdt_load(int cpu)
{
    struct tss64 *t = &tss[cpu];
    uint64_t base = (uint64_t)t, limit = sizeof *t - 1;
    int slot = (SEL_TSS >> 3) + 2 * cpu;
    gdt[slot] = (limit & 0xffff) | ((base & 0xffffff) << 16) | (0x89ull << 40) |
                (((limit >> 16) & 0xf) << 48) | (((base >> 24) & 0xff) << 56);
    gdt[slot + 1] = base >> 32;
    t->iomap_base = sizeof *t;
    struct desc_ptr p = {sizeof gdt - 1, (uint64_t)gdt};
    __asm__ volatile("lgdt %0\n\t"
                     "pushq %1\n\t"
                     "leaq 1f(%%rip), %%rax\n\t"
                     "pushq %%rax\n\t"
                     "lretq\n"
                     "1:\n\t"
                     "mov %2, %%ax\n\t"
                     "mov %%ax, %%ds\n\t"
                     "mov %%ax, %%es\n\t"
                     "mov %%ax, %%ss\n\t"
                     "ltr %w3"
                     :
                     : "m"(p), "i"(SEL_KCODE), "i"(SEL_KDATA), "r"(SEL_TSS + 16 * cpu)
                     : "rax", "memory");
}

/* ---- IDT ---- */
struct __attribute__((packed)) idt_gate {
    uint16_t off_lo, sel;
    uint8_t ist, type;
    uint16_t off_mid;
    uint32_t off_hi, zero;
};

static struct idt_gate idt[256] __attribute__((aligned(16)));
extern void isr128(void);

static void idt_set(int vec, uint64_t handler, int dpl)
{
    idt[vec] = (struct idt_gate){
        .off_lo = handler & 0xffff,
        .sel = SEL_KCODE,
        .type = (uint8_t)(0x8e | (dpl << 5)), /* present, 64-bit interrupt gate (IF cleared) */
        .off_mid = (handler >> 16) & 0xffff,
        .off_hi = (uint32_t)(handler >> 32),
    };
}

static void idt_init(void)
{
    for (int v = 0; v < 64; v++)
        idt_set(v, isr_table[v], 0);
    idt_set(SYSCALL_VECTOR, (uint64_t)isr128, 3);
}

static void idt_load(void)
{
    struct desc_ptr p = {sizeof idt - 1, (uint64_t)idt};
    __asm__ volatile("lidt %0" ::"m"(p));
}

/* ---- PIC and PIT ---- */
static void pic_init(void)
{
    outb(0x20, 0x11);
    outb(0xa0, 0x11);
    outb(0x21, 0x20); /* IRQ 0-7 -> vectors 0x20-0x27 */
    outb(0xa1, 0x28); /* IRQ 8-15 -> 0x28-0x2f */
    outb(0x21, 0x04);
    outb(0xa1, 0x02);
    outb(0x21, 0x01);
    outb(0xa1, 0x01);
    outb(0x21, 0xfe); /* only IRQ 0 (PIT) */
    outb(0xa1, 0xff);
}

static void pit_init(void)
{
    uint32_t divisor = 1193182 / TIMER_HZ;
    outb(0x43, 0x34); /* channel 0, lo/hi, rate generator */
    outb(0x40, divisor & 0xff);
    outb(0x40, (divisor >> 8) & 0xff);
}

void arch_init(int cpu)
{
    gdt_fill_segments();
    gdt_load(cpu);
    idt_init();
    idt_load();
    pic_init();
    pit_init();
}

void arch_init_ap(int cpu)
{
    gdt_load(cpu);
    idt_load();
}

/* ---- Dispatch ---- */
static const char *const exception_names[32] = {
    "divide error",
    "debug",
    "NMI",
    "breakpoint",
    "overflow",
    "bound",
    "invalid opcode",
    "no FPU",
    "double fault",
    "coproc",
    "invalid TSS",
    "segment not present",
    "stack fault",
    "general protection",
    "page fault",
};

static NOINLINE void exception(struct qprof_abi_regs *r)
{
    const char *what = r->vector < 15 ? exception_names[r->vector] : "exception";
    uint64_t cr2;
    __asm__ volatile("mov %%cr2, %0" : "=r"(cr2));
    if (r->cs & 3) {
        kprintf("fault pid=%d name=%s: %s (vector %lu err %lx) rip=%lx rsp=%lx cr2=%lx\n",
                current->pid, current->name, what, r->vector, r->error_code, r->rip, r->rsp, cr2);
        proc_exit(-1);
    }
    panic("kernel %s (vector %lu err %lx) rip=%lx rsp=%lx cr2=%lx", what, r->vector, r->error_code,
          r->rip, r->rsp, cr2);
}

void isr_dispatch(struct qprof_abi_regs *regs);
void isr_dispatch(struct qprof_abi_regs *regs)
{
    int from_user = (regs->cs & 3) != 0;
    if (from_user)
        abi_enter_from_user(regs);
    if (regs->vector == TIMER_VECTOR) {
        outb(0x20, 0x20);
        timer_tick();
    } else if (regs->vector == IPI_TICK_VECTOR) {
        lapic_eoi();
        cpu_tick();
    } else if (regs->vector == SPURIOUS_VECTOR) {
        /* a spurious LAPIC interrupt takes no EOI */
    } else if (regs->vector == SYSCALL_VECTOR) {
        syscall_dispatch(regs);
    } else if (regs->vector < 32) {
        exception(regs);
    } else if (regs->vector >= 0x20 && regs->vector < 0x30) {
        if (regs->vector >= 0x28)
            outb(0xa0, 0x20);
        outb(0x20, 0x20); /* spurious or masked IRQ */
    }
    if (from_user)
        abi_return_to_user();
}
