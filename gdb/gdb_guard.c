/* The gdbstub's guardian (common/qp_guardian.h): a process holding a copy of the socket that
 * detaches, so QEMU resumes the guest, if qprof dies while the guest is stopped. */
#define _GNU_SOURCE
#include "gdb_internal.h"
#include "qp_sock.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* `D` as this stub wants it: with multiprocess QEMU wants the pid (`D;1`) and answers a bare `D`
 * with E22. */
void gdb__detach_command(const gdb_client *c, char *cmd, size_t cap)
{
    snprintf(cmd, cap, "D");
    if (c->multiprocess && c->threads[0][0] == 'p')
        snprintf(cmd, cap, "D;%.*s", (int)strcspn(c->threads[0] + 1, "."), c->threads[0] + 1);
}

/* The page shared with the guardian: the detach command as the handshake learns it, in two
 * slots so that qprof dying mid-write leaves the guardian a whole one; and whether the stub has
 * taken the connection on yet. */
struct guard_state {
    char detach[2][48];
    atomic_int current;    /* the slot to use */
    atomic_bool not_taken; /* QEMU has not taken the connection on: wait as long as it takes */
};

/* The rescue: get the stub back to a known state and detach. "#00" ends a packet the owner left
 * half written (QEMU answers its bad checksum with `-`) and is ignored by an idle stub; a guest
 * that runs is stopped by its first byte; `$` also drops a reply QEMU still waits to have acked.
 * Then it waits for the OK (or the close), so that QEMU has read the D before the socket goes.
 * No acks: a byte QEMU does not wait for stops a running guest again. */
static void guard_rescue(int sock, void *shared)
{
    struct guard_state *st = shared;
    const char *detach = st->detach[atomic_load(&st->current) & 1];
    bool not_taken = atomic_load(&st->not_taken);
    size_t len;
    char *frame = gdb_frame(detach, strnlen(detach, sizeof st->detach[0]), &len);
    GString *rescue = g_string_new("#00#00");
    g_string_append_len(rescue, frame, (gssize)len);
    if (send(sock, rescue->str, rescue->len, MSG_NOSIGNAL) < 0)
        return;
    char reply[4096];
    GString *seen = g_string_new(NULL);
    int64_t deadline = qp_sock_now_us() + 2000000;
    while (!strstr(seen->str, "$OK#") && (not_taken || qp_sock_now_us() < deadline)) {
        struct pollfd pfd = {.fd = sock, .events = POLLIN};
        if (poll(&pfd, 1, 100) > 0) {
            ssize_t got = recv(sock, reply, sizeof reply, 0);
            if (got <= 0)
                break;
            g_string_append_len(seen, reply, got);
        }
    }
}

/* Publishes the detach command for what the handshake has learnt so far. */
void gdb__guard_learn(gdb_client *c)
{
    if (!c->guardian)
        return;
    struct guard_state *st = qp_guardian_shared(c->guardian);
    int next = (atomic_load(&st->current) + 1) & 1;
    gdb__detach_command(c, st->detach[next], sizeof st->detach[next]);
    atomic_store(&st->current, next);
}

/* Started as soon as the socket connects, before the handshake: QEMU stops the guest when a
 * debugger connects, so a qprof killed mid-handshake holds it stopped too. Until qSupported is
 * answered the detach is "D;1": QEMU reads the pid only with multiprocess on (then it must be
 * there), and every machine qprof profiles has its CPUs in process 1. */
int gdb__guard_start(gdb_client *c, struct qp_error *err)
{
    struct qp_error why = {0};
    c->guardian = qp_guardian_start(c->fd, sizeof(struct guard_state), guard_rescue, &why);
    if (!c->guardian)
        return qp_error_set(err, why.code, "%s", why.msg);
    struct guard_state *st = qp_guardian_shared(c->guardian);
    g_strlcpy(st->detach[0], "D;1", sizeof st->detach[0]);
    return 0;
}

/* The stub has not taken the connection on yet (another debugger holds it). QEMU will once
 * that one leaves, and stop the guest as it does for every new debugger; the guardian waits for
 * that as long as it takes (or until QEMU closes the socket), then detaches. */
void gdb__guard_release_not_taken(gdb_client *c)
{
    if (!c->guardian)
        return;
    struct guard_state *st = qp_guardian_shared(c->guardian);
    atomic_store(&st->not_taken, true);
    gdb__guard_learn(c);
    qp_guardian_release(c->guardian);
    c->guardian = NULL;
}

/* Goodbye only when nothing is left to do (detached, or the stub is gone); otherwise the
 * guardian tries the detach itself on its copy of the socket. */
void gdb__guard_stop(gdb_client *c, bool goodbye)
{
    qp_guardian_stop(c->guardian, goodbye);
    c->guardian = NULL;
}
