/* One profiling session: a QMP connection, the kernel's and the user binaries' symbols and
 * unwind tables, and the per-sample capture and stack building.
 *
 * A sample has two halves. While the guest is stopped (capture_cb) we copy only what the
 * unwinder will need: the ABI struct, each vCPU's stack window, the user register frame of a
 * process inside a system call and that user stack. After the guest has resumed we unwind and
 * symbolize from those copies, so that unwinding never adds to the time the guest is paused. A
 * walk that leaves the copied windows ends the stack as truncated rather than reading memory
 * that the running guest has changed since. */
#include "profiler.h"
#include "session_impl.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXT_TO_HASH (64u << 20)
#define MAX_EH_FRAME     (16u << 20)

/* ---- Symbols and binaries ---------------------------------------------------------------- */

static void binary_free(gpointer p)
{
    struct user_binary *b = p;
    unw_space_free(b->space);
    g_free(b);
}

static int load_kernel(prof_session *s, struct qp_error *err)
{
    const char *path = s->opts.kernel;
    int rc = sym_table_open_elf(path, &s->kernel_syms, err);
    bool is_elf = rc == 0;
    if (rc == -ENOEXEC || rc == -EINVAL || rc == -EPROTO) /* not an ELF: try a symbol map */
        rc = sym_table_open_map(path, &s->kernel_syms, err);
    if (rc)
        return qp_error_prefix(err, "loading kernel symbols from %s", path);
    sym_table_set_slide(s->kernel_syms, s->opts.kernel_slide);
    if (!is_elf)
        return 0;
    rc = unw_space_add_elf(s->kernel_space, path, s->opts.kernel_slide, err);
    if (rc)
        return qp_error_prefix(err, "loading kernel unwind tables from %s", path);
    uint64_t abi = 0;
    if (!s->abi_addr && sym_find_by_name(s->kernel_syms, QPROF_ABI_SYMBOL, &abi) == 0)
        s->abi_addr = abi;
    return 0;
}

static int load_symbols(prof_session *s, struct qp_error *err)
{
    int rc = unw_space_new("kernel", KERNEL_HALF, UINT64_MAX, &s->kernel_space, err);
    if (rc)
        return rc;
    if (s->opts.kernel && (rc = load_kernel(s, err)))
        return rc;
    s->store = sym_store_new();
    for (int i = 0; i < s->opts.n_user_dirs; i++) {
        rc = sym_store_add_dir(s->store, s->opts.user_dirs[i], err);
        if (rc < 0)
            return qp_error_prefix(err, "--user-dir %s", s->opts.user_dirs[i]);
        if (s->opts.verbose)
            fprintf(stderr, "qprof: %d ELF files indexed under %s\n", rc, s->opts.user_dirs[i]);
    }
    return 0;
}

static enum qmp_mem_backend backend_by_name(const char *name)
{
    if (strcmp(name, "direct") == 0)
        return QMP_MEM_DIRECT;
    if (strcmp(name, "memsave") == 0)
        return QMP_MEM_MEMSAVE;
    if (strcmp(name, "hmp") == 0)
        return QMP_MEM_HMP;
    return QMP_MEM_AUTO;
}

int prof_session_open(const struct prof_options *o, prof_session **out, struct qp_error *err)
{
    prof_session *s = g_new0(prof_session, 1);
    s->opts = *o;
    s->abi_addr = o->abi_addr;
    s->binaries = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, binary_free);
    s->procs = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    s->frames = g_new(struct unw_frame, o->max_depth);
    int rc = load_symbols(s, err);
    if (rc)
        goto fail;
    struct qmp_open_opts qo = {.timeout_s = 5, .backend = backend_by_name(o->memory_backend)};
    rc = qmp_open(o->qmp_socket, &qo, &s->qmp, err);
    if (rc)
        goto fail;
    if (o->verbose)
        fprintf(stderr,
                "qprof: connected to QEMU %s, memory backend %s, qprof_abi at 0x%" PRIx64 "\n",
                qmp_qemu_version(s->qmp), qmp_mem_backend_name(qmp_mem_backend_in_use(s->qmp)),
                s->abi_addr);
    *out = s;
    return 0;
fail:
    prof_session_free(s);
    return rc;
}

void prof_session_free(prof_session *s)
{
    if (!s)
        return;
    qmp_free(s->qmp);
    sym_table_free(s->kernel_syms);
    unw_space_free(s->kernel_space);
    unw_space_free(s->fallback_space);
    prof_stack_free(&s->stack);
    sym_store_free(s->store);
    if (s->binaries)
        g_hash_table_destroy(s->binaries);
    if (s->procs)
        g_hash_table_destroy(s->procs);
    for (int i = 0; i < QMP_MAX_CPUS; i++) {
        g_free(s->cap[i].kstack);
        g_free(s->cap[i].ustack);
    }
    g_free(s->frames);
    g_free(s);
}

/* Unwind tables for a binary: the host ELF when we have it, else the .eh_frame the guest
 * publishes. Done once per binary, while the guest is stopped. */
static void binary_load_unwind(prof_session *s, struct user_binary *b, const struct qmp_regs *cpu,
                               const struct qprof_abi_cpu *slot)
{
    struct qp_error err = {0};
    if (unw_space_new(b->name, 0, USER_HALF_END, &b->space, &err))
        goto fail;
    if (b->syms) {
        if (unw_space_add_elf(b->space, sym_table_path(b->syms), 0, &err) == 0)
            return;
        goto fail;
    }
    if (!slot->eh_frame_addr || !slot->eh_frame_size || slot->eh_frame_size > MAX_EH_FRAME)
        return; /* frame pointers only */
    void *eh = g_malloc(slot->eh_frame_size);
    size_t got = 0;
    if (qmp_mem_read(s->qmp, cpu, slot->eh_frame_addr, eh, slot->eh_frame_size, &got, &err) == 0 &&
        got == slot->eh_frame_size)
        unw_space_add_eh_frame(b->space, b->name, slot->text_addr, slot->text_size,
                               slot->eh_frame_addr, eh, got, &err);
    g_free(eh);
    return;
fail:
    if (s->opts.verbose)
        fprintf(stderr, "qprof: no unwind tables for %s: %s\n", b->name, err.msg);
}

/* Identifies the binary a process runs by hashing its .text out of guest memory. */
static struct user_binary *identify_binary(prof_session *s, const struct qmp_regs *cpu,
                                           const struct qprof_abi_cpu *slot)
{
    if (!slot->text_size || slot->text_size > MAX_TEXT_TO_HASH)
        return NULL;
    void *text = g_malloc(slot->text_size);
    size_t got = 0;
    struct user_binary *b = NULL;
    struct qp_error err = {0};
    if (qmp_mem_read(s->qmp, cpu, slot->text_addr, text, slot->text_size, &got, &err) ||
        got != slot->text_size) {
        if (s->opts.verbose)
            fprintf(stderr, "qprof: cannot read .text of pid %u: %s\n", slot->pid, err.msg);
        goto out;
    }
    uint64_t hash = sym_text_hash(text, got);
    b = g_hash_table_lookup(s->binaries, &hash);
    if (b)
        goto out;
    b = g_new0(struct user_binary, 1);
    b->hash = hash;
    b->syms = sym_store_find(s->store, hash);
    b->text_addr = slot->text_addr;
    b->load_base = slot->load_base ? slot->load_base : slot->text_addr;
    g_strlcpy(b->name, b->syms ? sym_table_name(b->syms) : slot->name, sizeof b->name);
    if (s->opts.verbose)
        fprintf(stderr, "qprof: pid %u (%s): .text hash %016" PRIx64 " %s%s\n", slot->pid,
                slot->name, hash, b->syms ? "is " : "matches no file under --user-dir",
                b->syms ? sym_table_path(b->syms) : "");
    binary_load_unwind(s, b, cpu, slot);
    g_hash_table_insert(s->binaries, &b->hash, b);
out:
    g_free(text);
    return b;
}

static struct user_binary *binary_for(prof_session *s, const struct qmp_regs *cpu,
                                      const struct qprof_abi_cpu *slot)
{
    /* A process keeps its binary until its next exec, which changes the generation. */
    uint64_t key = ((uint64_t)slot->pid << 32) ^ slot->generation;
    gpointer found;
    if (g_hash_table_lookup_extended(s->procs, &key, NULL, &found))
        return found;
    struct user_binary *b = identify_binary(s, cpu, slot);
    uint64_t *k = g_new(uint64_t, 1);
    *k = key;
    g_hash_table_insert(s->procs, k, b);
    return b;
}

/* ---- Capture (guest stopped) ------------------------------------------------------------- */

static bool read_abi(prof_session *s, const struct qmp_regs *cpu)
{
    size_t got = 0;
    if (!s->abi_addr ||
        qmp_mem_read(s->qmp, cpu, s->abi_addr, &s->abi, sizeof s->abi, &got, NULL) != 0 ||
        got != sizeof s->abi)
        return false;
    if (s->abi.magic != QPROF_ABI_MAGIC || s->abi.version != QPROF_ABI_VERSION ||
        s->abi.cpu_slot_size < sizeof(struct qprof_abi_cpu) || s->abi.cpu_count == 0)
        return false;
    if (s->abi.boot_id != s->boot_id) {
        /* The guest rebooted: pids and generations start over. */
        g_hash_table_remove_all(s->procs);
        s->boot_id = s->abi.boot_id;
    }
    return true;
}

static void read_window(prof_session *s, const struct qmp_regs *cpu, uint64_t addr, uint8_t *buf,
                        size_t cap, uint64_t *win_addr, size_t *win_len)
{
    size_t got = 0;
    *win_addr = addr;
    *win_len = 0;
    if (qmp_mem_read(s->qmp, cpu, addr, buf, cap, &got, NULL) == 0)
        *win_len = got;
}

static size_t kernel_window_len(const struct cpu_capture *c)
{
    uint64_t rsp = c->regs.rsp;
    if (c->have_slot && c->slot.kstack_hi > rsp && c->slot.kstack_lo <= rsp &&
        c->slot.kstack_hi - rsp <= KSTACK_WINDOW)
        return c->slot.kstack_hi - rsp;
    return KSTACK_WINDOW;
}

static void capture_cpu(prof_session *s, struct cpu_capture *c)
{
    const struct qmp_regs *r = &c->regs;
    if (c->have_slot && c->slot.state == QPROF_CPU_USER)
        c->bin = binary_for(s, r, &c->slot);
    if (r->cpl == 3) {
        read_window(s, r, r->rsp, c->ustack, USTACK_WINDOW, &c->ustack_addr, &c->ustack_len);
        return;
    }
    read_window(s, r, r->rsp, c->kstack, kernel_window_len(c), &c->kstack_addr, &c->kstack_len);
    if (!c->have_slot || c->slot.state != QPROF_CPU_USER)
        return;
    if (!c->slot.user_regs) {
        if (prof_recover_user_regs(s, c))
            read_window(s, r, c->entry_regs.r[UNW_RSP], c->ustack, USTACK_WINDOW, &c->ustack_addr,
                        &c->ustack_len);
        return;
    }
    size_t got = 0;
    if (qmp_mem_read(s->qmp, r, c->slot.user_regs, &c->trap, sizeof c->trap, &got, NULL) == 0 &&
        got == sizeof c->trap && c->trap.rip < USER_HALF_END) {
        c->have_trap = true;
        read_window(s, r, c->trap.rsp, c->ustack, USTACK_WINDOW, &c->ustack_addr, &c->ustack_len);
    }
}

#define CR3_ADDR_MASK UINT64_C(0x000ffffffffff000)

/* A slot is usable when the kernel was not halfway through rewriting it, and, for a process,
 * when it describes the address space the vCPU is in: a context switch loads CR3 and republishes
 * the slot a few instructions apart, and a sample between the two would otherwise read one
 * process's stack through another's page tables. */
static bool slot_for(const prof_session *s, const struct qmp_regs *regs, int cpu,
                     struct qprof_abi_cpu *out)
{
    if (cpu >= (int)s->abi.cpu_count || cpu >= QPROF_ABI_MAX_CPUS)
        return false;
    *out = s->abi.cpu[cpu];
    if (out->seq & 1)
        return false;
    if (out->state == QPROF_CPU_USER && out->cr3 &&
        (out->cr3 & CR3_ADDR_MASK) != (regs->cr3 & CR3_ADDR_MASK))
        return false;
    out->name[QPROF_ABI_NAME_LEN - 1] = '\0';
    return true;
}

static int capture_cb(qmp_client *q, const struct qmp_regs *cpus, int n_cpus, void *ctx,
                      struct qp_error *err)
{
    prof_session *s = ctx;
    s->n_cpus = n_cpus < QMP_MAX_CPUS ? n_cpus : QMP_MAX_CPUS;
    s->have_abi = false;
    for (int i = 0; i < s->n_cpus; i++) {
        struct cpu_capture *c = &s->cap[i];
        c->regs = cpus[i];
        c->selected = (s->opts.cpu_mask >> (i & 63)) & 1;
        c->have_slot = c->have_trap = c->have_entry_regs = false;
        c->bin = NULL;
        c->kstack_len = c->ustack_len = 0;
        if (!s->have_abi && c->regs.long_mode)
            s->have_abi = read_abi(s, &c->regs);
    }
    for (int i = 0; i < s->n_cpus; i++) {
        struct cpu_capture *c = &s->cap[i];
        if (s->have_abi)
            c->have_slot = slot_for(s, &c->regs, i, &c->slot);
        c->started = c->regs.long_mode && !(c->have_slot && c->slot.state == QPROF_CPU_OFFLINE);
        if (c->selected && c->started && !c->regs.halted) {
            if (!c->kstack) {
                c->kstack = g_malloc(KSTACK_WINDOW);
                c->ustack = g_malloc(USTACK_WINDOW);
            }
            capture_cpu(s, c);
        }
    }
    return 0;
}

int prof_session_capture(prof_session *s, struct qmp_sample_stats *stats, struct qp_error *err)
{
    return qmp_sample(s->qmp, capture_cb, s, stats, err);
}
