/* The profile's modules and their symbol tables (modules.h). */
#include "modules.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>

struct prof_modules {
    out_profile *profile;        /* borrowed: every sample, and the modules their PCs belong to */
    GPtrArray *syms;             /* module index -> const sym_table * (may be NULL) */
    GArray *bias;                /* module index -> int64_t added to its table's addresses */
    GHashTable *mapping_modules; /* "name@base" -> module index (user mappings, Linux) */
    uint32_t kernel;
};

prof_modules *prof_modules_new(out_profile *profile)
{
    prof_modules *m = g_new0(prof_modules, 1);
    m->profile = profile;
    m->syms = g_ptr_array_new();
    m->bias = g_array_new(FALSE, FALSE, sizeof(int64_t));
    m->mapping_modules = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return m;
}

void prof_modules_free(prof_modules *m)
{
    if (!m)
        return;
    g_ptr_array_free(m->syms, TRUE);
    g_array_free(m->bias, TRUE);
    g_hash_table_destroy(m->mapping_modules);
    g_free(m);
}

uint32_t prof_modules_add(prof_modules *m, const struct out_module *om, const sym_table *syms,
                          int64_t bias)
{
    uint32_t index = out_profile_add_module(m->profile, om);
    g_ptr_array_add(m->syms, (gpointer)syms);
    g_array_append_val(m->bias, bias);
    return index;
}

void prof_modules_set_syms(prof_modules *m, uint32_t index, const sym_table *syms)
{
    if (index < m->syms->len)
        g_ptr_array_index(m->syms, index) = (gpointer)syms;
}

int64_t prof_modules_bias(const prof_modules *m, uint32_t index)
{
    return index < m->bias->len ? g_array_index(m->bias, int64_t, index) : 0;
}

uint32_t prof_modules_kernel(const prof_modules *m)
{
    return m->kernel;
}

void prof_modules_set_kernel(prof_modules *m, uint32_t index)
{
    m->kernel = index;
}

/* One module per mapped file at one base ("libc.so.6" at each address a process put it): a pc
 * with no symbol shows as "libc.so.6+0xFILE_OFFSET". A long run with very many processes stops
 * adding them (frames then show as addresses). */
#define MAX_MAPPING_MODULES 4096
uint32_t prof_modules_for_mapping(prof_modules *m, const struct prof_mapping *pm)
{
    char *key = g_strdup_printf("%s@%" PRIx64, pm->name, pm->base);
    gpointer found;
    if (g_hash_table_lookup_extended(m->mapping_modules, key, NULL, &found)) {
        g_free(key);
        return GPOINTER_TO_UINT(found);
    }
    if (g_hash_table_size(m->mapping_modules) >= MAX_MAPPING_MODULES) {
        g_free(key);
        return OUT_NO_MODULE;
    }
    struct out_module om = {.base = pm->base};
    g_strlcpy(om.name, pm->name, sizeof om.name);
    uint32_t index = prof_modules_add(m, &om, NULL, 0);
    g_hash_table_insert(m->mapping_modules, key, GUINT_TO_POINTER(index));
    return index;
}

int prof_modules_symbolize(void *ctx, const struct out_module *om, uint64_t pc, bool exact,
                           struct out_symbol *sym)
{
    const prof_modules *m = ctx;
    uint32_t index = (uint32_t)(om - out_profile_module(m->profile, 0));
    const sym_table *syms = index < m->syms->len ? g_ptr_array_index(m->syms, index) : NULL;
    uint64_t at = pc - (uint64_t)prof_modules_bias(m, index); /* the table's (link-time) address */
    struct sym_info info;
    /* A return address points after the call: look up the call itself. */
    if (!syms || sym_lookup(syms, exact || at == 0 ? at : at - 1, &info) != 0)
        return -ENOENT;
    *sym = (struct out_symbol){.function = info.name, .offset = at - info.start};
    sym_lookup_line(syms, exact || at == 0 ? at : at - 1, &sym->file, &sym->line);
    return 0;
}
