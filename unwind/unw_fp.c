/* The frame-pointer walk for code without CFI: each frame's caller by the machine's frame-record
 * rule, but only where the function's own code says the rule holds at that pc. libdwfl's
 * fallback applies [fp]/[fp+8] to every frame, so an interrupted leaf that has no record (GCC
 * gives none even with -mno-omit-leaf-frame-pointer) hides its caller; here the function's
 * instructions, read from the module's ELF through its symbol, decide where the return address
 * is, and a frame they cannot vouch for ends the walk, marked. */
#include <capstone/capstone.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <string.h>

#include "unw_internal.h"

/* The code of the function holding pc, from the module's ELF: its start and bytes. */
struct unw_func {
    uint64_t start;
    const uint8_t *code;
    size_t len;
    bool is_entry; /* the ELF's entry point is in it (_start) */
};

static bool find_func(unw_space *s, uint64_t pc, struct unw_func *f)
{
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
    GElf_Sym sym;
    GElf_Off off;
    Dwarf_Addr bias;
    if (mod == NULL || dwfl_module_addrinfo(mod, pc, &off, &sym, NULL, NULL, NULL) == NULL ||
        GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0 || off >= sym.st_size)
        return false;
    f->start = pc - off;
    Dwarf_Addr addr = f->start;
    Elf_Scn *scn = dwfl_module_address_section(mod, &addr, &bias);
    Elf_Data *data = scn ? elf_getdata(scn, NULL) : NULL;
    if (data == NULL || data->d_buf == NULL || addr > data->d_size ||
        sym.st_size > data->d_size - addr)
        return false;
    f->code = (const uint8_t *)data->d_buf + addr;
    f->len = sym.st_size;
    Elf *elf = dwfl_module_getelf(mod, &bias);
    GElf_Ehdr eh;
    f->is_entry =
        elf && gelf_getehdr(elf, &eh) && eh.e_entry && eh.e_entry + bias - f->start < f->len;
    return true;
}

/* ---- x86_64: push %rbp; mov %rsp,%rbp ---------------------------------------------------- */

static bool is_reg_op(const cs_x86 *x, int i, x86_reg reg)
{
    return x->op_count > i && x->operands[i].type == X86_OP_REG && x->operands[i].reg == reg;
}

static void writes_sp_fp(csh h, const cs_insn *insn, bool *sp, bool *fp)
{
    cs_regs rd, wr;
    uint8_t nrd, nwr;
    *sp = *fp = true; /* what capstone cannot tell us counts as written */
    if (cs_regs_access(h, insn, rd, &nrd, wr, &nwr) != CS_ERR_OK)
        return;
    *sp = *fp = false;
    for (unsigned i = 0; i < nwr; i++) {
        *sp = *sp || wr[i] == X86_REG_RSP || wr[i] == X86_REG_ESP || wr[i] == X86_REG_SP;
        *fp = *fp || wr[i] == X86_REG_RBP || wr[i] == X86_REG_EBP || wr[i] == X86_REG_BP;
    }
}

/* A jump whose target is outside the function (a tail call) or that has no fixed target. */
static bool jumps_out(const cs_insn *insn, const struct unw_func *f)
{
    const cs_x86 *x = &insn->detail->x86;
    if (x->op_count != 1 || x->operands[0].type != X86_OP_IMM)
        return true;
    return (uint64_t)x->operands[0].imm - f->start >= f->len;
}

/* A function that never moves sp nor writes rbp (a leaf without a record): its return address
 * is at [sp] and rbp is its caller's at every instruction. */
static bool x86_is_plain_leaf(csh h, const struct unw_func *f)
{
    const uint8_t *code = f->code;
    size_t len = f->len;
    uint64_t addr = f->start;
    cs_insn *insn = cs_malloc(h);
    bool plain = insn != NULL;
    while (plain && len > 0) {
        if (!cs_disasm_iter(h, &code, &len, &addr, insn)) {
            plain = false;
            break;
        }
        bool sp, fp;
        writes_sp_fp(h, insn, &sp, &fp);
        plain = !fp && (!sp || insn->id == X86_INS_RET);
    }
    cs_free(insn, 1);
    return plain;
}

/* The state of a function that starts with its frame record (after at most instructions that
 * touch neither sp nor rbp, endbr64 say), walked in address order up to pc. Code after an
 * epilogue's ret or tail jump is reached from the framed body (GCC keeps epilogues last on their
 * path); anything this does not follow (rbp written otherwise, a jump inside the function after
 * the record is popped, sp moved then) makes the rest unknown. */
static enum unw_fp_state x86_state_at(csh h, const struct unw_func *f, uint64_t pc)
{
    enum unw_fp_state st = UNW_FP_AT_ENTRY;
    const uint8_t *code = f->code;
    size_t len = f->len;
    uint64_t addr = f->start;
    cs_insn *insn = cs_malloc(h);
    if (insn == NULL)
        return UNW_FP_UNKNOWN;
    while (st != UNW_FP_UNKNOWN && addr < pc) {
        if (!cs_disasm_iter(h, &code, &len, &addr, insn)) {
            st = UNW_FP_UNKNOWN;
            break;
        }
        const cs_x86 *x = &insn->detail->x86;
        bool sp, fp;
        writes_sp_fp(h, insn, &sp, &fp);
        bool jump = insn->id == X86_INS_JMP || cs_insn_group(h, insn, CS_GRP_JUMP);
        switch (st) {
        case UNW_FP_AT_ENTRY:
            if (insn->id == X86_INS_PUSH && is_reg_op(x, 0, X86_REG_RBP))
                st = UNW_FP_PUSHED;
            else if (sp || fp || jump || insn->id == X86_INS_RET)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_PUSHED: /* GCC may schedule argument moves between push and mov */
            if (insn->id == X86_INS_MOV && is_reg_op(x, 0, X86_REG_RBP) &&
                is_reg_op(x, 1, X86_REG_RSP))
                st = UNW_FP_FRAMED;
            else if (sp || fp || jump || insn->id == X86_INS_RET)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_FRAMED:
            if (insn->id == X86_INS_LEAVE ||
                (insn->id == X86_INS_POP && is_reg_op(x, 0, X86_REG_RBP)))
                st = UNW_FP_POPPED;
            else if (fp)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_POPPED:
            if (insn->id == X86_INS_RET || (insn->id == X86_INS_JMP && jumps_out(insn, f)))
                st = UNW_FP_FRAMED;
            else if (sp || fp || jump || cs_insn_group(h, insn, CS_GRP_CALL))
                st = UNW_FP_UNKNOWN;
            break;
        default:
            break;
        }
    }
    if (addr != pc)
        st = UNW_FP_UNKNOWN; /* pc is not at an instruction boundary */
    cs_free(insn, 1);
    return st;
}

static enum unw_fp_state x86_64_fp_state(const struct unw_func *f, uint64_t pc, uint64_t *push)
{
    *push = 16; /* rbp above the return address */
    csh h;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
        return UNW_FP_UNKNOWN;
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    enum unw_fp_state st = x86_state_at(h, f, pc);
    /* No record at the start: a leaf whose every instruction leaves sp and rbp alone. */
    if (st == UNW_FP_UNKNOWN && x86_is_plain_leaf(h, f))
        st = UNW_FP_AT_ENTRY;
    cs_close(&h);
    return st;
}

/* Whether the instruction that ends at ra is a call, and one to callee when it names its
 * target: a return address at [sp] is only one if it is. The CPU enters a trap stub with the
 * interrupted pc where a called function has its return address, and that pc follows no call
 * to the stub. */
static bool x86_64_call_before(unw_space *s, uint64_t ra, uint64_t callee)
{
    struct unw_func caller;
    if (!find_func(s, ra - 1, &caller))
        return false;
    csh h;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
        return false;
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    cs_insn *insn = cs_malloc(h);
    bool found = false;
    for (uint64_t n = 2; insn && !found && n <= 7 && n <= ra - caller.start; n++) {
        const uint8_t *code = caller.code + (ra - n - caller.start);
        size_t len = n;
        uint64_t addr = ra - n;
        if (!cs_disasm_iter(h, &code, &len, &addr, insn) || len != 0 || insn->id != X86_INS_CALL)
            continue;
        const cs_x86 *x = &insn->detail->x86;
        found = x->op_count == 1 &&
                (x->operands[0].type != X86_OP_IMM || (uint64_t)x->operands[0].imm == callee);
    }
    cs_free(insn, 1);
    cs_close(&h);
    return found;
}

const struct unw_fp_arch unw_fp_x86_64 = {.state_at = x86_64_fp_state,
                                          .call_before = x86_64_call_before,
                                          .fp_reg = UNW_RBP,
                                          .ra_reg = -1,
                                          .saved_fp = 0,
                                          .saved_ra = 8};

/* ---- aarch64: stp x29, x30, [sp, #-N]!; mov x29, sp --------------------------------------- */

static bool a64_is(const cs_arm64 *x, int i, arm64_reg reg)
{
    return x->op_count > i && x->operands[i].type == ARM64_OP_REG && x->operands[i].reg == reg;
}

static bool a64_special(arm64_reg r)
{
    return r == ARM64_REG_SP || r == ARM64_REG_WSP || r == ARM64_REG_X29 || r == ARM64_REG_W29 ||
           r == ARM64_REG_X30 || r == ARM64_REG_W30;
}

/* Whether the instruction may write sp, x29 or x30: a destination register (the first operand,
 * both of a load pair), a base register written back, or a call's link. Stores count too (their
 * first operand is a source): erring this way only ends more walks. */
static bool a64_writes_special(csh h, const cs_insn *insn)
{
    const cs_arm64 *x = &insn->detail->arm64;
    if (cs_insn_group(h, insn, CS_GRP_CALL))
        return true;
    for (int i = 0; i < x->op_count && i < 2; i++) {
        const cs_arm64_op *op = &x->operands[i];
        bool dest = i == 0 || insn->id == ARM64_INS_LDP || insn->id == ARM64_INS_LDNP;
        if (op->type == ARM64_OP_REG && dest && a64_special(op->reg))
            return true;
    }
    for (int i = 0; i < x->op_count; i++)
        if (x->operands[i].type == ARM64_OP_MEM && x->writeback &&
            a64_special(x->operands[i].mem.base))
            return true;
    return false;
}

static int64_t a64_mem_disp(const cs_arm64 *x)
{
    for (int i = 0; i < x->op_count; i++)
        if (x->operands[i].type == ARM64_OP_MEM)
            return x->operands[i].mem.disp;
    return 0;
}

static bool a64_jumps_out(const cs_insn *insn, const struct unw_func *f)
{
    const cs_arm64 *x = &insn->detail->arm64;
    if (x->op_count != 1 || x->operands[0].type != ARM64_OP_IMM)
        return true;
    return (uint64_t)x->operands[0].imm - f->start >= f->len;
}

static enum unw_fp_state a64_state_at(csh h, const struct unw_func *f, uint64_t pc, uint64_t *push)
{
    enum unw_fp_state st = UNW_FP_AT_ENTRY;
    const uint8_t *code = f->code;
    size_t len = f->len;
    uint64_t addr = f->start;
    cs_insn *insn = cs_malloc(h);
    if (insn == NULL)
        return UNW_FP_UNKNOWN;
    while (st != UNW_FP_UNKNOWN && addr < pc) {
        if (!cs_disasm_iter(h, &code, &len, &addr, insn)) {
            st = UNW_FP_UNKNOWN;
            break;
        }
        const cs_arm64 *x = &insn->detail->arm64;
        bool special = a64_writes_special(h, insn);
        bool jump = cs_insn_group(h, insn, CS_GRP_JUMP) || insn->id == ARM64_INS_RET;
        switch (st) {
        case UNW_FP_AT_ENTRY:
            /* the record pushed at sp - N, sp moved there: the caller's x29 and x30 at [sp] */
            if (insn->id == ARM64_INS_STP && a64_is(x, 0, ARM64_REG_X29) &&
                a64_is(x, 1, ARM64_REG_X30) && x->writeback && x->op_count == 3 &&
                x->operands[2].type == ARM64_OP_MEM && x->operands[2].mem.base == ARM64_REG_SP &&
                a64_mem_disp(x) < 0) {
                st = UNW_FP_PUSHED;
                *push = (uint64_t)-a64_mem_disp(x);
            } else if (special || jump) {
                st = UNW_FP_UNKNOWN;
            }
            break;
        case UNW_FP_PUSHED:
            if (insn->id == ARM64_INS_MOV && a64_is(x, 0, ARM64_REG_X29) &&
                a64_is(x, 1, ARM64_REG_SP))
                st = UNW_FP_FRAMED;
            else if (special || jump)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_FRAMED:
            /* ldp x29, x30, [sp], #N: x29, x30 and sp are the caller's again */
            if (insn->id == ARM64_INS_LDP && a64_is(x, 0, ARM64_REG_X29) &&
                a64_is(x, 1, ARM64_REG_X30) && x->writeback && x->op_count >= 3 &&
                x->operands[2].type == ARM64_OP_MEM && x->operands[2].mem.base == ARM64_REG_SP &&
                a64_mem_disp(x) == 0)
                st = UNW_FP_POPPED;
            else if (special && !cs_insn_group(h, insn, CS_GRP_CALL) &&
                     !(x->op_count > 0 && x->operands[0].type == ARM64_OP_REG &&
                       (x->operands[0].reg == ARM64_REG_SP)))
                st = UNW_FP_UNKNOWN; /* x29 or x30 rewritten in the body */
            break;
        case UNW_FP_POPPED:
            if (insn->id == ARM64_INS_RET ||
                (insn->id == ARM64_INS_B && x->cc == ARM64_CC_INVALID && a64_jumps_out(insn, f)))
                st = UNW_FP_FRAMED;
            else if (special || jump)
                st = UNW_FP_UNKNOWN;
            break;
        default:
            break;
        }
    }
    if (addr != pc)
        st = UNW_FP_UNKNOWN;
    cs_free(insn, 1);
    return st;
}

/* A leaf that never writes sp, x29 or x30: its return address stays in x30. */
static bool a64_is_plain_leaf(csh h, const struct unw_func *f)
{
    const uint8_t *code = f->code;
    size_t len = f->len;
    uint64_t addr = f->start;
    cs_insn *insn = cs_malloc(h);
    bool plain = insn != NULL;
    while (plain && len > 0)
        plain = cs_disasm_iter(h, &code, &len, &addr, insn) && !a64_writes_special(h, insn);
    cs_free(insn, 1);
    return plain;
}

static enum unw_fp_state aarch64_fp_state(const struct unw_func *f, uint64_t pc, uint64_t *push)
{
    csh h;
    *push = 16;
    if (cs_open(CS_ARCH_ARM64, CS_MODE_LITTLE_ENDIAN, &h) != CS_ERR_OK)
        return UNW_FP_UNKNOWN;
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    enum unw_fp_state st = a64_state_at(h, f, pc, push);
    if (st == UNW_FP_UNKNOWN && a64_is_plain_leaf(h, f))
        st = UNW_FP_AT_ENTRY;
    cs_close(&h);
    return st;
}

/* The instruction before ra is bl callee, or blr. */
static bool aarch64_call_before(unw_space *s, uint64_t ra, uint64_t callee)
{
    struct unw_func caller;
    if (!find_func(s, ra - 1, &caller) || ra - caller.start < 4)
        return false;
    csh h;
    if (cs_open(CS_ARCH_ARM64, CS_MODE_LITTLE_ENDIAN, &h) != CS_ERR_OK)
        return false;
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    cs_insn *insn = cs_malloc(h);
    const uint8_t *code = caller.code + (ra - 4 - caller.start);
    size_t len = 4;
    uint64_t addr = ra - 4;
    bool found = insn && cs_disasm_iter(h, &code, &len, &addr, insn) &&
                 (insn->id == ARM64_INS_BLR ||
                  (insn->id == ARM64_INS_BL && insn->detail->arm64.op_count == 1 &&
                   insn->detail->arm64.operands[0].type == ARM64_OP_IMM &&
                   (uint64_t)insn->detail->arm64.operands[0].imm == callee));
    cs_free(insn, 1);
    cs_close(&h);
    return found;
}

const struct unw_fp_arch unw_fp_aarch64 = {.state_at = aarch64_fp_state,
                                           .call_before = aarch64_call_before,
                                           .fp_reg = 29,
                                           .ra_reg = 30,
                                           .saved_fp = 0,
                                           .saved_ra = 8};

/* ---- riscv64: addi sp, sp, -N; sd ra, N-8(sp); sd s0, N-16(sp); addi s0, sp, N --------------
 * capstone 4 has no RISC-V: the few instructions that matter are decoded here, RV64GC's 32-bit
 * and compressed forms; every other instruction only says which register it writes. A leaf
 * saves only s0, at N-8, and keeps its return address in ra. */

enum { RV_RA = 1, RV_SP = 2, RV_S0 = 8 };

struct rv_insn {
    unsigned len;
    int rd;     /* the integer register written, -1 none */
    bool addi;  /* addi rd, rs1, imm (c.addi, c.addi16sp, c.addi4spn, c.mv as imm 0) */
    bool store; /* sd rs2, imm(rs1) */
    bool load;  /* ld rd, imm(rs1) */
    bool jump;  /* any jump or branch */
    bool ret;   /* jalr x0, 0(ra) */
    bool call;  /* jal/jalr writing ra */
    bool jal;   /* jal ra, imm (target pc + imm) */
    bool auipc; /* auipc rd, imm (imm already shifted) */
    int rs1, rs2;
    int64_t imm;
};

static int64_t sext(uint64_t v, unsigned bits)
{
    uint64_t m = UINT64_C(1) << (bits - 1);
    return (int64_t)((v ^ m) - m);
}

static void rv_decode32(uint32_t x, struct rv_insn *d)
{
    unsigned op = x & 0x7f, f3 = (x >> 12) & 7, rd = (x >> 7) & 31;
    d->rs1 = (int)((x >> 15) & 31);
    d->rs2 = (int)((x >> 20) & 31);
    switch (op) {
    case 0x23: /* STORE */
        d->store = f3 == 3;
        d->imm = sext(((x >> 25) << 5) | ((x >> 7) & 31), 12);
        return;
    case 0x63: /* BRANCH */
        d->jump = true;
        return;
    case 0x27: /* STORE-FP */
    case 0x07: /* LOAD-FP: writes an f register */
    case 0x0f: /* FENCE */
        return;
    case 0x6f: /* JAL */
        d->rd = (int)rd;
        d->jump = true;
        d->call = d->jal = rd == RV_RA;
        d->imm = sext(((x >> 31) << 20) | (((x >> 12) & 0xff) << 12) | (((x >> 20) & 1) << 11) |
                          (((x >> 21) & 0x3ff) << 1),
                      21);
        return;
    case 0x67: /* JALR */
        d->rd = (int)rd;
        d->jump = true;
        d->call = rd == RV_RA;
        d->imm = sext(x >> 20, 12);
        d->ret = rd == 0 && d->rs1 == RV_RA && d->imm == 0;
        return;
    case 0x17: /* AUIPC */
        d->rd = (int)rd;
        d->auipc = true;
        d->imm = sext(x & 0xfffff000u, 32);
        return;
    default:
        break;
    }
    d->rd = (int)rd; /* every other major opcode writes rd, or is taken to */
    d->imm = sext(x >> 20, 12);
    d->addi = op == 0x13 && f3 == 0;
    d->load = op == 0x03 && f3 == 3;
}

static void rv_decode16(uint16_t x, struct rv_insn *d)
{
    unsigned q = x & 3, f3 = (x >> 13) & 7, r = (x >> 7) & 31, rs2 = (x >> 2) & 31;
    int rdp = 8 + (int)((x >> 2) & 7), rs1p = 8 + (int)((x >> 7) & 7);
    if (q == 0) {
        if (f3 == 0) { /* c.addi4spn rd', sp, imm */
            d->rd = rdp;
            d->addi = true;
            d->rs1 = RV_SP;
            d->imm = ((x >> 7) & 0x30) | ((x >> 1) & 0x3c0) | ((x >> 4) & 0x4) | ((x >> 2) & 0x8);
        } else if (f3 <= 3) { /* c.fld, c.lw, c.ld */
            d->rd = f3 == 1 ? -1 : rdp;
        }
        (void)rs1p;
        return;
    }
    if (q == 1) {
        switch (f3) {
        case 0: /* c.addi */
        case 1: /* c.addiw */
        case 2: /* c.li */
            d->rd = (int)r;
            d->addi = f3 == 0;
            d->rs1 = (int)r;
            d->imm = sext(((x >> 7) & 0x20) | ((x >> 2) & 0x1f), 6);
            return;
        case 3:
            d->rd = (int)r;
            if (r == RV_SP) { /* c.addi16sp */
                d->addi = true;
                d->rs1 = RV_SP;
                d->imm = sext(((x >> 3) & 0x200) | ((x >> 2) & 0x10) | ((x << 1) & 0x40) |
                                  ((x << 4) & 0x180) | ((x << 3) & 0x20),
                              10);
            }
            return;
        case 4: /* arithmetic on rd' */
            d->rd = rs1p;
            return;
        default: /* c.j, c.beqz, c.bnez */
            d->jump = true;
            return;
        }
    }
    if (q == 2) {
        switch (f3) {
        case 0: /* c.slli */
        case 2: /* c.lwsp */
            d->rd = (int)r;
            return;
        case 3: /* c.ldsp */
            d->rd = (int)r;
            d->load = true;
            d->rs1 = RV_SP;
            d->imm = ((x >> 7) & 0x20) | ((x >> 2) & 0x18) | ((x << 4) & 0x1c0);
            return;
        case 4:
            if (rs2 != 0) { /* c.mv, c.add */
                d->rd = (int)r;
                d->addi = ((x >> 12) & 1) == 0; /* c.mv rd, rs2: addi rd, rs2, 0 */
                d->rs1 = (int)rs2;
                d->imm = 0;
            } else if (((x >> 12) & 1) == 0) { /* c.jr */
                d->jump = true;
                d->ret = r == RV_RA;
            } else if (r != 0) { /* c.jalr */
                d->jump = d->call = true;
                d->rd = RV_RA;
            }
            return;
        case 7: /* c.sdsp */
            d->store = true;
            d->rs1 = RV_SP;
            d->rs2 = (int)rs2;
            d->imm = ((x >> 7) & 0x38) | ((x >> 1) & 0x1c0);
            return;
        default: /* c.fldsp, c.fsdsp, c.swsp */
            return;
        }
    }
}

static bool rv_decode(const struct unw_func *f, uint64_t addr, struct rv_insn *d)
{
    uint64_t off = addr - f->start;
    *d = (struct rv_insn){.rd = -1, .rs1 = -1, .rs2 = -1};
    if (off + 2 > f->len)
        return false;
    uint16_t lo = (uint16_t)(f->code[off] | f->code[off + 1] << 8);
    if ((lo & 3) != 3) {
        d->len = 2;
        rv_decode16(lo, d);
        return lo != 0; /* all zero: not an instruction */
    }
    if (off + 4 > f->len)
        return false;
    d->len = 4;
    rv_decode32(lo | (uint32_t)(f->code[off + 2] | f->code[off + 3] << 8) << 16, d);
    return true;
}

static enum unw_fp_state riscv64_fp_state(const struct unw_func *f, uint64_t pc, uint64_t *push)
{
    enum unw_fp_state st = UNW_FP_AT_ENTRY;
    int64_t alloc = 0;
    bool ra_saved = false, ra_in_reg = true;
    int64_t s0_off = -1;
    uint64_t addr = f->start;
    *push = 0;
    while (st != UNW_FP_UNKNOWN && addr < pc) {
        struct rv_insn d;
        if (!rv_decode(f, addr, &d))
            return UNW_FP_UNKNOWN;
        addr += d.len;
        bool w_sp = d.rd == RV_SP, w_s0 = d.rd == RV_S0, w_ra = d.rd == RV_RA;
        switch (st) {
        case UNW_FP_AT_ENTRY:
            if (d.addi && w_sp && d.rs1 == RV_SP && alloc == 0 && d.imm < 0)
                alloc = -d.imm;
            else if (d.store && d.rs1 == RV_SP && d.rs2 == RV_RA && d.imm == alloc - 8)
                ra_saved = true;
            else if (d.store && d.rs1 == RV_SP && d.rs2 == RV_S0)
                s0_off = d.imm;
            else if (d.addi && w_s0 && d.rs1 == RV_SP && alloc > 0 && d.imm == alloc)
                st = ra_saved && s0_off == alloc - 16   ? UNW_FP_FRAMED
                     : !ra_saved && s0_off == alloc - 8 ? UNW_FP_FRAMED_LEAF
                                                        : UNW_FP_UNKNOWN;
            else if (w_sp || w_s0 || w_ra || d.jump)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_FRAMED:
        case UNW_FP_FRAMED_LEAF:
            if (d.load && w_s0 && d.rs1 == RV_SP)
                st = st == UNW_FP_FRAMED_LEAF || ra_in_reg ? UNW_FP_POPPED : UNW_FP_UNKNOWN;
            else if (d.load && w_ra && d.rs1 == RV_SP && st == UNW_FP_FRAMED)
                ra_in_reg = true;
            else if (w_s0 || (w_ra && st == UNW_FP_FRAMED_LEAF))
                st = UNW_FP_UNKNOWN;
            else if (w_ra)
                ra_in_reg = false; /* a call, or auipc ra for one: ra is in the record */
            break;
        case UNW_FP_POPPED:
            if (d.ret) {
                st = UNW_FP_FRAMED;
                ra_in_reg = false;
            } else if (w_s0 || w_ra || d.jump) {
                st = UNW_FP_UNKNOWN;
            }
            break;
        default:
            break;
        }
        /* after a ret, the code is reached from the body: a leaf's stays a leaf's */
        if (st == UNW_FP_FRAMED && !ra_saved)
            st = UNW_FP_FRAMED_LEAF;
    }
    if (addr != pc)
        return UNW_FP_UNKNOWN;
    return st;
}

/* The instructions before ra are auipc ra, hi; jalr ra, lo(ra) calling callee, jal ra, callee,
 * or a jalr/c.jalr with a register target. */
static bool riscv64_call_before(unw_space *s, uint64_t ra, uint64_t callee)
{
    struct unw_func caller;
    struct rv_insn d, a;
    if (!find_func(s, ra - 1, &caller))
        return false;
    if (ra - caller.start >= 4 && rv_decode(&caller, ra - 4, &d) && d.len == 4 && d.call) {
        if (d.jal)
            return ra - 4 + (uint64_t)d.imm == callee;
        if (ra - caller.start >= 8 && rv_decode(&caller, ra - 8, &a) && a.len == 4 && a.auipc &&
            a.rd == d.rs1)
            return ra - 8 + (uint64_t)a.imm + (uint64_t)d.imm == callee;
        return true; /* jalr through a register loaded otherwise */
    }
    return ra - caller.start >= 2 && rv_decode(&caller, ra - 2, &d) && d.len == 2 && d.call;
}

const struct unw_fp_arch unw_fp_riscv64 = {.state_at = riscv64_fp_state,
                                           .call_before = riscv64_call_before,
                                           .fp_reg = RV_S0,
                                           .ra_reg = RV_RA,
                                           .saved_fp = -16,
                                           .saved_ra = -8,
                                           .leaf_saved_fp = -8};

/* ---- The walk ---------------------------------------------------------------------------- */

static int fp_stop(struct unw_walk *w, enum unw_stop why)
{
    w->res->stop = why;
    w->stopped = true;
    return 0;
}

/* The caller of the frame at r (in state st, its record push bytes big): its pc, sp and frame
 * pointer. */
static bool step(unw_space *s, const struct unw_fp_arch *a, enum unw_fp_state st, uint64_t push,
                 const struct unw_regs *r, struct unw_regs *caller, enum unw_stop *why)
{
    const struct unw_machine *m = s->machine;
    uint64_t sp = r->r[m->sp_slot], fp = r->r[a->fp_reg], ra, cfp = fp, csp;
    *caller = *r;
    *why = UNW_STOP_MEMORY;
    switch (st) {
    case UNW_FP_AT_ENTRY:
    case UNW_FP_POPPED:
        /* the return address is where the call left it: the link register, or [sp] */
        if (a->ra_reg >= 0) {
            ra = r->r[a->ra_reg];
            csp = sp;
        } else {
            if (!unw_read_word(s, sp, &ra))
                return false;
            csp = sp + 8;
        }
        break;
    case UNW_FP_PUSHED:
        if (!unw_read_word(s, sp, &cfp) || !unw_read_word(s, sp + 8, &ra))
            return false;
        csp = sp + push;
        break;
    case UNW_FP_FRAMED_LEAF: /* riscv64: a leaf's record is only s0; ra is still in ra */
        *why = UNW_STOP_MEMORY;
        if (fp < sp || a->ra_reg < 0 || !unw_read_word(s, fp + a->leaf_saved_fp, &cfp))
            return false;
        ra = r->r[a->ra_reg];
        csp = fp;
        break;
    case UNW_FP_FRAMED:
        *why = UNW_STOP_NO_CFI;
        if (fp < sp)
            return false;
        *why = UNW_STOP_MEMORY;
        if (!unw_read_word(s, fp + a->saved_fp, &cfp) || !unw_read_word(s, fp + a->saved_ra, &ra))
            return false;
        csp = fp + a->saved_ra + 8;
        break;
    default:
        *why = UNW_STOP_NO_CFI;
        return false;
    }
    caller->r[m->pc_slot] = ra;
    caller->r[m->sp_slot] = csp;
    caller->r[a->fp_reg] = cfp;
    return true;
}

/* Continues the walk whose last frame (already in res) has registers r, by frame records. */
void unw_fp_walk(unw_space *s, const struct unw_regs *start, bool activation)
{
    struct unw_walk *w = &s->walk;
    struct unw_result *res = w->res;
    const struct unw_machine *m = s->machine;
    const struct unw_fp_arch *a = m->fp;
    struct unw_regs r = *start, caller;
    for (;;) {
        uint64_t pc = r.r[m->pc_slot];
        uint64_t lookup = activation ? pc : pc - 1;
        struct unw_func f;
        if (!find_func(s, lookup, &f)) {
            fp_stop(w, UNW_STOP_NO_CFI);
            return;
        }
        /* _start zeroes the frame pointer before its first call: the end of the chain. */
        if (f.is_entry && r.r[a->fp_reg] == 0) {
            fp_stop(w, UNW_STOP_OUTERMOST);
            return;
        }
        uint64_t push = 0;
        enum unw_fp_state st = a->state_at(&f, pc, &push);
        /* A return address's frame made the call, so it has its record (or it would have hidden
         * this frame's caller); an interrupted one may be anywhere in its function. */
        if (!activation && st != UNW_FP_FRAMED)
            st = UNW_FP_UNKNOWN;
        enum unw_stop why;
        if (!step(s, a, st, push, &r, &caller, &why)) {
            fp_stop(w, why);
            return;
        }
        uint64_t cpc = caller.r[m->pc_slot], csp = caller.r[m->sp_slot];
        if (cpc == 0 || !unw_pc_is_canonical(cpc)) {
            fp_stop(w, UNW_STOP_BAD_PC);
            return;
        }
        /* Calls do not cross into another address space (traps do, and their frames are no
         * frame records): a return address outside it is not one. */
        if (cpc < s->lo || cpc >= s->hi) {
            fp_stop(w, UNW_STOP_NO_CFI);
            return;
        }
        /* A return address taken from [sp] rather than from a record must follow a call to
         * this function (a trap stub's [sp] holds the interrupted pc). */
        if (st != UNW_FP_FRAMED && !a->call_before(s, cpc, f.start)) {
            fp_stop(w, UNW_STOP_NO_CFI);
            return;
        }
        if (res->n_frames >= w->max_depth) {
            fp_stop(w, UNW_STOP_DEPTH);
            return;
        }
        /* a return address from the link register leaves sp where it was */
        bool may_stay = a->ra_reg >= 0 && (st == UNW_FP_AT_ENTRY || st == UNW_FP_POPPED);
        if (csp < r.r[m->sp_slot] || (csp == r.r[m->sp_slot] && (!may_stay || cpc == pc))) {
            fp_stop(w, UNW_STOP_NOT_GROWING);
            return;
        }
        if (unw_pc_has_cfi(s, cpc)) {
            /* Back to libdwfl, which looks the CFI up at the pc itself: right for a signal
             * trampoline, and for a return address that is not the start of a function (a call
             * at the very end of the one before would be read as that function's). */
            bool signal = unw_pc_is_signal_frame(s, cpc);
            struct unw_func cf;
            if (!signal && (!find_func(s, cpc, &cf) || cf.start == cpc)) {
                fp_stop(w, UNW_STOP_NO_CFI);
                return;
            }
            w->fp_regs = caller;
            w->fp_activation = signal;
            w->fp_resume = true;
            w->prev_pc = pc;
            w->prev_sp = r.r[m->sp_slot];
            w->prev_sp_known = true;
            w->prev_activation = activation;
            return;
        }
        res->frames[res->n_frames++] =
            (struct unw_frame){.pc = cpc, .activation = false, .method = UNW_BY_FP};
        r = caller;
        activation = false;
    }
}
