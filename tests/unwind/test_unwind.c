/* Golden unwinding on the host: fixtures stopped under ptrace, unwound with unw_* from their
 * captured registers and stack, compared with eu-stack on the same stopped process; plus the
 * stop rules, the .eh_frame-from-memory path, the memory source and the CFI dump. */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <glib.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "harness.h"
#include "arch.h"
#include "unwind.h"

#define USER_LO    0x1000ull
#define USER_HI    0x800000000000ull
#define MAX_FRAMES 64

/* ---- Test-side symbolization (independent of the unwinder) ------------------------------- */

static Dwfl *symbolizer_open(const char *path)
{
    static char *debuginfo_path;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = &debuginfo_path,
    };
    Dwfl *d = dwfl_begin(&callbacks);
    REQUIRE(d != NULL);
    dwfl_report_begin(d);
    REQUIRE(dwfl_report_offline(d, "", path, -1) != NULL);
    dwfl_report_end(d, NULL, NULL);
    return d;
}

static const char *name_at(Dwfl *d, uint64_t pc)
{
    Dwfl_Module *m = dwfl_addrmodule(d, pc);
    const char *n = m ? dwfl_module_addrname(m, pc) : NULL;
    return n ? n : "??";
}

static const char *frame_name(Dwfl *d, const struct unw_frame *f)
{
    return name_at(d, f->activation ? f->pc : f->pc - 1);
}

static int first_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
                        void *arg)
{
    *(Dwfl_Module **)arg = mod;
    return DWARF_CB_ABORT;
}

static uint64_t symbol_addr(Dwfl *d, const char *name)
{
    Dwfl_Module *m = NULL;
    dwfl_getmodules(d, first_module, &m, 0);
    REQUIRE(m != NULL);
    int n = dwfl_module_getsymtab(m);
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *s = dwfl_module_getsym_info(m, i, &sym, &addr, NULL, NULL, NULL);
        if (s && strcmp(s, name) == 0 && GELF_ST_TYPE(sym.st_info) == STT_FUNC)
            return addr;
    }
    HARNESS_FAIL("no symbol %s", name);
    exit(1);
}

/* ---- Memory sources ---------------------------------------------------------------------- */

struct fake_guest {
    const struct capture *c;
    unsigned reads;
    uint64_t lowest, highest; /* span of every byte asked for */
};

static int fake_guest_read(void *ctx, uint64_t addr, void *buf, size_t len, size_t *got)
{
    struct fake_guest *g = ctx;
    const struct capture *c = g->c;
    g->reads++;
    g->lowest = g->reads == 1 || addr < g->lowest ? addr : g->lowest;
    g->highest = addr + len > g->highest ? addr + len : g->highest;
    if (addr < c->stack_addr || addr >= c->stack_addr + c->stack_len)
        return -EFAULT;
    size_t off = addr - c->stack_addr;
    *got = c->stack_len - off < len ? c->stack_len - off : len;
    memcpy(buf, c->stack + off, *got);
    return 0;
}

static struct unw_memory snapshot_of(const struct capture *c)
{
    return (struct unw_memory){
        .snapshot_addr = c->stack_addr, .snapshot = c->stack, .snapshot_len = c->stack_len};
}

/* ---- Helpers ----------------------------------------------------------------------------- */

static unw_space *space_for(const char *elf, uint64_t lo, uint64_t hi)
{
    unw_space *s = NULL;
    struct qp_error err = {0};
    int rc = unw_space_new(prof_arch_x86_64.unwind, "user", lo, hi, &s, &err);
    if (rc == 0)
        rc = unw_space_add_elf(s, elf, 0, &err);
    CHECK_MSG(rc == 0, "space for %s: %s", elf, err.msg);
    REQUIRE(s != NULL);
    return s;
}

static void walk(unw_space *s, const struct unw_regs *regs, const struct unw_memory *mem,
                 int max_depth, struct unw_frame *frames, struct unw_result *res)
{
    struct qp_error err = {0};
    memset(res, 0, sizeof *res);
    res->frames = frames;
    int rc = unw_unwind(s, regs, mem, max_depth, res, &err);
    CHECK_MSG(rc == 0, "unw_unwind: %s", err.msg);
    CHECK(res->n_frames >= 0 && res->n_frames <= max_depth);
}

static void print_walk(const char *label, Dwfl *syms, const struct unw_result *res)
{
    fprintf(stderr, "%s: %d frames, stop: %s, fetches %u\n", label, res->n_frames,
            unw_stop_str(res->stop), res->memory_fetches);
    for (int i = 0; i < res->n_frames; i++)
        fprintf(stderr, "  #%-2d 0x%016" PRIx64 " %c%c %s\n", i, res->frames[i].pc,
                res->frames[i].activation ? 'A' : '-', "RCF"[res->frames[i].method],
                frame_name(syms, &res->frames[i]));
}

static int eu_index_of(const struct capture *c, const char *name)
{
    for (int i = 0; i < c->n_eu; i++)
        if (strcmp(c->eu_names[i], name) == 0)
            return i;
    return -1;
}

/* ---- Tests ------------------------------------------------------------------------------- */

/* Our frames match eu-stack's, pc for pc and name for name, from the top down to main. */
static void check_against_eu_stack(const char *label, Dwfl *syms, const struct capture *c,
                                   const struct unw_result *res)
{
    int main_at = eu_index_of(c, "main");
    CHECK_MSG(main_at >= 8, "%s: eu-stack shows main at %d", label, main_at);
    CHECK_MSG(res->n_frames > main_at, "%s: %d frames, main is #%d", label, res->n_frames, main_at);
    int failures = harness_failures;
    for (int i = 0; i <= main_at && i < res->n_frames; i++) {
        CHECK_STR(frame_name(syms, &res->frames[i]), c->eu_names[i]);
        CHECK_U64(res->frames[i].pc, c->eu_pcs[i]);
    }
    CHECK_MSG(res->stop == UNW_STOP_OUTERMOST, "%s: stop %s", label, unw_stop_str(res->stop));
    CHECK(res->frames[0].activation && res->frames[0].method == UNW_BY_REGS);
    if (harness_failures != failures)
        print_walk(label, syms, res);
}

/* A signal trampoline's frame and the frame it interrupted are activations (their pcs are
 * exact: no call put them there); other frames above the innermost are not. */
static void check_activations(const char *label, Dwfl *syms, const struct unw_result *res)
{
    int interrupted = 0;
    for (int i = 1; i < res->n_frames; i++) {
        bool trampoline = strcmp(frame_name(syms, &res->frames[i]), "__restore_rt") == 0;
        bool after_trampoline = strcmp(frame_name(syms, &res->frames[i - 1]), "__restore_rt") == 0;
        CHECK_MSG(res->frames[i].activation == (trampoline || after_trampoline),
                  "%s: frame %d activation %d", label, i, res->frames[i].activation);
        interrupted += after_trampoline;
    }
    CHECK_MSG(strstr(label, "signal") ? interrupted == 1 : interrupted == 0,
              "%s: %d interrupted frames", label, interrupted);
}

static int count_method(const struct unw_result *res, enum unw_method m)
{
    int n = 0;
    for (int i = 0; i < res->n_frames; i++)
        n += res->frames[i].method == m;
    return n;
}

static void test_golden(const char *fixture, const char *mode, bool has_cfi)
{
    char label[256];
    snprintf(label, sizeof label, "%s %s", strrchr(fixture, '/') + 1, mode);
    struct capture c;
    int rc = capture_fixture(fixture, mode, 1, &c);
    REQUIRE(rc == 0);
    Dwfl *syms = symbolizer_open(fixture);
    unw_space *s = space_for(fixture, USER_LO, USER_HI);
    struct unw_frame frames[MAX_FRAMES];
    struct unw_result res;
    struct unw_memory mem = snapshot_of(&c);
    walk(s, &c.regs, &mem, MAX_FRAMES, frames, &res);
    check_against_eu_stack(label, syms, &c, &res);
    if (getenv("UNW_TEST_VERBOSE"))
        print_walk(label, syms, &res);
    check_activations(label, syms, &res);
    CHECK_INT(res.memory_fetches, 0);
    /* Frames of the fixture's own code come from the frame pointer chain when it has no CFI */
    int by_fp = count_method(&res, UNW_BY_FP);
    CHECK_MSG(has_cfi ? by_fp == 0 : by_fp >= 8, "%s: %d frames by FP", label, by_fp);
    unw_space_free(s);
    dwfl_end(syms);
    capture_release(&c);
}

/* The same walk through the caller's read function only, then with a short snapshot: same
 * frames, a few chunked reads rather than one per word. */
static void test_memory_source(const struct capture *c, unw_space *s, const struct unw_result *ref)
{
    struct unw_frame frames[MAX_FRAMES];
    struct unw_result res;
    struct fake_guest g = {.c = c};
    struct unw_memory mem = {.read = fake_guest_read, .ctx = &g};
    walk(s, &c->regs, &mem, MAX_FRAMES, frames, &res);
    CHECK_INT(res.n_frames, ref->n_frames);
    CHECK_INT(res.stop, ref->stop);
    for (int i = 0; i < res.n_frames && i < ref->n_frames; i++)
        CHECK_U64(res.frames[i].pc, ref->frames[i].pc);
    CHECK_INT(res.memory_fetches, g.reads);
    CHECK_MSG(g.reads >= 1 && g.reads <= 8, "%u reads", g.reads);

    g.reads = 0;
    mem.snapshot_addr = c->stack_addr;
    mem.snapshot = c->stack;
    mem.snapshot_len = 64;
    walk(s, &c->regs, &mem, MAX_FRAMES, frames, &res);
    CHECK_INT(res.n_frames, ref->n_frames);
    CHECK_MSG(g.reads >= 1 && g.reads <= 8, "%u reads", g.reads);
}

static void test_depth_and_bounds(const struct capture *c, unw_space *s)
{
    struct unw_frame frames[MAX_FRAMES];
    struct unw_result res;
    struct unw_memory mem = snapshot_of(c);
    walk(s, &c->regs, &mem, 3, frames, &res);
    CHECK_INT(res.n_frames, 3);
    CHECK_INT(res.stop, UNW_STOP_DEPTH);
    CHECK(unw_stop_is_truncation(res.stop));

    /* A stack bound just above the innermost frames: the walk ends, cut short, inside it. */
    mem.stack_lo = c->stack_addr;
    mem.stack_hi = c->stack_addr + 128;
    walk(s, &c->regs, &mem, MAX_FRAMES, frames, &res);
    CHECK_MSG(res.stop == UNW_STOP_MEMORY, "stop %s", unw_stop_str(res.stop));
    CHECK(res.n_frames >= 1 && res.n_frames < 8);

    /* No memory at all: one frame from the registers, then a memory stop. */
    walk(s, &c->regs, NULL, MAX_FRAMES, frames, &res);
    CHECK_INT(res.stop, UNW_STOP_MEMORY);
    CHECK(res.n_frames >= 1);
}

static void test_bad_pc(unw_space *s, const struct capture *c)
{
    struct unw_frame frames[4];
    struct unw_result res;
    struct unw_memory mem = snapshot_of(c);
    struct unw_regs regs = c->regs;
    regs.r[UNW_RIP] = 0;
    walk(s, &regs, &mem, 4, frames, &res);
    CHECK_INT(res.stop, UNW_STOP_BAD_PC);
    CHECK_INT(res.n_frames, 0);
    regs.r[UNW_RIP] = 0x0000900000000000ull;
    walk(s, &regs, &mem, 4, frames, &res);
    CHECK_INT(res.stop, UNW_STOP_BAD_PC);
    struct qp_error err = {0};
    res.frames = frames;
    CHECK(unw_unwind(s, &regs, &mem, 0, &res, &err) == -EINVAL);
    CHECK(err.code == -EINVAL && err.msg[0] != '\0');
}

/* A space ending below main's callers: the walk stops at the first return address outside it
 * and hands over the registers to continue in the next space, as kernel -> user does. */
static void test_left_space(const char *fixture, const struct capture *c, Dwfl *syms,
                            const struct unw_result *ref)
{
    uint64_t lo = symbol_addr(syms, "stop_here");
    unw_space *inner = space_for(fixture, lo, USER_HI);
    struct unw_frame frames[MAX_FRAMES];
    struct unw_result res;
    struct unw_memory mem = snapshot_of(c);
    walk(inner, &c->regs, &mem, MAX_FRAMES, frames, &res);
    int main_at = eu_index_of(c, "main");
    CHECK_INT(res.stop, UNW_STOP_LEFT_SPACE);
    CHECK(!unw_stop_is_truncation(res.stop));
    CHECK_INT(res.n_frames, main_at);
    CHECK_U64(res.next_pc, c->eu_pcs[main_at]);
    CHECK(res.next_regs_known & (1u << UNW_RSP));
    CHECK_U64(res.next_regs.r[UNW_RIP], res.next_pc);

    unw_space *outer = space_for(fixture, USER_LO, USER_HI);
    struct unw_regs next = res.next_regs;
    walk(outer, &next, &mem, MAX_FRAMES, frames, &res);
    CHECK_INT(res.stop, UNW_STOP_OUTERMOST);
    CHECK_STR(res.n_frames > 0 ? frame_name(syms, &frames[0]) : "", "main");
    CHECK_INT(res.n_frames, ref->n_frames - main_at);
    unw_space_free(inner);
    unw_space_free(outer);
}

struct section_info {
    uint64_t addr, size;
    void *bytes;
};

static struct section_info read_section(const char *path, const char *want)
{
    struct section_info out = {0};
    elf_version(EV_CURRENT);
    int fd = open(path, O_RDONLY);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx;
    REQUIRE(elf != NULL && elf_getshdrstrndx(elf, &shstrndx) == 0);
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        gelf_getshdr(scn, &sh);
        if (strcmp(elf_strptr(elf, shstrndx, sh.sh_name), want) != 0)
            continue;
        Elf_Data *d = elf_rawdata(scn, NULL);
        out.addr = sh.sh_addr;
        out.size = sh.sh_size;
        if (d && sh.sh_type != SHT_NOBITS)
            out.bytes = g_memdup2(d->d_buf, d->d_size);
    }
    elf_end(elf);
    close(fd);
    REQUIRE(out.size != 0);
    return out;
}

/* .eh_frame bytes as the profiler would read them from guest memory give the same frames. */
static void test_eh_frame_from_memory(const char *fixture, const struct capture *c,
                                      const struct unw_result *ref)
{
    struct section_info text = read_section(fixture, ".text");
    struct section_info eh = read_section(fixture, ".eh_frame");
    REQUIRE(eh.bytes != NULL);
    unw_space *s = NULL;
    struct qp_error err = {0};
    REQUIRE(unw_space_new(prof_arch_x86_64.unwind, "user", USER_LO, USER_HI, &s, &err) == 0);
    int rc = unw_space_add_eh_frame(s, "fixture-from-memory", text.addr, text.size, eh.addr,
                                    eh.bytes, eh.size, &err);
    CHECK_MSG(rc == 0, "add_eh_frame: %s", err.msg);
    g_free(eh.bytes); /* the space copied them */
    g_free(text.bytes);
    struct unw_frame frames[MAX_FRAMES];
    struct unw_result res;
    struct unw_memory mem = snapshot_of(c);
    walk(s, &c->regs, &mem, MAX_FRAMES, frames, &res);
    CHECK_INT(res.n_frames, ref->n_frames);
    CHECK_INT(res.stop, ref->stop);
    for (int i = 0; i < res.n_frames && i < ref->n_frames; i++) {
        CHECK_U64(res.frames[i].pc, ref->frames[i].pc);
        CHECK_INT(res.frames[i].activation, ref->frames[i].activation);
        CHECK_INT(res.frames[i].method, ref->frames[i].method);
    }
    CHECK(unw_space_add_eh_frame(s, "bad", 0, 0, 0, "x", 1, &err) == -EINVAL);
    unw_space_free(s);
}

/* .eh_frame read from an aarch64 guest: libdw takes the rules a table leaves out from the
 * image's machine (aarch64's sp is the CFA), so a walk goes on past the first caller only when
 * the image says aarch64. One function (stp x29, x30, [sp, #-16]!; then CFA = sp+16, x29 and
 * x30 saved at CFA-16 and CFA-8) whose frames nest three deep on a stack at sp. */
static void test_eh_frame_other_machine(void)
{
    enum { TEXT = 0x20000, TEXT_SIZE = 0x100, EH = 0x10000, SP = 0x7ff000 };
    static const uint8_t cie[24] = {
        20,   0,    0,   0, 0, 0, 0, 0, /* length, CIE id */
        1,    'z',  'R', 0,             /* version, augmentation */
        4,    0x78, 30,      /* code alignment 4, data alignment -8, return address x30 */
        1,    0x1b,          /* augmentation data: FDE pointers pc-relative sdata4 */
        0x0c, 31,   0,       /* DW_CFA_def_cfa sp, 0 */
        0,    0,    0,   0}; /* DW_CFA_nop */
    uint8_t eh[24 + 28 + 4] = {0};
    memcpy(eh, cie, sizeof cie);
    uint8_t *fde = eh + 24;
    int32_t pc_begin = (int32_t)(TEXT - (EH + 24 + 8));
    const uint8_t head[] = {24, 0, 0, 0, 28, 0, 0, 0}; /* length, CIE pointer */
    memcpy(fde, head, sizeof head);
    memcpy(fde + 8, &pc_begin, 4);
    const int32_t range = TEXT_SIZE;
    memcpy(fde + 12, &range, 4);
    /* augmentation data length 0; advance 4 bytes; DW_CFA_def_cfa_offset 16; x29 at CFA-16,
     * x30 at CFA-8; nops */
    const uint8_t prog[] = {0, 0x41, 0x0e, 16, 0x80 | 29, 2, 0x80 | 30, 1, 0, 0, 0, 0};
    memcpy(fde + 16, prog, sizeof prog);
    unw_space *s = NULL;
    struct qp_error err = {0};
    REQUIRE(unw_space_new(prof_arch_aarch64.unwind, "user", USER_LO, USER_HI, &s, &err) == 0);
    CHECK_MSG(unw_space_add_eh_frame(s, "a64", TEXT, TEXT_SIZE, EH, eh, sizeof eh, &err) == 0,
              "add_eh_frame: %s", err.msg);
    /* frame records: [x29, x30] pairs, the last one's return address 0 (the outermost) */
    const uint64_t stack[6] = {SP + 16, TEXT + 0x24, SP + 32, TEXT + 0x34, 0, 0};
    struct unw_memory mem = {.snapshot_addr = SP, .snapshot = stack, .snapshot_len = sizeof stack};
    struct unw_regs regs = {0};
    regs.r[prof_arch_aarch64.pc_reg] = TEXT + 0x10;
    regs.r[prof_arch_aarch64.sp_reg] = SP;
    regs.r[29] = SP;
    struct unw_frame frames[MAX_FRAMES];
    struct unw_result res;
    walk(s, &regs, &mem, MAX_FRAMES, frames, &res);
    fprintf(stderr, "aarch64 .eh_frame from memory: %d frames, stop: %s\n", res.n_frames,
            unw_stop_str(res.stop));
    CHECK_INT(res.n_frames, 3);
    const uint64_t want[3] = {TEXT + 0x10, TEXT + 0x24, TEXT + 0x34};
    for (int i = 0; i < res.n_frames && i < 3; i++) {
        CHECK_U64(res.frames[i].pc, want[i]);
        CHECK_INT(res.frames[i].method, i == 0 ? UNW_BY_REGS : UNW_BY_CFI);
    }
    unw_space_free(s);
}

static char *dump_to_string(unw_space *s, uint64_t pc, int *rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    *rc = unw_dump_cfi(s, pc, f, NULL);
    fclose(f);
    return text;
}

static void test_dump_cfi(const char *fixture, const char *nocfi_fixture, Dwfl *syms)
{
    uint64_t f1 = symbol_addr(syms, "f1");
    unw_space *s = space_for(fixture, USER_LO, USER_HI);
    int rc;
    char *text = dump_to_string(s, f1, &rc);
    CHECK_INT(rc, 0);
    CHECK_MSG(strstr(text, "CFA = rsp+8\n") && strstr(text, "rip (return address) = [CFA-8]"),
              "dump at f1 entry:\n%s", text);
    free(text);
    text = dump_to_string(s, 0x10, &rc);
    CHECK_INT(rc, -ENOENT);
    free(text);
    unw_space_free(s);

    /* A relocated copy: the same rules at the slid pc. */
    const int64_t slide = 0x10000000;
    unw_space *slid = NULL;
    REQUIRE(unw_space_new(prof_arch_x86_64.unwind, "slid", USER_LO, USER_HI, &slid, NULL) == 0);
    CHECK_INT(unw_space_add_elf(slid, fixture, slide, NULL), 0);
    text = dump_to_string(slid, f1 + slide, &rc);
    CHECK_INT(rc, 0);
    CHECK_MSG(text && strstr(text, "CFA = rsp+8\n"), "slid dump:\n%s", text);
    free(text);
    unw_space_free(slid);

    unw_space *nocfi = space_for(nocfi_fixture, USER_LO, USER_HI);
    text = dump_to_string(nocfi, symbol_addr(syms, "f1"), &rc);
    CHECK_INT(rc, -ENOENT);
    free(text);
    unw_space_free(nocfi);
}

/* Start inside stop_here (no CFI) with a broken frame pointer: one frame, then NO_CFI. */
static void test_broken_fp_chain(const char *nocfi_fixture, const struct capture *c)
{
    Dwfl *syms = symbolizer_open(nocfi_fixture);
    unw_space *s = space_for(nocfi_fixture, USER_LO, USER_HI);
    struct unw_regs regs = c->regs;
    regs.r[UNW_RIP] = symbol_addr(syms, "stop_here") + 4;
    regs.r[UNW_RBP] = 0;
    struct unw_frame frames[MAX_FRAMES];
    struct unw_result res;
    struct unw_memory mem = snapshot_of(c);
    walk(s, &regs, &mem, MAX_FRAMES, frames, &res);
    CHECK_INT(res.n_frames, 1);
    CHECK_INT(res.stop, UNW_STOP_NO_CFI);

    /* A frame pointer pointing at itself: must end, cut short, without looping. */
    uint8_t stack[256] = {0};
    uint64_t base = 0x7ffd00000000ull, self = base + 64, ret = regs.r[UNW_RIP];
    memcpy(stack + 64, &self, 8);
    memcpy(stack + 72, &ret, 8);
    regs.r[UNW_RSP] = base;
    regs.r[UNW_RBP] = self;
    struct unw_memory loop = {.snapshot_addr = base, .snapshot = stack, .snapshot_len = 256};
    walk(s, &regs, &loop, MAX_FRAMES, frames, &res);
    CHECK(unw_stop_is_truncation(res.stop));
    CHECK_MSG(res.n_frames <= 3, "%d frames", res.n_frames);
    unw_space_free(s);
    dwfl_end(syms);
}

/* Random stacks and registers never loop, crash or read outside what mem serves. */
static void test_garbage(const char *fixture, const struct capture *c, Dwfl *syms)
{
    unw_space *spaces[2] = {space_for(fixture, USER_LO, USER_HI), NULL};
    REQUIRE(unw_space_new(prof_arch_x86_64.unwind, "empty", USER_LO, USER_HI, &spaces[1], NULL) ==
            0);
    uint64_t text_lo = symbol_addr(syms, "main"), text_hi = symbol_addr(syms, "raise") + 0x10000;
    unsigned seed = 12345, bounded_reads = 0;
    uint8_t *stack = malloc(4096);
    for (int iter = 0; iter < 400; iter++) {
        for (int i = 0; i < 4096; i++)
            stack[i] = (uint8_t)rand_r(&seed);
        /* sprinkle plausible return addresses and stack pointers into the noise */
        for (int i = 0; i < 32; i++) {
            uint64_t v = (rand_r(&seed) & 1)
                             ? text_lo + (uint64_t)rand_r(&seed) % (text_hi - text_lo)
                             : c->stack_addr + (uint64_t)rand_r(&seed) % 16384;
            memcpy(stack + 8 * (rand_r(&seed) % 512), &v, 8);
        }
        struct unw_regs regs;
        for (int r = 0; r < UNW_NREGS; r++)
            regs.r[r] = c->stack_addr + (uint64_t)rand_r(&seed) % 16384;
        regs.r[UNW_RSP] = c->stack_addr;
        regs.r[UNW_RIP] = text_lo + (uint64_t)rand_r(&seed) % (text_hi - text_lo);
        struct fake_guest g = {.c = c};
        struct unw_memory mem = {.read = fake_guest_read,
                                 .ctx = &g,
                                 .snapshot_addr = c->stack_addr,
                                 .snapshot = stack,
                                 .snapshot_len = 4096,
                                 .stack_lo = iter % 2 ? c->stack_addr : 0,
                                 .stack_hi = iter % 2 ? c->stack_addr + 16384 : 0};
        struct unw_frame frames[32];
        struct unw_result res;
        walk(spaces[iter % 4 < 2 ? 0 : 1], &regs, &mem, 32, frames, &res);
        CHECK(res.stop < UNW_STOP_COUNT);
        CHECK(g.reads <= 32);
        bounded_reads += mem.stack_hi ? g.reads : 0;
        CHECK(g.reads == 0 || !mem.stack_hi ||
              (g.lowest >= mem.stack_lo && g.highest <= mem.stack_hi));
    }
    CHECK_MSG(bounded_reads > 0, "the bounded walks never fetched memory");
    free(stack);
    unw_space_free(spaces[0]);
    unw_space_free(spaces[1]);
}

static void test_misc(void)
{
    unw_space_free(NULL);
    unw_space *s = NULL;
    struct qp_error err = {0};
    CHECK(unw_space_new(prof_arch_x86_64.unwind, "bad", 10, 5, &s, &err) == -EINVAL && s == NULL);
    REQUIRE(unw_space_new(prof_arch_x86_64.unwind, "k", 0xffff800000000000ull, UINT64_MAX, &s,
                          &err) == 0);
    CHECK(unw_space_add_elf(s, "/nonexistent/vmlinux", 0, &err) < 0);
    CHECK(strstr(err.msg, "/nonexistent/vmlinux") != NULL);
    unw_space_free(s);
    for (int i = 0; i < UNW_STOP_COUNT; i++)
        CHECK(unw_stop_str(i)[0] != '\0');
    CHECK(strcmp(unw_stop_str(UNW_STOP_COUNT), "unknown stop reason") == 0);
}

/* Tests that reuse one capture of the frame-pointer-less fixture. */
static void test_on_capture(void)
{
    struct capture c;
    REQUIRE(capture_fixture(FIXTURE_NOFP, "chain", 0, &c) == 0);
    Dwfl *syms = symbolizer_open(FIXTURE_NOFP);
    unw_space *s = space_for(FIXTURE_NOFP, USER_LO, USER_HI);
    struct unw_frame frames[MAX_FRAMES];
    struct unw_result ref;
    struct unw_memory mem = snapshot_of(&c);
    walk(s, &c.regs, &mem, MAX_FRAMES, frames, &ref);
    CHECK_INT(ref.stop, UNW_STOP_OUTERMOST);
    CHECK(ref.n_frames >= 16);
    test_memory_source(&c, s, &ref);
    test_depth_and_bounds(&c, s);
    test_bad_pc(s, &c);
    c.n_eu = 0;
    test_eh_frame_from_memory(FIXTURE_NOFP, &c, &ref);
    test_garbage(FIXTURE_NOFP, &c, syms);
    test_dump_cfi(FIXTURE_NOFP, FIXTURE_NOCFI, syms);
    test_broken_fp_chain(FIXTURE_NOCFI, &c);
    unw_space_free(s);
    dwfl_end(syms);
    capture_release(&c);
}

static void test_left_space_with_eu(void)
{
    struct capture c;
    REQUIRE(capture_fixture(FIXTURE_FP, "chain", 1, &c) == 0);
    Dwfl *syms = symbolizer_open(FIXTURE_FP);
    unw_space *s = space_for(FIXTURE_FP, USER_LO, USER_HI);
    struct unw_frame frames[MAX_FRAMES];
    struct unw_result ref;
    struct unw_memory mem = snapshot_of(&c);
    walk(s, &c.regs, &mem, MAX_FRAMES, frames, &ref);
    test_left_space(FIXTURE_FP, &c, syms, &ref);
    unw_space_free(s);
    dwfl_end(syms);
    capture_release(&c);
}

static int preflight(void)
{
    struct capture c;
    int rc = capture_fixture(FIXTURE_FP, "chain", 1, &c);
    capture_release(&c);
    if (rc == -EPERM || rc == -EACCES)
        fprintf(stderr, "SKIP: ptrace is not permitted here\n");
    else if (rc == -ENOENT)
        fprintf(stderr, "SKIP: eu-stack (elfutils) is not installed\n");
    else if (rc < 0)
        fprintf(stderr, "capturing the fixture failed: %d\n", rc);
    return rc;
}

int main(void)
{
    int rc = preflight();
    if (rc == -EPERM || rc == -EACCES || rc == -ENOENT)
        return 77;
    REQUIRE(rc == 0);
    test_misc();
    test_eh_frame_other_machine();
    const char *modes[] = {"chain", "signal"};
    for (int m = 0; m < 2; m++) {
        test_golden(FIXTURE_FP, modes[m], true);
        test_golden(FIXTURE_NOFP, modes[m], true);
        test_golden(FIXTURE_NOCFI, modes[m], false);
    }
    test_on_capture();
    test_left_space_with_eu();
    return harness_result();
}
