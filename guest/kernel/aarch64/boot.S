/* aarch64 boot: `qemu-system-aarch64 -machine virt -cpu cortex-a57 -kernel kernel.elf` loads the
 * image at its physical addresses (KERNEL_PHYS) and starts CPU 0 at _start's physical address in
 * EL1 with the MMU off (no firmware; the device tree at the start of RAM). Every CPU loads the
 * same translation (boot_ttbr1_l1: RAM at KERNEL_VMA in 2 MiB blocks, the image's own 2 MiB in 4K
 * pages, and the devices at MMIO_VMA in a 1 GiB block;
 * boot_ttbr0_l1: RAM identity-mapped for EL1, for the instructions that turn the MMU on), turns
 * the MMU on and jumps to the high half: CPU 0 to kmain(0), the others, started by kmain through
 * PSCI CPU_ON (secondary_entry, their index in x0), to ap_main(index). Position independent
 * (adrp) until the jump, since it runs at its physical address. */
#include "../../include/layout.h"

#define BOOT_STACK_SIZE 16384
/* Descriptors of the boot tables (1 GiB blocks at level 1). */
#define BLOCK_NORMAL (0x1 | (0 << 2) | (3 << 8) | (1 << 10))    /* attr 0, inner shareable, AF */
#define BLOCK_DEVICE (0x1 | (1 << 2) | (1 << 10))               /* attr 1, AF */
#define XN_KERNEL    (1 << 54)                                   /* UXN: EL0 never runs it */
#define XN_DEVICE    (3 << 53)                                   /* PXN | UXN */

    /* T0SZ 25, T1SZ 25 (39-bit halves, 3 levels from level 1), TG0 4K, TG1 4K, write-back
       inner shareable walks, IPS 40 bits */
    .equ TCR_VALUE, 25 | (1 << 8) | (1 << 10) | (3 << 12) | (25 << 16) | (1 << 24) | (1 << 26) | (3 << 28) | (2 << 30) | (2 << 32)
    .equ MAIR_VALUE, 0x00ff /* attr 0 normal write-back, attr 1 device nGnRnE */
    .equ SCTLR_VALUE, 0x30d01805 /* RES1 bits, I, C, M */

    .section .boot.text, "ax"
    .globl _start
_start:
    .cfi_startproc
    .cfi_undefined x30
    mov x19, #0
    b 1f
    .globl secondary_entry
secondary_entry:
    mov x19, x0
1:  msr daifset, #0xf
    ldr x0, =MAIR_VALUE
    msr mair_el1, x0
    ldr x0, =TCR_VALUE
    msr tcr_el1, x0
    adrp x0, boot_ttbr0_l1
    msr ttbr0_el1, x0
    adrp x0, boot_ttbr1_l1
    msr ttbr1_el1, x0
    tlbi vmalle1
    dsb nsh
    isb
    ldr x0, =SCTLR_VALUE
    msr sctlr_el1, x0
    isb
    /* This CPU's boot/idle stack: boot_stacks + (index + 1) * BOOT_STACK_SIZE, high VA. */
    ldr x1, =boot_stacks
    add x2, x19, #1
    mov x3, #BOOT_STACK_SIZE
    madd x1, x2, x3, x1
    mov sp, x1
    mov x29, #0
    mov x30, #0
    mov x0, x19
    ldr x1, =kmain
    cbz x19, 2f
    ldr x1, =ap_main
2:  br x1
    .ltorg
    .cfi_endproc

    .section .data
    .balign 4096
    .globl boot_ttbr1_l1
boot_ttbr1_l1: /* [508] the devices (PA 0..1 GiB) at MMIO_VMA, [510] RAM at KERNEL_VMA */
    .fill 508, 8, 0
    .quad 0x0 | BLOCK_DEVICE | XN_DEVICE
    .quad 0
    .quad boot_ttbr1_l2 - KERNEL_VMA + RAM_PHYS + 0x3
    .quad 0
    .balign 4096
boot_ttbr1_l2: /* RAM in 2 MiB blocks, but the image's 2 MiB in pages (mm_init opens one) */
    .quad RAM_PHYS | BLOCK_NORMAL | XN_KERNEL
    .quad boot_ttbr1_l3 - KERNEL_VMA + RAM_PHYS + 0x3
    .set block, 2
    .rept 510
    .quad (RAM_PHYS + block * 0x200000) | BLOCK_NORMAL | XN_KERNEL
    .set block, block + 1
    .endr
    .balign 4096
    .globl boot_ttbr1_l3
boot_ttbr1_l3:
    .set page, 0
    .rept 512
    .quad (KERNEL_PHYS + page * 0x1000) | BLOCK_NORMAL | 0x2 | XN_KERNEL
    .set page, page + 1
    .endr
    .balign 4096
    .globl boot_ttbr0_l1
boot_ttbr0_l1: /* [1] RAM identity-mapped, EL1 only: the idle context's TTBR0 too */
    .quad 0
    .quad RAM_PHYS | BLOCK_NORMAL | XN_KERNEL
    .fill 510, 8, 0

    .section .bss
    .balign 16
    .globl boot_stacks
boot_stacks: .space BOOT_STACK_SIZE * 8
