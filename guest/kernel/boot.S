/* PVH entry: QEMU (-kernel with an ELF carrying a XEN_ELFNOTE_PHYS32_ENTRY note) enters
 * pvh_start in 32-bit protected mode, paging off, with %ebx = physical address of the
 * hvm_start_info. We build page tables (identity + higher half, 2 MiB pages over 1 GiB),
 * enter long mode, jump to the higher half and call kmain(start_info_pa). */
#include "../include/layout.h"

#define PA(x) ((x) - KERNEL_VMA)

    .section .note.Xen, "a", @note
    .balign 4
    .long 4            /* namesz: "Xen\0" */
    .long 8            /* descsz */
    .long 18           /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .balign 4
    .quad PA(pvh_start)

    .section .boot.text, "ax"
    .code32
    .globl pvh_start
pvh_start:
    cli
    mov %ebx, %edi                     /* keep start_info pa (becomes kmain's argument) */
    /* PML4[0] and PML4[511] -> pdpt_low / pdpt_high; both -> pd (2 MiB pages, 1 GiB) */
    mov $PA(boot_pd), %eax
    or $3, %eax
    mov %eax, PA(boot_pdpt_low)
    mov %eax, PA(boot_pdpt_high) + 510 * 8
    mov $PA(boot_pdpt_low), %eax
    or $3, %eax
    mov %eax, PA(boot_pml4)
    mov $PA(boot_pdpt_high), %eax
    or $3, %eax
    mov %eax, PA(boot_pml4) + 511 * 8
    xor %ecx, %ecx
1:  mov %ecx, %eax
    shl $21, %eax
    or $0x83, %eax                     /* present, writable, 2 MiB page */
    mov %eax, PA(boot_pd)(,%ecx,8)
    inc %ecx
    cmp $512, %ecx
    jne 1b

    mov %cr4, %eax
    or $0x20, %eax                     /* PAE */
    mov %eax, %cr4
    mov $PA(boot_pml4), %eax
    mov %eax, %cr3
    mov $0xC0000080, %ecx              /* EFER.LME */
    rdmsr
    or $0x100, %eax
    wrmsr
    mov %cr0, %eax
    or $0x80010001, %eax               /* PG | WP | PE */
    mov %eax, %cr0
    lgdt PA(boot_gdtr)
    ljmp $SEL_KCODE, $PA(long_mode_low)

    .code64
long_mode_low:
    movabs $long_mode_high, %rax
    jmp *%rax

    .text
    .globl _start
_start:
long_mode_high:
    .cfi_startproc
    .cfi_undefined rip
    mov $SEL_KDATA, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    xor %eax, %eax
    mov %ax, %fs
    mov %ax, %gs
    movabs $boot_stack_hi, %rsp
    xor %ebp, %ebp
    /* %rdi: start_info physical address */
    call kmain
2:  hlt
    jmp 2b
    .cfi_endproc

    .section .rodata
    .balign 16
    .globl boot_gdt
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff           /* 0x08 kernel code, 64-bit */
    .quad 0x00cf92000000ffff           /* 0x10 kernel data */
boot_gdt_end:
boot_gdtr:
    .word boot_gdt_end - boot_gdt - 1
    .long PA(boot_gdt)

    .section .bss
    .balign 4096
boot_pml4:      .skip 4096
boot_pdpt_low:  .skip 4096
boot_pdpt_high: .skip 4096
boot_pd:        .skip 4096
    .globl boot_stack_lo, boot_stack_hi, boot_pml4, boot_pdpt_low, boot_pdpt_high
boot_stack_lo:  .skip 16384
boot_stack_hi:
