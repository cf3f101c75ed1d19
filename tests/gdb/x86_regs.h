/* The tests' x86_64 view of a gdbstub regset: every register a fake stub scripts or a real
 * QEMU sends, by the names in its target.xml. qprof itself reads registers through the arch
 * table's names (arch.h); this is the tests' own check of what the stub sent. */
#ifndef TEST_GDB_X86_REGS_H
#define TEST_GDB_X86_REGS_H

#include "gdb.h"

#include <stdbool.h>
#include <stdint.h>

/* The x86_64 view of a regset, by names from the XML. has_* say which optional ones exist. */
struct gdb_x86_regs {
    uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, rsp;
    uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
    uint64_t rip, eflags;
    uint32_t cs, ss, ds, es, fs, gs;
    uint64_t fs_base, gs_base, k_gs_base, cr0, cr3, cr4, efer;
    bool has_fs_base, has_gs_base, has_k_gs_base, has_cr0, has_cr3, has_cr4, has_efer;
};
/* -ENOENT when a general register (rax..r15, rip, eflags, cs) is missing. */
int gdb_x86_regs_from(const gdb_client *c, const struct gdb_regset *r, struct gdb_x86_regs *out,
                      struct qp_error *err);

#endif
