/* Helpers for the fuzz targets (see fuzz.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

const char *fuzz_file_with(const uint8_t *data, size_t size)
{
    /* One memory file for the whole run: a fuzzer calls this millions of times. */
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("qprof-fuzz", MFD_CLOEXEC);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0)
        abort();
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
        if (n <= 0)
            abort();
        done += (size_t)n;
    }
    return path;
}

uint64_t fuzz_le(const uint8_t *data, size_t size, size_t off, unsigned n_bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n_bytes && i < 8; i++)
        if (off + i < size)
            v |= (uint64_t)data[off + i] << (8 * i);
    return v;
}

void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", file, line, what);
    abort();
}

int fuzz_phys_read(void *ctx, uint64_t paddr, uint64_t *val)
{
    struct fuzz_phys *ph = ctx;
    ph->reads++;
    if (paddr > ph->len || ph->len - paddr < 8)
        return -EFAULT;
    memcpy(val, ph->mem + paddr, 8);
    return 0;
}
