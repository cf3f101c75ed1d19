/* qp_error: the error type every qprof module fills.
 *
 * Functions return 0 (or a non-negative count) on success and a negative errno-style code on
 * failure. They take an optional `struct qp_error *err` as their last argument; on failure they
 * fill it with the code and a human message with context that the CLI prints as is, e.g.
 * "reading 4096 bytes at 0xffffffff80001000: QEMU replied: Invalid addr ...". On success a
 * callee leaves *err untouched. A NULL err is allowed everywhere.
 */
#ifndef QP_ERROR_H
#define QP_ERROR_H

#include <errno.h>
#include <stddef.h>

#define QP_ERROR_MSG_MAX 512

/* Codes with a project meaning, mapped onto errno values so that callers can still test
 * against errno names. X(name, value, text). */
#define QP_ERRORS(X)                                                                               \
    X(QP_ENOENT, -ENOENT, "not found")                                                             \
    X(QP_EACCES, -EACCES, "permission denied")                                                     \
    X(QP_EINVAL, -EINVAL, "invalid argument")                                                      \
    X(QP_ENOMEM, -ENOMEM, "out of memory")                                                         \
    X(QP_EIO, -EIO, "input/output error")                                                          \
    X(QP_EPROTO, -EPROTO, "protocol error (peer is not QMP or sent a malformed message)")         \
    X(QP_EREMOTE, -EREMOTEIO, "QEMU rejected the command")                                         \
    X(QP_EPIPE, -EPIPE, "QEMU closed the connection")                                              \
    X(QP_ETIMEDOUT, -ETIMEDOUT, "timed out")                                                       \
    X(QP_EBUSY, -EBUSY, "resource busy")                                                           \
    X(QP_EFAULT, -EFAULT, "guest address not mapped")                                              \
    X(QP_EINTR, -EINTR, "interrupted")                                                             \
    X(QP_ENOTSUP, -ENOTSUP, "not supported")                                                       \
    X(QP_ERANGE, -ERANGE, "value out of range")

enum qp_error_code {
#define QP_ERROR_ENUM(name, value, text) name = value,
    QP_ERRORS(QP_ERROR_ENUM)
#undef QP_ERROR_ENUM
};

struct qp_error {
    int code;                   /* negative errno-style code */
    char msg[QP_ERROR_MSG_MAX]; /* human message with context, never ends with a newline */
};

/* Fills err (if not NULL) with code and a printf-style message; returns code (negative) so
 * that callers can write `return qp_error_set(err, -EIO, "...")`. */
int qp_error_set(struct qp_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends context to an error already set: "context: previous message". Returns err->code
 * (or -EIO if err is NULL). */
int qp_error_prefix(struct qp_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Text for a code from the QP_ERRORS table, else strerror(-code). Never NULL. */
const char *qp_error_str(int code);

#endif
