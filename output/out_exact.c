/* --exact's flat profile: instructions per function, counted rather than sampled, as leaf-only
 * folded lines ("ROOT;FUNCTION COUNT") and as the lines the summary and pprof take. */
#include "output.h"

#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *exact_root(const out_profile *p, uint32_t module)
{
    if (module >= out_profile_module_count(p))
        return "[unknown user code]";
    const struct out_module *m = out_profile_module(p, module);
    return m->kernel ? "kernel" : m->name;
}

static int by_insns(const void *pa, const void *pb)
{
    const struct out_exact_line *a = pa, *b = pb;
    if (a->insns != b->insns)
        return a->insns < b->insns ? 1 : -1;
    int c = strcmp(a->root, b->root);
    return c ? c : strcmp(a->leaf->name, b->leaf->name);
}

struct out_exact_line *out_exact_lines(const out_profile *p, out_names *n, size_t *n_lines)
{
    /* "root\nname" -> index into lines; names hold no '\n' */
    GHashTable *index = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    GArray *lines = g_array_new(FALSE, FALSE, sizeof(struct out_exact_line));
    const struct out_exact *e = out_profile_exact(p);
    for (size_t i = 0; i < out_profile_exact_count(p); i++) {
        const char *root = exact_root(p, e[i].module);
        bool kernel =
            e[i].module < out_profile_module_count(p) && out_profile_module(p, e[i].module)->kernel;
        struct out_frame f = {
            .pc = e[i].pc, .module = e[i].module, .exact = true, .kernel = kernel};
        const struct out_name *leaf = out_names_frame(n, &f);
        char *key = g_strdup_printf("%s\n%s", root, leaf->name);
        gpointer found = g_hash_table_lookup(index, key);
        if (found) {
            g_array_index(lines, struct out_exact_line, GPOINTER_TO_UINT(found) - 1).insns +=
                e[i].insns;
            g_free(key);
            continue;
        }
        struct out_exact_line l = {root, leaf, e[i].insns};
        g_array_append_val(lines, l);
        g_hash_table_insert(index, key, GUINT_TO_POINTER(lines->len));
    }
    g_hash_table_destroy(index);
    qsort(lines->data, lines->len, sizeof(struct out_exact_line), by_insns);
    *n_lines = lines->len;
    return (struct out_exact_line *)g_array_free(lines, FALSE);
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int out_write_exact_folded(const out_profile *p, out_names *n, FILE *f, struct qp_error *err)
{
    (void)err;
    size_t len = 0;
    struct out_exact_line *lines = out_exact_lines(p, n, &len);
    char **text = g_new(char *, len + 1);
    for (size_t i = 0; i < len; i++)
        text[i] =
            g_strdup_printf("%s;%s %" PRIu64, lines[i].root, lines[i].leaf->name, lines[i].insns);
    qsort(text, len, sizeof *text, by_text);
    for (size_t i = 0; i < len; i++) {
        fprintf(f, "%s\n", text[i]);
        g_free(text[i]);
    }
    g_free(text);
    g_free(lines);
    return 0;
}

char *out_exact_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');
    if (!dot || dot == (slash ? slash + 1 : path))
        return g_strdup_printf("%s.exact", path);
    return g_strdup_printf("%.*s.exact%s", (int)(dot - path), path, dot);
}
