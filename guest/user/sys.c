/* sys: half of its CPU time in user code (user_work -> user_mix), half inside the SYS_WORK
 * system call (kernel sys_work -> kwork_checksum -> kwork_mix): both sides run ITER iterations
 * of the same loop body per call, but for user_mix's shift. That shift keeps user_mix's bytes
 * apart from spin's hot_a, which the compiler may place at the same address in spin (gcc 14
 * does): --exact tells user code apart by address and bytes, and would give identical code at
 * one address to both programs ("spin|sys"). Stack: _start -> main -> user_work -> user_mix, and
 * _start -> main -> kernel_work -> sys_call | int 0x80 | isr_dispatch -> syscall_dispatch ->
 * sys_work -> kwork_checksum -> kwork_mix. */
#include "ulib.h"

#define ITER 40000

NOINLINE uint64_t user_mix(uint64_t x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + i;
        x ^= x >> 31;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

NOINLINE uint64_t user_work(uint64_t seed, uint64_t n)
{
    uint64_t x = user_mix(seed, n);
    return x ^ (x >> 17);
}

static volatile uint64_t sink;

NOINLINE static void report(int pid, uint64_t calls, uint64_t rate_calls, uint64_t rate_ticks)
{
    struct line l = {.len = 0};
    line_str(&l, "sys[");
    line_num(&l, (uint64_t)pid);
    line_str(&l, "] calls=");
    line_num(&l, calls);
    line_emit(&l);
    if (!rate_ticks)
        return;
    line_str(&l, "rate pid=");
    line_num(&l, (uint64_t)pid);
    line_str(&l, " iters=");
    line_num(&l, rate_calls);
    line_str(&l, " ticks=");
    line_num(&l, rate_ticks);
    line_emit(&l);
}

int main(void)
{
    int pid = getpid();
    uint64_t calls = 0, rate_calls = 0;
    uint64_t start = ticks(), next_print = start + 25, rate_start = start;
    for (;;) {
        sink = user_work((uint64_t)pid, ITER);
        sink = kernel_work(ITER);
        calls++;
        rate_calls++;
        duty_cycle_pause();
        uint64_t now = ticks();
        if (now >= next_print) {
            int with_rate = now - rate_start >= DUTY_PERIOD;
            report(pid, calls, rate_calls, with_rate ? now - rate_start : 0);
            if (with_rate) {
                rate_calls = 0;
                rate_start = now;
            }
            next_print = now + 25;
        }
    }
}
