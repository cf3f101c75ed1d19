/* Fuzz target: System.map / kallsyms text through sym_table_open_map, then lookups.
 *
 * Input: the map text. Every line's leading hex number (and its neighbours) is looked up, so
 * lookups land on and around the symbols the input defines; results must be consistent, also
 * under a slide. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "symbols.h"

#define MAX_PROBES 32

static void check_lookup(const sym_table *t, uint64_t addr)
{
    struct sym_info a, b;
    if (sym_lookup(t, addr, &a) != 0)
        return;
    FUZZ_ASSERT(a.name != NULL && a.start <= addr && a.offset == addr - a.start);
    FUZZ_ASSERT(a.size == 0 || a.offset < a.size);
    /* The same symbol answers for its own start, and its name is known to the name index. */
    FUZZ_ASSERT(sym_lookup(t, a.start, &b) == 0 && b.start == a.start);
    uint64_t by_name;
    FUZZ_ASSERT(sym_find_by_name(t, a.name, &by_name) == 0);
}

static size_t probes_from(const uint8_t *data, size_t size, uint64_t *probes)
{
    size_t n = 0;
    char line[64];
    for (size_t i = 0; i < size && n + 3 <= MAX_PROBES;) {
        size_t len = 0;
        while (i + len < size && data[i + len] != '\n' && len < sizeof line - 1) {
            line[len] = (char)data[i + len];
            len++;
        }
        line[len] = '\0';
        uint64_t addr = strtoull(line, NULL, 16);
        probes[n++] = addr;
        probes[n++] = addr + 1;
        probes[n++] = addr - 1;
        const uint8_t *nl = memchr(data + i, '\n', size - i);
        i = nl ? (size_t)(nl - data) + 1 : size;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sym_table *t = NULL;
    struct qp_error err = {0};
    int rc = sym_table_open_map(fuzz_file_with(data, size), &t, &err);
    if (rc < 0) {
        FUZZ_ASSERT(t == NULL && err.msg[0] != '\0');
        return 0;
    }
    uint64_t probes[MAX_PROBES + 2] = {0, UINT64_MAX};
    size_t n = 2 + probes_from(data, size, probes + 2);
    for (size_t i = 0; i < n; i++)
        check_lookup(t, probes[i]);

    /* A slide moves every answer by the same amount. */
    struct sym_info before, after;
    for (size_t i = 2; i < n; i++) {
        int had = sym_lookup(t, probes[i], &before);
        sym_table_set_slide(t, 0x1000);
        int has = sym_lookup(t, probes[i] + 0x1000, &after);
        sym_table_set_slide(t, 0);
        FUZZ_ASSERT(had == has);
        if (had == 0)
            FUZZ_ASSERT(after.start == before.start + 0x1000 && after.offset == before.offset &&
                        strcmp(after.name, before.name) == 0);
    }
    FUZZ_ASSERT(sym_table_text_size(t) == 0 && sym_table_text_hash(t) == 0);
    (void)sym_table_count(t);
    (void)sym_table_name(t);
    sym_table_free(t);
    return 0;
}
