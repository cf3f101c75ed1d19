/* kallsyms decoded from the running kernel's own tables (Linux 6.0+, where vmcoreinfo names
 * them). Format: kallsyms_names is a sequence of entries, each a length then that many token
 * indexes; since 6.1 a length with bit 7 set takes a second byte (bits 7..14). A token index
 * selects a NUL-terminated string in kallsyms_token_table at kallsyms_token_index[i]. The first
 * character of an expanded name is the nm type letter. Addresses come from kallsyms_offsets
 * (int32) in one of three encodings, which the true address of _stext (vmcoreinfo's) tells
 * apart: relative to kallsyms_relative_base; the same with negative values meaning absolute
 * per-CPU offsets (CONFIG_KALLSYMS_ABSOLUTE_PERCPU, up to 6.14); or, from 7.0 on, where the
 * kernel has no kallsyms_relative_base and vmcoreinfo names none, relative to the entry's own
 * address (place-relative, like ORC's ip table). */
#include "lx_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SYMS        (1u << 21)
#define MAX_NAMES       (64u << 20)
#define TOKEN_TABLE_MAX (64u << 10)

struct tables {
    uint32_t num;
    uint16_t token_index[256];
    char *tokens; /* TOKEN_TABLE_MAX bytes, NUL-terminated at the end */
    uint8_t *names;
    size_t names_len;
    int32_t *offsets;
    uint64_t offsets_at; /* kallsyms_offsets' own address, for place-relative entries */
    uint64_t relative_base;
    bool have_relative_base;
};

enum encoding { BASE_RELATIVE, ABSOLUTE_PERCPU, PLACE_RELATIVE, N_ENCODINGS };

/* Nothing in the tables tells one-byte from two-byte name lengths (a length byte with bit 7 set
 * is either a long name's first byte or an entry of 128+ tokens): the version does. Commit
 * 73bbb94466fd ("kallsyms: support "big" kernel symbols", Linux 6.1) made lengths of 128 and
 * more take two bytes. */
static bool big_lengths(const struct lx_vmcoreinfo *vi)
{
    return vi->version_major > 6 || (vi->version_major == 6 && vi->version_minor >= 1);
}

/* Makes the first `need` bytes of kallsyms_names available in t->names. */
static int names_ensure(lx_kernel *k, struct tables *t, size_t *cap, size_t need,
                        struct qp_error *err)
{
    while (t->names_len < need) {
        if (t->names_len == *cap) {
            if (*cap >= MAX_NAMES)
                return qp_error_set(err, -EPROTO, "kallsyms_names longer than %u MiB",
                                    MAX_NAMES >> 20);
            *cap *= 2;
            t->names = g_realloc(t->names, *cap);
        }
        size_t piece = *cap - t->names_len < 65536 ? *cap - t->names_len : 65536;
        if (lx_kernel_read(k, k->vi.kallsyms_names + t->names_len, t->names + t->names_len, piece))
            return qp_error_set(err, -EFAULT, "kallsyms_names unreadable at +%zu", t->names_len);
        t->names_len += piece;
    }
    return 0;
}

/* kallsyms_names has no stored length (kallsyms_markers follows it), so it is read in pieces
 * until num entries have been walked. */
static int read_names(lx_kernel *k, struct tables *t, struct qp_error *err)
{
    size_t cap = 1u << 20, pos = 0;
    bool big = big_lengths(&k->vi);
    t->names = g_malloc(cap);
    t->names_len = 0;
    for (uint32_t i = 0; i < t->num; i++) {
        int rc = names_ensure(k, t, &cap, pos + 2, err);
        if (rc)
            return rc;
        size_t len = t->names[pos++];
        if (big && (len & 0x80))
            len = (len & 0x7f) | ((size_t)t->names[pos++] << 7);
        if ((rc = names_ensure(k, t, &cap, pos + len + 2, err)))
            return rc;
        pos += len;
    }
    return 0;
}

static int read_tables(lx_kernel *k, struct tables *t, struct qp_error *err)
{
    const struct lx_vmcoreinfo *vi = &k->vi;
    if (!vi->stext)
        return qp_error_set(err, -ENOTSUP, "vmcoreinfo has no SYMBOL(_stext)");
    /* Before 6.0 vmcoreinfo names no tables: they are looked for in the image by shape. */
    int rc;
    if ((!vi->kallsyms_names || !vi->kallsyms_num_syms || !vi->kallsyms_token_table ||
         !vi->kallsyms_token_index || !vi->kallsyms_offsets) &&
        (rc = lx__kallsyms_find(k, big_lengths(vi), err)))
        return rc;
    t->have_relative_base = vi->kallsyms_relative_base != 0;
    t->offsets_at = vi->kallsyms_offsets;
    if (lx_kernel_read(k, vi->kallsyms_num_syms, &t->num, 4) ||
        lx_kernel_read(k, vi->kallsyms_token_index, t->token_index, sizeof t->token_index) ||
        (t->have_relative_base &&
         lx_kernel_read(k, vi->kallsyms_relative_base, &t->relative_base, 8)))
        return qp_error_set(err, -EFAULT, "kallsyms tables unreadable");
    if (t->num == 0 || t->num > MAX_SYMS)
        return qp_error_set(err, -EPROTO, "kallsyms_num_syms %u is implausible", t->num);
    t->tokens = g_malloc0(TOKEN_TABLE_MAX + 1);
    uint16_t last = 0;
    for (int i = 0; i < 256; i++)
        last = t->token_index[i] > last ? t->token_index[i] : last;
    /* The last token is short; 256 bytes past its start cover it. */
    size_t tok_len = (size_t)last + 256 < TOKEN_TABLE_MAX ? (size_t)last + 256 : TOKEN_TABLE_MAX;
    if (lx_kernel_read(k, vi->kallsyms_token_table, t->tokens, tok_len))
        return qp_error_set(err, -EFAULT, "kallsyms_token_table unreadable");
    t->offsets = g_new(int32_t, t->num);
    if (lx_kernel_read(k, vi->kallsyms_offsets, t->offsets, (size_t)t->num * 4))
        return qp_error_set(err, -EFAULT, "kallsyms_offsets unreadable");
    return read_names(k, t, err);
}

/* Expands entry at *pos into out (NUL-terminated); returns false on a malformed entry. */
static bool expand(const struct tables *t, bool big, size_t *pos, char *out, size_t cap)
{
    size_t p = *pos, len = t->names[p++];
    if (big && (len & 0x80))
        len = (len & 0x7f) | ((size_t)t->names[p++] << 7);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        const char *tok = t->tokens + t->token_index[t->names[p + i]];
        for (; *tok && o + 1 < cap; tok++)
            out[o++] = *tok;
    }
    out[o] = '\0';
    *pos = p + len;
    return o >= 2;
}

static uint64_t address(const struct tables *t, uint32_t i, enum encoding e)
{
    int64_t off = t->offsets[i];
    switch (e) {
    case BASE_RELATIVE:
        return t->relative_base + (uint64_t)off;
    case ABSOLUTE_PERCPU:
        return off >= 0 ? (uint64_t)off : t->relative_base - 1 - (uint64_t)off;
    default:
        return t->offsets_at + 4 * (uint64_t)i + (uint64_t)off;
    }
}

/* The encoding that puts _stext (entry stext_index) where vmcoreinfo says it is. */
static int find_encoding(const struct tables *t, uint32_t stext_index, uint64_t stext,
                         enum encoding *out, struct qp_error *err)
{
    for (int e = 0; e < N_ENCODINGS; e++) {
        if (e != PLACE_RELATIVE && !t->have_relative_base)
            continue;
        if (address(t, stext_index, (enum encoding)e) == stext) {
            *out = (enum encoding)e;
            return 0;
        }
    }
    return qp_error_set(err, -EPROTO,
                        "kallsyms addresses match _stext (0x%llx) in no known encoding "
                        "(base-relative, absolute per-CPU, place-relative)",
                        (unsigned long long)stext);
}

struct keyed {
    uint64_t addr;
    uint32_t index; /* kallsyms order: ties keep it (qsort is not stable) */
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorts k->syms by address and indexes them by name (the first of each name). */
static void sort_and_index(lx_kernel *k)
{
    struct keyed *order = g_new(struct keyed, k->n_syms);
    for (size_t i = 0; i < k->n_syms; i++)
        order[i] = (struct keyed){k->syms[i].addr, (uint32_t)i};
    qsort(order, k->n_syms, sizeof *order, cmp_keyed);
    struct lx_symbol *sorted = g_new(struct lx_symbol, k->n_syms);
    for (size_t i = 0; i < k->n_syms; i++)
        sorted[i] = k->syms[order[i].index];
    g_free(order);
    g_free(k->syms);
    k->syms = sorted;
    k->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    for (size_t i = 0; i < k->n_syms; i++)
        if (!g_hash_table_contains(k->by_name, k->syms[i].name))
            g_hash_table_insert(k->by_name, (gpointer)k->syms[i].name, &k->syms[i]);
}

static int decode(lx_kernel *k, const struct tables *t, struct qp_error *err)
{
    bool big = big_lengths(&k->vi);
    k->names = g_string_chunk_new(1u << 20);
    k->syms = g_new(struct lx_symbol, t->num);
    int64_t stext_index = -1;
    size_t pos = 0;
    char name[1024];
    for (uint32_t i = 0; i < t->num; i++) {
        if (pos >= t->names_len || !expand(t, big, &pos, name, sizeof name)) {
            return qp_error_set(err, -EPROTO, "kallsyms entry %u does not decode", i);
        }
        if (stext_index < 0 && strcmp(name + 1, "_stext") == 0)
            stext_index = i;
        k->syms[i] = (struct lx_symbol){.type = name[0],
                                        .name = g_string_chunk_insert_const(k->names, name + 1)};
    }
    if (stext_index < 0)
        return qp_error_set(err, -EPROTO, "kallsyms has no _stext");
    enum encoding enc = BASE_RELATIVE;
    int rc = find_encoding(t, (uint32_t)stext_index, k->vi.stext, &enc, err);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < t->num; i++)
        k->syms[i].addr = address(t, i, enc);
    k->n_syms = t->num;
    return 0;
}

int lx_kernel_load_kallsyms(lx_kernel *k, struct qp_error *err)
{
    if (k->have_syms)
        return 0;
    struct tables t = {0};
    int rc = read_tables(k, &t, err);
    if (rc == 0)
        rc = decode(k, &t, err);
    g_free(t.tokens);
    g_free(t.names);
    g_free(t.offsets);
    if (rc) {
        g_free(k->syms);
        k->syms = NULL;
        k->n_syms = 0;
        return qp_error_prefix(err, "kallsyms of %s", k->vi.osrelease);
    }
    sort_and_index(k);
    k->have_syms = true;
    return 0;
}

const struct lx_symbol *lx_kernel_symbols(const lx_kernel *k, size_t *n)
{
    *n = k->have_syms ? k->n_syms : 0;
    return k->have_syms ? k->syms : NULL;
}

int lx_kernel_symbol_addr(const lx_kernel *k, const char *name, uint64_t *addr)
{
    const struct lx_symbol *s = k->by_name ? g_hash_table_lookup(k->by_name, name) : NULL;
    if (!s)
        return -ENOENT;
    *addr = s->addr;
    return 0;
}
