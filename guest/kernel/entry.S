/* Interrupt, exception and system-call entry. Every entry saves a struct qprof_abi_regs
 * (include/qprof/guest_abi.h) on the kernel stack and calls isr_dispatch(regs).
 *
 * CFI: the stubs are signal frames (.cfi_signal_frame). The CFA is the address just above the
 * hardware iretq frame (&regs->ss + 8); rip and rsp of the interrupted context are at CFA-40
 * and CFA-16, and every general-purpose register at its slot in struct qprof_abi_regs, so an
 * unwinder stepping out of isr_dispatch lands in the interrupted (user or kernel) context. */
#include "../include/layout.h"

/* struct qprof_abi_regs is 22 quadwords; CFA = base + 176; slot i is at CFA - 176 + 8*i. */
#define REGS_SIZE 176

.macro IRET_FRAME_CFI
    .cfi_offset rip, -40
    .cfi_offset rsp, -16
.endm

.macro ISR_NOERR n
    .globl isr\n
    .type isr\n, @function
isr\n:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_def_cfa rsp, 40
    IRET_FRAME_CFI
    pushq $0
    .cfi_adjust_cfa_offset 8
    pushq $\n
    .cfi_adjust_cfa_offset 8
    jmp isr_common
    .cfi_endproc
    .size isr\n, . - isr\n
.endm

.macro ISR_ERR n
    .globl isr\n
    .type isr\n, @function
isr\n:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_def_cfa rsp, 48
    IRET_FRAME_CFI
    pushq $\n
    .cfi_adjust_cfa_offset 8
    jmp isr_common
    .cfi_endproc
    .size isr\n, . - isr\n
.endm

    .text
ISR_NOERR 0
ISR_NOERR 1
ISR_NOERR 2
ISR_NOERR 3
ISR_NOERR 4
ISR_NOERR 5
ISR_NOERR 6
ISR_NOERR 7
ISR_ERR   8
ISR_NOERR 9
ISR_ERR   10
ISR_ERR   11
ISR_ERR   12
ISR_ERR   13
ISR_ERR   14
ISR_NOERR 15
ISR_NOERR 16
ISR_ERR   17
ISR_NOERR 18
ISR_NOERR 19
ISR_NOERR 20
ISR_ERR   21
ISR_NOERR 22
ISR_NOERR 23
ISR_NOERR 24
ISR_NOERR 25
ISR_NOERR 26
ISR_NOERR 27
ISR_NOERR 28
ISR_ERR   29
ISR_ERR   30
ISR_NOERR 31
ISR_NOERR 32
ISR_NOERR 33
ISR_NOERR 34
ISR_NOERR 35
ISR_NOERR 36
ISR_NOERR 37
ISR_NOERR 38
ISR_NOERR 39
ISR_NOERR 40
ISR_NOERR 41
ISR_NOERR 42
ISR_NOERR 43
ISR_NOERR 44
ISR_NOERR 45
ISR_NOERR 46
ISR_NOERR 47
    .irp n, 48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63
ISR_NOERR \n
    .endr
ISR_NOERR 128

/* Common path: rsp points at the vector slot; push the general registers in reverse order of
 * struct qprof_abi_regs so that rsp ends at its first field (r15). */
    .globl isr_common
    .type isr_common, @function
isr_common:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_def_cfa rsp, 56
    IRET_FRAME_CFI
    pushq %rax
    .cfi_adjust_cfa_offset 8
    .cfi_offset rax, -64
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_offset rbx, -72
    pushq %rcx
    .cfi_adjust_cfa_offset 8
    .cfi_offset rcx, -80
    pushq %rdx
    .cfi_adjust_cfa_offset 8
    .cfi_offset rdx, -88
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    .cfi_offset rsi, -96
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    .cfi_offset rdi, -104
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_offset rbp, -112
    pushq %r8
    .cfi_adjust_cfa_offset 8
    .cfi_offset r8, -120
    pushq %r9
    .cfi_adjust_cfa_offset 8
    .cfi_offset r9, -128
    pushq %r10
    .cfi_adjust_cfa_offset 8
    .cfi_offset r10, -136
    pushq %r11
    .cfi_adjust_cfa_offset 8
    .cfi_offset r11, -144
    pushq %r12
    .cfi_adjust_cfa_offset 8
    .cfi_offset r12, -152
    pushq %r13
    .cfi_adjust_cfa_offset 8
    .cfi_offset r13, -160
    pushq %r14
    .cfi_adjust_cfa_offset 8
    .cfi_offset r14, -168
    pushq %r15
    .cfi_adjust_cfa_offset 8
    .cfi_offset r15, -176
    cld
    mov %rsp, %rdi
    xor %ebp, %ebp            /* frame-pointer chains end here; CFI carries on */
    call isr_dispatch
    /* A new process starts here too (proc_first_entry), with rsp at its initial frame. */
    .globl isr_return
isr_return:
    popq %r15
    .cfi_adjust_cfa_offset -8
    popq %r14
    .cfi_adjust_cfa_offset -8
    popq %r13
    .cfi_adjust_cfa_offset -8
    popq %r12
    .cfi_adjust_cfa_offset -8
    popq %r11
    .cfi_adjust_cfa_offset -8
    popq %r10
    .cfi_adjust_cfa_offset -8
    popq %r9
    .cfi_adjust_cfa_offset -8
    popq %r8
    .cfi_adjust_cfa_offset -8
    popq %rbp
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdx
    .cfi_adjust_cfa_offset -8
    popq %rcx
    .cfi_adjust_cfa_offset -8
    popq %rbx
    .cfi_adjust_cfa_offset -8
    popq %rax
    .cfi_adjust_cfa_offset -8
    add $16, %rsp             /* vector, error code */
    .cfi_adjust_cfa_offset -16
    iretq
    .cfi_endproc
    .size isr_common, . - isr_common

/* First code a new process runs in the kernel: swtch "returns" here with rsp at the initial
 * struct qprof_abi_regs built by proc_spawn; it leaves through the normal exit path. */
    .globl proc_first_entry
    .type proc_first_entry, @function
proc_first_entry:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_def_cfa rsp, REGS_SIZE
    IRET_FRAME_CFI
    call sched_unlock        /* the lock schedule() took on the CPU that switched here */
    call abi_return_to_user
    jmp isr_return
    .cfi_endproc
    .size proc_first_entry, . - proc_first_entry

/* void swtch(uint64_t *old_ksp, uint64_t new_ksp): saves callee-saved registers on the
 * current kernel stack, stores rsp in *old_ksp, continues on new_ksp. */
    .globl swtch
    .type swtch, @function
swtch:
    .cfi_startproc
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_offset rbp, -16
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_offset rbx, -24
    pushq %r12
    .cfi_adjust_cfa_offset 8
    .cfi_offset r12, -32
    pushq %r13
    .cfi_adjust_cfa_offset 8
    .cfi_offset r13, -40
    pushq %r14
    .cfi_adjust_cfa_offset 8
    .cfi_offset r14, -48
    pushq %r15
    .cfi_adjust_cfa_offset 8
    .cfi_offset r15, -56
    mov %rsp, (%rdi)
    mov %rsi, %rsp
    popq %r15
    .cfi_adjust_cfa_offset -8
    popq %r14
    .cfi_adjust_cfa_offset -8
    popq %r13
    .cfi_adjust_cfa_offset -8
    popq %r12
    .cfi_adjust_cfa_offset -8
    popq %rbx
    .cfi_adjust_cfa_offset -8
    popq %rbp
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .size swtch, . - swtch

/* Table of stub addresses for the IDT (vectors 0..63); vector 0x80 is isr128. */
    .section .rodata
    .balign 8
    .globl isr_table
isr_table:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63
    .quad isr\n
    .endr
