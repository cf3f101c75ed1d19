/* The client against a scripted fake QMP server (a thread on a UNIX socket in a mkdtemp
 * directory), for what real QEMU does not do on demand: interleaved events, error replies, a peer
 * that closes mid-reply or never answers, a peer that is not QMP, failures mid-sample. */
#define _GNU_SOURCE
#include "harness.h"
#include "qmp.h"
#include "qp_sock.h"

#include <arpa/inet.h>
#include <glib.h>
#include <netinet/in.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum scenario {
    SC_NORMAL,
    SC_EVENTS,       /* an event before every reply */
    SC_CLOSE_MID,    /* query-kvm: half a reply, then close */
    SC_NO_ANSWER,    /* query-kvm: never answered */
    SC_NOT_QMP,      /* an SSH banner instead of a greeting */
    SC_SILENT,       /* accepts, never greets (QEMU busy with another client) */
    SC_HANG_REGS,    /* info registers never answered; cont is */
    SC_PAUSED,       /* the guest is paused already */
    SC_SLOW_REGS,    /* info registers answered after 300 ms */
    SC_HANG_CONT,    /* the first cont is never answered */
    SC_CONT_FAILS,   /* the first cont gets an error reply (and the guest stays paused) */
    SC_ODD_EVENTS,   /* before every reply: events without a name, with absurd timestamps */
    SC_MEMSAVE_ERR,  /* every memsave fails ("Invalid addr"), as for an unmapped range */
    SC_HANG_MEMSAVE, /* memsave is never answered */
    SC_EVENT_FIRST,  /* an event the last client left behind, then the greeting */
};

struct fake {
    char dir[64], path[96];
    int listen_fd;
    enum scenario sc;
    pthread_t thread;
    GString *log; /* command names received, each followed by ',' */
    int conts;
};

/* Events no QEMU sends, which a client must survive: no name, a name that is not a string,
 * timestamps that overflow microsecond arithmetic. */
static const char odd_events[] =
    "{\"event\": null, \"timestamp\": {\"seconds\": 1, \"microseconds\": 2}}\r\n"
    "{\"event\": 5}\r\n"
    "{\"event\": \"HUGE\", \"timestamp\": {\"seconds\": 1e49, \"microseconds\": 1}}\r\n"
    "{\"event\": \"MAX\", \"timestamp\": {\"seconds\": 9223372036854775807, "
    "\"microseconds\": 999999}}\r\n";

static const char greeting[] = "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, "
                               "\"major\": 7}, \"package\": \"\"}, \"capabilities\": []}}\r\n";

/* How long a fake waits for its client's next bytes before it gives up and closes. */
#define FAKE_IDLE_US (INT64_C(120) * 1000 * 1000)

static void say(int fd, const char *text)
{
    if (qp_sock_send_all(fd, text, strlen(text)) < 0)
        perror("fake server: send");
}

static void reply(int fd, json_object *req, const char *payload)
{
    json_object *id = NULL;
    json_object_object_get_ex(req, "id", &id);
    char *text = g_strdup_printf("{%s, \"id\": %s}\r\n", payload, json_object_to_json_string(id));
    say(fd, text);
    g_free(text);
}

static char *registers_text(void)
{
    char *text = NULL;
    g_file_get_contents(QMP_TEST_DATA "/qemu-transcripts/info_registers_a_smp2.txt", &text, NULL,
                        NULL);
    return text;
}

/* Answers one request; returns false to end the session. */
static bool answer(struct fake *f, int fd, json_object *req)
{
    json_object *cmd = NULL;
    json_object_object_get_ex(req, "execute", &cmd);
    const char *name = json_object_get_string(cmd);
    json_object *args = NULL, *line = NULL;
    json_object_object_get_ex(req, "arguments", &args);
    json_object_object_get_ex(args, "command-line", &line);
    if (line && g_str_has_prefix(json_object_get_string(line), "x/"))
        g_string_append_printf(f->log, "%.*s,", (int)strcspn(json_object_get_string(line), " "),
                               json_object_get_string(line));
    else
        g_string_append_printf(f->log, "%s,", name);
    if (f->sc == SC_ODD_EVENTS)
        say(fd, odd_events);
    if (f->sc == SC_EVENTS)
        say(fd, "{\"timestamp\": {\"seconds\": 7, \"microseconds\": 42}, \"event\": "
                "\"RTC_CHANGE\", \"data\": {\"offset\": 1}}\r\n");
    if (strcmp(name, "query-status") == 0) {
        reply(fd, req,
              f->sc == SC_PAUSED ? "\"return\": {\"running\": false}"
                                 : "\"return\": {\"running\": true}");
    } else if (strcmp(name, "stop") == 0) {
        say(fd, "{\"timestamp\": {\"seconds\": 100, \"microseconds\": 100}, \"event\": "
                "\"STOP\"}\r\n");
        reply(fd, req, "\"return\": {}");
    } else if (strcmp(name, "cont") == 0) {
        if (f->sc == SC_HANG_CONT && f->conts++ == 0)
            return true;
        if (f->sc == SC_CONT_FAILS && f->conts++ == 0) {
            reply(fd, req, "\"error\": {\"class\": \"GenericError\", \"desc\": \"no\"}");
            return true;
        }
        say(fd, "{\"timestamp\": {\"seconds\": 100, \"microseconds\": 600}, \"event\": "
                "\"RESUME\"}\r\n");
        reply(fd, req, "\"return\": {}");
    } else if (strcmp(name, "human-monitor-command") == 0) {
        if (f->sc == SC_HANG_REGS)
            return true;
        if (f->sc == SC_SLOW_REGS)
            usleep(300000);
        char *text = registers_text();
        json_object *s = json_object_new_string(text);
        char *payload = g_strdup_printf("\"return\": %s", json_object_to_json_string(s));
        reply(fd, req, payload);
        g_free(payload);
        json_object_put(s);
        g_free(text);
    } else if (strcmp(name, "memsave") == 0 && f->sc == SC_HANG_MEMSAVE) {
        return true;
    } else if (strcmp(name, "memsave") == 0 && f->sc == SC_MEMSAVE_ERR) {
        reply(fd, req, "\"error\": {\"class\": \"GenericError\", \"desc\": \"Invalid addr\"}");
    } else if (strcmp(name, "bogus") == 0) {
        reply(fd, req,
              "\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"The command bogus has "
              "not been found\"}");
    } else if (strcmp(name, "query-kvm") == 0 && f->sc == SC_CLOSE_MID) {
        say(fd, "{\"return\": {\"enabled\": fal");
        return false;
    } else if (strcmp(name, "query-kvm") == 0 && f->sc == SC_NO_ANSWER) {
        return true;
    } else {
        reply(fd, req, "\"return\": {}");
    }
    return true;
}

static void serve_qmp(struct fake *f, int fd)
{
    qmp_parser *p = qmp_parser_new();
    if (f->sc == SC_EVENT_FIRST)
        say(fd,
            "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, \"event\": \"RESUME\"}\r\n");
    say(fd, greeting);
    char buf[4096];
    ssize_t n;
    bool go_on = true;
    while (go_on &&
           (n = qp_sock_recv(fd, false, buf, sizeof buf, qp_sock_now_us() + FAKE_IDLE_US)) > 0) {
        json_object *req;
        if (qmp_parser_feed(p, buf, n, NULL) < 0)
            break;
        while (go_on && qmp_parser_next(p, &req) == 1) {
            go_on = answer(f, fd, req);
            json_object_put(req);
        }
    }
    qmp_parser_free(p);
}

static void *serve(void *arg)
{
    struct fake *f = arg;
    int fd = qp_sock_accept(f->listen_fd, 10000);
    if (fd < 0)
        return NULL;
    char buf[256];
    if (f->sc == SC_NOT_QMP)
        say(fd, "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n");
    if (f->sc == SC_NOT_QMP || f->sc == SC_SILENT) {
        while (qp_sock_recv(fd, false, buf, sizeof buf, qp_sock_now_us() + FAKE_IDLE_US) > 0)
            ;
    } else {
        serve_qmp(f, fd);
    }
    close(fd);
    return NULL;
}

static struct fake *fake_start(enum scenario sc)
{
    struct fake *f = g_new0(struct fake, 1);
    f->sc = sc;
    f->log = g_string_new(NULL);
    g_strlcpy(f->dir, "/tmp/qpfakeXXXXXX", sizeof f->dir);
    REQUIRE(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/qmp", f->dir);
    f->listen_fd = qp_sock_listen_unix(f->path, NULL);
    REQUIRE(f->listen_fd >= 0);
    pthread_create(&f->thread, NULL, serve, f);
    return f;
}

/* Joins the server (the client must be closed first) and returns its log; caller g_free()s. */
static char *fake_stop(struct fake *f)
{
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
    unlink(f->path);
    rmdir(f->dir);
    char *log = g_string_free(f->log, FALSE);
    g_free(f);
    return log;
}

/* Replies the fake does give may take long on a loaded machine: wait for them patiently. The
 * scenarios that withhold a reply switch to a short time-out once connected (the time-out is
 * what they test, and a short one keeps the test quick). */
static const struct qmp_open_opts patient = {.timeout_s = 60, .backend = QMP_MEM_MEMSAVE};
static const struct qmp_open_opts quick = {.timeout_s = 1, .backend = QMP_MEM_MEMSAVE};
#define SHORT_TIMEOUT_S 1.0

static qmp_client *open_fake(struct fake *f)
{
    qmp_client *c = NULL;
    struct qp_error err = {0};
    int rc = qmp_open(f->path, &patient, &c, &err);
    CHECK_MSG(rc == 0, "qmp_open: %s", err.msg);
    if (c && (f->sc == SC_NO_ANSWER || f->sc == SC_HANG_REGS || f->sc == SC_HANG_CONT ||
              f->sc == SC_HANG_MEMSAVE))
        qmp_set_timeout(c, SHORT_TIMEOUT_S);
    return c;
}

/* The same server on 127.0.0.1 for tcp:HOST:PORT addresses. */
static struct fake *fake_start_tcp(enum scenario sc, char *address, size_t len)
{
    struct fake *f = g_new0(struct fake, 1);
    f->sc = sc;
    f->log = g_string_new(NULL);
    int port = 0;
    f->listen_fd = qp_sock_listen_tcp_loopback(&port, NULL);
    REQUIRE(f->listen_fd >= 0);
    snprintf(address, len, "tcp:127.0.0.1:%d", port);
    pthread_create(&f->thread, NULL, serve, f);
    return f;
}

static void test_tcp(void)
{
    char address[64];
    struct fake *f = fake_start_tcp(SC_NORMAL, address, sizeof address);
    qmp_client *c = NULL;
    struct qp_error err = {0};
    CHECK_MSG(qmp_open(address, &patient, &c, &err) == 0, "%s: %s", address, err.msg);
    bool running = false;
    if (c)
        CHECK_INT(qmp_query_running(c, &running, NULL), 0);
    CHECK(running);
    qmp_free(c);
    g_free(fake_stop(f));
}

static void test_events_before_replies(void)
{
    struct fake *f = fake_start(SC_EVENTS);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    CHECK_STR(qmp_qemu_version(c), "7.2.22");
    json_object *ret = NULL;
    CHECK_INT(qmp_execute(c, "query-kvm", NULL, &ret, NULL), 0);
    CHECK(json_object_is_type(ret, json_type_object));
    json_object_put(ret);
    struct qmp_event ev;
    int events = 0;
    while (qmp_pop_event(c, &ev) == 1) {
        CHECK_STR(ev.name, "RTC_CHANGE");
        CHECK_INT(ev.ts_sec, 7);
        CHECK_INT(ev.ts_usec, 42);
        CHECK(ev.data != NULL);
        json_object_put(ev.data);
        events++;
    }
    /* one per request: qmp_capabilities, query-status, query-kvm */
    CHECK_INT(events, 3);
    CHECK_INT(qmp_round_trips(c), 3);
    qmp_free(c);
    g_free(fake_stop(f));
}

static void test_error_reply(void)
{
    struct fake *f = fake_start(SC_NORMAL);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct qp_error err = {0};
    CHECK_INT(qmp_execute(c, "bogus", NULL, NULL, &err), -EREMOTEIO);
    CHECK_STR(err.msg, "CommandNotFound: The command bogus has not been found");
    /* the connection is still usable */
    bool running = false;
    CHECK_INT(qmp_query_running(c, &running, NULL), 0);
    CHECK(running);
    qmp_free(c);
    g_free(fake_stop(f));
}

static void test_close_mid_reply(void)
{
    struct fake *f = fake_start(SC_CLOSE_MID);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct qp_error err = {0};
    CHECK_INT(qmp_execute(c, "query-kvm", NULL, NULL, &err), -EPIPE);
    CHECK_MSG(strstr(err.msg, "closed") != NULL, "%s", err.msg);
    CHECK_INT(qmp_execute(c, "query-kvm", NULL, NULL, &err), -EPIPE); /* no SIGPIPE either */
    qmp_free(c);
    g_free(fake_stop(f));
}

static void test_no_answer(void)
{
    struct fake *f = fake_start(SC_NO_ANSWER);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct qp_error err = {0};
    CHECK_INT(qmp_execute(c, "query-kvm", NULL, NULL, &err), -ETIMEDOUT);
    CHECK_MSG(strstr(err.msg, "did not answer") != NULL, "%s", err.msg);
    qmp_free(c);
    g_free(fake_stop(f));
}

static void test_not_qmp(void)
{
    struct fake *f = fake_start(SC_NOT_QMP);
    qmp_client *c = NULL;
    struct qp_error err = {0};
    CHECK_INT(qmp_open(f->path, &quick, &c, &err), -EPROTO);
    CHECK_MSG(strstr(err.msg, "does not speak QMP") != NULL, "%s", err.msg);
    CHECK(c == NULL);
    g_free(fake_stop(f));
}

/* QEMU can flush an event it queued for the client before to one that connects right after:
 * the greeting that follows it is the one that counts. */
static void test_event_before_greeting(void)
{
    struct fake *f = fake_start(SC_EVENT_FIRST);
    qmp_client *c = NULL;
    struct qp_error err = {0};
    CHECK_INT(qmp_open(f->path, &quick, &c, &err), 0);
    CHECK_MSG(c != NULL, "%s", err.msg);
    CHECK_INT(qmp_execute(c, "query-kvm", NULL, NULL, &err), 0);
    qmp_free(c);
    g_free(fake_stop(f));
}

static void test_silent_peer(void)
{
    struct fake *f = fake_start(SC_SILENT);
    qmp_client *c = NULL;
    struct qp_error err = {0};
    CHECK_INT(qmp_open(f->path, &quick, &c, &err), -ETIMEDOUT);
    CHECK_MSG(strstr(err.msg, "another client") != NULL, "%s", err.msg);
    g_free(fake_stop(f));
}

static void test_bad_paths(void)
{
    qmp_client *c = NULL;
    struct qp_error err = {0};
    CHECK_INT(qmp_open("./qmp-socket", NULL, &c, &err), -ENOENT);
    CHECK_STR(err.msg, "no QMP socket at ./qmp-socket: start QEMU with -qmp "
                       "unix:./qmp-socket,server,nowait");
    char dir[] = "/tmp/qpfakeXXXXXX";
    REQUIRE(mkdtemp(dir));
    char *file = g_strdup_printf("%s/plain", dir);
    g_file_set_contents(file, "hello", -1, NULL);
    CHECK_INT(qmp_open(file, NULL, &c, &err), -EPROTO);
    CHECK_MSG(strstr(err.msg, "regular file") != NULL, "%s", err.msg);
    unlink(file);
    /* a socket file nobody listens on: QEMU died and left it */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/stale", dir);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(bind(s, (struct sockaddr *)&sa, sizeof sa) == 0);
    close(s);
    CHECK_INT(qmp_open(sa.sun_path, NULL, &c, &err), -EPIPE);
    CHECK_MSG(strstr(err.msg, "nothing listens") != NULL, "%s", err.msg);
    /* permission: only testable when not root (root bypasses socket permissions) */
    if (geteuid() != 0) {
        s = socket(AF_UNIX, SOCK_STREAM, 0);
        unlink(sa.sun_path);
        REQUIRE(bind(s, (struct sockaddr *)&sa, sizeof sa) == 0);
        listen(s, 1);
        chmod(sa.sun_path, 0);
        CHECK_INT(qmp_open(sa.sun_path, NULL, &c, &err), -EACCES);
        CHECK_MSG(strstr(err.msg, "permission denied") != NULL, "%s", err.msg);
        close(s);
    }
    unlink(sa.sun_path);
    CHECK_INT(qmp_open("tcp:nohostport", NULL, &c, &err), -EINVAL);
    rmdir(dir);
    g_free(file);
}

struct cb_state {
    int calls, n_cpus, rc;
    uint64_t rip1;
};

static int callback(qmp_client *c, const struct qmp_regs *cpus, int n_cpus, void *ctx,
                    struct qp_error *err)
{
    struct cb_state *s = ctx;
    s->calls++;
    s->n_cpus = n_cpus;
    s->rip1 = n_cpus > 1 ? cpus[1].rip : 0;
    return s->rc ? qp_error_set(err, s->rc, "callback failed on purpose") : 0;
}

static void test_sample_ok(void)
{
    struct fake *f = fake_start(SC_EVENTS);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct cb_state s = {0};
    struct qmp_sample_stats st;
    struct qp_error err = {0};
    CHECK_INT(qmp_sample(c, callback, &s, &st, &err), 0);
    CHECK_INT(s.calls, 1);
    CHECK_INT(s.n_cpus, 2);
    CHECK_U64(s.rip1, 0x42a600);
    CHECK_U64(st.paused_ns, 500000); /* RESUME 100.000600 - STOP 100.000100 */
    CHECK_INT(st.round_trips, 3);
    CHECK(!st.was_paused);
    /* our own STOP/RESUME are consumed by the sample; other events are still queued */
    struct qmp_event ev;
    while (qmp_pop_event(c, &ev) == 1) {
        CHECK_STR(ev.name, "RTC_CHANGE");
        json_object_put(ev.data);
    }
    qmp_free(c);
    char *log = fake_stop(f);
    CHECK_STR(log, "qmp_capabilities,query-status,stop,human-monitor-command,cont,");
    g_free(log);
}

static void test_sample_callback_fails(void)
{
    struct fake *f = fake_start(SC_NORMAL);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct cb_state s = {.rc = -EIO};
    struct qp_error err = {0};
    CHECK_INT(qmp_sample(c, callback, &s, NULL, &err), -EIO);
    CHECK_STR(err.msg, "callback failed on purpose");
    qmp_free(c);
    char *log = fake_stop(f);
    CHECK_STR(log, "qmp_capabilities,query-status,stop,human-monitor-command,cont,");
    g_free(log);
}

static void test_sample_timeout_still_conts(void)
{
    struct fake *f = fake_start(SC_HANG_REGS);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct cb_state s = {0};
    struct qp_error err = {0};
    CHECK_INT(qmp_sample(c, callback, &s, NULL, &err), -ETIMEDOUT);
    CHECK_INT(s.calls, 0);
    qmp_free(c);
    char *log = fake_stop(f);
    CHECK_STR(log, "qmp_capabilities,query-status,stop,human-monitor-command,cont,");
    g_free(log);
}

static void test_sample_already_paused(void)
{
    struct fake *f = fake_start(SC_PAUSED);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct cb_state s = {0};
    struct qmp_sample_stats st;
    CHECK_INT(qmp_sample(c, callback, &s, &st, NULL), 0);
    CHECK(st.was_paused);
    CHECK_INT(s.calls, 1);
    CHECK_INT(st.round_trips, 1);
    qmp_free(c);
    char *log = fake_stop(f);
    CHECK_STR(log, "qmp_capabilities,query-status,human-monitor-command,");
    g_free(log);
}

/* cont timed out: qmp_free tries again, so the guest is not left paused. */
static void test_free_resumes(void)
{
    struct fake *f = fake_start(SC_HANG_CONT);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct qp_error err = {0};
    CHECK_INT(qmp_sample(c, NULL, NULL, NULL, &err), -ETIMEDOUT);
    qmp_free(c);
    char *log = fake_stop(f);
    CHECK_STR(log, "qmp_capabilities,query-status,stop,human-monitor-command,cont,cont,");
    g_free(log);
}

/* A cont that timed out or failed leaves the guest paused by us: the next sample resumes it
 * first, and never samples it frozen as if someone else had paused it. */
static void check_sample_after_failed_cont(enum scenario sc, int first_rc)
{
    struct fake *f = fake_start(sc);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct qp_error err = {0};
    struct cb_state s = {0};
    struct qmp_sample_stats st;
    CHECK_INT(qmp_sample(c, callback, &s, &st, &err), first_rc);
    CHECK_INT(qmp_sample(c, callback, &s, &st, &err), 0);
    CHECK(!st.was_paused);
    CHECK_INT(s.calls, 2);
    qmp_free(c);
    char *log = fake_stop(f);
    CHECK_STR(log, "qmp_capabilities,query-status,stop,human-monitor-command,cont,"
                   "cont,stop,human-monitor-command,cont,");
    g_free(log);
}

static void test_sample_after_failed_cont(void)
{
    check_sample_after_failed_cont(SC_HANG_CONT, -ETIMEDOUT);
    check_sample_after_failed_cont(SC_CONT_FAILS, -EREMOTEIO);
}

/* Nameless events and overflowing timestamps are survived (UBSan aborts on the overflow);
 * the named ones are kept with their timestamps treated as absent. */
static void test_odd_events(void)
{
    struct fake *f = fake_start(SC_ODD_EVENTS);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    CHECK_INT(qmp_execute(c, "query-kvm", NULL, NULL, NULL), 0);
    struct qmp_event ev;
    int huge = 0, max = 0, other = 0;
    while (qmp_pop_event(c, &ev) == 1) {
        if (strcmp(ev.name, "HUGE") == 0)
            huge++;
        else if (strcmp(ev.name, "MAX") == 0)
            max++;
        else
            other++;
        CHECK_INT(ev.ts_sec, 0);
        json_object_put(ev.data);
    }
    CHECK_INT(huge, 3); /* one per request: capabilities, query-status, query-kvm */
    CHECK_INT(max, 3);
    CHECK_INT(other, 0);
    qmp_free(c);
    g_free(fake_stop(f));
}

/* Events nobody pops are bounded: the queue keeps the newest QMP_MAX_QUEUED_EVENTS. */
static void test_event_queue_bounded(void)
{
    struct fake *f = fake_start(SC_EVENTS);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    for (int i = 0; i < QMP_MAX_QUEUED_EVENTS + 50; i++)
        CHECK_INT(qmp_execute(c, "query-kvm", NULL, NULL, NULL), 0);
    int queued = 0;
    struct qmp_event ev;
    while (qmp_pop_event(c, &ev) == 1) {
        json_object_put(ev.data);
        queued++;
    }
    CHECK_INT(queued, QMP_MAX_QUEUED_EVENTS);
    CHECK_U64(qmp_events_dropped(c), 2 + 50); /* capabilities and query-status sent one each */
    qmp_free(c);
    g_free(fake_stop(f));
}

static struct qmp_regs cpu_for_reads(void)
{
    struct qmp_regs cpu = {.cpu_index = 0, .long_mode = true, .cr0 = 0x80000011, .cr3 = 0x1000};
    return cpu;
}

/* A stack window that ends at the top of the address space, refused by memsave: the page split
 * must not wrap around to address 0 (it looped forever, the guest left paused). */
static void test_memsave_top_of_address_space(void)
{
    struct fake *f = fake_start(SC_MEMSAVE_ERR);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct qmp_regs cpu = cpu_for_reads();
    static uint8_t buf[16384];
    size_t got = 1;
    /* 4 KiB from 0xffffffffffffefd0 ends just below 2^64: two pages, and the old split's next
     * page after 0xfffffffffffff000 wrapped to 0, forever below the end */
    uint64_t rt0 = qmp_round_trips(c);
    CHECK_INT(qmp_mem_read(c, &cpu, 0xffffffffffffefd0ull, buf, 4096, &got, NULL), -EFAULT);
    CHECK_U64(got, 0);
    CHECK_U64(qmp_round_trips(c) - rt0, 3); /* 1 try + 2 pages */
    /* 16 KiB would pass 2^64: the read is cut at the top (4144 bytes, 2 pages) */
    rt0 = qmp_round_trips(c);
    CHECK_INT(qmp_mem_read(c, &cpu, 0xffffffffffffefd0ull, buf, sizeof buf, &got, NULL), -EFAULT);
    CHECK_U64(qmp_round_trips(c) - rt0, 3);
    /* a large read refused whole is split into at most 16 pages, not thousands */
    static uint8_t big[4 << 20];
    rt0 = qmp_round_trips(c);
    CHECK_INT(qmp_mem_read(c, &cpu, 0x400000, big, sizeof big, &got, NULL), -EFAULT);
    CHECK(qmp_round_trips(c) - rt0 <= 17);
    qmp_free(c);
    g_free(fake_stop(f));
}

/* HMP reads are chunked: a large read never asks for one reply bigger than the parser takes. */
static void test_hmp_chunks(void)
{
    struct fake *f = fake_start(SC_NORMAL);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    REQUIRE(qmp_mem_set_backend(c, QMP_MEM_HMP, NULL) == 0);
    struct qmp_regs cpu = cpu_for_reads();
    static uint8_t big[1 << 20];
    size_t got;
    /* the fake answers with register text, not a dump: nothing is read, but the requests show */
    CHECK_INT(qmp_mem_read(c, &cpu, 0x400000, big, sizeof big, &got, NULL), -EFAULT);
    qmp_free(c);
    char *log = fake_stop(f);
    gchar **cmds = g_strsplit(log, ",", -1);
    int dumps = 0;
    for (gchar **p = cmds; *p; p++) {
        if (!g_str_has_prefix(*p, "x/"))
            continue;
        dumps++;
        CHECK_MSG(strtoull(*p + 2, NULL, 10) <= 8192, "one dump asks for %s", *p);
    }
    CHECK_INT(dumps, 16);
    g_strfreev(cmds);
    g_free(log);
}

/* Requests still in flight after a time-out are drained within one more time-out, not one
 * each (8 pipelined memsaves used to keep a paused guest waiting 8 time-outs). */
static void test_drain_one_deadline(void)
{
    struct fake *f = fake_start(SC_HANG_MEMSAVE);
    qmp_client *c = open_fake(f);
    REQUIRE(c);
    struct qmp_regs cpu = cpu_for_reads();
    static uint8_t bufs[8][64];
    struct qmp_mem_req reqs[8];
    for (int i = 0; i < 8; i++)
        reqs[i] = (struct qmp_mem_req){.vaddr = 0x400000 + 4096 * i, .len = 64, .buf = bufs[i]};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_INT(qmp_mem_read_many(c, &cpu, reqs, 8, NULL), -ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    /* two time-outs of SHORT_TIMEOUT_S (the first reply, then the drain) plus slack; the old
     * code took eight */
    CHECK_MSG(took < 4 * SHORT_TIMEOUT_S + 1, "gave up after %.1f s", took);
    qmp_free(c);
    g_free(fake_stop(f));
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    alarms++;
}

/* A signal while waiting for QEMU: the sample completes and the guest is resumed. */
static void test_sample_signal(void)
{
    struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART: poll gets EINTR */
    sigaction(SIGALRM, &sa, NULL);
    struct fake *f = fake_start(SC_SLOW_REGS);
    qmp_client *c = NULL;
    struct qmp_open_opts opts = {.timeout_s = 2, .backend = QMP_MEM_MEMSAVE};
    struct qp_error err = {0};
    REQUIRE(qmp_open(f->path, &opts, &c, &err) == 0);
    struct itimerval it = {.it_value = {.tv_usec = 50000}, .it_interval = {.tv_usec = 50000}};
    setitimer(ITIMER_REAL, &it, NULL);
    struct cb_state s = {0};
    CHECK_INT(qmp_sample(c, callback, &s, NULL, &err), 0);
    struct itimerval off = {0};
    setitimer(ITIMER_REAL, &off, NULL);
    CHECK(alarms > 0);
    CHECK_INT(s.calls, 1);
    qmp_free(c);
    char *log = fake_stop(f);
    CHECK_STR(log, "qmp_capabilities,query-status,stop,human-monitor-command,cont,");
    g_free(log);
}

static int count_entries(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    int n = 0;
    while (d && g_dir_read_name(d))
        n++;
    if (d)
        g_dir_close(d);
    return n;
}

/* Waits up to 60 s for dir to be empty (the sweeper runs when its lifeline breaks). */
static bool empty_within_deadline(const char *dir)
{
    for (int i = 0; i < 6000 && count_entries(dir) > 0; i++)
        usleep(10000);
    return count_entries(dir) == 0;
}

/* memsave's directory (issue 34): made in $TMPDIR, and removed when the client is freed and
 * also when the process holding it is killed with SIGKILL (no handler of its own runs). */
static void test_memsave_dir_swept(void)
{
    char tmpdir[] = "/tmp/qptmpdirXXXXXX";
    REQUIRE(mkdtemp(tmpdir));
    char *saved = g_strdup(getenv("TMPDIR"));
    setenv("TMPDIR", tmpdir, 1);
    struct fake *f = fake_start(SC_NORMAL);
    struct qmp_open_opts opts = {.timeout_s = 5, .backend = QMP_MEM_MEMSAVE};
    qmp_client *c = NULL;
    struct qp_error err = {0};
    CHECK_MSG(qmp_open(f->path, &opts, &c, &err) == 0, "%s", err.msg);
    CHECK_MSG(count_entries(tmpdir) == 1, "no memsave directory in $TMPDIR %s", tmpdir);
    qmp_free(c);
    CHECK_MSG(count_entries(tmpdir) == 0, "memsave directory left after qmp_free");
    g_free(fake_stop(f));

    f = fake_start(SC_NORMAL);
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) { /* qprof, killed while its client is open */
        close(ready[0]);
        qmp_client *k = NULL;
        if (qmp_open(f->path, &opts, &k, NULL) == 0 && write(ready[1], "k", 1) == 1)
            raise(SIGKILL);
        _exit(1);
    }
    close(ready[1]);
    char byte;
    CHECK_INT((int)read(ready[0], &byte, 1), 1);
    close(ready[0]);
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK_MSG(empty_within_deadline(tmpdir), "memsave directory left in %s after SIGKILL", tmpdir);
    g_free(fake_stop(f));
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    g_free(saved);
    rmdir(tmpdir);
}

int main(void)
{
    test_events_before_replies();
    test_error_reply();
    test_tcp();
    test_close_mid_reply();
    test_no_answer();
    test_not_qmp();
    test_event_before_greeting();
    test_silent_peer();
    test_bad_paths();
    test_sample_ok();
    test_sample_callback_fails();
    test_sample_timeout_still_conts();
    test_sample_already_paused();
    test_sample_signal();
    test_free_resumes();
    test_sample_after_failed_cont();
    test_odd_events();
    test_event_queue_bounded();
    test_memsave_top_of_address_space();
    test_hmp_chunks();
    test_drain_one_deadline();
    test_memsave_dir_swept();
    return harness_result();
}
