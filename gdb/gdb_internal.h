/* Internal header of the gdb/ module: the client's state, shared by
 *   gdb_client.c  the protocol client: socket, framing, replies, handshake, stop and go
 *   gdb_guard.c   the guardian process that detaches if qprof dies holding the guest stopped
 *   gdb_read.c    what samples read through it: registers (g, p, qThreadExtraInfo), memory (m)
 * gdb_read.c and gdb_guard.c are called by or call gdb_client.c, never both ways. */
#ifndef GDB_INTERNAL_H
#define GDB_INTERNAL_H

#include "gdb.h"
#include "qp_guardian.h"

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

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

/* ---- gdb_client.c: requests and replies ---- */
/* Appends one framed packet to s. */
void gdb__add_frame(GString *s, const char *payload);
/* Writes the frames in one go, behind any acks owed. */
int gdb__send_packets(gdb_client *c, GString *frames, struct qp_error *err);
/* Takes the next reply (*out: malloc'd, the caller's). Stop replies that arrive while another
 * reply is awaited are recorded, not returned; `O` console output goes to c->console.
 * want_stop: the reply awaited is a stop reply. */
int gdb__next_reply(gdb_client *c, bool want_stop, char **out, size_t *len, struct qp_error *err);
/* While stopped after a time-out: `?` and drop everything up to its stop reply. */
int gdb__resync(gdb_client *c, struct qp_error *err);
/* An `Exx` reply as -EIO (*code: xx); anything else 0. */
int gdb__remote_error(const char *reply, const char *what, int *code, struct qp_error *err);

/* ---- gdb_guard.c: the guardian ---- */
/* `D` as this stub wants it (`D;PID` with multiprocess), into cmd. */
void gdb__detach_command(const gdb_client *c, char *cmd, size_t cap);
int gdb__guard_start(gdb_client *c, struct qp_error *err);
void gdb__guard_learn(gdb_client *c);
void gdb__guard_release_not_taken(gdb_client *c);
void gdb__guard_stop(gdb_client *c, bool goodbye);

#endif
