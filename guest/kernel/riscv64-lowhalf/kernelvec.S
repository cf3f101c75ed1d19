/* Traps taken in S-mode (stvec while a hart runs kernel code) and a new
 * process's first kernel code.
 *
 * kernelvec saves the interrupted registers on the current kernel stack (a process's, or the
 * hart's boot stack when idle), calls kerneltrap() and returns with sret. tp is not restored:
 * the context may have moved to another hart meanwhile, and tp names the hart.
 *
 * CFI: a signal frame whose return column is 64 (DWARF has no number for the pc; the demo
 * kernel's entry.S uses the same column, and qprof seeds it with sepc). At the vector nothing
 * is saved yet (every register keeps its value, the pc is in sepc); once the frame is stored,
 * column 64 is at the sepc slot and every register at its slot, so an unwinder steps from
 * kerneltrap into the interrupted kernel code. */
#define FRAME   272 /* x1..x31 at 8 * (n - 1) + 8, sepc at 0; 16-aligned */
#define PC_COL  64

    .text
    .globl kernelvec
    .type kernelvec, @function
    .balign 4
kernelvec:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_return_column PC_COL
    .cfi_def_cfa sp, 0
    .cfi_same_value 1
    .cfi_same_value 8
    .cfi_same_value PC_COL
    addi sp, sp, -FRAME
    .cfi_def_cfa_offset FRAME
    sd x1, 8(sp)
    sd x3, 24(sp)
    sd x4, 32(sp)
    sd x5, 40(sp)
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
    .cfi_offset 1, 8 - FRAME
    .cfi_offset 8, 64 - FRAME
    .cfi_offset 9, 72 - FRAME
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
    csrr t0, sepc
    sd t0, 0(sp)
    .cfi_offset PC_COL, -FRAME
    call kerneltrap
    ld t0, 0(sp)
    csrw sepc, t0
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
    addi sp, sp, FRAME
    .cfi_def_cfa_offset 0
    .cfi_undefined PC_COL
    sret
    .cfi_endproc
    .size kernelvec, . - kernelvec

/* A new process's first kernel code: swtch "returns" here on its fresh kernel stack (sched.c
 * holds sched_lock across swtch); the outermost frame of that stack. */
    .globl proc_first_entry
    .type proc_first_entry, @function
    .balign 4
proc_first_entry:
    .cfi_startproc
    .cfi_undefined ra
    call sched_unlock
    call usertrapret
    .cfi_endproc
    .size proc_first_entry, . - proc_first_entry
