/* Tests of the symbols module against fixture ELFs built by this test's CMakeLists.txt.
 * Usage: test_symbols CASE (hash, elf, span, stripped, dynsym, demangle, map, kallsyms, store). */
#define _GNU_SOURCE
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <unistd.h>

#include <errno.h>
#include <inttypes.h>
#include <gelf.h>
#include <glib.h>
#include <string.h>

#include "symbols.h"
#include "harness.h"

#define FX(name) FIXTURE_DIR "/" name

/* One line of `nm -n -S --defined-only`. */
struct nm_sym {
    uint64_t addr, size;
    char type;
    char name[256];
};

static size_t read_nm(const char *path, struct nm_sym *out, size_t max)
{
    FILE *fp = fopen(path, "r");
    REQUIRE(fp != NULL);
    char line[512];
    size_t n = 0;
    while (n < max && fgets(line, sizeof(line), fp)) {
        struct nm_sym *s = &out[n];
        if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %255s", &s->addr, &s->size, &s->type,
                   s->name) == 4)
            n++;
        else if (sscanf(line, "%" SCNx64 " %c %255s", &s->addr, &s->type, s->name) == 3) {
            s->size = 0;
            n++;
        }
    }
    fclose(fp);
    return n;
}

static sym_table *open_elf(const char *path)
{
    sym_table *t = NULL;
    struct qp_error err = {0};
    int rc = sym_table_open_elf(path, &t, &err);
    CHECK_MSG(rc == 0, "%s: %s", path, err.msg);
    REQUIRE(t != NULL);
    return t;
}

static sym_table *open_map(const char *path)
{
    sym_table *t = NULL;
    struct qp_error err = {0};
    int rc = sym_table_open_map(path, &t, &err);
    CHECK_MSG(rc == 0, "%s: %s", path, err.msg);
    REQUIRE(t != NULL);
    return t;
}

static uint64_t addr_of(const sym_table *t, const char *name)
{
    uint64_t addr = 0;
    CHECK_MSG(sym_find_by_name(t, name, &addr) == 0, "no symbol %s", name);
    return addr;
}

/* Looks addr up and checks the name, start and size found. */
static void expect_sym(const sym_table *t, uint64_t addr, const char *name, uint64_t start,
                       uint64_t size)
{
    struct sym_info info = {0};
    int rc = sym_lookup(t, addr, &info);
    CHECK_MSG(rc == 0, "lookup 0x%" PRIx64 " (want %s): %d", addr, name, rc);
    if (rc != 0)
        return;
    CHECK_STR(info.name, name);
    CHECK_U64(info.start, start);
    CHECK_U64(info.size, size);
    CHECK_U64(info.offset, addr - start);
}

static void expect_none(const sym_table *t, uint64_t addr)
{
    struct sym_info info = {0};
    int rc = sym_lookup(t, addr, &info);
    CHECK_MSG(rc == -ENOENT, "lookup 0x%" PRIx64 ": want -ENOENT, got %d (%s)", addr, rc,
              rc == 0 ? info.name : "-");
}

static uint64_t parse_sha256sum_prefix(const char *path)
{
    char *text = NULL;
    REQUIRE(g_file_get_contents(path, &text, NULL, NULL));
    char prefix[17] = {0};
    memcpy(prefix, text, 16);
    g_free(text);
    return g_ascii_strtoull(prefix, NULL, 16);
}

static void test_hash(void)
{
    /* Known SHA-256 vectors: "" and "abc". */
    CHECK_U64(sym_text_hash("", 0), 0xe3b0c44298fc1c14ULL);
    CHECK_U64(sym_text_hash("abc", 3), 0xba7816bf8f01cfeaULL);

    gchar *text = NULL;
    gsize len = 0;
    REQUIRE(g_file_get_contents(FX("fx.text"), &text, &len, NULL));
    sym_table *t = open_elf(FX("fx"));
    uint64_t independent = parse_sha256sum_prefix(FX("fx.text.sha256"));
    CHECK(independent != 0);
    CHECK_U64(sym_table_text_hash(t), independent);
    CHECK_U64(sym_text_hash(text, len), independent);
    CHECK_U64(sym_table_text_size(t), len);
    /* fx_tail is the last label of .text and 24 bytes long. */
    CHECK_U64(sym_table_text_addr(t) + sym_table_text_size(t), addr_of(t, "fx_tail") + 24);

    uint64_t text_addr = sym_table_text_addr(t);
    sym_table_set_slide(t, 0x10000);
    CHECK_U64(sym_table_text_addr(t), text_addr + 0x10000);
    CHECK_U64(sym_table_text_hash(t), independent);

    sym_table *stripped = open_elf(FX("fx.stripped"));
    CHECK_U64(sym_table_text_hash(stripped), independent);
    sym_table *map = open_map(FX("fx.map"));
    CHECK_U64(sym_table_text_hash(map), 0);
    CHECK_U64(sym_table_text_addr(map), 0);
    CHECK_U64(sym_table_text_size(map), 0);
    sym_table_free(map);
    sym_table_free(stripped);
    sym_table_free(t);
    g_free(text);
}

/* Every sized function symbol nm reports is found at its first and last byte, with its start
 * and size (alias groups report the same start and size under the winner's name). */
static void check_against_nm(const sym_table *t, const struct nm_sym *syms, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!strchr("tTwW", syms[i].type) || syms[i].size == 0)
            continue;
        struct sym_info first = {0}, last = {0};
        CHECK_INT(sym_lookup(t, syms[i].addr, &first), 0);
        CHECK_INT(sym_lookup(t, syms[i].addr + syms[i].size - 1, &last), 0);
        CHECK_U64(first.start, syms[i].addr);
        CHECK_U64(first.size, syms[i].size);
        CHECK_U64(last.offset, syms[i].size - 1);
        CHECK(first.name == last.name); /* borrowed from the table, never copied */
    }
}

static void test_elf_c_functions(const sym_table *t, const struct nm_sym *syms, size_t n)
{
    check_against_nm(t, syms, n);
    uint64_t add = addr_of(t, "fx_add"), add_size = 0, main_addr = addr_of(t, "fx_main");
    for (size_t i = 0; i < n; i++)
        if (strcmp(syms[i].name, "fx_add") == 0)
            add_size = syms[i].size;
    REQUIRE(add_size > 0);
    /* Aliases: fx_add, fx_plus, fx_aaa (global), fa (weak), fl (local). */
    expect_sym(t, add, "fx_aaa", add, add_size);
    expect_sym(t, add + add_size - 1, "fx_aaa", add, add_size);
    CHECK_U64(addr_of(t, "fl"), add);
    CHECK_U64(addr_of(t, "fa"), add);
    CHECK_U64(addr_of(t, "fx_plus"), add);
    expect_sym(t, addr_of(t, "fx_weak"), "fx_weak", addr_of(t, "fx_weak"),
               addr_of(t, "fx_main") - addr_of(t, "fx_weak"));
    struct sym_info info;
    REQUIRE(sym_lookup(t, main_addr, &info) == 0);
    CHECK_STR(info.name, "fx_main");
    /* fx_main ends before the 64-byte aligned _start: the padding is a gap. */
    if (main_addr + info.size < addr_of(t, "_start"))
        expect_none(t, main_addr + info.size);
    /* Objects are found by name (like the guest's qprof_abi) but are not functions. */
    for (size_t i = 0; i < n; i++) {
        if (strcmp(syms[i].name, "fx_object") == 0) {
            CHECK_U64(addr_of(t, "fx_object"), syms[i].addr);
            expect_none(t, syms[i].addr);
        }
    }
}

static void test_elf_asm_symbols(const sym_table *t)
{
    uint64_t start = addr_of(t, "_start"), sized = addr_of(t, "asm_sized");
    uint64_t tail = addr_of(t, "fx_tail");
    expect_sym(t, start, "_start", start, 0);
    expect_sym(t, sized - 1, "_start", start, 0);
    expect_sym(t, sized, "asm_sized", sized, 32);
    expect_sym(t, sized + 31, "asm_sized", sized, 32);
    expect_none(t, sized + 32); /* one past the end: the gap */
    expect_none(t, sized + 47);
    expect_sym(t, sized + 48, "isr_stub_0", sized + 48, 0);
    expect_sym(t, sized + 55, "isr_stub_0", sized + 48, 0);
    expect_sym(t, sized + 56, "isr_stub_1", sized + 56, 0);
    expect_sym(t, sized + 63, "isr_stub_1", sized + 56, 0);
    expect_sym(t, sized + 64, "asm_local", sized + 64, 16);
    expect_sym(t, tail + 23, "fx_tail", tail, 0);
    expect_none(t, tail + 24); /* a zero-size label stops at the end of its section */
    expect_none(t, 0);
    expect_none(t, 0x1000);
    expect_none(t, UINT64_MAX);
}

static void test_elf_slide(sym_table *t)
{
    uint64_t add = addr_of(t, "fx_add"), sized = addr_of(t, "asm_sized");
    sym_table_set_slide(t, 0x7f0000000000LL);
    expect_sym(t, add + 0x7f0000000000ULL + 4, "fx_aaa", add + 0x7f0000000000ULL, 0x20);
    CHECK_U64(addr_of(t, "fx_add"), add + 0x7f0000000000ULL);
    expect_none(t, add);
    sym_table_set_slide(t, -0x1000);
    expect_sym(t, sized - 0x1000, "asm_sized", sized - 0x1000, 32);
    sym_table_set_slide(t, 0);
    expect_sym(t, sized, "asm_sized", sized, 32);
}

/* Source lines come from DWARF when the ELF has it; without it (-g0, a map) there are none. */
static void test_lines(void)
{
    sym_table *plain = open_elf(FX("fx")), *g = open_elf(FX("fx.g"));
    const char *file = NULL;
    int line = 0;
    CHECK_INT(sym_lookup_line(plain, addr_of(plain, "fx_add"), &file, &line), -ENOENT);
    CHECK_INT(sym_lookup_line(g, addr_of(g, "fx_add") + 1, &file, &line), 0);
    CHECK_MSG(file && g_str_has_suffix(file, "fx_main.c"), "file %s", file ? file : "(none)");
    /* fx_add's body is on lines 7..11 of fx_main.c */
    CHECK_MSG(line >= 7 && line <= 11, "fx_add at line %d", line);
    CHECK_INT(sym_lookup_line(g, 0x10, &file, &line), -ENOENT);
    sym_table_free(plain);
    sym_table_free(g);
}

static void test_elf(void)
{
    static struct nm_sym syms[256];
    size_t n = read_nm(FX("fx.nms"), syms, 256);
    REQUIRE(n > 10);
    sym_table *t = open_elf(FX("fx"));
    CHECK_STR(sym_table_name(t), "fx");
    CHECK_STR(sym_table_path(t), FX("fx"));
    CHECK_INT(sym_table_count(t), 18);
    test_elf_c_functions(t, syms, n);
    test_elf_asm_symbols(t);
    test_elf_slide(t);
    uint64_t addr;
    CHECK_INT(sym_find_by_name(t, "no_such_symbol", &addr), -ENOENT);
    sym_table_free(t);

    struct qp_error err = {0};
    sym_table *none = NULL;
    CHECK_INT(sym_table_open_elf(FX("missing"), &none, &err), -ENOENT);
    CHECK(strstr(err.msg, "missing") != NULL);
    CHECK_INT(sym_table_open_elf(FX("fx.map"), &none, &err), -EINVAL);
    CHECK(none == NULL);
    sym_table_free(NULL);
}

/* The span of an ELF's PT_LOAD segments (a kernel's unwind space, its own stacks): the code
 * span covers every function nm lists, the whole span holds the code span. */
static void test_span(void)
{
    static struct nm_sym syms[256];
    size_t n = read_nm(FX("fx.nms"), syms, 256);
    REQUIRE(n > 10);
    uint64_t lo = 0, hi = 0, all_lo = 0, all_hi = 0;
    CHECK_INT(sym_elf_exec_span(FX("fx"), &lo, &hi, NULL), 0);
    CHECK_INT(sym_elf_load_span(FX("fx"), &all_lo, &all_hi, NULL), 0);
    CHECK(lo < hi);
    CHECK(all_lo <= lo && hi <= all_hi);
    for (size_t i = 0; i < n; i++)
        if (syms[i].type == 'T' || syms[i].type == 't')
            CHECK_MSG(syms[i].addr >= lo && syms[i].addr < hi, "%s at 0x%" PRIx64, syms[i].name,
                      syms[i].addr);
    struct qp_error err = {0};
    CHECK_INT(sym_elf_exec_span(FX("fx.map"), &lo, &hi, &err), -EINVAL);
    CHECK(strstr(err.msg, "fx.map") != NULL);
    CHECK(sym_elf_exec_span(FX("missing"), &lo, &hi, NULL) < 0);
}

static void test_stripped(void)
{
    sym_table *t = open_elf(FX("fx.stripped"));
    CHECK_INT(sym_table_count(t), 0);
    expect_none(t, sym_table_text_addr(t));
    uint64_t addr;
    CHECK_INT(sym_find_by_name(t, "fx_add", &addr), -ENOENT);
    CHECK(sym_table_text_size(t) > 0);
    sym_table_free(t);
}

static void test_dynsym(void)
{
    sym_table *full = open_elf(FX("fxlib.so"));
    sym_table *stripped = open_elf(FX("fxlib.stripped.so"));
    uint64_t exported = addr_of(full, "lib_exported"), hidden = addr_of(full, "lib_hidden");
    struct sym_info info;
    REQUIRE(sym_lookup(stripped, exported + 1, &info) == 0);
    CHECK_STR(info.name, "lib_exported");
    CHECK_U64(info.start, exported);
    uint64_t addr;
    CHECK_INT(sym_find_by_name(stripped, "lib_hidden", &addr), -ENOENT);
    CHECK_INT(sym_find_by_name(stripped, "lib_second", &addr), 0);
    REQUIRE(sym_lookup(full, hidden, &info) == 0);
    CHECK_STR(info.name, "lib_hidden");
    CHECK_U64(sym_table_text_hash(full), sym_table_text_hash(stripped));
    /* A stripped file's exported label of no size names nothing past itself: the local function
     * after it stays unnamed (file+0xOFFSET), never the label's. */
    uint64_t tail = addr_of(full, "lib_nosize_tail");
    REQUIRE(sym_lookup(full, tail, &info) == 0);
    CHECK_STR(info.name, "lib_nosize_tail");
    CHECK_INT(sym_lookup(stripped, tail, &info), -ENOENT);
    sym_table_free(stripped);
    sym_table_free(full);
}

/* The symbol whose raw name is raw is reported, and found, as display. */
static void expect_demangled(const sym_table *t, const char *raw, const char *display)
{
    uint64_t addr = addr_of(t, raw);
    struct sym_info info;
    CHECK_INT(sym_lookup(t, addr, &info), 0);
    CHECK_STR(info.name, display);
    CHECK_U64(addr_of(t, display), addr);
}

static void test_demangle(void)
{
    sym_table *t = open_elf(FX("fx"));
    expect_demangled(t, "_ZN7mycrate6module8function17h0123456789abcdefE",
                     "mycrate::module::function");
    expect_demangled(
        t, "_ZN51_$LT$mycrate..Foo$u20$as$u20$core..fmt..Display$GT$3fmt17h0123456789abcdefE",
        "<mycrate::Foo as core::fmt::Display>::fmt");
    expect_demangled(t, "_RNvCs15kBYyAo9fc_7mycrate4main", "mycrate::main");
    expect_demangled(t, "_RNvMNtCs1234_5alloc3vecINtB2_3VecpE4push", "<alloc::vec::Vec<_>>::push");
    sym_table_free(t);
#if SYM_HAVE_CXX
    t = open_elf(FX("fxcpp"));
    expect_demangled(t, "_ZN2qp5inner5scaleEi", "qp::inner::scale(int)");
    expect_demangled(t, "_ZN2qp5twiceIiEET_S1_", "int qp::twice<int>(int)");
    expect_demangled(t, "_ZN2qp5twiceIlEET_S1_", "long qp::twice<long>(long)");
    expect_demangled(t, "_ZNK2qp3Box3getEv", "qp::Box::get() const");
    expect_demangled(t, "cpp_main", "cpp_main");
    /* Linker markers attached to .text but beyond its end are not functions. */
    expect_none(t, addr_of(t, "__bss_start"));
    sym_table_free(t);
#endif
}

/* nm's map of fx agrees with the ELF at every function's first and last byte. */
static void test_map_vs_elf(void)
{
    static struct nm_sym syms[256];
    size_t n = read_nm(FX("fx.nms"), syms, 256);
    sym_table *elf = open_elf(FX("fx"));
    sym_table *map = open_map(FX("fx.map"));
    CHECK_INT(sym_table_count(map), sym_table_count(elf));
    CHECK_STR(sym_table_name(map), "fx.map");
    for (size_t i = 0; i < n; i++) {
        if (!strchr("tTwW", syms[i].type))
            continue;
        uint64_t probes[] = {syms[i].addr, syms[i].addr + (syms[i].size ? syms[i].size - 1 : 0)};
        for (size_t p = 0; p < 2; p++) {
            struct sym_info from_elf, from_map;
            CHECK_INT(sym_lookup(elf, probes[p], &from_elf), 0);
            CHECK_INT(sym_lookup(map, probes[p], &from_map), 0);
            CHECK_STR(from_map.name, from_elf.name);
            CHECK_U64(from_map.start, from_elf.start);
        }
    }
    CHECK_U64(addr_of(map, "fx_object"), addr_of(elf, "fx_object"));
    sym_table_free(map);
    sym_table_free(elf);
}

static void test_map(void)
{
    test_map_vs_elf();
    sym_table *t = open_map(DATA_DIR "/kernel.map");
    const uint64_t base = 0xffffffff81000000ULL, slide = 0x200000;
    CHECK_INT(sym_table_count(t), 8);
    sym_table_set_slide(t, slide);
    uint64_t b = base + slide;
    expect_sym(t, b + 0x10, "_stext", b, 0x100); /* same-address globals: shortest wins */
    expect_sym(t, b + 0x100, "early_idt_handler_common", b + 0x100, 0x80);
    expect_sym(t, b + 0x1ff, "do_syscall_64", b + 0x180, 0x80);
    expect_none(t, b + 0x200); /* read-only data bounds the function before it */
    expect_none(t, b + 0x2ff);
    expect_sym(t, b + 0x300, "default_idle", b + 0x300, 0x40); /* global beats weak */
    expect_sym(t, b + 0x37f, "kernel::sched::schedule", b + 0x340, 0x40);
    expect_sym(t, b + 0x380, "_etext", b + 0x380, 0xc80);
    expect_none(t, base + 0x10); /* unslid address */
    expect_none(t, 0x1000);      /* absolute symbols are not text */
    CHECK_U64(addr_of(t, "qprof_abi"), b + 0x1000);
    CHECK_U64(addr_of(t, "cpu_idle"), b + 0x300);
    sym_table_free(t);
}

static void test_kallsyms(void)
{
    sym_table *t = open_map(DATA_DIR "/kallsyms.txt");
    const uint64_t mod = 0xffffffffc0000000ULL, kern = 0xffffffff81000000ULL;
    expect_sym(t, mod + 0x10, "ext4_fill_super", mod, 0x400);
    expect_sym(t, mod + 0x47f, "ext4_mount", mod + 0x400, 0x80);
    expect_none(t, mod + 0x480);
    expect_sym(t, kern + 0x50, "secondary_startup_64", kern + 0x40, 0x40);
    CHECK_INT(sym_table_count(t), 5);
    sym_table_free(t);

    struct qp_error err = {0};
    sym_table *none = NULL;
    CHECK_INT(sym_table_open_map(DATA_DIR "/kallsyms_hidden.txt", &none, &err), -EACCES);
    CHECK(strstr(err.msg, "kptr_restrict") != NULL);
    CHECK_INT(sym_table_open_map(DATA_DIR "/missing", &none, &err), -ENOENT);
    CHECK(none == NULL);
}

static void copy_file(const char *from, const char *dir, const char *to)
{
    gchar *bytes = NULL;
    gsize len = 0;
    REQUIRE(g_file_get_contents(from, &bytes, &len, NULL));
    gchar *path = g_build_filename(dir, to, NULL);
    gchar *parent = g_path_get_dirname(path);
    REQUIRE(g_mkdir_with_parents(parent, 0755) == 0);
    REQUIRE(g_file_set_contents(path, bytes, (gssize)len, NULL));
    g_free(parent);
    g_free(path);
    g_free(bytes);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* Lays out: 1_first/fx, 2_more/{fxlib.so, notes.txt, truncated.elf, loop -> .., sub/fx.copy},
 * 3_stripped/fx.stripped, and fxcpp when built. */
static char *make_store_dir(void)
{
    char *root = g_dir_make_tmp("qprof-symstore-XXXXXX", NULL);
    REQUIRE(root != NULL);
    copy_file(FX("fx"), root, "1_first/fx");
    copy_file(FX("fxlib.so"), root, "2_more/fxlib.so");
    copy_file(FX("fx.map"), root, "2_more/notes.txt");
    copy_file(FX("fx"), root, "2_more/sub/fx.copy");
    copy_file(FX("fx.stripped"), root, "3_stripped/fx.stripped");
#if SYM_HAVE_CXX
    copy_file(FX("fxcpp"), root, "4_cpp/fxcpp");
#endif
    gchar *fx = NULL;
    gsize len = 0;
    REQUIRE(g_file_get_contents(FX("fx"), &fx, &len, NULL));
    gchar *truncated = g_build_filename(root, "2_more", "truncated.elf", NULL);
    REQUIRE(g_file_set_contents(truncated, fx, 40, NULL));
    gchar *loop = g_build_filename(root, "2_more", "loop", NULL);
    REQUIRE(symlink("..", loop) == 0);
    g_free(loop);
    g_free(truncated);
    g_free(fx);
    return root;
}

/* Several processes of one binary: every lookup hands out the same table, and nothing is
 * consumed by the first. */
static void check_shared_lookups(const sym_store *s, uint64_t hash)
{
    const sym_table *first = sym_store_find(s, hash);
    REQUIRE(first != NULL);
    struct sym_info info;
    CHECK_INT(sym_lookup(first, addr_of(first, "asm_sized"), &info), 0);
    const sym_table *second = sym_store_find(s, hash);
    const sym_table *third = sym_store_find(s, hash);
    CHECK(first == second);
    CHECK(second == third);
    CHECK_INT(sym_lookup(second, addr_of(second, "asm_sized"), &info), 0);
    CHECK_STR(info.name, "asm_sized");
    CHECK(g_str_has_suffix(sym_table_path(first), "1_first/fx")); /* the first copy is kept */
}

static void test_store(void)
{
    char *root = make_store_dir();
    sym_store *s = sym_store_new();
    struct qp_error err = {0};
    int indexed = sym_store_add_dir(s, root, &err);
    CHECK_MSG(indexed == 2 + SYM_HAVE_CXX, "indexed %d: %s", indexed, err.msg);
    CHECK_INT(sym_store_count(s), 2 + SYM_HAVE_CXX);
    CHECK_INT(sym_store_unreadable(s), 1);

    sym_table *fx = open_elf(FX("fx"));
    check_shared_lookups(s, sym_table_text_hash(fx));
    CHECK(sym_store_find(s, 0x1234) == NULL);
    CHECK(sym_store_find(s, 0) == NULL);

    CHECK_INT(sym_store_add_file(s, FX("fx"), &err), 0); /* a duplicate: kept out */
    CHECK_INT(sym_store_count(s), 2 + SYM_HAVE_CXX);
    CHECK_INT(sym_store_add_file(s, FX("missing"), &err), -ENOENT);
    CHECK_INT(sym_store_add_dir(s, FX("missing-dir"), &err), -ENOENT);
    CHECK(strstr(err.msg, "missing-dir") != NULL);
    check_shared_lookups(s, sym_table_text_hash(fx));

    sym_table_free(fx);
    sym_store_free(s);
    sym_store_free(NULL);
    nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    g_free(root);
}

/* The page index: a page two binaries share names both, the next page decides; a page of
 * nothing matches nothing. */
static void test_pages(void)
{
    sym_store *s = sym_store_new();
    CHECK_INT(sym_store_add_dir(s, FX("pages"), NULL), 2);
    CHECK_U64(sym_store_page_count(s), 0); /* not built until asked */
    sym_store_index_pages(s);
    CHECK(sym_store_page_count(s) >= 3);
    struct sym_page_match m[4];
    uint8_t page[SYM_PAGE_SIZE];
    uint64_t text = 0;
    memset(page, 0x90, sizeof page); /* the shared page: 4096 nops */
    size_t n = sym_store_match_page(s, page, m, 4);
    CHECK_INT((int)n, 2);
    if (n == 2) {
        CHECK(m[0].table != m[1].table && m[0].vaddr == m[1].vaddr);
        text = sym_table_text_addr(m[0].table);
        CHECK_U64(m[0].vaddr, text);
    }
    memset(page, 0xcc, sizeof page); /* the next page tells them apart */
    page[0] = 1;
    n = sym_store_match_page(s, page, m, 4);
    CHECK_INT((int)n, 1);
    CHECK(n == 1 && strcmp(sym_table_name(m[0].table), "a") == 0 && m[0].vaddr == text + 4096);
    page[0] = 2;
    n = sym_store_match_page(s, page, m, 4);
    CHECK(n == 1 && strcmp(sym_table_name(m[0].table), "b") == 0);
    page[0] = 3;
    CHECK_INT((int)sym_store_match_page(s, page, m, 4), 0);
    memset(page, 0, sizeof page);
    CHECK_INT((int)sym_store_match_page(s, page, m, 4), 0);
    sym_store_free(s);
}

/* ---- An ELF as a process maps it (sym_mem_image_read) --------------------------------------- */

#define MEM_BASE UINT64_C(0x7f0000000000)

/* fxlib.so laid out as mmap maps it at MEM_BASE; pages listed in `absent` not readable. */
struct mapped {
    uint8_t *mem;
    size_t len;
    uint64_t absent_page; /* offset of a page that is not present, or UINT64_MAX */
    uint8_t *file;        /* the file itself, for read_file */
    size_t file_len;
};

static int file_read(void *ctx, uint64_t off, void *buf, size_t len)
{
    const struct mapped *m = ctx;
    if (off > m->file_len || len > m->file_len - off)
        return -EFAULT;
    memcpy(buf, m->file + off, len);
    return 0;
}

static int mapped_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    const struct mapped *m = ctx;
    if (addr < MEM_BASE || addr - MEM_BASE > m->len || len > m->len - (addr - MEM_BASE))
        return -EFAULT;
    uint64_t off = addr - MEM_BASE;
    if (m->absent_page != UINT64_MAX && off < m->absent_page + 4096 && off + len > m->absent_page)
        return -EFAULT;
    memcpy(buf, m->mem + off, len);
    return 0;
}

struct section {
    uint64_t addr, size;
};

/* Maps path's PT_LOADs; fills the sections named, and relocates .dynamic's pointers as glibc's
 * loader does when relocate is set. */
static struct mapped map_like_mmap(const char *path, bool relocate, struct section *dynsym,
                                   struct section *dynstr, struct section *eh_frame)
{
    gchar *file;
    gsize file_len;
    REQUIRE(g_file_get_contents(path, &file, &file_len, NULL));
    Elf *elf = elf_memory(file, file_len);
    REQUIRE(elf != NULL);
    size_t phnum;
    REQUIRE(elf_getphdrnum(elf, &phnum) == 0);
    struct mapped m = {.absent_page = UINT64_MAX};
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
            ph.p_vaddr + ph.p_memsz > m.len)
            m.len = ph.p_vaddr + ph.p_memsz;
    }
    m.mem = g_malloc0(m.len);
    GElf_Phdr dyn = {0};
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        REQUIRE(gelf_getphdr(elf, (int)i, &ph) != NULL);
        if (ph.p_type == PT_LOAD)
            memcpy(m.mem + ph.p_vaddr, file + ph.p_offset, ph.p_filesz);
        if (ph.p_type == PT_DYNAMIC)
            dyn = ph;
    }
    for (uint64_t at = dyn.p_vaddr; relocate && at + 16 <= dyn.p_vaddr + dyn.p_filesz; at += 16) {
        int64_t tag;
        uint64_t val;
        memcpy(&tag, m.mem + at, 8);
        memcpy(&val, m.mem + at + 8, 8);
        if (tag == DT_SYMTAB || tag == DT_STRTAB || tag == DT_GNU_HASH || tag == DT_HASH) {
            val += MEM_BASE;
            memcpy(m.mem + at + 8, &val, 8);
        }
    }
    size_t shstrndx;
    REQUIRE(elf_getshdrstrndx(elf, &shstrndx) == 0);
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        REQUIRE(gelf_getshdr(scn, &sh) != NULL);
        const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
        struct section *want = !name                            ? NULL
                               : strcmp(name, ".dynsym") == 0   ? dynsym
                               : strcmp(name, ".dynstr") == 0   ? dynstr
                               : strcmp(name, ".eh_frame") == 0 ? eh_frame
                                                                : NULL;
        if (want)
            *want = (struct section){sh.sh_addr, sh.sh_size};
    }
    elf_end(elf);
    m.file = (uint8_t *)file;
    m.file_len = file_len;
    return m;
}

static void check_mapped_fxlib(bool relocate)
{
    struct section dynsym = {0}, dynstr = {0}, eh_frame = {0};
    struct mapped m = map_like_mmap(FX("fxlib.so"), relocate, &dynsym, &dynstr, &eh_frame);
    REQUIRE(dynsym.size && dynstr.size && eh_frame.size);
    struct sym_mem_image img;
    struct qp_error err = {0};
    CHECK_INT(sym_mem_image_read(mapped_read, NULL, &m, MEM_BASE, EM_X86_64, &img, &err), 0);
    CHECK_INT(img.type, ET_DYN);
    CHECK_U64((uint64_t)img.bias, MEM_BASE);
    CHECK_U64(img.eh_frame, MEM_BASE + eh_frame.addr);
    CHECK(img.eh_frame_max >= eh_frame.size);
    CHECK_U64(img.dynsym, MEM_BASE + dynsym.addr);
    CHECK_U64(img.dynsym_count, dynsym.size / sizeof(Elf64_Sym));
    CHECK_U64(img.dynstr, MEM_BASE + dynstr.addr);
    CHECK_U64(img.dynstr_size, dynstr.size);

    /* .eh_frame's entries end at its terminator (the fixture, linked without crtend.o, has
     * none: they end with the section, which ends its segment). */
    bool terminated = false;
    size_t whole =
        sym_eh_frame_whole_len(m.mem + eh_frame.addr, (size_t)img.eh_frame_max, &terminated);
    CHECK_U64(whole, terminated ? whole : eh_frame.size);
    CHECK(whole <= eh_frame.size && whole > 16);
    /* A copy cut short keeps whole entries only. */
    size_t part = sym_eh_frame_whole_len(m.mem + eh_frame.addr, whole - 1, &terminated);
    CHECK(!terminated && part < whole);

    sym_table *t = NULL;
    CHECK_INT(sym_table_from_dynsym("fxlib.so", m.mem + dynsym.addr, (size_t)img.dynsym_count,
                                    (const char *)m.mem + dynstr.addr, (size_t)img.dynstr_size, &t,
                                    &err),
              0);
    uint64_t addr = 0;
    struct sym_info info;
    if (t && sym_find_by_name(t, "lib_second", &addr) == 0 && sym_lookup(t, addr + 3, &info) == 0)
        CHECK_STR(info.name, "lib_second");
    else
        CHECK_MSG(false, "lib_second not found in the mapped .dynsym");
    sym_table_free(t);

    /* The page of .eh_frame_hdr not present: no .eh_frame, never a guess, and the names
     * still. */
    m.absent_page = eh_frame.addr & ~UINT64_C(0xfff);
    CHECK_INT(sym_mem_image_read(mapped_read, NULL, &m, MEM_BASE, EM_X86_64, &img, &err), 0);
    CHECK(img.eh_frame == 0 && img.missing == 1 && img.dynsym == MEM_BASE + dynsym.addr);
    /* ... unless the file's pages can be read (the page cache): then from there. */
    CHECK_INT(sym_mem_image_read(mapped_read, file_read, &m, MEM_BASE, EM_X86_64, &img, &err), 0);
    CHECK_U64(img.eh_frame, MEM_BASE + eh_frame.addr);
    CHECK(img.missing == 0 && img.eh_frame_offset == eh_frame.addr); /* vaddr = offset there */
    /* The ELF header's page not present: nothing. */
    m.absent_page = 0;
    CHECK_INT(sym_mem_image_read(mapped_read, NULL, &m, MEM_BASE, EM_X86_64, &img, &err), -EFAULT);
    /* Another machine's ELF is refused. */
    m.absent_page = UINT64_MAX;
    CHECK_INT(sym_mem_image_read(mapped_read, NULL, &m, MEM_BASE, EM_RISCV, &img, &err), -EINVAL);
    g_free(m.mem);
    g_free(m.file);
}

static void test_mem_image(void)
{
    check_mapped_fxlib(false);
    check_mapped_fxlib(true);
}

/* ---- Separate debug files (sym_debug_file_find) ------------------------------------------ */

static size_t build_id_of(const char *path, uint8_t *id, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    const void *bits;
    ssize_t n = elf ? dwelf_elf_gnu_build_id(elf, &bits) : -1;
    REQUIRE(n > 0 && (size_t)n <= max);
    memcpy(id, bits, (size_t)n);
    elf_end(elf);
    close(fd);
    return (size_t)n;
}

/* Copies the file from into root + rel, making its folders. */
static void place(const char *root, const char *rel, const char *from)
{
    char *to = g_build_filename(root, rel, NULL), *dir = g_path_get_dirname(to), *bytes = NULL;
    gsize len = 0;
    REQUIRE(g_mkdir_with_parents(dir, 0755) == 0);
    REQUIRE(g_file_get_contents(from, &bytes, &len, NULL));
    REQUIRE(g_file_set_contents(to, bytes, (gssize)len, NULL));
    g_free(bytes);
    g_free(dir);
    g_free(to);
}

static char *build_id_rel(const uint8_t *id, size_t len)
{
    GString *p = g_string_new(NULL);
    g_string_printf(p, "usr/lib/debug/.build-id/%02x/", id[0]);
    for (size_t i = 1; i < len; i++)
        g_string_append_printf(p, "%02x", id[i]);
    g_string_append(p, ".debug");
    return g_string_free(p, FALSE);
}

/* The stripped library names only its exports (lib_hidden's pc has no name, never a neighbour's);
 * the debug file found by build-id or by .gnu_debuglink names lib_hidden; a debug file of another
 * build, wherever it lies, is never taken. */
static void test_debug_file(void)
{
    sym_table *stripped = open_elf(FX("fxdbg.so")), *debug_direct = open_elf(FX("fxdbg.debug"));
    uint64_t hidden = addr_of(debug_direct, "lib_hidden");
    struct sym_info info;
    CHECK_INT(sym_lookup(stripped, hidden, &info), -ENOENT);
    uint8_t id[64];
    size_t id_len = build_id_of(FX("fxdbg.so"), id, sizeof id);

    char root[] = "/tmp/qprof-debug-XXXXXX";
    REQUIRE(mkdtemp(root));
    CHECK(sym_debug_file_find(root, id, id_len, "/lib/fxdbg.so", FX("fxdbg.so")) == NULL);
    /* Another build's debug file at this build-id's path: refused. */
    char *rel = build_id_rel(id, id_len);
    place(root, rel, FX("fxdbg-other.debug"));
    CHECK(sym_debug_file_find(root, id, id_len, "/lib/fxdbg.so", NULL) == NULL);
    /* The right one there: found, and it names lib_hidden. */
    place(root, rel, FX("fxdbg.debug"));
    char *found = sym_debug_file_find(root, id, id_len, "/lib/fxdbg.so", NULL);
    CHECK_MSG(found && g_str_has_suffix(found, rel), "by build-id: %s", found ? found : "none");
    if (found) {
        sym_table *t = open_elf(found);
        CHECK_INT(sym_lookup(t, hidden + 1, &info), 0);
        CHECK_STR(info.name, "lib_hidden");
        sym_table_free(t);
    }
    g_free(found);
    char *path = g_build_filename(root, rel, NULL);
    CHECK_INT(remove(path), 0);
    g_free(path);

    /* By .gnu_debuglink (no build-id given): the global debug folder, then the object's own
     * .debug folder; the link's name with another build's content (another CRC) is refused. */
    CHECK(sym_debug_file_find(root, NULL, 0, "/lib/fxdbg.so", FX("fxdbg.linked.so")) == NULL);
    place(root, "usr/lib/debug/lib/fxdbg.debug", FX("fxdbg-other.debug"));
    CHECK(sym_debug_file_find(root, NULL, 0, "/lib/fxdbg.so", FX("fxdbg.linked.so")) == NULL);
    place(root, "usr/lib/debug/lib/fxdbg.debug", FX("fxdbg.debug"));
    found = sym_debug_file_find(root, NULL, 0, "/lib/fxdbg.so", FX("fxdbg.linked.so"));
    CHECK_MSG(found && g_str_has_suffix(found, "/usr/lib/debug/lib/fxdbg.debug"),
              "by .gnu_debuglink: %s", found ? found : "none");
    g_free(found);
    place(root, "lib/.debug/fxdbg.debug", FX("fxdbg.debug"));
    found = sym_debug_file_find(root, id, id_len, "/lib/fxdbg.so", FX("fxdbg.linked.so"));
    CHECK_MSG(found && g_str_has_suffix(found, "/lib/.debug/fxdbg.debug"),
              "by .gnu_debuglink beside the object: %s", found ? found : "none");
    g_free(found);
    /* A stripped file without the link finds nothing by it. */
    CHECK(sym_debug_file_find(root, NULL, 0, "/lib/fxdbg.so", FX("fxdbg.so")) == NULL);

    nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    g_free(rel);
    sym_table_free(debug_direct);
    sym_table_free(stripped);
}

static const struct {
    const char *name;
    void (*run)(void);
} cases[] = {
    {"hash", test_hash},
    {"elf", test_elf},
    {"span", test_span},
    {"stripped", test_stripped},
    {"dynsym", test_dynsym},
    {"demangle", test_demangle},
    {"map", test_map},
    {"kallsyms", test_kallsyms},
    {"store", test_store},
    {"lines", test_lines},
    {"pages", test_pages},
    {"mem_image", test_mem_image},
    {"debug_file", test_debug_file},
};

int main(int argc, char **argv)
{
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        if (argc < 2 || strcmp(argv[1], cases[i].name) == 0)
            cases[i].run();
    }
    return harness_result();
}
