/* QMP's guardian (common/qp_guardian.h): resumes the guest if qprof dies while it
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
#include "qp_guardian.h"
#include "qp_sock.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#define GUARD_ID       "qprof-guardian"
#define REPLY_WAIT_US  3000000 /* for QEMU to take the cont in before the socket goes */
#define REPLY_TAIL_MAX 64      /* bytes of a read kept to find the id split across reads */

/* The page shared with the guardian. */
struct guard_state {
    atomic_int owed; /* 1 while the guest is stopped by qprof */
};

struct qmp_guard {
    qp_guardian *guardian;
    struct guard_state *state;
};

/* Reads replies until the one to the guardian's cont (or the close, or the deadline), so that
 * QEMU has read the cont before the guardian's copy of the socket closes. Replies to what qprof
 * left in flight go by unread. */
static void wait_reply(int sock)
{
    char buf[4096 + REPLY_TAIL_MAX];
    size_t kept = 0;
    int64_t deadline = qp_sock_now_us() + REPLY_WAIT_US;
    while (qp_sock_now_us() < deadline) {
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

/* The rescue. ESC is a lexical error wherever qprof's last command stopped (in a string or
 * between tokens): QEMU's JSON parser drops the half-written command and starts afresh at the
 * line end (QMP specification, "Forcing the JSON parser into known-good state"), then answers
 * the cont. A cont to a guest that already runs (qprof died between its cont and clearing the
 * flag) does nothing. */
static void rescue(int sock, void *shared)
{
    struct guard_state *st = shared;
    if (!atomic_load(&st->owed))
        return;
    static const char cont[] = "\x1b\r\n{\"execute\":\"cont\",\"id\":\"" GUARD_ID "\"}\r\n";
    if (send(sock, cont, sizeof cont - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof cont - 1))
        wait_reply(sock);
}

struct qmp_guard *qmp__guard_start(int sock, struct qp_error *err)
{
    qp_guardian *guardian = qp_guardian_start(sock, sizeof(struct guard_state), rescue, err);
    if (!guardian)
        return NULL;
    struct qmp_guard *g = g_new0(struct qmp_guard, 1);
    g->guardian = guardian;
    g->state = qp_guardian_shared(guardian);
    return g;
}

void qmp__guard_owe(struct qmp_guard *g, bool owed)
{
    if (g)
        atomic_store(&g->state->owed, owed ? 1 : 0);
}

void qmp__guard_stop(struct qmp_guard *g, bool goodbye)
{
    if (!g)
        return;
    qp_guardian_stop(g->guardian, goodbye);
    g_free(g);
}
