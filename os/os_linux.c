/* The adapter for a stock Linux guest: nothing installed in it, nothing asked of the user. The
 * linux/ module finds the kernel in guest RAM (vmcoreinfo, then kallsyms and ORC through the
 * kernel's own page table); os_linux*.c turn that into what the sampler asks of an OS adapter:
 * kernel symbols, kernel stacks unwound by ORC while the guest is stopped, the user registers
 * where the stack entered the kernel, the current task of each vCPU (BTF offsets, task_struct:
 * lx_task.h) and the mapping (VMA) a user pc lies in, from a per-mm cache of the maple tree.
 *
 * This file holds the ops table and what each stop and each spell of running does; the jobs it
 * hands out are one file each (os_linux_internal.h lists them).
 *
 * Until the kernel is found the adapter answers as os_none.c does: a guest that is not Linux
 * gets one line (when --os linux named it) and the address-split mode. */
#include "os_linux_internal.h"
#include "qp_log.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>

static int phys_read(void *ctx, uint64_t paddr, void *buf, size_t len)
{
    const struct os_linux *l = ctx;
    return l->mem && l->mem->read_phys ? l->mem->read_phys(l->mem->ctx, paddr, buf, len) : -ENOTSUP;
}

static int lx_open(const struct prof_os_config *cfg, void **impl, struct qp_error *err)
{
    (void)err; /* nothing here can fail */
    struct os_linux *l = g_new0(struct os_linux, 1);
    l->cfg = *cfg;
    l->phys = (struct lx_phys){.read = phys_read, .ctx = l};
    l->old_syms = g_ptr_array_new_with_free_func((GDestroyNotify)sym_table_free);
    l->mm_cache = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, os_linux_mm_vmas_free);
    l->named_mods = g_array_new(FALSE, FALSE, sizeof(struct lx_module));
    *impl = l;
    return 0;
}

static void lx_free(void *impl)
{
    struct os_linux *l = impl;
    if (!l)
        return;
    if (l->cfg.verbose && l->module_checks)
        qp_log(QP_LOG_INFO,
               "Linux module list checked %" PRIu64 " times while the guest ran (%.2f ms "
               "each on average), read in full %" PRIu64 " times (%.1f ms in all)",
               l->module_checks, l->module_check_ns / 1e6 / (double)l->module_checks,
               l->module_reads, l->module_read_ns / 1e6);
    if (l->cfg.verbose && l->switching_samples)
        qp_log(QP_LOG_INFO,
               "Linux: %" PRIu64 " samples in the middle of a context switch named by the "
               "run queue's incoming task",
               l->switching_samples);
    if (l->cfg.verbose && l->foreign_mm_samples)
        qp_log(QP_LOG_INFO,
               "Linux: %" PRIu64 " samples in a context switch, on the next task's page "
               "tables: their task's user memory was not read",
               l->foreign_mm_samples);
    if (l->cfg.verbose && (l->task_reads_instant || l->task_unnamed))
        qp_log(QP_LOG_INFO,
               "Linux current tasks: %" PRIu64 " reads from the sample's capture, %" PRIu64
               " samples not named (their capture lacked the task)",
               l->task_reads_instant, l->task_unnamed);
    lx_kernel_free(l->kernel);
    lx_kernel_free(l->candidate);
    lx_modules_free(l->mods);
    if (l->named_mods)
        g_array_free(l->named_mods, TRUE);
    sym_table_free(l->syms);
    if (l->old_syms)
        g_ptr_array_free(l->old_syms, TRUE);
    if (l->mm_cache)
        g_hash_table_destroy(l->mm_cache);
    g_free(l);
}

/* The old boot's bytes stay in RAM after a reset, vmcoreinfo included: without this the adapter
 * would name the new boot's early code with the old kernel's tasks and symbols. */
static void lx_machine_reset(void *impl)
{
    struct os_linux *l = impl;
    if (l->failed && !l->kernel) /* it gave up on this guest: give the new boot its chances */
        l->failed = false;
    os_linux_forget_kernel(l);
}

static void lx_refresh(void *impl, const struct prof_vcpu *cpus, int n_cpus,
                       const struct prof_os_mem *mem, struct prof_os_refresh *out)
{
    struct os_linux *l = impl;
    l->refreshes += l->refreshes < UINT_MAX;
    l->mem = mem;
    if (l->candidate)
        os_linux_check_candidate(l, cpus, n_cpus, out);
    l->cpus = cpus, l->n_cpus = n_cpus;
    /* With free reads, every stop checks for a reboot; otherwise lx_while_running does. */
    if (l->kernel && mem->reads_are_cheap && os_linux_rebooted(l))
        out->reset = true;
    if (!l->kernel)
        return; /* found while the guest runs (lx_while_running) */
    lx_kernel_forget_translations(l->kernel);
    l->stops++;
    out->published = true;
    out->kernel_text_addr = lx_kernel_vmcoreinfo(l->kernel)->stext;
    for (int i = 0; l->have_offsets && i < n_cpus && i < PROF_MAX_VCPUS; i++)
        os_linux_read_task(l, &cpus[i], i);
}

/* Finding the kernel reads only what the guest does not write once booted (the vmcoreinfo
 * page, the kernel image's page tables, kallsyms, ORC), so it runs while the guest does. */
static void lx_while_running(void *impl, const struct prof_os_mem *mem, struct prof_os_refresh *out)
{
    struct os_linux *l = impl;
    if (l->failed || !mem->read_phys || l->candidate)
        return;
    if (l->kernel) {
        l->mem = mem;
        if (!mem->reads_are_cheap && os_linux_rebooted(l))
            out->reset = true;
        if (l->kernel)
            os_linux_check_modules(l, mem, out);
        l->mem = NULL;
        if (l->kernel)
            return;
    }
    /* Scanning RAM through round trips costs seconds: auto mode only does it when reads are
     * free; --os linux or --vmcoreinfo always. */
    if (!mem->reads_are_cheap && !l->cfg.chosen && !l->cfg.vmcoreinfo_path) {
        os_linux_say_no_scan(l);
        return;
    }
    if (qp_now_ns() < l->next_try_ns)
        return;
    l->mem = mem;
    os_linux_find_kernel(l);
    l->mem = NULL;
}

const struct prof_os_ops prof_os_linux_ops = {
    .name = "linux",
    .open = lx_open,
    .free = lx_free,
    .refresh = lx_refresh,
    .task = os_linux_task,
    .kernel_stack_len = os_linux_kernel_stack_len,
    .user_regs = os_linux_user_regs,
    .kernel_unwind = os_linux_kernel_unwind,
    .kernel_symbols = os_linux_kernel_symbols,
    .while_running = lx_while_running,
    .user_mapping = os_linux_user_mapping,
    .machine_reset = lx_machine_reset,
    .capture_plan = os_linux_capture_plan,
    .address_space = os_linux_address_space,
    .file_read = os_linux_file_read,
};
