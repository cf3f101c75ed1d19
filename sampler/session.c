/* One profiling session: over a target (target/) and an OS adapter (os/) that its caller chose
 * and opened (cli/setup.c), the kernel's and the user binaries' symbols and unwind tables, and
 * the per-sample capture; it owns every stage's state and hands stack building (stacks.c),
 * --sysroot (sysroot.c) and the module table (modules.c) what they need.
 *
 * A sample has two halves. While the guest is stopped (capture_cb) we copy only what the
 * unwinder will need: what the OS adapter reads (the demo guest's ABI struct), each vCPU's stack
 * window, the user register frame of a process inside a system call and that user stack. After the
 * guest has resumed we unwind and symbolize from those copies, so that unwinding never adds to the
 * time the guest is paused. A walk that leaves the copied windows ends the stack as truncated
 * rather than reading memory that the running guest has changed since. */
#include "sampler.h"

#include "aspace.h"
#include "capture.h"
#include "exact.h"
#include "modules.h"
#include "stacks.h"
#include "sysroot.h"
#include "qp_log.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXT_TO_HASH (64u << 20)
#define MAX_EH_FRAME     (16u << 20)

/* One exec image of one process: (pid, generation) plus the .text and .eh_frame the OS adapter
 * names. Its .text (and .eh_frame) are copied while the guest is paused, within the sample's
 * budget and across samples if need be; hashing and matching wait until the guest runs. */
struct image_key {
    uint64_t pid, generation, text_addr, text_size, eh_frame_addr, eh_frame_size;
};

enum image_state { IMAGE_COPYING, IMAGE_COPIED, IMAGE_DONE };

struct proc_image {
    struct image_key key;
    enum image_state state;
    uint8_t *copy; /* text_size + eh_frame_size bytes while copying, NULL once done */
    size_t copied;
    uint64_t load_base;
    char name[PROF_COMM_LEN];
    struct user_binary *bin; /* once done; NULL when the text could not be read */
};

/* What this sample may still read while the guest is paused (PROF_BUDGET_*). */
struct pause_budget {
    size_t bytes_left;
    uint64_t round_trips_at_start;
    bool hit;
};

/* The session owns every stage's state; the stages get what they need passed down (modules.h,
 * stacks.h, sysroot.h) and none calls back up. */
struct prof_session {
    struct prof_session_config opts; /* kernel owned; user_dirs and sysroot NULL */
    prof_target *target;             /* borrowed, as os and arch (prof_session_new) */
    const struct prof_arch *arch;    /* the target's: registers, privilege, address halves */
    struct prof_addr_split split;    /* arch->split: which addresses are user, which kernel */
    prof_os *os;
    sym_table *kernel_syms;             /* NULL without --kernel */
    const sym_table *found_kernel_syms; /* the OS adapter's (borrowed), when no --kernel */
    uint8_t *code_buf;                  /* keep_kernel_code's, OUT_CODE_MAX_LEN bytes */
    struct prof_os_mem os_mem;          /* this stop's reader for the adapter */
    unw_space *kernel_space;
    sym_store *store;
    GHashTable *binaries; /* .text hash -> struct user_binary (owned) */
    GHashTable *images;   /* struct image_key -> struct proc_image (owned, key inside) */
    struct pause_budget budget;
    int n_cpus;
    struct cpu_capture cap[PROF_MAX_VCPUS];
    /* --os none: by the target's vCPU index, the process whose table that vCPU last ran user
     * code in, kept across stops (NULL after it idled, or a reboot): a kernel that runs on a
     * table of its own runs for it. By index, not by position in a stop's list: a capturing
     * target hands over one vCPU at a time. */
    struct prof_aspace *last_user_as[PROF_MAX_VCPUS];
    out_profile *profile;       /* every sample, and the modules their PCs belong to */
    prof_modules *modules;      /* the profile's modules and their symbols */
    prof_stack_builder *stacks; /* unwinding the captures */
    uint64_t capture_gen;       /* the OS adapter's capture plan the target has */
    prof_sysroot *sysroot;      /* --sysroot's files and address spaces */
    prof_aspaces *aspaces;      /* --os none: address spaces as processes, NULL otherwise */
    prof_model *model;          /* what runs where: every identification fills it (model.h) */
    /* --os none, which knows no kernel stack bounds: how far past the end of sp's page the
     * kernel stack window reaches (see kernel_window_len). */
    size_t kstack_extra;
    /* --kernel's ELF runs outside the kernel half (prof_arch_kernel_space), and the addresses
     * all its segments load at (its own boot stacks among them): see capture_aspace. */
    bool kernel_outside_half;
    uint64_t kernel_image_lo, kernel_image_hi;
    uint64_t kernel_code_lo, kernel_code_hi; /* the kernel's unwind space */
    struct prof_stack stack;                 /* scratch, reused by every sample */
    struct prof_target_stats last_stats;
    uint64_t target_resets; /* prof_target_resets at the last stop */
    struct prof_capture_counters counters;
};

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

/* ---- Process images ---------------------------------------------------------------------- */

/* A long run that execs many processes would grow the table without bound; images are cheap
 * to identify again (the binaries themselves stay known by hash). */
#define MAX_IMAGES 4096

static struct proc_image *image_for(prof_session *s, const struct prof_task *t)
{
    const struct prof_image_id *id = &t->image;
    struct image_key key = {t->pid,        id->generation,    id->text_addr,
                            id->text_size, id->eh_frame_addr, id->eh_frame_size};
    struct proc_image *img = g_hash_table_lookup(s->images, &key);
    if (img)
        return img;
    if (g_hash_table_size(s->images) >= MAX_IMAGES) {
        g_hash_table_remove_all(s->images);
        prof_model_forget(s->model, PROF_SPACE_PROCESS);
    }
    img = g_new0(struct proc_image, 1);
    img->key = key;
    img->load_base = id->load_base ? id->load_base : id->text_addr;
    g_strlcpy(img->name, t->comm, sizeof img->name);
    bool readable =
        id->text_size && id->text_size <= MAX_TEXT_TO_HASH && id->eh_frame_size <= MAX_EH_FRAME;
    if (readable)
        img->copy = g_try_malloc(id->text_size + id->eh_frame_size);
    img->state = img->copy ? IMAGE_COPYING : IMAGE_DONE;
    if (!img->copy && s->opts.verbose)
        qp_log(QP_LOG_INFO, "pid %u (%s): .text of %" PRIu64 " bytes not identified", t->pid,
               img->name, id->text_size);
    g_hash_table_insert(s->images, &img->key, img);
    return img;
}

/* ---- Reading guest memory within the budget (guest paused) ------------------------------- */

static void budget_start(prof_session *s)
{
    s->budget = (struct pause_budget){PROF_BUDGET_BYTES, prof_target_round_trips(s->target), false};
}

/* How much of a len-byte read the budget allows now: all of it, less, or 0. */
static size_t budget_allow(prof_session *s, size_t len)
{
    bool out_of_requests =
        prof_target_reads_cost_round_trips(s->target) &&
        prof_target_round_trips(s->target) - s->budget.round_trips_at_start >= PROF_BUDGET_REQUESTS;
    size_t allowed = out_of_requests ? 0 : len < s->budget.bytes_left ? len : s->budget.bytes_left;
    if (allowed < len)
        s->budget.hit = true;
    return allowed;
}

/* Reads up to len bytes at addr through cpu's page tables, as the budget allows; *got is what
 * was read from the start. Returns 0 when anything was read. */
static int target_read(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                       size_t len, bool instant, size_t *got)
{
    struct prof_mem_req req = {.vaddr = addr, .len = len, .buf = buf, .instant = instant};
    int rc = prof_target_read(s->target, cpu, &req, 1, NULL);
    *got = req.got;
    return rc ? rc : req.rc;
}

/* instant: a stack window (struct prof_mem_req). */
static int paused_read(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                       size_t len, bool instant, size_t *got)
{
    *got = 0;
    size_t allowed = budget_allow(s, len);
    if (!allowed)
        return -ENOSPC;
    int rc = target_read(s, cpu, addr, buf, allowed, instant, got);
    s->budget.bytes_left -= allowed;
    return rc;
}

/* The OS adapter reads through here, so its reads count against the sample's budget too. What
 * it reads (which process runs, the user registers a kernel entry saved) is the sample's instant,
 * as a stack is. */
static int os_read(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf, size_t len,
                   size_t *got)
{
    return paused_read(ctx, cpu, addr, buf, len, true, got);
}

/* What the adapter copies of a process's mapped files: not the instant's, the guest does not
 * write it (a capturing target reads it from live memory). */
static int os_read_unchanging(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                              size_t len, size_t *got)
{
    return paused_read(ctx, cpu, addr, buf, len, false, got);
}

/* Physical reads (the Linux adapter's page walks, its one-time table copies) are not counted
 * against the budget: with the direct backend they cost no round trip. */
static int os_read_phys(void *ctx, uint64_t paddr, void *buf, size_t len)
{
    prof_session *s = ctx;
    return prof_target_read_phys(s->target, paddr, buf, len, NULL);
}

static int os_ram_ranges(void *ctx, struct prof_ram_range *out, int max, int *n,
                         struct qp_error *err)
{
    prof_session *s = ctx;
    return prof_target_ram_ranges(s->target, out, max, n, err);
}

/* The adapter's own reads that cost what a read does (its VMA walks) come out of the budget. */
static bool os_charge(void *ctx, size_t len)
{
    prof_session *s = ctx;
    if (budget_allow(s, len) < len)
        return false;
    s->budget.bytes_left -= len;
    return true;
}

static struct prof_os_mem os_mem(prof_session *s)
{
    return (struct prof_os_mem){.read = os_read,
                                .read_unchanging = os_read_unchanging,
                                .read_phys = os_read_phys,
                                .ram_ranges = os_ram_ranges,
                                .charge = os_charge,
                                .reads_are_cheap = !prof_target_reads_cost_round_trips(s->target),
                                .captured = prof_target_captures(s->target),
                                .ctx = s};
}

/* Copies the next part of an image's .text and .eh_frame; the copy completes over several
 * samples when it is larger than what one sample may read. */
static void image_copy_some(prof_session *s, const struct prof_vcpu *cpu, struct proc_image *img)
{
    const struct image_key *k = &img->key;
    while (img->state == IMAGE_COPYING) {
        bool in_text = img->copied < k->text_size;
        uint64_t addr =
            in_text ? k->text_addr + img->copied : k->eh_frame_addr + (img->copied - k->text_size);
        size_t want =
            in_text ? k->text_size - img->copied : k->text_size + k->eh_frame_size - img->copied;
        size_t allowed = budget_allow(s, want), got = 0;
        if (!allowed)
            return; /* the rest in a later sample */
        int rc = target_read(s, cpu, addr, img->copy + img->copied, allowed, false, &got);
        s->budget.bytes_left -= allowed;
        got = got < allowed ? got : allowed; /* the copy holds no more than it asked for */
        img->copied += got;
        if (rc < 0 || got < allowed) {
            if (s->opts.verbose)
                qp_log(QP_LOG_INFO, "pid %" PRIu64 " (%s): .text or .eh_frame unreadable", k->pid,
                       img->name);
            g_free(img->copy);
            img->copy = NULL;
            img->state = IMAGE_DONE;
            return;
        }
        if (img->copied == k->text_size + k->eh_frame_size)
            img->state = IMAGE_COPIED;
    }
}

/* ---- Identifying images (guest running) -------------------------------------------------- */

/* Unwind tables for a binary: the host ELF when we have it, else the .eh_frame the guest
 * published (checked by the unwinder before use). */
static void binary_load_unwind(prof_session *s, struct user_binary *b, const struct proc_image *img)
{
    struct qp_error err = {0};
    const struct image_key *k = &img->key;
    if (unw_space_new(s->arch->unwind, b->name, 0, s->split.user_end, &b->space, &err))
        goto fail;
    if (b->syms) {
        if (unw_space_add_elf(b->space, sym_table_path(b->syms), b->bias, &err) == 0)
            return;
        goto fail;
    }
    if (!k->eh_frame_addr || !k->eh_frame_size)
        return; /* frame pointers only */
    if (unw_space_add_eh_frame(b->space, b->name, k->text_addr, k->text_size, k->eh_frame_addr,
                               img->copy + k->text_size, k->eh_frame_size, &err) == 0)
        return;
fail:
    if (s->opts.verbose)
        qp_log(QP_LOG_INFO, "no unwind tables for %s: %s", b->name, err.msg);
}

/* Hashes a copied .text and finds (or makes) its binary. */
static void image_identify(prof_session *s, struct proc_image *img)
{
    const struct image_key *k = &img->key;
    uint64_t hash = sym_text_hash(img->copy, k->text_size);
    struct user_binary *b = g_hash_table_lookup(s->binaries, &hash);
    if (!b) {
        b = g_new0(struct user_binary, 1);
        b->hash = hash;
        b->syms = sym_store_find(s->store, hash);
        b->text_addr = k->text_addr;
        b->load_base = img->load_base;
        g_strlcpy(b->name, b->syms ? sym_table_name(b->syms) : img->name, sizeof b->name);
        struct out_module m = {.text_hash = hash, .base = b->load_base};
        g_strlcpy(m.name, b->name, sizeof m.name);
        if (b->syms)
            g_strlcpy(m.path, sym_table_path(b->syms), sizeof m.path);
        /* A relocated (PIE) binary's .text runs away from its link address. */
        int64_t bias = b->syms ? (int64_t)(k->text_addr - sym_table_text_addr(b->syms)) : 0;
        b->module = prof_modules_add(s->modules, &m, b->syms, bias);
        b->bias = bias;
        if (s->opts.verbose)
            qp_log(QP_LOG_INFO, "pid %" PRIu64 " (%s): .text hash %016" PRIx64 " %s%s", k->pid,
                   img->name, hash, b->syms ? "is " : "matches no file under --user-dir",
                   b->syms ? sym_table_path(b->syms) : "");
        binary_load_unwind(s, b, img);
        g_hash_table_insert(s->binaries, &b->hash, b);
    }
    img->bin = b;
    img->state = IMAGE_DONE;
    g_free(img->copy);
    img->copy = NULL;
}

/* The process's address space in the model once its image's .text hash named a binary: the OS
 * published one exec image, the whole space runs it. */
static const prof_space *image_space(prof_session *s, const struct proc_image *img)
{
    const struct user_binary *b = img->bin;
    prof_space *as =
        prof_model_space(s->model, PROF_SPACE_PROCESS, img->key.pid, img->key.generation);
    struct prof_map m = {.start = 0, .end = UINT64_MAX, .rank = PROF_RANK_SPACE, .known = true};
    m.bin = (struct prof_binary){.how = PROF_IDENT_HASH, .module = b->module, .unwind = b->space};
    prof_space_clear(as);
    prof_space_add(as, &m);
    return as;
}

/* --os none: the copied code page names its binary; the address space names the process. */
static void identify_aspace(prof_session *s, struct cpu_capture *c)
{
    if (c->page_state != PAGE_NONE)
        prof_aspace_add_page(s->aspaces, c->as, c->page_addr,
                             c->page_state == PAGE_COPIED ? c->page : NULL);
    if (!prof_aspace_is_process(c->as))
        return;
    c->as_label = prof_aspace_label(c->as);
    const struct unw_regs *user = c->vcpu.user         ? &c->vcpu.regs
                                  : c->have_trap       ? &c->trap
                                  : c->have_entry_regs ? &c->entry_regs
                                                       : NULL;
    if (!user)
        return;
    c->space = prof_aspace_space(c->as);
    const struct prof_map *m = prof_space_find(c->space, user->r[s->arch->pc_reg]);
    /* The entry's user pc is no code of this address space: the kernel stack belongs to another
     * (a switch in progress), so its user frames would be read from the wrong memory. */
    if (!c->vcpu.user && !(m && m->known))
        c->have_entry_regs = c->have_trap = false;
}

/* After the guest resumed: identify what was copied, fill the model, and give each vCPU its
 * address space there. Where several strategies know the task, --sysroot's mappings win, then
 * the code pages, then the image's hash. */
static void identify_captured(prof_session *s)
{
    for (int i = 0; i < s->n_cpus; i++) {
        struct cpu_capture *c = &s->cap[i];
        if (c->img && c->img->state == IMAGE_COPIED)
            image_identify(s, c->img);
        c->space =
            c->img && c->img->state == IMAGE_DONE && c->img->bin ? image_space(s, c->img) : NULL;
        const prof_space *vmas = prof_sysroot_build(s->sysroot, c->uspace);
        if (c->as)
            identify_aspace(s, c);
        if (vmas && !c->task.user_leaf_only)
            c->space = vmas;
    }
}

/* ---- Capture (guest stopped) ------------------------------------------------------------- */

static void reject_abi(prof_session *s, const char *why)
{
    s->counters.abi_rejected++;
    g_strlcpy(s->counters.abi_reject_reason, why, sizeof s->counters.abi_reject_reason);
    if (s->opts.verbose)
        qp_log(QP_LOG_INFO, "qprof_abi rejected: %s", why);
}

/* The adapter found the kernel in the guest: its symbols name kernel frames unless --kernel
 * gave some, and a --kernel System.map (link-time addresses) gets the KASLR slide. */
static void use_found_kernel(prof_session *s, const struct prof_os_refresh *r)
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
static void forget_boot(prof_session *s)
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
    s->os_mem = os_mem(s);
    struct prof_os_refresh r;
    prof_os_refresh(s->os, cpus, n_cpus, &s->os_mem, &r);
    if (r.rejected)
        reject_abi(s, r.reject_reason);
    if (r.kernel_found)
        use_found_kernel(s, &r);
    if (r.reset) {
        s->counters.resets++;
        forget_boot(s);
    }
    if (!r.published)
        return;
    uint32_t kernel = prof_modules_kernel(s->modules);
    const struct out_module *k = out_profile_module(s->profile, kernel);
    if (k && !k->base && r.kernel_text_addr)
        out_profile_set_module_base(s->profile, kernel, r.kernel_text_addr);
}

static void read_window(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, uint8_t *buf,
                        size_t cap, uint64_t *win_addr, size_t *win_len)
{
    *win_addr = addr;
    paused_read(s, cpu, addr, buf, cap, true, win_len);
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
 * need (grow_kernel_window). A fixed 16 KiB would do too, but copying it costs every kernel
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
static void grow_kernel_window(prof_session *s, const struct cpu_capture *c,
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
    int rc = paused_read(s, &c->vcpu, c->page_addr, c->page, SYM_PAGE_SIZE, false, &got);
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
    if (paused_read(s, &c->vcpu, addr, bytes, len, false, &got) == 0 && got == len)
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

/* A page walk's reader: one table entry, guest-physical. */
static int phys_word(void *ctx, uint64_t paddr, uint64_t *val)
{
    prof_session *s = ctx;
    return prof_target_read_phys(s->target, paddr, val, sizeof *val, NULL);
}

/* A page walk's reader that keeps the target's reason for a failed read. */
struct walk_reader {
    prof_session *s;
    struct qp_error *err;
};

static int walk_word(void *ctx, uint64_t paddr, uint64_t *val)
{
    struct walk_reader *w = ctx;
    return prof_target_read_phys(w->s->target, paddr, val, sizeof *val, w->err);
}

/* The user stack of a process whose table the vCPU is not in: each page of the window found by
 * walking the process's own table over guest-physical reads, up to the first page that is not
 * mapped or not readable. 0 when sp's page was read; the target's code (-ENOTSUP: it reads no
 * physical memory, as the gdbstub's `m` packets do not) with the reason in err when not. */
static int read_window_in(prof_session *s, struct cpu_capture *c, uint64_t root, uint64_t sp,
                          struct qp_error *err)
{
    struct walk_reader w = {s, err};
    c->ustack_addr = sp;
    c->ustack_len = 0;
    while (c->ustack_len < USTACK_WINDOW) {
        uint64_t va = sp + c->ustack_len, pa, page;
        int rc = prof_arch_page_walk(s->arch, root, &c->vcpu.mmu, va, walk_word, &w, &pa, &page);
        if (rc && !err->msg[0])
            qp_error_set(err, rc, "0x%" PRIx64 " is not mapped in the process's table", va);
        if (rc)
            return c->ustack_len ? 0 : rc;
        size_t len = page - va % page;
        len = len < USTACK_WINDOW - c->ustack_len ? len : USTACK_WINDOW - c->ustack_len;
        rc = prof_target_read_phys(s->target, pa, c->ustack + c->ustack_len, len, err);
        if (rc)
            return c->ustack_len ? 0 : rc;
        c->ustack_len += len;
    }
    return 0;
}

/* --user-regs: a lent process's user registers where its kernel saved them, and its user stack
 * read in its own table. Where that cannot be read the user side stays unknown (stacks.c), and
 * the summary says why. A capturing target (the plugin) leaves it unknown. */
static void capture_lent_user(prof_session *s, struct cpu_capture *c)
{
    struct prof_os_mem mem = os_mem(s);
    /* a capturing target's physical reads are of memory the guest has changed since its
     * instant: a user stack read that way would be another moment's */
    if (mem.captured || prof_os_user_regs(s->os, &c->vcpu, &c->task, &mem, &c->trap) != 0)
        return;
    struct qp_error err = {0};
    if (read_window_in(s, c, prof_aspace_root(c->as), c->trap.r[s->arch->sp_reg], &err) != 0) {
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
    struct prof_os_mem mem = os_mem(s);
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
                read_window(s, v, c->trap.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW,
                            &c->ustack_addr, &c->ustack_len);
            name_user_leaf(s, c, c->trap.r[s->arch->pc_reg], &mem);
        }
        return;
    }
    if (v->user)
        name_user_leaf(s, c, v->regs.r[s->arch->pc_reg], &mem);
    if (c->task.known && c->task.has_image)
        c->img = image_for(s, &c->task);
    if (v->user) {
        if (!c->task.user_leaf_only || c->img) /* the leaf alone needs no stack */
            read_window(s, v, v->sp, c->ustack, USTACK_WINDOW, &c->ustack_addr, &c->ustack_len);
        return;
    }
    read_window(s, v, v->sp, c->kstack, kernel_window_len(s, c), &c->kstack_addr, &c->kstack_len);
    if (s->aspaces && v->as_root) {
        /* A process's address space in the kernel: its user part is where the entry came from. */
        struct prof_aspace *as = prof_aspace_for(s->aspaces, v->as_root);
        if (prof_aspace_is_process(as) && prof_recover_user_regs(s->stacks, c))
            read_window(s, v, c->entry_regs.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW,
                        &c->ustack_addr, &c->ustack_len);
        return;
    }
    if (!c->img)
        return;
    if (!c->task.user_regs_at) {
        if (prof_recover_user_regs(s->stacks, c))
            read_window(s, v, c->entry_regs.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW,
                        &c->ustack_addr, &c->ustack_len);
        return;
    }
    if (prof_recover_unsaved_entry(s->stacks, c)) {
        /* a capturing target can sample an entry before it saved the user frame */
        read_window(s, v, c->entry_regs.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW,
                    &c->ustack_addr, &c->ustack_len);
        return;
    }
    if (prof_os_user_regs(s->os, v, &c->task, &mem, &c->trap) == 0) {
        c->have_trap = true;
        read_window(s, v, c->trap.r[s->arch->sp_reg], c->ustack, USTACK_WINDOW, &c->ustack_addr,
                    &c->ustack_len);
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
    if (paused_read(s, &c->vcpu, info.start, s->code_buf, len, false, &got) != 0 || got < len)
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
        prof_arch_page_walk(s->arch, v->as_root, &v->mmu, v->pc, phys_word, s, &pa, &page) != 0 ||
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
    struct prof_os_mem mem = os_mem(s);
    prof_sysroot_copy_images(s->sysroot, c->uspace, s->os, &c->vcpu, &mem);
}

static int capture_cb(prof_target *t, const struct prof_vcpu *cpus, int n_cpus, void *ctx,
                      struct qp_error *err)
{
    (void)t, (void)err;
    prof_session *s = ctx;
    budget_start(s);
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
        forget_boot(s);
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
            image_copy_some(s, &cpus[i], s->cap[i].img);
    if (s->budget.hit)
        s->counters.budget_hits++;
    return 0;
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
    struct prof_os_mem mem = os_mem(s);
    struct prof_os_refresh r;
    prof_os_while_running(s->os, &mem, &r);
    if (r.reset) {
        s->counters.resets++;
        forget_boot(s);
    }
    if (r.kernel_found)
        use_found_kernel(s, &r);
    send_capture_plan(s);
    int rc = prof_target_sample(s->target, capture_cb, s, stats, err);
    if (rc == 0)
        identify_captured(s);
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
    if (s->last_stats.was_paused)
        return 0; /* paused between the check and the stop */
    if (prof_target_resets(s->target) != s->target_resets) {
        /* QEMU carries out a reset even while the VM is stopped, so one that came between this
         * stop's requests left registers of one boot beside memory of the next (a stack whose
         * saved user PC was the new kernel image's bytes). The next stop starts afresh. */
        s->counters.reset_straddles++;
        return 0;
    }
    *taken = true;
    for (int i = 0; i < s->n_cpus; i++) {
        prof_build_stack(s->stacks, &s->cap[i], i, &s->stack);
        if (s->stack.skipped)
            continue;
        grow_kernel_window(s, &s->cap[i], &s->stack);
        s->counters.vcpu_samples++;
        if (s->stack.sample.mode == OUT_MODE_IDLE)
            s->counters.idle++;
        prof_counters_add_sample(&s->counters, &s->stack.sample);
        if (!keep_sample(s, &s->stack.sample)) {
            s->counters.dropped_by_filter++;
            continue;
        }
        s->stack.sample.time_ns = time_ns;
        s->stack.sample.weight_ns = weight_ns;
        out_profile_add(s->profile, &s->stack.sample);
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
