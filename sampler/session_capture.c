/* What one stop copies, vCPU by vCPU, while the guest is stopped (session_capture_cb): what the OS
 * adapter says of the stop (a reboot, a found kernel), each vCPU's kernel and user stack
 * windows, the user code page that identifies an address space under --os none, and the process
 * a vCPU in the kernel's own table runs for. */
#include "session_internal.h"

#include "qp_log.h"

#include <inttypes.h>

static void reject_abi(prof_session *s, const char *why)
{
    s->counters.abi_rejected++;
    g_strlcpy(s->counters.abi_reject_reason, why, sizeof s->counters.abi_reject_reason);
    if (s->opts.verbose)
        qp_log(QP_LOG_INFO, "qprof_abi rejected: %s", why);
}

/* The adapter found the kernel in the guest: its symbols name kernel frames unless --kernel
 * gave some, and a --kernel System.map (link-time addresses) gets the KASLR slide. */
void session_use_found_kernel(prof_session *s, const struct prof_os_refresh *r)
{
    const sym_table *found = prof_os_kernel_symbols(s->os);
    uint64_t stext;
    if (!s->kernel_syms && found && s->found_kernel_syms && found != s->found_kernel_syms) {
        /* A new boot (new KASLR offset): a new kernel module, so that the samples already
         * taken keep the names of the kernel they ran. */
        struct out_module m = {.kernel = true, .base = r->kernel_stext};
        g_strlcpy(m.name, "kernel", sizeof m.name);
        prof_modules_set_kernel(s->modules, prof_modules_add(s->modules, &m, found, 0));
        s->found_kernel_syms = found;
    } else if (!s->kernel_syms && found) {
        prof_modules_set_syms(s->modules, prof_modules_kernel(s->modules), found);
        s->found_kernel_syms = found;
    } else if (s->kernel_syms && !s->opts.kernel_slide && r->kernel_stext &&
               sym_find_by_name(s->kernel_syms, "_stext", &stext) == 0 &&
               stext + (uint64_t)r->kernel_slide == r->kernel_stext && r->kernel_slide) {
        sym_table_set_slide(s->kernel_syms, r->kernel_slide);
        if (s->opts.verbose)
            qp_log(QP_LOG_INFO, "--kernel %s: KASLR slide 0x%" PRIx64 " applied", s->opts.kernel,
                   (uint64_t)r->kernel_slide);
    }
}

/* The guest rebooted: pids, generations and address spaces start over. */
void session_forget_boot(prof_session *s)
{
    g_hash_table_remove_all(s->images);
    if (s->aspaces)
        prof_aspaces_reset(s->aspaces);
    for (int i = 0; i < PROF_MAX_VCPUS; i++) {
        s->cap[i].uspace = NULL;
        s->cap[i].as = NULL;
        s->cap[i].space = NULL;
        s->last_user_as[i] = NULL;
    }
    prof_sysroot_reset(s->sysroot);
    prof_model_reset(s->model); /* one reset for every way of identifying user code */
}

/* Asks the OS adapter what it can tell about this stop, and acts on what it saw. */
static void refresh_os(prof_session *s, const struct prof_vcpu *cpus, int n_cpus)
{
    s->os_mem = session_os_mem(s);
    struct prof_os_refresh r;
    prof_os_refresh(s->os, cpus, n_cpus, &s->os_mem, &r);
    if (r.rejected)
        reject_abi(s, r.reject_reason);
    if (r.kernel_found)
        session_use_found_kernel(s, &r);
    if (r.reset) {
        s->counters.resets++;
        session_forget_boot(s);
    }
    if (!r.published)
        return;
    uint32_t kernel = prof_modules_kernel(s->modules);
    const struct out_module *k = out_profile_module(s->profile, kernel);
    if (k && !k->base && r.kernel_text_addr)
        out_profile_set_module_base(s->profile, kernel, r.kernel_text_addr);
}

/* A user leaf with no unwind tables is named by the mapping it lies in (read while stopped). */
static void name_user_leaf(prof_session *s, struct cpu_capture *c, uint64_t pc,
                           const struct prof_os_mem *mem)
{
    struct prof_mapping m;
    /* --sysroot: a leaf in an exec mapping needs no VMA lookup when the space unwinds the stack
     * (it names the mapping); a space with no verified file leaves the leaf to the lookup. */
    bool in_exec = c->uspace && !c->task.user_leaf_only && prof_user_space_find(c->uspace, pc) >= 0;
    if ((c->task.user_leaf_only || c->uspace) && !in_exec &&
        prof_os_user_mapping(s->os, (int)(c - s->cap), pc, mem, &m) == 0)
        c->leaf_module = prof_modules_for_mapping(s->modules, &m);
}

/* How much kernel stack above sp to copy. An adapter that knows the stack's bounds says; without
 * them (--os none) the window runs to the end of sp's page plus what kernel walks were seen to
 * need (session_grow_kernel_window). A fixed 16 KiB would do too, but copying it costs every kernel
 * sample: over the gdbstub's `m` packets 2-7 ms against 1-2 ms, and samples whose cost differs
 * by what the guest runs skew the shares (docs/profile-your-os.md, "Sampling cost"). */
static size_t kernel_window_len(const prof_session *s, struct cpu_capture *c)
{
    const struct prof_vcpu *v = &c->vcpu;
    size_t max = prof_os_kernel_stack_len(s->os, v, &c->task, KSTACK_WINDOW);
    c->kstack_short = false;
    if (!s->aspaces || max < KSTACK_WINDOW)
        return max;
    size_t len = SYM_PAGE_SIZE - v->sp % SYM_PAGE_SIZE + s->kstack_extra;
    if (len >= KSTACK_WINDOW)
        return KSTACK_WINDOW;
    c->kstack_short = true;
    return len;
}

/* A kernel walk that ran off a window cut short by kernel_window_len: later samples copy one page
 * more (at most the full window). The samples before are counted as truncated, as they were. */
void session_grow_kernel_window(prof_session *s, const struct cpu_capture *c,
                                const struct prof_stack *st)
{
    if (!c->kstack_short || st->sample.kernel_stop != UNW_STOP_MEMORY ||
        s->kstack_extra >= KSTACK_WINDOW)
        return;
    s->kstack_extra += SYM_PAGE_SIZE;
    s->counters.kstack_window_grown++;
    if (s->opts.verbose)
        qp_log(QP_LOG_INFO,
               "a kernel stack reached past the copied window: copying %zu bytes past "
               "the end of sp's page from now on",
               s->kstack_extra);
}

/* --os none: copies the code page at user pc when its address space has not seen it yet. */
static void copy_user_page(prof_session *s, struct cpu_capture *c, uint64_t pc)
{
    if (!prof_aspace_page_to_copy(c->as, pc, &c->page_addr))
        return;
    if (!c->page)
        c->page = g_malloc(SYM_PAGE_SIZE);
    size_t got = 0;
    int rc = session_paused_read(s, &c->vcpu, c->page_addr, c->page, SYM_PAGE_SIZE, false, &got);
    if (got == SYM_PAGE_SIZE)
        c->page_state = PAGE_COPIED;
    else if (rc != -ENOSPC && !s->budget.hit) /* out of budget: try again at a later stop */
        c->page_state = PAGE_UNREADABLE;
}

/* --os none: a few bytes at user pc, now and then, against the page copied there before: a
 * root that a new process got (its page table freed and allocated again) shows as other code. */
static void check_root_reuse(prof_session *s, struct cpu_capture *c, uint64_t pc)
{
    uint64_t addr;
    size_t len, got = 0;
    uint8_t bytes[64];
    if (!prof_aspace_check_due(c->as, pc, &addr, &len) || len > sizeof bytes)
        return;
    if (session_paused_read(s, &c->vcpu, addr, bytes, len, false, &got) == 0 && got == len)
        c->as = prof_aspace_verify(s->aspaces, c->as, addr, bytes, len);
}

/* A kernel-mode vCPU in no process's table that runs for the process it last ran user code
 * for: a kernel outside the kernel half (the shape of a teaching OS, which switches to a table
 * of its own on every trap) on a stack that is not one of its image's own. Those (xv6's stack0,
 * the demo's boot stacks) are per-CPU stacks its scheduler and idle loop run on, for no
 * process. */
static bool runs_for_last_process(const prof_session *s, const struct cpu_capture *c)
{
    const struct prof_vcpu *v = &c->vcpu;
    return s->kernel_outside_half && s->last_user_as[c->slot] && !v->user &&
           !prof_aspace_is_process(c->as) &&
           (v->sp < s->kernel_image_lo || v->sp >= s->kernel_image_hi);
}

/* --user-regs: a lent process's user registers where its kernel saved them, and its user stack
 * read in its own table. Where that cannot be read the user side stays unknown (stacks.c), and
 * the summary says why. A capturing target (the plugin) leaves it unknown. */
static void capture_lent_user(prof_session *s, struct cpu_capture *c)
{
    struct prof_os_mem mem = session_os_mem(s);
    /* a capturing target's physical reads are of memory the guest has changed since its
     * instant: a user stack read that way would be another moment's */
    if (mem.captured || prof_os_user_regs(s->os, &c->vcpu, &c->task, &mem, &c->trap) != 0)
        return;
    struct qp_error err = {0};
    if (session_read_window_in(s, c, prof_aspace_root(c->as), c->trap.r[s->arch->sp_reg], &err) !=
        0) {
        s->counters.user_stack_unreadable++;
        g_strlcpy(s->counters.user_stack_reason, err.msg, sizeof s->counters.user_stack_reason);
        return;
    }
    c->have_trap = true;
}

/* --os none: the vCPU's address space stands for its process once user code ran in it; in the
 * kernel's own table, the process runs_for_last_process says. Its user registers are known only
 * where --user-regs says where the kernel saved them (no entry frame on this stack leads to
 * them): else the stack says they are not. */
static void capture_aspace(prof_session *s, struct cpu_capture *c)
{
    const struct prof_vcpu *v = &c->vcpu;
    c->as = prof_aspace_for(s->aspaces, v->as_root);
    if (runs_for_last_process(s, c)) {
        c->as = s->last_user_as[c->slot];
        c->as_lent = true;
        capture_lent_user(s, c);
        return;
    }
    if (!v->user && !c->have_entry_regs)
        return;
    uint64_t pc = v->user ? v->regs.r[s->arch->pc_reg] : c->entry_regs.r[s->arch->pc_reg];
    check_root_reuse(s, c, pc);
    if (v->user) {
        prof_aspace_saw_user(c->as);
        s->last_user_as[c->slot] = c->as;
    }
    copy_user_page(s, c, pc);
}

/* The vCPU's stacks and what the stack building needs of its task. */
static void capture_stacks(prof_session *s, struct cpu_capture *c)
{
    const struct prof_vcpu *v = &c->vcpu;
    struct prof_os_mem mem = session_os_mem(s);
    c->have_kstack = false;
    c->leaf_module = OUT_NO_MODULE;
    c->uspace = prof_sysroot_capture(s->sysroot, s->os, (int)(c - s->cap), &c->task, &mem);
    if (!v->user && prof_os_kernel_unwind(s->os, v, &c->task, &mem, &c->kst) == 0) {
        /* The adapter walked the kernel stack itself; only the user stack is left to copy. */
        c->have_kstack = true;
        if (c->kst.have_user_regs) {
            c->trap = c->kst.user_regs;
            c->have_trap = true;
            if (!c->task.user_leaf_only)
                session_read_window(s, v, c->trap.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW,
                                    &c->ustack_addr, &c->ustack_len);
            name_user_leaf(s, c, c->trap.r[s->arch->pc_reg], &mem);
        }
        return;
    }
    if (v->user)
        name_user_leaf(s, c, v->regs.r[s->arch->pc_reg], &mem);
    if (c->task.known && c->task.has_image)
        c->img = session_image_for(s, &c->task);
    if (v->user) {
        if (!c->task.user_leaf_only || c->img) /* the leaf alone needs no stack */
            session_read_window(s, v, v->sp, c->ustack, USTACK_WINDOW, &c->ustack_addr,
                                &c->ustack_len);
        return;
    }
    session_read_window(s, v, v->sp, c->kstack, kernel_window_len(s, c), &c->kstack_addr,
                        &c->kstack_len);
    if (s->aspaces && v->as_root) {
        /* A process's address space in the kernel: its user part is where the entry came from. */
        struct prof_aspace *as = prof_aspace_for(s->aspaces, v->as_root);
        if (prof_aspace_is_process(as) && prof_recover_user_regs(s->stacks, c))
            session_read_window(s, v, c->entry_regs.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW,
                                &c->ustack_addr, &c->ustack_len);
        return;
    }
    if (!c->img)
        return;
    if (!c->task.user_regs_at) {
        if (prof_recover_user_regs(s->stacks, c))
            session_read_window(s, v, c->entry_regs.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW,
                                &c->ustack_addr, &c->ustack_len);
        return;
    }
    if (prof_recover_unsaved_entry(s->stacks, c)) {
        /* a capturing target can sample an entry before it saved the user frame */
        session_read_window(s, v, c->entry_regs.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW,
                            &c->ustack_addr, &c->ustack_len);
        return;
    }
    if (prof_os_user_regs(s->os, v, &c->task, &mem, &c->trap) == 0) {
        c->have_trap = true;
        session_read_window(s, v, c->trap.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW,
                            &c->ustack_addr, &c->ustack_len);
    }
}

/* A stock kernel's code as the guest has it, for `qprof annotate` on a record made without a
 * vmlinux (kallsyms names the functions, the user has no file to read the code from): the
 * function a vCPU stopped in, once, within the sample's budget and the profile's bounds on
 * kept code (out_profile_add_code). A function whose read the budget cut short is tried at its
 * next sample. */
static void keep_kernel_code(prof_session *s, const struct cpu_capture *c)
{
    struct sym_info info;
    if (!s->opts.keep_kernel_code || s->kernel_syms || !s->found_kernel_syms || c->vcpu.user ||
        sym_lookup(s->found_kernel_syms, c->vcpu.pc, &info) != 0)
        return;
    uint32_t kernel = prof_modules_kernel(s->modules);
    if (out_profile_code_at(s->profile, kernel, info.start) ||
        out_profile_code_count(s->profile) >= OUT_CODE_MAX_FUNCTIONS)
        return;
    size_t len = info.size ? info.size : info.end - info.start, got = 0;
    len = len < OUT_CODE_MAX_LEN ? len : OUT_CODE_MAX_LEN;
    if (!s->code_buf)
        s->code_buf = g_malloc(OUT_CODE_MAX_LEN);
    if (session_paused_read(s, &c->vcpu, info.start, s->code_buf, len, false, &got) != 0 ||
        got < len)
        return;
    struct out_code code = {.module = kernel,
                            .machine = s->arch->elf_machine,
                            .addr = info.start,
                            .name = info.name,
                            .bytes = s->code_buf,
                            .len = (uint32_t)len};
    out_profile_add_code(s->profile, &code);
}

/* Stacks first: they are what this sample is for. A new binary's copy, and the guest's own
 * copies of its mapped files (no --sysroot), take what is left. */
/* A kernel run at its physical load address maps some of its own pages a second time, high: a
 * trampoline page in every table, where the trap entry and exit run on the process's table.
 * A kernel-mode pc there that the vCPU's table maps onto the kernel's code is that code: the
 * walk and the names take the pc at its link address (the physical one). */
static void alias_kernel_pc(prof_session *s, struct cpu_capture *c)
{
    struct prof_vcpu *v = &c->vcpu;
    uint64_t pa, page;
    if (!s->kernel_outside_half || v->user || !v->as_root ||
        (v->pc >= s->kernel_code_lo && v->pc < s->kernel_code_hi) ||
        prof_arch_page_walk(s->arch, v->as_root, &v->mmu, v->pc, session_phys_word, s, &pa,
                            &page) != 0 ||
        pa < s->kernel_code_lo || pa >= s->kernel_code_hi)
        return;
    v->pc = pa;
    v->regs.r[s->arch->pc_reg] = pa;
}

static void capture_cpu(prof_session *s, struct cpu_capture *c)
{
    alias_kernel_pc(s, c);
    capture_stacks(s, c);
    keep_kernel_code(s, c);
    struct prof_os_mem mem = session_os_mem(s);
    prof_sysroot_copy_images(s->sysroot, c->uspace, s->os, &c->vcpu, &mem);
}

int session_capture_cb(prof_target *t, const struct prof_vcpu *cpus, int n_cpus, void *ctx,
                       struct qp_error *err)
{
    (void)t, (void)err;
    prof_session *s = ctx;
    session_budget_start(s);
    prof_sysroot_begin_stop(s->sysroot);
    s->n_cpus = n_cpus < PROF_MAX_VCPUS ? n_cpus : PROF_MAX_VCPUS;
    for (int i = 0; i < s->n_cpus; i++) {
        struct cpu_capture *c = &s->cap[i];
        c->vcpu = cpus[i];
        /* --cpus names QEMU's vCPU numbers, not positions in the stop's list. */
        int index = cpus[i].index >= 0 ? cpus[i].index : i;
        c->selected = index < 64 && ((s->opts.cpu_mask >> index) & 1);
        c->slot = index < PROF_MAX_VCPUS ? index : i;
        c->have_trap = c->have_entry_regs = false;
        c->img = NULL;
        c->space = NULL;
        c->uspace = NULL;
        c->as = NULL;
        c->as_lent = false;
        c->as_label = NULL;
        c->page_state = PAGE_NONE;
        c->leaf_module = OUT_NO_MODULE;
        c->kstack_len = c->ustack_len = 0;
    }
    uint64_t resets = prof_target_resets(s->target);
    if (resets != s->target_resets) {
        /* Before the adapter reads anything: what the old boot left in RAM is stale. */
        s->counters.machine_resets += resets - s->target_resets;
        s->target_resets = resets;
        prof_os_machine_reset(s->os);
        session_forget_boot(s);
    }
    refresh_os(s, cpus, s->n_cpus);
    for (int i = 0; i < s->n_cpus; i++) {
        struct cpu_capture *c = &s->cap[i];
        prof_os_task(s->os, &cpus[i], i, &c->task);
        c->started = c->vcpu.paging64 && !(c->task.known && c->task.state == PROF_TASK_OFFLINE);
        if (c->selected && c->started && !c->vcpu.halted) {
            if (!c->kstack) {
                c->kstack = g_malloc(KSTACK_WINDOW);
                c->ustack = g_malloc(USTACK_WINDOW);
            }
            capture_cpu(s, c);
            if (s->aspaces && c->vcpu.as_root) /* 0: the target cannot tell the root */
                capture_aspace(s, c);
        } else if (!c->selected || c->vcpu.halted || c->vcpu.paging64) {
            /* idle: whatever runs next was not seen. A vCPU running with paging off is in a
             * firmware trap (riscv64's M-mode timer) that returns to what it interrupted: the
             * process it ran for is still the one. */
            s->last_user_as[c->slot] = NULL;
        }
    }
    for (int i = 0; i < s->n_cpus; i++)
        if (s->cap[i].img)
            session_image_copy_some(s, &cpus[i], s->cap[i].img);
    if (s->budget.hit)
        s->counters.budget_hits++;
    return 0;
}
