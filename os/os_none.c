/* The adapter for a guest that publishes nothing: no stack bounds, no saved user registers. A
 * vCPU is idle when halted, else in user or kernel code by its privilege level (the target's
 * split of the address space then tells user frames from kernel ones). Samples still come out,
 * attributed to the kernel or to their address space (the session's aspace.c) and counted as
 * lacking process information.
 *
 * With --current (os_current.c), each vCPU's current process is read from the kernel's own
 * variable at every stop: its pid and name then name the sample exactly as the qprof_abi does.
 * A read that fails (a pointer into unmapped memory) leaves that vCPU without process
 * information, never with a wrong name.
 *
 * With --user-regs, a kernel-mode vCPU's user registers are read where the kernel saved them
 * (a trapframe), found the same way; the session reads the user stack they point to. */
#include "os.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

struct none {
    const prof_os_current *current;   /* borrowed; NULL without --current */
    const prof_uregs *user_regs;      /* borrowed; NULL without --user-regs */
    uint64_t user_end;                /* the target's split: user pcs are below */
    uint64_t regs_at[PROF_MAX_VCPUS]; /* --user-regs: the frame's address, 0 when unknown */
    int n_cpus;
    bool read_ok[PROF_MAX_VCPUS];
    uint32_t pid[PROF_MAX_VCPUS];
    char name[PROF_MAX_VCPUS][PROF_COMM_LEN];
};

static int none_open(const struct prof_os_config *cfg, void **impl, struct qp_error *err)
{
    (void)err; /* nothing here can fail */
    struct none *n = g_new0(struct none, 1);
    n->current = cfg->current;
    n->user_regs = cfg->user_regs;
    n->user_end = cfg->split.user_end;
    *impl = n;
    return 0;
}

static void none_free(void *impl)
{
    g_free(impl);
}

/* --user-regs: where a kernel-mode vCPU's process saved its user registers. In user mode the
 * vCPU's own registers are the user's. */
static void locate_user_regs(struct none *n, const struct prof_vcpu *cpu, int i,
                             const struct prof_os_mem *mem)
{
    n->regs_at[i] = 0;
    if (n->user_regs && !cpu->halted && cpu->paging64 && !cpu->user &&
        prof_uregs_locate(n->user_regs, cpu, mem, &n->regs_at[i]) != 0)
        n->regs_at[i] = 0;
}

static void none_refresh(void *impl, const struct prof_vcpu *cpus, int n_cpus,
                         const struct prof_os_mem *mem, struct prof_os_refresh *out)
{
    (void)out;
    struct none *n = impl;
    n->n_cpus = n_cpus < PROF_MAX_VCPUS ? n_cpus : PROF_MAX_VCPUS;
    for (int i = 0; i < n->n_cpus; i++) {
        n->read_ok[i] = false;
        locate_user_regs(n, &cpus[i], i, mem);
        if (!n->current || cpus[i].halted || !cpus[i].paging64)
            continue;
        int rc = prof_os_current_read(n->current, &cpus[i], mem, &n->pid[i], n->name[i],
                                      sizeof n->name[i]);
        n->read_ok[i] = rc == 0;
        if (rc == -ENOENT) { /* a NULL pointer: the kernel says no process runs */
            n->read_ok[i] = true;
            n->pid[i] = 0;
            n->name[i][0] = '\0';
        }
    }
}

static void none_task(void *impl, const struct prof_vcpu *cpu, int i, struct prof_task *out)
{
    struct none *n = impl;
    out->known = false;
    out->state = cpu->halted ? PROF_TASK_IDLE : cpu->user ? PROF_TASK_USER : PROF_TASK_KERNEL;
    if (i >= 0 && i < n->n_cpus)
        out->user_regs_at = n->regs_at[i];
    if (i < 0 || i >= n->n_cpus || !n->read_ok[i] || cpu->halted)
        return;
    out->known = true;
    out->pid = n->pid[i];
    g_strlcpy(out->comm, n->name[i], sizeof out->comm);
    if (out->pid)
        out->state = PROF_TASK_USER; /* a process is current, in user or kernel code */
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
    struct none *n = impl;
    if (!n->user_regs || !t->user_regs_at)
        return -ENOENT;
    return prof_uregs_read(n->user_regs, cpu, mem, t->user_regs_at, n->user_end, out);
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
