/* The QMP stream parser fed real QEMU traffic split at every byte position. */
#include "harness.h"
#include "qmp.h"

#include <json-c/json.h>

/* Captured from QEMU 7.2: greeting, a reply, events interleaved, an error, an HMP reply. */
static const char stream[] =
    "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, \"major\": 7}, "
    "\"package\": \"Debian 1:7.2+dfsg-7+deb12u18+b3\"}, \"capabilities\": [\"oob\"]}}\r\n"
    "{\"return\": {}, \"id\": 1}\r\n"
    "{\"timestamp\": {\"seconds\": 1795290133, \"microseconds\": 291249}, \"event\": "
    "\"STOP\"}\r\n"
    "{\"return\": {}, \"id\": 2}\r\n"
    "{\"return\": \"fffffffffffffff0: Cannot access memory\\r\\n\", \"id\": 3}\r\n"
    "{\"id\": 4, \"error\": {\"class\": \"GenericError\", \"desc\": \"Invalid addr "
    "0xfffffffffffffff0/size 16 specified\"}}\r\n"
    "{\"timestamp\": {\"seconds\": 1795290133, \"microseconds\": 293876}, \"event\": "
    "\"RESUME\"}\r\n"
    "{\"return\": {\"status\": \"running\", \"singlestep\": false, \"running\": true}, "
    "\"id\": 5}\r\n";

#define N_MESSAGES 8

static const char *kind_of(json_object *m)
{
    json_object *v;
    if (json_object_object_get_ex(m, "QMP", NULL))
        return "greeting";
    if (json_object_object_get_ex(m, "event", &v))
        return json_object_get_string(v);
    if (json_object_object_get_ex(m, "error", NULL))
        return "error";
    return "return";
}

static const char *const expected[N_MESSAGES] = {"greeting", "return", "STOP",   "return",
                                                 "return",   "error",  "RESUME", "return"};

static int drain(qmp_parser *p, int *n)
{
    json_object *m;
    while (qmp_parser_next(p, &m) == 1) {
        if (*n < N_MESSAGES && strcmp(kind_of(m), expected[*n]) != 0)
            HARNESS_FAIL("message %d is %s, expected %s", *n, kind_of(m), expected[*n]);
        (*n)++;
        json_object_put(m);
    }
    return 0;
}

static void test_every_split(void)
{
    size_t len = strlen(stream);
    for (size_t split = 0; split <= len; split++) {
        qmp_parser *p = qmp_parser_new();
        struct qp_error err = {0};
        int n = 0;
        CHECK_INT(qmp_parser_feed(p, stream, split, &err), 0);
        drain(p, &n);
        CHECK_INT(qmp_parser_feed(p, stream + split, len - split, &err), 0);
        drain(p, &n);
        CHECK_INT(n, N_MESSAGES);
        qmp_parser_free(p);
    }
}

static void test_byte_by_byte(void)
{
    qmp_parser *p = qmp_parser_new();
    int n = 0;
    for (size_t i = 0; stream[i]; i++) {
        CHECK_INT(qmp_parser_feed(p, stream + i, 1, NULL), 0);
        drain(p, &n);
    }
    CHECK_INT(n, N_MESSAGES);
    qmp_parser_free(p);
}

static void test_garbage(void)
{
    static const char *const bad[] = {
        "SSH-2.0-OpenSSH_9.2\r\n",      "{\"a\": }", "[1,2,3]", "{\"a\":1}}", "\"just a string\"",
        "HTTP/1.1 400 Bad Request\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        qmp_parser *p = qmp_parser_new();
        struct qp_error err = {0};
        json_object *m = NULL;
        int rc = qmp_parser_feed(p, bad[i], strlen(bad[i]), &err);
        CHECK_MSG(rc == -EPROTO, "\"%s\" gave %d", bad[i], rc);
        CHECK_INT(err.code, -EPROTO);
        CHECK(strstr(err.msg, "malformed") != NULL);
        /* a broken parser stays broken */
        CHECK_INT(qmp_parser_feed(p, "{}", 2, NULL), -EPROTO);
        while (qmp_parser_next(p, &m) == 1)
            json_object_put(m);
        qmp_parser_free(p);
    }
}

static void test_truncated(void)
{
    /* A truncated message is no message, not an error: the rest may still come. */
    qmp_parser *p = qmp_parser_new();
    json_object *m = NULL;
    CHECK_INT(qmp_parser_feed(p, "{\"return\": {\"stat", 17, NULL), 0);
    CHECK_INT(qmp_parser_next(p, &m), 0);
    qmp_parser_free(p); /* frees the partial message without leaking */
    qmp_parser_free(NULL);
}

int main(void)
{
    test_every_split();
    test_byte_by_byte();
    test_garbage();
    test_truncated();
    return harness_result();
}
