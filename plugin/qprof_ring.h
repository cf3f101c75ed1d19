/* The shared-memory format between qprof-plugin.so (inside QEMU) and qprof's plugin target.
 *
 * The plugin makes one memfd when QEMU loads it and hands it to each qprof that connects to its
 * unix socket (SCM_RIGHTS, beside a struct qpr_hello); qprof answers with a struct qpr_config,
 * which arms sampling, and closing the socket disarms it. The memfd holds a struct qpr_header and
 * then one struct qpr_ring per vCPU: a single-producer (that vCPU's own thread), single-consumer
 * (qprof) ring of fixed-size samples. A vCPU that finds its ring full drops the sample and counts
 * it in `lost`: it never waits for qprof.
 *
 * Who writes what (docs/security.md): only the plugin writes the rings' memfd, which it
 * seals (F_SEAL_FUTURE_WRITE, F_SEAL_SHRINK) so that a client can map it read-only and nothing
 * else. The consumer's read positions live in a second, small memfd made afresh for each session
 * (struct qpr_tails, the second fd beside the hello): the only memory a client writes. A sample
 * is published by the release store of `head` after its slot is written, and its slot is free
 * again once the consumer's release store of its tail passes it. The plugin keeps the rings'
 * geometry, its heads and every length in its own memory and reads a tail as an untrusted
 * number: a tail that is not within QPR_SLOTS behind the head makes the ring look full.
 *
 * Both sides are x86_64 hosts built from this one header; nothing here is parsed from an
 * untrusted peer other than by bounds already fixed in this file (qprof still checks every
 * length against them). The guest's architecture is QEMU's target (qpr_header.target), which
 * qprof looks up in its own architecture tables: from them it names the registers to capture and
 * says which of the capture's steps apply (struct qpr_config: the stack pointer and mode
 * registers, where the kernel's per-CPU base is, whether the CPU pushes an interrupt frame at a
 * kernel entry). Nothing here or in the plugin decides by architecture. */
#ifndef QPROF_RING_H
#define QPROF_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define QPR_MAGIC       0x31525051u /* "QPR1" */
#define QPR_VERSION     8           /* 8: qpr_header.timer_own_cpus */
#define QPR_SLOTS       512 /* per vCPU: 50 ms of samples at 10 kHz (256 lost some on a loaded host) */
#define QPR_STACK_MAX   (16u << 10) /* stack window bytes, at most */
#define QPR_EXTRA_MAX   4096u       /* bytes of the one extra window qprof asks for */
#define QPR_MAX_VCPUS   64
#define QPR_MAX_PERIODS 100
#define QPR_WINDOWS     6     /* chained windows qprof asks for (struct qpr_window) */
#define QPR_WIN_BYTES   8192u /* their bytes together, at most */
#define QPR_MAX_REGS    48    /* registers qprof may ask for (struct qpr_config.reg_names) */
#define QPR_REG_NAME    16    /* bytes of a register's name, its terminating NUL included */
/* Floors on the rates a configuration may ask for (the plugin raises a lower one to these and
 * says so in qpr_header.interval_ns/period_insns; qprof's --interval and --period-insns refuse
 * less): below them the timer thread or the vCPU's callback would do little but wake up. */
#define QPR_MIN_INTERVAL_NS  UINT64_C(100000) /* 0.1 ms: 10 kHz */
#define QPR_MIN_PERIOD_INSNS UINT64_C(100)
/* And ceilings, qprof's too: past them the deadlines' arithmetic would overflow, and a timer
 * asleep until a far deadline would keep the next session's samples waiting. */
#define QPR_MAX_INTERVAL_NS  UINT64_C(60000000000) /* 60 s */
#define QPR_MAX_PERIOD_INSNS (UINT64_C(1) << 40)
/* How long a consumer that found every ring empty sleeps before it looks again
 * (qpr_drain_wait_ns): about QPR_DRAIN_BATCH intervals, within these bounds. */
#define QPR_DRAIN_BATCH  16
#define QPR_DRAIN_MIN_NS UINT64_C(500000)   /* 0.5 ms; also by instructions, at a rate unknown */
#define QPR_DRAIN_MAX_NS UINT64_C(10000000) /* 10 ms: a stop is still answered at once */
/* Changes that flush QEMU's code cache (a change of trigger, an exact-count START) are served at
 * most once per this long: the listener waits out the rest before it takes the next. */
#define QPR_RESET_GAP_NS UINT64_C(250000000)
/* How long the plugin waits for the rest of a message a client started, and for a reply it sends
 * to drain: a client that stops mid-message is disconnected, and the next qprof served. */
#define QPR_CLIENT_DEADLINE_MS 1000

enum qpr_kind {
    QPR_KIND_SAMPLE = 1, /* registers and memory windows at one instant */
    QPR_KIND_IDLE = 2,   /* the vCPU waited (hlt) for idle_ns, ending at time_ns */
};

struct qpr_sample {
    uint32_t kind;
    uint32_t vcpu;
    uint64_t time_ns; /* CLOCK_MONOTONIC of the capture (of the wake-up for IDLE) */
    uint64_t idle_ns; /* IDLE: how long the vCPU waited */
    uint64_t insns;   /* guest instructions this vCPU executed since it was armed (about) */
    uint32_t cost_ns; /* the capture's time on the vCPU thread */
    /* How long the sample waited for its vCPU (us, saturating): TIMER, from the timer thread's
     * first flag since the vCPU's last sample to the callback that took it; COUNTER, from the
     * vCPU's deadline to the check that found it passed. A flag that waited longer than a
     * running vCPU takes to reach its next block was raised while the host did not run the
     * thread (docs/plugin.md, "The moment of a sample"). */
    uint32_t flag_age_us;
    uint64_t regs_valid; /* bit i: regs[i] (qpr_config.reg_names[i]) was read */
    uint64_t regs[QPR_MAX_REGS];
    uint64_t stack_addr; /* = regs[qpr_config.sp_reg] */
    uint32_t stack_len;  /* bytes from stack_addr, up to the first unmapped page */
    uint32_t extra_len;  /* bytes of the extra window, 0 when unmapped or not asked for */
    uint64_t extra_addr;
    uint64_t ustack_addr; /* the chased user stack pointer (struct qpr_config), 0: none */
    uint32_t ustack_len;
    /* Intervals that ended by this sample (time-based sampling): 1, or more when the vCPU's
     * thread ran nothing for several of them (the host did not schedule it), which a stopping
     * sampler would have sampled where the vCPU was left: qprof counts the sample that many
     * times. At most QPR_MAX_PERIODS. */
    uint32_t periods;
    /* The chained windows (struct qpr_config's win): window i is win_len[i] bytes at
     * win_addr[i], kept at win_bytes + win_off[i]; win_len[i] 0: not captured. */
    uint64_t win_addr[QPR_WINDOWS];
    uint32_t win_len[QPR_WINDOWS];
    uint32_t win_off[QPR_WINDOWS];
    uint32_t win_asked; /* windows the configuration it was taken under asked for */
    uint32_t trigger;   /* enum qpr_trigger the sample was taken by (TIMER or COUNTER) */
    uint8_t stack[QPR_STACK_MAX];
    uint8_t extra[QPR_EXTRA_MAX];
    uint8_t ustack[QPR_STACK_MAX];
    uint8_t win_bytes[QPR_WIN_BYTES];
};

struct qpr_ring {
    _Atomic uint64_t head; /* written by the vCPU (the plugin's own count, stored here) */
    uint8_t pad0[56];
    _Atomic uint64_t lost;    /* samples dropped on a full ring, since QEMU started */
    _Atomic uint64_t samples; /* samples published, since QEMU started */
    /* trigger=timer: deadlines the host timer found this vCPU idle at, those it passed late
     * while the vCPU waited included (written by the plugin's timer thread only); qprof turns
     * each into an idle sample. */
    _Atomic uint64_t idle_ticks;
    uint8_t pad2[40];
    struct qpr_sample slots[QPR_SLOTS];
};

/* The consumer's read positions: the second memfd of a session, which the client maps
 * read-write. tail[i] is ring i's; the plugin sets them to the heads when the session starts. */
struct qpr_tails {
    struct {
        _Atomic uint64_t tail;
        uint8_t pad[56];
    } v[QPR_MAX_VCPUS];
};

struct qpr_header {
    uint32_t magic, version;
    uint32_t n_vcpus;     /* rings that follow */
    uint32_t slots;       /* QPR_SLOTS */
    uint32_t sample_size; /* sizeof(struct qpr_sample) */
    uint32_t api_version; /* QEMU's plugin API version */
    uint64_t ring_offset; /* of ring 0 from the start of the memfd */
    uint64_t ring_size;   /* sizeof(struct qpr_ring) */
    char target[32];      /* QEMU's target name, e.g. "x86_64" */
    /* How the vCPUs are sampled from the latest configuration on (enum qpr_trigger, never AUTO
     * here), and why (enum qpr_trigger_reason): set by the plugin once its code cache holds
     * that instrumentation, which may be a few blocks after the configuration arrived. */
    _Atomic uint32_t trigger, trigger_reason;
    /* CPU time one wake-up of the plugin's timer thread costs on this host, measured when QEMU
     * loaded it (ns; 0: not measured yet). */
    _Atomic uint32_t wake_cost_ns;
    /* At the latest choice of trigger: the host CPUs the vCPU threads and the timer thread may
     * run on, together, and the vCPU threads (fewer than n_vcpus without MTTCG); 0: not known.
     * Auto's rule weighs one against the other (qpr_auto_trigger). */
    _Atomic uint16_t host_cpus, vcpu_threads;
    /* Of host_cpus, those the timer thread may run on and no vCPU thread may: its wake-ups land
     * there, beside the guest, however many vCPU threads share the others. */
    _Atomic uint16_t timer_own_cpus;
    uint16_t reserved;
    /* The latest configuration's rates as the plugin applies them (QPR_MIN_* raise them). */
    _Atomic uint64_t interval_ns, period_insns;
};

/* How a vCPU is told to take a sample (qpr_config.trigger, qpr_header.trigger). Both end in a
 * conditional callback at the start of a translation block on the vCPU's own thread; they differ
 * in what every block carries and who keeps time:
 * - TIMER: every block compares one word (a load and a branch); a host thread wakes once per
 *   interval and sets it. Costs the guest almost nothing until sampling; sampling costs one
 *   host wake-up per interval, on another core.
 * - COUNTER: every block also adds its instruction count to the word; the vCPU's callback keeps
 *   time itself, checking the clock a few times per interval. A flat cost on every block,
 *   sampling or not, and no host wake-ups: cheaper at high rates where wake-ups are dear (a VM
 *   host), and the only way to sample by instruction counts (--period-insns).
 * - AUTO (asked, never in effect): by instructions COUNTER; by time TIMER, unless its wake-ups,
 *   at the cost measured on this host, would take more of the guest's CPUs than the counter
 *   does, which happens only without a host CPU to spare (qpr_auto_trigger). */
enum qpr_trigger {
    QPR_TRIGGER_AUTO = 0,
    QPR_TRIGGER_TIMER = 1,
    QPR_TRIGGER_COUNTER = 2,
};

/* Auto's rule for sampling by time, by what the guest loses (bench/plugin.sh measures it as the
 * guest's work per guest second). The timer's cost to the guest is its wake-ups where they run
 * on the vCPU threads' CPUs; the counter's is the add in every block, a flat share of the
 * guest's work wherever it runs.
 * - A host CPU to spare beside the vCPU threads (qpr_auto_spare_cpu): the wake-ups land on it
 *   and the guest loses only the captures, 1-5% at 10 kHz against the counter's 8-16% (a nested
 *   2-core VM, the vCPU pinned apart from the rest). The timer.
 * - None (everything on one core, or more vCPUs than cores): each wake-up takes from the vCPUs'
 *   CPUs what the plugin measured when QEMU loaded it, beside a busy thread on the timer's CPU
 *   (qprof_wakecost.h). The timer while that share stays under the counter's flat cost,
 *   QPR_COUNTER_GUEST_COST; the counter beyond. On one shared core of that VM a wake-up took
 *   50-53 us from the busy thread (its own CPU time: 16-17 us), and at 10 kHz the timer cost the
 *   guest 56-61%, the counter 10-13%; at 1 kHz the timer's share is 5%, and it stays.
 * host_cpus 0 means unknown: the timer, as a host with a spare CPU would get. */
#define QPR_COUNTER_GUEST_COST 0.17

/* The share of the guest's CPUs the timer's wake-ups take when they run in the guest's time. */
static inline double qpr_timer_guest_share(uint32_t wake_ns, uint64_t interval_ns,
                                           uint32_t host_cpus)
{
    if (!interval_ns || !host_cpus)
        return 0;
    return (double)wake_ns / (double)interval_ns / host_cpus;
}

/* A CPU to spare: more CPUs than vCPU threads, or one the timer thread may use and no vCPU
 * thread may (four vCPU threads pinned to one CPU, the rest of QEMU on another: the CPUs are not
 * one pool, and the wake-ups never take the vCPUs' CPU). */
static inline bool qpr_auto_spare_cpu(uint32_t vcpu_threads, uint32_t host_cpus,
                                      uint32_t timer_own_cpus)
{
    return !host_cpus || host_cpus > vcpu_threads || timer_own_cpus > 0;
}

/* QPR_TRIGGER_TIMER or QPR_TRIGGER_COUNTER by the rule above. */
static inline enum qpr_trigger qpr_auto_trigger(uint32_t wake_ns, uint64_t interval_ns,
                                                uint32_t vcpu_threads, uint32_t host_cpus,
                                                uint32_t timer_own_cpus)
{
    if (qpr_auto_spare_cpu(vcpu_threads, host_cpus, timer_own_cpus))
        return QPR_TRIGGER_TIMER;
    return qpr_timer_guest_share(wake_ns, interval_ns, host_cpus) > QPR_COUNTER_GUEST_COST
               ? QPR_TRIGGER_COUNTER
               : QPR_TRIGGER_TIMER;
}

/* The consumer's sleep on empty rings, sampling by time every interval_ns (0: by instructions).
 * Where qprof shares a host CPU with the vCPU threads, each of its wake-ups is taken from the
 * guest: a fixed 0.5 ms woke it up to 2,000 times a second at any rate, five samples per wake-up
 * at 10 kHz and twenty wake-ups per sample at 100 Hz. A batch of intervals per wake-up instead,
 * which no ring outgrows meanwhile (QPR_SLOTS is many batches). */
_Static_assert(QPR_DRAIN_BATCH * 8 <= QPR_SLOTS, "a ring holds several batches");
static inline uint64_t qpr_drain_wait_ns(uint64_t interval_ns)
{
    if (!interval_ns || interval_ns > QPR_DRAIN_MAX_NS / QPR_DRAIN_BATCH)
        return interval_ns ? QPR_DRAIN_MAX_NS : QPR_DRAIN_MIN_NS;
    uint64_t ns = interval_ns * QPR_DRAIN_BATCH;
    return ns < QPR_DRAIN_MIN_NS ? QPR_DRAIN_MIN_NS : ns;
}

enum qpr_trigger_reason {
    QPR_REASON_NONE = 0,       /* no configuration yet */
    QPR_REASON_ASKED = 1,      /* qprof asked for it (--plugin-trigger) */
    QPR_REASON_LOADED = 2,     /* QEMU loaded the plugin with trigger=timer|counter */
    QPR_REASON_INSNS = 3,      /* sampling by instruction counts (--period-insns) */
    QPR_REASON_RULE = 4,       /* AUTO: by its rule, at this interval on this host */
    QPR_REASON_UNMEASURED = 5, /* AUTO before the wake-up cost was measured: TIMER */
};

static inline uint64_t qpr_map_size(uint32_t n_vcpus)
{
    uint64_t off = (sizeof(struct qpr_header) + 4095) & ~(uint64_t)4095;
    return off + (uint64_t)n_vcpus * sizeof(struct qpr_ring);
}

/* Ring vcpu's offset in the memfd: from this header's sizes alone, never from a header field
 * (qpr_header.ring_offset and ring_size say the same, for a peer to check its layout by). */
static inline uint64_t qpr_ring_offset(uint32_t vcpu)
{
    return qpr_map_size(0) + (uint64_t)vcpu * sizeof(struct qpr_ring);
}

/* Socket messages, fixed size, host byte order. */
enum qpr_status {
    QPR_OK = 0,
    QPR_BUSY = 1,   /* another qprof is connected */
    QPR_DENIED = 2, /* the peer's uid is not QEMU's, nor one -plugin allowed (allow-uid=N) */
};

#define QPR_HELLO_EXACT 2u /* serves exact instruction counts (struct qpr_exact_request) */

struct qpr_hello { /* plugin -> qprof, with the rings' memfd and the session's qpr_tails memfd */
    uint32_t magic, version, status;
    uint32_t n_vcpus;
    uint64_t map_size;     /* the rings' memfd: qpr_map_size(n_vcpus); the tails' is a qpr_tails */
    char qemu_version[32]; /* unknown to the plugin API: "plugin API 4" */
    uint32_t flags;        /* QPR_HELLO_* */
    uint32_t pad;
};

/* Where a chained window starts (qpr_window.base). */
enum qpr_win_base {
    QPR_WIN_NONE = 0,
    /* the kernel's per-CPU area: the first of qpr_config.percpu_reg that holds an address at or
     * above kernel_start (x86_64: gs_base, else k_gs_base in user mode or at a kernel entry
     * before its swapgs); none: not captured */
    QPR_WIN_KERNEL_PERCPU = 1,
    /* the u64 at byte from_off of window `from` (an earlier one), when it was captured whole
     * there and is not 0 */
    QPR_WIN_POINTER = 2,
};

/* One window: len bytes at base + add, clipped at the first unmapped page. A window that lies
 * wholly inside the stack window already captured is not read again (qprof finds its bytes
 * there). */
struct qpr_window {
    uint32_t base, from, from_off, len;
    int64_t add;
};

struct qpr_config { /* qprof -> plugin; a later one replaces it */
    uint32_t magic, version;
    uint64_t interval_ns;  /* time-based sampling (0: by instructions) */
    uint64_t period_insns; /* instruction-based sampling, when interval_ns is 0 */
    uint32_t stack_bytes;  /* window from sp, at most QPR_STACK_MAX */
    uint32_t extra_len;    /* at most QPR_EXTRA_MAX; 0: none */
    uint64_t extra_addr;   /* a kernel address every vCPU maps (the demo ABI's table) */
    /* The user stack of a sample taken in kernel mode, found by following pointers at that
     * instant: p = the u64 at extra[chase_off + vcpu * chase_stride]; when p is not 0, the u64
     * at p + chase_add is the user stack pointer, and ustack_bytes from it are captured (the
     * demo ABI: the slot's user_regs, the saved frame's rsp). chase_stride 0: no chase. */
    uint32_t chase_off, chase_stride;
    uint32_t chase_add, ustack_bytes;
    /* When p is 0 (the kernel has not saved the frame yet, or has already cleared the pointer on
     * its way out), the u64 at extra[kstack_top_off + vcpu * chase_stride] is the top of the
     * kernel stack: on x86_64 the CPU put the interrupt frame of an entry from user mode there;
     * elsewhere the kernel saves its frame of top_frame_size bytes there (the demo guests' entry
     * code), whose sp is at chase_add. 0: none. */
    uint32_t kstack_top_off;
    uint32_t top_frame_size;
    uint64_t user_end; /* user addresses are below this (the architecture's split) */
    uint32_t trigger;  /* enum qpr_trigger: AUTO leaves it to the plugin's own default */
    /* When p is 0, before the stack top's frame: the register that holds the interrupted user
     * sp in kernel mode when it holds a user address (aarch64: SP_EL0, which an entry from EL0
     * leaves as it was); an index into reg_names, QPR_MAX_REGS: none. */
    uint32_t ustack_reg;
    /* The registers to read at each sample, by the names QEMU's gdb XML gives them (qprof's
     * architecture table says which): regs[i] of a sample is reg_names[i], its regs_valid bit
     * clear when the vCPU has no such register. The plugin resolves the names to QEMU's handles
     * once per vCPU and configuration, never per sample. sp_reg is the stack pointer's index; a
     * sample is in user mode when (regs[mode_reg] & mode_mask) == mode_user (x86_64:
     * cs & 3 == 3). */
    uint32_t n_regs, sp_reg, mode_reg;
    /* 1: a kernel entry from user mode makes the CPU push an interrupt frame (rip, cs, rflags,
     * rsp, ss: qpr_is_user_iret_frame) on the kernel stack, where qpr_user_sp looks for the user
     * sp (x86_64); 0: the kernel's entry code saves the frame (top_frame_size). */
    uint32_t iret_frame;
    /* The registers that may hold the kernel's per-CPU base (QPR_WIN_KERNEL_PERCPU), in the order
     * they are tried: indexes into reg_names, QPR_MAX_REGS for none (x86_64: gs_base, then
     * k_gs_base). A value is a base when it is at or above kernel_start, the kernel half's. */
    uint32_t percpu_reg[2];
    uint64_t mode_mask, mode_user;
    uint64_t kernel_start;
    char reg_names[QPR_MAX_REGS][QPR_REG_NAME];
    /* Windows an OS adapter needs at the instant (a Linux kernel's current task and its saved
     * registers), followed from the registers and from each other; len 0 ends the list. Their
     * lens together at most QPR_WIN_BYTES (the plugin cuts the rest). */
    struct qpr_window win[QPR_WINDOWS];
    /* A kernel-mode sample's user stack, when the ABI's chase finds none: the user iret frame
     * (rip, cs, rflags, rsp, ss) at byte ustack_win_off of window ustack_win - 1 (a Linux
     * task's pt_regs at the top of its kernel stack); 0: none. */
    uint32_t ustack_win, ustack_win_off;
};

/* --- Exact instruction counts (qprof --exact; the plugin's qprof_exact.c) ---
 *
 * qprof asks with a struct qpr_exact_request on the same socket (the size of a qpr_config, which
 * is the size the plugin reads its messages in; the magic tells the two apart). START: from the
 * next vCPU callback on, every translation block carries an inline per-vCPU counter (QEMU's
 * code cache is flushed once so that blocks translated before get one too), counted afresh;
 * no callback per block. The plugin answers a struct qpr_exact_reply without blocks. DUMP: the
 * plugin answers a struct qpr_exact_reply and then n_blocks struct qpr_exact_block, the counts
 * at that moment, summed over the vCPUs. When the qprof that asked goes away, the counters are
 * removed again (another flush). */
#define QPR_EXACT_MAGIC 0x58525051u /* "QPRX" */

enum qpr_exact_op {
    QPR_EXACT_START = 1,
    QPR_EXACT_DUMP = 2,
};

struct qpr_exact_request { /* qprof -> plugin */
    uint32_t magic, version, op, pad;
    uint8_t rest[sizeof(struct qpr_config) - 16];
};
_Static_assert(sizeof(struct qpr_exact_request) == sizeof(struct qpr_config),
               "the plugin reads every message in a qpr_config's size");

struct qpr_exact_reply { /* plugin -> qprof */
    uint32_t magic, version;
    uint32_t n_blocks; /* struct qpr_exact_block that follow (DUMP) */
    uint32_t counting; /* 1: the counters of the latest START are in place */
    uint64_t since_ns; /* CLOCK_MONOTONIC when they were put in place, 0: not yet */
    /* instructions of blocks translated after the block table filled up (counted, not placed) */
    uint64_t overflow_insns;
    uint64_t table_full_blocks; /* translations that found the table full */
};

struct qpr_exact_block {
    uint64_t vaddr;     /* the guest virtual address the block was translated at */
    uint64_t code_hash; /* qpr_code_hash of its n_bytes of code */
    uint64_t insns;     /* instructions it executed: n_insns x executions, all vCPUs */
    uint32_t n_insns, n_bytes;
};

/* FNV-1a over a block's code bytes, continued from h (start with QPR_CODE_HASH_INIT): both
 * sides compute it, the plugin from the translated instructions, qprof from an ELF's bytes at
 * the block's address, so a block is matched to the binary whose code it ran. */
#define QPR_CODE_HASH_INIT UINT64_C(0xcbf29ce484222325)
static inline uint64_t qpr_code_hash(uint64_t h, const void *bytes, uint64_t len)
{
    const uint8_t *p = (const uint8_t *)bytes;
    for (uint64_t i = 0; i < len; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* Where qpr_user_sp found a kernel-mode sample's user stack pointer. */
enum qpr_usp_from {
    QPR_USP_NONE = 0,   /* nowhere: the sample has no user stack (qprof marks it truncated) */
    QPR_USP_ENTRY,      /* the CPU's interrupt frame at sp: an entry stub's first blocks */
    QPR_USP_SAVED,      /* the frame the kernel saved and published (qpr_config's chase) */
    QPR_USP_KSTACK_TOP, /* the frame at the top of the kernel stack (x86_64: the CPU's) */
    QPR_USP_WINDOW,     /* the user frame in a chained window (qpr_config.ustack_win) */
    QPR_USP_REGISTER,   /* the register qpr_config.ustack_reg names */
};

/* Reads the u64 at a guest address outside the captured windows; false when unmapped. */
typedef bool (*qpr_read_u64_fn)(void *ctx, uint64_t addr, uint64_t *out);

static inline bool qpr_window_u64(uint64_t win_addr, const uint8_t *bytes, uint32_t len,
                                  uint64_t addr, uint64_t *out)
{
    if (addr < win_addr || addr - win_addr > len || len - (addr - win_addr) < 8)
        return false;
    memcpy(out, bytes + (addr - win_addr), 8);
    return true;
}

/* The five words of an x86_64 interrupt frame (rip, cs, rflags, rsp, ss) pushed on an entry from
 * user mode: selectors with RPL 3, rflags' fixed bit, user-half addresses. Ordinary kernel stack
 * words rarely pass all of it. */
static inline bool qpr_is_user_iret_frame(const uint64_t w[5])
{
    return (w[1] & 3) == 3 && w[1] < 0x10000 && (w[4] & 3) == 3 && w[4] < 0x10000 && (w[2] & 2) &&
           w[2] < 0x400000 && w[0] < (UINT64_C(1) << 47) && w[3] && w[3] < (UINT64_C(1) << 47);
}

/* The user frame at addr inside the captured kernel stack window. */
static inline bool qpr_stack_frame_usp(const struct qpr_sample *s, uint64_t addr, uint64_t *usp)
{
    uint64_t w[5];
    for (int i = 0; i < 5; i++)
        if (!qpr_window_u64(s->stack_addr, s->stack, s->stack_len, addr + 8 * (uint64_t)i, &w[i]))
            return false;
    if (!qpr_is_user_iret_frame(w))
        return false;
    *usp = w[3];
    return true;
}

/* The user frame in the chained window qpr_config.ustack_win names (a Linux task's pt_regs):
 * the stack pointer user mode entered the kernel with, when the words make a user iret frame. */
static inline enum qpr_usp_from qpr_window_usp(const struct qpr_sample *s,
                                               const struct qpr_config *c, uint64_t *usp)
{
    uint32_t w = c->ustack_win;
    if (!w || w > QPR_WINDOWS || s->win_off[w - 1] > QPR_WIN_BYTES ||
        s->win_len[w - 1] > QPR_WIN_BYTES - s->win_off[w - 1])
        return QPR_USP_NONE;
    uint64_t f[5], at = s->win_addr[w - 1] + c->ustack_win_off;
    for (int i = 0; i < 5; i++)
        if (!qpr_window_u64(s->win_addr[w - 1], s->win_bytes + s->win_off[w - 1], s->win_len[w - 1],
                            at + 8 * (uint64_t)i, &f[i]))
            return QPR_USP_NONE;
    if (!qpr_is_user_iret_frame(f))
        return QPR_USP_NONE;
    *usp = f[3];
    return QPR_USP_WINDOW;
}

/* The user sp a kernel saved at `at` (in the stack window, else read with read_u64, which may be
 * NULL): the word is the guest's, so only a user-half address is taken. */
static inline bool qpr_saved_usp(const struct qpr_sample *s, const struct qpr_config *c,
                                 uint64_t at, qpr_read_u64_fn read_u64, void *ctx, uint64_t *usp)
{
    uint64_t v = 0, user_end = c->user_end ? c->user_end : UINT64_C(1) << 47;
    bool read = qpr_window_u64(s->stack_addr, s->stack, s->stack_len, at, &v) ||
                (read_u64 && read_u64(ctx, at, &v));
    if (!read || !v || v >= user_end)
        return false;
    *usp = v;
    return true;
}

/* The user stack pointer of a sample taken in kernel mode, from what was captured at its instant
 * (registers, the kernel stack window from sp, the extra window), in this order:
 * - where the CPU pushes an interrupt frame (iret_frame: x86_64), an entry stub's first blocks,
 *   before the kernel saved anything: the CPU's frame lies in the first words at sp, after an
 *   error code or the vector a stub pushed;
 * - the frame the kernel saved and points to (the chase), read with read_u64 when it lies
 *   outside the stack window (read_u64 may be NULL);
 * - no pointer published (the kernel between its entry stub and publishing it, or between
 *   clearing it and the iretq that leaves: the demo kernel's isr_return pops the registers with
 *   the pointer already 0): with iret_frame the interrupt frame at the top of the kernel stack,
 *   which is where the CPU puts an entry from user mode; without, the register that still holds
 *   the user sp (ustack_reg), then the frame the entry code saves at the stack's top
 *   (top_frame_size).
 * The later steps are this instant's too: the pointer and the stack top are read from the extra
 * window, the frame from the stack window, all captured together. (riscv64's first entry
 * instructions still run on the user's sp: the stack window is the user stack then.) */
static inline enum qpr_usp_from qpr_user_sp(const struct qpr_sample *s, const struct qpr_config *c,
                                            uint32_t vcpu, qpr_read_u64_fn read_u64, void *ctx,
                                            uint64_t *usp)
{
    bool iret = c->iret_frame != 0;
    for (uint64_t off = 0; iret && off <= 24; off += 8)
        if (qpr_stack_frame_usp(s, s->stack_addr + off, usp))
            return QPR_USP_ENTRY;
    if (!c->chase_stride)
        return qpr_window_usp(s, c, usp);
    uint64_t slot = s->extra_addr + (uint64_t)vcpu * c->chase_stride, frame = 0, top = 0;
    if (!qpr_window_u64(s->extra_addr, s->extra, s->extra_len, slot + c->chase_off, &frame))
        return QPR_USP_NONE;
    if (frame)
        return qpr_saved_usp(s, c, frame + c->chase_add, read_u64, ctx, usp) ? QPR_USP_SAVED
                                                                             : QPR_USP_NONE;
    if (!iret && c->ustack_reg < QPR_MAX_REGS && (s->regs_valid >> c->ustack_reg & 1)) {
        uint64_t v = s->regs[c->ustack_reg];
        if (v && v < (c->user_end ? c->user_end : UINT64_C(1) << 47)) {
            *usp = v;
            return QPR_USP_REGISTER;
        }
    }
    if (!c->kstack_top_off ||
        !qpr_window_u64(s->extra_addr, s->extra, s->extra_len, slot + c->kstack_top_off, &top))
        return QPR_USP_NONE;
    if (iret && top >= 40 && qpr_stack_frame_usp(s, top - 40, usp))
        return QPR_USP_KSTACK_TOP;
    /* the frame the entry code saves at the stack's top: possibly an earlier entry's, before this
     * one wrote it, which only makes the window start elsewhere (its bytes are this instant's) */
    if (!iret && c->top_frame_size && top > c->top_frame_size &&
        qpr_saved_usp(s, c, top - c->top_frame_size + c->chase_add, read_u64, ctx, usp))
        return QPR_USP_KSTACK_TOP;
    return QPR_USP_NONE;
}

/* Whether the sample was taken in user mode, by c's register test; false when that register was
 * not read. */
static inline bool qpr_user_mode(const struct qpr_sample *s, const struct qpr_config *c)
{
    return c->mode_reg < QPR_MAX_REGS && (s->regs_valid >> c->mode_reg & 1) &&
           (s->regs[c->mode_reg] & c->mode_mask) == c->mode_user;
}

/* The kernel's per-CPU base at this instant: the first of c's percpu_reg that was read and holds
 * a kernel-half address (none without a kernel_start). */
static inline bool qpr_percpu_base(const struct qpr_sample *s, const struct qpr_config *c,
                                   uint64_t *base)
{
    for (int k = 0; k < 2; k++) {
        uint32_t r = c->percpu_reg[k];
        if (r < QPR_MAX_REGS && (s->regs_valid >> r & 1) && c->kernel_start &&
            s->regs[r] >= c->kernel_start) {
            *base = s->regs[r];
            return true;
        }
    }
    return false;
}

/* The base address of window i of c's windows in s (the registers and the windows before it),
 * false when there is none at this instant. */
static inline bool qpr_window_base(const struct qpr_sample *s, const struct qpr_config *c,
                                   uint32_t i, uint64_t *base)
{
    const struct qpr_window *w = &c->win[i];
    switch (w->base) {
    case QPR_WIN_KERNEL_PERCPU:
        return qpr_percpu_base(s, c, base);
    case QPR_WIN_POINTER: /* lengths checked again: s may be a copy of shared memory */
        if (w->from >= i || s->win_off[w->from] > QPR_WIN_BYTES ||
            s->win_len[w->from] > QPR_WIN_BYTES - s->win_off[w->from] ||
            !qpr_window_u64(s->win_addr[w->from], s->win_bytes + s->win_off[w->from],
                            s->win_len[w->from], s->win_addr[w->from] + w->from_off, base))
            return false;
        return *base != 0;
    default:
        return false;
    }
}

/* Reads len bytes at a guest address, clipped at the first unmapped page: the bytes read. */
typedef uint32_t (*qpr_read_window_fn)(void *ctx, uint64_t addr, uint32_t len, uint8_t *out);

/* Captures the chained windows c asks for into s (after its registers and stack window), in
 * order, each from the registers or a pointer in an earlier one, all at this instant; their
 * bytes together at most QPR_WIN_BYTES. Bytes the stack window holds already are copied from
 * it, not read again. */
static inline void qpr_capture_windows(struct qpr_sample *s, const struct qpr_config *c,
                                       qpr_read_window_fn read, void *ctx)
{
    const struct qpr_window *win = c->win;
    uint32_t used = 0;
    memset(s->win_addr, 0, sizeof s->win_addr);
    memset(s->win_len, 0, sizeof s->win_len);
    memset(s->win_off, 0, sizeof s->win_off);
    s->win_asked = 0;
    for (uint32_t i = 0; i < QPR_WINDOWS && win[i].len; i++) {
        s->win_asked = i + 1;
        uint64_t base;
        if (!qpr_window_base(s, c, i, &base))
            continue;
        uint64_t addr = base + (uint64_t)win[i].add;
        uint32_t len = win[i].len;
        if (len > QPR_WIN_BYTES - used)
            len = QPR_WIN_BYTES - used;
        s->win_addr[i] = addr;
        s->win_off[i] = used;
        if (s->stack_len <= QPR_STACK_MAX && addr >= s->stack_addr &&
            addr - s->stack_addr <= s->stack_len && s->stack_len - (addr - s->stack_addr) >= len) {
            memcpy(s->win_bytes + used, s->stack + (addr - s->stack_addr), len);
            s->win_len[i] = len;
        } else {
            s->win_len[i] = read(ctx, addr, len, s->win_bytes + used);
        }
        used += s->win_len[i];
    }
}

#endif
