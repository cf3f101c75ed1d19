/* The SVG flame graph on hand-built profiles, parsed back with GLib's GMarkup: well-formed XML,
 * one <g class="frame"> per node of the flame graph that the folded output of the same profile
 * describes (the tree is rebuilt from the boxes' geometry alone), names and sample counts in
 * <title> and <text>, widths that tile (a parent is its children plus its own samples),
 * children sorted, colors by kind, special characters escaped, the same bytes every time.
 *
 * With a directory argument it also writes flame graphs there (*.svg), for svg_viewer.js to
 * click and search through in jsdom (see node_test.sh). */
#define _GNU_SOURCE
#include "harness.h"
#include "output.h"

#include <glib.h>
#include <math.h>
#include <string.h>

#define WIDTH_H (1180 * 100) /* drawing width in hundredths of a pixel */

static const char *out_dir; /* where to leave the files, NULL: nowhere */

static void save(const char *file_name, const char *text)
{
    if (!out_dir)
        return;
    char *path = g_build_filename(out_dir, file_name, NULL);
    CHECK(g_file_set_contents(path, text, -1, NULL));
    g_free(path);
}

/* User functions from 0x401000 and kernel ones from 0xffffffff80101000, 0x100 bytes each, with
 * names that XML must escape. */
static const char *const user_names[] = {"_start", "main", "operator<<(std::ostream&, char*)",
                                         "tmpl<'a', \"b\">"};
static const char *const kernel_names[] = {"isr128", "sys_work", "a>b&c"};

static int symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                     struct out_symbol *sym)
{
    uint64_t at = exact ? pc : pc - 1;
    uint64_t base = m->kernel ? 0xffffffff80101000 : 0x401000;
    size_t n = m->kernel ? 3 : 4;
    if (at < base || (at - base) / 0x100 >= n)
        return -1;
    size_t i = (at - base) / 0x100;
    *sym = (struct out_symbol){m->kernel ? kernel_names[i] : user_names[i], pc - base - i * 0x100,
                               NULL, 0};
    return 0;
}

static char *write_text(const out_profile *p, enum out_format format, bool per_cpu,
                        const char *title)
{
    out_names *n = out_names_new(p, symbolize, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct out_write_opts o = {.per_cpu = per_cpu, .title = title};
    struct qp_error err = {0};
    CHECK_INT(out_write(p, n, format, &o, f, &err), 0);
    fclose(f);
    out_names_free(n);
    return buf;
}

/* ---- Reading the SVG back ---------------------------------------------------------------- */

struct box {
    char *name, *label, *fill, *path;
    uint64_t count;
    char percent[16];
    int64_t x, width; /* hundredths of a pixel */
    int y, depth;
    struct box *parent;
};

struct svg_doc {
    GPtrArray *boxes; /* struct box * */
    struct box *open; /* the frame being read */
    GString *chars;
    bool collecting;
    char *title; /* of the image */
    int scripts, frame_groups_open, other_elements;
};

/* "123.45" to 12345: the writer prints exactly two decimals. */
static int64_t hundredths(const char *text)
{
    const char *dot = strchr(text, '.');
    CHECK_MSG(dot && strlen(dot) == 3, "\"%s\" has not two decimals", text);
    if (!dot)
        return -1;
    return g_ascii_strtoll(text, NULL, 10) * 100 + g_ascii_strtoll(dot + 1, NULL, 10);
}

static const char *attr(const char **names, const char **values, const char *want)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], want) == 0)
            return values[i];
    return NULL;
}

static void on_start(GMarkupParseContext *ctx, const char *element, const char **names,
                     const char **values, gpointer data, GError **error)
{
    struct svg_doc *d = data;
    const char *cls = attr(names, values, "class"), *id = attr(names, values, "id");
    g_string_truncate(d->chars, 0);
    d->collecting = false;
    if (strcmp(element, "g") == 0 && cls && strcmp(cls, "frame") == 0) {
        CHECK(d->open == NULL); /* frames do not nest */
        d->open = g_new0(struct box, 1);
    } else if (d->open && strcmp(element, "rect") == 0) {
        d->open->x = hundredths(attr(names, values, "x"));
        d->open->width = hundredths(attr(names, values, "width"));
        d->open->y = atoi(attr(names, values, "y"));
        d->open->fill = g_strdup(attr(names, values, "fill"));
    } else if (d->open && (strcmp(element, "title") == 0 || strcmp(element, "text") == 0)) {
        d->collecting = true;
    } else if (strcmp(element, "text") == 0 && id && strcmp(id, "title") == 0) {
        d->collecting = true;
    } else if (strcmp(element, "script") == 0) {
        d->scripts++;
    }
}

/* "name (N samples, P%)" */
static void read_title(struct box *b, const char *title)
{
    const char *open = g_strrstr(title, " (");
    REQUIRE(open != NULL);
    b->name = g_strndup(title, open - title);
    char *end = NULL;
    b->count = g_ascii_strtoull(open + 2, &end, 10);
    CHECK_MSG(g_str_has_prefix(end, " samples, ") && g_str_has_suffix(end, "%)"), "title \"%s\"",
              title);
    g_strlcpy(b->percent, end + strlen(" samples, "), sizeof b->percent);
    b->percent[strlen(b->percent) - 2] = '\0';
}

static void on_end(GMarkupParseContext *ctx, const char *element, gpointer data, GError **error)
{
    struct svg_doc *d = data;
    if (d->open && strcmp(element, "title") == 0)
        read_title(d->open, d->chars->str);
    else if (d->open && strcmp(element, "text") == 0)
        d->open->label = g_strdup(d->chars->str);
    else if (!d->open && strcmp(element, "text") == 0 && d->collecting)
        d->title = g_strdup(d->chars->str);
    else if (d->open && strcmp(element, "g") == 0) {
        g_ptr_array_add(d->boxes, d->open);
        d->open = NULL;
    }
    d->collecting = false;
}

static void on_text(GMarkupParseContext *ctx, const char *text, gsize len, gpointer data,
                    GError **error)
{
    struct svg_doc *d = data;
    if (d->collecting)
        g_string_append_len(d->chars, text, (gssize)len);
}

static void box_free(gpointer data)
{
    struct box *b = data;
    g_free(b->name);
    g_free(b->label);
    g_free(b->fill);
    g_free(b->path);
    g_free(b);
}

static struct svg_doc *parse_svg(const char *text)
{
    static const GMarkupParser parser = {
        .start_element = on_start, .end_element = on_end, .text = on_text};
    struct svg_doc *d = g_new0(struct svg_doc, 1);
    d->boxes = g_ptr_array_new_with_free_func(box_free);
    d->chars = g_string_new(NULL);
    GMarkupParseContext *ctx = g_markup_parse_context_new(&parser, 0, d, NULL);
    GError *error = NULL;
    bool ok = g_markup_parse_context_parse(ctx, text, -1, &error) &&
              g_markup_parse_context_end_parse(ctx, &error);
    CHECK_MSG(ok, "not well-formed: %s", error ? error->message : "?");
    g_clear_error(&error);
    g_markup_parse_context_free(ctx);
    return d;
}

static void svg_doc_free(struct svg_doc *d)
{
    g_ptr_array_free(d->boxes, TRUE);
    g_string_free(d->chars, TRUE);
    g_free(d->title);
    g_free(d);
}

/* The tree from geometry alone: "all" is the lowest row, a box's parent is the box of the row
 * below that spans it. */
static void rebuild_paths(struct svg_doc *d)
{
    int bottom = 0;
    for (guint i = 0; i < d->boxes->len; i++)
        bottom = MAX(bottom, ((struct box *)g_ptr_array_index(d->boxes, i))->y);
    for (guint i = 0; i < d->boxes->len; i++) {
        struct box *b = g_ptr_array_index(d->boxes, i);
        CHECK_INT((bottom - b->y) % 16, 0);
        b->depth = (bottom - b->y) / 16;
    }
    /* the writer draws parents first */
    for (guint i = 0; i < d->boxes->len; i++) {
        struct box *b = g_ptr_array_index(d->boxes, i);
        for (guint k = 0; k < i && b->depth > 0; k++) {
            struct box *up = g_ptr_array_index(d->boxes, k);
            if (up->depth == b->depth - 1 && up->x <= b->x && b->x + b->width <= up->x + up->width)
                b->parent = up;
        }
        CHECK_MSG(b->depth == 0 || b->parent, "box %s has no parent", b->name);
        b->path =
            b->parent ? g_strdup_printf("%s;%s", b->parent->path, b->name) : g_strdup(b->name);
    }
}

/* Every node the folded text describes: "all", then each prefix of each line, with its count. */
static GHashTable *nodes_of_folded(const char *folded, uint64_t *total)
{
    GHashTable *nodes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    char **lines = g_strsplit(folded, "\n", -1);
    *total = 0;
    for (char **line = lines; *line && **line; line++) {
        char *space = strrchr(*line, ' ');
        REQUIRE(space != NULL);
        *space = '\0';
        uint64_t count = g_ascii_strtoull(space + 1, NULL, 10);
        *total += count;
        GString *path = g_string_new("all");
        char **frames = g_strsplit(*line, ";", -1);
        for (int i = -1; i < 0 || frames[i]; i++) {
            if (i >= 0)
                g_string_append_printf(path, ";%s", frames[i]);
            uint64_t *c = g_hash_table_lookup(nodes, path->str);
            if (!c) {
                c = g_new0(uint64_t, 1);
                g_hash_table_insert(nodes, g_strdup(path->str), c);
            }
            *c += count;
        }
        g_strfreev(frames);
        g_string_free(path, TRUE);
    }
    g_strfreev(lines);
    return nodes;
}

static double width_of(uint64_t count, uint64_t total)
{
    return (double)count * WIDTH_H / (double)total;
}

/* A parent is exactly as wide as its children plus its own samples; children start at its left
 * edge, touch, and come in name order. */
static void check_tiling(struct svg_doc *d, uint64_t total)
{
    for (guint i = 0; i < d->boxes->len; i++) {
        struct box *b = g_ptr_array_index(d->boxes, i);
        CHECK_MSG(fabs((double)b->width - width_of(b->count, total)) <= 1.0,
                  "%s: width %" PRId64 " for %" PRIu64 " of %" PRIu64, b->path, b->width, b->count,
                  total);
        int64_t next_x = b->x, children_width = 0;
        uint64_t children_count = 0;
        const char *last_name = NULL;
        for (guint k = 0; k < d->boxes->len; k++) {
            struct box *c = g_ptr_array_index(d->boxes, k);
            if (c->parent != b)
                continue;
            CHECK_MSG(c->x == next_x, "%s starts at %" PRId64 ", not %" PRId64, c->path, c->x,
                      next_x);
            CHECK_MSG(!last_name || strcmp(last_name, c->name) < 0, "%s after %s", c->name,
                      last_name);
            last_name = c->name;
            next_x = c->x + c->width;
            children_width += c->width;
            children_count += c->count;
        }
        double self = width_of(b->count - children_count, total);
        CHECK_MSG(fabs((double)(b->width - children_width) - self) <= 1.0,
                  "%s: %" PRId64 " wide, children %" PRId64 ", self %.2f", b->path, b->width,
                  children_width, self);
    }
}

/* The label is the name, or as much of it as fits followed by "..", or nothing. */
static void check_label(const struct box *b)
{
    size_t len = strlen(b->label);
    if (strcmp(b->label, b->name) == 0 || len == 0)
        return;
    CHECK_MSG(len > 2 && g_str_has_suffix(b->label, "..") &&
                  strncmp(b->label, b->name, len - 2) == 0,
              "label \"%s\" of \"%s\"", b->label, b->name);
}

static bool in_list(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, list[i]) == 0)
            return true;
    return false;
}

/* Kernel code warm, user code blue-green, markers gray, qprof's own levels pale. */
static void check_color(const struct box *b)
{
    unsigned r, g, bl;
    REQUIRE(sscanf(b->fill, "rgb(%u,%u,%u)", &r, &g, &bl) == 3);
    if (strcmp(b->name, "[truncated]") == 0)
        CHECK_STR(b->fill, "rgb(160,160,160)");
    else if (in_list(b->name, kernel_names, 3) || g_str_has_prefix(b->name, "kernel.elf+"))
        CHECK_MSG(r >= 205 && bl <= 55, "%s is %s", b->name, b->fill);
    else if (in_list(b->name, user_names, 4) || g_str_has_prefix(b->name, "spin+") ||
             strcmp(b->name, "0x7777") == 0)
        CHECK_MSG(r <= 110 && g >= 160 && bl >= 180, "%s is %s", b->name, b->fill);
    else
        CHECK_STR(b->fill, "rgb(200,200,215)");
}

/* The SVG of p against the folded text of p: same nodes, same counts. Returns the SVG. */
static char *check_against_folded(const out_profile *p, bool per_cpu, size_t want_nodes)
{
    char *folded = write_text(p, OUT_FOLDED, per_cpu, NULL);
    char *svg = write_text(p, OUT_SVG, per_cpu, NULL);
    uint64_t total;
    GHashTable *nodes = nodes_of_folded(folded, &total);
    struct svg_doc *d = parse_svg(svg);
    CHECK_INT(d->scripts, 1);
    CHECK_STR(d->title, "qprof");
    rebuild_paths(d);
    CHECK_INT(d->boxes->len, g_hash_table_size(nodes));
    CHECK_INT(d->boxes->len, want_nodes);
    for (guint i = 0; i < d->boxes->len; i++) {
        struct box *b = g_ptr_array_index(d->boxes, i);
        uint64_t *want = g_hash_table_lookup(nodes, b->path);
        CHECK_MSG(want != NULL, "box %s is no node of the folded stacks", b->path);
        if (want)
            CHECK_U64(b->count, *want);
        g_hash_table_remove(nodes, b->path); /* each node once */
        char percent[16];
        snprintf(percent, sizeof percent, "%.2f", 100.0 * (double)b->count / (double)total);
        CHECK_STR(b->percent, percent);
        check_label(b);
        check_color(b);
    }
    CHECK_INT(g_hash_table_size(nodes), 0);
    check_tiling(d, total);
    struct box *all = g_ptr_array_index(d->boxes, 0);
    CHECK_STR(all->path, "all");
    CHECK_INT(all->x, 1000);
    CHECK_INT(all->width, WIDTH_H);
    svg_doc_free(d);
    g_hash_table_destroy(nodes);
    free(folded);
    return svg;
}

/* ---- Profiles ---------------------------------------------------------------------------- */

static const struct out_module kernel_module = {
    .name = "kernel.elf", .kernel = true, .base = 0xffffffff80100000};
static const struct out_module spin_module = {.name = "spin", .base = 0x400000};

/* Two vCPUs: spin in main and in two C++-named functions, a system call whose kernel part was
 * cut short, idle, the kernel on its own, user code of no known process, and one process
 * whose comm needs escaping. reverse adds the samples, to show the output does not care. */
static out_profile *two_cpus(bool reverse)
{
    out_profile *p = out_profile_new();
    uint32_t mk = out_profile_add_module(p, &kernel_module);
    uint32_t ms = out_profile_add_module(p, &spin_module);
    struct out_frame in_main[] = {{0x401005, ms, false, false}, {0x401110, ms, true, false}};
    struct out_frame in_op[] = {
        {0x401005, ms, false, false}, {0x401150, ms, false, false}, {0x401210, ms, true, false}};
    struct out_frame in_tmpl[] = {{0x401005, ms, false, false},
                                  {0x401150, ms, false, false},
                                  {0x401310, ms, true, false},
                                  {0x405000, ms, true, false}};
    struct out_frame syscall[] = {{0x401005, ms, false, false},
                                  {0x401150, ms, false, false},
                                  {0xffffffff80101000, mk, true, true},
                                  {0xffffffff80101110, mk, true, true},
                                  {0xffffffff80101210, mk, true, true}};
    struct out_frame kernel_only[] = {{0xffffffff80101020, mk, true, true}};
    struct out_frame unknown[] = {{0x7777, OUT_NO_MODULE, true, false}};
    struct out_sample spin = {
        .weight_ns = 1, .pid = 1, .comm = "spin", .mode = OUT_MODE_USER, .n_user = 0};
    struct out_sample s[14];
    for (int i = 0; i < 14; i++) {
        s[i] = spin;
        s[i].time_ns = (uint64_t)i;
        s[i].cpu = (uint32_t)i % 2;
    }
#define USER(i, f) (s[i].frames = f, s[i].n_frames = s[i].n_user = sizeof f / sizeof f[0])
    USER(0, in_main);
    USER(1, in_main);
    USER(2, in_op);
    USER(3, in_op);
    USER(4, in_op);
    USER(5, in_tmpl);
    USER(12, in_main);
    s[13] = s[12];
    s[13].pid = 3;
    s[13].cpu = 1;
    g_strlcpy(s[13].comm, "<x&y \"q\" 'z'>", sizeof s[13].comm);
#undef USER
    s[6].frames = syscall, s[6].n_frames = 5, s[6].n_user = 2, s[6].mode = OUT_MODE_KERNEL;
    s[6].kernel_stop = UNW_STOP_MEMORY;
    s[7] = s[6];
    s[8] = (struct out_sample){.mode = OUT_MODE_IDLE};
    s[9] = s[8];
    s[10] = (struct out_sample){.mode = OUT_MODE_KERNEL, .n_frames = 1, .frames = kernel_only};
    s[11] = (struct out_sample){.mode = OUT_MODE_USER,
                                .user_stop = UNW_STOP_NO_CFI,
                                .n_frames = 1,
                                .n_user = 1,
                                .frames = unknown};
    for (int i = 6; i < 12; i++) {
        s[i].time_ns = (uint64_t)i;
        s[i].cpu = (uint32_t)i % 2;
        s[i].weight_ns = 1;
    }
    for (int i = 0; i < 14; i++) {
        /* time order is not what the flame graph shows: reversing is only for the test */
        struct out_sample one = s[reverse ? 13 - i : i];
        out_profile_add(p, &one);
    }
    return p;
}

static void test_against_folded(void)
{
    out_profile *p = two_cpus(false);
    /* all; 5 roots; spin (1): _start, main, then op<<, tmpl and its spin+0x5000, and the
     * system call's [truncated], isr128, sys_work, a>b&c; kernel: isr128; [unknown process]:
     * [truncated], 0x7777; the escaped comm: _start, main */
    char *svg = check_against_folded(p, false, 1 + 5 + (2 + 3 + 4) + 1 + 2 + 2);
    /* escaped in the file, restored by the parser */
    CHECK(strstr(svg, "operator&lt;&lt;(std::ostream&amp;, char*)") != NULL);
    CHECK(strstr(svg, "tmpl&lt;&apos;a&apos;, &quot;b&quot;&gt;") != NULL);
    CHECK(strstr(svg, "a&gt;b&amp;c") != NULL);
    CHECK(strstr(svg, "&lt;x&amp;y &quot;q&quot; &apos;z&apos;&gt; (3)") != NULL);
    CHECK(strstr(svg, "operator<<") == NULL);
    save("per-process.svg", svg);
    /* self-contained: the only URL is the SVG namespace, nothing is loaded */
    CHECK(strstr(svg, "href") == NULL);
    CHECK(strstr(svg, "src=") == NULL);
    CHECK(strstr(svg, "import") == NULL);
    const char *url = strstr(svg, "http");
    CHECK(url && g_str_has_prefix(url, "http://www.w3.org/2000/svg\""));
    CHECK(url && strstr(url + 1, "http") == NULL);
    /* the viewer's parts: zoom, reset, search with Ctrl-F, matched share */
    CHECK(strstr(svg, "function zoom(") && strstr(svg, "function unzoom(") &&
          strstr(svg, "function search(") && strstr(svg, "ctrlKey") &&
          strstr(svg, "id=\"matched\"") && strstr(svg, "Reset Zoom"));
    free(svg);

    /* all; cpu0: spin (1), _start, main, op<<, the system call's 4, idle, kernel, isr128;
     * cpu1: spin (1), _start, main, op<<, tmpl, spin+0x5000, the system call's 4, idle, the
     * unknown process and its 2, the escaped comm and its 2 */
    svg = check_against_folded(p, true, 1 + (1 + 8 + 1 + 2) + (1 + 10 + 1 + 3 + 3));
    save("per-cpu.svg", svg);
    free(svg);
    out_profile_free(p);
}

static void test_per_cpu_levels(void)
{
    out_profile *p = two_cpus(false);
    char *svg = write_text(p, OUT_SVG, true, NULL);
    struct svg_doc *d = parse_svg(svg);
    rebuild_paths(d);
    int cpus = 0;
    for (guint i = 0; i < d->boxes->len; i++) {
        struct box *b = g_ptr_array_index(d->boxes, i);
        if (b->depth == 1) {
            CHECK(strcmp(b->name, "cpu0") == 0 || strcmp(b->name, "cpu1") == 0);
            CHECK_U64(b->count, 7);
            cpus++;
        }
        if (b->depth == 2)
            CHECK(strstr(b->path, "all;cpu") == b->path);
    }
    CHECK_INT(cpus, 2);
    svg_doc_free(d);
    free(svg);
    out_profile_free(p);
}

/* Children are sorted and nothing depends on hash order or on which sample came first. */
static void test_deterministic(void)
{
    out_profile *a = two_cpus(false), *b = two_cpus(true);
    for (int per_cpu = 0; per_cpu < 2; per_cpu++) {
        char *first = write_text(a, OUT_SVG, per_cpu, "t"),
             *again = write_text(a, OUT_SVG, per_cpu, "t");
        char *reversed = write_text(b, OUT_SVG, per_cpu, "t");
        CHECK_STR(first, again);
        CHECK(strcmp(first, reversed) == 0);
        free(first);
        free(again);
        free(reversed);
    }
    out_profile_free(a);
    out_profile_free(b);
}

/* As in flamegraph.pl, a box under 0.1 px is not drawn (nor anything above it), but its samples
 * still count in its parent. */
static void test_narrow_boxes_left_out(void)
{
    out_profile *p = out_profile_new();
    uint32_t ms = out_profile_add_module(p, &spin_module);
    struct out_frame hot[] = {{0x401005, ms, false, false}, {0x401110, ms, true, false}};
    struct out_frame rare[] = {{0x401005, ms, false, false}, {0x401210, ms, true, false}};
    struct out_sample s = {
        .pid = 1, .comm = "spin", .mode = OUT_MODE_USER, .n_frames = 2, .n_user = 2, .frames = hot};
    for (int i = 0; i < 20000; i++)
        out_profile_add(p, &s);
    s.frames = rare;
    out_profile_add(p, &s); /* 1180 px / 20001: 0.06 px */
    char *svg = write_text(p, OUT_SVG, false, NULL);
    struct svg_doc *d = parse_svg(svg);
    rebuild_paths(d);
    CHECK_INT(d->boxes->len, 4); /* all, spin (1), _start, main */
    struct box *start = g_ptr_array_index(d->boxes, 2);
    CHECK_STR(start->path, "all;spin (1);_start");
    CHECK_U64(start->count, 20001);
    CHECK_INT(start->width, WIDTH_H);
    CHECK(strstr(svg, "operator") == NULL);
    svg_doc_free(d);
    free(svg);
    out_profile_free(p);
}

/* The title and a comm that is not UTF-8 still make well-formed XML; no samples is a valid
 * image saying so. */
static void test_title_and_empty(void)
{
    out_profile *p = out_profile_new();
    char *svg = write_text(p, OUT_SVG, false, "a<b & \"c\"\x01");
    struct svg_doc *d = parse_svg(svg);
    CHECK_STR(d->title, "a<b & \"c\"_");
    CHECK_INT(d->boxes->len, 0);
    CHECK(strstr(svg, "no samples") != NULL);
    svg_doc_free(d);
    free(svg);

    struct out_sample s = {.pid = 4, .comm = "bad\xff\xfe", .mode = OUT_MODE_KERNEL};
    out_profile_add(p, &s);
    svg = write_text(p, OUT_SVG, false, NULL);
    CHECK(g_utf8_validate(svg, -1, NULL));
    d = parse_svg(svg);
    CHECK_INT(d->boxes->len, 2);
    struct box *root = g_ptr_array_index(d->boxes, 1);
    CHECK_STR(root->name, "bad\xef\xbf\xbd\xef\xbf\xbd (4)");
    CHECK_STR(root->percent, "100.00");
    svg_doc_free(d);
    free(svg);
    out_profile_free(p);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        out_dir = argv[1];
    test_against_folded();
    test_per_cpu_levels();
    test_deterministic();
    test_narrow_boxes_left_out();
    test_title_and_empty();
    return harness_result();
}
