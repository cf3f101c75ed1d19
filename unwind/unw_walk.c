/* One walk: libdwfl thread callbacks fed from the caller's registers and memory, and the frame
 * callback that applies our stop rules. */
#include <elfutils/libdw.h>
#include <stdlib.h>
#include <string.h>

#include "unw_internal.h"

/* ---- Memory ------------------------------------------------------------------------------ */

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    uint64_t v;
    if (!unw_read_word(arg, addr, &v))
        return false;
    *result = v;
    return true;
}

/* ---- Threads: one thread, tid 1, whose registers are the current sample's --------------- */

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    if (*thread_argp != NULL)
        return 0;
    *thread_argp = arg;
    return 1;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    *thread_argp = arg;
    return tid == 1;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    unw_space *s = arg;
    const struct unw_regs *regs = s->walk.regs;
    const struct unw_machine *m = s->machine;
    if (s->walk.resuming) {
        /* A caller the frame-pointer walk found: only pc, sp and the frame pointer are its own */
        const unsigned known[] = {m->sp_slot, m->fp->fp_reg};
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (!dwfl_thread_state_registers(thread, known[k], 1, &regs->r[known[k]]))
                return false;
        dwfl_thread_state_register_pc(thread, regs->r[m->pc_slot]);
        return true;
    }
    if (!dwfl_thread_state_registers(thread, 0, m->nregs, regs->r))
        return false;
    if (m->trap_pc_column && regs->has_trap_pc &&
        !dwfl_thread_state_registers(thread, UNW_TRAP_PC_COLUMN, 1, &regs->trap_pc))
        return false;
    if (m->trap_sp_column && regs->has_trap_sp &&
        !dwfl_thread_state_registers(thread, UNW_TRAP_SP_COLUMN, 1, &regs->trap_sp))
        return false;
    dwfl_thread_state_register_pc(thread, regs->r[m->pc_slot]);
    return true;
}

const Dwfl_Thread_Callbacks unw_thread_callbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
};

/* ---- Frames ------------------------------------------------------------------------------ */

static int stop_walk(struct unw_walk *w, enum unw_stop why)
{
    w->res->stop = why;
    w->stopped = true;
    return DWARF_CB_ABORT;
}

static void capture_next_regs(const struct unw_machine *m, Dwfl_Frame *frame, uint64_t pc,
                              struct unw_result *res)
{
    for (unsigned regno = 0; regno < m->nregs && regno < m->pc_slot; regno++) {
        Dwarf_Word v;
        if (dwfl_frame_reg(frame, regno, &v) == 0) {
            res->next_regs.r[regno] = v;
            res->next_regs_known |= UINT64_C(1) << regno;
        }
    }
    res->next_regs.r[m->pc_slot] = pc;
    res->next_regs_known |= UINT64_C(1) << m->pc_slot;
}

/* A caller's CFA lies above its callee's; only the frame a signal interrupted may sit anywhere
 * (another stack, say), and then it must at least differ from the frame before. The same holds
 * for the caller of an interrupted frame where calls leave the return address in a register: a
 * leaf that has not moved sp (riscv64 built without frame pointers) shares it with its caller,
 * whether it is the innermost frame or one a trap interrupted in the kernel. */
static bool frame_is_growing(const unw_space *s, uint64_t pc, uint64_t sp, bool activation)
{
    const struct unw_walk *w = &s->walk;
    if (!w->prev_sp_known)
        return true;
    if (activation || (w->prev_activation && s->machine->link_register))
        return sp != w->prev_sp || pc != w->prev_pc;
    return sp > w->prev_sp;
}

static enum unw_method method_of_next(unw_space *s, int index)
{
    if (index == 0)
        return UNW_BY_REGS;
    return unw_pc_has_cfi(s, s->walk.prev_lookup_pc) ? UNW_BY_CFI : UNW_BY_FP;
}

/* Keeps the registers of the frame just recorded for unw_fp_walk and ends libdwfl's walk. A
 * register libdwfl did not recover (in a caller reached by CFI) stays unknown, so the walk is
 * only handed over when the ones the frame rule needs are known. */
static int fp_handoff(unw_space *s, Dwfl_Frame *frame, int i, uint64_t pc, bool activation)
{
    struct unw_walk *w = &s->walk;
    const struct unw_machine *m = s->machine;
    if (i == 0) {
        w->fp_regs = *w->regs;
    } else {
        memset(&w->fp_regs, 0, sizeof w->fp_regs);
        const unsigned need[] = {m->sp_slot, m->fp->fp_reg};
        for (size_t k = 0; k < sizeof need / sizeof need[0]; k++) {
            Dwarf_Word v;
            if (dwfl_frame_reg(frame, need[k], &v) != 0)
                return stop_walk(w, UNW_STOP_NO_CFI);
            w->fp_regs.r[need[k]] = v;
        }
    }
    Dwarf_Word lr; /* an interrupted frame's return address may still be in it */
    if (i > 0 && m->fp->ra_reg >= 0 && dwfl_frame_reg(frame, (unsigned)m->fp->ra_reg, &lr) == 0)
        w->fp_regs.r[m->fp->ra_reg] = lr;
    w->fp_regs.r[m->pc_slot] = pc;
    w->fp_pending = true;
    w->fp_activation = activation;
    w->stopped = true;
    return DWARF_CB_ABORT;
}

static int on_frame(Dwfl_Frame *frame, void *arg)
{
    unw_space *s = arg;
    struct unw_walk *w = &s->walk;
    struct unw_result *res = w->res;
    Dwarf_Addr pc;
    bool activation;
    /* Memory failures from here on belong to the step from this frame to its caller (asking
     * for activation already makes libdwfl take that step). */
    w->mem_fail = UNW_MEM_OK;
    if (!dwfl_frame_pc(frame, &pc, &activation))
        return stop_walk(w, UNW_STOP_ERROR);
    int i = res->n_frames;
    activation = activation || i == 0;
    bool resumed = w->resuming && !w->resumed_first_seen;
    if (resumed) {
        /* the caller unw_fp_walk handed back: libdwfl sees it as its first frame */
        w->resumed_first_seen = true;
        activation = w->fp_activation;
    }
    if (pc == 0 || !unw_pc_is_canonical(s->machine, pc))
        return stop_walk(w, UNW_STOP_BAD_PC);
    if (pc < s->lo || pc >= s->hi) {
        res->next_pc = pc;
        capture_next_regs(s->machine, frame, pc, res);
        return stop_walk(w, UNW_STOP_LEFT_SPACE);
    }
    if (i >= w->max_depth)
        return stop_walk(w, UNW_STOP_DEPTH);
    Dwarf_Word sp;
    bool sp_known = dwfl_frame_reg(frame, s->machine->sp_slot, &sp) == 0;
    if (i > 0 && sp_known && !unw_mem_in_bounds(w->mem, sp, 0))
        return stop_walk(w, UNW_STOP_MEMORY);
    if (i > 0 && sp_known && !frame_is_growing(s, pc, sp, activation))
        return stop_walk(w, UNW_STOP_NOT_GROWING);
    enum unw_method method = resumed ? UNW_BY_FP : method_of_next(s, i);
    /* libdwfl's frame-pointer fallback for aarch64 takes a caller from the link register whether
     * or not the callee has stored it yet, and the sp of each caller from the frame record below
     * it: a leaf with its record stored shows its caller twice, a pc past a call shows its own
     * function as its caller. Without CFI there is no telling those apart, so the walk ends at
     * the last frame CFI vouches for, marked. */
    if (method == UNW_BY_FP && s->machine->fp_guess_untrusted)
        return stop_walk(w, UNW_STOP_NO_CFI);
    res->frames[i] = (struct unw_frame){.pc = pc, .activation = activation, .method = method};
    res->n_frames++;
    w->prev_pc = pc;
    w->prev_sp = sp;
    w->prev_sp_known = sp_known;
    w->prev_activation = activation;
    w->prev_lookup_pc = activation ? pc : pc - 1;
    /* No CFI for this frame: its caller comes from the frame-pointer walk, which asks the
     * function's code where the record is, instead of libdwfl's guess. Code of no module (an
     * empty space's) has no code to read and keeps libdwfl's guess. */
    if (s->machine->fp && !unw_pc_has_cfi(s, w->prev_lookup_pc) &&
        dwfl_addrmodule(s->dwfl, w->prev_lookup_pc) != NULL)
        return fp_handoff(s, frame, i, pc, activation);
    return DWARF_CB_OK;
}

/* libdwfl gave up without our callback choosing a reason: tell a frame pointer chain that broke
 * (no CFI at the last pc) from memory we could not read and from CFI we could not apply. */
static enum unw_stop classify_failure(unw_space *s)
{
    struct unw_walk *w = &s->walk;
    if (w->mem_fail == UNW_MEM_FETCH_FAILED || w->mem_fail == UNW_MEM_CAPPED)
        return UNW_STOP_MEMORY;
    bool had_cfi = w->res->n_frames > 0 && unw_pc_has_cfi(s, w->prev_lookup_pc);
    if (!had_cfi)
        return UNW_STOP_NO_CFI;
    return w->mem_fail == UNW_MEM_OUT_OF_BOUNDS ? UNW_STOP_MEMORY : UNW_STOP_ERROR;
}

static void reset_walk(struct unw_walk *w, const struct unw_regs *regs,
                       const struct unw_memory *mem, int max_depth, struct unw_result *res)
{
    w->regs = regs;
    w->mem = mem;
    w->res = res;
    w->max_depth = max_depth;
    w->n_chunks = 0;
    w->next_victim = 0;
    w->mem_fail = UNW_MEM_OK;
    w->stopped = false;
    w->prev_sp_known = false;
    w->prev_activation = false;
    w->fp_pending = false;
    w->fp_resume = false;
    w->resuming = false;
    res->n_frames = 0;
    res->stop = UNW_STOP_ERROR;
    res->next_pc = 0;
    res->memory_fetches = 0;
    memset(&res->next_regs, 0, sizeof res->next_regs);
    res->next_regs_known = 0;
}

int unw_unwind(unw_space *s, const struct unw_regs *regs, const struct unw_memory *mem,
               int max_depth, struct unw_result *res, struct qp_error *err)
{
    if (s == NULL || regs == NULL || res == NULL || res->frames == NULL || max_depth <= 0)
        return qp_error_set(err, -EINVAL, "unw_unwind: bad arguments");
    static const struct unw_memory no_memory;
    struct unw_walk *w = &s->walk;
    reset_walk(w, regs, mem ? mem : &no_memory, max_depth, res);
    int rc = dwfl_getthread_frames(s->dwfl, 1, on_frame, s);
    /* The frame-pointer walk and libdwfl take turns: the first where a pc has no CFI, libdwfl
     * again from a caller whose pc has. Each turn adds frames, so max_depth bounds the turns. */
    while (w->fp_pending) {
        w->fp_pending = false;
        w->stopped = false;
        unw_fp_walk(s, &w->fp_regs, w->fp_activation);
        if (!w->fp_resume)
            break;
        w->fp_resume = false;
        w->resuming = true;
        w->resumed_first_seen = false;
        w->regs = &w->fp_regs;
        rc = dwfl_getthread_frames(s->dwfl, 1, on_frame, s);
    }
    w->resuming = false;
    /* libdwfl reports a return address it could not read like an undefined one (outermost),
     * so an end with a failed read in the last step is a memory stop. */
    if (!w->stopped)
        res->stop = rc == 0 && w->mem_fail == UNW_MEM_OK ? UNW_STOP_OUTERMOST : classify_failure(s);
    w->regs = NULL;
    w->mem = NULL;
    w->res = NULL;
    return 0;
}
