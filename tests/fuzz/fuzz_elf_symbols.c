/* Fuzz target: ELF symbol loading (sym_table_open_elf), lookups, the .text hash and the store
 * of binaries by hash.
 *
 * Input: an ELF file. Lookups probe the .text range, addresses taken from the input, and the
 * addresses the name index gives back. */
#include <string.h>

#include "fuzz.h"
#include "symbols.h"

static void check_lookup(const sym_table *t, uint64_t addr)
{
    struct sym_info a;
    if (sym_lookup(t, addr, &a) != 0)
        return;
    FUZZ_ASSERT(a.name != NULL && a.start <= addr && a.offset == addr - a.start);
    FUZZ_ASSERT(a.size == 0 || a.offset < a.size);
}

static void check_store(const char *path, const sym_table *t)
{
    sym_store *store = sym_store_new();
    int rc = sym_store_add_file(store, path, NULL);
    if (rc == 0) {
        const sym_table *found = sym_store_find(store, sym_table_text_hash(t));
        FUZZ_ASSERT(sym_table_text_hash(t) == 0 || found != NULL);
    }
    sym_store_free(store);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file_with(data, size);
    sym_table *t = NULL;
    struct qp_error err = {0};
    (void)sym_text_hash(data, size);
    if (sym_table_open_elf(path, &t, &err) < 0) {
        FUZZ_ASSERT(t == NULL && err.msg[0] != '\0');
        return 0;
    }
    uint64_t text = sym_table_text_addr(t), text_size = sym_table_text_size(t);
    check_lookup(t, text);
    check_lookup(t, text + text_size / 2);
    check_lookup(t, text + text_size - 1);
    for (size_t off = 0; off + 8 <= size && off < 64 * 8; off += 8)
        check_lookup(t, fuzz_le(data, size, off, 8));
    static const char *const names[] = {"_start", "main", "f0", "spin"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        uint64_t addr;
        if (sym_find_by_name(t, names[i], &addr) == 0)
            check_lookup(t, addr);
    }
    (void)sym_table_count(t);
    check_store(path, t);
    sym_table_free(t);
    return 0;
}
