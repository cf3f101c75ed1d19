/* Fuzz target: target-description XML (gdb_tdesc_parse, gdb_tdesc_find).
 *
 * Input: the main document, a NUL byte, then the document that includes are served (up to the
 * next NUL or the end). The include callback serves, for an href that starts with "target", the
 * main document again (a self-include: the depth limit must stop it), for one that starts with
 * "missing" an error, and for any other href the second document. As the client does, the
 * result is parsed into a zeroed gdb_tdesc.
 *
 * Checked, whether the parse fails or not: n_regs within [0, GDB_MAX_REGS], every name,
 * feature and the architecture NUL-terminated in their arrays, bitsizes positive whole bytes,
 * regnums non-negative, gdb_tdesc_find finding a register of each name at or before it, and a
 * failure coming with a message. After a successful parse: the registers taken in regnum order
 * lie end to end from offset 0 (offsets increasing, each register within g_size) and g_size is
 * the sum of their sizes. The work is bounded: libFuzzer's -timeout catches includes that
 * multiply. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gdb.h"

struct docs {
    const char *main, *included;
    int fetches;
};

static int serve(void *ctx, const char *href, char **text, struct qp_error *err)
{
    struct docs *docs = ctx;
    FUZZ_ASSERT(memchr(href, '\0', 128) != NULL);
    docs->fetches++;
    if (strncmp(href, "missing", 7) == 0)
        return qp_error_set(err, -ENOENT, "no document %s", href);
    *text = strdup(strncmp(href, "target", 6) == 0 ? docs->main : docs->included);
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
    /* Both documents as C strings: the main one ends at the first NUL, the included one at the
     * next. */
    char *text = malloc(size + 2);
    FUZZ_ASSERT(text != NULL);
    memcpy(text, data, size);
    text[size] = text[size + 1] = '\0';
    struct docs docs = {.main = text, .included = text + strlen(text) + 1};

    struct gdb_tdesc *d = calloc(1, sizeof *d);
    FUZZ_ASSERT(d != NULL);
    struct qp_error err = {0};
    int rc = gdb_tdesc_parse(d, docs.main, serve, &docs, &err);
    FUZZ_ASSERT(rc == 0 || (rc < 0 && err.msg[0] != '\0'));
    check_registers(d);
    if (rc == 0)
        check_layout(d);

    /* Without an include callback the includes are skipped. */
    struct gdb_tdesc *flat = calloc(1, sizeof *flat);
    FUZZ_ASSERT(flat != NULL);
    struct qp_error flat_err = {0};
    rc = gdb_tdesc_parse(flat, docs.main, NULL, NULL, &flat_err);
    FUZZ_ASSERT(rc == 0 || (rc < 0 && flat_err.msg[0] != '\0'));
    check_registers(flat);
    if (rc == 0)
        check_layout(flat);

    free(flat);
    free(d);
    free(text);
    return 0;
}
