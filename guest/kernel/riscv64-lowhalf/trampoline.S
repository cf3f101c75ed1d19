/* The trampoline page (xv6's): uservec and userret, linked in the kernel's text and mapped at
 * TRAMPOLINE in the kernel's table and in every process's, so that the instructions around the
 * satp switch run at the same address under both. stvec points at uservec (at its TRAMPOLINE
 * address) while a hart runs user code; sscratch is free then and uservec uses it for one
 * register. The kernel's ra and fp start at 0 in usertrap, so an unwind of a kernel stack ends
 * there instead of walking into user values. */
#include "../../include/layout.h"

    .section .trampsec, "ax"
    .balign 4096
    .globl trampoline
trampoline:
    .globl uservec
    .type uservec, @function
    .balign 4
uservec:
    csrw sscratch, a0
    li a0, TRAPFRAME
    sd ra, 40(a0)
    sd sp, 48(a0)
    sd gp, 56(a0)
    sd tp, 64(a0)
    sd t0, 72(a0)
    sd t1, 80(a0)
    sd t2, 88(a0)
    sd s0, 96(a0)
    sd s1, 104(a0)
    sd a1, 120(a0)
    sd a2, 128(a0)
    sd a3, 136(a0)
    sd a4, 144(a0)
    sd a5, 152(a0)
    sd a6, 160(a0)
    sd a7, 168(a0)
    sd s2, 176(a0)
    sd s3, 184(a0)
    sd s4, 192(a0)
    sd s5, 200(a0)
    sd s6, 208(a0)
    sd s7, 216(a0)
    sd s8, 224(a0)
    sd s9, 232(a0)
    sd s10, 240(a0)
    sd s11, 248(a0)
    sd t3, 256(a0)
    sd t4, 264(a0)
    sd t5, 272(a0)
    sd t6, 280(a0)
    csrr t0, sscratch
    sd t0, 112(a0)
    csrr t0, sepc
    sd t0, 24(a0)
    ld sp, 8(a0)  /* kernel_sp */
    ld tp, 32(a0) /* kernel_tp */
    ld t0, 16(a0) /* kernel_trap: usertrap */
    ld t1, 0(a0)  /* kernel_satp */
    li ra, 0
    li fp, 0
    sfence.vma zero, zero
    csrw satp, t1
    sfence.vma zero, zero
    jr t0
    .size uservec, . - uservec

/* userret(satp): from usertrapret, on the kernel's table: switches to the process's table and
 * returns to user mode with the registers of its trapframe (sepc and sstatus already set). */
    .globl userret
    .type userret, @function
    .balign 4
userret:
    sfence.vma zero, zero
    csrw satp, a0
    sfence.vma zero, zero
    li a0, TRAPFRAME
    ld ra, 40(a0)
    ld sp, 48(a0)
    ld gp, 56(a0)
    ld tp, 64(a0)
    ld t0, 72(a0)
    ld t1, 80(a0)
    ld t2, 88(a0)
    ld s0, 96(a0)
    ld s1, 104(a0)
    ld a1, 120(a0)
    ld a2, 128(a0)
    ld a3, 136(a0)
    ld a4, 144(a0)
    ld a5, 152(a0)
    ld a6, 160(a0)
    ld a7, 168(a0)
    ld s2, 176(a0)
    ld s3, 184(a0)
    ld s4, 192(a0)
    ld s5, 200(a0)
    ld s6, 208(a0)
    ld s7, 216(a0)
    ld s8, 224(a0)
    ld s9, 232(a0)
    ld s10, 240(a0)
    ld s11, 248(a0)
    ld t3, 256(a0)
    ld t4, 264(a0)
    ld t5, 272(a0)
    ld t6, 280(a0)
    ld a0, 112(a0)
    sret
    .size userret, . - userret
