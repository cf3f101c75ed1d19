/* The linux/ module against a synthetic guest: a few MB of "physical RAM" holding a kernel page
 * table, a vmcoreinfo note, kallsyms tables (with a name long enough for 6.1's two-byte length)
 * and ORC tables, and a hand-built kernel stack that crosses a frame-pointer frame, a plain
 * call frame and the user-entry pt_regs. Loaded modules: a synthetic module area with a good
 * list, garbage lists (wild pointers, loops, too many nodes, absurd counts) and struct module's
 * BTF (6.1's core_layout, 6.4's mem[]). */
#define _GNU_SOURCE /* memmem */
#include "harness.h"
#include "linux.h"
#include "lx_task.h"
#include "lx_internal.h" /* lx__orc_decode, struct lx_orc */
#include "lx_module.h"

#include <bpf/btf.h>

#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <unistd.h>

#define RAM_SIZE (8u << 20)
/* Where the kernel image lies, mapped to physical 0 by 2 MiB pages: x86_64's
 * __START_KERNEL_map, or arm64's 6.1 image base with arm64 set (its TTBR1 page table and
 * vmcoreinfo keys). */
#define KBASE_X86_64 UINT64_C(0xffffffff80000000)
#define KBASE_ARM64  UINT64_C(0xffff800008000000)
static uint64_t kbase = KBASE_X86_64;
static bool arm64;
#define KBASE    kbase
#define PGD      0x1000u
#define PUD      0x2000u
#define PMD      0x3000u
#define NOTE     0x5000u
#define KALLSYMS 0x10000u
#define ORC      0x210000u
#define TEXT     0x200000u
#define STACK    0x300000u

static uint8_t *ram;

static int ram_read(void *ctx, uint64_t pa, void *buf, size_t len)
{
    (void)ctx;
    if (pa >= RAM_SIZE || len > RAM_SIZE - pa)
        return -EFAULT;
    memcpy(buf, ram + pa, len);
    return 0;
}

static void put64(uint64_t pa, uint64_t v)
{
    memcpy(ram + pa, &v, 8);
}

static void put32(uint64_t pa, uint32_t v)
{
    memcpy(ram + pa, &v, 4);
}

static void map_kernel(void)
{
    if (arm64) { /* 4 levels of 9 bits, 2 MiB blocks (descriptor bits 1:0 = 01) at level 2 */
        put64(PGD + ((KBASE >> 39) & 511) * 8, PUD | 3);
        put64(PUD + ((KBASE >> 30) & 511) * 8, PMD | 3);
        for (int i = 0; i < 4; i++)
            put64(PMD + (((KBASE >> 21) & 511) + (uint64_t)i) * 8, ((uint64_t)i << 21) | 1);
        return;
    }
    put64(PGD + 511 * 8, PUD | 3);
    put64(PUD + 510 * 8, PMD | 3); /* 0xffffffff80000000: PGD 511, PUD 510, PMD 0.. */
    for (int i = 0; i < 4; i++)
        put64(PMD + i * 8, ((uint64_t)i << 21) | 0x83);
}

static const char *vmcoreinfo_text(const char *release)
{
    static char text[2048];
    char table[256];
    if (arm64)
        snprintf(table, sizeof table,
                 "SYMBOL(swapper_pg_dir)=%llx\nNUMBER(VA_BITS)=48\nNUMBER(kimage_voffset)=0x%llx\n"
                 "NUMBER(PHYS_OFFSET)=0x0\nNUMBER(TCR_EL1_T1SZ)=0x10\nKERNELOFFSET=0\n"
                 "NUMBER(KERNELPACMASK)=0x0\n",
                 (unsigned long long)(KBASE + PGD), (unsigned long long)KBASE);
    else
        snprintf(table, sizeof table,
                 "NUMBER(phys_base)=0\nSYMBOL(init_top_pgt)=%llx\nKERNELOFFSET=0\n",
                 (unsigned long long)(KBASE + PGD));
    snprintf(text, sizeof text,
             "OSRELEASE=%s\nPAGESIZE=4096\nSYMBOL(init_uts_ns)=%llx\nSYMBOL(_stext)=%llx\n"
             "SYMBOL(kallsyms_names)=%llx\nSYMBOL(kallsyms_num_syms)=%llx\n"
             "SYMBOL(kallsyms_token_table)=%llx\nSYMBOL(kallsyms_token_index)=%llx\n"
             "SYMBOL(kallsyms_offsets)=%llx\nSYMBOL(kallsyms_relative_base)=%llx\n%s",
             release, (unsigned long long)(KBASE + 0x6000), (unsigned long long)(KBASE + TEXT),
             (unsigned long long)(KBASE + KALLSYMS),
             (unsigned long long)(KBASE + KALLSYMS + 0x8000),
             (unsigned long long)(KBASE + KALLSYMS + 0x9000),
             (unsigned long long)(KBASE + KALLSYMS + 0xa000),
             (unsigned long long)(KBASE + KALLSYMS + 0xb000),
             (unsigned long long)(KBASE + KALLSYMS + 0xc000), table);
    return text;
}

static void put_note(const char *release)
{
    const char *text = vmcoreinfo_text(release);
    put32(NOTE, 11);
    put32(NOTE + 4, (uint32_t)strlen(text));
    put32(NOTE + 8, 0);
    memcpy(ram + NOTE + 12, "VMCOREINFO", 11);
    memcpy(ram + NOTE + 24, text, strlen(text) + 1);
    /* init_uts_ns: "Linux" then the release at new_utsname's second field and beyond */
    memcpy(ram + 0x6000, "Linux", 6);
    memcpy(ram + 0x6000 + 130, release, strlen(release) + 1);
}

/* Symbols by (name, address from TEXT); every byte is its own token. */
struct sym {
    const char *name;
    char type;
    uint32_t off;
};
static char long_name[200];

static void put_kallsyms(const struct sym *syms, int n)
{
    uint64_t names = KALLSYMS, tokens = KALLSYMS + 0x9000, index = KALLSYMS + 0xa000;
    for (int c = 0; c < 256; c++) {
        ram[tokens + 2 * c] = (uint8_t)c;
        put32(index + 2 * c, 0); /* overwritten below as u16 */
        uint16_t at = (uint16_t)(2 * c);
        memcpy(ram + index + 2 * c, &at, 2);
    }
    uint64_t p = names;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(syms[i].name) + 1;
        if (len > 127) {
            ram[p++] = (uint8_t)(0x80 | (len & 0x7f));
            ram[p++] = (uint8_t)(len >> 7);
        } else {
            ram[p++] = (uint8_t)len;
        }
        ram[p++] = (uint8_t)syms[i].type;
        memcpy(ram + p, syms[i].name, len - 1);
        p += len - 1;
        /* absolute-percpu encoding: negative offsets count down from relative_base - 1 */
        int32_t off = -(int32_t)syms[i].off - 1;
        memcpy(ram + KALLSYMS + 0xb000 + 4 * i, &off, 4);
    }
    put32(KALLSYMS + 0x8000, (uint32_t)n);
    put64(KALLSYMS + 0xc000, KBASE + TEXT);
}

enum { R_UNDEF = 0, R_PREV_SP = 1, R_BP = 4, R_SP = 5 };
enum { T_CALL = 0, T_REGS = 1 };

/* The layout put_orc writes entries in. */
static enum lx_orc_layout orc_layout = LX_ORC_END_BIT;

/* ORC entry flags, from the 4.14 register numbers and types: sp_reg | bp_reg << 4, then
 * type << 8 | end << 10 (4.14 to 6.2) or type << 8 | signal << 11 with 6.3's types (END_OF_STACK
 * 1, CALL 2, REGS 3) and, in 7.x, its register numbers (SP 3, PREV_SP 8). */
static uint16_t orc_flags(int sp_reg, int bp_reg, int type, int end)
{
    if (orc_layout == LX_ORC_END_BIT)
        return (uint16_t)(sp_reg | bp_reg << 4 | type << 8 | end << 10);
    if (orc_layout == LX_ORC_SIGNAL_REGS) {
        static const int renumber[] = {[R_UNDEF] = 0, [R_PREV_SP] = 8, [R_BP] = 4, [R_SP] = 3};
        sp_reg = renumber[sp_reg];
        bp_reg = renumber[bp_reg];
    }
    int new_type = end ? 1 : type == T_REGS ? 3 : 2;
    return (uint16_t)(sp_reg | bp_reg << 4 | new_type << 8 | (type == T_REGS) << 11);
}

static void put_orc(int i, uint32_t ip_off, int16_t sp_off, int16_t bp_off, int sp_reg, int bp_reg,
                    int type, int end)
{
    uint64_t ip_slot = ORC + 4 * (uint64_t)i;
    int32_t rel = (int32_t)((TEXT + ip_off) - ip_slot);
    memcpy(ram + ip_slot, &rel, 4);
    uint64_t e = ORC + 0x1000 + 6 * (uint64_t)i;
    uint16_t flags = orc_flags(sp_reg, bp_reg, type, end);
    memcpy(ram + e, &sp_off, 2);
    memcpy(ram + e + 2, &bp_off, 2);
    memcpy(ram + e + 4, &flags, 2);
}

static void build_guest(const char *release)
{
    memset(ram, 0, RAM_SIZE);
    map_kernel();
    put_note(release);
    memset(long_name, 'x', sizeof long_name - 1);
    memcpy(long_name, "long_", 5);
    const struct sym syms[] = {
        {"_text", 'T', 0},
        {"_stext", 'T', 0},
        {"entry_SYSCALL_64", 'T', 0x100},
        {"func_a", 't', 0x200},
        {"func_b", 'T', 0x300},
        {long_name, 't', 0x400},
        {"_etext", 'T', 0x1000},
        {"__start_orc_unwind_ip", 'R', ORC - TEXT},
        {"__stop_orc_unwind_ip", 'R', ORC + 4 * 4 - TEXT},
        {"__start_orc_unwind", 'R', ORC + 0x1000 - TEXT},
    };
    put_kallsyms(syms, (int)(sizeof syms / sizeof syms[0]));
    put_orc(0, 0x100, 0, 0, R_SP, R_UNDEF, T_REGS, 0);      /* entry: pt_regs at sp */
    put_orc(1, 0x200, 8, 0, R_SP, R_UNDEF, T_CALL, 0);      /* func_a: no frame */
    put_orc(2, 0x300, 16, -16, R_BP, R_PREV_SP, T_CALL, 0); /* func_b: rbp frame */
    put_orc(3, 0x400, 0, 0, R_UNDEF, R_UNDEF, T_CALL, 1);   /* long_x...: end of stack */
}

static lx_kernel *open_kernel(const struct lx_phys *p)
{
    struct lx_ram_range r = {0, RAM_SIZE};
    struct lx_vmcoreinfo vi;
    uint64_t where = 0;
    struct qp_error err = {0};
    lx_kernel *k = NULL;
    CHECK_INT(lx_vmcoreinfo_find(p, &r, 1, &vi, &where, &err), 0);
    CHECK_U64(where, NOTE);
    CHECK_INT(lx_kernel_open(&vi, p, &k, &err), 0);
    return k;
}

static void test_kallsyms(const struct lx_phys *p)
{
    build_guest("6.1.0-56-amd64");
    lx_kernel *k = open_kernel(p);
    struct qp_error err = {0};
    CHECK_INT(lx_kernel_load_kallsyms(k, &err), 0);
    size_t n = 0;
    const struct lx_symbol *s = lx_kernel_symbols(k, &n);
    CHECK_INT(n, 10);
    uint64_t addr = 0;
    CHECK_INT(lx_kernel_symbol_addr(k, "func_b", &addr), 0);
    CHECK_U64(addr, KBASE + TEXT + 0x300);
    CHECK_INT(lx_kernel_symbol_addr(k, long_name, &addr), 0); /* the two-byte length */
    CHECK_U64(addr, KBASE + TEXT + 0x400);
    for (size_t i = 1; i < n; i++)
        CHECK(s[i - 1].addr <= s[i].addr);
    CHECK_INT(lx_kernel_symbol_addr(k, "nope", &addr), -ENOENT);
    lx_kernel_free(k);
}

/* vmcoreinfo as a 5.x kernel writes it: no kallsyms keys (renamed here, so the parser skips
 * them). */
static void hide_kallsyms_keys(void)
{
    for (uint8_t *at = ram + NOTE;
         (at = memmem(at, 4096 - (size_t)(at - (ram + NOTE)), "SYMBOL(kallsyms_", 16)) != NULL;)
        at[7] = 'x';
}

/* The 5.x tables in the kernel's order, 8-aligned, from image offset at: offsets (relative to
 * relative_base, which is _stext), relative_base, num_syms, names, markers, token table (token
 * c is byte c, token 0 "@"), token index. */
static void put_kallsyms_5x(const struct sym *syms, int n, uint32_t at)
{
    uint32_t p = at;
    for (int i = 0; i < n; i++)
        put32(p + 4 * (uint32_t)i, syms[i].off);
    p += (4 * (uint32_t)n + 7) & ~7u;
    put64(p, KBASE + TEXT);
    put32(p + 8, (uint32_t)n);
    p += 16;
    uint32_t names = p, markers[8];
    for (int i = 0; i < n; i++) {
        if (i % 256 == 0)
            markers[i / 256] = p - names;
        size_t len = strlen(syms[i].name) + 1;
        ram[p++] = (uint8_t)len;
        ram[p++] = (uint8_t)syms[i].type;
        memcpy(ram + p, syms[i].name, len - 1);
        p += (uint32_t)len - 1;
    }
    p = (p + 7) & ~7u;
    for (int m = 0; m < (n + 255) / 256; m++, p += 4)
        put32(p, markers[m]);
    p = (p + 7) & ~7u;
    uint32_t tokens = p;
    for (int c = 0; c < 256; c++) {
        ram[p++] = c ? (uint8_t)c : '@';
        ram[p++] = 0;
    }
    p = (p + 7) & ~7u;
    for (int c = 0; c < 256; c++) {
        uint16_t off = (uint16_t)(2 * c);
        memcpy(ram + p + 2 * (uint32_t)c, &off, 2);
    }
    (void)tokens;
}

/* A 5.x kernel: vmcoreinfo names no kallsyms tables; they are found in the image by shape. With
 * none there, one line says so. */
static void test_kallsyms_by_shape(const struct lx_phys *p)
{
    const struct sym syms[] = {
        {"_text", 'T', 0},      {"_stext", 'T', 0},      {"func_a", 't', 0x200},
        {"func_b", 'T', 0x300}, {"_etext", 'T', 0x1000},
    };
    for (int with_tables = 1; with_tables >= 0; with_tables--) {
        build_guest("5.10.0-32-amd64");
        hide_kallsyms_keys();
        if (with_tables)
            put_kallsyms_5x(syms, 5, TEXT + 0x50000);
        lx_kernel *k = open_kernel(p);
        struct qp_error err = {0};
        uint64_t addr = 0;
        if (with_tables) {
            CHECK_MSG(lx_kernel_load_kallsyms(k, &err) == 0, "%s", err.msg);
            CHECK_INT(lx_kernel_symbol_addr(k, "func_b", &addr), 0);
            CHECK_U64(addr, KBASE + TEXT + 0x300);
        } else {
            CHECK_INT(lx_kernel_load_kallsyms(k, &err), -ENOTSUP);
            CHECK_MSG(strstr(err.msg, "5.10.0-32-amd64") && strstr(err.msg, "kallsyms") &&
                          !strchr(err.msg, '\n'),
                      "message: %s", err.msg);
        }
        lx_kernel_free(k);
    }
}

/* The same walk in each layout: the entries tell which. */
/* x86_64's entries of linux/'s arch table: DWARF registers (rax 0, rdx 1, rcx 2, rbx 3, rsi 4,
 * rdi 5, rbp 6, rsp 7, r8..r15 8..15, rip 16) to and from struct pt_regs, and the current task
 * as a per-CPU word with the iret frame at pt_regs' ip. */
static void check_x86_64_regs(const lx_kernel *k)
{
    uint64_t regs[LX_GREGS], back[LX_GREGS];
    for (int i = 0; i < LX_GREGS; i++)
        regs[i] = i <= 16 ? 0x100 + (uint64_t)i : 0;
    struct lx_pt_regs pt;
    CHECK_INT(lx_kernel_regs_to_pt(k, regs, &pt), 0);
    CHECK_U64(pt.ax, 0x100);
    CHECK_U64(pt.dx, 0x101);
    CHECK_U64(pt.cx, 0x102);
    CHECK_U64(pt.bx, 0x103);
    CHECK_U64(pt.si, 0x104);
    CHECK_U64(pt.di, 0x105);
    CHECK_U64(pt.bp, 0x106);
    CHECK_U64(pt.sp, 0x107);
    CHECK_U64(pt.r8, 0x108);
    CHECK_U64(pt.r15, 0x10f);
    CHECK_U64(pt.ip, 0x110);
    memset(back, 0xff, sizeof back);
    CHECK_INT(lx_kernel_regs_from_pt(k, &pt, back), 0);
    for (int i = 0; i < LX_GREGS; i++)
        CHECK_MSG(back[i] == regs[i], "DWARF register %d: %#llx", i, (unsigned long long)back[i]);
    uint32_t iret = 0;
    CHECK(lx_kernel_current_in_percpu(k, &iret));
    CHECK_U64(iret, 128); /* ip, cs, flags, sp, ss: the last 40 of pt_regs' 168 bytes */
}

static void test_orc(const struct lx_phys *p, enum lx_orc_layout layout, const char *release)
{
    orc_layout = layout;
    build_guest(release);
    orc_layout = LX_ORC_END_BIT;
    lx_kernel *k = open_kernel(p);
    struct qp_error err = {0};
    CHECK_INT(lx_kernel_load_orc(k, &err), 0);
    CHECK_INT(lx_kernel_orc_entries(k), 4);
    CHECK_INT(k->orc_layout, layout);
    check_x86_64_regs(k);
    /* func_b (rbp frame) called from func_a (no frame) called from the entry's pt_regs. */
    uint64_t sp = KBASE + STACK;
    uint64_t bp = sp + 8;
    put64(STACK + 8, 0xdead);                /* func_b's saved rbp */
    put64(STACK + 16, KBASE + TEXT + 0x210); /* return into func_a */
    put64(STACK + 24, KBASE + TEXT + 0x120); /* func_a's return, into entry */
    struct lx_pt_regs user = {.ip = 0x401000, .cs = 0x33, .sp = 0x7ffc0000, .bp = 0x7ffc0100};
    memcpy(ram + STACK + 32, &user, sizeof user); /* entry's pt_regs at the CFA */
    struct lx_pt_regs live = {.ip = KBASE + TEXT + 0x308, .sp = sp, .bp = bp};
    struct lx_frame f[8];
    struct lx_unwind_result res;
    lx_unwind(k, &live, f, 8, &res);
    CHECK_INT(res.n_frames, 3);
    CHECK_U64(f[0].pc, KBASE + TEXT + 0x308);
    CHECK(f[0].exact);
    CHECK_U64(f[1].pc, KBASE + TEXT + 0x210);
    CHECK(!f[1].exact);
    CHECK_U64(f[2].pc, KBASE + TEXT + 0x120);
    CHECK_INT(res.end, LX_END_USER);
    CHECK(res.have_user_regs && !res.user_regs_partial);
    CHECK_U64(res.user_regs.ip, 0x401000);
    CHECK_U64(res.user_regs.sp, 0x7ffc0000);

    /* A kernel thread's first frame ends the walk cleanly. */
    live = (struct lx_pt_regs){.ip = KBASE + TEXT + 0x404, .sp = sp};
    lx_unwind(k, &live, f, 8, &res);
    CHECK_INT(res.n_frames, 1);
    CHECK_INT(res.end, LX_END_TASK_START);
    CHECK(lx_unwind_end_is_complete(res.end));

    /* Outside the kernel text: no entry, the walk ends marked. */
    live = (struct lx_pt_regs){.ip = KBASE + TEXT + 0x2000, .sp = sp};
    lx_unwind(k, &live, f, 8, &res);
    CHECK_INT(res.end, LX_END_NO_ORC);

    /* A return address pointing back at itself: the stack pointer must grow. */
    put64(STACK + 16, KBASE + TEXT + 0x308);
    put64(STACK + 8, bp - 16);        /* bp chain that goes down */
    lx_kernel_forget_translations(k); /* a new stop: memory changed */
    live = (struct lx_pt_regs){.ip = KBASE + TEXT + 0x308, .sp = sp, .bp = bp};
    lx_unwind(k, &live, f, 8, &res);
    CHECK(!lx_unwind_end_is_complete(res.end));

    /* BTF's struct orc_entry agrees with the entries, or the tables go with one line. */
    bool signal_bit = layout != LX_ORC_END_BIT;
    CHECK_INT(lx_kernel_check_orc_bits(k, signal_bit, &err), 0);
    CHECK_INT(lx_kernel_orc_entries(k), 4);
    CHECK_INT(lx_kernel_check_orc_bits(k, !signal_bit, &err), -EPROTO);
    CHECK_MSG(strstr(err.msg, "orc_entry") && strstr(err.msg, release) && !strchr(err.msg, '\n'),
              "message: %s", err.msg);
    CHECK_INT(lx_kernel_orc_entries(k), 0);
    live = (struct lx_pt_regs){.ip = KBASE + TEXT + 0x308, .sp = sp, .bp = bp};
    lx_unwind(k, &live, f, 8, &res);
    CHECK_INT(res.n_frames, 1);
    CHECK_INT(res.end, LX_END_NO_ORC);
    lx_kernel_free(k);
}

/* Entries that fit no layout are refused with one line naming the structure and the release:
 * flag bits no layout uses, and a 6.3+ table whose call frames' sp register is ambiguous. */
static void test_unknown_orc_layout(const struct lx_phys *p)
{
    for (int c = 0; c < 2; c++) {
        orc_layout = c ? LX_ORC_SIGNAL_BIT : LX_ORC_END_BIT;
        build_guest("8.1.0-1-amd64");
        orc_layout = LX_ORC_END_BIT;
        if (c == 0) {
            uint16_t bad = 0x1000 | 5;
            memcpy(ram + ORC + 0x1000 + 6 + 4, &bad, 2);
        } else {
            uint16_t sp3_call = 3 | 2 << 8; /* as many call frames on "register 3" as on 5 */
            memcpy(ram + ORC + 0x1000 + 12 + 4, &sp3_call, 2);
        }
        lx_kernel *k = open_kernel(p);
        struct qp_error err = {0};
        CHECK_INT(lx_kernel_load_orc(k, &err), -ENOTSUP);
        CHECK_MSG(strstr(err.msg, "8.1.0-1-amd64") && strstr(err.msg, "orc_entry") &&
                      !strchr(err.msg, '\n'),
                  "message: %s", err.msg);
        CHECK_INT(lx_kernel_orc_entries(k), 0);
        lx_kernel_free(k);
    }
}

static void test_not_linux(const struct lx_phys *p)
{
    memset(ram, 0, RAM_SIZE);
    memcpy(ram + 0x7000, "OSRELEASE=1.0\n", 14); /* no page table keys: not x86_64 Linux */
    struct lx_ram_range r = {0, RAM_SIZE};
    struct lx_vmcoreinfo vi;
    uint64_t where;
    struct qp_error err = {0};
    CHECK_INT(lx_vmcoreinfo_find(p, &r, 1, &vi, &where, &err), -ENOENT);
    CHECK(strstr(err.msg, "no Linux vmcoreinfo") != NULL);
}

static void test_parse(void)
{
    struct lx_vmcoreinfo vi;
    struct qp_error err = {0};
    const char *t = "OSRELEASE=6.1.0-56-amd64\nNUMBER(phys_base)=-1234\nSYMBOL(init_top_pgt)=x\n";
    CHECK_INT(lx_vmcoreinfo_parse(t, strlen(t), &vi, &err), -EPROTO);
    t = "OSRELEASE=6.1.0\nNUMBER(phys_base)=16\nSYMBOL(init_top_pgt)=ffffffff82a10000\n"
        "NUMBER(pgtable_l5_enabled)=1\nKERNELOFFSET=1e00000\n";
    CHECK_INT(lx_vmcoreinfo_parse(t, strlen(t), &vi, &err), 0);
    CHECK_INT(vi.version_major, 6);
    CHECK_INT(vi.version_minor, 1);
    CHECK_U64(vi.phys_base, 16);
    CHECK_U64(vi.kernel_offset, 0x1e00000);
    CHECK(vi.pgtable_l5);
    t = "OSRELEASE=6.1.0\nSYMBOL(init_top_pgt)=ffffffff82a10000\n";
    CHECK_INT(lx_vmcoreinfo_parse(t, strlen(t), &vi, &err), -EPROTO);
}

/* --vmcoreinfo FILE: the bare text, or a copy of the note with its header. */
static void test_load_file(void)
{
    char path[] = "/tmp/lx-vmci-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *text = vmcoreinfo_text("6.1.0-56-amd64");
    CHECK(write(fd, "\x0b\0\0\0\0\0\0\0\0\0\0\0VMCOREINFO\0\0", 24) == 24);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    struct lx_vmcoreinfo vi;
    struct qp_error err = {0};
    CHECK_INT(lx_vmcoreinfo_load_file(path, &vi, &err), 0);
    CHECK_STR(vi.osrelease, "6.1.0-56-amd64");
    CHECK_U64(vi.init_top_pgt, KBASE + PGD);
    unlink(path);
    CHECK_INT(lx_vmcoreinfo_load_file(path, &vi, &err), -ENOENT);
    CHECK(strstr(err.msg, path) != NULL);
}

/* ---- --sysroot's reads: a file's path and an ELF's build-id ------------------------------ */

/* A small address space: [mem_base, mem_base + sizeof mem). */
static uint8_t mem[8192];
static uint64_t mem_base;

static int mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    (void)ctx;
    if (addr < mem_base || addr - mem_base > sizeof mem || len > sizeof mem - (addr - mem_base))
        return -EFAULT;
    memcpy(buf, mem + (addr - mem_base), len);
    return 0;
}

static void mem_put64(uint64_t addr, uint64_t v)
{
    memcpy(mem + (addr - mem_base), &v, 8);
}

/* A dentry at addr named name (its string right after it) whose parent is parent. */
static void put_dentry(const struct lx_offsets *o, uint64_t addr, const char *name, uint64_t parent)
{
    uint32_t len = (uint32_t)strlen(name);
    mem_put64(addr + o->dentry_parent, parent);
    memcpy(mem + (addr - mem_base) + o->dentry_name + o->qstr_len, &len, 4);
    mem_put64(addr + o->dentry_name + o->qstr_name, addr + 192);
    memcpy(mem + (addr - mem_base) + 192, name, len);
}

static void test_file_path(void)
{
    struct lx_offsets o;
    lx_offsets_debian12_6_1(&o);
    memset(mem, 0, sizeof mem);
    mem_base = UINT64_C(0xffff888000100000);
    struct lx_reader r = {.read = mem_read};
    const uint64_t file = mem_base, d = mem_base + 256; /* dentries every 256 bytes */
    mem_put64(file + o.file_path + o.path_dentry, d + 4 * 256);
    put_dentry(&o, d, "/", d); /* the root: its own parent */
    put_dentry(&o, d + 256, "usr", d);
    put_dentry(&o, d + 512, "local", d + 256);
    put_dentry(&o, d + 768, "bin", d + 512);
    put_dentry(&o, d + 1024, "hotpath", d + 768);
    char path[256];
    struct qp_error err = {0};
    CHECK_INT(lx_file_path(&o, &r, file, path, sizeof path, &err), 0);
    CHECK_STR(path, "/usr/local/bin/hotpath");
    /* Too long for the buffer: an error, never a cut path. */
    CHECK_INT(lx_file_path(&o, &r, file, path, 12, &err), -ENAMETOOLONG);
    /* A cycle (bin's parent is hotpath): bounded, an error. */
    put_dentry(&o, d + 768, "bin", d + 1024);
    CHECK_INT(lx_file_path(&o, &r, file, path, sizeof path, &err), -ELOOP);
    /* A parent that is no kernel pointer. */
    put_dentry(&o, d + 768, "bin", 0x1234);
    CHECK(lx_file_path(&o, &r, file, path, sizeof path, &err) < 0);
}

/* The page cache: file->f_mapping->i_pages as the kernel builds it, in mem. */
static void test_file_page(void)
{
    struct lx_offsets o;
    lx_offsets_debian12_6_1(&o);
    o.has_page_cache = true;
    o.file_mapping = 8, o.mapping_i_pages = 16, o.xa_head = 8; /* xarray: lock, flags, head */
    o.xa_node_shift = 0, o.xa_node_slots = 40, o.page_struct_size = 64;
    o.vmemmap_base = UINT64_C(0xffffea0000000000);
    memset(mem, 0, sizeof mem);
    mem_base = UINT64_C(0xffff888000200000);
    struct lx_reader r = {.read = mem_read};
    const uint64_t file = mem_base, mapping = mem_base + 64;
    const uint64_t top = mem_base + 1024, leaf = mem_base + 2048; /* two xa_nodes */
    mem_put64(file + o.file_mapping, mapping);
    /* top: shift 6 (indexes 0..4095), slot 1 -> leaf (indexes 64..127) */
    mem[top - mem_base] = 6;
    mem_put64(top + 40 + 8 * 1, leaf + 2);
    mem[leaf - mem_base] = 0;
    uint64_t page_of_pfn_0x1234 = o.vmemmap_base + 0x1234 * 64;
    mem_put64(leaf + 40 + 8 * 3, page_of_pfn_0x1234);           /* index 67 */
    mem_put64(leaf + 40 + 8 * 8, o.vmemmap_base + 0x4000 * 64); /* 4-page folio at 72..75 */
    for (int k = 9; k < 12; k++)
        mem_put64(leaf + 40 + 8 * (uint64_t)k, (8u << 2) | 2); /* siblings of slot 8 */
    mem_put64(leaf + 40 + 8 * 5, 0x1235);                      /* a value (shadow) entry */
    mem_put64(mapping + o.mapping_i_pages + o.xa_head, top + 2);
    uint64_t pa = 0;
    struct qp_error err = {0};
    CHECK_INT(lx_file_page(&o, &r, file, 67, &pa, &err), 0);
    CHECK_U64(pa, UINT64_C(0x1234) << 12);
    CHECK_INT(lx_file_page(&o, &r, file, 74, &pa, &err), 0); /* through a sibling */
    CHECK_U64(pa, UINT64_C(0x4002) << 12);
    CHECK_INT(lx_file_page(&o, &r, file, 69, &pa, &err), -ENOENT);   /* evicted */
    CHECK_INT(lx_file_page(&o, &r, file, 66, &pa, &err), -ENOENT);   /* empty */
    CHECK_INT(lx_file_page(&o, &r, file, 5000, &pa, &err), -ENOENT); /* beyond the tree */
    /* A node that points at itself: bounded, an error. */
    mem_put64(leaf + 40 + 8 * 3, leaf + 2);
    mem[leaf - mem_base] = 6;
    CHECK(lx_file_page(&o, &r, file, 67, &pa, &err) < 0);
    /* A slot that is no struct page. */
    mem[leaf - mem_base] = 0;
    mem_put64(leaf + 40 + 8 * 3, o.vmemmap_base + 0x1234 * 64 + 8);
    CHECK_INT(lx_file_page(&o, &r, file, 67, &pa, &err), -EINVAL);
    /* No BTF offsets: said, not guessed. */
    o.has_page_cache = false;
    CHECK_INT(lx_file_page(&o, &r, file, 67, &pa, &err), -ENOTSUP);
}

/* An ELF header, one PT_LOAD and one PT_NOTE holding an ABI-tag note then the build-id note. */
static size_t put_elf_with_build_id(void)
{
    memset(mem, 0, sizeof mem);
    static const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    memcpy(mem, ident, 16);
    uint64_t phoff = 64;
    uint16_t phentsize = 56, phnum = 2;
    memcpy(mem + 32, &phoff, 8);
    memcpy(mem + 54, &phentsize, 2);
    memcpy(mem + 56, &phnum, 2);
    uint8_t *load = mem + 64, *note = mem + 120;
    uint32_t pt_load = 1, pt_note = 4;
    memcpy(load, &pt_load, 4);
    uint8_t notes[64] = {0};
    uint32_t abi[4] = {4, 16, 1, 0}, bid[3] = {4, 20, 3};
    memcpy(notes, abi, 12);
    memcpy(notes + 12, "GNU", 4);
    memcpy(notes + 32, bid, 12);
    memcpy(notes + 44, "GNU", 4);
    uint64_t off = 512, size = 68, align = 4;
    memcpy(note, &pt_note, 4);
    memcpy(note + 8, &off, 8);
    memcpy(note + 32, &size, 8);
    memcpy(note + 48, &align, 8);
    memcpy(mem + off, notes, 48);
    for (int i = 0; i < 20; i++)
        mem[off + 48 + i] = (uint8_t)(0xa0 + i);
    return 4096;
}

static void test_build_id(void)
{
    mem_base = UINT64_C(0x555555554000);
    struct lx_reader r = {.read = mem_read};
    size_t map_len = put_elf_with_build_id();
    uint8_t id[LX_BUILD_ID_MAX];
    size_t len = 0;
    struct qp_error err = {0};
    CHECK_INT(lx_elf_build_id(&r, mem_base, map_len, id, &len, &err), 0);
    CHECK_INT((int)len, 20);
    CHECK_INT(id[0], 0xa0);
    CHECK_INT(id[19], 0xb3);
    /* The notes past the mapping's end: not read. */
    CHECK(lx_elf_build_id(&r, mem_base, 520, id, &len, &err) < 0);
    /* Garbage: every single-byte change of the first 600 bytes, to 0xff and to 0; each answer is
     * either a build-id of at most LX_BUILD_ID_MAX bytes or an error, never a crash. */
    for (int i = 0; i < 600; i++) {
        for (int v = 0; v < 2; v++) {
            put_elf_with_build_id();
            mem[i] = v ? 0xff : 0;
            len = 0;
            int rc = lx_elf_build_id(&r, mem_base, map_len, id, &len, &err);
            CHECK(rc < 0 || (len > 0 && len <= LX_BUILD_ID_MAX));
        }
    }
    /* Not an ELF at all. */
    memset(mem, 0x41, sizeof mem);
    CHECK_INT(lx_elf_build_id(&r, mem_base, map_len, id, &len, &err), -ENOEXEC);
}

/* ---- Modules ------------------------------------------------------------------------------ */

/* A module area in host memory: kva LX_MODULES_START + i is mod_area[i]. */
#define MOD_AREA_SIZE (2u << 20)
static uint8_t *mod_area;

static int mod_read(void *ctx, uint64_t kva, void *buf, size_t len)
{
    (void)ctx;
    if (kva < LX_MODULES_START || kva - LX_MODULES_START > MOD_AREA_SIZE ||
        len > MOD_AREA_SIZE - (kva - LX_MODULES_START))
        return -EFAULT;
    memcpy(buf, mod_area + (kva - LX_MODULES_START), len);
    return 0;
}

static void mput64(uint64_t kva, uint64_t v)
{
    memcpy(mod_area + (kva - LX_MODULES_START), &v, 8);
}

static void mput32(uint64_t kva, uint32_t v)
{
    memcpy(mod_area + (kva - LX_MODULES_START), &v, 4);
}

/* A small struct module layout (the code takes every offset from here). */
static const struct lx_module_offsets mod_off = {.area_start = LX_MODULES_START,
                                                 .area_end = LX_MODULES_END,
                                                 .has_orc = true,
                                                 .module_size = 256,
                                                 .state = 0,
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
                                                 .state_unformed = 3};

#define MOD_HEAD (LX_MODULES_START + 0x100)

static uint64_t mod_at(int i)
{
    return LX_MODULES_START + 0x1000 + (uint64_t)i * 0x10000;
}

/* Module i: struct at mod_at(i), core text 0x1000 bytes at mod_at(i) + 0x1000, two functions
 * f0/f1 (and a data symbol, an undefined one), three ORC entries (ips stored out of their own
 * order: relative to each slot). Linked as prev <-> i <-> next. */
static void put_module(int i, const char *name, uint32_t state, uint64_t prev, uint64_t next)
{
    uint64_t m = mod_at(i), base = m + 0x1000, ks = m + 0x3000, symtab = m + 0x3100;
    uint64_t strtab = m + 0x3400, typetab = m + 0x3500, ips = m + 0x3600, orc = m + 0x3700;
    mput32(m + mod_off.state, state);
    mput64(m + 8, next);
    mput64(m + 16, prev);
    memcpy(mod_area + (m - LX_MODULES_START) + 24, name, strlen(name) + 1);
    mput64(m + 80, base);
    mput32(m + 88, 0x2000);
    mput32(m + 92, 0x1000);
    mput32(m + 96, 4);
    mput64(m + 104, ips);
    mput64(m + 112, orc);
    mput64(m + 120, ks);
    mput64(ks + 0, symtab);
    mput32(ks + 8, 6);
    mput64(ks + 16, strtab);
    mput64(ks + 24, typetab);
    memcpy(mod_area + (strtab - LX_MODULES_START), "\0f0\0f1\0data\0undef\0ini\0", 21);
    const struct {
        uint32_t name;
        uint16_t shndx;
        uint64_t value;
        char type;
    } syms[] = {{0, 0, 0, 0},
                {1, 1, base + 0x10, 't'},
                {4, 1, base + 0x800, 'T'},
                {7, 2, base + 0x1800, 'd'},
                {12, 0, 0, 'U'},
                {18, 3, base + 0x4010, 't'}}; /* in the init text */
    for (int s = 0; s < 6; s++) {
        uint64_t at = symtab + 24 * (uint64_t)s;
        mput32(at, syms[s].name);
        memcpy(mod_area + (at + 6 - LX_MODULES_START), &syms[s].shndx, 2);
        mput64(at + 8, syms[s].value);
        mod_area[typetab + s - LX_MODULES_START] = (uint8_t)syms[s].type;
    }
    const uint64_t orc_ips[] = {base + 0x10, base + 0x800, base + 0x1000, base + 0x4010};
    /* The init text: at m + 0x5000 (0x1000 bytes, 0x800 of text), used while it is coming. */
    mput64(m + 128, m + 0x5000);
    mput32(m + 136, 0x1000);
    mput32(m + 140, 0x800);
    for (int e = 0; e < 4; e++) {
        mput32(ips + 4 * e, (uint32_t)(int32_t)(orc_ips[e] - (ips + 4 * e)));
        uint16_t flags = 5;                         /* sp_reg SP, type CALL */
        mput32(orc + 6 * e, (uint32_t)(8 + 8 * e)); /* sp_offset, bp_offset 0 */
        memcpy(mod_area + (orc + 6 * e + 4 - LX_MODULES_START), &flags, 2);
    }
}

static int read_mods(bool full, lx_modules **out, struct qp_error *err)
{
    struct lx_reader r = {.read = mod_read};
    *out = NULL;
    return lx_modules_read(&mod_off, &r, MOD_HEAD, full, out, err);
}

/* A kernel without ORC: the same list read with has_orc false gives the same names and
 * symbols (less an assembler label, riscv64's .LBB*), no ORC entries, no warning; an empty area
 * is refused in one line. */
static void test_modules_no_orc(void)
{
    memset(mod_area, 0, MOD_AREA_SIZE);
    mput64(MOD_HEAD, mod_at(0) + 8);
    mput64(MOD_HEAD + 8, mod_at(0) + 8);
    put_module(0, "alpha", 0, MOD_HEAD, MOD_HEAD);
    uint64_t strtab = mod_at(0) + 0x3400, f1_sym = mod_at(0) + 0x3100 + 2 * 24;
    memcpy(mod_area + (strtab + 21 - LX_MODULES_START), ".LBB12", 7);
    mput32(f1_sym, 21); /* f1 is a label now */
    struct lx_module_offsets o = mod_off;
    o.has_orc = false;
    o.num_orcs = o.orc_unwind_ip = o.orc_unwind = 0; /* nothing there to read */
    struct lx_reader r = {.read = mod_read};
    lx_modules *m = NULL;
    struct qp_error err = {0};
    CHECK_INT(lx_modules_read(&o, &r, MOD_HEAD, true, &m, &err), 0);
    if (m) {
        CHECK_INT((int)lx_modules_count(m), 1);
        CHECK_STR(lx_modules_at(m, 0)->name, "alpha");
        CHECK(lx_modules_warning(m) == NULL);
        CHECK_INT((int)lx_modules_orc_entries(m), 0);
        CHECK(lx_modules_orc_find(m, mod_at(0) + 0x1900) == NULL);
        size_t n;
        const struct lx_symbol *s = lx_modules_symbols(m, &n);
        CHECK_INT((int)n, 2);
        if (n == 2) {
            CHECK_STR(s[0].name, "f0 [alpha]");
            CHECK_STR(s[1].name, "_etext [alpha]");
        }
    }
    lx_modules_free(m);
    o.area_end = o.area_start;
    m = NULL;
    CHECK_INT(lx_modules_read(&o, &r, MOD_HEAD, true, &m, &err), -EINVAL);
    CHECK(m == NULL && strstr(err.msg, "module area") && !strchr(err.msg, '\n'));
}

/* The addresses code forms PC-relatively, from which the module list of a kallsyms without
 * data symbols is found: arm64 ADRP+ADD (forwards, backwards, the ADD's 12-bit shift), riscv64
 * AUIPC+ADDI after a compressed instruction; a lone ADD or ADDI forms nothing. */
static void test_pc_rel_addrs(void)
{
    uint64_t pc = UINT64_C(0xffff800008010004), out[4];
    const uint32_t a64[] = {
        0x91048c00, /* add x0, x0, #0x123 before any adrp: nothing */
        0xb0000000, /* adrp x0, +1 page */
        0x91048c00, /* add x0, x0, #0x123 */
        0xd0ffffe1, /* adrp x1, -2 pages */
        0x91402022, /* add x2, x1, #8, lsl #12 */
    };
    size_t n = lx__arm64_pc_rel_addrs((const uint8_t *)a64, sizeof a64, pc, out, 4);
    CHECK_INT((int)n, 2);
    CHECK_U64(out[0], UINT64_C(0xffff800008011123));
    CHECK_U64(out[1], UINT64_C(0xffff80000800e000) + 0x8000);
    CHECK_INT((int)lx__arm64_pc_rel_addrs((const uint8_t *)a64, sizeof a64, pc, out, 1), 1);
    uint64_t rpc = UINT64_C(0xffffffff80001000);
    uint8_t rv[2 + 4 + 4 + 4];
    const uint16_t c_nop = 0x0001;
    const uint32_t addi_alone = 0xffc58593; /* addi a1, a1, -4: a1 holds no auipc */
    const uint32_t auipc = 0x00001517;      /* auipc a0, 0x1 */
    const uint32_t addi = 0xffc50513;       /* addi a0, a0, -4 */
    memcpy(rv, &c_nop, 2);
    memcpy(rv + 2, &addi_alone, 4);
    memcpy(rv + 6, &auipc, 4);
    memcpy(rv + 10, &addi, 4);
    n = lx__riscv64_pc_rel_addrs(rv, sizeof rv, rpc, out, 4);
    CHECK_INT((int)n, 1);
    CHECK_U64(out[0], rpc + 6 + 0x1000 - 4);
    CHECK_INT((int)lx__riscv64_pc_rel_addrs(rv, 9, rpc, out, 4), 0); /* cut mid-instruction */
}

/* Offsets that do not fit struct module (or the mod_kallsyms bytes read), from any caller:
 * lx_modules_read refuses them before it reads a module. Each one read past the 256-byte copy of
 * the module, or past the 256-byte mod_kallsyms buffer, before issue 34's fix; the offsets near
 * 4 GiB wrapped the 32-bit sums that were the only checks. */
static void test_modules_offsets_outside(void)
{
    memset(mod_area, 0, MOD_AREA_SIZE);
    mput64(MOD_HEAD, mod_at(0) + 8);
    mput64(MOD_HEAD + 8, mod_at(0) + 8);
    put_module(0, "alpha", 0, MOD_HEAD, MOD_HEAD);
    struct lx_reader r = {.read = mod_read};
    for (int i = 0; i < 7; i++) {
        struct lx_module_offsets o = mod_off;
        const char *what[] = {"state",
                              "core size",
                              "core text_size",
                              "init base",
                              "mod_kallsyms.symtab",
                              "name",
                              "mod_kallsyms.num_symtab"};
        switch (i) {
        case 0:
            o.state = 300;
            break;
        case 1:
            o.core_size = 0xfffffffeu;
            break;
        case 2:
            o.core_text_size = 254;
            break;
        case 3:
            o.has_init = true, o.state_coming = 0, o.init_base = 0xfffffffcu;
            break;
        case 4:
            o.ks_symtab = 0xfffffffcu;
            break;
        case 5:
            o.name = 0xffffff00u;
            break;
        default:
            o.ks_num_symtab = 253;
            break;
        }
        lx_modules *m = NULL;
        struct qp_error err = {0};
        CHECK_INT(lx_modules_read(&o, &r, MOD_HEAD, true, &m, &err), -EINVAL);
        CHECK_MSG(strstr(err.msg, what[i]) != NULL, "case %d: %s", i, err.msg);
        lx_modules_free(m);
    }
}

static void test_modules_good(void)
{
    memset(mod_area, 0, MOD_AREA_SIZE);
    /* head <-> a (live) <-> b (unformed) <-> c (running its init) <-> head */
    mput64(MOD_HEAD, mod_at(0) + 8);
    mput64(MOD_HEAD + 8, mod_at(2) + 8);
    put_module(0, "alpha", 0, MOD_HEAD, mod_at(1) + 8);
    put_module(1, "beta", 3, mod_at(0) + 8, mod_at(2) + 8);
    put_module(2, "gamma", 1, mod_at(1) + 8, MOD_HEAD);
    lx_modules *m, *light;
    struct qp_error err = {0};
    CHECK_INT(read_mods(true, &m, &err), 0);
    CHECK_INT(read_mods(false, &light, &err), 0);
    if (!m || !light)
        return;
    CHECK_INT((int)lx_modules_count(m), 2);
    CHECK_STR(lx_modules_at(m, 0)->name, "alpha");
    CHECK_STR(lx_modules_at(m, 1)->name, "gamma");
    CHECK(lx_modules_warning(m) == NULL);
    CHECK(lx_modules_same(m, light));
    CHECK_INT((int)lx_modules_orc_entries(m), 6);
    size_t n;
    const struct lx_symbol *s = lx_modules_symbols(m, &n);
    CHECK_INT((int)n, 6); /* f0, f1, _etext for each */
    if (n == 6) {
        CHECK_STR(s[0].name, "f0 [alpha]");
        CHECK_U64(s[0].addr, mod_at(0) + 0x1010);
        CHECK_STR(s[1].name, "f1 [alpha]");
        CHECK_STR(s[2].name, "_etext [alpha]");
        CHECK_U64(s[2].addr, mod_at(0) + 0x2000);
        CHECK_STR(s[3].name, "f0 [gamma]");
    }
    uint64_t pc = mod_at(2) + 0x1900;
    CHECK(lx_modules_find(m, pc) == lx_modules_at(m, 1));
    CHECK(lx_modules_find(m, mod_at(1) + 0x1010) == NULL); /* beta is not set up */
    CHECK(lx_modules_find(m, mod_at(2) + 0x2000) == NULL); /* past gamma's text */
    const uint8_t *raw = lx_modules_orc_find(m, pc);
    CHECK(raw != NULL);
    if (raw) {
        struct lx_orc o = lx__orc_decode(raw, LX_ORC_END_BIT);
        CHECK(o.sp_reg == 5 && o.sp_offset == 16);
    }
    CHECK(lx_modules_orc_find(m, mod_at(2) + 0x1005) == NULL); /* before its first entry */
    /* beta is set up: the identities differ. */
    mput32(mod_at(1), 1);
    lx_modules *again;
    CHECK_INT(read_mods(false, &again, &err), 0);
    CHECK(!lx_modules_same(m, again));
    lx_modules_free(again);
    lx_modules_free(light);
    lx_modules_free(m);
}

/* Garbage never hangs or crashes: each case ends the walk with an error, or keeps the module
 * without the tables that do not hold together. */
/* A module running its init function: its init text is a second entry, with its symbol and
 * ORC entry; once live, that entry goes and the identities differ. */
static void test_modules_init(void)
{
    memset(mod_area, 0, MOD_AREA_SIZE);
    mput64(MOD_HEAD, mod_at(0) + 8);
    mput64(MOD_HEAD + 8, mod_at(0) + 8);
    put_module(0, "delta", 1, MOD_HEAD, MOD_HEAD);
    struct lx_module_offsets o = mod_off;
    o.has_init = true, o.init_base = 128, o.init_size = 136, o.init_text_size = 140;
    o.state_coming = 1;
    struct lx_reader r = {.read = mod_read};
    struct qp_error err = {0};
    lx_modules *m = NULL, *live = NULL;
    CHECK_INT(lx_modules_read(&o, &r, MOD_HEAD, true, &m, &err), 0);
    if (!m)
        return;
    CHECK_INT((int)lx_modules_count(m), 2);
    const struct lx_module *init = lx_modules_find(m, mod_at(0) + 0x5010);
    CHECK(init && strcmp(init->name, "delta") == 0 && init->n_syms == 1);
    CHECK(lx_modules_orc_find(m, mod_at(0) + 0x5100) != NULL);
    CHECK(lx_modules_find(m, mod_at(0) + 0x5800) == NULL); /* past the init text */
    size_t n;
    const struct lx_symbol *s = lx_modules_symbols(m, &n);
    bool named = false;
    for (size_t i = 0; i < n; i++)
        named |= strcmp(s[i].name, "ini [delta]") == 0 && s[i].addr == mod_at(0) + 0x5010;
    CHECK(named);
    mput32(mod_at(0), 0); /* live: the init text is freed */
    CHECK_INT(lx_modules_read(&o, &r, MOD_HEAD, false, &live, &err), 0);
    CHECK(live && lx_modules_count(live) == 1 && !lx_modules_same(m, live));
    lx_modules_free(live);
    lx_modules_free(m);
}

static void test_modules_garbage(void)
{
    lx_modules *m;
    struct qp_error err = {0};
    memset(mod_area, 0, MOD_AREA_SIZE);
    /* A wild pointer (the direct map, not the module area). */
    mput64(MOD_HEAD, UINT64_C(0xffff888000001000));
    CHECK_INT(read_mods(true, &m, &err), -EFAULT);
    CHECK(strstr(err.msg, "outside the module area") != NULL);
    /* A loop a -> b -> a that never comes back to the head. */
    mput64(MOD_HEAD, mod_at(0) + 8);
    put_module(0, "a", 0, MOD_HEAD, mod_at(1) + 8);
    put_module(1, "b", 0, mod_at(0) + 8, mod_at(0) + 8);
    CHECK_INT(read_mods(true, &m, &err), -EAGAIN);
    /* A loop whose back links agree (each node's prev is the one before): ends by count. */
    uint64_t node = LX_MODULES_START + 0x1000;
    for (int i = 0; i <= LX_MAX_MODULES; i++) {
        uint64_t at = node + (uint64_t)i * 256;
        mput64(at + 8, at + 256 + 8);
        mput64(at + 16, i ? at - 256 + 8 : MOD_HEAD);
        mput32(at, 3); /* unformed: nothing else read */
    }
    mput64(MOD_HEAD, node + 8);
    CHECK_INT(read_mods(false, &m, &err), -ELOOP);
    memset(mod_area, 0, MOD_AREA_SIZE);
    /* An unreadable head, then a core outside the module area. */
    struct lx_reader r = {.read = mod_read};
    CHECK_INT(lx_modules_read(&mod_off, &r, UINT64_C(0xffffffff81000000), true, &m, &err), -EFAULT);
    mput64(MOD_HEAD, mod_at(0) + 8);
    mput64(MOD_HEAD + 8, mod_at(0) + 8);
    put_module(0, "a", 0, MOD_HEAD, MOD_HEAD);
    mput64(mod_at(0) + 80, UINT64_C(0xffffffff81000000));
    CHECK_INT(read_mods(true, &m, &err), -EPROTO);
    /* Absurd counts: the module stays, without symbols or ORC, and says why. */
    put_module(0, "a", 0, MOD_HEAD, MOD_HEAD);
    mput32(mod_at(0) + 0x3000 + 8, 0xffffffffu);
    mput32(mod_at(0) + 96, 0xffffffffu);
    CHECK_INT(read_mods(true, &m, &err), 0);
    if (m) {
        CHECK_INT((int)lx_modules_count(m), 1);
        CHECK_INT((int)lx_modules_orc_entries(m), 0);
        size_t n;
        lx_modules_symbols(m, &n);
        CHECK_INT((int)n, 0);
        CHECK(lx_modules_warning(m) && strstr(lx_modules_warning(m), "module a: "));
        lx_modules_free(m);
    }
    /* An ORC table out of order (not what the kernel leaves after sorting). */
    put_module(0, "a", 0, MOD_HEAD, MOD_HEAD);
    uint64_t ips = mod_at(0) + 0x3600;
    mput32(ips, (uint32_t)(int32_t)(mod_at(0) + 0x1900 - ips)); /* above the next */
    CHECK_INT(read_mods(true, &m, &err), 0);
    if (m) {
        CHECK_INT((int)lx_modules_orc_entries(m), 0);
        CHECK(lx_modules_warning(m) && strstr(lx_modules_warning(m), "not sorted"));
        lx_modules_free(m);
    }
}

/* struct module's offsets from BTF: a 6.1-like layout resolves; 6.4's mem[] is refused in one
 * clear line. */
/* struct module's text ranges: in core_layout (up to 6.3), in mem[] (6.4+), or in neither;
 * MEM_NO_ORC: mem[] and an arch of another architecture (riscv64's, arm64's: no ORC). */
enum module_layout { CORE_LAYOUT, MEM_ARRAY, NO_LAYOUT, MEM_NO_ORC, STATE_OUTSIDE };

static lx_btf *module_btf(enum module_layout which)
{
    struct btf *b = btf__new_empty();
    int u32 = btf__add_int(b, "unsigned int", 4, 0);
    int u64 = btf__add_int(b, "long unsigned int", 8, 0);
    int chr = btf__add_int(b, "char", 1, BTF_INT_CHAR);
    int vptr = btf__add_ptr(b, 0);
    int name = btf__add_array(b, u32, chr, 56);
    int list = btf__add_struct(b, "list_head", 16);
    btf__add_field(b, "next", vptr, 0, 0);
    btf__add_field(b, "prev", vptr, 64, 0);
    int layout = btf__add_struct(b, "module_layout", 16);
    btf__add_field(b, "base", vptr, 0, 0);
    btf__add_field(b, "size", u32, 64, 0);
    btf__add_field(b, "text_size", u32, 96, 0);
    int arch = btf__add_struct(b, "mod_arch_specific", 24);
    if (which == MEM_NO_ORC) {
        btf__add_field(b, "got", vptr, 0, 0);
        btf__add_field(b, "plt", vptr, 64, 0);
    } else {
        btf__add_field(b, "num_orcs", u32, 0, 0);
        btf__add_field(b, "orc_unwind_ip", vptr, 64, 0);
        btf__add_field(b, "orc_unwind", vptr, 128, 0);
    }
    int ks = btf__add_struct(b, "mod_kallsyms", 32);
    btf__add_field(b, "symtab", vptr, 0, 0);
    btf__add_field(b, "num_symtab", u32, 64, 0);
    btf__add_field(b, "strtab", vptr, 128, 0);
    btf__add_field(b, "typetab", vptr, 192, 0);
    (void)ks, (void)u64;
    /* 6.4's struct module_memory (base, size, then a tree node) and enum mod_mem_type */
    int memory = btf__add_struct(b, "module_memory", 72);
    btf__add_field(b, "base", vptr, 0, 0);
    btf__add_field(b, "size", u32, 64, 0);
    btf__add_enum(b, "mod_mem_type", 4);
    btf__add_enum_value(b, "MOD_TEXT", 0);
    btf__add_enum_value(b, "MOD_DATA", 1);
    btf__add_enum_value(b, "MOD_INIT_TEXT", 4);
    int mem = btf__add_array(b, u32, memory, 7);
    btf__add_struct(b, "module", 1024);
    /* STATE_OUTSIDE: a guest's BTF putting state past the struct's end (issue 34) */
    btf__add_field(b, "state", u32, which == STATE_OUTSIDE ? 2000 * 8 : 0, 0);
    btf__add_field(b, "list", list, 64, 0);
    btf__add_field(b, "name", name, 192, 0);
    if (which != NO_LAYOUT)
        btf__add_field(b, which == CORE_LAYOUT || which == STATE_OUTSIDE ? "core_layout" : "mem",
                       which == CORE_LAYOUT || which == STATE_OUTSIDE ? layout : mem, 320 * 8, 0);
    btf__add_field(b, "arch", arch, 832 * 8, 0);
    btf__add_field(b, "kallsyms", vptr, 864 * 8, 0);
    uint32_t size;
    const void *raw = btf__raw_data(b, &size);
    lx_btf *out = NULL;
    struct qp_error err = {0};
    CHECK_INT(lx_btf_new(raw, size, &out, &err), 0);
    btf__free(b);
    return out;
}

static void test_module_btf(void)
{
    struct lx_module_offsets o;
    struct qp_error err = {0};
    lx_btf *b = module_btf(CORE_LAYOUT);
    CHECK_INT(lx_btf_module_offsets(b, &o, &err), 0);
    CHECK_INT((int)o.list, 8);
    CHECK_INT((int)o.name, 24);
    CHECK_INT((int)o.name_len, 56);
    CHECK_INT((int)o.core_base, 320);
    CHECK_INT((int)o.core_text_size, 332);
    CHECK_INT((int)o.orc_unwind, 848);
    CHECK_INT((int)o.kallsyms, 864);
    CHECK_INT((int)o.ks_typetab, 24);
    CHECK(o.has_typetab);
    lx_btf_free(b);
    /* 6.4+: the text is mem[MOD_TEXT], all of it text; the init text mem[MOD_INIT_TEXT]. */
    b = module_btf(MEM_ARRAY);
    CHECK_INT(lx_btf_module_offsets(b, &o, &err), 0);
    CHECK_INT((int)o.core_base, 320);
    CHECK_INT((int)o.core_size, 328);
    CHECK_INT((int)o.core_text_size, 328);
    CHECK_INT((int)o.init_base, 320 + 4 * 72);
    CHECK_INT((int)o.init_text_size, 320 + 4 * 72 + 8);
    CHECK_INT((int)o.orc_unwind, 848);
    CHECK(o.has_orc);
    lx_btf_free(b);
    /* A kernel without ORC (arm64, riscv64): its modules' text and symbols all the same. */
    b = module_btf(MEM_NO_ORC);
    CHECK_INT(lx_btf_module_offsets(b, &o, &err), 0);
    CHECK(!o.has_orc);
    CHECK_INT((int)o.core_base, 320);
    CHECK_INT((int)o.kallsyms, 864);
    CHECK_INT((int)o.ks_strtab, 16);
    lx_btf_free(b);
    /* A member past the struct's end: refused, never read past the reader's copy. */
    b = module_btf(STATE_OUTSIDE);
    CHECK_INT(lx_btf_module_offsets(b, &o, &err), -EINVAL);
    CHECK_MSG(strstr(err.msg, "state") != NULL, "message: %s", err.msg);
    lx_btf_free(b);
    /* Neither: one line naming the structure. */
    b = module_btf(NO_LAYOUT);
    CHECK_INT(lx_btf_module_offsets(b, &o, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "struct module") && strstr(err.msg, "mem[]") &&
                  !strchr(err.msg, '\n'),
              "message: %s", err.msg);
    lx_btf_free(b);
}

/* arm64: a kernel stack by frame records, from a leaf with no record of its own (its caller in
 * x30) to the record in the user-entry pt_regs at the top of the task's stack; an exception
 * taken in the kernel on the way; a chain that goes down, a kernel thread. */
#define A64_PT_REGS 336u
#define A64_FRAME   304u /* pt_regs.stackframe */
static void put_a64_regs(uint64_t pa, uint64_t x29, uint64_t x30, uint64_t sp, uint64_t pc,
                         uint64_t pstate)
{
    put64(pa + 29 * 8, x29);
    put64(pa + 30 * 8, x30);
    put64(pa + 31 * 8, sp);
    put64(pa + 32 * 8, pc);
    put64(pa + 33 * 8, pstate);
}

static void test_arm64_frames(const struct lx_phys *p)
{
    arm64 = true, kbase = KBASE_ARM64;
    memset(ram, 0, RAM_SIZE);
    map_kernel();
    put_note("6.1.0-50-arm64");
    const struct sym syms[] = {
        {"_text", 'T', 0},
        {"_stext", 'T', 0},
        {"el0t_64_sync", 'T', 0x100},
        {"__entry_text_start", 'T', 0x100},
        {"__entry_text_end", 'T', 0x180},
        {"vectors", 'T', 0x100},
        {"caller", 't', 0x200},
        {"leaf", 'T', 0x300},
        {"irq_handler", 'T', 0x400},
        {"_etext", 'T', 0x1000},
    };
    put_kallsyms(syms, (int)(sizeof syms / sizeof syms[0]));
    lx_kernel *k = open_kernel(p);
    struct qp_error err = {0};
    CHECK_INT(lx_kernel_load_kallsyms(k, &err), 0);
    CHECK(lx_kernel_unwinds_by_fp(k));
    CHECK_MSG(strcmp(lx_kernel_arch_name(k), "arm64") == 0, "arch %s", lx_kernel_arch_name(k));
    /* no ORC, so no pt_regs conversion; current is SP_EL0, which the capture has */
    uint64_t none[LX_GREGS] = {0};
    struct lx_pt_regs none_pt;
    uint32_t iret;
    CHECK_INT(lx_kernel_regs_to_pt(k, none, &none_pt), -ENOTSUP);
    CHECK_INT(lx_kernel_regs_from_pt(k, &none_pt, none), -ENOTSUP);
    CHECK(!lx_kernel_current_in_percpu(k, &iret));
    CHECK_U64(lx_kernel_image_paddr(k, KBASE + TEXT), TEXT);

    uint64_t text = KBASE + TEXT, top = STACK + 0x4000, pt = top - A64_PT_REGS;
    uint64_t f2 = KBASE + pt + A64_FRAME, f1 = KBASE + STACK + 0x3000;
    struct lx_fp_task task = {
        .stack_lo = KBASE + STACK, .stack_hi = KBASE + top, .pt_regs_size = A64_PT_REGS};
    put_a64_regs(pt, 0x7ffc0100, 0x400100, 0x7ffc0000, 0x401000, 0); /* EL0t */
    put64(STACK + 0x3000, f2);                                       /* caller's record */
    put64(STACK + 0x3008, text + 0x120);                             /* into el0t_64_sync */
    uint64_t live[LX_GREGS] = {0};
    live[29] = f1, live[30] = text + 0x210, live[31] = KBASE + STACK + 0x2f00;
    live[32] = text + 0x308;
    struct lx_frame f[8];
    struct lx_fp_result res;
    lx_unwind_fp(k, live, &task, f, 8, &res);
    CHECK_INT(res.n_frames, 3);
    CHECK_U64(f[0].pc, text + 0x308);
    CHECK(f[0].exact);
    CHECK_U64(f[1].pc, text + 0x210); /* the leaf's caller, from x30 */
    CHECK_U64(f[2].pc, text + 0x120);
    CHECK_INT(res.end, LX_END_USER);
    CHECK(res.have_user_regs);
    CHECK_U64(res.user_regs[32], 0x401000);
    CHECK_U64(res.user_regs[31], 0x7ffc0000);
    CHECK_U64(res.user_regs[29], 0x7ffc0100);

    /* A timer interrupt in the leaf: the handler's record is the one in the exception's
     * pt_regs, holding the leaf's pc (an exact frame) and the leaf's x30. */
    uint64_t pt2 = STACK + 0x2000;
    put_a64_regs(pt2, f1, text + 0x210, KBASE + pt2 + A64_PT_REGS, text + 0x308, 0x3c5); /* EL1h */
    put64(pt2 + A64_FRAME, f1);
    put64(pt2 + A64_FRAME + 8, text + 0x308);
    lx_kernel_forget_translations(k);
    live[29] = KBASE + pt2 + A64_FRAME, live[30] = text + 0x420, live[32] = text + 0x408;
    lx_unwind_fp(k, live, &task, f, 8, &res);
    CHECK_INT(res.n_frames, 4);
    CHECK_U64(f[0].pc, text + 0x408);
    CHECK_U64(f[1].pc, text + 0x308);
    CHECK(f[1].exact);
    CHECK_U64(f[2].pc, text + 0x210);
    CHECK_U64(f[3].pc, text + 0x120);
    CHECK_INT(res.end, LX_END_USER);

    /* A leaf in the entry code: its frame pointer is not the chain's, the stack ends there;
     * at the entry's first instruction a trap pc register says where the exception came from
     * (riscv64's sepc): a user address ends in user mode with the live registers, a kernel one
     * is the interrupted leaf. */
    live[29] = f1, live[30] = text + 0x210, live[32] = text + 0x108;
    lx_unwind_fp(k, live, &task, f, 8, &res);
    CHECK_INT(res.n_frames, 1);
    CHECK_INT(res.end, LX_END_FP_BROKEN);
    live[32] = text + 0x100;
    task.has_trap_pc = true, task.trap_pc = 0x401234;
    lx_unwind_fp(k, live, &task, f, 8, &res);
    CHECK_INT(res.n_frames, 1);
    CHECK_INT(res.end, LX_END_USER);
    CHECK(res.have_user_regs);
    CHECK_U64(res.user_regs[32], 0x401234);
    CHECK_U64(res.user_regs[29], f1);
    task.trap_pc = text + 0x308;
    lx_unwind_fp(k, live, &task, f, 8, &res);
    CHECK_INT(res.n_frames, 4);
    CHECK_U64(f[1].pc, text + 0x308);
    CHECK(f[1].exact);
    CHECK_U64(f[2].pc, text + 0x210);
    CHECK_U64(f[3].pc, text + 0x120);
    CHECK_INT(res.end, LX_END_USER);
    task.has_trap_pc = false;

    /* A kernel thread: the same end, no user registers. */
    task.kthread = true;
    live[29] = f1, live[30] = text + 0x210, live[32] = text + 0x308;
    lx_unwind_fp(k, live, &task, f, 8, &res);
    CHECK_INT(res.end, LX_END_TASK_START);
    CHECK(!res.have_user_regs);

    /* A record pointing down the stack ends the walk, marked; so does one off the page table,
     * and a depth of frames past max. */
    put64(STACK + 0x3000, f1 - 16);
    put64(STACK + 0x3000 - 16, f1);
    put64(STACK + 0x3000 - 8, text + 0x220);
    lx_kernel_forget_translations(k);
    lx_unwind_fp(k, live, &task, f, 8, &res);
    CHECK_INT(res.end, LX_END_LOOP);
    CHECK(!lx_unwind_end_is_complete(res.end));
    live[29] = KBASE + RAM_SIZE + 0x100000;
    lx_unwind_fp(k, live, &task, f, 8, &res);
    CHECK_INT(res.end, LX_END_UNREADABLE);
    CHECK_INT(res.n_frames, 1);
    live[29] = 0x1234;
    lx_unwind_fp(k, live, &task, f, 8, &res);
    CHECK_INT(res.end, LX_END_FP_BROKEN);
    lx_kernel_free(k);
    arm64 = false, kbase = KBASE_X86_64;
}

int main(void)
{
    ram = g_malloc0(RAM_SIZE);
    struct lx_phys p = {.read = ram_read};
    test_parse();
    test_load_file();
    test_kallsyms(&p);
    test_kallsyms_by_shape(&p);
    test_orc(&p, LX_ORC_END_BIT, "6.1.0-56-amd64");
    test_orc(&p, LX_ORC_SIGNAL_BIT, "6.12.95+deb12-amd64");
    test_orc(&p, LX_ORC_SIGNAL_REGS, "7.3.4+deb13-amd64");
    test_unknown_orc_layout(&p);
    test_not_linux(&p);
    test_arm64_frames(&p);
    test_file_path();
    test_file_page();
    test_build_id();
    mod_area = g_malloc0(MOD_AREA_SIZE);
    test_modules_good();
    test_modules_offsets_outside();
    test_modules_no_orc();
    test_pc_rel_addrs();
    test_modules_init();
    test_modules_garbage();
    test_module_btf();
    g_free(mod_area);
    g_free(ram);
    return harness_result();
}
