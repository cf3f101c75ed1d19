/* The summary printed at the end of a run: samples and failures, what sampling cost the guest,
 * what the stacks lacked and why, the OS adapter's findings, then the report; and --exact's. */
#include "qp_file.h"
#include "run_internal.h"

#include <inttypes.h>

static void print_failures(const struct run_state *r, FILE *f)
{
    if (!r->failed)
        return;
    fprintf(f, "failed samples: %" PRIu64 " (", r->failed);
    const char *sep = "";
    for (int i = 0; i < RUN_FAILURE_KINDS; i++) {
        if (r->failed_by_code[i]) {
            fprintf(f, "%s%s: %" PRIu64, sep, run_failure_names[i], r->failed_by_code[i]);
            sep = ", ";
        }
    }
    fputs("); last: ", f);
    qp_file_fput_escaped(r->last_failure, f);
    fputc('\n', f);
}

static void print_truncations(const struct prof_stack_counters *c, FILE *f)
{
    uint64_t total = 0;
    for (int i = 0; i < UNW_STOP_COUNT; i++)
        total += c->truncated[i];
    if (!total)
        return;
    fprintf(f, "truncated stacks: %" PRIu64 " (", total);
    const char *sep = "";
    for (int i = 0; i < UNW_STOP_COUNT; i++) {
        if (c->truncated[i]) {
            fprintf(f, "%s%s: %" PRIu64, sep, unw_stop_str(i), c->truncated[i]);
            sep = ", ";
        }
    }
    fprintf(f, ")\n");
}

/* Kernel stacks the OS adapter unwound (Linux: ORC): how many reached where a kernel stack
 * starts (the entry from user mode, or a kernel thread's or the boot stack's first frame). */
static void print_kernel_completeness(const struct prof_stack_counters *c, FILE *f)
{
    if (!c->kernel_stacks)
        return;
    fprintf(f,
            "kernel stacks by %s: %" PRIu64
            ", complete (reach a user entry or a task's start): %.1f%%\n",
            c->kernel_stacks_by_fp == c->kernel_stacks ? "frame pointers"
            : c->kernel_stacks_by_fp                   ? "ORC or frame pointers"
                                                       : "ORC",
            c->kernel_stacks, 100.0 * c->kernel_stacks_complete / c->kernel_stacks);
}

static void print_sysroot_use(const struct prof_stack_counters *c,
                              const struct prof_sysroot_counters *sr, FILE *f)
{
    if (c->sysroot_stacks)
        fprintf(f,
                "user stacks by --sysroot: %" PRIu64 ", complete (reach the outermost frame): "
                "%.1f%%\n",
                c->sysroot_stacks, 100.0 * c->sysroot_stacks_complete / c->sysroot_stacks);
    if (c->memory_stacks)
        fprintf(f,
                "user stacks by the guest's own .eh_frame: %" PRIu64
                ", complete (reach the outermost frame): %.1f%%\n",
                c->memory_stacks, 100.0 * c->memory_stacks_complete / c->memory_stacks);
    if (sr->sysroot_files_unused)
        fprintf(f,
                "guest files not used from --sysroot (missing there, or another build): %" PRIu64
                "\n",
                sr->sysroot_files_unused);
}

/* Under TCG a share of these well above the entry code's real cost means the stops were taken
 * late and the code that runs just after system calls or faults is under-sampled. */
static void print_kernel_entries(const struct prof_stack_counters *c, uint64_t vcpu_samples,
                                 FILE *f)
{
    if (!c->at_kernel_entry)
        return;
    double share = vcpu_samples ? 100.0 * c->at_kernel_entry / vcpu_samples : 0;
    fprintf(f, "on the first instruction of a kernel entry from user space: %" PRIu64 " (%.1f%%)\n",
            c->at_kernel_entry, share);
    if (share >= 1.0)
        fprintf(f,
                "  under TCG most of these are stops QEMU took when the vCPU entered the kernel,\n"
                "  not where it was: code right after system calls is under-sampled\n"
                "  (docs/accuracy.md: \"TCG and the moment of a sample\")\n");
}

/* A capturing target's samples by how long their trigger waited, and the ones that waited across
 * a kernel entry's delivery and were moved back to the context it interrupted (sampler/skid.h,
 * docs/plugin.md "The moment of a sample"). */
static void print_flag_ages(const struct prof_stack_counters *c, FILE *f)
{
    static const char *const trigger[2] = {"timer", "counter"};
    static const char *const bucket[PROF_AGE_BUCKETS] = {"<10us",  "<20us", "<50us", "<100us",
                                                         "<200us", "<1ms",  "<10ms", ">=10ms"};
    for (int t = 0; t < 2; t++) {
        uint64_t all = 0;
        for (int b = 0; b < PROF_AGE_BUCKETS; b++)
            all += c->flag_age[t][b];
        if (!all)
            continue;
        fprintf(f, "%s samples by how long they waited for the vCPU:", trigger[t]);
        for (int b = 0; b < PROF_AGE_BUCKETS; b++)
            fprintf(f, " %s %" PRIu64, bucket[b], c->flag_age[t][b]);
        fprintf(f, "\n  of them on the first instruction of a kernel entry from user space:");
        for (int b = 0; b < PROF_AGE_BUCKETS; b++)
            fprintf(f, " %s %" PRIu64, bucket[b], c->entry_flag_age[t][b]);
        fputc('\n', f);
    }
    if (c->skid_moved || c->skid_unplaced)
        fprintf(f,
                "samples moved from a kernel entry to the interrupted context: %" PRIu64
                " (not placed, left marked: %" PRIu64 ")\n",
                c->skid_moved, c->skid_unplaced);
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* One line per sampled vCPU when there are several: how busy each was and with what, the way
 * perf's --sort cpu shows an imbalance. */
static void print_per_cpu(const struct prof_capture_counters *c, FILE *f)
{
    int sampled = 0;
    for (int i = 0; i < c->cpus_seen; i++) {
        const struct prof_cpu_counts *n = &c->cpu[i];
        sampled += n->user + n->kernel + n->idle + n->boot > 0;
    }
    if (sampled < 2)
        return;
    fprintf(f, "per vCPU (busy = user + kernel):\n");
    for (int i = 0; i < c->cpus_seen; i++) {
        const struct prof_cpu_counts *n = &c->cpu[i];
        uint64_t all = n->user + n->kernel + n->idle + n->boot;
        if (!all)
            continue;
        fprintf(f, "  cpu%-3d busy %5.1f%% (user %5.1f%%, kernel %5.1f%%)  idle %5.1f%%", i,
                pct(all - n->idle, all), pct(n->user, all), pct(n->kernel + n->boot, all),
                pct(n->idle, all));
        const char *sep = "  ";
        for (int k = 0; k < PROF_CPU_TOP_PROCS && n->procs[k].count; k++) {
            fputs(sep, f);
            qp_file_fput_escaped(n->procs[k].comm, f); /* the guest's name for it */
            fprintf(f, " (%" PRIu32 ") %.1f%%", n->procs[k].pid, pct(n->procs[k].count, all));
            sep = ", ";
        }
        if (n->other_procs)
            fprintf(f, "%sothers %.1f%%", sep, pct(n->other_procs, all));
        fputc('\n', f);
    }
}

/* A capturing target: what capturing cost the vCPUs' threads, and what it could not take. */
static void print_capture_costs(const struct run_state *r, double elapsed, FILE *f)
{
    const prof_target *t = r->target;
    fprintf(f,
            "captured inside QEMU, the guest never stopped: capture cost on the vCPU thread p50 "
            "%.1f us, p99 %.1f us, max %.1f us; samples lost to a full ring: %" PRIu64
            " (transport: %s, memory: %s)\n",
            prof_hist_percentile(&r->paused, 50) / 1e3, prof_hist_percentile(&r->paused, 99) / 1e3,
            r->paused.max_ns / 1e3, prof_target_lost(t), prof_target_transport(t),
            prof_target_describe(t));
    fprintf(f, "capture time, summed over the vCPUs: %.2f%% of the sampling time\n",
            100 * (1 - prof_guest_running_share(r->paused_total_ns, elapsed)));
    const char *trigger = prof_target_trigger(t);
    if (trigger)
        fprintf(f, "plugin trigger: %s\n", trigger);
    if (prof_target_missed(t))
        fprintf(f,
                "intervals without a capture because the host did not run a vCPU thread, or the "
                "plugin's timer, in time: %" PRIu64
                " (an overcommitted host), filled with the sample that ended them; the busy "
                "samples amount to %" PRIu64 " independent ones\n",
                prof_target_missed(t), prof_target_independent(t));
}

/* A stopping target: how long the guest stood still. */
static void print_pause_costs(const struct run_state *r, double elapsed, FILE *f)
{
    fprintf(f,
            "guest paused per sample: p50 %.3f ms, p99 %.3f ms, max %.3f ms; %.1f %s per "
            "sample (transport: %s, memory: %s)\n",
            prof_hist_percentile(&r->paused, 50) / 1e6, prof_hist_percentile(&r->paused, 99) / 1e6,
            r->paused.max_ns / 1e6, (double)r->round_trips / r->samples,
            prof_target_round_trip_name(r->target), prof_target_transport(r->target),
            prof_target_describe(r->target));
    double share = prof_guest_running_share(r->paused_total_ns, elapsed);
    fprintf(f, "guest running: %.1f%% of the sampling time (paused the rest for samples)%s\n",
            100 * share,
            share < PROF_FROZEN_SHARE ? ": nearly frozen, the profile is not trustworthy" : "");
}

void run_print_summary(const struct run_state *r, double elapsed, FILE *f)
{
    const struct prof_capture_counters *c = prof_session_capture_counters(r->session);
    const struct prof_stack_counters *st = prof_session_stack_counters(r->session);
    fprintf(f, "\nqprof: %" PRIu64 " samples in %.2f s (%.1f samples/s), %" PRIu64 " failed\n",
            r->samples, elapsed, elapsed > 0 ? r->samples / elapsed : 0.0, r->failed);
    print_failures(r, f);
    if (r->samples && prof_target_captures(r->target))
        print_capture_costs(r, elapsed, f);
    else if (r->samples)
        print_pause_costs(r, elapsed, f);
    fprintf(f, "vCPU stacks: %" PRIu64 " (idle %" PRIu64 "), unique stacks: %zu\n", c->vcpu_samples,
            c->idle, prof_agg_unique(r->agg));
    if (c->dropped_by_filter)
        fprintf(f, "dropped by --%s: %" PRIu64 "\n",
                r->o->mode_filter == PROF_KERNEL_ONLY ? "kernel-only" : "user-only",
                c->dropped_by_filter);
    if (st->no_process_info)
        fprintf(f,
                "stacks without process information (no qprof_abi, no slot for the vCPU, or "
                "mid-update): %" PRIu64 "\n",
                st->no_process_info);
    if (r->paused_intervals)
        fprintf(f, "guest paused by another client: %" PRIu64 " sampling intervals skipped\n",
                r->paused_intervals);
    /* QMP's RESET events count every reset of the machine (QEMU reports two for one
     * system_reset of a SeaBIOS guest); the OS adapter's own marks (a new boot_id, vmcoreinfo
     * bytes that changed) count what a gdbstub alone cannot see, but also fire while a new boot
     * settles (a vmcoreinfo found mid-boot, then moved), so they count only without QMP. */
    uint64_t resets = c->machine_resets ? c->machine_resets : c->resets;
    if (resets)
        fprintf(f, "guest reset %" PRIu64 " time(s) during the run (process caches cleared)\n",
                resets);
    if (c->reset_straddles)
        fprintf(f, "samples dropped because the guest reset while they were read: %" PRIu64 "\n",
                c->reset_straddles);
    if (c->abi_rejected) {
        fprintf(f, "qprof_abi rejected: %" PRIu64 " times; last: ", c->abi_rejected);
        qp_file_fput_escaped(c->abi_reject_reason, f);
        fputc('\n', f);
    }
    if (c->budget_hits)
        fprintf(f,
                "paused-time budget hit in %" PRIu64 " samples (reads cut at %u requests / %zu "
                "KiB per sample)\n",
                c->budget_hits, PROF_BUDGET_REQUESTS, PROF_BUDGET_BYTES >> 10);
    if (c->kstack_window_grown)
        fprintf(f,
                "kernel stack window (--os none) grew %" PRIu64 " time(s): a kernel stack reached "
                "past it\n",
                c->kstack_window_grown);
    if (c->user_stack_unreadable) {
        /* the gdbstub's `m` packets read through the vCPU's current table only: a process's
         * table is walked over guest-physical reads (a RAM file, QEMU's memory, QMP) */
        fprintf(f,
                "--user-regs: %" PRIu64 " kernel-mode samples' user stacks could not be read in "
                "their process's table, their user side marked unknown: ",
                c->user_stack_unreadable);
        qp_file_fput_escaped(c->user_stack_reason, f);
        fputc('\n', f);
    }
    uint64_t roots_reused = prof_session_aspace_counters(r->session)->aspace_roots_reused;
    if (roots_reused)
        fprintf(f,
                "address-space roots given to a new process (--os none, their code changed): "
                "%" PRIu64 "\n",
                roots_reused);
    print_per_cpu(c, f);
    print_truncations(st, f);
    print_kernel_completeness(st, f);
    print_sysroot_use(st, prof_session_sysroot_counters(r->session), f);
    print_kernel_entries(st, c->vcpu_samples, f);
    print_flag_ages(st, f);
    prof_agg_print_report(r->agg, f, r->o->top);
}

/* --exact: the totals and the top functions by instructions. */
void run_print_exact(const struct run_state *r, out_names *names, FILE *f)
{
    const struct prof_exact_summary *e = &r->exact;
    if (!r->have_exact || !e->counting)
        return;
    fprintf(f,
            "exact instructions (--exact, counted for %.2f s, %zu blocks): %" PRIu64
            " (kernel %.1f%%, user %.1f%%",
            e->counted_s, e->blocks, e->insns, pct(e->kernel, e->insns), pct(e->user, e->insns));
    if (e->shared_user)
        fprintf(f, ", code several binaries share %.1f%%", pct(e->shared_user, e->insns));
    if (e->unknown_user)
        fprintf(f, ", user code of no --user-dir binary %.1f%%", pct(e->unknown_user, e->insns));
    if (e->unplaced)
        fprintf(f, ", blocks beyond the plugin's table %.1f%%", pct(e->unplaced, e->insns));
    fprintf(f, ")\n");
    size_t n = 0;
    struct out_exact_line *lines = out_exact_lines(prof_session_profile(r->session), names, &n);
    if (n && r->o->top)
        fprintf(f, "top functions by exact instructions:\n");
    for (size_t i = 0; i < n && i < (size_t)r->o->top; i++)
        fprintf(f, "  %6.2f%%  %14" PRIu64 "  %s;%s\n", pct(lines[i].insns, e->insns),
                lines[i].insns, lines[i].root, lines[i].leaf->name);
    g_free(lines);
}
