/* Loading an ELF file's symbols and .text identity with libelf. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <gelf.h>
#include <glib.h>
#include <libelf.h>

#include "sym_internal.h"
#include "qp_file.h"

/* What a symbol needs to know about the section it lies in. */
struct sym_section {
    uint64_t flags;
    uint64_t addr, size;
};

struct elf_file {
    Elf *elf;
    struct sym_section *sections; /* indexed by section number */
    size_t nsections;
    Elf_Scn *symtab, *dynsym, *text;
};

static void elf_file_close(struct elf_file *f)
{
    g_free(f->sections);
    if (f->elf)
        elf_end(f->elf);
}

static int scan_sections(struct elf_file *f, const char *path, struct qp_error *err)
{
    size_t shstrndx;
    if (elf_getshdrnum(f->elf, &f->nsections) != 0 || elf_getshdrstrndx(f->elf, &shstrndx) != 0)
        return qp_error_set(err, -EINVAL, "%s: bad ELF section headers: %s", path, elf_errmsg(-1));
    f->sections = g_new0(struct sym_section, f->nsections + 1);
    for (Elf_Scn *scn = elf_nextscn(f->elf, NULL); scn; scn = elf_nextscn(f->elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr))
            continue;
        size_t index = elf_ndxscn(scn);
        if (index < f->nsections)
            f->sections[index] = (struct sym_section){shdr.sh_flags, shdr.sh_addr, shdr.sh_size};
        const char *name = elf_strptr(f->elf, shstrndx, shdr.sh_name);
        if (shdr.sh_type == SHT_SYMTAB)
            f->symtab = scn;
        else if (shdr.sh_type == SHT_DYNSYM)
            f->dynsym = scn;
        else if (name && strcmp(name, ".text") == 0 && !f->text)
            f->text = scn;
    }
    return 0;
}

/* SHT_NOBITS .text (a debuginfo file) has no bytes to identify it by: hash 0. */
static void load_text(struct elf_file *f, sym_table *t)
{
    GElf_Shdr shdr;
    if (!f->text || !gelf_getshdr(f->text, &shdr) || shdr.sh_type == SHT_NOBITS)
        return;
    GChecksum *sha256 = g_checksum_new(G_CHECKSUM_SHA256);
    for (Elf_Data *data = elf_rawdata(f->text, NULL); data; data = elf_rawdata(f->text, data))
        if (data->d_buf && data->d_size)
            g_checksum_update(sha256, data->d_buf, (gssize)data->d_size);
    sym_table_builder_set_text(t, shdr.sh_addr, shdr.sh_size, sym_text_hash_from_checksum(sha256));
    g_checksum_free(sha256);
}

static const struct sym_section *section_of(const struct elf_file *f, const GElf_Sym *sym)
{
    if (sym->st_shndx == SHN_UNDEF || sym->st_shndx >= SHN_LORESERVE ||
        sym->st_shndx >= f->nsections)
        return NULL;
    return &f->sections[sym->st_shndx];
}

/* Functions, and untyped labels inside code (assembly entry stubs often carry no type).
 * Linker-made markers such as _end or __bss_start can be attached to .text while pointing past
 * its end; they are not code. */
static bool is_function(const GElf_Sym *sym, const struct sym_section *sec)
{
    int type = GELF_ST_TYPE(sym->st_info);
    if (type == STT_FUNC || type == STT_GNU_IFUNC)
        return true;
    return type == STT_NOTYPE && sec && (sec->flags & SHF_EXECINSTR) &&
           sym->st_value >= sec->addr && sym->st_value - sec->addr < sec->size;
}

/* Symbols that name something at an address: not files, sections or thread-local offsets. */
static bool is_addressed(const GElf_Sym *sym)
{
    int type = GELF_ST_TYPE(sym->st_info);
    return type != STT_FILE && type != STT_SECTION && type != STT_TLS && sym->st_shndx != SHN_UNDEF;
}

static void add_symbol(sym_table *t, const struct elf_file *f, const GElf_Sym *sym,
                       const char *name)
{
    const struct sym_section *sec = section_of(f, sym);
    bool func = is_function(sym, sec);
    /* ARM/AArch64 mapping symbols ($x, $d) mark code/data runs, not functions. */
    if (name[0] == '$')
        return;
    uint64_t limit = SYM_NO_LIMIT;
    if (sec && sec->size && sym->st_value >= sec->addr)
        limit = sec->addr + sec->size;
    enum sym_rank rank =
        GELF_ST_BIND(sym->st_info) == STB_GLOBAL ? SYM_RANK_GLOBAL : SYM_RANK_OTHER;
    /* A shared library's .symtab (a debug file's too) spells its versioned aliases
     * "__libc_start_main@@GLIBC_2.34": the name a user reads, and looks for, has no version. */
    const char *at = strchr(name + 1, '@');
    char *bare = at ? g_strndup(name, (size_t)(at - name)) : NULL;
    sym_table_builder_add(t, bare ? bare : name, sym->st_value, sym->st_size, limit, rank, func);
    g_free(bare);
}

/* sized_only: a stripped file's .dynsym, where nothing says where a symbol of size 0 ends (it
 * would name the local functions after it, which the stripped file no longer lists). */
static void load_symbols(struct elf_file *f, Elf_Scn *scn, bool sized_only, sym_table *t)
{
    GElf_Shdr shdr;
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data || !gelf_getshdr(scn, &shdr) || shdr.sh_entsize == 0)
        return;
    size_t n = shdr.sh_size / shdr.sh_entsize;
    for (size_t i = 1; i < n; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(data, (int)i, &sym) || !is_addressed(&sym) ||
            (sized_only && sym.st_size == 0))
            continue;
        const char *name = elf_strptr(f->elf, shdr.sh_link, sym.st_name);
        if (name && name[0])
            add_symbol(t, f, &sym, name);
    }
}

static int open_elf(int fd, const char *path, struct elf_file *f, struct qp_error *err)
{
    if (elf_version(EV_CURRENT) == EV_NONE)
        return qp_error_set(err, -EIO, "libelf: %s", elf_errmsg(-1));
    f->elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!f->elf)
        return qp_error_set(err, -EINVAL, "%s: %s", path, elf_errmsg(-1));
    if (elf_kind(f->elf) != ELF_K_ELF)
        return qp_error_set(err, -EINVAL, "%s: not an ELF file", path);
    return scan_sections(f, path, err);
}

int sym_table_open_elf(const char *path, sym_table **out, struct qp_error *err)
{
    struct elf_file f = {0};
    sym_table *t = NULL;
    int rc;

    /* a regular file only: a path a record names may be a FIFO or a device */
    int fd = qp_file_open_read(path, QP_FILE_MAX_ELF, NULL, err);
    if (fd < 0)
        return fd;
    rc = open_elf(fd, path, &f, err);
    if (rc < 0)
        goto out;
    t = sym_table_builder_new(path);
    sym_table_mark_elf(t);
    load_text(&f, t);
    /* .dynsym is a subset of .symtab; read it only when the file was stripped. */
    Elf_Scn *symbols = f.symtab ? f.symtab : f.dynsym;
    if (symbols)
        load_symbols(&f, symbols, !f.symtab, t);
    sym_table_builder_finish(t);
    *out = t;
out:
    elf_file_close(&f);
    close(fd);
    return rc;
}
