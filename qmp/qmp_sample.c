/* The sample transaction: stop, registers, caller's reads, cont on every path (see qmp.h). */
#include "qmp_internal.h"
#include "qp_sock.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Takes in events that already arrived (someone else may have paused the guest) without
 * waiting. */
static void absorb_pending(qmp_client *c)
{
    while (!c->dead) {
        char buf[4096];
        long n = qp_sock_recv(c->fd, c->tcp, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && n != -EPIPE))
            break; /* nothing more for now */
        if (n < 0 || qmp_parser_feed(c->parser, buf, (size_t)n, NULL) < 0) {
            c->dead = true; /* the next request reports it */
            break;
        }
    }
    qmp__dispatch_parsed(c);
}

int64_t qmp_last_stop_us(const qmp_client *c)
{
    return c->stop_ts_us;
}

int64_t qmp_last_resume_us(const qmp_client *c)
{
    return c->resume_ts_us;
}

bool qmp_guest_running(qmp_client *c)
{
    absorb_pending(c);
    return c->running || c->stopped_by_us || c->dead;
}

/* Sends stop and `info registers -a` back to back: one write, two replies. *text (the caller
 * frees it, free()) is the register text. */
static int stop_and_read(qmp_client *c, char **regs_text, struct qp_error *err)
{
    GString *out = g_string_new(NULL);
    json_object *regs_args = json_object_new_object(), *text = NULL;
    json_object_object_add(regs_args, "command-line", json_object_new_string("info registers -a"));
    unsigned stop_id = qmp__request(c, out, "stop", NULL);
    unsigned regs_id = qmp__request(c, out, "human-monitor-command", regs_args);
    json_object_put(regs_args);
    c->swallow_stop = true;
    qmp__owe_cont(c, true); /* from here on we owe the guest a cont, whatever happens */
    int rc = qmp__send(c, out->str, out->len, err);
    g_string_free(out, TRUE);
    if (rc == 0 && (rc = qmp__wait(c, stop_id, NULL, err)) < 0)
        qp_error_prefix(err, "stop");
    if (rc == 0 && (rc = qmp__wait(c, regs_id, &text, err)) < 0)
        qp_error_prefix(err, "info registers -a");
    if (rc == 0 && !json_object_is_type(text, json_type_string))
        rc = qp_error_set(err, -EPROTO, "info registers -a returned no text");
    if (rc == 0)
        *regs_text = strdup(json_object_get_string(text));
    json_object_put(text);
    return rc;
}

static int resume(qmp_client *c, struct qp_error *err)
{
    c->swallow_resume = true;
    int rc = qmp_execute(c, "cont", NULL, NULL, err);
    if (rc == 0) {
        qmp__owe_cont(c, false);
        c->running = true;
    }
    /* Replies to requests that timed out before the cont are stale now. */
    g_hash_table_remove_all(c->replies);
    return rc;
}

/* The guest was paused by someone else: read, call back, leave it as it was. */
static int sample_paused(qmp_client *c, qmp_sample_text_fn fn, void *ctx, struct qp_error *err)
{
    char *text = NULL;
    int rc = qmp_hmp(c, "info registers -a", -1, &text, err);
    if (rc == 0 && fn)
        rc = fn(c, text, ctx, err);
    free(text);
    return rc;
}

/* Worth saying only while QEMU lives: then the guest may be left paused until the next try. */
static void append_cont_failure(struct qp_error *err, int rc, const struct qp_error *cont_err)
{
    char first[QP_ERROR_MSG_MAX];
    g_strlcpy(first, err->msg, sizeof first);
    qp_error_set(err, rc, "%s; resuming the guest failed too (%s)", first, cont_err->msg);
}

int qmp_sample_text(qmp_client *c, qmp_sample_text_fn fn, void *ctx, struct qmp_sample_stats *stats,
                    struct qp_error *err)
{
    struct qmp_sample_stats st = {0};
    uint64_t rt0 = c->round_trips;
    absorb_pending(c);
    int rc;
    /* A cont that failed or timed out last time is still owed: the guest is paused because of
     * us, not by someone else, and must not be sampled frozen. */
    if (c->stopped_by_us && (rc = resume(c, err)) < 0) {
        st.round_trips = (unsigned)(c->round_trips - rt0);
        if (stats)
            *stats = st;
        return qp_error_prefix(err, "resuming the guest left paused by the last sample");
    }
    if (!c->running) {
        st.was_paused = true;
        rc = sample_paused(c, fn, ctx, err);
    } else {
        char *text = NULL;
        c->stop_ts_us = c->resume_ts_us = 0;
        int64_t t0 = qmp__now_us();
        rc = stop_and_read(c, &text, err);
        if (rc == 0 && fn)
            rc = fn(c, text, ctx, err);
        free(text);
        /* cont on every path; a callback failure keeps its own error message. */
        struct qp_error cont_err = {0};
        int cont_rc = resume(c, rc < 0 ? &cont_err : err);
        if (rc == 0)
            rc = cont_rc;
        else if (cont_rc < 0 && !c->dead && err)
            append_cont_failure(err, rc, &cont_err);
        int64_t t1 = qmp__now_us();
        bool have_ts = c->stop_ts_us > 0 && c->resume_ts_us >= c->stop_ts_us;
        st.paused_ns = (uint64_t)(have_ts ? c->resume_ts_us - c->stop_ts_us : t1 - t0) * 1000;
    }
    st.round_trips = (unsigned)(c->round_trips - rt0);
    if (stats)
        *stats = st;
    return rc;
}

/* qmp_sample is qmp_sample_text with x86_64's parser in between. */
struct x86_sample {
    qmp_sample_fn fn;
    void *ctx;
};

static int parse_then_call(qmp_client *c, const char *text, void *ctx, struct qp_error *err)
{
    const struct x86_sample *x = ctx;
    struct qmp_regs cpus[QMP_MAX_CPUS];
    int n = 0;
    int rc = qmp_parse_registers(text, cpus, QMP_MAX_CPUS, &n, err);
    if (rc == 0 && x->fn)
        rc = x->fn(c, cpus, n, x->ctx, err);
    return rc;
}

int qmp_sample(qmp_client *c, qmp_sample_fn fn, void *ctx, struct qmp_sample_stats *stats,
               struct qp_error *err)
{
    struct x86_sample x = {fn, ctx};
    return qmp_sample_text(c, parse_then_call, &x, stats, err);
}
