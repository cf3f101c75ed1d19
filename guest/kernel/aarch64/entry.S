/* aarch64 exception vectors, entry, return, context switch. Every exception (svc, the timer's
 * interrupt, a fault) saves a struct qprof_abi_regs_aarch64 on the kernel stack and calls
 * trap_dispatch(regs).
 *
 * Stacks: an entry from EL0 finds SP_EL1 at the current process's frame, the top FRAME bytes of
 * its kernel stack (a return to EL0 leaves SP_EL1 there, a new process's first return too), and
 * saves there; an entry from EL1 moves sp down by FRAME and saves below the interrupted frame.
 *
 * CFI: under TCG a stop lands on the start of a translation block; each vector stub is one, so
 * of a stub only its first instruction has CFI (VECTOR_FIRST_CFI, with the interrupted pc and
 * EL0 sp in the system registers qprof seeds as columns 64 and 65), the rest none: a stop there
 * ends its stack marked truncated. trap_entry and every
 * instruction after it (the return to either level included: the frame stays intact until
 * eret, below sp on the way back to EL1 with interrupts masked) describe a signal frame whose
 * return address column is PC_COL, the frame's pc slot, and x0..x30 and sp at theirs, so an
 * unwinder stepping out of trap_dispatch lands in the interrupted EL0 or EL1 context with all its
 * registers. Column 32 is the pc's slot in qprof's registers; DWARF for AArch64 reserves it. */
#define FRAME      288 /* sizeof(struct qprof_abi_regs_aarch64) */
#define OFF_SP     248
#define OFF_PC     256
#define OFF_PSTATE 264
#define OFF_ESR    272
#define OFF_FAR    280
#define PC_COL     32
#define TRAP_PC_COL 64 /* qprof seeds it with ELR_EL1 (unwind.h's UNW_TRAP_PC_COLUMN) */
#define TRAP_SP_COL 65 /* and this with SP_EL0 (UNW_TRAP_SP_COLUMN) */
#define CPU_NEXT_TTBR0 0 /* offsetof(struct cpu, next_ttbr0), checked in a64.h */

.macro FRAME_CFI /* the whole frame at sp */
    .cfi_def_cfa sp, FRAME
    .cfi_offset 0, 0-FRAME
    .cfi_offset 1, 8-FRAME
    .cfi_offset 2, 16-FRAME
    .cfi_offset 3, 24-FRAME
    .cfi_offset 4, 32-FRAME
    .cfi_offset 5, 40-FRAME
    .cfi_offset 6, 48-FRAME
    .cfi_offset 7, 56-FRAME
    .cfi_offset 8, 64-FRAME
    .cfi_offset 9, 72-FRAME
    .cfi_offset 10, 80-FRAME
    .cfi_offset 11, 88-FRAME
    .cfi_offset 12, 96-FRAME
    .cfi_offset 13, 104-FRAME
    .cfi_offset 14, 112-FRAME
    .cfi_offset 15, 120-FRAME
    .cfi_offset 16, 128-FRAME
    .cfi_offset 17, 136-FRAME
    .cfi_offset 18, 144-FRAME
    .cfi_offset 19, 152-FRAME
    .cfi_offset 20, 160-FRAME
    .cfi_offset 21, 168-FRAME
    .cfi_offset 22, 176-FRAME
    .cfi_offset 23, 184-FRAME
    .cfi_offset 24, 192-FRAME
    .cfi_offset 25, 200-FRAME
    .cfi_offset 26, 208-FRAME
    .cfi_offset 27, 216-FRAME
    .cfi_offset 28, 224-FRAME
    .cfi_offset 29, 232-FRAME
    .cfi_offset 30, 240-FRAME
    .cfi_offset 31, 248-FRAME
    .cfi_offset PC_COL, 256-FRAME
.endm

/* The CFI of a vector stub's first instruction, the one place in a stub where a stop lands
 * (each stub is one translation block): nothing saved or changed yet, every x register the
 * interrupted one's, the pc in ELR_EL1 (qprof's column TRAP_PC_COL) and, from EL0, the sp in
 * SP_EL0 (column TRAP_SP_COL). The rest of the stub has none. */
.macro VECTOR_FIRST_CFI el
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_return_column TRAP_PC_COL
    .cfi_def_cfa sp, 0
    .cfi_same_value 0
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
.if \el == 0
    .cfi_register 31, TRAP_SP_COL
.else
    .cfi_same_value 31
.endif
    .cfi_same_value TRAP_PC_COL
.endm

/* Each stub a function symbol of its own (128 bytes), so that a stack that stops in one names
 * it, and qprof counts stops on a kernel entry's first instruction. */
.macro VECTOR_NAME name
    .type \name, @function
    .size \name, 128
\name:
.endm

/* x0..x30 at sp; then the interrupted sp, pc, pstate, esr (~0 for an interrupt) and far. */
.macro SAVE_FRAME el, irq
.if \el == 0
    VECTOR_FIRST_CFI 0
    stp x0, x1, [sp, #0]
    .cfi_endproc
.else
    stp x0, x1, [sp, #0]
.endif
    stp x2, x3, [sp, #16]
    stp x4, x5, [sp, #32]
    stp x6, x7, [sp, #48]
    stp x8, x9, [sp, #64]
    stp x10, x11, [sp, #80]
    stp x12, x13, [sp, #96]
    stp x14, x15, [sp, #112]
    stp x16, x17, [sp, #128]
    stp x18, x19, [sp, #144]
    stp x20, x21, [sp, #160]
    stp x22, x23, [sp, #176]
    stp x24, x25, [sp, #192]
    stp x26, x27, [sp, #208]
    stp x28, x29, [sp, #224]
    str x30, [sp, #240]
.if \el == 0
    mrs x0, sp_el0
.else
    add x0, sp, #FRAME
.endif
    mrs x1, elr_el1
    stp x0, x1, [sp, #OFF_SP]
    mrs x0, spsr_el1
.if \irq
    mov x1, #-1
.else
    mrs x1, esr_el1
.endif
    stp x0, x1, [sp, #OFF_PSTATE]
    mrs x0, far_el1
    str x0, [sp, #OFF_FAR]
    b trap_entry
.endm

    .section .text.vectors, "ax"
    .balign 2048
    .globl vectors
vectors: /* .org: each stub must fit its 128 bytes (the assembler refuses to move backwards) */
    /* current EL with SP_EL0: never used (the kernel always runs on SP_EL1) */
    .org vectors + 0x000
    b .
    .org vectors + 0x080
    b .
    .org vectors + 0x100
    b .
    .org vectors + 0x180
    b .
    /* current EL with SP_ELx: sync, IRQ, FIQ, SError */
    .org vectors + 0x200
    VECTOR_NAME el1_sync_vector
    VECTOR_FIRST_CFI 1
    sub sp, sp, #FRAME
    .cfi_endproc
    SAVE_FRAME 1, 0
    .org vectors + 0x280
    VECTOR_NAME el1_irq_vector
    VECTOR_FIRST_CFI 1
    sub sp, sp, #FRAME
    .cfi_endproc
    SAVE_FRAME 1, 1
    .org vectors + 0x300
    b .
    .org vectors + 0x380
    b .
    /* lower EL, AArch64: sync, IRQ, FIQ, SError */
    .org vectors + 0x400
    VECTOR_NAME el0_sync_vector
    SAVE_FRAME 0, 0
    .org vectors + 0x480
    VECTOR_NAME el0_irq_vector
    SAVE_FRAME 0, 1
    .org vectors + 0x500
    b .
    .org vectors + 0x580
    b .
    /* lower EL, AArch32: never used */
    .org vectors + 0x600
    b .
    .org vectors + 0x680
    b .
    .org vectors + 0x700
    b .
    .org vectors + 0x780
    b .
    .org vectors + 0x800

    .text
    .globl trap_entry
    .type trap_entry, @function
    .balign 4
trap_entry:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_return_column PC_COL
    FRAME_CFI
    mov x29, #0 /* the kernel's frame chain starts here */
    mov x0, sp
    bl trap_dispatch
    /* fall through (a local label: a stack's frame here is named trap_entry) */
.Ltrap_return: /* sp: the frame; interrupts masked */
    ldp x0, x1, [sp, #OFF_PC]
    msr elr_el1, x0
    msr spsr_el1, x1
    tst x1, #0xf /* M[3:0]: 0 is EL0t */
    b.ne 1f
    /* to EL0: SP_EL1 stays at this frame, where the next entry from EL0 saves */
    ldr x0, [sp, #OFF_SP]
    msr sp_el0, x0
    ldp x0, x1, [sp, #0]
    ldp x2, x3, [sp, #16]
    ldp x4, x5, [sp, #32]
    ldp x6, x7, [sp, #48]
    ldp x8, x9, [sp, #64]
    ldp x10, x11, [sp, #80]
    ldp x12, x13, [sp, #96]
    ldp x14, x15, [sp, #112]
    ldp x16, x17, [sp, #128]
    ldp x18, x19, [sp, #144]
    ldp x20, x21, [sp, #160]
    ldp x22, x23, [sp, #176]
    ldp x24, x25, [sp, #192]
    ldp x26, x27, [sp, #208]
    ldp x28, x29, [sp, #224]
    ldr x30, [sp, #240]
    eret
1:  /* to EL1: sp back above the frame first; the frame stays intact below it until eret */
    add sp, sp, #FRAME
    .cfi_def_cfa sp, 0
    ldp x0, x1, [sp, #-288]
    ldp x2, x3, [sp, #-272]
    ldp x4, x5, [sp, #-256]
    ldp x6, x7, [sp, #-240]
    ldp x8, x9, [sp, #-224]
    ldp x10, x11, [sp, #-208]
    ldp x12, x13, [sp, #-192]
    ldp x14, x15, [sp, #-176]
    ldp x16, x17, [sp, #-160]
    ldp x18, x19, [sp, #-144]
    ldp x20, x21, [sp, #-128]
    ldp x22, x23, [sp, #-112]
    ldp x24, x25, [sp, #-96]
    ldp x26, x27, [sp, #-80]
    ldp x28, x29, [sp, #-64]
    ldr x30, [sp, #-48]
    eret
    .cfi_endproc
    .size trap_entry, . - trap_entry

/* A new process's first kernel code: swtch "returns" here with sp at the user frame the kernel
 * built (proc_init_frames). Same CFI as the entry, so its stack unwinds into user _start. */
    .globl proc_first_entry
    .type proc_first_entry, @function
    .balign 4
proc_first_entry:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_return_column PC_COL
    FRAME_CFI
    bl sched_unlock
    bl abi_return_to_user
    b .Ltrap_return
    .cfi_endproc
    .size proc_first_entry, . - proc_first_entry

/* void swtch(uint64_t *old_ksp, uint64_t new_ksp): saves x19..x30 on the old stack, loads
 * TTBR0_EL1 with the next context's (cpu->next_ttbr0, a64.h's arch_switch_space), then moves to
 * the new stack. */
    .globl swtch
    .type swtch, @function
    .balign 4
swtch:
    .cfi_startproc
    stp x29, x30, [sp, #-96]!
    .cfi_def_cfa_offset 96
    .cfi_offset x29, -96
    .cfi_offset x30, -88
    stp x19, x20, [sp, #16]
    stp x21, x22, [sp, #32]
    stp x23, x24, [sp, #48]
    stp x25, x26, [sp, #64]
    stp x27, x28, [sp, #80]
    mov x9, sp
    str x9, [x0]
    mrs x9, tpidr_el1
    ldr x9, [x9, #CPU_NEXT_TTBR0]
    msr ttbr0_el1, x9
    isb
    tlbi vmalle1
    dsb nsh
    isb
    mov sp, x1
    ldp x19, x20, [sp, #16]
    ldp x21, x22, [sp, #32]
    ldp x23, x24, [sp, #48]
    ldp x25, x26, [sp, #64]
    ldp x27, x28, [sp, #80]
    ldp x29, x30, [sp], #96
    .cfi_def_cfa_offset 0
    .cfi_restore x29
    .cfi_restore x30
    ret
    .cfi_endproc
    .size swtch, . - swtch
