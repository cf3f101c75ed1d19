/* GDB remote-protocol stream parser: a byte-at-a-time state machine, no I/O (see gdb.h). */
#include "gdb.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum state {
    ST_IDLE,  /* between packets: acks, 0x03 and noise are skipped */
    ST_BODY,  /* after `$` (or `%`): raw payload bytes */
    ST_CSUM1, /* after `#` */
    ST_CSUM2,
};

struct gdb_parser {
    enum state st;
    bool notification; /* the packet being read started with `%`: dropped at its end */
    bool no_ack;
    bool broken;
    GByteArray *raw; /* payload as sent, escapes and RLE still in */
    uint8_t csum_hi;
    GQueue *ready; /* GByteArray *, decoded, NUL-terminated */
    uint64_t packets, bad;
};

gdb_parser *gdb_parser_new(void)
{
    gdb_parser *p = g_new0(gdb_parser, 1);
    p->raw = g_byte_array_new();
    p->ready = g_queue_new();
    return p;
}

static void free_packet(gpointer a)
{
    g_byte_array_free(a, TRUE);
}

void gdb_parser_free(gdb_parser *p)
{
    if (!p)
        return;
    g_byte_array_free(p->raw, TRUE);
    g_queue_free_full(p->ready, free_packet);
    g_free(p);
}

void gdb_parser_set_no_ack(gdb_parser *p, bool no_ack)
{
    p->no_ack = no_ack;
}

uint64_t gdb_parser_packets(const gdb_parser *p)
{
    return p->packets;
}

uint64_t gdb_parser_bad_checksums(const gdb_parser *p)
{
    return p->bad;
}

static int fail(gdb_parser *p, struct qp_error *err, const char *why)
{
    p->broken = true;
    return qp_error_set(err, -EPROTO, "malformed GDB remote stream: %s", why);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Undoes `}` escapes and `*` run lengths; the checksum was over the raw bytes. */
static int decode(gdb_parser *p, struct qp_error *err)
{
    GByteArray *out = g_byte_array_sized_new(p->raw->len + 1);
    const uint8_t *r = p->raw->data;
    for (size_t i = 0; i < p->raw->len; i++) {
        uint8_t c = r[i];
        if (c == '}') {
            if (++i >= p->raw->len) {
                g_byte_array_free(out, TRUE);
                return fail(p, err, "packet ends inside an escape");
            }
            c = r[i] ^ 0x20;
        } else if (c == '*') {
            /* The count char is n + 29 and repeats the previous decoded byte n times. */
            if (++i >= p->raw->len || out->len == 0 || r[i] < 29 + 3) {
                g_byte_array_free(out, TRUE);
                return fail(p, err, "bad run-length encoding");
            }
            uint8_t prev = out->data[out->len - 1];
            for (int k = 0; k < r[i] - 29; k++)
                g_byte_array_append(out, &prev, 1);
            if (out->len > GDB_MAX_PACKET) {
                g_byte_array_free(out, TRUE);
                return fail(p, err, "packet larger than 1 MiB");
            }
            continue;
        }
        g_byte_array_append(out, &c, 1);
        if (out->len > GDB_MAX_PACKET) {
            g_byte_array_free(out, TRUE);
            return fail(p, err, "packet larger than 1 MiB");
        }
    }
    uint8_t nul = 0;
    g_byte_array_append(out, &nul, 1);
    g_queue_push_tail(p->ready, out);
    p->packets++;
    return 0;
}

static int finish(gdb_parser *p, uint8_t sum, struct qp_error *err)
{
    uint8_t want = 0;
    for (size_t i = 0; i < p->raw->len; i++)
        want += p->raw->data[i];
    if (want != sum) {
        p->bad++;
        if (p->no_ack) {
            char why[64];
            snprintf(why, sizeof why, "bad checksum %02x (expected %02x) in no-ack mode", sum,
                     want);
            return fail(p, err, why);
        }
        /* A marker where the packet was (real packets hold at least their NUL), so the reader
         * knows which reply is missing; a notification is nobody's reply. */
        if (!p->notification)
            g_queue_push_tail(p->ready, g_byte_array_new());
        return 0;
    }
    if (p->notification)
        return 0; /* asynchronous notifications are only used in non-stop mode: not ours */
    return decode(p, err);
}

int gdb_parser_feed(gdb_parser *p, const char *bytes, size_t len, struct qp_error *err)
{
    if (p->broken)
        return qp_error_set(err, -EPROTO, "malformed GDB remote stream (parser already failed)");
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)bytes[i];
        int h;
        switch (p->st) {
        case ST_IDLE:
            /* `+`/`-` acks, a bare 0x03 and anything else outside a packet are skipped. */
            if (c == '$' || c == '%') {
                p->notification = c == '%';
                g_byte_array_set_size(p->raw, 0);
                p->st = ST_BODY;
            }
            break;
        case ST_BODY:
            if (c == '#') {
                p->st = ST_CSUM1;
            } else if (c == '$') {
                /* A stub that restarts a packet (after a lost ack) means the old one is lost. */
                g_byte_array_set_size(p->raw, 0);
                p->notification = false;
            } else {
                g_byte_array_append(p->raw, &c, 1);
                if (p->raw->len > GDB_MAX_PACKET)
                    return fail(p, err, "packet larger than 1 MiB");
            }
            break;
        case ST_CSUM1:
            if ((h = hexval(c)) < 0)
                return fail(p, err, "checksum is not hex");
            p->csum_hi = (uint8_t)h;
            p->st = ST_CSUM2;
            break;
        case ST_CSUM2: {
            if ((h = hexval(c)) < 0)
                return fail(p, err, "checksum is not hex");
            p->st = ST_IDLE;
            int rc = finish(p, (uint8_t)(p->csum_hi << 4 | h), err);
            if (rc < 0)
                return rc;
            break;
        }
        }
    }
    return 0;
}

int gdb_parser_next(gdb_parser *p, char **payload, size_t *len)
{
    GByteArray *a = g_queue_pop_head(p->ready);
    if (!a)
        return 0;
    if (a->len == 0) {
        g_byte_array_free(a, TRUE);
        *payload = NULL;
        if (len)
            *len = 0;
        return 2;
    }
    size_t n = a->len - 1;
    char *s = malloc(a->len);
    memcpy(s, a->data, a->len);
    g_byte_array_free(a, TRUE);
    *payload = s;
    if (len)
        *len = n;
    return 1;
}

char *gdb_frame(const char *payload, size_t len, size_t *out_len)
{
    GString *s = g_string_sized_new(len + 8);
    uint8_t sum = 0;
    g_string_append_c(s, '$');
    for (size_t i = 0; i < len; i++) {
        char c = payload[i];
        if (c == '$' || c == '#' || c == '}' || c == '*') {
            g_string_append_c(s, '}');
            sum += '}';
            c ^= 0x20;
        }
        g_string_append_c(s, c);
        sum += (uint8_t)c;
    }
    g_string_append_printf(s, "#%02x", sum);
    if (out_len)
        *out_len = s->len;
    char *out = malloc(s->len + 1); /* payloads may hold NUL: not strdup */
    memcpy(out, s->str, s->len + 1);
    g_string_free(s, TRUE);
    return out;
}

size_t gdb_hex_decode(const char *hex, size_t max, uint8_t *out)
{
    size_t k = 0;
    for (; k < max; k++) {
        int hi = hexval(hex[2 * k]), lo = hi < 0 ? -1 : hexval(hex[2 * k + 1]);
        if (hi < 0 || lo < 0)
            break;
        out[k] = (uint8_t)(hi << 4 | lo);
    }
    return k;
}
