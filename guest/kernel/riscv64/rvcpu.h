/* riscv64 demo kernels (kernel/riscv64/, kernel/riscv64-lowhalf/): what does not depend on
 * where the kernel is mapped: CSR access, interrupts, spinlocks, PTE bits and lib.c. */
#ifndef GUEST_RVCPU_H
#define GUEST_RVCPU_H

#include <stddef.h>
#include <stdint.h>

#define NOINLINE  __attribute__((noinline, noclone))
#define barrier() __asm__ volatile("" ::: "memory")

#define TIMEBASE_HZ 10000000 /* virt's time CSR */

#define SSTATUS_SIE  (1ull << 1)
#define SSTATUS_SPIE (1ull << 5)
#define SSTATUS_SPP  (1ull << 8)
#define SSTATUS_SUM  (1ull << 18)
#define SIE_STIE     (1ull << 5)
#define SATP_SV39    (8ull << 60)

#define PTE_V 0x01ull
#define PTE_R 0x02ull
#define PTE_W 0x04ull
#define PTE_X 0x08ull
#define PTE_U 0x10ull
#define PTE_G 0x20ull
#define PTE_A 0x40ull
#define PTE_D 0x80ull

#define csr_read(csr)                                                                              \
    ({                                                                                             \
        uint64_t v_;                                                                               \
        __asm__ volatile("csrr %0, " #csr : "=r"(v_));                                             \
        v_;                                                                                        \
    })
#define csr_write(csr, v) __asm__ volatile("csrw " #csr ", %0" ::"rK"(v) : "memory")
#define csr_set(csr, v)   __asm__ volatile("csrs " #csr ", %0" ::"rK"(v) : "memory")
#define csr_clear(csr, v) __asm__ volatile("csrc " #csr ", %0" ::"rK"(v) : "memory")

static inline uint64_t irq_save(void)
{
    uint64_t s;
    __asm__ volatile("csrrc %0, sstatus, %1" : "=r"(s) : "r"(SSTATUS_SIE) : "memory");
    return s;
}
static inline void irq_restore(uint64_t s)
{
    if (s & SSTATUS_SIE)
        csr_set(sstatus, SSTATUS_SIE);
}
static inline void irq_off(void)
{
    csr_clear(sstatus, SSTATUS_SIE);
}
static inline void irq_on(void)
{
    csr_set(sstatus, SSTATUS_SIE);
}

static inline void cpu_halt(void) /* interrupts off: waits for ever */
{
    __asm__ volatile("wfi" ::: "memory");
}
void serial_putc(char c);

/* ---- spinlock (interrupts off while held) ---- */
struct spinlock {
    volatile uint32_t locked;
};
static inline void spin_lock(struct spinlock *l)
{
    while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE))
        while (l->locked)
            ;
}
static inline void spin_unlock(struct spinlock *l)
{
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

/* ---- lib.c ---- */
void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
void kprintf(const char *fmt, ...);
void kputs_n(const char *s, size_t n);
__attribute__((noreturn)) void panic(const char *fmt, ...);

#endif
