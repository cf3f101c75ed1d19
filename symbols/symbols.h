/* symbols: function symbols of ELF files and symbol maps, .text hashing, and a store of
 * user binaries indexed by their .text hash.
 *
 * Functions returning int return 0 on success or a negative errno-style code and fill the
 * optional err (common/qp_error.h). Nothing here talks to QEMU.
 */
#ifndef SYMBOLS_H
#define SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qp_error.h"

/* ---- .text hash -------------------------------------------------------------------------- */

/* The identity of a binary: the first 8 bytes of the SHA-256 of its .text section's bytes,
 * read as a big-endian integer. Computed the same way from a file on disk and from bytes read
 * out of guest memory, so a guest needs to publish only where .text is. */
uint64_t sym_text_hash(const void *text, size_t len);

/* ---- One symbol table -------------------------------------------------------------------- */

typedef struct sym_table sym_table;

struct sym_info {
    const char *name; /* demangled when the name is mangled C++ or Rust; valid while the table */
    uint64_t start;   /* symbol address (after the table's slide) */
    uint64_t size;    /* 0 for zero-size symbols */
    uint64_t offset;  /* addr - start */
    uint64_t end;     /* where the symbol's cover ends: start + size, or for size 0 the next
                         symbol (the lookup's own bound) */
};

/* Loads function symbols of an ELF (.symtab, else .dynsym) and its .text section identity.
 * A stripped ELF loads with no symbols, which is no error. *out owned by the caller. */
int sym_table_open_elf(const char *path, sym_table **out, struct qp_error *err);

/* The separate debug file of a stripped object (what Debian's -dbgsym and -dbg packages
 * install), looked up as gdb and perf do, under root (the host's "/" or a --sysroot; NULL is
 * "/"): ROOT/usr/lib/debug/.build-id/xx/rest.debug by the object's GNU build-id (build_id_len 0:
 * none), else, with object_path (a host copy of the object, as the guest sees it at guest_path),
 * by its .gnu_debuglink: ROOT/DIR/NAME, ROOT/DIR/.debug/NAME, ROOT/usr/lib/debug/DIR/NAME, DIR
 * the guest path's folder. A file is taken only when its build-id is the object's and, by the
 * link, its CRC-32 the link's: another build's debug file would name the wrong functions.
 * Returns a new path (g_free) or NULL. */
char *sym_debug_file_find(const char *root, const uint8_t *build_id, size_t build_id_len,
                          const char *guest_path, const char *object_path);

/* Loads a System.map or /proc/kallsyms style text file ("ADDR TYPE NAME [module]" per line);
 * text symbols (t/T/w/W) only. */
int sym_table_open_map(const char *path, sym_table **out, struct qp_error *err);

/* One symbol of a list in System.map form. */
struct sym_map_entry {
    uint64_t addr;
    char type; /* nm's letter */
    const char *name;
};
/* A table from such a list (copied; any order), treated as sym_table_open_map treats a map;
 * name stands in for the path. -EINVAL when no entry has an address. */
int sym_table_from_entries(const char *name, const struct sym_map_entry *e, size_t n,
                           sym_table **out, struct qp_error *err);
void sym_table_free(sym_table *t); /* NULL is a no-op */

/* Adds slide to every address (relocated or KASLR kernels); default 0. */
void sym_table_set_slide(sym_table *t, int64_t slide);

/* Finds the function containing addr. A symbol of size 0 covers up to the next symbol.
 * Among aliases at the same address the global, then the shortest, then the alphabetically
 * first name wins. Returns 0 and fills out, or -ENOENT. */
int sym_lookup(const sym_table *t, uint64_t addr, struct sym_info *out);

/* The source file and line of the instruction at addr (after the table's slide), from the ELF's
 * DWARF line table, read on the first call. Returns 0 with *file (valid while the table lives)
 * and *line, or -ENOENT (no DWARF, a symbol map, or addr not covered). */
int sym_lookup_line(const sym_table *t, uint64_t addr, const char **file, int *line);

/* The innermost function inlined at addr (from the ELF's DWARF: DW_TAG_inlined_subroutine),
 * *name valid while the table lives; -ENOENT when addr is in no inlined code or there is no
 * DWARF. */
int sym_lookup_inlined(const sym_table *t, uint64_t addr, const char **name);

/* Short module name: the file's basename, e.g. "spin" or "kernel.elf". */
const char *sym_table_name(const sym_table *t);
/* Path it was loaded from. */
const char *sym_table_path(const sym_table *t);
/* .text section of an ELF (address after slide, size, hash); zero for symbol maps. */
uint64_t sym_table_text_addr(const sym_table *t);
uint64_t sym_table_text_size(const sym_table *t);
uint64_t sym_table_text_hash(const sym_table *t);
size_t sym_table_count(const sym_table *t);
/* Address of a symbol by exact name, for finding e.g. the guest ABI; -ENOENT if absent. */
int sym_find_by_name(const sym_table *t, const char *name, uint64_t *addr);

/* ---- Store of user binaries by .text hash ------------------------------------------------ */

typedef struct sym_store sym_store;

sym_store *sym_store_new(void);
void sym_store_free(sym_store *s); /* NULL is a no-op; frees every table it holds */

/* Indexes every ELF file under dir (recursive) by its .text hash. Files that are not ELF are
 * skipped silently; unreadable ELFs are skipped and counted. Returns the number of ELFs
 * indexed, or a negative code when dir cannot be read. */
int sym_store_add_dir(sym_store *s, const char *dir, struct qp_error *err);

/* Adds one ELF. */
int sym_store_add_file(sym_store *s, const char *path, struct qp_error *err);

/* The table whose .text hash is `hash`, or NULL. Borrowed: valid until sym_store_free, and the
 * same table is returned to every caller (any number of processes of one binary). */
const sym_table *sym_store_find(const sym_store *s, uint64_t hash);

size_t sym_store_count(const sym_store *s);

/* Calls fn for every binary in the store (in no particular order). */
void sym_store_foreach(const sym_store *s, void (*fn)(const sym_table *t, void *ctx), void *ctx);

/* The span [*lo, *hi) that the executable PT_LOAD segments of the ELF file at path cover at
 * their link addresses: where its code runs when it is not relocated (a kernel's unwind space).
 * 0, -ENOENT with a message when the file has no executable segment, or negative when it is no
 * readable ELF file. */
int sym_elf_exec_span(const char *path, uint64_t *lo, uint64_t *hi, struct qp_error *err);
/* The same over all its PT_LOAD segments, data and .bss included (where a kernel's own boot
 * stacks are). */
int sym_elf_load_span(const char *path, uint64_t *lo, uint64_t *hi, struct qp_error *err);

/* ---- Code bytes of one binary -------------------------------------------------------------- */

/* The file bytes of a binary's executable PT_LOAD segments at their link addresses, read once
 * (copied: the file may go away). */
typedef struct sym_code sym_code;

/* NULL when t's file cannot be read as an ELF. The caller frees. */
sym_code *sym_code_open(const sym_table *t);
void sym_code_free(sym_code *c); /* NULL is a no-op */
/* The len bytes at link address vaddr when one executable segment's file bytes hold all of
 * them (borrowed, valid while c lives), else NULL. */
const uint8_t *sym_code_at(const sym_code *c, uint64_t vaddr, size_t len);

/* ---- Binaries by content: their pages of loadable code ------------------------------------- */

#define SYM_PAGE_SIZE 4096u

/* A page of one binary in the store. */
struct sym_page_match {
    const sym_table *table; /* borrowed from the store */
    uint64_t vaddr;         /* the page's link-time address in that file */
};

/* The store's binaries that have a page of executable PT_LOAD code with exactly these
 * SYM_PAGE_SIZE bytes, as a loader that copies segments leaves it (zero outside the segment)
 * or as mmap maps it (the whole file page), once sym_store_index_pages was called. Fills up to max
 * entries and returns how many binaries' pages match in all (0: none; more than one: pages the
 * binaries share, which another page of the same code decides). A relocated (PIE) binary matches at
 * any page-aligned load address: the caller's page address minus out->vaddr is its load bias. */
size_t sym_store_match_page(const sym_store *s, const void *page, struct sym_page_match *out,
                            size_t max);

/* Builds the page index of every binary in the store, and of every one added later. Only
 * callers that match pages pay for it (it reads each file's code again). */
void sym_store_index_pages(sym_store *s);

/* Distinct page contents indexed. */
size_t sym_store_page_count(const sym_store *s);

/* How many files with an ELF magic could not be opened or parsed, over every add_dir call. */
size_t sym_store_unreadable(const sym_store *s);

/* ---- ELF files as a process maps them (no file: guest memory) ------------------------------ */

#define SYM_MEM_MAX_EH_FRAME ((uint64_t)16 << 20)
#define SYM_MEM_MAX_DYNSYMS  (1u << 20)
#define SYM_MEM_MAX_DYNSTR   ((uint64_t)16 << 20)

/* Reads len bytes of a process's memory at addr (or of its file at offset addr): 0 when all
 * were read, -ENOSPC when it cannot read now for a reason that is no fault of the memory (out of
 * the sample's budget: try again later), any other negative code when some byte is not readable (a
 * page not present). */
typedef int (*sym_mem_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

/* What the headers of a mapped ELF say; addresses are run-time ones (the process's). */
struct sym_mem_image {
    uint16_t type;            /* ET_EXEC or ET_DYN */
    int64_t bias;             /* run-time minus link-time addresses */
    uint64_t eh_frame;        /* .eh_frame (from PT_GNU_EH_FRAME's .eh_frame_hdr), 0: none */
    uint64_t eh_frame_max;    /* bytes from there to the end of the PT_LOAD holding it (capped) */
    uint64_t eh_frame_offset; /* its offset in the file (from that PT_LOAD's p_offset) */
    uint64_t dynsym, dynsym_count; /* .dynsym and its symbol count (from the hash table), 0: none */
    uint64_t dynstr, dynstr_size;
    uint64_t dynsym_offset, dynstr_offset; /* their offsets in the file */
    unsigned missing; /* tables left out because a page of theirs is not readable */
};

/* Reads the ELF header at base (where the process mapped file offset 0), its program headers,
 * .eh_frame_hdr's pointer to .eh_frame and the dynamic section's .dynsym, .dynstr and hash table
 * (DT_GNU_HASH, else DT_HASH, for the symbol count), for an ELF of machine `machine`, through
 * read (run-time addresses), and, where read finds a table's page not present, through
 * read_file (NULL: none) by its file offset (from the PT_LOAD it lies in; the ELF and program
 * headers must be readable by read). Every table must lie inside the image's PT_LOAD
 * segments' file bytes, counts and sizes within the SYM_MEM_MAX_* bounds. No PT_GNU_EH_FRAME or
 * PT_DYNAMIC is no error (the fields stay 0), nor is one whose table is not readable (counted
 * in missing, the reason in err). Returns 0, -ENOSPC (a reader's "try again later"), -EFAULT
 * (the ELF or program headers not readable), -EINVAL (garbage), with err. */
int sym_mem_image_read(sym_mem_read_fn read, sym_mem_read_fn read_file, void *ctx, uint64_t base,
                       uint16_t machine, struct sym_mem_image *out, struct qp_error *err);

/* The GNU build-id of the ELF mapped at base (file offset 0), map_len bytes of whose mapping
 * may be read through read: its headers as sym_mem_image_read reads them (any type and
 * machine), then its PT_NOTE segments inside the mapping. The one reader of ELF headers in
 * guest memory, for Linux's VMAs (linux/lx_task.c) as for the process images above. At most
 * id_max bytes into id, *len set; -ENOEXEC (no 64-bit little-endian ELF), -ENOENT (no build-id
 * note), -EINVAL (garbage), a reader's error, with err; *len untouched on error. */
int sym_mem_build_id(sym_mem_read_fn read, void *ctx, uint64_t base, uint64_t map_len, uint8_t *id,
                     size_t id_max, size_t *len, struct qp_error *err);

/* The length of the whole .eh_frame entries (CIEs and FDEs) at the start of bytes, through the
 * zero terminator when one is met (*terminated true): what is left of a table when a page after
 * it could not be read. */
size_t sym_eh_frame_whole_len(const void *bytes, size_t len, bool *terminated);

/* A table of the exported functions of count Elf64_Sym entries (little-endian) and their string
 * table (strsz bytes; names must end inside it): defined STT_FUNC/STT_GNU_IFUNC symbols with a
 * size, at their link-time values. -ENOENT when there are none. name stands in for the path. */
int sym_table_from_dynsym(const char *name, const void *dynsym, size_t count, const char *strtab,
                          size_t strsz, sym_table **out, struct qp_error *err);

#endif
