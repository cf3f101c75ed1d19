/* One profiling session: a target (today QEMU's QMP monitor), an OS adapter, the kernel's and the
 * user binaries' symbols and unwind tables, and the per-sample capture and stack building.
 *
 * A sample has two halves. While the guest is stopped (capture_cb) we copy only what the
 * unwinder will need: what the OS adapter reads (the demo guest's ABI struct), each vCPU's stack
 * window, the user register frame of a process inside a system call and that user stack. After the
 * guest has resumed we unwind and symbolize from those copies, so that unwinding never adds to the
 * time the guest is paused. A walk that leaves the copied windows ends the stack as truncated
 * rather than reading memory that the running guest has changed since. */
#include "profiler.h"
#include "session_impl.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXT_TO_HASH (64u << 20)
#define MAX_EH_FRAME     (16u << 20)

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

static int load_kernel(prof_session *s, struct qp_error *err)
{
    const char *path = s->opts.kernel;
    int rc = sym_table_open_elf(path, &s->kernel_syms, err);
    bool is_elf = rc == 0;
    if (rc == -ENOEXEC || rc == -EINVAL || rc == -EPROTO) /* not an ELF: try a symbol map */
        rc = sym_table_open_map(path, &s->kernel_syms, err);
    if (rc)
        return qp_error_prefix(err, "loading kernel symbols from %s", path);
    sym_table_set_slide(s->kernel_syms, s->opts.kernel_slide);
    if (!is_elf)
        return 0;
    rc = unw_space_add_elf(s->kernel_space, path, s->opts.kernel_slide, err);
    if (rc)
        return qp_error_prefix(err, "loading kernel unwind tables from %s", path);
    uint64_t abi = 0;
    if (!s->abi_addr && s->opts.os != PROF_OS_NONE &&
        sym_find_by_name(s->kernel_syms, QPROF_ABI_SYMBOL, &abi) == 0)
        s->abi_addr = abi;
    return 0;
}

static int load_symbols(prof_session *s, struct qp_error *err)
{
    int rc = unw_space_new("kernel", s->split.kernel_start, UINT64_MAX, &s->kernel_space, err);
    if (rc)
        return rc;
    if (s->opts.kernel && (rc = load_kernel(s, err)))
        return rc;
    s->store = sym_store_new();
    for (int i = 0; i < s->opts.n_user_dirs; i++) {
        rc = sym_store_add_dir(s->store, s->opts.user_dirs[i], err);
        if (rc < 0)
            return qp_error_prefix(err, "--user-dir %s", s->opts.user_dirs[i]);
        if (s->opts.verbose)
            fprintf(stderr, "qprof: %d ELF files indexed under %s\n", rc, s->opts.user_dirs[i]);
    }
    return 0;
}

const char *prof_session_qemu_version(const prof_session *s)
{
    return prof_target_version(s->target);
}

uint32_t prof_session_add_module(prof_session *s, const struct out_module *m, const sym_table *syms)
{
    return prof_session_add_module_biased(s, m, syms, 0);
}

uint32_t prof_session_add_module_biased(prof_session *s, const struct out_module *m,
                                        const sym_table *syms, int64_t bias)
{
    uint32_t index = out_profile_add_module(s->profile, m);
    g_ptr_array_add(s->module_syms, (gpointer)syms);
    g_array_append_val(s->module_bias, bias);
    return index;
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
    s->kernel_module = prof_session_add_module(s, &m, s->kernel_syms);
}

int prof_session_symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                           struct out_symbol *sym)
{
    prof_session *s = ctx;
    uint32_t index = (uint32_t)(m - out_profile_module(s->profile, 0));
    const sym_table *syms =
        index < s->module_syms->len ? g_ptr_array_index(s->module_syms, index) : NULL;
    int64_t bias = index < s->module_bias->len ? g_array_index(s->module_bias, int64_t, index) : 0;
    uint64_t at = pc - (uint64_t)bias; /* the table's (link-time) address */
    struct sym_info info;
    /* A return address points after the call: look up the call itself. */
    if (!syms || sym_lookup(syms, exact || at == 0 ? at : at - 1, &info) != 0)
        return -ENOENT;
    *sym = (struct out_symbol){.function = info.name, .offset = at - info.start};
    sym_lookup_line(syms, exact || at == 0 ? at : at - 1, &sym->file, &sym->line);
    return 0;
}

/* Chosen once: the demo ABI when the guest can be asked for it (the kernel ELF has the symbol,
 * or --abi-addr), else Linux (which answers as "none" until it finds a Linux kernel in guest
 * RAM); --os overrides. */
static const struct prof_os_ops *os_ops(const prof_session *s)
{
    switch (s->opts.os) {
    case PROF_OS_QPROF_ABI:
        return &prof_os_qprof_abi_ops;
    case PROF_OS_NONE:
        return &prof_os_none_ops;
    case PROF_OS_LINUX:
        return &prof_os_linux_ops;
    default:
        return s->abi_addr ? &prof_os_qprof_abi_ops : &prof_os_linux_ops;
    }
}

static int open_os(prof_session *s, struct qp_error *err)
{
    const struct prof_os_ops *ops = os_ops(s);
    struct prof_os_config cfg = {.abi_addr = s->abi_addr,
                                 .split = s->split,
                                 .vmcoreinfo_path = s->opts.vmcoreinfo,
                                 .chosen = s->opts.os == PROF_OS_LINUX,
                                 .verbose = s->opts.verbose};
    int rc = prof_os_open(ops, &cfg, &s->os);
    return rc ? qp_error_set(err, rc, "opening the %s OS adapter", ops->name) : 0;
}

int prof_session_open(const struct prof_options *o, prof_session **out, struct qp_error *err)
{
    prof_session *s = g_new0(prof_session, 1);
    s->opts = *o;
    s->abi_addr = o->os == PROF_OS_NONE ? 0 : o->abi_addr; /* --os none: never read the ABI */
    const struct prof_target_ops *target_ops =
        o->gdb_address ? &prof_target_gdb_ops : &prof_target_qmp_ops;
    s->split = target_ops->split;
    s->binaries = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, binary_free);
    s->images = g_hash_table_new_full(image_key_hash, image_key_equal, NULL, image_free);
    s->mapping_modules = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    s->profile = out_profile_new();
    s->module_syms = g_ptr_array_new();
    s->module_bias = g_array_new(FALSE, FALSE, sizeof(int64_t));
    s->sysroot_files =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, prof_sysroot_file_free);
    s->user_spaces = g_hash_table_new_full(prof_user_space_key_hash, prof_user_space_key_equal,
                                           NULL, prof_user_space_free);
    s->sysroot_modules = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    s->frames = g_new(struct unw_frame, o->max_depth);
    s->frame_modules = g_new(uint32_t, o->max_depth);
    int rc = load_symbols(s, err);
    if (rc)
        goto fail;
    add_kernel_module(s);
    if ((rc = open_os(s, err)))
        goto fail;
    struct prof_transport_choice tc = {.transport = o->transport,
                                       .qmp_socket = o->qmp_socket,
                                       .qmp_socket_given = o->qmp_socket_given,
                                       .gdb_address = o->gdb_address,
                                       .memory_backend = o->memory_backend,
                                       .timeout_s = 5,
                                       .plugin_address = o->plugin_address,
                                       .interval_ns = (uint64_t)(o->interval_ms * 1e6),
                                       .period_insns = o->period_insns,
                                       .abi_addr = s->abi_addr};
    rc = prof_target_open_transport(&tc, &s->target, err);
    if (rc)
        goto fail;
    if (o->verbose)
        fprintf(stderr,
                "qprof: connected to QEMU %s, memory backend %s, qprof_abi at 0x%" PRIx64 "\n",
                prof_target_version(s->target), prof_target_describe(s->target), s->abi_addr);
    if (o->verbose)
        fprintf(stderr, "qprof: OS adapter: %s\n", prof_os_name(s->os));
    *out = s;
    return 0;
fail:
    prof_session_free(s);
    return rc;
}

void prof_session_free(prof_session *s)
{
    if (!s)
        return;
    prof_target_free(s->target);
    prof_os_free(s->os);
    sym_table_free(s->kernel_syms);
    unw_space_free(s->kernel_space);
    unw_space_free(s->fallback_space);
    prof_stack_free(&s->stack);
    sym_store_free(s->store);
    if (s->binaries)
        g_hash_table_destroy(s->binaries);
    if (s->images)
        g_hash_table_destroy(s->images);
    if (s->mapping_modules)
        g_hash_table_destroy(s->mapping_modules);
    out_profile_free(s->profile);
    if (s->module_syms)
        g_ptr_array_free(s->module_syms, TRUE);
    if (s->module_bias)
        g_array_free(s->module_bias, TRUE);
    if (s->user_spaces)
        g_hash_table_destroy(s->user_spaces);
    if (s->sysroot_files)
        g_hash_table_destroy(s->sysroot_files);
    if (s->sysroot_modules)
        g_hash_table_destroy(s->sysroot_modules);
    g_free(s->frame_modules);
    for (int i = 0; i < PROF_MAX_VCPUS; i++) {
        g_free(s->cap[i].kstack);
        g_free(s->cap[i].ustack);
    }
    g_free(s->frames);
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
    if (g_hash_table_size(s->images) >= MAX_IMAGES)
        g_hash_table_remove_all(s->images);
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
        fprintf(stderr, "qprof: pid %u (%s): .text of %" PRIu64 " bytes not identified\n", t->pid,
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
                       size_t len, size_t *got)
{
    struct prof_mem_req req = {.vaddr = addr, .len = len, .buf = buf};
    int rc = prof_target_read(s->target, cpu, &req, 1, NULL);
    *got = req.got;
    return rc ? rc : req.rc;
}

static int paused_read(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                       size_t len, size_t *got)
{
    *got = 0;
    size_t allowed = budget_allow(s, len);
    if (!allowed)
        return -ENOSPC;
    int rc = target_read(s, cpu, addr, buf, allowed, got);
    s->budget.bytes_left -= allowed;
    return rc;
}

/* The OS adapter reads through here, so its reads count against the sample's budget too. */
static int os_read(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf, size_t len,
                   size_t *got)
{
    return paused_read(ctx, cpu, addr, buf, len, got);
}

/* Physical reads (the Linux adapter's page walks, its one-time table copies) are not counted
 * against the budget: with the direct backend they cost no round trip. */
static int os_read_phys(void *ctx, uint64_t paddr, void *buf, size_t len)
{
    prof_session *s = ctx;
    return prof_target_read_phys(s->target, paddr, buf, len, NULL);
}

static int os_ram_ranges(void *ctx, struct prof_ram_range *out, int max, int *n)
{
    prof_session *s = ctx;
    return prof_target_ram_ranges(s->target, out, max, n, NULL);
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
                                .read_phys = os_read_phys,
                                .ram_ranges = os_ram_ranges,
                                .charge = os_charge,
                                .reads_are_cheap = !prof_target_reads_cost_round_trips(s->target),
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
        int rc = target_read(s, cpu, addr, img->copy + img->copied, allowed, &got);
        s->budget.bytes_left -= allowed;
        img->copied += got;
        if (rc < 0 || got < allowed) {
            if (s->opts.verbose)
                fprintf(stderr, "qprof: pid %" PRIu64 " (%s): .text or .eh_frame unreadable\n",
                        k->pid, img->name);
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
    if (unw_space_new(b->name, 0, s->split.user_end, &b->space, &err))
        goto fail;
    if (b->syms) {
        if (unw_space_add_elf(b->space, sym_table_path(b->syms), 0, &err) == 0)
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
        fprintf(stderr, "qprof: no unwind tables for %s: %s\n", b->name, err.msg);
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
        b->module = prof_session_add_module(s, &m, b->syms);
        if (s->opts.verbose)
            fprintf(stderr, "qprof: pid %" PRIu64 " (%s): .text hash %016" PRIx64 " %s%s\n", k->pid,
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

/* After the guest resumed: identify what was copied, and give each vCPU its binary. */
static void identify_captured(prof_session *s)
{
    for (int i = 0; i < s->n_cpus; i++) {
        struct cpu_capture *c = &s->cap[i];
        if (c->img && c->img->state == IMAGE_COPIED)
            image_identify(s, c->img);
        c->bin = c->img && c->img->state == IMAGE_DONE ? c->img->bin : NULL;
        prof_sysroot_build(s, c);
    }
}

/* ---- Capture (guest stopped) ------------------------------------------------------------- */

static void reject_abi(prof_session *s, const char *why)
{
    s->counters.abi_rejected++;
    g_strlcpy(s->counters.abi_reject_reason, why, sizeof s->counters.abi_reject_reason);
    if (s->opts.verbose)
        fprintf(stderr, "qprof: qprof_abi rejected: %s\n", why);
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
        s->kernel_module = prof_session_add_module(s, &m, found);
        s->found_kernel_syms = found;
    } else if (!s->kernel_syms && found) {
        g_ptr_array_index(s->module_syms, s->kernel_module) = (gpointer)found;
        s->found_kernel_syms = found;
    } else if (s->kernel_syms && !s->opts.kernel_slide && r->kernel_stext &&
               sym_find_by_name(s->kernel_syms, "_stext", &stext) == 0 &&
               stext + (uint64_t)r->kernel_slide == r->kernel_stext && r->kernel_slide) {
        sym_table_set_slide(s->kernel_syms, r->kernel_slide);
        if (s->opts.verbose)
            fprintf(stderr, "qprof: --kernel %s: KASLR slide 0x%" PRIx64 " applied\n",
                    s->opts.kernel, (uint64_t)r->kernel_slide);
    }
}

/* The guest rebooted: pids, generations and address spaces start over. */
static void forget_boot(prof_session *s)
{
    g_hash_table_remove_all(s->images);
    prof_sysroot_reset(s);
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
    const struct out_module *k = out_profile_module(s->profile, s->kernel_module);
    if (k && !k->base && r.kernel_text_addr)
        out_profile_set_module_base(s->profile, s->kernel_module, r.kernel_text_addr);
}

static void read_window(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, uint8_t *buf,
                        size_t cap, uint64_t *win_addr, size_t *win_len)
{
    *win_addr = addr;
    paused_read(s, cpu, addr, buf, cap, win_len);
}

/* One module per mapped file at one base ("libc.so.6" at each address a process put it): a pc
 * with no symbol shows as "libc.so.6+0xFILE_OFFSET". A long run with very many processes stops
 * adding them (frames then show as addresses). */
#define MAX_MAPPING_MODULES 4096
uint32_t prof_session_mapping_module(prof_session *s, const struct prof_mapping *m)
{
    char *key = g_strdup_printf("%s@%" PRIx64, m->name, m->base);
    gpointer found;
    if (g_hash_table_lookup_extended(s->mapping_modules, key, NULL, &found)) {
        g_free(key);
        return GPOINTER_TO_UINT(found);
    }
    if (g_hash_table_size(s->mapping_modules) >= MAX_MAPPING_MODULES) {
        g_free(key);
        return OUT_NO_MODULE;
    }
    struct out_module om = {.base = m->base};
    g_strlcpy(om.name, m->name, sizeof om.name);
    uint32_t index = prof_session_add_module(s, &om, NULL);
    g_hash_table_insert(s->mapping_modules, key, GUINT_TO_POINTER(index));
    return index;
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
        c->leaf_module = prof_session_mapping_module(s, &m);
}

/* Stacks first: they are what this sample is for. A new binary's copy takes what is left. */
static void capture_cpu(prof_session *s, struct cpu_capture *c)
{
    const struct prof_vcpu *v = &c->vcpu;
    struct prof_os_mem mem = os_mem(s);
    c->have_kstack = false;
    c->leaf_module = OUT_NO_MODULE;
    prof_sysroot_capture(s, c, &mem);
    if (!v->user && prof_os_kernel_unwind(s->os, v, &c->task, &mem, &c->kst) == 0) {
        /* The adapter walked the kernel stack itself; only the user stack is left to copy. */
        c->have_kstack = true;
        if (c->kst.have_user_regs) {
            c->trap = c->kst.user_regs;
            c->have_trap = true;
            if (!c->task.user_leaf_only)
                read_window(s, v, c->trap.r[UNW_RSP], c->ustack, USTACK_WINDOW, &c->ustack_addr,
                            &c->ustack_len);
            name_user_leaf(s, c, c->trap.r[UNW_RIP], &mem);
        }
        return;
    }
    if (v->user)
        name_user_leaf(s, c, v->regs.r[UNW_RIP], &mem);
    if (c->task.known && c->task.has_image)
        c->img = image_for(s, &c->task);
    if (v->user) {
        if (!c->task.user_leaf_only || c->img) /* the leaf alone needs no stack */
            read_window(s, v, v->sp, c->ustack, USTACK_WINDOW, &c->ustack_addr, &c->ustack_len);
        return;
    }
    read_window(s, v, v->sp, c->kstack, prof_os_kernel_stack_len(s->os, v, &c->task, KSTACK_WINDOW),
                &c->kstack_addr, &c->kstack_len);
    if (!c->img)
        return;
    if (!c->task.user_regs_at) {
        if (prof_recover_user_regs(s, c))
            read_window(s, v, c->entry_regs.r[UNW_RSP], c->ustack, USTACK_WINDOW, &c->ustack_addr,
                        &c->ustack_len);
        return;
    }
    if (prof_os_user_regs(s->os, v, &c->task, &mem, &c->trap) == 0) {
        c->have_trap = true;
        read_window(s, v, c->trap.r[UNW_RSP], c->ustack, USTACK_WINDOW, &c->ustack_addr,
                    &c->ustack_len);
    }
}

static int capture_cb(prof_target *t, const struct prof_vcpu *cpus, int n_cpus, void *ctx,
                      struct qp_error *err)
{
    (void)t, (void)err;
    prof_session *s = ctx;
    budget_start(s);
    prof_sysroot_begin_stop(s);
    s->n_cpus = n_cpus < PROF_MAX_VCPUS ? n_cpus : PROF_MAX_VCPUS;
    for (int i = 0; i < s->n_cpus; i++) {
        struct cpu_capture *c = &s->cap[i];
        c->vcpu = cpus[i];
        /* --cpus names QEMU's vCPU numbers, not positions in the stop's list. */
        int index = cpus[i].index >= 0 ? cpus[i].index : i;
        c->selected = index < 64 && ((s->opts.cpu_mask >> index) & 1);
        c->have_trap = c->have_entry_regs = false;
        c->img = NULL;
        c->bin = NULL;
        c->uspace = NULL;
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
        }
    }
    for (int i = 0; i < s->n_cpus; i++)
        if (s->cap[i].img)
            image_copy_some(s, &cpus[i], s->cap[i].img);
    if (s->budget.hit)
        s->counters.budget_hits++;
    return 0;
}

int prof_session_capture(prof_session *s, struct prof_target_stats *stats, struct qp_error *err)
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
    int rc = prof_target_sample(s->target, capture_cb, s, stats, err);
    if (rc == 0)
        identify_captured(s);
    return rc;
}
