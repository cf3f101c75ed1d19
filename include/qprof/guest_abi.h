/* qprof guest ABI: the one contract between a guest kernel and the qprof profiler.
 *
 * The guest kernel publishes one `struct qprof_abi` at a fixed kernel virtual address that is
 * also the ELF symbol `qprof_abi` in the kernel image. qprof finds it by that symbol (or by
 * --abi-addr), reads it in a single memory read while the guest is stopped, and learns for every
 * vCPU which process is current, where its code and unwind tables are, and where the user
 * registers were saved when the CPU entered the kernel.
 *
 * This header is freestanding (only <stdint.h>) so that a guest kernel can include it as is.
 * docs/guest-abi.md explains the update rules and shows how to implement it in another kernel.
 *
 * Layout rules: every field has a fixed size and natural alignment; there is no implicit
 * padding; all integers are little-endian (x86_64, riscv64 and aarch64 as QEMU's virt runs it). A reader checks magic,
 * version, and that `size` and `cpu_slot_size` are at least the first revision's; newer minor
 * additions append fields, so a reader finds slot i at offsetof(cpu) + i * cpu_slot_size, never
 * at its own stride, and reads a field past the slot size the guest declares as 0.
 *
 * Revisions of version 1: the first had 112-byte slots and x86_64 only; the second appends
 * regs_arch and regs_size to each slot (120 bytes) and adds the riscv64 register frame (and, later,
 * the aarch64 one: a new regs_arch value, no layout change). A slot
 * of the first revision (or a regs_arch of 0) means the x86_64 frame.
 */
#ifndef QPROF_GUEST_ABI_H
#define QPROF_GUEST_ABI_H

#include <stdint.h>

/* "QPROFABI" read as a little-endian 64-bit integer. */
#define QPROF_ABI_MAGIC    UINT64_C(0x494241464f525051)
#define QPROF_ABI_VERSION  1u
#define QPROF_ABI_MAX_CPUS 8
#define QPROF_ABI_NAME_LEN 16
#define QPROF_ABI_SYMBOL   "qprof_abi"

/* qprof_abi_cpu.regs_arch: the ELF e_machine of the frame user_regs points to. */
#define QPROF_ABI_ARCH_UNSET   0u   /* a first-revision guest: the x86_64 frame */
#define QPROF_ABI_ARCH_X86_64  62u  /* EM_X86_64: struct qprof_abi_regs */
#define QPROF_ABI_ARCH_RISCV64 243u /* EM_RISCV: struct qprof_abi_regs_riscv64 */
#define QPROF_ABI_ARCH_AARCH64 183u /* EM_AARCH64: struct qprof_abi_regs_aarch64 */

/* What a vCPU is doing, as far as the kernel knows (struct qprof_abi_cpu.state). */
enum qprof_abi_cpu_state {
    QPROF_CPU_OFFLINE = 0, /* never started by the guest, or slot unused */
    QPROF_CPU_IDLE = 1,    /* in the idle loop, no current process */
    QPROF_CPU_KERNEL = 2,  /* running kernel code with no process (boot, kernel thread) */
    QPROF_CPU_USER = 3,    /* a process is current; see user_regs for where it entered */
};

/* The user register frame saved at kernel entry (interrupt, exception or system call).
 * Its address is published in qprof_abi_cpu.user_regs while the CPU runs kernel code on
 * behalf of a process. The last five fields are the hardware iretq frame. */
struct qprof_abi_regs {
    uint64_t r15, r14, r13, r12, r11, r10, r9, r8;
    uint64_t rbp, rdi, rsi, rdx, rcx, rbx, rax;
    uint64_t vector;     /* interrupt vector, or 0x80 for a system call */
    uint64_t error_code; /* CPU error code, or 0 */
    uint64_t rip, cs, rflags, rsp, ss;
};

/* The riscv64 user register frame, saved by the trap entry on the kernel stack (the layout of
 * Linux's struct pt_regs): pc is sepc (x0 is always zero and has no slot), then x1..x31 by
 * their ABI names, then the trap CSRs. */
struct qprof_abi_regs_riscv64 {
    uint64_t pc, ra, sp, gp, tp, t0, t1, t2, s0, s1;
    uint64_t a0, a1, a2, a3, a4, a5, a6, a7;
    uint64_t s2, s3, s4, s5, s6, s7, s8, s9, s10, s11;
    uint64_t t3, t4, t5, t6;
    uint64_t status; /* sstatus at the trap */
    uint64_t tval;   /* stval */
    uint64_t cause;  /* scause: 8 for a system call (ecall from U mode) */
    uint64_t pad;    /* keeps the frame a multiple of 16 bytes (the RISC-V stack alignment) */
};

/* The aarch64 user register frame, saved by the exception entry on the kernel stack (the first
 * words of Linux's arm64 struct pt_regs): x0..x30, whose indexes are their DWARF numbers, then
 * sp (SP_EL0 for an entry from EL0) and pc (ELR_EL1), then the exception's system registers. */
struct qprof_abi_regs_aarch64 {
    uint64_t x[31];
    uint64_t sp;
    uint64_t pc;
    uint64_t pstate; /* SPSR_EL1 at the exception */
    uint64_t esr;    /* ESR_EL1 of a synchronous exception, ~0 for an interrupt */
    uint64_t far;    /* FAR_EL1 */
};

/* One slot per vCPU; slot i describes the vCPU with APIC ID i on x86_64, hart ID i on riscv64
 * MPIDR_EL1.Aff0 i on aarch64 (QEMU's cpu-index i every way). */
struct qprof_abi_cpu {
    uint64_t seq;       /* seqlock: odd while the kernel rewrites this slot, even when stable */
    uint32_t state;     /* enum qprof_abi_cpu_state */
    uint32_t pid;       /* current process, 0 when none */
    char name[QPROF_ABI_NAME_LEN]; /* process name, NUL-terminated, no ';' or newline */
    uint64_t text_addr; /* user virtual address of the process's .text section */
    uint64_t text_size;
    uint64_t eh_frame_addr; /* user virtual address of .eh_frame, 0 if it has none */
    uint64_t eh_frame_size;
    uint64_t load_base;  /* lowest virtual address of the loaded image (0 for ET_EXEC at link VA) */
    uint64_t generation; /* changes every time an executable is loaded into this process */
    uint64_t user_regs;  /* kernel VA of the struct qprof_abi_regs saved by the innermost entry
                            from user mode, 0 while the CPU runs user code or has no process */
    uint64_t cr3; /* the process's address-space root: CR3 on x86_64, the satp value (mode and
                     root PPN) on riscv64, TTBR0_EL1 on aarch64 */
    uint64_t kstack_lo;  /* kernel stack range of the current context; bounds kernel unwinding */
    uint64_t kstack_hi;
    /* second revision */
    uint32_t regs_arch; /* QPROF_ABI_ARCH_*: the shape of the frame at user_regs */
    uint32_t regs_size; /* sizeof that frame */
};

/* The first revision's slot and struct sizes: the least a reader accepts. */
#define QPROF_ABI_CPU_V1_SIZE 112u
#define QPROF_ABI_V1_SIZE     (48u + QPROF_ABI_MAX_CPUS * QPROF_ABI_CPU_V1_SIZE)

struct qprof_abi {
    uint64_t magic;         /* QPROF_ABI_MAGIC, written last at boot */
    uint32_t version;       /* QPROF_ABI_VERSION */
    uint32_t size;          /* sizeof(struct qprof_abi) as the kernel built it */
    uint32_t cpu_count;     /* slots the kernel maintains (<= QPROF_ABI_MAX_CPUS) */
    uint32_t cpu_slot_size; /* sizeof(struct qprof_abi_cpu) as the kernel built it */
    uint64_t kernel_text_addr; /* kernel .text range, for classifying addresses */
    uint64_t kernel_text_size;
    uint64_t boot_id; /* changes on every boot: a reboot invalidates cached process state */
    struct qprof_abi_cpu cpu[QPROF_ABI_MAX_CPUS];
};

/* Compile-time layout checks shared by the guest and the profiler. */
_Static_assert(sizeof(struct qprof_abi_regs) == 22 * 8, "qprof_abi_regs layout");
_Static_assert(sizeof(struct qprof_abi_regs_riscv64) == 36 * 8, "qprof_abi_regs_riscv64 layout");
_Static_assert(sizeof(struct qprof_abi_regs_aarch64) == 36 * 8, "qprof_abi_regs_aarch64 layout");
/* The most bytes any architecture's user register frame takes: a reader's buffer for one. */
#define QPROF_ABI_MAX_REGS_FRAME (36 * 8)
_Static_assert(sizeof(struct qprof_abi_regs) <= QPROF_ABI_MAX_REGS_FRAME, "frame bound");
_Static_assert(sizeof(struct qprof_abi_regs_riscv64) <= QPROF_ABI_MAX_REGS_FRAME, "frame bound");
_Static_assert(sizeof(struct qprof_abi_regs_aarch64) <= QPROF_ABI_MAX_REGS_FRAME, "frame bound");
_Static_assert(sizeof(struct qprof_abi_cpu) == QPROF_ABI_CPU_V1_SIZE + 8, "qprof_abi_cpu layout");
_Static_assert(sizeof(struct qprof_abi) == 48 + QPROF_ABI_MAX_CPUS * sizeof(struct qprof_abi_cpu),
               "qprof_abi layout");

#endif
