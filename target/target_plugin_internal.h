/* Private to target/: the plugin target's files (target_plugin.c: open, the sample and reads,
 * the ops table; target_plugin_ring.c: the socket, the rings and their records;
 * target_plugin_regs.c: which registers the plugin captures and a sample's vCPU from them;
 * target_plugin_pause.c: pauses someone else made, from QMP's events; target_plugin_pmem.c:
 * without --qmp-socket, code out of the QEMU process proved against the captures;
 * target_plugin_exact.c: --exact's requests; target_plugin_status.c: the summary's lines).
 * None calls target_plugin.c; target_plugin_pmem.c uses the ring and regs files. */
#ifndef TARGET_PLUGIN_INTERNAL_H
#define TARGET_PLUGIN_INTERNAL_H

#include "target.h"
#include "arch.h"
#include "mem_process.h"

#include "qmp.h"
#include "qp_clock.h"
#include "qprof_ring.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* A pause someone else made, in QEMU's wall-clock stamps (us). */
struct pause_span {
    int64_t from_us, to_us;
};

#define MAX_PAUSES 64
/* The vCPUs stop before QEMU stamps STOP and wake after it stamps RESUME (their threads wait
 * for the host to run them): waiting this close to a pause is the pause's. */
#define PAUSE_SLACK_US 50000

/* The vCPU behind a delivered prof_vcpu: the captured sample. */
struct plugin_cpu {
    const struct qpr_sample *s; /* NULL for an idle sample */
};

struct target_plugin {
    int fd;
    /* The rings, mapped read-only (the plugin alone writes them), and this session's read
     * positions, the only memory qprof writes. The rings' pointers and the header's status
     * words are taken once at open, from the layout checked there: nothing in the header is
     * read as a size or an offset again. */
    const void *map;
    size_t map_size;
    struct qpr_tails *tails;
    const struct qpr_ring *ring[QPR_MAX_VCPUS];
    const struct qpr_header *status; /* trigger, trigger_reason, wake_cost_ns only */
    uint32_t n_vcpus;
    /* The guest's architecture, from QEMU's target name in the ring's header: the registers to
     * capture, and what they say, are its table's. */
    const struct prof_arch *arch;
    uint64_t tail[QPR_MAX_VCPUS];
    uint64_t lost_at_open[QPR_MAX_VCPUS];
    uint64_t idle_ticks_seen[QPR_MAX_VCPUS]; /* trigger=timer's idle samples taken over */
    uint64_t interval_ns, period_insns;
    uint32_t trigger; /* enum qpr_trigger asked for (--plugin-trigger) */
    bool exact;       /* --exact: the plugin counts instructions per block */
    uint64_t idle_carry_ns[QPR_MAX_VCPUS];
    uint32_t next_ring;
    int idle_vcpu; /* idle samples still to deliver for this vCPU */
    uint64_t idle_pending;
    /* Intervals that passed while the host did not run a vCPU's thread, delivered as repeats of
     * the sample that ended them (tp_repeat_unrun), and those of the last one still to go. */
    uint64_t missed, repeats_left;
    double weight_sum, weight_squares; /* over the captures: 1 + their repeats (tp_independent) */
    /* QMP of --qmp-socket, NULL without: its STOP and RESUME events tell a pause (someone
     * else's `stop`) from a halt, which the plugin alone cannot (both are a vCPU thread that
     * waits). With `direct`, its backend also maps the RAM file. */
    qmp_client *qmp;
    bool direct;
    /* Without the RAM file, code read out of the QEMU process (mem_process.h), which the
     * plugin's socket's peer is; NULL when not in use. */
    target_pmem *pmem;
    /* Without --qmp-socket, a proof by the first captures that failed (they came from early boot,
     * say) is tried again with later ones: how many tries are left, and not before when. */
    int pmem_tries_left;
    struct target_pmem_witness *pmem_w; /* witnesses gathered from delivered samples */
    int pmem_wn;
    struct pause_span pauses[MAX_PAUSES]; /* the latest ended pauses, oldest overwritten */
    unsigned n_pauses;
    int64_t paused_since_us; /* QEMU's STOP stamp of the pause going on; 0: running */
    int64_t open_us;         /* wall clock at open: pauses count from here */
    int64_t real_minus_mono_us;
    uint64_t paused_us;    /* ended pauses' time since open, for the skipped intervals */
    struct qpr_config cfg; /* what the plugin was last sent */
    /* Samples the plugin took before it had the OS adapter's windows (set_capture), passed
     * over: their task cannot be read at their instant any more. */
    uint64_t before_plan;
    struct qpr_sample cur; /* a copy: the ring slot is released at once */
    struct plugin_cpu cpu;
    struct prof_vcpu vcpu;
    char version[48];
    char trigger_line[256];
};

/* QEMU refuses a plugin built for a plugin API it does not take ("plugin requires API version
 * 4, but this QEMU supports only a minimum version of 7") and exits: all qprof sees is no socket.
 */
#define INSTALL_HINT                                                                               \
    "start QEMU 9.2 to 11.x (plugin API 4 to 7) with -plugin build/qprof-plugin.so,socket=PATH, "  \
    "the plugin built against that QEMU's own qemu-plugin.h ('xtask/xtask build' takes the "       \
    "system QEMU's; if QEMU said 'plugin requires API version N', rebuild it for that QEMU; "      \
    "Debian 12's 7.2 cannot load it, xtask/qemu10.sh fetches 10.0)"

/* target_plugin_ring.c */
int tp_connect_socket(const char *address, struct qp_error *err);
int tp_receive_hello(struct target_plugin *t, const char *address, int fds[2], struct qpr_hello *h,
                     double timeout, struct qp_error *err);
int tp_map_rings(struct target_plugin *t, const int fds[2], const struct qpr_hello *h,
                 struct qp_error *err);
void tp_idle_vcpu(struct target_plugin *t, int index);
bool tp_take_idle_ticks(struct target_plugin *t);
bool tp_next_record(struct target_plugin *t);
bool tp_peer_gone(struct target_plugin *t);

/* target_plugin_regs.c */
int tp_config_registers(const struct prof_arch *a, struct qpr_config *c, struct qp_error *err);
int tp_vcpu_from_sample(struct target_plugin *t, const struct qpr_sample *s, struct qp_error *err);

/* target_plugin_pause.c */
int tp_open_qmp(struct target_plugin *t, const char *address, double timeout, struct qp_error *err);
void tp_take_pause_events(struct target_plugin *t);
uint64_t tp_paused_part_ns(struct target_plugin *t, const struct qpr_sample *s);
uint64_t tp_unrun_periods(struct target_plugin *t, const struct qpr_sample *s);
uint64_t tp_capture_repeats(struct target_plugin *t);
bool tp_repeat_unrun(struct target_plugin *t, struct prof_target_stats *stats);

/* target_plugin_pmem.c */
void tp_open_pmem_alone(struct target_plugin *t, double timeout);
void tp_witness_sample(struct target_plugin *t);

/* target_plugin_exact.c */
int tp_exact_counts(void *impl, struct prof_exact_counts *out, struct qp_error *err);
int tp_exact_request(struct target_plugin *t, uint32_t op, struct qpr_exact_reply *reply,
                     struct qp_error *err);

/* target_plugin_status.c */
const char *tp_describe(const void *impl);
const char *tp_trigger(void *impl);
uint64_t tp_missed(const void *impl);
uint64_t tp_independent(const void *impl);
uint64_t tp_paused_intervals(const void *impl);
uint64_t tp_lost(const void *impl);

#endif
