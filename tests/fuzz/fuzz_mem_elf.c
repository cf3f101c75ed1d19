/* Fuzz target: an ELF as a process maps it, read from its memory with no file
 * (sym_mem_image_read: program headers, .eh_frame_hdr, the dynamic section and its hash tables),
 * then what the sampler does with the result: .eh_frame's whole entries
 * (sym_eh_frame_whole_len) and the exported functions of .dynsym/.dynstr
 * (sym_table_from_dynsym, sym_lookup).
 *
 * Input: byte 0 sets how many reads succeed before the reader answers "out of budget" (0: no
 * limit; odd: a reader of the file by offset is given too); the rest is the process's memory
 * from MEM_BASE, where the ELF header lies. Reads outside it fail as a page that is not present
 * does. */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "symbols.h"

#define MEM_BASE UINT64_C(0x7f0000000000)

struct memory {
    const uint8_t *bytes;
    size_t len;
    unsigned reads, budget; /* budget 0: no limit */
};

static int mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    struct memory *m = ctx;
    if (m->budget && ++m->reads > m->budget)
        return -ENOSPC;
    if (addr < MEM_BASE || addr - MEM_BASE > m->len || len > m->len - (addr - MEM_BASE))
        return -EFAULT;
    memcpy(buf, m->bytes + (addr - MEM_BASE), len);
    return 0;
}

/* The file by offset: the same input from its start (a file whose first page is mapped at
 * MEM_BASE reads the same there). */
static int file_read(void *ctx, uint64_t off, void *buf, size_t len)
{
    return mem_read(ctx, MEM_BASE + off, buf, len);
}

/* The bytes of [addr, addr + len) when the input holds them all, else NULL. */
static const uint8_t *span(const struct memory *m, uint64_t addr, uint64_t len)
{
    if (addr < MEM_BASE || addr - MEM_BASE > m->len || len > m->len - (addr - MEM_BASE))
        return NULL;
    return m->bytes + (addr - MEM_BASE);
}

static void check_eh_frame(const struct memory *m, const struct sym_mem_image *img)
{
    FUZZ_ASSERT(img->eh_frame_max > 0 && img->eh_frame_max <= SYM_MEM_MAX_EH_FRAME);
    uint64_t have = img->eh_frame_max;
    while (have && !span(m, img->eh_frame, have))
        have = have > 4096 ? have - 4096 : 0; /* what a copy cut at a missing page keeps */
    const uint8_t *b = span(m, img->eh_frame, have);
    if (!b)
        return;
    bool terminated;
    size_t whole = sym_eh_frame_whole_len(b, (size_t)have, &terminated);
    FUZZ_ASSERT(whole <= have);
}

static void check_dynsym(const struct memory *m, const struct sym_mem_image *img)
{
    FUZZ_ASSERT(img->dynsym_count <= SYM_MEM_MAX_DYNSYMS);
    FUZZ_ASSERT(img->dynstr_size > 0 && img->dynstr_size <= SYM_MEM_MAX_DYNSTR);
    const uint8_t *syms = span(m, img->dynsym, img->dynsym_count * sizeof(Elf64_Sym));
    const uint8_t *strs = span(m, img->dynstr, img->dynstr_size);
    if (!syms || !strs)
        return;
    sym_table *t = NULL;
    struct qp_error err = {0};
    if (sym_table_from_dynsym("fuzz", syms, (size_t)img->dynsym_count, (const char *)strs,
                              (size_t)img->dynstr_size, &t, &err) != 0) {
        FUZZ_ASSERT(t == NULL && err.msg[0] != '\0');
        return;
    }
    for (size_t i = 1; i < img->dynsym_count && i < 64; i++) {
        Elf64_Sym s;
        memcpy(&s, syms + i * sizeof s, sizeof s);
        struct sym_info info;
        if (sym_lookup(t, s.st_value, &info) == 0)
            FUZZ_ASSERT(info.name && info.start <= s.st_value && info.size &&
                        info.offset < info.size);
    }
    sym_table_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct memory m = {.bytes = data + 1, .len = size - 1, .budget = data[0]};
    struct sym_mem_image img;
    struct qp_error err = {0};
    int rc = sym_mem_image_read(mem_read, m.budget & 1 ? file_read : NULL, &m, MEM_BASE, EM_X86_64,
                                &img, &err);
    if (rc != 0) {
        FUZZ_ASSERT(err.msg[0] != '\0');
        FUZZ_ASSERT(rc == -ENOSPC || rc == -EFAULT || rc == -EINVAL);
        FUZZ_ASSERT(rc != -ENOSPC || m.budget);
        return 0;
    }
    FUZZ_ASSERT(img.type == ET_EXEC || img.type == ET_DYN);
    if (img.eh_frame)
        check_eh_frame(&m, &img);
    if (img.dynsym)
        check_dynsym(&m, &img);
    return 0;
}
