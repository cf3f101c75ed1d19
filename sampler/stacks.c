/* Turning a captured vCPU into a named stack: unwinding from the copied windows, crossing from
 * kernel into user frames through the register frame the OS adapter found, symbolizing,
 * folding. Runs after the guest has resumed. */
#include "stacks.h"

#include "model.h"
#include "skid.h"
#include "qp_log.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>

struct prof_stack_builder {
    struct prof_stack_config cfg;
    prof_modules *modules; /* borrowed */
    struct prof_stack_counters counters;
    struct unw_frame *frames;  /* cfg.max_depth scratch entries */
    uint32_t *frame_modules;   /* cfg.max_depth scratch entries: a user walk's modules */
    unw_space *fallback_space; /* user code without tables: frame pointers only */
};

prof_stack_builder *prof_stack_builder_new(const struct prof_stack_config *cfg,
                                           prof_modules *modules)
{
    prof_stack_builder *sb = g_new0(prof_stack_builder, 1);
    sb->cfg = *cfg;
    sb->modules = modules;
    sb->frames = g_new(struct unw_frame, cfg->max_depth > 0 ? cfg->max_depth : 1);
    sb->frame_modules = g_new(uint32_t, cfg->max_depth > 0 ? cfg->max_depth : 1);
    return sb;
}

const struct prof_stack_counters *prof_stack_builder_counters(const prof_stack_builder *sb)
{
    return &sb->counters;
}

void prof_stack_builder_free(prof_stack_builder *sb)
{
    if (!sb)
        return;
    unw_space_free(sb->fallback_space);
    g_free(sb->frame_modules);
    g_free(sb->frames);
    g_free(sb);
}

struct window {
    uint64_t addr;
    const uint8_t *bytes;
    size_t len;
};

/* Serves reads from the window copied while the guest was stopped; memory outside it has
 * changed since, so the walk must end there instead. */
static int window_read(void *ctx, uint64_t addr, void *buf, size_t len, size_t *got)
{
    const struct window *w = ctx;
    *got = 0;
    if (addr < w->addr || addr - w->addr >= w->len)
        return -EFAULT;
    size_t off = addr - w->addr, avail = w->len - off;
    *got = len < avail ? len : avail;
    memcpy(buf, w->bytes + off, *got);
    return 0;
}

/* Walks one stack into sb->frames; returns the number of frames and sets *stop (and *res_out
 * when not NULL). */
static int walk_full(prof_stack_builder *sb, unw_space *space, const struct unw_regs *regs,
                     const struct window *w, enum unw_stop *stop, struct unw_result *res_out)
{
    struct unw_memory mem = {
        .read = window_read,
        .ctx = (void *)w,
        .snapshot_addr = w->addr,
        .snapshot = w->bytes,
        .snapshot_len = w->len,
        .stack_lo = w->addr,
        .stack_hi = w->addr + w->len,
    };
    struct unw_result res = {.frames = sb->frames};
    struct qp_error err = {0};
    if (unw_unwind(space, regs, &mem, sb->cfg.max_depth, &res, &err) != 0) {
        *stop = UNW_STOP_ERROR;
        if (sb->cfg.verbose)
            qp_log(QP_LOG_INFO, "unwinding failed: %s", err.msg);
        return 0;
    }
    *stop = res.stop;
    if (res_out)
        *res_out = res;
    return res.n_frames;
}

static int walk(prof_stack_builder *sb, unw_space *space, const struct unw_regs *regs,
                const struct window *w, enum unw_stop *stop)
{
    return walk_full(sb, space, regs, w, stop, NULL);
}

/* An empty space unwinds by frame pointers only: for code we have no tables for. */
static unw_space *fallback_user_space(prof_stack_builder *sb)
{
    if (!sb->fallback_space)
        unw_space_new(sb->cfg.arch->unwind, "user", 0, sb->cfg.arch->split.user_end,
                      &sb->fallback_space, NULL);
    return sb->fallback_space;
}

static struct out_frame *push_frame(struct prof_stack *st)
{
    if (st->sample.n_frames == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 64;
        st->frames = g_renew(struct out_frame, st->frames, st->cap);
    }
    return &st->frames[st->sample.n_frames++];
}

/* Appends frames[n-1] .. frames[0] (outermost first) of one walk, in module `module`. */
static void append_walk(prof_stack_builder *sb, struct prof_stack *st, int n, enum unw_stop stop,
                        bool kernel, uint32_t module)
{
    if (unw_stop_is_truncation(stop))
        sb->counters.truncated[stop]++;
    for (int i = n - 1; i >= 0; i--)
        *push_frame(st) = (struct out_frame){.pc = sb->frames[i].pc,
                                             .module = module,
                                             .exact = sb->frames[i].activation || !sb->frames[i].pc,
                                             .kernel = kernel};
}

static void set_process(const struct cpu_capture *c, struct out_sample *o)
{
    const struct prof_task *t = &c->task;
    if (t->known && (t->state == PROF_TASK_USER || t->state == PROF_TASK_KERNEL) &&
        (t->pid || t->comm[0])) {
        o->pid = t->pid;
        g_strlcpy(o->comm, t->comm[0] ? t->comm : "?", sizeof o->comm);
    } else if (!t->known && c->as_label) {
        g_strlcpy(o->comm, c->as_label, sizeof o->comm); /* pid 0: an address space's label */
    }
    o->mode = c->vcpu.user ? OUT_MODE_USER : OUT_MODE_KERNEL;
}

/* The module of a user pc in a mapping nothing verified: "file+0xFILE_OFFSET", made when a
 * stack first needs it. */
static uint32_t unverified_module(prof_stack_builder *sb, const struct prof_map *m)
{
    return prof_modules_for_mapping(sb->modules, &m->vma);
}

/* The module of frame i at pc in a strict space, and whether the walk may go on past it. */
static bool frame_module(prof_stack_builder *sb, const struct cpu_capture *c, int i, uint64_t pc,
                         uint32_t *module)
{
    const struct prof_map *m = prof_space_find(c->space, pc);
    if (m && m->trusted) {
        *module = m->bin.module;
        return true;
    }
    *module = m && m->named ? m->bin.module
              : m           ? unverified_module(sb, m)
              : i == 0      ? c->leaf_module
                            : OUT_NO_MODULE;
    return false;
}

/* A strict space (the OS's mappings, each file verified or not) keeps the frames of a walk that
 * are known right: each pc in a trusted mapping gets its binary's module; the first pc outside
 * them is kept, named by its mapping (or the mapped file's .dynsym), and ends the walk marked
 * (what lies beyond it came from no CFI we trust); a frame the unwinder found by frame pointers
 * is dropped and ends it. Returns the frames kept. */
static int keep_trusted(prof_stack_builder *sb, const struct cpu_capture *c, int n,
                        enum unw_stop *stop)
{
    for (int i = 0; i < n; i++) {
        const struct unw_frame *f = &sb->frames[i];
        if (i > 0 && f->method == UNW_BY_FP) {
            *stop = UNW_STOP_NO_CFI;
            return i;
        }
        if (!frame_module(sb, c, i, f->activation ? f->pc : f->pc - 1, &sb->frame_modules[i])) {
            *stop = UNW_STOP_NO_CFI;
            return i + 1;
        }
    }
    return n;
}

/* Any other space: the whole walk is in the leaf's binary, as its tables say. A caller the
 * frame-pointer chain gave at a pc no known mapping of the space covers is no frame at all (a
 * teaching OS's first user frame saves whatever ra and s0 exec left, and the chain runs on
 * through them into made-up addresses such as 0x100000000000): the walk ends before it,
 * marked. Returns the frames kept. */
static int keep_leaf_binary(prof_stack_builder *sb, const prof_space *as,
                            const struct prof_map *leaf, int n, enum unw_stop *stop)
{
    uint32_t module = leaf && leaf->known ? leaf->bin.module : OUT_NO_MODULE;
    for (int i = 0; i < n; i++) {
        const struct unw_frame *f = &sb->frames[i];
        if (i > 0 && leaf && leaf->known && f->method == UNW_BY_FP) {
            const struct prof_map *m = prof_space_find(as, f->activation ? f->pc : f->pc - 1);
            if (!m || !m->known) {
                *stop = UNW_STOP_NO_CFI;
                return i;
            }
        }
        sb->frame_modules[i] = module;
    }
    return n;
}

/* Which user stacks had which files' tables (stacks by --sysroot's, by the guest's copies). */
static void count_user_stack(prof_stack_builder *sb, const prof_space *as, enum unw_stop stop)
{
    bool complete = !unw_stop_is_truncation(stop);
    if (!prof_space_strict(as))
        return;
    if (prof_space_count(as, PROF_IDENT_BUILD_ID)) {
        sb->counters.sysroot_stacks++;
        sb->counters.sysroot_stacks_complete += complete;
    } else if (prof_space_count(as, PROF_IDENT_GUEST_COPY)) {
        sb->counters.memory_stacks++;
        sb->counters.memory_stacks_complete += complete;
    }
}

/* The tables to walk with: the space's own when it has them (a strict space has no others),
 * else the leaf binary's, else frame pointers alone. */
static unw_space *user_unwind(prof_stack_builder *sb, const prof_space *as,
                              const struct prof_map *leaf)
{
    if (prof_space_unwind(as) || prof_space_strict(as))
        return prof_space_unwind(as);
    return leaf && leaf->known && leaf->bin.unwind ? leaf->bin.unwind : fallback_user_space(sb);
}

/* The user stack at regs, as the model says of c->space: one path for every way user code
 * was identified. */
static void user_part(prof_stack_builder *sb, struct cpu_capture *c, const struct unw_regs *regs,
                      struct prof_stack *st)
{
    const prof_space *as = c->space;
    uint64_t pc = regs->r[sb->cfg.arch->pc_reg];
    const struct prof_map *leaf = prof_space_find(as, pc);
    enum unw_stop stop = UNW_STOP_ERROR;
    int n = 0;
    if (c->task.user_leaf_only && !(leaf && leaf->known)) {
        /* No tables for this code, and guessing by frame pointers would invent callers. The
         * leaf is named by its mapping when the OS told us it ("busybox+0x1a2b3"). */
        stop = UNW_STOP_NO_CFI;
        sb->frames[0] = (struct unw_frame){.pc = pc, .activation = true};
        sb->frame_modules[0] = c->leaf_module;
        n = 1;
    } else {
        struct window w = {c->ustack_addr, c->ustack, c->ustack_len};
        unw_space *space = user_unwind(sb, as, leaf);
        n = space ? walk(sb, space, regs, &w, &stop) : 0;
        if (n == 0 && prof_space_strict(as)) {
            /* not even the leaf: show it as the leaf-only mode does */
            sb->frames[0] = (struct unw_frame){.pc = pc, .activation = true};
            n = 1;
        }
        if (prof_space_strict(as))
            n = keep_trusted(sb, c, n, &stop);
        else
            n = keep_leaf_binary(sb, as, leaf, n, &stop);
        count_user_stack(sb, as, stop);
    }
    st->sample.user_stop = stop;
    if (unw_stop_is_truncation(stop))
        sb->counters.truncated[stop]++;
    for (int i = n - 1; i >= 0; i--)
        *push_frame(st) = (struct out_frame){.pc = sb->frames[i].pc,
                                             .module = sb->frame_modules[i],
                                             .exact = sb->frames[i].activation || !sb->frames[i].pc,
                                             .kernel = false};
    st->sample.n_user = st->sample.n_frames;
}

bool prof_recover_user_regs(prof_stack_builder *sb, struct cpu_capture *c)
{
    const struct unw_regs *regs = &c->vcpu.regs;
    struct unw_result res;
    enum unw_stop stop;
    struct window w = {c->kstack_addr, c->kstack, c->kstack_len};
    const uint64_t need =
        (UINT64_C(1) << sb->cfg.arch->sp_reg) | (UINT64_C(1) << sb->cfg.arch->pc_reg);
    walk_full(sb, sb->cfg.kernel_space, regs, &w, &stop, &res);
    if (stop != UNW_STOP_LEFT_SPACE || (res.next_regs_known & need) != need ||
        res.next_regs.r[sb->cfg.arch->pc_reg] >= sb->cfg.arch->split.user_end)
        return false;
    c->entry_regs = res.next_regs;
    /* Registers the entry CFI does not mention still hold the user values (the stub has not
     * touched them yet); the ones it recovered replace them. */
    for (int r = 0; r < UNW_NREGS; r++)
        if (!(res.next_regs_known & (UINT64_C(1) << r)))
            c->entry_regs.r[r] = regs->r[r];
    c->have_entry_regs = true;
    return true;
}

bool prof_recover_unsaved_entry(prof_stack_builder *sb, struct cpu_capture *c)
{
    struct sym_info info;
    uint64_t pc = c->vcpu.regs.r[sb->cfg.arch->pc_reg];
    if (!sb->cfg.kernel_syms || sym_lookup(sb->cfg.kernel_syms, pc, &info) != 0 || info.start != pc)
        return false;
    return prof_recover_user_regs(sb, c);
}

/* How a stop that QEMU took late shows (docs/accuracy.md, "TCG and the moment of a sample"): a
 * kernel walk of one frame, on the first instruction of a kernel function, entered from user space.
 */
static bool at_kernel_entry(const prof_stack_builder *sb, int n, enum unw_stop stop)
{
    struct sym_info info;
    return n == 1 && stop == UNW_STOP_LEFT_SPACE && sb->cfg.kernel_syms &&
           sym_lookup(sb->cfg.kernel_syms, sb->frames[0].pc, &info) == 0 &&
           info.start == sb->frames[0].pc;
}

/* The same before the stack is built (skid.h): on the first instruction of a kernel function,
 * whose walk leaves the kernel in one frame. (A walk from the first instruction of a function
 * a system call's work called leaves it too, frames later: not an entry.) */
static bool at_entry_from_user(prof_stack_builder *sb, const struct cpu_capture *c)
{
    struct sym_info info;
    if (c->vcpu.user || !c->have_entry_regs || !sb->cfg.kernel_syms ||
        sym_lookup(sb->cfg.kernel_syms, c->vcpu.pc, &info) != 0 || info.start != c->vcpu.pc)
        return false;
    struct window w = {c->kstack_addr, c->kstack, c->kstack_len};
    enum unw_stop stop;
    struct unw_result res = {0};
    int n = walk_full(sb, sb->cfg.kernel_space, &c->vcpu.regs, &w, &stop, &res);
    return at_kernel_entry(sb, n, stop);
}

static void kernel_part(prof_stack_builder *sb, struct cpu_capture *c, struct prof_stack *st)
{
    if (c->have_trap)
        user_part(sb, c, &c->trap, st);
    else if (c->have_entry_regs)
        user_part(sb, c, &c->entry_regs, st);
    if (c->have_kstack) {
        const struct prof_kstack *k = &c->kst;
        st->sample.kernel_stop = k->stop;
        if (unw_stop_is_truncation(k->stop))
            sb->counters.truncated[k->stop]++;
        sb->counters.kernel_stacks++;
        sb->counters.kernel_stacks_complete += !unw_stop_is_truncation(k->stop);
        sb->counters.kernel_stacks_by_fp += k->by_frame_pointers;
        for (int i = k->n - 1; i >= 0; i--)
            *push_frame(st) = (struct out_frame){.pc = k->pc[i],
                                                 .module = prof_modules_kernel(sb->modules),
                                                 .exact = k->exact[i],
                                                 .kernel = true};
        return;
    }
    struct window w = {c->kstack_addr, c->kstack, c->kstack_len};
    enum unw_stop stop;
    struct unw_result res = {0};
    int n = walk_full(sb, sb->cfg.kernel_space, &c->vcpu.regs, &w, &stop, &res);
    /* Stepping out of the kernel half is where a system call or interrupt entered; it is only a
     * proper end when we know which user frames follow, or there are none: an entry from user
     * code whose user stack was not captured (or not this stack's) leaves the user part
     * missing, which the stack says. */
    st->sample.kernel_stop = stop;
    append_walk(sb, st, n, stop, true, prof_modules_kernel(sb->modules));
    /* A process's kernel-mode sample in the kernel's own table (capture_aspace): it came from
     * user code, whose registers nothing here leads to, however this walk ended. */
    bool user_unknown = c->as_lent && !c->have_trap && !c->have_entry_regs;
    if (user_unknown || (stop == UNW_STOP_LEFT_SPACE && !c->have_trap && !c->have_entry_regs &&
                         res.next_pc < sb->cfg.arch->split.user_end)) {
        st->sample.user_stop = UNW_STOP_MEMORY;
        sb->counters.truncated[UNW_STOP_MEMORY]++;
    }
    if (at_kernel_entry(sb, n, stop)) {
        sb->counters.at_kernel_entry++;
        st->at_kernel_entry = true;
        /* late by its flag's age, but without the user registers to place it: left, marked */
        sb->counters.skid_unplaced += prof_skid_aged(c);
    }
}

void prof_build_stack(prof_stack_builder *sb, struct cpu_capture *c, int i, struct prof_stack *st)
{
    st->cpu = i;
    st->skipped = false;
    st->skip_reason = NULL;
    st->at_kernel_entry = false;
    st->sample = (struct out_sample){.cpu = (uint32_t)(c->vcpu.index > 0 ? c->vcpu.index : i),
                                     .user_stop = UNW_STOP_OUTERMOST,
                                     .kernel_stop = UNW_STOP_OUTERMOST};
    if (c->selected && !c->vcpu.paging64 && !c->vcpu.halted) {
        /* Running, but not yet (or no longer, after a reset) in the 64-bit kernel: firmware or
         * the guest's early boot code. A real sample of where the time went, without a stack
         * qprof can unwind. (A vCPU the guest never started waits halted.) */
        st->sample.mode = OUT_MODE_BOOT;
        return;
    }
    if (!c->selected || !c->started) {
        st->skipped = true;
        st->skip_reason = c->selected ? "not started by the guest" : "not selected (--cpus)";
        return;
    }
    if (c->vcpu.halted) {
        st->sample.mode = OUT_MODE_IDLE;
        return;
    }
    set_process(c, &st->sample);
    if (!c->task.known)
        sb->counters.no_process_info++;
    bool timed = c->vcpu.flag_trigger != PROF_FLAG_NONE;
    if (prof_skid_check(timed && at_entry_from_user(sb, c), c, &sb->counters) == PROF_SKID_MOVED) {
        st->sample.mode = OUT_MODE_USER; /* where the entry interrupted it */
        user_part(sb, c, &c->entry_regs, st);
    } else if (c->vcpu.user) {
        user_part(sb, c, &c->vcpu.regs, st);
    } else {
        kernel_part(sb, c, st);
    }
    st->sample.frames = st->frames;
}

void prof_stack_free(struct prof_stack *st)
{
    g_free(st->frames);
    st->frames = NULL;
    st->cap = 0;
}

/* ---- --one-shot: one stack per vCPU, eu-stack style ----------------------------------------- */

static const char *mode_text(const struct cpu_capture *c, const struct out_sample *o)
{
    if (o->mode == OUT_MODE_IDLE)
        return "halted (idle)";
    if (o->mode == OUT_MODE_BOOT)
        return "without 64-bit paging (firmware or early boot)";
    if (o->mode == OUT_MODE_USER)
        return "user mode";
    return c->have_trap || c->have_entry_regs ? "kernel mode, entered from user mode"
                                              : "kernel mode";
}

static void print_frame(const struct out_name *f, int index, bool show_addresses, FILE *out)
{
    fprintf(out, "  #%-3d", index);
    if (show_addresses)
        fprintf(out, " 0x%016" PRIx64, f->pc);
    if (f->has_symbol)
        fprintf(out, " %s+0x%" PRIx64, f->name, f->offset);
    else
        fprintf(out, " %s", f->name);
    if (f->module[0])
        fprintf(out, " [%s]", f->module);
    fputc('\n', out);
}

/* Innermost first, like eu-stack and gdb. The truncation marker of a walk stands where the walk
 * ended, with the reason. The header names the program counter "pc", as gdb's $pc does on every
 * architecture (it said RIP on riscv64 and aarch64 too). */
void prof_stack_print(const struct cpu_capture *c, out_names *names, const struct prof_stack *st,
                      bool show_addresses, FILE *out)
{
    fprintf(out, "vCPU %d: ", st->cpu);
    if (st->skipped) {
        fprintf(out, "%s\n", st->skip_reason);
        return;
    }
    struct out_stack as_stack = {.pid = st->sample.pid,
                                 .mode = st->sample.mode,
                                 .user_stop = st->sample.user_stop,
                                 .kernel_stop = st->sample.kernel_stop,
                                 .n_frames = st->sample.n_frames,
                                 .n_user = st->sample.n_user,
                                 .frames = st->sample.frames};
    g_strlcpy(as_stack.comm, st->sample.comm, sizeof as_stack.comm);
    char root[64];
    /* moved off a kernel entry (skid.h): the stack and its pc are the interrupted context's */
    bool moved = !c->vcpu.user && st->sample.mode == OUT_MODE_USER && st->sample.n_frames > 0;
    uint64_t pc = moved ? st->sample.frames[st->sample.n_frames - 1].pc : c->vcpu.pc;
    fprintf(out, "%s, %s, pc 0x%016" PRIx64, out_stack_root(&as_stack, root, sizeof root),
            mode_text(c, &st->sample), pc);
    if (moved)
        fprintf(out, " (its sample waited across a kernel entry, taken at 0x%016" PRIx64 ")",
                c->vcpu.pc);
    fputc('\n', out);
    int len = out_stack_display_len(&as_stack);
    const struct out_name **shown = g_new(const struct out_name *, len ? len : 1);
    out_stack_display(names, &as_stack, shown);
    int index = 0;
    for (int i = len - 1; i >= 0; i--) {
        const struct out_name *f = shown[i];
        if (f->marker) {
            enum unw_stop why = f->kernel ? st->sample.kernel_stop : st->sample.user_stop;
            fprintf(out, "    [truncated: %s]\n", unw_stop_str(why));
            continue;
        }
        if (i + 1 < len && !f->kernel && shown[i + 1]->kernel)
            fprintf(out, "    -- entered the kernel from user mode here --\n");
        print_frame(f, index++, show_addresses, out);
    }
    g_free(shown);
}

void prof_stack_count_repeat(prof_stack_builder *sb, const struct prof_stack *st)
{
    sb->counters.at_kernel_entry += st->at_kernel_entry;
}
