/* QMP stream parser: json_tokener fed incrementally, no I/O (see qmp.h). */
#include "qmp.h"

#include <glib.h>
#include <json-c/json.h>

#define QMP_MAX_MESSAGE (64u << 20)

struct qmp_parser {
    json_tokener *tok;
    GQueue *ready;    /* complete top-level objects, oldest first */
    size_t msg_bytes; /* bytes fed into the message being parsed */
    bool broken;
};

qmp_parser *qmp_parser_new(void)
{
    qmp_parser *p = g_new0(qmp_parser, 1);
    p->tok = json_tokener_new();
    p->ready = g_queue_new();
    return p;
}

static void put_object(gpointer obj)
{
    json_object_put(obj);
}

void qmp_parser_free(qmp_parser *p)
{
    if (!p)
        return;
    json_tokener_free(p->tok);
    g_queue_free_full(p->ready, put_object);
    g_free(p);
}

/* Whitespace between messages (QEMU ends each with CRLF) must not count as the start of one. */
static size_t skip_space(const char *bytes, size_t len)
{
    size_t i = 0;
    while (i < len && (bytes[i] == ' ' || bytes[i] == '\t' || bytes[i] == '\r' || bytes[i] == '\n'))
        i++;
    return i;
}

static int fail(qmp_parser *p, struct qp_error *err, const char *why)
{
    p->broken = true;
    return qp_error_set(err, -EPROTO, "malformed QMP stream: %s", why);
}

/* Feeds one chunk to the tokener, which stops right after a complete value. */
static int feed_chunk(qmp_parser *p, const char *bytes, size_t len, size_t *used,
                      struct qp_error *err)
{
    json_object *obj = json_tokener_parse_ex(p->tok, bytes, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(p->tok);
    if (!obj && jerr == json_tokener_continue) {
        *used = len;
        p->msg_bytes += len;
        return p->msg_bytes > QMP_MAX_MESSAGE ? fail(p, err, "message larger than 64 MiB") : 0;
    }
    if (!obj)
        return fail(p, err, json_tokener_error_desc(jerr));
    *used = json_tokener_get_parse_end(p->tok);
    json_tokener_reset(p->tok);
    p->msg_bytes = 0;
    if (!json_object_is_type(obj, json_type_object)) {
        json_object_put(obj);
        return fail(p, err, "top-level value is not an object");
    }
    g_queue_push_tail(p->ready, obj);
    return 0;
}

int qmp_parser_feed(qmp_parser *p, const char *bytes, size_t len, struct qp_error *err)
{
    if (p->broken)
        return qp_error_set(err, -EPROTO, "malformed QMP stream (parser already failed)");
    while (len > 0) {
        if (p->msg_bytes == 0) {
            size_t ws = skip_space(bytes, len);
            bytes += ws;
            len -= ws;
            if (len == 0)
                break;
        }
        /* json_tokener takes an int length; chunk huge inputs. */
        size_t chunk = len > (1u << 30) ? (1u << 30) : len, used = 0;
        int rc = feed_chunk(p, bytes, chunk, &used, err);
        if (rc < 0)
            return rc;
        if (used == 0)
            return fail(p, err, "parser made no progress");
        bytes += used;
        len -= used;
    }
    return 0;
}

int qmp_parser_next(qmp_parser *p, struct json_object **msg)
{
    json_object *obj = g_queue_pop_head(p->ready);
    if (!obj)
        return 0;
    *msg = obj;
    return 1;
}
