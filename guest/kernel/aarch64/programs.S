/* The user programs, embedded in the kernel image (-Wa,-I names the directory of the riscv64
 * builds of user/spin and user/sys). */
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
