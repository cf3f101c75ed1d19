/* The architecture tables without QEMU: riscv64's Sv39/Sv48/Sv57 walks on synthetic page
 * tables (superpages, holes, reserved and misaligned entries, a table that points at itself, a
 * satp mode it does not know), its privilege decoding, and the choice of an architecture from a
 * kernel ELF's e_machine with the one-line errors for one qprof does not know or a mismatch.
 * aarch64 the same way: 4K, 16K and 64K walks of both halves (blocks, pages, reserved
 * encodings, tags, disabled halves), tables that point at themselves, reserved granules, and
 * PSTATE.EL/SCTLR_EL1/TCR_EL1 decoding. Each table's unwind entry: its slots and address width
 * against the rest of the table, and its frame-record reader on a prologue and epilogue. */
#define _GNU_SOURCE
#include "arch.h"
#include "harness.h"
#include "qprof/guest_abi.h"
#include "unwind.h"

#include <elf.h>
#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RAM_SIZE (4u << 20) /* guest-physical 0 .. 4 MiB; tables and 4 KiB pages in it */
static uint8_t *ram;
static unsigned reads;

static int read_phys(void *ctx, uint64_t paddr, uint64_t *val)
{
    (void)ctx;
    reads++;
    if (paddr > RAM_SIZE - 8)
        return -EFAULT;
    memcpy(val, ram + paddr, 8);
    return 0;
}

/* PTE bits */
#define V 0x1ull
#define R 0x2ull
#define W 0x4ull
#define X 0x8ull
#define U 0x10ull

static uint64_t pte(uint64_t paddr, uint64_t flags)
{
    return (paddr >> 12) << 10 | flags;
}

static void set(uint64_t table, unsigned index, uint64_t entry)
{
    memcpy(ram + table + index * 8, &entry, 8);
}

static unsigned vpn(uint64_t va, int level)
{
    return (va >> (12 + 9 * level)) & 511;
}

static uint64_t satp(unsigned mode, uint64_t root)
{
    return (uint64_t)mode << 60 | (uint64_t)0x1234 << 44 /* an ASID */ | root >> 12;
}

static int walk(uint64_t s, uint64_t va, uint64_t *pa, uint64_t *size)
{
    reads = 0;
    return prof_arch_riscv64.page_walk(s, va, read_phys, NULL, pa, size);
}

/* Sv39: a user 4 KiB page, a kernel 1 GiB gigapage, a 2 MiB megapage, and every way to fail. */
static void test_sv39(void)
{
    memset(ram, 0, RAM_SIZE);
    const uint64_t root = 0x1000, l1 = 0x2000, l0 = 0x3000, l1_mega = 0x4000;
    const uint64_t user = 0x10000, kern = 0xffffffc000000000ull, mega = 0x40000000ull;
    set(root, vpn(user, 2), pte(l1, V));
    set(l1, vpn(user, 1), pte(l0, V));
    set(l0, vpn(user, 0), pte(0x200000, V | R | X | U));
    set(root, vpn(kern, 2), pte(0x80000000ull, V | R | W | X)); /* gigapage at 2 GiB */
    set(root, vpn(mega, 2), pte(l1_mega, V));
    set(l1_mega, vpn(mega, 1), pte(0x400000, V | R | W)); /* megapage at 4 MiB */
    const uint64_t s = satp(8, root);
    uint64_t pa = 0, size = 0;
    CHECK_INT(walk(s, user + 0x123, &pa, &size), 0);
    CHECK_U64(pa, 0x200123);
    CHECK_U64(size, 4096);
    CHECK_INT(reads, 3);
    CHECK_INT(walk(s, kern + 0x1234567, &pa, &size), 0);
    CHECK_U64(pa, 0x81234567);
    CHECK_U64(size, 1u << 30);
    CHECK_INT(walk(s, mega + 0x54321, &pa, &size), 0);
    CHECK_U64(pa, 0x454321);
    CHECK_U64(size, 2u << 20);
    CHECK_INT(walk(s, user + 0x1000, &pa, &size), -EFAULT);         /* hole in l0 */
    CHECK_INT(walk(s, 0x0000004000000000ull, &pa, &size), -EFAULT); /* bit 38 not copied up */
    CHECK_INT(walk(s, 0xffff800000000000ull, &pa, &size), -EFAULT); /* an Sv48 address */
    set(l0, vpn(user, 0) + 1, pte(0x201000, V | W));                /* W without R */
    CHECK_INT(walk(s, user + 0x1000, &pa, &size), -EFAULT);
    set(l1_mega, vpn(mega, 1) + 1, pte(0x401000, V | R)); /* misaligned megapage */
    CHECK_INT(walk(s, mega + (2u << 20), &pa, &size), -EFAULT);
    set(l1_mega, vpn(mega, 1) + 2, pte(0x7ff0000000ull, V)); /* table outside RAM */
    CHECK_INT(walk(s, mega + (4u << 20), &pa, &size), -EFAULT);
}

/* Sv48 and Sv57 use the same entries one and two levels deeper. */
static void test_sv48_sv57(void)
{
    memset(ram, 0, RAM_SIZE);
    const uint64_t l4 = 0x1000, l3 = 0x2000, l2 = 0x3000, l1 = 0x4000, l0 = 0x5000;
    const uint64_t va48 = 0x00007f0000001000ull, va57 = 0x00ff000000002000ull;
    set(l3, vpn(va48, 3), pte(l2, V));
    set(l2, vpn(va48, 2), pte(l1, V));
    set(l1, vpn(va48, 1), pte(l0, V));
    set(l0, vpn(va48, 0), pte(0x300000, V | R | U));
    uint64_t pa = 0, size = 0;
    CHECK_INT(walk(satp(9, l3), va48 + 8, &pa, &size), 0);
    CHECK_U64(pa, 0x300008);
    CHECK_INT(reads, 4);
    CHECK_INT(walk(satp(9, l3), 0x0000800000000000ull, &pa, &size), -EFAULT); /* not canonical */
    /* Sv57: a fifth level above the same l2..l0 chain (the low 48 bits index them alike). */
    memset(ram, 0, RAM_SIZE);
    set(l4, vpn(va57, 4), pte(l3, V));
    set(l3, vpn(va57, 3), pte(l2, V));
    set(l2, vpn(va57, 2), pte(l1, V));
    set(l1, vpn(va57, 1), pte(l0, V));
    set(l0, vpn(va57, 0), pte(0x301000, V | R | U));
    CHECK_INT(walk(satp(10, l4), va57 + 16, &pa, &size), 0);
    CHECK_U64(pa, 0x301010);
    CHECK_INT(reads, 5);
    CHECK_INT(walk(satp(10, l4), 0x0100000000000000ull, &pa, &size), -EFAULT);
    /* Bare: no translation. */
    CHECK_INT(walk(0, 0x80001234, &pa, &size), 0);
    CHECK_U64(pa, 0x80001234);
}

/* Tables that point back at themselves: the walk ends after one entry per level. */
static void test_loop_and_unknown_mode(void)
{
    memset(ram, 0, RAM_SIZE);
    const uint64_t t = 0x1000;
    for (unsigned i = 0; i < 512; i++)
        set(t, i, pte(t, V)); /* every entry: "next level is this table" */
    uint64_t pa = 0, size = 0;
    for (unsigned mode = 8; mode <= 10; mode++) {
        CHECK_INT(walk(satp(mode, t), 0x1000, &pa, &size), -EFAULT);
        CHECK_INT(reads, (int)mode - 5); /* 3, 4, 5 levels */
    }
    for (unsigned mode = 1; mode < 16; mode++)
        if (mode < 8 || mode > 10) {
            CHECK_INT(walk(satp(mode, t), 0x1000, &pa, &size), -ENOTSUP);
            CHECK_INT(reads, 0);
        }
}

struct fake_regs {
    uint64_t priv, satp;
    bool has_priv, has_satp;
};

static int get_reg(void *ctx, const char *name, uint64_t *val)
{
    const struct fake_regs *f = ctx;
    if (strcmp(name, "priv") == 0 && f->has_priv)
        return *val = f->priv, 0;
    if (strcmp(name, "satp") == 0 && f->has_satp)
        return *val = f->satp, 0;
    return -ENOENT;
}

static void test_cpu_state(void)
{
    const struct prof_arch *a = &prof_arch_riscv64;
    struct prof_arch_cpu_state st;
    struct qp_error err = {0};
    struct fake_regs u = {.priv = 0, .satp = satp(8, 0x1000), .has_priv = true, .has_satp = true};
    CHECK_INT(a->cpu_state(get_reg, &u, &st, &err), 0);
    CHECK_INT(st.privilege, a->user_privilege);
    CHECK(st.paging);
    CHECK_U64(st.as_root, u.satp);
    struct fake_regs s = u;
    s.priv = 1;
    CHECK_INT(a->cpu_state(get_reg, &s, &st, &err), 0);
    CHECK(st.privilege != a->user_privilege && st.privilege > 0);
    struct fake_regs m = u;
    m.priv = 3; /* M-mode: satp does not translate */
    CHECK_INT(a->cpu_state(get_reg, &m, &st, &err), 0);
    CHECK_INT(st.privilege, 0);
    CHECK(!st.paging);
    struct fake_regs bad = u;
    bad.satp = satp(5, 0x1000);
    CHECK_INT(a->cpu_state(get_reg, &bad, &st, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "mode 5") && !strchr(err.msg, '\n'), "%s", err.msg);
    struct fake_regs nopriv = u;
    nopriv.has_priv = false;
    CHECK(a->cpu_state(get_reg, &nopriv, &st, &err) < 0);
    CHECK_MSG(strstr(err.msg, "priv"), "%s", err.msg);
    struct fake_regs badpriv = u;
    badpriv.priv = 2;
    CHECK(a->cpu_state(get_reg, &badpriv, &st, &err) < 0);
}

/* ---- riscv64 over QMP: `info registers -a` text ------------------------------------------ */

static char *load_transcript(const char *name)
{
    char *path = g_strdup_printf("%s/%s", QPROF_TRANSCRIPTS, name), *text = NULL;
    REQUIRE(g_file_get_contents(path, &text, NULL, NULL));
    g_free(path);
    return text;
}

static uint64_t monitor_reg(struct prof_arch_monitor_cpu *c, const char *name)
{
    uint64_t v = 0xdeadbeef;
    CHECK_MSG(prof_arch_monitor_reg(c, name, &v) == 0, "no register %s", name);
    return v;
}

/* The values as QEMU 7.2 printed them (tests/data/qemu-transcripts/riscv64_*). */
static void test_rv_monitor_transcripts(void)
{
    const struct prof_arch *a = &prof_arch_riscv64;
    struct prof_arch_monitor_cpu *c = g_new0(struct prof_arch_monitor_cpu, 2);
    struct qp_error err = {0};
    int n = -1;
    char *s_mode = load_transcript("riscv64_info_registers_s_mode.txt");
    CHECK_INT(a->monitor_parse(s_mode, c, 2, &n, &err), 0);
    CHECK_INT(n, 1);
    CHECK_INT(c[0].cpu_index, 0);
    CHECK_U64(monitor_reg(&c[0], "pc"), 0xffffffc000000166ull);
    CHECK_U64(monitor_reg(&c[0], "sp"), 0xffffffc000009fc0ull);
    CHECK_U64(monitor_reg(&c[0], "fp"), 0xffffffc000009fd0ull);
    CHECK_U64(monitor_reg(&c[0], "s0"), 0xffffffc000009fd0ull);
    CHECK_U64(monitor_reg(&c[0], "ra"), 0xffffffc000000150ull);
    CHECK_U64(monitor_reg(&c[0], "satp"), 0x8000000000080004ull);
    CHECK_U64(monitor_reg(&c[0], "sepc"), 0x10010ull);
    CHECK_U64(monitor_reg(&c[0], "a2"), 0x80006000ull);
    CHECK_U64(monitor_reg(&c[0], "V"), 0);
    uint64_t v;
    CHECK_INT(prof_arch_monitor_reg(&c[0], "priv", &v), -ENOENT); /* QEMU prints none */
    char *u_mode = load_transcript("riscv64_info_registers_u_mode.txt");
    CHECK_INT(a->monitor_parse(u_mode, c, 2, &n, &err), 0);
    CHECK_U64(monitor_reg(&c[0], "pc"), 0x10014ull);
    CHECK_U64(monitor_reg(&c[0], "sp"), 0x21000ull);
    CHECK_U64(monitor_reg(&c[0], "fp"), 0);
    CHECK_U64(monitor_reg(&c[0], "ra"), 0);
    CHECK_U64(monitor_reg(&c[0], "satp"), 0x8000000000080004ull);
    CHECK_U64(monitor_reg(&c[0], "sepc"), 0x10014ull);
    CHECK_U64(monitor_reg(&c[0], "sscratch"), 0xffffffc00000a000ull);
    /* two harts, as `info registers -a` prints them; a table of one keeps the first */
    char *two = g_strconcat(s_mode, u_mode, NULL);
    char *p = strstr(strstr(two, "CPU#0") + 1, "CPU#0");
    REQUIRE(p);
    p[4] = '1';
    CHECK_INT(a->monitor_parse(two, c, 2, &n, &err), 0);
    CHECK_INT(n, 2);
    CHECK_INT(c[1].cpu_index, 1);
    CHECK_U64(monitor_reg(&c[1], "pc"), 0x10014ull);
    CHECK_INT(a->monitor_parse(two, c, 1, &n, &err), 0);
    CHECK_INT(n, 1);
    CHECK_U64(monitor_reg(&c[0], "pc"), 0xffffffc000000166ull);
    g_free(two), g_free(s_mode), g_free(u_mode), g_free(c);
}

/* a's monitor_parse refuses text in one line that names needle */
static void check_refused(const struct prof_arch *a, const char *text, const char *needle)
{
    struct prof_arch_monitor_cpu *c = g_new0(struct prof_arch_monitor_cpu, 4);
    struct qp_error err = {0};
    int n = -1;
    CHECK_INT(a->monitor_parse(text, c, 4, &n, &err), -EPROTO);
    CHECK_MSG(strstr(err.msg, needle) && !strchr(err.msg, '\n'), "\"%s\": %s", text, err.msg);
    g_free(c);
}

/* Every cut of text through a's monitor_parse: a parse or a one-line -EPROTO, never a crash.
 * How many cuts parsed. */
static size_t parsed_cuts(const struct prof_arch *a, const char *text)
{
    struct prof_arch_monitor_cpu *c = g_new0(struct prof_arch_monitor_cpu, 1);
    size_t len = strlen(text), ok = 0;
    int n = 0;
    for (size_t cut = 0; cut <= len; cut++) {
        char *part = g_strndup(text, cut);
        struct qp_error e = {0};
        int rc = a->monitor_parse(part, c, 1, &n, &e);
        CHECK_MSG(rc == 0 || (rc == -EPROTO && e.msg[0] && !strchr(e.msg, '\n')), "cut %zu: %d %s",
                  cut, rc, e.msg);
        ok += rc == 0;
        g_free(part);
    }
    g_free(c);
    return ok;
}

/* Garbage, other architectures' text and every truncation of a real transcript: a one-line
 * error or a parse, never a crash (the Asan build runs this). */
static void test_rv_monitor_garbage(void)
{
    check_refused(&prof_arch_riscv64, "", "no register block");
    check_refused(&prof_arch_riscv64, "CPU#0\n pc ffffffc000000166\n", "lacks sp");
    check_refused(&prof_arch_riscv64, " pc       zzzz\n", "cannot read");
    check_refused(&prof_arch_riscv64, " pc\n", "cannot read");
    check_refused(&prof_arch_riscv64, " pc 1 sp\n", "cannot read");
    check_refused(&prof_arch_riscv64, " x1/ra/toolonganame 0000000000000001 pc 0\n", "cannot read");
    check_refused(&prof_arch_riscv64, "\x01\x02\xff garbage \x7f\n", "cannot read");
    char *x86 = load_transcript("info_registers_cpl3.txt");
    check_refused(&prof_arch_riscv64, x86, "cannot read");
    g_free(x86);
    /* a value wider than 64 bits (a vector register) is skipped, not misread */
    struct prof_arch_monitor_cpu *c = g_new0(struct prof_arch_monitor_cpu, 1);
    struct qp_error err = {0};
    int n = 0;
    CHECK_INT(
        prof_arch_riscv64.monitor_parse(
            " pc 10\n sp 20\n satp 0\n v0 00112233445566778899aabbccddeeff\n", c, 1, &n, &err),
        0);
    uint64_t v;
    CHECK_INT(prof_arch_monitor_reg(c, "v0", &v), -ENOENT);
    char *text = load_transcript("riscv64_info_registers_s_mode.txt");
    size_t ok = parsed_cuts(&prof_arch_riscv64, text);
    CHECK(ok > 0 && ok < strlen(text)); /* whole enough once satp is in, refused before */
    g_free(text), g_free(c);
}

/* The mode QEMU does not print, from pc's leaf entry: U=1 user, U=0 supervisor, no
 * translation machine mode, Bare taken for supervisor; halted when pc follows a wfi. */
static void test_rv_monitor_complete(void)
{
    const struct prof_arch *a = &prof_arch_riscv64;
    memset(ram, 0, RAM_SIZE);
    uint64_t root = 0x1000, l1 = 0x2000, l0 = 0x3000;
    uint64_t user_va = 0x10000, kern_va = 0xffffffc000200000ull;
    set(root, vpn(user_va, 2), pte(l1, V));
    set(l1, vpn(user_va, 1), pte(l0, V));
    set(l0, vpn(user_va, 0), pte(0x10000, V | R | X | U));
    set(root, vpn(kern_va, 2), pte(0, V | R | W | X)); /* a 1 GiB kernel page at 0 */
    uint32_t wfi = 0x10500073;
    memcpy(ram + 0x200100, &wfi, 4);       /* kernel: wfi at kern_va + 0x100 */
    memcpy(ram + 0x10000 + 0x20, &wfi, 4); /* user: a wfi, still user */
    struct {
        uint64_t satp, pc;
        int privilege;
        bool halted;
    } cases[] = {
        {satp(8, root), user_va + 0x24, 3, false},
        {satp(8, root), user_va + 0x8, 3, false},
        {satp(8, root), kern_va + 0x40, 2, false},
        {satp(8, root), kern_va + 0x104, 2, true},
        {satp(8, root), 0x80000000, 0, false}, /* not mapped: M mode */
        {0, 0x200104, 2, true},                /* Bare: taken for S; the wfi physically */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct prof_arch_monitor_cpu *c = g_new0(struct prof_arch_monitor_cpu, 1);
        prof_arch_monitor_set(c, "pc", cases[i].pc);
        prof_arch_monitor_set(c, "sp", 0);
        prof_arch_monitor_set(c, "satp", cases[i].satp);
        struct qp_error err = {0};
        CHECK_INT(a->monitor_complete(c, read_phys, NULL, &err), 0);
        struct prof_arch_cpu_state st = {0};
        CHECK_INT(a->cpu_state(prof_arch_monitor_reg, c, &st, &err), 0);
        CHECK_MSG(st.privilege == cases[i].privilege && c->halted == cases[i].halted,
                  "case %zu: privilege %d halted %d", i, st.privilege, c->halted);
        g_free(c);
    }
    /* a printed priv is believed */
    struct prof_arch_monitor_cpu *c = g_new0(struct prof_arch_monitor_cpu, 1);
    prof_arch_monitor_set(c, "pc", user_va);
    prof_arch_monitor_set(c, "satp", satp(8, root));
    prof_arch_monitor_set(c, "priv", 1);
    struct qp_error err = {0};
    CHECK_INT(a->monitor_complete(c, read_phys, NULL, &err), 0);
    CHECK_U64(monitor_reg(c, "priv"), 1);
    g_free(c);
}

/* ---- aarch64 ----------------------------------------------------------------------------- */

#define A64_TABLE 0x3ull /* a table at levels 0..2, a page at level 3 */
#define A64_BLOCK 0x1ull
/* Attribute bits a translation must not take for address bits: UXN, PXN, nG, AF, SH, AP. */
#define A64_ATTRS (1ull << 54 | 1ull << 53 | 1ull << 11 | 1ull << 10 | 3ull << 8 | 1ull << 6)
#define TCR_EPD0  (1ull << 7)
#define TCR_TBI0  (1ull << 37)

/* TCR_EL1 with T0SZ/T1SZ and the granule encodings (TG0: 0 4K, 1 64K, 2 16K; TG1: 2 4K,
 * 1 16K, 3 64K). */
static uint64_t tcr(int t0sz, unsigned tg0, int t1sz, unsigned tg1)
{
    return (uint64_t)t0sz | (uint64_t)tg0 << 14 | (uint64_t)t1sz << 16 | (uint64_t)tg1 << 30;
}

static int a64_walk(uint64_t ttbr0, uint64_t ttbr1, uint64_t control, uint64_t va, uint64_t *pa,
                    uint64_t *size)
{
    reads = 0;
    struct prof_arch_mmu mmu = {.root_hi = ttbr1, .control = control};
    return prof_arch_page_walk(&prof_arch_aarch64, ttbr0, &mmu, va, read_phys, NULL, pa, size);
}

static unsigned idx(uint64_t va, int shift, int bits)
{
    return (unsigned)(va >> shift) & ((1u << bits) - 1);
}

/* 4K granule: TTBR0 48-bit (4 levels) with a page, a 2 MiB and a 1 GiB block; TTBR1 39-bit
 * (3 levels); and every way to fail. */
static void test_a64_4k(void)
{
    memset(ram, 0, RAM_SIZE);
    const uint64_t l0 = 0x1000, l1 = 0x2000, l2 = 0x3000, l3 = 0x4000;
    const uint64_t va = 0x00007f1234567000ull, va2m = 0x00007f1234800000ull;
    const uint64_t va1g = 0x00007f0040000000ull;
    set(l0, idx(va, 39, 9), l1 | A64_TABLE);
    set(l1, idx(va, 30, 9), l2 | A64_TABLE);
    set(l2, idx(va, 21, 9), l3 | A64_TABLE);
    set(l3, idx(va, 12, 9), 0x200000 | A64_ATTRS | A64_TABLE);
    set(l2, idx(va2m, 21, 9), 0x400000 | A64_ATTRS | A64_BLOCK);
    set(l1, idx(va1g, 30, 9), 0x40000000 | A64_ATTRS | A64_BLOCK);
    const uint64_t t = tcr(16, 0, 25, 2), ttbr0 = 0x1234ull << 48 | l0 | 1; /* ASID, CnP */
    uint64_t pa = 0, size = 0;
    CHECK_INT(a64_walk(ttbr0, 0, t, va + 0x123, &pa, &size), 0);
    CHECK_U64(pa, 0x200123);
    CHECK_U64(size, 4096);
    CHECK_INT(reads, 4);
    CHECK_INT(a64_walk(ttbr0, 0, t, va2m + 0x12345, &pa, &size), 0);
    CHECK_U64(pa, 0x412345);
    CHECK_U64(size, 2u << 20);
    CHECK_INT(a64_walk(ttbr0, 0, t, va1g + 0x1234567, &pa, &size), 0);
    CHECK_U64(pa, 0x41234567);
    CHECK_U64(size, 1u << 30);
    CHECK_INT(a64_walk(ttbr0, 0, t, va + 0x1000, &pa, &size), -EFAULT); /* hole in l3 */
    set(l3, idx(va, 12, 9) + 1, 0x201000 | A64_BLOCK); /* a block at level 3: reserved */
    CHECK_INT(a64_walk(ttbr0, 0, t, va + 0x1000, &pa, &size), -EFAULT);
    set(l0, 5, A64_BLOCK); /* a block at level 0: reserved with 4K */
    CHECK_INT(a64_walk(ttbr0, 0, t, 5ull << 39, &pa, &size), -EFAULT);
    CHECK_INT(reads, 1);
    set(l0, 6, 0x7ff0000000ull | A64_TABLE); /* a table outside RAM */
    CHECK_INT(a64_walk(ttbr0, 0, t, 6ull << 39, &pa, &size), -EFAULT);
    /* Bits 55..48 must copy bit 55: not, no walk */
    CHECK_INT(a64_walk(ttbr0, 0, t, 0x0001000000000000ull, &pa, &size), -EFAULT);
    CHECK_INT(reads, 0);
    /* A tag in the top byte: ignored with TBI0 only */
    CHECK_INT(a64_walk(ttbr0, 0, t, 0x5a00000000000000ull | va, &pa, &size), -EFAULT);
    CHECK_INT(a64_walk(ttbr0, 0, t | TCR_TBI0, 0x5a00000000000000ull | va, &pa, &size), 0);
    CHECK_U64(pa, 0x200000);
    /* EPD0: the low half has no walk */
    CHECK_INT(a64_walk(ttbr0, 0, t | TCR_EPD0, va, &pa, &size), -EFAULT);
    CHECK_INT(reads, 0);
    /* TTBR1, 39-bit: 3 levels from level 1 */
    const uint64_t h1 = 0x5000, h2 = 0x6000, h3 = 0x7000;
    const uint64_t kva = 0xffffff8040081000ull, kva1g = 0xffffff8080000000ull;
    set(h1, idx(kva, 30, 9), h2 | A64_TABLE);
    set(h2, idx(kva, 21, 9), h3 | A64_TABLE);
    set(h3, idx(kva, 12, 9), 0x300000 | A64_ATTRS | A64_TABLE);
    set(h1, idx(kva1g, 30, 9), 0x80000000ull | A64_BLOCK);
    CHECK_INT(a64_walk(ttbr0, h1, t, kva + 8, &pa, &size), 0);
    CHECK_U64(pa, 0x300008);
    CHECK_INT(reads, 3);
    CHECK_INT(a64_walk(ttbr0, h1, t, kva1g + 0x10, &pa, &size), 0);
    CHECK_U64(pa, 0x80000010);
    CHECK_U64(size, 1u << 30);
    /* A 48-bit high address is below a 39-bit TTBR1 half */
    CHECK_INT(a64_walk(ttbr0, h1, t, 0xffff000000001000ull, &pa, &size), -EFAULT);
    CHECK_INT(reads, 0);
}

/* 16K (4 levels for 48 bits, the first with one bit; 32 MiB blocks at level 2) and 64K (3 levels
 * for 48 bits, 2 for 42; 512 MiB blocks at level 2). */
static void test_a64_16k_64k(void)
{
    memset(ram, 0, RAM_SIZE);
    uint64_t pa = 0, size = 0;
    const uint64_t l0 = 0x4000, l1 = 0x8000, l2 = 0xc000, l3 = 0x10000;
    const uint64_t va = 0x0000812345678000ull, va32m = 0x0000812346000000ull;
    set(l0, idx(va, 47, 1), l1 | A64_TABLE);
    set(l1, idx(va, 36, 11), l2 | A64_TABLE);
    set(l2, idx(va, 25, 11), l3 | A64_TABLE);
    set(l3, idx(va, 14, 11), 0x200000 | A64_ATTRS | A64_TABLE);
    set(l2, idx(va32m, 25, 11), 0x2000000 | A64_BLOCK);
    const uint64_t t16 = tcr(16, 2, 16, 1);
    CHECK_INT(a64_walk(l0, 0, t16, va + 0x3abc, &pa, &size), 0);
    CHECK_U64(pa, 0x203abc);
    CHECK_U64(size, 16384);
    CHECK_INT(reads, 4);
    CHECK_INT(a64_walk(l0, 0, t16, va32m + 0x123456, &pa, &size), 0);
    CHECK_U64(pa, 0x2123456);
    CHECK_U64(size, 32u << 20);
    set(l1, idx(va, 36, 11) + 1, 0x40000000ull | A64_BLOCK); /* a level-1 block: reserved */
    CHECK_INT(a64_walk(l0, 0, t16, va + (1ull << 36), &pa, &size), -EFAULT);

    memset(ram, 0, RAM_SIZE);
    const uint64_t m1 = 0x10000, m2 = 0x20000, m3 = 0x30000;
    const uint64_t kva = 0xffff812345670000ull, kva512m = 0xffff812360000000ull;
    set(m1, idx(kva, 42, 6), m2 | A64_TABLE);
    set(m2, idx(kva, 29, 13), m3 | A64_TABLE);
    set(m3, idx(kva, 16, 13), 0x300000 | A64_ATTRS | A64_TABLE);
    set(m2, idx(kva512m, 29, 13), 0x20000000ull | A64_BLOCK);
    const uint64_t t64 = tcr(22, 1, 16, 3);
    CHECK_INT(a64_walk(0, m1, t64, kva + 0xfedc, &pa, &size), 0);
    CHECK_U64(pa, 0x30fedc);
    CHECK_U64(size, 65536);
    CHECK_INT(reads, 3);
    CHECK_INT(a64_walk(0, m1, t64, kva512m + 0x1234568, &pa, &size), 0);
    CHECK_U64(pa, 0x21234568);
    CHECK_U64(size, 512u << 20);
    set(m1, idx(kva, 42, 6) + 1, 0x40000000000ull | A64_BLOCK); /* level-1 block: needs LPA */
    CHECK_INT(a64_walk(0, m1, t64, kva + (1ull << 42), &pa, &size), -EFAULT);
    /* TTBR0 42-bit (T0SZ 22): 2 levels, the same level-2 and level-3 tables */
    const uint64_t uva = 0x0000002345680000ull; /* below 2^42 */
    set(m2, idx(uva, 29, 13), m3 | A64_TABLE);
    set(m3, idx(uva, 16, 13), 0x310000 | A64_TABLE);
    CHECK_INT(a64_walk(m2, m1, t64, uva + 4, &pa, &size), 0);
    CHECK_U64(pa, 0x310004);
    CHECK_INT(reads, 2);
    CHECK_INT(a64_walk(m2, m1, t64, 1ull << 42, &pa, &size), -EFAULT); /* above 42 bits */
}

/* Tables whose every entry points back at the table: the walk reads one entry per level and
 * takes the last one for a page (as the MMU does: the table's own page), never loops. A
 * reserved granule or a TnSZ out of range is refused before any read. */
static void test_a64_loop_and_unknown_granule(void)
{
    memset(ram, 0, RAM_SIZE);
    const uint64_t t4 = 0x1000, t64 = 0x10000;
    for (unsigned i = 0; i < 512; i++)
        set(t4, i, t4 | A64_TABLE);
    for (unsigned i = 0; i < 8192; i++)
        set(t64, i, t64 | A64_TABLE);
    uint64_t pa = 0, size = 0;
    CHECK_INT(a64_walk(t4, t4, tcr(16, 0, 25, 2), 0x5678, &pa, &size), 0);
    CHECK_INT(reads, 4);
    CHECK_U64(pa, 0x1678);
    CHECK_INT(a64_walk(t4, t4, tcr(16, 0, 25, 2), 0xffffffffffff5678ull, &pa, &size), 0);
    CHECK_INT(reads, 3);
    CHECK_INT(a64_walk(t64, t64, tcr(16, 1, 16, 3), 0x12345678, &pa, &size), 0);
    CHECK_INT(reads, 3);
    CHECK_U64(pa, 0x15678);
    /* TG0 0b11 and TG1 0b00 are reserved; the other half still walks */
    CHECK_INT(a64_walk(t4, t4, tcr(16, 3, 25, 2), 0x5678, &pa, &size), -ENOTSUP);
    CHECK_INT(reads, 0);
    CHECK_INT(a64_walk(t4, t4, tcr(16, 3, 25, 2), 0xffffffffffff5678ull, &pa, &size), 0);
    CHECK_INT(a64_walk(t4, t4, tcr(16, 0, 25, 0), 0xffffffffffff5678ull, &pa, &size), -ENOTSUP);
    CHECK_INT(reads, 0);
    CHECK_INT(a64_walk(t4, t4, tcr(40, 0, 25, 2), 0x5678, &pa, &size), -ENOTSUP);
    CHECK_INT(a64_walk(t4, t4, tcr(12, 0, 25, 2), 0x5678, &pa, &size), -ENOTSUP);
    /* Without TCR_EL1, TTBR0 alone cannot be walked */
    reads = 0;
    CHECK_INT(prof_arch_aarch64.page_walk(t4, 0x5678, read_phys, NULL, &pa, &size), -ENOTSUP);
    CHECK_INT(reads, 0);
}

struct a64_regs {
    uint64_t cpsr, sctlr, ttbr0, ttbr1, tcr, elr, sp_el0;
    const char *sctlr_name; /* QEMU 7.2's "SCTLR", or "SCTLR_EL1" */
    const char *missing;
};

static int a64_get_reg(void *ctx, const char *name, uint64_t *val)
{
    const struct a64_regs *f = ctx;
    if (f->missing && strcmp(name, f->missing) == 0)
        return -ENOENT;
    const struct {
        const char *name;
        uint64_t val;
    } regs[] = {{"cpsr", f->cpsr},       {f->sctlr_name, f->sctlr}, {"TTBR0_EL1", f->ttbr0},
                {"TTBR1_EL1", f->ttbr1}, {"TCR_EL1", f->tcr},       {"ELR_EL1", f->elr},
                {"SP_EL0", f->sp_el0}};
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
        if (strcmp(name, regs[i].name) == 0)
            return *val = regs[i].val, 0;
    return -ENOENT;
}

static void test_a64_cpu_state(void)
{
    const struct prof_arch *a = &prof_arch_aarch64;
    struct prof_arch_cpu_state st;
    struct qp_error err = {0};
    const struct a64_regs el0 = {.cpsr = 0x0, /* EL0t */
                                 .sctlr = 0x30d01805,
                                 .ttbr0 = 1ull << 48 | 0x40001000,
                                 .ttbr1 = 0x40002000,
                                 .tcr = tcr(16, 0, 25, 2),
                                 .elr = 0x400120,
                                 .sp_el0 = 0x7ffffffe00,
                                 .sctlr_name = "SCTLR"};
    CHECK_INT(a->cpu_state(a64_get_reg, (void *)&el0, &st, &err), 0);
    CHECK_INT(st.privilege, a->user_privilege);
    CHECK(!st.has_trap_pc && !st.has_trap_sp); /* at EL0 nothing is trapped */
    CHECK(st.paging);
    CHECK_U64(st.as_root, el0.ttbr0);
    CHECK_U64(st.mmu.root_hi, el0.ttbr1);
    CHECK_U64(st.mmu.control, el0.tcr);
    CHECK_U64(st.as_root & a->as_root_mask, 0x40001000); /* no ASID */
    struct a64_regs r = el0;
    r.cpsr = 0x3c5; /* EL1h, DAIF masked */
    r.sctlr_name = "SCTLR_EL1";
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), 0);
    CHECK_INT(st.privilege, 2);
    CHECK(st.paging);
    /* at EL1 a vector's first instruction has the interrupted pc and EL0 sp only there */
    CHECK(st.has_trap_pc && st.has_trap_sp);
    CHECK_U64(st.trap_pc, 0x400120);
    CHECK_U64(st.trap_sp, 0x7ffffffe00);
    r.missing = "ELR_EL1"; /* a stub without it: a pc in neither half, so the walk ends marked */
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), 0);
    CHECK(st.has_trap_pc);
    CHECK(st.trap_pc >= a->split.user_end && st.trap_pc < a->split.kernel_start);
    r.missing = NULL;
    r.cpsr = 0x9; /* EL2h: not the EL1&0 regime */
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), 0);
    CHECK_INT(st.privilege, 1);
    CHECK(!st.paging);
    r = el0;
    r.sctlr = 0x30d00800; /* MMU off: no walk, and no complaint about the TCR */
    r.tcr = tcr(16, 3, 25, 2);
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), 0);
    CHECK(!st.paging);
    r.sctlr = el0.sctlr; /* on: the reserved TG0 is refused */
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "TG0") && strstr(err.msg, "reserved") && !strchr(err.msg, '\n'), "%s",
              err.msg);
    r.tcr |= TCR_EPD0; /* ... unless the low half does not walk */
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), 0);
    r.tcr = tcr(16, 0, 12, 2);
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "T1SZ 12") && !strchr(err.msg, '\n'), "%s", err.msg);
    r = el0;
    r.missing = "TCR_EL1";
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), -ENOENT);
    CHECK_MSG(strstr(err.msg, "TCR_EL1") && !strchr(err.msg, '\n'), "%s", err.msg);
    r.missing = "SCTLR";
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), -ENOENT);
    r = el0;
    r.cpsr = 0x10; /* AArch32 user mode */
    CHECK_INT(a->cpu_state(a64_get_reg, &r, &st, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "AArch32") && !strchr(err.msg, '\n'), "%s", err.msg);
}

/* Whether a vCPU's root register names a Linux mm's top-level table, architecture by
 * architecture: the flag, ASID and mode bits beside the address are not part of it, and a root
 * that differs in its address bits never matches. */
static void test_root_names_table(void)
{
    const struct prof_arch *x = &prof_arch_x86_64, *rv = &prof_arch_riscv64,
                           *a = &prof_arch_aarch64;
    /* x86_64: CR3's address bits; PTI's user table (bit 12) names the pair's pgd too. */
    CHECK(x->root_names_table(0x1234000, 0x1234000));
    CHECK(x->root_names_table(0x1235000, 0x1234000));
    CHECK(!x->root_names_table(0x1236000, 0x1234000));
    CHECK(!x->root_names_table(0x11234000, 0x1234000));
    /* riscv64: satp = Sv39 | ASID 5 | PPN 0x80201 names the table at 0x80201000, not the PPN
     * itself; Bare mode names none. */
    uint64_t satp = UINT64_C(8) << 60 | UINT64_C(5) << 44 | 0x80201;
    CHECK(rv->root_names_table(satp, 0x80201000));
    CHECK(!rv->root_names_table(satp, 0x80201));
    CHECK(!rv->root_names_table(satp, 0x80202000));
    CHECK(rv->root_names_table(UINT64_C(9) << 60 | 0x80201, 0x80201000)); /* Sv48 */
    CHECK(!rv->root_names_table(0x80201, 0x80201000));                    /* Bare */
    /* aarch64: TTBR0 = ASID 0x2a | BADDR | CnP names the table at BADDR. */
    uint64_t ttbr0 = UINT64_C(0x2a) << 48 | 0x4a5f3000 | 1;
    CHECK(a->root_names_table(ttbr0, 0x4a5f3000));
    CHECK(a->root_names_table(0x4a5f3000, 0x4a5f3000));
    CHECK(!a->root_names_table(ttbr0, 0x4a5f4000));
    CHECK(!a->root_names_table(UINT64_C(0x2a) << 48 | 0x41a2e000, 0x4a5f3000)); /* reserved */
}

/* A file holding only an ELF header of the given machine. */
static char *elf_file(const char *dir, const char *name, uint16_t machine)
{
    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_EXEC;
    eh.e_machine = machine;
    eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof eh;
    char *path = g_strdup_printf("%s/%s", dir, name);
    g_file_set_contents(path, (const char *)&eh, sizeof eh, NULL);
    return path;
}

static void test_choice(void)
{
    char dir[] = "/tmp/qparchXXXXXX";
    REQUIRE(mkdtemp(dir));
    char *rv = elf_file(dir, "rv.elf", EM_RISCV), *x86 = elf_file(dir, "x86.elf", EM_X86_64);
    char *arm = elf_file(dir, "arm.elf", EM_AARCH64);
    char *map = g_strdup_printf("%s/System.map", dir);
    g_file_set_contents(map, "ffffffff80000000 T _start\n", -1, NULL);
    const struct prof_arch *a = NULL;
    struct qp_error err = {0};
    CHECK_INT(prof_arch_of_elf_file(rv, &a, &err), 0);
    CHECK(a == &prof_arch_riscv64);
    CHECK_INT(prof_arch_of_elf_file(x86, &a, &err), 0);
    CHECK(a == &prof_arch_x86_64);
    CHECK_INT(prof_arch_of_elf_file(map, &a, &err), 0); /* no ELF: nothing to check */
    CHECK(a == NULL);
    CHECK_INT(prof_arch_of_elf_file(arm, &a, &err), 0);
    CHECK(a == &prof_arch_aarch64);
    /* An aarch64 kernel given for a riscv64 guest */
    CHECK_INT(prof_arch_check_match(&prof_arch_aarch64, arm, &prof_arch_riscv64, "gdbstub", &err),
              -EINVAL);
    CHECK_MSG(
        strstr(err.msg, "is an ELF for aarch64, but the guest behind the gdbstub is riscv64") &&
            !strchr(err.msg, '\n'),
        "%s", err.msg);
    /* An ELF of a machine qprof does not know */
    char *ppc = elf_file(dir, "ppc.elf", EM_PPC64);
    CHECK_INT(prof_arch_of_elf_file(ppc, &a, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "ppc64") && strstr(err.msg, "21") && !strchr(err.msg, '\n'), "%s",
              err.msg);
    unlink(ppc);
    g_free(ppc);
    /* A riscv64 kernel for an x86_64 guest, and the other way round. */
    CHECK_INT(prof_arch_check_match(&prof_arch_riscv64, rv, &prof_arch_x86_64, "gdbstub", &err),
              -EINVAL);
    CHECK_MSG(strstr(err.msg, "riscv64") && strstr(err.msg, "x86_64") && strstr(err.msg, "gdbstub"),
              "%s", err.msg);
    CHECK(prof_arch_check_match(&prof_arch_x86_64, x86, &prof_arch_riscv64, "gdbstub", &err) < 0);
    CHECK_INT(prof_arch_check_match(&prof_arch_riscv64, rv, &prof_arch_riscv64, "gdbstub", &err),
              0);
    CHECK_INT(prof_arch_check_match(NULL, map, &prof_arch_riscv64, "gdbstub", &err), 0);
    /* target.xml's names */
    CHECK(prof_arch_for_gdb("riscv:rv64") == &prof_arch_riscv64);
    CHECK(prof_arch_for_gdb("i386:x86-64") == &prof_arch_x86_64);
    CHECK(prof_arch_for_gdb("aarch64") == &prof_arch_aarch64);
    CHECK(prof_arch_for_gdb("arm") == NULL);
    for (char **p = (char *[]){rv, x86, arm, map, NULL}; *p; p++) {
        unlink(*p);
        g_free(*p);
    }
    rmdir(dir);
}

/* ---- aarch64 over QMP: `info registers -a` text ------------------------------------------- */

/* The values as QEMU 7.2 printed them at EL1 on a Cortex-A57 and at EL0 on `-cpu max`
 * (tests/data/qemu-transcripts/aarch64_*, from tests/arch/a64_mini.S). */
static void test_a64_monitor_transcripts(void)
{
    const struct prof_arch *a = &prof_arch_aarch64;
    struct prof_arch_monitor_cpu *c = g_new0(struct prof_arch_monitor_cpu, 2);
    struct qp_error err = {0};
    struct prof_arch_cpu_state st = {0};
    int n = -1;
    char *el1 = load_transcript("aarch64_info_registers_el1.txt");
    CHECK_INT(a->monitor_parse(el1, c, 2, &n, &err), 0);
    CHECK_INT(n, 1);
    CHECK_INT(c[0].cpu_index, 0);
    CHECK_U64(monitor_reg(&c[0], "pc"), 0xffffff8040080fc8ull);
    CHECK_U64(monitor_reg(&c[0], "sp"), 0xffffff80400a9fb0ull);
    CHECK_U64(monitor_reg(&c[0], "x29"), 0xffffff80400a9fb0ull);
    CHECK_U64(monitor_reg(&c[0], "x30"), 0xffffff8040080fb4ull);
    CHECK_U64(monitor_reg(&c[0], "x0"), 0x3c0ull);
    CHECK_U64(monitor_reg(&c[0], "x9"), 0x2406ull);
    CHECK_U64(monitor_reg(&c[0], "cpsr"), 0x200003c5ull);
    uint64_t v;
    CHECK_INT(prof_arch_monitor_reg(&c[0], "TTBR0_EL1", &v), -ENOENT); /* QEMU prints none */
    CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), 0);
    CHECK_INT(st.privilege, 2); /* EL1 */
    CHECK(st.paging);           /* EL1 in the TTBR1 half */
    CHECK_U64(st.as_root, 0);   /* no root to walk from: QEMU translates */
    /* no ELR_EL1 in the text: a trap pc in neither half, never an unknown one */
    CHECK(st.has_trap_pc && !st.has_trap_sp);
    CHECK(st.trap_pc >= a->split.user_end && st.trap_pc < a->split.kernel_start);
    /* the gdbstub's cpu_state needs what the text lacks: refused, not guessed */
    CHECK_INT(a->cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), -ENOENT);
    char *el0 = load_transcript("aarch64_info_registers_el0.txt");
    CHECK_INT(a->monitor_parse(el0, c, 2, &n, &err), 0);
    CHECK_U64(monitor_reg(&c[0], "pc"), 0x10030ull);
    CHECK_U64(monitor_reg(&c[0], "sp"), 0x20fa0ull);
    CHECK_U64(monitor_reg(&c[0], "x29"), 0x20fa0ull);
    CHECK_U64(monitor_reg(&c[0], "x30"), 0x1001cull);
    CHECK_U64(monitor_reg(&c[0], "x19"), 0x2f4aull);
    CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), 0);
    CHECK_INT(st.privilege, 3); /* EL0 */
    CHECK(st.paging);
    CHECK(!st.has_trap_pc);
    /* two CPUs, as `info registers -a` prints them; a table of one keeps the first */
    char *two = g_strconcat(el1, el0, NULL);
    char *p = strstr(strstr(two, "CPU#0") + 1, "CPU#0");
    REQUIRE(p);
    p[4] = '1';
    CHECK_INT(a->monitor_parse(two, c, 2, &n, &err), 0);
    CHECK_INT(n, 2);
    CHECK_INT(c[1].cpu_index, 1);
    CHECK_U64(monitor_reg(&c[1], "pc"), 0x10030ull);
    CHECK_INT(a->monitor_parse(two, c, 1, &n, &err), 0);
    CHECK_INT(n, 1);
    CHECK_U64(monitor_reg(&c[0], "pc"), 0xffffff8040080fc8ull);
    /* with the FPU on (and SVE on -cpu max) QEMU goes on with FPCR/FPSR and the vector
     * registers, colon-separated: skipped, the rest read alike */
    char *fpu = g_strconcat(el0, "     FPCR=00000000 FPSR=00000000\r\n",
                            "Q00=0000000000000000:0000000000000001 Q01=0:0\r\n",
                            "ZCR_EL1[LEN]=00000003 ::     P00=0000\r\n",
                            "Z00=0000000000000000:0000000000000000:0000000000000000\r\n", NULL);
    CHECK_INT(a->monitor_parse(fpu, c, 1, &n, &err), 0);
    CHECK_U64(monitor_reg(&c[0], "pc"), 0x10030ull);
    CHECK_U64(monitor_reg(&c[0], "x30"), 0x1001cull);
    g_free(fpu);
    /* EL1 in the low half reads as translation off (boot code): sampled without a stack */
    char *low = g_strdup(el1);
    memcpy(strstr(low, "PC=") + 3, "0000000040080fc8", 16);
    CHECK_INT(a->monitor_parse(low, c, 1, &n, &err), 0);
    CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), 0);
    CHECK(!st.paging);
    /* EL2: never translated by the EL1&0 regime */
    char *el2 = g_strdup(el1);
    memcpy(strstr(el2, "PSTATE=") + 7, "200003c9 --C- EL2h", 18);
    CHECK_INT(a->monitor_parse(el2, c, 1, &n, &err), 0);
    CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), 0);
    CHECK_INT(st.privilege, 1);
    CHECK(!st.paging);
    g_free(el2), g_free(low), g_free(two), g_free(el1), g_free(el0), g_free(c);
}

/* Garbage, other architectures' text, a PSTATE whose text and bits disagree, and every
 * truncation of a real transcript: a one-line error or a parse, never a crash. */
static void test_a64_monitor_garbage(void)
{
    check_refused(&prof_arch_aarch64, "", "no register block");
    check_refused(&prof_arch_aarch64, "CPU#0\n PC=ffffff8040080fc8\n", "lacks x0");
    check_refused(&prof_arch_aarch64, " PC=zzzz\n", "cannot read");
    check_refused(&prof_arch_aarch64, " PC=\n", "cannot read");
    check_refused(&prof_arch_aarch64, " X00=00112233445566778899\n", "cannot read");
    check_refused(&prof_arch_aarch64, "\x01\x02\xff garbage \x7f\n", "lacks");
    char *x86 = load_transcript("info_registers_cpl3.txt");
    check_refused(&prof_arch_aarch64, x86, "lacks");
    g_free(x86);
    char *rv = load_transcript("riscv64_info_registers_s_mode.txt");
    check_refused(&prof_arch_aarch64, rv, "lacks");
    g_free(rv);
    /* a vCPU in AArch32 state, as aarch64_cpu_dump_state's 32-bit twin prints it */
    check_refused(&prof_arch_aarch64,
                  "R00=00000000 R01=00000000 R02=00000000 R03=00000000\n"
                  "R12=00000000 R13=00000000 R14=00000000 R15=00010000\n"
                  "PSR=600001d3 -ZC- A S svc32\n",
                  "in AArch64 state");
    char *text = load_transcript("aarch64_info_registers_el1.txt");
    char *liar = g_strdup(text); /* EL bits say 1, the text EL0 */
    memcpy(strstr(liar, "EL1h"), "EL0t", 4);
    check_refused(&prof_arch_aarch64, liar, "another exception level");
    char *mute = g_strdup(text); /* no EL in PSTATE's text */
    memcpy(strstr(mute, "EL1h"), "xxxx", 4);
    check_refused(&prof_arch_aarch64, mute, "no exception level");
    /* only cuts inside PSTATE's line past its EL text, or in what follows, still parse */
    size_t ok = parsed_cuts(&prof_arch_aarch64, text);
    CHECK(ok > 0 && ok < 40);
    g_free(text), g_free(liar), g_free(mute);
}

/* ---- x86_64 over QMP and the gdbstub; the tables' choices and RAM layouts -------------- */

/* The values as QEMU printed them (tests/data/qemu-transcripts/info_registers_*). */
static void test_x86_monitor_transcripts(void)
{
    const struct prof_arch *a = &prof_arch_x86_64;
    struct prof_arch_monitor_cpu *c = g_new0(struct prof_arch_monitor_cpu, 2);
    struct prof_arch_cpu_state st;
    struct qp_error err = {0};
    int n = -1;
    char *cpl3 = load_transcript("info_registers_cpl3.txt");
    CHECK_INT(a->monitor_parse(cpl3, c, 2, &n, &err), 0);
    CHECK_INT(n, 1);
    CHECK_INT(c[0].cpu_index, 0);
    CHECK(!c[0].halted);
    CHECK_U64(monitor_reg(&c[0], "rip"), 0x4010c0ull);
    CHECK_U64(monitor_reg(&c[0], "rsp"), 0x7ffe4550a508ull);
    CHECK_U64(monitor_reg(&c[0], "rbx"), 0x7ffe4550a6b8ull);
    CHECK_U64(monitor_reg(&c[0], "r10"), 0x4471a0ull); /* "R10=": no blank before '=' */
    CHECK_U64(monitor_reg(&c[0], "r14"), 1);
    CHECK_U64(monitor_reg(&c[0], "cs"), 0x33);
    CHECK_U64(monitor_reg(&c[0], "cr3"), 0x2b28000ull);
    st = (struct prof_arch_cpu_state){0};
    CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), 0);
    CHECK_INT(st.privilege, a->user_privilege);
    CHECK(st.paging && !st.unwalkable);
    CHECK_U64(st.as_root, 0x2b28000ull);
    CHECK_U64(st.percpu_base, 0); /* a user GS */
    /* every register the gdbstub's table names is there, by the same names */
    for (int i = 0; i < a->n_gdb_regs; i++)
        monitor_reg(&c[0], a->gdb_regs[i].gdb_name);
    char *cpl0 = load_transcript("info_registers_cpl0.txt");
    CHECK_INT(a->monitor_parse(cpl0, c, 2, &n, &err), 0);
    st = (struct prof_arch_cpu_state){0};
    CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), 0);
    CHECK_INT(st.privilege, 0);
    CHECK_U64(st.percpu_base, 0xffff8a174f800000ull); /* the GS line's base, not its selector */
    CHECK_U64(monitor_reg(&c[0], "rip"), 0xffffffff9f26ed4dull);
    char *smp2 = load_transcript("info_registers_a_smp2.txt");
    CHECK_INT(a->monitor_parse(smp2, c, 2, &n, &err), 0);
    CHECK_INT(n, 2);
    CHECK_INT(c[1].cpu_index, 1);
    CHECK_U64(monitor_reg(&c[0], "rip"), 0x530945ull);
    CHECK_U64(monitor_reg(&c[1], "rip"), 0x42a600ull);
    CHECK_U64(monitor_reg(&c[1], "cr3"), 0x2a44000ull);
    CHECK_INT(a->monitor_parse(smp2, c, 1, &n, &err), 0); /* a table of one keeps the first */
    CHECK_INT(n, 1);
    CHECK_U64(monitor_reg(&c[0], "rip"), 0x530945ull);
    CHECK(parsed_cuts(a, cpl3) > 0);
    g_free(cpl3), g_free(cpl0), g_free(smp2), g_free(c);
}

/* What the monitor prints outside long mode: Exx names, HLT, the CPL QEMU keeps (not CS's low
 * bits, which in real mode are a paragraph's), and the modes the 4-level walk does not serve. */
static void test_x86_monitor_modes(void)
{
    const struct prof_arch *a = &prof_arch_x86_64;
    struct prof_arch_monitor_cpu *c = g_new0(struct prof_arch_monitor_cpu, 1);
    struct prof_arch_cpu_state st;
    struct qp_error err = {0};
    int n = -1;
    static const char real[] = "EAX=00000000 EBX=00000000 ECX=00000000 EDX=00000663\n"
                               "ESI=00000000 EDI=00000000 EBP=00000000 ESP=00006f00\n"
                               "EIP=0000fff0 EFL=00000002 [-------] CPL=0 II=0 A20=1 SMM=0 HLT=1\n"
                               "CS =f003 ffff0000 0000ffff 00009b00\n"
                               "CR0=60000010 CR2=00000000 CR3=00000000 CR4=00000000\n"
                               "EFER=0000000000000000\n";
    CHECK_INT(a->monitor_parse(real, c, 1, &n, &err), 0);
    CHECK(c[0].halted);
    CHECK_U64(monitor_reg(&c[0], "rip"), 0xfff0);
    CHECK_U64(monitor_reg(&c[0], "rsp"), 0x6f00);
    CHECK_U64(monitor_reg(&c[0], "r8"), 0); /* not printed outside long mode */
    st = (struct prof_arch_cpu_state){0};
    CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), 0);
    CHECK_INT(st.privilege, 0);          /* CS's low bits say 3 */
    CHECK(!st.paging && !st.unwalkable); /* paging off: physical = virtual */
    char *paged32 = g_strdup(real);
    memcpy(strstr(paged32, "CR0=") + 4, "80000011", 8); /* CR0.PG without EFER.LMA */
    CHECK_INT(a->monitor_parse(paged32, c, 1, &n, &err), 0);
    CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), 0);
    CHECK(!st.paging && st.unwalkable);
    char *la57 = load_transcript("info_registers_cpl0.txt");
    memcpy(strstr(la57, "CR4=") + 4, "000016f0", 8);
    CHECK_INT(a->monitor_parse(la57, c, 1, &n, &err), 0);
    CHECK_INT(a->monitor_cpu_state(prof_arch_monitor_reg, &c[0], &st, &err), 0);
    CHECK(st.paging && st.unwalkable);
    check_refused(a, "", "no register block");
    check_refused(a, "RIP=ffffffff81000000 RSP=ffffc90000003f00\n", "lacks RIP, RSP or CPL");
    check_refused(a, "CPU#0\nRIP=zz RSP=0 CPL=0\n", "cannot parse RIP");
    check_refused(a, "RIP=1 RSP=2 CPL=x\n", "cannot parse CPL");
    check_refused(a, "RIP=1 RSP=2 CPL=0\nGS =0000\n", "cannot parse GS");
    g_free(paged32), g_free(la57), g_free(c);
}

/* The gdbstub's registers: CPL from CS, and the walk's modes from CR0, EFER and CR4 (in the `g`
 * reply); missing CR0 and EFER are taken as long mode, as QEMU's description has them. */
static void test_x86_cpu_state(void)
{
    const struct prof_arch *a = &prof_arch_x86_64;
    struct prof_arch_monitor_cpu *r = g_new0(struct prof_arch_monitor_cpu, 1);
    struct prof_arch_cpu_state st = {0};
    struct qp_error err = {0};
    prof_arch_monitor_set(r, "cs", 0x33);
    prof_arch_monitor_set(r, "cr3", 0x1234fff);
    CHECK_INT(a->cpu_state(prof_arch_monitor_reg, r, &st, &err), 0);
    CHECK_INT(st.privilege, 3);
    CHECK(st.paging && !st.unwalkable);
    CHECK_U64(st.as_root, 0x1234000ull);
    prof_arch_monitor_set(r, "cr4", 1u << 12); /* LA57 */
    CHECK_INT(a->cpu_state(prof_arch_monitor_reg, r, &st, &err), 0);
    CHECK(st.paging && st.unwalkable);
    prof_arch_monitor_set(r, "cr4", 0);
    prof_arch_monitor_set(r, "cr0", 0x80000011);
    prof_arch_monitor_set(r, "efer", 0);
    st = (struct prof_arch_cpu_state){0};
    CHECK_INT(a->cpu_state(prof_arch_monitor_reg, r, &st, &err), 0);
    CHECK(!st.paging && st.unwalkable);
    prof_arch_monitor_set(r, "cr0", 0x11);
    st = (struct prof_arch_cpu_state){0};
    CHECK_INT(a->cpu_state(prof_arch_monitor_reg, r, &st, &err), 0);
    CHECK(!st.paging && !st.unwalkable);
    g_free(r);
}

static bool has_rip(const void *ctx, const char *name)
{
    (void)ctx;
    return strcmp(name, "rip") == 0;
}

static bool has_pc(const void *ctx, const char *name)
{
    (void)ctx;
    return strcmp(name, "pc") == 0;
}

/* A transport that names no architecture: QMP without query-target is taken for x86_64, a
 * target.xml without <architecture> is x86_64's only when it has rip. Who reads `info
 * registers` itself and who leaves translation to QEMU. */
static void test_unnamed_and_monitor(void)
{
    CHECK(prof_arch_unnamed() == &prof_arch_x86_64);
    CHECK(prof_arch_for_gdb_regs(has_rip, NULL) == &prof_arch_x86_64);
    CHECK(prof_arch_for_gdb_regs(has_pc, NULL) == NULL);
    const struct prof_arch *all[] = {&prof_arch_x86_64, &prof_arch_riscv64, &prof_arch_aarch64};
    for (size_t i = 0; i < 3; i++)
        CHECK_MSG(all[i]->monitor_parse != NULL, "%s", all[i]->name);
    CHECK(!prof_arch_x86_64.monitor_translated && !prof_arch_riscv64.monitor_translated);
    CHECK(prof_arch_aarch64.monitor_translated);
    CHECK_STR(prof_arch_x86_64.qom_cpu_id, "apic-id");
    CHECK(!prof_arch_riscv64.qom_cpu_id && !prof_arch_aarch64.qom_cpu_id);
}

/* Where the usual machine puts a RAM block of a given size: x86_64's around the legacy hole and
 * refused where QEMU splits it, riscv64's and aarch64's virt in one piece. */
static void test_usual_ram(void)
{
    struct prof_arch_ram_piece p[4];
    const uint64_t mib = 1u << 20, gib = UINT64_C(1) << 30;
    CHECK_INT(prof_arch_usual_ram(&prof_arch_x86_64, 512 * mib, p, 4), 2);
    CHECK_U64(p[0].start, 0);
    CHECK_U64(p[0].end, 0xa0000);
    CHECK_U64(p[0].offset, 0);
    CHECK_U64(p[1].start, mib);
    CHECK_U64(p[1].end, 512 * mib);
    CHECK_U64(p[1].offset, mib);
    CHECK_INT(prof_arch_usual_ram(&prof_arch_x86_64, 2 * gib + 704 * mib, p, 4), 2);
    CHECK_INT(prof_arch_usual_ram(&prof_arch_x86_64, 2 * gib + 768 * mib, p, 4), 0);
    CHECK_INT(prof_arch_usual_ram(&prof_arch_x86_64, 4 * gib, p, 4), 0);
    CHECK_INT(prof_arch_usual_ram(&prof_arch_x86_64, mib, p, 4), 0); /* ends in the hole */
    CHECK_INT(prof_arch_usual_ram(&prof_arch_x86_64, 512 * mib, p, 1), 0);
    CHECK_INT(prof_arch_usual_ram(&prof_arch_riscv64, 256 * mib, p, 4), 1);
    CHECK_U64(p[0].start, 0x80000000u);
    CHECK_U64(p[0].end, 0x90000000u);
    CHECK_U64(p[0].offset, 0);
    CHECK_INT(prof_arch_usual_ram(&prof_arch_aarch64, 8 * gib, p, 1), 1);
    CHECK_U64(p[0].start, 0x40000000u);
    CHECK_U64(p[0].end, 0x40000000u + 8 * gib);
    CHECK_INT(prof_arch_usual_ram(&prof_arch_aarch64, 0, p, 1), 0);
}

/* ---- The unwinder's view of each machine (prof_arch.unwind) ------------------------------ */

/* Whether addr is bits 63 down to va_bits - 1 all equal: unwind/'s test of a return address. */
static bool fits_va(uint64_t addr, unsigned va_bits)
{
    uint64_t top = addr >> (va_bits - 1);
    return top == 0 || top == UINT64_MAX >> (va_bits - 1);
}

/* The unwind entry agrees with the rest of its table: the same ELF machine, pc and sp slots and
 * frame record; both address halves' edges are addresses of its width, and one bit past it is
 * not. */
static void test_unwind_machines(void)
{
    static const struct {
        const struct prof_arch *a;
        unsigned va_bits, nregs;
        bool link_register;
    } want[] = {{&prof_arch_x86_64, 48, UNW_X86_64_NREGS, false},
                {&prof_arch_riscv64, 57, 32, true},
                {&prof_arch_aarch64, 52, 32, true}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct prof_arch *a = want[i].a;
        const struct unw_machine *m = a->unwind;
        REQUIRE(m && m->fp && m->fp->state_at && m->fp->call_before);
        CHECK_MSG(strcmp(m->name, a->name) == 0, "%s: unwind name %s", a->name, m->name);
        CHECK_U64(m->elf_machine, a->elf_machine);
        CHECK_U64(m->pc_slot, (unsigned)a->pc_reg);
        CHECK_U64(m->sp_slot, (unsigned)a->sp_reg);
        CHECK_U64(m->nregs, want[i].nregs);
        CHECK(m->link_register == want[i].link_register);
        CHECK_U64(m->fp->fp_reg, (unsigned)a->frame.fp_reg);
        CHECK_U64((uint64_t)m->fp->saved_fp, (uint64_t)a->frame.saved_fp);
        CHECK_U64((uint64_t)m->fp->saved_ra, (uint64_t)a->frame.saved_ra);
        CHECK_U64(m->va_bits, want[i].va_bits);
        CHECK_MSG(fits_va(a->split.user_end - 1, m->va_bits), "%s: user end", a->name);
        CHECK_MSG(fits_va(a->split.kernel_start, m->va_bits), "%s: kernel start", a->name);
        CHECK_MSG(!fits_va(UINT64_C(1) << m->va_bits, m->va_bits), "%s: one bit wider", a->name);
        CHECK_MSG(!fits_va(UINT64_C(1) << (m->va_bits - 1), m->va_bits), "%s: the sign bit alone",
                  a->name);
    }
}

/* Where a function is in its frame record at pc, by its arch's reader. */
static enum unw_fp_state fp_state(const struct prof_arch *a, const void *code, size_t len,
                                  uint64_t pc, uint64_t *push)
{
    struct unw_code f = {.start = 0x1000, .code = code, .len = len};
    *push = 0;
    return a->unwind->fp->state_at(&f, 0x1000 + pc, push);
}

/* x86_64: push %rbp; mov %rsp,%rbp; call; pop %rbp; ret, and a call before a return address. */
static void test_fp_x86_64(void)
{
    static const uint8_t fn[] = {0x55,                         /* 0: push %rbp */
                                 0x48, 0x89, 0xe5,             /* 1: mov %rsp,%rbp */
                                 0xe8, 0x00, 0x00, 0x00, 0x00, /* 4: call 9 */
                                 0x5d,                         /* 9: pop %rbp */
                                 0xc3};                        /* 10: ret */
    const struct prof_arch *a = &prof_arch_x86_64;
    uint64_t push;
    CHECK_U64(fp_state(a, fn, sizeof fn, 0, &push), UNW_FP_AT_ENTRY);
    CHECK_U64(fp_state(a, fn, sizeof fn, 1, &push), UNW_FP_PUSHED);
    CHECK_U64(push, 16);
    CHECK_U64(fp_state(a, fn, sizeof fn, 2, &push), UNW_FP_UNKNOWN); /* inside an instruction */
    CHECK_U64(fp_state(a, fn, sizeof fn, 4, &push), UNW_FP_FRAMED);
    CHECK_U64(fp_state(a, fn, sizeof fn, 9, &push), UNW_FP_FRAMED);
    CHECK_U64(fp_state(a, fn, sizeof fn, 10, &push), UNW_FP_POPPED);
    /* 0x1000: nop; 0x1001: call 0x2000; the return address 0x1006 */
    static const uint8_t caller[] = {0x90, 0xe8, 0xfa, 0x0f, 0x00, 0x00, 0xc3};
    struct unw_code c = {.start = 0x1000, .code = caller, .len = sizeof caller};
    CHECK(a->unwind->fp->call_before(&c, 0x1006, 0x2000));
    CHECK(!a->unwind->fp->call_before(&c, 0x1006, 0x2004));
    CHECK(!a->unwind->fp->call_before(&c, 0x1007, 0x2000));
}

static void put32(uint8_t *p, const uint32_t *insns, size_t n)
{
    for (size_t i = 0; i < n; i++)
        memcpy(p + 4 * i, &insns[i], 4); /* little-endian host, as the guests */
}

/* aarch64: stp x29, x30, [sp, #-32]!; mov x29, sp; bl; ldp x29, x30, [sp], #32; ret. */
static void test_fp_aarch64(void)
{
    static const uint32_t insns[] = {0xa9be7bfd, 0x910003fd, 0x94000040, 0xa8c27bfd, 0xd65f03c0};
    uint8_t fn[sizeof insns];
    put32(fn, insns, 5);
    const struct prof_arch *a = &prof_arch_aarch64;
    uint64_t push;
    CHECK_U64(fp_state(a, fn, sizeof fn, 0, &push), UNW_FP_AT_ENTRY);
    CHECK_U64(fp_state(a, fn, sizeof fn, 4, &push), UNW_FP_PUSHED);
    CHECK_U64(push, 32);
    CHECK_U64(fp_state(a, fn, sizeof fn, 8, &push), UNW_FP_FRAMED);
    CHECK_U64(fp_state(a, fn, sizeof fn, 12, &push), UNW_FP_FRAMED);
    CHECK_U64(fp_state(a, fn, sizeof fn, 16, &push), UNW_FP_POPPED);
    CHECK_U64(fp_state(a, fn, sizeof fn, 6, &push), UNW_FP_UNKNOWN);
    /* 0x1000: nop; 0x1004: bl 0x1104; the return address 0x1008 */
    static const uint32_t call[] = {0xd503201f, 0x94000040};
    uint8_t caller[sizeof call];
    put32(caller, call, 2);
    struct unw_code c = {.start = 0x1000, .code = caller, .len = sizeof caller};
    CHECK(a->unwind->fp->call_before(&c, 0x1008, 0x1104));
    CHECK(!a->unwind->fp->call_before(&c, 0x1008, 0x1100));
    CHECK(!a->unwind->fp->call_before(&c, 0x1004, 0x1104)); /* after the nop */
}

/* riscv64: addi sp,sp,-16; sd ra,8(sp); sd s0,0(sp); addi s0,sp,16; jal ra,+0x100;
 * ld ra,8(sp); ld s0,0(sp); addi sp,sp,16; ret. */
static void test_fp_riscv64(void)
{
    static const uint32_t insns[] = {0xff010113, 0x00113423, 0x00813023, 0x01010413, 0x100000ef,
                                     0x00813083, 0x00013403, 0x01010113, 0x00008067};
    uint8_t fn[sizeof insns];
    put32(fn, insns, 9);
    const struct prof_arch *a = &prof_arch_riscv64;
    uint64_t push;
    CHECK_U64(fp_state(a, fn, sizeof fn, 0, &push), UNW_FP_AT_ENTRY);
    CHECK_U64(fp_state(a, fn, sizeof fn, 0x10, &push), UNW_FP_FRAMED);
    CHECK_U64(fp_state(a, fn, sizeof fn, 0x14, &push), UNW_FP_FRAMED);
    CHECK_U64(fp_state(a, fn, sizeof fn, 0x1c, &push), UNW_FP_POPPED);
    CHECK_U64(fp_state(a, fn, sizeof fn, 0x20, &push), UNW_FP_POPPED);
    CHECK_U64(fp_state(a, fn, sizeof fn, 0x12, &push), UNW_FP_UNKNOWN);
    /* the jal at 0x1010 calls 0x1110; its return address is 0x1014 */
    struct unw_code c = {.start = 0x1000, .code = fn, .len = sizeof fn};
    CHECK(a->unwind->fp->call_before(&c, 0x1014, 0x1110));
    CHECK(!a->unwind->fp->call_before(&c, 0x1014, 0x1114));
    CHECK(!a->unwind->fp->call_before(&c, 0x1018, 0x1110));
}

/* The demo ABI's frame of each table: its size and ABI tag, and that to_regs puts the frame's sp
 * word in the sp slot and returns the pc it put in the pc slot. */
static void test_abi_frames(void)
{
    static const struct {
        const struct prof_arch *a;
        uint32_t regs_arch;
        size_t size;
    } want[] = {
        {&prof_arch_x86_64, QPROF_ABI_ARCH_X86_64, sizeof(struct qprof_abi_regs)},
        {&prof_arch_riscv64, QPROF_ABI_ARCH_RISCV64, sizeof(struct qprof_abi_regs_riscv64)},
        {&prof_arch_aarch64, QPROF_ABI_ARCH_AARCH64, sizeof(struct qprof_abi_regs_aarch64)}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct prof_arch *a = want[i].a;
        const struct prof_arch_abi_frame *f = &a->abi_frame;
        REQUIRE(f->to_regs && f->size <= 64 * 8 && f->sp_off + 8 <= f->size);
        CHECK_U64(f->regs_arch, want[i].regs_arch);
        CHECK_U64(f->size, want[i].size);
        CHECK(f->unset_is_mine == (a == &prof_arch_x86_64));
        /* only aarch64's entry leaves the user sp in a register (SP_EL0) for a while */
        CHECK_MSG(a == &prof_arch_aarch64
                      ? a->capture_user_sp_reg && strcmp(a->capture_user_sp_reg, "SP_EL0") == 0
                      : a->capture_user_sp_reg == NULL,
                  "%s: capture_user_sp_reg", a->name);
        uint64_t words[64];
        for (size_t w = 0; w < 64; w++)
            words[w] = 0x1000 + w;
        struct unw_regs u;
        memset(&u, 0, sizeof u);
        uint64_t pc = f->to_regs(words, &u);
        CHECK_MSG(u.r[a->pc_reg] == pc && pc >= 0x1000 && pc < 0x1000 + f->size / 8, "%s: pc %#llx",
                  a->name, (unsigned long long)pc);
        CHECK_MSG(u.r[a->sp_reg] == 0x1000 + f->sp_off / 8, "%s: sp %#llx", a->name,
                  (unsigned long long)u.r[a->sp_reg]);
    }
    /* x86_64's general registers by name, riscv64's by number */
    struct unw_regs u;
    memset(&u, 0, sizeof u);
    struct qprof_abi_regs x = {.rbp = 0xb9, .rip = 0x401000, .rsp = 0x7f00};
    CHECK_U64(prof_arch_x86_64.abi_frame.to_regs(&x, &u), 0x401000);
    CHECK_U64(u.r[UNW_RBP], 0xb9);
    struct qprof_abi_regs_riscv64 rv = {.pc = 0x10000, .ra = 0x10100, .sp = 0x3ff0, .s0 = 0x3ff8};
    memset(&u, 0, sizeof u);
    CHECK_U64(prof_arch_riscv64.abi_frame.to_regs(&rv, &u), 0x10000);
    CHECK_U64(u.r[1], 0x10100);
    CHECK_U64(u.r[8], 0x3ff8);
    CHECK_U64(u.r[0], 0);
}

/* The kernel's unwind space: the canonical kernel half for a kernel linked there (Linux, the
 * demo kernels) or for none; what its program headers say for one linked in the low half at
 * its physical load address (a teaching OS: riscv64 virt 0x80000000, x86_64 1 MiB, aarch64
 * virt 0x40080000), where the half would leave every kernel pc outside the space. */
static void test_kernel_space(void)
{
    static const struct {
        const struct prof_arch *arch;
        uint64_t low_lo, low_hi, high_lo, high_hi;
    } k[] = {
        {&prof_arch_riscv64, 0x80000000, 0x80008000, UINT64_C(0xffffffff80000000),
         UINT64_C(0xffffffff80400000)},
        {&prof_arch_x86_64, 0x100000, 0x180000, UINT64_C(0xffffffff81000000),
         UINT64_C(0xffffffff82000000)},
        {&prof_arch_aarch64, 0x40080000, 0x40100000, UINT64_C(0xffff800008000000),
         UINT64_C(0xffff800009000000)},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const struct prof_arch *a = k[i].arch;
        uint64_t lo, hi;
        prof_arch_kernel_space(a, k[i].low_lo, k[i].low_hi, &lo, &hi);
        CHECK_U64(lo, k[i].low_lo);
        CHECK_U64(hi, k[i].low_hi);
        prof_arch_kernel_space(a, k[i].high_lo, k[i].high_hi, &lo, &hi);
        CHECK_U64(lo, a->split.kernel_start);
        CHECK_U64(hi, UINT64_MAX);
        prof_arch_kernel_space(a, 0, 0, &lo, &hi); /* no ELF: the half */
        CHECK_U64(lo, a->split.kernel_start);
        CHECK_U64(hi, UINT64_MAX);
    }
}

int main(void)
{
    ram = calloc(1, RAM_SIZE);
    REQUIRE(ram);
    test_sv39();
    test_sv48_sv57();
    test_loop_and_unknown_mode();
    test_cpu_state();
    test_rv_monitor_transcripts();
    test_rv_monitor_garbage();
    test_rv_monitor_complete();
    test_choice();
    test_a64_4k();
    test_a64_16k_64k();
    test_a64_loop_and_unknown_granule();
    test_a64_cpu_state();
    test_root_names_table();
    test_a64_monitor_transcripts();
    test_a64_monitor_garbage();
    test_x86_monitor_transcripts();
    test_x86_monitor_modes();
    test_x86_cpu_state();
    test_unnamed_and_monitor();
    test_usual_ram();
    test_unwind_machines();
    test_fp_x86_64();
    test_fp_aarch64();
    test_fp_riscv64();
    test_abi_frames();
    test_kernel_space();
    free(ram);
    return harness_result();
}
