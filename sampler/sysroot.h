/* Private to sampler/: --sysroot, user stacks unwound with the guest's own files (sysroot.c).
 *
 * The session owns one prof_sysroot. While the guest is stopped, capture asks it for the
 * address space of a vCPU's task (prof_sysroot_capture); after the guest resumed, the session
 * has it match that space's files (prof_sysroot_build), and stack building reads the space.
 * It adds modules through the session's prof_modules and calls nothing else in sampler/. */
#ifndef PROF_SYSROOT_H
#define PROF_SYSROOT_H

#include "arch.h"
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
    bool *verified;                 /* n: a sysroot file with the guest's build-id */
    uint32_t *module;               /* n: its module (verified maps only) */
    unw_space *space;               /* owned; NULL until built or when nothing matched */
    int n_verified;
};

typedef struct prof_sysroot prof_sysroot;

struct prof_sysroot_config {
    const char *dir;              /* --sysroot, NULL: off (every capture answers NULL); borrowed */
    const struct prof_arch *arch; /* the guest's: its ELF machine, the user half */
    bool verbose;
};

/* modules and counters are borrowed and must outlive the sysroot. */
prof_sysroot *prof_sysroot_new(const struct prof_sysroot_config *cfg, prof_modules *modules,
                               struct prof_counters *counters);
void prof_sysroot_free(prof_sysroot *sr); /* NULL is a no-op */

/* Before a stop's captures: bounds the cache of address spaces (no capture points into it). */
void prof_sysroot_begin_stop(prof_sysroot *sr);
/* The guest rebooted: address spaces start over (the caller drops every capture's pointer). */
void prof_sysroot_reset(prof_sysroot *sr);
/* While stopped: the address space of the task on vCPU i (borrowed, valid until the next
 * begin_stop or reset), or NULL when --sysroot is off or the OS adapter cannot tell. Sets
 * task->user_leaf_only to false (its user stack is to be copied) unless the space is known to
 * have no verified file. */
struct user_space *prof_sysroot_capture(prof_sysroot *sr, prof_os *os, int i,
                                        struct prof_task *task, const struct prof_os_mem *mem);
/* After the guest resumed: matches u's mappings against the sysroot and loads the unwinder,
 * once. NULL is a no-op. */
void prof_sysroot_build(prof_sysroot *sr, struct user_space *u);
/* The index of the exec mapping of u holding pc, or -1. */
int prof_user_space_find(const struct user_space *u, uint64_t pc);

#endif
