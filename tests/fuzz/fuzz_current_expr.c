/* Fuzz target: --current expressions through prof_current_parse.
 *
 * Input: the expression text (cut at the first NUL). A parse either fails with a message or
 * gives a path whose names are identifiers that fit their buffers, whose steps are within the
 * limit, and whose per_cpu() CPU index is one only for a per_cpu() start. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "os.h"

static void check_ident(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    FUZZ_ASSERT(n > 0 && n < cap);
    FUZZ_ASSERT(isalpha((unsigned char)s[0]) || s[0] == '_');
    for (size_t i = 0; i < n; i++)
        FUZZ_ASSERT(isalnum((unsigned char)s[i]) || s[i] == '_');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *expr = strndup((const char *)data, size);
    struct prof_current_path path;
    struct qp_error err = {0};
    int rc = prof_current_parse(expr, &path, &err);
    if (rc) {
        FUZZ_ASSERT(rc == -EINVAL && err.msg[0]);
    } else {
        check_ident(path.var, sizeof path.var);
        FUZZ_ASSERT(!path.per_cpu_at_index || path.per_cpu);
        FUZZ_ASSERT(path.per_cpu_index <= UINT32_MAX);
        FUZZ_ASSERT(path.n >= 0 && path.n <= PROF_CURRENT_MAX_STEPS);
        for (int i = 0; i < path.n; i++)
            if (path.step[i].kind == PROF_STEP_FIELD || path.step[i].kind == PROF_STEP_ARROW)
                check_ident(path.step[i].name, sizeof path.step[i].name);
    }
    free(expr);
    return 0;
}
