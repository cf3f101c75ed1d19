/* qp_file: regular files only, with a size cap, and escaped text (qp_file.h). */
#include "qp_file.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t mode)
{
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISDIR(mode))
        return "a directory";
    return "not a regular file";
}

int qp_file_open_read(const char *path, uint64_t max_bytes, uint64_t *size, struct qp_error *err)
{
    /* O_NONBLOCK: opening a FIFO with no writer would block until one came */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return qp_error_set(err, -errno, "opening %s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = qp_error_set(err, -errno, "opening %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = qp_error_set(err, -EINVAL, "%s is %s, not a regular file: refused", path,
                          kind_of(st.st_mode));
    else if ((uint64_t)st.st_size > max_bytes)
        rc = qp_error_set(err, -EFBIG, "%s is %llu bytes, more than the %llu accepted", path,
                          (unsigned long long)st.st_size, (unsigned long long)max_bytes);
    else if (fcntl(fd, F_SETFL, O_RDONLY) != 0) /* regular: blocking reads again */
        rc = qp_error_set(err, -errno, "opening %s: %s", path, strerror(errno));
    if (rc) {
        close(fd);
        return rc;
    }
    if (size)
        *size = (uint64_t)st.st_size;
    return fd;
}

void qp_file_fput_escaped(const char *text, FILE *f)
{
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\x%02x", *c);
        else if (*c == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f) /* U+0080..U+009F: C1 controls */
            fprintf(f, "\\xc2\\x%02x", *++c);
        else if (*c == '\\')
            fputs("\\\\", f);
        else
            fputc(*c, f);
    }
}
