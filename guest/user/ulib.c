#include "ulib.h"

NOINLINE uint64_t sys_call(uint64_t num, uint64_t a, uint64_t b)
{
#if defined(__riscv)
    register uint64_t a0 __asm__("a0") = a;
    register uint64_t a1 __asm__("a1") = b;
    register uint64_t a7 __asm__("a7") = num;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a7) : "memory");
    return a0;
#elif defined(__aarch64__)
    register uint64_t x0 __asm__("x0") = a;
    register uint64_t x1 __asm__("x1") = b;
    register uint64_t x8 __asm__("x8") = num;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x1), "r"(x8) : "memory");
    return x0;
#else
    uint64_t ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(num), "D"(a), "S"(b) : "memory");
    return ret;
#endif
}

/* Reads the kernel's clock page: no system call (see USER_CLOCK_VA in layout.h). */
NOINLINE uint64_t ticks(void)
{
    return *(const volatile uint64_t *)USER_CLOCK_VA;
}

NOINLINE int getpid(void)
{
    return (int)sys_call(SYS_GETPID, 0, 0);
}

NOINLINE void sleep_until(uint64_t tick)
{
    sys_call(SYS_SLEEP_UNTIL, tick, 0);
}

NOINLINE uint64_t kernel_work(uint64_t n)
{
    return sys_call(SYS_WORK, n, 0);
}

void line_str(struct line *l, const char *s)
{
    while (*s && l->len < (int)sizeof l->buf - 1)
        l->buf[l->len++] = *s++;
}

void line_num(struct line *l, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n && l->len < (int)sizeof l->buf - 1)
        l->buf[l->len++] = tmp[--n];
}

void line_emit(struct line *l)
{
    l->buf[l->len++] = '\n';
    sys_call(SYS_WRITE, (uint64_t)l->buf, (uint64_t)l->len);
    l->len = 0;
}

NOINLINE int duty_cycle_pause(void)
{
    uint64_t now = ticks();
    if (now % DUTY_PERIOD < DUTY_WORK)
        return 0;
    sleep_until((now / DUTY_PERIOD + 1) * DUTY_PERIOD);
    return 1;
}

#if defined(__riscv) || defined(__aarch64__)
/* gcc for riscv64 and aarch64 clears a struct line by calling memset (x86_64's inlines it). */
void *memset(void *dst, int c, unsigned long n);
void *memset(void *dst, int c, unsigned long n)
{
    unsigned char *d = dst;
    while (n--)
        *d++ = (unsigned char)c;
    return dst;
}
#endif
