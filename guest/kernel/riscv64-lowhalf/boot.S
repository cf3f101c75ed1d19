/* riscv64 low-half boot: QEMU's `-machine virt -bios none` starts every hart here, in M-mode,
 * at 0x80000000 (where the kernel is linked: it runs at its physical address), with a0 = hart
 * ID and a1 = the device tree. Each hart takes its boot stack, lets mstart() (start.c) set up
 * M-mode (PMP, delegation, the M-mode timer, mepc) and mrets into S-mode with paging still off:
 * hart 0 to kmain(0, dtb), the others, once hart 0 sets ap_go, to ap_main(hartid). A hart
 * whose ID is NCPU (8) or more never leaves M-mode. */
#define NCPU            8
#define BOOT_STACK_SIZE 16384

    .section .boot.text, "ax"
    .globl _start
_start:
    .cfi_startproc
    .cfi_undefined ra
    csrw mie, zero
    li t0, NCPU
    bgeu a0, t0, park
    /* boot_stacks + (hartid + 1) * BOOT_STACK_SIZE */
    lla sp, boot_stacks
    addi t0, a0, 1
    li t1, BOOT_STACK_SIZE
    mul t0, t0, t1
    add sp, sp, t0
    li fp, 0
    mv s1, a0
    mv s2, a1
    call mstart
    mv a0, s1
    mv a1, s2
    li ra, 0
    mret
park:
    wfi
    j park
    .cfi_endproc

/* The M-mode timer (mtvec): sets the hart's next mtimecmp and raises a supervisor software
 * interrupt, which S-mode takes as its tick (xv6's timervec). mscratch points at this hart's
 * struct mscratch (start.c): three save slots, &mtimecmp, the interval. */
    .text
    .globl timervec
    .type timervec, @function
    .balign 4
timervec:
    csrrw a0, mscratch, a0
    sd a1, 0(a0)
    sd a2, 8(a0)
    sd a3, 16(a0)
    ld a1, 24(a0)
    ld a2, 32(a0)
    ld a3, 0(a1)
    add a3, a3, a2
    sd a3, 0(a1)
    li a1, 2
    csrs mip, a1 /* SSIP */
    ld a3, 16(a0)
    ld a2, 8(a0)
    ld a1, 0(a0)
    csrrw a0, mscratch, a0
    mret
    .size timervec, . - timervec

    .section .bss
    .balign 16
    .globl boot_stacks
boot_stacks: .space BOOT_STACK_SIZE * NCPU
