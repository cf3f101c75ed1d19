/* See x86_regs.h. */
#include "x86_regs.h"

#include <errno.h>
#include <string.h>

int gdb_x86_regs_from(const gdb_client *c, const struct gdb_regset *r, struct gdb_x86_regs *o,
                      struct qp_error *err)
{
    memset(o, 0, sizeof *o);
    struct {
        const char *name;
        uint64_t *v;
    } gen[] = {{"rax", &o->rax}, {"rbx", &o->rbx},      {"rcx", &o->rcx}, {"rdx", &o->rdx},
               {"rsi", &o->rsi}, {"rdi", &o->rdi},      {"rbp", &o->rbp}, {"rsp", &o->rsp},
               {"r8", &o->r8},   {"r9", &o->r9},        {"r10", &o->r10}, {"r11", &o->r11},
               {"r12", &o->r12}, {"r13", &o->r13},      {"r14", &o->r14}, {"r15", &o->r15},
               {"rip", &o->rip}, {"eflags", &o->eflags}};
    for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++)
        if (gdb_reg_get(c, r, gen[i].name, gen[i].v) < 0)
            return qp_error_set(err, -ENOENT, "the target has no readable register %s",
                                gen[i].name);
    struct {
        const char *name;
        uint32_t *v;
    } seg[] = {{"cs", &o->cs}, {"ss", &o->ss}, {"ds", &o->ds},
               {"es", &o->es}, {"fs", &o->fs}, {"gs", &o->gs}};
    for (size_t i = 0; i < sizeof seg / sizeof seg[0]; i++) {
        uint64_t v = 0;
        if (gdb_reg_get(c, r, seg[i].name, &v) < 0 && i == 0)
            return qp_error_set(err, -ENOENT, "the target has no readable register cs");
        *seg[i].v = (uint32_t)v;
    }
    struct {
        const char *name;
        uint64_t *v;
        bool *has;
    } opt[] = {{"fs_base", &o->fs_base, &o->has_fs_base},
               {"gs_base", &o->gs_base, &o->has_gs_base},
               {"k_gs_base", &o->k_gs_base, &o->has_k_gs_base},
               {"cr0", &o->cr0, &o->has_cr0},
               {"cr3", &o->cr3, &o->has_cr3},
               {"cr4", &o->cr4, &o->has_cr4},
               {"efer", &o->efer, &o->has_efer}};
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        *opt[i].has = gdb_reg_get(c, r, opt[i].name, opt[i].v) == 0;
    return 0;
}
