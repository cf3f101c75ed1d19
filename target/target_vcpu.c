/* struct prof_vcpu from an architecture's register names (target_vcpu.h). */
#include "target_vcpu.h"

#include <errno.h>
#include <string.h>

static int from_regs(const struct prof_arch *a,
                     int (*state)(prof_arch_reg_fn, void *, struct prof_arch_cpu_state *,
                                  struct qp_error *),
                     prof_arch_reg_fn get, void *ctx, struct prof_vcpu *v, struct qp_error *err)
{
    memset(v, 0, sizeof *v);
    for (int i = 0; i < a->n_gdb_regs; i++)
        if (get(ctx, a->gdb_regs[i].gdb_name, &v->regs.r[a->gdb_regs[i].slot]) < 0)
            return qp_error_set(err, -ENOENT, "the target has no readable register %s",
                                a->gdb_regs[i].gdb_name);
    struct prof_arch_cpu_state st = {0};
    int rc = state(get, ctx, &st, err);
    if (rc)
        return rc;
    v->pc = v->regs.r[a->pc_reg];
    v->sp = v->regs.r[a->sp_reg];
    v->privilege = st.privilege;
    v->user = v->privilege == a->user_privilege;
    v->paging64 = st.paging;
    v->as_root = st.as_root;
    v->mmu = st.mmu;
    v->regs.has_trap_pc = st.has_trap_pc;
    v->regs.trap_pc = st.trap_pc;
    v->has_kernel_thread_reg = st.has_kernel_thread_reg;
    v->kernel_thread_reg = st.kernel_thread_reg;
    v->has_kernel_thread_alt = st.has_kernel_thread_alt;
    v->kernel_thread_alt = st.kernel_thread_alt;
    v->has_exception_pc = st.has_exception_pc;
    v->exception_pc = st.exception_pc;
    v->regs.has_trap_sp = st.has_trap_sp;
    v->regs.trap_sp = st.trap_sp;
    v->unwalkable = st.unwalkable;
    v->gs_base = st.percpu_base;
    return 0;
}

int target_vcpu_from_regs(const struct prof_arch *a, prof_arch_reg_fn get, void *ctx,
                          struct prof_vcpu *v, struct qp_error *err)
{
    return from_regs(a, a->cpu_state, get, ctx, v, err);
}

int target_vcpu_from_monitor(const struct prof_arch *a, prof_arch_reg_fn get, void *ctx,
                             struct prof_vcpu *v, struct qp_error *err)
{
    return from_regs(a, a->monitor_cpu_state ? a->monitor_cpu_state : a->cpu_state, get, ctx, v,
                     err);
}
