/* The scripted fake QMP server (see fake_qmp.h), adapted from tests/qmp/test_qmp_fake.c's. */
#define _GNU_SOURCE
#include "fake_qmp.h"
#include "qmp.h"
#include "qp_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct fake_qmp {
    char dir[64], path[96];
    int listen_fd;
    int wake[2]; /* fake_qmp_stop writes to wake[1] to end a session that would not end */
    enum fake_qmp_script script;
    pthread_t thread;
    GString *log; /* written by the server thread only; read after the join */
};

static const char greeting[] = "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, "
                               "\"major\": 7}, \"package\": \"\"}, \"capabilities\": []}}\r\n";

static void say(int fd, const char *text)
{
    if (qp_sock_send_all(fd, text, strlen(text)) < 0 && errno != EPIPE)
        perror("fake QMP server: send");
}

static void reply(int fd, json_object *req, const char *payload)
{
    json_object *id = NULL;
    json_object_object_get_ex(req, "id", &id);
    char *text = g_strdup_printf("{%s, \"id\": %s}\r\n", payload, json_object_to_json_string(id));
    say(fd, text);
    g_free(text);
}

static void reply_registers(int fd, json_object *req)
{
    char *text = NULL;
    if (!g_file_get_contents(QPROF_TEST_DATA "/qemu-transcripts/info_registers_a_smp2.txt", &text,
                             NULL, NULL))
        text = g_strdup("");
    json_object *s = json_object_new_string(text);
    char *payload = g_strdup_printf("\"return\": %s", json_object_to_json_string(s));
    reply(fd, req, payload);
    g_free(payload);
    json_object_put(s);
    g_free(text);
}

/* Answers one request; returns false to end the session. */
static bool answer(struct fake_qmp *f, int fd, json_object *req)
{
    json_object *cmd = NULL;
    json_object_object_get_ex(req, "execute", &cmd);
    const char *name = cmd ? json_object_get_string(cmd) : "(none)";
    g_string_append_printf(f->log, "%s,", name);
    if (strcmp(name, "query-status") == 0) {
        reply(fd, req,
              f->script == FAKE_QMP_PAUSED
                  ? "\"return\": {\"status\": \"paused\", \"running\": false}"
                  : "\"return\": {\"status\": \"running\", \"running\": true}");
    } else if (strcmp(name, "stop") == 0) {
        say(fd, "{\"timestamp\": {\"seconds\": 100, \"microseconds\": 100}, \"event\": "
                "\"STOP\"}\r\n");
        reply(fd, req, "\"return\": {}");
    } else if (strcmp(name, "cont") == 0) {
        say(fd, "{\"timestamp\": {\"seconds\": 100, \"microseconds\": 600}, \"event\": "
                "\"RESUME\"}\r\n");
        reply(fd, req, "\"return\": {}");
    } else if (strcmp(name, "human-monitor-command") == 0) {
        if (f->script == FAKE_QMP_CLOSE_MID_HMP) {
            /* what a QEMU killed while writing its reply leaves on the wire */
            say(fd, "{\"return\": \"RAX=0000000000000000 RBX=00000000");
            return false;
        }
        reply_registers(fd, req);
    } else {
        reply(fd, req, "\"return\": {}");
    }
    return true;
}

/* Waits for fd to be readable; false when fake_qmp_stop asked the session to end. */
static bool wait_readable(struct fake_qmp *f, int fd)
{
    struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN}, {.fd = f->wake[0], .events = POLLIN}};
    while (poll(pfd, 2, -1) < 0)
        if (errno != EINTR)
            return false;
    return !(pfd[1].revents & POLLIN);
}

static void serve_qmp(struct fake_qmp *f, int fd)
{
    qmp_parser *p = qmp_parser_new();
    say(fd, greeting);
    char buf[4096];
    bool go_on = true;
    while (go_on && wait_readable(f, fd)) {
        long n = qp_sock_recv(fd, false, buf, sizeof buf, 0); /* readable: no wait */
        if (n <= 0 || qmp_parser_feed(p, buf, (size_t)n, NULL) < 0)
            break;
        json_object *req;
        while (go_on && qmp_parser_next(p, &req) == 1) {
            go_on = answer(f, fd, req);
            json_object_put(req);
        }
    }
    qmp_parser_free(p);
}

static void *serve(void *arg)
{
    struct fake_qmp *f = arg;
    if (!wait_readable(f, f->listen_fd))
        return NULL;
    int fd = qp_sock_accept(f->listen_fd, 0);
    if (fd < 0)
        return NULL;
    if (f->script == FAKE_QMP_SILENT) {
        char buf[256];
        while (wait_readable(f, fd) && qp_sock_recv(fd, false, buf, sizeof buf, 0) > 0)
            ;
    } else {
        serve_qmp(f, fd);
    }
    close(fd);
    return NULL;
}

fake_qmp *fake_qmp_start(enum fake_qmp_script script)
{
    struct fake_qmp *f = g_new0(struct fake_qmp, 1);
    f->script = script;
    f->listen_fd = f->wake[0] = f->wake[1] = -1;
    g_strlcpy(f->dir, "/tmp/qpfakeXXXXXX", sizeof f->dir);
    if (!mkdtemp(f->dir)) {
        perror("fake QMP server: mkdtemp");
        g_free(f);
        return NULL;
    }
    snprintf(f->path, sizeof f->path, "%s/qmp", f->dir);
    f->listen_fd = qp_sock_listen_unix(f->path, NULL);
    if (f->listen_fd < 0 || pipe2(f->wake, O_CLOEXEC) != 0) {
        perror("fake QMP server: socket");
        if (f->listen_fd >= 0)
            close(f->listen_fd);
        unlink(f->path);
        rmdir(f->dir);
        g_free(f);
        return NULL;
    }
    f->log = g_string_new(NULL);
    pthread_create(&f->thread, NULL, serve, f);
    return f;
}

const char *fake_qmp_path(const fake_qmp *f)
{
    return f->path;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

char *fake_qmp_stop(fake_qmp *f, double timeout_s)
{
    if (!f)
        return NULL;
    /* A session normally ends when the client closes; one that is never opened or never
     * closed is cut after timeout_s, so that a failing test still finishes. */
    double deadline = now_s() + timeout_s;
    while (pthread_tryjoin_np(f->thread, NULL) == EBUSY) {
        if (now_s() > deadline) {
            if (write(f->wake[1], "x", 1) != 1)
                perror("fake QMP server: waking the server");
            pthread_join(f->thread, NULL);
            break;
        }
        usleep(10000);
    }
    close(f->listen_fd);
    close(f->wake[0]);
    close(f->wake[1]);
    unlink(f->path);
    rmdir(f->dir);
    char *log = g_string_free(f->log, FALSE);
    g_free(f);
    return log;
}
