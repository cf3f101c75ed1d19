/* TEMPORARY on branch pipeline only: writers being written by others. Each is removed from this
 * file when its real implementation (output/out_<format>.c) lands. Must not reach main. */
#include "output.h"

#include <errno.h>

int out_write_pprof(const out_profile *p, out_names *n, const struct out_write_opts *o, FILE *f,
                    struct qp_error *err)
{
    return qp_error_set(err, -ENOTSUP, "pprof output is not written yet");
}
