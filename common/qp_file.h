/* qp_file: opening files that someone else may have named or planted.
 *
 * A record file, a kernel or a user binary a record names, a symbol map: each is a path that may
 * be a FIFO (open blocks until a writer comes, read until it writes), a device such as /dev/zero
 * (read never ends) or a file far larger than anything qprof writes. qp_file_open_read opens a
 * regular file only, without blocking, and caps its size. qp_file_fput_escaped prints text that
 * came from a guest or a record so that it cannot drive the user's terminal.
 */
#ifndef QP_FILE_H
#define QP_FILE_H

#include "qp_error.h"

#include <stdint.h>
#include <stdio.h>

/* Caps for the kinds of file qprof reads (qp_file_open_read's max_bytes). */
#define QP_FILE_MAX_RECORD                                                                         \
    (2ull << 30)                        /* a record file: far above what hours of sampling write   \
                                         */
#define QP_FILE_MAX_TEXT (256ull << 20) /* a symbol map (System.map, /proc/kallsyms copy) */
#define QP_FILE_MAX_ELF  (16ull << 30)  /* a kernel or binary with its debug information */

/* Opens path for reading when it is a regular file (symlinks to one are followed) of at most
 * max_bytes: the descriptor (O_CLOEXEC, blocking again once checked; the caller closes it) and
 * *size, or a negative errno-style code with a message naming the path: -EINVAL for a FIFO,
 * device, socket or directory (opened with O_NONBLOCK, so a FIFO never blocks), -EFBIG past the
 * cap. size may be NULL. */
int qp_file_open_read(const char *path, uint64_t max_bytes, uint64_t *size, struct qp_error *err);

/* Writes text to f with every C0 control character, DEL and C1 control (U+0080..U+009F in
 * UTF-8) as \xNN: terminal escape sequences from a guest or a record file are shown, never
 * obeyed. */
void qp_file_fput_escaped(const char *text, FILE *f);

#endif
