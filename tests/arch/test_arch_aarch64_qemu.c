/* aarch64 through a real qemu-system-aarch64's gdbstub (-machine virt -cpu cortex-a57), with the
 * gdbstub target (target/): the architecture comes from target.xml, x0..x30/sp/pc by its names,
 * cpsr from the `g` reply, SCTLR_EL1, TTBR0_EL1, TTBR1_EL1 and TCR_EL1 by `p` packets from
 * QEMU's system-registers feature; the guest (a64_mini.S) runs at EL1 and EL0 with the MMU on,
 * both halves translated (4K granule, or 64K with argv[1] "64k"). At each stop the vCPU must be
 * at an exception level the guest uses with its pc in the right half for it; qprof's own walk of
 * the pc and of the sp, reading the page tables from the guest's RAM file, must find the same
 * bytes that QEMU's MMU gives through `m` packets; the frame chain by the architecture's rule
 * ([x29], [x29+8]) must lead through the guest's functions to the chain's end. Then the qprof
 * binary against the same machine: kernel ELFs of other architectures refused in one line, and
 * kernel stacks unwound by CFI (libdwfl's aarch64 backend) from kwork through ksyscall to the
 * EL0 entry el0_sync, over the gdbstub and over QMP alone. At the same stops QMP's view is
 * checked against the gdbstub's: `info registers -a` parsed by the arch table gives the same pc,
 * sp, x29, x30, exception level and translation state, and memsave (QEMU translating with the
 * vCPU's cpu-index) the same bytes at the pc and the sp. */
#define _GNU_SOURCE
#include "arch.h"
#include "arch_qemu.h"
#include "harness.h"
#include "qmp.h"
#include "symbols.h"
#include "target.h"

#include <elf.h>
#include <glib.h>

#define RAM_BASE     0x40000000ull
#define RAM_SIZE     (128ull << 20)
#define USER_CODE    0x10000ull
#define USER_STACK   0x20000ull
#define KERNEL_TEXT  0xffffff8040080000ull /* the high alias of the image */
#define ENTRY_RETURN (USER_CODE + 12)      /* user_start's bl umain returns here */
#define SAMPLES      200
#define MAX_CPUS     4
/* a64_mini.S's TCR_EL1: T0SZ 16, T1SZ 25, walk attributes, IPS 40 bits, and the granules */
#define TCR_COMMON                                                                                 \
    (16ull | 25ull << 16 | 1ull << 8 | 1ull << 10 | 3ull << 12 | 1ull << 24 | 1ull << 26 |         \
     3ull << 28 | 2ull << 32)
#define TCR_4K  (TCR_COMMON | 2ull << 30)
#define TCR_64K (TCR_COMMON | 1ull << 14 | 3ull << 30)

struct seen {
    const struct arch_qemu *q;
    uint64_t page, block, tcr; /* what the granule makes of the user pages and the kernel */
    int cpus;
    int user, kernel, other, walked;
    int user_of[MAX_CPUS], kernel_of[MAX_CPUS];
    int user_chains, kernel_chains, kernel_deep; /* frame chains followed to their end */
    uint64_t sync_vector, el0_sync;              /* run-time addresses, from the ELF */
    qmp_client *qmp; /* the same QEMU's QMP with memsave, for the cross-check (NULL: none) */
    int cross_checked;
    /* Waiting for the boot: a stop may find a CPU in its boot code (EL1, the MMU still off, no
     * stack), where nothing below holds; only EL0 sightings are noted. */
    bool booting;
};

/* The exception entry and exit, where the kernel has no frame record of its own: the vector's
 * branch, el0_sync before `mov x29, sp` (+0..+12), and its eret (+32) with x29 the user's again.
 * Under TCG, stops gather at the exception entry (a block boundary), the more so on a loaded
 * host: kernel samples there have no chain, and every other kernel sample must. */
static bool in_entry_or_exit(const struct seen *s, uint64_t pc)
{
    return pc == s->sync_vector || (pc - s->el0_sync <= 12 && pc % 4 == 0) ||
           pc == s->el0_sync + 32;
}

/* a64_mini's addresses as it runs: linked at _start, run at KERNEL_TEXT. */
static void find_entry(const char *elf, struct seen *s)
{
    sym_table *t = NULL;
    struct qp_error err = {0};
    uint64_t start = 0, vectors = 0, sync = 0;
    if (sym_table_open_elf(elf, &t, &err) != 0)
        fprintf(stderr, "%s: %s\n", elf, err.msg);
    REQUIRE(t != NULL);
    REQUIRE(sym_find_by_name(t, "_start", &start) == 0 &&
            sym_find_by_name(t, "vectors", &vectors) == 0 &&
            sym_find_by_name(t, "el0_sync", &sync) == 0);
    sym_table_free(t);
    s->sync_vector = KERNEL_TEXT + (vectors - start) + 0x400;
    s->el0_sync = KERNEL_TEXT + (sync - start);
}

/* Translates va both ways and compares len bytes: qprof's walk on the RAM file against QEMU's
 * MMU through `m`. Returns the page size qprof's walk found, 0 when it failed. */
static uint64_t compare_at(prof_target *t, const struct prof_arch *a, const struct prof_vcpu *v,
                           struct seen *s, uint64_t va, size_t len)
{
    uint64_t paddr = 0, page = 0;
    int rc = prof_arch_page_walk(a, v->as_root, &v->mmu, va, arch_qemu_read_phys, (void *)s->q,
                                 &paddr, &page);
    CHECK_MSG(rc == 0, "walking %#" PRIx64 " (%s): %d", va, v->user ? "EL0" : "EL1", rc);
    uint8_t via_qemu[32] = {0};
    REQUIRE(len <= sizeof via_qemu);
    struct prof_mem_req req = {.vaddr = va, .len = len, .buf = via_qemu};
    CHECK_INT(prof_target_read(t, v, &req, 1, NULL), 0);
    CHECK_INT(req.rc, 0);
    const uint8_t *in_ram = arch_qemu_ram_at(s->q, paddr, len);
    if (rc == 0 && req.got == len && in_ram) {
        CHECK_MSG(memcmp(via_qemu, in_ram, len) == 0, "%#" PRIx64 " -> %#" PRIx64, va, paddr);
        s->walked++;
    }
    return rc == 0 ? page : 0;
}

static bool read_word(prof_target *t, const struct prof_vcpu *v, uint64_t va, uint64_t *word)
{
    struct prof_mem_req req = {.vaddr = va, .len = 8, .buf = word};
    return prof_target_read(t, v, &req, 1, NULL) == 0 && req.rc == 0 && req.got == 8;
}

/* Follows the frame chain by the architecture's rule from the vCPU's frame pointer: every
 * return address in the code of the vCPU's half, up to the chain's end (a zero frame pointer).
 * The number of return addresses, -1 when the chain leaves the code or does not end. */
static int follow_chain(prof_target *t, const struct prof_arch *a, const struct prof_vcpu *v,
                        uint64_t *last_ra)
{
    uint64_t fp = v->regs.r[a->frame.fp_reg];
    for (int depth = 0; depth < 8; depth++) {
        uint64_t next, ra;
        if (fp == 0)
            return depth;
        if (!read_word(t, v, fp + (uint64_t)(int64_t)a->frame.saved_fp, &next) ||
            !read_word(t, v, fp + (uint64_t)(int64_t)a->frame.saved_ra, &ra))
            return -1;
        if (next == 0 && ra == 0 && !v->user)
            return depth; /* el0_sync's zero record */
        bool in_code = v->user ? ra - USER_CODE < 4096 : ra - KERNEL_TEXT < 8192;
        if (!in_code)
            return -1;
        *last_ra = ra;
        fp = next;
    }
    return -1;
}

/* One vCPU at a stop: EL0 or EL1 (the guest never runs at EL2 or EL3; EL1 with the MMU off
 * only while it boots, before the samples counted here), its pc in the half for that level, its
 * pc and sp translated alike by qprof and QEMU, its frame chain whole. */
static void check_vcpu(prof_target *t, const struct prof_arch *a, const struct prof_vcpu *v,
                       struct seen *s)
{
    CHECK(v->index >= 0 && v->index < s->cpus);
    if (v->index < 0 || v->index >= s->cpus)
        return;
    if (!v->paging64 || (v->privilege != 2 && v->privilege != 3)) {
        if (s->other++ < 3)
            fprintf(stderr, "privilege %d, paging %d at pc %#" PRIx64 "\n", v->privilege,
                    v->paging64, v->pc);
        return;
    }
    CHECK_U64(v->mmu.control, s->tcr);
    CHECK_U64(v->as_root >> 48, 1); /* the ASID the guest put in TTBR0_EL1 */
    CHECK(v->mmu.root_hi != 0);
    CHECK_U64(v->pc, v->regs.r[a->pc_reg]);
    CHECK_U64(v->sp, v->regs.r[a->sp_reg]);
    uint64_t last_ra = 0;
    int depth = follow_chain(t, a, v, &last_ra);
    if (v->user) {
        s->user++;
        s->user_of[v->index]++;
        CHECK_MSG(v->pc - USER_CODE < 4096, "EL0 pc %#" PRIx64, v->pc);
        CHECK_U64(compare_at(t, a, v, s, v->pc, 32), s->page);
        CHECK_MSG(v->sp - USER_STACK <= s->page && v->sp > USER_STACK, "EL0 sp %#" PRIx64, v->sp);
        CHECK_U64(compare_at(t, a, v, s, v->sp - 16, 16), s->page);
        /* From any user pc the chain ends at user_start (x29 is 0 only before its bl) */
        CHECK_MSG(depth >= 1 && last_ra == ENTRY_RETURN, "EL0 pc %#" PRIx64 ": depth %d, %#" PRIx64,
                  v->pc, depth, last_ra);
        s->user_chains += depth >= 1 && last_ra == ENTRY_RETURN;
    } else {
        s->kernel++;
        s->kernel_of[v->index]++;
        CHECK_MSG(v->pc - KERNEL_TEXT < 8192, "EL1 pc %#" PRIx64, v->pc);
        CHECK_U64(compare_at(t, a, v, s, v->pc, 32), s->block);
        CHECK_U64(compare_at(t, a, v, s, v->sp, 16), s->block);
        CHECK_MSG(depth >= 0 || in_entry_or_exit(s, v->pc),
                  "EL1 pc %#" PRIx64 " (el0_sync %#" PRIx64 "): no frame chain", v->pc,
                  s->el0_sync);
        s->kernel_chains += depth >= 0;
        s->kernel_deep += depth == 2; /* kwork's: ksyscall, el0_sync */
    }
}

/* len bytes at va through QMP's memsave for the vCPU against the gdbstub's `m` packets. */
static void compare_memsave(prof_target *t, const struct prof_vcpu *v, struct seen *s, uint64_t va,
                            size_t len)
{
    uint8_t via_gdb[16] = {0}, via_qmp[16] = {1};
    struct prof_mem_req req = {.vaddr = va, .len = len, .buf = via_gdb};
    struct qmp_regs by_index = {.cpu_index = v->index};
    struct qp_error err = {0};
    size_t got = 0;
    CHECK_INT(prof_target_read(t, v, &req, 1, NULL), 0);
    CHECK_MSG(qmp_mem_read(s->qmp, &by_index, va, via_qmp, len, &got, &err) == 0, "%s", err.msg);
    CHECK_MSG(req.got == len && got == len && memcmp(via_gdb, via_qmp, len) == 0,
              "CPU %d at %#" PRIx64 ": memsave and `m` differ", v->index, va);
}

/* QMP's view of the stopped vCPUs against the gdbstub's. */
static void cross_check(prof_target *t, const struct prof_arch *a, const struct prof_vcpu *cpus,
                        int n, struct seen *s)
{
    char *text = NULL;
    struct qp_error err = {0};
    struct prof_arch_monitor_cpu *m = g_new0(struct prof_arch_monitor_cpu, MAX_CPUS);
    int got = 0;
    CHECK_MSG(qmp_hmp(s->qmp, "info registers -a", -1, &text, &err) == 0, "%s", err.msg);
    CHECK_MSG(text && a->monitor_parse(text, m, MAX_CPUS, &got, &err) == 0, "%s", err.msg);
    CHECK_INT(got, n);
    for (int i = 0; i < n && i < got; i++) {
        const struct prof_vcpu *v = &cpus[i];
        struct prof_arch_cpu_state st = {0};
        uint64_t pc = 0, sp = 0, fp = 0, lr = 0;
        CHECK_INT(m[i].cpu_index, v->index);
        CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &m[i], &st, &err), 0);
        prof_arch_monitor_reg(&m[i], "pc", &pc);
        prof_arch_monitor_reg(&m[i], "sp", &sp);
        prof_arch_monitor_reg(&m[i], "x29", &fp);
        prof_arch_monitor_reg(&m[i], "x30", &lr);
        CHECK_MSG(pc == v->pc && sp == v->sp && fp == v->regs.r[29] && lr == v->regs.r[30] &&
                      st.privilege == v->privilege && st.paging == v->paging64,
                  "CPU %d: QMP pc %#" PRIx64 " sp %#" PRIx64 " EL%d paging %d, the gdbstub pc "
                  "%#" PRIx64 " sp %#" PRIx64 " EL%d paging %d",
                  i, pc, sp, 3 - st.privilege, st.paging, v->pc, v->sp, 3 - v->privilege,
                  v->paging64);
        if (v->paging64 && (v->privilege == 2 || v->privilege == 3)) {
            compare_memsave(t, v, s, v->pc, 16);
            compare_memsave(t, v, s, v->sp, 16);
        }
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
    CHECK_INT(n, s->cpus);
    for (int i = 0; i < n; i++) {
        if (!s->booting)
            check_vcpu(t, a, &cpus[i], s);
        else if (cpus[i].user && cpus[i].index >= 0 && cpus[i].index < MAX_CPUS)
            s->user_of[cpus[i].index]++;
    }
    if (s->qmp)
        cross_check(t, a, cpus, n, s);
    return 0;
}

/* Past the boot code: every CPU seen at EL0 or EL1 with the MMU on (with smp2, one CPU past it
 * is not enough: the other can still be booting when the counted samples begin). */
static bool booted(const void *ctx)
{
    const struct seen *s = ctx;
    /* at EL0 once: past its boot (at EL1 with the MMU on, a CPU may not have its stack yet) */
    for (int c = 0; c < s->cpus; c++) {
        if (s->user_of[c] == 0)
            return false;
    }
    return true;
}

/* The qprof binary against the same machine: kernel ELFs of other architectures refused in one
 * line (over QMP too), and QMP's --memory direct (no TTBRs to walk from); kernel stacks unwound
 * by CFI to el0_sync, user ones marked truncated after the leaf (libdwfl's frame-pointer
 * guesses for aarch64 are not taken, unw_walk.c). */
/* QMP alone: the same stacks, memory through HMP reads (--memory auto) or memsave, which QEMU
 * translates at each vCPU's exception level. No TTBR0 over QMP, so --os none tells no address
 * spaces apart: user code is
 * "[unknown process]", kernel code "kernel", never a process name. */
static void run_qprof_qmp(const struct arch_qemu *q, const char *elf, int cpus, const char *memory)
{
    const char *args[] = {"--memory",       memory,
                          "--qmp-socket",   q->qmp,
                          "--os",           "none",
                          "--kernel",       elf,
                          "--kernel-slide", "-0x8000000000",
                          "--samples",      "100",
                          "--no-progress",  "-o",
                          q->folded,        NULL};
    char *errors = NULL;
    int status = arch_qemu_run_qprof(q, args, &errors);
    CHECK_MSG(status == 0, "qprof: %s", errors);
    char *want = g_strdup_printf("transport: QMP, memory: %s, translated by QEMU",
                                 strcmp(memory, "memsave") == 0 ? "memsave" : "hmp");
    CHECK_MSG(strstr(errors, want), "%s", errors);
    g_free(want);
    g_free(errors);
    char *stacks = arch_qemu_slurp(q->folded);
    arch_qemu_check_folded(stacks, cpus, 100, "el0_sync", true, "vectors");
    char **lines = g_strsplit(stacks, "\n", -1);
    for (char **p = lines; *p; p++)
        CHECK_MSG(!**p || g_str_has_prefix(*p, "kernel;") ||
                      g_str_has_prefix(*p, "[unknown process];[truncated];"),
                  "%s", *p);
    g_strfreev(lines);
    g_free(stacks);
}

static void run_qprof(const struct arch_qemu *q, const char *elf, int cpus)
{
    arch_qemu_expect_refusals(q, "riscv64", EM_RISCV, NULL);
    /* The image's link address is physical; it runs at KERNEL_OFFSET above it. */
    /* Memory through `m` packets (QEMU translates: --memory memsave), out of the QEMU process
     * (the gdbstub alone: auto's choice on this host), then with --qmp-socket from the shared
     * RAM file; the last two through qprof's own walk of both TTBRs. */
    static const char *const memory[] = {"memsave", "auto", "auto"};
    static const char *const summary[] = {"memory: gdbstub m packets", "memory: process memory",
                                          "memory: direct"};
    for (int way = 0; way < 3; way++) {
        const char *right[] = {
            "--gdb",         q->gdb, "--os",           "none",
            "--kernel",      elf,    "--kernel-slide", "-0x8000000000",
            "--samples",     "100",  "--memory",       memory[way],
            "--no-progress", "-o",   q->folded,        way == 2 ? "--qmp-socket" : NULL,
            q->qmp,          NULL};
        char *errors = NULL;
        int status = arch_qemu_run_qprof(q, right, &errors);
        CHECK_MSG(status == 0, "qprof: %s", errors);
        CHECK_MSG(strstr(errors, summary[way]), "want '%s': %s", summary[way], errors);
        g_free(errors);
        char *stacks = arch_qemu_slurp(q->folded);
        arch_qemu_check_folded(stacks, cpus, 100, "el0_sync", true, NULL);
        g_free(stacks);
    }
    run_qprof_qmp(q, elf, cpus, "auto");
    run_qprof_qmp(q, elf, cpus, "memsave");
}

/* argv[1]: "64k" for the 64K-granule build of the machine, "max" for the 4K one on `-cpu max`
 * (SVE and some 200 system registers in its target.xml), "smpN" for N Cortex-A57s (up to 4),
 * else the 4K one on one Cortex-A57. */
int main(int argc, char **argv)
{
    bool g64 = argc > 1 && strcmp(argv[1], "64k") == 0;
    const char *cpu = argc > 1 && strcmp(argv[1], "max") == 0 ? "max" : "cortex-a57";
    int cpus = argc > 1 && g_str_has_prefix(argv[1], "smp") ? atoi(argv[1] + 3) : 1;
    REQUIRE(cpus >= 1 && cpus <= MAX_CPUS);
    const char *elf = g64 ? QPROF_A64_MINI_64K : QPROF_A64_MINI;
    const char *const machine[] = {"-cpu", cpu, NULL};
    const struct arch_qemu_spec spec = {.qemu = "qemu-system-aarch64",
                                        .kernel = elf,
                                        .skip_hint =
                                            "xtask deps: qemu-system-arm, gcc-aarch64-linux-gnu",
                                        .dir_template = "/tmp/qpa64XXXXXX",
                                        .machine_args = machine,
                                        .ram_base = RAM_BASE,
                                        .ram_size = RAM_SIZE,
                                        .cpus = cpus,
                                        .arch = &prof_arch_aarch64};
    struct arch_qemu q;
    if (arch_qemu_boot(&q, &spec) == 77)
        return 77;
    struct seen fresh = {.q = &q,
                         .page = g64 ? 65536 : 4096,
                         .block = g64 ? 512ull << 20 : 1ull << 30,
                         .tcr = g64 ? TCR_64K : TCR_4K,
                         .cpus = cpus};
    find_entry(elf, &fresh);
    struct seen s = fresh;
    s.booting = true;
    /* Boot: until stops find every CPU at EL0 (generous deadline). */
    arch_qemu_wait_boot(&q, on_stop, &s, booted);
    /* Then a fixed count of samples a few ms apart. About half at EL0, half at EL1; never
     * anywhere else. */
    s = fresh;
    struct qmp_open_opts qo = {.timeout_s = 10, .backend = QMP_MEM_MEMSAVE};
    struct qp_error qerr = {0};
    CHECK_MSG(qmp_open(q.qmp, &qo, &s.qmp, &qerr) == 0, "%s", qerr.msg);
    arch_qemu_sample(&q, on_stop, &s, SAMPLES);
    fprintf(stderr, "%d vCPU stops: QMP's registers, EL and memsave agreed with the gdbstub's\n",
            s.cross_checked);
    CHECK_INT(s.cross_checked, SAMPLES * cpus);
    qmp_free(s.qmp);
    s.qmp = NULL;
    fprintf(stderr,
            "%s, %s: %d samples: %d EL0, %d EL1, %d other; %d translations compared; chains: %d "
            "user, %d kernel (%d from kwork)\n",
            cpu, g64 ? "64K" : "4K", SAMPLES, s.user, s.kernel, s.other, s.walked, s.user_chains,
            s.kernel_chains, s.kernel_deep);
    CHECK_INT(s.other, 0);
    /* Every CPU seen at both levels, and both levels a fair share of all stops; not a share per
     * CPU: under MTTCG on a loaded host a starved vCPU stays at the level its last stop caught. */
    for (int c = 0; c < cpus; c++) {
        fprintf(stderr, "CPU %d: %d EL0, %d EL1\n", c, s.user_of[c], s.kernel_of[c]);
        CHECK(s.user_of[c] > 0);
        CHECK(s.kernel_of[c] > 0);
    }
    CHECK(s.user > SAMPLES * cpus / 10);
    CHECK(s.kernel > SAMPLES * cpus / 10);
    CHECK_INT(s.walked, 2 * (s.user + s.kernel));
    CHECK_INT(s.user_chains, s.user);
    /* A stop in el0_sync before it has set x29 has no chain yet; under TCG stops gather at the
     * exception entry (a block boundary), more so on a loaded host: most, not all. */
    CHECK(s.kernel_chains > 0);
    /* most chained kernel samples are in kwork's loop */
    CHECK_MSG(s.kernel_deep * 2 >= s.kernel_chains, "%d of %d chained kernel samples in kwork",
              s.kernel_deep, s.kernel_chains);
    arch_qemu_release_target(&q);
    run_qprof(&q, elf, s.cpus);
    arch_qemu_stop(&q);
    int shared = arch_qemu_result();
    return harness_result() || shared;
}
