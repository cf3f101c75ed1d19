/* One symbol table: construction, sorted lookup, accessors. */
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "sym_internal.h"

/* One lookup range: aliases at one address are merged into the entry of the winning name. */
struct sym_func {
    uint64_t start; /* before slide */
    uint64_t end;   /* exclusive, before slide */
    uint64_t size;  /* as reported; 0 for zero-size symbols */
    const char *name;
};

/* One entry of the by-name index; a mangled symbol has two, raw and demangled. */
struct sym_named {
    const char *name;
    uint64_t addr; /* before slide */
    int rank;
};

/* A symbol as collected while loading, before sorting. */
struct sym_candidate {
    const char *raw;
    const char *display;
    uint64_t start, size, limit;
    int rank;
    bool is_func;
};

struct sym_table {
    char *path;
    const char *name; /* basename, points into path */
    int64_t slide;
    uint64_t text_addr, text_size, text_hash;
    struct sym_func *funcs;
    size_t nfuncs;
    struct sym_named *named;
    size_t nnamed;
    size_t count;          /* function symbols loaded, aliases included */
    GStringChunk *strings; /* every name the table hands out */
    GArray *pending;       /* struct sym_candidate, only while building */
    bool is_elf;           /* line lookups make sense */
    sym_lines *lines;      /* opened on the first sym_lookup_line */
    GMutex lines_lock;     /* lookups on a const table may open it */
};

sym_table *sym_table_builder_new(const char *path)
{
    sym_table *t = g_new0(sym_table, 1);
    t->path = g_strdup(path);
    const char *slash = strrchr(t->path, '/');
    t->name = slash ? slash + 1 : t->path;
    t->strings = g_string_chunk_new(4096);
    t->pending = g_array_new(FALSE, FALSE, sizeof(struct sym_candidate));
    return t;
}

void sym_table_builder_add(sym_table *t, const char *raw_name, uint64_t start, uint64_t size,
                           uint64_t limit, enum sym_rank rank, bool is_func)
{
    struct sym_candidate c = {
        .start = start, .size = size, .limit = limit, .rank = rank, .is_func = is_func};
    c.raw = g_string_chunk_insert_const(t->strings, raw_name);
    char *demangled = sym_demangle(raw_name);
    c.display = demangled ? g_string_chunk_insert_const(t->strings, demangled) : c.raw;
    g_free(demangled);
    g_array_append_val(t->pending, c);
    if (is_func)
        t->count++;
}

void sym_table_builder_set_text(sym_table *t, uint64_t addr, uint64_t size, uint64_t hash)
{
    t->text_addr = addr;
    t->text_size = size;
    t->text_hash = hash;
}

/* Functions by address, then the alias that should win first. */
static int cmp_candidate_by_addr(const void *a, const void *b)
{
    const struct sym_candidate *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    size_t lx = strlen(x->raw), ly = strlen(y->raw);
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return strcmp(x->raw, y->raw);
}

static int cmp_named(const void *a, const void *b)
{
    const struct sym_named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0)
        return c;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void build_named(sym_table *t)
{
    const struct sym_candidate *c = (const struct sym_candidate *)t->pending->data;
    size_t n = t->pending->len;

    t->named = g_new(struct sym_named, 2 * n + 1);
    for (size_t i = 0; i < n; i++) {
        t->named[t->nnamed++] = (struct sym_named){c[i].raw, c[i].start, c[i].rank};
        if (c[i].display != c[i].raw)
            t->named[t->nnamed++] = (struct sym_named){c[i].display, c[i].start, c[i].rank};
    }
    qsort(t->named, t->nnamed, sizeof(*t->named), cmp_named);
}

/* A zero-size symbol covers up to the next symbol but not past its section's end; with neither
 * known it covers only its own address. */
static uint64_t zero_size_end(uint64_t start, uint64_t next_start, uint64_t limit)
{
    uint64_t end = next_start < limit ? next_start : limit;
    if (end == SYM_NO_LIMIT || end <= start)
        return start + 1;
    return end;
}

/* Merges the run of aliases at c[0].start (sorted winner first) into one entry; returns its
 * length. */
static size_t merge_aliases(const struct sym_candidate *c, size_t left, struct sym_func *out,
                            uint64_t *limit)
{
    size_t run = 0;
    *out = (struct sym_func){.start = c[0].start, .name = c[0].display};
    *limit = 0;
    while (run < left && c[run].start == c[0].start) {
        if (c[run].size > out->size)
            out->size = c[run].size;
        if (c[run].limit > *limit)
            *limit = c[run].limit;
        run++;
    }
    return run;
}

static void build_funcs(sym_table *t)
{
    GArray *funcs = g_array_new(FALSE, FALSE, sizeof(struct sym_candidate));
    const struct sym_candidate *all = (const struct sym_candidate *)t->pending->data;
    for (size_t i = 0; i < t->pending->len; i++)
        if (all[i].is_func)
            g_array_append_val(funcs, all[i]);
    g_array_sort(funcs, cmp_candidate_by_addr);

    const struct sym_candidate *c = (const struct sym_candidate *)funcs->data;
    size_t n = funcs->len;
    uint64_t *limits = g_new(uint64_t, n + 1);
    t->funcs = g_new(struct sym_func, n + 1);
    for (size_t i = 0; i < n; t->nfuncs++)
        i += merge_aliases(c + i, n - i, &t->funcs[t->nfuncs], &limits[t->nfuncs]);

    for (size_t i = 0; i < t->nfuncs; i++) {
        struct sym_func *f = &t->funcs[i];
        uint64_t next = i + 1 < t->nfuncs ? t->funcs[i + 1].start : SYM_NO_LIMIT;
        if (f->size == 0)
            f->end = zero_size_end(f->start, next, limits[i]);
        else
            f->end = f->start + f->size < f->start ? UINT64_MAX : f->start + f->size;
    }
    g_free(limits);
    g_array_free(funcs, TRUE);
}

void sym_table_builder_finish(sym_table *t)
{
    build_named(t);
    build_funcs(t);
    g_array_free(t->pending, TRUE);
    t->pending = NULL;
}

void sym_table_free(sym_table *t)
{
    if (!t)
        return;
    if (t->pending)
        g_array_free(t->pending, TRUE);
    g_free(t->funcs);
    g_free(t->named);
    g_string_chunk_free(t->strings);
    sym_lines_free(t->lines);
    g_free(t->path);
    g_free(t);
}

void sym_table_mark_elf(sym_table *t)
{
    t->is_elf = true;
}

/* The table's DWARF, opened on first use; the caller holds lines_lock. Opening it is an
 * implementation detail of a table that is otherwise read-only, so lookups on a const table
 * may do it. */
static sym_lines *lines_locked(const sym_table *t)
{
    sym_table *mut = (sym_table *)t;
    if (!mut->lines)
        mut->lines = sym_lines_open(t->path);
    return mut->lines;
}

int sym_lookup_line(const sym_table *t, uint64_t addr, const char **file, int *line)
{
    if (!t->is_elf)
        return -ENOENT;
    sym_table *mut = (sym_table *)t;
    g_mutex_lock(&mut->lines_lock);
    int rc = sym_lines_find(lines_locked(t), addr - (uint64_t)t->slide, file, line);
    g_mutex_unlock(&mut->lines_lock);
    return rc;
}

int sym_lookup_inlined(const sym_table *t, uint64_t addr, const char **name)
{
    if (!t->is_elf)
        return -ENOENT;
    sym_table *mut = (sym_table *)t;
    g_mutex_lock(&mut->lines_lock);
    int rc = sym_lines_inlined(lines_locked(t), addr - (uint64_t)t->slide, name);
    g_mutex_unlock(&mut->lines_lock);
    return rc;
}

void sym_table_set_slide(sym_table *t, int64_t slide)
{
    t->slide = slide;
}

/* Addresses wrap modulo 2^64, so a negative slide works through unsigned arithmetic. */
static uint64_t slid(const sym_table *t, uint64_t addr)
{
    return addr + (uint64_t)t->slide;
}

int sym_lookup(const sym_table *t, uint64_t addr, struct sym_info *out)
{
    uint64_t a = addr - (uint64_t)t->slide;
    size_t lo = 0, hi = t->nfuncs;

    /* Find the last entry starting at or before a. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->funcs[mid].start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -ENOENT;
    const struct sym_func *f = &t->funcs[lo - 1];
    if (a >= f->end)
        return -ENOENT;
    *out = (struct sym_info){.name = f->name,
                             .start = slid(t, f->start),
                             .size = f->size,
                             .offset = a - f->start,
                             .end = slid(t, f->end)};
    return 0;
}

int sym_find_by_name(const sym_table *t, const char *name, uint64_t *addr)
{
    size_t lo = 0, hi = t->nnamed;

    /* Leftmost match, so that the global among same-named symbols wins. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(t->named[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == t->nnamed || strcmp(t->named[lo].name, name) != 0)
        return -ENOENT;
    *addr = slid(t, t->named[lo].addr);
    return 0;
}

const char *sym_table_name(const sym_table *t)
{
    return t->name;
}

const char *sym_table_path(const sym_table *t)
{
    return t->path;
}

uint64_t sym_table_text_addr(const sym_table *t)
{
    return t->text_size ? slid(t, t->text_addr) : 0;
}

uint64_t sym_table_text_size(const sym_table *t)
{
    return t->text_size;
}

uint64_t sym_table_text_hash(const sym_table *t)
{
    return t->text_hash;
}

size_t sym_table_count(const sym_table *t)
{
    return t->count;
}
