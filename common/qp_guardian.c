/* The guardian process (see qp_guardian.h). */
#define _GNU_SOURCE
#include "qp_guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct qp_guardian {
    pid_t pid;
    int lifeline; /* write end: one byte is the goodbye; -1 once released */
    void *shared;
    size_t shared_size;
};

/* The guardian keeps only the connection and the lifeline: no copy of qprof's output files or
 * other sockets outlives qprof through it. */
static void close_all_but(int a, int b)
{
    int lo = a < b ? a : b, hi = a < b ? b : a;
    if (lo > 0)
        close_range(0, (unsigned)lo - 1, 0);
    if (hi > lo + 1)
        close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
    close_range((unsigned)hi + 1, ~0u, 0);
}

/* The guardian's whole life: ignore the signals aimed at qprof's process group (Ctrl-C, a
 * closing terminal), wait for the goodbye, else rescue. */
static _Noreturn void guardian_main(int sock, int lifeline, void *shared,
                                    qp_guardian_rescue_fn rescue)
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
    if (n != 1)
        rescue(sock, shared);
    _exit(0);
}

static void guardian_free(qp_guardian *g)
{
    munmap(g->shared, g->shared_size);
    free(g);
}

qp_guardian *qp_guardian_start(int sock, size_t shared_size, qp_guardian_rescue_fn rescue,
                               struct qp_error *err)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (shared_size == 0 || shared_size > page) {
        qp_error_set(err, -EINVAL, "guardian: %zu bytes of shared state", shared_size);
        return NULL;
    }
    qp_guardian *g = calloc(1, sizeof *g);
    if (!g) {
        qp_error_set(err, -ENOMEM, "guardian: out of memory");
        return NULL;
    }
    g->shared_size = page;
    g->shared = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g->shared == MAP_FAILED) {
        qp_error_set(err, -errno, "guardian: mmap: %s", strerror(errno));
        free(g);
        return NULL;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        qp_error_set(err, -errno, "guardian: pipe: %s", strerror(errno));
        guardian_free(g);
        return NULL;
    }
    fflush(NULL); /* nothing buffered is written twice, by qprof and by the guardian's exit */
    pid_t pid = fork();
    if (pid == 0)
        guardian_main(sock, fds[0], g->shared, rescue);
    int e = errno;
    close(fds[0]);
    if (pid < 0) {
        close(fds[1]);
        guardian_free(g);
        qp_error_set(err, -e, "guardian: fork: %s", strerror(e));
        return NULL;
    }
    g->pid = pid;
    g->lifeline = fds[1];
    return g;
}

void *qp_guardian_shared(qp_guardian *g)
{
    return g ? g->shared : NULL;
}

void qp_guardian_stop(qp_guardian *g, bool goodbye)
{
    if (!g)
        return;
    while (goodbye && write(g->lifeline, "x", 1) < 0 && errno == EINTR)
        ;
    close(g->lifeline);
    waitpid(g->pid, NULL, 0);
    guardian_free(g);
}

void qp_guardian_release(qp_guardian *g)
{
    if (!g)
        return;
    close(g->lifeline);
    guardian_free(g);
}
