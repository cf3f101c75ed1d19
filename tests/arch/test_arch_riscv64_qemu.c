/* riscv64 through a real qemu-system-riscv64's gdbstub, with the gdbstub target (target/): the
 * architecture comes from target.xml, the registers by its names, priv and satp by `p` packets;
 * the guest (rv64_mini.S) runs in S and U mode under Sv39. At each stop the vCPU must be in a
 * mode the guest uses, with its pc in the right half for it, and qprof's own Sv39 walk of the
 * pc, reading the page tables from the guest's RAM file, must find the same bytes that QEMU's
 * MMU gives for that pc through `m` packets. */
#define _GNU_SOURCE
#include "arch.h"
#include "arch_qemu.h"
#include "harness.h"
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

static int on_stop(prof_target *t, const struct prof_vcpu *cpus, int n, void *ctx,
                   struct qp_error *err)
{
    (void)err;
    struct seen *s = ctx;
    const struct prof_arch *a = prof_target_arch(t);
    CHECK_INT(n, s->harts);
    for (int i = 0; i < n && i < MAX_HARTS; i++)
        check_vcpu(t, a, &cpus[i], s);
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

/* The qprof binary against the same machine: an x86_64 or an aarch64 kernel ELF is refused in
 * one line, and so is QMP alone; with the riscv64 one, kernel stacks unwind by its CFI
 * (libdwfl's riscv backend) from kwork through ksyscall to the trap entry s_trap, where they
 * end; what cannot be unwound (user code, for which --os none knows no binary) is marked
 * truncated, never invented. */
static void run_qprof(const struct arch_qemu *q, int harts)
{
    arch_qemu_expect_refusals(q, "aarch64", EM_AARCH64, "--gdb");
    const char *right[] = {"--gdb",          q->gdb,
                           "--os",           "none",
                           "--kernel",       QPROF_RV64_MINI,
                           "--kernel-slide", "-0x4080000000",
                           "--samples",      "100",
                           "--no-progress",  "-o",
                           q->folded,        NULL};
    CHECK_INT(arch_qemu_run_qprof(q, right, NULL), 0);
    char *stacks = arch_qemu_slurp(q->folded);
    arch_qemu_check_folded(stacks, harts, 100, "s_trap", false);
    g_free(stacks);
}

/* argv[1]: "smp2" (up to smp4) for that many harts, else one. */
int main(int argc, char **argv)
{
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
    arch_qemu_sample(&q, on_stop, &s, SAMPLES);
    fprintf(stderr, "%d samples: %d user, %d supervisor, %d machine; %d pcs walked\n", SAMPLES,
            s.user, s.supervisor, s.machine, s.walked);
    CHECK_INT(s.machine, 0);
    for (int h = 0; h < harts; h++) { /* every hart in both modes, about half and half */
        fprintf(stderr, "hart %d: %d user, %d supervisor\n", h, s.user_of[h], s.supervisor_of[h]);
        CHECK(s.user_of[h] > SAMPLES / 10);
        CHECK(s.supervisor_of[h] > SAMPLES / 10);
    }
    CHECK(s.walked >= s.user + s.supervisor - 2);
    arch_qemu_release_target(&q);
    run_qprof(&q, harts);
    arch_qemu_stop(&q);
    int shared = arch_qemu_result();
    return harness_result() || shared;
}
