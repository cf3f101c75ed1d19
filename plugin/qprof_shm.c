/* The plugin's side of the shared rings: qprof_shm.h says what is trusted and what is not. */
#define _GNU_SOURCE
#include "qprof_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1; older libc headers lack it */
#endif

/* One vCPU's ring as its producer sees it: on a cache line of its own, since only that vCPU's
 * thread writes it (and the listener reads `reading`). */
struct producer {
    struct qpr_ring *ring;    /* from the geometry computed at creation, never from the header */
    _Atomic uint64_t head;    /* the samples published; the ring's head is a copy for readers */
    _Atomic uint32_t reading; /* 1 while the producer looks at the session's tails */
} __attribute__((aligned(64)));

struct qps_shared {
    int fd;
    void *map;
    uint64_t map_size;
    uint32_t n_vcpus;
    struct producer *prod;
    /* The session's tails (the client's memory), NULL between sessions: swapped by the
     * listener, read by the producers between `reading` flags. */
    struct qpr_tails *_Atomic tails;
};

/* A memfd of size bytes, mapped read-write here and sealed against shrinking and growing (a
 * client that truncated it would make the plugin's next store fault) plus `seals`. */
static int sealed_memfd(const char *name, uint64_t size, unsigned seals, void **map)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (ftruncate(fd, (off_t)size) != 0) {
        rc = -errno;
        goto out;
    }
    *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*map == MAP_FAILED) {
        rc = -errno;
        goto out;
    }
    /* F_SEAL_FUTURE_WRITE leaves this mapping writable and refuses every later one */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | seals | F_SEAL_SEAL) != 0) {
        rc = -errno;
        munmap(*map, size);
    }
out:
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

qps_shared *qps_shared_new(uint32_t n_vcpus, const char *target, int *err)
{
    if (n_vcpus == 0 || n_vcpus > QPR_MAX_VCPUS) {
        *err = -EINVAL;
        return NULL;
    }
    qps_shared *s = calloc(1, sizeof *s);
    struct producer *prod = aligned_alloc(64, n_vcpus * sizeof *prod);
    if (!s || !prod) {
        free(s);
        free(prod);
        *err = -ENOMEM;
        return NULL;
    }
    memset(prod, 0, n_vcpus * sizeof *prod);
    s->prod = prod;
    s->n_vcpus = n_vcpus;
    s->map_size = qpr_map_size(n_vcpus);
    s->fd = sealed_memfd("qprof-ring", s->map_size, F_SEAL_FUTURE_WRITE, &s->map);
    if (s->fd < 0) {
        *err = s->fd;
        free(prod);
        free(s);
        return NULL;
    }
    struct qpr_header *h = s->map;
    *h = (struct qpr_header){.magic = QPR_MAGIC,
                             .version = QPR_VERSION,
                             .n_vcpus = n_vcpus,
                             .slots = QPR_SLOTS,
                             .sample_size = sizeof(struct qpr_sample),
                             .ring_offset = qpr_ring_offset(0),
                             .ring_size = sizeof(struct qpr_ring)};
    snprintf(h->target, sizeof h->target, "%s", target ? target : "");
    for (uint32_t i = 0; i < n_vcpus; i++)
        prod[i].ring = (struct qpr_ring *)((char *)s->map + qpr_ring_offset(i));
    return s;
}

void qps_shared_free(qps_shared *s)
{
    if (!s)
        return;
    qps_session_close(s);
    munmap(s->map, s->map_size);
    close(s->fd);
    free(s->prod);
    free(s);
}

int qps_ring_fd(const qps_shared *s)
{
    return s->fd;
}

uint64_t qps_map_size(const qps_shared *s)
{
    return s->map_size;
}

struct qpr_header *qps_header(qps_shared *s)
{
    return s->map;
}

int qps_session_open(qps_shared *s)
{
    void *map;
    int fd = sealed_memfd("qprof-tails", sizeof(struct qpr_tails), 0, &map);
    if (fd < 0)
        return fd;
    struct qpr_tails *t = map;
    for (uint32_t i = 0; i < s->n_vcpus; i++) /* nothing published before is this session's */
        atomic_store_explicit(&t->v[i].tail, atomic_load(&s->prod[i].head), memory_order_relaxed);
    qps_session_close(s); /* one at a time: an unclosed one ends here */
    atomic_store(&s->tails, t);
    return fd;
}

void qps_session_close(qps_shared *s)
{
    struct qpr_tails *t = atomic_exchange(&s->tails, NULL);
    if (!t)
        return;
    /* A producer that read the pointer before the exchange has its flag up (both seq_cst):
     * wait for it to finish with these tails before they go. */
    for (uint32_t i = 0; i < s->n_vcpus; i++)
        while (atomic_load(&s->prod[i].reading)) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    munmap(t, sizeof *t);
}

/* The session's tails with this producer's flag up, or NULL (flag down) between sessions. */
static struct qpr_tails *enter(qps_shared *s, struct producer *p)
{
    atomic_store(&p->reading, 1);
    struct qpr_tails *t = atomic_load(&s->tails);
    if (!t)
        atomic_store_explicit(&p->reading, 0, memory_order_release);
    return t;
}

static void leave(struct producer *p)
{
    atomic_store_explicit(&p->reading, 0, memory_order_release);
}

/* The client's tail is any number: one more than QPR_SLOTS behind the head, or ahead of it
 * (the subtraction wraps), reads as a full ring. */
static bool room(const struct producer *p, struct qpr_tails *t, uint32_t vcpu)
{
    uint64_t tail = atomic_load_explicit(&t->v[vcpu].tail, memory_order_acquire);
    return atomic_load_explicit(&p->head, memory_order_relaxed) - tail < QPR_SLOTS;
}

bool qps_reserve(qps_shared *s, uint32_t vcpu)
{
    if (vcpu >= s->n_vcpus)
        return false;
    struct producer *p = &s->prod[vcpu];
    struct qpr_tails *t = enter(s, p);
    if (!t)
        return false;
    bool ok = room(p, t, vcpu);
    leave(p);
    if (!ok)
        atomic_fetch_add_explicit(&p->ring->lost, 1, memory_order_relaxed);
    return ok;
}

static uint32_t at_most(uint32_t v, uint32_t max)
{
    return v < max ? v : max;
}

/* The fixed part and the bytes the sample uses, by its lengths clamped here: the slot is only
 * written, so what a reader of the slot does to it changes nothing the plugin computes. */
static void copy_sample(struct qpr_sample *slot, const struct qpr_sample *s)
{
    uint32_t stack_len = at_most(s->stack_len, QPR_STACK_MAX);
    uint32_t extra_len = at_most(s->extra_len, QPR_EXTRA_MAX);
    uint32_t ustack_len = at_most(s->ustack_len, QPR_STACK_MAX);
    uint32_t win_end = 0, win_len[QPR_WINDOWS];
    for (int i = 0; i < QPR_WINDOWS; i++) {
        uint32_t off = s->win_off[i];
        win_len[i] = off > QPR_WIN_BYTES ? 0 : at_most(s->win_len[i], QPR_WIN_BYTES - off);
        if (win_len[i] && off + win_len[i] > win_end)
            win_end = off + win_len[i];
    }
    memcpy(slot, s, offsetof(struct qpr_sample, stack));
    slot->stack_len = stack_len;
    slot->extra_len = extra_len;
    slot->ustack_len = ustack_len;
    memcpy(slot->win_len, win_len, sizeof win_len);
    memcpy(slot->stack, s->stack, stack_len);
    memcpy(slot->extra, s->extra, extra_len);
    memcpy(slot->ustack, s->ustack, ustack_len);
    memcpy(slot->win_bytes, s->win_bytes, win_end);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void qps_publish(qps_shared *s, uint32_t vcpu, const struct qpr_sample *sample, uint64_t t0_ns)
{
    if (vcpu >= s->n_vcpus)
        return;
    struct producer *p = &s->prod[vcpu];
    struct qpr_tails *t = enter(s, p);
    if (!t)
        return; /* no session: nobody to count a loss for */
    if (!room(p, t, vcpu)) {
        leave(p);
        atomic_fetch_add_explicit(&p->ring->lost, 1, memory_order_relaxed);
        return;
    }
    uint64_t head = atomic_load_explicit(&p->head, memory_order_relaxed);
    struct qpr_sample *slot = &p->ring->slots[head % QPR_SLOTS];
    copy_sample(slot, sample);
    leave(p);
    if (t0_ns) { /* only written: the capture's cost with the copy, for the summary */
        uint64_t cost = mono_ns() - t0_ns;
        slot->cost_ns = cost > UINT32_MAX ? UINT32_MAX : (uint32_t)cost;
    }
    atomic_store_explicit(&p->head, head + 1, memory_order_relaxed);
    atomic_store_explicit(&p->ring->head, head + 1, memory_order_release);
    atomic_fetch_add_explicit(&p->ring->samples, 1, memory_order_relaxed);
}

void qps_idle_tick(qps_shared *s, uint32_t vcpu, uint32_t n)
{
    if (vcpu < s->n_vcpus)
        atomic_fetch_add_explicit(&s->prod[vcpu].ring->idle_ticks, n, memory_order_relaxed);
}
