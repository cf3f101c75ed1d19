/* Finding the kallsyms tables in a kernel image by their shape, for kernels whose vmcoreinfo
 * does not name them (before 6.0). scripts/kallsyms.c emits, each label 8-byte aligned:
 *   kallsyms_offsets (int32 x num), kallsyms_relative_base (u64), kallsyms_num_syms (u32),
 *   kallsyms_names (num entries: a length byte then that many token indexes),
 *   kallsyms_markers (u32 x ceil(num / 256): the offset in names of every 256th entry),
 *   kallsyms_token_table (256 NUL-terminated strings), kallsyms_token_index (u16 x 256).
 * The token index is the most recognisable: 0 first, strictly increasing, each step the length
 * of the string it points at plus one, ending where the token table it indexes ends (rounded up
 * to 8). From there each table before it is found and checked against the next: the markers
 * are the u32s just before the token table, rising from 0; names must hold exactly num entries
 * that end where the markers begin, with every 256th at the offset its marker says; num sits
 * just before names. relative_base and offsets come before num, checked later by the address
 * of _stext (lx_kallsyms.c). This is the 5.x order; 6.0+ kernels name their tables in
 * vmcoreinfo, so this is not needed there. */
#include "lx_internal.h"

#include <errno.h>
#include <string.h>

#define SCAN_MAX     (96u << 20) /* the kernel image from _stext: text, rodata (where these are) */
#define SCAN_CHUNK   (1u << 20)
#define MAX_MARKERS  (1u << 14) /* 4M symbols */
#define MAX_NAME_LEN 512

static uint16_t u16_at(const uint8_t *b, size_t off)
{
    return (uint16_t)(b[off] | b[off + 1] << 8);
}

static uint32_t u32_at(const uint8_t *b, size_t off)
{
    uint32_t v;
    memcpy(&v, b + off, 4);
    return v;
}

static size_t align8(size_t v)
{
    return (v + 7) & ~(size_t)7;
}

/* The token table that token index idx (at img + at) indexes: its start, or SIZE_MAX. */
static size_t token_table_of(const uint8_t *img, size_t at)
{
    uint16_t idx[256];
    for (int i = 0; i < 256; i++)
        idx[i] = u16_at(img, at + 2 * (size_t)i);
    if (idx[0] != 0)
        return SIZE_MAX;
    for (int i = 1; i < 256; i++)
        if (idx[i] <= idx[i - 1] || idx[i] - idx[i - 1] > 64)
            return SIZE_MAX;
    /* The table ends with the last token's NUL, then up to 7 bytes of padding to 8. */
    for (size_t pad = 0; pad < 8 && pad + 2 <= at; pad++) {
        size_t end = at - pad; /* one past the last NUL */
        if (img[end - 1] != '\0' || (pad && img[end] != '\0'))
            continue;
        size_t last_start = end - 1;
        while (last_start > 0 && img[last_start - 1] != '\0' && end - 1 - last_start < 64)
            last_start--;
        if (last_start == end - 1 || last_start < idx[255])
            continue;
        size_t start = last_start - idx[255];
        bool ok = true;
        for (int i = 0; ok && i < 255; i++) {
            size_t s = start + idx[i], e = start + idx[i + 1] - 1;
            ok = img[e] == '\0' && memchr(img + s, '\0', e - s) == NULL;
        }
        if (ok)
            return start;
    }
    return SIZE_MAX;
}

/* Walks n names entries from img + at: the offset just past the last, or SIZE_MAX when an entry
 * runs past limit or a 256th entry is not where its marker says. */
static size_t walk_names(const uint8_t *img, size_t at, size_t limit, uint32_t n, bool big,
                         const uint8_t *markers)
{
    size_t pos = at;
    for (uint32_t i = 0; i < n; i++) {
        if (i % 256 == 0 && u32_at(markers, 4 * (size_t)(i / 256)) != pos - at)
            return SIZE_MAX;
        if (pos >= limit)
            return SIZE_MAX;
        size_t len = img[pos++];
        if (big && (len & 0x80)) {
            if (pos >= limit)
                return SIZE_MAX;
            len = (len & 0x7f) | ((size_t)img[pos++] << 7);
        }
        if (len == 0 || len > MAX_NAME_LEN || pos + len > limit)
            return SIZE_MAX;
        pos += len;
    }
    return pos;
}

/* Given the token table at tt, finds markers and names before it; fills *out (image offsets,
 * made addresses by the caller). */
static bool tables_before(const uint8_t *img, size_t tt, bool big, size_t *names, size_t *num_at,
                          uint32_t *num)
{
    /* The markers end at tt, or 4 bytes before it (padding). */
    size_t end = tt & ~(size_t)3;
    if (end >= 8 && u32_at(img, end - 4) == 0 && u32_at(img, end - 8) != 0)
        end -= 4;
    size_t m = end;
    uint32_t count = 0;
    while (m >= 4 && count < MAX_MARKERS) {
        uint32_t v = u32_at(img, m - 4);
        m -= 4;
        count++;
        if (v == 0)
            break;
        if (m >= 4 && u32_at(img, m - 4) >= v)
            return false;
    }
    /* A single marker (0) then 4 bytes of padding read as 0 first. */
    if (count == 1 && m % 8 == 4 && m >= 4 && u32_at(img, m - 4) == 0) {
        m -= 4;
        end -= 4;
    }
    if (count == 0 || u32_at(img, m) != 0 || m % 8)
        return false;
    uint32_t last = u32_at(img, end - 4);
    /* names: last marker's offset plus at most 256 entries before the markers. */
    size_t span = (size_t)256 * (2 + MAX_NAME_LEN);
    if (m < (size_t)last + 16)
        return false;
    size_t hi = (m - last) & ~(size_t)7;
    size_t lo = hi > span ? hi - span : 16;
    for (size_t s = hi; s >= lo && s >= 16; s -= 8) {
        uint32_t n = u32_at(img, s - 8);
        if (u32_at(img, s - 4) != 0 || n == 0 || (n + 255) / 256 != count)
            continue;
        size_t e = walk_names(img, s, m, n, big, img + m);
        if (e != SIZE_MAX && align8(e) == m) {
            *names = s;
            *num_at = s - 8;
            *num = n;
            return true;
        }
    }
    return false;
}

int lx__kallsyms_scan(const uint8_t *img, size_t len, bool big_lengths, struct lx_kallsyms_at *out)
{
    for (size_t at = 0; at + 512 <= len; at += 8) {
        if (img[at] || img[at + 1] || !img[at + 2])
            continue;
        size_t tt = token_table_of(img, at);
        size_t names, num_at;
        uint32_t num;
        if (tt == SIZE_MAX || !tables_before(img, tt, big_lengths, &names, &num_at, &num))
            continue;
        if (num_at < 8 + align8((size_t)num * 4))
            continue;
        size_t rel = num_at - 8;
        *out = (struct lx_kallsyms_at){.token_index = at,
                                       .token_table = tt,
                                       .names = names,
                                       .num_syms = num_at,
                                       .relative_base = rel,
                                       .offsets = rel - align8((size_t)num * 4)};
        return 0;
    }
    return -ENOENT;
}

int lx__kallsyms_find(lx_kernel *k, bool big_lengths, struct qp_error *err)
{
    struct lx_vmcoreinfo *vi = &k->vi;
    uint8_t *img = g_malloc(SCAN_MAX);
    size_t len = 0;
    while (len < SCAN_MAX && lx_kernel_read(k, vi->stext + len, img + len, SCAN_CHUNK) == 0)
        len += SCAN_CHUNK;
    struct lx_kallsyms_at at;
    int rc = lx__kallsyms_scan(img, len, big_lengths, &at);
    g_free(img);
    if (rc)
        return qp_error_set(err, -ENOTSUP,
                            "vmcoreinfo names no kallsyms tables and none were found by their "
                            "shape in the %zu MiB of kernel image after _stext: give --kernel "
                            "kallsyms or System.map",
                            len >> 20);
    vi->kallsyms_token_index = vi->stext + at.token_index;
    vi->kallsyms_token_table = vi->stext + at.token_table;
    vi->kallsyms_names = vi->stext + at.names;
    vi->kallsyms_num_syms = vi->stext + at.num_syms;
    vi->kallsyms_relative_base = vi->stext + at.relative_base;
    vi->kallsyms_offsets = vi->stext + at.offsets;
    return 0;
}
