/* Private to sampler/: samples a capturing target took late, after the vCPU entered the kernel
 * (skid, docs/plugin.md "The moment of a sample"), told apart by how long their trigger waited
 * and moved back to where the entry interrupted the guest. */
#ifndef PROF_SKID_H
#define PROF_SKID_H

#include "capture.h"
#include "sampler.h"

#include <stdbool.h>
#include <stdint.h>

/* A flag that waited this long (us) was not waiting on a running vCPU: the plugin's callback
 * runs at the start of every block, and a running vCPU starts one within a few microseconds (a
 * block is at most 512 guest instructions; chaining does not skip the callback). Measured on
 * this project's loaded 2-core host, demo guest, -smp 4 under MTTCG, timer at 1 kHz: 44% of
 * the flags were taken within 10 us, and 0.6% of those on the first instruction of a kernel
 * entry from user space (the gdbstub's own share: 0.8%); of the older ones 8-29% per bucket
 * up to 10 ms and 67% past it were on one: they waited for the host to run the thread, and
 * QEMU delivered the interrupt that came due meanwhile before the flag was seen. A flag raised
 * during that delivery and moved all the same is off by the delivery alone, microseconds. */
#define PROF_SKID_AGE_US 10u

enum prof_skid {
    PROF_SKID_NONE,  /* taken where the vCPU was */
    PROF_SKID_MOVED, /* on a kernel entry its flag predates: count it at c->entry_regs */
};

/* Counts c's flag age (counters->flag_age, entry_flag_age) and says whether the sample is one
 * that skidded onto the first instruction of a kernel entry from user space (at_entry: the
 * caller's kernel walk from it left the kernel in one frame), with the user registers the
 * entry saved recovered (c->entry_regs): the caller then counts it there, in user mode, and
 * counters->skid_moved. */
enum prof_skid prof_skid_check(bool at_entry, const struct cpu_capture *c,
                               struct prof_stack_counters *counters);

/* Whether c's trigger waited past PROF_SKID_AGE_US under the timer trigger. */
bool prof_skid_aged(const struct cpu_capture *c);

/* The bucket of an age in us: <10, <20, <50, <100, <200, <1000, <10000, more. */
int prof_skid_bucket(uint32_t age_us);

#endif
