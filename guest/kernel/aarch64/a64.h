/* aarch64 demo kernel: shared declarations (kernel/aarch64/). Freestanding; EL1 under a 4K
 * granule, the kernel in the TTBR1 half, each process its own TTBR0 tables, on QEMU's virt
 * machine (GICv2, the generic timer, PSCI); SMP up to QPROF_ABI_MAX_CPUS CPUs. */
#ifndef GUEST_A64_H
#define GUEST_A64_H

#include <stddef.h>
#include <stdint.h>

#include "qprof/guest_abi.h"
#include "../../include/layout.h"

#define NOINLINE  __attribute__((noinline, noclone))
#define barrier() __asm__ volatile("" ::: "memory")

/* RAM from RAM_PHYS is mapped at KERNEL_VMA (one 1 GiB block). */
#define P2V(pa) ((void *)((uint64_t)(pa)-RAM_PHYS + KERNEL_VMA))
#define V2P(va) ((uint64_t)(va)-KERNEL_VMA + RAM_PHYS)

#define MAX_CPUS    QPROF_ABI_MAX_CPUS
#define MAX_PROCS   8
#define KSTACK_SIZE 16384
#define RAM_USED    (64ull << 20)           /* frames come from the image's end up to here */
#define UART_VA     (MMIO_VMA + 0x09000000) /* PL011 */
#define GICD_VA     (MMIO_VMA + 0x08000000) /* GICv2 distributor */
#define GICC_VA     (MMIO_VMA + 0x08010000) /* GICv2 CPU interface */
#define TIMER_IRQ   27                      /* the EL1 virtual timer's PPI */

/* Stage-1 descriptors, 4K granule (Arm ARM D8.3). */
#define D_VALID   0x1ull
#define D_TABLE   0x3ull               /* a table at levels 0..2, a page at level 3 */
#define D_ATTR(i) ((uint64_t)(i) << 2) /* MAIR index: 0 normal write-back, 1 device */
#define D_AP_EL0  (1ull << 6)          /* EL0 may access */
#define D_AP_RO   (1ull << 7)          /* read-only */
#define D_ISH     (3ull << 8)
#define D_AF      (1ull << 10)
#define D_PXN     (1ull << 53)
#define D_UXN     (1ull << 54)
#define D_ADDR    0x0000fffffffff000ull

#define sysreg_read(r)                                                                             \
    ({                                                                                             \
        uint64_t v_;                                                                               \
        __asm__ volatile("mrs %0, " #r : "=r"(v_));                                                \
        v_;                                                                                        \
    })
#define sysreg_write(r, v) __asm__ volatile("msr " #r ", %0" ::"r"((uint64_t)(v)) : "memory")

static inline uint64_t irq_save(void)
{
    uint64_t s = sysreg_read(daif);
    __asm__ volatile("msr daifset, #2" ::: "memory");
    return s;
}
static inline void irq_restore(uint64_t s)
{
    sysreg_write(daif, s);
}
static inline void irq_off(void)
{
    __asm__ volatile("msr daifset, #2" ::: "memory");
}
static inline void irq_on(void)
{
    __asm__ volatile("msr daifclr, #2" ::: "memory");
}

static inline void cpu_halt(void) /* interrupts off: waits for ever */
{
    __asm__ volatile("wfi" ::: "memory");
}
void serial_putc(char c);

/* ---- spinlock (interrupts off while held) ---- */
struct spinlock {
    volatile uint32_t locked;
};
static inline void spin_lock(struct spinlock *l)
{
    while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE))
        while (l->locked)
            ;
}
static inline void spin_unlock(struct spinlock *l)
{
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

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

/* ---- processes and CPUs (proc.c) ---- */
enum proc_state { P_FREE, P_RUNNABLE, P_RUNNING, P_SLEEPING, P_DEAD };

struct proc {
    int pid;
    enum proc_state state;
    char name[QPROF_ABI_NAME_LEN];
    uint64_t ksp; /* saved kernel stack pointer (swtch) */
    uint64_t kstack_lo, kstack_hi;
    uint64_t ttbr0;
    uint64_t user_regs; /* kernel VA of the frame saved by the innermost entry from user mode */
    uint64_t wake_tick;
    uint64_t text_addr, text_size, eh_frame_addr, eh_frame_size, load_base, generation;
    int pin; /* CPU that alone may run it, or -1 */
};

/* Per CPU; TPIDR_EL1 points at it (user code cannot touch that register). The first field is
 * entry.S's. */
struct cpu {
    uint64_t next_ttbr0; /* swtch loads it (arch_switch_space) */
    int id;              /* MPIDR_EL1.Aff0 = qprof_abi slot */
    volatile int online;
    struct proc *proc; /* current: a process or &idle */
    struct proc idle;
    struct qprof_abi_cpu *abi;
};
_Static_assert(offsetof(struct cpu, next_ttbr0) == 0, "entry.S: CPU_NEXT_TTBR0");
extern struct cpu cpus[MAX_CPUS];
static inline struct cpu *this_cpu(void)
{
    return (struct cpu *)sysreg_read(tpidr_el1);
}
static inline int cpu_id(void)
{
    return this_cpu()->id;
}
#define current (this_cpu()->proc)

extern struct qprof_abi qprof_abi;
union clock_page {
    volatile uint64_t ticks;
    uint8_t page[4096];
};
extern union clock_page clock_page; /* clock_page.ticks: timer ticks since boot */
void cpu_init(int id, uint64_t stack_lo, uint64_t stack_hi);
void abi_init(void);
int proc_spawn(const char *name, const uint8_t *elf, size_t elf_size, int pin);
void schedule(void);
void timer_tick(void);
void proc_sleep_until(uint64_t tick);
__attribute__((noreturn)) void proc_exit(int code);
__attribute__((noreturn)) void idle_loop(void);
void mm_init(void);
uint64_t frame_alloc(void);

/* ---- trap.c ---- */
void trap_init_cpu(void);
void trap_dispatch(struct qprof_abi_regs_aarch64 *regs);

/* ---- syscall.c, shared with x86_64 (svc #0: number in x8, arguments in x0, x1, result x0) ---- */
typedef struct qprof_abi_regs_aarch64 trap_frame_t;
#define SYSCALL_NR(r)   ((r)->x[8])
#define SYSCALL_ARG0(r) ((r)->x[0])
#define SYSCALL_ARG1(r) ((r)->x[1])
#define SYSCALL_RET(r)  ((r)->x[0])
#define USER_ADDR_END   0x8000000000ull /* T0SZ 25: user addresses are below 2^39 */
void syscall_dispatch(trap_frame_t *regs);

/* ---- entry.S, boot.S, linker ---- */
extern char vectors[];
void swtch(uint64_t *old_ksp, uint64_t new_ksp);
void proc_first_entry(void);
extern uint64_t boot_ttbr0_l1[512], boot_ttbr1_l3[512];
extern char boot_stacks[];
extern char secondary_entry[];
#define BOOT_STACK_SIZE 16384
extern char __text_start[], __text_end[], __kernel_end[];

/* ---- the shared sources' hooks (../kcommon.h) ---- */
#define ARCH_ELF_MACHINE  QPROF_ABI_ARCH_AARCH64
#define ARCH_ELF_PIE_BASE 0 /* static ET_EXEC images only */
#define abi_wmb()         __atomic_thread_fence(__ATOMIC_SEQ_CST)
static inline uint64_t proc_page_root(const struct proc *p)
{
    return p->ttbr0;
}
/* swtch loads TTBR0 just before it moves sp to the next kernel stack, after the slot names the
 * next process: a sample in between sees the next process's slot on the previous process's
 * kernel stack, which the profiler refuses by the slot's stack bounds, so that it never needs
 * TTBR0 to tell (QMP does not give it). No ASIDs: every switch of TTBR0 drops this CPU's TLB
 * entries. The kernel stack needs no switch: an entry from EL0 starts at SP_EL1, which a return
 * to EL0 leaves at that process's frame. */
static inline void arch_switch_space(struct proc *next)
{
    this_cpu()->next_ttbr0 = next->ttbr0;
}
/* WFI wakes on a pending interrupt even while masked; unmasking then takes it. */
static inline void arch_wait_for_interrupt(void)
{
    __asm__ volatile("wfi\n\tmsr daifclr, #2\n\tisb\n\tmsr daifset, #2" ::: "memory");
}
static inline void arch_after_tick(uint64_t now)
{
    (void)now; /* trap.c's timer interrupt schedules */
}
#include "../kcommon.h"

#endif
