/* A kernel linked in the low half (at 1 MiB, where a teaching OS's x86_64 kernel runs), for
 * test_session: three functions whose CFI the session's kernel unwind space must find there.
 * kentry calls kmid, which calls kleaf; kentry is the outermost frame (rip undefined). */
    .text
    .globl kentry
    .type kentry, @function
kentry:
    .cfi_startproc
    .cfi_undefined rip
    call kmid
1:  jmp 1b
    .cfi_endproc
    .size kentry, . - kentry

    .globl kmid
    .type kmid, @function
kmid:
    .cfi_startproc
    call kleaf
    ret
    .cfi_endproc
    .size kmid, . - kmid

    .globl kleaf
    .type kleaf, @function
kleaf:
    .cfi_startproc
    nop
    ret
    .cfi_endproc
    .size kleaf, . - kleaf

    .section .note.GNU-stack, "", @progbits
