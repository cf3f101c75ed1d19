/* The ORC unwinder for x86_64 Linux kernel stacks, over vmlinux's in-memory tables.
 *
 * .orc_unwind_ip is an int32 array, each entry relative to its own address; .orc_unwind is
 * the parallel array of 6-byte entries: sp_offset, bp_offset (int16), then 16 bits of flags,
 * sp_reg bits 0-3 and bp_reg 4-7 in every layout. Then:
 *   4.14 to 6.2: type bits 8-9 (CALL 0, REGS 1, REGS_PARTIAL 2), end bit 10;
 *   6.3 on: type bits 8-10 (UNDEFINED 0, END_OF_STACK 1, CALL 2, REGS 3, REGS_PARTIAL 4),
 *     signal bit 11 (the next ip is an interrupted instruction, taken as is);
 *   7.x: the same, with the registers renumbered (SP 5 -> 3, DI 3 -> 5, PREV_SP 1 -> 8,
 *     BP_INDIRECT 8 -> 10, AX new as 1).
 * Nothing in memory names the layout (.orc_header's hash only identifies a header file), so the
 * table's own contents decide: a call frame is by far the most common entry and its CFA is
 * nearly always sp-based, so the most common type value says where CALL is and the most common
 * sp register among call frames says where SP is (lx__orc_layout_of).
 * An entry covers the addresses from its ip up to the next one's.
 *
 * Per frame: the entry for ip (ip - 1 for a return address) names how to find the caller's
 * stack pointer (the CFA) from a register, then where the return address is (CALL: at CFA - 8;
 * REGS: a full struct pt_regs at the CFA; REGS_PARTIAL: an iret frame, pt_regs' last five
 * words, at the CFA), and the caller's frame pointer. A pc in a loaded module's text is looked
 * up in that module's own table (lx_module.c), which the kernel sorted when it loaded the
 * module. A pt_regs whose cs is a user selector is
 * the entry from user mode: the walk ends there with the user registers. */
#include "lx_internal.h"

#include <errno.h>
#include <string.h>

enum {
    ORC_REG_UNDEFINED = 0,
    ORC_REG_PREV_SP = 1,
    ORC_REG_DX = 2,
    ORC_REG_DI = 3,
    ORC_REG_BP = 4,
    ORC_REG_SP = 5,
    ORC_REG_R10 = 6,
    ORC_REG_R13 = 7,
    ORC_REG_BP_INDIRECT = 8,
    ORC_REG_SP_INDIRECT = 9,
    ORC_REG_AX = 10,   /* only in the 7.x numbering; no unwind here uses it */
    ORC_REG_NONE = 15, /* a number no layout defines */
};
enum { ORC_TYPE_CALL = 0, ORC_TYPE_REGS = 1, ORC_TYPE_REGS_PARTIAL = 2 };
/* 6.3+'s type values */
enum { NEW_UNDEFINED = 0, NEW_END_OF_STACK = 1, NEW_CALL = 2, NEW_REGS = 3, NEW_REGS_PARTIAL = 4 };
/* 7.x's register numbers to the 4.14 ones used internally */
static const uint8_t regs_7x[16] = {
    ORC_REG_UNDEFINED, ORC_REG_AX,          ORC_REG_DX,          ORC_REG_SP,
    ORC_REG_BP,        ORC_REG_DI,          ORC_REG_R10,         ORC_REG_R13,
    ORC_REG_PREV_SP,   ORC_REG_SP_INDIRECT, ORC_REG_BP_INDIRECT, ORC_REG_NONE,
    ORC_REG_NONE,      ORC_REG_NONE,        ORC_REG_NONE,        ORC_REG_NONE};

#define IRET_FRAME_OFFSET 128 /* offsetof(struct pt_regs, ip) */
#define IRET_FRAME_SIZE   40  /* ip, cs, flags, sp, ss */
#define MAX_ORC_ENTRIES   (4u << 20)
/* Stack switches (IRQ stack, entry trampolines) are the only frames where sp may go down. */
#define MAX_STACK_SWITCHES 8

static const char *const end_text[] = {
#define X(code, text) [code] = text,
    LX_UNWIND_ENDS(X)
#undef X
};

const char *lx_unwind_end_str(enum lx_unwind_end e)
{
    return (unsigned)e < sizeof end_text / sizeof end_text[0] ? end_text[e] : "?";
}

bool lx_unwind_end_is_complete(enum lx_unwind_end e)
{
    return e == LX_END_USER || e == LX_END_TASK_START;
}

static int find_tables(lx_kernel *k, uint64_t *ip_start, uint64_t *entries, size_t *n,
                       struct qp_error *err)
{
    uint64_t ip_stop;
    if (lx_kernel_symbol_addr(k, "__start_orc_unwind_ip", ip_start) ||
        lx_kernel_symbol_addr(k, "__stop_orc_unwind_ip", &ip_stop) ||
        lx_kernel_symbol_addr(k, "__start_orc_unwind", entries))
        return qp_error_set(err, -ENOENT,
                            "kallsyms has no __start_orc_unwind_ip/__start_orc_unwind: a kernel "
                            "without CONFIG_UNWINDER_ORC or CONFIG_KALLSYMS_ALL");
    if (ip_stop <= *ip_start || (ip_stop - *ip_start) % 4 ||
        (ip_stop - *ip_start) / 4 > MAX_ORC_ENTRIES)
        return qp_error_set(err, -EPROTO, "ORC ip table bounds 0x%llx..0x%llx are implausible",
                            (unsigned long long)*ip_start, (unsigned long long)ip_stop);
    *n = (ip_stop - *ip_start) / 4;
    if (lx_kernel_symbol_addr(k, "_text", &k->text_start) ||
        lx_kernel_symbol_addr(k, "_etext", &k->text_end))
        return qp_error_set(err, -ENOENT, "kallsyms has no _text/_etext");
    /* Boot stacks keep return addresses into .init.text (start_kernel), freed but still
     * described by the table. */
    if (lx_kernel_symbol_addr(k, "_sinittext", &k->init_start) ||
        lx_kernel_symbol_addr(k, "_einittext", &k->init_end))
        k->init_start = k->init_end = 0;
    return 0;
}

static uint16_t flags_of(const uint8_t *e)
{
    return (uint16_t)(e[4] | e[5] << 8);
}

static struct lx_orc decode_new_type(struct lx_orc o, unsigned type)
{
    switch (type) {
    case NEW_CALL:
        o.type = ORC_TYPE_CALL;
        return o;
    case NEW_REGS:
        o.type = ORC_TYPE_REGS;
        return o;
    case NEW_REGS_PARTIAL:
        o.type = ORC_TYPE_REGS_PARTIAL;
        return o;
    default: /* UNDEFINED, END_OF_STACK and values no kernel uses: no unwinding past here */
        o.sp_reg = ORC_REG_UNDEFINED;
        o.end = type == NEW_END_OF_STACK;
        return o;
    }
}

struct lx_orc lx__orc_decode(const uint8_t *e, enum lx_orc_layout layout)
{
    int16_t sp, bp;
    uint16_t flags = flags_of(e);
    memcpy(&sp, e, 2);
    memcpy(&bp, e + 2, 2);
    struct lx_orc o = {
        .sp_offset = sp, .bp_offset = bp, .sp_reg = flags & 0xf, .bp_reg = (flags >> 4) & 0xf};
    switch (layout) {
    case LX_ORC_END_BIT:
        o.type = (flags >> 8) & 3;
        o.end = (flags >> 10) & 1;
        o.signal = o.type != ORC_TYPE_CALL;
        if (o.type > ORC_TYPE_REGS_PARTIAL) { /* no such type: no unwinding past here */
            o.type = ORC_TYPE_CALL;
            o.sp_reg = ORC_REG_UNDEFINED;
        }
        return o;
    case LX_ORC_SIGNAL_REGS:
        o.sp_reg = regs_7x[o.sp_reg];
        o.bp_reg = regs_7x[o.bp_reg];
        /* fall through */
    case LX_ORC_SIGNAL_BIT:
        o.signal = (flags >> 11) & 1;
        return decode_new_type(o, (flags >> 8) & 7);
    default:
        o.sp_reg = ORC_REG_UNDEFINED;
        return o;
    }
}

enum lx_orc_layout lx__orc_layout_of(const uint8_t *raw, size_t n)
{
    size_t type3[8] = {0}, bit11 = 0, high = 0, sp5 = 0, sp3 = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t f = flags_of(raw + 6 * i);
        type3[(f >> 8) & 7]++;
        bit11 += (f >> 11) & 1;
        high += (f >> 12) != 0;
        /* sp registers of would-be 6.3+ call frames */
        sp5 += ((f >> 8) & 7) == NEW_CALL && (f & 0xf) == 5;
        sp3 += ((f >> 8) & 7) == NEW_CALL && (f & 0xf) == 3;
    }
    if (high || n == 0)
        return LX_ORC_UNKNOWN;
    /* 4.14 to 6.2: CALL is 0 (bit 10, the end bit, set on a few: value 4) and bit 11 is unused;
     * 3 would be a type 3 that layout does not have. */
    if (type3[0] > type3[2] && !bit11 && !type3[3] && !type3[7] && !type3[5] && !type3[6])
        return LX_ORC_END_BIT;
    /* 6.3 on: CALL is 2, values 5 to 7 unused. */
    if (type3[2] > type3[0] && !type3[5] && !type3[6] && !type3[7]) {
        if (sp5 > sp3)
            return LX_ORC_SIGNAL_BIT;
        if (sp3 > sp5)
            return LX_ORC_SIGNAL_REGS;
    }
    return LX_ORC_UNKNOWN;
}

static const char *layout_name(enum lx_orc_layout l)
{
    switch (l) {
    case LX_ORC_END_BIT:
        return "4.14-6.2 (end bit)";
    case LX_ORC_SIGNAL_BIT:
        return "6.3+ (signal bit)";
    case LX_ORC_SIGNAL_REGS:
        return "7.x (signal bit, registers renumbered)";
    default:
        return "unknown";
    }
}

/* The table is sorted at build time since 5.6; an unsorted one is refused rather than sorted,
 * since that would mean a layout this code does not know. */
static int copy_tables(lx_kernel *k, uint64_t ip_start, uint64_t entries, size_t n,
                       struct qp_error *err)
{
    int32_t *rel = g_new(int32_t, n);
    uint8_t *raw = g_new(uint8_t, n * 6);
    int rc = 0;
    if (lx_kernel_read(k, ip_start, rel, n * 4) || lx_kernel_read(k, entries, raw, n * 6)) {
        rc = qp_error_set(err, -EFAULT, "ORC tables unreadable");
        goto out;
    }
    k->orc_layout = lx__orc_layout_of(raw, n);
    if (k->orc_layout == LX_ORC_UNKNOWN) {
        rc = qp_error_set(err, -ENOTSUP,
                          "struct orc_entry: its %zu entries fit no ORC layout qprof knows "
                          "(4.14-6.2, 6.3+, 7.x)",
                          n);
        goto out;
    }
    k->orc_ip = g_new(uint64_t, n);
    k->orc = g_new(struct lx_orc, n);
    for (size_t i = 0; i < n; i++) {
        k->orc_ip[i] = ip_start + 4 * i + (uint64_t)(int64_t)rel[i];
        k->orc[i] = lx__orc_decode(raw + 6 * i, k->orc_layout);
        if (i && k->orc_ip[i] < k->orc_ip[i - 1]) {
            rc = qp_error_set(err, -EPROTO, "ORC ip table is not sorted at entry %zu", i);
            goto out;
        }
    }
    k->n_orc = n;
out:
    if (rc) {
        g_free(k->orc_ip);
        g_free(k->orc);
        k->orc_ip = NULL;
        k->orc = NULL;
        k->orc_layout = LX_ORC_UNKNOWN;
    }
    g_free(rel);
    g_free(raw);
    return rc;
}

int lx_kernel_load_orc(lx_kernel *k, struct qp_error *err)
{
    if (k->n_orc)
        return 0;
    uint64_t ip_start = 0, entries = 0;
    size_t n = 0;
    int rc = lx_kernel_load_kallsyms(k, err);
    if (!rc)
        rc = find_tables(k, &ip_start, &entries, &n, err);
    if (!rc)
        rc = copy_tables(k, ip_start, entries, n, err);
    return rc ? qp_error_prefix(err, "Linux %s", k->vi.osrelease) : 0;
}

int lx_kernel_check_orc_bits(lx_kernel *k, bool signal_bit, struct qp_error *err)
{
    if (!k->n_orc || (k->orc_layout != LX_ORC_END_BIT) == signal_bit)
        return 0;
    const char *layout = layout_name(k->orc_layout);
    g_free(k->orc_ip);
    g_free(k->orc);
    k->orc_ip = NULL;
    k->orc = NULL;
    k->n_orc = 0;
    k->orc_layout = LX_ORC_UNKNOWN;
    return qp_error_set(err, -EPROTO,
                        "Linux %s: BTF's struct orc_entry has the %s bit but the ORC entries "
                        "read as the %s layout: kernel stacks are not unwound",
                        k->vi.osrelease, signal_bit ? "signal" : "end", layout);
}

const char *lx_kernel_orc_layout(const lx_kernel *k)
{
    return layout_name(k->orc_layout);
}

size_t lx_kernel_orc_entries(const lx_kernel *k)
{
    return k->n_orc;
}

size_t lx__orc_search(const uint64_t *ips, size_t n, uint64_t ip)
{
    if (!n || ip < ips[0])
        return SIZE_MAX;
    size_t lo = 0, hi = n; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ips[mid] <= ip)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The entry of the rightmost ip <= ip, in vmlinux's table or, through k->more_orc, in the
 * module whose text holds ip; on equal ips the last one wins (section terminators come first).
 * false when none. */
static bool orc_find(const lx_kernel *k, uint64_t ip, struct lx_orc *out)
{
    bool in_text = ip >= k->text_start && ip < k->text_end;
    bool in_init = ip >= k->init_start && ip < k->init_end;
    if (in_text || in_init) {
        size_t i = lx__orc_search(k->orc_ip, k->n_orc, ip);
        if (i == SIZE_MAX)
            return false;
        *out = k->orc[i];
        return true;
    }
    const uint8_t *raw = k->more_orc ? k->more_orc(k->more_orc_ctx, ip) : NULL;
    if (!raw)
        return false;
    *out = lx__orc_decode(raw, k->orc_layout);
    return true;
}

/* The walk's state: the registers known for the current frame. */
struct state {
    uint64_t ip, sp, bp;
    bool signal;            /* ip is the interrupted instruction, not a return address */
    struct lx_pt_regs regs; /* the last register set seen: the live one, or a pt_regs */
    bool regs_full;         /* regs holds every register (the live set or a full pt_regs) */
    bool regs_valid;        /* regs_full, or, after an iret frame, the full set before it */
    /* Where the stack's words come from: the sample's own copy (lx_unwind_from), else k. */
    lx_stack_read_fn read;
    void *read_ctx;
};

/* The walk's reads of stack memory (frames, saved registers): from the sample's copy when the
 * caller gave one, which a target that captured the stack at the sample's instant must (the
 * guest has run on since, and its RAM holds later frames). */
static bool read_stack(lx_kernel *k, const struct state *s, uint64_t addr, void *buf, size_t len)
{
    if (s->read)
        return s->read(s->read_ctx, addr, buf, len) == 0;
    return lx_kernel_read(k, addr, buf, len) == 0;
}

static bool read_word(lx_kernel *k, const struct state *s, uint64_t addr, uint64_t *val)
{
    return read_stack(k, s, addr, val, 8);
}

static bool reg_of(const struct state *s, int reg, uint64_t *val)
{
    if (!s->regs_valid)
        return false;
    switch (reg) {
    case ORC_REG_R10:
        *val = s->regs.r10;
        return true;
    case ORC_REG_R13:
        *val = s->regs.r13;
        return true;
    case ORC_REG_DI:
        *val = s->regs.di;
        return true;
    case ORC_REG_DX:
        *val = s->regs.dx;
        return true;
    default:
        return false;
    }
}

/* The caller's stack pointer; *switched when it comes from somewhere other than sp + offset. */
static bool find_cfa(lx_kernel *k, const struct state *s, const struct lx_orc *o, uint64_t *cfa,
                     bool *switched)
{
    *switched = o->sp_reg != ORC_REG_SP;
    switch (o->sp_reg) {
    case ORC_REG_SP:
        *cfa = s->sp + o->sp_offset;
        return true;
    case ORC_REG_BP:
        *cfa = s->bp + o->sp_offset;
        return true;
    case ORC_REG_SP_INDIRECT:
        if (!read_word(k, s, s->sp, cfa))
            return false;
        *cfa += o->sp_offset;
        return true;
    case ORC_REG_BP_INDIRECT:
        return read_word(k, s, s->bp + o->sp_offset, cfa);
    default:
        if (!reg_of(s, o->sp_reg, cfa))
            return false;
        *cfa += o->sp_offset;
        return true;
    }
}

enum step { STEP_OK, STEP_END, STEP_FAIL };

/* Steps over a pt_regs (full) or an iret frame (partial) at addr. */
static enum step step_regs(lx_kernel *k, struct state *s, uint64_t addr, bool full,
                           struct lx_unwind_result *out)
{
    struct lx_pt_regs r;
    if (full) {
        if (!read_stack(k, s, addr, &r, sizeof r))
            return STEP_FAIL;
    } else {
        r = s->regs;
        if (!read_stack(k, s, addr + IRET_FRAME_OFFSET, &r.ip, IRET_FRAME_SIZE))
            return STEP_FAIL;
    }
    if ((r.cs & 3) == 3) {
        out->have_user_regs = true;
        out->user_regs_partial = !full;
        out->user_regs = r;
        return STEP_END;
    }
    s->ip = r.ip, s->sp = r.sp;
    s->signal = true;
    if (full) {
        s->regs = r;
        s->regs_full = s->regs_valid = true;
    } else {
        s->regs.ip = r.ip, s->regs.cs = r.cs, s->regs.flags = r.flags;
        s->regs.sp = r.sp, s->regs.ss = r.ss;
        /* The other registers are those of the previous set only if it was a full one. */
        s->regs_valid = s->regs_full;
        s->regs_full = false;
    }
    return STEP_OK;
}

static enum step step_bp(lx_kernel *k, struct state *s, const struct lx_orc *o, uint64_t cfa,
                         uint64_t old_bp)
{
    switch (o->bp_reg) {
    case ORC_REG_UNDEFINED:
        if (s->regs_valid && o->type != ORC_TYPE_CALL)
            s->bp = s->regs.bp;
        return STEP_OK;
    case ORC_REG_PREV_SP:
        return read_word(k, s, cfa + o->bp_offset, &s->bp) ? STEP_OK : STEP_FAIL;
    case ORC_REG_BP:
        return read_word(k, s, old_bp + o->bp_offset, &s->bp) ? STEP_OK : STEP_FAIL;
    default:
        return STEP_FAIL;
    }
}

/* One frame: from s (the frame of s->ip) to its caller. */
static enum step step(lx_kernel *k, struct state *s, struct lx_unwind_result *out, int *switches)
{
    struct lx_orc entry;
    const struct lx_orc *o = &entry;
    if (!orc_find(k, s->signal ? s->ip : s->ip - 1, &entry)) {
        out->end = LX_END_NO_ORC;
        return STEP_END;
    }
    if (o->sp_reg == ORC_REG_UNDEFINED) {
        out->end = o->end ? LX_END_TASK_START : LX_END_BAD_ORC;
        return STEP_END;
    }
    uint64_t cfa, old_sp = s->sp, old_bp = s->bp;
    bool switched;
    if (!find_cfa(k, s, o, &cfa, &switched)) {
        out->end = LX_END_UNREADABLE;
        return STEP_END;
    }
    enum step r = STEP_OK;
    if (o->type == ORC_TYPE_CALL) {
        if (!read_word(k, s, cfa - 8, &s->ip))
            r = STEP_FAIL;
        s->sp = cfa;
        s->signal = false;
        s->regs_full = s->regs_valid = false; /* no register set is known past a call */
    } else {
        bool full = o->type == ORC_TYPE_REGS;
        r = step_regs(k, s, full ? cfa : cfa - IRET_FRAME_OFFSET, full, out);
        if (r == STEP_END) {
            out->end = LX_END_USER;
            return STEP_END;
        }
        switched = true;
    }
    if (r == STEP_OK)
        r = step_bp(k, s, o, cfa, old_bp);
    /* How the next entry is looked up: 4.14-6.2 by the frame's type, 6.3+ by its signal bit. */
    s->signal = o->signal;
    if (r == STEP_FAIL) {
        out->end = LX_END_UNREADABLE;
        return STEP_END;
    }
    if (s->sp <= old_sp && (!switched || ++*switches > MAX_STACK_SWITCHES)) {
        out->end = LX_END_LOOP;
        return STEP_END;
    }
    return STEP_OK;
}

void lx_unwind_from(lx_kernel *k, const struct lx_pt_regs *live, lx_stack_read_fn read,
                    void *read_ctx, struct lx_frame *frames, int max, struct lx_unwind_result *out)
{
    *out = (struct lx_unwind_result){.end = LX_END_DEPTH};
    struct state s = {.ip = live->ip,
                      .sp = live->sp,
                      .bp = live->bp,
                      .signal = true,
                      .regs = *live,
                      .regs_full = true,
                      .regs_valid = true,
                      .read = read,
                      .read_ctx = read_ctx};
    int switches = 0;
    while (out->n_frames < max) {
        frames[out->n_frames++] = (struct lx_frame){s.ip, s.signal};
        if (step(k, &s, out, &switches) == STEP_END)
            return;
    }
}

void lx_unwind(lx_kernel *k, const struct lx_pt_regs *live, struct lx_frame *frames, int max,
               struct lx_unwind_result *out)
{
    lx_unwind_from(k, live, NULL, NULL, frames, max, out);
}
