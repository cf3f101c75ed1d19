/* What a run samples through, chosen from the command line: the target (QMP, gdbstub or the
 * plugin), the architecture it reports, the kernel's symbols, the OS adapter (--os, or what the
 * kernel ELF says under auto) and the session over them. The session takes them as they are
 * (prof_session_new), so that a test can hand it a fake target instead. */
#include "cli_internal.h"
#include "qp_log.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* --current: resolved against the kernel's DWARF before anything is sampled, so that a
 * missing variable or field is the run's one-line error. It implies --os none. */
static int open_current(const struct prof_options *o, struct prof_setup *s, struct qp_error *err)
{
    if (o->user_regs && o->os != PROF_OS_NONE && o->os != PROF_OS_AUTO)
        return qp_error_set(err, -EINVAL,
                            "--user-regs reads a kernel that publishes nothing: it goes with "
                            "--os none only");
    if (o->user_regs) {
        s->os_choice = PROF_OS_NONE;
        s->abi_addr = 0;
    }
    if (!o->current)
        return 0;
    if (o->os != PROF_OS_NONE && o->os != PROF_OS_AUTO)
        return qp_error_set(err, -EINVAL,
                            "--current reads a kernel that publishes nothing: it "
                            "goes with --os none only");
    s->os_choice = PROF_OS_NONE;
    s->abi_addr = 0;
    struct prof_current_names names = {
        .pid_field = o->current_pid,
        .name_field = o->current_name,
        .percpu_offsets = o->percpu_offsets,
    };
    return prof_os_current_open(o->kernel, o->current, &names, &s->current, err);
}

/* --user-regs: resolved as --current is, before anything is sampled, once the architecture is
 * known (the fields' register slots are its); open_current made the adapter none's. */
static int open_user_regs(const struct prof_options *o, struct prof_setup *s, struct qp_error *err)
{
    if (!o->user_regs)
        return 0;
    struct prof_user_regs_spec spec;
    int rc = prof_user_regs_parse(o->user_regs, &spec, err);
    if (rc)
        return rc;
    const struct prof_arch *a = s->arch;
    const int slots[PROF_UREG_COUNT] = {
        [PROF_UREG_PC] = a->pc_reg,
        [PROF_UREG_SP] = a->sp_reg,
        [PROF_UREG_FP] = a->frame.fp_reg,
        [PROF_UREG_RA] = a->unwind->fp ? a->unwind->fp->ra_reg : -1,
    };
    return prof_uregs_open(o->kernel, &spec, slots, o->percpu_offsets, &s->user_regs, err);
}

/* The plugin captures the demo ABI's table at each sample, so it must know where the table is
 * when it is connected, before the kernel's symbols are loaded for the rest. */
static void plugin_abi_addr(const struct prof_options *o, struct prof_setup *s)
{
    if (!o->plugin_address || s->abi_addr || s->os_choice == PROF_OS_NONE || !o->kernel)
        return;
    sym_table *t = NULL;
    if (sym_table_open_elf(o->kernel, &t, NULL) == 0) {
        uint64_t abi = 0;
        sym_table_set_slide(t, o->kernel_slide);
        if (sym_find_by_name(t, QPROF_ABI_SYMBOL, &abi) == 0)
            s->abi_addr = abi;
    }
    sym_table_free(t); /* a kernel that cannot be read is load_kernel_syms's error to give */
}

static int open_target(const struct prof_options *o, struct prof_setup *s, struct qp_error *err)
{
    struct prof_transport_choice tc = {.transport = o->transport,
                                       .qmp_socket = o->qmp_socket,
                                       .qmp_socket_given = o->qmp_socket_given,
                                       .gdb_address = o->gdb_address,
                                       .memory_backend = o->memory_backend,
                                       .timeout_s = 5,
                                       .plugin_address = o->plugin_address,
                                       .interval_ns = (uint64_t)(o->interval_ms * 1e6),
                                       .period_insns = o->period_insns,
                                       .plugin_trigger = o->plugin_trigger,
                                       .abi_addr = s->abi_addr,
                                       .exact = o->exact};
    return prof_target_open_transport(&tc, &s->target, err);
}

/* The architecture is the target's (the gdbstub's target.xml says it); a --kernel ELF of
 * another is a one-line error before anything is read. */
static int choose_arch(const struct prof_options *o, struct prof_setup *s, struct qp_error *err)
{
    const struct prof_arch *kernel_arch = NULL;
    int rc = o->kernel ? prof_arch_of_elf_file(o->kernel, &kernel_arch, err) : 0;
    if (rc)
        return rc;
    s->arch = prof_target_arch(s->target);
    return prof_arch_check_match(kernel_arch, o->kernel, s->arch, prof_target_transport(s->target),
                                 err);
}

/* --kernel's symbols (an ELF, else a symbol map), slid, into *syms; where the demo guest
 * publishes its qprof_abi when the ELF has the symbol. */
static int load_kernel_syms(const struct prof_options *o, struct prof_setup *s, sym_table **syms,
                            bool *is_elf, struct qp_error *err)
{
    int rc = sym_table_open_elf(o->kernel, syms, err);
    *is_elf = rc == 0;
    if (rc == -ENOEXEC || rc == -EINVAL || rc == -EPROTO) /* not an ELF: try a symbol map */
        rc = sym_table_open_map(o->kernel, syms, err);
    if (rc)
        return qp_error_prefix(err, "loading kernel symbols from %s", o->kernel);
    sym_table_set_slide(*syms, o->kernel_slide);
    uint64_t abi = 0;
    if (*is_elf && !s->abi_addr && s->os_choice != PROF_OS_NONE &&
        sym_find_by_name(*syms, QPROF_ABI_SYMBOL, &abi) == 0)
        s->abi_addr = abi;
    return 0;
}

/* --os auto with a kernel ELF that publishes no qprof_abi and is no Linux (no linux_banner):
 * a kernel that tells nothing, for which address spaces stand for processes (--os none).
 * Otherwise auto is the demo ABI when the guest can be asked for it (the kernel ELF has the
 * symbol, or --abi-addr), else Linux (which answers as "none" until it finds a Linux kernel in
 * guest RAM). */
static void resolve_auto_os(const struct prof_options *o, struct prof_setup *s,
                            const sym_table *kernel_syms)
{
    uint64_t addr;
    if (s->os_choice != PROF_OS_AUTO)
        return;
    if (!s->abi_addr && kernel_syms && sym_find_by_name(kernel_syms, "linux_banner", &addr) != 0) {
        s->os_choice = PROF_OS_NONE;
        if (o->verbose)
            qp_log(QP_LOG_INFO, "the kernel ELF has no qprof_abi and is not Linux: processes "
                                "are told by address space and binaries by content (--os none)");
        return;
    }
    s->os_choice = s->abi_addr ? PROF_OS_QPROF_ABI : PROF_OS_LINUX;
}

static const struct prof_os_ops *os_ops(enum prof_os_choice choice)
{
    switch (choice) {
    case PROF_OS_QPROF_ABI:
        return &prof_os_qprof_abi_ops;
    case PROF_OS_NONE:
        return &prof_os_none_ops;
    default:
        return &prof_os_linux_ops;
    }
}

static int open_os(const struct prof_options *o, struct prof_setup *s, struct qp_error *err)
{
    const struct prof_os_ops *ops = os_ops(s->os_choice);
    struct prof_os_config cfg = {.abi_addr = s->abi_addr,
                                 .split = s->arch->split,
                                 .arch = s->arch,
                                 .vmcoreinfo_path = o->vmcoreinfo,
                                 .chosen = o->os == PROF_OS_LINUX,
                                 .verbose = o->verbose,
                                 .current = s->current,
                                 .user_regs = s->user_regs};
    return prof_os_open(ops, &cfg, &s->os, err);
}

static int open_session(const struct prof_options *o, struct prof_setup *s, sym_table *kernel_syms,
                        bool kernel_is_elf, struct qp_error *err)
{
    struct prof_session_config cfg = {.kernel = o->kernel,
                                      .kernel_syms = kernel_syms,
                                      .kernel_is_elf = kernel_is_elf,
                                      .kernel_slide = o->kernel_slide,
                                      .user_dirs = o->user_dirs,
                                      .n_user_dirs = o->n_user_dirs,
                                      .by_content = s->os_choice == PROF_OS_NONE,
                                      .sysroot = o->sysroot,
                                      .max_depth = o->max_depth,
                                      .cpu_mask = o->cpu_mask,
                                      .mode_filter = o->mode_filter,
                                      .keep_kernel_code = o->record != NULL,
                                      .show_addresses = o->show_addresses,
                                      .verbose = o->verbose};
    return prof_session_new(s->target, s->os, s->arch, &cfg, &s->session, err);
}

/* QEMU translates the demo ABI's reads with the vCPU's own privilege; over QMP on aarch64
 * there is no other way (no TTBRs to walk from), over the gdbstub the RAM file is one. */
static void warn_reads_by_privilege(const struct prof_setup *s)
{
    if (!s->arch->gdb_reads_by_privilege || !s->abi_addr ||
        !prof_target_reads_cost_round_trips(s->target))
        return;
    bool qmp = strcmp(prof_target_transport(s->target), "QMP") == 0;
    qp_log(QP_LOG_WARN,
           "%s memory through %s: a vCPU stopped in user mode cannot read the "
           "kernel's qprof_abi unless the guest maps it readable there (the demo guest "
           "does), else its samples name no process; %s with the guest's RAM in a shared "
           "file (memory-backend-file,share=on)",
           s->arch->name, qmp ? "QMP (QEMU translates)" : "gdbstub `m` packets",
           qmp ? "use --gdb and --qmp-socket" : "add --qmp-socket");
}

int prof_setup_open(const struct prof_options *o, struct prof_setup *out, struct qp_error *err)
{
    struct prof_setup s = {.os_choice = o->os,
                           .abi_addr = o->os == PROF_OS_NONE ? 0 : o->abi_addr}; /* none: never
                                                                                    the ABI */
    sym_table *kernel_syms = NULL;
    bool kernel_is_elf = false;
    int rc = open_current(o, &s, err);
    if (!rc)
        plugin_abi_addr(o, &s);
    if (rc || (rc = open_target(o, &s, err)) || (rc = choose_arch(o, &s, err)) ||
        (rc = open_user_regs(o, &s, err)) ||
        (o->kernel && (rc = load_kernel_syms(o, &s, &kernel_syms, &kernel_is_elf, err))))
        goto fail;
    resolve_auto_os(o, &s, kernel_syms);
    if ((rc = open_os(o, &s, err)))
        goto fail;
    rc = open_session(o, &s, kernel_syms, kernel_is_elf, err);
    kernel_syms = NULL; /* the session's now, also on failure */
    if (rc)
        goto fail;
    warn_reads_by_privilege(&s);
    if (o->verbose) {
        qp_log(QP_LOG_INFO, "connected to QEMU %s, memory backend %s, qprof_abi at 0x%" PRIx64,
               prof_target_version(s.target), prof_target_describe(s.target), s.abi_addr);
        qp_log(QP_LOG_INFO, "OS adapter: %s", prof_os_name(s.os));
    }
    *out = s;
    return 0;
fail:
    sym_table_free(kernel_syms);
    prof_setup_close(&s);
    return rc;
}

void prof_setup_close(struct prof_setup *s)
{
    prof_session_free(s->session);
    prof_os_free(s->os);
    prof_os_current_free(s->current);
    prof_uregs_free(s->user_regs);
    prof_target_free(s->target);
    *s = (struct prof_setup){0};
}
