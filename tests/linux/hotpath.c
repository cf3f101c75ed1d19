/* The Linux test guest's user workload for --sysroot (tests/linux/make-guest.sh builds it with
 * the host's cc -O2 -fomit-frame-pointer, dynamically linked against the host's libc, which is
 * the guest's): main -> outer_work -> middle_work -> hot_leaf, where hot_leaf spins for ever.
 * No frame pointers, so only DWARF CFI finds the callers. Each caller uses the result of its
 * call, so that none becomes a tail call and every frame stays on the stack.
 * HOTPATH_VARIANT builds another body (another build-id) with the same names, for the test that
 * a sysroot file of another build is not used. */
#include <stdio.h>

static volatile unsigned long sink;
static volatile int stop; /* never set: the loop cannot be proven endless */

__attribute__((noinline)) unsigned long hot_leaf(unsigned long n)
{
    while (!stop)
        sink += n;
#ifdef HOTPATH_VARIANT
    sink ^= 0x5a5a;
#endif
    return sink;
}

__attribute__((noinline)) unsigned long middle_work(unsigned long n)
{
    return hot_leaf(n + 1) * 3;
}

__attribute__((noinline)) unsigned long outer_work(unsigned long n)
{
    return middle_work(n + 2) * 5;
}

int main(int argc, char **argv)
{
    (void)argv;
    printf("hotpath: running\n");
    fflush(stdout);
    return (int)outer_work((unsigned long)argc);
}
