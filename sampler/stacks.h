/* Private to sampler/: stack building (stacks.c), after the guest resumed.
 *
 * Consumes what capture copied of one vCPU (capture.h) and returns its stack as unsymbolized
 * frames (struct out_sample: pcs and module indexes, no names). It unwinds from the copied
 * windows only, adds modules through the session's prof_modules, counts into the session's
 * its own counters, and calls nothing back in the session or in capture. */
#ifndef PROF_STACKS_H
#define PROF_STACKS_H

#include "arch.h"
#include "capture.h"
#include "modules.h"
#include "output.h"
#include "sampler.h"
#include "symbols.h"
#include "unwind.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* A vCPU's whole stack as unsymbolized frames, outermost first (see struct out_sample). */
struct prof_stack {
    int cpu;
    bool skipped;
    const char *skip_reason;
    struct out_sample sample; /* frames point into `frames` */
    struct out_frame *frames;
    int cap;
    bool at_kernel_entry; /* counted so (prof_stack_counters.at_kernel_entry) */
};

void prof_stack_free(struct prof_stack *st); /* its frames; st itself is the caller's */

struct prof_stack_config {
    int max_depth;                /* frames per walk */
    bool verbose;                 /* say why a walk failed */
    const struct prof_arch *arch; /* the guest's: pc and sp registers, the user half */
    unw_space *kernel_space;      /* borrowed: the kernel's unwind tables */
    const sym_table *kernel_syms; /* borrowed, NULL without --kernel: tells kernel entries */
};

typedef struct prof_stack_builder prof_stack_builder;

/* modules is borrowed and must outlive the builder. */
prof_stack_builder *prof_stack_builder_new(const struct prof_stack_config *cfg,
                                           prof_modules *modules);
void prof_stack_builder_free(prof_stack_builder *sb); /* NULL is a no-op */
/* What the stacks built so far looked like (borrowed, valid while sb). */
const struct prof_stack_counters *prof_stack_builder_counters(const prof_stack_builder *sb);

/* For a process in the kernel that has not published its user register frame yet (a sample in
 * an entry stub): walks c's copied kernel stack and, if it steps into user space, sets
 * c->entry_regs. Capture calls it while the guest is stopped, and only then, because the user
 * stack must be copied before the guest runs on. */
bool prof_recover_user_regs(prof_stack_builder *sb, struct cpu_capture *c);
/* At the first instruction of a kernel function (an entry stub, or the common entry code it
 * jumps to) the entry has not saved the user registers yet: what the OS published is an
 * earlier entry's. When the kernel's CFI leads from here to user space, those registers (the
 * hardware's frame) are this entry's: true, in c->entry_regs, as prof_recover_user_regs. */
bool prof_recover_unsaved_entry(prof_stack_builder *sb, struct cpu_capture *c);

/* Builds the stack of c (vCPU i of the stop) into st (frames array grown as needed). */
void prof_build_stack(prof_stack_builder *sb, struct cpu_capture *c, int i, struct prof_stack *st);

/* st, built before, stands for one more sample (a capturing target's repeat): counted again
 * where the counters describe the profile's samples (at_kernel_entry), not the captures. */
void prof_stack_count_repeat(prof_stack_builder *sb, const struct prof_stack *st);

/* Prints st innermost first, like eu-stack and gdb, with names from names (--one-shot). */
void prof_stack_print(const struct cpu_capture *c, out_names *names, const struct prof_stack *st,
                      bool show_addresses, FILE *out);

#endif
