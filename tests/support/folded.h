/* Test support: the folded stack files qprof writes ("root;frame;...;leaf COUNT" per line), read
 * into memory for the checks a user would make by eye on a flame graph. */
#ifndef QPROF_TEST_FOLDED_H
#define QPROF_TEST_FOLDED_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct folded {
    GPtrArray *stacks;         /* char *, the line without its count */
    GArray *counts;            /* uint64_t, one per stack */
    uint64_t total;            /* the sum of the counts */
    unsigned malformed;        /* lines that are not "STACK COUNT" with a count above 0 */
    char first_malformed[200]; /* the first of them, for a failure message */
    bool missing_newline;      /* the file does not end in a newline */
};

#define STACK(f, i) ((const char *)g_ptr_array_index((f)->stacks, i))
#define COUNT(f, i) (g_array_index((f)->counts, uint64_t, i))

/* Reads path (a missing file reads as empty); the caller checks f.malformed. */
struct folded folded_read(const char *path);
void folded_free(struct folded *f);
/* Every stack and its count on stderr, for whoever reads a failure. */
void folded_dump(const struct folded *f);

/* Stack i's frames, the root first (g_strfreev them). */
gchar **folded_frames(const struct folded *f, guint i);

#endif
