/* TEMPORARY on branch pipeline only: writers being written by others. Each is removed from this
 * file when its real implementation (output/out_<format>.c) lands. Must not reach main. */
#include "output.h"

#include <errno.h>

int out_write_speedscope(const out_profile *p, out_names *n, const struct out_write_opts *o,
                         FILE *f, struct qp_error *err)
{
    return qp_error_set(err, -ENOTSUP, "speedscope output is not written yet");
}

int out_write_pprof(const out_profile *p, out_names *n, const struct out_write_opts *o, FILE *f,
                    struct qp_error *err)
{
    return qp_error_set(err, -ENOTSUP, "pprof output is not written yet");
}

int out_write_svg(const out_profile *p, out_names *n, const struct out_write_opts *o, FILE *f,
                  struct qp_error *err)
{
    return qp_error_set(err, -ENOTSUP, "SVG output is not written yet");
}

int out_recorder_open(const char *path, const char *meta, out_recorder **out, struct qp_error *err)
{
    return qp_error_set(err, -ENOTSUP, "record files are not written yet");
}

int out_recorder_sync(out_recorder *r, const out_profile *p, struct qp_error *err)
{
    return -ENOTSUP;
}

int out_recorder_flush(out_recorder *r, struct qp_error *err)
{
    return -ENOTSUP;
}

int out_recorder_close(out_recorder *r, const out_profile *p, struct qp_error *err)
{
    return 0;
}

int out_record_read(const char *path, out_profile **out, char **meta, struct qp_error *err)
{
    return qp_error_set(err, -ENOTSUP, "record files are not read yet");
}
