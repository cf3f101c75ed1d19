/* riscv64 demo kernels (kernel/riscv64/ and kernel/riscv64-lowhalf/): the context switch both
 * share. The callee-saved registers go on the old kernel stack; its CFI lets qprof unwind a
 * switched-out process's kernel stack. */
    .text

/* void swtch(uint64_t *old_ksp, uint64_t new_ksp): saves ra and s0..s11 on the old stack. */
    .globl swtch
    .type swtch, @function
    .balign 4
swtch:
    .cfi_startproc
    addi sp, sp, -112
    .cfi_def_cfa_offset 112
    sd ra, 104(sp)
    .cfi_offset ra, -8
    sd s0, 96(sp)
    .cfi_offset s0, -16
    sd s1, 88(sp)
    sd s2, 80(sp)
    sd s3, 72(sp)
    sd s4, 64(sp)
    sd s5, 56(sp)
    sd s6, 48(sp)
    sd s7, 40(sp)
    sd s8, 32(sp)
    sd s9, 24(sp)
    sd s10, 16(sp)
    sd s11, 8(sp)
    sd sp, 0(a0)
    mv sp, a1
    ld ra, 104(sp)
    ld s0, 96(sp)
    ld s1, 88(sp)
    ld s2, 80(sp)
    ld s3, 72(sp)
    ld s4, 64(sp)
    ld s5, 56(sp)
    ld s6, 48(sp)
    ld s7, 40(sp)
    ld s8, 32(sp)
    ld s9, 24(sp)
    ld s10, 16(sp)
    ld s11, 8(sp)
    addi sp, sp, 112
    .cfi_def_cfa_offset 0
    ret
    .cfi_endproc
    .size swtch, . - swtch
