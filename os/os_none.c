/* The adapter for a guest that publishes nothing: no processes, no stack bounds, no saved user
 * registers. A vCPU is idle when halted, else in user or kernel code by its privilege level (the
 * target's split of the address space then tells user frames from kernel ones). Samples still
 * come out, attributed to the kernel or "user" and counted as lacking process information. */
#include "os.h"

#include <errno.h>

static int none_open(const struct prof_os_config *cfg, void **impl)
{
    (void)cfg;
    *impl = NULL;
    return 0;
}

static void none_free(void *impl)
{
    (void)impl;
}

static void none_refresh(void *impl, const struct prof_vcpu *cpus, int n_cpus,
                         const struct prof_os_mem *mem, struct prof_os_refresh *out)
{
    (void)impl, (void)cpus, (void)n_cpus, (void)mem, (void)out;
}

static void none_task(void *impl, const struct prof_vcpu *cpu, int i, struct prof_task *out)
{
    (void)impl, (void)i;
    out->known = false;
    out->state = cpu->halted ? PROF_TASK_IDLE : cpu->user ? PROF_TASK_USER : PROF_TASK_KERNEL;
}

static size_t none_kernel_stack_len(void *impl, const struct prof_vcpu *cpu,
                                    const struct prof_task *t, size_t max)
{
    (void)impl, (void)cpu, (void)t;
    return max;
}

static int none_user_regs(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                          const struct prof_os_mem *mem, struct unw_regs *out)
{
    (void)impl, (void)cpu, (void)t, (void)mem, (void)out;
    return -ENOENT;
}

const struct prof_os_ops prof_os_none_ops = {
    .name = "none",
    .open = none_open,
    .free = none_free,
    .refresh = none_refresh,
    .task = none_task,
    .kernel_stack_len = none_kernel_stack_len,
    .user_regs = none_user_regs,
};
