#include "qp_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int qp_error_set(struct qp_error *err, int code, const char *fmt, ...)
{
    if (code >= 0)
        code = -EIO;
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
    return code;
}

/* Appends src to dst (holding *len bytes, capacity cap) as far as it fits. Truncation is
 * acceptable: the message is for humans and stays NUL-terminated. */
static void append_bounded(char *dst, size_t cap, size_t *len, const char *src)
{
    size_t n = strnlen(src, cap);
    if (n > cap - 1 - *len)
        n = cap - 1 - *len;
    memcpy(dst + *len, src, n);
    *len += n;
    dst[*len] = '\0';
}

int qp_error_prefix(struct qp_error *err, const char *fmt, ...)
{
    if (!err)
        return -EIO;
    char context[QP_ERROR_MSG_MAX];
    char previous[QP_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    memcpy(previous, err->msg, sizeof previous);
    previous[sizeof previous - 1] = '\0';
    size_t len = 0;
    err->msg[0] = '\0';
    append_bounded(err->msg, sizeof err->msg, &len, context);
    append_bounded(err->msg, sizeof err->msg, &len, ": ");
    append_bounded(err->msg, sizeof err->msg, &len, previous);
    return err->code;
}

const char *qp_error_str(int code)
{
    switch (code) {
#define QP_ERROR_CASE(name, value, text)                                                           \
    case value:                                                                                    \
        return text;
        QP_ERRORS(QP_ERROR_CASE)
#undef QP_ERROR_CASE
    default:
        return strerror(code < 0 ? -code : code);
    }
}
