/* Fuzz target: the QMP stream parser (qmp_parser_new/feed/next).
 *
 * Input: byte 0 picks where the stream is split, the rest is the stream. The stream is fed
 * whole, in those two pieces, and one byte at a time, draining messages between feeds as the
 * client does. A streaming parser must not care where the socket cut its reads: the messages
 * that two runs deliver agree, one run's being the start of the other's.
 *
 * Known open findings in qmp/qmp_parser.c, from json-c's tokener in its default, non-strict mode
 * (reproducers in tests/fuzz/regressions/qmp_parser/): resuming a number cut between two feeds
 * it accepts a '-' after the digits, so {"a": 1-} fails whole but parses as {"a": 1} when split
 * (split-number-leniency); and it takes '/' for the start of a comment, so a complete message
 * followed by '/' in the same read is withheld, while a read that ends before the '/' delivers
 * it (message-withheld-by-comment). Set QPROF_FUZZ_STRICT_SPLIT=1 to require that every split
 * delivers the same messages and fails where the whole feed fails. */
#include <json-c/json.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "qmp.h"

#define MAX_MESSAGES 64

struct run {
    char *texts[MAX_MESSAGES]; /* the first messages, as JSON text */
    int n;
    int failed_at; /* index of the feed that failed, or -1 */
};

static void drain(qmp_parser *p, struct run *r)
{
    struct json_object *msg;
    while (qmp_parser_next(p, &msg) == 1) {
        FUZZ_ASSERT(json_object_is_type(msg, json_type_object));
        /* What the client looks at in every message. */
        struct json_object *field;
        json_object_object_get_ex(msg, "id", &field);
        json_object_object_get_ex(msg, "event", &field);
        if (r->n < MAX_MESSAGES)
            r->texts[r->n] = strdup(json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN));
        r->n++;
        json_object_put(msg);
    }
}

static void feed(qmp_parser *p, const char *bytes, size_t len, int index, struct run *r)
{
    struct qp_error err = {0};
    if (r->failed_at >= 0) {
        /* A failed parser stays failed. */
        FUZZ_ASSERT(qmp_parser_feed(p, bytes, len, &err) == -EPROTO);
        return;
    }
    int rc = qmp_parser_feed(p, bytes, len, &err);
    FUZZ_ASSERT(rc == 0 || (rc == -EPROTO && err.msg[0] != '\0'));
    if (rc < 0)
        r->failed_at = index;
    drain(p, r);
}

static void run_free(struct run *r)
{
    for (int i = 0; i < r->n && i < MAX_MESSAGES; i++)
        free(r->texts[i]);
}

/* Whether every message of a is the same message of b, in order. */
static bool is_prefix(const struct run *a, const struct run *b)
{
    if (a->n > b->n)
        return false;
    for (int i = 0; i < a->n && i < MAX_MESSAGES; i++)
        if (strcmp(a->texts[i], b->texts[i]) != 0)
            return false;
    return true;
}

static void check_split(const struct run *whole, const struct run *split)
{
    FUZZ_ASSERT(is_prefix(whole, split) || is_prefix(split, whole));
    if (getenv("QPROF_FUZZ_STRICT_SPLIT"))
        FUZZ_ASSERT(whole->n == split->n && (whole->failed_at >= 0) == (split->failed_at >= 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *stream = (const char *)data + 1;
    size_t len = size - 1, split = len * data[0] / 255;

    struct run whole = {.failed_at = -1}, halves = {.failed_at = -1}, bytewise = {.failed_at = -1};
    qmp_parser *p = qmp_parser_new();
    feed(p, stream, len, 0, &whole);
    qmp_parser_free(p);

    p = qmp_parser_new();
    feed(p, stream, split, 0, &halves);
    feed(p, stream + split, len - split, 1, &halves);
    qmp_parser_free(p);

    p = qmp_parser_new();
    for (size_t i = 0; i < len && bytewise.failed_at < 0; i++)
        feed(p, stream + i, 1, (int)i, &bytewise);
    qmp_parser_free(p);

    check_split(&whole, &halves);
    check_split(&whole, &bytewise);
    run_free(&whole);
    run_free(&halves);
    run_free(&bytewise);
    return 0;
}
