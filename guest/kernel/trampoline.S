/* Application-processor start-up. smp.c copies trampoline_start..trampoline_end to physical
 * TRAMP_PA (below 1 MiB, page aligned) and sends INIT-SIPI-SIPI with vector TRAMP_PA >> 12; the
 * AP starts there in real mode, enters protected mode and long mode with the trampoline page
 * tables (identity map of the first 1 GiB plus the kernel half), checks that the parameters
 * are meant for it (its APIC ID), and jumps to ap_start64 in the higher half on its own stack.
 * The code is assembled for TRAMP_PA (TR()); it never runs at its link address. */
#include "../include/layout.h"

#define TRAMP_PA 0x8000
#define TR(x) ((x) - trampoline_start + TRAMP_PA)

    .section .rodata.trampoline, "a"
    .balign 16
    .globl trampoline_start, trampoline_end
    .globl tramp_cr3, tramp_stack, tramp_entry, tramp_cpu
    .code16
trampoline_start:
    cli
    cld
    xor %ax, %ax
    mov %ax, %ds
    lgdtl TR(tramp_gdtr)
    mov %cr0, %eax
    or $1, %eax                        /* PE */
    mov %eax, %cr0
    ljmpl $0x08, $TR(tramp32)

    .code32
tramp32:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov %cr4, %eax
    or $0x20, %eax                     /* PAE */
    mov %eax, %cr4
    mov TR(tramp_cr3), %eax
    mov %eax, %cr3
    mov $0xC0000080, %ecx              /* EFER.LME */
    rdmsr
    or $0x100, %eax
    wrmsr
    mov %cr0, %eax
    or $0x80010001, %eax               /* PG | WP | PE */
    mov %eax, %cr0
    ljmp $0x18, $TR(tramp64)

    .code64
tramp64:
    mov $1, %eax                       /* CPUID.1:EBX[31:24] = initial APIC ID */
    cpuid
    shr $24, %ebx
    cmp TR(tramp_cpu), %ebx            /* parameters for another AP (one that was late): halt */
    jne tramp_halt
    mov TR(tramp_stack), %rsp
    mov %ebx, %edi
    mov TR(tramp_entry), %rax
    jmp *%rax
tramp_halt:
    cli
    hlt
    jmp tramp_halt

    .balign 8
tramp_gdt:
    .quad 0
    .quad 0x00cf9a000000ffff           /* 0x08 32-bit code */
    .quad 0x00cf92000000ffff           /* 0x10 data */
    .quad 0x00af9a000000ffff           /* 0x18 64-bit code */
tramp_gdt_end:
tramp_gdtr:
    .word tramp_gdt_end - tramp_gdt - 1
    .long TR(tramp_gdt)
    .balign 8
tramp_cr3:   .quad 0                   /* physical address of the trampoline PML4 (< 4 GiB) */
tramp_stack: .quad 0                   /* the AP's idle stack top (kernel VA) */
tramp_entry: .quad 0                   /* ap_start64 */
tramp_cpu:   .quad 0                   /* APIC ID of the AP these parameters are for */
trampoline_end:

/* First higher-half code of an AP, on its idle stack: the outermost frame of every AP stack
 * (ap_start64 -> ap_main -> idle_loop), so it ends unwinding like _start does. */
    .text
    .globl ap_start64
    .type ap_start64, @function
ap_start64:
    .cfi_startproc
    .cfi_undefined rip
    xor %ebp, %ebp
    call ap_main                       /* %edi: APIC ID */
1:  hlt
    jmp 1b
    .cfi_endproc
    .size ap_start64, . - ap_start64
