/* Unwinding fixture: stops itself with SIGSTOP at the bottom of a known call chain so that a
 * test can capture its registers and stack and compare our unwinding with eu-stack's.
 *
 *   fixture chain   main -> f9 .. f0 -> stop_here -> raise(SIGSTOP)
 *   fixture signal  the same chain, but f0 raises SIGUSR1 and the handler calls stop_here
 *
 * The chain has noinline frames, an always_inline function (no frame of its own) and a tail
 * call (tail_caller jumps to f3, so it has no frame either). Built by the test build with
 * fixed flags, never with the sanitizers. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))

volatile int sink;
static int (*leaf_action)(void);

NOIPA int stop_here(void)
{
    raise(SIGSTOP);
    return sink + 1;
}

NOIPA int raise_usr1(void)
{
    raise(SIGUSR1);
    return sink + 2;
}

NOIPA void handler_step(int sig)
{
    sink += stop_here() + sig;
}

NOIPA void on_usr1(int sig)
{
    handler_step(sig);
    sink++;
}

#define CHAIN_STEP(name, callee)                                                                   \
    NOIPA int name(int x)                                                                          \
    {                                                                                              \
        int r = callee(x + 1);                                                                     \
        sink += r;                                                                                 \
        return r + 1;                                                                              \
    }

NOIPA int f0(int x)
{
    int r = leaf_action();
    sink += r;
    return r + x;
}
CHAIN_STEP(f1, f0)
CHAIN_STEP(f2, f1)
CHAIN_STEP(f3, f2)

NOIPA int tail_caller(int x)
{
    return f3(x * 3); /* a sibling call at -O2: tail_caller leaves no frame */
}

CHAIN_STEP(f4, tail_caller)
CHAIN_STEP(f5, f4)

static inline __attribute__((always_inline)) int inlined_step(int x)
{
    int r = f5(x * 2);
    sink ^= r;
    return r;
}

CHAIN_STEP(f6, inlined_step)
CHAIN_STEP(f7, f6)
CHAIN_STEP(f8, f7)
CHAIN_STEP(f9, f8)

int main(int argc, char **argv)
{
    leaf_action = stop_here;
    if (argc > 1 && strcmp(argv[1], "signal") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1;
        sigaction(SIGUSR1, &sa, NULL);
        leaf_action = raise_usr1;
    }
    return f9(argc) & 1;
}
