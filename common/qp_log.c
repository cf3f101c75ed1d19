/* Diagnostics: one sink, one threshold, and a short memory of warnings (qp_log.h). */
#include "qp_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static qp_log_sink_fn sink;
static void *sink_ctx;
static enum qp_log_level threshold = QP_LOG_DEBUG;

/* A ring of the last warnings: next is where the next one goes, count how many ever came. */
static char recent[QP_LOG_RECENT][QP_LOG_MSG_MAX];
static uint64_t recent_count;

void qp_log_set_sink(qp_log_sink_fn fn, void *ctx)
{
    sink = fn;
    sink_ctx = ctx;
}

void qp_log_set_threshold(enum qp_log_level max)
{
    threshold = max;
}

bool qp_log_enabled(enum qp_log_level level)
{
    return level <= threshold;
}

static void keep_recent(const char *msg)
{
    snprintf(recent[recent_count % QP_LOG_RECENT], QP_LOG_MSG_MAX, "%s", msg);
    recent_count++;
}

void qp_log(enum qp_log_level level, const char *fmt, ...)
{
    if (!qp_log_enabled(level))
        return;
    char msg[QP_LOG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (level <= QP_LOG_WARN)
        keep_recent(msg);
    if (sink)
        sink(sink_ctx, level, msg);
    else
        fprintf(stderr, "qprof: %s\n", msg);
}

size_t qp_log_recent(char (*out)[QP_LOG_MSG_MAX], size_t max, uint64_t *total)
{
    uint64_t kept = recent_count < QP_LOG_RECENT ? recent_count : QP_LOG_RECENT;
    size_t n = 0;
    for (uint64_t i = recent_count - kept; i < recent_count && n < max; i++, n++)
        memcpy(out[n], recent[i % QP_LOG_RECENT], QP_LOG_MSG_MAX);
    if (total)
        *total = recent_count;
    return n;
}

void qp_log_clear_recent(void)
{
    recent_count = 0;
}

const char *qp_log_level_name(enum qp_log_level level)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    return (unsigned)level < sizeof names / sizeof names[0] ? names[level] : "?";
}
