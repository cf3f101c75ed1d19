/* --sysroot: user stacks of a stock guest unwound with the guest's own files, found under a
 * host directory by the path the guest mapped them from and used only when their GNU build-id
 * is the one the guest's mapping carries (a file from another build would name the wrong
 * functions with full confidence).
 *
 * While the guest is paused only the OS adapter's list of exec mappings is copied (and the
 * adapter reads what it does not know yet: paths, build-ids, once per process and file). Opening
 * files, checking build-ids and loading libdwfl wait until the guest runs again. */
#include "session_impl.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#define MAX_USER_SPACES   64   /* address spaces kept; all dropped past that */
#define MAX_SYSROOT_FILES 4096 /* guest paths looked up; past that, files are not used */
#define MAX_SYSROOT_LOADS 32
#define PAGE_SIZE         4096u

void prof_sysroot_file_free(gpointer p)
{
    struct sysroot_file *f = p;
    g_free(f->host_path);
    if (f->loads)
        g_array_free(f->loads, TRUE);
    sym_table_free(f->syms);
    g_free(f);
}

void prof_user_space_free(gpointer p)
{
    struct user_space *u = p;
    g_free(u->maps);
    g_free(u->verified);
    g_free(u->module);
    unw_space_free(u->space);
    g_free(u);
}

guint prof_user_space_key_hash(gconstpointer p)
{
    const struct user_space_key *k = p;
    uint64_t h = k->id * UINT64_C(0x9e3779b97f4a7c15) ^ k->generation;
    return (guint)(h ^ h >> 32);
}

gboolean prof_user_space_key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(struct user_space_key)) == 0;
}

void prof_sysroot_begin_stop(prof_session *s)
{
    if (g_hash_table_size(s->user_spaces) >= MAX_USER_SPACES)
        g_hash_table_remove_all(s->user_spaces);
}

void prof_sysroot_reset(prof_session *s)
{
    for (int i = 0; i < PROF_MAX_VCPUS; i++)
        s->cap[i].uspace = NULL;
    g_hash_table_remove_all(s->user_spaces);
}

int prof_user_space_find(const struct user_space *u, uint64_t pc)
{
    for (int k = 0; k < u->n; k++)
        if (u->maps[k].start <= pc && pc < u->maps[k].end)
            return k;
    return -1;
}

/* ---- While stopped ----------------------------------------------------------------------- */

static struct user_space *user_space_for(prof_session *s, const struct prof_address_space *as)
{
    struct user_space_key key = {as->id, as->generation};
    struct user_space *u = g_hash_table_lookup(s->user_spaces, &key);
    if (u)
        return u;
    u = g_new0(struct user_space, 1);
    u->key = key;
    u->n = as->n > 0 ? as->n : 0;
    u->maps = g_memdup2(as->maps, sizeof *as->maps * (size_t)u->n);
    u->verified = g_new0(bool, u->n ? u->n : 1);
    u->module = g_new0(uint32_t, u->n ? u->n : 1);
    g_hash_table_insert(s->user_spaces, &u->key, u);
    return u;
}

void prof_sysroot_capture(prof_session *s, struct cpu_capture *c, const struct prof_os_mem *mem)
{
    struct prof_address_space as;
    c->uspace = NULL;
    if (!s->opts.sysroot || !c->task.known || c->task.state != PROF_TASK_USER ||
        prof_os_address_space(s->os, (int)(c - s->cap), mem, &as) != 0)
        return;
    c->uspace = user_space_for(s, &as);
    /* A space known to hold no verified file unwinds nothing: its leaf is all there is. */
    if (!c->uspace->built || c->uspace->n_verified > 0)
        c->task.user_leaf_only = false;
}

/* ---- After the guest resumed: the sysroot's files ---------------------------------------- */

static const char *read_elf_facts(struct sysroot_file *f, Elf *elf)
{
    GElf_Ehdr eh;
    size_t phnum;
    const void *id;
    if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh))
        return "not an ELF file";
    if (eh.e_machine != EM_X86_64 || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
        return "not an x86_64 executable or shared object";
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

static struct sysroot_file *sysroot_file_open(prof_session *s, const char *guest_path)
{
    struct sysroot_file *f = g_new0(struct sysroot_file, 1);
    f->host_path = g_build_filename(s->opts.sysroot, guest_path, NULL);
    int fd = open(f->host_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        f->why_not = "not under --sysroot";
        return f;
    }
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    f->why_not = elf ? read_elf_facts(f, elf) : "not an ELF file";
    f->usable = f->why_not == NULL;
    elf_end(elf);
    close(fd);
    return f;
}

static struct sysroot_file *sysroot_file(prof_session *s, const char *guest_path)
{
    struct sysroot_file *f = g_hash_table_lookup(s->sysroot_files, guest_path);
    if (f || g_hash_table_size(s->sysroot_files) >= MAX_SYSROOT_FILES)
        return f;
    f = sysroot_file_open(s, guest_path);
    s->counters.sysroot_files_unused += !f->usable;
    if (!f->usable && s->opts.verbose)
        fprintf(stderr, "qprof: --sysroot: %s: %s (its frames end the user stack)\n", f->host_path,
                f->why_not);
    g_hash_table_insert(s->sysroot_files, g_strdup(guest_path), f);
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
static bool same_build(prof_session *s, struct sysroot_file *f, const struct prof_exec_mapping *m)
{
    if (m->build_id_len && m->build_id_len == f->build_id_len &&
        memcmp(m->build_id, f->build_id, f->build_id_len) == 0)
        return true;
    if (!f->said_differs) {
        char want[2 * PROF_BUILD_ID_MAX + 1], have[2 * PROF_BUILD_ID_MAX + 1];
        hex(m->build_id, m->build_id_len, want);
        hex(f->build_id, f->build_id_len, have);
        if (m->build_id_len)
            fprintf(stderr,
                    "qprof: --sysroot: %s has build-id %s, the guest's %s has %s: not used\n",
                    f->host_path, have, m->path, want);
        else
            fprintf(stderr,
                    "qprof: --sysroot: the guest's build-id of %s could not be read: %s not "
                    "used\n",
                    m->path, f->host_path);
        f->said_differs = true;
        s->counters.sysroot_files_unused++;
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

/* One module per sysroot file and bias, sharing the file's symbol table. */
static uint32_t sysroot_module(prof_session *s, struct sysroot_file *f, int64_t bias)
{
    char *key = g_strdup_printf("%s@%" PRIx64, f->host_path, (uint64_t)bias);
    gpointer found;
    if (g_hash_table_lookup_extended(s->sysroot_modules, key, NULL, &found)) {
        g_free(key);
        return GPOINTER_TO_UINT(found);
    }
    if (!f->syms_tried) {
        struct qp_error err = {0};
        f->syms_tried = true;
        if (sym_table_open_elf(f->host_path, &f->syms, &err) && s->opts.verbose)
            fprintf(stderr, "qprof: --sysroot: symbols of %s: %s\n", f->host_path, err.msg);
    }
    struct out_module m = {.base = (uint64_t)bias};
    const char *base = strrchr(f->host_path, '/');
    g_strlcpy(m.name, base ? base + 1 : f->host_path, sizeof m.name);
    g_strlcpy(m.path, f->host_path, sizeof m.path);
    uint32_t index = prof_session_add_module_biased(s, &m, f->syms, bias);
    g_hash_table_insert(s->sysroot_modules, key, GUINT_TO_POINTER(index));
    return index;
}

/* Adds mapping k's file to u's unwinder (once per file and bias). */
static bool add_mapping(prof_session *s, struct user_space *u, int k, struct sysroot_file *f,
                        int64_t bias)
{
    for (int j = 0; j < k; j++)
        if (u->verified[j] && strcmp(u->maps[j].path, u->maps[k].path) == 0 &&
            g_array_index(s->module_bias, int64_t, u->module[j]) == bias)
            return true;
    struct qp_error err = {0};
    if (unw_space_add_elf(u->space, f->host_path, bias, &err) == 0)
        return true;
    if (s->opts.verbose)
        fprintf(stderr, "qprof: --sysroot: %s\n", err.msg);
    return false;
}

static void user_space_build(prof_session *s, struct user_space *u)
{
    struct qp_error err = {0};
    u->built = true;
    if (unw_space_new("user", 0, s->split.user_end, &u->space, &err)) {
        fprintf(stderr, "qprof: --sysroot: %s\n", err.msg);
        return;
    }
    for (int k = 0; k < u->n; k++) {
        const struct prof_exec_mapping *m = &u->maps[k];
        struct sysroot_file *f = sysroot_file(s, m->path);
        int64_t bias;
        if (!f || !f->usable || !same_build(s, f, m) || mapping_bias(f, m, &bias) != 0)
            continue;
        if (!add_mapping(s, u, k, f, bias))
            continue;
        u->module[k] = sysroot_module(s, f, bias);
        u->verified[k] = true;
        u->n_verified++;
        if (s->opts.verbose)
            fprintf(stderr, "qprof: --sysroot: %s at 0x%" PRIx64 " (bias 0x%" PRIx64 ")\n",
                    f->host_path, m->start, (uint64_t)bias);
    }
}

void prof_sysroot_build(prof_session *s, struct cpu_capture *c)
{
    if (c->uspace && !c->uspace->built)
        user_space_build(s, c->uspace);
}
