/* The code bytes of a binary at their link addresses, for telling which binary's code a guest
 * ran from the code itself (qprof --exact: a block's address and the hash of its bytes). */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include "sym_internal.h"
#include "qp_file.h"

/* A segment larger than this is not code a small guest loads; skipping it bounds the work. */
#define MAX_SEGMENT (256u << 20)

struct code_segment {
    uint64_t vaddr, size;
    uint8_t *bytes;
};

struct sym_code {
    GArray *segments; /* struct code_segment, owned bytes */
};

static void segment_clear(gpointer p)
{
    g_free(((struct code_segment *)p)->bytes);
}

static void add_segment(sym_code *c, const uint8_t *file, size_t size, const GElf_Phdr *ph)
{
    if (ph->p_filesz == 0 || ph->p_filesz > MAX_SEGMENT || ph->p_offset > size ||
        ph->p_filesz > size - ph->p_offset)
        return;
    struct code_segment s = {.vaddr = ph->p_vaddr,
                             .size = ph->p_filesz,
                             .bytes = g_memdup2(file + ph->p_offset, ph->p_filesz)};
    g_array_append_val(c->segments, s);
}

sym_code *sym_code_open(const sym_table *t)
{
    int fd = qp_file_open_read(sym_table_path(t), QP_FILE_MAX_ELF, NULL, NULL);
    if (fd < 0)
        return NULL;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    size_t size = 0, nph = 0;
    const uint8_t *file = elf ? (const uint8_t *)elf_rawfile(elf, &size) : NULL;
    sym_code *c = NULL;
    if (file && elf_getphdrnum(elf, &nph) == 0) {
        c = g_new0(sym_code, 1);
        c->segments = g_array_new(FALSE, FALSE, sizeof(struct code_segment));
        g_array_set_clear_func(c->segments, segment_clear);
        for (size_t i = 0; i < nph; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
                add_segment(c, file, size, &ph);
        }
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return c;
}

void sym_code_free(sym_code *c)
{
    if (!c)
        return;
    g_array_free(c->segments, TRUE);
    g_free(c);
}

const uint8_t *sym_code_at(const sym_code *c, uint64_t vaddr, size_t len)
{
    for (guint i = 0; i < c->segments->len; i++) {
        const struct code_segment *s = &g_array_index(c->segments, struct code_segment, i);
        if (vaddr >= s->vaddr && vaddr - s->vaddr <= s->size && len <= s->size - (vaddr - s->vaddr))
            return s->bytes + (vaddr - s->vaddr);
    }
    return NULL;
}

static void widen_span(const GElf_Phdr *ph, uint64_t *lo, uint64_t *hi)
{
    if (ph->p_vaddr < *lo)
        *lo = ph->p_vaddr;
    if (ph->p_vaddr + ph->p_memsz > *hi)
        *hi = ph->p_vaddr + ph->p_memsz;
}

static int elf_span(const char *path, bool exec_only, uint64_t *lo, uint64_t *hi,
                    struct qp_error *err)
{
    int fd = qp_file_open_read(path, QP_FILE_MAX_ELF, NULL, err);
    if (fd < 0)
        return fd;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    size_t nph = 0;
    int rc = -EINVAL;
    *lo = UINT64_MAX, *hi = 0;
    if (elf && elf_kind(elf) == ELF_K_ELF && elf_getphdrnum(elf, &nph) == 0) {
        for (size_t i = 0; i < nph; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
                (!exec_only || (ph.p_flags & PF_X)) && ph.p_memsz)
                widen_span(&ph, lo, hi);
        }
        rc = *lo < *hi ? 0 : -ENOENT;
    }
    if (elf)
        elf_end(elf);
    close(fd);
    if (rc == -EINVAL)
        return qp_error_set(err, rc, "%s is no readable ELF file", path);
    if (rc)
        return qp_error_set(err, rc, "%s has no %ssegment", path, exec_only ? "executable " : "");
    return 0;
}

int sym_elf_exec_span(const char *path, uint64_t *lo, uint64_t *hi, struct qp_error *err)
{
    return elf_span(path, true, lo, hi, err);
}

int sym_elf_load_span(const char *path, uint64_t *lo, uint64_t *hi, struct qp_error *err)
{
    return elf_span(path, false, lo, hi, err);
}
