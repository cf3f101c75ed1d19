/* The page index: every executable PT_LOAD page of every binary in a store, by the hash of its
 * bytes, so that a page of code read out of a guest that publishes nothing names its binary.
 *
 * A page is indexed as a loader that copies segments leaves it (the segment's file bytes, zero
 * elsewhere in the page: the demo kernel, most small kernels) and, when that differs, as mmap
 * maps it (the whole file page). The hash is the .text hash's (SHA-256): pages of different
 * binaries never collide by accident, only by being the same bytes. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include "sym_internal.h"
#include "qp_file.h"

/* A segment larger than this is not code a small kernel loads; skipping it bounds the work. */
#define MAX_SEGMENT (256u << 20)

static void page_add(GHashTable *pages, const uint8_t *bytes, const sym_table *t, uint64_t vaddr)
{
    uint64_t hash = sym_text_hash(bytes, SYM_PAGE_SIZE);
    GArray *cands = g_hash_table_lookup(pages, &hash);
    if (!cands) {
        uint64_t *key = g_new(uint64_t, 1);
        *key = hash;
        cands = g_array_new(FALSE, FALSE, sizeof(struct sym_page_match));
        g_hash_table_insert(pages, key, cands);
    }
    for (guint i = 0; i < cands->len; i++) {
        const struct sym_page_match *m = &g_array_index(cands, struct sym_page_match, i);
        if (m->table == t && m->vaddr == vaddr)
            return; /* the two forms of one page are the same bytes */
    }
    struct sym_page_match m = {t, vaddr};
    g_array_append_val(cands, m);
}

/* Indexes the pages of one executable segment of file (size bytes). */
static void segment_add(GHashTable *pages, const sym_table *t, const uint8_t *file, size_t size,
                        const GElf_Phdr *ph)
{
    if (ph->p_filesz == 0 || ph->p_filesz > MAX_SEGMENT || ph->p_offset > size ||
        ph->p_filesz > size - ph->p_offset)
        return;
    uint64_t start = ph->p_vaddr, end = ph->p_vaddr + ph->p_filesz;
    uint8_t page[SYM_PAGE_SIZE];
    for (uint64_t p = start & ~(uint64_t)(SYM_PAGE_SIZE - 1); p < end; p += SYM_PAGE_SIZE) {
        uint64_t lo = p > start ? p : start, hi = p + SYM_PAGE_SIZE < end ? p + SYM_PAGE_SIZE : end;
        memset(page, 0, sizeof page);
        memcpy(page + (lo - p), file + ph->p_offset + (lo - start), hi - lo);
        page_add(pages, page, t, p);
        /* The file page mmap would map: from the file offset that lands on p. */
        uint64_t off = ph->p_offset - (start - p); /* p_offset and p_vaddr agree mod the page */
        bool partial = lo != p || hi != p + SYM_PAGE_SIZE;
        if (partial && ph->p_offset >= start - p && off + SYM_PAGE_SIZE <= size)
            page_add(pages, file + off, t, p);
    }
}

int sym_pages_add(GHashTable *pages, const sym_table *t)
{
    int fd = qp_file_open_read(sym_table_path(t), QP_FILE_MAX_ELF, NULL, NULL);
    if (fd < 0)
        return fd;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    size_t size = 0, nph = 0;
    const uint8_t *file = elf ? (const uint8_t *)elf_rawfile(elf, &size) : NULL;
    int rc = file && elf_getphdrnum(elf, &nph) == 0 ? 0 : -EINVAL;
    for (size_t i = 0; rc == 0 && i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            segment_add(pages, t, file, size, &ph);
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return rc;
}

static void cands_free(gpointer p)
{
    g_array_free(p, TRUE);
}

GHashTable *sym_pages_new(void)
{
    return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, cands_free);
}

size_t sym_pages_match(GHashTable *pages, const void *page, struct sym_page_match *out, size_t max)
{
    uint64_t hash = sym_text_hash(page, SYM_PAGE_SIZE);
    GArray *cands = g_hash_table_lookup(pages, &hash);
    if (!cands)
        return 0;
    for (guint i = 0; i < cands->len && i < max; i++)
        out[i] = g_array_index(cands, struct sym_page_match, i);
    return cands->len;
}
