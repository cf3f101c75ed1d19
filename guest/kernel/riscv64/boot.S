/* riscv64 boot: QEMU's `-machine virt -bios none` starts every hart here, in M-mode, at the
 * physical address 0x80000000 (the image's LMA) with a0 = hart ID and a1 = the device tree.
 * M-mode only opens the machine to S-mode (PMP, trap delegation, the time counter, Sstc's
 * stimecmp), loads the kernel's Sv39 root table (boot_root: the image at KERNEL_VMA, the MMIO
 * below 1 GiB at MMIO_VMA, both 1 GiB pages) and mrets into S-mode at the high address: hart 0
 * to kmain(hartid, dtb), the others, once hart 0 lets them go, to ap_main(hartid). The code is
 * position independent (lla), so it runs at its physical address before satp is loaded. */
#include "../../include/layout.h"

#define PTE_V 0x01
#define PTE_R 0x02
#define PTE_W 0x04
#define PTE_X 0x08
#define PTE_G 0x20
#define PTE_A 0x40
#define PTE_D 0x80
#define BOOT_STACK_SIZE 16384

    .section .boot.text, "ax"
    .globl _start
_start:
    .cfi_startproc
    .cfi_undefined ra
    csrw mie, zero
    /* A hart past qprof_abi's 8 slots (and the 8 boot stacks) never leaves M-mode. */
    li t0, 8
    bgeu a0, t0, park
    /* PMP: S and U mode may reach all memory (one NAPOT region over everything). */
    li t0, -1
    srli t0, t0, 10
    csrw pmpaddr0, t0
    li t0, 0x1f
    csrw pmpcfg0, t0
    /* Every exception and every S-mode interrupt goes to S-mode. */
    li t0, 0xffff
    csrw medeleg, t0
    li t0, 0x222
    csrw mideleg, t0
    /* S and U mode may read time; S-mode owns its timer (Sstc: menvcfg.STCE). */
    li t0, 7
    csrw mcounteren, t0
    li t0, 1
    slli t0, t0, 63
    csrs 0x30a, t0 /* menvcfg */
    /* Kernel page tables (the same for every hart: the table is static data). */
    lla t0, boot_root
    srli t0, t0, 12
    li t1, 8 << 60
    or t0, t0, t1
    csrw satp, t0
    sfence.vma
    /* This hart's boot/idle stack: boot_stacks + (hartid + 1) * BOOT_STACK_SIZE, high VA. */
    li t2, KERNEL_VMA - KERNEL_PHYS
    lla sp, boot_stacks
    addi t0, a0, 1
    li t1, BOOT_STACK_SIZE
    mul t0, t0, t1
    add sp, sp, t0
    add sp, sp, t2
    li fp, 0
    mv tp, zero
    bnez a0, 2f
    lla t0, kmain
    j 3f
2:  /* APs wait until hart 0 has set up the kernel (ap_go, read at its physical address). */
    lla t1, ap_go
1:  ld t0, 0(t1)
    beqz t0, 1b
    fence r, rw
    lla t0, ap_main
3:  add t0, t0, t2
    csrw mepc, t0
    li t0, 3 << 11 /* MPP = S */
    csrc mstatus, t0
    li t0, 1 << 11
    csrs mstatus, t0
    mret
park:
    wfi
    j park
    .cfi_endproc

    .section .data
    .balign 4096
    .globl boot_root
boot_root: /* Sv39 root: [508] MMIO 0..1 GiB at MMIO_VMA, [510] RAM at KERNEL_VMA */
    .fill 508, 8, 0
    .quad (0x0 >> 12) << 10 | PTE_V | PTE_R | PTE_W | PTE_G | PTE_A | PTE_D
    .quad 0
    .quad (KERNEL_PHYS >> 12) << 10 | PTE_V | PTE_R | PTE_W | PTE_X | PTE_G | PTE_A | PTE_D
    .quad 0
    .globl ap_go
ap_go: .quad 0

    .section .bss
    .balign 16
    .globl boot_stacks
boot_stacks: .space BOOT_STACK_SIZE * 8
