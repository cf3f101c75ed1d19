/* The user programs, embedded in the kernel image. The build passes -Wa,-I<dir> where <dir>
 * holds the static ELF files (user/ for kernel.elf, user-nofp/ for kernel-nofp.elf). */
    .section .programs, "a"
    .balign 16
    .globl prog_spin_start, prog_spin_end
prog_spin_start:
    .incbin "spin"
prog_spin_end:
    .balign 16
    .globl prog_sys_start, prog_sys_end
prog_sys_start:
    .incbin "sys"
prog_sys_end:
    .balign 16
    .globl prog_spin_pie_start, prog_spin_pie_end
prog_spin_pie_start:
    .incbin "spin-pie"
prog_spin_pie_end:
