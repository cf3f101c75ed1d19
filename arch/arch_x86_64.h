/* x86_64 register bits, for the code that decodes an x86_64 register set into struct prof_vcpu
 * (the QMP and gdbstub target backends). Everything else reads prof_arch_x86_64 (arch.h). */
#ifndef PROF_ARCH_X86_64_H
#define PROF_ARCH_X86_64_H

#include "arch.h"

#include <stdint.h>

/* CR3 bits 12..51 hold the top-level table's physical address; the rest are flags and PCID. */
#define X86_CR3_ADDR_MASK UINT64_C(0x000ffffffffff000)
#define X86_CR0_PG        (UINT64_C(1) << 31)
#define X86_CR4_LA57      (UINT64_C(1) << 12)
#define X86_EFER_LMA      (UINT64_C(1) << 10)

#endif
