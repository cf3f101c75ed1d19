/* The store of user binaries, indexed by .text hash. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "sym_internal.h"

struct sym_store {
    /* .text hash -> sym_table *, owned. Keys point at a copy owned by the table entry. */
    GHashTable *by_hash;
    GHashTable *pages;  /* sym_pages.c: page hash -> the binaries' pages */
    bool pages_indexed; /* sym_store_index_pages was called: files added later are paged too */
    size_t unreadable;
};

sym_store *sym_store_new(void)
{
    sym_store *s = g_new0(sym_store, 1);
    s->by_hash =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)sym_table_free);
    s->pages = sym_pages_new();
    return s;
}

void sym_store_free(sym_store *s)
{
    if (!s)
        return;
    g_hash_table_destroy(s->pages);
    g_hash_table_destroy(s->by_hash);
    g_free(s);
}

size_t sym_store_count(const sym_store *s)
{
    return g_hash_table_size(s->by_hash);
}

size_t sym_store_match_page(const sym_store *s, const void *page, struct sym_page_match *out,
                            size_t max)
{
    return sym_pages_match(s->pages, page, out, max);
}

void sym_store_index_pages(sym_store *s)
{
    if (s->pages_indexed)
        return;
    s->pages_indexed = true;
    GHashTableIter it;
    gpointer key, table;
    g_hash_table_iter_init(&it, s->by_hash);
    while (g_hash_table_iter_next(&it, &key, &table))
        sym_pages_add(s->pages, table); /* unpageable files stay known by .text hash */
}

size_t sym_store_page_count(const sym_store *s)
{
    return g_hash_table_size(s->pages);
}

size_t sym_store_unreadable(const sym_store *s)
{
    return s->unreadable;
}

void sym_store_foreach(const sym_store *s, void (*fn)(const sym_table *t, void *ctx), void *ctx)
{
    GHashTableIter it;
    gpointer key, table;
    g_hash_table_iter_init(&it, s->by_hash);
    while (g_hash_table_iter_next(&it, &key, &table))
        fn(table, ctx);
}

const sym_table *sym_store_find(const sym_store *s, uint64_t hash)
{
    gint64 key = (gint64)hash;
    /* A lookup never removes or hands over ownership: every process of one binary gets the
     * same table for the store's lifetime. */
    return g_hash_table_lookup(s->by_hash, &key);
}

/* Returns 1 when the table was indexed, 0 when it was dropped. */
static int index_table(sym_store *s, sym_table *t)
{
    uint64_t hash = sym_table_text_hash(t);
    gint64 key = (gint64)hash;
    /* No .text (hash 0) identifies nothing; a second copy of a binary adds nothing. */
    if (hash == 0 || g_hash_table_contains(s->by_hash, &key)) {
        sym_table_free(t);
        return 0;
    }
    gint64 *owned_key = g_new(gint64, 1);
    *owned_key = key;
    g_hash_table_insert(s->by_hash, owned_key, t);
    if (s->pages_indexed)
        sym_pages_add(s->pages, t); /* a file that cannot be paged is still known by .text hash */
    return 1;
}

static int add_file_counted(sym_store *s, const char *path, struct qp_error *err)
{
    sym_table *t = NULL;
    int rc = sym_table_open_elf(path, &t, err);
    if (rc < 0)
        return rc;
    return index_table(s, t);
}

int sym_store_add_file(sym_store *s, const char *path, struct qp_error *err)
{
    int rc = add_file_counted(s, path, err);
    return rc < 0 ? rc : 0;
}

/* 1 for an ELF magic, 0 for anything else, negative when the file cannot be read. */
static int has_elf_magic(const char *path)
{
    unsigned char magic[4];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    ssize_t got = read(fd, magic, sizeof(magic));
    int saved = errno;
    close(fd);
    if (got < 0)
        return -saved;
    return got == 4 && memcmp(magic, "\177ELF", 4) == 0;
}

static int walk_dir(sym_store *s, const char *dir, struct qp_error *err);

/* Returns the number of ELFs indexed under path (a file or directory). */
static int walk_entry(sym_store *s, const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    /* Never follow symlinked directories: they can loop. Symlinked files are fine. */
    if (S_ISDIR(st.st_mode)) {
        int indexed = walk_dir(s, path, NULL);
        return indexed > 0 ? indexed : 0;
    }
    if (S_ISLNK(st.st_mode) && (stat(path, &st) != 0 || !S_ISREG(st.st_mode)))
        return 0;
    if (!S_ISREG(st.st_mode))
        return 0;
    int magic = has_elf_magic(path);
    if (magic == 0)
        return 0;
    int rc = magic < 0 ? magic : add_file_counted(s, path, NULL);
    if (rc < 0) {
        s->unreadable++;
        return 0;
    }
    return rc;
}

static int skip_dots(const struct dirent *e)
{
    return strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
}

/* Entries in name order, so that "the first of two identical binaries" is well defined. */
static int walk_dir(sym_store *s, const char *dir, struct qp_error *err)
{
    struct dirent **entries;
    int n = scandir(dir, &entries, skip_dots, alphasort);
    if (n < 0)
        return qp_error_set(err, -errno, "reading directory %s: %s", dir, strerror(errno));
    int indexed = 0;
    for (int i = 0; i < n; i++) {
        char *path = g_build_filename(dir, entries[i]->d_name, NULL);
        indexed += walk_entry(s, path);
        g_free(path);
        free(entries[i]);
    }
    free(entries);
    return indexed;
}

int sym_store_add_dir(sym_store *s, const char *dir, struct qp_error *err)
{
    return walk_dir(s, dir, err);
}
