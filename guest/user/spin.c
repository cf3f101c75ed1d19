/* spin: CPU-bound. Every batch runs hot_a for 3*BATCH iterations and hot_b for BATCH
 * iterations of the same loop body, so hot_a gets 75% and hot_b 25% of spin's CPU time.
 * Stack: _start -> main -> compute -> hot_a | hot_b. Batches are never split by the duty
 * cycle (it is checked between batches), so the ratio holds whatever the sleeping. */
#include "ulib.h"

#define BATCH 20000

NOINLINE uint64_t hot_a(uint64_t x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + i;
        x ^= x >> 29;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

NOINLINE uint64_t hot_b(uint64_t x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + i;
        x ^= x >> 29;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

NOINLINE uint64_t compute(uint64_t x, uint64_t batch)
{
    x = hot_a(x, 3 * batch);
    x = hot_b(x, batch);
    return x;
}

static volatile uint64_t sink;

NOINLINE static void report(const char *what, int pid, uint64_t a, uint64_t b)
{
    struct line l = {.len = 0};
    if (what[0] == 's') {
        line_str(&l, "spin[");
        line_num(&l, (uint64_t)pid);
        line_str(&l, "] iter=");
        line_num(&l, a);
    } else {
        line_str(&l, "rate pid=");
        line_num(&l, (uint64_t)pid);
        line_str(&l, " iters=");
        line_num(&l, a);
        line_str(&l, " ticks=");
        line_num(&l, b);
    }
    line_emit(&l);
}

int main(void)
{
    int pid = getpid();
    uint64_t x = (uint64_t)pid, iters = 0, rate_iters = 0;
    uint64_t start = ticks(), next_print = start + 25, rate_start = start;
    for (;;) {
        x = compute(x, BATCH);
        sink = x;
        iters++;
        rate_iters++;
        duty_cycle_pause();
        uint64_t now = ticks();
        if (now >= next_print) {
            report("spin", pid, iters, 0);
            next_print = now + 25;
        }
        if (now - rate_start >= DUTY_PERIOD) {
            report("rate", pid, rate_iters, now - rate_start);
            rate_iters = 0;
            rate_start = now;
        }
    }
}
