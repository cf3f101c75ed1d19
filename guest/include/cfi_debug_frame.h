/* Force-included (-include) into every source of the demo guest's dframe variant: the
 * hand-written assembler's .cfi_* directives go to .debug_frame instead of .eh_frame, as GCC
 * already does for C built -g without unwind tables. Nothing for C. */
#ifndef QPROF_GUEST_CFI_DEBUG_FRAME_H
#define QPROF_GUEST_CFI_DEBUG_FRAME_H
#ifdef __ASSEMBLER__
.cfi_sections .debug_frame
#endif
#endif
