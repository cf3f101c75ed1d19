/* Private to sampler/: the session's state, shared by its files. session.c: building and
 * freeing a session, the kernel's symbols, one sample from capture to stack, the accessors;
 * session_read.c: reading guest memory within the pause budget, and the OS adapter's reader;
 * session_images.c: process images, copied while the guest is paused and identified by their
 * .text hash after it resumed; session_capture.c: what a stop copies, vCPU by vCPU, and what the
 * OS adapter saw (a reboot, a found kernel). session.c uses the other three; session_capture.c
 * uses session_read.c and session_images.c; session_images.c uses session_read.c. */
#ifndef PROF_SESSION_INTERNAL_H
#define PROF_SESSION_INTERNAL_H

#include "sampler.h"

#include "aspace.h"
#include "capture.h"
#include "exact.h"
#include "model.h"
#include "modules.h"
#include "stacks.h"
#include "sysroot.h"

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define MAX_TEXT_TO_HASH (64u << 20)
#define MAX_EH_FRAME     (16u << 20)

/* One exec image of one process: (pid, generation) plus the .text and .eh_frame the OS adapter
 * names. Its .text (and .eh_frame) are copied while the guest is paused, within the sample's
 * budget and across samples if need be; hashing and matching wait until the guest runs. */
struct image_key {
    uint64_t pid, generation, text_addr, text_size, eh_frame_addr, eh_frame_size;
};

enum image_state { IMAGE_COPYING, IMAGE_COPIED, IMAGE_DONE };

struct proc_image {
    struct image_key key;
    enum image_state state;
    uint8_t *copy; /* text_size + eh_frame_size bytes while copying, NULL once done */
    size_t copied;
    uint64_t load_base;
    char name[PROF_COMM_LEN];
    struct user_binary *bin; /* once done; NULL when the text could not be read */
};

/* What this sample may still read while the guest is paused (PROF_BUDGET_*). */
struct pause_budget {
    size_t bytes_left;
    uint64_t round_trips_at_start;
    bool hit;
};

/* The session owns every stage's state; the stages get what they need passed down (modules.h,
 * stacks.h, sysroot.h) and none calls back up. */
struct prof_session {
    struct prof_session_config opts; /* kernel owned; user_dirs and sysroot NULL */
    prof_target *target;             /* borrowed, as os and arch (prof_session_new) */
    const struct prof_arch *arch;    /* the target's: registers, privilege, address halves */
    struct prof_addr_split split;    /* arch->split: which addresses are user, which kernel */
    prof_os *os;
    sym_table *kernel_syms;             /* NULL without --kernel */
    const sym_table *found_kernel_syms; /* the OS adapter's (borrowed), when no --kernel */
    uint8_t *code_buf;                  /* keep_kernel_code's, OUT_CODE_MAX_LEN bytes */
    struct prof_os_mem os_mem;          /* this stop's reader for the adapter */
    unw_space *kernel_space;
    sym_store *store;
    GHashTable *binaries; /* .text hash -> struct user_binary (owned) */
    GHashTable *images;   /* struct image_key -> struct proc_image (owned, key inside) */
    struct pause_budget budget;
    int n_cpus;
    struct cpu_capture cap[PROF_MAX_VCPUS];
    /* --os none: by the target's vCPU index, the process whose table that vCPU last ran user
     * code in, kept across stops (NULL after it idled, or a reboot): a kernel that runs on a
     * table of its own runs for it. By index, not by position in a stop's list: a capturing
     * target hands over one vCPU at a time. */
    struct prof_aspace *last_user_as[PROF_MAX_VCPUS];
    out_profile *profile;       /* every sample, and the modules their PCs belong to */
    prof_modules *modules;      /* the profile's modules and their symbols */
    prof_stack_builder *stacks; /* unwinding the captures */
    uint64_t capture_gen;       /* the OS adapter's capture plan the target has */
    prof_sysroot *sysroot;      /* --sysroot's files and address spaces */
    prof_aspaces *aspaces;      /* --os none: address spaces as processes, NULL otherwise */
    prof_model *model;          /* what runs where: every identification fills it (model.h) */
    /* --os none, which knows no kernel stack bounds: how far past the end of sp's page the
     * kernel stack window reaches (see kernel_window_len). */
    size_t kstack_extra;
    /* --kernel's ELF runs outside the kernel half (prof_arch_kernel_space), and the addresses
     * all its segments load at (its own boot stacks among them): see capture_aspace. */
    bool kernel_outside_half;
    uint64_t kernel_image_lo, kernel_image_hi;
    uint64_t kernel_code_lo, kernel_code_hi; /* the kernel's unwind space */
    struct prof_stack stack;                 /* scratch, reused by every sample */
    struct prof_target_stats last_stats;
    /* What a capturing target's repeat of the last sample (prof_target_stats.repeated) does as
     * that sample did: taken, and its one stack (still in `stack`) built to be added again. */
    bool last_taken, last_built;
    uint64_t target_resets; /* prof_target_resets at the last stop */
    struct prof_capture_counters counters;
};

/* A long run that execs many processes would grow the table without bound; images are cheap
 * to identify again (the binaries themselves stay known by hash). */
#define MAX_IMAGES 4096

/* A page walk's reader that keeps the target's reason for a failed read. */
struct walk_reader {
    prof_session *s;
    struct qp_error *err;
};

/* session_images.c */
void session_identify_captured(prof_session *s);
void session_image_copy_some(prof_session *s, const struct prof_vcpu *cpu, struct proc_image *img);
struct proc_image *session_image_for(prof_session *s, const struct prof_task *t);

/* session_read.c */
size_t session_budget_allow(prof_session *s, size_t len);
void session_budget_start(prof_session *s);
struct prof_os_mem session_os_mem(prof_session *s);
int session_paused_read(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                        size_t len, bool instant, size_t *got);
int session_phys_word(void *ctx, uint64_t paddr, uint64_t *val);
void session_read_window(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, uint8_t *buf,
                         size_t cap, uint64_t *win_addr, size_t *win_len);
int session_read_window_in(prof_session *s, struct cpu_capture *c, uint64_t root, uint64_t sp,
                           struct qp_error *err);
int session_target_read(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                        size_t len, bool instant, size_t *got);

/* session_capture.c */
int session_capture_cb(prof_target *t, const struct prof_vcpu *cpus, int n_cpus, void *ctx,
                       struct qp_error *err);
void session_forget_boot(prof_session *s);
void session_grow_kernel_window(prof_session *s, const struct cpu_capture *c,
                                const struct prof_stack *st);
void session_use_found_kernel(prof_session *s, const struct prof_os_refresh *r);

#endif
