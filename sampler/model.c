/* Address spaces, their mappings and the binaries they run (see model.h). */
#include "model.h"

#include <glib.h>
#include <string.h>

struct space_key {
    enum prof_space_kind kind;
    uint64_t id, generation;
};

struct prof_space {
    struct space_key key;
    GArray *maps;      /* struct prof_map, in the order added */
    unw_space *unwind; /* borrowed; NULL: each binary's own */
    bool strict;
};

struct prof_model {
    GHashTable *spaces; /* struct space_key -> prof_space (owned, key inside) */
};

static guint space_key_hash(gconstpointer p)
{
    const struct space_key *k = p;
    uint64_t h =
        (k->id * UINT64_C(0x9e3779b97f4a7c15) ^ k->generation) * UINT64_C(0x9e3779b97f4a7c15);
    return (guint)(h ^ h >> 32) ^ (guint)k->kind;
}

static gboolean space_key_equal(gconstpointer a, gconstpointer b)
{
    const struct space_key *x = a, *y = b;
    return x->kind == y->kind && x->id == y->id && x->generation == y->generation;
}

static void space_free(gpointer p)
{
    prof_space *as = p;
    g_array_free(as->maps, TRUE);
    g_free(as);
}

prof_model *prof_model_new(void)
{
    prof_model *m = g_new0(prof_model, 1);
    m->spaces = g_hash_table_new_full(space_key_hash, space_key_equal, NULL, space_free);
    return m;
}

void prof_model_free(prof_model *m)
{
    if (!m)
        return;
    g_hash_table_destroy(m->spaces);
    g_free(m);
}

void prof_model_reset(prof_model *m)
{
    g_hash_table_remove_all(m->spaces);
}

static gboolean is_kind(gpointer key, gpointer value, gpointer kind)
{
    (void)value;
    const struct space_key *k = key;
    return k->kind == *(const enum prof_space_kind *)kind;
}

void prof_model_forget(prof_model *m, enum prof_space_kind kind)
{
    g_hash_table_foreach_remove(m->spaces, is_kind, &kind);
}

unsigned prof_model_spaces(const prof_model *m)
{
    return g_hash_table_size(m->spaces);
}

prof_space *prof_model_find(const prof_model *m, enum prof_space_kind kind, uint64_t id,
                            uint64_t generation)
{
    struct space_key key = {kind, id, generation};
    return g_hash_table_lookup(m->spaces, &key);
}

prof_space *prof_model_space(prof_model *m, enum prof_space_kind kind, uint64_t id,
                             uint64_t generation)
{
    prof_space *as = prof_model_find(m, kind, id, generation);
    if (as)
        return as;
    as = g_new0(prof_space, 1);
    as->key = (struct space_key){kind, id, generation};
    as->maps = g_array_new(FALSE, TRUE, sizeof(struct prof_map));
    g_hash_table_insert(m->spaces, &as->key, as);
    return as;
}

void prof_space_clear(prof_space *as)
{
    g_array_set_size(as->maps, 0);
    as->unwind = NULL;
    as->strict = false;
}

void prof_space_add(prof_space *as, const struct prof_map *map)
{
    g_array_append_val(as->maps, *map);
}

void prof_space_set_unwind(prof_space *as, unw_space *unwind, bool strict)
{
    as->unwind = unwind;
    as->strict = strict;
}

const struct prof_map *prof_space_find(const prof_space *as, uint64_t pc)
{
    const struct prof_map *best = NULL;
    for (guint i = 0; as && i < as->maps->len; i++) {
        const struct prof_map *m = &g_array_index(as->maps, struct prof_map, i);
        if (m->start <= pc && pc < m->end && (!best || m->rank > best->rank))
            best = m;
    }
    return best;
}

unw_space *prof_space_unwind(const prof_space *as)
{
    return as ? as->unwind : NULL;
}

bool prof_space_strict(const prof_space *as)
{
    return as && as->strict;
}

int prof_space_count(const prof_space *as, enum prof_ident how)
{
    int n = 0;
    for (guint i = 0; as && i < as->maps->len; i++) {
        const struct prof_map *m = &g_array_index(as->maps, struct prof_map, i);
        n += m->trusted && m->bin.how == how;
    }
    return n;
}
