/* The guardian: a process forked at connect time that resumes the guest if qprof dies while it
 * holds the guest stopped (see qmp_internal.h).
 *
 * QEMU serves one client per QMP socket and keeps a guest paused when that client goes, so
 * nobody else could resume it: the guardian holds a copy of the connection (the session qprof
 * negotiated, capabilities included), and QEMU reads its `cont` as the next command from qprof.
 * Whether a `cont` is owed lives in a page shared with the guardian, written without a system
 * call per sample; the guardian reads it once its lifeline (a pipe whose write end only qprof
 * holds) breaks without a goodbye byte, whatever killed qprof (a signal, abort, the OOM killer).
 * A guest qprof did not stop (one the user paused) is never owed a cont, so it stays paused. */
#define _GNU_SOURCE
#include "qmp_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GUARD_ID       "qprof-guardian"
#define REPLY_WAIT_US  3000000 /* for QEMU to take the cont in before the socket goes */
#define REPLY_TAIL_MAX 64      /* bytes of a read kept to find the id split across reads */

struct qmp_guard {
    pid_t pid;
    int lifeline;     /* write end: one byte is the goodbye */
    atomic_int *owed; /* shared with the guardian: 1 while the guest is stopped by qprof */
};

static void close_all_but(int a, int b)
{
    int lo = a < b ? a : b, hi = a < b ? b : a;
    if (lo > 0)
        close_range(0, (unsigned)lo - 1, 0);
    if (hi > lo + 1)
        close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
    close_range((unsigned)hi + 1, ~0u, 0);
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Reads replies until the one to the guardian's cont (or the close, or the deadline), so that
 * QEMU has read the cont before the guardian's copy of the socket closes. Replies to what qprof
 * left in flight go by unread. */
static void wait_reply(int sock)
{
    char buf[4096 + REPLY_TAIL_MAX];
    size_t kept = 0;
    int64_t deadline = mono_us() + REPLY_WAIT_US;
    while (mono_us() < deadline) {
        struct pollfd pfd = {.fd = sock, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t got = recv(sock, buf + kept, sizeof buf - kept - 1, 0);
        if (got <= 0)
            return;
        kept += (size_t)got;
        buf[kept] = '\0';
        if (strstr(buf, "\"" GUARD_ID "\""))
            return;
        size_t tail = kept < REPLY_TAIL_MAX ? kept : REPLY_TAIL_MAX;
        memmove(buf, buf + kept - tail, tail);
        kept = tail;
    }
}

/* The guardian's whole life. ESC is a lexical error wherever qprof's last command stopped (in a
 * string or between tokens): QEMU's JSON parser drops the half-written command and starts
 * afresh at the line end (QMP specification, "Forcing the JSON parser into known-good state"),
 * then answers the cont. A cont to a guest that already runs (qprof died between its cont and
 * clearing the flag) does nothing. */
static _Noreturn void guard_main(int sock, int lifeline, atomic_int *owed)
{
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    close_all_but(sock, lifeline);
    char b;
    ssize_t n;
    do
        n = read(lifeline, &b, 1);
    while (n < 0 && errno == EINTR);
    if (n == 1 || !atomic_load(owed))
        _exit(0);
    static const char rescue[] = "\x1b\r\n{\"execute\":\"cont\",\"id\":\"" GUARD_ID "\"}\r\n";
    if (send(sock, rescue, sizeof rescue - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof rescue - 1))
        wait_reply(sock);
    _exit(0);
}

struct qmp_guard *qmp__guard_start(int sock, struct qp_error *err)
{
    atomic_int *owed =
        mmap(NULL, sizeof *owed, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (owed == MAP_FAILED) {
        qp_error_set(err, -errno, "guardian: mmap: %s", strerror(errno));
        return NULL;
    }
    atomic_init(owed, 0);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        qp_error_set(err, -errno, "guardian: pipe: %s", strerror(errno));
        munmap(owed, sizeof *owed);
        return NULL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        guard_main(sock, fds[0], owed);
    int e = errno;
    close(fds[0]);
    if (pid < 0) {
        close(fds[1]);
        munmap(owed, sizeof *owed);
        qp_error_set(err, -e, "guardian: fork: %s", strerror(e));
        return NULL;
    }
    struct qmp_guard *g = g_new0(struct qmp_guard, 1);
    g->pid = pid;
    g->lifeline = fds[1];
    g->owed = owed;
    return g;
}

void qmp__guard_owe(struct qmp_guard *g, bool owed)
{
    if (g)
        atomic_store(g->owed, owed ? 1 : 0);
}

void qmp__guard_stop(struct qmp_guard *g, bool goodbye)
{
    if (!g)
        return;
    while (goodbye && write(g->lifeline, "x", 1) < 0 && errno == EINTR)
        ;
    close(g->lifeline);
    waitpid(g->pid, NULL, 0);
    munmap(g->owed, sizeof *g->owed);
    g_free(g);
}
