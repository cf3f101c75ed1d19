/* Shared by the fuzz targets (tests/fuzz/fuzz_*.c): each defines LLVMFuzzerTestOneInput, which
 * libFuzzer drives in the clang build (-DQPROF_FUZZ=ON) and replay_main.c drives in every other
 * build, so that the seeds and every saved crash input run in the normal test suite. */
#ifndef QPROF_FUZZ_H
#define QPROF_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Puts data in a memory-backed file and returns a path that opens it ("/proc/self/fd/N"); the
 * same file is rewritten by the next call, so the path is valid until then. For APIs that take
 * a path. Aborts if no memory file can be made (the harness is broken, not the input). */
const char *fuzz_file_with(const uint8_t *data, size_t size);

/* Little-endian reads from an input; bytes past size read as zero. */
uint64_t fuzz_le(const uint8_t *data, size_t size, size_t off, unsigned n_bytes);

/* Guest-physical memory from address 0 served from an input, for page-walk targets: 8-byte
 * reads, failing (-EFAULT) outside it; reads counts them. */
struct fuzz_phys {
    const uint8_t *mem;
    size_t len;
    unsigned reads;
};
int fuzz_phys_read(void *ctx, uint64_t paddr, uint64_t *val); /* ctx: struct fuzz_phys */

/* Stops the run with a message when a target's own invariant does not hold: a finding. */
#define FUZZ_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fuzz_fail(__FILE__, __LINE__, #cond);                                                  \
    } while (0)
_Noreturn void fuzz_fail(const char *file, int line, const char *what);

#endif
