/* --sysroot's view of a process: its exec file mappings, each with the file's path and build-id
 * read from guest memory (the ELF header through the vCPU's page tables), within the budget. */
#include "os_linux_internal.h"
#include "qp_log.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

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
        struct lx_reader r = {.read = os_linux_charged_read, .ctx = &c};
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

int os_linux_address_space(void *impl, int i, const struct prof_os_mem *mem,
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
    struct lx_reader r = {.read = os_linux_charged_read, .ctx = &c};
    int32_t map_count;
    if (os_linux_read_map_count(l, t, &r, &map_count))
        return -EIO;
    struct mm_vmas *m = os_linux_cached_vmas(l, t, map_count);
    bool fresh = !m;
    if (!m && !(m = os_linux_rewalk_vmas(l, t, &r, map_count)))
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
