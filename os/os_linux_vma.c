/* The VMAs of each address space, cached by mm and walked again when the mm changes: the
 * mapping a user pc lies in. */
#include "os_linux_internal.h"
#include "qp_log.h"

#include <errno.h>
#include <inttypes.h>

void os_linux_mm_vmas_free(gpointer p)
{
    struct mm_vmas *m = p;
    g_array_free(m->vmas, TRUE);
    if (m->exec)
        g_array_free(m->exec, TRUE);
    if (m->files)
        g_hash_table_destroy(m->files);
    g_free(m);
}

int os_linux_charged_read(void *ctx, uint64_t kva, void *buf, size_t len)
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
        os_linux_mm_vmas_free(m);
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
int os_linux_read_map_count(const struct os_linux *l, const struct lx_task_info *t,
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
struct mm_vmas *os_linux_cached_vmas(struct os_linux *l, const struct lx_task_info *t,
                                     int32_t map_count)
{
    struct mm_vmas *m = g_hash_table_lookup(l->mm_cache, &t->mm);
    return m && m->map_count == map_count && m->tgid == t->tgid ? m : NULL;
}

/* Walks t's mm again into the cache; what was learnt of its files carries over when the mm
 * still belongs to the same process. NULL when the walk failed (the entry is dropped). */
struct mm_vmas *os_linux_rewalk_vmas(struct os_linux *l, const struct lx_task_info *t,
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
    struct lx_reader r = {.read = os_linux_charged_read, .ctx = &c};
    int32_t map_count;
    if (os_linux_read_map_count(l, t, &r, &map_count))
        return NULL;
    struct mm_vmas *m = os_linux_cached_vmas(l, t, map_count);
    if (m) {
        const struct lx_vma *v = vma_lookup(m, pc);
        if (v || m->walked_at == l->stops)
            return v;
    }
    m = os_linux_rewalk_vmas(l, t, &r, map_count);
    return m ? vma_lookup(m, pc) : NULL;
}

int os_linux_user_mapping(void *impl, int i, uint64_t pc, const struct prof_os_mem *mem,
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
