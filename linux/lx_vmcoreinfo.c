/* vmcoreinfo: the KEY=VALUE text the kernel keeps for crash dumps, found by scanning RAM for
 * its ELF note ("VMCOREINFO", type 0) or its bare text page (starting "OSRELEASE="). */
#define _GNU_SOURCE
#include "lx_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOTE_NAME      "VMCOREINFO"
#define NOTE_DESC_OFF  24   /* namesz, descsz, type (12 bytes), "VMCOREINFO\0" padded to 12 */
#define VMCOREINFO_MAX 8192 /* the text is one page; the note adds a header past it */

static bool parse_hex(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    *out = strtoull(v, &end, 16);
    return !errno && end != v && (*end == '\n' || *end == '\0');
}

static bool parse_dec(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return !errno && end != v && (*end == '\n' || *end == '\0');
}

/* "0x..." hex, else decimal: arm64 prints some NUMBER()s in hex (kimage_voffset). */
static bool parse_hex_or_dec(const char *v, uint64_t *out)
{
    return strncmp(v, "0x", 2) == 0 ? parse_hex(v + 2, out) : parse_dec(v, out);
}

/* Keys and where they go: SYMBOL() and KERNELOFFSET are hex, NUMBER() and PAGESIZE decimal,
 * NUMX() either (as its value says). */
struct key {
    const char *key;
    size_t field;
    int hex; /* 1 hex, 0 decimal, 2 either */
};
#define SYM(name, f)                                                                               \
    {                                                                                              \
        "SYMBOL(" name ")=", offsetof(struct lx_vmcoreinfo, f), true                               \
    }
#define NUM(name, f)                                                                               \
    {                                                                                              \
        "NUMBER(" name ")=", offsetof(struct lx_vmcoreinfo, f), false                              \
    }
#define NUMX(name, f)                                                                              \
    {                                                                                              \
        "NUMBER(" name ")=", offsetof(struct lx_vmcoreinfo, f), 2                                  \
    }
static const struct key keys[] = {
    {"PAGESIZE=", offsetof(struct lx_vmcoreinfo, page_size), false},
    {"KERNELOFFSET=", offsetof(struct lx_vmcoreinfo, kernel_offset), true},
    NUM("phys_base", phys_base),
    SYM("init_top_pgt", init_top_pgt),
    SYM("_stext", stext),
    SYM("init_uts_ns", init_uts_ns),
    SYM("kallsyms_names", kallsyms_names),
    SYM("kallsyms_num_syms", kallsyms_num_syms),
    SYM("kallsyms_token_table", kallsyms_token_table),
    SYM("kallsyms_token_index", kallsyms_token_index),
    SYM("kallsyms_offsets", kallsyms_offsets),
    SYM("kallsyms_relative_base", kallsyms_relative_base),
    SYM("kallsyms_addresses", kallsyms_addresses),
    /* arm64 (arch/arm64/kernel/crash_core.c) */
    SYM("swapper_pg_dir", swapper_pg_dir),
    NUMX("kimage_voffset", kimage_voffset),
    NUMX("PHYS_OFFSET", phys_offset),
    NUMX("VA_BITS", va_bits),
    NUMX("TCR_EL1_T1SZ", tcr_t1sz),
    NUMX("KERNELPACMASK", pac_mask),
    NUMX("MODULES_VADDR", modules_vaddr),
    NUMX("MODULES_END", modules_end),
    /* riscv64 (arch/riscv/kernel/vmcore_info.c) */
    NUMX("va_kernel_pa_offset", va_kernel_pa_offset),
};

static int parse_line(const char *line, struct lx_vmcoreinfo *out, struct qp_error *err)
{
    if (strncmp(line, "OSRELEASE=", 10) == 0) {
        size_t n = strcspn(line + 10, "\n");
        if (n == 0 || n >= sizeof out->osrelease)
            return qp_error_set(err, -EPROTO, "vmcoreinfo: bad OSRELEASE");
        memcpy(out->osrelease, line + 10, n);
        out->osrelease[n] = '\0';
        if (sscanf(out->osrelease, "%d.%d", &out->version_major, &out->version_minor) != 2)
            return qp_error_set(err, -EPROTO, "vmcoreinfo: OSRELEASE %s has no version",
                                out->osrelease);
        return 0;
    }
    if (strncmp(line, "NUMBER(pgtable_l5_enabled)=", 27) == 0) {
        out->pgtable_l5 = line[27] == '1';
        return 0;
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        size_t kl = strlen(keys[i].key);
        if (strncmp(line, keys[i].key, kl) != 0)
            continue;
        uint64_t *dst = (uint64_t *)((char *)out + keys[i].field);
        bool ok = keys[i].hex == 2 ? parse_hex_or_dec(line + kl, dst)
                  : keys[i].hex    ? parse_hex(line + kl, dst)
                                   : parse_dec(line + kl, dst);
        if (!ok)
            return qp_error_set(err, -EPROTO, "vmcoreinfo: bad value in %.*s",
                                (int)strcspn(line, "\n"), line);
    }
    return 0;
}

int lx_vmcoreinfo_parse(const char *text, size_t len, struct lx_vmcoreinfo *out,
                        struct qp_error *err)
{
    *out = (struct lx_vmcoreinfo){0};
    char *copy = g_strndup(text, len); /* NUL-terminated, whatever the source */
    int rc = 0;
    for (char *line = copy; rc == 0 && line && *line;) {
        char *next = strchr(line, '\n');
        out->have_phys_base |= strncmp(line, "NUMBER(phys_base)=", 18) == 0;
        out->have_kimage_voffset |= strncmp(line, "NUMBER(kimage_voffset)=", 23) == 0;
        out->have_va_kernel_pa_offset |= strncmp(line, "NUMBER(va_kernel_pa_offset)=", 28) == 0;
        rc = parse_line(line, out, err);
        line = next ? next + 1 : NULL;
    }
    g_free(copy);
    if (rc)
        return rc;
    if (!out->osrelease[0])
        return qp_error_set(err, -EPROTO, "vmcoreinfo lacks OSRELEASE");
    if (!lx__arch_of(out))
        return qp_error_set(err, -EPROTO,
                            "vmcoreinfo names no kernel page table qprof can use (x86_64: "
                            "SYMBOL(init_top_pgt) and NUMBER(phys_base); arm64: "
                            "SYMBOL(swapper_pg_dir) and NUMBER(kimage_voffset); riscv64: "
                            "SYMBOL(swapper_pg_dir) and NUMBER(va_kernel_pa_offset))");
    return 0;
}

int lx_vmcoreinfo_load_file(const char *path, struct lx_vmcoreinfo *out, struct qp_error *err)
{
    gchar *text = NULL;
    gsize len = 0;
    GError *gerr = NULL;
    if (!g_file_get_contents(path, &text, &len, &gerr)) {
        int rc = qp_error_set(err, -ENOENT, "--vmcoreinfo %s: %s", path, gerr->message);
        g_error_free(gerr);
        return rc;
    }
    /* A copy of the ELF note works as well as the bare text. */
    const char *start = memmem(text, len, "OSRELEASE=", 10);
    int rc = start ? lx_vmcoreinfo_parse(start, len - (size_t)(start - text), out, err)
                   : qp_error_set(err, -EPROTO, "--vmcoreinfo %s: no OSRELEASE= line", path);
    g_free(text);
    return rc ? qp_error_prefix(err, "--vmcoreinfo %s", path) : 0;
}

/* The text at a candidate page: after the note header, or the page itself. Returns its offset
 * in the page, or -1. */
static int candidate(const uint8_t *head)
{
    uint32_t namesz, type;
    memcpy(&namesz, head, 4);
    memcpy(&type, head + 8, 4);
    if (namesz == sizeof NOTE_NAME && type == 0 &&
        memcmp(head + 12, NOTE_NAME, sizeof NOTE_NAME) == 0 &&
        memcmp(head + NOTE_DESC_OFF, "OSRELEASE=", 10) == 0)
        return NOTE_DESC_OFF;
    if (memcmp(head, "OSRELEASE=", 10) == 0)
        return 0;
    return -1;
}

static int try_page(const struct lx_phys *p, uint64_t pa, int off, struct lx_vmcoreinfo *out)
{
    char *page = g_malloc0(VMCOREINFO_MAX);
    int rc = p->read(p->ctx, pa, page, VMCOREINFO_MAX);
    if (rc) /* the last page of a RAM range */
        rc = p->read(p->ctx, pa, page, 4096);
    if (rc == 0) {
        size_t len = strnlen(page + off, VMCOREINFO_MAX - (size_t)off);
        struct qp_error ignored = {0};
        rc = lx_vmcoreinfo_parse(page + off, len, out, &ignored);
    }
    g_free(page);
    return rc;
}

int lx_vmcoreinfo_find(const struct lx_phys *p, const struct lx_ram_range *ram, int n_ram,
                       struct lx_vmcoreinfo *out, uint64_t *paddr, struct qp_error *err)
{
    return lx_vmcoreinfo_find_fresh(p, ram, n_ram, NULL, NULL, out, paddr, err);
}

int lx_vmcoreinfo_find_fresh(const struct lx_phys *p, const struct lx_ram_range *ram, int n_ram,
                             lx_vmci_skip_fn skip, void *skip_ctx, struct lx_vmcoreinfo *out,
                             uint64_t *paddr, struct qp_error *err)
{
    enum { CHUNK = 1 << 20 };
    uint8_t *chunk = g_malloc(CHUNK);
    int rc = -ENOENT;
    for (int r = 0; r < n_ram && rc; r++) {
        for (uint64_t base = ram[r].start & ~UINT64_C(0xfff); base < ram[r].end && rc;
             base += CHUNK) {
            size_t len = ram[r].end - base < CHUNK ? (size_t)(ram[r].end - base) : CHUNK;
            if (len < 4096 || p->read(p->ctx, base, chunk, len) != 0)
                continue;
            for (size_t off = 0; off + 4096 <= len && rc; off += 4096) {
                int text = candidate(chunk + off);
                if (text >= 0 && !(skip && skip(skip_ctx, base + off, chunk + off)) &&
                    try_page(p, base + off, text, out) == 0) {
                    *paddr = base + off;
                    rc = 0;
                }
            }
        }
    }
    g_free(chunk);
    if (rc)
        return qp_error_set(err, -ENOENT,
                            "no Linux vmcoreinfo in guest RAM (not a Linux guest, or a kernel "
                            "without CONFIG_CRASH_CORE; --vmcoreinfo FILE gives it)");
    return 0;
}
