/* Boots the demo guest (default, nofp, -smp 2, run=...) and waits for its serial milestones. */
#include <stdio.h>
#include <time.h>

#include "harness.h"
#include "vm.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Boots, waits for `ready` and then for every needle. Returns VM_SKIP, or 0 after checks. */
static int boot_and_wait(const char *what, const struct vm_opts *opts, const char *const *needles)
{
    test_vm *vm = NULL;
    double t0 = now_s();
    int rc = vm_start(opts, &vm);
    if (rc == VM_SKIP)
        return VM_SKIP;
    REQUIRE(rc == 0);
    CHECK_MSG(vm_wait_serial(vm, "ready", 30) == 0, "%s: no 'ready'", what);
    fprintf(stderr, "%s: ready after %.2f s wall\n", what, now_s() - t0);
    for (const char *const *n = needles; *n; n++)
        CHECK_MSG(vm_wait_serial(vm, *n, 30) == 0, "%s: no '%s'", what, *n);
    char *text = vm_serial_text(vm);
    CHECK_MSG(strstr(text, "panic") == NULL && strstr(text, "fault pid=") == NULL,
              "%s: guest reported a failure:\n%s", what, text);
    free(text);
    vm_stop(vm);
    return 0;
}

int main(void)
{
    static const char *const mix[] = {
        "start pid=1 name=spin", "start pid=2 name=spin", "start pid=3 name=sys",
        "spin[1] iter=", "spin[2] iter=", "sys[3] calls=", "rate pid=1 iters=",
        "rate pid=2 iters=", "rate pid=3 iters=", NULL};
    if (boot_and_wait("default", NULL, mix) == VM_SKIP)
        return VM_SKIP;

    struct vm_opts nofp = {.kernel = QPROF_GUEST_KERNEL_NOFP};
    boot_and_wait("nofp", &nofp, mix);

    struct vm_opts smp = {.smp = 2};
    boot_and_wait("smp2", &smp, mix);

    static const char *const only_spin[] = {"start pid=1 name=spin", "spin[1] iter=",
                                            "rate pid=1 iters=", NULL};
    struct vm_opts one = {.cmdline = "run=spin"};
    boot_and_wait("run=spin", &one, only_spin);

    static const char *const sys_spin[] = {"start pid=1 name=sys", "start pid=2 name=spin",
                                           "sys[1] calls=", "spin[2] iter=", NULL};
    struct vm_opts two = {.kernel = QPROF_GUEST_KERNEL_NOFP, .cmdline = "run=sys,spin"};
    boot_and_wait("nofp run=sys,spin", &two, sys_spin);
    return harness_result();
}
