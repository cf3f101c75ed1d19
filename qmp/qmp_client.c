/* QMP connection: greeting, requests matched by id, events queued (see qmp.h). */
#define _GNU_SOURCE
#include "qmp_internal.h"
#include "qp_sock.h"

#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int64_t qmp__now_us(void)
{
    return qp_sock_now_us();
}

/* ---- Sockets ---------------------------------------------------------------------------- */

/* The clear messages for the ways a UNIX socket path fails; qp_sock does the connecting. */
static int check_unix_path(const char *path, struct qp_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == EACCES)
            return qp_error_set(err, -EACCES, "permission denied on the QMP socket %s", path);
        return qp_error_set(err, -ENOENT,
                            "no QMP socket at %s: start QEMU with -qmp unix:%s,server,nowait", path,
                            path);
    }
    if (!S_ISSOCK(st.st_mode))
        return qp_error_set(err, -EPROTO,
                            "%s is not a socket (a %s): start QEMU with -qmp unix:%s,server,nowait",
                            path, S_ISREG(st.st_mode) ? "regular file" : "non-socket file", path);
    return 0;
}

static int connect_unix(const char *path, int *fd, struct qp_error *err)
{
    int rc = check_unix_path(path, err);
    if (rc < 0)
        return rc;
    rc = qp_sock_connect_unix(path, fd, err);
    if (rc == -EACCES || rc == -EPERM)
        return qp_error_set(err, -EACCES,
                            "permission denied on the QMP socket %s (owned by another user? "
                            "run qprof as QEMU's user)",
                            path);
    if (rc == -ECONNREFUSED)
        return qp_error_set(err, -EPIPE,
                            "nothing listens on the QMP socket %s: QEMU has exited (stale "
                            "socket file)",
                            path);
    if (rc == -ENAMETOOLONG)
        return qp_error_set(err, -EINVAL, "QMP socket path too long: %s", path);
    return rc;
}

static int open_socket(qmp_client *c, const char *address, struct qp_error *err)
{
    struct qp_sock_addr a;
    int rc = qp_sock_parse(address, true, &a, err);
    if (rc < 0)
        return rc == -EINVAL ? qp_error_set(err, -EINVAL,
                                            "bad QMP address %s: expected tcp:HOST:PORT", address)
                             : rc;
    if (a.family == QP_SOCK_UNIX)
        return connect_unix(a.path, &c->fd, err);
    rc = qp_sock_connect_tcp(a.host, "127.0.0.1", a.port, &c->fd, err);
    if (rc < 0 && rc != -ENOENT)
        return qp_error_set(err, rc,
                            "cannot connect to QMP at %s (%s): start QEMU with "
                            "-qmp %s,server,nowait",
                            address, strerror(-rc), address);
    c->tcp = rc == 0;
    return rc;
}

int qmp__send(qmp_client *c, const char *buf, size_t len, struct qp_error *err)
{
    if (c->dead)
        return qp_error_set(err, -EPIPE, "QMP connection to %s already failed", c->address);
    int rc = qp_sock_send_all(c->fd, buf, len);
    if (rc < 0) {
        c->dead = true;
        return qp_error_set(err, -EPIPE, "writing to QMP at %s: %s (QEMU exited?)", c->address,
                            strerror(-rc));
    }
    return 0;
}

/* Reads what is available (waiting up to the deadline) into the parser. */
static int read_some(qmp_client *c, int64_t deadline_us, struct qp_error *err)
{
    if (c->dead)
        return qp_error_set(err, -EPIPE, "QMP connection to %s already failed", c->address);
    char buf[65536];
    long n = qp_sock_recv(c->fd, c->tcp, buf, sizeof buf, deadline_us);
    if (n == 0)
        return qp_error_set(err, -ETIMEDOUT, "QEMU did not answer within %.1f s on %s",
                            c->timeout_ms / 1000.0, c->address);
    if (n < 0) {
        c->dead = true;
        return qp_error_set(err, -EPIPE, "QEMU closed the QMP connection %s%s%s", c->address,
                            n != -EPIPE ? ": " : " (QEMU exited?)",
                            n != -EPIPE ? strerror((int)-n) : "");
    }
    int rc = qmp_parser_feed(c->parser, buf, (size_t)n, err);
    if (rc < 0)
        c->dead = true;
    return rc;
}

/* ---- Messages --------------------------------------------------------------------------- */

static void free_event(gpointer p)
{
    struct qmp_event *ev = p;
    json_object_put(ev->data);
    g_free(ev);
}

/* QEMU's timestamps are seconds and microseconds since the epoch; anything else (negative,
 * fractional, absurdly large) is treated as absent rather than trusted into arithmetic. */
static int64_t timestamp_field(json_object *ts, const char *key, int64_t max)
{
    json_object *v;
    if (!json_object_object_get_ex(ts, key, &v) || !json_object_is_type(v, json_type_int))
        return 0;
    int64_t n = json_object_get_int64(v);
    return n >= 0 && n <= max ? n : 0;
}

/* Keeps the queue bounded for events nobody pops: the oldest go first. */
static void queue_event(qmp_client *c, struct qmp_event *ev)
{
    while (g_queue_get_length(c->events) >= QMP_MAX_QUEUED_EVENTS) {
        free_event(g_queue_pop_head(c->events));
        c->events_dropped++;
    }
    g_queue_push_tail(c->events, ev);
}

static void note_event(qmp_client *c, json_object *msg)
{
    json_object *name = NULL, *ts = NULL, *v;
    if (!json_object_object_get_ex(msg, "event", &name) ||
        !json_object_is_type(name, json_type_string))
        return; /* not an event QEMU would send: nothing to name it by */
    struct qmp_event *ev = g_new0(struct qmp_event, 1);
    g_strlcpy(ev->name, json_object_get_string(name), sizeof ev->name);
    if (json_object_object_get_ex(msg, "timestamp", &ts)) {
        /* Up to the year 33658: enough, and far from overflowing the microsecond sum. */
        ev->ts_sec = timestamp_field(ts, "seconds", INT64_C(1) << 40);
        ev->ts_usec = timestamp_field(ts, "microseconds", 999999);
    }
    if (json_object_object_get_ex(msg, "data", &v))
        ev->data = json_object_get(v);
    int64_t us = ev->ts_sec * 1000000 + ev->ts_usec;
    bool own = false;
    if (strcmp(ev->name, "STOP") == 0) {
        c->running = false;
        own = c->swallow_stop;
        c->swallow_stop = false;
        c->stop_ts_us = us;
    } else if (strcmp(ev->name, "RESET") == 0) {
        c->resets++;
    } else if (strcmp(ev->name, "RESUME") == 0) {
        c->running = true;
        own = c->swallow_resume;
        c->swallow_resume = false;
        c->resume_ts_us = us;
    }
    /* Our own sample's STOP/RESUME are consumed by qmp_sample, or they'd pile up unread. */
    if (own)
        free_event(ev);
    else
        queue_event(c, ev);
}

/* Sorts one message: events are queued, replies stored by id. */
static void dispatch(qmp_client *c, json_object *msg)
{
    json_object *id;
    if (json_object_object_get_ex(msg, "event", NULL)) {
        note_event(c, msg);
        json_object_put(msg);
    } else if (json_object_object_get_ex(msg, "id", &id)) {
        c->round_trips++;
        g_hash_table_insert(c->replies, GUINT_TO_POINTER(json_object_get_int64(id)), msg);
    } else {
        json_object_put(msg); /* a reply without an id (QEMU's parse errors); nothing waits */
    }
}

static int reply_result(json_object *reply, json_object **ret, struct qp_error *err)
{
    json_object *v, *cls = NULL, *desc = NULL;
    int rc = 0;
    if (json_object_object_get_ex(reply, "error", &v)) {
        json_object_object_get_ex(v, "class", &cls);
        json_object_object_get_ex(v, "desc", &desc);
        rc = qp_error_set(err, -EREMOTEIO, "%s: %s", cls ? json_object_get_string(cls) : "?",
                          desc ? json_object_get_string(desc) : "?");
    } else if (!json_object_object_get_ex(reply, "return", &v)) {
        rc = qp_error_set(err, -EPROTO, "QMP reply without return or error: %s",
                          json_object_to_json_string(reply));
    } else if (ret) {
        *ret = json_object_get(v);
    }
    json_object_put(reply);
    return rc;
}

void qmp__dispatch_parsed(qmp_client *c)
{
    json_object *msg;
    while (qmp_parser_next(c->parser, &msg) == 1)
        dispatch(c, msg);
}

int qmp__wait_until(qmp_client *c, unsigned id, int64_t deadline_us, json_object **ret,
                    struct qp_error *err)
{
    for (;;) {
        qmp__dispatch_parsed(c);
        gpointer reply;
        if (g_hash_table_steal_extended(c->replies, GUINT_TO_POINTER(id), NULL, &reply))
            return reply_result(reply, ret, err);
        int rc = read_some(c, deadline_us, err);
        if (rc < 0)
            return rc;
    }
}

int qmp_wait_stop_after(qmp_client *c, int64_t after_us, int timeout_ms, int64_t *stop_us,
                        struct qp_error *err)
{
    int64_t deadline = qmp__now_us() + (int64_t)timeout_ms * 1000;
    for (;;) {
        qmp__dispatch_parsed(c);
        if (c->stop_ts_us > after_us) {
            *stop_us = c->stop_ts_us;
            return 0;
        }
        int rc = read_some(c, deadline, err);
        if (rc < 0)
            return rc;
    }
}

int qmp__wait(qmp_client *c, unsigned id, json_object **ret, struct qp_error *err)
{
    return qmp__wait_until(c, id, qmp__now_us() + (int64_t)c->timeout_ms * 1000, ret, err);
}

unsigned qmp__request(qmp_client *c, GString *out, const char *command, json_object *args)
{
    unsigned id = ++c->next_id;
    /* Every byte costs QEMU ~2.5 us: compact, integer ids, no escaped slashes. */
    g_string_append_printf(out, "{\"execute\":\"%s\"", command);
    if (args)
        g_string_append_printf(out, ",\"arguments\":%s",
                               json_object_to_json_string_ext(
                                   args, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    g_string_append_printf(out, ",\"id\":%u}", id);
    return id;
}

int qmp_execute(qmp_client *c, const char *command, struct json_object *args,
                struct json_object **ret, struct qp_error *err)
{
    GString *req = g_string_new(NULL);
    unsigned id = qmp__request(c, req, command, args);
    int rc = qmp__send(c, req->str, req->len, err);
    g_string_free(req, TRUE);
    if (rc == 0)
        rc = qmp__wait(c, id, ret, err);
    if (rc < 0 && rc != -EREMOTEIO)
        qp_error_prefix(err, "%s", command);
    return rc;
}

int qmp__hmp_text(json_object *ret, char **out, struct qp_error *err)
{
    if (!json_object_is_type(ret, json_type_string)) {
        json_object_put(ret);
        return qp_error_set(err, -EPROTO, "human-monitor-command returned no text");
    }
    *out = strdup(json_object_get_string(ret));
    json_object_put(ret);
    return *out ? 0 : qp_error_set(err, -ENOMEM, "out of memory");
}

json_object *qmp__hmp_args(const char *cmdline, int cpu_index)
{
    json_object *args = json_object_new_object();
    json_object_object_add(args, "command-line", json_object_new_string(cmdline));
    if (cpu_index >= 0)
        json_object_object_add(args, "cpu-index", json_object_new_int(cpu_index));
    return args;
}

int qmp_hmp(qmp_client *c, const char *cmdline, int cpu_index, char **out, struct qp_error *err)
{
    json_object *args = qmp__hmp_args(cmdline, cpu_index), *ret = NULL;
    int rc = qmp_execute(c, "human-monitor-command", args, &ret, err);
    json_object_put(args);
    if (rc == 0)
        rc = qmp__hmp_text(ret, out, err);
    return rc;
}

int qmp_pop_event(qmp_client *c, struct qmp_event *ev)
{
    qmp__dispatch_parsed(c); /* already read from the socket: sort without reading more */
    struct qmp_event *head = g_queue_pop_head(c->events);
    if (!head)
        return 0;
    *ev = *head;
    g_free(head);
    return 1;
}

int qmp_query_running(qmp_client *c, bool *running, struct qp_error *err)
{
    json_object *ret = NULL, *v;
    int rc = qmp_execute(c, "query-status", NULL, &ret, err);
    if (rc < 0)
        return rc;
    if (!json_object_object_get_ex(ret, "running", &v))
        rc = qp_error_set(err, -EPROTO, "query-status: no \"running\" in the reply");
    else
        c->running = *running = json_object_get_boolean(v);
    json_object_put(ret);
    return rc;
}

int qmp_read_registers(qmp_client *c, struct qmp_regs *out, int max, int *n_cpus,
                       struct qp_error *err)
{
    char *text = NULL;
    int rc = qmp_hmp(c, "info registers -a", -1, &text, err);
    if (rc == 0)
        rc = qmp_parse_registers(text, out, max, n_cpus, err);
    free(text);
    return rc;
}

void qmp_set_timeout(qmp_client *c, double seconds)
{
    if (seconds > 0)
        c->timeout_ms = (int)(seconds * 1000);
}

uint64_t qmp_resets(const qmp_client *c)
{
    return c->resets;
}

uint64_t qmp_events_dropped(const qmp_client *c)
{
    return c->events_dropped;
}

uint64_t qmp_round_trips(const qmp_client *c)
{
    return c->round_trips;
}

int qmp_socket_fd(const qmp_client *c)
{
    return c->fd;
}

const char *qmp_qemu_version(const qmp_client *c)
{
    return c->version;
}

/* ---- Open / free ------------------------------------------------------------------------ */

/* The next whole message of the greeting phase, in *msg (the caller puts it). */
static int next_greeting_message(qmp_client *c, int64_t deadline, json_object **msg,
                                 struct qp_error *err)
{
    while (qmp_parser_next(c->parser, msg) == 0) {
        struct qp_error e = {0};
        int rc = read_some(c, deadline, &e);
        if (rc == -ETIMEDOUT)
            return qp_error_set(err, rc,
                                "no QMP greeting from %s within %.1f s: QEMU serves one client "
                                "per -qmp socket; is another client (qprof, virsh, a monitor "
                                "script) already connected?",
                                c->address, c->timeout_ms / 1000.0);
        if (rc == -EPROTO)
            return qp_error_set(err, rc, "%s does not speak QMP: %s", c->address, e.msg);
        if (rc < 0)
            return qp_error_set(err, rc, "QMP greeting from %s: %s", c->address, e.msg);
    }
    return 0;
}

static int read_greeting(qmp_client *c, struct qp_error *err)
{
    int64_t deadline = qmp__now_us() + (int64_t)c->timeout_ms * 1000;
    json_object *msg = NULL, *qmp, *v, *q;
    int rc;
    /* An event can come before the greeting: QEMU may flush one it queued for the client
     * before (a RESUME, say) to a client that connects right after that one left. */
    for (int events = 0; events <= 16; events++) {
        if (msg && !json_object_object_get_ex(msg, "QMP", &qmp) &&
            json_object_object_get_ex(msg, "event", &v)) {
            json_object_put(msg);
            msg = NULL;
        }
        if (msg)
            break;
        if ((rc = next_greeting_message(c, deadline, &msg, err)) < 0)
            return rc;
    }
    rc = 0;
    if (!json_object_object_get_ex(msg, "QMP", &qmp))
        rc = qp_error_set(err, -EPROTO, "%s does not speak QMP: first message is %.100s",
                          c->address, json_object_to_json_string(msg));
    else if (json_object_object_get_ex(qmp, "version", &v) &&
             json_object_object_get_ex(v, "qemu", &q)) {
        json_object *ma = NULL, *mi = NULL, *mc = NULL;
        json_object_object_get_ex(q, "major", &ma);
        json_object_object_get_ex(q, "minor", &mi);
        json_object_object_get_ex(q, "micro", &mc);
        snprintf(c->version, sizeof c->version, "%d.%d.%d", json_object_get_int(ma),
                 json_object_get_int(mi), json_object_get_int(mc));
    }
    json_object_put(msg);
    return rc;
}

static void put_reply(gpointer reply)
{
    json_object_put(reply);
}

int qmp__connect(const char *address, const struct qmp_open_opts *opts, qmp_client **out,
                 struct qp_error *err)
{
    qmp_client *c = g_new0(qmp_client, 1);
    c->fd = -1;
    c->parser = qmp_parser_new();
    c->events = g_queue_new();
    c->replies = g_hash_table_new_full(NULL, NULL, NULL, put_reply);
    c->timeout_ms = opts && opts->timeout_s > 0 ? (int)(opts->timeout_s * 1000) : 5000;
    g_strlcpy(c->address, address, sizeof c->address);
    bool running;
    int rc = open_socket(c, address, err);
    if (rc == 0)
        rc = read_greeting(c, err);
    if (rc == 0)
        rc = qmp_execute(c, "qmp_capabilities", NULL, NULL, err);
    if (rc == 0)
        rc = qmp_query_running(c, &running, err);
    if (rc == 0 && opts && opts->guard && !(c->guard = qmp__guard_start(c->fd, err)))
        rc = err ? err->code : -EAGAIN;
    if (rc < 0) {
        qmp__disconnect(c);
        return rc;
    }
    *out = c;
    return 0;
}

void qmp__disconnect(qmp_client *c)
{
    if (!c)
        return;
    if (c->stopped_by_us && !c->dead) {
        /* Never leave a guest we paused behind, whatever went wrong before. */
        c->swallow_resume = true;
        if (qmp_execute(c, "cont", NULL, NULL, NULL) == 0)
            qmp__owe_cont(c, false);
    }
    /* A cont still owed: the guardian tries it too before it goes. */
    qmp__guard_stop(c->guard, !c->stopped_by_us);
    if (c->fd >= 0)
        close(c->fd);
    qmp_parser_free(c->parser);
    g_queue_free_full(c->events, free_event);
    g_hash_table_destroy(c->replies);
    g_free(c);
}
