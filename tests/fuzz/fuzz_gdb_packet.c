/* Fuzz target: the GDB remote-protocol stream parser (gdb_parser_new/set_no_ack/feed/next) and
 * gdb_frame.
 *
 * Input: byte 0 picks the mode (bit 0: no-ack) and where the stream is split (bits 1-7), the rest
 * is what a stub sends. The stream is fed whole, in those two pieces, and one byte at a time,
 * draining packets between feeds as the client does. The parser is a byte-at-a-time state
 * machine, so the three runs must deliver the same packets (and gap markers) in the same order
 * and fail alike; a failed parser keeps failing. Every payload is at most GDB_MAX_PACKET bytes
 * with a NUL after it, gap markers come only in ack mode and never outnumber the bad checksums,
 * the good-packet count matches what was delivered, and gdb_frame(payload) parses back to the
 * same payload. */
#include <errno.h>
#include <glib.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gdb.h"

struct run {
    GPtrArray *packets; /* GBytes *, or NULL for a gap marker */
    int failed_at;      /* index of the feed that failed, or -1 */
    uint64_t markers, good;
};

static void run_init(struct run *r)
{
    r->packets = g_ptr_array_new();
    r->failed_at = -1;
    r->markers = r->good = 0;
}

static void run_free(struct run *r)
{
    for (guint i = 0; i < r->packets->len; i++)
        if (r->packets->pdata[i])
            g_bytes_unref(r->packets->pdata[i]);
    g_ptr_array_free(r->packets, TRUE);
}

/* gdb_frame's output is one packet that decodes back to the payload. */
static void check_round_trip(const char *payload, size_t len)
{
    size_t framed_len;
    char *framed = gdb_frame(payload, len, &framed_len);
    gdb_parser *p = gdb_parser_new();
    gdb_parser_set_no_ack(p, true);
    struct qp_error err = {0};
    FUZZ_ASSERT(gdb_parser_feed(p, framed, framed_len, &err) == 0);
    char *again = NULL;
    size_t again_len = 0;
    FUZZ_ASSERT(gdb_parser_next(p, &again, &again_len) == 1);
    FUZZ_ASSERT(again_len == len && memcmp(again, payload, len) == 0);
    free(again);
    FUZZ_ASSERT(gdb_parser_next(p, &again, &again_len) == 0);
    gdb_parser_free(p);
    free(framed);
}

static void drain(gdb_parser *p, bool no_ack, struct run *r)
{
    char *payload;
    size_t len;
    int rc;
    while ((rc = gdb_parser_next(p, &payload, &len)) != 0) {
        FUZZ_ASSERT(rc == 1 || rc == 2);
        if (rc == 2) {
            FUZZ_ASSERT(payload == NULL && len == 0);
            FUZZ_ASSERT(!no_ack);
            r->markers++;
            g_ptr_array_add(r->packets, NULL);
            continue;
        }
        FUZZ_ASSERT(payload != NULL);
        FUZZ_ASSERT(len <= GDB_MAX_PACKET);
        FUZZ_ASSERT(payload[len] == '\0');
        r->good++;
        g_ptr_array_add(r->packets, g_bytes_new_take(payload, len));
    }
}

static void feed(gdb_parser *p, bool no_ack, const char *bytes, size_t len, int index,
                 struct run *r)
{
    struct qp_error err = {0};
    if (r->failed_at >= 0) {
        /* A failed parser stays failed. */
        FUZZ_ASSERT(gdb_parser_feed(p, bytes, len, &err) == -EPROTO && err.msg[0] != '\0');
        return;
    }
    int rc = gdb_parser_feed(p, bytes, len, &err);
    FUZZ_ASSERT(rc == 0 || (rc == -EPROTO && err.msg[0] != '\0'));
    if (rc < 0)
        r->failed_at = index;
    drain(p, no_ack, r);
}

static void check_counters(const gdb_parser *p, const struct run *r)
{
    FUZZ_ASSERT(gdb_parser_packets(p) == r->good);
    FUZZ_ASSERT(r->markers <= gdb_parser_bad_checksums(p));
}

static bool same_packets(const struct run *a, const struct run *b)
{
    if (a->packets->len != b->packets->len)
        return false;
    for (guint i = 0; i < a->packets->len; i++) {
        GBytes *x = a->packets->pdata[i], *y = b->packets->pdata[i];
        if ((x == NULL) != (y == NULL) || (x && !g_bytes_equal(x, y)))
            return false;
    }
    return true;
}

static void check_split(const struct run *whole, const struct run *split)
{
    FUZZ_ASSERT(same_packets(whole, split));
    FUZZ_ASSERT((whole->failed_at >= 0) == (split->failed_at >= 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool no_ack = data[0] & 1;
    const char *stream = (const char *)data + 1;
    size_t len = size - 1, split = len * (data[0] >> 1) / 127;

    struct run whole, halves, bytewise;
    run_init(&whole);
    run_init(&halves);
    run_init(&bytewise);

    gdb_parser *p = gdb_parser_new();
    gdb_parser_set_no_ack(p, no_ack);
    feed(p, no_ack, stream, len, 0, &whole);
    feed(p, no_ack, "$#00", 4, 1, &whole); /* after a failure too */
    check_counters(p, &whole);
    gdb_parser_free(p);

    p = gdb_parser_new();
    gdb_parser_set_no_ack(p, no_ack);
    feed(p, no_ack, stream, split, 0, &halves);
    feed(p, no_ack, stream + split, len - split, 1, &halves);
    feed(p, no_ack, "$#00", 4, 2, &halves);
    check_counters(p, &halves);
    gdb_parser_free(p);

    p = gdb_parser_new();
    gdb_parser_set_no_ack(p, no_ack);
    for (size_t i = 0; i < len; i++)
        feed(p, no_ack, stream + i, 1, (int)i, &bytewise);
    feed(p, no_ack, "$#00", 4, (int)len, &bytewise);
    check_counters(p, &bytewise);
    gdb_parser_free(p);

    check_split(&whole, &halves);
    check_split(&whole, &bytewise);
    for (guint i = 0; i < whole.packets->len; i++) {
        GBytes *b = whole.packets->pdata[i];
        if (b) {
            size_t n;
            const char *payload = g_bytes_get_data(b, &n);
            check_round_trip(payload ? payload : "", n);
        }
    }
    run_free(&whole);
    run_free(&halves);
    run_free(&bytewise);
    return 0;
}
