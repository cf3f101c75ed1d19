/* riscv64 user entry: the outermost frame (.cfi_undefined ra ends every unwind here). */
#include "../../include/layout.h"

    .text
    .globl _start
    .type _start, @function
_start:
    .cfi_startproc
    .cfi_undefined ra
    li fp, 0
    call main
    li a7, SYS_EXIT
    ecall
    unimp
    .cfi_endproc
    .size _start, . - _start
