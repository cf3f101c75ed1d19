/* Memory layout and system call numbers shared by the demo guest kernel and its user programs
 * (and the assembly files, so only #defines here). See guest/README.md. */
#ifndef GUEST_LAYOUT_H
#define GUEST_LAYOUT_H

#if defined(__riscv) && defined(GUEST_LOWHALF)
/* riscv64, the low-half layout (kernel/riscv64-lowhalf/, guest/README.md): the kernel runs at
 * its physical address on a page table of its own; a process's table maps its program (linked
 * at 0), its stack, the clock page, its trapframe and the trampoline, nothing of the kernel. */
#define KERNEL_PHYS     0x80000000          /* kernel image at RAM's start, mapped one-to-one */
#define MAXVA           0x4000000000        /* Sv39: one past the highest user address */
#define TRAMPOLINE      (MAXVA - 4096)      /* uservec/userret, in the kernel's and every table */
#define TRAPFRAME       (TRAMPOLINE - 4096) /* the process's struct trapframe (its table only) */
#define USER_STACK_TOP  0x3fffff0000        /* initial user sp (16-aligned), below a gap */
#elif defined(__riscv)
/* riscv64 (kernel/riscv64/): RAM starts at 0x80000000 on QEMU's virt machine; Sv39 gives user
 * code the addresses below 0x4000000000. */
#define KERNEL_VMA      0xffffffff80000000 /* VA of physical address KERNEL_PHYS (1 GiB map) */
#define KERNEL_PHYS     0x80000000         /* kernel image loaded at the start of RAM */
#define MMIO_VMA        0xffffffff00000000 /* VA of physical address 0 (1 GiB: UART, CLINT) */
#define USER_STACK_TOP  0x3ffffff000       /* initial user sp (16-aligned) */
#elif defined(__aarch64__)
/* aarch64 (kernel/aarch64/): RAM starts at 0x40000000 on QEMU's virt machine, the device tree at
 * its start; the kernel runs in the TTBR1 half (39-bit), user code in the TTBR0 half (39-bit:
 * addresses below 0x8000000000). */
#define KERNEL_VMA      0xffffffff80000000 /* VA of physical address RAM_PHYS (1 GiB block) */
#define RAM_PHYS        0x40000000         /* start of RAM (the device tree is there) */
#define KERNEL_PHYS     0x40200000         /* kernel image loaded 2 MiB into RAM */
#define MMIO_VMA        0xffffffff00000000 /* VA of physical address 0 (1 GiB: UART, GIC) */
#define USER_STACK_TOP  0x7ffffff000       /* initial user sp (16-aligned) */
#else
#define KERNEL_VMA      0xffffffff80000000 /* VA of physical address 0 (1 GiB direct map) */
#define KERNEL_PHYS     0x100000           /* kernel image loaded at 1 MiB physical */
#define USER_STACK_TOP  0x7ffffff000       /* initial user rsp (16-aligned) */
#endif

#define USER_BASE       0x400000           /* user programs are linked here */
#define USER_STACK_SIZE 0x10000
#define USER_PIE_BASE   0x10000000 /* where a position-independent program (ET_DYN) is loaded */
#define USER_CLOCK_VA   0x200000 /* the clock page, read-only to user code (see kernel/arch.c) */

#define SEL_KCODE 0x08
#define SEL_KDATA 0x10
#define SEL_UDATA 0x1b /* 0x18 | RPL 3 */
#define SEL_UCODE 0x23 /* 0x20 | RPL 3 */
#define SEL_TSS   0x28

#define SYSCALL_VECTOR 0x80
#define TIMER_VECTOR   0x20
#define TIMER_HZ       100

/* int $0x80: rax = number, args in rdi, rsi, rdx; result in rax.
 * riscv64 ecall: a7 = number, args in a0, a1; result in a0.
 * aarch64 svc #0: x8 = number, args in x0, x1; result in x0. */
#define SYS_WRITE       0 /* (buf, len) -> len: writes to COM1 */
#define SYS_SLEEP_UNTIL 1 /* (tick) -> 0: sleeps until the tick counter reaches tick */
#define SYS_TICKS       2 /* () -> ticks since boot (TIMER_HZ per second) */
#define SYS_WORK        3 /* (n) -> checksum: n iterations of kernel work (sys_work) */
#define SYS_GETPID      4 /* () -> pid */
#define SYS_EXIT        5 /* (code) -> does not return */

/* Duty cycle: in every period of DUTY_PERIOD ticks, user programs work during the first
 * DUTY_WORK ticks and sleep until the next period for the rest, so the CPU idles ~15%. */
#define DUTY_PERIOD 100
#define DUTY_WORK   85

#endif
