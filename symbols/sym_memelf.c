/* An ELF file as a process maps it (no file at hand): its program headers, .eh_frame_hdr and
 * dynamic section read through a reader of the process's memory, and its exported functions
 * from the mapped .dynsym/.dynstr. Everything comes from guest memory, so every count, size and
 * address is checked against the image's own PT_LOAD segments and small fixed bounds before it
 * sizes a read. */
#include <elf.h>
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>

#include "sym_internal.h"
#include "symbols.h"

#define PAGE_MASK       UINT64_C(0xfff)
#define MAX_PHNUM       64
#define MAX_PHOFF       0x10000 /* where program headers may start in a mapped image */
#define MAX_LOADS       16
#define MAX_DYN_ENTRIES 512
#define MAX_GNU_BUCKETS (1u << 18)
#define MAX_GNU_BLOOM   (1u << 18)
#define MAX_CHAIN_STEPS SYM_MEM_MAX_DYNSYMS
#define CHAIN_BLOCK     256u
#define DT_GNU_HASH_TAG 0x6ffffef5

struct image_loads {
    unsigned n;
    struct {
        uint64_t vaddr, filesz, memsz, offset; /* link-time */
    } l[MAX_LOADS];
};

static uint64_t le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return GUINT64_FROM_LE(v);
}

static uint32_t le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return GUINT32_FROM_LE(v);
}

static uint16_t le16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return GUINT16_FROM_LE(v);
}

/* Where the image's bytes come from: the process's memory, and, for a page not present there,
 * the file by offset (read_file, NULL: none) once the PT_LOADs tell offsets (L). */
struct mem_src {
    sym_mem_read_fn read, read_file;
    void *ctx;
    const struct image_loads *L;
    int64_t bias;
};

static bool file_offset_of(const struct mem_src *S, uint64_t addr, size_t len, uint64_t *off);

static int mem_read(const struct mem_src *S, uint64_t addr, void *buf, size_t len, const char *what,
                    struct qp_error *err)
{
    int rc = S->read(S->ctx, addr, buf, len);
    uint64_t off;
    if (rc && rc != -ENOSPC && S->read_file && file_offset_of(S, addr, len, &off))
        rc = S->read_file(S->ctx, off, buf, len);
    if (rc == -ENOSPC)
        return qp_error_set(err, -ENOSPC, "no read budget left for the %s", what);
    if (rc)
        return qp_error_set(err, -EFAULT, "%s at 0x%" PRIx64 " (%zu bytes) not readable", what,
                            addr, len);
    return 0;
}

/* The link-time range [addr, addr + len) lies in one PT_LOAD's file bytes (file) or memory. */
static bool in_load(const struct image_loads *L, uint64_t addr, uint64_t len, bool file)
{
    for (unsigned i = 0; i < L->n; i++) {
        uint64_t size = file ? L->l[i].filesz : L->l[i].memsz;
        if (addr >= L->l[i].vaddr && addr - L->l[i].vaddr <= size &&
            len <= size - (addr - L->l[i].vaddr))
            return true;
    }
    return false;
}

/* The file offset of run-time [addr, addr + len) when it lies in one PT_LOAD's file bytes. */
static bool file_offset_of(const struct mem_src *S, uint64_t addr, size_t len, uint64_t *off)
{
    const struct image_loads *L = S->L;
    uint64_t link = addr - (uint64_t)S->bias;
    for (unsigned i = 0; L && i < L->n; i++)
        if (link >= L->l[i].vaddr && link - L->l[i].vaddr <= L->l[i].filesz &&
            len <= L->l[i].filesz - (link - L->l[i].vaddr)) {
            *off = L->l[i].offset + (link - L->l[i].vaddr);
            return true;
        }
    return false;
}

/* Bytes of file-backed PT_LOAD from link-time addr to its segment's end (0: in none), and the
 * file offset of addr. */
static uint64_t load_room(const struct image_loads *L, uint64_t addr, uint64_t *offset)
{
    for (unsigned i = 0; i < L->n; i++)
        if (addr >= L->l[i].vaddr && addr - L->l[i].vaddr < L->l[i].filesz) {
            *offset = L->l[i].offset + (addr - L->l[i].vaddr);
            return L->l[i].filesz - (addr - L->l[i].vaddr);
        }
    return 0;
}

/* Reads the ELF header at base and checks what every reader of a mapped ELF needs: a 64-bit
 * little-endian ELF whose program headers have the size parsed here, at most MAX_PHNUM of them.
 * -ENOEXEC: no such ELF header. */
static int read_ehdr(const struct mem_src *S, uint64_t base, uint8_t eh[sizeof(Elf64_Ehdr)],
                     struct qp_error *err)
{
    int rc = mem_read(S, base, eh, sizeof(Elf64_Ehdr), "ELF header", err);
    if (rc)
        return rc;
    if (memcmp(eh, ELFMAG, SELFMAG) != 0 || eh[EI_CLASS] != ELFCLASS64 ||
        eh[EI_DATA] != ELFDATA2LSB)
        return qp_error_set(err, -ENOEXEC, "no 64-bit little-endian ELF header at 0x%" PRIx64,
                            base);
    uint16_t phentsize = le16(eh + 54), phnum = le16(eh + 56);
    if (phentsize != sizeof(Elf64_Phdr) || phnum == 0 || phnum > MAX_PHNUM)
        return qp_error_set(err, -EINVAL, "%u program headers of %u bytes", phnum, phentsize);
    return 0;
}

/* Reads the program headers eh names into ph (MAX_PHNUM entries), when they lie in the first
 * map_len bytes of the mapping at base. */
static int read_phdrs(const struct mem_src *S, uint64_t base, uint64_t map_len, const uint8_t *eh,
                      uint8_t *ph, unsigned *phnum, struct qp_error *err)
{
    uint64_t phoff = le64(eh + 32);
    unsigned n = le16(eh + 56);
    if (phoff > map_len || phoff + (uint64_t)n * sizeof(Elf64_Phdr) > map_len)
        return qp_error_set(err, -EINVAL,
                            "ELF at 0x%" PRIx64 ": %u program headers at 0x%" PRIx64
                            " do not fit its %" PRIu64 "-byte mapping",
                            base, n, phoff, map_len);
    *phnum = n;
    return mem_read(S, base + phoff, ph, n * sizeof(Elf64_Phdr), "program headers", err);
}

static int check_type(const uint8_t *eh, uint16_t machine, struct qp_error *err)
{
    uint16_t type = le16(eh + 16), mach = le16(eh + 18);
    if ((type != ET_EXEC && type != ET_DYN) || mach != machine)
        return qp_error_set(err, -EINVAL, "ELF type %u machine %u: not an executable of machine %u",
                            type, mach, machine);
    return 0;
}

/* The bias: the PT_LOAD that maps file offset 0 is mapped at base. */
static int collect_loads(const uint8_t *ph, unsigned phnum, uint64_t base, struct image_loads *L,
                         int64_t *bias, struct qp_error *err)
{
    bool have_bias = false;
    L->n = 0;
    for (unsigned i = 0; i < phnum; i++) {
        const uint8_t *p = ph + i * sizeof(Elf64_Phdr);
        if (le32(p) != PT_LOAD)
            continue;
        uint64_t off = le64(p + 8), vaddr = le64(p + 16), filesz = le64(p + 32),
                 memsz = le64(p + 40);
        if (L->n == MAX_LOADS || filesz > memsz || vaddr + memsz < vaddr ||
            (vaddr & PAGE_MASK) != (off & PAGE_MASK))
            return qp_error_set(err, -EINVAL, "PT_LOAD %u does not hold together", i);
        L->l[L->n].vaddr = vaddr;
        L->l[L->n].filesz = filesz;
        L->l[L->n].memsz = memsz;
        L->l[L->n].offset = off;
        L->n++;
        if (!have_bias && off <= PAGE_MASK) {
            *bias = (int64_t)(base - (vaddr & ~PAGE_MASK));
            have_bias = true;
        }
    }
    if (!have_bias)
        return qp_error_set(err, -EINVAL, "no PT_LOAD maps the ELF header");
    return 0;
}

/* A DW_EH_PE-encoded pointer at field (run-time address), relative to pc or to the header. */
static int decode_pointer(const uint8_t *p, size_t room, uint8_t enc, uint64_t field, uint64_t hdr,
                          uint64_t *out)
{
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00: /* absptr */
    case 0x04: /* udata8 */
    case 0x0c: /* sdata8 */
        if (room < 8)
            return -EINVAL;
        v = le64(p);
        break;
    case 0x03: /* udata4 */
        if (room < 4)
            return -EINVAL;
        v = le32(p);
        break;
    case 0x0b: /* sdata4 */
        if (room < 4)
            return -EINVAL;
        v = (uint64_t)(int64_t)(int32_t)le32(p);
        break;
    default:
        return -EINVAL;
    }
    switch (enc & 0x70) {
    case 0x00:
        break;
    case 0x10: /* pcrel */
        v += field;
        break;
    case 0x30: /* datarel: relative to .eh_frame_hdr */
        v += hdr;
        break;
    default:
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* .eh_frame_hdr (version 1) names where .eh_frame starts; it must lie in a PT_LOAD's file
 * bytes, and ends at most where that segment does. */
static int read_eh_frame_hdr(const struct mem_src *S, const struct image_loads *L,
                             uint64_t hdr_link, struct sym_mem_image *out, struct qp_error *err)
{
    uint8_t h[12];
    uint64_t hdr = hdr_link + (uint64_t)out->bias;
    if (!in_load(L, hdr_link, sizeof h, true))
        return qp_error_set(err, -EINVAL, "PT_GNU_EH_FRAME outside the PT_LOAD segments");
    int rc = mem_read(S, hdr, h, sizeof h, ".eh_frame_hdr", err);
    if (rc)
        return rc;
    uint64_t eh;
    if (h[0] != 1 || h[1] == 0xff ||
        decode_pointer(h + 4, sizeof h - 4, h[1], hdr + 4, hdr, &eh) != 0)
        return qp_error_set(err, -EINVAL, ".eh_frame_hdr version %u, encoding 0x%x: not known",
                            h[0], h[1]);
    uint64_t eh_link = eh - (uint64_t)out->bias;
    uint64_t offset = 0, room = load_room(L, eh_link, &offset);
    if (room < 4)
        return qp_error_set(err, -EINVAL, ".eh_frame at 0x%" PRIx64 " outside the PT_LOADs", eh);
    out->eh_frame = eh;
    out->eh_frame_offset = offset;
    out->eh_frame_max = room < SYM_MEM_MAX_EH_FRAME ? room : SYM_MEM_MAX_EH_FRAME;
    return 0;
}

/* A dynamic-section pointer as a run-time address. glibc's loader rewrites the d_ptr entries of
 * every object it relocates to run-time addresses (elf_get_dynamic_info, where the architecture
 * does not keep .dynamic read-only); the kernel's vDSO and loaders that do not keep link-time
 * ones. A value inside the image's run-time span is taken as run-time, any other as link-time:
 * the two cannot be confused when the bias is not 0, and are the same when it is. */
static uint64_t dyn_runtime(const struct image_loads *L, int64_t bias, uint64_t v)
{
    for (unsigned i = 0; i < L->n; i++) {
        uint64_t lo = L->l[i].vaddr + (uint64_t)bias;
        if (v >= lo && v - lo < L->l[i].memsz)
            return v;
    }
    return v + (uint64_t)bias;
}

struct dyn_facts {
    uint64_t symtab, strtab, strsz, syment, hash, gnu_hash; /* run-time addresses, sizes */
};

static int read_dynamic(const struct mem_src *S, const struct image_loads *L, int64_t bias,
                        uint64_t dyn_link, uint64_t dyn_size, struct dyn_facts *d,
                        struct qp_error *err)
{
    size_t n = dyn_size / 16 < MAX_DYN_ENTRIES ? dyn_size / 16 : MAX_DYN_ENTRIES;
    if (n == 0 || !in_load(L, dyn_link, n * 16, false))
        return qp_error_set(err, -EINVAL, "PT_DYNAMIC outside the PT_LOAD segments");
    uint8_t *buf = g_malloc(n * 16);
    int rc = mem_read(S, dyn_link + (uint64_t)bias, buf, n * 16, "dynamic section", err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint64_t tag = le64(buf + i * 16), val = le64(buf + i * 16 + 8);
        if (tag == DT_NULL)
            break;
        switch (tag) {
        case DT_SYMTAB:
            d->symtab = dyn_runtime(L, bias, val);
            break;
        case DT_STRTAB:
            d->strtab = dyn_runtime(L, bias, val);
            break;
        case DT_HASH:
            d->hash = dyn_runtime(L, bias, val);
            break;
        case DT_GNU_HASH_TAG:
            d->gnu_hash = dyn_runtime(L, bias, val);
            break;
        case DT_STRSZ:
            d->strsz = val;
            break;
        case DT_SYMENT:
            d->syment = val;
            break;
        default:
            break;
        }
    }
    g_free(buf);
    return rc;
}

/* The run-time range [addr, addr + len) lies in the image's file-backed bytes. */
static bool rt_in_image(const struct image_loads *L, int64_t bias, uint64_t addr, uint64_t len)
{
    return in_load(L, addr - (uint64_t)bias, len, true);
}

/* The symbol count of a GNU hash table: one past the highest index any chain reaches (the last
 * chain is the one of the highest bucket; its end is the entry with bit 0 set). */
static int gnu_hash_count(const struct mem_src *S, const struct image_loads *L, int64_t bias,
                          uint64_t gh, uint64_t *count, struct qp_error *err)
{
    uint8_t h[16];
    if (!rt_in_image(L, bias, gh, sizeof h))
        return qp_error_set(err, -EINVAL, "DT_GNU_HASH outside the image");
    int rc = mem_read(S, gh, h, sizeof h, "GNU hash table", err);
    if (rc)
        return rc;
    uint32_t nbuckets = le32(h), symoffset = le32(h + 4), bloom = le32(h + 8);
    if (nbuckets == 0 || nbuckets > MAX_GNU_BUCKETS || bloom > MAX_GNU_BLOOM ||
        symoffset > SYM_MEM_MAX_DYNSYMS)
        return qp_error_set(err, -EINVAL, "GNU hash table of %u buckets, %u bloom words", nbuckets,
                            bloom);
    uint64_t buckets = gh + 16 + (uint64_t)bloom * 8, chains = buckets + (uint64_t)nbuckets * 4;
    if (!rt_in_image(L, bias, buckets, (uint64_t)nbuckets * 4))
        return qp_error_set(err, -EINVAL, "GNU hash buckets outside the image");
    uint8_t *b = g_malloc((size_t)nbuckets * 4);
    rc = mem_read(S, buckets, b, (size_t)nbuckets * 4, "GNU hash buckets", err);
    uint32_t top = 0;
    for (uint32_t i = 0; rc == 0 && i < nbuckets; i++)
        top = le32(b + (size_t)i * 4) > top ? le32(b + (size_t)i * 4) : top;
    g_free(b);
    if (rc)
        return rc;
    if (top < symoffset) { /* no chains: only the symbols below symoffset */
        *count = symoffset;
        return 0;
    }
    uint8_t block[CHAIN_BLOCK * 4];
    for (uint64_t i = top; i < SYM_MEM_MAX_DYNSYMS;) {
        uint64_t at = chains + (i - symoffset) * 4, n = CHAIN_BLOCK;
        while (n > 1 && !rt_in_image(L, bias, at, n * 4))
            n /= 2;
        if (!rt_in_image(L, bias, at, n * 4))
            return qp_error_set(err, -EINVAL, "GNU hash chain leaves the image");
        if ((rc = mem_read(S, at, block, n * 4, "GNU hash chains", err)))
            return rc;
        for (uint64_t k = 0; k < n; k++, i++)
            if (le32(block + k * 4) & 1) {
                *count = i + 1;
                return 0;
            }
    }
    return qp_error_set(err, -EINVAL, "GNU hash chain longer than %u symbols", SYM_MEM_MAX_DYNSYMS);
}

/* DT_HASH: nchain is the symbol count. */
static int sysv_hash_count(const struct mem_src *S, const struct image_loads *L, int64_t bias,
                           uint64_t hash, uint64_t *count, struct qp_error *err)
{
    uint8_t h[8];
    if (!rt_in_image(L, bias, hash, sizeof h))
        return qp_error_set(err, -EINVAL, "DT_HASH outside the image");
    int rc = mem_read(S, hash, h, sizeof h, "hash table", err);
    if (rc == 0)
        *count = le32(h + 4);
    return rc;
}

/* Fills out's .dynsym/.dynstr when the dynamic section names them in the image's file bytes. */
static int read_dynsym_facts(const struct mem_src *S, const struct image_loads *L,
                             uint64_t dyn_link, uint64_t dyn_size, struct sym_mem_image *out,
                             struct qp_error *err)
{
    struct dyn_facts d = {0};
    int rc = read_dynamic(S, L, out->bias, dyn_link, dyn_size, &d, err);
    if (rc)
        return rc;
    if (!d.symtab || !d.strtab || (!d.hash && !d.gnu_hash))
        return 0; /* nothing to name functions with: no error */
    if ((d.syment && d.syment != sizeof(Elf64_Sym)) || d.strsz == 0 ||
        d.strsz > SYM_MEM_MAX_DYNSTR || !rt_in_image(L, out->bias, d.strtab, d.strsz))
        return qp_error_set(err, -EINVAL, ".dynstr of %" PRIu64 " bytes outside the image",
                            d.strsz);
    uint64_t count = 0;
    rc = d.gnu_hash ? gnu_hash_count(S, L, out->bias, d.gnu_hash, &count, err)
                    : sysv_hash_count(S, L, out->bias, d.hash, &count, err);
    if (rc)
        return rc;
    if (count > SYM_MEM_MAX_DYNSYMS ||
        !rt_in_image(L, out->bias, d.symtab, count * sizeof(Elf64_Sym)))
        return qp_error_set(err, -EINVAL, ".dynsym of %" PRIu64 " symbols outside the image",
                            count);
    out->dynsym = d.symtab;
    out->dynsym_count = count;
    out->dynstr = d.strtab;
    out->dynstr_size = d.strsz;
    file_offset_of(S, d.symtab, count * sizeof(Elf64_Sym), &out->dynsym_offset);
    file_offset_of(S, d.strtab, d.strsz, &out->dynstr_offset);
    return 0;
}

int sym_mem_image_read(sym_mem_read_fn read, sym_mem_read_fn read_file, void *ctx, uint64_t base,
                       uint16_t machine, struct sym_mem_image *out, struct qp_error *err)
{
    uint8_t eh[sizeof(Elf64_Ehdr)], ph[MAX_PHNUM * sizeof(Elf64_Phdr)];
    struct mem_src src = {.read = read, .ctx = ctx}, *S = &src;
    *out = (struct sym_mem_image){0};
    unsigned phnum = 0;
    int rc = read_ehdr(S, base, eh, err);
    if (rc == -ENOEXEC)
        rc = -EINVAL; /* garbage, as this function says it */
    if (rc || (rc = check_type(eh, machine, err)))
        return rc;
    if (le64(eh + 32) > MAX_PHOFF)
        return qp_error_set(err, -EINVAL, "program headers at offset 0x%" PRIx64, le64(eh + 32));
    if ((rc = read_phdrs(S, base, UINT64_MAX, eh, ph, &phnum, err)))
        return rc;
    struct image_loads L;
    if ((rc = collect_loads(ph, phnum, base, &L, &out->bias, err)))
        return rc;
    src.L = &L;
    src.bias = out->bias;
    src.read_file = read_file;
    out->type = le16(eh + 16);
    for (unsigned i = 0; i < phnum && (rc == 0 || rc == -EFAULT); i++) {
        const uint8_t *p = ph + i * sizeof(Elf64_Phdr);
        /* A table whose page is not present is left out (its fields stay 0): the other may be
         * (libc's .dynsym is, once the loader used it; its .eh_frame_hdr, read by nothing,
         * often is not). */
        int one = 0;
        if (le32(p) == PT_GNU_EH_FRAME)
            one = read_eh_frame_hdr(S, &L, le64(p + 16), out, err);
        else if (le32(p) == PT_DYNAMIC)
            one = read_dynsym_facts(S, &L, le64(p + 16), le64(p + 40), out, err);
        if (one == -EFAULT) {
            out->missing++;
            one = 0;
        }
        rc = one;
    }
    return rc;
}

/* ---- The GNU build-id of a mapped ELF ------------------------------------------------------- */

#define MAX_NOTES    4096 /* bytes of one PT_NOTE segment read */
#define NT_GNU_BUILD 3

static uint32_t align_up(uint32_t v, uint32_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* Finds the GNU build-id note in one PT_NOTE segment's bytes. */
static int note_build_id(const uint8_t *notes, size_t len, uint32_t align, uint8_t *id,
                         size_t id_max, size_t *id_len)
{
    size_t at = 0;
    while (at + 12 <= len) {
        uint32_t namesz = le32(notes + at), descsz = le32(notes + at + 4);
        uint32_t type = le32(notes + at + 8);
        if (namesz > len || descsz > len)
            return -EINVAL;
        size_t name_at = at + 12, desc_at = name_at + align_up(namesz, align);
        size_t next = desc_at + align_up(descsz, align);
        if (next > len || desc_at + descsz > len)
            return -EINVAL;
        if (type == NT_GNU_BUILD && namesz == 4 && memcmp(notes + name_at, "GNU", 4) == 0) {
            if (descsz == 0 || descsz > id_max)
                return -EINVAL;
            memcpy(id, notes + desc_at, descsz);
            *id_len = descsz;
            return 0;
        }
        at = next;
    }
    return -ENOENT;
}

/* The first PT_NOTE segment of ph inside the mapping whose notes hold a build-id. */
static int notes_build_id(const struct mem_src *S, uint64_t base, uint64_t map_len,
                          const uint8_t *ph, unsigned phnum, uint8_t *id, size_t id_max,
                          size_t *len)
{
    uint8_t *notes = g_malloc(MAX_NOTES);
    int rc = -ENOENT;
    for (unsigned i = 0; i < phnum && rc != 0; i++) {
        const uint8_t *p = ph + i * sizeof(Elf64_Phdr);
        uint64_t off = le64(p + 8), size = le64(p + 32), align = le64(p + 48);
        if (le32(p) != PT_NOTE || size < 12 || size > MAX_NOTES || off > map_len ||
            off + size > map_len)
            continue;
        struct qp_error ignored = {0};
        if (mem_read(S, base + off, notes, size, "ELF notes", &ignored) == 0)
            rc = note_build_id(notes, size, align == 8 ? 8 : 4, id, id_max, len);
    }
    g_free(notes);
    return rc;
}

int sym_mem_build_id(sym_mem_read_fn read, void *ctx, uint64_t base, uint64_t map_len, uint8_t *id,
                     size_t id_max, size_t *len, struct qp_error *err)
{
    uint8_t eh[sizeof(Elf64_Ehdr)], ph[MAX_PHNUM * sizeof(Elf64_Phdr)];
    struct mem_src src = {.read = read, .ctx = ctx};
    unsigned phnum = 0;
    int rc = read_ehdr(&src, base, eh, err);
    if (rc || (rc = read_phdrs(&src, base, map_len, eh, ph, &phnum, err)))
        return rc;
    rc = notes_build_id(&src, base, map_len, ph, phnum, id, id_max, len);
    if (rc)
        return qp_error_set(err, rc == -ENOENT ? -ENOENT : -EINVAL,
                            "ELF at 0x%" PRIx64 ": no readable GNU build-id note", base);
    return 0;
}

size_t sym_eh_frame_whole_len(const void *bytes, size_t len, bool *terminated)
{
    const uint8_t *b = bytes;
    size_t off = 0;
    *terminated = false;
    while (len - off >= 4) {
        uint64_t length = le32(b + off), head = 4;
        if (length == 0) {
            *terminated = true;
            return off + 4;
        }
        if (length == 0xffffffffu) {
            if (len - off < 12)
                break;
            length = le64(b + off + 4);
            head = 12;
        }
        if (length > len - off - head)
            break;
        off += head + length;
    }
    return off;
}

/* Defined functions with a size: a size-0 symbol would stretch to the next exported one and
 * name the static functions between them wrongly. */
static bool is_named_function(const Elf64_Sym *s, size_t strsz)
{
    unsigned type = ELF64_ST_TYPE(s->st_info);
    return (type == STT_FUNC || type == STT_GNU_IFUNC) && s->st_shndx != SHN_UNDEF &&
           s->st_value != 0 && s->st_size != 0 && s->st_name != 0 && s->st_name < strsz;
}

int sym_table_from_dynsym(const char *name, const void *dynsym, size_t count, const char *strtab,
                          size_t strsz, sym_table **out, struct qp_error *err)
{
    sym_table *t = sym_table_builder_new(name);
    size_t added = 0;
    for (size_t i = 1; i < count; i++) {
        Elf64_Sym s;
        memcpy(&s, (const uint8_t *)dynsym + i * sizeof s, sizeof s);
        if (!is_named_function(&s, strsz))
            continue;
        const char *n = strtab + s.st_name;
        size_t room = strsz - s.st_name, len = strnlen(n, room);
        if (len == room || len == 0)
            continue; /* not NUL-terminated inside .dynstr */
        enum sym_rank rank =
            ELF64_ST_BIND(s.st_info) == STB_GLOBAL ? SYM_RANK_GLOBAL : SYM_RANK_OTHER;
        sym_table_builder_add(t, n, s.st_value, s.st_size, SYM_NO_LIMIT, rank, true);
        added++;
    }
    sym_table_builder_finish(t);
    if (added == 0) {
        sym_table_free(t);
        return qp_error_set(err, -ENOENT, "%s: no exported function in .dynsym", name);
    }
    *out = t;
    return 0;
}
