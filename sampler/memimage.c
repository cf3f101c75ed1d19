/* User stacks with no --sysroot: the guest's mapped files, copied out of its memory
 * (memimage.h). */
#include "memimage.h"
#include "qp_log.h"

#include <elf.h>
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MAX_IMAGES 512         /* distinct mapped files copied per boot */
#define COPY_CHUNK (64u << 10) /* one read of a table being copied */
#define MAX_TRIES  64          /* stops a copy may be cut short by the budget */
/* All copies together: each table is capped by symbols.h's SYM_MEM_MAX_*, but a guest can map
 * MAX_IMAGES files that each declare the largest tables, over the same physical pages. */
#define MAX_COPIED_MIB   256
#define MAX_COPIED_BYTES ((size_t)MAX_COPIED_MIB << 20)
#define PAGE_MASK_LOW    UINT64_C(0xfff)

enum stage { ST_HEADERS, ST_EH_FRAME, ST_DYNSYM, ST_DYNSTR, ST_DONE };

/* One table being copied: from the process's memory while its pages are present there, then
 * from the page cache (the pages a process never touched are in none of its page tables). */
struct table_copy {
    uint8_t *bytes;
    size_t cap; /* bytes allocated */
    size_t have;
    bool by_file;     /* the process's memory failed: the rest from the page cache */
    size_t from_file; /* bytes that came that way */
};

struct prof_memimg {
    prof_memimgs *owner; /* counts the bytes the copies hold */
    char *key;
    char name[64]; /* the file's basename */
    enum stage stage;
    int tries;
    uint64_t link_base;         /* link-time address of the page of file offset 0 */
    struct sym_mem_image facts; /* at link-time addresses (bias 0) */
    struct table_copy eh, dynsym, dynstr;
    size_t eh_frame_len; /* whole entries of eh, once done */
    bool dynsym_ok;      /* both tables copied whole */
    sym_table *syms;
    bool syms_made;
};

struct prof_memimgs {
    uint16_t elf_machine;
    bool verbose;
    GHashTable *images; /* key -> struct prof_memimg (owned) */
    GPtrArray *retired; /* copies of earlier boots: the profile's modules still name by them */
    size_t copied;      /* bytes the copies hold, against MAX_COPIED_BYTES */
};

static void memimg_free(gpointer p)
{
    struct prof_memimg *img = p;
    g_free(img->key);
    g_free(img->eh.bytes);
    g_free(img->dynsym.bytes);
    g_free(img->dynstr.bytes);
    sym_table_free(img->syms);
    g_free(img);
}

prof_memimgs *prof_memimgs_new(uint16_t elf_machine, bool verbose)
{
    prof_memimgs *t = g_new0(prof_memimgs, 1);
    t->elf_machine = elf_machine;
    t->verbose = verbose;
    t->images = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, memimg_free);
    t->retired = g_ptr_array_new_with_free_func(memimg_free);
    return t;
}

void prof_memimgs_free(prof_memimgs *t)
{
    if (!t)
        return;
    g_hash_table_destroy(t->images);
    g_ptr_array_free(t->retired, TRUE);
    g_free(t);
}

void prof_memimgs_reset(prof_memimgs *t)
{
    GHashTableIter it;
    gpointer img;
    g_hash_table_iter_init(&it, t->images);
    while (g_hash_table_iter_next(&it, NULL, &img)) {
        g_hash_table_iter_steal(&it);
        g_ptr_array_add(t->retired, img);
    }
}

bool prof_memimg_done(const struct prof_memimg *img)
{
    return img->stage == ST_DONE;
}

const char *prof_memimg_key(const struct prof_memimg *img)
{
    return img->key;
}

int64_t prof_memimg_bias(const struct prof_memimg *img, const struct prof_exec_mapping *m)
{
    return (int64_t)(m->head_start - img->link_base);
}

/* ---- Reading the process's memory (paused) ----------------------------------------------- */

struct reader {
    const struct prof_os_mem *mem;
    const struct prof_vcpu *cpu;
    prof_os *os;
    uint64_t file_id;
    size_t *copied; /* the table's bytes held by all copies (prof_memimgs.copied) */
};

/* A mapped file's bytes: the guest does not write them, so a capturing target may read them
 * after the sample's instant. */
static int unchanging_read(const struct reader *r, uint64_t addr, void *buf, size_t len,
                           size_t *got)
{
    if (r->mem->read_unchanging)
        return r->mem->read_unchanging(r->mem->ctx, r->cpu, addr, buf, len, got);
    return r->mem->read(r->mem->ctx, r->cpu, addr, buf, len, got);
}

/* Reads up to len bytes at addr, *got from the start: 0 when all came, -ENOSPC when the
 * sample's budget cut it (try again later), -EFAULT when the page at addr + *got is not
 * readable (not present in the process's page tables). */
static int read_some(const struct reader *r, uint64_t addr, void *buf, size_t len, size_t *got)
{
    *got = 0;
    int rc = unchanging_read(r, addr, buf, len, got);
    if (*got >= len) {
        *got = len;
        return 0;
    }
    if (rc == -ENOSPC)
        return -ENOSPC;
    uint64_t at = addr + *got;
    if (*got > 0 && (at & PAGE_MASK_LOW))
        return -ENOSPC; /* a page is read whole or not at all: a cut inside one is the budget's */
    /* At a page boundary: one byte there tells a page that is not present from the budget. */
    uint8_t probe;
    size_t probe_got = 0;
    rc = unchanging_read(r, at, &probe, 1, &probe_got);
    if (rc == -ENOSPC || probe_got == 1)
        return -ENOSPC;
    return -EFAULT;
}

static int read_all(void *ctx, uint64_t addr, void *buf, size_t len)
{
    size_t got;
    return read_some(ctx, addr, buf, len, &got);
}

/* The file's bytes at offset from the OS's page cache, a page at a time: 0 when all came,
 * -ENOSPC (later), -EFAULT when a page is not cached (or the OS cannot read files). */
static int file_read_some(const struct reader *r, uint64_t offset, uint8_t *buf, size_t len,
                          size_t *got)
{
    *got = 0;
    while (*got < len) {
        uint64_t off = offset + *got;
        size_t n = len - *got, in = 0;
        n = n < 4096 - (off & PAGE_MASK_LOW) ? n : 4096 - (off & PAGE_MASK_LOW);
        int rc = r->file_id ? prof_os_file_read(r->os, r->file_id, off, buf + *got, n, &in, r->mem)
                            : -ENOTSUP;
        if (rc == -ENOSPC)
            return rc;
        if (rc || in == 0)
            return -EFAULT;
        *got += in < n ? in : n; /* an adapter that says it read more wrote no more than n */
    }
    return 0;
}

static int file_read_all(void *ctx, uint64_t offset, void *buf, size_t len)
{
    size_t got;
    return file_read_some(ctx, offset, buf, len, &got);
}

/* Copies more of the want bytes at run-time addr (file offset offset) into t, growing its
 * buffer by what each read asks (what the guest declares sizes nothing before it is read):
 * 0 when complete (or, with stop_at_terminator, at .eh_frame's end), -ENOSPC, -EFAULT for a
 * page neither way could read, or -E2BIG when the copies together would pass MAX_COPIED_BYTES. */
static int copy_table(const struct reader *r, uint64_t addr, uint64_t offset, size_t want,
                      struct table_copy *t, bool stop_at_terminator)
{
    while (t->have < want) {
        /* The buffer holds end bytes for this round: every read below stays inside it, however
         * far an earlier read of the round got. */
        size_t n = want - t->have < COPY_CHUNK ? want - t->have : COPY_CHUNK, got = 0;
        size_t end = t->have + n;
        if (end > t->cap) {
            if (end - t->cap > MAX_COPIED_BYTES - *r->copied)
                return -E2BIG;
            t->bytes = g_realloc(t->bytes, end);
            *r->copied += end - t->cap;
            t->cap = end;
        }
        int rc = t->by_file ? -EFAULT : read_some(r, addr + t->have, t->bytes + t->have, n, &got);
        t->have += got < n ? got : n;
        if (rc == -EFAULT && offset && t->have < end) {
            t->by_file = true;
            got = 0;
            rc = file_read_some(r, offset + t->have, t->bytes + t->have, end - t->have, &got);
            got = got < end - t->have ? got : end - t->have;
            t->have += got;
            t->from_file += got;
        }
        bool terminated = false;
        if (stop_at_terminator)
            sym_eh_frame_whole_len(t->bytes, t->have, &terminated);
        if (terminated)
            return 0;
        if (rc)
            return rc;
    }
    return 0;
}

/* Gives back what t holds beyond keep bytes (keep 0: all of it). */
static void table_shrink(prof_memimgs *t, struct table_copy *c, size_t keep)
{
    if (keep >= c->cap)
        return;
    t->copied -= c->cap - keep;
    c->cap = keep;
    if (keep) {
        c->bytes = g_realloc(c->bytes, keep);
    } else {
        g_free(c->bytes);
        c->bytes = NULL;
    }
    c->have = c->have < keep ? c->have : keep;
}

/* ---- The stages of a copy ----------------------------------------------------------------- */

static void say(const prof_memimgs *t, const struct prof_memimg *img, const char *what,
                const char *why)
{
    if (t->verbose)
        qp_log(QP_LOG_INFO, "%s from the guest's memory: %s: %s", img->key, what, why);
}

/* Headers: where .eh_frame and .dynsym are, kept at link-time addresses so that another
 * process mapping the same file elsewhere uses the same copy. */
static int stage_headers(prof_memimgs *t, struct prof_memimg *img, const struct reader *r,
                         const struct prof_exec_mapping *m)
{
    struct qp_error err = {0};
    struct sym_mem_image f;
    int rc = sym_mem_image_read(read_all, file_read_all, (void *)r, m->head_start, t->elf_machine,
                                &f, &err);
    if (rc == -ENOSPC)
        return rc;
    if (rc) {
        say(t, img, "headers", err.msg);
        img->stage = ST_DONE;
        return 0;
    }
    uint64_t bias = (uint64_t)f.bias;
    img->link_base = m->head_start - bias;
    img->facts = f;
    img->facts.bias = 0;
    img->facts.eh_frame = f.eh_frame ? f.eh_frame - bias : 0;
    img->facts.dynsym = f.dynsym ? f.dynsym - bias : 0;
    img->facts.dynstr = f.dynstr ? f.dynstr - bias : 0;
    if (!f.eh_frame || f.missing)
        say(t, img, f.eh_frame ? "names" : "unwinding", f.missing ? err.msg : "no PT_GNU_EH_FRAME");
    img->stage = ST_EH_FRAME;
    return 0;
}

/* Why copy_table stopped short (rc not 0 nor -ENOSPC). */
static const char *stopped_why(int rc)
{
    if (rc == 0)
        return "";
    if (rc == -E2BIG)
        return "; then the copies' memory cap (" G_STRINGIFY(MAX_COPIED_MIB) " MiB) was reached";
    return "; then a page neither mapped nor cached";
}

static int stage_eh_frame(prof_memimgs *t, struct prof_memimg *img, const struct reader *r,
                          uint64_t bias)
{
    if (img->facts.eh_frame) {
        int rc = copy_table(r, img->facts.eh_frame + bias, img->facts.eh_frame_offset,
                            (size_t)img->facts.eh_frame_max, &img->eh, true);
        if (rc == -ENOSPC)
            return rc;
        bool terminated;
        img->eh_frame_len = sym_eh_frame_whole_len(img->eh.bytes, img->eh.have, &terminated);
        table_shrink(t, &img->eh, img->eh_frame_len);
        char why[160];
        snprintf(why, sizeof why, "%zu bytes of whole entries, %zu of them from the page cache%s",
                 img->eh_frame_len, img->eh.from_file, stopped_why(rc));
        say(t, img, ".eh_frame", why);
    }
    img->stage = img->facts.dynsym ? ST_DYNSYM : ST_DONE;
    return 0;
}

static int stage_dynsym(prof_memimgs *t, struct prof_memimg *img, const struct reader *r,
                        uint64_t bias)
{
    size_t want = (size_t)img->facts.dynsym_count * sizeof(Elf64_Sym);
    int rc = copy_table(r, img->facts.dynsym + bias, img->facts.dynsym_offset, want, &img->dynsym,
                        false);
    if (rc == -ENOSPC)
        return rc;
    if (rc) {
        say(t, img, ".dynsym", stopped_why(rc));
        img->stage = ST_DONE;
        return 0;
    }
    img->stage = ST_DYNSTR;
    return 0;
}

static int stage_dynstr(prof_memimgs *t, struct prof_memimg *img, const struct reader *r,
                        uint64_t bias)
{
    int rc = copy_table(r, img->facts.dynstr + bias, img->facts.dynstr_offset,
                        (size_t)img->facts.dynstr_size, &img->dynstr, false);
    if (rc == -ENOSPC)
        return rc;
    if (rc)
        say(t, img, ".dynstr", stopped_why(rc));
    img->dynsym_ok = rc == 0;
    img->stage = ST_DONE;
    return 0;
}

static void advance(prof_memimgs *t, struct prof_memimg *img, const struct reader *r,
                    const struct prof_exec_mapping *m)
{
    int rc = 0;
    while (rc == 0 && img->stage != ST_DONE) {
        uint64_t bias = m->head_start - img->link_base;
        switch (img->stage) {
        case ST_HEADERS:
            rc = stage_headers(t, img, r, m);
            break;
        case ST_EH_FRAME:
            rc = stage_eh_frame(t, img, r, bias);
            break;
        case ST_DYNSYM:
            rc = stage_dynsym(t, img, r, bias);
            break;
        case ST_DYNSTR:
            rc = stage_dynstr(t, img, r, bias);
            break;
        case ST_DONE:
            break;
        }
    }
    if (rc == -ENOSPC && ++img->tries >= MAX_TRIES) {
        say(t, img, "copy", "cut short by the sample's budget too often: given up");
        img->stage = ST_DONE;
    }
}

/* The copy's identity: the same file content wherever it is mapped. */
static char *key_of(uint64_t as_id, const struct prof_exec_mapping *m)
{
    if (!m->build_id_len)
        return g_strdup_printf("%s@as%" PRIx64 "@%" PRIx64, m->path, as_id, m->head_start);
    GString *k = g_string_new(m->path);
    g_string_append_c(k, '@');
    for (unsigned i = 0; i < m->build_id_len && i < PROF_BUILD_ID_MAX; i++)
        g_string_append_printf(k, "%02x", m->build_id[i]);
    return g_string_free(k, FALSE);
}

struct prof_memimg *prof_memimg_progress(prof_memimgs *t, uint64_t as_id,
                                         const struct prof_exec_mapping *m, prof_os *os,
                                         const struct prof_vcpu *cpu, const struct prof_os_mem *mem)
{
    if (!m->head_start || m->head_end <= m->head_start)
        return NULL;
    char *key = key_of(as_id, m);
    struct prof_memimg *img = g_hash_table_lookup(t->images, key);
    if (!img && g_hash_table_size(t->images) >= MAX_IMAGES) {
        g_free(key);
        return NULL;
    }
    if (!img) {
        img = g_new0(struct prof_memimg, 1);
        img->owner = t;
        img->key = key;
        const char *base = strrchr(m->path, '/');
        g_strlcpy(img->name, base ? base + 1 : m->path, sizeof img->name);
        g_hash_table_insert(t->images, img->key, img);
    } else {
        g_free(key);
    }
    struct reader r = {mem, cpu, os, m->file_id, &t->copied};
    if (img->stage != ST_DONE)
        advance(t, img, &r, m);
    return img;
}

/* ---- After the guest resumed ------------------------------------------------------------- */

int prof_memimg_add_unwind(struct prof_memimg *img, unw_space *space,
                           const struct prof_exec_mapping *m, struct qp_error *err)
{
    if (img->stage != ST_DONE || !img->eh_frame_len)
        return qp_error_set(err, -ENOENT, "%s: no .eh_frame in the guest's memory", img->key);
    uint64_t bias = (uint64_t)prof_memimg_bias(img, m);
    return unw_space_add_eh_frame(space, img->name, m->start, m->end - m->start,
                                  img->facts.eh_frame + bias, img->eh.bytes, img->eh_frame_len,
                                  err);
}

const void *prof_memimg_eh_frame(const struct prof_memimg *img, size_t *len)
{
    *len = img->stage == ST_DONE ? img->eh_frame_len : 0;
    return *len ? img->eh.bytes : NULL;
}

const sym_table *prof_memimg_symbols(struct prof_memimg *img)
{
    if (img->syms_made || img->stage != ST_DONE)
        return img->syms;
    img->syms_made = true;
    struct qp_error err = {0};
    if (img->dynsym_ok)
        sym_table_from_dynsym(img->name, img->dynsym.bytes, (size_t)img->facts.dynsym_count,
                              (const char *)img->dynstr.bytes, (size_t)img->facts.dynstr_size,
                              &img->syms, &err);
    /* The copies are not needed once the table is made. */
    table_shrink(img->owner, &img->dynsym, 0);
    table_shrink(img->owner, &img->dynstr, 0);
    return img->syms;
}
