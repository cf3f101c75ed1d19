/* Runs an unwinding fixture until it stops itself, records what eu-stack prints for it, and
 * captures its registers and stack the way the profiler would get a guest's. */
#ifndef UNW_TEST_CAPTURE_H
#define UNW_TEST_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "unwind.h"

#define CAPTURE_MAX_NAMES 64

struct capture {
    struct unw_regs regs;
    uint64_t stack_addr; /* the stack bytes start at rsp */
    uint8_t *stack;      /* malloc'd */
    size_t stack_len;
    uint64_t stack_end; /* end of the stack mapping */
    /* eu-stack's frames for the same stopped process, innermost first */
    int n_eu;
    char *eu_names[CAPTURE_MAX_NAMES];
    uint64_t eu_pcs[CAPTURE_MAX_NAMES];
};

/* Returns 0, -EPERM when ptrace is not permitted (skip), -ENOENT when eu-stack is missing
 * and with_eu_stack is set, another negative code on failure (message on stderr). */
int capture_fixture(const char *fixture, const char *mode, int with_eu_stack, struct capture *c);
void capture_release(struct capture *c);

#endif
