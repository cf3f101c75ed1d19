/* Private to sampler/: user stacks unwound with the guest's own files (sysroot.c): those under
 * --sysroot, and, for a mapping none of them serves, the copy the guest itself has mapped
 * (memimage.h).
 *
 * The session owns one prof_sysroot. While the guest is stopped, capture asks it for the
 * address space of a vCPU's task (prof_sysroot_capture) and, after the sample's own reads, has
 * it copy more of the mapped files it lacks (prof_sysroot_copy_images); after the guest resumed,
 * the session has it match that space's files and hand the finished copies to the unwinder
 * (prof_sysroot_build), and stack building reads the space. It adds modules through the
 * session's prof_modules and calls nothing else in sampler/ but memimage.c. */
#ifndef PROF_SYSROOT_H
#define PROF_SYSROOT_H

#include "arch.h"
#include "memimage.h"
#include "model.h"
#include "modules.h"
#include "os.h"
#include "sampler.h"
#include "unwind.h"

#include <stdbool.h>
#include <stdint.h>

/* One address space (the OS adapter's id and generation) with the sysroot files that match its
 * exec mappings. The mappings are copied while the guest is paused; the files are matched and
 * the unwinder is loaded after it resumed (built). */
struct user_space_key {
    uint64_t id, generation;
};

struct user_space {
    struct user_space_key key;
    bool built;
    int n;
    struct prof_exec_mapping *maps; /* n, owned */
    /* n: the unwinder has the mapping's CFI we trust: a sysroot file with the guest's build-id,
     * or (no such file) the guest's own mapped .eh_frame */
    bool *verified;
    bool *named;              /* n: module names its pcs (verified, or .dynsym alone) */
    uint32_t *module;         /* n: its module (named maps only) */
    struct prof_memimg **img; /* n: the guest's own copy of the file (memimage.h), borrowed */
    bool *img_used;           /* n: img was offered to the unwinder */
    unw_space *space;         /* owned; NULL until built or when nothing matched */
    int n_verified, n_from_memory;
    bool mem_pending; /* a copy out of the guest's memory is under way */
};

typedef struct prof_sysroot prof_sysroot;

struct prof_sysroot_config {
    const char *dir;              /* --sysroot, NULL: off (every capture answers NULL); borrowed */
    const struct prof_arch *arch; /* the guest's: its ELF machine, the user half */
    /* With no --sysroot file for a mapping (no --sysroot, or another build there): unwind by
     * the .eh_frame of the guest's mapped file and name by its .dynsym (memimage.h). */
    bool from_memory;
    bool verbose;
    prof_model *model; /* borrowed: filled with each address space's mappings */
};

/* modules is borrowed and must outlive the sysroot. */
prof_sysroot *prof_sysroot_new(const struct prof_sysroot_config *cfg, prof_modules *modules);
void prof_sysroot_free(prof_sysroot *sr); /* NULL is a no-op */
/* Its figures so far (borrowed, valid while sr). */
const struct prof_sysroot_counters *prof_sysroot_counters(const prof_sysroot *sr);

/* Before a stop's captures: bounds the cache of address spaces (no capture points into it). */
void prof_sysroot_begin_stop(prof_sysroot *sr);
/* The guest rebooted: address spaces start over (the caller drops every capture's pointer). */
void prof_sysroot_reset(prof_sysroot *sr);
/* While stopped: the address space of the task on vCPU i (borrowed, valid until the next
 * begin_stop or reset), or NULL when --sysroot and from_memory are off or the OS adapter cannot
 * tell. Sets task->user_leaf_only to false (its user stack is to be copied) unless the space is
 * known to have no verified file and no copy under way. */
struct user_space *prof_sysroot_capture(prof_sysroot *sr, prof_os *os, int i,
                                        struct prof_task *task, const struct prof_os_mem *mem);
/* While stopped, after the sample's own reads: copies more of the guest's mapped files that no
 * sysroot file serves, through cpu's page tables (the task of u on it), within the budget. NULL
 * u is a no-op. */
void prof_sysroot_copy_images(prof_sysroot *sr, struct user_space *u, prof_os *os,
                              const struct prof_vcpu *cpu, const struct prof_os_mem *mem);
/* After the guest resumed: matches u's mappings against the sysroot and loads the unwinder
 * (once), and hands it the guest's own copies finished since. Returns u as the model has it
 * now (a strict space: one mapping per exec mapping, the unwinder's tables for all; borrowed
 * until the next begin_stop or reset); NULL u is a no-op that returns NULL. */
const prof_space *prof_sysroot_build(prof_sysroot *sr, struct user_space *u);
/* The index of the exec mapping of u holding pc, or -1. */
int prof_user_space_find(const struct user_space *u, uint64_t pc);

#endif
