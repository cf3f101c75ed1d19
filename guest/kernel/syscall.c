/* System calls (int $0x80). SYS_WORK does measurable work in named kernel functions so that
 * sampled stacks cross from user to kernel: sys_work -> kwork_checksum -> kwork_mix. */
#include "kernel.h"

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
    uint64_t pid = (uint64_t)current->pid; /* before sti: once preemptible, it may migrate */
    __asm__ volatile("sti");
    uint64_t r = kwork_checksum(pid, n);
    __asm__ volatile("cli");
    return r;
}

/* User memory is reachable directly (the process's page tables are loaded); only the range is
 * checked, a bad but in-range pointer faults and kills the process. The bytes are copied first
 * (into this CPU's buffer; system calls run with interrupts off, so nothing else uses it): a
 * fault while the print lock is held would deadlock the kill message. */
static NOINLINE uint64_t sys_write(uint64_t buf, uint64_t len)
{
    static char copy[MAX_CPUS][4096];
    if (buf >= 0x800000000000ull || len > 4096 || buf + len >= 0x800000000000ull)
        return (uint64_t)-1;
    char *dst = copy[cpu_id()];
    memcpy(dst, (const char *)buf, len);
    kputs_n(dst, len);
    return len;
}

static NOINLINE uint64_t sys_sleep_until(uint64_t tick)
{
    proc_sleep_until(tick);
    return 0;
}

void syscall_dispatch(struct qprof_abi_regs *r)
{
    switch (r->rax) {
    case SYS_WRITE:
        r->rax = sys_write(r->rdi, r->rsi);
        break;
    case SYS_SLEEP_UNTIL:
        r->rax = sys_sleep_until(r->rdi);
        break;
    case SYS_TICKS:
        r->rax = clock_page.ticks;
        break;
    case SYS_WORK:
        r->rax = sys_work(r->rdi);
        break;
    case SYS_GETPID:
        r->rax = (uint64_t)current->pid;
        break;
    case SYS_EXIT:
        proc_exit((int)r->rdi);
    default:
        r->rax = (uint64_t)-1;
    }
}
