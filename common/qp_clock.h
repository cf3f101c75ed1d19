/* The monotonic clock in nanoseconds, as the targets and OS adapters time their deadlines and
 * intervals (qprof-plugin.so keeps its own: it links nothing of qprof's). */
#ifndef QP_CLOCK_H
#define QP_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t qp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
