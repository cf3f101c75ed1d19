/* gdb: a GDB remote-serial-protocol client for QEMU's gdbstub (-gdb tcp::1234).
 *
 * One gdb_client owns one connection to one stub. Nothing here is thread-safe. Every function
 * returning int returns 0 on success or a negative errno-style code and fills the optional `err`
 * (see common/qp_error.h). The shape mirrors qmp.h so that target/target_gdb.c can be a thin
 * adapter: gdb_interrupt + gdb_read_registers_all (one write for every vCPU) + gdb_mem_read_many
 * (one write for every read) + gdb_continue is one sample.
 *
 * QEMU facts this relies on (checked against 7.2 by tests/gdb/test_gdb_qemu.c): QEMU stops the
 * guest when a debugger connects, and says so with a `T02` nobody asked for; any byte that arrives
 * while the guest runs stops it (0x03 gets a `T02` stop reply); `D` resumes it, and with
 * multiprocess it must be `D;PID` (a bare `D` gets E22); each vCPU is a thread (`p01.02` with
 * multiprocess, plain hex without); 7.2 does not offer QStartNoAckMode, so the client acks, which
 * does not stop pipelining; an unmapped `m` gets E14. The register layout comes from target.xml,
 * never from a table: 7.2's i386-64bit.xml has rax..r15, rip, eflags, cs..gs, fs_base, gs_base,
 * k_gs_base, cr0, cr2, cr3, cr4, cr8, efer, st0-7, the x87 control words, xmm0-15 and mxcsr (66
 * registers, a 608-byte `g`), with ss_base/ds_base/es_base commented out.
 *
 * For target/target_gdb.c: privilege is cs & 3, the address-space root is cr3, an E reply to a
 * read at its first byte is the unmapped case (-EFAULT there); the stub does not say whether a
 * vCPU is halted.
 */
#ifndef GDB_H
#define GDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qp_error.h"

/* ---- Parser (no I/O) -------------------------------------------------------------------- */

#define GDB_MAX_PACKET (1u << 20) /* decoded payload cap: 1 MiB */

/* A streaming parser for the stub's byte stream: feed bytes split anywhere, pull complete
 * packets (`$payload#xx`, RLE expanded, `}` escapes decoded) out in order. `+`/`-` acks, `%`
 * notifications and bare 0x03 bytes are recognised and skipped. */
typedef struct gdb_parser gdb_parser;

gdb_parser *gdb_parser_new(void);
void gdb_parser_free(gdb_parser *p); /* NULL is a no-op */

/* In ack mode a packet with a bad checksum is dropped, counted and leaves a gap that
 * gdb_parser_next reports where the packet was (the caller cannot ask for it again: with
 * pipelined requests a stub's resend on `-` is some other reply, or none); in no-ack mode it is
 * -EPROTO. */
void gdb_parser_set_no_ack(gdb_parser *p, bool no_ack);

/* Consumes len bytes. Returns 0, or -EPROTO with err filled for a bad checksum in no-ack mode,
 * a malformed RLE or a packet over GDB_MAX_PACKET (the parser is then unusable). */
int gdb_parser_feed(gdb_parser *p, const char *bytes, size_t len, struct qp_error *err);

/* Takes the next complete packet: returns 1 and sets *payload (NUL-terminated, caller frees
 * with free()) and *len (payloads may hold NUL bytes); 2 with *payload NULL where a packet with a
 * bad checksum was dropped (ack mode); 0 when none is buffered. */
int gdb_parser_next(gdb_parser *p, char **payload, size_t *len);

/* Packets taken from the stream so far (good ones) and ones dropped for a bad checksum. */
uint64_t gdb_parser_packets(const gdb_parser *p);
uint64_t gdb_parser_bad_checksums(const gdb_parser *p);

/* Builds `$payload#xx` for payload (escaping `$#}*`) into a fresh string (caller frees). */
char *gdb_frame(const char *payload, size_t len, size_t *out_len);
/* Decodes the hex pairs at hex into out, at most max bytes, stopping at the first pair that is
 * not two hex digits (a NUL included): the bytes decoded. For payloads that carry bytes as hex
 * (m and p replies, O console output, qThreadExtraInfo). */
size_t gdb_hex_decode(const char *hex, size_t max, uint8_t *out);

/* ---- Target description ----------------------------------------------------------------- */

/* QEMU 7.2's aarch64 `-cpu max` describes about 290 (core, SVE, some 200 system registers). */
#define GDB_MAX_REGS 1024

struct gdb_reg {
    char name[32];
    int bitsize;
    int regnum;    /* the number `p`/`P` use, and the order in a `g` reply */
    size_t offset; /* byte offset in the decoded `g` reply */
    char feature[48];
};

struct gdb_tdesc {
    char arch[32]; /* <architecture>, e.g. "i386:x86-64" */
    struct gdb_reg regs[GDB_MAX_REGS];
    int n_regs;
    size_t g_size; /* bytes of the decoded `g` reply, the sum of the sizes */
};

/* Parses one target-description document into d, appending its <reg>s in order (regnum
 * continues from the previous register unless the element gives one). For each
 * <xi:include href="...">, include(ctx, href, &text) is called to fetch the document (text
 * freed by the parser with free()); include may be NULL to skip them. */
typedef int (*gdb_include_fn)(void *ctx, const char *href, char **text, struct qp_error *err);
int gdb_tdesc_parse(struct gdb_tdesc *d, const char *xml, gdb_include_fn include, void *ctx,
                    struct qp_error *err);

/* Index of the register called name, or -1. */
int gdb_tdesc_find(const struct gdb_tdesc *d, const char *name);

/* ---- Connection ------------------------------------------------------------------------- */

typedef struct gdb_client gdb_client;

#define GDB_MAX_THREADS 64

struct gdb_open_opts {
    double timeout_s;  /* per-reply time-out; 0 means 5 s */
    bool keep_stopped; /* leave the guest stopped after the handshake (QEMU stops it on attach);
                          by default it is resumed */
    /* Start a guardian process that detaches (and so resumes the guest) if this process dies
     * without gdb_free: QEMU 7.2 keeps a guest paused when its debugger's connection just
     * closes. The guardian holds a copy of the socket, ignores SIGINT/SIGTERM/SIGHUP and ends
     * when gdb_free says goodbye. */
    bool guard;
    /* gdb_read_registers_all also asks each thread's state (qThreadExtraInfo, in the same
     * write): QEMU says "[halted ]" for a vCPU waiting in hlt. */
    bool thread_state;
};

/* Connects to "tcp:HOST:PORT" or "unix:PATH" (a bare path is a UNIX socket too) and runs the
 * handshake: qSupported, QStartNoAckMode when offered, `?`, the thread list and target.xml with
 * its includes. QEMU serves one debugger at a time and leaves a second connection unanswered
 * (7.2 accepts it and reads nothing until the first closes): a stub that says nothing at all
 * within the time-out gives -EBUSY with a message that says so. opts may be NULL. *out is the
 * caller's (gdb_free). A guest QEMU started with -S starts running here unless opts->keep_stopped.
 */
int gdb_open(const char *address, const struct gdb_open_opts *opts, gdb_client **out,
             struct qp_error *err);
/* Stops the guest if it runs, detaches (`D`: QEMU resumes it) and closes; after
 * gdb_disown_stop, only closes (QEMU leaves the guest as it is). NULL is a no-op. */
void gdb_free(gdb_client *c);

void gdb_set_timeout(gdb_client *c, double seconds);

/* What the handshake learned. Valid while c lives. */
const struct gdb_tdesc *gdb_target(const gdb_client *c);
size_t gdb_packet_size(const gdb_client *c); /* the stub's PacketSize */
bool gdb_multiprocess(const gdb_client *c);  /* thread ids are `pP.T` */
int gdb_thread_count(const gdb_client *c);
const char *gdb_thread_id(const gdb_client *c, int i); /* as the stub spells it, e.g. "p1.2" */

/* A stop reply (`T05thread:p01.01;` or `S05`). */
struct gdb_stop {
    int signal;      /* e.g. 2 for an interrupt, 5 for a trap */
    char thread[32]; /* the thread: field, "" when absent */
    /* The stub sent it while this client had not interrupted: someone else stopped the guest
     * (QEMU tells every debugger of a monitor's `stop` this way, as T02, the same reply a 0x03
     * gets). The stop that attaching causes does not count. */
    bool unasked;
};

bool gdb_stopped(const gdb_client *c);
/* The last stop reply (after gdb_interrupt, or one the stub sent unasked). */
const struct gdb_stop *gdb_last_stop(const gdb_client *c);

/* Stops the guest: sends 0x03 and waits for the stop reply. When a stop reply arrived unasked
 * already, it is taken without sending anything. A stopped guest is left as it is. stop may be
 * NULL. */
int gdb_interrupt(gdb_client *c, struct gdb_stop *stop, struct qp_error *err);

/* Takes in stop replies the stub already sent, without sending or waiting: 1 when the client
 * now counts the guest as stopped (see gdb_last_stop()->unasked), 0 when not. */
int gdb_poll_stop(gdb_client *c, struct qp_error *err);

/* gdb_interrupt with a reply deadline of timeout_ms instead of the client's: -ETIMEDOUT when
 * nothing came. QEMU ignores a 0x03 while the guest is paused by someone else, so this is how a
 * client without QMP finds out whether such a guest runs again (it stops it if so). */
int gdb_interrupt_within(gdb_client *c, int timeout_ms, struct gdb_stop *stop,
                         struct qp_error *err);

/* The guest stands stopped by someone else (an unasked stop reply, or QMP says so): this client
 * will not resume it. It counts as not stopped by this client, and gdb_free closes without the
 * `D` that would resume it, until gdb_interrupt stops it for this client again. */
void gdb_disown_stop(gdb_client *c);

/* Resumes the guest (`c`; no reply until the next stop). */
int gdb_continue(gdb_client *c, struct qp_error *err);

/* Runs one command while stopped and returns its reply (caller frees). An `Exx` reply gives -EIO
 * with "Exx" in err and *code (if not NULL) set to xx. After a reply timed out (-ETIMEDOUT), the
 * next request first sends `?` and drops what comes before its stop reply, so that a late reply
 * is not taken for a later request's. -EPIPE when the stub closed the connection or the guest
 * exited. */
int gdb_command(gdb_client *c, const char *cmd, char **reply, int *code, struct qp_error *err);

#define GDB_MAX_EXTRA_REGS 8

/* One vCPU's registers: the decoded `g` reply, laid out as gdb_target() says, and the wanted
 * registers the `g` reply does not hold (gdb_want_registers). */
struct gdb_regset {
    int thread; /* index into the thread list */
    int halted; /* with opts.thread_state: 1 halted (hlt), 0 running; -1 when not known */
    uint8_t *raw;
    uint8_t *valid; /* per byte: 0 where the stub sent `xx` (unavailable) */
    size_t len;
    int n_extra;
    int extra_regnum[GDB_MAX_EXTRA_REGS];
    uint64_t extra[GDB_MAX_EXTRA_REGS];
    bool extra_ok[GDB_MAX_EXTRA_REGS];
};
void gdb_regset_clear(struct gdb_regset *r); /* frees raw and valid */

/* Registers gdb_read_registers_all should also give although QEMU may leave them out of the
 * `g` reply (it sends only the core set: riscv64's priv and satp are in other features). Each
 * is asked with `p` after that vCPU's `g`, in the same write: more packets, no more round trips;
 * one the first `g` reply turns out to hold is not asked again. Names the target description
 * lacks are skipped; at most GDB_MAX_EXTRA_REGS. NULL-terminated. */
void gdb_want_registers(gdb_client *c, const char *const *names);

/* Reads every vCPU's registers: `Hg<tid>` + `g` for all threads in one write, the replies read
 * after. Fills up to max entries, sets *n. While stopped only. */
int gdb_read_registers_all(gdb_client *c, struct gdb_regset *out, int max, int *n,
                           struct qp_error *err);

/* The value of register `name` (up to 64 bits, little-endian as x86 sends it). -ENOENT when the
 * target has none by that name, -ENODATA when the stub marked it unavailable. */
int gdb_reg_get(const gdb_client *c, const struct gdb_regset *r, const char *name, uint64_t *val);

struct gdb_mem_req {
    uint64_t vaddr;
    size_t len;
    void *buf;        /* len bytes, owned by the caller */
    size_t got;       /* out: bytes read from the start */
    int rc;           /* out: 0 when got > 0 or len == 0, -EIO on an E reply at the first byte */
    int remote_error; /* out: the xx of that Exx (QEMU says E14, EFAULT, for unmapped) */
};

/* Reads guest virtual memory as vCPU `thread` sees it: `Hg` and every `m` (split to the packet
 * size) in one write, the replies read after. Returns 0 if the stub could be asked; each request
 * has its own rc. While stopped only. */
int gdb_mem_read_many(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n,
                      struct qp_error *err);

/* The same, with `p` for register `reg` of that thread after the last `m`, in the same write:
 * *value is its value once the reads are done and *ok says whether the stub gave it (false for
 * an unknown name, an E reply or `xx`). A caller compares it with the value at the stop to learn
 * whether the reads saw the same state (a reset of the machine mid-sample changes CR3). */
int gdb_mem_read_then_reg(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n,
                          const char *reg, uint64_t *value, bool *ok, struct qp_error *err);

/* Packets answered by the stub since the connection opened (round trips are fewer: pipelined). */
uint64_t gdb_replies(const gdb_client *c);
uint64_t gdb_round_trips(const gdb_client *c);

/* Runs a monitor command (`qRcmd`, what gdb's `monitor CMD` sends: QEMU runs it in its HMP) and
 * returns what it printed (caller g_free()s). While stopped only. -ENOTSUP when the stub does
 * not take monitor commands. */
int gdb_monitor(gdb_client *c, const char *cmd, char **text, struct qp_error *err);

/* The connection's socket (borrowed: for asking who is at its other end, never for I/O). */
int gdb_socket_fd(const gdb_client *c);

#endif
