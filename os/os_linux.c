/* The adapter for a stock Linux guest: nothing installed in it, nothing asked of the user. The
 * linux/ module finds the kernel in guest RAM (vmcoreinfo, then kallsyms and ORC through the
 * kernel's own page table); this file turns that into what the sampler asks of an OS adapter:
 * kernel symbols, kernel stacks unwound by ORC while the guest is stopped, the user registers
 * where the stack entered the kernel, the current task of each vCPU (BTF offsets, task_struct:
 * lx_task.h) and the mapping (VMA) a user pc lies in, from a per-mm cache of the maple tree.
 *
 * Until the kernel is found the adapter answers as os_none.c does: a guest that is not Linux
 * gets one line (when --os linux named it) and the address-split mode. */
#include "linux.h"
#include "lx_module.h"
#include "lx_task.h"
#include "os.h"
#include "qp_log.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* A kernel not found yet (a guest still booting) is looked for again after 2, 4, 8 ... s, a
 * few times: each look reads all of guest RAM. */
#define RETRY_NS          (UINT64_C(2) * 1000000000)
#define MAX_TRIES         6
#define MAX_RANGES        16
#define THREAD_SIZE       (16u << 10)
#define VMCI_HEAD         512 /* OSRELEASE and the first SYMBOL() lines, which KASLR changes */
#define PAGE_SIZE         4096u
#define MAX_STALE         8
#define OWNERS            256
#define OWNERS_WALK_EVERY 50   /* stops between two walks of the process list */
#define OWNERS_WALK_MAX   4096 /* processes a walk reads at most */
#define MAX_MM_CACHE      256  /* address spaces whose VMAs are kept; all dropped past that */
/* The module list is checked while the guest runs: every second when reads are free (a check
 * reads each struct module once: 20 us with one module), else every ten seconds (each read is a
 * round trip then). A kernel stack that met a pc in module space that no known module covers
 * (a module loaded since) brings the next check forward: to 50 ms, or 1 s. */
#define MODULES_STALE_NS      (UINT64_C(50) * 1000000)
#define MODULES_CHECK_NS      (UINT64_C(1) * 1000000000)
#define MODULES_CHECK_SLOW_NS (UINT64_C(10) * 1000000000)

struct os_linux {
    struct prof_os_config cfg;
    const struct prof_os_mem *mem; /* this stop's, for the physical reader */
    struct lx_phys phys;
    lx_kernel *kernel;
    /* Found while the guest ran, not yet checked against a vCPU's page tables (RAM may hold an
     * earlier boot's vmcoreinfo): nothing is published from it until then. */
    lx_kernel *candidate;
    struct prof_os_refresh found; /* what to report once the candidate is checked */
    bool failed;                  /* for good: a kernel we cannot handle; answer as none */
    uint64_t next_try_ns;
    int tries;
    bool said;          /* why the kernel was not found, once */
    unsigned refreshes; /* every stop's, found or not: say_no_scan waits for a run under way */
    /* Where vmcoreinfo was found and how it began: a guest that rebooted (new KASLR offset)
     * no longer has the same bytes there. */
    uint64_t vmci_paddr;
    uint8_t vmci_head[VMCI_HEAD];
    /* The same of boots that ended: a reset leaves their bytes in RAM, and a scan must pass
     * over them (the newest MAX_STALE). */
    struct stale_vmci {
        uint64_t paddr;
        uint8_t head[VMCI_HEAD];
    } stale[MAX_STALE];
    int n_stale;
    GPtrArray *old_syms; /* symbols of earlier boots: the session's older samples use them */
    sym_table *syms;
    bool have_offsets;
    bool said_task_error; /* -v: the first failure to read a current task was said */
    struct lx_offsets off;
    uint64_t per_cpu_offset; /* __per_cpu_offset[] */
    bool have_percpu;        /* it and the per-CPU current task's offsets are known */
    /* The user tasks seen in kernel mode, by the physical address of their page table (the
     * last OWNERS of them): a vCPU in user mode whose root register names one runs that task's
     * process, for a kernel whose current task no per-CPU variable names. */
    struct owner {
        uint64_t pgd_pa;
        struct lx_task_info task;
    } owners[OWNERS];
    unsigned next_owner;
    uint64_t known_task;    /* a task read lately: where a walk of the process list starts */
    uint64_t owners_walked; /* l->stops at the last walk (+1; 0: none yet) */
    struct lx_task_info tasks[PROF_MAX_VCPUS];
    bool task_ok[PROF_MAX_VCPUS];
    uint64_t switching_samples; /* named by rq->curr (take_incoming_task) */
    /* A capturing target (the plugin): reads of the current task served from the sample's
     * instant, and samples left unnamed because their capture lacked one (taken before the
     * target had the plan): a live read then would name whatever runs now, not then. */
    uint64_t task_reads_instant, task_unnamed;
    uint64_t plan_gen; /* changes with each kernel accepted or forgotten (capture_plan) */
    /* The vCPU runs on its task's own page tables (CR3 is mm->pgd's): false in a context switch
     * between switch_mm and the write of current_task, where CR3 is already the next task's and
     * the task's user memory cannot be read through the vCPU. */
    bool own_mm[PROF_MAX_VCPUS];
    uint64_t foreign_mm_samples;
    GHashTable *mm_cache;         /* mm address -> struct mm_vmas (owned) */
    uint64_t stops;               /* refreshes so far: at most one VMA walk per mm per stop */
    const struct prof_vcpu *cpus; /* this stop's (borrowed during the stop): user reads */
    int n_cpus;
    /* Loaded modules: their symbols are part of syms, their ORC tables the unwinder's. */
    bool have_mod_offsets;
    struct lx_module_offsets mod_off;
    uint64_t modules_head; /* the list `modules` (lx_kernel_find_modules_list); 0: not found yet */
    lx_modules *mods;
    GArray *named_mods; /* struct lx_module: the modules whose symbols syms holds */
    bool modules_stale; /* a kernel stack met module text no module in mods covers */
    uint64_t modules_checked_ns;
    uint64_t module_checks, module_check_ns, module_reads, module_read_ns; /* costs */
};

/* The VMAs of one address space, in address order, as one walk of its maple tree found them.
 * Valid while mm->map_count is what it was (a VMA that grows in place, such as the heap, is
 * caught by the lookup missing). */
struct mm_vmas {
    int32_t map_count;  /* -1: unknown (no BTF offset) */
    int32_t tgid;       /* an mm freed and reused by another process */
    uint64_t walked_at; /* l->stops of the walk */
    GArray *vmas;       /* struct lx_vma */
    /* --sysroot: the exec file mappings (struct prof_exec_mapping), built on demand from vmas;
     * files (vm_file -> struct file_info) outlives a walk of the same process. */
    GArray *exec;
    uint64_t exec_gen;
    bool exec_ready; /* every path and build-id that can be read was */
    GHashTable *files;
};

/* What one mapped file of a process is: read once per (mm, file). */
#define FILE_MAX_TRIES 8
struct file_info {
    char path[PROF_PATH_MAX]; /* "" when unreadable */
    uint8_t build_id[PROF_BUILD_ID_MAX];
    uint8_t build_id_len;
    bool path_done, build_id_done; /* read, or failed for good */
    int tries;                     /* reads cut short by the budget */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static int phys_read(void *ctx, uint64_t paddr, void *buf, size_t len)
{
    const struct os_linux *l = ctx;
    return l->mem && l->mem->read_phys ? l->mem->read_phys(l->mem->ctx, paddr, buf, len) : -ENOTSUP;
}

static void mm_vmas_free(gpointer p)
{
    struct mm_vmas *m = p;
    g_array_free(m->vmas, TRUE);
    if (m->exec)
        g_array_free(m->exec, TRUE);
    if (m->files)
        g_hash_table_destroy(m->files);
    g_free(m);
}

static int lx_open(const struct prof_os_config *cfg, void **impl, struct qp_error *err)
{
    (void)err; /* nothing here can fail */
    struct os_linux *l = g_new0(struct os_linux, 1);
    l->cfg = *cfg;
    l->phys = (struct lx_phys){.read = phys_read, .ctx = l};
    l->old_syms = g_ptr_array_new_with_free_func((GDestroyNotify)sym_table_free);
    l->mm_cache = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, mm_vmas_free);
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
static void say_no_scan(struct os_linux *l)
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

/* vmlinux's symbols and the loaded modules' ("function [module]") in one table. */
static void build_symbols(struct os_linux *l)
{
    size_t n, n_mod;
    const struct lx_symbol *s = lx_kernel_symbols(l->kernel, &n);
    const struct lx_symbol *ms = lx_modules_symbols(l->mods, &n_mod);
    struct sym_map_entry *e = g_new(struct sym_map_entry, n + n_mod + 1);
    for (size_t i = 0; i < n; i++)
        e[i] = (struct sym_map_entry){s[i].addr, s[i].type, s[i].name};
    for (size_t i = 0; i < n_mod; i++)
        e[n + i] = (struct sym_map_entry){ms[i].addr, ms[i].type, ms[i].name};
    n += n_mod;
    g_array_set_size(l->named_mods, 0);
    for (size_t i = 0; i < lx_modules_count(l->mods); i++)
        g_array_append_val(l->named_mods, *lx_modules_at(l->mods, i));
    struct qp_error err = {0};
    if (sym_table_from_entries("vmlinux", e, n, &l->syms, &err) && l->cfg.verbose)
        qp_log(QP_LOG_INFO, "kernel symbols: %s", err.msg);
    g_free(e);
}

static int kread(void *ctx, uint64_t kva, void *buf, size_t len)
{
    return lx_kernel_read(ctx, kva, buf, len);
}

static int find_modules_list(struct os_linux *l)
{
    lx_kernel_forget_translations(l->kernel);
    int rc = lx_kernel_find_modules_list(l->kernel, &l->mod_off, &l->modules_head);
    lx_kernel_forget_translations(l->kernel);
    if (rc)
        l->modules_head = 0;
    return rc;
}

/* struct module from BTF, the list head from kallsyms and where modules lie from the
 * architecture; without them frames in modules stay addresses (and with ORC their stacks end
 * there, marked), everything else works. */
static void load_module_offsets(struct os_linux *l, const lx_btf *btf)
{
    struct qp_error err = {0};
    int rc = lx_btf_module_offsets(btf, &l->mod_off, &err);
    if (rc == 0 && lx_kernel_module_area(l->kernel, &l->mod_off.area_start, &l->mod_off.area_end))
        rc = qp_error_set(&err, -ENOENT, "no module area (kallsyms has no _stext or _etext)");
    /* Not found while no module is loaded (a kallsyms without data symbols): looked for again
     * at each check of the list. */
    l->modules_head = 0;
    if (rc == 0 && find_modules_list(l) != 0 && l->cfg.verbose)
        qp_log(QP_LOG_INFO, "Linux modules: kallsyms has no `modules` and no loaded module "
                            "shows the list yet");
    l->have_mod_offsets = rc == 0;
    if (rc)
        qp_log(QP_LOG_WARN, "Linux modules: %s; frames in modules stay addresses", err.msg);
}

/* Reads every live module's symbols and ORC tables (the guest running), and hands the ORC to
 * the unwinder. false when the list could not be read (tried again at the next check). */
static bool read_modules(struct os_linux *l)
{
    struct lx_reader r = {.read = kread, .ctx = l->kernel};
    struct qp_error err = {0};
    lx_modules *m = NULL;
    uint64_t t0 = now_ns();
    lx_kernel_forget_translations(l->kernel);
    int rc = lx_modules_read(&l->mod_off, &r, l->modules_head, true, &m, &err);
    lx_kernel_forget_translations(l->kernel);
    l->module_reads++;
    l->module_read_ns += now_ns() - t0;
    if (rc) {
        if (l->cfg.verbose)
            qp_log(QP_LOG_INFO, "Linux modules: %s", err.msg);
        return false;
    }
    if (lx_modules_warning(m))
        qp_log(QP_LOG_WARN, "Linux %s; its frames stay addresses", lx_modules_warning(m));
    size_t n_syms;
    lx_modules_symbols(m, &n_syms);
    if (l->cfg.verbose)
        qp_log(QP_LOG_INFO,
               "Linux modules: %zu text ranges, %zu symbols, %zu ORC entries, read in %.1f "
               "ms",
               lx_modules_count(m), n_syms, lx_modules_orc_entries(m), (now_ns() - t0) / 1e6);
    lx_kernel_use_modules(l->kernel, m);
    lx_modules_free(l->mods);
    l->mods = m;
    return true;
}

/* Every module in m is one syms names already (same struct, name and core range). */
static bool named_already(const struct os_linux *l, const lx_modules *m)
{
    for (size_t i = 0; i < lx_modules_count(m); i++) {
        const struct lx_module *x = lx_modules_at(m, i);
        bool found = false;
        for (guint j = 0; j < l->named_mods->len && !found; j++) {
            const struct lx_module *y = &g_array_index(l->named_mods, struct lx_module, j);
            found = x->addr == y->addr && x->base == y->base && x->size == y->size &&
                    x->text_size == y->text_size && strcmp(x->name, y->name) == 0;
        }
        if (!found)
            return false;
    }
    return true;
}

/* While the guest runs, at a bounded rate: reads the list's identities only (each struct module
 * once) and, when modules came or went, everything again. The unwinder takes the new ORC tables
 * at once. A module the symbol table does not name yet makes a new table, which the session
 * takes as a new kernel module (the samples taken before keep the old names); modules that only
 * went away (or came back where they were) keep the table: no new sample can be in their text
 * unless a module took their place, and that one is new. */
static void check_modules(struct os_linux *l, const struct prof_os_mem *mem,
                          struct prof_os_refresh *out)
{
    uint64_t now = now_ns();
    uint64_t every = mem->reads_are_cheap ? (l->modules_stale ? MODULES_STALE_NS : MODULES_CHECK_NS)
                     : l->modules_stale   ? MODULES_CHECK_NS
                                          : MODULES_CHECK_SLOW_NS;
    if (!l->have_mod_offsets || now - l->modules_checked_ns < every)
        return;
    l->modules_checked_ns = now;
    if (!l->modules_head && find_modules_list(l) != 0)
        return;
    l->modules_stale = false;
    struct lx_reader r = {.read = kread, .ctx = l->kernel};
    lx_modules *list = NULL;
    lx_kernel_forget_translations(l->kernel);
    int rc = lx_modules_read(&l->mod_off, &r, l->modules_head, false, &list, NULL);
    lx_kernel_forget_translations(l->kernel);
    bool same = rc == 0 && lx_modules_same(list, l->mods);
    lx_modules_free(list);
    l->module_checks++;
    l->module_check_ns += now_ns() - now;
    if (same || !read_modules(l) || named_already(l, l->mods))
        return;
    if (l->cfg.verbose)
        qp_log(QP_LOG_INFO, "Linux modules changed: new kernel symbols");
    if (l->syms)
        g_ptr_array_add(l->old_syms, l->syms);
    l->syms = NULL;
    build_symbols(l);
    const struct lx_vmcoreinfo *vi = lx_kernel_vmcoreinfo(l->kernel);
    out->kernel_found = true;
    out->kernel_stext = vi->stext;
    out->kernel_slide = (int64_t)vi->kernel_offset;
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
        load_module_offsets(l, btf);
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
 * agrees with it (check_candidate). */
static bool find_kernel(struct os_linux *l)
{
    struct lx_vmcoreinfo vi;
    struct qp_error err = {0};
    uint64_t t0 = now_ns();
    int rc = find_vmcoreinfo(l, &vi, &err);
    if (rc == 0)
        rc = lx_kernel_open(&vi, &l->phys, &l->kernel, &err);
    if (rc == 0)
        rc = lx_kernel_load_kallsyms(l->kernel, &err);
    if (rc) {
        bool again = rc == -ENOENT && !l->cfg.vmcoreinfo_path && ++l->tries < MAX_TRIES;
        say_why(l, &err);
        l->failed = !again;
        l->next_try_ns = now_ns() + (RETRY_NS << l->tries);
        lx_kernel_free(l->kernel);
        l->kernel = NULL;
        return false;
    }
    if (!lx_kernel_unwinds_by_fp(l->kernel) && lx_kernel_load_orc(l->kernel, &err))
        qp_log(QP_LOG_WARN, "%s; kernel stacks are unwound by CFI only", err.msg);
    load_task_offsets(l);
    if (l->have_mod_offsets && l->modules_head) {
        read_modules(l);
        l->modules_checked_ns = now_ns();
    }
    build_symbols(l);
    l->found = (struct prof_os_refresh){
        .kernel_found = true, .kernel_stext = vi.stext, .kernel_slide = (int64_t)vi.kernel_offset};
    l->candidate = l->kernel;
    l->kernel = NULL;
    if (l->cfg.verbose)
        qp_log(QP_LOG_INFO,
               "Linux %s (%s), KASLR offset 0x%" PRIx64 ", %zu ORC entries; found in %.1f "
               "ms",
               vi.osrelease, lx_kernel_arch_name(l->candidate), vi.kernel_offset,
               lx_kernel_orc_entries(l->candidate), (now_ns() - t0) / 1e6);
    return true;
}

static bool on_task_stack(const struct lx_task_info *t, uint64_t sp)
{
    return t->stack && sp >= t->stack && sp < t->stack + THREAD_SIZE;
}

/* In a context switch, from the move of the stack pointer to the incoming task's stack until
 * __switch_to writes current_task, current_task names the outgoing task while the stack (and the
 * user registers at its top) are the incoming one's: its name, address space and stack bounds
 * must go with the sample. rq->curr names the incoming task then; it is taken only when the stack
 * pointer lies on its stack and not on current_task's (an interrupt stack keeps current_task). */
static void take_incoming_task(struct os_linux *l, const struct lx_reader *r,
                               const struct prof_vcpu *cpu, uint64_t base, int i, bool captured)
{
    uint64_t sp = cpu->sp, next;
    struct lx_task_info t;
    struct qp_error ignored = {0};
    if (on_task_stack(&l->tasks[i], sp) || lx_rq_curr(&l->off, r, base, &next, &ignored) ||
        next == l->tasks[i].task)
        return;
    if (lx_task_read(&l->off, r, next, &t, &ignored)) {
        /* A switch under way whose incoming task the capture lacks: which of the two the stack
         * is cannot be told, so neither is named. */
        if (captured) {
            l->task_ok[i] = false;
            l->task_unnamed++;
        }
        return;
    }
    if (!on_task_stack(&t, sp))
        return;
    l->tasks[i] = t;
    l->switching_samples++;
}

/* The physical address of the page table of user task t (mm->pgd). */
static int pgd_paddr(struct os_linux *l, const struct lx_task_info *t, uint64_t *pa)
{
    uint64_t pgd;
    if (!t->mm || t->kthread || lx_kernel_read(l->kernel, t->mm + l->off.mm_pgd, &pgd, 8) ||
        !lx_is_kernel_addr(pgd))
        return -ENOENT;
    return lx_kernel_virt_to_phys(l->kernel, pgd, pa);
}

static void remember_owner(struct os_linux *l, const struct lx_task_info *t)
{
    uint64_t pa;
    if (pgd_paddr(l, t, &pa))
        return;
    for (int i = 0; i < OWNERS; i++)
        if (l->owners[i].pgd_pa == pa) {
            l->owners[i].task = *t;
            return;
        }
    l->owners[l->next_owner++ % OWNERS] = (struct owner){pa, *t};
}

/* Every process of the kernel's list (from a task read lately) as an owner of its page table:
 * for a process not seen in kernel mode yet. At most every OWNERS_WALK_EVERY stops, at most
 * OWNERS_WALK_MAX processes; garbage ends it. */
static void walk_owners(struct os_linux *l, const struct lx_reader *r)
{
    if (!l->known_task || (l->owners_walked && l->stops < l->owners_walked + OWNERS_WALK_EVERY))
        return;
    l->owners_walked = l->stops + 1;
    struct qp_error ignored = {0};
    uint64_t t = l->known_task;
    for (int n = 0; n < OWNERS_WALK_MAX; n++) {
        struct lx_task_info info;
        if (lx_task_next(&l->off, r, t, &t, &ignored) || t == l->known_task)
            return;
        if (lx_task_read(&l->off, r, t, &info, &ignored) == 0 && info.mm && !info.kthread)
            remember_owner(l, &info);
    }
}

static bool find_owner(struct os_linux *l, const struct lx_reader *r, uint64_t root,
                       struct lx_task_info *out)
{
    struct qp_error ignored = {0};
    uint64_t pa;
    for (int i = 0; i < OWNERS; i++)
        if (l->owners[i].pgd_pa && l->owners[i].pgd_pa == root &&
            lx_task_read(&l->off, r, l->owners[i].task.task, out, &ignored) == 0 &&
            pgd_paddr(l, out, &pa) == 0 && pa == root)
            return true;
    return false;
}

/* A vCPU in user mode: the process whose page table its root register names, seen in kernel
 * mode or in the process list, checked again (it may have exited and its page table gone to
 * another). */
static bool owner_task(struct os_linux *l, const struct lx_reader *r, const struct prof_vcpu *cpu,
                       struct lx_task_info *out)
{
    uint64_t root = cpu->as_root & l->cfg.arch->as_root_mask;
    if (find_owner(l, r, root, out))
        return true;
    walk_owners(l, r);
    return find_owner(l, r, root, out);
}

/* The current task from the register the kernel keeps it in (aarch64's SP_EL0 at EL1, riscv64's
 * tp in S-mode, or sscratch where tp holds user data), or in user mode from the page table's
 * owner (aarch64: TTBR0; the owners' pgd is compared with the root's address bits, which is the
 * table's physical address on aarch64 and x86_64, not on riscv64, whose sscratch names it). */
static void read_task_by_regs(struct os_linux *l, const struct prof_vcpu *cpu, int i)
{
    struct lx_reader r = {.read = kread, .ctx = l->kernel};
    struct qp_error err = {0};
    /* The register, or where it waits (riscv64's sscratch) while it holds user data. */
    uint64_t task = cpu->has_kernel_thread_reg && !cpu->user ? cpu->kernel_thread_reg : 0;
    if (!lx_is_kernel_addr(task) && cpu->has_kernel_thread_alt)
        task = cpu->kernel_thread_alt;
    if (!lx_is_kernel_addr(task)) {
        /* User mode, or kernel mode before the entry code loaded the register (an exception
         * vector's first instruction, the user's page table still in place). */
        l->task_ok[i] = owner_task(l, &r, cpu, &l->tasks[i]);
        return;
    }
    if (lx_task_read(&l->off, &r, task, &l->tasks[i], &err) == 0) {
        l->task_ok[i] = true;
        l->known_task = task;
        remember_owner(l, &l->tasks[i]);
    } else if (l->cfg.verbose && !l->said_task_error) {
        qp_log(QP_LOG_INFO, "Linux: vCPU %d's current task: %s (said once)", cpu->index, err.msg);
        l->said_task_error = true;
    }
}

/* A capturing target's sample: the current task's reads are served only from what the target
 * captured at the sample's instant (capture_plan). A live read instead would name whatever runs
 * by the time it reads (an interrupt of one process named after the next one scheduled). */
struct instant_reader {
    struct os_linux *l;
    const struct prof_vcpu *cpu;
};

static int instant_read(void *ctx, uint64_t kva, void *buf, size_t len)
{
    struct instant_reader *u = ctx;
    const struct prof_os_mem *mem = u->l->mem;
    size_t got = 0;
    if (mem->read(mem->ctx, u->cpu, kva, buf, len, &got) == 0 && got == len) {
        u->l->task_reads_instant++;
        return 0;
    }
    return -EAGAIN;
}

/* Whether cpu's page tables are those of task t's mm (PTI's user and kernel halves of one pair
 * alike). An mm whose pgd cannot be read counts as the vCPU's: nothing says it is not, and the
 * sample keeps the task the kernel named current. */
static bool runs_on_own_mm(struct os_linux *l, const struct prof_vcpu *cpu,
                           const struct lx_task_info *t)
{
    uint64_t pgd, pa;
    if (!t->mm || t->kthread || !lx_is_kernel_addr(t->mm) ||
        lx_kernel_read(l->kernel, t->mm + l->off.mm_pgd, &pgd, 8) ||
        lx_kernel_virt_to_phys(l->kernel, pgd, &pa))
        return true;
    return ((pa ^ cpu->as_root) & ~UINT64_C(0x1fff) & UINT64_C(0x000ffffffffff000)) == 0;
}

/* The per-CPU area: GS base in kernel mode, else __per_cpu_offset[cpu] (QEMU numbers vCPUs as
 * Linux numbers CPUs when nothing was hot-plugged); lx_current_task checks it either way. */
static void read_task(struct os_linux *l, const struct prof_vcpu *cpu, int i)
{
    struct instant_reader ir = {l, cpu};
    struct lx_reader r = {.read = kread, .ctx = l->kernel};
    bool captured = l->mem && l->mem->captured && l->mem->read;
    if (captured)
        r = (struct lx_reader){.read = instant_read, .ctx = &ir};
    uint64_t base = 0, task;
    struct qp_error err = {0};
    l->task_ok[i] = false;
    /* Kernel mode outside the kernel half is not the kernel we found (a new boot's early code
     * before QMP's RESET event reached us): its per-CPU data would be the old boot's. */
    if (!cpu->user && !lx_is_kernel_addr(cpu->pc))
        return;
    if (!l->have_percpu) {
        read_task_by_regs(l, cpu, i);
        return;
    }
    if (!cpu->user && cpu->gs_base >= l->cfg.split.kernel_start)
        base = cpu->gs_base;
    else if (lx_kernel_read(l->kernel,
                            l->per_cpu_offset + 8 * (uint64_t)(cpu->index > 0 ? cpu->index : 0),
                            &base, 8))
        return;
    if (lx_current_task(&l->off, &r, base, &task, &err) == 0 &&
        lx_task_read(&l->off, &r, task, &l->tasks[i], &err) == 0) {
        l->task_ok[i] = true;
        if (!cpu->user)
            take_incoming_task(l, &r, cpu, base, i, captured);
        l->own_mm[i] = !l->task_ok[i] || runs_on_own_mm(l, cpu, &l->tasks[i]);
        l->foreign_mm_samples += !l->own_mm[i];
    } else if (captured) {
        l->task_unnamed++; /* before the target had the plan: not this instant's to read */
    } else if (l->cfg.verbose && !l->said_task_error) {
        qp_log(QP_LOG_INFO, "Linux: vCPU %d's current task: %s (said once)", cpu->index, err.msg);
        l->said_task_error = true;
    }
}

/* Drops the kernel of a boot that ended (the symbols stay alive for the samples already taken);
 * it is looked for again. */
static void forget_kernel(struct os_linux *l)
{
    if (l->cfg.verbose && l->kernel)
        qp_log(QP_LOG_INFO, "the Linux guest rebooted: looking for its kernel again");
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

/* The guest rebooted when the vmcoreinfo bytes it was found with changed (a reset QMP did not
 * report: the gdbstub alone, or an event missed). */
static bool rebooted(struct os_linux *l)
{
    uint8_t now[VMCI_HEAD];
    if (!l->vmci_paddr || l->phys.read(l->phys.ctx, l->vmci_paddr, now, VMCI_HEAD) != 0 ||
        memcmp(now, l->vmci_head, VMCI_HEAD) == 0)
        return false;
    forget_kernel(l);
    return true;
}

/* The old boot's bytes stay in RAM after a reset, vmcoreinfo included: without this the adapter
 * would name the new boot's early code with the old kernel's tasks and symbols. */
static void lx_machine_reset(void *impl)
{
    struct os_linux *l = impl;
    if (l->failed && !l->kernel) /* it gave up on this guest: give the new boot its chances */
        l->failed = false;
    forget_kernel(l);
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
static void check_candidate(struct os_linux *l, const struct prof_vcpu *cpus, int n_cpus,
                            struct prof_os_refresh *out)
{
    const struct prof_vcpu *cpu = NULL;
    for (int i = 0; i < n_cpus && !cpu; i++)
        if (cpus[i].paging64 && cpus[i].as_root)
            cpu = &cpus[i];
    if (!cpu)
        return; /* no vCPU in 64-bit paging this stop: ask again at the next */
    /* The walker here knows 4 levels; a 5-level guest's kernel is taken on trust (QMP's RESET
     * event still drops it at a reboot). */
    if (cpu->la57 || maps_candidate(l, cpu)) {
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
    forget_kernel(l); /* the candidate goes, its vmcoreinfo page is passed over from now */
    if (l->cfg.vmcoreinfo_path)
        l->failed = true;
    else if (++l->tries >= MAX_TRIES)
        l->failed = true;
}

static void lx_refresh(void *impl, const struct prof_vcpu *cpus, int n_cpus,
                       const struct prof_os_mem *mem, struct prof_os_refresh *out)
{
    struct os_linux *l = impl;
    l->refreshes += l->refreshes < UINT_MAX;
    l->mem = mem;
    if (l->candidate)
        check_candidate(l, cpus, n_cpus, out);
    l->cpus = cpus, l->n_cpus = n_cpus;
    /* With free reads, every stop checks for a reboot; otherwise lx_while_running does. */
    if (l->kernel && mem->reads_are_cheap && rebooted(l))
        out->reset = true;
    if (!l->kernel)
        return; /* found while the guest runs (lx_while_running) */
    lx_kernel_forget_translations(l->kernel);
    l->stops++;
    out->published = true;
    out->kernel_text_addr = lx_kernel_vmcoreinfo(l->kernel)->stext;
    for (int i = 0; l->have_offsets && i < n_cpus && i < PROF_MAX_VCPUS; i++)
        read_task(l, &cpus[i], i);
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
        if (!mem->reads_are_cheap && rebooted(l))
            out->reset = true;
        if (l->kernel)
            check_modules(l, mem, out);
        l->mem = NULL;
        if (l->kernel)
            return;
    }
    /* Scanning RAM through round trips costs seconds: auto mode only does it when reads are
     * free; --os linux or --vmcoreinfo always. */
    if (!mem->reads_are_cheap && !l->cfg.chosen && !l->cfg.vmcoreinfo_path) {
        say_no_scan(l);
        return;
    }
    if (now_ns() < l->next_try_ns)
        return;
    l->mem = mem;
    find_kernel(l);
    l->mem = NULL;
}

static void lx_task(void *impl, const struct prof_vcpu *cpu, int i, struct prof_task *out)
{
    struct os_linux *l = impl;
    out->state = cpu->halted ? PROF_TASK_IDLE : cpu->user ? PROF_TASK_USER : PROF_TASK_KERNEL;
    out->user_leaf_only = l->kernel != NULL; /* user unwinding tables: not yet */
    if (!l->kernel || i < 0 || i >= PROF_MAX_VCPUS || !l->task_ok[i])
        return;
    const struct lx_task_info *t = &l->tasks[i];
    out->known = true;
    out->pid = (uint32_t)t->tgid;
    if (t->pid == 0) {
        /* The idle task's comm is already "swapper/N", N Linux's own CPU number. */
        g_strlcpy(out->comm, t->comm[0] ? t->comm : "swapper", sizeof out->comm);
        out->state = PROF_TASK_KERNEL; /* in the idle task, but not halted: real work */
        return;
    }
    /* A kernel thread in brackets, as ps shows it: "[kworker/0:1] (7)" beside "dd (94)". */
    snprintf(out->comm, sizeof out->comm, t->kthread ? "[%s]" : "%s", t->comm);
    out->state = t->kthread ? PROF_TASK_KERNEL : PROF_TASK_USER;
    if (t->stack)
        out->kstack_lo = t->stack, out->kstack_hi = t->stack + THREAD_SIZE;
    if (!t->kthread && t->stack)
        out->user_regs_at = t->stack + THREAD_SIZE - l->off.pt_regs_size;
}

static size_t lx_kernel_stack_len(void *impl, const struct prof_vcpu *cpu,
                                  const struct prof_task *t, size_t max)
{
    (void)impl, (void)cpu, (void)t;
    return max;
}

static int lx_user_regs(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                        const struct prof_os_mem *mem, struct unw_regs *out)
{
    (void)impl, (void)cpu, (void)t, (void)mem, (void)out;
    return -ENOENT; /* the ORC walk hands them over (kernel_unwind) */
}

_Static_assert(LX_GREGS <= UNW_NREGS, "linux/'s registers fit struct unw_regs");

static enum unw_stop stop_of(enum lx_unwind_end e)
{
    switch (e) {
    case LX_END_USER:
        return UNW_STOP_LEFT_SPACE;
    case LX_END_TASK_START:
        return UNW_STOP_OUTERMOST;
    case LX_END_NO_ORC:
    case LX_END_BAD_ORC:
    case LX_END_FP_BROKEN:
        return UNW_STOP_NO_CFI;
    case LX_END_UNREADABLE:
        return UNW_STOP_MEMORY;
    case LX_END_LOOP:
        return UNW_STOP_NOT_GROWING;
    case LX_END_DEPTH:
        return UNW_STOP_DEPTH;
    }
    return UNW_STOP_ERROR;
}

/* A kernel that keeps frame pointers (arm64): the chain from the live registers, which are in
 * DWARF numbering for these architectures as for lx_unwind_fp. */
struct stack_reader {
    const struct prof_os_mem *mem;
    const struct prof_vcpu *cpu;
};
static int stack_read(void *ctx, uint64_t kva, void *buf, size_t len);

/* A capturing target's sample: the frame records only from what it captured at the instant (the
 * stack from sp), never from memory the guest has rewritten since. */
static int fp_unwind(struct os_linux *l, const struct prof_vcpu *cpu, const struct prof_task *t,
                     const struct prof_os_mem *mem, struct prof_kstack *out)
{
    uint64_t live[LX_GREGS];
    struct lx_frame frames[PROF_KSTACK_MAX];
    struct lx_fp_result res;
    struct lx_fp_task task = {.stack_lo = t->kstack_lo,
                              .stack_hi = t->kstack_hi,
                              .pt_regs_size = l->have_offsets ? l->off.pt_regs_size : 0,
                              .kthread = t->state == PROF_TASK_KERNEL,
                              .has_trap_pc = cpu->has_exception_pc,
                              .trap_pc = cpu->exception_pc};
    struct stack_reader sr = {mem, cpu};
    if (mem && mem->captured && mem->read)
        task.read = stack_read, task.read_ctx = &sr;
    for (int i = 0; i < LX_GREGS && i < UNW_NREGS; i++)
        live[i] = cpu->regs.r[i];
    lx_unwind_fp(l->kernel, live, &task, frames, PROF_KSTACK_MAX, &res);
    out->n = res.n_frames;
    for (int i = 0; i < res.n_frames; i++)
        out->pc[i] = frames[i].pc, out->exact[i] = frames[i].exact;
    out->stop = stop_of(res.end);
    out->have_user_regs = res.have_user_regs;
    out->by_frame_pointers = true;
    if (res.have_user_regs) {
        memset(&out->user_regs, 0, sizeof out->user_regs);
        for (int i = 0; i < LX_GREGS && i < UNW_NREGS; i++)
            out->user_regs.r[i] = res.user_regs[i];
    }
    return 0;
}

/* The kernel stack of a captured sample: only what the target captured at its instant (the
 * stack from sp, the top of the task's stack); a frame beyond it ends the walk, marked, rather
 * than be read from memory the guest has rewritten since. */
static int stack_read(void *ctx, uint64_t kva, void *buf, size_t len)
{
    const struct stack_reader *u = ctx;
    size_t got = 0;
    int rc = u->mem->read(u->mem->ctx, u->cpu, kva, buf, len, &got);
    return rc ? rc : got == len ? 0 : -EFAULT;
}

static int lx_kernel_unwind(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                            const struct prof_os_mem *mem, struct prof_kstack *out)
{
    struct os_linux *l = impl;
    if (!l->kernel || cpu->user)
        return -ENOTSUP;
    if (lx_kernel_unwinds_by_fp(l->kernel))
        return fp_unwind(l, cpu, t, mem, out);
    if (!lx_kernel_orc_entries(l->kernel))
        return -ENOTSUP;
    struct lx_pt_regs live;
    struct lx_frame frames[PROF_KSTACK_MAX];
    struct lx_unwind_result res;
    if (lx_kernel_regs_to_pt(l->kernel, cpu->regs.r, &live))
        return -ENOTSUP;
    struct stack_reader sr = {mem, cpu};
    if (mem && mem->captured && mem->read)
        lx_unwind_from(l->kernel, &live, stack_read, &sr, frames, PROF_KSTACK_MAX, &res);
    else
        lx_unwind(l->kernel, &live, frames, PROF_KSTACK_MAX, &res);
    out->n = res.n_frames;
    for (int i = 0; i < res.n_frames; i++)
        out->pc[i] = frames[i].pc, out->exact[i] = frames[i].exact;
    out->stop = stop_of(res.end);
    /* Module text that no module read so far covers: one loaded since (read again soon). */
    uint64_t last = res.n_frames ? frames[res.n_frames - 1].pc : 0;
    if (res.end == LX_END_NO_ORC && last >= l->mod_off.area_start && last < l->mod_off.area_end &&
        !lx_modules_find(l->mods, last))
        l->modules_stale = true;
    out->have_user_regs = res.have_user_regs;
    if (res.have_user_regs) {
        memset(&out->user_regs, 0, sizeof out->user_regs);
        lx_kernel_regs_from_pt(l->kernel, &res.user_regs, out->user_regs.r);
        if (res.user_regs_partial) { /* an iret frame only: the rest are still live */
            const struct prof_arch *a = l->cfg.arch;
            struct unw_regs live_u = cpu->regs;
            live_u.r[a->pc_reg] = out->user_regs.r[a->pc_reg];
            live_u.r[a->sp_reg] = out->user_regs.r[a->sp_reg];
            out->user_regs = live_u;
        }
    }
    return 0;
}

/* The top of the task's kernel stack a capturing target takes: the user registers saved at
 * entry (pt_regs) and the frames below them, for samples whose sp is on another stack (an
 * interrupt's), whose walk comes back to the task's. */
#define STACK_TOP_CAPTURE 4096u

/* What a capturing target takes at each sample for read_task and the ORC walk: the per-CPU
 * this_cpu_off (lx_current_task's check) and current_task words, the task_struct span
 * lx_task_read reads, the top of that task's stack, and the run queue's curr word
 * (take_incoming_task). */
static uint64_t lx_capture_plan(void *impl, struct prof_capture_plan *out)
{
    struct os_linux *l = impl;
    /* a kernel that keeps the current task in a register needs none: the capture has it */
    uint32_t iret_off;
    if (!l->kernel || !l->have_offsets || !lx_kernel_current_in_percpu(l->kernel, &iret_off))
        return l->plan_gen * 2; /* none (a change from a plan sent before) */
    uint32_t lo, hi;
    lx_task_span(&l->off, &lo, &hi);
    if (hi - lo + 24 > PROF_CAPTURE_BYTES)
        return l->plan_gen * 2;
    uint32_t top = PROF_CAPTURE_BYTES - 24 - (hi - lo);
    if (top > STACK_TOP_CAPTURE)
        top = STACK_TOP_CAPTURE;
    int64_t area = (int64_t)l->off.percpu_start;
    out->n = 4;
    out->w[0] = (struct prof_capture_window){.base = PROF_CAPTURE_KERNEL_PERCPU,
                                             .add = area + (int64_t)l->off.percpu_this_cpu_off,
                                             .len = 8};
    out->w[1] = (struct prof_capture_window){.base = PROF_CAPTURE_KERNEL_PERCPU,
                                             .add = area + (int64_t)l->off.percpu_current_task,
                                             .len = 8};
    out->w[2] = (struct prof_capture_window){
        .base = PROF_CAPTURE_POINTER, .from = 1, .from_off = 0, .add = lo, .len = hi - lo};
    out->w[3] = (struct prof_capture_window){.base = PROF_CAPTURE_POINTER,
                                             .from = 2,
                                             .from_off = l->off.task_stack - lo,
                                             .add = THREAD_SIZE - top,
                                             .len = top};
    /* the pt_regs at the stack's top: the user stack of a system call or interrupt */
    out->user_frame_window = 4;
    out->user_frame_off = top - l->off.pt_regs_size + iret_off;
    /* rq->curr: which task a sample in the middle of a context switch belongs to */
    if (l->off.has_rq_curr)
        out->w[out->n++] = (struct prof_capture_window){
            .base = PROF_CAPTURE_KERNEL_PERCPU,
            .add = area + (int64_t)(l->off.percpu_runqueues + l->off.rq_curr),
            .len = 8};
    return l->plan_gen * 2 + 1;
}

static const sym_table *lx_kernel_symbols_of(void *impl)
{
    const struct os_linux *l = impl;
    return l->syms;
}

/* ---- User mappings: the VMA of a user pc -------------------------------------------------- */

/* The VMA walk's reader: each read counts against the sample's budget first. */
struct charged {
    struct os_linux *l;
    const struct prof_os_mem *mem;
};

static int charged_read(void *ctx, uint64_t kva, void *buf, size_t len)
{
    const struct charged *c = ctx;
    if (c->mem->charge && !c->mem->charge(c->mem->ctx, len))
        return -ENOSPC;
    return lx_kernel_read(c->l->kernel, kva, buf, len);
}

static int append_vma(void *ctx, const struct lx_vma *vma)
{
    g_array_append_val((GArray *)ctx, *vma);
    return 0;
}

/* Walks mm's maple tree into a new cache entry; NULL when the walk failed (garbage, a node the
 * kernel is replacing, or no budget left: tried again at a later stop). */
static struct mm_vmas *walk_vmas(struct os_linux *l, const struct lx_reader *r, uint64_t mm,
                                 int32_t map_count, int32_t tgid)
{
    struct mm_vmas *m = g_new0(struct mm_vmas, 1);
    struct qp_error err = {0};
    m->vmas = g_array_new(FALSE, FALSE, sizeof(struct lx_vma));
    m->map_count = map_count;
    m->tgid = tgid;
    m->walked_at = l->stops;
    if (lx_vma_for_each(&l->off, r, mm, append_vma, m->vmas, &err) != 0) {
        if (l->cfg.verbose)
            qp_log(QP_LOG_INFO, "VMAs of mm 0x%" PRIx64 ": %s", mm, err.msg);
        mm_vmas_free(m);
        return NULL;
    }
    return m;
}

static const struct lx_vma *vma_lookup(const struct mm_vmas *m, uint64_t pc)
{
    const struct lx_vma *v = (const struct lx_vma *)m->vmas->data;
    size_t lo = 0, hi = m->vmas->len;
    while (lo < hi) { /* the first VMA ending above pc */
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].end <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->vmas->len && v[lo].start <= pc ? &v[lo] : NULL;
}

/* mm->map_count now (-1 when BTF has no offset for it): 0, or the read's error. */
static int read_map_count(const struct os_linux *l, const struct lx_task_info *t,
                          const struct lx_reader *r, int32_t *map_count)
{
    uint8_t b[4];
    *map_count = -1;
    if (!l->off.mm_map_count)
        return 0;
    if (r->read(r->ctx, t->mm + l->off.mm_map_count, b, 4))
        return -EIO;
    memcpy(map_count, b, 4);
    return 0;
}

/* The cache entry of t's mm while it still holds (same map_count, same process), else NULL. */
static struct mm_vmas *cached_vmas(struct os_linux *l, const struct lx_task_info *t,
                                   int32_t map_count)
{
    struct mm_vmas *m = g_hash_table_lookup(l->mm_cache, &t->mm);
    return m && m->map_count == map_count && m->tgid == t->tgid ? m : NULL;
}

/* Walks t's mm again into the cache; what was learnt of its files carries over when the mm
 * still belongs to the same process. NULL when the walk failed (the entry is dropped). */
static struct mm_vmas *rewalk_vmas(struct os_linux *l, const struct lx_task_info *t,
                                   const struct lx_reader *r, int32_t map_count)
{
    struct mm_vmas *old = g_hash_table_lookup(l->mm_cache, &t->mm);
    if (!old && g_hash_table_size(l->mm_cache) >= MAX_MM_CACHE)
        g_hash_table_remove_all(l->mm_cache);
    struct mm_vmas *m = walk_vmas(l, r, t->mm, map_count, t->tgid);
    if (!m) {
        g_hash_table_remove(l->mm_cache, &t->mm);
        return NULL;
    }
    if (old && old->tgid == t->tgid && old->files) {
        m->files = old->files;
        old->files = NULL;
    }
    g_hash_table_replace(l->mm_cache, g_memdup2(&t->mm, sizeof t->mm), m);
    return m;
}

/* The cached VMAs of mm, walked again when map_count changed, or when pc is in none of them and
 * the last walk was at an earlier stop. */
static const struct lx_vma *find_user_vma(struct os_linux *l, const struct lx_task_info *t,
                                          uint64_t pc, const struct prof_os_mem *mem)
{
    struct charged c = {l, mem};
    struct lx_reader r = {.read = charged_read, .ctx = &c};
    int32_t map_count;
    if (read_map_count(l, t, &r, &map_count))
        return NULL;
    struct mm_vmas *m = cached_vmas(l, t, map_count);
    if (m) {
        const struct lx_vma *v = vma_lookup(m, pc);
        if (v || m->walked_at == l->stops)
            return v;
    }
    m = rewalk_vmas(l, t, &r, map_count);
    return m ? vma_lookup(m, pc) : NULL;
}

static int lx_user_mapping(void *impl, int i, uint64_t pc, const struct prof_os_mem *mem,
                           struct prof_mapping *out)
{
    struct os_linux *l = impl;
    if (!l->kernel || !l->have_offsets || i < 0 || i >= PROF_MAX_VCPUS || !l->task_ok[i])
        return -ENOENT;
    const struct lx_task_info *t = &l->tasks[i];
    if (!t->mm || t->kthread || !lx_is_kernel_addr(t->mm))
        return -ENOENT;
    const struct lx_vma *v = find_user_vma(l, t, pc, mem);
    if (!v)
        return -ENOENT;
    *out = (struct prof_mapping){.start = v->start, .end = v->end};
    if (v->file && v->name[0]) {
        g_strlcpy(out->name, v->name, sizeof out->name);
        out->base = v->start - v->pgoff * PAGE_SIZE;
    } else {
        g_strlcpy(out->name, PROF_MAPPING_ANON, sizeof out->name);
        out->base = v->start;
    }
    return 0;
}

/* ---- Exec mappings and build-ids, for --sysroot ------------------------------------------- */

#define VM_EXEC 0x4u

/* Reads user memory of the process current on one vCPU, through that vCPU's page tables (its
 * CR3 holds the process's mm, user and kernel half alike), within the sample's budget. */
struct user_reader {
    const struct prof_os_mem *mem;
    const struct prof_vcpu *cpu;
    bool short_of_budget;
};

static int user_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    struct user_reader *u = ctx;
    size_t got = 0;
    /* mapped files' headers (build-ids): the guest does not write them */
    int rc = u->mem->read_unchanging
                 ? u->mem->read_unchanging(u->mem->ctx, u->cpu, addr, buf, len, &got)
                 : u->mem->read(u->mem->ctx, u->cpu, addr, buf, len, &got);
    if (rc == -ENOSPC || (got > 0 && got < len))
        u->short_of_budget = true; /* not the page's fault: try again at a later stop */
    if (rc)
        return rc;
    return got == len ? 0 : -EFAULT;
}

static struct file_info *file_info_of(struct mm_vmas *m, uint64_t file)
{
    if (!m->files)
        m->files = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    struct file_info *f = g_hash_table_lookup(m->files, &file);
    if (!f) {
        f = g_new0(struct file_info, 1);
        g_hash_table_insert(m->files, g_memdup2(&file, sizeof file), f);
    }
    return f;
}

/* The VMA that maps the start (offset 0) of file: where its ELF header is. */
static const struct lx_vma *file_head(const struct mm_vmas *m, uint64_t file)
{
    const struct lx_vma *v = (const struct lx_vma *)m->vmas->data;
    for (guint i = 0; i < m->vmas->len; i++)
        if (v[i].file == file && v[i].pgoff == 0)
            return &v[i];
    return NULL;
}

static void read_build_id(struct os_linux *l, const struct mm_vmas *m, uint64_t file,
                          struct file_info *f, struct user_reader *u)
{
    const struct lx_vma *head = file_head(m, file);
    struct qp_error err = {0};
    size_t len = 0;
    u->short_of_budget = false;
    struct lx_reader r = {.read = user_read, .ctx = u};
    if (head &&
        lx_elf_build_id(&r, head->start, head->end - head->start, f->build_id, &len, &err) == 0) {
        f->build_id_len = (uint8_t)len;
        f->build_id_done = true;
        return;
    }
    if (u->short_of_budget && ++f->tries < FILE_MAX_TRIES)
        return;
    f->build_id_done = true;
    if (l->cfg.verbose)
        qp_log(QP_LOG_INFO, "no build-id for %s: %s", f->path,
               head ? err.msg : "its start (file offset 0) is not mapped");
}

/* Fills f's path and build-id as far as this stop allows; true when both are settled. */
static bool file_settle(struct os_linux *l, const struct mm_vmas *m, uint64_t file,
                        struct file_info *f, const struct prof_os_mem *mem, struct user_reader *u)
{
    if (!f->path_done) {
        struct charged c = {l, mem};
        struct lx_reader r = {.read = charged_read, .ctx = &c};
        struct qp_error err = {0};
        int rc = lx_file_path(&l->off, &r, file, f->path, sizeof f->path, &err);
        if (rc == -ENOSPC && ++f->tries < FILE_MAX_TRIES)
            return false;
        f->path_done = true;
        if (rc) {
            f->path[0] = '\0';
            f->build_id_done = true;
            if (l->cfg.verbose)
                qp_log(QP_LOG_INFO, "path of a mapped file: %s", err.msg);
        }
    }
    if (!f->build_id_done)
        read_build_id(l, m, file, f, u);
    return f->build_id_done;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * UINT64_C(0x100000001b3);
}

/* The exec file mappings of m, with what is known of their files; exec_gen changes with any of
 * it, so that a build-id read at a later stop makes a new generation. */
static void build_exec(struct os_linux *l, struct mm_vmas *m, const struct prof_os_mem *mem,
                       struct user_reader *u)
{
    if (!m->exec)
        m->exec = g_array_new(FALSE, FALSE, sizeof(struct prof_exec_mapping));
    g_array_set_size(m->exec, 0);
    m->exec_ready = true;
    uint64_t gen = UINT64_C(0xcbf29ce484222325);
    const struct lx_vma *v = (const struct lx_vma *)m->vmas->data;
    for (guint i = 0; i < m->vmas->len; i++) {
        if (!(v[i].flags & VM_EXEC) || !v[i].file)
            continue;
        struct file_info *f = file_info_of(m, v[i].file);
        m->exec_ready &= file_settle(l, m, v[i].file, f, mem, u);
        if (!f->path[0])
            continue;
        struct prof_exec_mapping e = {.start = v[i].start, .end = v[i].end, .pgoff = v[i].pgoff};
        e.file_id = v[i].file;
        const struct lx_vma *head = file_head(m, v[i].file);
        if (head) {
            e.head_start = head->start;
            e.head_end = head->end;
        }
        g_strlcpy(e.path, f->path, sizeof e.path);
        memcpy(e.build_id, f->build_id, sizeof e.build_id);
        e.build_id_len = f->build_id_len;
        g_array_append_val(m->exec, e);
        gen = mix(mix(mix(gen, e.start), e.end), e.pgoff);
        gen = mix(mix(gen, v[i].file), e.build_id_len);
    }
    m->exec_gen = gen;
}

static int lx_address_space(void *impl, int i, const struct prof_os_mem *mem,
                            struct prof_address_space *out)
{
    struct os_linux *l = impl;
    if (!l->kernel || !l->have_offsets || i < 0 || i >= PROF_MAX_VCPUS || i >= l->n_cpus ||
        !l->task_ok[i] || !l->cpus)
        return -ENOENT;
    const struct lx_task_info *t = &l->tasks[i];
    if (!t->mm || t->kthread || !lx_is_kernel_addr(t->mm))
        return -ENOENT;
    if (!l->own_mm[i])
        return -EAGAIN; /* its memory is not what the vCPU's page tables map now */
    struct charged c = {l, mem};
    struct lx_reader r = {.read = charged_read, .ctx = &c};
    int32_t map_count;
    if (read_map_count(l, t, &r, &map_count))
        return -EIO;
    struct mm_vmas *m = cached_vmas(l, t, map_count);
    bool fresh = !m;
    if (!m && !(m = rewalk_vmas(l, t, &r, map_count)))
        return -EAGAIN;
    if (fresh || !m->exec_ready) {
        struct user_reader u = {.mem = mem, .cpu = &l->cpus[i]};
        build_exec(l, m, mem, &u);
    }
    *out = (struct prof_address_space){.id = t->mm,
                                       .generation = m->exec_gen,
                                       .n = (int)m->exec->len,
                                       .maps = (const struct prof_exec_mapping *)m->exec->data};
    return 0;
}

/* ---- Mapped files' pages from the page cache --------------------------------------------- */

static int lx_file_read(void *impl, uint64_t file_id, uint64_t offset, void *buf, size_t len,
                        size_t *got, const struct prof_os_mem *mem)
{
    struct os_linux *l = impl;
    if (!l->kernel || !l->have_offsets || !l->off.has_page_cache || !mem->read_phys)
        return -ENOTSUP;
    if (!lx_is_kernel_addr(file_id))
        return -EINVAL;
    struct charged c = {l, mem};
    struct lx_reader r = {.read = charged_read, .ctx = &c};
    struct qp_error err = {0};
    uint64_t paddr;
    int rc = lx_file_page(&l->off, &r, file_id, offset / PAGE_SIZE, &paddr, &err);
    if (rc)
        return rc == -ENOSPC ? -ENOSPC : rc == -ENOENT ? -ENOENT : -EIO;
    size_t in_page = offset % PAGE_SIZE, n = len < PAGE_SIZE - in_page ? len : PAGE_SIZE - in_page;
    if (mem->charge && !mem->charge(mem->ctx, n))
        return -ENOSPC;
    if (mem->read_phys(mem->ctx, paddr + in_page, buf, n) != 0)
        return -EIO;
    *got = n;
    return 0;
}

const struct prof_os_ops prof_os_linux_ops = {
    .name = "linux",
    .open = lx_open,
    .free = lx_free,
    .refresh = lx_refresh,
    .task = lx_task,
    .kernel_stack_len = lx_kernel_stack_len,
    .user_regs = lx_user_regs,
    .kernel_unwind = lx_kernel_unwind,
    .kernel_symbols = lx_kernel_symbols_of,
    .while_running = lx_while_running,
    .user_mapping = lx_user_mapping,
    .machine_reset = lx_machine_reset,
    .capture_plan = lx_capture_plan,
    .address_space = lx_address_space,
    .file_read = lx_file_read,
};
