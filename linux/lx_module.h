/* lx_module: the loaded kernel modules of a stock Linux guest, read from outside: the kernel's
 * `modules` list of struct module (offsets from BTF, lx_btf_module_offsets), each module's core
 * text range, its symbols (module->kallsyms: an Elf64_Sym table whose st_value are run-time
 * addresses, the string table and the nm letters) and, on a kernel with ORC (x86_64), its ORC
 * tables (module->arch, sorted by the kernel when it loaded the module).
 *
 * Internal header of the linux/ module. Everything read here may be garbage or changing under
 * the reader (insmod, rmmod while the guest runs): the walk is bounded (LX_MAX_MODULES, counts
 * and sizes capped), every pointer must lie in the module area (o->area_start..area_end), and
 * the list must hold together
 * (each node's prev is the node before); otherwise the walk ends with an error, never a hang.
 *
 * Ownership: an lx_modules is a snapshot owned by the caller (lx_modules_free); the names and
 * symbols it hands out live as long as it does.
 */
#ifndef LX_MODULE_H
#define LX_MODULE_H

#include "linux.h"
#include "lx_task.h"

/* x86_64's module area (MODULES_VADDR..MODULES_END, the same with 4- and 5-level paging):
 * every struct module, module text and module table lies in it. Other architectures' areas
 * follow their kernel image (lx_kernel_module_area). */
#define LX_MODULES_START   UINT64_C(0xffffffffc0000000)
#define LX_MODULES_END     UINT64_C(0xffffffffff000000)
#define LX_MAX_MODULES     4096
#define LX_MODULE_MAX_SYMS (1u << 20)
#define LX_MODULE_MAX_ORCS (1u << 20)

/* Where k's architecture puts module memory (struct module, text, tables): [*start, *end) for
 * lx_module_offsets.area_start/area_end. 0, or -ENOENT when the kernel's symbols needed for it
 * (_stext, _etext) are not known. */
int lx_kernel_module_area(const lx_kernel *k, uint64_t *start, uint64_t *end);

/* The kernel's `modules` list head: kallsyms's symbol, or, for a kallsyms of text only (Debian's
 * arm64, riscv64: no KALLSYMS_ALL), an address that code walking the list forms (the
 * architecture's pc_rel_addrs) and that holds a list whose first and last nodes, in the module
 * area of o, link back to it. An empty list cannot be told from any other empty list_head:
 * -ENOENT until a module is loaded. */
int lx_kernel_find_modules_list(lx_kernel *k, const struct lx_module_offsets *o, uint64_t *head);

typedef struct lx_modules lx_modules;

/* One module's text range as the list showed it: its core, and while it runs its init function,
 * its init text too (a second entry, same name and struct). */
struct lx_module {
    uint64_t addr; /* its struct module */
    char name[64];
    uint64_t base, size, text_size; /* core_layout (or init_layout): text [base, +text_size) */
    size_t n_syms, n_orc;           /* what was copied of its tables (full reads only) */
};

/* Walks the list whose head is at list_head (the kallsyms symbol `modules`) through r. Modules
 * not set up yet (MODULE_STATE_UNFORMED) are left out; those running their init or exit are
 * in (one running its init with its init text as a second entry). With full, each module's text
 * symbols and ORC tables are copied too; a module whose tables do not hold together keeps its
 * place without them (lx_modules_warning says why). 0 and *out, or -errno with a message: a
 * pointer outside the module area, a list that does not link back (-EAGAIN: it may be changing),
 * more than LX_MAX_MODULES modules. */
int lx_modules_read(const struct lx_module_offsets *o, const struct lx_reader *r,
                    uint64_t list_head, bool full, lx_modules **out, struct qp_error *err);
void lx_modules_free(lx_modules *m); /* NULL is a no-op */

size_t lx_modules_count(const lx_modules *m);
const struct lx_module *lx_modules_at(const lx_modules *m, size_t i); /* by base address */
/* The first problem met with one module's tables, or NULL. */
const char *lx_modules_warning(const lx_modules *m);
/* The same modules (struct address, name, core range) in both: no need to read them again. */
bool lx_modules_same(const lx_modules *a, const lx_modules *b);
/* The module whose core text holds pc, or NULL. */
const struct lx_module *lx_modules_find(const lx_modules *m, uint64_t pc);
size_t lx_modules_orc_entries(const lx_modules *m);

/* Every module's text symbols, named perf's way "function [module]", by address, plus one
 * "_etext [module]" data symbol at the end of each module's text, so that the last function
 * does not stretch over what follows. NULL and *n = 0 before a full read. */
const struct lx_symbol *lx_modules_symbols(const lx_modules *m, size_t *n);

/* The raw 6-byte ORC entry of ip in the module text that holds it (modules: an lx_modules), or
 * NULL when no module text holds ip or no entry covers it: the lookup lx_kernel_use_modules
 * hands the unwinder. Valid while the lx_modules lives. */
const uint8_t *lx_modules_orc_find(const void *modules, uint64_t ip);

/* Makes k's ORC unwinder look pcs in module text up in m's tables, and the frame-pointer walk
 * find where module functions start in m's symbols (borrowed: valid until the next call; NULL
 * for none). */
void lx_kernel_use_modules(lx_kernel *k, const lx_modules *m);

#endif
