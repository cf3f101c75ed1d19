/* A minimal riscv64 machine for the arch tests (not the demo guest): boots in M-mode at
 * 0x80000000 under `qemu-system-riscv64 -machine virt -bios none`, builds Sv39 tables (the image
 * again at 0xffffffc000000000 as a 1 GiB kernel page, one user code page at 0x10000 and one user
 * stack page at 0x20000), enters S-mode at the high alias, then U-mode. The user loop makes a
 * system call every few thousand iterations; the S-mode handler does some work through a
 * frame-pointer call chain before returning. Every hart runs it (the tables they build are the
 * same; the user loop touches no memory; each has its own kernel stack), so -smp N works too.
 * So a sampler sees U and S mode, Sv39 paging on,
 * kernel pcs in the high half and user pcs low. Position independent throughout: the same
 * code runs at its physical and its high address. CFI (.eh_frame) describes the S-mode code, the
 * trap entry and the user loop as outermost frames (ra undefined there), so a kernel stack
 * unwinds kwork <- ksyscall <- s_trap and ends. */
    .equ KERNEL_OFFSET, 0xffffffbf80000000 /* high alias - physical */
    .equ USER_CODE_VA, 0x10000
    .equ USER_STACK_VA, 0x20000
    .equ PTE_V, 0x01
    .equ PTE_R, 0x02
    .equ PTE_W, 0x04
    .equ PTE_X, 0x08
    .equ PTE_U, 0x10
    .equ PTE_A, 0x40
    .equ PTE_D, 0x80

    .text
    .globl _start
_start:
    /* PMP: let S and U mode reach all memory (one NAPOT region over everything). */
    li t0, -1
    srli t0, t0, 10
    csrw pmpaddr0, t0
    li t0, 0x1f
    csrw pmpcfg0, t0
    /* Every exception and S-mode interrupt goes to S-mode. */
    li t0, 0xffff
    csrw medeleg, t0
    li t0, 0x222
    csrw mideleg, t0
    /* root[256]: the 1 GiB kernel page 0xffffffc000000000 -> 0x80000000 */
    lla a0, pt_root
    li t0, (0x80000000 >> 12) << 10 | PTE_V | PTE_R | PTE_W | PTE_X | PTE_A | PTE_D
    li t1, 256 * 8
    add t1, a0, t1
    sd t0, 0(t1)
    /* root[0] -> l1, l1[0] -> l0 */
    lla a1, pt_l1
    srli t0, a1, 12
    slli t0, t0, 10
    ori t0, t0, PTE_V
    sd t0, 0(a0)
    lla a2, pt_l0
    srli t0, a2, 12
    slli t0, t0, 10
    ori t0, t0, PTE_V
    sd t0, 0(a1)
    /* l0[0x10]: user code, l0[0x20]: user stack */
    lla t1, user_code
    srli t0, t1, 12
    slli t0, t0, 10
    ori t0, t0, PTE_V | PTE_R | PTE_X | PTE_U | PTE_A
    sd t0, (USER_CODE_VA >> 12) * 8(a2)
    lla t1, user_stack
    srli t0, t1, 12
    slli t0, t0, 10
    ori t0, t0, PTE_V | PTE_R | PTE_W | PTE_U | PTE_A | PTE_D
    sd t0, (USER_STACK_VA >> 12) * 8(a2)
    /* satp: Sv39, the root's PPN */
    srli t0, a0, 12
    li t1, 8 << 60
    or t0, t0, t1
    csrw satp, t0
    sfence.vma
    /* mret into S-mode at the high alias of s_entry */
    li t2, KERNEL_OFFSET
    lla t0, s_entry
    add t0, t0, t2
    csrw mepc, t0
    li t0, 3 << 11
    csrc mstatus, t0
    li t0, 1 << 11
    csrs mstatus, t0
    csrr tp, mhartid /* for S-mode, which cannot read it */
    mret

    /* S-mode code */
s_entry:
    lla t0, s_trap /* pc-relative: the high alias */
    csrw stvec, t0
    lla sp, kstack_top /* each hart its own 4 KiB of kernel stack (-smp up to 4) */
    slli t1, tp, 12
    sub sp, sp, t1
    li fp, 0
    csrw sscratch, sp
    li t0, USER_CODE_VA
    csrw sepc, t0
    li t0, 1 << 8 /* SPP = U */
    csrc sstatus, t0
    li sp, USER_STACK_VA + 4096
    sret

/* Traps from U: a system call (scause 8) does kernel work and returns past the ecall. */
    .align 4
s_trap:
    .cfi_startproc
    .cfi_undefined ra
    csrrw sp, sscratch, sp
    addi sp, sp, -32
    .cfi_def_cfa_offset 32
    sd ra, 24(sp)
    sd fp, 16(sp)
    .cfi_offset fp, -16
    sd t0, 8(sp)
    addi fp, sp, 32
    call ksyscall
    csrr t0, sepc
    addi t0, t0, 4
    csrw sepc, t0
    ld t0, 8(sp)
    ld fp, 16(sp)
    ld ra, 24(sp)
    addi sp, sp, 32
    csrrw sp, sscratch, sp
    sret
    .cfi_endproc

/* The standard frame: ra at fp-8, the caller's fp at fp-16 (arch's frame rule). */
    .macro prologue
    .cfi_startproc
    addi sp, sp, -16
    .cfi_def_cfa_offset 16
    sd ra, 8(sp)
    .cfi_offset ra, -8
    sd fp, 0(sp)
    .cfi_offset fp, -16
    addi fp, sp, 16
    .cfi_def_cfa fp, 0
    .endm
    .macro epilogue
    .cfi_def_cfa sp, 16
    ld fp, 0(sp)
    ld ra, 8(sp)
    addi sp, sp, 16
    ret
    .cfi_endproc
    .endm

ksyscall:
    prologue
    call kwork
    epilogue

kwork:
    prologue
    li t0, 20000
1:  addi t0, t0, -1
    bnez t0, 1b
    epilogue

/* The user page: spin, and make a system call every 20000 iterations. */
    .section .text.user, "ax"
    .balign 4096
user_code:
    .cfi_startproc
    .cfi_undefined ra
    li s1, 0
2:  li t0, 20000
3:  addi t0, t0, -1
    addi s1, s1, 1
    bnez t0, 3b
    ecall
    j 2b
    .cfi_endproc
    .balign 4096

    .bss
    .balign 4096
pt_root: .space 4096
pt_l1:   .space 4096
pt_l0:   .space 4096
user_stack: .space 4096
kstack:  .space 4 * 4096
kstack_top:
