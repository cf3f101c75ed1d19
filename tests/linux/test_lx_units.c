/* The linux/ module against a synthetic guest: a few MB of "physical RAM" holding a kernel page
 * table, a vmcoreinfo note, kallsyms tables (with a name long enough for 6.1's two-byte length)
 * and ORC tables, and a hand-built kernel stack that crosses a frame-pointer frame, a plain
 * call frame and the user-entry pt_regs. */
#include "harness.h"
#include "linux.h"
#include "lx_task.h"

#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <unistd.h>

#define RAM_SIZE (8u << 20)
#define KBASE    UINT64_C(0xffffffff80000000) /* mapped to physical 0 by 2 MiB pages */
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
    put64(PGD + 511 * 8, PUD | 3);
    put64(PUD + 510 * 8, PMD | 3); /* 0xffffffff80000000: PGD 511, PUD 510, PMD 0.. */
    for (int i = 0; i < 4; i++)
        put64(PMD + i * 8, ((uint64_t)i << 21) | 0x83);
}

static const char *vmcoreinfo_text(const char *release)
{
    static char text[2048];
    snprintf(text, sizeof text,
             "OSRELEASE=%s\nPAGESIZE=4096\nSYMBOL(init_uts_ns)=%llx\nSYMBOL(_stext)=%llx\n"
             "SYMBOL(kallsyms_names)=%llx\nSYMBOL(kallsyms_num_syms)=%llx\n"
             "SYMBOL(kallsyms_token_table)=%llx\nSYMBOL(kallsyms_token_index)=%llx\n"
             "SYMBOL(kallsyms_offsets)=%llx\nSYMBOL(kallsyms_relative_base)=%llx\n"
             "NUMBER(phys_base)=0\nSYMBOL(init_top_pgt)=%llx\nKERNELOFFSET=0\n",
             release, (unsigned long long)(KBASE + 0x6000), (unsigned long long)(KBASE + TEXT),
             (unsigned long long)(KBASE + KALLSYMS),
             (unsigned long long)(KBASE + KALLSYMS + 0x8000),
             (unsigned long long)(KBASE + KALLSYMS + 0x9000),
             (unsigned long long)(KBASE + KALLSYMS + 0xa000),
             (unsigned long long)(KBASE + KALLSYMS + 0xb000),
             (unsigned long long)(KBASE + KALLSYMS + 0xc000), (unsigned long long)(KBASE + PGD));
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

/* ORC entry flags (v1): sp_reg | bp_reg << 4 | type << 8 | end << 10 */
static void put_orc(int i, uint32_t ip_off, int16_t sp_off, int16_t bp_off, int sp_reg, int bp_reg,
                    int type, int end)
{
    uint64_t ip_slot = ORC + 4 * (uint64_t)i;
    int32_t rel = (int32_t)((TEXT + ip_off) - ip_slot);
    memcpy(ram + ip_slot, &rel, 4);
    uint64_t e = ORC + 0x1000 + 6 * (uint64_t)i;
    uint16_t flags = (uint16_t)(sp_reg | bp_reg << 4 | type << 8 | end << 10);
    memcpy(ram + e, &sp_off, 2);
    memcpy(ram + e + 2, &bp_off, 2);
    memcpy(ram + e + 4, &flags, 2);
}

enum { R_UNDEF = 0, R_PREV_SP = 1, R_BP = 4, R_SP = 5 };
enum { T_CALL = 0, T_REGS = 1 };

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

static void test_orc(const struct lx_phys *p)
{
    build_guest("6.1.0-56-amd64");
    lx_kernel *k = open_kernel(p);
    struct qp_error err = {0};
    CHECK_INT(lx_kernel_load_orc(k, &err), 0);
    CHECK_INT(lx_kernel_orc_entries(k), 4);
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
    lx_kernel_free(k);
}

static void test_unknown_orc_version(const struct lx_phys *p)
{
    build_guest("6.8.0-1-amd64");
    lx_kernel *k = open_kernel(p);
    struct qp_error err = {0};
    CHECK_INT(lx_kernel_load_orc(k, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "6.8.0-1-amd64") && strstr(err.msg, "ORC"), "message: %s", err.msg);
    lx_kernel_free(k);
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

int main(void)
{
    ram = g_malloc0(RAM_SIZE);
    struct lx_phys p = {.read = ram_read};
    test_parse();
    test_load_file();
    test_kallsyms(&p);
    test_orc(&p);
    test_unknown_orc_version(&p);
    test_not_linux(&p);
    test_file_path();
    test_build_id();
    g_free(ram);
    return harness_result();
}
