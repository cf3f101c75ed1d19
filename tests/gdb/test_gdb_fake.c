/* The client against a scripted fake gdbstub (a thread on a UNIX socket in a mkdtemp directory),
 * for what QEMU does not do on demand: no-ack mode, an include, E replies, a stop reply nobody
 * asked for (after `c`, and in the middle of a pipelined batch), a stub that closes mid-packet,
 * replies written one byte at a time, run-length encoding, a bad checksum answered with `-` and
 * sent again, thread states. */
#define _GNU_SOURCE
#include "gdb.h"
#include "x86_regs.h"
#include "harness.h"
#include "qp_sock.h"

#include <glib.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum scenario {
    SC_NORMAL,
    SC_UNASKED_STOP, /* after `c`, a stop reply at once (a breakpoint, a monitor stop) */
    SC_CLOSE_MID,    /* `g`: half a packet, then close */
    SC_PLAIN,        /* no multiprocess, no QStartNoAckMode: thread ids "1", "2", acks */
    SC_LATE_ANSWER,  /* `m` answered after 500 ms, past the client's time-out */
    SC_WIRE, /* as SC_PLAIN (ack mode), but the register replies go out one byte per write, `g`
                run-length encoded, the first `g` with a bad checksum (never sent again, as a
                stub busy with pipelined requests cannot), and a stop reply nobody asked for
                between each first Hg's OK and its `g` */
};

struct fake {
    char dir[64], path[96];
    int listen_fd;
    enum scenario sc;
    pthread_t thread;
    GString *log; /* packets received, each followed by ' '; 0x03 as "^C" */
    int thread_sel;
    atomic_bool stop_sent; /* SC_UNASKED_STOP: the stop reply is on its way */
    bool bad_sent;         /* SC_WIRE: the bad checksum went out */
};

static const char target_xml[] = "<?xml version=\"1.0\"?><target><architecture>i386:x86-64"
                                 "</architecture><xi:include href=\"regs.xml\"/></target>";
/* rip before rax on purpose: offsets come from the XML order, not from names. */
static const char regs_xml[] =
    "<feature name=\"org.gnu.gdb.i386.core\">"
    "<reg name=\"rip\" bitsize=\"64\" type=\"code_ptr\"/>"
    "<reg name=\"rax\" bitsize=\"64\"/><reg name=\"rbx\" bitsize=\"64\"/>"
    "<reg name=\"rcx\" bitsize=\"64\"/><reg name=\"rdx\" bitsize=\"64\"/>"
    "<reg name=\"rsi\" bitsize=\"64\"/><reg name=\"rdi\" bitsize=\"64\"/>"
    "<reg name=\"rbp\" bitsize=\"64\"/><reg name=\"rsp\" bitsize=\"64\"/>"
    "<reg name=\"r8\" bitsize=\"64\"/><reg name=\"r9\" bitsize=\"64\"/>"
    "<reg name=\"r10\" bitsize=\"64\"/><reg name=\"r11\" bitsize=\"64\"/>"
    "<reg name=\"r12\" bitsize=\"64\"/><reg name=\"r13\" bitsize=\"64\"/>"
    "<reg name=\"r14\" bitsize=\"64\"/><reg name=\"r15\" bitsize=\"64\"/>"
    "<reg name=\"eflags\" bitsize=\"32\"/><reg name=\"cs\" bitsize=\"32\"/>"
    "<reg name=\"cr3\" bitsize=\"64\"/></feature>";

/* How long a fake waits for its client's next bytes before it gives up and closes. */
#define FAKE_IDLE_US (INT64_C(120) * 1000 * 1000)

static void say(int fd, const char *payload)
{
    size_t n;
    char *f = gdb_frame(payload, strlen(payload), &n);
    if (qp_sock_send_all(fd, f, n) < 0)
        perror("fake stub: send");
    free(f);
}

/* SC_WIRE: bytes one write each, so that the client's reads end anywhere. */
static void send_bytewise(int fd, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (qp_sock_send_all(fd, bytes + i, 1) < 0) {
            perror("fake stub: send");
            return;
        }
        usleep(20);
    }
}

/* `$body#xx` with runs of 4 or more equal characters run-length encoded, as QEMU does: "c*N"
 * repeats c (N - 29) more times; N may not be '#' or '$' (6 or 7 more). bad_checksum: off by
 * one. Caller frees. */
static char *frame_rle(const char *body, bool bad_checksum)
{
    GString *s = g_string_new("$");
    for (size_t i = 0; body[i];) {
        size_t run = 1;
        while (body[i + run] == body[i])
            run++;
        size_t more = run - 1;
        if (more > 97)
            more = 97;
        if (more == 6 || more == 7)
            more = 5;
        g_string_append_c(s, body[i]);
        if (more >= 3)
            g_string_append_printf(s, "*%c", (char)(29 + more));
        else
            more = 0;
        i += 1 + more;
    }
    unsigned sum = 0;
    for (size_t i = 1; i < s->len; i++)
        sum += (unsigned char)s->str[i];
    g_string_append_printf(s, "#%02x", (sum + (bad_checksum ? 1 : 0)) & 0xff);
    return g_string_free(s, FALSE);
}

/* A `g` reply: rip, 16 general registers, eflags, cs, cr3; rip is 0x1000 + the thread. */
static char *g_reply(int thread)
{
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "%02x10000000000000", thread);
    for (int i = 0; i < 16; i++)
        g_string_append_printf(s, "%02x00000000000000", i + 0x20);
    g_string_append(s, "4602000033000000");
    /* vCPU 1's cr3 is unavailable, as a stub marks what it cannot read. */
    g_string_append(s, thread == 1 ? "xxxxxxxxxxxxxxxx" : "0050000000000000");
    return g_string_free(s, FALSE);
}

/* Answers one packet; false ends the session. */
static bool answer(struct fake *f, int fd, const char *p)
{
    g_string_append_printf(f->log, "%s ", p);
    if (g_str_has_prefix(p, "qSupported")) {
        say(fd, "T02thread:01;"); /* QEMU 7.2 reports the stop on attach before any reply */
        say(fd, f->sc == SC_PLAIN || f->sc == SC_WIRE
                    ? "PacketSize=1000;qXfer:features:read+"
                    : "PacketSize=1000;qXfer:features:read+;multiprocess+;QStartNoAckMode+");
    } else if (strcmp(p, "QStartNoAckMode") == 0) {
        say(fd, "OK");
    } else if (strcmp(p, "?") == 0) {
        say(fd, "T05thread:p01.01;");
    } else if (strcmp(p, "qfThreadInfo") == 0) {
        say(fd, f->sc == SC_PLAIN || f->sc == SC_WIRE ? "m1,2" : "mp01.01,p01.02");
    } else if (strcmp(p, "qsThreadInfo") == 0) {
        say(fd, "l");
    } else if (g_str_has_prefix(p, "qXfer:features:read:target.xml:")) {
        char *r = g_strdup_printf("l%s", target_xml);
        say(fd, r);
        g_free(r);
    } else if (g_str_has_prefix(p, "qXfer:features:read:regs.xml:")) {
        /* In two parts, to exercise the offset loop. */
        size_t half = strlen(regs_xml) / 2;
        bool first = g_str_has_prefix(p, "qXfer:features:read:regs.xml:0,");
        char *r = first ? g_strdup_printf("m%.*s", (int)half, regs_xml)
                        : g_strdup_printf("l%s", regs_xml + half);
        say(fd, r);
        g_free(r);
    } else if (g_str_has_prefix(p, "Hg")) {
        f->thread_sel = strcmp(p, "Hgp01.02") == 0 || strcmp(p, "Hg2") == 0 ? 2 : 1;
        say(fd, "OK");
        if (f->sc == SC_WIRE && f->thread_sel == 1)
            say(fd, "T05thread:02;");
    } else if (f->sc == SC_WIRE && strcmp(p, "g") == 0) {
        char *r = g_reply(f->thread_sel);
        char *sent = frame_rle(r, !f->bad_sent);
        f->bad_sent = true;
        send_bytewise(fd, sent, strlen(sent));
        g_free(sent);
        g_free(r);
    } else if (g_str_has_prefix(p, "qThreadExtraInfo,")) {
        /* QEMU 7.2's words, hex-encoded */
        const char *text =
            strcmp(p, "qThreadExtraInfo,2") == 0 ? "CPU#1 [halted ]" : "CPU#0 [running]";
        GString *hex = g_string_new(NULL);
        for (const char *c = text; *c; c++)
            g_string_append_printf(hex, "%02x", (unsigned char)*c);
        say(fd, hex->str);
        g_string_free(hex, TRUE);
    } else if (strcmp(p, "g") == 0) {
        if (f->sc == SC_CLOSE_MID) {
            const char half[] = "$01100000";
            send(fd, half, sizeof half - 1, MSG_NOSIGNAL);
            return false;
        }
        char *r = g_reply(f->thread_sel);
        say(fd, r);
        g_free(r);
    } else if (p[0] == 'm') {
        if (f->sc == SC_LATE_ANSWER)
            usleep(500000);
        if (g_str_has_prefix(p, "mdead,"))
            say(fd, "E14");
        else
            say(fd, "0102030405060708");
    } else if (strcmp(p, "p13") == 0) { /* cr3, register 19 of regs.xml */
        say(fd, f->thread_sel == 1 ? "xxxxxxxxxxxxxxxx" : "0060000000000000");
    } else if (strcmp(p, "c") == 0) {
        if (f->sc == SC_UNASKED_STOP) {
            say(fd, "T05thread:p01.02;");
            atomic_store(&f->stop_sent, true);
        }
    } else if (g_str_has_prefix(p, "qRcmd,")) {
        /* QEMU's monitor output comes as hex in O packets, in pieces, before the OK. */
        say(fd, "O68656c6c6f20"); /* "hello " */
        say(fd, "O776f726c640a"); /* "world\n" */
        say(fd, "OK");
    } else if (g_str_has_prefix(p, "D")) {
        say(fd, "OK");
        return false;
    } else {
        say(fd, "");
    }
    return true;
}

static void *serve(void *arg)
{
    struct fake *f = arg;
    int fd = qp_sock_accept(f->listen_fd, 10000);
    if (fd < 0)
        return NULL;
    gdb_parser *p = gdb_parser_new();
    char buf[4096];
    ssize_t n;
    bool go_on = true;
    while (go_on &&
           (n = qp_sock_recv(fd, false, buf, sizeof buf, qp_sock_now_us() + FAKE_IDLE_US)) > 0) {
        /* A `-` would ask for a resend QEMU cannot do right with pipelined requests. */
        CHECK_MSG(memchr(buf, '-', n) == NULL, "the client sent a '-'");
        /* In stream order, as a stub sees them: `c` and the 0x03 after it may share a read. */
        for (ssize_t i = 0, j; go_on && i < n; i = j) {
            for (j = i; j < n && buf[j] != 0x03; j++)
                ;
            if (gdb_parser_feed(p, buf + i, j - i, NULL) < 0) {
                go_on = false;
                break;
            }
            char *pl;
            while (go_on && gdb_parser_next(p, &pl, NULL) == 1) {
                go_on = answer(f, fd, pl);
                free(pl);
            }
            if (go_on && j < n) {
                g_string_append(f->log, "^C ");
                say(fd, "T02thread:p01.01;");
                j++;
            }
        }
    }
    gdb_parser_free(p);
    close(fd);
    return NULL;
}

static struct fake *fake_start(enum scenario sc)
{
    struct fake *f = g_new0(struct fake, 1);
    f->sc = sc;
    f->log = g_string_new(NULL);
    g_strlcpy(f->dir, "/tmp/qpgdbfakeXXXXXX", sizeof f->dir);
    REQUIRE(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/gdb", f->dir);
    f->listen_fd = qp_sock_listen_unix(f->path, NULL);
    REQUIRE(f->listen_fd >= 0);
    REQUIRE(pthread_create(&f->thread, NULL, serve, f) == 0);
    return f;
}

/* Waits for the stub's thread to end, after which its log may be read. */
static void fake_join(struct fake *f)
{
    pthread_join(f->thread, NULL);
}

static void fake_stop(struct fake *f)
{
    close(f->listen_fd);
    unlink(f->path);
    rmdir(f->dir);
    g_string_free(f->log, TRUE);
    g_free(f);
}

static gdb_client *open_fake_with(struct fake *f, bool thread_state)
{
    char addr[128];
    snprintf(addr, sizeof addr, "unix:%s", f->path);
    struct gdb_open_opts o = {.timeout_s = 5, .thread_state = thread_state};
    struct qp_error err = {0};
    gdb_client *c = NULL;
    int rc = gdb_open(addr, &o, &c, &err);
    CHECK_MSG(rc == 0, "open: %s", err.msg);
    REQUIRE(c);
    return c;
}

static gdb_client *open_fake(struct fake *f)
{
    return open_fake_with(f, false);
}

static void test_session(void)
{
    struct fake *f = fake_start(SC_NORMAL);
    gdb_client *c = open_fake(f);
    struct qp_error err = {0};
    CHECK_INT(gdb_thread_count(c), 2);
    CHECK_STR(gdb_thread_id(c, 1), "p01.02");
    CHECK(gdb_multiprocess(c));
    CHECK_INT(gdb_packet_size(c), 0x1000);
    CHECK_INT(gdb_target(c)->n_regs, 20);
    CHECK_INT(gdb_target(c)->g_size, 17 * 8 + 8 + 8);
    CHECK(!gdb_stopped(c));

    struct gdb_stop st;
    CHECK_MSG(gdb_interrupt(c, &st, &err) == 0, "%s", err.msg);
    CHECK_INT(st.signal, 2);
    CHECK_STR(st.thread, "p01.01");

    struct gdb_regset rs[4];
    int n = 0;
    uint64_t rt = gdb_round_trips(c);
    CHECK_MSG(gdb_read_registers_all(c, rs, 4, &n, &err) == 0, "%s", err.msg);
    CHECK_INT(gdb_round_trips(c), rt + 1); /* one write for both vCPUs */
    REQUIRE(n == 2);
    struct gdb_x86_regs x;
    CHECK_MSG(gdb_x86_regs_from(c, &rs[1], &x, &err) == 0, "%s", err.msg);
    CHECK_U64(x.rip, 0x1002);
    CHECK_U64(x.rax, 0x20);
    CHECK_U64(x.rsp, 0x27);
    CHECK_U64(x.eflags, 0x246);
    CHECK_INT(x.cs, 0x33);
    CHECK(x.has_cr3 && x.cr3 == 0x5000);
    CHECK(!x.has_fs_base);
    uint64_t v;
    CHECK_INT(gdb_reg_get(c, &rs[0], "rip", &v), 0);
    CHECK_U64(v, 0x1001);
    CHECK_INT(gdb_reg_get(c, &rs[0], "xmm0", &v), -ENOENT);
    CHECK_INT(gdb_reg_get(c, &rs[0], "cr3", &v), -ENODATA);
    CHECK_MSG(gdb_x86_regs_from(c, &rs[0], &x, &err) == 0, "%s", err.msg);
    CHECK(!x.has_cr3);
    CHECK_U64(x.rip, 0x1001);
    for (int i = 0; i < n; i++)
        gdb_regset_clear(&rs[i]);

    /* Wanted registers (riscv64's priv and satp live outside QEMU's `g`): asked with `p` after
     * each `g` in the same write; the `p` value wins; one the `g` reply lacks stays asked. Here
     * cr3 (in `g`, but vCPU 1's marked unavailable there) and a name the XML lacks (skipped). */
    gdb_want_registers(c, (const char *const[]){"cr3", "satp", NULL});
    for (int round = 0; round < 2; round++) {
        rt = gdb_round_trips(c);
        CHECK_MSG(gdb_read_registers_all(c, rs, 4, &n, &err) == 0, "%s", err.msg);
        CHECK_INT(gdb_round_trips(c), rt + 1);
        REQUIRE(n == 2);
        CHECK_INT(gdb_reg_get(c, &rs[0], "cr3", &v), -ENODATA); /* `xx` in `g` and in `p` */
        CHECK_INT(gdb_reg_get(c, &rs[1], "cr3", &v), 0);
        CHECK_U64(v, 0x6000); /* p13's answer, not the `g` reply's 0x5000 */
        for (int i = 0; i < n; i++)
            gdb_regset_clear(&rs[i]);
    }
    CHECK_MSG(strstr(f->log->str, "Hgp01.01 g p13 Hgp01.02 g p13 Hgp01.01 g p13 Hgp01.02 g p13 "),
              "log: %s", f->log->str);
    /* rip is whole in vCPU 1's `g` reply: asked once, then no more (an empty `p` reply, as a
     * stub gives for what it does not know, leaves the `g` value in place). */
    gdb_want_registers(c, (const char *const[]){"rip", NULL});
    for (int round = 0; round < 2; round++) {
        CHECK_MSG(gdb_read_registers_all(c, rs, 4, &n, &err) == 0, "%s", err.msg);
        REQUIRE(n == 2);
        CHECK_INT(gdb_reg_get(c, &rs[1], "rip", &v), 0);
        CHECK_U64(v, 0x1002);
        for (int i = 0; i < n; i++)
            gdb_regset_clear(&rs[i]);
    }
    CHECK_MSG(strstr(f->log->str, "Hgp01.01 g p0 Hgp01.02 g p0 Hgp01.01 g Hgp01.02 g "), "log: %s",
              f->log->str);
    gdb_want_registers(c, NULL);

    uint8_t a[8], b[8], d[8];
    struct gdb_mem_req reqs[] = {{.vaddr = 0x1000, .len = 8, .buf = a},
                                 {.vaddr = 0xdead, .len = 8, .buf = b},
                                 {.vaddr = 0x2000, .len = 8, .buf = d}};
    CHECK_MSG(gdb_mem_read_many(c, 1, reqs, 3, &err) == 0, "%s", err.msg);
    CHECK_INT(reqs[0].rc, 0);
    CHECK_INT(reqs[0].got, 8);
    CHECK_INT(a[7], 8);
    CHECK_INT(reqs[1].rc, -EIO);
    CHECK_INT(reqs[1].remote_error, 0x14);
    CHECK_INT(reqs[1].got, 0);
    CHECK_INT(reqs[2].got, 8);
    /* A register read after the reads, in the same write: what a reset mid-sample would change
     * (vCPU 2's CR3 is 0x6000 by now; vCPU 1's cannot be read). */
    uint64_t cr3 = 0;
    bool ok = false;
    rt = gdb_round_trips(c);
    CHECK_MSG(gdb_mem_read_then_reg(c, 1, reqs, 1, "cr3", &cr3, &ok, &err) == 0, "%s", err.msg);
    CHECK_INT(gdb_round_trips(c), rt + 1);
    CHECK(ok);
    CHECK_U64(cr3, 0x6000);
    CHECK_INT(reqs[0].got, 8);
    CHECK_MSG(gdb_mem_read_then_reg(c, 0, reqs, 1, "cr3", &cr3, &ok, &err) == 0, "%s", err.msg);
    CHECK(!ok);
    CHECK_MSG(gdb_mem_read_then_reg(c, 1, reqs, 1, "cr9", &cr3, &ok, &err) == 0, "%s", err.msg);
    CHECK(!ok);
    char *r = NULL;
    int code = 0;
    CHECK_INT(gdb_command(c, "mdead,8", &r, &code, &err), -EIO);
    CHECK_INT(code, 0x14);
    CHECK(strstr(err.msg, "E14") != NULL);
    CHECK_MSG(gdb_continue(c, &err) == 0, "%s", err.msg);
    gdb_free(c);
    fake_join(f);
    /* QStartNoAckMode accepted; Hg and m pipelined; detach with the pid. */
    CHECK(strstr(f->log->str, "QStartNoAckMode ? qfThreadInfo qsThreadInfo qXfer") != NULL);
    CHECK(strstr(f->log->str, "Hgp01.02 m1000,8 mdead,8 m2000,8 ") != NULL);
    CHECK(strstr(f->log->str, "Hgp01.02 m1000,8 p13 Hgp01.01 m1000,8 p13 Hgp01.02 m1000,8 ") !=
          NULL);
    CHECK_MSG(g_str_has_suffix(f->log->str, "c ^C D;01 "), "log: %s", f->log->str);
    fake_stop(f);
}

static void test_unasked_stop(void)
{
    struct fake *f = fake_start(SC_UNASKED_STOP);
    gdb_client *c = open_fake(f); /* continues at the end: the stub stops again at once */
    struct qp_error err = {0};
    struct gdb_stop st;
    /* Wait until the stop reply is sent: interrupt must take it without sending 0x03. */
    for (int i = 0; i < 1000 && !atomic_load(&f->stop_sent); i++)
        usleep(10000);
    REQUIRE(atomic_load(&f->stop_sent));
    CHECK_MSG(gdb_interrupt(c, &st, &err) == 0, "%s", err.msg);
    CHECK_INT(st.signal, 5);
    CHECK_STR(st.thread, "p01.02");
    gdb_free(c);
    fake_join(f);
    CHECK_MSG(strstr(f->log->str, "^C") == NULL, "log: %s", f->log->str);
    fake_stop(f);
}

static void test_close_mid_packet(void)
{
    struct fake *f = fake_start(SC_CLOSE_MID);
    gdb_client *c = open_fake(f);
    struct qp_error err = {0};
    CHECK_INT(gdb_interrupt(c, NULL, &err), 0);
    struct gdb_regset rs[4];
    int n = 5;
    CHECK_INT(gdb_read_registers_all(c, rs, 4, &n, &err), -EPIPE);
    CHECK_INT(n, 0);
    CHECK(strstr(err.msg, "closed") != NULL);
    gdb_free(c); /* a dead connection: no hang */
    fake_join(f);
    fake_stop(f);
}

static void test_plain_thread_ids(void)
{
    struct fake *f = fake_start(SC_PLAIN);
    gdb_client *c = open_fake(f);
    struct qp_error err = {0};
    CHECK(!gdb_multiprocess(c));
    CHECK_STR(gdb_thread_id(c, 0), "1");
    CHECK_STR(gdb_thread_id(c, 1), "2");
    CHECK_INT(gdb_interrupt(c, NULL, &err), 0);
    struct gdb_regset rs[4];
    int n = 0;
    CHECK_MSG(gdb_read_registers_all(c, rs, 4, &n, &err) == 0, "%s", err.msg);
    REQUIRE(n == 2);
    uint64_t rip = 0;
    CHECK_INT(gdb_reg_get(c, &rs[1], "rip", &rip), 0);
    CHECK_U64(rip, 0x1002);
    for (int i = 0; i < n; i++)
        gdb_regset_clear(&rs[i]);
    gdb_free(c);
    fake_join(f);
    /* Ack mode: no QStartNoAckMode; a plain `D` without multiprocess. */
    CHECK(strstr(f->log->str, "QStartNoAckMode") == NULL);
    CHECK_MSG(g_str_has_suffix(f->log->str, "Hg1 g Hg2 g D "), "log: %s", f->log->str);
    fake_stop(f);
}

static void test_late_answer(void)
{
    struct fake *f = fake_start(SC_LATE_ANSWER);
    gdb_client *c = open_fake(f);
    struct qp_error err = {0};
    CHECK_INT(gdb_interrupt(c, NULL, &err), 0);
    gdb_set_timeout(c, 0.2);
    uint8_t buf[8];
    struct gdb_mem_req req = {.vaddr = 0x1000, .len = 8, .buf = buf};
    CHECK_INT(gdb_mem_read_many(c, 0, &req, 1, &err), -ETIMEDOUT);
    /* The late `m` reply must not be taken for the next request's. */
    gdb_set_timeout(c, 5);
    struct gdb_regset rs[4];
    int n = 0;
    CHECK_MSG(gdb_read_registers_all(c, rs, 4, &n, &err) == 0, "%s", err.msg);
    CHECK_INT(n, 2);
    uint64_t rip = 0;
    CHECK_INT(gdb_reg_get(c, &rs[0], "rip", &rip), 0);
    CHECK_U64(rip, 0x1001);
    for (int i = 0; i < n; i++)
        gdb_regset_clear(&rs[i]);
    gdb_free(c);
    fake_join(f);
    CHECK_MSG(strstr(f->log->str, "m1000,8 ? Hgp01.01 g Hgp01.02 g D;01 ") != NULL, "log: %s",
              f->log->str);
    fake_stop(f);
}

/* Every reply byte in its own write, `g` run-length encoded, a stop reply in the middle of each
 * batch, and the first `g` with a bad checksum: that read fails (it never takes another vCPU's
 * reply for the lost one), the next gets back in step and decodes exactly, each vCPU its own,
 * with the thread states. */
static void test_hostile_wire(void)
{
    struct fake *f = fake_start(SC_WIRE);
    gdb_client *c = open_fake_with(f, true);
    struct qp_error err = {0};
    CHECK_INT(gdb_interrupt(c, NULL, &err), 0);
    struct gdb_regset rs[4];
    int n = 5;
    CHECK_INT(gdb_read_registers_all(c, rs, 4, &n, &err), -EPROTO);
    CHECK_INT(n, 0);
    CHECK_MSG(strstr(err.msg, "checksum"), "%s", err.msg);
    CHECK_MSG(gdb_read_registers_all(c, rs, 4, &n, &err) == 0, "%s", err.msg);
    REQUIRE(n == 2);
    for (int i = 0; i < 2; i++) {
        struct gdb_x86_regs x;
        CHECK_MSG(gdb_x86_regs_from(c, &rs[i], &x, &err) == 0, "%s", err.msg);
        CHECK_U64(x.rip, 0x1001 + (uint64_t)i);
        CHECK_U64(x.rax, 0x20);
        CHECK_U64(x.r15, 0x2f);
        CHECK_U64(x.eflags, 0x246);
        CHECK_INT(x.cs, 0x33);
    }
    CHECK_INT(rs[0].halted, 0);
    CHECK_INT(rs[1].halted, 1);
    for (int i = 0; i < n; i++)
        gdb_regset_clear(&rs[i]);
    /* the stop reply in the middle was taken as news, not as a reply */
    CHECK_STR(gdb_last_stop(c)->thread, "02");
    gdb_free(c);
    fake_join(f);
    CHECK_MSG(g_str_has_suffix(f->log->str, "qThreadExtraInfo,2 ? Hg1 g qThreadExtraInfo,1 Hg2 g "
                                            "qThreadExtraInfo,2 D "),
              "log: %s", f->log->str);
    fake_stop(f);
}

/* gdb_monitor: the O packets' hex decoded and joined, the command hex-encoded. */
static void test_monitor(void)
{
    struct fake *f = fake_start(SC_NORMAL);
    gdb_client *c = open_fake(f);
    struct qp_error err = {0};
    char *text = NULL;
    CHECK_MSG(gdb_monitor(c, "info mtree", &text, &err) == 0, "%s", err.msg);
    CHECK_STR(text ? text : "(null)", "hello world\n");
    g_free(text);
    gdb_free(c);
    fake_join(f);
    CHECK_MSG(strstr(f->log->str, "qRcmd,696e666f206d74726565 ") != NULL, "log: %s", f->log->str);
    fake_stop(f);
}

int main(void)
{
    test_session();
    test_unasked_stop();
    test_close_mid_packet();
    test_plain_thread_ids();
    test_late_answer();
    test_hostile_wire();
    test_monitor();
    return harness_result();
}
