/* Stream sockets to QEMU (see qp_sock.h). */
#define _GNU_SOURCE
#include "qp_sock.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int64_t qp_sock_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int parse_tcp(const char *hostport, bool allow_empty_host, struct qp_sock_addr *out,
                     struct qp_error *err)
{
    const char *colon = strrchr(hostport, ':');
    if (!colon || (colon == hostport && !allow_empty_host) || colon[1] == '\0')
        return qp_error_set(err, -EINVAL, "bad address tcp:%s: expected tcp:HOST:PORT", hostport);
    size_t host_len = (size_t)(colon - hostport);
    if (host_len >= sizeof out->host || strlen(colon + 1) >= sizeof out->port)
        return qp_error_set(err, -ENAMETOOLONG, "address too long: tcp:%s", hostport);
    /* "[::1]:4444": the brackets only separate the port, getaddrinfo wants the bare address */
    if (host_len >= 2 && hostport[0] == '[' && colon[-1] == ']') {
        hostport++;
        host_len -= 2;
    }
    memcpy(out->host, hostport, host_len);
    out->host[host_len] = '\0';
    strcpy(out->port, colon + 1);
    out->family = QP_SOCK_TCP;
    return 0;
}

int qp_sock_parse(const char *address, bool allow_empty_host, struct qp_sock_addr *out,
                  struct qp_error *err)
{
    memset(out, 0, sizeof *out);
    if (strncmp(address, "tcp:", 4) == 0)
        return parse_tcp(address + 4, allow_empty_host, out, err);
    const char *path = strncmp(address, "unix:", 5) == 0 ? address + 5 : address;
    if (strlen(path) >= sizeof out->path)
        return qp_error_set(err, -ENAMETOOLONG, "socket path too long: %s", path);
    strcpy(out->path, path);
    out->family = QP_SOCK_UNIX;
    return 0;
}

static void set_int_option(int fd, int level, int name)
{
    int on = 1;
    (void)setsockopt(fd, level, name, &on, sizeof on); /* an optimisation: failure is harmless */
}

int qp_sock_connect_tcp(const char *host, const char *default_host, const char *port, int *fd,
                        struct qp_error *err)
{
    const char *name = host && host[0] ? host : default_host;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gai = getaddrinfo(name, port, &hints, &res);
    if (gai != 0)
        return qp_error_set(err, -ENOENT, "resolving %s:%s: %s", name ? name : "", port,
                            gai_strerror(gai));
    int rc = -ECONNREFUSED, s = -1;
    for (struct addrinfo *a = res; a && s < 0; a = a->ai_next) {
        s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (s < 0) {
            rc = -errno;
        } else if (connect(s, a->ai_addr, a->ai_addrlen) != 0) {
            rc = -errno;
            close(s);
            s = -1;
        }
    }
    freeaddrinfo(res);
    if (s < 0)
        return qp_error_set(err, rc, "connecting to %s:%s: %s", name ? name : "", port,
                            strerror(-rc));
    set_int_option(s, IPPROTO_TCP, TCP_NODELAY);
    set_int_option(s, IPPROTO_TCP, TCP_QUICKACK);
    *fd = s;
    return 0;
}

int qp_sock_connect_unix(const char *path, int *fd, struct qp_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return qp_error_set(err, -ENAMETOOLONG, "socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return qp_error_set(err, -errno, "socket: %s", strerror(errno));
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(s);
        return qp_error_set(err, -e, "connecting to %s: %s", path, strerror(e));
    }
    *fd = s;
    return 0;
}

int qp_sock_connect(const struct qp_sock_addr *a, const char *default_host, int *fd,
                    struct qp_error *err)
{
    if (a->family == QP_SOCK_TCP)
        return qp_sock_connect_tcp(a->host, default_host, a->port, fd, err);
    return qp_sock_connect_unix(a->path, fd, err);
}

bool qp_sock_is_tcp(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return false;
    return ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
}

long qp_sock_recv(int fd, bool tcp, void *buf, size_t len, int64_t deadline_us)
{
    for (;;) {
        int64_t left = deadline_us ? deadline_us - qp_sock_now_us() : 0;
        if (deadline_us && left <= 0)
            return 0;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, deadline_us ? (int)((left + 999) / 1000) : 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0) {
            if (!deadline_us)
                return 0;
            continue;
        }
        ssize_t n = recv(fd, buf, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EPIPE;
        if (tcp)
            set_int_option(fd, IPPROTO_TCP, TCP_QUICKACK);
        return (long)n;
    }
}

int qp_sock_send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int qp_sock_listen_unix(const char *path, struct qp_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return qp_error_set(err, -ENAMETOOLONG, "socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    unlink(path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return qp_error_set(err, -errno, "socket: %s", strerror(errno));
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(s, 4) != 0) {
        int e = errno;
        close(s);
        return qp_error_set(err, -e, "listening on %s: %s", path, strerror(e));
    }
    return s;
}

int qp_sock_listen_tcp_loopback(int *port, struct qp_error *err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sa_len = sizeof sa;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return qp_error_set(err, -errno, "socket: %s", strerror(errno));
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(s, 4) != 0 ||
        getsockname(s, (struct sockaddr *)&sa, &sa_len) != 0) {
        int e = errno;
        close(s);
        return qp_error_set(err, -e, "listening on 127.0.0.1: %s", strerror(e));
    }
    *port = ntohs(sa.sin_port);
    return s;
}

int qp_sock_accept(int listen_fd, int timeout_ms)
{
    struct pollfd pfd = {.fd = listen_fd, .events = POLLIN};
    int rc;
    while ((rc = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    if (rc < 0)
        return -errno;
    if (rc == 0)
        return -ETIMEDOUT;
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    return fd < 0 ? -errno : fd;
}
