/* A tiny assert harness: each CHECK prints file:line and the values on failure and counts it;
 * a test's main returns harness_result(). Exit code 77 means "skipped" to ctest. */
#ifndef QPROF_TEST_HARNESS_H
#define QPROF_TEST_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int harness_failures;
static int harness_checks;

#define HARNESS_FAIL(...)                                                                          \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                                      \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        harness_failures++;                                                                        \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        harness_checks++;                                                                          \
        if (!(cond))                                                                               \
            HARNESS_FAIL("%s", #cond);                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        harness_checks++;                                                                          \
        if (!(cond))                                                                               \
            HARNESS_FAIL(__VA_ARGS__);                                                             \
    } while (0)

#define CHECK_INT(a, b)                                                                            \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        harness_checks++;                                                                          \
        if (va_ != vb_)                                                                            \
            HARNESS_FAIL("%s == %s: %lld != %lld", #a, #b, va_, vb_);                              \
    } while (0)

#define CHECK_U64(a, b)                                                                            \
    do {                                                                                           \
        uint64_t va_ = (uint64_t)(a), vb_ = (uint64_t)(b);                                         \
        harness_checks++;                                                                          \
        if (va_ != vb_)                                                                            \
            HARNESS_FAIL("%s == %s: 0x%" PRIx64 " != 0x%" PRIx64, #a, #b, va_, vb_);               \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *va_ = (a), *vb_ = (b);                                                         \
        harness_checks++;                                                                          \
        if (!va_ || !vb_ || strcmp(va_, vb_) != 0)                                                 \
            HARNESS_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, va_ ? va_ : "(null)",              \
                         vb_ ? vb_ : "(null)");                                                    \
    } while (0)

/* Aborts the test (with a failure) when a precondition does not hold. */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        harness_checks++;                                                                          \
        if (!(cond)) {                                                                             \
            HARNESS_FAIL("required: %s", #cond);                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static inline int harness_result(void)
{
    if (harness_checks == 0) {
        fprintf(stderr, "no checks ran\n");
        return 1;
    }
    fprintf(stderr, "%d checks, %d failed\n", harness_checks, harness_failures);
    return harness_failures ? 1 : 0;
}

#endif
