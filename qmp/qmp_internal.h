/* Internals shared by the qmp module sources; not part of the public contract. */
#ifndef QMP_INTERNAL_H
#define QMP_INTERNAL_H

#include "qmp.h"

#include <glib.h>
#include <json-c/json.h>
#include <sys/types.h>

struct ram_range { /* guest-physical [start, end] maps to file offset `offset` */
    uint64_t start, end, offset;
};

struct qmp_direct {
    const uint8_t *map; /* the RAM backend file, mapped read-only */
    size_t map_len;
    struct ram_range ranges[16];
    int n_ranges;
};

struct qmp_client {
    int fd;
    bool tcp; /* fd is a TCP connection (qp_sock_recv re-arms its quick ACKs) */
    qmp_parser *parser;
    char version[32];
    char address[256];
    int timeout_ms;
    unsigned next_id;
    GQueue *events; /* struct qmp_event *, oldest first, at most QMP_MAX_QUEUED_EVENTS */
    uint64_t events_dropped;
    uint64_t resets;     /* RESET events seen */
    GHashTable *replies; /* id -> json reply that arrived before anyone waited for it */
    uint64_t round_trips;
    bool dead;                         /* the connection failed: no further I/O */
    bool running;                      /* guest state from query-status and STOP/RESUME events */
    bool stopped_by_us;                /* we paused the guest and owe it a cont */
    bool swallow_stop, swallow_resume; /* our own STOP/RESUME: record, don't queue */
    int64_t stop_ts_us, resume_ts_us;  /* QEMU timestamps of those */
    enum qmp_mem_backend backend;
    char memsave_dir[256]; /* mkdtemp directory for memsave files, "" if none */
    pid_t memsave_sweeper; /* the process that removes it if qprof dies, 0 if none */
    int memsave_lifeline;  /* the pipe whose closing tells the sweeper to sweep */
    struct qmp_direct direct;
    struct qmp_guard *guard; /* NULL without qmp_open_opts.guard */
};

/* The guardian (qmp_guard.c), which calls nothing else in the module: started on the connected
 * socket (NULL on failure, with err); told whether the guest is stopped by us and owed a cont
 * (no system call: a shared page); stopped with a goodbye, or without one to have it send the
 * cont itself before it ends. NULL is a no-op for the last two. */
struct qmp_guard *qmp__guard_start(int sock, struct qp_error *err);
void qmp__guard_owe(struct qmp_guard *g, bool owed);
void qmp__guard_stop(struct qmp_guard *g, bool goodbye);

/* We paused the guest and owe it a cont (or no longer do): the client's flag and the
 * guardian's. */
static inline void qmp__owe_cont(qmp_client *c, bool owed)
{
    c->stopped_by_us = owed;
    qmp__guard_owe(c->guard, owed);
}

/* Appends a compact request to `out` and returns its id. args may be NULL. */
unsigned qmp__request(qmp_client *c, GString *out, const char *command, json_object *args);
/* Writes all of buf (MSG_NOSIGNAL, EINTR retried). */
int qmp__send(qmp_client *c, const char *buf, size_t len, struct qp_error *err);
/* Waits for the reply to id: 0 with *ret (return value, may be NULL), -EREMOTEIO for an error
 * reply, or an I/O error. */
int qmp__wait(qmp_client *c, unsigned id, json_object **ret, struct qp_error *err);
/* The same with an absolute deadline (qmp__now_us clock), for draining several replies within
 * one time-out instead of one each. */
int qmp__wait_until(qmp_client *c, unsigned id, int64_t deadline_us, json_object **ret,
                    struct qp_error *err);
/* Sorts messages the parser already holds (events queued, replies stored) without reading. */
void qmp__dispatch_parsed(qmp_client *c);
/* The text of a human-monitor-command reply. */
/* human-monitor-command arguments; cpu_index < 0 omits it. */
json_object *qmp__hmp_args(const char *cmdline, int cpu_index);
int qmp__hmp_text(json_object *ret, char **out, struct qp_error *err);

/* The connection (qmp_client.c): connects, reads the greeting, negotiates capabilities and
 * the run state; no memory backend yet. disconnect resumes a guest the client paused and frees
 * c (NULL is a no-op). qmp_open.c puts the two around the memory backend (qmp_mem.c), so that
 * the client never calls into the backends that call it. */
int qmp__connect(const char *address, const struct qmp_open_opts *opts, qmp_client **out,
                 struct qp_error *err);
void qmp__disconnect(qmp_client *c);

/* Picks the memory backend as qmp_mem_set_backend does (qmp_mem.c). */
int qmp__pick_backend(qmp_client *c, enum qmp_mem_backend want, struct qp_error *err);

int qmp__direct_setup(qmp_client *c, struct qp_error *err);
/* The direct backend's pieces, for tests: the RAM ranges of `backend` from `info mtree -f`
 * text, and one read through them (d->map must hold the mapped file). */
void qmp__parse_mtree(struct qmp_direct *d, const char *text, const char *backend);
void qmp__direct_read(const struct qmp_direct *d, const struct qmp_regs *cpu,
                      struct qmp_mem_req *r);
void qmp__direct_close(qmp_client *c);
int qmp__memsave_setup(qmp_client *c, struct qp_error *err);
void qmp__memsave_close(qmp_client *c);

int64_t qmp__now_us(void);

#endif
