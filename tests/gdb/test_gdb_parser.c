/* The GDB remote-protocol parser fed a realistic stub stream split at every byte position, and
 * the encodings and failures a stub can produce. */
#include "gdb.h"
#include "harness.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

/* As QEMU 7.2 answers a handshake (acks, a stop reply, RLE in a g reply), with a notification,
 * a stray 0x03 and an escaped byte that a debugger must survive. */
static const char *const payloads[] = {
    "PacketSize=1000;qXfer:features:read+;multiprocess+;QStartNoAckMode+",
    "OK",
    "T05thread:p01.01;",
    "mp01.01,p01.02",
    "0000000000000000000000000000000000000000",
    "a}b#c$d*e",
};
#define N_PAYLOADS 6

static GString *stream(void)
{
    GString *s = g_string_new("+");
    for (int i = 0; i < N_PAYLOADS; i++) {
        if (i == 4) {
            /* 40 zeros as QEMU's RLE would send them: "0*" repeats '0' (count - 29) times. */
            const char *rle = "0*}0*}"; /* 1 + 32 + ... computed below */
            (void)rle;
            uint8_t sum = 0;
            /* '0' then "*" + char(29+39): 40 zeros */
            char body[4] = {'0', '*', (char)(29 + 39), 0};
            for (int k = 0; k < 3; k++)
                sum += (uint8_t)body[k];
            g_string_append_printf(s, "$%s#%02x+", body, sum);
            continue;
        }
        size_t n;
        char *f = gdb_frame(payloads[i], strlen(payloads[i]), &n);
        g_string_append_len(s, f, n);
        free(f);
        g_string_append(s, i == 1 ? "+\x03" : "+");
        if (i == 2)
            g_string_append(s, "%Stop:T05thread:p01.01;#e6");
    }
    return s;
}

static void drain(gdb_parser *p, int *n)
{
    char *pl;
    size_t len;
    while (gdb_parser_next(p, &pl, &len) == 1) {
        if (*n < N_PAYLOADS) {
            CHECK_STR(pl, payloads[*n]);
            CHECK_INT(len, strlen(payloads[*n]));
        }
        (*n)++;
        free(pl);
    }
}

static void test_every_split(void)
{
    GString *s = stream();
    for (size_t split = 0; split <= s->len; split++) {
        gdb_parser *p = gdb_parser_new();
        struct qp_error err = {0};
        int n = 0;
        CHECK_INT(gdb_parser_feed(p, s->str, split, &err), 0);
        drain(p, &n);
        CHECK_INT(gdb_parser_feed(p, s->str + split, s->len - split, &err), 0);
        drain(p, &n);
        CHECK_MSG(n == N_PAYLOADS, "split %zu: %d packets", split, n);
        gdb_parser_free(p);
    }
    /* One byte at a time. */
    gdb_parser *p = gdb_parser_new();
    int n = 0;
    for (size_t i = 0; i < s->len; i++) {
        CHECK_INT(gdb_parser_feed(p, s->str + i, 1, NULL), 0);
        drain(p, &n);
    }
    CHECK_INT(n, N_PAYLOADS);
    gdb_parser_free(p);
    g_string_free(s, TRUE);
}

static void test_bad_checksum(void)
{
    gdb_parser *p = gdb_parser_new();
    struct qp_error err = {0};
    char *pl;
    /* Ack mode: dropped and counted, a gap where it was, the next packet still parses. */
    CHECK_INT(gdb_parser_feed(p, "$OK#00$OK#9a", 12, &err), 0);
    CHECK_INT(gdb_parser_bad_checksums(p), 1);
    pl = (char *)"x";
    CHECK_INT(gdb_parser_next(p, &pl, NULL), 2);
    CHECK(pl == NULL);
    REQUIRE(gdb_parser_next(p, &pl, NULL) == 1);
    CHECK_STR(pl, "OK");
    free(pl);
    CHECK_INT(gdb_parser_next(p, &pl, NULL), 0);
    /* No-ack mode: nobody resends, so the stream is broken. */
    gdb_parser_set_no_ack(p, true);
    CHECK_INT(gdb_parser_feed(p, "$OK#00", 6, &err), -EPROTO);
    CHECK(strstr(err.msg, "checksum") != NULL);
    CHECK_INT(gdb_parser_feed(p, "$OK#9a", 6, &err), -EPROTO);
    gdb_parser_free(p);

    p = gdb_parser_new();
    CHECK_INT(gdb_parser_feed(p, "$OK#zz", 6, &err), -EPROTO);
    gdb_parser_free(p);
}

static void test_rle_and_escapes(void)
{
    gdb_parser *p = gdb_parser_new();
    char *pl;
    size_t len;
    /* "x* " is x repeated 3 more times: "xxxx"; "}]" is ']' ^ 0x20 = '}'. */
    const char body[] = "ab* c}]}\x03";
    uint8_t sum = 0;
    for (size_t i = 0; i < sizeof body - 1; i++)
        sum += (uint8_t)body[i];
    char *pkt = g_strdup_printf("$%s#%02x", body, sum);
    CHECK_INT(gdb_parser_feed(p, pkt, strlen(pkt), NULL), 0);
    REQUIRE(gdb_parser_next(p, &pl, &len) == 1);
    CHECK_STR(pl, "abbbbc}#");
    free(pl);
    g_free(pkt);
    /* An escaped NUL survives with its length. */
    pkt = gdb_frame("a\0b", 3, &len);
    CHECK_INT(gdb_parser_feed(p, pkt, len, NULL), 0);
    REQUIRE(gdb_parser_next(p, &pl, &len) == 1);
    CHECK_INT(len, 3);
    CHECK(memcmp(pl, "a\0b", 3) == 0);
    free(pl);
    free(pkt);
    /* A run with nothing before it is malformed. */
    struct qp_error err = {0};
    CHECK_INT(gdb_parser_feed(p, "$*##4d", 6, &err), -EPROTO);
    gdb_parser_free(p);
}

static void test_oversize(void)
{
    gdb_parser *p = gdb_parser_new();
    struct qp_error err = {0};
    size_t n = GDB_MAX_PACKET + 16;
    char *big = g_malloc(n);
    memset(big, 'a', n);
    big[0] = '$';
    CHECK_INT(gdb_parser_feed(p, big, n, &err), -EPROTO);
    CHECK(strstr(err.msg, "1 MiB") != NULL);
    g_free(big);
    gdb_parser_free(p);
    /* RLE that expands past the cap: each "a*~" adds 97 bytes. */
    p = gdb_parser_new();
    GString *s = g_string_new("$");
    for (size_t i = 0; i < GDB_MAX_PACKET / 97 + 2; i++)
        g_string_append(s, "a*~");
    uint8_t sum = 0;
    for (size_t i = 1; i < s->len; i++)
        sum += (uint8_t)s->str[i];
    g_string_append_printf(s, "#%02x", sum);
    CHECK_INT(gdb_parser_feed(p, s->str, s->len, &err), -EPROTO);
    g_string_free(s, TRUE);
    gdb_parser_free(p);
}

static void test_tdesc(void)
{
    struct gdb_tdesc d = {0};
    const char *xml = "<?xml version=\"1.0\"?><!DOCTYPE target SYSTEM \"gdb-target.dtd\">"
                      "<target><architecture>i386:x86-64</architecture>"
                      "<feature name=\"a\"><reg name=\"rax\" bitsize=\"64\" type=\"int64\"/>"
                      "<!-- <reg name=\"ss_base\" bitsize=\"64\"/> -->"
                      "<reg name=\"eflags\" bitsize=\"32\"/>"
                      "<reg name=\"xmm0\" bitsize=\"128\" regnum=\"5\"/>"
                      "<reg name=\"mxcsr\" bitsize=\"32\"/></feature></target>";
    CHECK_INT(gdb_tdesc_parse(&d, xml, NULL, NULL, NULL), 0);
    CHECK_STR(d.arch, "i386:x86-64");
    CHECK_INT(d.n_regs, 4);
    CHECK_INT(d.regs[2].regnum, 5);
    CHECK_INT(d.regs[3].regnum, 6);
    CHECK_INT(d.regs[1].offset, 8);
    CHECK_INT(d.regs[2].offset, 12);
    CHECK_INT(d.regs[3].offset, 28);
    CHECK_INT(d.g_size, 32);
    CHECK_INT(gdb_tdesc_find(&d, "mxcsr"), 3);
    CHECK_INT(gdb_tdesc_find(&d, "cr3"), -1);
}

/* As many registers as QEMU's aarch64 `-cpu max` sends and more parse; past the table, one
 * error. */
static void test_tdesc_many(void)
{
    struct gdb_tdesc *d = calloc(1, sizeof *d);
    REQUIRE(d);
    GString *xml = g_string_new("<target><architecture>aarch64</architecture><feature name=\"s\">");
    for (int i = 0; i < GDB_MAX_REGS; i++)
        g_string_append_printf(xml, "<reg name=\"R%d\" bitsize=\"64\"/>", i);
    g_string_append(xml, "</feature></target>");
    CHECK_INT(gdb_tdesc_parse(d, xml->str, NULL, NULL, NULL), 0);
    CHECK_INT(d->n_regs, GDB_MAX_REGS);
    CHECK_INT(gdb_tdesc_find(d, "R400"), 400);
    CHECK(GDB_MAX_REGS >= 400);
    memset(d, 0, sizeof *d);
    g_string_insert(xml, xml->len - strlen("</feature></target>"),
                    "<reg name=\"TCR_EL1\" bitsize=\"64\"/>");
    struct qp_error err = {0};
    CHECK(gdb_tdesc_parse(d, xml->str, NULL, NULL, &err) < 0);
    CHECK_MSG(strstr(err.msg, "more than"), "%s", err.msg);
    g_string_free(xml, TRUE);
    free(d);
}

/* gdb_hex_decode: pairs up to max, stopping at the first pair that is not hex (a NUL, an odd
 * tail, `xx`), upper and lower case alike. */
static void test_hex_decode(void)
{
    uint8_t out[8];
    memset(out, 0xee, sizeof out);
    CHECK_INT(gdb_hex_decode("48694aFf", 8, out), 4);
    CHECK_INT(out[0], 0x48);
    CHECK_INT(out[1], 0x69);
    CHECK_INT(out[2], 0x4a);
    CHECK_INT(out[3], 0xff);
    CHECK_INT(out[4], 0xee);                          /* nothing past the end */
    CHECK_INT(gdb_hex_decode("48694aff", 2, out), 2); /* at most max */
    CHECK_INT(gdb_hex_decode("4869g0", 8, out), 2);   /* a bad pair ends it */
    CHECK_INT(gdb_hex_decode("48xx69", 8, out), 1);
    CHECK_INT(gdb_hex_decode("486", 8, out), 1); /* half a pair is no byte */
    CHECK_INT(gdb_hex_decode("", 8, out), 0);
}

int main(void)
{
    test_every_split();
    test_bad_checksum();
    test_rle_and_escapes();
    test_oversize();
    test_tdesc();
    test_tdesc_many();
    test_hex_decode();
    return harness_result();
}
