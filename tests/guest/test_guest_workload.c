/* The designed workload ratios, measured by sampling the guest's RIP through QMP while the
 * default mix (spin, spin, sys) runs: spin's hot_a:hot_b = 3:1, sys spends ~half its time in the
 * kernel, the CPU idles ~15%, and two spin processes share one binary under distinct pids. */
#include <unistd.h>

#include "elfinfo.h"
#include "harness.h"
#include "qmp.h"
#include "qprof/guest_abi.h"
#include "vm.h"

struct range {
    uint64_t lo, hi;
};

struct ctx {
    uint64_t abi_addr;
    struct range hot_a, hot_b, user_mix, kwork_mix;
    int samples, idle, hot_a_n, hot_b_n, sys_user, sys_kernel, user_mix_n, kwork_mix_n;
    uint32_t spin_pids[2];
    uint64_t spin_text[2];
};

static struct range sym_range(const char *path, const char *name)
{
    struct range r = {0, 0};
    uint64_t size = 0;
    CHECK_MSG(elf_symbol(path, name, &r.lo, &size) == 0, "no %s in %s", name, path);
    r.hi = r.lo + size;
    return r;
}

static int in(struct range r, uint64_t pc)
{
    return pc >= r.lo && pc < r.hi;
}

static void note_spin_pid(struct ctx *x, const struct qprof_abi_cpu *s)
{
    for (int i = 0; i < 2; i++) {
        if (x->spin_pids[i] == s->pid)
            return;
        if (x->spin_pids[i] == 0) {
            x->spin_pids[i] = s->pid;
            x->spin_text[i] = s->text_addr;
            return;
        }
    }
}

static int on_sample(qmp_client *c, const struct qmp_regs *cpus, int n_cpus, void *opaque,
                     struct qp_error *err)
{
    struct ctx *x = opaque;
    struct qprof_abi abi;
    size_t got = 0;
    int rc = qmp_mem_read(c, &cpus[0], x->abi_addr, &abi, sizeof abi, &got, err);
    if (rc < 0)
        return rc;
    const struct qprof_abi_cpu *s = &abi.cpu[0];
    const struct qmp_regs *cpu = &cpus[0];
    if (s->seq & 1)
        return 0;
    x->samples++;
    if (s->state == QPROF_CPU_IDLE) {
        x->idle += cpu->halted;
    } else if (strcmp(s->name, "spin") == 0) {
        note_spin_pid(x, s);
        x->hot_a_n += cpu->cpl == 3 && in(x->hot_a, cpu->rip);
        x->hot_b_n += cpu->cpl == 3 && in(x->hot_b, cpu->rip);
    } else if (strcmp(s->name, "sys") == 0) {
        x->sys_user += cpu->cpl == 3;
        x->sys_kernel += cpu->cpl == 0;
        x->user_mix_n += cpu->cpl == 3 && in(x->user_mix, cpu->rip);
        x->kwork_mix_n += cpu->cpl == 0 && in(x->kwork_mix, cpu->rip);
    }
    return 0;
}

int main(void)
{
    struct ctx x = {0};
    uint64_t size;
    REQUIRE(elf_symbol(QPROF_GUEST_KERNEL, QPROF_ABI_SYMBOL, &x.abi_addr, &size) == 0);
    x.hot_a = sym_range(QPROF_GUEST_USER_DIR "/spin", "hot_a");
    x.hot_b = sym_range(QPROF_GUEST_USER_DIR "/spin", "hot_b");
    x.user_mix = sym_range(QPROF_GUEST_USER_DIR "/sys", "user_mix");
    x.kwork_mix = sym_range(QPROF_GUEST_KERNEL, "kwork_mix");

    test_vm *vm = NULL;
    int rc = vm_start(NULL, &vm);
    if (rc == VM_SKIP)
        return VM_SKIP;
    REQUIRE(rc == 0);
    REQUIRE(vm_wait_serial(vm, "sys[3] calls=", 30) == 0);
    qmp_client *c = NULL;
    struct qp_error err = {0};
    rc = qmp_open(vm_qmp_path(vm), NULL, &c, &err);
    CHECK_MSG(rc == 0, "qmp_open: %s", err.msg);
    /* ~3 s of guest time: three duty-cycle periods. */
    for (int i = 0; rc == 0 && i < 1000; i++) {
        rc = qmp_sample(c, on_sample, &x, NULL, &err);
        CHECK_MSG(rc == 0, "sample %d: %s", i, err.msg);
        usleep(2000);
    }
    qmp_free(c);
    vm_stop(vm);

    double a_share = (double)x.hot_a_n / (x.hot_a_n + x.hot_b_n + 1e-9);
    double sys_kernel = (double)x.sys_kernel / (x.sys_kernel + x.sys_user + 1e-9);
    double idle = (double)x.idle / (x.samples + 1e-9);
    fprintf(stderr,
            "%d samples: hot_a %d hot_b %d (hot_a share %.2f, designed 0.75); sys user %d "
            "kernel %d (kernel share %.2f, designed ~0.5; user_mix %d kwork_mix %d); idle %.2f "
            "(designed ~0.15); spin pids %u %u\n",
            x.samples, x.hot_a_n, x.hot_b_n, a_share, x.sys_user, x.sys_kernel, sys_kernel,
            x.user_mix_n, x.kwork_mix_n, idle, x.spin_pids[0], x.spin_pids[1]);
    CHECK(x.samples > 300);
    CHECK_MSG(a_share > 0.6 && a_share < 0.9, "hot_a share %.2f", a_share);
    CHECK_MSG(sys_kernel > 0.3 && sys_kernel < 0.7, "sys kernel share %.2f", sys_kernel);
    CHECK_MSG(idle > 0.04 && idle < 0.35, "idle share %.2f", idle);
    CHECK(x.kwork_mix_n > 0 && x.user_mix_n > 0);
    CHECK(x.spin_pids[0] != 0 && x.spin_pids[1] != 0 && x.spin_pids[0] != x.spin_pids[1]);
    CHECK_U64(x.spin_text[0], x.spin_text[1]);
    return harness_result();
}
