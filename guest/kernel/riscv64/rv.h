/* riscv64 demo kernel: shared declarations (kernel/riscv64/). Freestanding; S-mode under Sv39
 * on QEMU's virt machine; SMP up to QPROF_ABI_MAX_CPUS harts. */
#ifndef GUEST_RV_H
#define GUEST_RV_H

#include "qprof/guest_abi.h"
#include "rvcpu.h"
#include "../../include/layout.h"

/* RAM from KERNEL_PHYS is mapped at KERNEL_VMA (1 GiB). */
#define P2V(pa)     ((void *)((uint64_t)(pa)-KERNEL_PHYS + KERNEL_VMA))
#define V2P(va)     ((uint64_t)(va)-KERNEL_VMA + KERNEL_PHYS)
#define MAX_CPUS    QPROF_ABI_MAX_CPUS
#define MAX_PROCS   8
#define KSTACK_SIZE 16384
#define RAM_USED    (64ull << 20) /* frames come from the image's end up to here */
#define UART_VA     (MMIO_VMA + 0x10000000)

/* ---- processes and CPUs (proc.c) ---- */
enum proc_state { P_FREE, P_RUNNABLE, P_RUNNING, P_SLEEPING, P_DEAD };

struct proc {
    int pid;
    enum proc_state state;
    char name[QPROF_ABI_NAME_LEN];
    uint64_t ksp; /* saved kernel stack pointer (swtch) */
    uint64_t kstack_lo, kstack_hi;
    uint64_t satp;
    uint64_t user_regs; /* kernel VA of the frame saved by the innermost entry from user mode */
    uint64_t wake_tick;
    uint64_t text_addr, text_size, eh_frame_addr, eh_frame_size, load_base, generation;
    int pin; /* hart that alone may run it, or -1 */
};

/* Per hart; tp points at it in kernel code. The first three fields are entry.S's. */
struct cpu {
    uint64_t ksp_top; /* top of the kernel stack a trap from user mode starts on */
    uint64_t scratch; /* entry.S: the interrupted sp (and a trap from kernel mode's stack) */
    uint64_t t0;      /* entry.S: t0 while it computes the stack */
    int id;           /* hart ID = qprof_abi slot */
    volatile int online;
    struct proc *proc; /* current: a process or &idle */
    struct proc idle;
    struct qprof_abi_cpu *abi;
};
extern struct cpu cpus[MAX_CPUS];
static inline struct cpu *this_cpu(void)
{
    struct cpu *c;
    __asm__ volatile("mv %0, tp" : "=r"(c));
    return c;
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
void cpu_init(int hart, uint64_t stack_lo, uint64_t stack_hi);
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
void trap_init_hart(void);
void trap_dispatch(struct qprof_abi_regs_riscv64 *regs);

/* ---- syscall.c, shared with x86_64 (ecall: number in a7, arguments in a0, a1, result a0) ---- */
typedef struct qprof_abi_regs_riscv64 trap_frame_t;
#define SYSCALL_NR(r)   ((r)->a7)
#define SYSCALL_ARG0(r) ((r)->a0)
#define SYSCALL_ARG1(r) ((r)->a1)
#define SYSCALL_RET(r)  ((r)->a0)
#define USER_ADDR_END   0x4000000000ull /* Sv39: user addresses are below 2^38 */
void syscall_dispatch(trap_frame_t *regs);

/* ---- entry.S, boot.S, linker ---- */
void trap_entry(void);
void swtch(uint64_t *old_ksp, uint64_t new_ksp);
void proc_first_entry(void);
extern uint64_t boot_root[512];
extern volatile uint64_t ap_go;
extern char boot_stacks[];
#define BOOT_STACK_SIZE 16384
extern char __text_start[], __text_end[], __kernel_end[];

/* ---- the shared sources' hooks (../kcommon.h) ---- */
#define ARCH_ELF_MACHINE  QPROF_ABI_ARCH_RISCV64
#define ARCH_ELF_PIE_BASE 0 /* static ET_EXEC images only */
#define abi_wmb()         __atomic_thread_fence(__ATOMIC_SEQ_CST)
static inline uint64_t proc_page_root(const struct proc *p)
{
    return p->satp;
}
static inline void arch_switch_space(struct proc *next)
{
    csr_write(satp, next->satp);
    __asm__ volatile("sfence.vma" ::: "memory");
}
static inline void arch_wait_for_interrupt(void)
{
    irq_on();
    __asm__ volatile("wfi" ::: "memory");
}
static inline void arch_after_tick(uint64_t now)
{
    (void)now; /* trap.c's timer_interrupt schedules */
}
#include "../kcommon.h"

#endif
