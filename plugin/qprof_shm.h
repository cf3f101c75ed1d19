/* The plugin's side of the shared rings (qprof_ring.h), private to qprof-plugin.so and free of
 * QEMU's API so that tests/profiler/test_plugin_ring.c runs it under ASan.
 *
 * What a client can write is kept apart from what the plugin trusts:
 * - the rings' memfd is sealed (F_SEAL_FUTURE_WRITE, no shrinking or growing): a client maps it
 *   read-only, and neither mmap, mprotect, write nor ftruncate gives it more;
 * - each session gets a fresh qpr_tails memfd, its only writable memory; the plugin reads a tail
 *   as an untrusted number, and stops reading a session's tails when it ends;
 * - the geometry, the heads and every length the plugin works with are in its own memory: a
 *   sample is captured into a private buffer and copied into its slot, never read back.
 * One producer per ring (its vCPU's thread); sessions are opened and closed by one thread (the
 * listener). */
#ifndef QPROF_SHM_H
#define QPROF_SHM_H

#include "qprof_ring.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct qps_shared qps_shared;

/* Makes the sealed rings' memfd for n_vcpus (at most QPR_MAX_VCPUS) of QEMU's target and writes
 * its header. NULL with *err set to a negative errno on failure. Free with qps_shared_free. */
qps_shared *qps_shared_new(uint32_t n_vcpus, const char *target, int *err);
/* Closes and unmaps everything; NULL is a no-op. No producer may run. */
void qps_shared_free(qps_shared *s);

/* The rings' fd to hand a client (read-only by its seals), and its size. Owned by s. */
int qps_ring_fd(const qps_shared *s);
uint64_t qps_map_size(const qps_shared *s);
/* The header, for the plugin to publish its status words in. Owned by s. */
struct qpr_header *qps_header(qps_shared *s);

/* Starts a session: a fresh qpr_tails memfd with every tail at its ring's head, which the
 * producers read from now on. Returns the fd to hand the client (the caller closes it after
 * sending), or a negative errno. Only one session at a time. */
int qps_session_open(qps_shared *s);
/* Ends the session: waits until no producer reads its tails, then unmaps them. The client may
 * keep its mapping; the plugin never looks at it again. */
void qps_session_close(qps_shared *s);

/* Whether ring vcpu has a free slot now, counting the sample lost when it has none (no session:
 * false, nothing counted). Capturing is worth it only then; qps_publish checks again. */
bool qps_reserve(qps_shared *s, uint32_t vcpu);
/* Copies the captured sample (the caller's own memory; its lengths clamped to their arrays'
 * sizes) into ring vcpu's next slot and publishes it, or counts it lost when there is no room or
 * no session. t0_ns: when the capture began (CLOCK_MONOTONIC), so that the slot's cost_ns counts
 * the copy too; 0 keeps the sample's cost_ns. From vcpu's thread only. */
void qps_publish(qps_shared *s, uint32_t vcpu, const struct qpr_sample *sample, uint64_t t0_ns);
/* trigger=timer: n idle ticks for vcpu, one per interval it waited (from the timer thread). */
void qps_idle_tick(qps_shared *s, uint32_t vcpu, uint32_t n);

#endif
