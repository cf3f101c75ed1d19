/* Private to sampler/: samples a capturing target took late, after the vCPU entered the kernel
 * (skid, docs/plugin.md "The moment of a sample"), told apart by how long their trigger waited
 * and moved back to where the entry interrupted the guest. */
#ifndef PROF_SKID_H
#define PROF_SKID_H

#include "capture.h"
#include "sampler.h"
#include "symbols.h"

#include <stdbool.h>
#include <stdint.h>

/* A flag that waited this long (us) was not waiting on a running vCPU: the plugin's callback
 * runs at the start of every block, and a running vCPU starts one within a few microseconds
 * (a block is at most 512 guest instructions; chaining does not skip the callback). Measured
 * on a loaded 2-core host (docs/plugin.md): flags on vCPUs that were running took under 50 us;
 * those that waited across an interrupt's delivery waited for the host to run the thread
 * again, a scheduler slice (milliseconds). */
#define PROF_SKID_AGE_US 200u

enum prof_skid {
    PROF_SKID_NONE,  /* taken where the vCPU was */
    PROF_SKID_MOVED, /* on a kernel entry its flag predates: count it at c->entry_regs */
};

/* Counts c's flag age (counters->flag_age, entry_flag_age) and says whether the sample is one
 * that skidded onto the first instruction of a kernel entry from user space, with the user
 * registers the entry saved recovered (c->entry_regs): the caller then counts it there, in
 * user mode, and counters->skid_moved. kernel_syms may be NULL (no entries known). */
enum prof_skid prof_skid_check(const sym_table *kernel_syms, const struct cpu_capture *c,
                               struct prof_stack_counters *counters);

/* Whether c's trigger waited past PROF_SKID_AGE_US under the timer trigger. */
bool prof_skid_aged(const struct cpu_capture *c);

/* The bucket of an age in us: <10, <100, <1000, <10000, more. */
int prof_skid_bucket(uint32_t age_us);

#endif
