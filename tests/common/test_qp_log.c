/* qp_log (common/qp_log.c): the threshold, the sink, and the recent warnings kept for a summary
 * or a live view. */
#include "harness.h"
#include "qp_log.h"

#include <stdio.h>
#include <string.h>

struct seen {
    int n;
    enum qp_log_level level;
    char msg[QP_LOG_MSG_MAX];
};

static void sink(void *ctx, enum qp_log_level level, const char *msg)
{
    struct seen *s = ctx;
    s->n++;
    s->level = level;
    snprintf(s->msg, sizeof s->msg, "%s", msg);
}

static void test_threshold_and_sink(void)
{
    struct seen s = {0};
    qp_log_set_sink(sink, &s);
    qp_log_set_threshold(QP_LOG_WARN);
    CHECK(qp_log_enabled(QP_LOG_ERROR) && qp_log_enabled(QP_LOG_WARN));
    CHECK(!qp_log_enabled(QP_LOG_INFO));
    qp_log(QP_LOG_INFO, "not shown %d", 1);
    CHECK_INT(s.n, 0);
    qp_log(QP_LOG_WARN, "vCPU %d: %s", 3, "unreadable");
    CHECK_INT(s.n, 1);
    CHECK_INT((int)s.level, (int)QP_LOG_WARN);
    CHECK_STR(s.msg, "vCPU 3: unreadable");
    qp_log_set_threshold(QP_LOG_DEBUG);
    qp_log(QP_LOG_DEBUG, "now shown");
    CHECK_INT(s.n, 2);
    CHECK_STR(s.msg, "now shown");
    CHECK_STR(qp_log_level_name(QP_LOG_WARN), "warning");
    qp_log_set_sink(NULL, NULL);
}

/* Warnings and errors are kept, the last QP_LOG_RECENT of them in order; info is not. */
static void test_recent(void)
{
    static char got[QP_LOG_RECENT + 4][QP_LOG_MSG_MAX];
    struct seen s = {0};
    uint64_t total = 99;
    qp_log_set_sink(sink, &s);
    qp_log_set_threshold(QP_LOG_DEBUG);
    qp_log_clear_recent();
    CHECK_INT((int)qp_log_recent(got, QP_LOG_RECENT, &total), 0);
    CHECK_U64(total, 0);
    qp_log(QP_LOG_ERROR, "first");
    qp_log(QP_LOG_INFO, "an info");
    qp_log(QP_LOG_WARN, "second");
    CHECK_INT((int)qp_log_recent(got, QP_LOG_RECENT, &total), 2);
    CHECK_U64(total, 2);
    CHECK_STR(got[0], "first");
    CHECK_STR(got[1], "second");
    CHECK_INT((int)qp_log_recent(got, 1, NULL), 1);
    CHECK_STR(got[0], "first");
    for (int i = 0; i < QP_LOG_RECENT + 3; i++)
        qp_log(QP_LOG_WARN, "w%d", i);
    CHECK_INT((int)qp_log_recent(got, QP_LOG_RECENT + 4, &total), QP_LOG_RECENT);
    CHECK_U64(total, QP_LOG_RECENT + 5);
    char want[16];
    snprintf(want, sizeof want, "w%d", 3);
    CHECK_STR(got[0], want); /* the oldest kept: first, second, w0..w2 dropped */
    snprintf(want, sizeof want, "w%d", QP_LOG_RECENT + 2);
    CHECK_STR(got[QP_LOG_RECENT - 1], want);
    /* A message past QP_LOG_MSG_MAX is cut, not overrun. */
    char longmsg[QP_LOG_MSG_MAX * 2];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = '\0';
    qp_log(QP_LOG_WARN, "%s", longmsg);
    CHECK_INT((int)strlen(s.msg), QP_LOG_MSG_MAX - 1);
    qp_log_set_sink(NULL, NULL);
}

int main(void)
{
    test_threshold_and_sink();
    test_recent();
    return harness_result();
}
