/* Private to sampler/: --exact's counts, block by block, attributed to the code they ran.
 *
 * A block's address says kernel or user (the architecture's halves). A kernel block is the
 * kernel module's. A user block is the --user-dir binary whose code at the block's address (its
 * link address: the demo guest and other static, non-PIE programs run there) has the block's
 * bytes (the hash the plugin took of them), so that two binaries linked at the same address are
 * told apart by their code. Every process that runs one binary counts for that binary. Code that
 * several binaries have identically at one address counts for all of them together, under their
 * names joined by '|'; code no binary has counts as unknown user code. Session.c calls it; it
 * uses modules.c only. */
#ifndef PROF_EXACT_H
#define PROF_EXACT_H

#include "modules.h"
#include "sampler.h"

struct prof_exact_env {
    struct prof_addr_split split;
    prof_modules *modules;
    out_profile *profile;
    const sym_store *store; /* --user-dir's binaries; may be NULL */
};

/* Adds c's blocks to env->profile (out_profile_add_exact) and fills *st. */
void prof_exact_attribute(const struct prof_exact_counts *c, const struct prof_exact_env *env,
                          struct prof_exact_summary *st);

#endif
