/* --sysroot: user stacks of a stock guest unwound with the guest's own files, found under a
 * host directory by the path the guest mapped them from and used only when their GNU build-id
 * is the one the guest's mapping carries (a file from another build would name the wrong
 * functions with full confidence).
 *
 * While the guest is paused only the OS adapter's list of exec mappings is copied (and the
 * adapter reads what it does not know yet: paths, build-ids, once per process and file). Opening
 * files, checking build-ids and loading libdwfl wait until the guest runs again.
 *
 * A mapping no sysroot file serves (no --sysroot, or none of the guest's build there) is
 * unwound and named from the guest's own mapped copy of the file instead (memimage.h). */
#include "sysroot.h"
#include "qp_log.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <glib.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#define MAX_USER_SPACES   64   /* address spaces kept; all dropped past that */
#define MAX_SYSROOT_FILES 4096 /* guest paths looked up; past that, files are not used */
#define MAX_SYSROOT_LOADS 32
#define PAGE_SIZE         4096u

struct prof_sysroot {
    struct prof_sysroot_config cfg;
    prof_modules *modules; /* borrowed */
    struct prof_sysroot_counters counters;
    GHashTable *files;           /* guest path -> struct sysroot_file (owned) */
    GHashTable *spaces;          /* struct user_space_key -> struct user_space (owned) */
    GHashTable *modules_by_file; /* "host path@bias" -> module index */
    GHashTable *debug_tables;    /* build-id (hex) -> sym_table of its debug file, or NULL */
    prof_memimgs *memimgs;       /* the guest's own copies of its files (from_memory) */
};

/* One guest path looked up under the sysroot, once. */
struct sysroot_file {
    char *host_path; /* DIR + the guest's path */
    bool usable;     /* an ELF of the guest's architecture with a GNU build-id and PT_LOADs */
    const char *why_not;
    char why_buf[64]; /* why_not, when it names the architecture */
    uint8_t build_id[PROF_BUILD_ID_MAX];
    size_t build_id_len;
    GArray *loads;     /* struct sysroot_load */
    sym_table *syms;   /* owned; opened with the first module that uses the file */
    bool syms_tried;   /* sym_table_open_elf was called (syms NULL: it failed) */
    bool said_differs; /* the user was told its build-id is not the guest's */
};

struct sysroot_load {
    uint64_t offset, vaddr, filesz; /* a PT_LOAD's p_offset, p_vaddr, p_filesz */
};

static void sysroot_file_free(gpointer p)
{
    struct sysroot_file *f = p;
    g_free(f->host_path);
    if (f->loads)
        g_array_free(f->loads, TRUE);
    sym_table_free(f->syms);
    g_free(f);
}

static void user_space_free(gpointer p)
{
    struct user_space *u = p;
    g_free(u->maps);
    g_free(u->verified);
    g_free(u->named);
    g_free(u->module);
    g_free(u->img);
    g_free(u->img_used);
    unw_space_free(u->space);
    g_free(u);
}

static guint user_space_key_hash(gconstpointer p)
{
    const struct user_space_key *k = p;
    uint64_t h = k->id * UINT64_C(0x9e3779b97f4a7c15) ^ k->generation;
    return (guint)(h ^ h >> 32);
}

static gboolean user_space_key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(struct user_space_key)) == 0;
}

prof_sysroot *prof_sysroot_new(const struct prof_sysroot_config *cfg, prof_modules *modules)
{
    prof_sysroot *sr = g_new0(prof_sysroot, 1);
    sr->cfg = *cfg;
    sr->modules = modules;
    sr->files = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, sysroot_file_free);
    sr->spaces =
        g_hash_table_new_full(user_space_key_hash, user_space_key_equal, NULL, user_space_free);
    sr->modules_by_file = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    sr->debug_tables =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)sym_table_free);
    if (cfg->from_memory)
        sr->memimgs = prof_memimgs_new(cfg->arch->elf_machine, cfg->verbose);
    return sr;
}

const struct prof_sysroot_counters *prof_sysroot_counters(const prof_sysroot *sr)
{
    return &sr->counters;
}

void prof_sysroot_free(prof_sysroot *sr)
{
    if (!sr)
        return;
    g_hash_table_destroy(sr->spaces);
    g_hash_table_destroy(sr->files);
    g_hash_table_destroy(sr->modules_by_file);
    g_hash_table_destroy(sr->debug_tables);
    prof_memimgs_free(sr->memimgs);
    g_free(sr);
}

void prof_sysroot_begin_stop(prof_sysroot *sr)
{
    if (g_hash_table_size(sr->spaces) >= MAX_USER_SPACES) {
        g_hash_table_remove_all(sr->spaces);
        prof_model_forget(sr->cfg.model, PROF_SPACE_VMAS); /* they borrow the spaces' tables */
    }
}

void prof_sysroot_reset(prof_sysroot *sr)
{
    g_hash_table_remove_all(sr->spaces);
    prof_model_forget(sr->cfg.model, PROF_SPACE_VMAS);
    if (sr->memimgs)
        prof_memimgs_reset(sr->memimgs);
}

int prof_user_space_find(const struct user_space *u, uint64_t pc)
{
    for (int k = 0; k < u->n; k++)
        if (u->maps[k].start <= pc && pc < u->maps[k].end)
            return k;
    return -1;
}

/* ---- While stopped ----------------------------------------------------------------------- */

static struct user_space *user_space_for(prof_sysroot *sr, const struct prof_address_space *as)
{
    struct user_space_key key = {as->id, as->generation};
    struct user_space *u = g_hash_table_lookup(sr->spaces, &key);
    if (u)
        return u;
    u = g_new0(struct user_space, 1);
    u->key = key;
    u->n = as->n > 0 ? as->n : 0;
    u->maps = g_memdup2(as->maps, sizeof *as->maps * (size_t)u->n);
    size_t n = u->n ? (size_t)u->n : 1;
    u->verified = g_new0(bool, n);
    u->named = g_new0(bool, n);
    u->module = g_new0(uint32_t, n);
    u->img = g_new0(struct prof_memimg *, n);
    u->img_used = g_new0(bool, n);
    g_hash_table_insert(sr->spaces, &u->key, u);
    return u;
}

struct user_space *prof_sysroot_capture(prof_sysroot *sr, prof_os *os, int i,
                                        struct prof_task *task, const struct prof_os_mem *mem)
{
    struct prof_address_space as;
    if ((!sr->cfg.dir && !sr->memimgs) || !task->known || task->state != PROF_TASK_USER ||
        prof_os_address_space(os, i, mem, &as) != 0)
        return NULL;
    struct user_space *u = user_space_for(sr, &as);
    /* A space known to hold no verified file unwinds nothing: its leaf is all there is. */
    if (!u->built || u->n_verified > 0 || u->mem_pending)
        task->user_leaf_only = false;
    return u;
}

/* ---- After the guest resumed: the sysroot's files ---------------------------------------- */

static const char *read_elf_facts(const struct prof_arch *arch, struct sysroot_file *f, Elf *elf)
{
    GElf_Ehdr eh;
    size_t phnum;
    const void *id;
    if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh))
        return "not an ELF file";
    if (eh.e_machine != arch->elf_machine || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)) {
        snprintf(f->why_buf, sizeof f->why_buf, "not an %s executable or shared object",
                 arch->name);
        return f->why_buf;
    }
    ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    if (n <= 0 || n > PROF_BUILD_ID_MAX)
        return "no GNU build-id note";
    memcpy(f->build_id, id, (size_t)n);
    f->build_id_len = (size_t)n;
    if (elf_getphdrnum(elf, &phnum) != 0)
        return "unreadable program headers";
    f->loads = g_array_new(FALSE, FALSE, sizeof(struct sysroot_load));
    for (size_t i = 0; i < phnum && f->loads->len < MAX_SYSROOT_LOADS; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
            struct sysroot_load l = {ph.p_offset, ph.p_vaddr, ph.p_filesz};
            g_array_append_val(f->loads, l);
        }
    }
    return f->loads->len ? NULL : "no PT_LOAD segment";
}

static struct sysroot_file *sysroot_file_open(prof_sysroot *sr, const char *guest_path)
{
    struct sysroot_file *f = g_new0(struct sysroot_file, 1);
    f->host_path = g_build_filename(sr->cfg.dir, guest_path, NULL);
    int fd = open(f->host_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        f->why_not = "not under --sysroot";
        return f;
    }
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    f->why_not = elf ? read_elf_facts(sr->cfg.arch, f, elf) : "not an ELF file";
    f->usable = f->why_not == NULL;
    elf_end(elf);
    close(fd);
    return f;
}

static struct sysroot_file *sysroot_file(prof_sysroot *sr, const char *guest_path)
{
    struct sysroot_file *f = g_hash_table_lookup(sr->files, guest_path);
    if (f || g_hash_table_size(sr->files) >= MAX_SYSROOT_FILES)
        return f;
    f = sysroot_file_open(sr, guest_path);
    sr->counters.sysroot_files_unused += !f->usable;
    if (!f->usable && sr->cfg.verbose)
        qp_log(QP_LOG_INFO, "--sysroot: %s: %s (its frames end the user stack)", f->host_path,
               f->why_not);
    g_hash_table_insert(sr->files, g_strdup(guest_path), f);
    return f;
}

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
    out[2 * n] = '\0';
}

/* The guest's mapping and the sysroot's file are the same build; says once per file when the
 * file is another build, or when the guest's build-id could not be read. */
static bool same_build(prof_sysroot *sr, struct sysroot_file *f, const struct prof_exec_mapping *m)
{
    if (m->build_id_len && m->build_id_len == f->build_id_len &&
        memcmp(m->build_id, f->build_id, f->build_id_len) == 0)
        return true;
    if (!f->said_differs) {
        char want[2 * PROF_BUILD_ID_MAX + 1], have[2 * PROF_BUILD_ID_MAX + 1];
        hex(m->build_id, m->build_id_len, want);
        hex(f->build_id, f->build_id_len, have);
        if (m->build_id_len)
            qp_log(QP_LOG_WARN, "--sysroot: %s has build-id %s, the guest's %s has %s: not used",
                   f->host_path, have, m->path, want);
        else
            qp_log(QP_LOG_WARN,
                   "--sysroot: the guest's build-id of %s could not be read: %s not "
                   "used",
                   m->path, f->host_path);
        f->said_differs = true;
        sr->counters.sysroot_files_unused++;
    }
    return false;
}

/* Where the file's link-time addresses run in the guest: the mapping puts file offset
 * pgoff * 4096 at start, and the PT_LOAD holding that offset puts it at p_vaddr + (offset -
 * p_offset). 0 for an ET_EXEC at its link address, the load address for PIE and libraries. */
static int mapping_bias(const struct sysroot_file *f, const struct prof_exec_mapping *m,
                        int64_t *bias)
{
    uint64_t off = m->pgoff * PAGE_SIZE;
    for (guint i = 0; i < f->loads->len; i++) {
        const struct sysroot_load *l = &g_array_index(f->loads, struct sysroot_load, i);
        if (off >= (l->offset & ~(uint64_t)(PAGE_SIZE - 1)) && off < l->offset + l->filesz) {
            *bias = (int64_t)(m->start - off - l->vaddr + l->offset);
            return 0;
        }
    }
    return -ENOENT;
}

/* The symbols of the separate debug file of a stripped object (gdb's and perf's lookup, under
 * --sysroot or else the host's own /usr/lib/debug: a build-id names one build wherever it is),
 * once per file; NULL when there is none. object_path: a host copy of the object (its
 * .gnu_debuglink), or NULL. */
static const sym_table *debug_symbols(prof_sysroot *sr, const uint8_t *build_id,
                                      size_t build_id_len, const char *guest_path,
                                      const char *object_path)
{
    char hex_id[2 * PROF_BUILD_ID_MAX + 1];
    hex(build_id, build_id_len, hex_id);
    char *key = g_strdup_printf("%s@%s", hex_id, build_id_len ? "" : guest_path);
    gpointer found;
    if (g_hash_table_lookup_extended(sr->debug_tables, key, NULL, &found)) {
        g_free(key);
        return found;
    }
    sym_table *t = NULL;
    char *debug = sym_debug_file_find(sr->cfg.dir, build_id, build_id_len, guest_path, object_path);
    struct qp_error err = {0};
    if (debug && sym_table_open_elf(debug, &t, &err) == 0 && sym_table_count(t) == 0)
        g_clear_pointer(&t, sym_table_free); /* stripped too: the object's own names serve */
    if (sr->cfg.verbose && debug)
        qp_log(QP_LOG_INFO, "%s: names from its debug file %s%s%s", guest_path, debug,
               t ? "" : ": unusable: ",
               t            ? ""
               : err.msg[0] ? err.msg
                            : "no symbols");
    g_free(debug);
    g_hash_table_insert(sr->debug_tables, key, t);
    return t;
}

/* One module per sysroot file and bias, sharing the file's symbol table (its debug file's when
 * there is one). */
static uint32_t sysroot_module(prof_sysroot *sr, struct sysroot_file *f, const char *guest_path,
                               int64_t bias)
{
    char *key = g_strdup_printf("%s@%" PRIx64, f->host_path, (uint64_t)bias);
    gpointer found;
    if (g_hash_table_lookup_extended(sr->modules_by_file, key, NULL, &found)) {
        g_free(key);
        return GPOINTER_TO_UINT(found);
    }
    if (!f->syms_tried) {
        struct qp_error err = {0};
        f->syms_tried = true;
        if (sym_table_open_elf(f->host_path, &f->syms, &err) && sr->cfg.verbose)
            qp_log(QP_LOG_INFO, "--sysroot: symbols of %s: %s", f->host_path, err.msg);
    }
    const sym_table *debug =
        debug_symbols(sr, f->build_id, f->build_id_len, guest_path, f->host_path);
    /* Offsets count from where the file's start is mapped, as for a mapping the OS names
     * ("busybox+0x4a6fc" either way): the bias for a shared object or PIE, whose first
     * PT_LOAD is at 0, but 0x400000 more for an executable linked there (ET_EXEC). */
    const struct sysroot_load *first = &g_array_index(f->loads, struct sysroot_load, 0);
    struct out_module m = {.base = (uint64_t)bias + first->vaddr - first->offset};
    const char *base = strrchr(f->host_path, '/');
    g_strlcpy(m.name, base ? base + 1 : f->host_path, sizeof m.name);
    g_strlcpy(m.path, f->host_path, sizeof m.path);
    uint32_t index = prof_modules_add(sr->modules, &m, debug ? debug : f->syms, bias);
    g_hash_table_insert(sr->modules_by_file, key, GUINT_TO_POINTER(index));
    return index;
}

/* Adds mapping k's file to u's unwinder (once per file and bias). */
static bool add_mapping(prof_sysroot *sr, struct user_space *u, int k, struct sysroot_file *f,
                        int64_t bias)
{
    for (int j = 0; j < k; j++)
        if (u->verified[j] && strcmp(u->maps[j].path, u->maps[k].path) == 0 &&
            prof_modules_bias(sr->modules, u->module[j]) == bias)
            return true;
    struct qp_error err = {0};
    if (unw_space_add_elf(u->space, f->host_path, bias, &err) == 0)
        return true;
    if (sr->cfg.verbose)
        qp_log(QP_LOG_INFO, "--sysroot: %s", err.msg);
    return false;
}

static void user_space_build(prof_sysroot *sr, struct user_space *u)
{
    struct qp_error err = {0};
    u->built = true;
    if (unw_space_new(sr->cfg.arch->unwind, "user", 0, sr->cfg.arch->split.user_end, &u->space,
                      &err)) {
        qp_log(QP_LOG_WARN, "--sysroot: %s", err.msg);
        return;
    }
    for (int k = 0; k < u->n && sr->cfg.dir; k++) {
        const struct prof_exec_mapping *m = &u->maps[k];
        struct sysroot_file *f = sysroot_file(sr, m->path);
        int64_t bias;
        if (!f || !f->usable || !same_build(sr, f, m) || mapping_bias(f, m, &bias) != 0)
            continue;
        if (!add_mapping(sr, u, k, f, bias))
            continue;
        u->module[k] = sysroot_module(sr, f, m->path, bias);
        u->verified[k] = u->named[k] = true;
        u->n_verified++;
        if (sr->cfg.verbose)
            qp_log(QP_LOG_INFO, "--sysroot: %s at 0x%" PRIx64 " (bias 0x%" PRIx64 ")", f->host_path,
                   m->start, (uint64_t)bias);
    }
}

/* ---- The guest's own copies of its files (no sysroot file for them) ---------------------- */

void prof_sysroot_copy_images(prof_sysroot *sr, struct user_space *u, prof_os *os,
                              const struct prof_vcpu *cpu, const struct prof_os_mem *mem)
{
    if (!u || !sr->memimgs)
        return;
    if (sr->cfg.dir && !u->built) { /* the sysroot's files first: copy only what they miss */
        u->mem_pending = true;
        return;
    }
    bool pending = false;
    for (int k = 0; k < u->n; k++) {
        if (u->verified[k] || (u->img[k] && prof_memimg_done(u->img[k])))
            continue;
        u->img[k] = prof_memimg_progress(sr->memimgs, u->key.id, &u->maps[k], os, cpu, mem);
        pending |= u->img[k] && !prof_memimg_done(u->img[k]);
    }
    u->mem_pending = pending;
}

/* One module per copied file and bias: "libc.so.6", its exported functions named, any other pc
 * as libc.so.6+0xOFFSET from where the file's start is mapped. */
static uint32_t memory_module(prof_sysroot *sr, struct prof_memimg *img,
                              const struct prof_exec_mapping *m)
{
    int64_t bias = prof_memimg_bias(img, m);
    char *key = g_strdup_printf("mem:%s@%" PRIx64, prof_memimg_key(img), (uint64_t)bias);
    gpointer found;
    if (g_hash_table_lookup_extended(sr->modules_by_file, key, NULL, &found)) {
        g_free(key);
        return GPOINTER_TO_UINT(found);
    }
    struct out_module om = {.base = m->head_start};
    const char *base = strrchr(m->path, '/');
    g_strlcpy(om.name, base ? base + 1 : m->path, sizeof om.name);
    g_strlcpy(om.path, m->path, sizeof om.path);
    const sym_table *debug = debug_symbols(sr, m->build_id, m->build_id_len, m->path, NULL);
    uint32_t index =
        prof_modules_add(sr->modules, &om, debug ? debug : prof_memimg_symbols(img), bias);
    g_hash_table_insert(sr->modules_by_file, key, GUINT_TO_POINTER(index));
    return index;
}

/* Mapping k's copy is finished: its .eh_frame to the unwinder, its .dynsym to the module. */
static void use_memory_image(prof_sysroot *sr, struct user_space *u, int k)
{
    struct prof_memimg *img = u->img[k];
    const struct prof_exec_mapping *m = &u->maps[k];
    struct qp_error err = {0};
    u->img_used[k] = true;
    u->module[k] = memory_module(sr, img, m);
    u->named[k] = true;
    if (!u->space || prof_memimg_add_unwind(img, u->space, m, &err) != 0) {
        if (sr->cfg.verbose && err.msg[0])
            qp_log(QP_LOG_INFO, "%s: %s", m->path, err.msg);
        return;
    }
    u->verified[k] = true;
    u->n_verified++;
    u->n_from_memory++;
    if (sr->cfg.verbose)
        qp_log(QP_LOG_INFO, "%s at 0x%" PRIx64 ": unwound by the guest's own .eh_frame", m->path,
               m->start);
}

/* Mapping k of u as the model has it: a trusted mapping's CFI is in u's tables. */
static struct prof_map vma_map(const struct user_space *u, int k)
{
    const struct prof_exec_mapping *e = &u->maps[k];
    struct prof_map m = {.start = e->start,
                         .end = e->end,
                         .rank = PROF_RANK_VMA,
                         .known = u->named[k],
                         .trusted = u->verified[k],
                         .named = u->named[k]};
    m.bin = (struct prof_binary){.how = !u->named[k]     ? PROF_IDENT_NONE
                                        : u->img_used[k] ? PROF_IDENT_GUEST_COPY
                                                         : PROF_IDENT_BUILD_ID,
                                 .module = u->named[k] ? u->module[k] : OUT_NO_MODULE};
    m.vma.base = e->start - e->pgoff * 4096;
    m.vma.start = e->start;
    m.vma.end = e->end;
    const char *base = strrchr(e->path, '/');
    g_strlcpy(m.vma.name, base ? base + 1 : e->path, sizeof m.vma.name);
    return m;
}

/* u in the model, as it stands now (its files are verified over several samples). */
static const prof_space *fill_model(prof_sysroot *sr, const struct user_space *u)
{
    prof_space *as = prof_model_space(sr->cfg.model, PROF_SPACE_VMAS, u->key.id, u->key.generation);
    prof_space_clear(as);
    for (int k = 0; k < u->n; k++) {
        struct prof_map m = vma_map(u, k);
        prof_space_add(as, &m);
    }
    prof_space_set_unwind(as, u->space, true);
    return as;
}

const prof_space *prof_sysroot_build(prof_sysroot *sr, struct user_space *u)
{
    if (!u)
        return NULL;
    if (!u->built)
        user_space_build(sr, u);
    for (int k = 0; k < u->n; k++)
        if (!u->verified[k] && !u->img_used[k] && u->img[k] && prof_memimg_done(u->img[k]))
            use_memory_image(sr, u, k);
    return fill_model(sr, u);
}
