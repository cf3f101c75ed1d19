/* The walk's memory: the caller's stack snapshot, then a few chunks fetched on a miss, within the
 * stack bounds and the fetch cap. Both the CFI walk (libdwfl's memory_read) and the
 * frame-pointer walk read through here. */
#include <string.h>

#include "unw_internal.h"

bool unw_mem_in_bounds(const struct unw_memory *mem, uint64_t addr, size_t len)
{
    if (mem->stack_lo == 0 && mem->stack_hi == 0)
        return true;
    return addr >= mem->stack_lo && addr <= mem->stack_hi && len <= mem->stack_hi - addr;
}

/* Copies what [addr, addr + len) has in common with [base, base + have) into dst. */
static size_t copy_overlap(uint64_t addr, void *dst, size_t len, uint64_t base, const void *src,
                           size_t have)
{
    if (src == NULL || addr < base || addr - base >= have)
        return 0;
    size_t off = addr - base, n = have - off < len ? have - off : len;
    memcpy(dst, (const uint8_t *)src + off, n);
    return n;
}

static size_t from_cache(struct unw_walk *w, uint64_t addr, void *dst, size_t len)
{
    const struct unw_memory *mem = w->mem;
    size_t n = copy_overlap(addr, dst, len, mem->snapshot_addr, mem->snapshot, mem->snapshot_len);
    for (unsigned i = 0; n == 0 && i < w->n_chunks; i++)
        n = copy_overlap(addr, dst, len, w->chunks[i].addr, w->chunks[i].bytes, w->chunks[i].len);
    return n;
}

/* Reads [start, end) into the next chunk slot through the caller's read function. */
static bool fetch_range(struct unw_walk *w, uint64_t start, uint64_t end, uint64_t addr)
{
    const struct unw_memory *mem = w->mem;
    if (w->res->memory_fetches >= UNW_MAX_FETCHES) {
        w->mem_fail = UNW_MEM_CAPPED;
        return false;
    }
    struct unw_chunk *c = &w->chunks[w->next_victim];
    size_t got = 0;
    w->res->memory_fetches++;
    if (mem->read(mem->ctx, start, c->bytes, end - start, &got) < 0 || got == 0 ||
        got > end - start || start + got <= addr) {
        w->mem_fail = UNW_MEM_FETCH_FAILED;
        return false;
    }
    c->addr = start;
    c->len = got;
    w->next_victim = (w->next_victim + 1) % UNW_NCHUNKS;
    if (w->n_chunks < UNW_NCHUNKS)
        w->n_chunks++;
    return true;
}

/* Reads the aligned chunk holding addr, clipped to the stack bounds so that we never ask for
 * memory the caller ruled out. When the chunk's start is unmapped (addr near the bottom of a
 * mapping), retries from addr itself: a read fails as a whole when its first byte does. */
static bool fetch_chunk(struct unw_walk *w, uint64_t addr)
{
    const struct unw_memory *mem = w->mem;
    if (mem->read == NULL) {
        w->mem_fail = UNW_MEM_FETCH_FAILED;
        return false;
    }
    uint64_t start = addr & ~(uint64_t)(UNW_CHUNK_SIZE - 1);
    uint64_t end = start + UNW_CHUNK_SIZE;
    if (mem->stack_lo || mem->stack_hi) {
        start = start < mem->stack_lo ? mem->stack_lo : start;
        end = end > mem->stack_hi || end < start ? mem->stack_hi : end;
    }
    if (fetch_range(w, start, end, addr))
        return true;
    uint64_t word = addr & ~(uint64_t)7;
    word = word < start ? addr : word;
    return word > start && w->mem_fail == UNW_MEM_FETCH_FAILED && fetch_range(w, word, end, addr);
}

/* The unwinder can ask for any address (a garbage frame pointer, say): refuse politely. */
bool unw_read_word(unw_space *s, uint64_t addr, uint64_t *result)
{
    struct unw_walk *w = &s->walk;
    uint8_t word[sizeof *result];
    if (w->mem == NULL || addr + sizeof word < addr ||
        !unw_mem_in_bounds(w->mem, addr, sizeof word)) {
        w->mem_fail = w->mem_fail ? w->mem_fail : UNW_MEM_OUT_OF_BOUNDS;
        return false;
    }
    size_t done = 0;
    while (done < sizeof word) {
        size_t n = from_cache(w, addr + done, word + done, sizeof word - done);
        if (n == 0 && !fetch_chunk(w, addr + done))
            return false;
        done += n;
    }
    memcpy(result, word, sizeof word);
    return true;
}
