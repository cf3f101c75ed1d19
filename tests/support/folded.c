#include "folded.h"

#include <stdio.h>
#include <string.h>

struct folded folded_read(const char *path)
{
    struct folded f = {.stacks = g_ptr_array_new_with_free_func(g_free),
                       .counts = g_array_new(FALSE, FALSE, sizeof(uint64_t))};
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        text = g_strdup("");
    f.missing_newline = *text && text[strlen(text) - 1] != '\n';
    gchar **lines = g_strsplit(text, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        if (!**l)
            continue;
        char *space = strrchr(*l, ' ');
        char *end = NULL;
        uint64_t count = space ? g_ascii_strtoull(space + 1, &end, 10) : 0;
        if (!space || !end || *end || count == 0) {
            if (!f.malformed++)
                g_strlcpy(f.first_malformed, *l, sizeof f.first_malformed);
            continue;
        }
        g_ptr_array_add(f.stacks, g_strndup(*l, (gsize)(space - *l)));
        g_array_append_val(f.counts, count);
        f.total += count;
    }
    g_strfreev(lines);
    g_free(text);
    return f;
}

void folded_free(struct folded *f)
{
    g_ptr_array_free(f->stacks, TRUE);
    g_array_free(f->counts, TRUE);
}

void folded_dump(const struct folded *f)
{
    for (guint i = 0; i < f->stacks->len; i++)
        fprintf(stderr, "    %s %lu\n", STACK(f, i), (unsigned long)COUNT(f, i));
}

gchar **folded_frames(const struct folded *f, guint i)
{
    return g_strsplit(STACK(f, i), ";", -1);
}
