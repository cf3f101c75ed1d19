/* aarch64 user entry: the outermost frame (.cfi_undefined x30 ends every unwind here). */
#include "../../include/layout.h"

    .text
    .globl _start
    .type _start, @function
_start:
    .cfi_startproc
    .cfi_undefined x30
    mov x29, #0
    bl main
    mov x8, #SYS_EXIT
    svc #0
    udf #0
    .cfi_endproc
    .size _start, . - _start
