/* GDB remote-protocol connection: socket, framing, replies, handshake, stop/continue (see gdb.h;
 * the reads samples make are gdb_read.c's, the guardian gdb_guard.c's). */
#define _GNU_SOURCE
#include "gdb_internal.h"
#include "qp_sock.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

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
     * keeps only its last), and a `-` it does not wait for stops a running guest. gdb__next_reply
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

int gdb__send_packets(gdb_client *c, GString *frames, struct qp_error *err)
{
    c->round_trips++;
    return send_raw(c, frames->str, frames->len, err);
}

void gdb__add_frame(GString *s, const char *payload)
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
int gdb__next_reply(gdb_client *c, bool want_stop, char **out, size_t *len, struct qp_error *err)
{
    int64_t deadline = qp_sock_now_us() + (int64_t)c->timeout_ms * 1000;
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
                if (c->console) {
                    uint8_t *text = g_malloc(n / 2 + 1);
                    size_t k = gdb_hex_decode(p + 1, (n - 1) / 2, text);
                    g_string_append_len(c->console, (const char *)text, (gssize)k);
                    g_free(text);
                }
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
int gdb__resync(gdb_client *c, struct qp_error *err)
{
    if (!c->out_of_step || !c->stopped)
        return 0;
    GString *s = g_string_new(NULL);
    gdb__add_frame(s, "?");
    int rc = gdb__send_packets(c, s, err);
    g_string_free(s, TRUE);
    char *r = NULL;
    if (rc == 0 && (rc = gdb__next_reply(c, true, &r, NULL, err)) == 0) {
        free(r);
        c->out_of_step = false;
    }
    return rc < 0 ? qp_error_prefix(err, "getting back in step with the gdbstub") : 0;
}

/* An `Exx` reply as -EIO; anything else 0. */
int gdb__remote_error(const char *reply, const char *what, int *code, struct qp_error *err)
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
    int rc = gdb__resync(c, err);
    if (rc < 0)
        return rc;
    GString *s = g_string_new(NULL);
    gdb__add_frame(s, cmd);
    rc = gdb__send_packets(c, s, err);
    g_string_free(s, TRUE);
    char *r = NULL;
    if (rc == 0)
        rc = gdb__next_reply(c, strcmp(cmd, "?") == 0, &r, NULL, err);
    if (rc < 0)
        return qp_error_prefix(err, "%s", cmd);
    if ((rc = gdb__remote_error(r, cmd, code, err)) < 0) {
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
        gdb__add_frame(s, cmd);
        int rc = gdb__send_packets(c, s, err);
        g_string_free(s, TRUE);
        if (rc == 0)
            rc = gdb__next_reply(c, false, &r, &n, err);
        if (rc == 0 && (rc = gdb__remote_error(r, cmd, NULL, err)) == 0 && r[0] != 'm' &&
            r[0] != 'l')
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
    free(r); /* gdb__next_reply recorded it */
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
    rc = opts && opts->guard ? gdb__guard_start(c, err) : 0;
    if (rc == 0)
        rc = handshake(c, err);
    if (rc == -ETIMEDOUT && !c->heard) {
        /* The connection waits in QEMU's queue: it is taken on (and the guest stopped) when
         * the other debugger leaves, so it must not just be dropped. qSupported:multiprocess
         * went first, so QEMU will want `D;1`. */
        g_strlcpy(c->threads[0], "p1.1", sizeof c->threads[0]);
        c->multiprocess = true;
        c->dead = true;
        gdb__guard_release_not_taken(c);
        rc = qp_error_set(err, -EBUSY,
                          "it accepted the connection but said nothing in %.1f s: QEMU's gdbstub "
                          "serves one debugger at a time, so another gdb (or qprof) is probably "
                          "attached; detach it, or profile through QMP (--qmp-socket)",
                          c->timeout_ms / 1000.0);
    }
    c->stop.unasked = false; /* attaching stops the guest: that stop is this client's */
    if (rc == 0)
        gdb__guard_learn(c);
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
        gdb__detach_command(c, cmd, sizeof cmd);
        if (gdb_interrupt(c, NULL, NULL) == 0 && gdb_command(c, cmd, &r, NULL, NULL) == 0) {
            detached = true;
            free(r);
        }
    }
    gdb__guard_stop(c, detached || c->dead);
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
        rc = gdb__next_reply(c, true, &r, NULL, err);
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
    gdb__add_frame(s, "c");
    int rc = gdb__send_packets(c, s, err);
    g_string_free(s, TRUE);
    if (rc == 0)
        c->stopped = false;
    return rc;
}
