/* Private to sampler/: address spaces as processes, binaries by content (--os none).
 *
 * When the OS adapter names no process, an address space (the vCPU's root register, ASID bits
 * masked) stands for one: it becomes a process the first time user code runs in it, numbered
 * in the order seen and labelled after the binary its code pages match ("spin [as 1]"), or
 * "user [as 1]" when none matched. The page at a user pc is copied while the guest is stopped
 * (once per address space and page) and looked up in the --user-dir store's page index after
 * it resumed; the binary found gives symbols and unwind tables for the whole user stack.
 *
 * The session owns the table and passes it what it needs; it adds modules through the
 * session's prof_modules and calls nothing else in sampler/. */
#ifndef PROF_ASPACE_H
#define PROF_ASPACE_H

#include "capture.h"
#include "model.h"
#include "modules.h"
#include "sampler.h"
#include "symbols.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct prof_aspaces prof_aspaces;
struct prof_aspace; /* one address space */

struct prof_aspaces_config {
    const sym_store *store;            /* borrowed: --user-dir's binaries and their page index */
    uint64_t user_end;                 /* the user half's end (unwind spaces) */
    const struct unw_machine *machine; /* borrowed: the guest's, for its unwind spaces */
    bool verbose;                      /* say what each address space and page matched */
    prof_model *model;                 /* borrowed: filled with each address space's pages */
};

/* store, modules and model are borrowed and must outlive the table. */
prof_aspaces *prof_aspaces_new(const struct prof_aspaces_config *cfg, prof_modules *modules);
void prof_aspaces_free(prof_aspaces *a); /* NULL is a no-op */
/* Its figures so far (borrowed, valid while a). */
const struct prof_aspace_counters *prof_aspaces_counters(const prof_aspaces *a);
/* The guest rebooted: roots mean nothing any more (numbers keep counting, labels stay unique). */
void prof_aspaces_reset(prof_aspaces *a);

/* While stopped: the address space with root `root`, made when new. Borrowed until reset (also
 * after prof_aspace_verify retired it). */
struct prof_aspace *prof_aspace_for(prof_aspaces *a, uint64_t root);
/* While stopped: the page to copy for user pc (its own page, or another of the same code when
 * the pc's page is shared by several binaries); false when nothing needs copying. */
bool prof_aspace_page_to_copy(const struct prof_aspace *as, uint64_t pc, uint64_t *page);
/* After the guest resumed: the SYM_PAGE_SIZE bytes copied at page (NULL: unreadable). */
void prof_aspace_add_page(prof_aspaces *a, struct prof_aspace *as, uint64_t page,
                          const uint8_t *bytes);
/* While stopped, for a user pc in as: whether the copied page it lies in is due for a check
 * (every few pcs there), and then the bytes to read for it, at addr (len bytes, in pc's page). */
bool prof_aspace_check_due(struct prof_aspace *as, uint64_t pc, uint64_t *addr, size_t *len);
/* While stopped: the len bytes read at addr (as prof_aspace_check_due said) against the copy.
 * When they differ, the root was freed and given to another process: as is retired (its label
 * stays in the record, and the pointer stays valid until reset) and a new address space for
 * the root, numbered anew, is returned (counted in aspace_roots_reused); else as. Code that
 * changes under a live process (a JIT) reads as a new process each time. */
struct prof_aspace *prof_aspace_verify(prof_aspaces *a, struct prof_aspace *as, uint64_t addr,
                                       const uint8_t *bytes, size_t len);
/* Notes that user code ran in as (it is a process from now on). */
void prof_aspace_saw_user(struct prof_aspace *as);
/* A process: user code was seen running in it. */
bool prof_aspace_is_process(const struct prof_aspace *as);
/* as in the model (model.h), whose mappings say the binary at a user pc: a copied page's, for
 * a page not copied yet the one the address space matched when its .text holds pc, else none
 * (the page is no binary's, or pc lies in another address space: a kernel switching address
 * spaces still runs on the old stack). Borrowed until reset. */
const prof_space *prof_aspace_space(const struct prof_aspace *as);
/* Appends a line "address_space=LABEL root=0xROOT" for every address space that was a process
 * in this run, earlier boots' too (for the record's notes). */
void prof_aspaces_describe(const prof_aspaces *a, GString *out);
/* The root label, "spin [as 1]" (at most OUT_COMM_LEN - 1 characters and 15 in a record). */
const char *prof_aspace_label(const struct prof_aspace *as);
/* Its root register's value, as prof_aspace_for was given it (for a page walk of its table). */
uint64_t prof_aspace_root(const struct prof_aspace *as);

#endif
