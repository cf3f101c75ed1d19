/* A fake kernel address space for lx_task tests: one zeroed buffer mapped at a kernel address,
 * a bump allocator to lay out structures in it, and an lx_reader that faults outside it. */
#ifndef FAKE_MEM_H
#define FAKE_MEM_H

#include "lx_task.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_BASE 0xffff888000000000ull

struct fake_mem {
    uint8_t *bytes;
    size_t size, used;
    unsigned reads; /* how many reads the code under test made */
};

static inline void fake_init(struct fake_mem *m, size_t size)
{
    m->bytes = calloc(1, size);
    m->size = size;
    m->used = 0;
    m->reads = 0;
    if (!m->bytes)
        abort();
}

static inline void fake_fini(struct fake_mem *m)
{
    free(m->bytes);
}

/* A zeroed block of size bytes aligned to align; aborts when the buffer is full. */
static inline uint64_t fake_alloc(struct fake_mem *m, size_t size, size_t align)
{
    size_t at = (m->used + align - 1) / align * align;
    if (at + size > m->size)
        abort();
    m->used = at + size;
    return FAKE_BASE + at;
}

static inline uint8_t *fake_at(struct fake_mem *m, uint64_t kva, size_t len)
{
    if (kva < FAKE_BASE || kva - FAKE_BASE > m->size || m->size - (kva - FAKE_BASE) < len)
        abort(); /* a test bug, not a code-under-test bug: tests only write where they allocated */
    return m->bytes + (kva - FAKE_BASE);
}

static inline void fake_put_u64(struct fake_mem *m, uint64_t kva, uint64_t v)
{
    memcpy(fake_at(m, kva, 8), &v, 8);
}

static inline void fake_put_u32(struct fake_mem *m, uint64_t kva, uint32_t v)
{
    memcpy(fake_at(m, kva, 4), &v, 4);
}

static inline void fake_put_bytes(struct fake_mem *m, uint64_t kva, const void *p, size_t len)
{
    memcpy(fake_at(m, kva, len), p, len);
}

static inline int fake_read(void *ctx, uint64_t kva, void *buf, size_t len)
{
    struct fake_mem *m = ctx;
    m->reads++;
    if (kva < FAKE_BASE || kva - FAKE_BASE > m->size || m->size - (kva - FAKE_BASE) < len)
        return -EFAULT;
    memcpy(buf, m->bytes + (kva - FAKE_BASE), len);
    return 0;
}

static inline struct lx_reader fake_reader(struct fake_mem *m)
{
    return (struct lx_reader){.read = fake_read, .ctx = m};
}

#endif
