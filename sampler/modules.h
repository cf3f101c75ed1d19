/* Private to sampler/: the profile's modules and the symbol tables that name their pcs.
 *
 * The session owns the table; capture (mapping-named leaves), image identification and --sysroot
 * add modules to it, and out_names symbolizes through it once output needs names. It calls
 * nothing else in sampler/: every other stage passes it down, none calls back up. */
#ifndef PROF_MODULES_H
#define PROF_MODULES_H

#include "os.h"
#include "output.h"
#include "symbols.h"

#include <stdint.h>

typedef struct prof_modules prof_modules;

/* profile is borrowed and must outlive the table. */
prof_modules *prof_modules_new(out_profile *profile);
void prof_modules_free(prof_modules *m); /* NULL is a no-op */

/* Registers a module in the profile whose symbol table (borrowed, may be NULL; shared, at its
 * link addresses) is offset by bias in this module: 0, or a PIE or shared library's load bias.
 * Returns its index. */
uint32_t prof_modules_add(prof_modules *m, const struct out_module *om, const sym_table *syms,
                          int64_t bias);
/* Gives module index another symbol table (borrowed), e.g. the kernel's once found in the guest. */
void prof_modules_set_syms(prof_modules *m, uint32_t index, const sym_table *syms);
/* The bias module index was added with (0 for an unknown index). */
int64_t prof_modules_bias(const prof_modules *m, uint32_t index);

/* One module per mapped file at one base, named "file+0xFILE_OFFSET" when no symbol is known
 * (pm->name a basename); OUT_NO_MODULE when too many. */
uint32_t prof_modules_for_mapping(prof_modules *m, const struct prof_mapping *pm);

/* The kernel's current module (module 0 until a new boot adds another). */
uint32_t prof_modules_kernel(const prof_modules *m);
void prof_modules_set_kernel(prof_modules *m, uint32_t index);

/* The out_names symbolizer for the table's profile (ctx: the prof_modules). */
int prof_modules_symbolize(void *ctx, const struct out_module *om, uint64_t pc, bool exact,
                           struct out_symbol *sym);

#endif
