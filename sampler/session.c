/* One profiling session: over a target (target/) and an OS adapter (os/) that its caller chose
 * and opened (cli/setup.c), the kernel's and the user binaries' symbols and unwind tables, and
 * the per-sample capture; it owns every stage's state and hands stack building (stacks.c),
 * --sysroot (sysroot.c) and the module table (modules.c) what they need.
 *
 * A sample has two halves. While the guest is stopped (session_capture_cb) we copy only what the
 * unwinder will need: what the OS adapter reads (the demo guest's ABI struct), each vCPU's stack
 * window, the user register frame of a process inside a system call and that user stack. After the
 * guest has resumed we unwind and symbolize from those copies, so that unwinding never adds to the
 * time the guest is paused. A walk that leaves the copied windows ends the stack as truncated
 * rather than reading memory that the running guest has changed since. */
#include "session_internal.h"

#include "qp_log.h"

#include <inttypes.h>

/* ---- Symbols and binaries ---------------------------------------------------------------- */

static void binary_free(gpointer p)
{
    struct user_binary *b = p;
    unw_space_free(b->space);
    g_free(b);
}

static guint image_key_hash(gconstpointer p)
{
    const struct image_key *k = p;
    uint64_t h = k->pid * UINT64_C(0x9e3779b97f4a7c15) ^ k->generation;
    h = h * UINT64_C(0x9e3779b97f4a7c15) ^ k->text_addr ^ (k->text_size << 17);
    return (guint)(h ^ h >> 32);
}

static gboolean image_key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(struct image_key)) == 0;
}

static void image_free(gpointer p)
{
    struct proc_image *img = p;
    g_free(img->copy);
    g_free(img);
}

/* The kernel's unwind tables, when --kernel is an ELF (its symbols came loaded). */
static int load_kernel(prof_session *s, struct qp_error *err)
{
    if (!s->opts.kernel_is_elf || !s->opts.kernel)
        return 0;
    int rc = unw_space_add_elf(s->kernel_space, s->opts.kernel, s->opts.kernel_slide, err);
    return rc ? qp_error_prefix(err, "loading kernel unwind tables from %s", s->opts.kernel) : 0;
}

/* Where the kernel's pcs are: the kernel half, or where --kernel's ELF says it runs when that
 * is elsewhere (prof_arch_kernel_space). Privilege, not this range, says a vCPU is in the
 * kernel; the range only tells a kernel frame from the user frame it returns to. */
static int kernel_space_new(prof_session *s, struct qp_error *err)
{
    uint64_t elf_lo = 0, elf_hi = 0, lo, hi;
    if (s->opts.kernel_is_elf && s->opts.kernel &&
        sym_elf_exec_span(s->opts.kernel, &elf_lo, &elf_hi, NULL) == 0) {
        elf_lo += (uint64_t)s->opts.kernel_slide;
        elf_hi += (uint64_t)s->opts.kernel_slide;
    }
    prof_arch_kernel_space(s->arch, elf_lo, elf_hi, &lo, &hi);
    s->kernel_outside_half = lo != s->split.kernel_start;
    s->kernel_code_lo = lo, s->kernel_code_hi = hi;
    if (s->kernel_outside_half &&
        sym_elf_load_span(s->opts.kernel, &s->kernel_image_lo, &s->kernel_image_hi, NULL) == 0) {
        s->kernel_image_lo += (uint64_t)s->opts.kernel_slide;
        s->kernel_image_hi += (uint64_t)s->opts.kernel_slide;
    }
    if (s->opts.verbose && s->kernel_outside_half)
        qp_log(QP_LOG_INFO,
               "--kernel %s runs outside the kernel half: kernel pcs are 0x%" PRIx64 "..0x%" PRIx64,
               s->opts.kernel, lo, hi);
    return unw_space_new(s->arch->unwind, "kernel", lo, hi, &s->kernel_space, err);
}

static int load_symbols(prof_session *s, const struct prof_session_config *cfg,
                        struct qp_error *err)
{
    int rc = kernel_space_new(s, err);
    if (rc || (rc = load_kernel(s, err)))
        return rc;
    s->store = sym_store_new();
    for (int i = 0; i < cfg->n_user_dirs; i++) {
        rc = sym_store_add_dir(s->store, cfg->user_dirs[i], err);
        if (rc < 0)
            return qp_error_prefix(err, "--user-dir %s", cfg->user_dirs[i]);
        if (s->opts.verbose)
            qp_log(QP_LOG_INFO, "%d ELF files indexed under %s", rc, cfg->user_dirs[i]);
    }
    if (s->opts.by_content && cfg->n_user_dirs) {
        /* Binaries by content (aspace.c): the index is built here, before any sample. */
        gint64 t0 = g_get_monotonic_time();
        sym_store_index_pages(s->store);
        if (s->opts.verbose)
            qp_log(QP_LOG_INFO, "%zu distinct pages of user code indexed in %.3f s",
                   sym_store_page_count(s->store), (double)(g_get_monotonic_time() - t0) / 1e6);
    }
    return 0;
}

const char *prof_session_qemu_version(const prof_session *s)
{
    return prof_target_version(s->target);
}

/* The kernel is module 0: its ELF or symbol map when given; offsets count from its .text (the
 * ELF's, or the guest ABI's once read). */
static void add_kernel_module(prof_session *s)
{
    struct out_module m = {.kernel = true};
    g_strlcpy(m.name, s->kernel_syms ? sym_table_name(s->kernel_syms) : "kernel", sizeof m.name);
    if (s->opts.kernel)
        g_strlcpy(m.path, s->opts.kernel, sizeof m.path);
    if (s->kernel_syms) {
        m.base = sym_table_text_addr(s->kernel_syms);
        m.text_hash = sym_table_text_hash(s->kernel_syms);
    }
    prof_modules_set_kernel(s->modules, prof_modules_add(s->modules, &m, s->kernel_syms, 0));
}

int prof_session_new(prof_target *target, prof_os *os, const struct prof_arch *arch,
                     const struct prof_session_config *cfg, prof_session **out,
                     struct qp_error *err)
{
    prof_session *s = g_new0(prof_session, 1);
    s->target = target;
    s->os = os;
    s->arch = arch;
    s->split = arch->split;
    s->opts = *cfg;
    s->opts.kernel = g_strdup(cfg->kernel);
    s->opts.user_dirs = NULL; /* read here only */
    s->opts.sysroot = NULL;
    s->kernel_syms = cfg->kernel_syms;
    s->binaries = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, binary_free);
    s->images = g_hash_table_new_full(image_key_hash, image_key_equal, NULL, image_free);
    s->profile = out_profile_new();
    s->modules = prof_modules_new(s->profile);
    s->model = prof_model_new();
    struct prof_sysroot_config sysroot_cfg = {.dir = cfg->sysroot,
                                              .arch = arch,
                                              .from_memory = true,
                                              .verbose = cfg->verbose,
                                              .model = s->model};
    s->sysroot = prof_sysroot_new(&sysroot_cfg, s->modules);
    int rc = load_symbols(s, cfg, err);
    if (rc) {
        prof_session_free(s);
        return rc;
    }
    struct prof_stack_config stack_cfg = {.max_depth = cfg->max_depth,
                                          .verbose = cfg->verbose,
                                          .arch = arch,
                                          .kernel_space = s->kernel_space,
                                          .kernel_syms = s->kernel_syms};
    s->stacks = prof_stack_builder_new(&stack_cfg, s->modules);
    if (cfg->by_content) {
        struct prof_aspaces_config as_cfg = {.store = s->store,
                                             .user_end = s->split.user_end,
                                             .machine = s->arch->unwind,
                                             .verbose = cfg->verbose,
                                             .model = s->model};
        s->aspaces = prof_aspaces_new(&as_cfg, s->modules);
    }
    add_kernel_module(s);
    *out = s;
    return 0;
}

void prof_session_free(prof_session *s)
{
    if (!s)
        return;
    g_free((char *)s->opts.kernel);
    sym_table_free(s->kernel_syms);
    prof_stack_builder_free(s->stacks);
    prof_sysroot_free(s->sysroot);
    prof_aspaces_free(s->aspaces);
    prof_model_free(s->model);
    unw_space_free(s->kernel_space);
    prof_stack_free(&s->stack);
    sym_store_free(s->store);
    if (s->binaries)
        g_hash_table_destroy(s->binaries);
    if (s->images)
        g_hash_table_destroy(s->images);
    g_free(s->code_buf);
    prof_modules_free(s->modules);
    out_profile_free(s->profile);
    for (int i = 0; i < PROF_MAX_VCPUS; i++) {
        g_free(s->cap[i].kstack);
        g_free(s->cap[i].ustack);
        g_free(s->cap[i].page);
    }
    g_free(s);
}

/* A capturing target takes what the OS adapter reads at the sample's instant (a Linux
 * kernel's current task) from the next samples on, once the adapter knows where it is. */
static void send_capture_plan(prof_session *s)
{
    if (!prof_target_captures(s->target))
        return;
    struct prof_capture_plan plan;
    uint64_t gen = prof_os_capture_plan(s->os, &plan);
    if (gen == s->capture_gen)
        return;
    s->capture_gen = gen;
    struct qp_error err = {0};
    if (prof_target_set_capture(s->target, &plan, &err) != 0)
        qp_log(QP_LOG_WARN, "%s: the OS adapter's reads stay live reads", err.msg);
    else if (s->opts.verbose)
        qp_log(QP_LOG_INFO, "the %s adapter's %d windows are captured at each sample from now",
               prof_os_name(s->os), plan.n);
}

/* Stops the guest, copies what unwinding needs, resumes; then identifies what was copied. */
static int capture(prof_session *s, struct prof_target_stats *stats, struct qp_error *err)
{
    /* While the guest runs: the adapter's one-time loads cost it no paused time (and are
     * done before the first stop, so that a --one-shot sample has them too). */
    struct prof_os_mem mem = session_os_mem(s);
    struct prof_os_refresh r;
    prof_os_while_running(s->os, &mem, &r);
    if (r.reset) {
        s->counters.resets++;
        session_forget_boot(s);
    }
    if (r.kernel_found)
        session_use_found_kernel(s, &r);
    send_capture_plan(s);
    int rc = prof_target_sample(s->target, session_capture_cb, s, stats, err);
    if (rc == 0)
        session_identify_captured(s);
    return rc;
}

/* ---- One sample: capture, then stacks ------------------------------------------------------ */

static bool keep_sample(const prof_session *s, const struct out_sample *o)
{
    bool user = o->mode == OUT_MODE_USER;
    switch (s->opts.mode_filter) {
    case PROF_KERNEL_ONLY:
        return !user;
    case PROF_USER_ONLY:
        return user;
    default:
        return true;
    }
}

out_profile *prof_session_profile(prof_session *s)
{
    return s->profile;
}

int prof_session_exact(prof_session *s, struct prof_exact_summary *st, struct qp_error *err)
{
    struct prof_exact_counts c = {0};
    int rc = prof_target_exact_counts(s->target, &c, err);
    if (rc)
        return rc;
    struct prof_exact_env env = {
        .split = s->split, .modules = s->modules, .profile = s->profile, .store = s->store};
    prof_exact_attribute(&c, &env, st);
    prof_exact_counts_clear(&c);
    return 0;
}

out_names *prof_session_names(prof_session *s)
{
    return out_names_new(s->profile, prof_modules_symbolize, s->modules);
}

void prof_session_describe_aspaces(const prof_session *s, GString *out)
{
    if (s->aspaces)
        prof_aspaces_describe(s->aspaces, out);
}

const struct prof_capture_counters *prof_session_capture_counters(const prof_session *s)
{
    return &s->counters;
}

const struct prof_stack_counters *prof_session_stack_counters(const prof_session *s)
{
    return prof_stack_builder_counters(s->stacks);
}

const struct prof_sysroot_counters *prof_session_sysroot_counters(const prof_session *s)
{
    return prof_sysroot_counters(s->sysroot);
}

const struct prof_aspace_counters *prof_session_aspace_counters(const prof_session *s)
{
    static const struct prof_aspace_counters none;
    return s->aspaces ? prof_aspaces_counters(s->aspaces) : &none;
}

const struct prof_target_stats *prof_session_last_stats(const prof_session *s)
{
    return &s->last_stats;
}

/* Counts the stack just built (s->stack) and adds it to the profile unless the mode filter
 * drops it. */
static void add_built(prof_session *s, uint64_t time_ns, uint64_t weight_ns)
{
    s->counters.vcpu_samples++;
    if (s->stack.sample.mode == OUT_MODE_IDLE)
        s->counters.idle++;
    prof_counters_add_sample(&s->counters, &s->stack.sample);
    if (!keep_sample(s, &s->stack.sample)) {
        s->counters.dropped_by_filter++;
        return;
    }
    s->stack.sample.time_ns = time_ns;
    s->stack.sample.weight_ns = weight_ns;
    out_profile_add(s->profile, &s->stack.sample);
}

/* A capturing target's last sample again, for an interval its vCPU's thread did not run: the
 * same stack (moved off a kernel entry as the first was), counted as a sample like it, so
 * that the folded counts, --per-cpu and the record weigh a busy vCPU by its time. */
static void repeat_last(prof_session *s, uint64_t time_ns, uint64_t weight_ns, bool *taken)
{
    *taken = s->last_taken;
    if (!s->last_built)
        return;
    s->counters.repeated++;
    prof_stack_count_repeat(s->stacks, &s->stack);
    add_built(s, time_ns, weight_ns);
}

int prof_session_sample(prof_session *s, uint64_t time_ns, uint64_t weight_ns, bool *taken,
                        struct qp_error *err)
{
    *taken = false;
    memset(&s->last_stats, 0, sizeof s->last_stats);
    if (!prof_target_running(s->target))
        return 0; /* paused by someone else: a frozen guest has no profile */
    int rc = capture(s, &s->last_stats, err);
    if (rc)
        return rc;
    if (s->last_stats.repeated) {
        repeat_last(s, time_ns, weight_ns, taken);
        return 0;
    }
    s->last_taken = s->last_built = false;
    if (s->last_stats.was_paused)
        return 0; /* paused between the check and the stop */
    if (prof_target_resets(s->target) != s->target_resets) {
        /* QEMU carries out a reset even while the VM is stopped, so one that came between this
         * stop's requests left registers of one boot beside memory of the next (a stack whose
         * saved user PC was the new kernel image's bytes). The next stop starts afresh. */
        s->counters.reset_straddles++;
        return 0;
    }
    *taken = s->last_taken = true;
    for (int i = 0; i < s->n_cpus; i++) {
        prof_build_stack(s->stacks, &s->cap[i], i, &s->stack);
        if (s->stack.skipped)
            continue;
        session_grow_kernel_window(s, &s->cap[i], &s->stack);
        s->last_built = s->n_cpus == 1; /* a capturing target hands over one vCPU at a time */
        add_built(s, time_ns, weight_ns);
    }
    return 0;
}

/* ---- --one-shot -------------------------------------------------------------------------- */

int prof_session_one_shot(prof_session *s, FILE *out, struct qp_error *err)
{
    int rc = capture(s, &s->last_stats, err);
    if (rc)
        return rc;
    out_names *names = out_names_new(s->profile, prof_modules_symbolize, s->modules);
    for (int i = 0; i < s->n_cpus; i++) {
        prof_build_stack(s->stacks, &s->cap[i], i, &s->stack);
        prof_stack_print(&s->cap[i], names, &s->stack, s->opts.show_addresses, out);
    }
    out_names_free(names);
    if (prof_target_captures(s->target))
        fprintf(out,
                "(captured inside QEMU in %.3f ms of the vCPU's thread; the guest did not stop)\n",
                s->last_stats.paused_ns / 1e6);
    else
        fprintf(out, "(guest paused %.3f ms for this sample, %u %s)\n",
                s->last_stats.paused_ns / 1e6, s->last_stats.round_trips,
                prof_target_round_trip_name(s->target));
    return 0;
}
