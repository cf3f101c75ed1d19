/* The frame-pointer walk for code without CFI: each frame's caller by the machine's frame-record
 * rule, but only where the function's own code says the rule holds at that pc. libdwfl's
 * fallback applies [fp]/[fp+8] to every frame, so an interrupted leaf that has no record (GCC
 * gives none even with -mno-omit-leaf-frame-pointer) hides its caller; here the function's
 * instructions, read from the module's ELF through its symbol, decide where the return address
 * is, and a frame they cannot vouch for ends the walk, marked. Reading the instructions is the
 * architecture's (struct unw_fp_rule, filled in arch/); the walk here is the same for all. */
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <string.h>

#include "unw_internal.h"

/* The code of the function holding pc, from the module's ELF: its start and bytes. */
struct unw_func {
    struct unw_code code;
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
    f->code.start = pc - off;
    Dwarf_Addr addr = f->code.start;
    Elf_Scn *scn = dwfl_module_address_section(mod, &addr, &bias);
    Elf_Data *data = scn ? elf_getdata(scn, NULL) : NULL;
    if (data == NULL || data->d_buf == NULL || addr > data->d_size ||
        sym.st_size > data->d_size - addr)
        return false;
    f->code.code = (const uint8_t *)data->d_buf + addr;
    f->code.len = sym.st_size;
    Elf *elf = dwfl_module_getelf(mod, &bias);
    GElf_Ehdr eh;
    f->is_entry = elf && gelf_getehdr(elf, &eh) && eh.e_entry &&
                  eh.e_entry + bias - f->code.start < f->code.len;
    return true;
}

/* ---- The walk ---------------------------------------------------------------------------- */

static int fp_stop(struct unw_walk *w, enum unw_stop why)
{
    w->res->stop = why;
    w->stopped = true;
    return 0;
}

/* Whether the instruction before return address ra, in its function's code, calls callee. */
static bool call_before(unw_space *s, const struct unw_fp_rule *a, uint64_t ra, uint64_t callee)
{
    struct unw_func caller;
    return find_func(s, ra - 1, &caller) && a->call_before(&caller.code, ra, callee);
}

/* The caller of the frame at r (in state st, its record push bytes big): its pc, sp and frame
 * pointer. */
static bool step(unw_space *s, const struct unw_fp_rule *a, enum unw_fp_state st, uint64_t push,
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
    const struct unw_fp_rule *a = m->fp;
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
        enum unw_fp_state st = a->state_at(&f.code, pc, &push);
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
        if (cpc == 0 || !unw_pc_is_canonical(m, cpc)) {
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
        if (st != UNW_FP_FRAMED && !call_before(s, a, cpc, f.code.start)) {
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
            if (!signal && (!find_func(s, cpc, &cf) || cf.code.start == cpc)) {
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
