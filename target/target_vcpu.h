/* Private to the target backends that read registers by name (target_gdb.c by the gdbstub's
 * target.xml, target_qmp.c by QEMU's monitor text for an architecture arch/ parses): one
 * struct prof_vcpu from an architecture's register table, so that every transport fills it the
 * same way. */
#ifndef PROF_TARGET_VCPU_H
#define PROF_TARGET_VCPU_H

#include "arch.h"
#include "target.h"

/* Fills v's general registers (a->gdb_regs), pc, sp, privilege, user, paging64, as_root, mmu,
 * trap pc, unwalkable and per-CPU base (a->cpu_state) from get; clears the rest, which the
 * caller sets (index, halted, target_cpu). 0, or negative with a one-line message naming a missing
 * register. */
int target_vcpu_from_regs(const struct prof_arch *a, prof_arch_reg_fn get, void *ctx,
                          struct prof_vcpu *v, struct qp_error *err);

/* The same from QEMU's monitor text (the QMP target): with a->monitor_cpu_state when the table
 * has one (aarch64, whose text lacks the translation registers), else a->cpu_state. */
int target_vcpu_from_monitor(const struct prof_arch *a, prof_arch_reg_fn get, void *ctx,
                             struct prof_vcpu *v, struct qp_error *err);

#endif
