/* Tiny user library for the demo programs: system calls and line output. */
#ifndef GUEST_ULIB_H
#define GUEST_ULIB_H

#include <stdint.h>

#include "../include/layout.h"

#define NOINLINE __attribute__((noinline, noclone))

uint64_t sys_call(uint64_t num, uint64_t a, uint64_t b);
uint64_t ticks(void);
int getpid(void);
void sleep_until(uint64_t tick);
uint64_t kernel_work(uint64_t n);

/* Line builder: append text and numbers, then emit the whole line with one write. */
struct line {
    char buf[128];
    int len;
};
void line_str(struct line *l, const char *s);
void line_num(struct line *l, uint64_t v);
void line_emit(struct line *l);

/* The shared duty cycle: returns 1 (after sleeping to the next period) when the current period's
 * work window (DUTY_WORK of DUTY_PERIOD ticks) is over. */
int duty_cycle_pause(void);

#endif
