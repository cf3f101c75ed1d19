/* An interactive flame graph in one SVG file, like flamegraph.pl's (whose layout it follows:
 * "all" at the bottom, one box per distinct call path, widths by sample count, children sorted
 * by name, boxes narrower than 0.1 px left out) but written here, with its own script: click to
 * zoom, "Reset Zoom", Search (or Ctrl-F) to highlight matches and show their share. The file
 * needs nothing else: no network, no fonts, no external script.
 *
 * Geometry is computed in hundredths of a pixel from cumulative sample offsets, so that the
 * boxes of a row tile exactly: a parent is as wide as its children plus its own samples. */
#include "output.h"

#include <glib.h>
#include <inttypes.h>
#include <string.h>

#define IMAGE_WIDTH  1200
#define XPAD         10 /* left and right margin, px */
#define FRAME_HEIGHT 16
#define FONT_SIZE    12
#define YPAD_TOP     (FONT_SIZE * 3)      /* title, Reset Zoom, Search */
#define YPAD_BOTTOM  (FONT_SIZE * 2 + 10) /* details and the matched share */
/* In hundredths of a pixel: the drawing width, flamegraph.pl's minimum box width (0.1 px), and
 * the average glyph width of a 12 px Verdana (0.59 em) that decides how much of a name fits. */
#define WIDTH_H     ((IMAGE_WIDTH - 2 * XPAD) * 100)
#define MIN_WIDTH_H 10
#define GLYPH_H     ((FONT_SIZE * 59))

enum fg_kind { FG_ROOT, FG_USER, FG_KERNEL, FG_MARKER };

struct fg_node {
    const char *name; /* borrowed from the out_names cache or the graph's strings */
    struct fg_node *parent, *first_child, *next_sibling;
    uint64_t count; /* samples through this node */
    uint8_t kind;
    bool sorted; /* children linked in name order */
};

/* Nodes come from blocks and children are found through one table of (parent, name) for the
 * whole graph: a profile with a million distinct stacks makes millions of nodes, and a table
 * or array per node would weigh more than the nodes. */
#define NODE_BLOCK 4096

struct fg_graph {
    struct fg_node *all;
    GPtrArray *blocks; /* struct fg_node[NODE_BLOCK], owned */
    guint used;        /* nodes taken from the last block */
    GHashTable *nodes; /* a set of every node but "all", by (parent, name) */
    GStringChunk *strings;
};

static guint node_hash(gconstpointer p)
{
    const struct fg_node *node = p;
    return g_str_hash(node->name) ^ g_direct_hash(node->parent);
}

static gboolean node_equal(gconstpointer a, gconstpointer b)
{
    const struct fg_node *na = a, *nb = b;
    return na->parent == nb->parent && strcmp(na->name, nb->name) == 0;
}

static struct fg_node *node_new(struct fg_graph *g, struct fg_node *parent, const char *name,
                                uint8_t kind)
{
    if (g->blocks->len == 0 || g->used == NODE_BLOCK) {
        g_ptr_array_add(g->blocks, g_new(struct fg_node, NODE_BLOCK));
        g->used = 0;
    }
    struct fg_node *node =
        (struct fg_node *)g_ptr_array_index(g->blocks, g->blocks->len - 1) + g->used++;
    *node = (struct fg_node){.name = name, .parent = parent, .kind = kind};
    return node;
}

/* Nodes merge by name, as in flamegraph.pl; a merged node takes the strongest kind among its
 * frames (a marker over kernel code over user code), whatever the order they came in. */
static struct fg_node *child(struct fg_graph *g, struct fg_node *parent, const char *name,
                             uint8_t kind)
{
    struct fg_node probe = {.name = name, .parent = parent};
    struct fg_node *c = g_hash_table_lookup(g->nodes, &probe);
    if (!c) {
        c = node_new(g, parent, name, kind);
        c->next_sibling = parent->first_child;
        parent->first_child = c;
        g_hash_table_add(g->nodes, c);
    } else if (kind > c->kind) {
        c->kind = kind;
    }
    return c;
}

static uint8_t kind_of(const struct out_name *fn)
{
    return fn->marker ? FG_MARKER : fn->kernel ? FG_KERNEL : FG_USER;
}

/* Adds count samples of stack s (on vCPU cpu when cpu >= 0) along its path from "all". */
static void add_path(struct fg_graph *g, out_names *n, const struct out_stack *s, int64_t cpu,
                     bool roots_by_name, uint64_t count, const struct out_name **scratch)
{
    char text[64];
    struct fg_node *at = g->all;
    at->count += count;
    if (cpu >= 0) {
        snprintf(text, sizeof text, "cpu%" PRId64, cpu);
        at = child(g, at, g_string_chunk_insert_const(g->strings, text), FG_ROOT);
        at->count += count;
    }
    out_stack_root_as(s, roots_by_name, text, sizeof text);
    at = child(g, at, g_string_chunk_insert_const(g->strings, text), FG_ROOT);
    at->count += count;
    out_stack_display(n, s, scratch);
    for (int i = 0; i < out_stack_display_len(s); i++) {
        at = child(g, at, scratch[i]->name, kind_of(scratch[i]));
        at->count += count;
    }
}

static struct fg_graph *build(const out_profile *p, out_names *n, bool per_cpu, bool roots_by_name)
{
    struct fg_graph *g = g_new0(struct fg_graph, 1);
    g->blocks = g_ptr_array_new_with_free_func(g_free);
    g->nodes = g_hash_table_new(node_hash, node_equal);
    g->strings = g_string_chunk_new(1024);
    g->all = node_new(g, NULL, "all", FG_ROOT);
    /* Samples per (vCPU, stack) first: a path is walked once per distinct stack, not per
     * sample. */
    GHashTable *counts = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    const struct out_record *r = out_profile_samples(p);
    for (size_t i = 0; i < out_profile_sample_count(p); i++) {
        gint64 key = (gint64)(((uint64_t)(per_cpu ? r[i].cpu : 0) << 32) | r[i].stack);
        uint64_t *count = g_hash_table_lookup(counts, &key);
        if (!count) {
            count = g_new0(uint64_t, 1);
            g_hash_table_insert(counts, g_memdup2(&key, sizeof key), count);
        }
        (*count)++;
    }
    const struct out_name **scratch = NULL;
    int scratch_len = 0;
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, counts);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        gint64 k = *(gint64 *)key;
        const struct out_stack *s = out_profile_stack(p, (uint32_t)(k & 0xffffffff));
        int len = out_stack_display_len(s);
        if (len > scratch_len) {
            scratch_len = len * 2;
            scratch = g_renew(const struct out_name *, scratch, scratch_len);
        }
        add_path(g, n, s, per_cpu ? (int64_t)(k >> 32) : -1, roots_by_name, *(uint64_t *)value,
                 scratch);
    }
    g_free(scratch);
    g_hash_table_destroy(counts);
    return g;
}

static void graph_free(struct fg_graph *g)
{
    g_hash_table_destroy(g->nodes);
    g_ptr_array_free(g->blocks, TRUE);
    g_string_chunk_free(g->strings);
    g_free(g);
}

static int by_name(gconstpointer a, gconstpointer b)
{
    return strcmp((*(struct fg_node *const *)a)->name, (*(struct fg_node *const *)b)->name);
}

/* ---- Drawing ----------------------------------------------------------------------------- */

/* Text for XML character data and attribute values: UTF-8 (a guest's comm may not be),
 * no control characters (XML 1.0 forbids them), the five special characters escaped. */
static void put_escaped(GString *out, const char *text)
{
    char *valid = g_utf8_make_valid(text, -1);
    for (const char *c = valid; *c; c++) {
        switch (*c) {
        case '&':
            g_string_append(out, "&amp;");
            break;
        case '<':
            g_string_append(out, "&lt;");
            break;
        case '>':
            g_string_append(out, "&gt;");
            break;
        case '"':
            g_string_append(out, "&quot;");
            break;
        case '\'':
            g_string_append(out, "&apos;");
            break;
        default:
            g_string_append_c(out, (unsigned char)*c < 0x20 ? '_' : *c);
        }
    }
    g_free(valid);
}

/* What of name fits in width_h: all of it, its start and "..", or nothing (under 3 glyphs). */
static void put_label(GString *out, const char *name, int64_t width_h)
{
    int64_t fit = (width_h - 300) / GLYPH_H;
    if (fit < 3)
        return;
    char *valid = g_utf8_make_valid(name, -1);
    if (g_utf8_strlen(valid, -1) <= fit) {
        put_escaped(out, valid);
    } else {
        char *end = g_utf8_offset_to_pointer(valid, fit - 2);
        *end = '\0';
        put_escaped(out, valid);
        g_string_append(out, "..");
    }
    g_free(valid);
}

/* FNV-1a: a color per name that stays the same from run to run. */
static uint32_t name_hash(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 16777619u;
    return h;
}

/* Warm for kernel code (flamegraph.pl's "hot"), blue-green for user code, gray for markers, a
 * pale neutral for the levels qprof adds (all, vCPUs, processes). */
static void put_color(GString *out, const struct fg_node *node)
{
    uint32_t h = name_hash(node->name);
    unsigned v1 = h & 0xff, v2 = h >> 8 & 0xff, v3 = h >> 16 & 0xff;
    switch (node->kind) {
    case FG_KERNEL:
        g_string_append_printf(out, "rgb(%u,%u,%u)", 205 + 50 * v1 / 255, 230 * v2 / 255,
                               55 * v3 / 255);
        break;
    case FG_USER:
        g_string_append_printf(out, "rgb(%u,%u,%u)", 50 + 60 * v1 / 255, 160 + 60 * v2 / 255,
                               180 + 60 * v3 / 255);
        break;
    case FG_MARKER:
        g_string_append(out, "rgb(160,160,160)");
        break;
    default:
        g_string_append(out, "rgb(200,200,215)");
    }
}

static void put_hundredths(GString *out, int64_t v)
{
    g_string_append_printf(out, "%" PRId64 ".%02d", v / 100, (int)(v % 100));
}

struct fg_layout {
    uint64_t total;
    int height; /* of the image, px */
    int max_depth;
    const struct out_write_opts *opts; /* its svg_fill, when set, colours the boxes */
    GPtrArray *path;                   /* svg_fill's names, reused */
};

/* The caller's fill for a differential graph: the names from the level above "all" down to
 * node. False: the usual colour. */
static bool put_hook_color(GString *out, const struct fg_layout *l, const struct fg_node *node)
{
    if (!l->opts->svg_fill || !node->parent)
        return false;
    g_ptr_array_set_size(l->path, 0);
    for (const struct fg_node *at = node; at->parent; at = at->parent)
        g_ptr_array_add(l->path, (gpointer)at->name);
    for (guint i = 0, j = l->path->len - 1; i < j; i++, j--) {
        gpointer swap = l->path->pdata[i];
        l->path->pdata[i] = l->path->pdata[j];
        l->path->pdata[j] = swap;
    }
    char fill[64];
    if (!l->opts->svg_fill(l->opts->svg_fill_ctx, (const char *const *)l->path->pdata,
                           (int)l->path->len, node->count, l->total, fill, sizeof fill))
        return false;
    put_escaped(out, fill);
    return true;
}

/* x of a cumulative sample offset, in hundredths of a pixel. */
static int64_t x_at(const struct fg_layout *l, uint64_t offset)
{
    return XPAD * 100 + (int64_t)((offset * (uint64_t)WIDTH_H + l->total / 2) / l->total);
}

static void put_frame(GString *out, const struct fg_layout *l, const struct fg_node *node,
                      uint64_t offset, int depth)
{
    int64_t x = x_at(l, offset), width = x_at(l, offset + node->count) - x;
    int y = l->height - YPAD_BOTTOM - (depth + 1) * FRAME_HEIGHT + 1;
    g_string_append(out, "<g class=\"frame\"><title>");
    put_escaped(out, node->name);
    g_string_append_printf(out, " (%" PRIu64 " samples, %.2f%%)</title><rect x=\"", node->count,
                           100.0 * (double)node->count / (double)l->total);
    put_hundredths(out, x);
    g_string_append_printf(out, "\" y=\"%d\" width=\"", y);
    put_hundredths(out, width);
    g_string_append_printf(out, "\" height=\"%d\" fill=\"", FRAME_HEIGHT - 1);
    if (!put_hook_color(out, l, node))
        put_color(out, node);
    g_string_append(out, "\" rx=\"2\" ry=\"2\"/><text x=\"");
    put_hundredths(out, x + 300);
    g_string_append_printf(out, "\" y=\"%d\">", y + 11);
    put_label(out, node->name, width);
    g_string_append(out, "</text></g>\n");
}

struct fg_visit {
    struct fg_node *node;
    uint64_t offset; /* samples left of it */
    int depth;
};

/* Links node's children in name order, once. */
static void sort_children(struct fg_node *node, GPtrArray *scratch)
{
    if (node->sorted)
        return;
    node->sorted = true;
    g_ptr_array_set_size(scratch, 0);
    for (struct fg_node *c = node->first_child; c; c = c->next_sibling)
        g_ptr_array_add(scratch, c);
    g_ptr_array_sort(scratch, by_name);
    struct fg_node **link = &node->first_child;
    for (guint i = 0; i < scratch->len; i++) {
        *link = g_ptr_array_index(scratch, i);
        link = &(*link)->next_sibling;
    }
    *link = NULL;
}

/* Walks the boxes wide enough to draw, parents before children, children by name, without
 * recursion (a record file may hold stacks thousands deep). With out NULL it only measures the
 * depth; else it writes every box. */
static int walk(struct fg_graph *g, const struct fg_layout *l, GString *out, FILE *f)
{
    GArray *todo = g_array_new(FALSE, FALSE, sizeof(struct fg_visit));
    GPtrArray *scratch = g_ptr_array_new();
    struct fg_visit v = {g->all, 0, 0};
    int max_depth = 0;
    g_array_append_val(todo, v);
    while (todo->len) {
        v = g_array_index(todo, struct fg_visit, todo->len - 1);
        g_array_set_size(todo, todo->len - 1);
        if (v.depth > max_depth)
            max_depth = v.depth;
        if (out) {
            g_string_truncate(out, 0);
            put_frame(out, l, v.node, v.offset, v.depth);
            fputs(out->str, f);
        }
        sort_children(v.node, scratch);
        guint first = todo->len;
        uint64_t offset = v.offset;
        for (struct fg_node *c = v.node->first_child; c; c = c->next_sibling) {
            struct fg_visit cv = {c, offset, v.depth + 1};
            offset += c->count;
            if (x_at(l, offset) - x_at(l, cv.offset) >= MIN_WIDTH_H)
                g_array_append_val(todo, cv);
        }
        /* reversed, so that the first child is drawn next */
        for (guint i = first, end = todo->len; i + 1 < end; i++, end--) {
            struct fg_visit swap = g_array_index(todo, struct fg_visit, i);
            g_array_index(todo, struct fg_visit, i) = g_array_index(todo, struct fg_visit, end - 1);
            g_array_index(todo, struct fg_visit, end - 1) = swap;
        }
    }
    g_ptr_array_free(scratch, TRUE);
    g_array_free(todo, TRUE);
    return max_depth;
}

static const char svg_style[] =
    "<defs><linearGradient id=\"background\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
    "<stop stop-color=\"#eeeeee\" offset=\"5%\"/><stop stop-color=\"#eeeeb0\" offset=\"95%\"/>"
    "</linearGradient></defs>\n"
    "<style type=\"text/css\">\n"
    "text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
    "#title { text-anchor: middle; font-size: 17px; }\n"
    "#search, #unzoom { cursor: pointer; }\n"
    ".frame { cursor: pointer; }\n"
    ".frame:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; }\n"
    ".hide { display: none; }\n"
    ".parent { opacity: 0.5; }\n"
    "</style>\n";

/* The viewer: plain ECMAScript 5 without libraries. Every box keeps its original x, width and
 * fill in data- attributes, so zooming and searching can always go back. */
static const char svg_script[] =
    "<script type=\"text/ecmascript\"><![CDATA[\n"
    "'use strict';\n"
    "var W = 1200, XPAD = 10, GLYPH = 12 * 0.59, MATCH_FILL = 'rgb(230,0,230)';\n"
    "var frames, details, unzoomButton, searchButton, matched, searchTerm = null;\n"
    "function rectOf(g) { return g.getElementsByTagName('rect')[0]; }\n"
    "function titleOf(g) { return g.getElementsByTagName('title')[0].textContent; }\n"
    "function nameOf(g) { var t = titleOf(g); return t.substring(0, t.lastIndexOf(' (')); }\n"
    "function frameOf(e) {\n"
    "  for (; e && e.getAttribute; e = e.parentNode)\n"
    "    if (e.getAttribute('class') && e.classList.contains('frame')) return e;\n"
    "  return null;\n"
    "}\n"
    "function allFrames() { return frames.getElementsByClassName('frame'); }\n"
    "function num(e, attr) { return parseFloat(e.getAttribute(attr)); }\n"
    "function place(g, x, w) {\n"
    "  var r = rectOf(g), t = g.getElementsByTagName('text')[0], name = nameOf(g);\n"
    "  var fit = Math.floor((w - 3) / GLYPH);\n"
    "  r.setAttribute('x', x.toFixed(2));\n"
    "  r.setAttribute('width', w.toFixed(2));\n"
    "  t.setAttribute('x', (x + 3).toFixed(2));\n"
    "  t.textContent = fit < 3 ? '' : name.length <= fit ? name : name.substring(0, fit - 2) + "
    "'..';\n"
    "}\n"
    "function init(evt) {\n"
    "  frames = document.getElementById('frames');\n"
    "  details = document.getElementById('details');\n"
    "  unzoomButton = document.getElementById('unzoom');\n"
    "  searchButton = document.getElementById('search');\n"
    "  matched = document.getElementById('matched');\n"
    "  var all = allFrames();\n"
    "  for (var i = 0; i < all.length; i++) {\n"
    "    var r = rectOf(all[i]);\n"
    "    r.setAttribute('data-x', r.getAttribute('x'));\n"
    "    r.setAttribute('data-width', r.getAttribute('width'));\n"
    "    r.setAttribute('data-fill', r.getAttribute('fill'));\n"
    "  }\n"
    "  frames.addEventListener('click', function (e) { var g = frameOf(e.target); if (g) "
    "zoom(g); });\n"
    "  frames.addEventListener('mouseover', function (e) {\n"
    "    var g = frameOf(e.target);\n"
    "    if (g) details.textContent = titleOf(g);\n"
    "  });\n"
    "  frames.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
    "  unzoomButton.addEventListener('click', unzoom);\n"
    "  searchButton.addEventListener('click', function () {\n"
    "    if (searchTerm === null) askSearch(); else resetSearch();\n"
    "  });\n"
    "  window.addEventListener('keydown', function (e) {\n"
    "    if (e.key === 'F3' || ((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F'))) {\n"
    "      e.preventDefault();\n"
    "      askSearch();\n"
    "    } else if (e.key === 'Escape') {\n"
    "      resetSearch();\n"
    "    }\n"
    "  });\n"
    "}\n"
    "function zoom(target) {\n"
    "  var tr = rectOf(target), tx = num(tr, 'data-x'), tw = num(tr, 'data-width');\n"
    "  var ty = num(tr, 'y'), scale = (W - 2 * XPAD) / tw, all = allFrames(), eps = 0.005;\n"
    "  for (var i = 0; i < all.length; i++) {\n"
    "    var g = all[i], r = rectOf(g), x = num(r, 'data-x'), w = num(r, 'data-width');\n"
    "    var y = num(r, 'y');\n"
    "    g.classList.remove('hide');\n"
    "    g.classList.remove('parent');\n"
    "    if (y > ty && x <= tx + eps && x + w >= tx + tw - eps) {\n"
    "      g.classList.add('parent');\n"
    "      place(g, XPAD, W - 2 * XPAD);\n"
    "    } else if (y <= ty && x >= tx - eps && x + w <= tx + tw + eps) {\n"
    "      place(g, XPAD + (x - tx) * scale, w * scale);\n"
    "    } else {\n"
    "      g.classList.add('hide');\n"
    "    }\n"
    "  }\n"
    "  unzoomButton.classList.remove('hide');\n"
    "  if (searchTerm !== null) search(searchTerm);\n"
    "}\n"
    "function unzoom() {\n"
    "  var all = allFrames();\n"
    "  for (var i = 0; i < all.length; i++) {\n"
    "    var g = all[i], r = rectOf(g);\n"
    "    g.classList.remove('hide');\n"
    "    g.classList.remove('parent');\n"
    "    place(g, num(r, 'data-x'), num(r, 'data-width'));\n"
    "  }\n"
    "  unzoomButton.classList.add('hide');\n"
    "  if (searchTerm !== null) search(searchTerm);\n"
    "}\n"
    "function askSearch() {\n"
    "  var term = window.prompt('Search for (regular expression):', searchTerm || '');\n"
    "  if (term === null) return;\n"
    "  if (term === '') resetSearch(); else search(term);\n"
    "}\n"
    "function search(term) {\n"
    "  var re, all = allFrames(), spans = [];\n"
    "  try { re = new RegExp(term); } catch (e) { window.alert('Not a regular expression: ' + "
    "e.message); return; }\n"
    "  searchTerm = term;\n"
    "  for (var i = 0; i < all.length; i++) {\n"
    "    var g = all[i], r = rectOf(g);\n"
    "    if (!re.test(nameOf(g))) { r.setAttribute('fill', r.getAttribute('data-fill')); "
    "continue; }\n"
    "    r.setAttribute('fill', MATCH_FILL);\n"
    "    if (!g.classList.contains('hide')) spans.push([num(r, 'x'), num(r, 'width')]);\n"
    "  }\n"
    "  // a match inside another match is the same samples: count the union of the spans\n"
    "  spans.sort(function (a, b) { return a[0] - b[0]; });\n"
    "  var covered = 0, end = -Infinity;\n"
    "  for (var k = 0; k < spans.length; k++) {\n"
    "    var from = Math.max(spans[k][0], end), to = spans[k][0] + spans[k][1];\n"
    "    if (to > from) covered += to - from;\n"
    "    end = Math.max(end, to);\n"
    "  }\n"
    "  searchButton.textContent = 'Reset Search';\n"
    "  matched.textContent = 'Matched: ' + (100 * covered / (W - 2 * XPAD)).toFixed(1) + '%';\n"
    "}\n"
    "function resetSearch() {\n"
    "  var all = allFrames();\n"
    "  for (var i = 0; i < all.length; i++) {\n"
    "    var r = rectOf(all[i]);\n"
    "    r.setAttribute('fill', r.getAttribute('data-fill'));\n"
    "  }\n"
    "  searchTerm = null;\n"
    "  searchButton.textContent = 'Search';\n"
    "  matched.textContent = ' ';\n"
    "}\n"
    "]]></script>\n";

/* The legend row of a differential graph: a swatch and its text per entry, under the title. */
#define LEGEND_HEIGHT 20

static bool has_legend(const struct out_write_opts *o)
{
    return o->svg_fill && o->svg_legend && o->svg_legend[0];
}

static void put_legend(const struct out_write_opts *o, FILE *f, GString *buf)
{
    if (!has_legend(o))
        return;
    fputs("<g id=\"legend\">\n", f);
    int x = XPAD;
    for (const char *const *e = o->svg_legend; e[0] && e[1]; e += 2) {
        g_string_truncate(buf, 0);
        put_escaped(buf, e[0]);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>", x,
                YPAD_TOP + 2, buf->str);
        g_string_truncate(buf, 0);
        put_escaped(buf, e[1]);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", x + 16, YPAD_TOP + 12, buf->str);
        x += 16 + (int)strlen(e[1]) * 8 + 24;
    }
    fputs("</g>\n", f);
}

static void put_header(const struct fg_layout *l, const char *title, FILE *f, GString *buf)
{
    fprintf(f,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "xmlns=\"http://www.w3.org/2000/svg\" onload=\"init(evt)\">\n",
            IMAGE_WIDTH, l->height, IMAGE_WIDTH, l->height);
    fputs(svg_style, f);
    fputs(svg_script, f);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"url(#background)\"/>\n",
            IMAGE_WIDTH, l->height);
    g_string_truncate(buf, 0);
    put_escaped(buf, title);
    fprintf(f, "<text id=\"title\" x=\"%d\" y=\"24\">%s</text>\n", IMAGE_WIDTH / 2, buf->str);
    fprintf(f, "<text id=\"unzoom\" class=\"hide\" x=\"%d\" y=\"24\">Reset Zoom</text>\n", XPAD);
    fprintf(f, "<text id=\"search\" x=\"%d\" y=\"24\">Search</text>\n", IMAGE_WIDTH - XPAD - 100);
    put_legend(l->opts, f, buf);
    fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", XPAD, l->height - 17);
    fprintf(f, "<text id=\"matched\" x=\"%d\" y=\"%d\"> </text>\n", IMAGE_WIDTH - XPAD - 100,
            l->height - 17);
}

int out_write_svg(const out_profile *p, out_names *n, const struct out_write_opts *o, FILE *f,
                  struct qp_error *err)
{
    struct fg_graph *g = build(p, n, o->per_cpu, o->roots_by_name);
    struct fg_layout l = {.total = g->all->count, .opts = o, .path = g_ptr_array_new()};
    GString *buf = g_string_new(NULL);
    l.max_depth = l.total ? walk(g, &l, NULL, f) : 0;
    l.height = YPAD_TOP + (has_legend(o) ? LEGEND_HEIGHT : 0) + (l.max_depth + 1) * FRAME_HEIGHT +
               YPAD_BOTTOM;
    put_header(&l, o->title ? o->title : "qprof", f, buf);
    fputs("<g id=\"frames\">\n", f);
    if (l.total)
        walk(g, &l, buf, f);
    else
        fprintf(f, "<text x=\"%d\" y=\"%d\">no samples</text>\n", XPAD, l.height - YPAD_BOTTOM - 4);
    fputs("</g>\n</svg>\n", f);
    g_string_free(buf, TRUE);
    g_ptr_array_free(l.path, TRUE);
    graph_free(g);
    return 0; /* out_write checks the stream */
}
