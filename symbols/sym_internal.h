/* Internal interface shared by the symbols module's files; not part of the public contract. */
#ifndef SYM_INTERNAL_H
#define SYM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "symbols.h"

/* Ranks for alias selection: lower wins. */
enum sym_rank {
    SYM_RANK_GLOBAL = 0,
    SYM_RANK_OTHER = 1,  /* local or weak */
    SYM_RANK_MARKER = 2, /* a linker's section bound (__entry_text_start), never a function */
};

/* No section end known (symbol maps): a zero-size symbol then ends at the next symbol. */
#define SYM_NO_LIMIT UINT64_MAX

/* A table under construction: sym_table_builder_new, then _add per symbol, then _finish. */
sym_table *sym_table_builder_new(const char *path);

/* Records one symbol. Function symbols (is_func) take part in sym_lookup; every symbol takes
 * part in sym_find_by_name. limit is the end of the symbol's section, or SYM_NO_LIMIT. The
 * name is copied (and demangled) into the table. */
void sym_table_builder_add(sym_table *t, const char *raw_name, uint64_t start, uint64_t size,
                           uint64_t limit, enum sym_rank rank, bool is_func);

/* The table was loaded from an ELF file: sym_lookup_line may read its DWARF. */
void sym_table_mark_elf(sym_table *t);

void sym_table_builder_set_text(sym_table *t, uint64_t addr, uint64_t size, uint64_t hash);

/* Sorts the collected symbols into their lookup arrays; the table is then complete. */
void sym_table_builder_finish(sym_table *t);

/* The display form of a mangled C++ or Rust name, g_free'd by the caller, or NULL when the
 * name is not mangled (or when qprof was built without libiberty). */
char *sym_demangle(const char *name);

/* The .text hash from a SHA-256 GChecksum fed with all of .text (for .text read in pieces). */
uint64_t sym_text_hash_from_checksum(GChecksum *sha256);

/* DWARF line tables of one ELF (sym_lines.c); a table opens them on its first line lookup. */
typedef struct sym_lines sym_lines;
sym_lines *sym_lines_open(const char *path); /* never NULL; finds nothing without DWARF */
void sym_lines_free(sym_lines *l);
int sym_lines_find(sym_lines *l, uint64_t addr, const char **file, int *line);
/* The innermost inlined function whose code addr is (its name from DWARF, valid while l). */
int sym_lines_inlined(sym_lines *l, uint64_t addr, const char **name);

/* The page index (sym_pages.c): page hash -> GArray of struct sym_page_match. */
GHashTable *sym_pages_new(void);
/* Indexes t's executable PT_LOAD pages (read from its file); 0, or negative when unreadable. */
int sym_pages_add(GHashTable *pages, const sym_table *t);
size_t sym_pages_match(GHashTable *pages, const void *page, struct sym_page_match *out, size_t max);

#endif
