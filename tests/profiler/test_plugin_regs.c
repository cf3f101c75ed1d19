/* The plugin target's registers by name (target/target_plugin_regs.c), without QEMU: what qprof
 * asks qprof-plugin.so to capture for each architecture, from its arch table alone, and a
 * captured sample's vCPU through that table: for x86_64, privilege from cs, 64-bit paging from
 * cr0 and efer, the root from cr3 without its PCID, the kernel's per-CPU base where the plugin
 * found it for the windows, LA57, and whether the walk serves the translation (32-bit paging and
 * LA57 are read as nothing). */
#include "harness.h"

#include "target_plugin_internal.h"
#include "unwind.h"

#include <stdlib.h>
#include <string.h>

static int index_of(const struct qpr_config *c, const char *name)
{
    for (uint32_t i = 0; i < c->n_regs; i++)
        if (strcmp(c->reg_names[i], name) == 0)
            return (int)i;
    return -1;
}

/* Register name of a sample taken under c holds v. */
static void put(struct qpr_sample *s, const struct qpr_config *c, const char *name, uint64_t v)
{
    int i = index_of(c, name);
    CHECK_MSG(i >= 0, "%s is not asked for", name);
    if (i < 0)
        return;
    s->regs[i] = v;
    s->regs_valid |= UINT64_C(1) << i;
}

static const char *const x86_names[] = {
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8",  "r9",   "r10",     "r11",
    "r12", "r13", "r14", "r15", "rip", "cs",  "cr0", "cr3", "cr4", "efer", "gs_base", "k_gs_base"};

/* x86_64: the general registers, those cpu_state reads, the GS bases; stack pointer, mode test,
 * per-CPU bases and interrupt frames as the ring's fixed set had them. */
static void test_x86_64_config(void)
{
    struct qpr_config c = {0};
    struct qp_error err = {0};
    CHECK_INT(tp_config_registers(&prof_arch_x86_64, &c, &err), 0);
    for (size_t i = 0; i < sizeof x86_names / sizeof x86_names[0]; i++)
        CHECK_MSG(index_of(&c, x86_names[i]) >= 0, "%s is not asked for", x86_names[i]);
    CHECK_INT(c.n_regs, sizeof x86_names / sizeof x86_names[0]); /* the fixed set had 27 */
    CHECK_STR(c.reg_names[c.sp_reg], "rsp");
    CHECK_STR(c.reg_names[c.mode_reg], "cs");
    CHECK_U64(c.mode_mask, 3);
    CHECK_U64(c.mode_user, 3);
    CHECK(c.percpu_reg[0] < c.n_regs && c.percpu_reg[1] < c.n_regs);
    if (c.percpu_reg[0] < c.n_regs && c.percpu_reg[1] < c.n_regs) {
        CHECK_STR(c.reg_names[c.percpu_reg[0]], "gs_base");
        CHECK_STR(c.reg_names[c.percpu_reg[1]], "k_gs_base");
    }
    CHECK_U64(c.kernel_start, UINT64_C(0xffff800000000000));
    CHECK_INT(c.iret_frame, 1);
    CHECK_INT(c.ustack_reg, QPR_MAX_REGS);
}

/* riscv64 and aarch64: what they asked for before, and no x86_64 step (no per-CPU register, no
 * interrupt frame); aarch64's user sp at entry in SP_EL0. */
static void test_other_configs(void)
{
    const struct prof_arch *arches[] = {&prof_arch_riscv64, &prof_arch_aarch64};
    for (int a = 0; a < 2; a++) {
        struct qpr_config c = {0};
        struct qp_error err = {0};
        CHECK_INT(tp_config_registers(arches[a], &c, &err), 0);
        CHECK_STR(c.reg_names[c.sp_reg], "sp");
        CHECK_STR(c.reg_names[c.mode_reg], arches[a]->capture_mode_reg);
        CHECK_INT(c.percpu_reg[0], QPR_MAX_REGS);
        CHECK_INT(c.percpu_reg[1], QPR_MAX_REGS);
        CHECK_INT(c.iret_frame, 0);
        CHECK_U64(c.kernel_start, arches[a]->split.kernel_start);
        CHECK(index_of(&c, "pc") >= 0);
        for (int i = 0; arches[a]->gdb_state_regs[i]; i++)
            CHECK_MSG(index_of(&c, arches[a]->gdb_state_regs[i]) >= 0, "%s: %s is not asked for",
                      arches[a]->name, arches[a]->gdb_state_regs[i]);
        if (arches[a] == &prof_arch_aarch64)
            CHECK(c.ustack_reg < c.n_regs && strcmp(c.reg_names[c.ustack_reg], "SP_EL0") == 0);
        else
            CHECK_INT(c.ustack_reg, QPR_MAX_REGS);
    }
}

#define CR0_PG   (UINT64_C(1) << 31)
#define EFER_LMA (UINT64_C(1) << 10)
#define CR4_LA57 (UINT64_C(1) << 12)

struct x86_state {
    uint64_t cs, cr0, efer, cr4;
};

/* A sample of vCPU 2 with state st, its vCPU through the plugin target. */
static int x86_vcpu(struct target_plugin *t, struct qpr_sample *s, struct x86_state st,
                    struct qp_error *err)
{
    memset(s, 0, sizeof *s);
    s->kind = QPR_KIND_SAMPLE;
    s->vcpu = 2;
    for (size_t i = 0; i < sizeof x86_names / sizeof x86_names[0]; i++)
        put(s, &t->cfg, x86_names[i], 0x1000 + i); /* rbp 0x1006 ... */
    put(s, &t->cfg, "rip", UINT64_C(0xffffffff81000010));
    put(s, &t->cfg, "rsp", UINT64_C(0xffffc90000403f00));
    put(s, &t->cfg, "cs", st.cs);
    put(s, &t->cfg, "cr0", st.cr0);
    put(s, &t->cfg, "efer", st.efer);
    put(s, &t->cfg, "cr4", st.cr4);
    put(s, &t->cfg, "cr3", UINT64_C(0x1234000) | 5); /* PCID 5 */
    put(s, &t->cfg, "gs_base", UINT64_C(0xffff88801f000000));
    put(s, &t->cfg, "k_gs_base", UINT64_C(0x7f0000001000));
    return tp_vcpu_from_sample(t, s, err);
}

static void test_x86_64_vcpu(void)
{
    struct target_plugin *t = calloc(1, sizeof *t);
    struct qpr_sample *s = calloc(1, sizeof *s);
    struct qp_error err = {0};
    const struct prof_vcpu *v = &t->vcpu;
    t->arch = &prof_arch_x86_64;
    CHECK_INT(tp_config_registers(t->arch, &t->cfg, &err), 0);

    /* the kernel, 4-level paging */
    CHECK_INT(
        x86_vcpu(t, s, (struct x86_state){0x10, CR0_PG | 0x11, EFER_LMA | 0x901, 0x6f0}, &err), 0);
    CHECK_INT(v->index, 2);
    CHECK_U64(v->pc, UINT64_C(0xffffffff81000010));
    CHECK_U64(v->sp, UINT64_C(0xffffc90000403f00));
    CHECK_U64(v->regs.r[UNW_RIP], v->pc);
    CHECK_U64(v->regs.r[UNW_RSP], v->sp);
    CHECK_U64(v->regs.r[UNW_RBP], 0x1006);
    CHECK_U64(v->regs.r[UNW_R15], 0x100f);
    CHECK_INT(v->privilege, 0);
    CHECK(!v->user);
    CHECK(v->paging64);
    CHECK_U64(v->as_root, UINT64_C(0x1234000));
    CHECK_U64(v->gs_base, UINT64_C(0xffff88801f000000));
    CHECK(!v->unwalkable);
    CHECK(v->target_cpu == &t->cpu && t->cpu.s == s);

    /* user mode */
    CHECK_INT(x86_vcpu(t, s, (struct x86_state){0x33, CR0_PG, EFER_LMA, 0}, &err), 0);
    CHECK_INT(v->privilege, 3);
    CHECK(v->user);

    /* a kernel entry before its swapgs: the per-CPU base is KERNEL_GS_BASE's, where the plugin
     * captured the windows from */
    x86_vcpu(t, s, (struct x86_state){0x10, CR0_PG, EFER_LMA, 0}, &err);
    put(s, &t->cfg, "gs_base", UINT64_C(0x7f0000002000));
    put(s, &t->cfg, "k_gs_base", UINT64_C(0xffff88801f040000));
    CHECK_INT(tp_vcpu_from_sample(t, s, &err), 0);
    CHECK_U64(v->gs_base, UINT64_C(0xffff88801f040000));

    /* 32-bit paging: not the walk's, read as nothing */
    CHECK_INT(x86_vcpu(t, s, (struct x86_state){0x10, CR0_PG, 0, 0}, &err), 0);
    CHECK(!v->paging64);
    CHECK(v->unwalkable);

    /* 5-level paging: neither */
    CHECK_INT(x86_vcpu(t, s, (struct x86_state){0x10, CR0_PG, EFER_LMA, CR4_LA57}, &err), 0);
    CHECK(v->paging64);
    CHECK(v->unwalkable);

    /* paging off: physical = virtual, which any reader serves */
    CHECK_INT(x86_vcpu(t, s, (struct x86_state){0x10, 0x11, 0, 0}, &err), 0);
    CHECK(!v->paging64);
    CHECK(!v->unwalkable);

    /* the mode register not read: no vCPU, and a message that names it */
    x86_vcpu(t, s, (struct x86_state){0x10, CR0_PG, EFER_LMA, 0}, &err);
    s->regs_valid &= ~(UINT64_C(1) << t->cfg.mode_reg);
    CHECK(tp_vcpu_from_sample(t, s, &err) < 0);
    CHECK_MSG(strstr(err.msg, "cs") != NULL, "message: %s", err.msg);
    free(s);
    free(t);
}

int main(void)
{
    test_x86_64_config();
    test_other_configs();
    test_x86_64_vcpu();
    return harness_result();
}
