/* Frame names, once per distinct (module, pc, exact), and stacks as writers display them. */
#include "output.h"

#include <glib.h>
#include <inttypes.h>
#include <string.h>

struct out_names {
    const out_profile *profile;
    out_symbolize_fn symbolize;
    void *ctx;
    GHashTable *cache; /* struct name_key -> struct out_name (owned, strings in strings) */
    GStringChunk *strings;
    struct out_name truncated[2]; /* user, kernel */
};

struct name_key {
    uint64_t pc;
    uint32_t module;
    uint32_t flags; /* bit 0 exact, bit 1 kernel */
};

static guint key_hash(gconstpointer p)
{
    const struct name_key *k = p;
    return (guint)(k->pc ^ k->pc >> 29) * 31 + k->module * 7 + k->flags;
}

static gboolean key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(struct name_key)) == 0;
}

out_names *out_names_new(const out_profile *p, out_symbolize_fn symbolize, void *ctx)
{
    out_names *n = g_new0(out_names, 1);
    n->profile = p;
    n->symbolize = symbolize;
    n->ctx = ctx;
    n->cache = g_hash_table_new_full(key_hash, key_equal, g_free, g_free);
    n->strings = g_string_chunk_new(4096);
    for (int k = 0; k < 2; k++)
        n->truncated[k] =
            (struct out_name){.name = "[truncated]", .module = "", .kernel = k, .marker = true};
    return n;
}

void out_names_free(out_names *n)
{
    if (!n)
        return;
    g_hash_table_destroy(n->cache);
    g_string_chunk_free(n->strings);
    g_free(n);
}

/* A copy safe in every output: ';' separates folded frames, control characters break lines. */
static const char *clean(out_names *n, const char *text)
{
    char *copy = g_string_chunk_insert(n->strings, text);
    for (char *c = copy; *c; c++)
        if (*c == ';' || (unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '_';
    return copy;
}

static void name_of(out_names *n, const struct out_frame *f, struct out_name *out)
{
    const struct out_module *m =
        f->module == OUT_NO_MODULE ? NULL : out_profile_module(n->profile, f->module);
    struct out_symbol sym = {0};
    *out = (struct out_name){.pc = f->pc, .kernel = f->kernel, .module = ""};
    if (m)
        out->module = clean(n, m->name);
    char text[256];
    if (m && n->symbolize && n->symbolize(n->ctx, m, f->pc, f->exact, &sym) == 0 && sym.function) {
        out->has_symbol = true;
        out->offset = sym.offset;
        out->name = clean(n, sym.function);
        out->file = sym.file ? clean(n, sym.file) : NULL;
        out->line = sym.line;
        return;
    }
    if (m && m->base && f->pc >= m->base)
        snprintf(text, sizeof text, "%s+0x%" PRIx64, m->name, f->pc - m->base);
    else
        snprintf(text, sizeof text, "0x%" PRIx64, f->pc);
    out->name = clean(n, text);
}

const struct out_name *out_names_frame(out_names *n, const struct out_frame *f)
{
    struct name_key key = {f->pc, f->module, (f->exact ? 1u : 0u) | (f->kernel ? 2u : 0u)};
    struct out_name *found = g_hash_table_lookup(n->cache, &key);
    if (found)
        return found;
    found = g_new(struct out_name, 1);
    name_of(n, f, found);
    g_hash_table_insert(n->cache, g_memdup2(&key, sizeof key), found);
    return found;
}

int out_stack_display_len(const struct out_stack *s)
{
    return s->n_frames + unw_stop_is_truncation(s->user_stop) +
           unw_stop_is_truncation(s->kernel_stop);
}

void out_stack_display(out_names *n, const struct out_stack *s, const struct out_name **out)
{
    int k = 0;
    if (unw_stop_is_truncation(s->user_stop))
        out[k++] = &n->truncated[0];
    for (int i = 0; i < s->n_user; i++)
        out[k++] = out_names_frame(n, &s->frames[i]);
    if (unw_stop_is_truncation(s->kernel_stop))
        out[k++] = &n->truncated[1];
    for (int i = s->n_user; i < s->n_frames; i++)
        out[k++] = out_names_frame(n, &s->frames[i]);
}
