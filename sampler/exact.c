/* --exact's blocks attributed to the kernel and the --user-dir binaries (exact.h). */
#include "exact.h"

#include <glib.h>
#include <string.h>

/* A --user-dir binary: its code (read on first use) and its module (added on first use). */
struct exact_binary {
    const sym_table *table;
    sym_code *code;
    uint32_t module;
};

struct attribution {
    const struct prof_exact_env *env;
    GArray *binaries;     /* struct exact_binary */
    GHashTable *combined; /* "a|b" -> module + 1, for code several binaries share */
};

static void collect_binary(const sym_table *t, void *ctx)
{
    struct exact_binary b = {.table = t, .code = sym_code_open(t), .module = OUT_NO_MODULE};
    if (b.code)
        g_array_append_val(((struct attribution *)ctx)->binaries, b);
}

static gint by_name(gconstpointer a, gconstpointer b)
{
    return strcmp(sym_table_name(((const struct exact_binary *)a)->table),
                  sym_table_name(((const struct exact_binary *)b)->table));
}

static uint32_t binary_module(struct attribution *a, struct exact_binary *b)
{
    if (b->module != OUT_NO_MODULE)
        return b->module;
    struct out_module m = {.text_hash = sym_table_text_hash(b->table),
                           .base = sym_table_text_addr(b->table)};
    g_strlcpy(m.name, sym_table_name(b->table), sizeof m.name);
    g_strlcpy(m.path, sym_table_path(b->table), sizeof m.path);
    b->module = prof_modules_add(a->env->modules, &m, b->table, 0);
    return b->module;
}

/* One module for the binaries in matches (indexes into a->binaries), named after all of them
 * and symbolized with the first's table (the code is the same). */
static uint32_t combined_module(struct attribution *a, const guint *matches, guint n)
{
    GString *name = g_string_new(NULL);
    for (guint i = 0; i < n; i++)
        g_string_append_printf(
            name, "%s%s", i ? "|" : "",
            sym_table_name(g_array_index(a->binaries, struct exact_binary, matches[i]).table));
    gpointer found = g_hash_table_lookup(a->combined, name->str);
    if (found) {
        g_string_free(name, TRUE);
        return GPOINTER_TO_UINT(found) - 1;
    }
    const sym_table *first = g_array_index(a->binaries, struct exact_binary, matches[0]).table;
    struct out_module m = {.base = sym_table_text_addr(first)};
    g_strlcpy(m.name, name->str, sizeof m.name);
    uint32_t module = prof_modules_add(a->env->modules, &m, first, 0);
    g_hash_table_insert(a->combined, g_string_free(name, FALSE), GUINT_TO_POINTER(module + 1));
    return module;
}

/* The module of a user block, OUT_NO_MODULE when no binary has its code; *shared when several
 * do. */
static uint32_t user_module(struct attribution *a, const struct prof_exact_block *blk, bool *shared)
{
    guint matches[8], n = 0;
    for (guint i = 0; i < a->binaries->len; i++) {
        struct exact_binary *b = &g_array_index(a->binaries, struct exact_binary, i);
        const uint8_t *code = sym_code_at(b->code, blk->pc, blk->n_bytes);
        if (code && prof_target_code_hash(code, blk->n_bytes) == blk->code_hash &&
            n < G_N_ELEMENTS(matches))
            matches[n++] = i;
    }
    *shared = n > 1;
    if (n == 0)
        return OUT_NO_MODULE;
    if (n == 1)
        return binary_module(a, &g_array_index(a->binaries, struct exact_binary, matches[0]));
    return combined_module(a, matches, n);
}

void prof_exact_attribute(const struct prof_exact_counts *c, const struct prof_exact_env *env,
                          struct prof_exact_summary *st)
{
    struct attribution a = {.env = env,
                            .binaries = g_array_new(FALSE, FALSE, sizeof(struct exact_binary)),
                            .combined =
                                g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL)};
    if (env->store)
        sym_store_foreach(env->store, collect_binary, &a);
    g_array_sort(a.binaries, by_name); /* shared code's "a|b" in one order */
    *st = (struct prof_exact_summary){.counting = c->counting,
                                      .counted_s = c->counted_s,
                                      .blocks = c->n,
                                      .unplaced = c->unplaced_insns,
                                      .insns = c->unplaced_insns};
    for (size_t i = 0; i < c->n; i++) {
        const struct prof_exact_block *blk = &c->blocks[i];
        uint32_t module = OUT_NO_MODULE;
        bool shared = false;
        st->insns += blk->insns;
        if (blk->pc >= env->split.kernel_start) {
            module = prof_modules_kernel(env->modules);
            st->kernel += blk->insns;
        } else if (blk->pc < env->split.user_end) {
            module = user_module(&a, blk, &shared);
            st->user += module != OUT_NO_MODULE && !shared ? blk->insns : 0;
            st->shared_user += shared ? blk->insns : 0;
        }
        if (module == OUT_NO_MODULE)
            st->unknown_user += blk->insns;
        out_profile_add_exact(env->profile, module, blk->pc, blk->insns);
    }
    for (guint i = 0; i < a.binaries->len; i++)
        sym_code_free(g_array_index(a.binaries, struct exact_binary, i).code);
    g_array_free(a.binaries, TRUE);
    g_hash_table_destroy(a.combined);
}
