/* unw_cfi_check: one linear pass over .eh_frame bytes from the guest before libdw sees them.
 *
 * libdw trusts its input more than a guest deserves: a register number sizes a table it
 * allocates (DW_CFA_undefined 0x0ffffffe costs 2 GB and tens of seconds per walk),
 * DW_CFA_advance_loc1 reads its operand without a bounds check, an expression with an operation
 * its evaluator lacks, a backward branch or an overlong LEB128 leaks the evaluation stack on
 * every walk (libdwfl 0.188, expr_eval), and an FDE's CIE pointer may land in the middle of an
 * entry. So we accept only what x86_64 toolchains emit and libdw handles: the checks are
 * stricter than DWARF, never looser. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "unw_internal.h"

/* DW_CFA_* opcodes (DWARF 5 section 6.4.2 and GNU extensions). */
enum {
    CFA_nop = 0x00,
    CFA_set_loc = 0x01,
    CFA_advance_loc1 = 0x02,
    CFA_advance_loc2 = 0x03,
    CFA_advance_loc4 = 0x04,
    CFA_offset_extended = 0x05,
    CFA_restore_extended = 0x06,
    CFA_undefined = 0x07,
    CFA_same_value = 0x08,
    CFA_register = 0x09,
    CFA_remember_state = 0x0a,
    CFA_restore_state = 0x0b,
    CFA_def_cfa = 0x0c,
    CFA_def_cfa_register = 0x0d,
    CFA_def_cfa_offset = 0x0e,
    CFA_def_cfa_expression = 0x0f,
    CFA_expression = 0x10,
    CFA_offset_extended_sf = 0x11,
    CFA_def_cfa_sf = 0x12,
    CFA_def_cfa_offset_sf = 0x13,
    CFA_val_offset = 0x14,
    CFA_val_offset_sf = 0x15,
    CFA_val_expression = 0x16,
    CFA_GNU_args_size = 0x2e,
    CFA_GNU_negative_offset_extended = 0x2f,
    CFA_advance_loc = 0x40, /* high two bits; low six are the operand */
    CFA_offset = 0x80,
    CFA_restore = 0xc0,
};

/* DW_EH_PE_* pointer encodings. */
enum {
    PE_absptr = 0x00,
    PE_udata2 = 0x02,
    PE_udata4 = 0x03,
    PE_udata8 = 0x04,
    PE_sdata2 = 0x0a,
    PE_sdata4 = 0x0b,
    PE_sdata8 = 0x0c,
    PE_pcrel = 0x10,
    PE_datarel = 0x30,
    PE_indirect = 0x80,
    PE_omit = 0xff,
};

struct cie_info {
    size_t offset;   /* where the entry starts */
    uint8_t fde_enc; /* 'R', DW_EH_PE_absptr without it */
    bool sized;      /* 'z': FDEs carry an augmentation length */
};

struct cfi_check {
    const uint8_t *bytes;
    size_t len;
    GArray *cies; /* struct cie_info, in offset order (a CIE precedes its FDEs) */
    size_t bad_off;
    char why[160];
};

/* A cursor over [pos, end) of the bytes. */
struct cur {
    const uint8_t *bytes;
    size_t pos, end;
};

static bool fail(struct cfi_check *ck, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(struct cfi_check *ck, size_t off, const char *fmt, ...)
{
    ck->bad_off = off;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ck->why, sizeof ck->why, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- Reading ----------------------------------------------------------------------------- */

static bool rd_fixed(struct cur *c, size_t n, uint64_t *v)
{
    if (c->end - c->pos < n)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x |= (uint64_t)c->bytes[c->pos + i] << (8 * i);
    c->pos += n;
    *v = x;
    return true;
}

static bool rd_u8(struct cur *c, uint8_t *v)
{
    uint64_t x;
    if (!rd_fixed(c, 1, &x))
        return false;
    *v = (uint8_t)x;
    return true;
}

/* At most 10 bytes, the last holding only bit 63 (or the sign): libdw gives up after 10 bytes
 * and would read the rest as the next instruction, which must never differ from what we saw. */
static bool rd_leb(struct cur *c, bool is_signed, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 10 && c->pos < c->end; i++) {
        uint8_t b = c->bytes[c->pos++];
        if (i == 9 && (is_signed ? b != 0 && b != 0x7f : (b & 0x7e) != 0))
            return false;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (is_signed && i < 9 && (b & 0x40))
                x |= ~(uint64_t)0 << (7 * (i + 1));
            *v = x;
            return true;
        }
    }
    return false;
}

static bool rd_uleb(struct cur *c, uint64_t *v)
{
    return rd_leb(c, false, v);
}

static bool rd_sleb(struct cur *c)
{
    uint64_t ignored;
    return rd_leb(c, true, &ignored);
}

/* ---- Pointer encodings ------------------------------------------------------------------- */

/* Size of a fixed-size value format; 0 for LEB128 and unknown formats, which we refuse (libdw
 * sizes LEB128 pointers in augmentations wrongly). */
static size_t enc_size(uint8_t enc)
{
    switch (enc & 0x0f) {
    case PE_absptr:
    case PE_udata8:
    case PE_sdata8:
        return 8;
    case PE_udata4:
    case PE_sdata4:
        return 4;
    case PE_udata2:
    case PE_sdata2:
        return 2;
    default:
        return 0;
    }
}

/* FDE addresses: absolute or pc-relative, never indirect. */
static bool fde_enc_ok(uint8_t enc)
{
    uint8_t app = enc & 0x70;
    return enc_size(enc) != 0 && (enc & PE_indirect) == 0 && (app == PE_absptr || app == PE_pcrel);
}

/* Personality and LSDA pointers may also be data-relative and indirect (gcc's 0x9b). */
static bool data_enc_ok(uint8_t enc)
{
    uint8_t app = enc & 0x70;
    return enc_size(enc) != 0 && (app == PE_absptr || app == PE_pcrel || app == PE_datarel);
}

/* ---- DWARF expressions ------------------------------------------------------------------- */

/* Operand kinds of the operations libdwfl's evaluator implements; anything else is refused. */
enum opnd { OP_NONE = 1, OP_1, OP_2, OP_4, OP_8, OP_ULEB, OP_SLEB, OP_REGX, OP_BREGX, OP_BRANCH };

static enum opnd expr_operand(uint8_t op)
{
    if (op >= 0x30 && op <= 0x6f) /* lit0..31, reg0..31 */
        return OP_NONE;
    if (op >= 0x70 && op <= 0x8f) /* breg0..31 */
        return OP_SLEB;
    switch (op) {
    case 0x03: /* addr */
    case 0x0e: /* const8u */
    case 0x0f: /* const8s */
        return OP_8;
    case 0x08: /* const1u */
    case 0x09: /* const1s */
    case 0x15: /* pick */
    case 0x94: /* deref_size */
        return OP_1;
    case 0x0a: /* const2u */
    case 0x0b: /* const2s */
        return OP_2;
    case 0x0c: /* const4u */
    case 0x0d: /* const4s */
        return OP_4;
    case 0x10: /* constu */
    case 0x23: /* plus_uconst */
        return OP_ULEB;
    case 0x11: /* consts */
        return OP_SLEB;
    case 0x90: /* regx */
        return OP_REGX;
    case 0x92: /* bregx */
        return OP_BREGX;
    case 0x28: /* bra */
    case 0x2f: /* skip */
        return OP_BRANCH;
    case 0x06: /* deref */
    case 0x12: /* dup */
    case 0x13: /* drop */
    case 0x14: /* over */
    case 0x16: /* swap */
    case 0x17: /* rot */
    case 0x19: /* abs */
    case 0x1a: /* and */
    case 0x1b: /* div */
    case 0x1c: /* minus */
    case 0x1d: /* mod */
    case 0x1e: /* mul */
    case 0x1f: /* neg */
    case 0x20: /* not */
    case 0x21: /* or */
    case 0x22: /* plus */
    case 0x24: /* shl */
    case 0x25: /* shr */
    case 0x26: /* shra */
    case 0x27: /* xor */
    case 0x29: /* eq */
    case 0x2a: /* ge */
    case 0x2b: /* gt */
    case 0x2c: /* le */
    case 0x2d: /* lt */
    case 0x2e: /* ne */
    case 0x96: /* nop */
        return OP_NONE;
    default:
        return 0;
    }
}

struct expr_scan {
    bool boundary[UNW_CFI_MAX_EXPR + 1]; /* an operation starts at this offset */
    uint16_t targets[UNW_CFI_MAX_EXPR / 3 + 1];
    size_t n_targets;
};

/* One operation's operands; a branch must go forward (so that evaluation cannot loop) to the
 * start of an operation or the end, checked once all starts are known. */
static bool expr_operands(struct cfi_check *ck, struct cur *c, struct expr_scan *scan,
                          size_t op_off, uint8_t op, size_t block_start)
{
    uint64_t v = 0;
    switch (expr_operand(op)) {
    case OP_NONE:
        return true;
    case OP_1:
        return rd_fixed(c, 1, &v) && (op != 0x94 || (v >= 1 && v <= 8) ||
                                      fail(ck, op_off, "DW_OP_deref_size %u", (unsigned)v));
    case OP_2:
        return rd_fixed(c, 2, &v);
    case OP_4:
        return rd_fixed(c, 4, &v);
    case OP_8:
        return rd_fixed(c, 8, &v);
    case OP_ULEB:
        return rd_uleb(c, &v);
    case OP_SLEB:
        return rd_sleb(c);
    case OP_REGX:
    case OP_BREGX:
        if (!rd_uleb(c, &v))
            return false;
        if (v > UNW_CFI_MAX_REGNO)
            return fail(ck, op_off, "register %llu in an expression", (unsigned long long)v);
        return expr_operand(op) == OP_REGX || rd_sleb(c);
    case OP_BRANCH:
        if (!rd_fixed(c, 2, &v))
            return false;
        if (v & 0x8000)
            return fail(ck, op_off, "backward branch in an expression");
        scan->targets[scan->n_targets++] = (uint16_t)(c->pos - block_start + v);
        return true;
    }
    return fail(ck, op_off, "DWARF operation 0x%02x is not supported in CFI", op);
}

/* A DW_FORM_block expression [start, end) of a CFA rule. */
static bool check_expr(struct cfi_check *ck, size_t start, size_t end)
{
    size_t n = end - start;
    if (n == 0)
        return fail(ck, start, "empty expression");
    if (n > UNW_CFI_MAX_EXPR)
        return fail(ck, start, "expression of %zu bytes (at most %u)", n, UNW_CFI_MAX_EXPR);
    struct expr_scan scan;
    memset(scan.boundary, 0, n + 1);
    scan.n_targets = 0;
    struct cur c = {ck->bytes, start, end};
    while (c.pos < end) {
        size_t op_off = c.pos;
        scan.boundary[op_off - start] = true;
        uint8_t op = ck->bytes[c.pos++];
        if (!expr_operands(ck, &c, &scan, op_off, op, start))
            return ck->why[0] ? false
                              : fail(ck, op_off, "operands of 0x%02x run past the block", op);
    }
    scan.boundary[n] = true;
    for (size_t i = 0; i < scan.n_targets; i++)
        if (scan.targets[i] > n || !scan.boundary[scan.targets[i]])
            return fail(ck, start, "branch to offset %u of a %zu-byte expression", scan.targets[i],
                        n);
    return true;
}

/* ---- CFA programs ------------------------------------------------------------------------ */

struct program {
    bool in_cie; /* CIE initial instructions: no rows, nothing to restore */
    uint8_t fde_enc;
    unsigned depth; /* DW_CFA_remember_state nesting */
};

static bool reg_ok(struct cfi_check *ck, size_t op_off, uint64_t reg)
{
    if (reg <= UNW_CFI_MAX_REGNO)
        return true;
    return fail(ck, op_off, "register %llu (x86_64 DWARF numbers end at %u)",
                (unsigned long long)reg, UNW_CFI_MAX_REGNO);
}

static bool rd_reg(struct cfi_check *ck, struct cur *c, size_t op_off)
{
    uint64_t reg;
    return rd_uleb(c, &reg) && reg_ok(ck, op_off, reg);
}

static bool rd_block(struct cfi_check *ck, struct cur *c)
{
    uint64_t len;
    if (!rd_uleb(c, &len))
        return false;
    if (len > c->end - c->pos)
        return false;
    size_t start = c->pos;
    c->pos += len;
    return check_expr(ck, start, c->pos);
}

/* Opcodes that move the location: none may appear in a CIE's initial instructions. */
static bool advance_operands(struct cfi_check *ck, struct cur *c, struct program *pr, size_t op_off,
                             uint8_t op)
{
    uint64_t v;
    if (pr->in_cie)
        return fail(ck, op_off, "DW_CFA 0x%02x moves the location in a CIE", op);
    switch (op) {
    case CFA_set_loc:
        return rd_fixed(c, enc_size(pr->fde_enc), &v);
    case CFA_advance_loc1:
        return rd_fixed(c, 1, &v);
    case CFA_advance_loc2:
        return rd_fixed(c, 2, &v);
    case CFA_advance_loc4:
        return rd_fixed(c, 4, &v);
    default: /* DW_CFA_advance_loc: operand in the opcode */
        return true;
    }
}

static bool state_operands(struct cfi_check *ck, struct program *pr, size_t op_off, uint8_t op)
{
    if (op == CFA_remember_state) {
        if (++pr->depth > UNW_CFI_MAX_STATE_DEPTH)
            return fail(ck, op_off, "DW_CFA_remember_state nested deeper than %u",
                        UNW_CFI_MAX_STATE_DEPTH);
        return true;
    }
    if (pr->depth == 0)
        return fail(ck, op_off, "DW_CFA_restore_state without DW_CFA_remember_state");
    pr->depth--;
    return true;
}

/* The operands of one extended (low-six-bits-zero) opcode. */
static bool extended_operands(struct cfi_check *ck, struct cur *c, struct program *pr,
                              size_t op_off, uint8_t op)
{
    uint64_t v;
    switch (op) {
    case CFA_nop:
        return true;
    case CFA_set_loc:
    case CFA_advance_loc1:
    case CFA_advance_loc2:
    case CFA_advance_loc4:
        return advance_operands(ck, c, pr, op_off, op);
    case CFA_offset_extended:
    case CFA_register:
    case CFA_def_cfa:
    case CFA_val_offset:
    case CFA_GNU_negative_offset_extended:
        return rd_reg(ck, c, op_off) && rd_uleb(c, &v) &&
               (op != CFA_register || reg_ok(ck, op_off, v));
    case CFA_offset_extended_sf:
    case CFA_def_cfa_sf:
    case CFA_val_offset_sf:
        return rd_reg(ck, c, op_off) && rd_sleb(c);
    case CFA_restore_extended:
        if (pr->in_cie)
            return fail(ck, op_off, "DW_CFA_restore_extended in a CIE");
        return rd_reg(ck, c, op_off);
    case CFA_undefined:
    case CFA_same_value:
    case CFA_def_cfa_register:
        return rd_reg(ck, c, op_off);
    case CFA_remember_state:
    case CFA_restore_state:
        return state_operands(ck, pr, op_off, op);
    case CFA_def_cfa_offset:
    case CFA_GNU_args_size:
        return rd_uleb(c, &v);
    case CFA_def_cfa_offset_sf:
        return rd_sleb(c);
    case CFA_def_cfa_expression:
        return rd_block(ck, c);
    case CFA_expression:
    case CFA_val_expression:
        return rd_reg(ck, c, op_off) && rd_block(ck, c);
    default:
        return fail(ck, op_off, "unknown DW_CFA opcode 0x%02x", op);
    }
}

static bool check_program(struct cfi_check *ck, size_t start, size_t end, struct program *pr)
{
    struct cur c = {ck->bytes, start, end};
    while (c.pos < end) {
        size_t op_off = c.pos;
        uint8_t op = ck->bytes[c.pos++];
        bool ok;
        switch (op & 0xc0) {
        case CFA_advance_loc:
            ok = advance_operands(ck, &c, pr, op_off, op);
            break;
        case CFA_offset:
            ok = reg_ok(ck, op_off, op & 0x3f) && rd_uleb(&c, &(uint64_t){0});
            break;
        case CFA_restore:
            ok = !pr->in_cie || fail(ck, op_off, "DW_CFA_restore in a CIE");
            break;
        default:
            ok = extended_operands(ck, &c, pr, op_off, op);
        }
        if (!ok)
            return ck->why[0]
                       ? false
                       : fail(ck, op_off, "operands of DW_CFA 0x%02x run past the entry", op);
    }
    return true;
}

/* ---- CIEs and FDEs ----------------------------------------------------------------------- */

/* "", "eh" (g++ 2) or 'z' followed by distinct letters among R, P, L, S. */
static bool augmentation_ok(const char *aug)
{
    if (aug[0] == '\0' || strcmp(aug, "eh") == 0)
        return true;
    if (aug[0] != 'z')
        return false;
    for (const char *a = aug + 1; *a; a++)
        if (!strchr("RPLS", *a) || strchr(a + 1, *a))
            return false;
    return true;
}

/* The 'z' augmentation data, which must be exactly what its letters describe. */
static bool check_aug_data(struct cfi_check *ck, struct cur *c, const char *aug,
                           struct cie_info *cie)
{
    uint64_t len, v;
    size_t at = c->pos;
    if (!rd_uleb(c, &len) || len > c->end - c->pos)
        return fail(ck, at, "augmentation data runs past the CIE");
    struct cur data = {c->bytes, c->pos, c->pos + len};
    c->pos += len;
    for (const char *a = aug + 1; *a; a++) {
        uint8_t enc;
        if (*a == 'S')
            continue;
        if (!rd_u8(&data, &enc))
            return fail(ck, at, "augmentation data shorter than \"%s\" needs", aug);
        if (*a == 'R' && !fde_enc_ok(enc))
            return fail(ck, at, "FDE pointer encoding 0x%02x", enc);
        if (*a == 'R')
            cie->fde_enc = enc;
        if (*a == 'L' && enc != PE_omit && !data_enc_ok(enc))
            return fail(ck, at, "LSDA pointer encoding 0x%02x", enc);
        if (*a == 'P' && (!data_enc_ok(enc) || !rd_fixed(&data, enc_size(enc), &v)))
            return fail(ck, at, "personality pointer (encoding 0x%02x)", enc);
    }
    return data.pos == data.end || fail(ck, at, "augmentation data longer than \"%s\" needs", aug);
}

/* From the version byte to the end of the CIE at entry_off. */
static bool check_cie(struct cfi_check *ck, size_t entry_off, struct cur *c)
{
    struct cie_info cie = {.offset = entry_off, .fde_enc = PE_absptr};
    uint8_t version = 0, u8; /* printed when the CIE ends before its version byte */
    uint64_t v;
    if (!rd_u8(c, &version) || (version != 1 && version != 3 && version != 4))
        return fail(ck, entry_off, "CIE version %u", version);
    const char *aug = (const char *)c->bytes + c->pos;
    const void *nul = memchr(aug, '\0', c->end - c->pos);
    if (nul == NULL || !augmentation_ok(aug))
        return fail(ck, entry_off, "CIE augmentation is not one libdw knows");
    c->pos = (const uint8_t *)nul - c->bytes + 1;
    if (version == 4 && (!rd_u8(c, &u8) || u8 != 8 || !rd_u8(c, &u8) || u8 != 0))
        return fail(ck, entry_off, "CIE address or segment size is not 8 and 0");
    if (strcmp(aug, "eh") == 0 && !rd_fixed(c, 8, &v))
        return fail(ck, entry_off, "CIE ends inside its \"eh\" pointer");
    if (!rd_uleb(c, &v) || !rd_sleb(c))
        return fail(ck, entry_off, "CIE alignment factors run past the entry");
    /* The return address column: a byte in version 1, ULEB128 from version 3 on. */
    bool have_ra = version == 1 ? rd_fixed(c, 1, &v) : rd_uleb(c, &v);
    if (!have_ra)
        return fail(ck, entry_off, "CIE return address register runs past the entry");
    if (!reg_ok(ck, entry_off, v))
        return false;
    cie.sized = aug[0] == 'z';
    if (cie.sized && !check_aug_data(ck, c, aug, &cie))
        return false;
    struct program pr = {.in_cie = true, .fde_enc = cie.fde_enc};
    if (!check_program(ck, c->pos, c->end, &pr))
        return false;
    g_array_append_val(ck->cies, cie);
    return true;
}

static const struct cie_info *find_cie(const struct cfi_check *ck, size_t off)
{
    size_t lo = 0, hi = ck->cies->len;
    const struct cie_info *cies = (const struct cie_info *)ck->cies->data;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cies[mid].offset < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ck->cies->len && cies[lo].offset == off ? &cies[lo] : NULL;
}

/* From after the CIE pointer (at id_off) to the end of the FDE. */
static bool check_fde(struct cfi_check *ck, size_t entry_off, size_t id_off, uint64_t cie_ptr,
                      struct cur *c)
{
    /* .eh_frame: the distance back from the pointer itself to a CIE that came before. */
    const struct cie_info *cie = cie_ptr <= id_off ? find_cie(ck, id_off - cie_ptr) : NULL;
    if (cie == NULL)
        return fail(ck, entry_off, "FDE's CIE pointer 0x%llx does not lead to a CIE",
                    (unsigned long long)cie_ptr);
    uint64_t v;
    size_t ptr = enc_size(cie->fde_enc);
    if (!rd_fixed(c, ptr, &v) || !rd_fixed(c, ptr, &v))
        return fail(ck, entry_off, "FDE address range runs past the entry");
    if (cie->sized && (!rd_uleb(c, &v) || v > c->end - c->pos))
        return fail(ck, entry_off, "FDE augmentation data runs past the entry");
    if (cie->sized)
        c->pos += v;
    struct program pr = {.in_cie = false, .fde_enc = cie->fde_enc};
    return check_program(ck, c->pos, c->end, &pr);
}

/* One entry at *off; advances *off past it, or sets *off to len at a zero terminator. */
static bool check_entry(struct cfi_check *ck, size_t *off)
{
    size_t entry_off = *off;
    struct cur c = {ck->bytes, entry_off, ck->len};
    uint64_t length, id;
    size_t id_size = 4;
    if (!rd_fixed(&c, 4, &length))
        return fail(ck, entry_off, "%zu stray bytes after the last entry", ck->len - entry_off);
    if (length == 0) { /* the terminator: libdw reads no further */
        *off = ck->len;
        return true;
    }
    if (length == 0xffffffff) {
        id_size = 8;
        if (!rd_fixed(&c, 8, &length))
            return fail(ck, entry_off, "64-bit entry length runs past the end");
    } else if (length >= 0xfffffff0) {
        return fail(ck, entry_off, "reserved entry length 0x%llx", (unsigned long long)length);
    }
    if (length > ck->len - c.pos || length < id_size + 1)
        return fail(ck, entry_off, "entry length 0x%llx does not fit the %zu bytes left",
                    (unsigned long long)length, ck->len - c.pos);
    c.end = c.pos + length;
    *off = c.end;
    size_t id_off = c.pos;
    rd_fixed(&c, id_size, &id);
    if (id == 0)
        return check_cie(ck, entry_off, &c);
    return check_fde(ck, entry_off, id_off, id, &c);
}

int unw_cfi_check_eh_frame(const void *eh_frame, size_t len, struct qp_error *err)
{
    if (eh_frame == NULL && len > 0)
        return qp_error_set(err, -EINVAL, "unw_cfi_check_eh_frame: bad arguments");
    struct cfi_check ck = {.bytes = eh_frame, .len = len};
    ck.cies = g_array_new(FALSE, FALSE, sizeof(struct cie_info));
    int rc = 0;
    for (size_t off = 0; off < len;) {
        if (!check_entry(&ck, &off)) {
            rc = qp_error_set(err, -EINVAL, ".eh_frame offset 0x%zx: %s", ck.bad_off, ck.why);
            break;
        }
    }
    g_array_free(ck.cies, TRUE);
    return rc;
}
