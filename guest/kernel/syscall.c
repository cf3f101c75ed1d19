/* System calls (x86_64 int $0x80, riscv64 ecall; both kernels build this file). SYS_WORK does
 * measurable work in named kernel functions so that sampled stacks cross from user to kernel:
 * sys_work -> kwork_checksum -> kwork_mix. */
#if defined(GUEST_LOWHALF)
#include "riscv64-lowhalf/lowhalf.h"
#elif defined(__riscv)
#include "riscv64/rv.h"
#elif defined(__aarch64__)
#include "aarch64/a64.h"
#else
#include "kernel.h"
#endif

/* Same loop body as the sys program's user_mix, so equal iteration counts cost equal time. */
NOINLINE uint64_t kwork_mix(uint64_t x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + i;
        x ^= x >> 29;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

NOINLINE uint64_t kwork_checksum(uint64_t seed, uint64_t n)
{
    uint64_t x = kwork_mix(seed, n);
    return x ^ (x >> 17);
}

/* Runs with interrupts enabled so the timer can preempt it. */
NOINLINE uint64_t sys_work(uint64_t n)
{
    if (n > 10000000)
        n = 10000000;
    uint64_t pid = (uint64_t)current->pid; /* before irq_on: once preemptible, it may migrate */
    irq_on();
    uint64_t r = kwork_checksum(pid, n);
    irq_off();
    return r;
}

/* A kernel on the process's page tables reads user memory directly; one with a table of its own
 * (riscv64-lowhalf) defines user_read(dst, src, n), which walks the process's table. */
#ifndef user_read
#define user_read(dst, src, n) (memcpy((dst), (const void *)(src), (n)), 0)
#endif

/* User memory is reachable directly (the process's page tables are loaded); only the range is
 * checked, a bad but in-range pointer faults and kills the process. The bytes are copied first
 * (into this CPU's buffer; system calls run with interrupts off, so nothing else uses it): a
 * fault while the print lock is held would deadlock the kill message. */
static NOINLINE uint64_t sys_write(uint64_t buf, uint64_t len)
{
    static char copy[MAX_CPUS][4096];
    if (buf >= USER_ADDR_END || len > 4096 || buf + len >= USER_ADDR_END)
        return (uint64_t)-1;
    char *dst = copy[cpu_id()];
    if (user_read(dst, buf, len) < 0)
        return (uint64_t)-1;
    kputs_n(dst, len);
    return len;
}

static NOINLINE uint64_t sys_sleep_until(uint64_t tick)
{
    proc_sleep_until(tick);
    return 0;
}

/* The number and arguments where the architecture's convention puts them (kernel.h, rv.h:
 * SYSCALL_NR, SYSCALL_ARG0/1, SYSCALL_RET). */
void syscall_dispatch(trap_frame_t *r)
{
    switch (SYSCALL_NR(r)) {
    case SYS_WRITE:
        SYSCALL_RET(r) = sys_write(SYSCALL_ARG0(r), SYSCALL_ARG1(r));
        break;
    case SYS_SLEEP_UNTIL:
        SYSCALL_RET(r) = sys_sleep_until(SYSCALL_ARG0(r));
        break;
    case SYS_TICKS:
        SYSCALL_RET(r) = clock_page.ticks;
        break;
    case SYS_WORK:
        SYSCALL_RET(r) = sys_work(SYSCALL_ARG0(r));
        break;
    case SYS_GETPID:
        SYSCALL_RET(r) = (uint64_t)current->pid;
        break;
    case SYS_EXIT:
        proc_exit((int)SYSCALL_ARG0(r));
    default:
        SYSCALL_RET(r) = (uint64_t)-1;
    }
}
