/* Loading System.map and /proc/kallsyms text. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "sym_internal.h"
#include "qp_file.h"

struct map_line {
    uint64_t addr;
    char type;
    char *name;
};

/* "ADDR TYPE NAME [module]"; returns false for lines that are not symbols, e.g. nm's
 * undefined symbols, which have no address. */
static bool parse_line(const char *line, struct map_line *out)
{
    char addr_text[32], type[2], *name = NULL;
    /* %ms allocates: Rust and C++ names can be longer than any fixed buffer. */
    if (sscanf(line, "%31s %1s %ms", addr_text, type, &name) != 3) {
        free(name);
        return false;
    }
    char *end;
    errno = 0;
    out->addr = strtoull(addr_text, &end, 16);
    if (errno || *end || !isxdigit((unsigned char)addr_text[0])) {
        free(name);
        return false;
    }
    out->type = type[0];
    out->name = g_strdup(name);
    free(name);
    return true;
}

static bool is_text_type(char type)
{
    return type == 't' || type == 'T' || type == 'w' || type == 'W';
}

/* Absolute symbols (per-CPU offsets, build constants) live outside the address space and
 * would cut text symbols short; undefined ones have no address. */
static bool bounds_text(char type)
{
    return type != 'a' && type != 'A' && type != 'U' && type != 'u';
}

static int cmp_line_addr(const void *a, const void *b)
{
    const struct map_line *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void clear_line(void *p)
{
    g_free(((struct map_line *)p)->name);
}

static int read_lines(const char *path, GArray *lines, struct qp_error *err)
{
    /* a regular file of a bounded size: getline on /dev/zero never ends, a FIFO blocks */
    int fd = qp_file_open_read(path, QP_FILE_MAX_TEXT, NULL, err);
    if (fd < 0)
        return fd;
    FILE *fp = fdopen(fd, "r");
    if (!fp) {
        close(fd);
        return qp_error_set(err, -errno, "opening %s: %s", path, strerror(errno));
    }
    char *buf = NULL;
    size_t cap = 0;
    while (getline(&buf, &cap, fp) >= 0) {
        struct map_line line;
        if (parse_line(buf, &line))
            g_array_append_val(lines, line);
    }
    free(buf);
    int rc = ferror(fp) ? qp_error_set(err, -EIO, "reading %s", path) : 0;
    fclose(fp);
    return rc;
}

/* Fills sizes[i] with the distance from lines[i] to the next higher address of a symbol of a
 * bounding type (0 for the last ones). Walks backwards one group of equal addresses at a time,
 * so that maps with many aliases stay linear. */
static void sizes_from_next(const struct map_line *lines, size_t n, uint64_t *sizes)
{
    bool have_bound = false;
    uint64_t bound = 0; /* lowest bounding address above the current group */
    size_t group_end = n;
    while (group_end > 0) {
        size_t group_start = group_end - 1;
        uint64_t addr = lines[group_start].addr;
        while (group_start > 0 && lines[group_start - 1].addr == addr)
            group_start--;
        for (size_t i = group_start; i < group_end; i++)
            sizes[i] = have_bound ? bound - addr : 0;
        for (size_t i = group_start; i < group_end; i++) {
            if (bounds_text(lines[i].type)) {
                have_bound = true;
                bound = addr;
            }
        }
        group_end = group_start;
    }
}

static bool all_zero(const struct map_line *lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lines[i].addr != 0)
            return false;
    return n > 0;
}

/* A section bound the linker script names (__entry_text_start, __irqentry_text_end): at the
 * same address as the function it opens, it must not name that function's frames (riscv64's
 * handle_exception shares its address with three). */
static bool is_marker(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, "__", 2) == 0 && ((n > 6 && strcmp(name + n - 6, "_start") == 0) ||
                                           (n > 4 && strcmp(name + n - 4, "_end") == 0));
}

/* Upper case is global, except weak symbols (W, V), which rank with locals. */
static enum sym_rank rank_of(char type, const char *name)
{
    if (is_marker(name))
        return SYM_RANK_MARKER;
    bool global = isupper((unsigned char)type) && type != 'W' && type != 'V';
    return global ? SYM_RANK_GLOBAL : SYM_RANK_OTHER;
}

static void add_lines(sym_table *t, const struct map_line *lines, size_t n)
{
    uint64_t *sizes = g_new(uint64_t, n + 1);
    sizes_from_next(lines, n, sizes);
    for (size_t i = 0; i < n; i++) {
        bool text = is_text_type(lines[i].type);
        sym_table_builder_add(t, lines[i].name, lines[i].addr, text ? sizes[i] : 0, SYM_NO_LIMIT,
                              rank_of(lines[i].type, lines[i].name), text);
    }
    g_free(sizes);
}

int sym_table_from_entries(const char *name, const struct sym_map_entry *e, size_t n,
                           sym_table **out, struct qp_error *err)
{
    GArray *lines = g_array_sized_new(FALSE, FALSE, sizeof(struct map_line), (guint)n);
    g_array_set_clear_func(lines, clear_line);
    for (size_t i = 0; i < n; i++) {
        struct map_line l = {e[i].addr, e[i].type, g_strdup(e[i].name)};
        g_array_append_val(lines, l);
    }
    int rc = 0;
    if (n == 0 || all_zero((const struct map_line *)lines->data, lines->len)) {
        rc = qp_error_set(err, -EINVAL, "%s: no symbol with an address", name);
    } else {
        g_array_sort(lines, cmp_line_addr);
        sym_table *t = sym_table_builder_new(name);
        add_lines(t, (const struct map_line *)lines->data, lines->len);
        sym_table_builder_finish(t);
        *out = t;
    }
    g_array_free(lines, TRUE);
    return rc;
}

int sym_table_open_map(const char *path, sym_table **out, struct qp_error *err)
{
    GArray *lines = g_array_new(FALSE, FALSE, sizeof(struct map_line));
    g_array_set_clear_func(lines, clear_line);
    int rc = read_lines(path, lines, err);
    if (rc < 0)
        goto out;
    const struct map_line *l = (const struct map_line *)lines->data;
    /* kallsyms shows every address as 0 to readers without CAP_SYSLOG (kptr_restrict). */
    if (all_zero(l, lines->len)) {
        rc = qp_error_set(err, -EACCES, "%s: every address is 0 (kptr_restrict?)", path);
        goto out;
    }
    g_array_sort(lines, cmp_line_addr);
    sym_table *t = sym_table_builder_new(path);
    add_lines(t, (const struct map_line *)lines->data, lines->len);
    sym_table_builder_finish(t);
    *out = t;
out:
    g_array_free(lines, TRUE);
    return rc;
}
