/* Folded stacks: "root;frame;...;leaf COUNT" per distinct stack, sorted by text (stable diffs),
 * the format flamegraph.pl and speedscope read. */
#include "output.h"

#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct folded_line {
    const char *text;
    uint64_t count;
};

static int by_text(const void *a, const void *b)
{
    return strcmp(((const struct folded_line *)a)->text, ((const struct folded_line *)b)->text);
}

/* The folded text of stack id, rooted at cpuN first when cpu >= 0. */
static void fold(out_names *n, const struct out_stack *s, int cpu, GString *out,
                 const struct out_name **scratch)
{
    char root[64];
    g_string_truncate(out, 0);
    if (cpu >= 0)
        g_string_append_printf(out, "cpu%d;", cpu);
    g_string_append(out, out_stack_root(s, root, sizeof root));
    out_stack_display(n, s, scratch);
    int len = out_stack_display_len(s);
    for (int i = 0; i < len; i++) {
        g_string_append_c(out, ';');
        g_string_append(out, scratch[i]->name);
    }
}

/* Distinct folded texts and their counts (two stacks may fold alike: same names, other PCs). */
static GHashTable *fold_all(const out_profile *p, out_names *n, bool per_cpu)
{
    GHashTable *counts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    size_t n_stacks = out_profile_stack_count(p);
    GHashTable *memo = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    const struct out_name **scratch = NULL;
    int scratch_len = 0;
    GString *text = g_string_new(NULL);
    const struct out_record *r = out_profile_samples(p);
    for (size_t i = 0; i < out_profile_sample_count(p); i++) {
        gint64 key = (gint64)(((uint64_t)(per_cpu ? r[i].cpu : 0) << 32) | r[i].stack);
        uint64_t *count = g_hash_table_lookup(memo, &key);
        if (!count) {
            const struct out_stack *s = out_profile_stack(p, r[i].stack);
            int len = out_stack_display_len(s);
            if (len > scratch_len) {
                scratch_len = len * 2;
                scratch = g_renew(const struct out_name *, scratch, scratch_len);
            }
            fold(n, s, per_cpu ? (int)r[i].cpu : -1, text, scratch);
            count = g_hash_table_lookup(counts, text->str);
            if (!count) {
                count = g_new0(uint64_t, 1);
                g_hash_table_insert(counts, g_strdup(text->str), count);
            }
            g_hash_table_insert(memo, g_memdup2(&key, sizeof key), count);
        }
        (*count)++;
    }
    (void)n_stacks;
    g_string_free(text, TRUE);
    g_free(scratch);
    g_hash_table_destroy(memo);
    return counts;
}

int out_write_folded(const out_profile *p, out_names *n, const struct out_write_opts *o, FILE *f,
                     struct qp_error *err)
{
    GHashTable *counts = fold_all(p, n, o->per_cpu);
    guint len = g_hash_table_size(counts);
    struct folded_line *lines = g_new(struct folded_line, len ? len : 1);
    GHashTableIter it;
    gpointer key, value;
    guint i = 0;
    g_hash_table_iter_init(&it, counts);
    while (g_hash_table_iter_next(&it, &key, &value))
        lines[i++] = (struct folded_line){key, *(uint64_t *)value};
    qsort(lines, len, sizeof *lines, by_text);
    for (i = 0; i < len; i++)
        fprintf(f, "%s %" PRIu64 "\n", lines[i].text, lines[i].count);
    g_free(lines);
    g_hash_table_destroy(counts);
    return 0;
}
