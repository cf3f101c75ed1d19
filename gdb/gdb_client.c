/* GDB remote-protocol connection: handshake, pipelined reads, stop/continue (see gdb.h). */
#define _GNU_SOURCE
#include "gdb.h"
#include "qp_guardian.h"
#include "qp_sock.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct gdb_client {
    int fd;
    bool tcp; /* fd is a TCP connection (qp_sock_recv re-arms its quick ACKs) */
    char address[256];
    gdb_parser *parser;
    int timeout_ms;
    bool dead, no_ack, stopped, multiprocess, thread_state;
    bool interrupting; /* a 0x03 is out: the next stop reply is the one this client asked for */
    bool disowned;     /* the guest is stopped by someone else (gdb_disown_stop) */
    bool heard;        /* the stub has sent at least one byte */
    /* Acks of replies taken while the guest is stopped, sent in front of the next request
     * (send_raw) instead of one write each. */
    unsigned acks_owed;
    qp_guardian *guardian; /* NULL without opts.guard */
    /* A reply timed out: it may still come and be taken for the next one. A stop reply ends
     * the stream of late replies (the stub answers in order), so `?` puts it back in step. */
    bool out_of_step;
    size_t packet_size;
    struct gdb_stop stop;
    char threads[GDB_MAX_THREADS][32];
    int n_threads;
    struct gdb_tdesc tdesc;
    int want_regnum[GDB_MAX_EXTRA_REGS]; /* gdb_want_registers: asked with `p` after each `g` */
    int n_want;
    uint64_t replies, round_trips;
    GString *console; /* gdb_monitor: the O packets' text while a command runs, else NULL */
};

static int64_t now_us(void)
{
    return qp_sock_now_us();
}

/* ---- Sockets ---------------------------------------------------------------------------- */

/* Connects through qp_sock and words its failures with the QEMU option that fixes them. An
 * empty host ("tcp::1234", as QEMU's -gdb documentation writes it) means this machine. */
static int open_socket(gdb_client *c, const char *address, struct qp_error *err)
{
    struct qp_sock_addr a;
    int rc = qp_sock_parse(address, true, &a, err);
    if (rc == -EINVAL)
        return qp_error_set(err, -EINVAL, "bad gdbstub address %s: expected tcp:HOST:PORT",
                            address);
    if (rc == -ENAMETOOLONG)
        return qp_error_set(err, -EINVAL, "gdbstub address too long: %s", address);
    rc = qp_sock_connect(&a, "127.0.0.1", &c->fd, err);
    if (rc == 0 || (rc == -ENOENT && a.family == QP_SOCK_TCP)) {
        c->tcp = rc == 0 && a.family == QP_SOCK_TCP;
        return rc;
    }
    if (a.family == QP_SOCK_TCP)
        return qp_error_set(err, rc,
                            "cannot connect to the gdbstub at %s (%s): start QEMU with "
                            "-gdb tcp:%s:%s",
                            address, strerror(-rc), a.host, a.port);
    return qp_error_set(err, rc == -ECONNREFUSED ? -EPIPE : rc,
                        "cannot connect to the gdbstub at unix:%s (%s): start QEMU with "
                        "-chardev socket,path=%s,server=on,wait=off,id=g -gdb chardev:g",
                        a.path, strerror(-rc), a.path);
}

static int send_raw(gdb_client *c, const char *buf, size_t len, struct qp_error *err)
{
    if (c->dead)
        return qp_error_set(err, -EPIPE, "gdbstub connection to %s already failed", c->address);
    int rc;
    if (c->acks_owed) {
        GString *s = g_string_sized_new(c->acks_owed + len);
        for (unsigned i = 0; i < c->acks_owed; i++)
            g_string_append_c(s, '+');
        g_string_append_len(s, buf, (gssize)len);
        c->acks_owed = 0;
        rc = qp_sock_send_all(c->fd, s->str, s->len);
        g_string_free(s, TRUE);
    } else {
        rc = qp_sock_send_all(c->fd, buf, len);
    }
    if (rc < 0) {
        c->dead = true;
        return qp_error_set(err, -EPIPE, "writing to the gdbstub at %s: %s", c->address,
                            strerror(-rc));
    }
    return 0;
}

/* Sends the acks owed on their own (send_raw puts them in front of what it sends). */
static int flush_acks(gdb_client *c, struct qp_error *err)
{
    return c->acks_owed ? send_raw(c, "", 0, err) : 0;
}

/* Reads what is available into the parser, waiting up to the deadline (0: do not wait). */
static int read_some(gdb_client *c, int64_t deadline_us, struct qp_error *err)
{
    if (c->dead)
        return qp_error_set(err, -EPIPE, "gdbstub connection to %s already failed", c->address);
    char buf[65536];
    long n = qp_sock_recv(c->fd, c->tcp, buf, sizeof buf, deadline_us);
    if (n == 0)
        return deadline_us
                   ? qp_error_set(err, -ETIMEDOUT, "the gdbstub did not answer within %.1f s on %s",
                                  c->timeout_ms / 1000.0, c->address)
                   : 0;
    if (n < 0) {
        c->dead = true;
        return qp_error_set(err, -EPIPE, "the gdbstub at %s closed the connection%s%s", c->address,
                            n != -EPIPE ? ": " : " (QEMU exited?)",
                            n != -EPIPE ? strerror((int)-n) : "");
    }
    c->heard = true;
    uint64_t before = gdb_parser_packets(c->parser);
    int rc = gdb_parser_feed(c->parser, buf, (size_t)n, err);
    if (rc < 0) {
        c->dead = true;
        return rc;
    }
    /* Ack mode (QEMU before 8.x has no QStartNoAckMode): every good packet is acked. A bad
     * one gets no `-`: with pipelined requests the stub would resend some other reply (it
     * keeps only its last), and a `-` it does not wait for stops a running guest. next_reply
     * fails the request it belonged to. The stub waits for no ack (a `$` acks its last reply
     * too), so while the guest is stopped, or stopping at our 0x03, the acks ride in front of
     * the next request: one write, and one wake-up of QEMU's main loop, instead of one per
     * reply (four a sample; each a TCP segment of its own on a tcp: gdbstub). A running guest's
     * stub gets its ack at once: a stray `+` there, with nothing to ack, would stop the guest. */
    if (!c->no_ack) {
        c->acks_owed += (unsigned)(gdb_parser_packets(c->parser) - before);
        if (!c->stopped && !c->interrupting)
            return flush_acks(c, err);
    }
    return 0;
}

static int send_packets(gdb_client *c, GString *frames, struct qp_error *err)
{
    c->round_trips++;
    return send_raw(c, frames->str, frames->len, err);
}

static void add_frame(GString *s, const char *payload)
{
    size_t n;
    char *f = gdb_frame(payload, strlen(payload), &n);
    g_string_append_len(s, f, n);
    free(f);
}

/* ---- Replies ---------------------------------------------------------------------------- */

static bool is_stop_reply(const char *p)
{
    return (p[0] == 'T' || p[0] == 'S') && g_ascii_isxdigit(p[1]) && g_ascii_isxdigit(p[2]);
}

static void note_stop(gdb_client *c, const char *p)
{
    memset(&c->stop, 0, sizeof c->stop);
    c->stop.signal = (int)strtol((char[]){p[1], p[2], 0}, NULL, 16);
    const char *t = strstr(p, "thread:");
    if (t) {
        t += 7;
        size_t n = strcspn(t, ";");
        if (n >= sizeof c->stop.thread)
            n = sizeof c->stop.thread - 1;
        memcpy(c->stop.thread, t, n);
    }
    c->stop.unasked = !c->interrupting;
    c->stopped = true;
}

/* Takes the next reply. Stop replies that arrive while another reply is awaited (the stub
 * stopped on its own: a breakpoint, a monitor `stop`) are recorded, not returned; `O` console
 * output is dropped. want_stop: the reply awaited is a stop reply. */
static int next_reply(gdb_client *c, bool want_stop, char **out, size_t *len, struct qp_error *err)
{
    int64_t deadline = now_us() + (int64_t)c->timeout_ms * 1000;
    for (;;) {
        char *p;
        size_t n;
        int got;
        while ((got = gdb_parser_next(c->parser, &p, &n)) > 0) {
            if (got == 2) {
                /* Which reply was lost is unknown to the caller's bookkeeping only if it goes
                 * on: fail this request, and get back in step before the next. */
                c->out_of_step = true;
                return qp_error_set(
                    err, -EPROTO, "a reply from the gdbstub at %s had a bad checksum", c->address);
            }
            if (p[0] == 'W' || p[0] == 'X') {
                c->dead = true;
                int rc = qp_error_set(err, -EPIPE, "the guest exited (%s)", p);
                free(p);
                return rc;
            }
            if (p[0] == 'O' && g_ascii_isxdigit(p[1]) && !want_stop) {
                for (size_t i = 1; c->console && i + 1 < n; i += 2)
                    g_string_append_c(c->console, (char)(g_ascii_xdigit_value(p[i]) << 4 |
                                                         g_ascii_xdigit_value(p[i + 1])));
                free(p);
                continue;
            }
            if (is_stop_reply(p)) {
                note_stop(c, p);
                if (!want_stop) {
                    free(p);
                    continue;
                }
            } else if (want_stop) {
                free(p); /* e.g. a late OK: not what stops the guest */
                continue;
            }
            c->replies++;
            *out = p;
            if (len)
                *len = n;
            return 0;
        }
        int rc = read_some(c, deadline, err);
        if (rc == -ETIMEDOUT)
            c->out_of_step = true;
        if (rc < 0)
            return rc;
    }
}

/* While stopped after a time-out: `?` and drop everything up to its stop reply. */
static int resync(gdb_client *c, struct qp_error *err)
{
    if (!c->out_of_step || !c->stopped)
        return 0;
    GString *s = g_string_new(NULL);
    add_frame(s, "?");
    int rc = send_packets(c, s, err);
    g_string_free(s, TRUE);
    char *r = NULL;
    if (rc == 0 && (rc = next_reply(c, true, &r, NULL, err)) == 0) {
        free(r);
        c->out_of_step = false;
    }
    return rc < 0 ? qp_error_prefix(err, "getting back in step with the gdbstub") : 0;
}

/* An `Exx` reply as -EIO; anything else 0. */
static int remote_error(const char *reply, const char *what, int *code, struct qp_error *err)
{
    if (reply[0] != 'E' || !g_ascii_isxdigit(reply[1]) || !g_ascii_isxdigit(reply[2]) || reply[3])
        return 0;
    int e = (int)strtol(reply + 1, NULL, 16);
    if (code)
        *code = e;
    return qp_error_set(err, -EIO, "%s: the gdbstub replied %s", what, reply);
}

int gdb_command(gdb_client *c, const char *cmd, char **reply, int *code, struct qp_error *err)
{
    int rc = resync(c, err);
    if (rc < 0)
        return rc;
    GString *s = g_string_new(NULL);
    add_frame(s, cmd);
    rc = send_packets(c, s, err);
    g_string_free(s, TRUE);
    char *r = NULL;
    if (rc == 0)
        rc = next_reply(c, strcmp(cmd, "?") == 0, &r, NULL, err);
    if (rc < 0)
        return qp_error_prefix(err, "%s", cmd);
    if ((rc = remote_error(r, cmd, code, err)) < 0) {
        free(r);
        return rc;
    }
    if (reply)
        *reply = r;
    else
        free(r);
    return 0;
}

/* ---- Handshake -------------------------------------------------------------------------- */

static int xfer_read(void *ctx, const char *annex, char **text, struct qp_error *err)
{
    gdb_client *c = ctx;
    GString *doc = g_string_new(NULL);
    size_t chunk = c->packet_size > 64 ? c->packet_size - 32 : 1000;
    for (;;) {
        char cmd[256], *r = NULL;
        size_t n;
        snprintf(cmd, sizeof cmd, "qXfer:features:read:%s:%zx,%zx", annex, doc->len, chunk);
        GString *s = g_string_new(NULL);
        add_frame(s, cmd);
        int rc = send_packets(c, s, err);
        g_string_free(s, TRUE);
        if (rc == 0)
            rc = next_reply(c, false, &r, &n, err);
        if (rc == 0 && (rc = remote_error(r, cmd, NULL, err)) == 0 && r[0] != 'm' && r[0] != 'l')
            rc = qp_error_set(err, -EPROTO, "%s: unexpected reply \"%.20s\"", cmd, r);
        if (rc < 0) {
            free(r);
            g_string_free(doc, TRUE);
            return rc;
        }
        g_string_append_len(doc, r + 1, n - 1);
        bool last = r[0] == 'l';
        free(r);
        if (last)
            break;
        if (doc->len > GDB_MAX_PACKET) {
            g_string_free(doc, TRUE);
            return qp_error_set(err, -EPROTO, "%s larger than 1 MiB", annex);
        }
    }
    *text = g_string_free(doc, FALSE);
    /* The caller frees with free(): g_free and free are the same allocator in GLib >= 2.46. */
    return 0;
}

static int add_threads(gdb_client *c, const char *list)
{
    while (*list) {
        size_t n = strcspn(list, ",");
        if (n > 0 && n < sizeof c->threads[0] && c->n_threads < GDB_MAX_THREADS) {
            memcpy(c->threads[c->n_threads], list, n);
            c->threads[c->n_threads][n] = '\0';
            if (list[0] == 'p')
                c->multiprocess = true;
            c->n_threads++;
        }
        list += n;
        if (*list == ',')
            list++;
    }
    return 0;
}

static int handshake(gdb_client *c, struct qp_error *err)
{
    char *r = NULL;
    int rc =
        gdb_command(c, "qSupported:multiprocess+;xmlRegisters=i386;qRelocInsn+", &r, NULL, err);
    if (rc < 0)
        return rc;
    const char *ps = strstr(r, "PacketSize=");
    c->packet_size = ps ? strtoul(ps + 11, NULL, 16) : 4096;
    if (c->packet_size < 64)
        c->packet_size = 64;
    bool xml = strstr(r, "qXfer:features:read+") != NULL, noack = strstr(r, "QStartNoAckMode+");
    if (strstr(r, "multiprocess+"))
        c->multiprocess = true;
    free(r);
    if (noack) {
        if ((rc = gdb_command(c, "QStartNoAckMode", &r, NULL, err)) < 0)
            return rc;
        if (strcmp(r, "OK") == 0) {
            c->no_ack = true;
            gdb_parser_set_no_ack(c->parser, true);
        }
        free(r);
    }
    if ((rc = gdb_command(c, "?", &r, NULL, err)) < 0)
        return rc;
    free(r); /* next_reply recorded it */
    for (const char *q = "qfThreadInfo";; q = "qsThreadInfo") {
        if ((rc = gdb_command(c, q, &r, NULL, err)) < 0)
            return rc;
        bool more = r[0] == 'm';
        if (more)
            add_threads(c, r + 1);
        free(r);
        if (!more)
            break;
    }
    if (c->n_threads == 0)
        return qp_error_set(err, -EPROTO, "the gdbstub at %s listed no threads", c->address);
    if (!xml)
        return qp_error_set(err, -ENOTSUP,
                            "the gdbstub at %s sends no target description (qXfer:features)",
                            c->address);
    char *doc = NULL;
    if ((rc = xfer_read(c, "target.xml", &doc, err)) < 0)
        return rc;
    rc = gdb_tdesc_parse(&c->tdesc, doc, xfer_read, c, err);
    free(doc);
    if (rc == 0 && c->tdesc.n_regs == 0)
        rc =
            qp_error_set(err, -EPROTO, "the target description of %s has no registers", c->address);
    return rc;
}

/* ---- Guardian --------------------------------------------------------------------------- */

/* `D` as this stub wants it: with multiprocess QEMU wants the pid (`D;1`) and answers a bare `D`
 * with E22. */
static void detach_command(const gdb_client *c, char *cmd, size_t cap)
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
    int64_t deadline = now_us() + 2000000;
    while (!strstr(seen->str, "$OK#") && (not_taken || now_us() < deadline)) {
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
static void guard_learn(gdb_client *c)
{
    if (!c->guardian)
        return;
    struct guard_state *st = qp_guardian_shared(c->guardian);
    int next = (atomic_load(&st->current) + 1) & 1;
    detach_command(c, st->detach[next], sizeof st->detach[next]);
    atomic_store(&st->current, next);
}

/* Started as soon as the socket connects, before the handshake: QEMU stops the guest when a
 * debugger connects, so a qprof killed mid-handshake holds it stopped too. Until qSupported is
 * answered the detach is "D;1": QEMU reads the pid only with multiprocess on (then it must be
 * there), and every machine qprof profiles has its CPUs in process 1. */
static int guard_start(gdb_client *c, struct qp_error *err)
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
static void guard_release_not_taken(gdb_client *c)
{
    if (!c->guardian)
        return;
    struct guard_state *st = qp_guardian_shared(c->guardian);
    atomic_store(&st->not_taken, true);
    guard_learn(c);
    qp_guardian_release(c->guardian);
    c->guardian = NULL;
}

/* Goodbye only when nothing is left to do (detached, or the stub is gone); otherwise the
 * guardian tries the detach itself on its copy of the socket. */
static void guard_stop(gdb_client *c, bool goodbye)
{
    qp_guardian_stop(c->guardian, goodbye);
    c->guardian = NULL;
}

/* ---- Open and close --------------------------------------------------------------------- */

int gdb_open(const char *address, const struct gdb_open_opts *opts, gdb_client **out,
             struct qp_error *err)
{
    gdb_client *c = g_new0(gdb_client, 1);
    int rc = open_socket(c, address, err);
    if (rc < 0) {
        g_free(c);
        return rc;
    }
    g_strlcpy(c->address, address, sizeof c->address);
    c->parser = gdb_parser_new();
    c->timeout_ms = opts && opts->timeout_s > 0 ? (int)(opts->timeout_s * 1000) : 5000;
    c->thread_state = opts && opts->thread_state;
    /* QEMU stops the guest when a debugger connects; `?` below confirms it. */
    c->stopped = true;
    rc = opts && opts->guard ? guard_start(c, err) : 0;
    if (rc == 0)
        rc = handshake(c, err);
    if (rc == -ETIMEDOUT && !c->heard) {
        /* The connection waits in QEMU's queue: it is taken on (and the guest stopped) when
         * the other debugger leaves, so it must not just be dropped. qSupported:multiprocess
         * went first, so QEMU will want `D;1`. */
        g_strlcpy(c->threads[0], "p1.1", sizeof c->threads[0]);
        c->multiprocess = true;
        c->dead = true;
        guard_release_not_taken(c);
        rc = qp_error_set(err, -EBUSY,
                          "it accepted the connection but said nothing in %.1f s: QEMU's gdbstub "
                          "serves one debugger at a time, so another gdb (or qprof) is probably "
                          "attached; detach it, or profile through QMP (--qmp-socket)",
                          c->timeout_ms / 1000.0);
    }
    c->stop.unasked = false; /* attaching stops the guest: that stop is this client's */
    if (rc == 0)
        guard_learn(c);
    if (rc < 0 || (!(opts && opts->keep_stopped) && (rc = gdb_continue(c, err)) < 0)) {
        gdb_free(c);
        return qp_error_prefix(err, "gdbstub at %s", address);
    }
    *out = c;
    return 0;
}

void gdb_free(gdb_client *c)
{
    if (!c)
        return;
    bool detached = c->dead || c->disowned; /* a disowned stop is someone else's to end */
    if (!detached) {
        /* Never leave the guest stopped: `D` resumes it, and needs it stopped first. */
        c->timeout_ms = c->timeout_ms < 2000 ? c->timeout_ms : 2000;
        char *r = NULL, cmd[48];
        detach_command(c, cmd, sizeof cmd);
        if (gdb_interrupt(c, NULL, NULL) == 0 && gdb_command(c, cmd, &r, NULL, NULL) == 0) {
            detached = true;
            free(r);
        }
    }
    guard_stop(c, detached || c->dead);
    close(c->fd);
    gdb_parser_free(c->parser);
    g_free(c);
}

void gdb_set_timeout(gdb_client *c, double seconds)
{
    c->timeout_ms = (int)(seconds * 1000);
}

const struct gdb_tdesc *gdb_target(const gdb_client *c)
{
    return &c->tdesc;
}

size_t gdb_packet_size(const gdb_client *c)
{
    return c->packet_size;
}

bool gdb_multiprocess(const gdb_client *c)
{
    return c->multiprocess;
}

int gdb_thread_count(const gdb_client *c)
{
    return c->n_threads;
}

const char *gdb_thread_id(const gdb_client *c, int i)
{
    return i >= 0 && i < c->n_threads ? c->threads[i] : NULL;
}

bool gdb_stopped(const gdb_client *c)
{
    return c->stopped;
}

const struct gdb_stop *gdb_last_stop(const gdb_client *c)
{
    return &c->stop;
}

uint64_t gdb_replies(const gdb_client *c)
{
    return c->replies;
}

uint64_t gdb_round_trips(const gdb_client *c)
{
    return c->round_trips;
}

int gdb_monitor(gdb_client *c, const char *cmd, char **text, struct qp_error *err)
{
    GString *req = g_string_new("qRcmd,");
    for (const char *p = cmd; *p; p++)
        g_string_append_printf(req, "%02x", (unsigned char)*p);
    c->console = g_string_new(NULL);
    char *reply = NULL;
    int rc = gdb_command(c, req->str, &reply, NULL, err);
    if (rc == 0 && strcmp(reply, "OK") != 0)
        rc = qp_error_set(err, -ENOTSUP, "monitor %s: the gdbstub answered '%.32s'", cmd, reply);
    free(reply);
    g_string_free(req, TRUE);
    gchar *out = g_string_free(c->console, FALSE);
    c->console = NULL;
    if (rc == 0)
        *text = out;
    else
        g_free(out);
    return rc;
}

int gdb_socket_fd(const gdb_client *c)
{
    return c->fd;
}

/* ---- Stop and go ------------------------------------------------------------------------ */

int gdb_poll_stop(gdb_client *c, struct qp_error *err)
{
    int rc;
    if (!c->stopped) {
        if ((rc = read_some(c, 0, err)) < 0)
            return rc;
        char *p;
        int got;
        while (!c->stopped && (got = gdb_parser_next(c->parser, &p, NULL)) > 0) {
            if (got == 2)
                continue; /* a late reply, lost: nothing waits for it */
            if (p[0] == 'W' || p[0] == 'X') {
                c->dead = true;
                rc = qp_error_set(err, -EPIPE, "the guest exited (%s)", p);
                free(p);
                return rc;
            }
            if (is_stop_reply(p))
                note_stop(c, p); /* anything else is a reply that came too late: dropped */
            free(p);
        }
    }
    return c->stopped ? 1 : 0;
}

int gdb_interrupt(gdb_client *c, struct gdb_stop *stop, struct qp_error *err)
{
    /* A stop reply may be in already (the guest stopped on its own): take it, send nothing. */
    int rc = gdb_poll_stop(c, err);
    if (rc < 0)
        return rc;
    if (!c->stopped) {
        if ((rc = send_raw(c, "\x03", 1, err)) < 0)
            return rc;
        c->round_trips++;
        char *r = NULL;
        c->interrupting = true;
        rc = next_reply(c, true, &r, NULL, err);
        c->interrupting = false;
        if (rc < 0)
            return qp_error_prefix(err, "interrupting the guest");
        free(r);
        c->disowned = false;
    }
    c->out_of_step = false; /* late replies come before the stop reply */
    if (stop)
        *stop = c->stop;
    return 0;
}

int gdb_interrupt_within(gdb_client *c, int timeout_ms, struct gdb_stop *stop, struct qp_error *err)
{
    int saved = c->timeout_ms;
    c->timeout_ms = timeout_ms;
    int rc = gdb_interrupt(c, stop, err);
    c->timeout_ms = saved;
    return rc;
}

void gdb_disown_stop(gdb_client *c)
{
    /* Someone else's stop: from here on the guest may run at any moment. */
    (void)flush_acks(c, NULL);
    c->stopped = false;
    c->disowned = true;
}

int gdb_continue(gdb_client *c, struct qp_error *err)
{
    if (!c->stopped)
        return 0;
    GString *s = g_string_new(NULL);
    add_frame(s, "c");
    int rc = send_packets(c, s, err);
    g_string_free(s, TRUE);
    if (rc == 0)
        c->stopped = false;
    return rc;
}

/* ---- Registers -------------------------------------------------------------------------- */

void gdb_regset_clear(struct gdb_regset *r)
{
    free(r->raw);
    free(r->valid);
    r->raw = r->valid = NULL;
    r->len = 0;
    r->n_extra = 0;
}

static int hexv(int ch)
{
    return g_ascii_xdigit_value((char)ch);
}

static int decode_g(gdb_client *c, const char *hex, struct gdb_regset *out, struct qp_error *err)
{
    size_t n = strlen(hex) / 2;
    out->raw = calloc(n ? n : 1, 1);
    out->valid = calloc(n ? n : 1, 1);
    out->len = n;
    for (size_t i = 0; i < n; i++) {
        int hi = hexv(hex[2 * i]), lo = hexv(hex[2 * i + 1]);
        if (hex[2 * i] == 'x' && hex[2 * i + 1] == 'x')
            continue;
        if (hi < 0 || lo < 0)
            return qp_error_set(err, -EPROTO, "g reply is not hex at byte %zu", i);
        out->raw[i] = (uint8_t)(hi << 4 | lo);
        out->valid[i] = 1;
    }
    if (n < c->tdesc.g_size) {
        /* QEMU may stop short of the description (registers it cannot read): mark them. */
        out->raw = realloc(out->raw, c->tdesc.g_size);
        out->valid = realloc(out->valid, c->tdesc.g_size);
        memset(out->raw + n, 0, c->tdesc.g_size - n);
        memset(out->valid + n, 0, c->tdesc.g_size - n);
        out->len = c->tdesc.g_size;
    }
    return 0;
}

/* The reply to qThreadExtraInfo: hex of e.g. "CPU#0 [halted ]" (QEMU 7.2; with multiprocess
 * the CPU's type and QOM name come first). Anything else leaves *halted at -1. */
static int read_thread_state(gdb_client *c, int *halted, struct qp_error *err)
{
    char *r = NULL;
    int rc = next_reply(c, false, &r, NULL, err);
    if (rc < 0)
        return rc;
    size_t n = strlen(r) / 2;
    char *text = g_malloc(n + 1);
    size_t k = 0;
    for (; k < n; k++) {
        int hi = hexv(r[2 * k]), lo = hexv(r[2 * k + 1]);
        if (hi < 0 || lo < 0)
            break;
        text[k] = (char)(hi << 4 | lo);
    }
    text[k] = '\0';
    if (k == n && strstr(text, "[halted"))
        *halted = 1;
    else if (k == n && strstr(text, "[running"))
        *halted = 0;
    g_free(text);
    free(r);
    return 0;
}

static bool decode_p(const char *r, uint64_t *value);

void gdb_want_registers(gdb_client *c, const char *const *names)
{
    c->n_want = 0;
    for (int k = 0; names && names[k] && c->n_want < GDB_MAX_EXTRA_REGS; k++) {
        int i = gdb_tdesc_find(&c->tdesc, names[k]);
        if (i >= 0)
            c->want_regnum[c->n_want++] = c->tdesc.regs[i].regnum;
    }
}

/* Whether the `g` reply r holds register regnum whole (decode_g pads a short reply to the
 * description's size and marks the padding invalid). */
static bool in_g_reply(const gdb_client *c, const struct gdb_regset *r, int regnum)
{
    for (int i = 0; i < c->tdesc.n_regs; i++) {
        const struct gdb_reg *g = &c->tdesc.regs[i];
        if (g->regnum != regnum)
            continue;
        size_t w = (size_t)g->bitsize / 8;
        if (w == 0 || g->offset + w > r->len)
            return false;
        for (size_t k = 0; k < w; k++)
            if (!r->valid[g->offset + k])
                return false;
        return true;
    }
    return false;
}

/* After the first full read: the wanted registers the `g` reply held need no `p`. */
static void drop_wants_in_g(gdb_client *c, const struct gdb_regset *r)
{
    int kept = 0;
    for (int k = 0; k < c->n_want; k++)
        if (!in_g_reply(c, r, c->want_regnum[k]))
            c->want_regnum[kept++] = c->want_regnum[k];
    c->n_want = kept;
}

static void read_extra(gdb_client *c, const char *reply, struct gdb_regset *r, int k)
{
    r->extra_regnum[k] = c->want_regnum[k];
    r->extra_ok[k] = decode_p(reply, &r->extra[k]);
    r->n_extra = k + 1;
}

int gdb_read_registers_all(gdb_client *c, struct gdb_regset *out, int max, int *n,
                           struct qp_error *err)
{
    if (!c->stopped)
        return qp_error_set(err, -EBUSY, "reading registers: the guest is running");
    *n = 0;
    int rc = resync(c, err);
    if (rc < 0)
        return rc;
    int count = c->n_threads < max ? c->n_threads : max;
    GString *s = g_string_new(NULL);
    for (int i = 0; i < count; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "Hg%s", c->threads[i]);
        add_frame(s, cmd);
        add_frame(s, "g");
        for (int k = 0; k < c->n_want; k++) {
            snprintf(cmd, sizeof cmd, "p%x", c->want_regnum[k]);
            add_frame(s, cmd);
        }
        if (c->thread_state) {
            snprintf(cmd, sizeof cmd, "qThreadExtraInfo,%s", c->threads[i]);
            add_frame(s, cmd);
        }
    }
    rc = send_packets(c, s, err);
    g_string_free(s, TRUE);
    /* Every reply is read even after a failure, so the stream stays in step. */
    int first = rc;
    for (int i = 0; rc == 0 && i < count; i++) {
        char *hg = NULL, *g = NULL;
        memset(&out[i], 0, sizeof out[i]);
        out[i].thread = i;
        out[i].halted = -1;
        if ((rc = next_reply(c, false, &hg, NULL, err)) < 0)
            break;
        rc = next_reply(c, false, &g, NULL, err);
        for (int k = 0; rc == 0 && k < c->n_want; k++) {
            char *p = NULL;
            if ((rc = next_reply(c, false, &p, NULL, err)) == 0)
                read_extra(c, p, &out[i], k);
            free(p);
        }
        if (rc == 0 && c->thread_state)
            rc = read_thread_state(c, &out[i].halted, err);
        if (rc == 0 && first == 0) {
            char what[64];
            snprintf(what, sizeof what, "Hg%s", c->threads[i]);
            if ((first = remote_error(hg, what, NULL, err)) == 0 &&
                (first = remote_error(g, "g", NULL, err)) == 0) {
                first = decode_g(c, g, &out[i], err);
                if (first == 0)
                    (*n)++;
                else
                    gdb_regset_clear(&out[i]);
            }
        }
        free(hg);
        free(g);
    }
    if (rc < 0 || first < 0) {
        for (int i = 0; i < *n; i++)
            gdb_regset_clear(&out[i]);
        *n = 0;
        return rc < 0 ? rc : first;
    }
    if (*n > 0)
        drop_wants_in_g(c, &out[0]);
    return 0;
}

int gdb_reg_get(const gdb_client *c, const struct gdb_regset *r, const char *name, uint64_t *val)
{
    int i = gdb_tdesc_find(&c->tdesc, name);
    if (i < 0)
        return -ENOENT;
    const struct gdb_reg *g = &c->tdesc.regs[i];
    for (int k = 0; k < r->n_extra; k++)
        if (r->extra_regnum[k] == g->regnum && r->extra_ok[k]) {
            *val = r->extra[k];
            return 0;
        }
    size_t w = g->bitsize / 8 < 8 ? g->bitsize / 8 : 8;
    if (g->offset + w > r->len)
        return -ENODATA;
    uint64_t v = 0;
    for (size_t k = 0; k < w; k++) {
        if (!r->valid[g->offset + k])
            return -ENODATA;
        v |= (uint64_t)r->raw[g->offset + k] << (8 * k);
    }
    *val = v;
    return 0;
}

/* ---- Memory ----------------------------------------------------------------------------- */

/* The reply to `p`: the register's bytes, little-endian as x86 sends them. */
static bool decode_p(const char *r, uint64_t *value)
{
    size_t len = strlen(r);
    if (len < 2 || len % 2 || r[0] == 'E' || r[0] == 'x')
        return false;
    uint64_t v = 0;
    for (size_t k = 0; k < len / 2 && k < 8; k++) {
        int hi = hexv(r[2 * k]), lo = hexv(r[2 * k + 1]);
        if (hi < 0 || lo < 0)
            return false;
        v |= (uint64_t)(hi << 4 | lo) << (8 * k);
    }
    *value = v;
    return true;
}

static int mem_read(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n, int regnum,
                    uint64_t *reg_value, bool *reg_ok, struct qp_error *err);

int gdb_mem_read_many(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n,
                      struct qp_error *err)
{
    return mem_read(c, thread, reqs, n, -1, NULL, NULL, err);
}

int gdb_mem_read_then_reg(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n,
                          const char *reg, uint64_t *value, bool *ok, struct qp_error *err)
{
    int i = gdb_tdesc_find(&c->tdesc, reg);
    *ok = false;
    return mem_read(c, thread, reqs, n, i < 0 ? -1 : c->tdesc.regs[i].regnum, value, ok, err);
}

static int mem_read(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n, int regnum,
                    uint64_t *reg_value, bool *reg_ok, struct qp_error *err)
{
    if (!c->stopped)
        return qp_error_set(err, -EBUSY, "reading memory: the guest is running");
    if (thread < 0 || thread >= c->n_threads)
        return qp_error_set(err, -EINVAL, "reading memory: no thread %d", thread);
    int rc = resync(c, err);
    if (rc < 0)
        return rc;
    /* A reply is 2 hex digits a byte plus the framing, within PacketSize. */
    size_t chunk = (c->packet_size - 8) / 2;
    GString *s = g_string_new(NULL);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "Hg%s", c->threads[thread]);
    add_frame(s, cmd);
    for (size_t i = 0; i < n; i++) {
        reqs[i].got = 0;
        reqs[i].rc = 0;
        reqs[i].remote_error = 0;
        for (size_t off = 0; off < reqs[i].len; off += chunk) {
            size_t len = reqs[i].len - off < chunk ? reqs[i].len - off : chunk;
            snprintf(cmd, sizeof cmd, "m%" PRIx64 ",%zx", reqs[i].vaddr + off, len);
            add_frame(s, cmd);
        }
    }
    if (regnum >= 0) {
        snprintf(cmd, sizeof cmd, "p%x", regnum);
        add_frame(s, cmd);
    }
    rc = send_packets(c, s, err);
    g_string_free(s, TRUE);
    char *r = NULL;
    if (rc == 0 && (rc = next_reply(c, false, &r, NULL, err)) == 0) {
        rc = remote_error(r, "Hg", NULL, err);
        free(r);
    }
    int first = rc;
    for (size_t i = 0; i < n && !c->dead; i++) {
        bool stopped = false; /* past the first failing chunk: the rest is not used */
        for (size_t off = 0; off < reqs[i].len; off += chunk) {
            size_t len = reqs[i].len - off < chunk ? reqs[i].len - off : chunk;
            if ((rc = next_reply(c, false, &r, NULL, err)) < 0)
                return rc;
            int code = 0;
            size_t hexlen = strlen(r);
            if (remote_error(r, "m", &code, NULL) < 0) {
                if (!stopped && off == 0) {
                    reqs[i].rc = -EIO;
                    reqs[i].remote_error = code;
                }
                stopped = true;
            } else if (!stopped && first == 0) {
                size_t k = 0;
                for (; k < len && 2 * k + 1 < hexlen; k++) {
                    int hi = hexv(r[2 * k]), lo = hexv(r[2 * k + 1]);
                    if (hi < 0 || lo < 0)
                        break;
                    ((uint8_t *)reqs[i].buf)[off + k] = (uint8_t)(hi << 4 | lo);
                }
                reqs[i].got += k;
                if (k < len)
                    stopped = true;
            }
            free(r);
        }
    }
    if (regnum >= 0 && !c->dead) {
        if ((rc = next_reply(c, false, &r, NULL, err)) < 0)
            return rc;
        *reg_ok = first == 0 && decode_p(r, reg_value);
        free(r);
    }
    return first;
}
