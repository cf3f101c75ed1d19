/* target: the machine being profiled, seen as stoppable vCPUs and their memory.
 *
 * Two kinds of backend sit behind the same table. A stopping backend (QMP, the gdbstub) stops
 * the whole guest in sample() and reads live memory while it stands still. A capturing backend
 * (the QEMU plugin, ops.captures) never stops it: the plugin captured registers and the memory
 * a sample needs on the vCPU's own thread at the instant of the sample, and sample() hands the
 * session the next such instant, one vCPU at a time (n_cpus is 1; the other vCPUs kept
 * running), waiting for one to arrive. read() inside the callback is served from what was
 * captured at that instant, and from live memory only where the backend says that is
 * consistent (its file comment). The caller paces a stopping backend by --interval; a
 * capturing one paces itself (the plugin samples each vCPU at --interval of its own time), so
 * the caller calls sample() again at once.
 *
 * The sampler never talks to QEMU directly: it stops the target, gets every vCPU's registers as
 * an architecture-neutral struct prof_vcpu, reads memory through the target while it is stopped,
 * and the target resumes it on every path. A backend is a `static const struct
 * prof_target_ops` (designated initialisers) in its own file of this folder: target_qmp.c (QEMU's
 * QMP monitor, through qmp/) and target_gdb.c (QEMU's gdbstub, through gdb/); each names the
 * architecture it serves (arch/). The protocol clients stay modules of their own, so that a
 * backend here is only the mapping of a protocol onto this seam. Every function returning int
 * returns 0 or a negative errno-style code and fills the optional `err`. */
#ifndef PROF_TARGET_H
#define PROF_TARGET_H

#include "arch.h"
#include "qp_error.h"
#include "unwind.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* vCPUs one stop samples: the width of --cpus (a 64-bit mask) and of qmp/'s and gdb/'s tables.
 * A guest with more is sampled on its first PROF_MAX_VCPUS, and the run says so. */
#define PROF_MAX_VCPUS 64

/* One vCPU at the stop. */
struct prof_vcpu {
    int index;            /* the target's number for it (QEMU cpu-index) */
    bool apic_known;      /* the backend learnt apic_id (prof_vcpu_guest_id) */
    uint32_t apic_id;     /* the guest's name for it: the x86 initial APIC ID */
    struct unw_regs regs; /* general registers, DWARF numbering */
    uint64_t pc, sp;
    int privilege;    /* 0 is the most privileged level */
    bool user;        /* at the level user code runs at */
    bool halted;      /* idle, or never started by the guest */
    bool paging64;    /* in 64-bit paging mode: addresses mean what the unwinder expects */
    uint64_t as_root; /* address-space root as arch->page_walk takes it (x86: CR3's address bits;
                         riscv64: all of satp, the mode included); compare two roots through
                         as_root_mask, a root with a table's address through root_names_table */
    struct prof_arch_mmu mmu; /* the rest of the walk's context (aarch64: TTBR1_EL1, TCR_EL1), for
                                 prof_arch_page_walk; zero where the architecture needs none */
    /* The kernel's per-CPU area where a register holds it (prof_arch_cpu_state's percpu_base:
     * x86's GS base); 0 when the transport did not give it. */
    uint64_t gs_base;
    /* Translation on in a mode the architecture's page walk does not serve
     * (prof_arch_cpu_state's): reads through the walk give nothing, no walk proves anything. */
    bool unwalkable;
    /* aarch64: SP_EL0 at EL1, riscv64: tp in S-mode (Linux keeps the current task there):
     * prof_arch_cpu_state's */
    bool has_kernel_thread_reg;
    uint64_t kernel_thread_reg;
    bool has_kernel_thread_alt; /* riscv64: sscratch (prof_arch_cpu_state's) */
    uint64_t kernel_thread_alt;
    bool has_exception_pc; /* aarch64: ELR_EL1, riscv64: sepc (prof_arch_cpu_state's) */
    uint64_t exception_pc;
    /* A capturing target (the plugin): how long the sample's trigger waited for this vCPU's
     * thread (us; qpr_sample.flag_age_us) and by which trigger (enum prof_flag_trigger). A
     * stopping target leaves both 0. */
    uint32_t flag_age_us;
    uint32_t flag_trigger;
    const void *target_cpu; /* the backend's own record, for prof_target_read; valid only while
                               the target is stopped */
};

enum prof_flag_trigger {
    PROF_FLAG_NONE = 0,    /* the target stopped the vCPU: no flag waited */
    PROF_FLAG_TIMER = 1,   /* a host timer flagged the vCPU; its next block took the sample */
    PROF_FLAG_COUNTER = 2, /* the vCPU's own instruction counter found its deadline passed */
};

/* How the guest numbers this vCPU: its APIC ID where the backend knows it, else the target's
 * index (the two agree for QEMU's default topologies). */
static inline uint32_t prof_vcpu_guest_id(const struct prof_vcpu *v)
{
    return v->apic_known ? v->apic_id : (uint32_t)(v->index > 0 ? v->index : 0);
}

struct prof_mem_req {
    uint64_t vaddr;
    size_t len;
    void *buf;  /* len bytes, owned by the caller */
    size_t got; /* out: bytes read from the start */
    int rc;     /* out: 0 when got > 0 or len == 0, -EFAULT when the first byte is unmapped */
    /* A stack window: its bytes must be those of the sample's instant. A target that captured
     * the sample while the guest ran on (prof_target_ops.captures) serves it only from what it
     * captured then, and fails the rest rather than read memory that has changed since. */
    bool instant;
};

struct prof_target_stats {
    uint64_t paused_ns;   /* how long the guest stood still for this sample */
    unsigned round_trips; /* requests this sample cost */
    bool was_paused;      /* someone else had paused it: we neither stopped nor resumed it */
    /* A capturing target: fn was not called, this sample is the previous one again. That one
     * ended intervals its vCPU's thread did not run (an overcommitted host), and a stopping
     * target would have found the vCPU where it was captured in each: one repeat per interval,
     * delivered right after it. */
    bool repeated;
};

struct prof_target_open_opts {
    const char *address;        /* e.g. a QMP socket path, or "tcp:HOST:PORT" */
    const char *memory_backend; /* backend-specific ("auto" when NULL) */
    double timeout_s;           /* per-reply time-out, 0: the backend's default */
    /* gdb: a QMP socket of the same QEMU, NULL if none. Only to find and map the shared RAM
     * file (memory without round trips); the gdbstub does all the rest. */
    const char *qmp_address;
    /* Capturing backends: when to capture (one of the two: --interval of each vCPU's time, or
     * --period-insns of its instructions), and the demo ABI's table (captured with each sample;
     * 0: none). */
    uint64_t interval_ns, period_insns;
    /* The plugin: how its vCPUs are told to sample (enum prof_plugin_trigger). */
    int plugin_trigger;
    uint64_t abi_addr;
    /* Capturing backends that offer exact_counts: count every executed instruction per
     * translation block from open on (--exact). */
    bool exact;
};

/* How qprof-plugin.so tells a vCPU to take a sample (--plugin-trigger): a host timer thread that
 * flags the vCPUs (every block compares a word), or a per-vCPU instruction counter whose
 * callback keeps time (every block also adds to it); AUTO: the plugin's default, which unless
 * QEMU loaded it with trigger=timer|counter is the timer, unless the host has no CPU to spare
 * beside the vCPU threads and the timer's wake-ups would take more of the guest's CPUs than the
 * counter costs it (qprof_ring.h, qpr_auto_trigger), and the counter for --period-insns. */
enum prof_plugin_trigger {
    PROF_PLUGIN_TRIGGER_AUTO = 0,
    PROF_PLUGIN_TRIGGER_TIMER,
    PROF_PLUGIN_TRIGGER_COUNTER,
};

struct prof_ram_range {
    uint64_t start, end;
};

/* More memory for a capturing backend to take at each sample's instant, beside the registers
 * and the stack (an OS adapter's per-CPU and per-task state: which task runs, its saved user
 * registers). Each window is len bytes at an address found at that instant, clipped at the
 * first unmapped page; prof_target_read then serves reads inside it. */
enum prof_capture_base {
    PROF_CAPTURE_NONE = 0,
    /* x86_64: the kernel's GS base (the per-CPU area of a Linux kernel): GS_BASE when it holds a
     * kernel-half address, else KERNEL_GS_BASE (user mode, or an entry before its swapgs) */
    PROF_CAPTURE_KERNEL_PERCPU,
    /* the u64 at byte from_off of the earlier window `from`, when it was captured and not 0 */
    PROF_CAPTURE_POINTER,
};

#define PROF_CAPTURE_WINDOWS 6
#define PROF_CAPTURE_BYTES   8192 /* all windows' len together, at most */

struct prof_capture_window {
    enum prof_capture_base base;
    uint32_t from, from_off; /* PROF_CAPTURE_POINTER */
    int64_t add;             /* added to the base */
    uint32_t len;
};

struct prof_capture_plan {
    int n;
    struct prof_capture_window w[PROF_CAPTURE_WINDOWS];
    /* x86_64: where a kernel-mode sample's user iret frame (rip, cs, rflags, rsp, ss) lies, so
     * that the user stack it points to is captured too: byte user_frame_off of window
     * user_frame_window - 1; 0: nowhere. */
    uint32_t user_frame_window, user_frame_off;
};

typedef struct prof_target prof_target;

/* --exact: one translated block of guest code and the instructions it executed, summed over
 * the vCPUs, since counting started. A block is a straight run of code from pc (the guest
 * virtual address it was translated at) to its first branch; code_hash is
 * prof_target_code_hash of its n_bytes, so that the caller can tell which binary's code ran. */
struct prof_exact_block {
    uint64_t pc, code_hash, insns;
    uint32_t n_insns, n_bytes;
};

struct prof_exact_counts {
    struct prof_exact_block *blocks; /* g_free'd by prof_exact_counts_clear */
    size_t n;
    bool counting;           /* the counters were in place (false: not yet, nothing counted) */
    double counted_s;        /* how long they had been, at the dump */
    uint64_t unplaced_insns; /* instructions of blocks beyond the backend's table: counted in
                                no block (the total stays exact) */
};

void prof_exact_counts_clear(struct prof_exact_counts *c);

/* The hash exact counts give of a block's code (FNV-1a 64), for matching it to a file's bytes. */
uint64_t prof_target_code_hash(const void *code, size_t len);

/* Called while every vCPU is stopped, with their registers (borrowed for the call). Return 0 to
 * go on, a negative code to fail the sample: the target resumes all the same. */
typedef int (*prof_target_stopped_fn)(prof_target *t, const struct prof_vcpu *cpus, int n_cpus,
                                      void *ctx, struct qp_error *err);

/* A backend. `impl` is what open made; the handle passes it back to every call. */
struct prof_target_ops {
    const char *name;
    const char *transport;       /* for people: "QMP", "gdbstub" */
    const char *round_trip_name; /* what round_trips counts, for summaries: "QMP round trips" */
    bool captures;               /* a capturing backend (see the top of this file) */
    double round_trip_ms;        /* what one usually costs on this machine's kind (QMP-COSTS.md),
                                    for telling a stalled transport from a normal one */
    /* The guest architecture it serves, known before open; NULL for a backend that finds it
     * at open (arch_of). */
    const struct prof_arch *arch;
    /* Optional: the architecture the opened target found (the gdbstub's target.xml, QMP's
     * query-target), for a backend that serves several; NULL: arch. */
    const struct prof_arch *(*arch_of)(const void *impl);
    int (*open)(const struct prof_target_open_opts *o, void **impl, struct qp_error *err);
    /* Stops, reads the registers into prof_vcpu, calls fn with t, resumes on every path. */
    int (*sample)(void *impl, prof_target *t, prof_target_stopped_fn fn, void *ctx,
                  struct prof_target_stats *stats, struct qp_error *err);
    /* Several reads through one vCPU's address space, while stopped. */
    int (*read)(void *impl, const struct prof_vcpu *cpu, struct prof_mem_req *reqs, size_t n,
                struct qp_error *err);
    bool (*running)(void *impl); /* false when someone else paused the guest */
    /* vCPUs the machine has (all of them, also beyond PROF_MAX_VCPUS), or -1 when unknown. */
    int (*vcpu_count)(const void *impl);
    /* Optional (NULL: not offered). Guest-physical memory, for an OS adapter that walks the
     * kernel's own page tables: len bytes at paddr, 0 when all were read. Also while the guest
     * runs (for memory it does not write, such as the kernel's read-only tables). */
    int (*read_phys)(void *impl, uint64_t paddr, void *buf, size_t len, struct qp_error *err);
    /* Optional. The guest's RAM as [start, end) ranges, at most max. */
    int (*ram_ranges)(void *impl, struct prof_ram_range *out, int max, int *n,
                      struct qp_error *err);
    uint64_t (*round_trips)(const void *impl);
    /* Optional. Samples a capturing backend dropped (a full ring) since it opened. */
    uint64_t (*lost)(const void *impl);
    /* Optional. Intervals a capturing backend took no capture in because the host did not run
     * the vCPU's thread then (an overcommitted host), each delivered as a repeat of the sample
     * that ended them (prof_target_stats.repeated). */
    uint64_t (*missed)(const void *impl);
    /* Optional. What the busy samples of such a backend amount to as independent samples: its
     * repeats add no information, so Kish's (sum w)^2 / sum w^2 over its captures' weights
     * (1 + their repeats); 0 when it has captured nothing. */
    uint64_t (*independent)(const void *impl);
    /* Optional. Intervals a capturing target skipped since it opened because someone else had
     * the guest paused (a stopping target's caller counts its own skipped calls instead). */
    uint64_t (*paused_intervals)(const void *impl);
    /* Optional (NULL: no --exact). The exact counts so far (open_opts.exact), into *out (the
     * caller's, prof_exact_counts_clear). */
    int (*exact_counts)(void *impl, struct prof_exact_counts *out, struct qp_error *err);
    /* Optional (capturing backends). From the next samples on, also capture plan's windows
     * (replacing an earlier plan); NULL: the backend captures only its own. */
    int (*set_capture)(void *impl, const struct prof_capture_plan *plan, struct qp_error *err);
    /* Optional. Machine resets seen so far (QMP's RESET events), without a round trip. */
    uint64_t (*resets)(const void *impl);
    bool (*reads_cost_round_trips)(const void *impl);
    const char *(*version)(const void *impl);  /* e.g. QEMU's "9.2.0" */
    const char *(*describe)(const void *impl); /* how memory is read, e.g. "direct" */
    /* Optional. How a capturing backend's vCPUs are told to sample, and why, for the summary
     * (the plugin's trigger); NULL: nothing to say. */
    const char *(*trigger)(void *impl);
    void (*free)(void *impl); /* never leaves a guest it stopped paused */
};

/* QEMU's QMP monitor (target_qmp.c): x86_64 guests, riscv64 with a shared RAM file, and aarch64
 * with memory that QEMU translates (memsave, HMP). */
extern const struct prof_target_ops prof_target_qmp_ops;
/* QEMU's gdbstub (target_gdb.c): the guests arch/ knows, by target.xml. */
extern const struct prof_target_ops prof_target_gdb_ops;
/* qprof-plugin.so inside QEMU 10 (target_plugin.c): x86_64, riscv64 and aarch64 guests under
 * TCG, captured. */
extern const struct prof_target_ops prof_target_plugin_ops;

/* Which of QEMU's interfaces to sample through (--transport). */
enum prof_transport {
    PROF_TRANSPORT_AUTO = 0, /* the gdbstub when given and it answers, else QMP */
    PROF_TRANSPORT_QMP,
    PROF_TRANSPORT_GDB,
    PROF_TRANSPORT_PLUGIN, /* --plugin: the only choice when given */
};

struct prof_transport_choice {
    enum prof_transport transport;
    const char *qmp_socket;     /* always set (the default socket when not given) */
    bool qmp_socket_given;      /* named by the user: also good for the gdbstub's RAM file */
    const char *gdb_address;    /* NULL: not given */
    const char *memory_backend; /* --memory */
    double timeout_s;
    const char *plugin_address;         /* --plugin; NULL: not given */
    uint64_t interval_ns, period_insns; /* for the plugin */
    enum prof_plugin_trigger plugin_trigger;
    uint64_t abi_addr; /* for the plugin: captured with each sample */
    bool exact;        /* for the plugin: --exact */
};

/* Opens the target the choice names. With both given and AUTO, the gdbstub when it connects
 * (QMP then only finds the RAM file), else QMP, after a one-line note on stderr saying why. */
int prof_target_open_transport(const struct prof_transport_choice *c, prof_target **out,
                               struct qp_error *err);

/* Opens a target through ops (borrowed, static). *out is the caller's (prof_target_free). */
int prof_target_open(const struct prof_target_ops *ops, const struct prof_target_open_opts *o,
                     prof_target **out, struct qp_error *err);
void prof_target_free(prof_target *t); /* NULL is a no-op */

int prof_target_sample(prof_target *t, prof_target_stopped_fn fn, void *ctx,
                       struct prof_target_stats *stats, struct qp_error *err);
/* Only while stopped, from inside the prof_target_stopped_fn, with one of its vCPUs. */
int prof_target_read(prof_target *t, const struct prof_vcpu *cpu, struct prof_mem_req *reqs,
                     size_t n, struct qp_error *err);
bool prof_target_running(prof_target *t);
int prof_target_vcpu_count(const prof_target *t); /* -1 when the backend cannot tell */
/* -ENOTSUP when the backend offers no physical access. */
int prof_target_read_phys(prof_target *t, uint64_t paddr, void *buf, size_t len,
                          struct qp_error *err);
int prof_target_ram_ranges(prof_target *t, struct prof_ram_range *out, int max, int *n,
                           struct qp_error *err);
uint64_t prof_target_round_trips(const prof_target *t);
/* Whether t captures samples while the guest runs (ops.captures): then sample() paces itself. */
bool prof_target_captures(const prof_target *t);
/* Samples a capturing target dropped since it opened; 0 for a stopping one. */
uint64_t prof_target_lost(const prof_target *t);
/* Intervals a capturing target took no capture in while the host did not run a vCPU thread (or
 * the thread that times the samples), delivered as repeats of the next sample; 0 otherwise. */
uint64_t prof_target_missed(const prof_target *t);
/* A capturing target's busy samples as independent ones (ops.independent); 0 otherwise. */
uint64_t prof_target_independent(const prof_target *t);
/* Intervals a capturing target skipped while someone else had the guest paused; 0 otherwise. */
uint64_t prof_target_paused_intervals(const prof_target *t);
/* --exact: the counts so far; -ENOTSUP from a target that cannot count. */
int prof_target_exact_counts(prof_target *t, struct prof_exact_counts *out, struct qp_error *err);
/* A capturing target: capture plan's windows at each sample from now on. -ENOTSUP from a
 * target that cannot. */
int prof_target_set_capture(prof_target *t, const struct prof_capture_plan *plan,
                            struct qp_error *err);
/* Machine resets the target has seen since it opened; 0 when it cannot tell. */
uint64_t prof_target_resets(const prof_target *t);
/* "QMP" or "gdbstub" (static). */
const char *prof_target_transport(const prof_target *t);
/* What prof_target_round_trips counts, e.g. "QMP round trips" (static). */
const char *prof_target_round_trip_name(const prof_target *t);
bool prof_target_reads_cost_round_trips(const prof_target *t);
/* What one round trip usually costs over this transport, in ms (ops->round_trip_ms). */
double prof_target_usual_round_trip_ms(const prof_target *t);
/* Strings valid while t lives. */
const char *prof_target_version(const prof_target *t);
const char *prof_target_describe(const prof_target *t);
/* The backend's trigger line (ops->trigger), NULL when it has none. */
const char *prof_target_trigger(const prof_target *t);
const struct prof_addr_split *prof_target_split(const prof_target *t);
/* The guest architecture (static). */
const struct prof_arch *prof_target_arch(const prof_target *t);

#endif
