/* The plugin target, which registers the plugin captures (those the arch table reads over the
 * gdbstub, and what only a capture needs) and a captured sample's vCPU from them, by name. */
#include "target_plugin_internal.h"
#include "target_vcpu.h"

#include <stdio.h>

/* A prof_arch_reg_fn over a captured sample, by the configuration's register names. */
struct captured_regs {
    const struct qpr_config *cfg;
    const struct qpr_sample *s;
    uint32_t next; /* where the next name is looked for first */
};

/* Adds register name to c's list: its index, or -1 when the list is full. */
static int add_reg(struct qpr_config *c, const char *name)
{
    for (uint32_t i = 0; i < c->n_regs; i++)
        if (strcmp(c->reg_names[i], name) == 0)
            return (int)i;
    if (c->n_regs >= QPR_MAX_REGS || strlen(name) >= QPR_REG_NAME)
        return -1;
    snprintf(c->reg_names[c->n_regs], QPR_REG_NAME, "%s", name);
    return (int)c->n_regs++;
}

/* The registers that may hold the kernel's per-CPU base, as indexes (QPR_MAX_REGS: none). */
static void add_percpu_regs(const struct prof_arch *a, struct qpr_config *c)
{
    c->percpu_reg[0] = c->percpu_reg[1] = QPR_MAX_REGS;
    for (int k = 0; a->capture_percpu_regs && k < 2 && a->capture_percpu_regs[k]; k++) {
        int i = add_reg(c, a->capture_percpu_regs[k]);
        c->percpu_reg[k] = i >= 0 ? (uint32_t)i : QPR_MAX_REGS;
    }
}

/* The registers to read at each sample, as the arch table names them: the general registers and
 * those cpu_state reads (the gdbstub's, in the table's order, about the order they are asked for
 * in), the mode register, and what only a capture needs: a user sp an entry leaves in a
 * register, the kernel's per-CPU base; and which of the capture's steps apply. */
int tp_config_registers(const struct prof_arch *a, struct qpr_config *c, struct qp_error *err)
{
    int sp = -1, mode;
    for (int i = 0; i < a->n_gdb_regs; i++) {
        int k = add_reg(c, a->gdb_regs[i].gdb_name);
        if (a->gdb_regs[i].slot == a->sp_reg)
            sp = k;
    }
    for (int i = 0; a->gdb_state_regs[i]; i++)
        add_reg(c, a->gdb_state_regs[i]);
    mode = add_reg(c, a->capture_mode_reg);
    if (sp < 0 || mode < 0)
        return qp_error_set(err, -ENOTSUP, "%s: more registers than the plugin takes", a->name);
    c->sp_reg = (uint32_t)sp, c->mode_reg = (uint32_t)mode;
    c->mode_mask = a->capture_mode_mask, c->mode_user = a->capture_mode_user;
    /* an entry from user mode may leave the user sp in a register until the kernel saved it */
    int usp = a->capture_user_sp_reg ? add_reg(c, a->capture_user_sp_reg) : -1;
    c->ustack_reg = usp >= 0 ? (uint32_t)usp : QPR_MAX_REGS;
    add_percpu_regs(a, c);
    c->kernel_start = a->split.kernel_start;
    c->iret_frame = a->capture_iret_frame;
    return 0;
}

/* Names are asked for in about the order they were added, so the one after the last found is
 * tried first: a sample's registers cost a compare each, not a search. */
static int captured_reg(void *ctx, const char *name, uint64_t *val)
{
    struct captured_regs *c = ctx;
    uint32_t n = c->cfg->n_regs < QPR_MAX_REGS ? c->cfg->n_regs : QPR_MAX_REGS;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (c->next + k) % n;
        if (strcmp(c->cfg->reg_names[i], name) != 0)
            continue;
        c->next = i + 1;
        if (!(c->s->regs_valid >> i & 1))
            return -ENODATA;
        *val = c->s->regs[i];
        return 0;
    }
    return -ENOENT;
}

/* Through the arch table, as the gdbstub target reads the same registers; the kernel's per-CPU
 * base as the plugin found it for the windows (qpr_percpu_base), so that the OS adapter reads
 * them at the addresses they were captured at. */
int tp_vcpu_from_sample(struct target_plugin *t, const struct qpr_sample *s, struct qp_error *err)
{
    struct prof_vcpu *v = &t->vcpu;
    struct captured_regs c = {.cfg = &t->cfg, .s = s};
    int rc = target_vcpu_from_regs(t->arch, captured_reg, &c, v, err);
    if (rc)
        return rc;
    uint64_t base;
    if (qpr_percpu_base(s, &t->cfg, &base))
        v->gs_base = base;
    v->index = (int)s->vcpu;
    t->cpu.s = s;
    v->target_cpu = &t->cpu;
    return 0;
}
