/* riscv64 demo kernel, low-half layout (kernel/riscv64-lowhalf/, guest/README.md "riscv64,
 * low-half layout"): laid out as xv6 and most teaching kernels are. The kernel is linked and
 * runs at its physical address, mapped one-to-one, on a page table of its own; every trap
 * switches satp through the trampoline page (TRAMPOLINE, mapped in both tables); a process's
 * user registers live in its trapframe page (TRAPFRAME in its table), its kernel stack high in
 * the kernel's table above a guard page. It publishes nothing for qprof (no qprof_abi): a
 * profiler learns what it knows from the ELF's symbols and DWARF (cpus[], struct proc). */
#ifndef GUEST_LOWHALF_H
#define GUEST_LOWHALF_H

#include "../riscv64/rvcpu.h"
#include "../../include/layout.h"

#define GUEST_NO_QPROF_ABI 1

/* RAM and the MMIO the kernel uses are mapped one-to-one: kernel VA = PA. */
#define P2V(pa) ((void *)(uint64_t)(pa))
#define V2P(va) ((uint64_t)(va))

#define NCPU                 8 /* harts; boot.S parks the others in M-mode */
#define MAX_CPUS             NCPU
#define MAX_PROCS            8
#define KSTACK_SIZE          16384
#define RAM_USED             (64ull << 20) /* frames come from the image's end up to here */
#define UART_VA              0x10000000ull
#define CLINT                0x2000000ull
#define CLINT_MTIMECMP(hart) (CLINT + 0x4000 + 8 * (uint64_t)(hart))
#define CLINT_MTIME          (CLINT + 0xbff8)
#define SIE_SSIE             (1ull << 1)
#define SIP_SSIP             (1ull << 1)

/* Kernel stacks, in the kernel's table only, downwards from the page under the trampoline
 * (left unmapped there: TRAPFRAME's address): slot i's KSTACK_SIZE bytes end at KSTACK_TOP(i),
 * with a guard page, never mapped, under each. */
#define KSTACK_GAP    4096
#define KSTACK_STRIDE (KSTACK_SIZE + KSTACK_GAP)
#define KSTACK_TOP(i) (TRAMPOLINE - KSTACK_GAP - (uint64_t)(i)*KSTACK_STRIDE)
#define KSTACK_SLOTS  64

/* ---- processes and CPUs ---- */
enum proc_state { P_FREE, P_RUNNABLE, P_RUNNING, P_SLEEPING, P_DEAD };

/* The page at TRAPFRAME in a process's table (and at `trapframe` in the kernel's): the user
 * registers saved by uservec (trampoline.S) and what uservec needs to enter the kernel. xv6's
 * layout, offsets fixed (trampoline.S). */
struct trapframe {
    /*   0 */ uint64_t kernel_satp; /* the kernel's page table */
    /*   8 */ uint64_t kernel_sp;   /* top of the process's kernel stack */
    /*  16 */ uint64_t kernel_trap; /* usertrap() */
    /*  24 */ uint64_t epc;         /* the user pc */
    /*  32 */ uint64_t kernel_tp;   /* the hart's struct cpu (tp in kernel code) */
    /*  40 */ uint64_t ra;
    /*  48 */ uint64_t sp;
    /*  56 */ uint64_t gp;
    /*  64 */ uint64_t tp;
    /*  72 */ uint64_t t0;
    /*  80 */ uint64_t t1;
    /*  88 */ uint64_t t2;
    /*  96 */ uint64_t s0;
    /* 104 */ uint64_t s1;
    /* 112 */ uint64_t a0;
    /* 120 */ uint64_t a1;
    /* 128 */ uint64_t a2;
    /* 136 */ uint64_t a3;
    /* 144 */ uint64_t a4;
    /* 152 */ uint64_t a5;
    /* 160 */ uint64_t a6;
    /* 168 */ uint64_t a7;
    /* 176 */ uint64_t s2;
    /* 184 */ uint64_t s3;
    /* 192 */ uint64_t s4;
    /* 200 */ uint64_t s5;
    /* 208 */ uint64_t s6;
    /* 216 */ uint64_t s7;
    /* 224 */ uint64_t s8;
    /* 232 */ uint64_t s9;
    /* 240 */ uint64_t s10;
    /* 248 */ uint64_t s11;
    /* 256 */ uint64_t t3;
    /* 264 */ uint64_t t4;
    /* 272 */ uint64_t t5;
    /* 280 */ uint64_t t6;
};

struct proc {
    int pid;
    enum proc_state state;
    char name[16];
    struct trapframe *trapframe; /* kernel VA of the process's trapframe page */
    uint64_t *pagetable;         /* kernel VA of its Sv39 root */
    uint64_t ksp;                /* saved kernel stack pointer (swtch) */
    uint64_t kstack_lo, kstack_hi;
    uint64_t wake_tick;
    uint64_t text_addr, text_size, eh_frame_addr, eh_frame_size, load_base, generation;
    int pin; /* hart that alone may run it, or -1 */
};

/* Per hart; tp points at it in kernel code. */
struct cpu {
    struct proc *proc; /* running: a process, or &idle */
    int id;            /* hart ID */
    volatile int online;
    struct proc idle; /* the hart's boot context, its idle loop */
};
extern struct cpu cpus[NCPU];
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

union clock_page {
    volatile uint64_t ticks;
    uint8_t page[4096];
};
extern union clock_page clock_page; /* clock_page.ticks: timer ticks since boot */
int proc_spawn(const char *name, const uint8_t *elf, size_t elf_size, int pin);
void schedule(void);
void timer_tick(void);
void proc_sleep_until(uint64_t tick);
__attribute__((noreturn)) void proc_exit(int code);
__attribute__((noreturn)) void idle_loop(void);
uint64_t frame_alloc(void);

/* ---- vm.c ---- */
void kvm_init(void);      /* hart 0, before paging: builds the kernel's table */
void kvm_init_hart(void); /* every hart: loads it */
uint64_t kernel_satp(void);
/* Copies n bytes from user address src of the current process; -1 if any page is unmapped or
 * not user-readable. */
int copyin(void *dst, uint64_t src, size_t n);

/* ---- trap.c ---- */
void trap_init_hart(void);
void usertrap(void);
__attribute__((noreturn)) void usertrapret(void);
void kerneltrap(void);

/* ---- syscall.c, shared (ecall: number in a7, arguments in a0, a1, result a0) ---- */
typedef struct trapframe trap_frame_t;
#define SYSCALL_NR(r)          ((r)->a7)
#define SYSCALL_ARG0(r)        ((r)->a0)
#define SYSCALL_ARG1(r)        ((r)->a1)
#define SYSCALL_RET(r)         ((r)->a0)
#define USER_ADDR_END          TRAPFRAME
#define user_read(dst, src, n) copyin((dst), (src), (n))
void syscall_dispatch(trap_frame_t *regs);

/* ---- boot.S, trampoline.S, kernelvec.S, the linker script ---- */
void kernelvec(void);
void swtch(uint64_t *old_ksp, uint64_t new_ksp);
void proc_first_entry(void);
extern char trampoline[], uservec[], userret[];
extern volatile uint64_t ap_go;
extern char boot_stacks[];
#define BOOT_STACK_SIZE 16384
extern char __text_start[], __text_end[], __kernel_end[];

/* ---- the shared sources' hooks (../kcommon.h) ---- */
#define ARCH_ELF_MACHINE  243 /* EM_RISCV */
#define ARCH_ELF_PIE_BASE 0   /* static ET_EXEC images only */
/* The kernel stays on its own table across a switch (usertrapret loads the process's). The
 * fence makes the kernel-stack mappings proc_spawn added on another hart visible here. */
static inline void arch_switch_space(struct proc *next)
{
    (void)next;
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
