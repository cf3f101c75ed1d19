/* Freestanding helpers: memory, strings, and a small printf for the serial port (COM1 on
 * x86_64, the virt machine's UART on riscv64: both kernels build this file). */
#include <stdarg.h>

#if defined(GUEST_LOWHALF)
#include "riscv64-lowhalf/lowhalf.h"
#elif defined(__riscv)
#include "riscv64/rv.h"
#elif defined(__aarch64__)
#include "aarch64/a64.h"
#else
#include "kernel.h"
#endif

void *memcpy(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    while (n--)
        *d++ = *s++;
    return dst;
}

void *memset(void *dst, int c, size_t n)
{
    uint8_t *d = dst;
    while (n--)
        *d++ = (uint8_t)c;
    return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (; n; n--, x++, y++)
        if (*x != *y)
            return *x - *y;
    return 0;
}

size_t strlen(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

int strncmp(const char *a, const char *b, size_t n)
{
    for (; n; n--, a++, b++) {
        if (*a != *b)
            return (uint8_t)*a - (uint8_t)*b;
        if (!*a)
            return 0;
    }
    return 0;
}

int strcmp(const char *a, const char *b)
{
    return strncmp(a, b, (size_t)-1);
}

/* One line at a time on the shared UART: every print takes this lock (interrupts off). */
static struct spinlock print_lock;

static void puts_raw(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n')
            serial_putc('\r');
        serial_putc(s[i]);
    }
}

static void put_num(uint64_t v, unsigned base, int neg)
{
    char buf[24];
    int i = 0;
    do {
        buf[i++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    if (neg)
        buf[i++] = '-';
    while (i)
        serial_putc(buf[--i]);
}

/* %d %u %x %s %c %p, with an optional l (all integers are printed as 64-bit when l is given). */
static void kvprintf(const char *fmt, va_list ap)
{
    for (; *fmt; fmt++) {
        if (*fmt != '%') {
            if (*fmt == '\n')
                serial_putc('\r');
            serial_putc(*fmt);
            continue;
        }
        int is_long = 0;
        fmt++;
        while (*fmt == 'l') {
            is_long = 1;
            fmt++;
        }
        switch (*fmt) {
        case 'd': {
            int64_t v = is_long ? va_arg(ap, int64_t) : va_arg(ap, int);
            put_num(v < 0 ? -(uint64_t)v : (uint64_t)v, 10, v < 0);
            break;
        }
        case 'u':
            put_num(is_long ? va_arg(ap, uint64_t) : va_arg(ap, unsigned), 10, 0);
            break;
        case 'x':
            put_num(is_long ? va_arg(ap, uint64_t) : va_arg(ap, unsigned), 16, 0);
            break;
        case 'p':
            serial_putc('0');
            serial_putc('x');
            put_num((uint64_t)va_arg(ap, void *), 16, 0);
            break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            puts_raw(s ? s : "(null)", strlen(s ? s : "(null)"));
            break;
        }
        case 'c':
            serial_putc((char)va_arg(ap, int));
            break;
        default:
            serial_putc('%');
            serial_putc(*fmt);
        }
    }
}

void kputs_n(const char *s, size_t n)
{
    uint64_t flags = irq_save();
    spin_lock(&print_lock);
    puts_raw(s, n);
    spin_unlock(&print_lock);
    irq_restore(flags);
}

void kprintf(const char *fmt, ...)
{
    va_list ap;
    uint64_t flags = irq_save();
    spin_lock(&print_lock);
    va_start(ap, fmt);
    kvprintf(fmt, ap);
    va_end(ap);
    spin_unlock(&print_lock);
    irq_restore(flags);
}

void panic(const char *fmt, ...)
{
    va_list ap;
    irq_off();
    kprintf("panic: ");
    va_start(ap, fmt);
    kvprintf(fmt, ap);
    va_end(ap);
    kprintf("\n");
    for (;;)
        cpu_halt();
}
