/* Target-description XML: just enough of it to lay out a `g` reply (see gdb.h). The documents
 * QEMU sends are small, flat and machine-written, so a tag scanner is enough; a general XML
 * parser would add a dependency for nothing. */
#include "gdb.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

#define GDB_MAX_INCLUDE_DEPTH 4
/* Included documents per parse, all levels together: the depth limit alone lets k includes per
 * document cost k^4 fetches (each a qXfer round trip). QEMU's targets include a handful. */
#define GDB_MAX_INCLUDES 64

/* Copies attribute `name` of the tag text [tag, end) into out. Returns false when absent. */
static bool attr(const char *tag, const char *end, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    for (const char *s = tag; s + nl + 2 < end; s++) {
        if ((s[-1] != ' ' && s[-1] != '\t' && s[-1] != '\n' && s[-1] != '\r') ||
            strncmp(s, name, nl) != 0 || s[nl] != '=')
            continue;
        char q = s[nl + 1];
        if (q != '"' && q != '\'')
            continue;
        const char *v = s + nl + 2, *ve = memchr(v, q, end - v);
        if (!ve)
            return false;
        size_t n = (size_t)(ve - v) < size - 1 ? (size_t)(ve - v) : size - 1;
        memcpy(out, v, n);
        out[n] = '\0';
        return true;
    }
    return false;
}

static bool is_tag(const char *s, const char *name)
{
    size_t n = strlen(name);
    return strncmp(s, name, n) == 0 &&
           (s[n] == ' ' || s[n] == '/' || s[n] == '>' || s[n] == '\n' || s[n] == '\t');
}

static int add_reg(struct gdb_tdesc *d, const char *tag, const char *end, const char *feature,
                   struct qp_error *err)
{
    char name[64] = "", bits[16] = "", num[16] = "";
    if (!attr(tag, end, "name", name, sizeof name) || !attr(tag, end, "bitsize", bits, sizeof bits))
        return qp_error_set(err, -EPROTO, "target description: <reg> without name or bitsize");
    if (d->n_regs >= GDB_MAX_REGS)
        return qp_error_set(err, -ERANGE, "target description: more than %d registers",
                            GDB_MAX_REGS);
    struct gdb_reg *r = &d->regs[d->n_regs];
    memset(r, 0, sizeof *r);
    g_strlcpy(r->name, name, sizeof r->name);
    g_strlcpy(r->feature, feature, sizeof r->feature);
    char *e;
    long b = strtol(bits, &e, 10);
    if (*e || b <= 0 || b > 4096 || b % 8)
        return qp_error_set(err, -EPROTO, "target description: register %s has bitsize %s", name,
                            bits);
    r->bitsize = (int)b;
    int prev = d->n_regs ? d->regs[d->n_regs - 1].regnum : -1;
    r->regnum = prev + 1;
    if (attr(tag, end, "regnum", num, sizeof num)) {
        long n = strtol(num, &e, 10);
        if (*e || n < 0 || n > 100000)
            return qp_error_set(err, -EPROTO, "target description: register %s has regnum %s", name,
                                num);
        r->regnum = (int)n;
    }
    d->n_regs++;
    return 0;
}

/* `g` carries registers in regnum order, each its bitsize wide. */
static void layout(struct gdb_tdesc *d)
{
    int order[GDB_MAX_REGS];
    for (int i = 0; i < d->n_regs; i++)
        order[i] = i;
    for (int i = 1; i < d->n_regs; i++) /* insertion sort: already ordered in practice */
        for (int j = i; j > 0 && d->regs[order[j]].regnum < d->regs[order[j - 1]].regnum; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    size_t off = 0;
    for (int i = 0; i < d->n_regs; i++) {
        d->regs[order[i]].offset = off;
        off += d->regs[order[i]].bitsize / 8;
    }
    d->g_size = off;
}

static int parse(struct gdb_tdesc *d, const char *xml, gdb_include_fn include, void *ctx, int depth,
                 int *includes_left, struct qp_error *err)
{
    char feature[48] = "";
    for (const char *s = strchr(xml, '<'); s; s = strchr(s + 1, '<')) {
        if (strncmp(s, "<!--", 4) == 0) {
            /* QEMU 7.2's i386-64bit.xml comments out ss_base, ds_base and es_base, which its `g`
             * reply does not carry: counting them shifts every later offset by 24 bytes. */
            const char *close = strstr(s + 4, "-->");
            if (!close)
                return qp_error_set(err, -EPROTO, "target description: unterminated comment");
            s = close + 2;
            continue;
        }
        const char *end = strchr(s, '>');
        if (!end)
            return qp_error_set(err, -EPROTO, "target description: unterminated tag");
        s++;
        int rc = 0;
        if (is_tag(s, "reg")) {
            rc = add_reg(d, s, end, feature, err);
        } else if (is_tag(s, "feature")) {
            attr(s, end, "name", feature, sizeof feature);
        } else if (is_tag(s, "architecture")) {
            const char *v = end + 1, *ve = strchr(v, '<');
            if (ve) {
                size_t n =
                    (size_t)(ve - v) < sizeof d->arch - 1 ? (size_t)(ve - v) : sizeof d->arch - 1;
                memcpy(d->arch, v, n);
                d->arch[n] = '\0';
            }
        } else if (is_tag(s, "xi:include") && include) {
            char href[128];
            if (!attr(s, end, "href", href, sizeof href))
                return qp_error_set(err, -EPROTO, "target description: include without href");
            if (depth >= GDB_MAX_INCLUDE_DEPTH)
                return qp_error_set(err, -EPROTO, "target description: includes nest too deep");
            if (--*includes_left < 0)
                return qp_error_set(err, -EPROTO, "target description: more than %d includes",
                                    GDB_MAX_INCLUDES);
            char *text = NULL;
            if ((rc = include(ctx, href, &text, err)) < 0)
                return qp_error_prefix(err, "fetching %s", href);
            rc = parse(d, text, include, ctx, depth + 1, includes_left, err);
            free(text);
        }
        if (rc < 0)
            return rc;
        s = end;
    }
    return 0;
}

int gdb_tdesc_parse(struct gdb_tdesc *d, const char *xml, gdb_include_fn include, void *ctx,
                    struct qp_error *err)
{
    int includes_left = GDB_MAX_INCLUDES;
    int rc = parse(d, xml, include, ctx, 0, &includes_left, err);
    if (rc == 0)
        layout(d);
    return rc;
}

int gdb_tdesc_find(const struct gdb_tdesc *d, const char *name)
{
    for (int i = 0; i < d->n_regs; i++)
        if (strcmp(d->regs[i].name, name) == 0)
            return i;
    return -1;
}
