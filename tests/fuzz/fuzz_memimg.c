/* Fuzz target: a mapped file copied out of the guest (prof_memimg_progress, sampler/memimage.c)
 * over a fake process memory and a fake page cache whose reads stop wherever the input says:
 * its headers (sym_mem_image_read), .eh_frame to its terminator, .dynsym and .dynstr, stop after
 * stop within a budget, then what the copy gives (prof_memimg_eh_frame, prof_memimg_symbols).
 *
 * Input (little-endian): u64 at 0, the process's missing pages (page i of the file is not
 * present when bit i % 64 is set); u64 at 8, the page cache's missing pages, the same way; u16
 * at 16, each stop's budget in 256-byte units (0: none); byte 18, flags (bit 0: no page cache;
 * bit 1: the cache claims more than it read); u64 at 24, the seed of where reads stop short
 * (0: nowhere); the file from byte 32, mapped at BASE from offset 0. Reads fill the whole buffer
 * they are given (what they did not read with filler), so a buffer shorter than the read asked
 * for is a finding under ASan. */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "memimage.h"

#define BASE      UINT64_C(0x7f0000000000)
#define HEAD      32
#define MAX_STOPS 200

struct guest {
    const uint8_t *file;
    size_t len;
    uint64_t mem_holes, cache_holes, rng;
    size_t budget, budget_left;
    bool no_cache, cache_overclaims;
};

static uint64_t next_rand(struct guest *g)
{
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return g->rng;
}

static bool missing(uint64_t holes, uint64_t off)
{
    return holes >> (off / 4096 % 64) & 1;
}

/* How much of len a read serves before it stops short: all, a cut inside a page or at one. */
static size_t short_of(struct guest *g, size_t len)
{
    if (!g->rng)
        return len; /* seed 0: reads stop only at missing pages and the budget */
    uint64_t r = next_rand(g);
    switch (r & 7) {
    case 0:
        return (size_t)(r >> 8) % (len + 1);
    case 1:
        return (size_t)(r >> 8) % (len / 4096 + 1) * 4096;
    default:
        return len;
    }
}

static int proc_read(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf, size_t len,
                     size_t *got)
{
    struct guest *g = ctx;
    (void)cpu;
    *got = 0;
    memset(buf, 0xa5, len);
    if (g->budget && g->budget_left == 0)
        return -ENOSPC;
    size_t allowed = g->budget && len > g->budget_left ? g->budget_left : len;
    if (g->budget)
        g->budget_left -= allowed;
    allowed = short_of(g, allowed);
    size_t n = 0;
    while (n < allowed && addr >= BASE && addr - BASE + n < g->len &&
           !missing(g->mem_holes, addr - BASE + n)) {
        size_t in_page = 4096 - ((addr - BASE + n) & 0xfff), left = g->len - (addr - BASE + n);
        size_t step = in_page < left ? in_page : left;
        step = step < allowed - n ? step : allowed - n;
        memcpy((uint8_t *)buf + n, g->file + (addr - BASE + n), step);
        n += step;
    }
    *got = n;
    if (n == len)
        return 0;
    return n < allowed || allowed == 0 ? -EFAULT : -ENOSPC;
}

static int cache_read(void *impl, uint64_t file_id, uint64_t offset, void *buf, size_t len,
                      size_t *got, const struct prof_os_mem *mem)
{
    struct guest *g = mem->ctx;
    (void)impl;
    (void)file_id;
    memset(buf, 0x5a, len);
    if (g->no_cache)
        return -ENOTSUP;
    if (offset >= g->len || missing(g->cache_holes, offset))
        return -ENOENT;
    size_t n = 4096 - (offset & 0xfff);
    n = n < len ? n : len;
    n = n < g->len - offset ? n : g->len - offset;
    n = short_of(g, n);
    if (n == 0 && (next_rand(g) & 1))
        return -ENOSPC;
    memcpy(buf, g->file + offset, n);
    *got = n && g->cache_overclaims ? n + 7 : n; /* an adapter that miscounts */
    return 0;
}

static int fake_open(const struct prof_os_config *cfg, void **impl, struct qp_error *err)
{
    (void)err; /* nothing here can fail */
    (void)cfg;
    *impl = NULL;
    return 0;
}

static void fake_free(void *impl)
{
    (void)impl;
}

static const struct prof_os_ops fake_os_ops = {
    .name = "fake",
    .open = fake_open,
    .free = fake_free,
    .file_read = cache_read,
};

static void check_copy(struct prof_memimg *img)
{
    size_t len = 0;
    const uint8_t *eh = prof_memimg_eh_frame(img, &len);
    FUZZ_ASSERT(len <= SYM_MEM_MAX_EH_FRAME);
    if (eh) {
        bool terminated;
        FUZZ_ASSERT(sym_eh_frame_whole_len(eh, len, &terminated) == len);
        volatile uint8_t last = eh[len - 1]; /* the copy holds all it says */
        (void)last;
    }
    const sym_table *syms = prof_memimg_symbols(img);
    struct sym_info si;
    if (syms)
        sym_lookup(syms, 0x1000, &si);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEAD + 64)
        return 0;
    struct guest g = {.file = data + HEAD,
                      .len = size - HEAD,
                      .mem_holes = fuzz_le(data, size, 0, 8),
                      .cache_holes = fuzz_le(data, size, 8, 8),
                      .budget = (size_t)fuzz_le(data, size, 16, 2) * 256,
                      .no_cache = data[18] & 1,
                      .cache_overclaims = data[18] & 2,
                      .rng = fuzz_le(data, size, 24, 8)};
    prof_os *os = NULL;
    struct prof_os_config cfg = {0};
    if (prof_os_open(&fake_os_ops, &cfg, &os, NULL) != 0)
        return 0;
    prof_memimgs *t = prof_memimgs_new(EM_X86_64, false);
    struct prof_exec_mapping m = {.path = "/usr/lib/libfuzz.so",
                                  .start = BASE,
                                  .end = BASE + g.len,
                                  .head_start = BASE,
                                  .head_end = BASE + 4096,
                                  .file_id = 0xffff888000001000};
    struct prof_vcpu cpu = {0};
    struct prof_os_mem mem = {.read = proc_read, .ctx = &g};
    struct prof_memimg *img = NULL;
    for (int stop = 0; stop < MAX_STOPS; stop++) {
        g.budget_left = g.budget;
        img = prof_memimg_progress(t, 1, &m, os, &cpu, &mem);
        if (!img || prof_memimg_done(img))
            break;
    }
    /* The copy gives up after a bounded number of stops the budget cut short. */
    FUZZ_ASSERT(!img || prof_memimg_done(img));
    if (img)
        check_copy(img);
    prof_memimgs_free(t);
    prof_os_free(os);
    return 0;
}
