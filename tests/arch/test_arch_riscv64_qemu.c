/* riscv64 through a real qemu-system-riscv64's gdbstub, with the gdbstub target (target/): the
 * architecture comes from target.xml, the registers by its names, priv and satp by `p` packets;
 * the guest (rv64_mini.S) runs in S and U mode under Sv39. At each stop the vCPU must be in a
 * mode the guest uses, with its pc in the right half for it, and qprof's own Sv39 walk of the
 * pc, reading the page tables from the guest's RAM file, must find the same bytes that QEMU's
 * MMU gives for that pc through `m` packets. At the same stops, QMP's `info registers -a` read
 * by the arch table (monitor_parse, monitor_complete: the mode QEMU's text does not print,
 * inferred from pc's page) must give the mode and halted state that the gdbstub's `priv` and
 * qThreadExtraInfo give, whenever satp translates. */
#define _GNU_SOURCE
#include "arch.h"
#include "arch_qemu.h"
#include "harness.h"
#include "qmp.h"
#include "target.h"

#include <elf.h>
#include <glib.h>

#define RAM_BASE  0x80000000ull
#define RAM_SIZE  (64ull << 20)
#define USER_CODE 0x10000ull
#define SAMPLES   200

#define MAX_HARTS 4

struct seen {
    const struct arch_qemu *q;
    int harts;
    int user, supervisor, machine, walked;
    int user_of[MAX_HARTS], supervisor_of[MAX_HARTS];
    qmp_client *qmp;   /* the same QEMU's QMP, for the cross-check (NULL: none) */
    int cross_checked; /* vCPUs whose inferred mode was compared with priv */
};

/* One vCPU at a stop: a mode the machine uses, its pc in the half for that mode, and the pc's
 * bytes the same through qprof's walk and through QEMU's MMU. */
static void check_vcpu(prof_target *t, const struct prof_arch *a, const struct prof_vcpu *v,
                       struct seen *s)
{
    CHECK(v->index >= 0 && v->index < s->harts);
    if (v->index < 0 || v->index >= s->harts)
        return;
    if (v->privilege == 0) { /* M-mode: the boot code, before the first mret */
        if (s->machine++ < 3)
            fprintf(stderr, "M-mode at pc %#" PRIx64 " ra %#" PRIx64 "\n", v->pc, v->regs.r[1]);
        CHECK(!v->paging64);
        return;
    }
    CHECK(v->paging64);
    CHECK_U64(v->as_root >> 60, 8); /* Sv39 */
    CHECK_U64(v->pc, v->regs.r[a->pc_reg]);
    CHECK_U64(v->sp, v->regs.r[a->sp_reg]);
    if (v->user) {
        s->user++;
        s->user_of[v->index]++;
        CHECK_MSG(v->pc >= USER_CODE && v->pc < USER_CODE + 4096, "user pc %#" PRIx64, v->pc);
    } else {
        s->supervisor++;
        s->supervisor_of[v->index]++;
        CHECK_INT(v->privilege, 2);
        CHECK_MSG(v->pc >= a->split.kernel_start, "S-mode pc %#" PRIx64, v->pc);
    }
    uint64_t paddr = 0, page = 0;
    int rc = a->page_walk(v->as_root, v->pc, arch_qemu_read_phys, (void *)s->q, &paddr, &page);
    CHECK_MSG(rc == 0, "walking pc %#" PRIx64 ": %d", v->pc, rc);
    CHECK_U64(page, v->user ? 4096 : 1u << 30);
    uint8_t via_qemu[32] = {0};
    struct prof_mem_req req = {.vaddr = v->pc, .len = sizeof via_qemu, .buf = via_qemu};
    CHECK_INT(prof_target_read(t, v, &req, 1, NULL), 0);
    CHECK_INT(req.rc, 0);
    const uint8_t *in_ram = arch_qemu_ram_at(s->q, paddr, sizeof via_qemu);
    if (rc == 0 && req.got == sizeof via_qemu && in_ram) {
        CHECK(memcmp(via_qemu, in_ram, sizeof via_qemu) == 0);
        s->walked++;
    }
}

/* QMP's view of the stopped harts against the gdbstub's: the same mode and halted state. */
static void cross_check(const struct prof_arch *a, const struct prof_vcpu *cpus, int n,
                        struct seen *s)
{
    char *text = NULL;
    struct qp_error err = {0};
    struct prof_arch_monitor_cpu *m = g_new0(struct prof_arch_monitor_cpu, MAX_HARTS);
    int got = 0;
    CHECK_MSG(qmp_hmp(s->qmp, "info registers -a", -1, &text, &err) == 0, "%s", err.msg);
    CHECK_MSG(text && a->monitor_parse(text, m, MAX_HARTS, &got, &err) == 0, "%s", err.msg);
    for (int i = 0; i < n && i < got; i++) {
        uint64_t satp = 0;
        CHECK_INT(m[i].cpu_index, cpus[i].index);
        CHECK_INT(a->monitor_complete(&m[i], arch_qemu_read_phys, (void *)s->q, &err), 0);
        struct prof_arch_cpu_state st = {0};
        CHECK_INT(a->cpu_state(prof_arch_monitor_reg, &m[i], &st, &err), 0);
        prof_arch_monitor_reg(&m[i], "satp", &satp);
        if (satp >> 60 == 0)
            continue; /* Bare: the rule cannot tell M from S (the boot code) */
        CHECK_MSG(st.privilege == cpus[i].privilege && m[i].halted == cpus[i].halted,
                  "hart %d at pc %#" PRIx64 ": QMP's inference says privilege %d halted %d, "
                  "the gdbstub %d and %d",
                  i, cpus[i].pc, st.privilege, m[i].halted, cpus[i].privilege, cpus[i].halted);
        s->cross_checked++;
    }
    free(text);
    g_free(m);
}

static int on_stop(prof_target *t, const struct prof_vcpu *cpus, int n, void *ctx,
                   struct qp_error *err)
{
    (void)err;
    struct seen *s = ctx;
    const struct prof_arch *a = prof_target_arch(t);
    CHECK_INT(n, s->harts);
    for (int i = 0; i < n && i < MAX_HARTS; i++)
        check_vcpu(t, a, &cpus[i], s);
    if (s->qmp)
        cross_check(a, cpus, n, s);
    return 0;
}

/* Past the M-mode boot code: every hart seen in S or U mode (with smp2, one hart past it is not
 * enough: the other can still be in M mode when the counted samples begin). */
static bool booted(const void *ctx)
{
    const struct seen *s = ctx;
    for (int h = 0; h < s->harts; h++) {
        if (s->user_of[h] + s->supervisor_of[h] == 0)
            return false;
    }
    return true;
}

/* The qprof binary against the same machine, over the gdbstub and over QMP alone: an x86_64
 * or an aarch64 kernel ELF is refused in one line; with the riscv64 one, kernel stacks unwind by
 * its CFI (libdwfl's riscv backend) from kwork through ksyscall to the trap entry s_trap, where
 * they end; what cannot be unwound (user code, for which --os none knows no binary) is marked
 * truncated, never invented. */
static void run_qprof(const struct arch_qemu *q, int harts, bool over_qmp)
{
    if (!over_qmp)
        arch_qemu_expect_refusals(q, "aarch64", EM_AARCH64, NULL);
    const char *right[] = {over_qmp ? "--qmp-socket" : "--gdb",
                           over_qmp ? q->qmp : q->gdb,
                           "--os",
                           "none",
                           "--kernel",
                           QPROF_RV64_MINI,
                           "--kernel-slide",
                           "-0x4080000000",
                           "--samples",
                           "100",
                           "--no-progress",
                           "-o",
                           q->folded,
                           NULL};
    CHECK_INT(arch_qemu_run_qprof(q, right, NULL), 0);
    char *stacks = arch_qemu_slurp(q->folded);
    arch_qemu_check_folded(stacks, harts, 100, "s_trap", false, NULL);
    g_free(stacks);
}

/* The demo guest (guest/kernel/riscv64/: spin and sys in U mode, a kernel that idles in wfi):
 * only QMP's inference against the gdbstub, stop by stop, which must have met harts in U mode,
 * in S mode and halted. */
struct demo_seen {
    struct seen s;
    int user, kernel, halted;
};

static int on_demo_stop(prof_target *t, const struct prof_vcpu *cpus, int n, void *ctx,
                        struct qp_error *err)
{
    (void)err;
    struct demo_seen *d = ctx;
    for (int i = 0; i < n; i++) {
        d->halted += cpus[i].halted;
        d->user += cpus[i].user;
        d->kernel += !cpus[i].user && !cpus[i].halted && cpus[i].paging64;
    }
    if (d->s.qmp)
        cross_check(prof_target_arch(t), cpus, n, &d->s);
    return 0;
}

static bool demo_booted(const void *ctx)
{
    const struct demo_seen *d = ctx;
    return d->user > 0;
}

static int run_demo(void)
{
    const char *const machine[] = {"-bios", "none", "-append", "run=spin,sys", NULL};
    const struct arch_qemu_spec spec = {.qemu = "qemu-system-riscv64",
                                        .kernel = QPROF_RV64_DEMO,
                                        .skip_hint = "riscv64-linux-gnu-gcc; xtask deps",
                                        .dir_template = "/tmp/qprv64XXXXXX",
                                        .machine_args = machine,
                                        .ram_base = RAM_BASE,
                                        .ram_size = 128ull << 20,
                                        .cpus = 1,
                                        .arch = &prof_arch_riscv64};
    struct arch_qemu q;
    if (arch_qemu_boot(&q, &spec) == 77)
        return 77;
    struct demo_seen d = {.s = {.q = &q, .harts = 1}};
    arch_qemu_wait_boot(&q, on_demo_stop, &d, demo_booted);
    d = (struct demo_seen){.s = {.q = &q, .harts = 1}};
    struct qmp_open_opts qo = {.timeout_s = 10, .backend = QMP_MEM_HMP};
    struct qp_error qerr = {0};
    CHECK_MSG(qmp_open(q.qmp, &qo, &d.s.qmp, &qerr) == 0, "%s", qerr.msg);
    arch_qemu_sample(&q, on_demo_stop, &d, 2 * SAMPLES);
    fprintf(stderr, "demo: %d stops agreed (%d user, %d kernel, %d halted)\n", d.s.cross_checked,
            d.user, d.kernel, d.halted);
    CHECK(d.s.cross_checked >= 2 * SAMPLES * 9 / 10);
    CHECK(d.user > 0 && d.kernel > 0 && d.halted > 0);
    qmp_free(d.s.qmp);
    arch_qemu_release_target(&q);
    arch_qemu_stop(&q);
    int shared = arch_qemu_result();
    return harness_result() || shared;
}

/* argv[1]: "smp2" (up to smp4) for that many harts, "demo" for the demo guest, else one hart. */
int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "demo") == 0)
        return run_demo();
    int harts = argc > 1 && g_str_has_prefix(argv[1], "smp") ? atoi(argv[1] + 3) : 1;
    REQUIRE(harts >= 1 && harts <= MAX_HARTS);
    const char *const machine[] = {"-bios", "none", NULL};
    const struct arch_qemu_spec spec = {.qemu = "qemu-system-riscv64",
                                        .kernel = QPROF_RV64_MINI,
                                        .skip_hint = "xtask deps",
                                        .dir_template = "/tmp/qprv64XXXXXX",
                                        .machine_args = machine,
                                        .ram_base = RAM_BASE,
                                        .ram_size = RAM_SIZE,
                                        .cpus = harts,
                                        .arch = &prof_arch_riscv64};
    struct arch_qemu q;
    if (arch_qemu_boot(&q, &spec) == 77)
        return 77;
    struct seen s = {.q = &q, .harts = harts};
    /* Boot: until stops find every hart past the M-mode code (generous deadline). */
    arch_qemu_wait_boot(&q, on_stop, &s, booted);
    /* Then a fixed count of samples a few ms apart, as qprof takes them. The guest spends about
     * half its time in U mode and the rest in S, and never traps to M. */
    s = (struct seen){.q = &q, .harts = harts};
    struct qmp_open_opts qo = {.timeout_s = 10, .backend = QMP_MEM_HMP};
    struct qp_error qerr = {0};
    CHECK_MSG(qmp_open(q.qmp, &qo, &s.qmp, &qerr) == 0, "%s", qerr.msg);
    arch_qemu_sample(&q, on_stop, &s, SAMPLES);
    fprintf(stderr, "%d vCPU stops: QMP's inferred mode agreed with the gdbstub's priv\n",
            s.cross_checked);
    CHECK(s.cross_checked >= SAMPLES * harts * 9 / 10);
    qmp_free(s.qmp);
    s.qmp = NULL;
    fprintf(stderr, "%d samples: %d user, %d supervisor, %d machine; %d pcs walked\n", SAMPLES,
            s.user, s.supervisor, s.machine, s.walked);
    CHECK_INT(s.machine, 0);
    /* Every hart seen in both modes, and both modes a fair share of all stops. Not a share per
     * hart: under MTTCG on a loaded host a hart starved of CPU stays in whatever mode its last
     * stop caught (CI saw one hart at 12 user to 188 supervisor while the other was 101:99). */
    for (int h = 0; h < harts; h++) {
        fprintf(stderr, "hart %d: %d user, %d supervisor\n", h, s.user_of[h], s.supervisor_of[h]);
        CHECK(s.user_of[h] > 0);
        CHECK(s.supervisor_of[h] > 0);
    }
    CHECK(s.user > SAMPLES * harts / 10);
    CHECK(s.supervisor > SAMPLES * harts / 10);
    CHECK(s.walked >= s.user + s.supervisor - 2);
    arch_qemu_release_target(&q);
    run_qprof(&q, harts, false);
    run_qprof(&q, harts, true);
    arch_qemu_stop(&q);
    int shared = arch_qemu_result();
    return harness_result() || shared;
}
