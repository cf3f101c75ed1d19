/* qprof demo guest kernel: shared declarations. Freestanding; SMP up to QPROF_ABI_MAX_CPUS. */
#ifndef GUEST_KERNEL_H
#define GUEST_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "qprof/guest_abi.h"
#include "../include/layout.h"

#define NOINLINE  __attribute__((noinline, noclone))
#define barrier() __asm__ volatile("" ::: "memory")

/* Physical memory is mapped at KERNEL_VMA + pa for the first 1 GiB. */
#define P2V(pa) ((void *)((uint64_t)(pa) + KERNEL_VMA))
#define V2P(va) ((uint64_t)(va)-KERNEL_VMA)

/* ---- lib.c ---- */
void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
void kprintf(const char *fmt, ...);
void kputs_n(const char *s, size_t n);
__attribute__((noreturn)) void panic(const char *fmt, ...);

/* ---- arch.c ---- */
static inline void outb(uint16_t port, uint8_t v)
{
    __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port));
}
static inline uint8_t inb(uint16_t port)
{
    uint8_t v;
    __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}
static inline uint64_t read_cr3(void)
{
    uint64_t v;
    __asm__ volatile("mov %%cr3, %0" : "=r"(v));
    return v;
}
static inline void write_cr3(uint64_t v)
{
    __asm__ volatile("mov %0, %%cr3" ::"r"(v) : "memory");
}
static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}
static inline void cpu_relax(void)
{
    __asm__ volatile("pause" ::: "memory");
}
static inline uint64_t irq_save(void)
{
    uint64_t flags;
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    return flags;
}
static inline void irq_restore(uint64_t flags)
{
    if (flags & 0x200)
        __asm__ volatile("sti" ::: "memory");
}
static inline void irq_off(void)
{
    __asm__ volatile("cli" ::: "memory");
}
static inline void irq_on(void)
{
    __asm__ volatile("sti" ::: "memory");
}
static inline void cpu_halt(void) /* interrupts off: for good */
{
    __asm__ volatile("cli; hlt" ::: "memory");
}
void serial_init(void);
void serial_putc(char c);
void arch_init(int cpu);    /* BSP: GDT+TSS of `cpu`, IDT, PIC, PIT */
void arch_init_ap(int cpu); /* an AP: its own TSS in the shared GDT, the shared IDT */
void tss_set_rsp0(uint64_t rsp0);
/* APIC ID of the running CPU. Every CPU loads its own TSS selector, SEL_TSS + 16 * APIC ID
 * (arch_init*), so the task register names the CPU; user code cannot change it (unlike %gs). */
static inline int cpu_id(void)
{
    uint16_t sel;
    __asm__ volatile("str %0" : "=r"(sel));
    return (sel - SEL_TSS) >> 4;
}
union clock_page {
    volatile uint64_t ticks;
    uint8_t page[4096];
};
extern union clock_page clock_page; /* clock_page.ticks: timer ticks since boot */

/* ---- spinlock (interrupts must be off while one is held) ---- */
struct spinlock {
    volatile uint32_t locked;
};
static inline void spin_lock(struct spinlock *l)
{
    while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE))
        while (l->locked)
            cpu_relax();
}
static inline void spin_unlock(struct spinlock *l)
{
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

/* ---- smp.c ---- */
#define MAX_CPUS        QPROF_ABI_MAX_CPUS
#define IPI_TICK_VECTOR 0x30 /* the BSP's PIT tick, forwarded to every AP */
#define SPURIOUS_VECTOR 0x3f
uint32_t cpuid_apic_id(void);
void lapic_map(void);
void smp_init(uint64_t rsdp_pa); /* starts every AP; returns the max APIC ID + 1 started */
extern int smp_cpu_limit;        /* max APIC ID + 1 of the CPUs running */
extern int smp_online;           /* CPUs running */
void lapic_eoi(void);
void smp_tick_others(void); /* BSP: the tick IPI to every other CPU */
void pit_clock_start(void);
uint64_t pit_clock_us(void); /* microseconds since pit_clock_start (polls PIT channel 0) */

/* ---- mm.c ---- */
void mm_init(uint64_t free_start_pa, uint64_t free_end_pa);
uint64_t frame_alloc(void); /* zeroed 4 KiB frame, physical address */
uint64_t kernel_pml4_pa(void);
uint64_t pml4_new(void);     /* a fresh address space sharing the kernel half */
void pml4_free(uint64_t pa); /* the next pml4_new returns this table again */
void map_page(uint64_t pml4_pa, uint64_t va, uint64_t pa, uint64_t flags);
#define PTE_P 1ull
#define PTE_W 2ull
#define PTE_U 4ull

/* ---- proc.c ---- */
extern struct qprof_abi qprof_abi;
#define MAX_PROCS   8
#define KSTACK_SIZE 16384
enum proc_state { P_FREE, P_RUNNABLE, P_RUNNING, P_SLEEPING, P_DEAD };

struct proc {
    int pid;
    enum proc_state state;
    char name[QPROF_ABI_NAME_LEN];
    uint64_t ksp; /* saved kernel stack pointer (swtch) */
    uint64_t kstack_lo, kstack_hi;
    uint64_t cr3;
    uint64_t user_regs; /* kernel VA of the frame saved by the innermost entry from user mode */
    uint64_t wake_tick;
    uint64_t text_addr, text_size, eh_frame_addr, eh_frame_size, load_base, generation;
    int pin; /* APIC ID of the only CPU that may run it, or -1 (any) */
};

/* Per-CPU state, indexed by APIC ID (= the qprof_abi slot). */
struct cpu {
    int id;
    volatile int online;
    struct proc *proc; /* current: a process or &idle */
    struct proc idle;  /* this CPU's idle context (pid 0) on its boot/idle stack */
    struct qprof_abi_cpu *abi;
};
extern struct cpu cpus[MAX_CPUS];
static inline struct cpu *this_cpu(void)
{
    return &cpus[cpu_id()];
}
#define current (this_cpu()->proc)

void cpu_init_idle(int cpu, uint64_t stack_lo, uint64_t stack_hi);
int proc_spawn(const char *name, const uint8_t *elf, size_t elf_size, int pin);
void schedule(void);   /* interrupts off */
void timer_tick(void); /* BSP, interrupts off: advances the global tick */
/* recycle= (a test aid): retires a process that no CPU runs, frees its top-level page table
 * and returns its name (NULL when every process runs). */
const char *proc_retire_one(int *pid);
void recycle_tick(uint64_t tick); /* main.c: called by timer_tick, sched_lock not held */
void cpu_tick(void);              /* every CPU, interrupts off: preemption */
void proc_sleep_until(uint64_t tick);
__attribute__((noreturn)) void proc_exit(int code);
__attribute__((noreturn)) void idle_loop(void);
void abi_init(int boot_cpu);

/* ---- syscall.c (int $0x80: number in rax, arguments in rdi, rsi, result in rax) ---- */
typedef struct qprof_abi_regs trap_frame_t;
#define SYSCALL_NR(r)   ((r)->rax)
#define SYSCALL_ARG0(r) ((r)->rdi)
#define SYSCALL_ARG1(r) ((r)->rsi)
#define SYSCALL_RET(r)  ((r)->rax)
#define USER_ADDR_END   0x800000000000ull /* user addresses are below */
void syscall_dispatch(trap_frame_t *regs);

/* ---- entry.S ---- */
void swtch(uint64_t *old_ksp, uint64_t new_ksp);
void proc_first_entry(void);
extern uint64_t isr_table[64];

/* ---- linker symbols ---- */
extern char __text_start[], __text_end[], __kernel_end[];
extern char boot_stack_lo[], boot_stack_hi[];
extern uint64_t boot_pml4[512];

/* ---- the shared sources' hooks (kcommon.h) ---- */
#define ARCH_ELF_MACHINE  QPROF_ABI_ARCH_X86_64
#define ARCH_ELF_PIE_BASE USER_PIE_BASE
#define abi_wmb()         barrier() /* x86 keeps stores in order */
static inline uint64_t proc_page_root(const struct proc *p)
{
    return p->cr3;
}
static inline void arch_switch_space(struct proc *next)
{
    tss_set_rsp0(next->kstack_hi);
    write_cr3(next->cr3);
}
static inline void arch_wait_for_interrupt(void)
{
    __asm__ volatile("sti; hlt; cli" ::: "memory");
}
static inline void arch_after_tick(uint64_t now)
{
    recycle_tick(now);
    smp_tick_others();
    schedule();
}
#include "kcommon.h"

#endif
