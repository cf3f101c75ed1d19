/* Kernel stacks by frame pointers (an architecture table's struct lx_fp_arch): the frame record
 * chain from the live fp, across exception entries inside the kernel (their pt_regs hold a frame
 * record of the interrupted code) to the record in the task's own pt_regs at the top of its
 * stack, where an entry from user mode left the user registers. */
#include "lx_internal.h"
#include "lx_task.h"

#include <string.h>

#define PT_REGS_MAX 512 /* more than any architecture's struct pt_regs */

/* The start of the symbol holding addr (a function's, for text): 0 when none. */
static uint64_t symbol_below(const struct lx_symbol *syms, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first symbol above addr */
        size_t mid = lo + (hi - lo) / 2;
        if (syms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? syms[lo - 1].addr : 0;
}

/* The module area vmcoreinfo names (none when it names none). */
static bool in_module_area(const lx_kernel *k, uint64_t a)
{
    return k->vi.modules_end > k->vi.modules_vaddr && a >= k->vi.modules_vaddr &&
           a < k->vi.modules_end;
}

/* Where addr's function starts; 0 when unknown. Module text is looked up in the modules'
 * symbols: by vmlinux's alone every module address fell to one "function" (on arm64, below
 * the image, none at all), so a module leaf in its prologue hid its module caller. */
static uint64_t function_of(const lx_kernel *k, uint64_t addr)
{
    if (in_module_area(k, addr))
        return symbol_below(k->mod_syms, k->n_mod_syms, addr);
    return symbol_below(k->syms, k->n_syms, addr);
}

/* Kernel code: vmlinux's text (_stext.._etext) or the module area vmcoreinfo names; any
 * kernel address when kallsyms lacks the bounds. A stack or data address is never a frame. */
static bool is_code(const lx_kernel *k, uint64_t a)
{
    uint64_t lo, hi;
    if (!lx_is_kernel_addr(a))
        return false;
    if (in_module_area(k, a))
        return true;
    if (lx_kernel_symbol_addr(k, "_stext", &lo) || lx_kernel_symbol_addr(k, "_etext", &hi))
        return true;
    return a >= lo && a < hi;
}

/* A return address as the caller's code address: pointer-authentication bits cleared. */
static uint64_t strip(const lx_kernel *k, uint64_t ra)
{
    return k->vi.pac_mask && is_code(k, ra | k->vi.pac_mask) ? ra | k->vi.pac_mask : ra;
}

static bool in_task_stack(const struct lx_fp_task *t, uint64_t a)
{
    return t->stack_hi && a >= t->stack_lo && a < t->stack_hi;
}

/* The size the pt_regs take on the stack. */
static uint64_t regs_size(const struct lx_fp_arch *a, const struct lx_fp_task *t)
{
    uint64_t align = a->pt_regs_align ? a->pt_regs_align : 1;
    return (t->pt_regs_size + align - 1) / align * align;
}

/* The frame pointer reached the pt_regs at the top of the task's stack (arm64: the record the
 * entry code put inside them; riscv64: the first handler's frame pointer, their address): the
 * chain's end. */
static bool at_task_pt_regs(const struct lx_fp_arch *a, const struct lx_fp_task *t, uint64_t fp)
{
    return t->stack_hi && t->pt_regs_size && t->stack_hi - t->stack_lo > regs_size(a, t) &&
           fp >= t->stack_hi - regs_size(a, t) && fp < t->stack_hi;
}

/* A word of the walked stack: through the task's reader (a capture of the sample's instant),
 * else from the kernel's memory, which holds still while the guest is stopped. */
static int stack_word(lx_kernel *k, const struct lx_fp_task *t, uint64_t addr, void *buf,
                      size_t len)
{
    return t->read ? t->read(t->read_ctx, addr, buf, len) : lx_kernel_read(k, addr, buf, len);
}

/* The registers an exception taken in the kernel saved, as the walk goes on from them. */
struct interrupted {
    uint64_t pc, lr, fp;
};

/* Whether the record at fp (next: its saved frame pointer, ra_raw: its return address) is the
 * one an exception taken in the kernel left (see struct lx_fp_arch), *in what it interrupted
 * when so. Its pt_regs must agree: the saved stack pointer lies right above them (the kernel's
 * stack was not switched), the saved pc is kernel code; arm64's record is the interrupted pc
 * and fp, riscv64's handler was entered with the interrupted sp as its frame pointer. */
static bool exception_record(lx_kernel *k, const struct lx_fp_task *t, uint64_t fp, uint64_t next,
                             uint64_t ra_raw, struct interrupted *in)
{
    const struct lx_fp_arch *a = k->arch->fp;
    uint64_t regs = fp + (uint64_t)(int64_t)a->regs_at, saved_sp;
    if (!t->pt_regs_size || !lx_is_kernel_addr(regs) ||
        stack_word(k, t, regs + (uint64_t)a->regs_pc_off, &in->pc, 8) ||
        stack_word(k, t, regs + 8 * (uint64_t)a->fp_reg, &in->fp, 8) ||
        stack_word(k, t, regs + 8 * (uint64_t)a->sp_reg, &saved_sp, 8) ||
        stack_word(k, t, regs + 8 * (uint64_t)a->lr_reg, &in->lr, 8))
        return false;
    if (saved_sp != regs + regs_size(a, t) || !is_code(k, in->pc))
        return false;
    in->lr = strip(k, in->lr);
    return a->record_is_interrupted ? in->pc == ra_raw && in->fp == next : next == saved_sp;
}

static void end_at_pt_regs(lx_kernel *k, const struct lx_fp_task *t, struct lx_fp_result *out)
{
    const struct lx_fp_arch *a = k->arch->fp;
    uint8_t buf[PT_REGS_MAX];
    out->end = LX_END_TASK_START;
    if (t->kthread || a->pt_regs_min > sizeof buf || t->pt_regs_size < a->pt_regs_min)
        return;
    if (stack_word(k, t, t->stack_hi - regs_size(a, t), buf, a->pt_regs_min) != 0) {
        out->end = LX_END_UNREADABLE;
        return;
    }
    if (a->user_regs(buf, a->pt_regs_min, out->user_regs)) {
        out->end = LX_END_USER;
        out->have_user_regs = true;
    }
}

static bool push(struct lx_frame *frames, int max, struct lx_fp_result *out, uint64_t pc,
                 bool exact)
{
    if (out->n_frames >= max) {
        out->end = LX_END_DEPTH;
        return false;
    }
    frames[out->n_frames++] = (struct lx_frame){pc, exact};
    return true;
}

void lx_unwind_fp(lx_kernel *k, const uint64_t live[LX_GREGS], const struct lx_fp_task *task,
                  struct lx_frame *frames, int max, struct lx_fp_result *out)
{
    const struct lx_fp_arch *a = k->arch->fp;
    memset(out, 0, sizeof *out);
    out->end = LX_END_FP_BROKEN;
    if (!a || !push(frames, max, out, live[a->pc_reg], true))
        return;
    uint64_t fp = live[a->fp_reg], lr = strip(k, live[a->lr_reg]), leaf_pc = frames[0].pc;
    uint64_t entry_lo, entry_hi;
    if (lx_kernel_symbol_addr(k, a->entry_start, &entry_lo) == 0 &&
        lx_kernel_symbol_addr(k, a->entry_end, &entry_hi) == 0 && leaf_pc >= entry_lo &&
        leaf_pc < entry_hi) {
        /* In the entry code the frame pointer is not the chain's: the stack ends here
         * (LX_END_FP_BROKEN), unless this is a vector's first instruction and the trap pc
         * register says where the exception came from. */
        uint64_t vec;
        if (!task->has_trap_pc || lx_kernel_symbol_addr(k, a->vectors, &vec) || leaf_pc < vec ||
            leaf_pc >= vec + (uint64_t)a->vector_slots * a->vector_stride ||
            (leaf_pc - vec) % a->vector_stride)
            return;
        if (!lx_is_kernel_addr(task->trap_pc)) {
            memcpy(out->user_regs, live, sizeof out->user_regs);
            out->user_regs[a->pc_reg] = task->trap_pc;
            out->have_user_regs = true;
            out->end = LX_END_USER;
            return;
        }
        if (!push(frames, max, out, task->trap_pc, true))
            return;
        leaf_pc = task->trap_pc;
    }
    bool first = true;
    for (;;) {
        if (at_task_pt_regs(a, task, fp)) {
            /* riscv64: the first handler's record lies below the pt_regs; its return address
             * is the entry code's (handle_exception). */
            uint64_t entry;
            if (fp + (uint64_t)a->saved_ra < task->stack_hi - regs_size(a, task) &&
                stack_word(k, task, fp + (uint64_t)a->saved_ra, &entry, 8) == 0 &&
                is_code(k, strip(k, entry)) && !push(frames, max, out, strip(k, entry), false))
                return;
            end_at_pt_regs(k, task, out);
            return;
        }
        uint64_t rec[2];
        if (!lx_is_kernel_addr(fp) || (fp & 7)) {
            out->end = LX_END_FP_BROKEN;
            return;
        }
        if (stack_word(k, task, fp + (uint64_t)a->saved_fp, &rec[0], 8) ||
            stack_word(k, task, fp + (uint64_t)a->saved_ra, &rec[1], 8)) {
            out->end = LX_END_UNREADABLE;
            return;
        }
        uint64_t next = rec[0], ra = strip(k, rec[1]);
        /* A leaf that saved no frame record yet (or never does: assembly helpers) is called
         * from the function lr returns into, which the record at fp skips. */
        if (first && is_code(k, lr) && function_of(k, lr) != function_of(k, leaf_pc) &&
            function_of(k, lr) != function_of(k, ra) && !push(frames, max, out, lr, false))
            return;
        first = false;
        if (!ra || !is_code(k, ra)) {
            out->end = LX_END_FP_BROKEN;
            return;
        }
        /* The record of an exception taken in the kernel: the interrupted instruction is a frame
         * of its own (exact), whose function may be a leaf like the live pc's (its caller in the
         * saved link register). */
        struct interrupted in;
        bool exception = exception_record(k, task, fp, next, rec[1], &in);
        bool ra_is_pc = exception && a->record_is_interrupted;
        if (!push(frames, max, out, ra, ra_is_pc))
            return;
        if (exception && !ra_is_pc && !push(frames, max, out, in.pc, true))
            return;
        if (exception)
            first = true, leaf_pc = in.pc, lr = in.lr, next = in.fp;
        /* Records lie ever higher on one stack; the one exception is the hop from an interrupt
         * stack back to the task's. */
        if (next <= fp && !(in_task_stack(task, next) && !in_task_stack(task, fp))) {
            out->end = LX_END_LOOP;
            return;
        }
        fp = next;
    }
}
