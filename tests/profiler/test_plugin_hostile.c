/* qprof-plugin.so in QEMU 10 against local clients that do not play by the rules
 * (docs/security.md), each followed by what a user must still get:
 *   hostile-client  rounds of a client that tries to map the rings writable, scribbles its read
 *                   positions, sends garbage configurations and exact-count requests and a
 *                   message cut short; QEMU runs on and the next qprof samples spin's shares
 *   one-byte        a client that sends one byte and waits: the next qprof is served anyway
 *   not-a-socket    a regular file at the socket path: the plugin refuses, the file stays
 *   socket-mode     the socket is 0600 under umask 0; another uid is refused (as root), and let
 *                   in by allow-uid=N or any-user=on
 *   floors          interval_ns 1 and period_insns 1 are raised to the floors, 2^64-1 lowered to
 *                   the ceiling, and exact-count STARTs (code-cache flushes) are paced
 * Each skips (77), saying why, without QEMU 10 or the plugin. */
#define _GNU_SOURCE
#include "harness.h"

#include "child.h"
#include "folded.h"
#include "qprof_ring.h"
#include "vm.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define QPROF_BIN  QPROF_BUILD_DIR "/qprof"
#define DEADLINE_S 60.0 /* generous: TCG under ASan on a loaded 2-core machine */
#define SAMPLES    1000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static test_vm *boot(const char *plugin_args)
{
    struct vm_opts o = {
        .shared_ram = true, .cmdline = "run=spin", .plugin = true, .plugin_args = plugin_args};
    test_vm *vm = NULL;
    int rc = vm_start(&o, &vm);
    if (rc == VM_SKIP)
        exit(VM_SKIP);
    REQUIRE(rc == 0);
    REQUIRE(vm_wait_serial(vm, "ready", 60) == 0);
    return vm;
}

static const char *socket_path(const test_vm *vm)
{
    return vm_plugin_address(vm) + strlen("unix:");
}

/* ---- A raw client ------------------------------------------------------------------------ */

struct client {
    int fd;
    int fds[2]; /* the rings' and the tails' memfds, -1 when not sent */
    struct qpr_hello hello;
};

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Connects and reads the hello: 0, or -1 when there was none within the deadline. */
static int client_open(const char *path, struct client *c)
{
    memset(c, 0, sizeof *c);
    c->fds[0] = c->fds[1] = -1;
    c->fd = connect_to(path);
    if (c->fd < 0)
        return -1;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, (int)(DEADLINE_S * 1000)) <= 0)
        return -1;
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = &c->hello, .iov_len = sizeof c->hello};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl};
    if (recvmsg(c->fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC) != (ssize_t)sizeof c->hello)
        return -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    if (cm && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(2 * sizeof(int)))
        memcpy(c->fds, CMSG_DATA(cm), 2 * sizeof(int));
    return 0;
}

static void client_close(struct client *c)
{
    for (int i = 0; i < 2; i++)
        if (c->fds[i] >= 0)
            close(c->fds[i]);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = c->fds[0] = c->fds[1] = -1;
}

static void send_all(int fd, const void *data, size_t len)
{
    REQUIRE(send(fd, data, len, MSG_NOSIGNAL) == (ssize_t)len);
}

/* An exact-count request, and its reply read off (with its blocks). */
static void exact_request(struct client *c, uint32_t op)
{
    struct qpr_exact_request r = {.magic = QPR_EXACT_MAGIC, .version = QPR_VERSION, .op = op};
    send_all(c->fd, &r, sizeof r);
    struct qpr_exact_reply reply;
    REQUIRE(recv(c->fd, &reply, sizeof reply, MSG_WAITALL) == (ssize_t)sizeof reply);
    for (uint64_t left = (uint64_t)reply.n_blocks * sizeof(struct qpr_exact_block); left;) {
        char buf[4096];
        ssize_t n = recv(c->fd, buf, left < sizeof buf ? left : sizeof buf, 0);
        REQUIRE(n > 0);
        left -= (uint64_t)n;
    }
}

/* ---- A normal qprof afterwards ------------------------------------------------------------ */

struct run {
    int exit_code;
    double wall_s;
    char *err;
};

static struct run run_qprof(test_vm *vm, unsigned samples)
{
    char count[32], out[512], err_path[512], out_path[512];
    snprintf(count, sizeof count, "%u", samples);
    snprintf(out, sizeof out, "%s/out.folded", vm_dir(vm));
    snprintf(out_path, sizeof out_path, "%s/qprof.out", vm_dir(vm));
    snprintf(err_path, sizeof err_path, "%s/qprof.err", vm_dir(vm));
    const char *args[] = {"--plugin",
                          vm_plugin_address(vm),
                          "--qmp-socket",
                          vm_qmp_path(vm),
                          "--kernel",
                          QPROF_GUEST_KERNEL,
                          "--user-dir",
                          QPROF_GUEST_USER_DIR,
                          "--samples",
                          count,
                          "--interval",
                          "1",
                          "-o",
                          out,
                          "--no-progress",
                          NULL};
    struct run r = {0};
    double t0 = now_s();
    pid_t pid = child_start(QPROF_BIN, args, vm_dir(vm), out_path, err_path, NULL);
    REQUIRE(pid > 0);
    bool timed_out = false;
    r.exit_code = child_wait(pid, 120 + samples * 0.05, &timed_out);
    r.wall_s = now_s() - t0;
    CHECK_MSG(!timed_out, "qprof ran past its deadline");
    if (!g_file_get_contents(err_path, &r.err, NULL, NULL))
        r.err = g_strdup("");
    return r;
}

static bool has_frame(const char *stack, const char *frame)
{
    size_t n = strlen(frame);
    for (const char *p = strstr(stack, frame); p; p = strstr(p + 1, frame))
        if ((p == stack || p[-1] == ';') && (p[n] == ';' || p[n] == 0 || p[n] == ' '))
            return true;
    return false;
}

/* A normal qprof: every sample written, spin's hot loops at their designed 3:1 (the e2e suite's
 * check, 4.4 standard deviations of the share over the samples, at least 0.03). The idle share
 * is left out: on a loaded host the vCPU thread's waits stretch, and that is not this test's. */
static void check_normal_run(test_vm *vm)
{
    struct run r = run_qprof(vm, SAMPLES);
    fprintf(stderr, "qprof: %s", r.err);
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    char out[512];
    snprintf(out, sizeof out, "%s/out.folded", vm_dir(vm));
    struct folded f = folded_read(out);
    CHECK_MSG(f.total == SAMPLES && !f.malformed, "%lu samples written, %u lines malformed",
              (unsigned long)f.total, f.malformed);
    uint64_t a = 0, b = 0, idle = 0;
    for (guint i = 0; i < f.stacks->len; i++) {
        a += has_frame(STACK(&f, i), "hot_a") ? COUNT(&f, i) : 0;
        b += has_frame(STACK(&f, i), "hot_b") ? COUNT(&f, i) : 0;
        idle += strcmp(STACK(&f, i), "idle") == 0 ? COUNT(&f, i) : 0;
    }
    CHECK_MSG(a + b >= (f.total - idle) / 2 && a + b >= 100,
              "only %lu of %lu running samples in the hot loops", (unsigned long)(a + b),
              (unsigned long)(f.total - idle));
    if (a + b) {
        double share = (double)a / (double)(a + b);
        double tol = fmax(4.4 * sqrt(0.75 * 0.25 / (double)(a + b)), 0.03);
        CHECK_MSG(fabs(share - 0.75) < tol, "hot_a share %.3f over %lu samples, designed 0.75",
                  share, (unsigned long)(a + b));
    }
    folded_free(&f);
    g_free(r.err);
}

/* ---- The cases ---------------------------------------------------------------------------- */

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* What a client can try on the rings' memfd: none of it may give it a way to write. */
static void try_writing_rings(const struct client *c)
{
    int fd = c->fds[0];
    uint64_t size = c->hello.map_size;
    void *w = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK_MSG(w == MAP_FAILED, "a client mapped the plugin's rings writable");
    if (w != MAP_FAILED)
        munmap(w, size);
    void *r = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(r != MAP_FAILED);
    CHECK_MSG(mprotect(r, 4096, PROT_READ | PROT_WRITE) != 0, "mprotect made the rings writable");
    munmap(r, size);
    char byte = 0x55;
    CHECK_MSG(pwrite(fd, &byte, 1, 0) < 0, "write(2) reached the rings");
    CHECK_MSG(ftruncate(fd, 4096) != 0, "a client shrank the rings");
}

/* A configuration of random bytes under a valid magic and version. */
static void send_garbage_config(int fd, uint64_t *rng)
{
    struct qpr_config c;
    for (size_t i = 0; i < sizeof c; i += 8) {
        uint64_t v = xorshift(rng);
        memcpy((char *)&c + i, &v, sizeof c - i < 8 ? sizeof c - i : 8);
    }
    c.magic = QPR_MAGIC;
    c.version = QPR_VERSION;
    if (xorshift(rng) & 1)
        c.interval_ns = xorshift(rng) & 0xff; /* a few ns: the floor's case */
    send_all(fd, &c, sizeof c);
}

static void case_hostile_client(void)
{
    test_vm *vm = boot(NULL);
    uint64_t rng = 0x9e3779b97f4a7c15u;
    for (int round = 0; round < 4; round++) {
        struct client c;
        REQUIRE(client_open(socket_path(vm), &c) == 0);
        CHECK_INT(c.hello.status, QPR_OK);
        REQUIRE(c.fds[0] >= 0 && c.fds[1] >= 0);
        try_writing_rings(&c);
        uint64_t *tails =
            mmap(NULL, sizeof(struct qpr_tails), PROT_READ | PROT_WRITE, MAP_SHARED, c.fds[1], 0);
        REQUIRE(tails != MAP_FAILED);
        for (int step = 0; step < 20; step++) {
            for (size_t i = 0; i < sizeof(struct qpr_tails) / 8; i++)
                tails[i] = xorshift(&rng) >> (xorshift(&rng) % 64);
            if (step % 5 == 0)
                send_garbage_config(c.fd, &rng);
            if (step == 7)
                exact_request(&c, QPR_EXACT_START);
            if (step == 12)
                exact_request(&c, QPR_EXACT_DUMP);
            struct timespec ts = {0, 20 * 1000000};
            nanosleep(&ts, NULL);
        }
        if (round & 1) /* a message cut short, then gone */
            send_all(c.fd, "\x51", 1);
        munmap(tails, sizeof(struct qpr_tails));
        client_close(&c);
        CHECK_MSG(vm_alive(vm), "QEMU died under a hostile client (round %d)", round);
    }
    check_normal_run(vm);
    CHECK(vm_alive(vm));
    vm_stop(vm);
}

/* Before: the listener waited in recv(MSG_WAITALL) for the rest of the message with no deadline,
 * and every later qprof failed after 5 s. */
static void case_one_byte(void)
{
    test_vm *vm = boot(NULL);
    struct client c;
    REQUIRE(client_open(socket_path(vm), &c) == 0);
    CHECK_INT(c.hello.status, QPR_OK);
    send_all(c.fd, "Q", 1);
    check_normal_run(vm); /* while the one-byte client still holds its connection */
    client_close(&c);
    vm_stop(vm);
}

/* Before: open_socket unlinked whatever was at the path. */
static void case_not_a_socket(void)
{
    char dir[] = "/tmp/qprof-notsock-XXXXXX";
    REQUIRE(mkdtemp(dir));
    char *path = g_strdup_printf("%s/precious", dir);
    REQUIRE(g_file_set_contents(path, "keep me\n", -1, NULL));
    char *args = g_strdup_printf("socket=%s", path); /* the later socket= is the one taken */
    char *log = g_strdup_printf("%s/qemu.err", dir);
    /* QEMU's stderr is the test's: catch it in a file for the plugin's line */
    fflush(stderr);
    int saved = dup(2), logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(saved >= 0 && logfd >= 0);
    dup2(logfd, 2);
    struct vm_opts o = {.cmdline = "run=spin", .plugin = true, .plugin_args = args};
    test_vm *vm = NULL;
    int rc = vm_start(&o, &vm);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(logfd);
    if (rc == VM_SKIP)
        exit(VM_SKIP);
    char *said = NULL, *kept = NULL;
    g_file_get_contents(log, &said, NULL, NULL);
    fprintf(stderr, "QEMU said: %s", said ? said : "(nothing)\n");
    CHECK_MSG(rc != 0, "QEMU started with a regular file at the plugin's socket path");
    if (rc == 0)
        vm_stop(vm);
    CHECK_MSG(said && strstr(said, "not a socket") && strstr(said, "not replaced"),
              "no clear refusal");
    CHECK_MSG(g_file_get_contents(path, &kept, NULL, NULL) && strcmp(kept, "keep me\n") == 0,
              "the regular file at the socket path was replaced");
    unlink(log);
    unlink(path);
    rmdir(dir);
    g_free(said);
    g_free(kept);
    g_free(log);
    g_free(args);
    g_free(path);
}

/* As uid 65534: the status of the plugin's hello, 100 when there was none. */
static int hello_status_as_nobody(const char *path)
{
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(101);
        struct client c;
        _exit(client_open(path, &c) == 0 ? (int)c.hello.status : 100);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Before: the socket took QEMU's umask, and any peer that could connect was served. */
static void case_socket_mode(void)
{
    mode_t old = umask(0);
    test_vm *vm = boot(NULL);
    umask(old);
    struct stat st;
    REQUIRE(stat(socket_path(vm), &st) == 0);
    CHECK_MSG(S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600,
              "the plugin's socket has mode %o under umask 0", (unsigned)(st.st_mode & 0777));
    if (geteuid() != 0) {
        fprintf(stderr, "not root: the other-uid half is left out\n");
        vm_stop(vm);
        return;
    }
    /* the directory and the socket opened up by hand: the peer check alone must refuse */
    REQUIRE(chmod(vm_dir(vm), 0755) == 0 && chmod(socket_path(vm), 0666) == 0);
    CHECK_INT(hello_status_as_nobody(socket_path(vm)), QPR_DENIED);
    check_normal_run(vm); /* QEMU's own uid still served */
    vm_stop(vm);

    const char *widen[] = {"allow-uid=65534", "any-user=on"};
    for (int i = 0; i < 2; i++) {
        vm = boot(widen[i]);
        REQUIRE(stat(socket_path(vm), &st) == 0);
        CHECK_MSG((st.st_mode & 0777) == 0666, "%s: mode %o", widen[i],
                  (unsigned)(st.st_mode & 0777));
        REQUIRE(chmod(vm_dir(vm), 0755) == 0);
        CHECK_INT(hello_status_as_nobody(socket_path(vm)), QPR_OK);
        vm_stop(vm);
    }
}

/* Waits until the header's word at `field` reads `want`: true when it does within the deadline. */
static bool header_reaches(const struct qpr_header *h, const _Atomic uint64_t *field, uint64_t want)
{
    (void)h;
    double deadline = now_s() + DEADLINE_S;
    while (atomic_load(field) != want && now_s() < deadline)
        usleep(10000);
    return atomic_load(field) == want;
}

/* Before: interval_ns 1 made the timer thread spin, period_insns 1 a callback per block, and
 * every exact START flushed the code cache at once. */
static void case_floors(void)
{
    test_vm *vm = boot(NULL);
    struct client c;
    REQUIRE(client_open(socket_path(vm), &c) == 0);
    REQUIRE(c.hello.status == QPR_OK && c.fds[0] >= 0);
    const struct qpr_header *h = mmap(NULL, c.hello.map_size, PROT_READ, MAP_SHARED, c.fds[0], 0);
    REQUIRE(h != MAP_FAILED);
    struct qpr_config cfg = {.magic = QPR_MAGIC, .version = QPR_VERSION, .interval_ns = 1};
    send_all(c.fd, &cfg, sizeof cfg);
    CHECK_MSG(header_reaches(h, &h->interval_ns, QPR_MIN_INTERVAL_NS),
              "interval_ns 1 in effect as %lu", (unsigned long)atomic_load(&h->interval_ns));
    cfg.interval_ns = UINT64_MAX; /* and the ceiling: a timer asleep for centuries served no one */
    send_all(c.fd, &cfg, sizeof cfg);
    CHECK_MSG(header_reaches(h, &h->interval_ns, QPR_MAX_INTERVAL_NS),
              "interval_ns 2^64-1 in effect as %lu", (unsigned long)atomic_load(&h->interval_ns));
    cfg.interval_ns = 0;
    cfg.period_insns = 1;
    send_all(c.fd, &cfg, sizeof cfg);
    CHECK_MSG(header_reaches(h, &h->period_insns, QPR_MIN_PERIOD_INSNS),
              "period_insns 1 in effect as %lu", (unsigned long)atomic_load(&h->period_insns));
    /* five STARTs, each answered: at least four gaps between the flushes they ask for */
    double t0 = now_s();
    for (int i = 0; i < 5; i++)
        exact_request(&c, QPR_EXACT_START);
    double took = now_s() - t0, least = 4 * QPR_RESET_GAP_NS / 1e9;
    fprintf(stderr, "5 exact STARTs answered in %.3f s (at least %.3f)\n", took, least);
    CHECK_MSG(took >= least - 0.01, "5 STARTs in %.3f s: flushes not paced", took);
    munmap((void *)h, c.hello.map_size);
    client_close(&c);
    CHECK(vm_alive(vm));
    check_normal_run(vm);
    vm_stop(vm);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    signal(SIGPIPE, SIG_IGN);
    if (strcmp(which, "hostile-client") == 0)
        case_hostile_client();
    else if (strcmp(which, "one-byte") == 0)
        case_one_byte();
    else if (strcmp(which, "not-a-socket") == 0)
        case_not_a_socket();
    else if (strcmp(which, "socket-mode") == 0)
        case_socket_mode();
    else if (strcmp(which, "floors") == 0)
        case_floors();
    else {
        fprintf(stderr, "usage: test_plugin_hostile hostile-client|one-byte|not-a-socket|"
                        "socket-mode|floors\n");
        return 2;
    }
    return harness_result();
}
