/* qp_sock: the stream sockets qprof talks to QEMU through (QMP, the gdbstub), and that the tests'
 * fake servers listen on.
 *
 * One parser of the address forms users type ("unix:PATH", a bare PATH, "tcp:HOST:PORT",
 * "tcp::PORT" as QEMU's own -gdb documentation writes it), one connect per family, and one
 * deadline-bounded read. Both protocols are small requests answered by small replies, so a TCP
 * connection gets TCP_NODELAY (our requests go out at once) and TCP_QUICKACK after every read
 * (our ACK goes out at once, so a peer that does not set no-delay itself, as QEMU's QMP chardev
 * does not by default, is never held back by Nagle's algorithm waiting for our delayed ACK:
 * that wait was 40 ms per reply). The protocol clients keep their own messages and hints; the
 * functions here return negative errno-style codes and fill the optional err with a plain one.
 */
#ifndef QP_SOCK_H
#define QP_SOCK_H

#include "qp_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum qp_sock_family { QP_SOCK_UNIX, QP_SOCK_TCP };

struct qp_sock_addr {
    enum qp_sock_family family;
    char path[108]; /* QP_SOCK_UNIX: the socket file */
    char host[256]; /* QP_SOCK_TCP: as given; empty for "tcp::PORT" (default_host is used) */
    char port[32];  /* QP_SOCK_TCP */
};

/* Parses address into *out. "tcp:" needs HOST:PORT with a non-empty PORT (HOST may be empty
 * only when allow_empty_host); anything else is a UNIX socket path, with or without "unix:".
 * -EINVAL (err: "expected tcp:HOST:PORT") or -ENAMETOOLONG for a path or host that cannot fit. */
int qp_sock_parse(const char *address, bool allow_empty_host, struct qp_sock_addr *out,
                  struct qp_error *err);

/* Connects to host (default_host when empty) and port, trying each resolved address. On
 * success *fd is the caller's (close it) and has TCP_NODELAY. Returns -ENOENT when the name does
 * not resolve (err: "resolving HOST:PORT: ..."), else the last connect's -errno. */
int qp_sock_connect_tcp(const char *host, const char *default_host, const char *port, int *fd,
                        struct qp_error *err);

/* Connects to the UNIX socket at path; *fd is the caller's. Returns -errno of socket/connect
 * (ENOENT, ECONNREFUSED, EACCES, ...), -ENAMETOOLONG for a path that does not fit. */
int qp_sock_connect_unix(const char *path, int *fd, struct qp_error *err);

/* Connects to a parsed address (either family). */
int qp_sock_connect(const struct qp_sock_addr *a, const char *default_host, int *fd,
                    struct qp_error *err);

/* True when fd is a TCP socket (checked once by the caller; qp_sock_recv takes the answer). */
bool qp_sock_is_tcp(int fd);

/* Waits until deadline_us (CLOCK_MONOTONIC microseconds, qp_sock_now_us; 0: do not wait) for
 * data and reads up to len bytes into buf, restarting on EINTR (an exchange that stopped the
 * guest must be finished). Returns the number of bytes read (> 0), 0 when nothing came before
 * the deadline, -EPIPE when the peer closed the connection, else -errno. With tcp, re-arms
 * TCP_QUICKACK after the read (the kernel clears it on its own). */
long qp_sock_recv(int fd, bool tcp, void *buf, size_t len, int64_t deadline_us);

/* Sends all of buf (MSG_NOSIGNAL, restarting on EINTR and short writes): 0 or -errno. */
int qp_sock_send_all(int fd, const void *buf, size_t len);

int64_t qp_sock_now_us(void);

/* ---- The server side, for the tests' fake QMP servers and gdbstubs ---------------------- */

/* Listens on a fresh UNIX socket at path (an old file there is removed first) and returns the
 * listening fd, or -errno. */
int qp_sock_listen_unix(const char *path, struct qp_error *err);

/* Listens on 127.0.0.1 at a port the kernel picks (*port) and returns the listening fd, or
 * -errno. */
int qp_sock_listen_tcp_loopback(int *port, struct qp_error *err);

/* Waits up to timeout_ms for a client on listen_fd and accepts it: the connection's fd (the
 * caller's), -ETIMEDOUT when none came, else -errno. */
int qp_sock_accept(int listen_fd, int timeout_ms);

#endif
