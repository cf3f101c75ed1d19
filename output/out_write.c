/* Choosing a format, and writing a file so that a crash never leaves half of one. */
#define _GNU_SOURCE /* mkostemp */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const format_names[OUT_FORMAT_COUNT] = {
    [OUT_FOLDED] = "folded", [OUT_SPEEDSCOPE] = "speedscope", [OUT_PPROF] = "pprof",
    [OUT_SVG] = "svg",       [OUT_RECORD] = "record",
};

/* Longest suffix first: ".speedscope.json" before a plain ".json" would ever match. */
static const struct {
    const char *suffix;
    enum out_format format;
} suffixes[] = {
    {".speedscope.json", OUT_SPEEDSCOPE},
    {".pb.gz", OUT_PPROF},
    {".pprof", OUT_PPROF},
    {".folded", OUT_FOLDED},
    {".txt", OUT_FOLDED},
    {".svg", OUT_SVG},
    {".data", OUT_RECORD},
    {".qprof", OUT_RECORD},
};

int out_format_from_path(const char *path)
{
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (g_str_has_suffix(path, suffixes[i].suffix))
            return suffixes[i].format;
    return -1;
}

const char *out_format_name(enum out_format f)
{
    return (unsigned)f < OUT_FORMAT_COUNT ? format_names[f] : "?";
}

int out_format_from_name(const char *name)
{
    for (int i = 0; i < OUT_FORMAT_COUNT; i++)
        if (strcmp(name, format_names[i]) == 0)
            return i;
    return -1;
}

int out_write(const out_profile *p, out_names *n, enum out_format format,
              const struct out_write_opts *o, FILE *f, struct qp_error *err)
{
    static const struct out_write_opts defaults = {0};
    o = o ? o : &defaults;
    int rc;
    switch (format) {
    case OUT_FOLDED:
        rc = out_write_folded(p, n, o, f, err);
        break;
    case OUT_SPEEDSCOPE:
        rc = out_write_speedscope(p, n, o, f, err);
        break;
    case OUT_PPROF:
        rc = out_write_pprof(p, n, o, f, err);
        break;
    case OUT_SVG:
        rc = out_write_svg(p, n, o, f, err);
        break;
    default:
        return qp_error_set(err, -EINVAL,
                            "format %s is not written from a profile (use the "
                            "recorder)",
                            out_format_name(format));
    }
    errno = 0;
    if (rc == 0 && (fflush(f) != 0 || ferror(f)))
        rc = qp_error_set(err, errno ? -errno : -EIO, "writing %s output: %s",
                          out_format_name(format), strerror(errno ? errno : EIO));
    return rc;
}

/* A device or a pipe (/dev/null, /dev/full, a FIFO) is written in place: a temporary file and
 * a rename would replace the device node itself. */
static bool is_special_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode);
}

/* A new file beside path (the same directory, so the rename stays on one file system), named
 * PATH.tmp.XXXXXX by mkstemp: created with O_EXCL, so nothing planted at a guessable name (a
 * symlink to someone's file) is followed or overwritten. *tmp: its name (g_free). Mode 0644, as
 * the record file's. */
static int temp_beside(const char *path, char **tmp, FILE **f, struct qp_error *err)
{
    *tmp = g_strdup_printf("%s.tmp.XXXXXX", path);
    int fd = mkostemp(*tmp, O_CLOEXEC);
    *f = fd >= 0 && fchmod(fd, 0644) == 0 ? fdopen(fd, "w") : NULL;
    if (*f)
        return 0;
    int rc = qp_error_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlink(*tmp);
    }
    return rc;
}

int out_check_writable(const char *path, struct qp_error *err)
{
    if (strcmp(path, "-") == 0 || is_special_file(path))
        return 0;
    char *tmp = NULL;
    FILE *f = NULL;
    int rc = temp_beside(path, &tmp, &f, err);
    if (f) {
        fclose(f);
        unlink(tmp);
    }
    g_free(tmp);
    return rc;
}

/* What goes into a file: a format of the profile, or the exact counts' flat profile. */
struct file_job {
    const out_profile *p;
    out_names *n;
    int format; /* enum out_format, or -1: the flat profile (out_write_exact_folded) */
    const struct out_write_opts *o;
};

static int write_job(const struct file_job *j, FILE *f, struct qp_error *err)
{
    if (j->format < 0)
        return out_write_exact_folded(j->p, j->n, f, err);
    return out_write(j->p, j->n, (enum out_format)j->format, j->o, f, err);
}

static int write_path(const struct file_job *j, const char *path, struct qp_error *err)
{
    if (strcmp(path, "-") == 0)
        return write_job(j, stdout, err);
    bool in_place = is_special_file(path);
    char *tmp = NULL;
    FILE *f = NULL;
    int rc = 0;
    if (in_place && !(f = fopen(path, "we")))
        rc = qp_error_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
    else if (!in_place)
        rc = temp_beside(path, &tmp, &f, err);
    if (rc)
        goto out;
    rc = write_job(j, f, err);
    if (fclose(f) != 0 && rc == 0)
        rc = qp_error_set(err, -errno, "writing %s: %s", path, strerror(errno));
    else if (rc)
        qp_error_prefix(err, "%s", path);
    if (!in_place && rc == 0 && rename(tmp, path) != 0)
        rc = qp_error_set(err, -errno, "renaming %s to %s: %s", tmp, path, strerror(errno));
    if (!in_place && rc != 0)
        unlink(tmp);
out:
    g_free(tmp);
    return rc;
}

int out_write_file(const out_profile *p, out_names *n, enum out_format format,
                   const struct out_write_opts *o, const char *path, struct qp_error *err)
{
    struct file_job j = {p, n, (int)format, o};
    return write_path(&j, path, err);
}

int out_write_exact_file(const out_profile *p, out_names *n, const char *path, struct qp_error *err)
{
    struct file_job j = {p, n, -1, NULL};
    return write_path(&j, path, err);
}
