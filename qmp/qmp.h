/* qmp: QEMU Machine Protocol client, vCPU registers and guest memory.
 *
 * One qmp_client owns one connection to one QEMU. Nothing here is thread-safe; use one client
 * per thread. Every function returning int returns 0 on success or a negative errno-style code
 * and fills the optional `err` (see common/qp_error.h).
 *
 * Costs (docs/qmp-costs.md): QEMU reads requests one byte at a time, so requests are
 * sent as compact JSON with short ids; round trips dominate, so a sample is a fixed number of
 * them however deep the stack is.
 */
#ifndef QMP_H
#define QMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qp_error.h"

struct json_object;

/* ---- Parser (no I/O) -------------------------------------------------------------------- */

/* A streaming parser for the QMP byte stream: feed it bytes as they arrive, split anywhere,
 * and pull complete top-level JSON objects out in order. */
typedef struct qmp_parser qmp_parser;

qmp_parser *qmp_parser_new(void);
void qmp_parser_free(qmp_parser *p); /* NULL is a no-op */

/* Consumes len bytes. Returns 0, or -EPROTO with err filled if the stream is not valid JSON
 * (the parser is then unusable) or a message is larger than 64 MiB. */
int qmp_parser_feed(qmp_parser *p, const char *bytes, size_t len, struct qp_error *err);

/* Takes the next complete message. Returns 1 and sets *msg (caller owns it, json_object_put),
 * or 0 when no complete message is buffered. */
int qmp_parser_next(qmp_parser *p, struct json_object **msg);

/* ---- Registers -------------------------------------------------------------------------- */

#define QMP_MAX_CPUS 64

struct qmp_segment {
    uint16_t selector;
    uint64_t base;
    uint32_t limit;
    uint32_t flags;
    int dpl; /* -1 when the line shows none */
};

/* One vCPU's state as `info registers` prints it. */
struct qmp_regs {
    int cpu_index; /* QEMU cpu-index (the CPU#n header, 0 when absent) */
    uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, rsp;
    uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
    uint64_t rip, rflags;
    int cpl;        /* current privilege level, 0 kernel .. 3 user */
    bool halted;    /* HLT=1: idle, or a vCPU the guest never started */
    bool long_mode; /* EFER.LMA */
    uint64_t cr0, cr2, cr3, cr4, efer;
    struct qmp_segment es, cs, ss, ds, fs, gs;
    uint64_t gdt_base, idt_base;
};

/* Parses the text of `info registers` (one CPU, with or without a CPU#n header) or
 * `info registers -a` (several). Fills up to max entries of out, sets *n_cpus. Returns -EPROTO
 * when a block lacks RIP/RSP/CPL or a value does not parse. */
int qmp_parse_registers(const char *text, struct qmp_regs *out, int max, int *n_cpus,
                        struct qp_error *err);

/* ---- Connection ------------------------------------------------------------------------- */

typedef struct qmp_client qmp_client;

enum qmp_mem_backend {
    QMP_MEM_AUTO = 0, /* direct when QEMU's RAM is a shared file we can map, else memsave */
    QMP_MEM_DIRECT,   /* map the RAM backend file, walk page tables from CR3 ourselves */
    QMP_MEM_MEMSAVE,  /* QMP memsave into a private mkdtemp directory */
    QMP_MEM_HMP,      /* HMP `x/Ngx`, parsed */
};

struct qmp_open_opts {
    double timeout_s;             /* per-reply time-out; 0 means 5 s */
    enum qmp_mem_backend backend; /* QMP_MEM_AUTO by default */
    /* Start a guardian process (qmp_guard.c) that resumes the guest if this process dies while
     * a sample holds it stopped (a signal, abort, the OOM killer): QEMU keeps a guest paused
     * when its client goes, and serves no other client on the socket meanwhile. The guardian
     * holds a copy of the connection and ends at qmp_free. A guest this client did not stop
     * (paused by someone else) is left as it is. */
    bool guard;
};

/* Connects to `address`: a UNIX socket path, or "tcp:HOST:PORT". Reads the greeting and
 * negotiates capabilities. On failure the message says what to do, e.g.
 * "no QMP socket at ./qmp-socket: start QEMU with -qmp unix:./qmp-socket,server,nowait".
 * opts may be NULL. *out is owned by the caller (qmp_free). */
int qmp_open(const char *address, const struct qmp_open_opts *opts, qmp_client **out,
             struct qp_error *err);
void qmp_free(qmp_client *c); /* NULL is a no-op; never leaves a guest that it stopped paused */

/* Changes the per-reply time-out of an open client (seconds > 0). */
void qmp_set_timeout(qmp_client *c, double seconds);

/* QEMU's version as "MAJOR.MINOR.MICRO" from the greeting. Valid while c lives. */
const char *qmp_qemu_version(const qmp_client *c);

/* Runs one QMP command. args (borrowed, may be NULL) is the "arguments" object. On success
 * *ret (if not NULL) receives the "return" value, owned by the caller. A QEMU error reply gives
 * -EREMOTEIO with "CLASS: description" in err. */
int qmp_execute(qmp_client *c, const char *command, struct json_object *args,
                struct json_object **ret, struct qp_error *err);

/* Runs an HMP command through human-monitor-command; cpu_index < 0 omits it. *out receives
 * the text (caller frees with free()). HMP reports its own errors inside the text. */
int qmp_hmp(qmp_client *c, const char *cmdline, int cpu_index, char **out, struct qp_error *err);

/* Asynchronous events arrive interleaved with replies; they are queued in order. The queue
 * keeps the newest QMP_MAX_QUEUED_EVENTS: a client that never pops them does not grow. */
#define QMP_MAX_QUEUED_EVENTS 256
struct qmp_event {
    char name[48];
    int64_t ts_sec, ts_usec;  /* QEMU's timestamp */
    struct json_object *data; /* owned by the caller, may be NULL */
};

/* Takes the oldest queued event: returns 1 and fills ev, or 0 when none is queued. Does not
 * read the socket. */
int qmp_pop_event(qmp_client *c, struct qmp_event *ev);

/* Events dropped from a full queue since the connection opened. */
uint64_t qmp_events_dropped(const qmp_client *c);

/* RESET events received so far (system_reset, or a reboot the guest asked for): no round trip,
 * it counts what reading replies and events already took off the socket. A reset leaves RAM as
 * it was, so what the old kernel published stays readable until the new one overwrites it:
 * this is how an OS adapter learns not to trust it. */
uint64_t qmp_resets(const qmp_client *c);

/* Whether the guest is running (query-status). */
int qmp_query_running(qmp_client *c, bool *running, struct qp_error *err);

/* Reads every vCPU's registers with one `info registers -a`. */
int qmp_read_registers(qmp_client *c, struct qmp_regs *out, int max, int *n_cpus,
                       struct qp_error *err);

/* Requests answered by QEMU since the connection opened (round trips, for statistics). */
uint64_t qmp_round_trips(const qmp_client *c);

/* The connection's socket (borrowed: for asking who is at its other end, never for I/O). */
int qmp_socket_fd(const qmp_client *c);

/* ---- Guest memory ----------------------------------------------------------------------- */

/* The backend actually in use (never QMP_MEM_AUTO once the client is open). */
enum qmp_mem_backend qmp_mem_backend_in_use(const qmp_client *c);
const char *qmp_mem_backend_name(enum qmp_mem_backend b);

/* Switches the backend of an open client (QEMU serves one client per socket, so this is how
 * the backends are compared on one guest). QMP_MEM_AUTO picks as qmp_open does. On failure the
 * previous backend stays in use. */
int qmp_mem_set_backend(qmp_client *c, enum qmp_mem_backend b, struct qp_error *err);

/* Reads len bytes of guest virtual memory as seen by vCPU `cpu` (its CR3 and cpu_index).
 * Reads what is mapped from the start: *got is the number of bytes read before the first
 * unmapped page. Returns 0 when *got > 0 or len == 0, -EFAULT when the first byte is unmapped,
 * another negative code when QEMU could not be asked. */
int qmp_mem_read(qmp_client *c, const struct qmp_regs *cpu, uint64_t vaddr, void *buf, size_t len,
                 size_t *got, struct qp_error *err);

struct qmp_mem_req {
    uint64_t vaddr;
    size_t len;
    void *buf;  /* len bytes, owned by the caller */
    size_t got; /* out: bytes read from the start */
    int rc;     /* out: as qmp_mem_read */
};

/* Several reads for one vCPU with the fewest round trips the backend allows (pipelined for
 * memsave and hmp, none for direct). Returns 0 if QEMU could be asked; each request has its own
 * rc. */
int qmp_mem_read_many(qmp_client *c, const struct qmp_regs *cpu, struct qmp_mem_req *reqs, size_t n,
                      struct qp_error *err);

/* Reads len bytes of guest-physical memory (no page tables): straight from the mapped RAM with
 * the direct backend, else with one QMP pmemsave. 0 when all len bytes were read, -EFAULT when
 * a byte is not RAM (direct backend only: pmemsave reads holes as whatever QEMU returns). */
int qmp_phys_read(qmp_client *c, uint64_t paddr, void *buf, size_t len, struct qp_error *err);
/* The same through HMP's xp, whatever the backend: no file, so it serves a QEMU that cannot
 * write qprof's memsave directory (another user's). Slower: 64 KiB a request, as text. */
int qmp_phys_read_hmp(qmp_client *c, uint64_t paddr, void *buf, size_t len, struct qp_error *err);

/* Guest-physical RAM, [start, end). */
struct qmp_ram_range {
    uint64_t start, end;
};
/* The guest's RAM ranges: the mapped backend's with the direct backend, else what
 * query-memory-size-summary implies for a PC machine (below 3 GiB, and above 4 GiB). */
int qmp_ram_ranges(qmp_client *c, struct qmp_ram_range *out, int max, int *n, struct qp_error *err);

/* ---- Sample transaction ----------------------------------------------------------------- */

/* Called while the guest is stopped, with every vCPU's registers. Return 0 to go on, a negative
 * code to fail the sample (the guest is resumed all the same). */
typedef int (*qmp_sample_fn)(qmp_client *c, const struct qmp_regs *cpus, int n_cpus, void *ctx,
                             struct qp_error *err);

struct qmp_sample_stats {
    uint64_t paused_ns;   /* guest-paused time: QEMU's STOP..RESUME timestamps, else client clock */
    unsigned round_trips; /* requests this sample cost */
    bool was_paused;      /* the guest was already paused: qprof neither stopped nor resumed it */
};

/* Whether the guest runs, from the events already received (no round trip). A guest that
 * qprof paused and still owes a cont counts as running, and so does one whose QEMU is gone (the
 * connection closed): the caller's next request then says so, where a pause would wait for
 * ever. */
bool qmp_guest_running(qmp_client *c);

/* QEMU's own time stamp (wall clock, microseconds since the epoch) on the last STOP event read
 * so far, 0 before any: with the time a client resumed the guest, it tells a stop that came
 * after (someone else's) from the one before (the client's own). No round trip. */
int64_t qmp_last_stop_us(const qmp_client *c);

/* The same for the last RESUME event read so far, 0 before any. */
int64_t qmp_last_resume_us(const qmp_client *c);

/* Reads the socket until a STOP event stamped after after_us (QEMU's wall clock, us) is in, at
 * most timeout_ms: 0 with its stamp in *stop_us, -ETIMEDOUT when none came. */
int qmp_wait_stop_after(qmp_client *c, int64_t after_us, int timeout_ms, int64_t *stop_us,
                        struct qp_error *err);

/* The same transaction for a guest whose register text qmp/ does not parse (riscv64: arch/
 * does): fn gets the text of `info registers -a` (borrowed for the call). */
typedef int (*qmp_sample_text_fn)(qmp_client *c, const char *regs_text, void *ctx,
                                  struct qp_error *err);

/* Stops the guest, reads all vCPUs' registers, calls fn, resumes. A cont still owed from an
 * earlier sample (it failed or timed out) is sent first. `cont` is sent on every path
 * (error, time-out, signal) unless the guest was paused before the call, in which case it is
 * left paused. stats may be NULL. */
int qmp_sample(qmp_client *c, qmp_sample_fn fn, void *ctx, struct qmp_sample_stats *stats,
               struct qp_error *err);

/* qmp_sample with the registers as text, for fn to parse: the same round trips, the same cont
 * on every path. */
int qmp_sample_text(qmp_client *c, qmp_sample_text_fn fn, void *ctx, struct qmp_sample_stats *stats,
                    struct qp_error *err);

#endif
