/* riscv64 trap entry, return to user. Every trap (interrupt, exception,
 * ecall) saves a struct qprof_abi_regs_riscv64 on the kernel stack and calls
 * trap_dispatch(regs).
 *
 * sscratch always holds this hart's struct cpu, and tp holds it in kernel code (its user value
 * is saved in the frame): `csrrw tp, sscratch, tp` gives the entry its struct cpu with no free
 * register. The stack is chosen without a branch (sstatus.SPP indexes cpu->ksp_top, the top of
 * the current process's kernel stack, or cpu->scratch, the interrupted kernel sp). Under TCG a
 * sample stops only at the start of a translation block, and QEMU 7.2 ends one after every CSR
 * access, so the CFI below is exact at every instruction, not only the first.
 *
 * CFI: the entry is a signal frame whose return address column is 64 (DWARF has no number for
 * the pc; 64 is free below GCC's 66 frame registers). Once the frame is saved, column 64 is at
 * the frame's pc slot and x1..x31 at theirs, so an unwinder stepping out of trap_dispatch lands
 * in the interrupted user or kernel context with all its registers. Before that, at the two
 * places a stop can land (the vector, and after its first instruction, which as a CSR write
 * ends a translation block; QEMU 7.2 ends one at every CSR access), the interrupted pc is only
 * in sepc: the CFI says column 64 keeps its value, and qprof seeds column 64 with sepc
 * (unw_regs.trap_pc), so the walk steps into the interrupted context there too. Every other
 * register the unwinder needs is described at every instruction: still live or at its frame
 * slot (the interrupted sp is stored there before sp moves to the frame); tp and t0, parked in
 * sscratch and cpu->t0, are undefined until their slots are written. At sret the return
 * column is undefined. */
#include "../../include/layout.h"

#define FRAME       288 /* sizeof(struct qprof_abi_regs_riscv64) */
#define OFF_STATUS  256
#define OFF_TVAL    264
#define OFF_CAUSE   272
#define CTX_KSP     0   /* struct cpu: ksp_top */
#define CTX_SCRATCH 8   /* struct cpu: scratch */
#define CTX_T0      16  /* struct cpu: t0 */
#define PC_COL      64
#define SPP         (1 << 8)

.macro FRAME_CFI_SAVED /* the frame at sp, x1, x3, x6..x31 in it */
    .cfi_def_cfa sp, FRAME
    .cfi_offset 1, 8 - FRAME
    .cfi_offset 3, 24 - FRAME
    .cfi_offset 6, 48 - FRAME
    .cfi_offset 7, 56 - FRAME
    .cfi_offset 8, 64 - FRAME
    .cfi_offset 9, 72 - FRAME
    .cfi_offset 10, 80 - FRAME
    .cfi_offset 11, 88 - FRAME
    .cfi_offset 12, 96 - FRAME
    .cfi_offset 13, 104 - FRAME
    .cfi_offset 14, 112 - FRAME
    .cfi_offset 15, 120 - FRAME
    .cfi_offset 16, 128 - FRAME
    .cfi_offset 17, 136 - FRAME
    .cfi_offset 18, 144 - FRAME
    .cfi_offset 19, 152 - FRAME
    .cfi_offset 20, 160 - FRAME
    .cfi_offset 21, 168 - FRAME
    .cfi_offset 22, 176 - FRAME
    .cfi_offset 23, 184 - FRAME
    .cfi_offset 24, 192 - FRAME
    .cfi_offset 25, 200 - FRAME
    .cfi_offset 26, 208 - FRAME
    .cfi_offset 27, 216 - FRAME
    .cfi_offset 28, 224 - FRAME
    .cfi_offset 29, 232 - FRAME
    .cfi_offset 30, 240 - FRAME
    .cfi_offset 31, 248 - FRAME
.endm

.macro FRAME_CFI /* the whole frame at sp */
    FRAME_CFI_SAVED
    .cfi_offset 2, 16 - FRAME
    .cfi_offset 4, 32 - FRAME
    .cfi_offset 5, 40 - FRAME
    .cfi_offset PC_COL, -FRAME
.endm

    .text
    .globl trap_entry
    .type trap_entry, @function
    .balign 4
trap_entry:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_return_column PC_COL
    /* nothing saved or changed yet: every register is the interrupted one's, the pc is sepc
       (qprof's column PC_COL) */
    .cfi_def_cfa sp, 0
    .cfi_same_value 1
    .cfi_same_value 2
    .cfi_same_value 3
    .cfi_same_value 4
    .cfi_same_value 5
    .cfi_same_value 6
    .cfi_same_value 7
    .cfi_same_value 8
    .cfi_same_value 9
    .cfi_same_value 10
    .cfi_same_value 11
    .cfi_same_value 12
    .cfi_same_value 13
    .cfi_same_value 14
    .cfi_same_value 15
    .cfi_same_value 16
    .cfi_same_value 17
    .cfi_same_value 18
    .cfi_same_value 19
    .cfi_same_value 20
    .cfi_same_value 21
    .cfi_same_value 22
    .cfi_same_value 23
    .cfi_same_value 24
    .cfi_same_value 25
    .cfi_same_value 26
    .cfi_same_value 27
    .cfi_same_value 28
    .cfi_same_value 29
    .cfi_same_value 30
    .cfi_same_value 31
    .cfi_same_value PC_COL
    csrrw tp, sscratch, tp
    .cfi_undefined 4 /* the interrupted tp is in sscratch now */
    sd sp, CTX_SCRATCH(tp)
    sd t0, CTX_T0(tp)
    csrr t0, sstatus
    .cfi_undefined 5 /* t0 is at cpu->t0 (outside the stack: not needed to unwind) */
    andi t0, t0, SPP
    srli t0, t0, 5 /* 0 from user, 8 from kernel */
    add t0, t0, tp
    ld t0, CTX_KSP(t0) /* cpu->ksp_top, or cpu->scratch: the interrupted sp */
    addi t0, t0, -FRAME
    sd sp, 16(t0)
    mv sp, t0
    .cfi_def_cfa sp, FRAME
    .cfi_offset 2, 16 - FRAME
    sd x1, 8(sp)
    sd x3, 24(sp)
    sd x6, 48(sp)
    sd x7, 56(sp)
    sd x8, 64(sp)
    sd x9, 72(sp)
    sd x10, 80(sp)
    sd x11, 88(sp)
    sd x12, 96(sp)
    sd x13, 104(sp)
    sd x14, 112(sp)
    sd x15, 120(sp)
    sd x16, 128(sp)
    sd x17, 136(sp)
    sd x18, 144(sp)
    sd x19, 152(sp)
    sd x20, 160(sp)
    sd x21, 168(sp)
    sd x22, 176(sp)
    sd x23, 184(sp)
    sd x24, 192(sp)
    sd x25, 200(sp)
    sd x26, 208(sp)
    sd x27, 216(sp)
    sd x28, 224(sp)
    sd x29, 232(sp)
    sd x30, 240(sp)
    sd x31, 248(sp)
    FRAME_CFI_SAVED
    ld t0, CTX_T0(tp)
    sd t0, 40(sp)
    .cfi_offset 5, 40 - FRAME
    csrr t0, sscratch
    sd t0, 32(sp)
    .cfi_offset 4, 32 - FRAME
    csrr t0, sepc
    sd t0, 0(sp)
    .cfi_offset PC_COL, -FRAME
    csrr t0, sstatus
    sd t0, OFF_STATUS(sp)
    csrr t0, stval
    sd t0, OFF_TVAL(sp)
    csrr t0, scause
    sd t0, OFF_CAUSE(sp)
    csrw sscratch, tp
    mv a0, sp
    call trap_dispatch
    /* fall through (a local label: a stack's frame here is named trap_entry) */
.Ltrap_return: /* sp: the frame; interrupts off */
    ld t0, OFF_STATUS(sp)
    csrw sstatus, t0
    ld t1, 0(sp)
    csrw sepc, t1
    andi t0, t0, SPP
    .cfi_remember_state
    bnez t0, 3f
    /* to user: the next trap from user mode starts at this kernel stack's top */
    addi t0, sp, FRAME
    sd t0, CTX_KSP(tp)
    ld x1, 8(sp)
    ld x3, 24(sp)
    ld x5, 40(sp)
    ld x6, 48(sp)
    ld x7, 56(sp)
    ld x8, 64(sp)
    ld x9, 72(sp)
    ld x10, 80(sp)
    ld x11, 88(sp)
    ld x12, 96(sp)
    ld x13, 104(sp)
    ld x14, 112(sp)
    ld x15, 120(sp)
    ld x16, 128(sp)
    ld x17, 136(sp)
    ld x18, 144(sp)
    ld x19, 152(sp)
    ld x20, 160(sp)
    ld x21, 168(sp)
    ld x22, 176(sp)
    ld x23, 184(sp)
    ld x24, 192(sp)
    ld x25, 200(sp)
    ld x26, 208(sp)
    ld x27, 216(sp)
    ld x28, 224(sp)
    ld x29, 232(sp)
    ld x30, 240(sp)
    ld x31, 248(sp)
    ld tp, 32(sp)
    ld sp, 16(sp)
    .cfi_def_cfa sp, 0
    .cfi_undefined PC_COL
    sret
3:  /* to kernel: tp stays this hart's (the context may have moved to another hart) */
    .cfi_restore_state
    ld x1, 8(sp)
    ld x3, 24(sp)
    ld x5, 40(sp)
    ld x6, 48(sp)
    ld x7, 56(sp)
    ld x8, 64(sp)
    ld x9, 72(sp)
    ld x10, 80(sp)
    ld x11, 88(sp)
    ld x12, 96(sp)
    ld x13, 104(sp)
    ld x14, 112(sp)
    ld x15, 120(sp)
    ld x16, 128(sp)
    ld x17, 136(sp)
    ld x18, 144(sp)
    ld x19, 152(sp)
    ld x20, 160(sp)
    ld x21, 168(sp)
    ld x22, 176(sp)
    ld x23, 184(sp)
    ld x24, 192(sp)
    ld x25, 200(sp)
    ld x26, 208(sp)
    ld x27, 216(sp)
    ld x28, 224(sp)
    ld x29, 232(sp)
    ld x30, 240(sp)
    ld x31, 248(sp)
    ld sp, 16(sp)
    .cfi_def_cfa sp, 0
    .cfi_undefined PC_COL
    sret
    .cfi_endproc
    .size trap_entry, . - trap_entry

/* A new process's first kernel code: swtch "returns" here with sp at the user frame the
 * kernel built (proc_spawn). Same CFI as the entry, so its stack unwinds into user _start. */
    .globl proc_first_entry
    .type proc_first_entry, @function
    .balign 4
proc_first_entry:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_return_column PC_COL
    FRAME_CFI
    call sched_unlock
    call abi_return_to_user
    j .Ltrap_return
    .cfi_endproc
    .size proc_first_entry, . - proc_first_entry
