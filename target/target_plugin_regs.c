/* The plugin target, which registers the plugin captures (x86_64's fixed QPR_REGS; the others
 * by the names their arch table reads over the gdbstub) and a captured sample's vCPU from them. */
#include "target_plugin_internal.h"
#include "arch_x86_64.h"
#include "target_vcpu.h"

#include <stdio.h>

struct captured_regs {
    const struct qpr_config *cfg;
    const struct qpr_sample *s;
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

/* The registers to read at each sample: x86_64's QPR_REGS (their indexes are the ring's), the
 * others' general and state registers as their arch table names them. */
int tp_config_registers(const struct prof_arch *a, struct qpr_config *c, struct qp_error *err)
{
    static const char *const x86[] = {
#define QPR_NAME(id, name) name,
        QPR_REGS(QPR_NAME)
#undef QPR_NAME
    };
    if (a == &prof_arch_x86_64) {
        for (size_t i = 0; i < sizeof x86 / sizeof x86[0]; i++)
            add_reg(c, x86[i]);
        c->arch = QPR_ARCH_X86_64, c->sp_reg = QPR_RSP, c->mode_reg = QPR_CS;
        c->ustack_reg = QPR_MAX_REGS;
        c->mode_mask = 3, c->mode_user = 3;
        return 0;
    }
    c->arch = a == &prof_arch_riscv64 ? QPR_ARCH_RISCV64 : QPR_ARCH_AARCH64;
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
    /* an entry from user mode may leave the user sp in a register until the kernel saved it */
    int usp = a->capture_user_sp_reg ? add_reg(c, a->capture_user_sp_reg) : -1;
    c->ustack_reg = usp >= 0 ? (uint32_t)usp : QPR_MAX_REGS;
    c->mode_mask = a->capture_mode_mask, c->mode_user = a->capture_mode_user;
    return 0;
}

static int captured_reg(void *ctx, const char *name, uint64_t *val)
{
    const struct captured_regs *c = ctx;
    for (uint32_t i = 0; i < c->cfg->n_regs && i < QPR_MAX_REGS; i++)
        if (strcmp(c->cfg->reg_names[i], name) == 0) {
            if (!(c->s->regs_valid >> i & 1))
                return -ENODATA;
            *val = c->s->regs[i];
            return 0;
        }
    return -ENOENT;
}

/* riscv64 and aarch64: through the arch table, as the gdbstub target reads the same registers. */
static int vcpu_from_named_regs(struct target_plugin *t, const struct qpr_sample *s,
                                struct qp_error *err)
{
    struct prof_vcpu *v = &t->vcpu;
    struct captured_regs c = {.cfg = &t->cfg, .s = s};
    int rc = target_vcpu_from_regs(t->arch, captured_reg, &c, v, err);
    if (rc)
        return rc;
    v->index = (int)s->vcpu;
    memset(&t->cpu.mmu, 0, sizeof t->cpu.mmu);
    t->cpu.s = s;
    v->target_cpu = &t->cpu;
    return 0;
}

int tp_vcpu_from_sample(struct target_plugin *t, const struct qpr_sample *s, struct qp_error *err)
{
    if (t->arch != &prof_arch_x86_64)
        return vcpu_from_named_regs(t, s, err);
    struct prof_vcpu *v = &t->vcpu;
    struct unw_regs *u = &v->regs;
    const uint64_t *q = s->regs;
    memset(v, 0, sizeof *v);
    u->r[UNW_RAX] = q[QPR_RAX], u->r[UNW_RDX] = q[QPR_RDX], u->r[UNW_RCX] = q[QPR_RCX];
    u->r[UNW_RBX] = q[QPR_RBX], u->r[UNW_RSI] = q[QPR_RSI], u->r[UNW_RDI] = q[QPR_RDI];
    u->r[UNW_RBP] = q[QPR_RBP], u->r[UNW_RSP] = q[QPR_RSP], u->r[UNW_R8] = q[QPR_R8];
    u->r[UNW_R9] = q[QPR_R9], u->r[UNW_R10] = q[QPR_R10], u->r[UNW_R11] = q[QPR_R11];
    u->r[UNW_R12] = q[QPR_R12], u->r[UNW_R13] = q[QPR_R13], u->r[UNW_R14] = q[QPR_R14];
    u->r[UNW_R15] = q[QPR_R15], u->r[UNW_RIP] = q[QPR_RIP];
    v->index = (int)s->vcpu;
    v->pc = q[QPR_RIP];
    v->sp = q[QPR_RSP];
    v->privilege = (int)(q[QPR_CS] & 3);
    v->user = v->privilege == 3;
    v->paging64 = (q[QPR_CR0] & X86_CR0_PG) && (q[QPR_EFER] & X86_EFER_LMA);
    v->as_root = q[QPR_CR3] & X86_CR3_ADDR_MASK;
    v->gs_base = q[QPR_GS_BASE];
    v->la57 = (q[QPR_CR4] & X86_CR4_LA57) != 0;
    memset(&t->cpu.mmu, 0, sizeof t->cpu.mmu);
    t->cpu.mmu.cpu_index = (int)s->vcpu;
    t->cpu.mmu.cr0 = q[QPR_CR0], t->cpu.mmu.cr3 = q[QPR_CR3], t->cpu.mmu.cr4 = q[QPR_CR4];
    t->cpu.mmu.long_mode = v->paging64;
    t->cpu.s = s;
    v->target_cpu = &t->cpu;
    return 0;
}
