/* Private to sampler/: user stacks with no --sysroot, from the files as the guest mapped them
 * (memimage.c).
 *
 * A process's own mappings hold what an in-process unwinder uses: .eh_frame_hdr and .eh_frame
 * in a loaded segment, and .dynsym/.dynstr of every dynamically linked file. While the guest is
 * paused, what a mapped file has of them is copied out of the process's memory a part at a time
 * within the sample's budget (headers, then .eh_frame up to its terminator, its pages that the
 * process never touched from the OS's page cache when the adapter can read it, then .dynsym and
 * .dynstr); once copied, the unwinder gets the .eh_frame and
 * the profile a module named by the exported functions. Copies are kept by file content (its
 * path and GNU build-id, else per address space and address), so that the next process mapping
 * the same libc costs no reads. Whatever sizes the guest's headers declare, each table is copied
 * within symbols.h's SYM_MEM_MAX_* bounds, every read into what the copy has allocated for it,
 * and all copies together hold at most 256 MiB (a table past that stays as far as it got).
 *
 * sysroot.c owns the table (for --sysroot's address spaces) and calls nothing else here. */
#ifndef PROF_MEMIMAGE_H
#define PROF_MEMIMAGE_H

#include "os.h"
#include "symbols.h"
#include "unwind.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct prof_memimgs prof_memimgs;
struct prof_memimg; /* one mapped file's copy */

prof_memimgs *prof_memimgs_new(uint16_t elf_machine, bool verbose);
void prof_memimgs_free(prof_memimgs *t); /* NULL is a no-op */
/* The guest rebooted: no copy is used again (pointers to them must be dropped; their symbol
 * tables stay valid until prof_memimgs_free, for the modules that name by them). */
void prof_memimgs_reset(prof_memimgs *t);

/* While paused: the copy of exec mapping m's file in address space as_id, advanced by what the
 * budget allows through mem with cpu's page tables (the process on cpu must own the mapping).
 * Borrowed until reset; NULL when m has no mapped ELF header or the table is full. */
struct prof_memimg *prof_memimg_progress(prof_memimgs *t, uint64_t as_id,
                                         const struct prof_exec_mapping *m, prof_os *os,
                                         const struct prof_vcpu *cpu,
                                         const struct prof_os_mem *mem);
/* Whether the copy is finished (usable or not). */
bool prof_memimg_done(const struct prof_memimg *img);

/* After the guest resumed, for a finished copy: adds its .eh_frame for exec mapping m to space
 * (0), or says why it cannot (-ENOENT: the file has no .eh_frame_hdr, or nothing of .eh_frame
 * was readable). */
int prof_memimg_add_unwind(struct prof_memimg *img, unw_space *space,
                           const struct prof_exec_mapping *m, struct qp_error *err);
/* Its exported functions at link-time addresses (NULL: none), made on the first call; borrowed
 * until prof_memimgs_free. */
const sym_table *prof_memimg_symbols(struct prof_memimg *img);
/* m's load bias: run-time minus link-time addresses. */
int64_t prof_memimg_bias(const struct prof_memimg *img, const struct prof_exec_mapping *m);
/* A finished copy's .eh_frame: its whole entries (*len bytes, through the terminator when the
 * file has one), borrowed until prof_memimgs_free; NULL when none was copied. */
const void *prof_memimg_eh_frame(const struct prof_memimg *img, size_t *len);
/* A key naming the copy's content (borrowed). */
const char *prof_memimg_key(const struct prof_memimg *img);

#endif
