/* A minimal aarch64 machine for the arch tests (not the demo guest): loaded as an ELF by
 * `qemu-system-aarch64 -machine virt -cpu cortex-a57 -kernel a64_mini.elf`, it starts at EL1 with
 * the MMU off at 0x40080000, builds stage-1 tables for both halves and turns the MMU on:
 *   TTBR0_EL1, 48-bit (T0SZ 16): one user code page at 0x10000, one user stack page at 0x20000,
 *     and RAM identity-mapped for EL1 only (to turn the MMU on under its own feet);
 *   TTBR1_EL1, 39-bit (T1SZ 25): RAM again at 0xffffff8040000000 as one block.
 * With the 4K granule (the default) that is 4 levels low and 3 high, the kernel a 1 GiB level-1
 * block; built with -DGRANULE_64K, 3 levels low and 2 high, the kernel a 512 MiB level-2 block.
 * It jumps to the high alias, then erets to EL0. The user loop (umain -> uwork, frame-pointer
 * chain x29/x30) makes a system call (svc) after each round of uwork; the EL1 handler does some
 * work through el0_sync -> ksyscall -> kwork, also with frame records, the chain ending at a
 * zero record in el0_sync (as Linux's does at its EL0 entry). Position independent throughout
 * (adr/adrp, bl): the same code runs at its physical and its high address. CFI (.eh_frame)
 * describes every function, el0_sync and user_start as outermost (x30 undefined), so a kernel
 * stack unwinds kwork <- ksyscall <- el0_sync and ends. Every CPU of -smp 1..4 runs it (CPU 0
 * starts the others through PSCI once the tables are built), each with its own kernel stack and
 * its own part of the user stack page: one address space, a thread per CPU. */
#ifdef GRANULE_64K
#define PAGE_SHIFT 16
#else
#define PAGE_SHIFT 12
#endif
#define PAGE_SIZE (1 << PAGE_SHIFT)

    .equ KERNEL_OFFSET, 0xffffff8000000000 /* high alias - physical */
    .equ RAM_BASE, 0x40000000
    .equ USER_CODE_VA, 0x10000
    .equ USER_STACK_VA, 0x20000

    /* descriptor bits */
    .equ D_TABLE, 0x3   /* a table (levels 0..2), a page (level 3) */
    .equ D_BLOCK, 0x1
    .equ D_AF, 1 << 10
    .equ D_ISH, 3 << 8
    .equ D_AP_EL0_RW, 1 << 6
    .equ D_AP_RO_ALL, 3 << 6
    .equ D_UXN, 1 << 54
    .equ D_NORMAL, 0 << 2 /* MAIR attr 0 */

    .equ KERNEL_BLOCK, D_BLOCK | D_AF | D_ISH | D_NORMAL | D_UXN
    .equ USER_CODE_PAGE, D_TABLE | D_AF | D_ISH | D_NORMAL | D_AP_RO_ALL
    .equ USER_DATA_PAGE, D_TABLE | D_AF | D_ISH | D_NORMAL | D_AP_EL0_RW | D_UXN

#ifdef GRANULE_64K
    /* TG0 01 (64K), TG1 11 (64K) */
    .equ TCR_TG, (1 << 14) | (3 << 30)
#else
    /* TG0 00 (4K), TG1 10 (4K) */
    .equ TCR_TG, (0 << 14) | (2 << 30)
#endif
    /* T0SZ 16, T1SZ 25, write-back inner shareable walks, IPS 40 bits */
    .equ TCR_VALUE, 16 | (25 << 16) | TCR_TG | (1 << 8) | (1 << 10) | (3 << 12) | (1 << 24) | (1 << 26) | (3 << 28) | (2 << 32)

    /* reg = the address of sym, pc-relative (adr reaches only 1 MiB) */
    .macro la reg, sym
    adrp \reg, \sym
    add \reg, \reg, :lo12:\sym
    .endm

    /* table[index] = desc (x0, x1 scratch) */
    .macro put table, index, desc
    la x0, \table
    mov x1, \index
    str \desc, [x0, x1, lsl #3]
    .endm

    .text
    .globl _start
_start:
    /* every descriptor below: x3 holds it, x4 a scratch address */
#ifdef GRANULE_64K
    /* TTBR0: l1_lo[0] -> l2_lo; l2_lo[2] = RAM (512 MiB, EL1 only); l2_lo[0] -> l3_lo */
    la x4, l2_lo
    orr x3, x4, D_TABLE
    put l1_lo, 0, x3
    ldr x3, =RAM_BASE | KERNEL_BLOCK
    put l2_lo, 2, x3
    la x4, l3_lo
    orr x3, x4, D_TABLE
    put l2_lo, 0, x3
    la x4, user_code
    ldr x5, =USER_CODE_PAGE
    orr x3, x4, x5
    put l3_lo, USER_CODE_VA >> PAGE_SHIFT, x3
    la x4, user_stack
    ldr x5, =USER_DATA_PAGE
    orr x3, x4, x5
    put l3_lo, USER_STACK_VA >> PAGE_SHIFT, x3
    /* TTBR1: l2_hi[2] = RAM (VA bits 38..29 of 0xffffff8040000000) */
    ldr x3, =RAM_BASE | KERNEL_BLOCK
    put l2_hi, 2, x3
#else
    /* TTBR0: l0_lo[0] -> l1_lo; l1_lo[1] = RAM (1 GiB, EL1 only); l1_lo[0] -> l2_lo -> l3_lo */
    la x4, l1_lo
    orr x3, x4, D_TABLE
    put l0_lo, 0, x3
    ldr x3, =RAM_BASE | KERNEL_BLOCK
    put l1_lo, 1, x3
    la x4, l2_lo
    orr x3, x4, D_TABLE
    put l1_lo, 0, x3
    la x4, l3_lo
    orr x3, x4, D_TABLE
    put l2_lo, 0, x3
    la x4, user_code
    ldr x5, =USER_CODE_PAGE
    orr x3, x4, x5
    put l3_lo, USER_CODE_VA >> PAGE_SHIFT, x3
    la x4, user_stack
    ldr x5, =USER_DATA_PAGE
    orr x3, x4, x5
    put l3_lo, USER_STACK_VA >> PAGE_SHIFT, x3
    /* TTBR1: l1_hi[1] = RAM (VA bits 38..30 of 0xffffff8040000000) */
    ldr x3, =RAM_BASE | KERNEL_BLOCK
    put l1_hi, 1, x3
#endif
    /* Start CPUs 1..3 (PSCI CPU_ON through QEMU's hvc conduit): each enters `secondary` at EL1
     * with the MMU off and its index in x0; one that does not exist stays off. */
    mov x20, #1
4:  ldr x0, =0xc4000003
    mov x1, x20 /* MPIDR: Aff0 is the index on -machine virt */
    la x2, secondary
    mov x3, x20
    hvc #0
    add x20, x20, #1
    cmp x20, #4
    b.lo 4b
    mov x19, #0
    b mmu_on

secondary:
    mov x19, x0

/* Every CPU: the same tables, then the high alias. x19 is the CPU's index. */
mmu_on:
#ifdef GRANULE_64K
    la x6, l1_lo
    la x7, l2_hi
#else
    la x6, l0_lo
    la x7, l1_hi
#endif
    ldr x0, =0xff /* attr 0: normal memory, write-back */
    msr mair_el1, x0
    ldr x0, =TCR_VALUE
    msr tcr_el1, x0
    mov x0, #1 << 48 /* an ASID, which the root's address must not be confused with */
    orr x6, x6, x0
    msr ttbr0_el1, x6
    msr ttbr1_el1, x7
    tlbi vmalle1
    dsb nsh
    isb
    ldr x0, =0x30d01805 /* RES1 bits, I, C, M */
    msr sctlr_el1, x0
    isb
    /* on to the high alias */
    ldr x1, =KERNEL_OFFSET
    la x0, el1_high
    add x0, x0, x1
    br x0

el1_high:
    la x0, vectors
    msr vbar_el1, x0
    la x0, kstack_top /* each CPU its own 4 KiB of kernel stack */
    sub x0, x0, x19, lsl #12
    mov sp, x0
    mov x29, #0
    mov x0, #USER_CODE_VA
    msr elr_el1, x0
    /* room above, as argv and environ give a process; each CPU 1 KiB of the user stack page */
    ldr x0, =USER_STACK_VA + PAGE_SIZE - 64
    sub x0, x0, x19, lsl #10
    msr sp_el0, x0
    mov x0, #0x3c0 /* EL0t, DAIF masked */
    msr spsr_el1, x0
    isb
    eret

/* The vector table: only a synchronous exception from EL0 (the svc) is expected; anything else
 * parks the CPU where a debugger sees it. */
    .balign 2048
vectors:
    .rept 8
    .balign 128
    b .
    .endr
    .balign 128
    b el0_sync /* 0x400: lower EL, AArch64, synchronous */
    .rept 7
    .balign 128
    b .
    .endr

/* The svc from EL0: user x0, x1, x29, x30 saved, a zero frame record (the chain's end), then
 * ksyscall. ELR_EL1 already points past the svc. */
el0_sync:
    .cfi_startproc
    .cfi_undefined x30
    stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    stp x0, x1, [sp, #16]
    stp xzr, xzr, [sp, #-16]!
    .cfi_def_cfa_offset 48
    mov x29, sp
    bl ksyscall
    add sp, sp, #16
    .cfi_def_cfa_offset 32
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #32
    .cfi_def_cfa_offset 0
    eret
    .cfi_endproc

/* The standard frame record: x29 points at the caller's x29, the return address above it
 * (arch's frame rule [x29], [x29+8]). */
    .macro prologue
    .cfi_startproc
    stp x29, x30, [sp, #-16]!
    .cfi_def_cfa_offset 16
    .cfi_offset x29, -16
    .cfi_offset x30, -8
    mov x29, sp
    .cfi_def_cfa x29, 16
    .endm
    .macro epilogue
    ldp x29, x30, [sp], #16
    .cfi_def_cfa sp, 0
    .cfi_restore x29
    .cfi_restore x30
    ret
    .cfi_endproc
    .endm

ksyscall:
    prologue
    bl kwork
    epilogue

kwork:
    prologue
    mov x9, #20000
1:  subs x9, x9, #1
    b.ne 1b
    epilogue

    .ltorg

/* The user page: user_start calls umain, which calls uwork and makes a system call, forever. */
    .section .text.user, "ax"
    .balign PAGE_SIZE
user_code:
user_start:
    .cfi_startproc
    .cfi_undefined x30
    mov x29, #0
    mov x30, #0
    bl umain
    b .
    .cfi_endproc

umain:
    prologue
2:  bl uwork
    svc #0
    b 2b
    .cfi_endproc

uwork:
    prologue
    mov x19, #20000
3:  subs x19, x19, #1
    b.ne 3b
    epilogue
    .balign PAGE_SIZE

    .bss
    .balign PAGE_SIZE
#ifndef GRANULE_64K
l0_lo:   .space PAGE_SIZE
l1_hi:   .space PAGE_SIZE
#else
l2_hi:   .space PAGE_SIZE
#endif
l1_lo:   .space PAGE_SIZE
l2_lo:   .space PAGE_SIZE
l3_lo:   .space PAGE_SIZE
user_stack: .space PAGE_SIZE
kstack:  .space 4 * 4096
kstack_top:
