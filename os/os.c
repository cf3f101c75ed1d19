/* The OS adapter handle: an adapter's table and its state. */
#include "os.h"

#include <errno.h>
#include <glib.h>

struct prof_os {
    const struct prof_os_ops *ops;
    void *impl;
};

int prof_os_open(const struct prof_os_ops *ops, const struct prof_os_config *cfg, prof_os **out,
                 struct qp_error *err)
{
    void *impl = NULL;
    int rc = ops->open(cfg, &impl, err);
    if (rc)
        return qp_error_prefix(err, "opening the %s OS adapter", ops->name);
    prof_os *os = g_new0(prof_os, 1);
    os->ops = ops;
    os->impl = impl;
    *out = os;
    return 0;
}

void prof_os_free(prof_os *os)
{
    if (!os)
        return;
    os->ops->free(os->impl);
    g_free(os);
}

const char *prof_os_name(const prof_os *os)
{
    return os->ops->name;
}

void prof_os_refresh(prof_os *os, const struct prof_vcpu *cpus, int n_cpus,
                     const struct prof_os_mem *mem, struct prof_os_refresh *out)
{
    *out = (struct prof_os_refresh){0};
    os->ops->refresh(os->impl, cpus, n_cpus, mem, out);
}

void prof_os_task(prof_os *os, const struct prof_vcpu *cpu, int i, struct prof_task *out)
{
    *out = (struct prof_task){0};
    os->ops->task(os->impl, cpu, i, out);
}

size_t prof_os_kernel_stack_len(prof_os *os, const struct prof_vcpu *cpu, const struct prof_task *t,
                                size_t max)
{
    return os->ops->kernel_stack_len(os->impl, cpu, t, max);
}

int prof_os_user_regs(prof_os *os, const struct prof_vcpu *cpu, const struct prof_task *t,
                      const struct prof_os_mem *mem, struct unw_regs *out)
{
    if (!t->user_regs_at)
        return -ENOENT;
    return os->ops->user_regs(os->impl, cpu, t, mem, out);
}

int prof_os_kernel_unwind(prof_os *os, const struct prof_vcpu *cpu, const struct prof_task *t,
                          const struct prof_os_mem *mem, struct prof_kstack *out)
{
    if (!os->ops->kernel_unwind)
        return -ENOTSUP;
    out->by_frame_pointers = false;
    return os->ops->kernel_unwind(os->impl, cpu, t, mem, out);
}

const sym_table *prof_os_kernel_symbols(prof_os *os)
{
    return os->ops->kernel_symbols ? os->ops->kernel_symbols(os->impl) : NULL;
}

int prof_os_user_mapping(prof_os *os, int i, uint64_t pc, const struct prof_os_mem *mem,
                         struct prof_mapping *out)
{
    if (!os->ops->user_mapping)
        return -ENOTSUP;
    return os->ops->user_mapping(os->impl, i, pc, mem, out);
}

void prof_os_machine_reset(prof_os *os)
{
    if (os->ops->machine_reset)
        os->ops->machine_reset(os->impl);
}

uint64_t prof_os_capture_plan(prof_os *os, struct prof_capture_plan *out)
{
    *out = (struct prof_capture_plan){0};
    return os->ops->capture_plan ? os->ops->capture_plan(os->impl, out) : 0;
}

void prof_os_while_running(prof_os *os, const struct prof_os_mem *mem, struct prof_os_refresh *out)
{
    *out = (struct prof_os_refresh){0};
    if (os->ops->while_running)
        os->ops->while_running(os->impl, mem, out);
}

int prof_os_file_read(prof_os *os, uint64_t file_id, uint64_t offset, void *buf, size_t len,
                      size_t *got, const struct prof_os_mem *mem)
{
    *got = 0;
    if (!os->ops->file_read)
        return -ENOTSUP;
    return os->ops->file_read(os->impl, file_id, offset, buf, len, got, mem);
}

int prof_os_address_space(prof_os *os, int i, const struct prof_os_mem *mem,
                          struct prof_address_space *out)
{
    if (!os->ops->address_space)
        return -ENOTSUP;
    return os->ops->address_space(os->impl, i, mem, out);
}
