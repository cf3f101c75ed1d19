/* Address spaces as processes and binaries by content (see aspace.h). */
#include "aspace.h"
#include "qp_log.h"

#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Candidates kept per page: more binaries sharing one page of code than this is no help. */
#define MAX_CANDIDATES 8

/* A copied page's bytes are checked again every PROBE_EVERY-th time a pc in the address space
 * falls in it, PROBE_LEN bytes around the pc: a different content means the root now belongs to
 * another process (see prof_aspace_verify). */
#define PROBE_EVERY 8
#define PROBE_LEN   64u

/* What one page of an address space matched. */
struct page_result {
    size_t n;                /* binaries whose page it is (0: none) */
    struct user_binary *bin; /* the binary when exactly one */
    uint8_t *bytes;          /* the copy (owned); NULL when the page was unreadable */
};

struct prof_aspace {
    uint64_t root;
    int number; /* 1, 2, ... in the order first seen */
    bool user_seen;
    GHashTable *pages;       /* page vaddr -> struct page_result (owned) */
    struct user_binary *bin; /* the first binary a page matched alone */
    prof_space *space;       /* in the model: its pages and its binary's .text */
    uint64_t probe;          /* a page to copy next because the pc's page was shared; 0: none */
    int until_check;         /* user pcs in copied pages before the next content check */
    char label[OUT_COMM_LEN];
};

/* One binary at one load bias: its symbols, its unwind tables, its module. */
struct bin_key {
    const sym_table *table;
    uint64_t bias;
};

struct prof_aspaces {
    struct prof_aspaces_config cfg;
    prof_modules *modules; /* borrowed */
    struct prof_aspace_counters counters;
    GHashTable *spaces;   /* root -> struct prof_aspace (owned) */
    GPtrArray *retired;   /* address spaces whose root was reused (owned, until reset) */
    GHashTable *binaries; /* struct bin_key -> struct user_binary (owned) */
    int next_number;
    GString *earlier; /* prof_aspaces_describe's lines for the boots before the last reset */
};

static void aspace_free(gpointer p)
{
    struct prof_aspace *as = p;
    g_hash_table_destroy(as->pages);
    g_free(as);
}

static void page_result_free(gpointer p)
{
    struct page_result *r = p;
    g_free(r->bytes);
    g_free(r);
}

static void binary_free(gpointer p)
{
    struct user_binary *b = p;
    unw_space_free(b->space);
    g_free(b);
}

static guint bin_key_hash(gconstpointer p)
{
    const struct bin_key *k = p;
    return g_direct_hash(k->table) ^ (guint)(k->bias >> 12);
}

static gboolean bin_key_equal(gconstpointer a, gconstpointer b)
{
    const struct bin_key *x = a, *y = b;
    return x->table == y->table && x->bias == y->bias;
}

prof_aspaces *prof_aspaces_new(const struct prof_aspaces_config *cfg, prof_modules *modules)
{
    prof_aspaces *a = g_new0(prof_aspaces, 1);
    a->cfg = *cfg;
    a->modules = modules;
    a->spaces = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, aspace_free);
    a->retired = g_ptr_array_new_with_free_func(aspace_free);
    a->binaries = g_hash_table_new_full(bin_key_hash, bin_key_equal, g_free, binary_free);
    a->next_number = 1;
    a->earlier = g_string_new(NULL);
    return a;
}

const struct prof_aspace_counters *prof_aspaces_counters(const prof_aspaces *a)
{
    return &a->counters;
}

void prof_aspaces_free(prof_aspaces *a)
{
    if (!a)
        return;
    g_hash_table_destroy(a->spaces);
    g_ptr_array_free(a->retired, TRUE);
    g_hash_table_destroy(a->binaries);
    g_string_free(a->earlier, TRUE);
    g_free(a);
}

static void describe_space(const struct prof_aspace *as, GString *out)
{
    if (as->user_seen)
        g_string_append_printf(out, "address_space=%s root=0x%" PRIx64 "\n", as->label, as->root);
}

static void describe_spaces(GHashTable *spaces, GString *out)
{
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, spaces);
    while (g_hash_table_iter_next(&it, &key, &value))
        describe_space(value, out);
}

void prof_aspaces_describe(const prof_aspaces *a, GString *out)
{
    g_string_append(out, a->earlier->str);
    describe_spaces(a->spaces, out);
}

void prof_aspaces_reset(prof_aspaces *a)
{
    describe_spaces(a->spaces, a->earlier); /* their labels stay in the record */
    g_hash_table_remove_all(a->spaces);
    g_ptr_array_set_size(a->retired, 0);
}

static void set_label(struct prof_aspace *as, const char *name)
{
    /* Records keep 15 characters of a name: the number must survive, the name may shrink. */
    char suffix[16];
    int n = snprintf(suffix, sizeof suffix, " [as %d]", as->number);
    int room = 15 - n > 1 ? 15 - n : 1;
    snprintf(as->label, sizeof as->label, "%.*s%s", room, name, suffix);
}

struct prof_aspace *prof_aspace_for(prof_aspaces *a, uint64_t root)
{
    struct prof_aspace *as = g_hash_table_lookup(a->spaces, &root);
    if (as)
        return as;
    as = g_new0(struct prof_aspace, 1);
    as->root = root;
    as->number = a->next_number++;
    as->pages = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, page_result_free);
    as->until_check = PROBE_EVERY;
    set_label(as, "user");
    as->space = prof_model_space(a->cfg.model, PROF_SPACE_ROOT, (uint64_t)as->number, 0);
    g_hash_table_insert(a->spaces, &as->root, as);
    if (a->cfg.verbose)
        qp_log(QP_LOG_INFO, "address space %d: root 0x%" PRIx64, as->number, root);
    return as;
}

static uint64_t page_of(uint64_t addr)
{
    return addr & ~(uint64_t)(SYM_PAGE_SIZE - 1);
}

bool prof_aspace_page_to_copy(const struct prof_aspace *as, uint64_t pc, uint64_t *page)
{
    uint64_t own = page_of(pc);
    if (!g_hash_table_contains(as->pages, &own)) {
        *page = own;
        return true;
    }
    if (as->probe && !as->bin && !g_hash_table_contains(as->pages, &as->probe)) {
        *page = as->probe;
        return true;
    }
    return false;
}

/* The user_binary for table loaded at bias, made on first use: its module, its unwind tables
 * (the file's .eh_frame or .debug_frame, frame pointers where they have no row). */
static struct user_binary *binary_for(prof_aspaces *a, const sym_table *t, uint64_t bias)
{
    struct bin_key key = {t, bias};
    struct user_binary *b = g_hash_table_lookup(a->binaries, &key);
    if (b)
        return b;
    b = g_new0(struct user_binary, 1);
    b->hash = sym_table_text_hash(t);
    b->syms = t;
    b->text_addr = sym_table_text_addr(t) + bias;
    b->load_base = b->text_addr;
    b->bias = (int64_t)bias;
    g_strlcpy(b->name, sym_table_name(t), sizeof b->name);
    struct out_module m = {.text_hash = b->hash, .base = b->load_base};
    g_strlcpy(m.name, b->name, sizeof m.name);
    g_strlcpy(m.path, sym_table_path(t), sizeof m.path);
    b->module = prof_modules_add(a->modules, &m, t, (int64_t)bias);
    struct qp_error err = {0};
    if (unw_space_new(a->cfg.machine, b->name, 0, a->cfg.user_end, &b->space, &err) == 0 &&
        unw_space_add_elf(b->space, sym_table_path(t), (int64_t)bias, &err) != 0 && a->cfg.verbose)
        qp_log(QP_LOG_INFO, "no unwind tables for %s: %s", b->name, err.msg);
    g_hash_table_insert(a->binaries, g_memdup2(&key, sizeof key), b);
    return b;
}

/* What runs at the model's mappings for a binary (NULL: a page no file, or several, has). */
static struct prof_map binary_map(uint64_t start, uint64_t end, enum prof_map_rank rank,
                                  const struct user_binary *b)
{
    struct prof_map m = {.start = start, .end = end, .rank = rank, .known = b != NULL};
    m.bin = (struct prof_binary){.how = PROF_IDENT_CODE_PAGE,
                                 .module = b ? b->module : OUT_NO_MODULE,
                                 .unwind = b ? b->space : NULL};
    return m;
}

/* The model learns the page, and the address space's binary when the page named it: a page
 * not copied yet (out of budget) is that binary's when its .text holds it. */
static void fill_model(struct prof_aspace *as, uint64_t page, const struct page_result *r,
                       bool named_space)
{
    struct prof_map m = binary_map(page, page + SYM_PAGE_SIZE, PROF_RANK_PAGE, r->bin);
    prof_space_add(as->space, &m);
    if (named_space) {
        const struct user_binary *b = as->bin;
        m = binary_map(b->text_addr, b->text_addr + sym_table_text_size(b->syms), PROF_RANK_TEXT,
                       b);
        prof_space_add(as->space, &m);
    }
}

static void note_match(prof_aspaces *a, struct prof_aspace *as, uint64_t page,
                       const struct page_result *r, const struct sym_page_match *m)
{
    if (r->bin && !as->bin) {
        as->bin = r->bin;
        set_label(as, r->bin->name);
        if (a->cfg.verbose)
            qp_log(QP_LOG_INFO,
                   "address space %d (root 0x%" PRIx64 "): page 0x%" PRIx64 " is %s+0x%" PRIx64
                   " (%s)",
                   as->number, as->root, page, r->bin->name, m->vaddr, sym_table_path(m->table));
    } else if (r->n > 1 && !as->bin) {
        as->probe = page + SYM_PAGE_SIZE; /* the next page of the same code decides */
    } else if (r->n == 0) {
        a->counters.content_pages_unmatched++;
        if (a->cfg.verbose)
            qp_log(QP_LOG_INFO,
                   "address space %d (root 0x%" PRIx64 "): page 0x%" PRIx64
                   " matches no file under --user-dir",
                   as->number, as->root, page);
    }
}

void prof_aspace_add_page(prof_aspaces *a, struct prof_aspace *as, uint64_t page,
                          const uint8_t *bytes)
{
    if (g_hash_table_contains(as->pages, &page))
        return;
    struct sym_page_match m[MAX_CANDIDATES];
    struct page_result *r = g_new0(struct page_result, 1);
    r->bytes = bytes ? g_memdup2(bytes, SYM_PAGE_SIZE) : NULL;
    r->n = bytes && a->cfg.store ? sym_store_match_page(a->cfg.store, bytes, m, MAX_CANDIDATES) : 0;
    if (r->n == 1)
        r->bin = binary_for(a, m[0].table, page - m[0].vaddr);
    if (r->n > 1 && as->bin) /* shared with others, but this space's binary is one of them */
        for (size_t i = 0; i < r->n && i < MAX_CANDIDATES; i++)
            if (m[i].table == as->bin->syms &&
                page - m[i].vaddr == as->bin->text_addr - sym_table_text_addr(m[i].table))
                r->bin = as->bin;
    uint64_t *key = g_new(uint64_t, 1);
    *key = page;
    g_hash_table_insert(as->pages, key, r);
    bool had_bin = as->bin != NULL;
    note_match(a, as, page, r, m);
    fill_model(as, page, r, !had_bin && as->bin);
}

bool prof_aspace_check_due(struct prof_aspace *as, uint64_t pc, uint64_t *addr, size_t *len)
{
    uint64_t page = page_of(pc);
    const struct page_result *r = g_hash_table_lookup(as->pages, &page);
    if (!r || !r->bytes || --as->until_check > 0)
        return false;
    as->until_check = PROBE_EVERY;
    *addr = pc & ~(uint64_t)(PROBE_LEN - 1); /* PROBE_LEN divides the page: never crosses it */
    *len = PROBE_LEN;
    return true;
}

struct prof_aspace *prof_aspace_verify(prof_aspaces *a, struct prof_aspace *as, uint64_t addr,
                                       const uint8_t *bytes, size_t len)
{
    uint64_t page = page_of(addr);
    const struct page_result *r = g_hash_table_lookup(as->pages, &page);
    if (!r || !r->bytes || addr - page + len > SYM_PAGE_SIZE ||
        memcmp(r->bytes + (addr - page), bytes, len) == 0)
        return as;
    /* Another process's code where this one's was: its root was freed and given again. The old
     * address space keeps its label for the samples it had (and for the record); the root
     * starts over as a new one. */
    a->counters.aspace_roots_reused++;
    g_hash_table_steal(a->spaces, &as->root);
    g_ptr_array_add(a->retired, as);
    describe_space(as, a->earlier);
    if (a->cfg.verbose)
        qp_log(QP_LOG_INFO,
               "address space %d (root 0x%" PRIx64 "): the code at 0x%" PRIx64
               " changed: the root belongs to another process now",
               as->number, as->root, addr);
    return prof_aspace_for(a, as->root);
}

void prof_aspace_saw_user(struct prof_aspace *as)
{
    as->user_seen = true;
}

bool prof_aspace_is_process(const struct prof_aspace *as)
{
    return as->user_seen;
}

const prof_space *prof_aspace_space(const struct prof_aspace *as)
{
    return as->space;
}

const char *prof_aspace_label(const struct prof_aspace *as)
{
    return as->label;
}

uint64_t prof_aspace_root(const struct prof_aspace *as)
{
    return as->root;
}
