/* Private to profiler/: the session's state, shared by session.c (capture) and stacks.c
 * (unwinding, naming, folding). */
#ifndef PROF_SESSION_IMPL_H
#define PROF_SESSION_IMPL_H

#include "os.h"
#include "output.h"
#include "sampler.h"
#include "symbols.h"
#include "target.h"
#include "unwind.h"

#include <glib.h>

/* The root of a sample taken while a vCPU ran outside long mode (firmware, early boot). */
#define PROF_ROOT_BOOT "[firmware or early boot]"

#define KSTACK_WINDOW (16u << 10)
#define USTACK_WINDOW (16u << 10)

/* One user binary, identified by its .text hash; shared by every process that runs it. */
struct user_binary {
    uint64_t hash;
    const sym_table *syms; /* borrowed from the store; NULL when no file matched */
    unw_space *space;      /* owned; NULL when no unwind tables could be had */
    uint64_t text_addr, load_base;
    char name[64];   /* module name: the file's, else the process's */
    uint32_t module; /* its index in the session's out_profile */
};

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

/* --sysroot: one guest path looked up under the sysroot, once. */
struct sysroot_file {
    char *host_path; /* DIR + the guest's path */
    bool usable;     /* an x86_64 ELF with a GNU build-id and PT_LOADs */
    const char *why_not;
    uint8_t build_id[PROF_BUILD_ID_MAX];
    size_t build_id_len;
    GArray *loads;     /* struct sysroot_load */
    sym_table *syms;   /* owned; opened with the first module that uses the file */
    bool syms_tried;   /* sym_table_open_elf was called (syms NULL: it failed) */
    bool said_differs; /* the user was told its build-id is not the guest's */
};

struct sysroot_load {
    uint64_t offset, vaddr, filesz; /* a PT_LOAD's p_offset, p_vaddr, p_filesz */
};

/* --sysroot: one address space (the OS adapter's id and generation) with the sysroot files that
 * match its exec mappings. The mappings are copied while the guest is paused; the files are
 * matched and the unwinder is loaded after it resumed (built). */
struct user_space_key {
    uint64_t id, generation;
};

struct user_space {
    struct user_space_key key;
    bool built;
    int n;
    struct prof_exec_mapping *maps; /* n, owned */
    bool *verified;                 /* n: a sysroot file with the guest's build-id */
    uint32_t *module;               /* n: its module (verified maps only) */
    unw_space *space;               /* owned; NULL until built or when nothing matched */
    int n_verified;
};

/* What one vCPU looked like at the stop, copied while the guest was paused. */
struct cpu_capture {
    struct prof_vcpu vcpu; /* its target_cpu is stale once the guest runs again */
    bool selected, started;
    struct prof_task task; /* what the OS adapter said; task.known false when nothing */
    bool have_trap;
    struct unw_regs trap; /* user registers saved at kernel entry */
    bool have_entry_regs; /* user registers recovered through the entry stub's CFI */
    struct unw_regs entry_regs;
    struct proc_image *img;    /* the task's process image, NULL when none */
    struct user_binary *bin;   /* set after the guest resumed, from img */
    uint32_t leaf_module;      /* a leaf-only user pc's mapping (OUT_NO_MODULE: unknown) */
    struct user_space *uspace; /* --sysroot: the task's address space, NULL when none */
    bool have_kstack;          /* the OS adapter unwound the kernel stack while stopped */
    struct prof_kstack kst;    /* its frames */
    uint8_t *kstack, *ustack;  /* KSTACK_WINDOW / USTACK_WINDOW bytes, allocated once */
    uint64_t kstack_addr, ustack_addr;
    size_t kstack_len, ustack_len;
};

/* A vCPU's whole stack as unsymbolized frames, outermost first (see struct out_sample). */
struct prof_stack {
    int cpu;
    bool skipped;
    const char *skip_reason;
    struct out_sample sample; /* frames point into `frames` */
    struct out_frame *frames;
    int cap;
};

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

/* Why samples did not make it, and what stacks looked like. */
struct prof_counters {
    struct prof_cpu_counts cpu[PROF_MAX_VCPUS]; /* by the target's vCPU index */
    int cpus_seen;                              /* highest index counted + 1 */
    uint64_t vcpu_samples;
    uint64_t dropped_by_filter;
    uint64_t idle;
    uint64_t truncated[UNW_STOP_COUNT];
    uint64_t no_process_info; /* the OS adapter knew nothing (no ABI, or a torn slot) */
    uint64_t at_kernel_entry; /* on the first instruction of an entry from user space */
    uint64_t resets;          /* the OS adapter saw a new boot (boot_id, vmcoreinfo) */
    uint64_t machine_resets;  /* the target saw the machine reset (QMP RESET events) */
    uint64_t abi_rejected;    /* a published qprof_abi failed its checks */
    char abi_reject_reason[160];
    uint64_t budget_hits;                           /* samples whose paused-time budget ran out */
    uint64_t kernel_stacks, kernel_stacks_complete; /* unwound by the OS adapter (ORC) */
    /* --sysroot: user stacks unwound with the sysroot's files, those that reached the outermost
     * frame, and guest files whose sysroot copy was missing or another build (each once). */
    uint64_t sysroot_stacks, sysroot_stacks_complete, sysroot_files_unused;
};

/* What this sample may still read while the guest is paused (PROF_BUDGET_*). */
struct pause_budget {
    size_t bytes_left;
    uint64_t round_trips_at_start;
    bool hit;
};

struct prof_session {
    struct prof_options opts;
    prof_target *target;
    struct prof_addr_split split; /* the target's: which addresses are user, which kernel */
    prof_os *os;
    sym_table *kernel_syms;             /* NULL without --kernel */
    const sym_table *found_kernel_syms; /* the OS adapter's (borrowed), when no --kernel */
    struct prof_os_mem os_mem;          /* this stop's reader for the adapter */
    unw_space *kernel_space;
    sym_store *store;
    GHashTable *binaries;        /* .text hash -> struct user_binary (owned) */
    GHashTable *images;          /* struct image_key -> struct proc_image (owned, key inside) */
    GHashTable *mapping_modules; /* "name@base" -> module index (user mappings, Linux) */
    uint64_t abi_addr;
    struct pause_budget budget;
    int n_cpus;
    struct cpu_capture cap[PROF_MAX_VCPUS];
    struct unw_frame *frames;  /* opts.max_depth scratch entries */
    unw_space *fallback_space; /* user code without tables: frame pointers only */
    out_profile *profile;      /* every sample, and the modules their PCs belong to */
    uint32_t kernel_module;
    GPtrArray *module_syms;      /* module index -> const sym_table * (may be NULL) */
    GArray *module_bias;         /* module index -> int64_t added to its table's addresses */
    GHashTable *sysroot_files;   /* guest path -> struct sysroot_file (owned) */
    GHashTable *user_spaces;     /* struct user_space_key -> struct user_space (owned) */
    GHashTable *sysroot_modules; /* "host path@bias" -> module index */
    uint32_t *frame_modules;     /* opts.max_depth scratch entries: a user walk's modules */
    struct prof_stack stack;     /* scratch, reused by every sample */
    struct prof_target_stats last_stats;
    uint64_t target_resets; /* prof_target_resets at the last stop */
    struct prof_counters counters;
};

/* Stops the guest, copies what unwinding needs, resumes. */
int prof_session_capture(prof_session *s, struct prof_target_stats *stats, struct qp_error *err);

/* For a process in the kernel that has not published its user register frame yet (a sample in
 * an entry stub): walks the captured kernel stack and, if it steps into user space, sets
 * c->entry_regs. Runs while the guest is stopped, and only then, because the user stack must be
 * copied before the guest runs on. */
bool prof_recover_user_regs(prof_session *s, struct cpu_capture *c);

/* Builds the stack of captured vCPU i into st (frames array grown as needed). */
void prof_build_stack(prof_session *s, int i, struct prof_stack *st);
void prof_stack_free(struct prof_stack *st);

/* Registers a module in the session's profile with its symbols (may be NULL). */
uint32_t prof_session_add_module(prof_session *s, const struct out_module *m,
                                 const sym_table *syms);

/* Registers a module whose symbol table (shared, at its link addresses) is offset by bias in this
 * module: a PIE or shared library loaded at bias. */
uint32_t prof_session_add_module_biased(prof_session *s, const struct out_module *m,
                                        const sym_table *syms, int64_t bias);

/* One module per mapped file at one base, named "file+0xFILE_OFFSET" when no symbol is known
 * (m->name a basename); OUT_NO_MODULE when too many. */
uint32_t prof_session_mapping_module(prof_session *s, const struct prof_mapping *m);

/* --sysroot (sysroot.c). Hash table helpers for the session's tables: */
void prof_sysroot_file_free(gpointer p);
void prof_user_space_free(gpointer p);
guint prof_user_space_key_hash(gconstpointer p);
gboolean prof_user_space_key_equal(gconstpointer a, gconstpointer b);
/* Before a stop's captures: bounds the cache of address spaces (no capture points into it). */
void prof_sysroot_begin_stop(prof_session *s);
/* The guest rebooted: address spaces start over (no capture may point into them). */
void prof_sysroot_reset(prof_session *s);
/* While stopped: gives c its address space when --sysroot is on and the OS adapter tells it;
 * then c->task.user_leaf_only is false (its user stack is copied) unless the space is known to
 * have no verified file. */
void prof_sysroot_capture(prof_session *s, struct cpu_capture *c, const struct prof_os_mem *mem);
/* After the guest resumed: matches c's space's mappings against the sysroot, loads the unwinder. */
void prof_sysroot_build(prof_session *s, struct cpu_capture *c);
/* The index of the exec mapping of u holding pc, or -1. */
int prof_user_space_find(const struct user_space *u, uint64_t pc);

/* The symbolizer the session's out_names use (ctx: the session). */
int prof_session_symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                           struct out_symbol *sym);

#endif
