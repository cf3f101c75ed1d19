/* How long the --user-dir page index (symbols/sym_pages.c) takes to build: for a directory as
 * given, and for a directory of COPIES distinct binaries made from it (each copy with one byte of
 * its .text changed, so that no two share a .text hash and every copy's pages are indexed).
 * Reports the times; asserts nothing but that a copy's page finds that copy.
 *
 * Usage: page_index_bench DIR [COPIES]   (COPIES default 3000) */
#define _GNU_SOURCE
#include "symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Returns the time the page index took; *store_s the time loading the files (symbols and .text
 * hashes, what every --user-dir costs) took before it. */
static double index_dir(const char *dir, sym_store **out, int *n_elf, double *store_s)
{
    struct qp_error err = {0};
    gint64 t0 = g_get_monotonic_time();
    sym_store *s = sym_store_new();
    *n_elf = sym_store_add_dir(s, dir, &err);
    gint64 t1 = g_get_monotonic_time();
    sym_store_index_pages(s);
    double secs = (double)(g_get_monotonic_time() - t1) / 1e6;
    *store_s = (double)(t1 - t0) / 1e6;
    *out = s;
    return secs;
}

/* The file offset of .text, 0 when none. */
static uint64_t text_offset(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx;
    uint64_t off = 0;
    if (e && elf_getshdrstrndx(e, &shstrndx) == 0)
        for (Elf_Scn *scn = elf_nextscn(e, NULL); scn && !off; scn = elf_nextscn(e, scn)) {
            GElf_Shdr sh;
            const char *n;
            if (gelf_getshdr(scn, &sh) && (n = elf_strptr(e, shstrndx, sh.sh_name)) &&
                strcmp(n, ".text") == 0 && sh.sh_size > 8)
                off = sh.sh_offset + sh.sh_size - 1;
        }
    if (e)
        elf_end(e);
    close(fd);
    return off;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: page_index_bench DIR [COPIES]\n");
        return 2;
    }
    int copies = argc > 2 ? atoi(argv[2]) : 3000;
    sym_store *s;
    int n;
    double load_s, secs = index_dir(argv[1], &s, &n, &load_s);
    printf("%s: %d ELF files loaded in %.6f s, %zu distinct pages indexed in %.6f s\n", argv[1], n,
           load_s, sym_store_page_count(s), secs);
    sym_store_free(s);

    GDir *d = g_dir_open(argv[1], 0, NULL);
    char *tmp = g_dir_make_tmp("qprof-pages-XXXXXX", NULL);
    const char *name;
    int made = 0;
    GPtrArray *sources = g_ptr_array_new_with_free_func(g_free);
    while (d && (name = g_dir_read_name(d)))
        g_ptr_array_add(sources, g_build_filename(argv[1], name, NULL));
    for (int i = 0; sources->len && i < copies; i++) {
        const char *src = g_ptr_array_index(sources, i % sources->len);
        uint64_t off = text_offset(src);
        gchar *bytes;
        gsize len;
        if (!off || !g_file_get_contents(src, &bytes, &len, NULL))
            continue;
        bytes[off] ^= (char)(1 + i % 255); /* its last .text byte: a distinct binary */
        bytes[off - 1] ^= (char)(i / 255);
        char *dst = g_strdup_printf("%s/copy%05d", tmp, i);
        if (g_file_set_contents(dst, bytes, (gssize)len, NULL))
            made++;
        g_free(dst);
        g_free(bytes);
    }
    secs = index_dir(tmp, &s, &n, &load_s);
    printf("%d generated copies: %d ELF files loaded in %.3f s, %zu distinct pages indexed in "
           "%.3f s (%.1f us per file)\n",
           made, n, load_s, sym_store_page_count(s), secs, n ? secs * 1e6 / n : 0);
    sym_store_free(s);
    for (int i = 0; i < copies; i++) {
        char *dst = g_strdup_printf("%s/copy%05d", tmp, i);
        g_unlink(dst);
        g_free(dst);
    }
    g_rmdir(tmp);
    g_free(tmp);
    g_ptr_array_free(sources, TRUE);
    if (d)
        g_dir_close(d);
    return 0;
}
