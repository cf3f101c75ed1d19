/* qp_log: the one path diagnostics take out of the library code (the session, the OS adapters).
 *
 * A message has a level and no "qprof: " prefix and no newline; the sink decides where it goes.
 * Until a sink is installed, messages go to stderr as "qprof: MESSAGE\n", which is what the code
 * printed itself before. The CLI installs its own sink (cli/run.c) and the threshold (--verbose
 * lets info through). Warnings and errors are also kept, the last QP_LOG_RECENT of them, for a
 * summary or a live view to show again (qp_log_recent).
 *
 * A caller that guards an info message with its own verbose flag may keep doing so: the
 * threshold and the flag agree, and the flag saves formatting a message nobody reads.
 * Not thread-safe: qprof logs from its main thread only.
 */
#ifndef QP_LOG_H
#define QP_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum qp_log_level { QP_LOG_ERROR = 0, QP_LOG_WARN, QP_LOG_INFO, QP_LOG_DEBUG };

#define QP_LOG_MSG_MAX 512
#define QP_LOG_RECENT  16

/* Receives each message at or below the threshold (msg borrowed for the call). */
typedef void (*qp_log_sink_fn)(void *ctx, enum qp_log_level level, const char *msg);

/* Installs fn (NULL: back to stderr); ctx is passed back to it. */
void qp_log_set_sink(qp_log_sink_fn fn, void *ctx);
/* Messages above max are dropped (the default lets every level through). */
void qp_log_set_threshold(enum qp_log_level max);
bool qp_log_enabled(enum qp_log_level level);

void qp_log(enum qp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The warnings and errors logged so far, oldest first, at most QP_LOG_RECENT (the oldest are
 * dropped), with the total ever logged in *total (may be NULL). Returns how many were copied
 * into out (at most max); each is NUL-terminated. */
size_t qp_log_recent(char (*out)[QP_LOG_MSG_MAX], size_t max, uint64_t *total);
/* Forgets the recent warnings (a new run, a test). */
void qp_log_clear_recent(void);

/* The name of a level: "error", "warning", "info", "debug". */
const char *qp_log_level_name(enum qp_log_level level);

#endif
