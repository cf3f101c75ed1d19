/* Fuzz target: target-description XML (gdb_tdesc_parse, gdb_tdesc_find).
 *
 * Input: documents separated by NUL bytes, the first the main one (target.xml), the second the
 * one includes are served (QEMU's i386-64bit.xml), up to MAX_DOCS. The include callback serves,
 * for an href that starts with "target", the main document again (a self-include: the depth
 * limit must stop it), for one that starts with "missing" an error, and for any other href the
 * document numbered by the href's first digit (1 when it has none; past the last, the last), so
 * that a chain of distinct documents can nest as deep as the limit allows. As the client does,
 * the result is parsed into a zeroed gdb_tdesc.
 *
 * Checked, whether the parse fails or not: n_regs within [0, GDB_MAX_REGS], every name,
 * feature and the architecture NUL-terminated in their arrays, bitsizes positive whole bytes,
 * regnums non-negative, gdb_tdesc_find finding a register of each name at or before it, a
 * failure coming with a message, and at most MAX_FETCHES includes fetched per parse. After a
 * successful parse: the registers taken in regnum order lie end to end from offset 0 (offsets
 * increasing, each register within g_size) and g_size is the sum of their sizes. libFuzzer's
 * -timeout catches any other unbounded work.
 *
 * Finding fixed: include-fanout-hang (regressions/gdb_tdesc/), 80 includes in each of a chain of
 * five documents, took 41 million fetches before gdb_tdesc.c capped includes per parse. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gdb.h"

#define MAX_DOCS 6

struct docs {
    const char *text[MAX_DOCS]; /* [0] is the main document */
    int n;
    int fetches; /* include callbacks in the current parse */
};

/* gdb_tdesc.c's GDB_MAX_INCLUDES: without a cap on the included documents of one parse, the
 * depth limit alone lets k includes per document cost k^4 fetches. */
#define MAX_FETCHES 64

/* The document an href other than target... and missing... names. */
static const char *named(const struct docs *docs, const char *href)
{
    if (docs->n < 2)
        return "";
    int i = 1;
    for (const char *c = href; *c; c++)
        if (*c >= '0' && *c <= '9') {
            i = *c - '0';
            break;
        }
    if (i < 1)
        i = 1;
    return docs->text[i < docs->n ? i : docs->n - 1];
}

static int serve(void *ctx, const char *href, char **text, struct qp_error *err)
{
    struct docs *docs = ctx;
    FUZZ_ASSERT(memchr(href, '\0', 128) != NULL);
    FUZZ_ASSERT(++docs->fetches <= MAX_FETCHES);
    if (strncmp(href, "missing", 7) == 0)
        return qp_error_set(err, -ENOENT, "no document %s", href);
    *text = strdup(strncmp(href, "target", 6) == 0 ? docs->text[0] : named(docs, href));
    FUZZ_ASSERT(*text != NULL);
    return 0;
}

static bool terminated(const char *s, size_t size)
{
    return memchr(s, '\0', size) != NULL;
}

static void check_registers(const struct gdb_tdesc *d)
{
    FUZZ_ASSERT(d->n_regs >= 0 && d->n_regs <= GDB_MAX_REGS);
    FUZZ_ASSERT(terminated(d->arch, sizeof d->arch));
    for (int i = 0; i < d->n_regs; i++) {
        const struct gdb_reg *r = &d->regs[i];
        FUZZ_ASSERT(terminated(r->name, sizeof r->name));
        FUZZ_ASSERT(terminated(r->feature, sizeof r->feature));
        FUZZ_ASSERT(r->bitsize > 0 && r->bitsize % 8 == 0);
        FUZZ_ASSERT(r->regnum >= 0);
        int found = gdb_tdesc_find(d, r->name);
        FUZZ_ASSERT(found >= 0 && found <= i && strcmp(d->regs[found].name, r->name) == 0);
    }
}

/* Registers in regnum order (ties in document order) tile [0, g_size). */
static void check_layout(const struct gdb_tdesc *d)
{
    bool placed[GDB_MAX_REGS] = {false};
    size_t off = 0;
    for (int k = 0; k < d->n_regs; k++) {
        int next = -1;
        for (int i = 0; i < d->n_regs; i++)
            if (!placed[i] && (next < 0 || d->regs[i].regnum < d->regs[next].regnum))
                next = i;
        placed[next] = true;
        const struct gdb_reg *r = &d->regs[next];
        FUZZ_ASSERT(r->offset == off);
        off += (size_t)r->bitsize / 8;
        FUZZ_ASSERT(off <= d->g_size);
    }
    FUZZ_ASSERT(off == d->g_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The documents as C strings: each ends at a NUL, the last at the end of the input. */
    char *text = malloc(size + 1);
    FUZZ_ASSERT(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    struct docs docs = {.text = {text}, .n = 1};
    for (char *s = text; docs.n < MAX_DOCS && (s = memchr(s, '\0', text + size - s)) != NULL;)
        docs.text[docs.n++] = ++s;

    struct gdb_tdesc *d = calloc(1, sizeof *d);
    FUZZ_ASSERT(d != NULL);
    struct qp_error err = {0};
    int rc = gdb_tdesc_parse(d, docs.text[0], serve, &docs, &err);
    FUZZ_ASSERT(rc == 0 || (rc < 0 && err.msg[0] != '\0'));
    check_registers(d);
    if (rc == 0)
        check_layout(d);

    /* Without an include callback the includes are skipped. */
    struct gdb_tdesc *flat = calloc(1, sizeof *flat);
    FUZZ_ASSERT(flat != NULL);
    struct qp_error flat_err = {0};
    rc = gdb_tdesc_parse(flat, docs.text[0], NULL, NULL, &flat_err);
    FUZZ_ASSERT(rc == 0 || (rc < 0 && flat_err.msg[0] != '\0'));
    check_registers(flat);
    if (rc == 0)
        check_layout(flat);

    free(flat);
    free(d);
    free(text);
    return 0;
}
