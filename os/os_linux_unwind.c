/* Kernel stacks, by ORC or frame pointers, and the plan a capturing target follows to take the
 * current task and the top of its stack at each sample's instant. */
#include "os_linux_internal.h"
#include "qp_log.h"

#include <errno.h>
#include <string.h>

size_t os_linux_kernel_stack_len(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                                 size_t max)
{
    (void)impl, (void)cpu, (void)t;
    return max;
}

int os_linux_user_regs(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                       const struct prof_os_mem *mem, struct unw_regs *out)
{
    (void)impl, (void)cpu, (void)t, (void)mem, (void)out;
    return -ENOENT; /* the ORC walk hands them over (kernel_unwind) */
}

_Static_assert(LX_GREGS <= UNW_NREGS, "linux/'s registers fit struct unw_regs");

static enum unw_stop stop_of(enum lx_unwind_end e)
{
    switch (e) {
    case LX_END_USER:
        return UNW_STOP_LEFT_SPACE;
    case LX_END_TASK_START:
        return UNW_STOP_OUTERMOST;
    case LX_END_NO_ORC:
    case LX_END_BAD_ORC:
    case LX_END_FP_BROKEN:
        return UNW_STOP_NO_CFI;
    case LX_END_UNREADABLE:
        return UNW_STOP_MEMORY;
    case LX_END_LOOP:
        return UNW_STOP_NOT_GROWING;
    case LX_END_DEPTH:
        return UNW_STOP_DEPTH;
    }
    return UNW_STOP_ERROR;
}

/* A kernel that keeps frame pointers (arm64): the chain from the live registers, which are in
 * DWARF numbering for these architectures as for lx_unwind_fp. */
struct stack_reader {
    const struct prof_os_mem *mem;
    const struct prof_vcpu *cpu;
};
static int stack_read(void *ctx, uint64_t kva, void *buf, size_t len);

/* A capturing target's sample: the frame records only from what it captured at the instant (the
 * stack from sp), never from memory the guest has rewritten since. */
static int fp_unwind(struct os_linux *l, const struct prof_vcpu *cpu, const struct prof_task *t,
                     const struct prof_os_mem *mem, struct prof_kstack *out)
{
    uint64_t live[LX_GREGS];
    struct lx_frame frames[PROF_KSTACK_MAX];
    struct lx_fp_result res;
    struct lx_fp_task task = {.stack_lo = t->kstack_lo,
                              .stack_hi = t->kstack_hi,
                              .pt_regs_size = l->have_offsets ? l->off.pt_regs_size : 0,
                              .kthread = t->state == PROF_TASK_KERNEL,
                              .has_trap_pc = cpu->has_exception_pc,
                              .trap_pc = cpu->exception_pc};
    struct stack_reader sr = {mem, cpu};
    if (mem && mem->captured && mem->read)
        task.read = stack_read, task.read_ctx = &sr;
    for (int i = 0; i < LX_GREGS && i < UNW_NREGS; i++)
        live[i] = cpu->regs.r[i];
    lx_unwind_fp(l->kernel, live, &task, frames, PROF_KSTACK_MAX, &res);
    out->n = res.n_frames;
    for (int i = 0; i < res.n_frames; i++)
        out->pc[i] = frames[i].pc, out->exact[i] = frames[i].exact;
    out->stop = stop_of(res.end);
    out->have_user_regs = res.have_user_regs;
    out->by_frame_pointers = true;
    if (res.have_user_regs) {
        memset(&out->user_regs, 0, sizeof out->user_regs);
        for (int i = 0; i < LX_GREGS && i < UNW_NREGS; i++)
            out->user_regs.r[i] = res.user_regs[i];
    }
    return 0;
}

/* The kernel stack of a captured sample: only what the target captured at its instant (the
 * stack from sp, the top of the task's stack); a frame beyond it ends the walk, marked, rather
 * than be read from memory the guest has rewritten since. */
static int stack_read(void *ctx, uint64_t kva, void *buf, size_t len)
{
    const struct stack_reader *u = ctx;
    size_t got = 0;
    int rc = u->mem->read(u->mem->ctx, u->cpu, kva, buf, len, &got);
    return rc ? rc : got == len ? 0 : -EFAULT;
}

int os_linux_kernel_unwind(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                           const struct prof_os_mem *mem, struct prof_kstack *out)
{
    struct os_linux *l = impl;
    if (!l->kernel || cpu->user)
        return -ENOTSUP;
    if (lx_kernel_unwinds_by_fp(l->kernel))
        return fp_unwind(l, cpu, t, mem, out);
    if (!lx_kernel_orc_entries(l->kernel))
        return -ENOTSUP;
    struct lx_pt_regs live;
    struct lx_frame frames[PROF_KSTACK_MAX];
    struct lx_unwind_result res;
    if (lx_kernel_regs_to_pt(l->kernel, cpu->regs.r, &live))
        return -ENOTSUP;
    struct stack_reader sr = {mem, cpu};
    if (mem && mem->captured && mem->read)
        lx_unwind_from(l->kernel, &live, stack_read, &sr, frames, PROF_KSTACK_MAX, &res);
    else
        lx_unwind(l->kernel, &live, frames, PROF_KSTACK_MAX, &res);
    out->n = res.n_frames;
    for (int i = 0; i < res.n_frames; i++)
        out->pc[i] = frames[i].pc, out->exact[i] = frames[i].exact;
    out->stop = stop_of(res.end);
    /* Module text that no module read so far covers: one loaded since (read again soon). */
    uint64_t last = res.n_frames ? frames[res.n_frames - 1].pc : 0;
    if (res.end == LX_END_NO_ORC && last >= l->mod_off.area_start && last < l->mod_off.area_end &&
        !lx_modules_find(l->mods, last))
        l->modules_stale = true;
    out->have_user_regs = res.have_user_regs;
    if (res.have_user_regs) {
        memset(&out->user_regs, 0, sizeof out->user_regs);
        lx_kernel_regs_from_pt(l->kernel, &res.user_regs, out->user_regs.r);
        if (res.user_regs_partial) { /* an iret frame only: the rest are still live */
            const struct prof_arch *a = l->cfg.arch;
            struct unw_regs live_u = cpu->regs;
            live_u.r[a->pc_reg] = out->user_regs.r[a->pc_reg];
            live_u.r[a->sp_reg] = out->user_regs.r[a->sp_reg];
            out->user_regs = live_u;
        }
    }
    return 0;
}

/* The top of the task's kernel stack a capturing target takes: the user registers saved at
 * entry (pt_regs) and the frames below them, for samples whose sp is on another stack (an
 * interrupt's), whose walk comes back to the task's. */
#define STACK_TOP_CAPTURE 4096u

/* What a capturing target takes at each sample for os_linux_read_task and the ORC walk: the per-CPU
 * this_cpu_off (lx_current_task's check) and current_task words, the task_struct span
 * lx_task_read reads, the top of that task's stack, and the run queue's curr word
 * (take_incoming_task). */
uint64_t os_linux_capture_plan(void *impl, struct prof_capture_plan *out)
{
    struct os_linux *l = impl;
    /* a kernel that keeps the current task in a register needs none: the capture has it */
    uint32_t iret_off;
    if (!l->kernel || !l->have_offsets || !lx_kernel_current_in_percpu(l->kernel, &iret_off))
        return l->plan_gen * 2; /* none (a change from a plan sent before) */
    uint32_t lo, hi;
    lx_task_span(&l->off, &lo, &hi);
    if (hi - lo + 24 > PROF_CAPTURE_BYTES)
        return l->plan_gen * 2;
    uint32_t top = PROF_CAPTURE_BYTES - 24 - (hi - lo);
    if (top > STACK_TOP_CAPTURE)
        top = STACK_TOP_CAPTURE;
    int64_t area = (int64_t)l->off.percpu_start;
    out->n = 4;
    out->w[0] = (struct prof_capture_window){.base = PROF_CAPTURE_KERNEL_PERCPU,
                                             .add = area + (int64_t)l->off.percpu_this_cpu_off,
                                             .len = 8};
    out->w[1] = (struct prof_capture_window){.base = PROF_CAPTURE_KERNEL_PERCPU,
                                             .add = area + (int64_t)l->off.percpu_current_task,
                                             .len = 8};
    out->w[2] = (struct prof_capture_window){
        .base = PROF_CAPTURE_POINTER, .from = 1, .from_off = 0, .add = lo, .len = hi - lo};
    out->w[3] = (struct prof_capture_window){.base = PROF_CAPTURE_POINTER,
                                             .from = 2,
                                             .from_off = l->off.task_stack - lo,
                                             .add = THREAD_SIZE - top,
                                             .len = top};
    /* the pt_regs at the stack's top: the user stack of a system call or interrupt */
    out->user_frame_window = 4;
    out->user_frame_off = top - l->off.pt_regs_size + iret_off;
    /* rq->curr: which task a sample in the middle of a context switch belongs to */
    if (l->off.has_rq_curr)
        out->w[out->n++] = (struct prof_capture_window){
            .base = PROF_CAPTURE_KERNEL_PERCPU,
            .add = area + (int64_t)(l->off.percpu_runqueues + l->off.rq_curr),
            .len = 8};
    return l->plan_gen * 2 + 1;
}

const sym_table *os_linux_kernel_symbols(void *impl)
{
    const struct os_linux *l = impl;
    return l->syms;
}
