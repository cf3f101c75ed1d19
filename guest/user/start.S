/* User entry: the outermost frame (.cfi_undefined rip ends every unwind here). */
#include "../include/layout.h"

    .text
    .globl _start
    .type _start, @function
_start:
    .cfi_startproc
    .cfi_undefined rip
    xor %ebp, %ebp
    call main
    mov %eax, %edi
    mov $SYS_EXIT, %eax
    int $0x80
    ud2
    .cfi_endproc
    .size _start, . - _start
