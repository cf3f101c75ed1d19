/* Fuzz target: the kernel's module list (lx_modules_read: struct module, mod_kallsyms, symbol
 * and string tables, ORC tables), read from guest kernel memory, and the PC-relative address
 * decoders (arm64, riscv64) that find the list when kallsyms has no data symbols.
 *
 * Input: one byte of flags (bit 0: a kernel with ORC; bit 1: a full read), then the module area
 * from AREA (the list head at AREA); reads outside it fail. A read that succeeds must hand out
 * only text ranges inside the area and symbols, by address, inside a module's text (its _etext
 * at the end). */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "lx_internal.h"
#include "lx_module.h"

#define AREA LX_MODULES_START

struct memory {
    const uint8_t *bytes;
    size_t len;
    unsigned reads;
};

static int kread(void *ctx, uint64_t kva, void *buf, size_t len)
{
    struct memory *m = ctx;
    m->reads++;
    if (kva < AREA || kva - AREA > m->len || len > m->len - (kva - AREA))
        return -EFAULT;
    memcpy(buf, m->bytes + (kva - AREA), len);
    return 0;
}

/* The layout of tests/linux/test_lx_units.c's synthetic modules (the seeds use it). */
static const struct lx_module_offsets layout = {.module_size = 256,
                                                .list = 8,
                                                .name = 24,
                                                .name_len = 56,
                                                .core_base = 80,
                                                .core_size = 88,
                                                .core_text_size = 92,
                                                .num_orcs = 96,
                                                .orc_unwind_ip = 104,
                                                .orc_unwind = 112,
                                                .kallsyms = 120,
                                                .ks_symtab = 0,
                                                .ks_num_symtab = 8,
                                                .ks_strtab = 16,
                                                .ks_typetab = 24,
                                                .has_typetab = true,
                                                .state_unformed = 3,
                                                .has_init = true,
                                                .init_base = 128,
                                                .init_size = 136,
                                                .init_text_size = 140,
                                                .state_coming = 1};

static void check(const lx_modules *m, uint64_t end)
{
    for (size_t i = 0; i < lx_modules_count(m); i++) {
        const struct lx_module *mi = lx_modules_at(m, i);
        FUZZ_ASSERT(mi->base >= AREA && mi->text_size <= end - mi->base && mi->name[0]);
    }
    size_t n;
    const struct lx_symbol *s = lx_modules_symbols(m, &n);
    for (size_t i = 0; i < n; i++) {
        FUZZ_ASSERT(i == 0 || s[i - 1].addr <= s[i].addr);
        FUZZ_ASSERT(s[i].name && strstr(s[i].name, " ["));
        const struct lx_module *in = lx_modules_find(m, s[i].addr);
        FUZZ_ASSERT(in || strncmp(s[i].name, "_etext [", 8) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct lx_module_offsets o = layout;
    o.has_orc = data[0] & 1;
    o.area_start = AREA;
    o.area_end = AREA + (size - 1);
    struct memory mem = {.bytes = data + 1, .len = size - 1};
    struct lx_reader r = {.read = kread, .ctx = &mem};
    lx_modules *m = NULL;
    struct qp_error err = {0};
    if (o.area_end > o.area_start && lx_modules_read(&o, &r, AREA, data[0] & 2, &m, &err) == 0) {
        check(m, o.area_end);
        lx_modules_free(m);
    }
    uint64_t out[16];
    FUZZ_ASSERT(lx__arm64_pc_rel_addrs(data, size, AREA, out, 16) <= 16);
    FUZZ_ASSERT(lx__riscv64_pc_rel_addrs(data, size, AREA, out, 16) <= 16);
    return 0;
}
