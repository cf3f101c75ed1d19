/* sampler: the sampling core. One sample: stop the target, capture every vCPU with the OS
 * adapter's help, resume; then unwind the copies into unsymbolized stacks (out_sample) added to
 * the session's out_profile. Also the folded-stack aggregation and the run's statistics. It uses
 * target/ and os/ only through their seams and names no architecture; cli/ sits on top.
 *
 * Functions returning int return 0 on success or a negative errno-style code and fill the
 * optional err (common/qp_error.h).
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <glib.h>
#include <stdio.h>

#include "output.h"
#include "qp_error.h"
#include "os.h"
#include "target.h"

/* --kernel-only / --user-only: which samples the session keeps. */
enum prof_mode_filter { PROF_ALL_MODES = 0, PROF_KERNEL_ONLY, PROF_USER_ONLY };

/* ---- Frame names ------------------------------------------------------------------------- */

/* Writes a frame name safe for the folded format: ';' and control characters (newline, tab,
 * ...) become '_'; a leading/trailing space is kept as is. Returns the length written
 * (truncated to cap-1). */
size_t prof_sanitize_name(const char *name, char *out, size_t cap);

/* ---- Aggregation ------------------------------------------------------------------------- */

/* Folded stacks and their counts. Memory grows with distinct stacks only. */
typedef struct prof_agg prof_agg;

prof_agg *prof_agg_new(void);
void prof_agg_free(prof_agg *a); /* NULL is a no-op */

/* Adds count samples of a folded stack ("root;frame;...;leaf"), copied if new. */
void prof_agg_add(prof_agg *a, const char *folded, uint64_t count);
uint64_t prof_agg_total(const prof_agg *a);
size_t prof_agg_unique(const prof_agg *a);
/* Count of one exact stack, 0 if absent (for tests). */
uint64_t prof_agg_count(const prof_agg *a, const char *folded);

/* Writes "stack COUNT\n" lines sorted by stack text (stable diffs) to f. */
int prof_agg_write(const prof_agg *a, FILE *f, struct qp_error *err);

/* Loads a folded file (for tests and `qprof --summarize`). */
int prof_agg_read_file(prof_agg *a, const char *path, struct qp_error *err);
/* The same from an open stream; path names it in errors. */
int prof_agg_read_stream(prof_agg *a, FILE *f, const char *path, struct qp_error *err);

/* Adds the folded stacks of a profile (the summary's view of it). */
int prof_agg_from_profile(prof_agg *a, const out_profile *p, out_names *n, bool per_cpu,
                          struct qp_error *err);

/* Prints the top stacks, the top functions by self and total share, and the share of each root
 * (process) to f. */
void prof_agg_print_report(const prof_agg *a, FILE *f, int top);

/* ---- Statistics -------------------------------------------------------------------------- */

/* Histogram of per-sample guest-paused times: flat memory, percentiles within 1 us below 1 ms,
 * within 1% above. */
struct prof_hist {
    uint64_t buckets[2048];
    uint64_t count;
    uint64_t max_ns;
};

void prof_hist_add(struct prof_hist *h, uint64_t ns);
uint64_t prof_hist_percentile(const struct prof_hist *h, double p); /* ns, 0 when empty */

/* ---- Run health: is the profile one of a running guest? -------------------------------- */

/* Below this share of wall time running, the guest is nearly frozen: each sample finds it
 * almost where the last one left it, and the profile is confidently wrong. */
#define PROF_FROZEN_SHARE 0.20

/* The share of wall_s the guest ran while qprof sampled: 1 - paused_ns / wall, in [0, 1]; 1
 * when wall_s is not positive. */
double prof_guest_running_share(uint64_t paused_ns, double wall_s);

/* Whether a paused time per sample (its p50 over the first samples, ms) is far above what the
 * transport's requests usually cost (round_trips per sample at round_trip_ms each): 20 times
 * that, and at least 5 ms, so that a loaded host's jitter never counts. */
bool prof_paused_far_above_usual(double paused_ms, double round_trips, double round_trip_ms);

/* ---- What the samples looked like (the summary's figures) -------------------------------- */

/* Where one vCPU's samples went, for the per-vCPU balance in the summary. */
#define PROF_CPU_TOP_PROCS 4

struct prof_cpu_proc {
    uint32_t pid;
    char comm[OUT_COMM_LEN];
    uint64_t count;
};

struct prof_cpu_counts {
    uint64_t user, kernel, idle, boot;
    struct prof_cpu_proc procs[PROF_CPU_TOP_PROCS]; /* the first processes seen, by count */
    uint64_t other_procs;                           /* samples of processes past those */
};

/* The run's figures, one struct per stage, each written by its stage only and read through the
 * session's accessors (prof_session_*_counters). */

/* The capture (session.c): what was sampled, and why samples did not make it. */
struct prof_capture_counters {
    struct prof_cpu_counts cpu[PROF_MAX_VCPUS]; /* by the target's vCPU index */
    int cpus_seen;                              /* highest index counted + 1 */
    uint64_t vcpu_samples;
    /* of them, a capturing target's repeats of its previous sample, one per interval that
     * sample's vCPU thread did not run (prof_target_stats.repeated): the rest are captures */
    uint64_t repeated;
    uint64_t dropped_by_filter;
    uint64_t idle;
    uint64_t resets;          /* the OS adapter saw a new boot (boot_id, vmcoreinfo) */
    uint64_t machine_resets;  /* the target saw the machine reset (QMP RESET events) */
    uint64_t reset_straddles; /* samples dropped: the machine reset while they were read */
    uint64_t abi_rejected;    /* a published qprof_abi failed its checks */
    char abi_reject_reason[160];
    uint64_t budget_hits; /* samples whose paused-time budget ran out */
    /* --os none: times a kernel walk ran off the kernel stack window and it grew by a page */
    uint64_t kstack_window_grown;
    /* --user-regs: kernel-mode samples whose process's user stack could not be read in its own
     * table (the target reads no guest-physical memory, or sp is not mapped), the last reason */
    uint64_t user_stack_unreadable;
    char user_stack_reason[160];
};

#define PROF_AGE_BUCKETS 8

/* The stacks (stacks.c): what they looked like. */
struct prof_stack_counters {
    uint64_t truncated[UNW_STOP_COUNT];
    uint64_t no_process_info; /* the OS adapter knew nothing (no ABI, or a torn slot) */
    uint64_t
        at_kernel_entry; /* on the first instruction of an entry from user space (repeats too) */
    /* A capturing target's samples by how long their trigger waited ([timer, counter][bucket:
     * prof_skid_bucket]): all, and those on the first instruction of an
     * entry from user space; and the ones moved from such an entry to the user context it
     * interrupted, or left there, marked, for want of the user registers (sampler/skid.h). */
    uint64_t flag_age[2][PROF_AGE_BUCKETS], entry_flag_age[2][PROF_AGE_BUCKETS];
    uint64_t skid_moved, skid_unplaced;
    uint64_t kernel_stacks, kernel_stacks_complete; /* unwound by the OS adapter (ORC) */
    uint64_t kernel_stacks_by_fp;                   /* of those, by frame pointers (arm64 Linux) */
    /* --sysroot: user stacks unwound with the sysroot's files, and those that reached the
     * outermost frame. */
    uint64_t sysroot_stacks, sysroot_stacks_complete;
    /* User stacks unwound by the .eh_frame of the guest's own mapped files alone (no --sysroot
     * file in the process), and those that reached the outermost frame. */
    uint64_t memory_stacks, memory_stacks_complete;
};

/* --sysroot (sysroot.c): guest files whose sysroot copy was missing or another build (each
 * once). */
struct prof_sysroot_counters {
    uint64_t sysroot_files_unused;
};

/* --os none's address spaces (aspace.c). */
struct prof_aspace_counters {
    /* user code pages (one per address space and page) no --user-dir file has */
    uint64_t content_pages_unmatched;
    /* address-space roots found given to another process (their code changed) */
    uint64_t aspace_roots_reused;
};

/* Counts one vCPU's sample in its vCPU's balance (mode, and the first processes seen). */
void prof_counters_add_sample(struct prof_capture_counters *c, const struct out_sample *o);

/* ---- Sampling session -------------------------------------------------------------------- */

typedef struct prof_session prof_session;

/* What a session needs beside its target, OS adapter and architecture: what to load and what
 * to keep. The caller (cli/setup.c) has chosen and opened the rest. */
struct prof_session_config {
    const char *kernel;           /* --kernel ELF or System.map (copied), NULL: none */
    sym_table *kernel_syms;       /* its symbols, slid by kernel_slide: consumed (the session frees
                                     them, also when prof_session_new fails); NULL without --kernel */
    bool kernel_is_elf;           /* kernel is an ELF: its unwind tables are loaded too */
    int64_t kernel_slide;         /* --kernel-slide; 0: the session applies a slide the OS finds */
    const char *const *user_dirs; /* --user-dir, n_user_dirs of them (read by new only) */
    int n_user_dirs;
    bool by_content;     /* --os none: address spaces stand for processes, binaries are known
                            by the content of their code pages */
    const char *sysroot; /* --sysroot DIR (read by new only), NULL: none */
    int max_depth;       /* frames per stack */
    uint64_t cpu_mask;   /* the vCPUs sampled, by QEMU's numbers */
    enum prof_mode_filter mode_filter;
    bool keep_kernel_code; /* copy the code of kernel functions a record names (no vmlinux) */
    bool show_addresses;   /* --one-shot prints pcs beside names */
    bool verbose;
};

/* A session over an opened target and OS adapter and the target's architecture, all three
 * borrowed: the caller frees them after the session (the target last, which resumes a guest it
 * stopped). Loads the symbols and unwind tables cfg names; on failure *out is untouched and
 * cfg->kernel_syms freed. */
int prof_session_new(prof_target *target, prof_os *os, const struct prof_arch *arch,
                     const struct prof_session_config *cfg, prof_session **out,
                     struct qp_error *err);
void prof_session_free(prof_session *s); /* NULL is a no-op */

/* Takes one sample of every selected vCPU into the session's profile (one out_sample per vCPU,
 * stamped time_ns and weight_ns); a capturing target's repeat (prof_target_stats.repeated)
 * adds its previous sample's stack again instead. *taken is false when the guest was paused by
 * someone else: nothing was sampled, and qprof left it so. */
int prof_session_sample(prof_session *s, uint64_t time_ns, uint64_t weight_ns, bool *taken,
                        struct qp_error *err);

/* QEMU's version, "MAJOR.MINOR.MICRO". */
const char *prof_session_qemu_version(const prof_session *s);

/* The session's samples and modules (borrowed, valid until prof_session_free). */
out_profile *prof_session_profile(prof_session *s);

/* --os none: appends "address_space=LABEL root=0xROOT" for each address space that was a process
 * (nothing otherwise), for the record's notes. */
void prof_session_describe_aspaces(const prof_session *s, GString *out);
/* The figures so far, by stage (borrowed, valid until prof_session_free; the aspace ones are
 * zero without --os none). */
const struct prof_capture_counters *prof_session_capture_counters(const prof_session *s);
const struct prof_stack_counters *prof_session_stack_counters(const prof_session *s);
const struct prof_sysroot_counters *prof_session_sysroot_counters(const prof_session *s);
const struct prof_aspace_counters *prof_session_aspace_counters(const prof_session *s);
/* What the last sample cost (borrowed, overwritten by the next sample). */
const struct prof_target_stats *prof_session_last_stats(const prof_session *s);

/* A name cache that symbolizes with the session's kernel and user binaries (caller frees). */
out_names *prof_session_names(prof_session *s);

/* Work done while the guest is paused, per sample, is capped: guest memory copied, and QMP
 * round trips for memory reads. What does not fit waits for a later sample (a large binary's
 * .text) or is cut (a stack window), and the summary counts the samples that hit the cap. */
#define PROF_BUDGET_BYTES    ((size_t)2 << 20)
#define PROF_BUDGET_REQUESTS 64u

/* --exact: what the counts held and where they went. */
struct prof_exact_summary {
    bool counting;    /* the target had its counters in place */
    double counted_s; /* for how long */
    size_t blocks;
    uint64_t insns; /* all of them, unplaced included */
    uint64_t kernel, user, shared_user, unknown_user, unplaced;
};

/* --exact: takes the target's counts so far into the session's profile (out_profile_add_exact,
 * attributed to the kernel and the --user-dir binaries) and fills *st. */
int prof_session_exact(prof_session *s, struct prof_exact_summary *st, struct qp_error *err);

/* Prints one stack per vCPU, eu-stack style, to f. */
int prof_session_one_shot(prof_session *s, FILE *f, struct qp_error *err);

#endif
