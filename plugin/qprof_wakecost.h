/* What one wake-up of the plugin's timer thread costs a thread that shares its host CPU: the
 * guest's vCPU, where the host has no CPU to spare (auto's rule, qprof_ring.h). Free of QEMU's
 * API, like qprof_shm.h, so that tests/profiler/test_plugin_ring.c runs it. */
#ifndef QPROF_WAKECOST_H
#define QPROF_WAKECOST_H

#include <stdint.h>

struct qpw_cost {
    uint64_t own_ns;   /* the sleeping thread's own CPU time per wake-up */
    uint64_t taken_ns; /* what a busy thread on the same CPU loses per wake-up, own_ns at least */
    int probed;        /* 1: measured beside a busy thread; 0: could not be, taken_ns is own_ns */
};

/* Measures from the calling thread: wakes sleeps of interval_ns on its own, then the same in
 * turns with long sleeps while a busy thread pinned to this thread's CPU (and this thread, for
 * the while) counts its progress; the calling thread's affinity is given back. Takes about
 * 3 x wakes x interval_ns of wall time, the busy thread running for two thirds of it. */
struct qpw_cost qpw_measure(int wakes, uint64_t interval_ns);

#endif
