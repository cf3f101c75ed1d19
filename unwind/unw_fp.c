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
    case UNW_FP_FRAMED:
        *why = UNW_STOP_NO_CFI;
        if (fp < sp || fp + a->saved_ra < fp)
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
