/* Finding the Linux kernel in guest RAM while the guest runs (vmcoreinfo, kallsyms, ORC, BTF),
 * checking a candidate against a vCPU's page tables, and forgetting it when the guest reboots. */
#include "os_linux_internal.h"
#include "qp_log.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* Says why the kernel was not found, once, when the user asked for Linux (auto stays quiet
 * unless verbose: most guests it probes are not Linux). */
static void say_why(struct os_linux *l, const struct qp_error *why)
{
    if (!l->said && (l->cfg.chosen || l->cfg.verbose))
        qp_log(QP_LOG_WARN, "--os linux: %s; samples are split by address only", why->msg);
    l->said = true;
}

/* Auto mode with no qprof_abi and no kernel ELF over a target whose reads cost round trips: it
 * does not scan for a kernel, and without a word the user would see bare addresses and not
 * know why (an arm64 or x86_64 Linux guest over QMP with no shared RAM file). Once, and only
 * once sampling is under way (10 stops): a run that fails at its first sample says that alone. */
void os_linux_say_no_scan(struct os_linux *l)
{
    if (l->said || l->refreshes < 10)
        return;
    if (!l->said)
        qp_log(QP_LOG_WARN,
               "no qprof_abi and no --kernel: if the guest runs Linux, qprof finds its "
               "kernel by scanning guest RAM, by itself only where it reads a shared RAM file "
               "(QEMU -object memory-backend-file,...,share=on -machine memory-backend=...; on "
               "aarch64 with --gdb beside --qmp-socket), and with --os linux through QMP's "
               "reads (seconds; not on aarch64). Until then samples are split by address "
               "only");
    l->said = true;
}

static bool is_stale(void *ctx, uint64_t paddr, const void *page)
{
    const struct os_linux *l = ctx;
    for (int i = 0; i < l->n_stale; i++)
        if (l->stale[i].paddr == paddr && memcmp(l->stale[i].head, page, VMCI_HEAD) == 0)
            return true;
    return false;
}

static int find_vmcoreinfo(struct os_linux *l, struct lx_vmcoreinfo *vi, struct qp_error *err)
{
    if (l->cfg.vmcoreinfo_path)
        return lx_vmcoreinfo_load_file(l->cfg.vmcoreinfo_path, vi, err);
    struct prof_ram_range r[MAX_RANGES];
    struct lx_ram_range lr[MAX_RANGES];
    int n = 0;
    struct qp_error why = {0};
    if (!l->mem->ram_ranges)
        return qp_error_set(err, -ENOTSUP,
                            "the target cannot list guest RAM to look for the kernel");
    if (l->mem->ram_ranges(l->mem->ctx, r, MAX_RANGES, &n, &why) != 0)
        return qp_error_set(err, -ENOTSUP, "no guest RAM to look for the kernel in: %s",
                            why.msg[0] ? why.msg : "the target cannot list it");
    for (int i = 0; i < n; i++)
        lr[i] = (struct lx_ram_range){r[i].start, r[i].end};
    uint64_t where;
    int rc = lx_vmcoreinfo_find_fresh(&l->phys, lr, n, is_stale, l, vi, &where, err);
    if (rc == 0 && l->cfg.verbose)
        qp_log(QP_LOG_INFO, "Linux vmcoreinfo at guest-physical 0x%" PRIx64, where);
    if (rc == 0 && l->phys.read(l->phys.ctx, where, l->vmci_head, VMCI_HEAD) == 0)
        l->vmci_paddr = where;
    return rc;
}

/* Where struct page of pfn 0 lies: the variable vmemmap_base with CONFIG_RANDOMIZE_MEMORY
 * (Debian's), else x86_64's fixed base for 4-level paging. */
static void load_vmemmap_base(struct os_linux *l)
{
    uint64_t at, base = UINT64_C(0xffffea0000000000);
    if (lx_kernel_symbol_addr(l->kernel, "vmemmap_base", &at) == 0 &&
        lx_kernel_read(l->kernel, at, &base, sizeof base) != 0)
        l->off.has_page_cache = false;
    l->off.vmemmap_base = base;
}

/* BTF for task_struct and the per-CPU current task; without it stacks still come, unnamed. */
static void load_task_offsets(struct os_linux *l)
{
    uint64_t start, stop;
    struct qp_error err = {0};
    lx_btf *btf = NULL;
    /* Named by kallsyms, or (a kernel without CONFIG_KALLSYMS_ALL: Debian's arm64) found by
     * its header in the image. */
    bool named = lx_kernel_symbol_addr(l->kernel, "__start_BTF", &start) == 0 &&
                 lx_kernel_symbol_addr(l->kernel, "__stop_BTF", &stop) == 0;
    if ((!named && lx_kernel_find_btf(l->kernel, &start, &stop)) || stop <= start ||
        stop - start > (64u << 20)) {
        qp_log(QP_LOG_WARN, "Linux kernel without BTF (__start_BTF): no process names");
        return;
    }
    l->have_percpu = lx_kernel_symbol_addr(l->kernel, "__per_cpu_offset", &l->per_cpu_offset) == 0;
    if (l->cfg.verbose)
        qp_log(QP_LOG_INFO,
               "Linux BTF: %" PRIu64 " bytes at 0x%" PRIx64 " (guest-physical 0x%" PRIx64 ")",
               stop - start, start, lx_kernel_image_paddr(l->kernel, start));
    uint8_t *blob = g_malloc(stop - start);
    int rc = lx_kernel_read(l->kernel, start, blob, stop - start);
    if (rc == 0)
        rc = lx_btf_new(blob, stop - start, &btf, &err);
    if (rc == 0)
        os_linux_load_module_offsets(l, btf);
    bool signal_bit;
    if (rc == 0 && lx_btf_orc_signal_bit(btf, &signal_bit) == 0 &&
        lx_kernel_check_orc_bits(l->kernel, signal_bit, &err))
        qp_log(QP_LOG_WARN, "%s", err.msg);
    if (rc == 0)
        rc = lx_btf_offsets(btf, &l->off, &err);
    /* The per-CPU variables are one way to the current task; without them (a kallsyms of text
     * only) a vCPU register gives it in kernel mode (aarch64's SP_EL0), the page-table root in
     * user mode (owners). */
    if (rc == 0 && lx_offsets_from_kernel(l->kernel, &l->off, &err) != 0) {
        if (l->cfg.verbose)
            qp_log(QP_LOG_INFO, "Linux: %s: current tasks from vCPU registers only", err.msg);
        l->have_percpu = false;
    }
    l->have_offsets = rc == 0;
    if (rc == 0 && l->off.has_page_cache)
        load_vmemmap_base(l);
    if (rc == 0 && !l->off.mm_map_count && l->cfg.verbose)
        qp_log(QP_LOG_INFO, "BTF has no mm_struct.map_count: a process's VMAs are read again "
                            "only when a user pc is in none of them");
    if (rc == 0 && !l->off.has_rq_curr && l->cfg.verbose)
        qp_log(QP_LOG_INFO,
               "Linux: no run queue (runqueues, rq.curr) in BTF or kallsyms: a "
               "sample in the middle of a context switch is named by the outgoing task");
    if (rc)
        qp_log(QP_LOG_WARN, "Linux BTF unusable (%s): no process names",
               err.msg[0] ? err.msg : "unreadable");
    lx_btf_free(btf);
    g_free(blob);
}

/* Finds and loads the kernel: vmcoreinfo, page tables, kallsyms, ORC, BTF, modules; while the
 * guest runs. It stays a candidate, reported to the session (l->found) only once a stop's vCPU
 * agrees with it (os_linux_check_candidate). */
bool os_linux_find_kernel(struct os_linux *l)
{
    struct lx_vmcoreinfo vi;
    struct qp_error err = {0};
    uint64_t t0 = qp_now_ns();
    int rc = find_vmcoreinfo(l, &vi, &err);
    if (rc == 0)
        rc = lx_kernel_open(&vi, &l->phys, &l->kernel, &err);
    if (rc == 0)
        rc = lx_kernel_load_kallsyms(l->kernel, &err);
    if (rc) {
        bool again = rc == -ENOENT && !l->cfg.vmcoreinfo_path && ++l->tries < MAX_TRIES;
        say_why(l, &err);
        l->failed = !again;
        l->next_try_ns = qp_now_ns() + (RETRY_NS << l->tries);
        lx_kernel_free(l->kernel);
        l->kernel = NULL;
        return false;
    }
    if (!lx_kernel_unwinds_by_fp(l->kernel) && lx_kernel_load_orc(l->kernel, &err))
        qp_log(QP_LOG_WARN, "%s; kernel stacks are unwound by CFI only", err.msg);
    load_task_offsets(l);
    if (l->have_mod_offsets && l->modules_head) {
        os_linux_read_modules(l);
        l->modules_checked_ns = qp_now_ns();
    }
    os_linux_build_symbols(l);
    l->found = (struct prof_os_refresh){
        .kernel_found = true, .kernel_stext = vi.stext, .kernel_slide = (int64_t)vi.kernel_offset};
    l->candidate = l->kernel;
    l->kernel = NULL;
    if (l->cfg.verbose)
        qp_log(QP_LOG_INFO,
               "Linux %s (%s), KASLR offset 0x%" PRIx64 ", %zu ORC entries; found in %.1f "
               "ms",
               vi.osrelease, lx_kernel_arch_name(l->candidate), vi.kernel_offset,
               lx_kernel_orc_entries(l->candidate), (qp_now_ns() - t0) / 1e6);
    return true;
}

/* Drops the kernel of a boot that ended (the symbols stay alive for the samples already taken);
 * it is looked for again. */
void os_linux_forget_kernel(struct os_linux *l)
{
    if (l->cfg.verbose && l->kernel)
        qp_log(QP_LOG_INFO, "the Linux guest os_linux_rebooted: looking for its kernel again");
    if (l->candidate) {
        l->kernel = l->candidate; /* dropped the same way, as a boot that ended */
        l->candidate = NULL;
    }
    lx_kernel_free(l->kernel);
    l->kernel = NULL;
    lx_modules_free(l->mods);
    l->mods = NULL;
    l->have_mod_offsets = false;
    g_array_set_size(l->named_mods, 0);
    if (l->syms)
        g_ptr_array_add(l->old_syms, l->syms);
    l->syms = NULL;
    if (l->vmci_paddr) {
        if (l->n_stale == MAX_STALE)
            memmove(&l->stale[0], &l->stale[1], sizeof l->stale[0] * (MAX_STALE - 1));
        else
            l->n_stale++;
        l->stale[l->n_stale - 1].paddr = l->vmci_paddr;
        memcpy(l->stale[l->n_stale - 1].head, l->vmci_head, VMCI_HEAD);
    }
    l->vmci_paddr = 0;
    l->plan_gen++;
    l->tries = 0;
    l->next_try_ns = 0;
    memset(l->task_ok, 0, sizeof l->task_ok);
    memset(l->owners, 0, sizeof l->owners);
    l->known_task = 0;
    l->owners_walked = 0;
    g_hash_table_remove_all(l->mm_cache);
}

/* The guest os_linux_rebooted when the vmcoreinfo bytes it was found with changed (a reset QMP did
 * not report: the gdbstub alone, or an event missed). */
bool os_linux_rebooted(struct os_linux *l)
{
    uint8_t now[VMCI_HEAD];
    if (!l->vmci_paddr || l->phys.read(l->phys.ctx, l->vmci_paddr, now, VMCI_HEAD) != 0 ||
        memcmp(now, l->vmci_head, VMCI_HEAD) == 0)
        return false;
    os_linux_forget_kernel(l);
    return true;
}

static int phys_word(void *ctx, uint64_t paddr, uint64_t *val)
{
    struct os_linux *l = ctx;
    return l->phys.read(l->phys.ctx, paddr, val, 8);
}

/* Whether cpu's page tables map the candidate kernel's _stext where that kernel's image lies.
 * Under PTI a vCPU in user mode runs on the user half of an 8 KiB pair of top-level tables:
 * the kernel's is the even page. */
static bool maps_candidate(struct os_linux *l, const struct prof_vcpu *cpu)
{
    const struct lx_vmcoreinfo *vi = lx_kernel_vmcoreinfo(l->candidate);
    uint64_t want = lx_kernel_image_paddr(l->candidate, vi->stext), paddr, page;
    uint64_t roots[2] = {cpu->as_root, cpu->as_root & ~UINT64_C(0x1fff)};
    for (int r = 0; r < 2; r++)
        if (prof_arch_page_walk(l->cfg.arch, roots[r], &cpu->mmu, vi->stext, phys_word, l, &paddr,
                                &page) == 0 &&
            paddr == want)
            return true;
    return false;
}

/* The first stop after a find: the candidate is the running kernel when a vCPU's page tables
 * agree with it. A stale one (an earlier boot's) is passed over by the next scan. */
void os_linux_check_candidate(struct os_linux *l, const struct prof_vcpu *cpus, int n_cpus,
                              struct prof_os_refresh *out)
{
    const struct prof_vcpu *cpu = NULL;
    for (int i = 0; i < n_cpus && !cpu; i++)
        if (cpus[i].paging64 && cpus[i].as_root)
            cpu = &cpus[i];
    if (!cpu)
        return; /* no vCPU in 64-bit paging this stop: ask again at the next */
    /* A vCPU in a paging mode the arch's walk does not serve (x86_64's 5 levels) proves
     * nothing: its kernel is taken on trust (QMP's RESET event still drops it at a reboot). */
    if (cpu->unwalkable || maps_candidate(l, cpu)) {
        l->kernel = l->candidate;
        l->candidate = NULL;
        l->plan_gen++;
        if (l->cfg.verbose)
            qp_log(QP_LOG_INFO, "vCPU %d maps that kernel's _stext: it is the running one",
                   cpu->index);
        out->kernel_found = true;
        out->kernel_stext = l->found.kernel_stext;
        out->kernel_slide = l->found.kernel_slide;
        return;
    }
    if (l->cfg.verbose || l->cfg.vmcoreinfo_path)
        qp_log(QP_LOG_WARN,
               "the Linux vmcoreinfo %s does not describe the running kernel "
               "(vCPU %d does not map its _stext)%s",
               l->cfg.vmcoreinfo_path ? l->cfg.vmcoreinfo_path : "found in RAM", cpu->index,
               l->cfg.vmcoreinfo_path ? "" : ": an earlier boot's; looking further");
    os_linux_forget_kernel(l); /* the candidate goes, its vmcoreinfo page is passed over from now */
    if (l->cfg.vmcoreinfo_path)
        l->failed = true;
    else if (++l->tries >= MAX_TRIES)
        l->failed = true;
}
