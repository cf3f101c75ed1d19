/* output: what qprof samples, kept as addresses and module identities (no names), and the
 * writers that turn it into files: folded stacks, speedscope JSON, pprof, an SVG flame graph,
 * and the record file that `qprof report` reads back.
 *
 * The model follows perf's: a sample is a time, a vCPU, a process and a callchain of raw PCs,
 * each PC tagged with the module (kernel, or a user binary identified by its .text hash) it
 * belongs to. Names come last: every writer asks an out_names cache, which asks the caller's
 * symbolizer once per distinct (module, pc), so that a profile of a million samples with a
 * thousand distinct PCs symbolizes a thousand times.
 *
 * An out_profile holds the modules, the distinct stacks (interned) and one compact record per
 * sample (time, weight, vCPU, stack id), so every writer can see the samples in time order.
 *
 * Functions returning int return 0 on success or a negative errno-style code and fill the
 * optional err (common/qp_error.h). Nothing here talks to QEMU or reads ELF files.
 */
#ifndef OUTPUT_H
#define OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qp_error.h"
#include "unwind.h" /* enum unw_stop: how a stack part ended */

/* ---- Modules ----------------------------------------------------------------------------- */

#define OUT_NO_MODULE UINT32_MAX

/* A piece of code PCs belong to: the kernel, or one user binary (shared by every process that
 * runs it). */
struct out_module {
    char name[64];      /* short name: "kernel.elf", "spin", or the process name */
    char path[256];     /* host file its symbols came from, "" when none matched */
    uint64_t text_hash; /* .text hash (symbols/sym_text_hash), 0 when unknown */
    uint64_t base;      /* address "name+0xOFF" offsets count from (load base, kernel .text) */
    bool kernel;
};

/* ---- Samples ----------------------------------------------------------------------------- */

enum out_mode {
    OUT_MODE_USER = 0, /* the vCPU ran user code */
    OUT_MODE_KERNEL,   /* kernel code (perhaps on behalf of a process: see pid) */
    OUT_MODE_IDLE,     /* halted */
    OUT_MODE_BOOT,     /* outside long mode: firmware or early boot */
    OUT_MODE_COUNT
};

/* A guest's 15-character task name, and room for the brackets that mark a kernel thread. */
#define OUT_COMM_LEN 24

struct out_frame {
    uint64_t pc;
    uint32_t module; /* index into the profile's modules, OUT_NO_MODULE when unknown */
    bool exact;      /* pc is the instruction itself (innermost or interrupted frame), not a
                        return address: symbolize at pc, not pc - 1 */
    bool kernel;
};

/* One vCPU at one stop, as the sampler saw it. frames are outermost first: the user part
 * (n_user frames, _start first), then the kernel part (entry stub first, leaf last). */
struct out_sample {
    uint64_t time_ns;               /* since the start of the run */
    uint64_t weight_ns;             /* wall time this sample stands for (the interval it closes) */
    uint32_t cpu;                   /* QEMU cpu-index */
    uint32_t pid;                   /* 0 when no process is known */
    char comm[OUT_COMM_LEN];        /* process name, NUL-terminated, "" when unknown; with pid
                                       0, "NAME [as N]": an address space (--os none) */
    uint8_t mode;                   /* enum out_mode */
    uint8_t user_stop, kernel_stop; /* how each part ended (UNW_STOP_OUTERMOST: whole or absent) */
    uint16_t n_frames, n_user;
    const struct out_frame *frames; /* borrowed for the call that takes the sample */
};

/* ---- Profile ----------------------------------------------------------------------------- */

typedef struct out_profile out_profile;

/* A stack as the profile interned it: the sample's identity without its time and vCPU. */
struct out_stack {
    uint32_t pid;
    char comm[OUT_COMM_LEN];
    uint8_t mode, user_stop, kernel_stop;
    uint16_t n_frames, n_user;
    const struct out_frame *frames; /* owned by the profile */
};

/* A sample as the profile keeps it (24 bytes). */
struct out_record {
    uint64_t time_ns, weight_ns;
    uint32_t cpu, stack;
};

out_profile *out_profile_new(void);
void out_profile_free(out_profile *p); /* NULL is a no-op */

/* Adds a module (copied) and returns its index. Modules are never removed. */
uint32_t out_profile_add_module(out_profile *p, const struct out_module *m);
/* Sets a module's base once it is learnt (a kernel's .text from the guest ABI). */
void out_profile_set_module_base(out_profile *p, uint32_t index, uint64_t base);
size_t out_profile_module_count(const out_profile *p);
const struct out_module *out_profile_module(const out_profile *p, uint32_t index);

/* Adds a sample (copied; its frames interned with its stack; comm's ';' and control characters
 * become '_'). Samples come in non-decreasing time order; the vCPUs of one stop share a time.
 * Returns the stack id. */
uint32_t out_profile_add(out_profile *p, const struct out_sample *s);

/* The pieces of out_profile_add, for readers of record files: interns a stack (copied) and
 * returns its id; appends a sample record of an interned stack. */
uint32_t out_profile_intern(out_profile *p, const struct out_stack *s);
void out_profile_add_record(out_profile *p, const struct out_record *r);

size_t out_profile_sample_count(const out_profile *p);
const struct out_record *out_profile_samples(const out_profile *p); /* in the order added */
size_t out_profile_stack_count(const out_profile *p);
const struct out_stack *out_profile_stack(const out_profile *p, uint32_t id);

/* Sample counts (and summed weights) per stack id; arrays of out_profile_stack_count(). */
void out_profile_stack_totals(const out_profile *p, uint64_t *counts, uint64_t *weights_ns);

/* The root a stack is shown under: "comm (pid)", "kernel", "idle", "[unknown process]" (user
 * code of no known process) or "[firmware or early boot]". Returns out. */
const char *out_stack_root(const struct out_stack *s, char *out, size_t cap);

/* The root as out_stack_root writes it, with the process by name alone ("spin", not
 * "spin (3)") when by_name: what two runs whose pids differ (two boots) have in common. */
const char *out_stack_root_as(const struct out_stack *s, bool by_name, char *out, size_t cap);

/* Keeps only the samples for which keep() returns true (report's --pid, --cpus, --time, mode
 * filters). Stack ids stay valid. */
void out_profile_filter(out_profile *p,
                        bool (*keep)(const struct out_record *r, const struct out_stack *s,
                                     void *ctx),
                        void *ctx);

/* ---- Exact instruction counts (qprof --exact) -------------------------------------------- */

/* Instructions executed in one block of code (a straight run from pc to its first branch),
 * counted, not sampled: a flat profile beside the samples, without stacks or time. */
struct out_exact {
    uint32_t module; /* the kernel, a user binary, or OUT_NO_MODULE: user code of no known file */
    uint64_t pc;     /* the block's first instruction */
    uint64_t insns;
};

/* Adds insns to the block at (module, pc), summed with what it had. */
void out_profile_add_exact(out_profile *p, uint32_t module, uint64_t pc, uint64_t insns);
size_t out_profile_exact_count(const out_profile *p);
const struct out_exact *out_profile_exact(const out_profile *p); /* in the order first added */

/* ---- Code bytes (annotate without the binary) ---------------------------------------------- */

/* The machine code of one sampled function as the guest had it, kept so that `qprof annotate`
 * reads a function's instructions from the record alone (a stock Linux kernel whose vmlinux the
 * user does not have). */
struct out_code {
    uint32_t module;
    uint16_t machine;     /* ELF e_machine of the code (EM_X86_64, ...) */
    uint64_t addr;        /* the function's first byte */
    const char *name;     /* the function, as the recording run named it */
    const uint8_t *bytes; /* owned by the profile */
    uint32_t len;
};

#define OUT_CODE_MAX_LEN       16384u /* one function's bytes at most */
#define OUT_CODE_MAX_FUNCTIONS 512u   /* functions a profile keeps code for */

/* Adds a function's code (copied, bytes and name); false when it has one at addr already, len is 0
 * or above OUT_CODE_MAX_LEN, or the profile holds OUT_CODE_MAX_FUNCTIONS. */
bool out_profile_add_code(out_profile *p, const struct out_code *code);
size_t out_profile_code_count(const out_profile *p);
const struct out_code *out_profile_code(const out_profile *p, size_t index); /* in order added */
/* The kept function of module whose bytes hold pc, NULL when none. */
const struct out_code *out_profile_code_at(const out_profile *p, uint32_t module, uint64_t pc);

/* ---- Names ------------------------------------------------------------------------------- */

/* What a symbolizer knows about one PC. function NULL: no symbol. file NULL / line 0: no line
 * information. The strings must stay valid until the out_names cache is freed. */
struct out_symbol {
    const char *function;
    uint64_t offset; /* pc - function start */
    const char *file;
    int line;
};

/* The caller's symbolizer: fills sym for pc in module m (exact: look up pc itself, else pc - 1).
 * Returns 0, or a negative code when nothing is known (then the frame shows as module+0xOFF or
 * 0xADDR). Called at most once per distinct (module, pc, exact). */
typedef int (*out_symbolize_fn)(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                                struct out_symbol *sym);

typedef struct out_names out_names;

/* A name cache over a profile's modules. symbolize may be NULL (addresses only). */
out_names *out_names_new(const out_profile *p, out_symbolize_fn symbolize, void *ctx);
void out_names_free(out_names *n); /* NULL is a no-op */

/* One frame as a writer shows it. Strings are owned by the cache. */
struct out_name {
    const char *name;   /* "function", "module+0x1f0" or "0xffffffff80101181"; never contains
                           ';' or control characters (they become '_') */
    const char *module; /* module short name, "" when unknown */
    const char *file;   /* source file, NULL when unknown */
    int line;           /* 0 when unknown */
    uint64_t pc;
    uint64_t offset; /* pc - function start, when has_symbol */
    bool kernel;
    bool has_symbol; /* name is a function */
    bool marker;     /* a "[truncated]" marker, not code */
};

/* The name of one frame (cached). */
const struct out_name *out_names_frame(out_names *n, const struct out_frame *f);

/* Number of display frames of a stack: its frames plus one "[truncated]" marker per part that
 * was cut short (perf's and qprof's convention: the marker stands where the walk stopped, at the
 * outer end of that part). */
int out_stack_display_len(const struct out_stack *s);

/* Fills out[0 .. out_stack_display_len(s)) with the stack's display frames, outermost first
 * (the root is not among them: see out_stack_root). */
void out_stack_display(out_names *n, const struct out_stack *s, const struct out_name **out);

/* ---- Writers ----------------------------------------------------------------------------- */

enum out_format {
    OUT_FOLDED = 0, /* .folded, .txt: "root;frame;...;leaf COUNT" lines */
    OUT_SPEEDSCOPE, /* .speedscope.json */
    OUT_PPROF,      /* .pb.gz */
    OUT_SVG,        /* .svg */
    OUT_RECORD,     /* .data, .qprof: the record file (docs/record-format.md) */
    OUT_FORMAT_COUNT
};

/* The format a file name asks for by its extension; -1 when none matches. */
int out_format_from_path(const char *path);
/* "folded", "speedscope", "pprof", "svg", "record"; and back (-1 when unknown). */
const char *out_format_name(enum out_format f);
int out_format_from_name(const char *name);

struct out_write_opts {
    bool per_cpu;         /* roots stacks at "cpuN" (folded, svg, pprof label anyway), one
                             speedscope profile per vCPU instead of per process */
    const char *title;    /* shown by speedscope and the SVG; NULL: "qprof" */
    uint64_t interval_ns; /* the mean sampling interval asked for (pprof's period) */
    bool roots_by_name;   /* processes by name alone, without their pid (out_stack_root_as):
                             SVG and pprof, for `qprof diff` */
    /* A differential flame graph (SVG only): the fill of a box, given the names on its path
     * (path[0] the level above "all", path[depth - 1] the box) and its samples; writes an
     * "rgb(...)" into fill and returns true, or returns false for the usual colour. NULL: the
     * usual colours. */
    bool (*svg_fill)(void *ctx, const char *const *path, int depth, uint64_t count, uint64_t total,
                     char *fill, size_t cap);
    void *svg_fill_ctx;
    /* With svg_fill: a legend row under the title, a swatch and its text per entry,
     * NULL-terminated pairs {"rgb(...)", "text", ..., NULL}. */
    const char *const *svg_legend;
};

/* Writes p in format f to the open stream f_out. */
int out_write(const out_profile *p, out_names *n, enum out_format format,
              const struct out_write_opts *o, FILE *f_out, struct qp_error *err);

/* Writes to path through a temporary file and a rename (a crash never leaves half a file that
 * looks whole): PATH.tmp.XXXXXX from mkstemp beside it (O_EXCL: nothing planted there is
 * followed), mode 0644; the rename replaces a symlink at path rather than writing through it.
 * A device or FIFO is written in place; "-" is stdout. */
int out_write_file(const out_profile *p, out_names *n, enum out_format format,
                   const struct out_write_opts *o, const char *path, struct qp_error *err);

/* Checks before a long run that out_write_file(path) will be able to write: its temporary file
 * can be created ("-", devices and FIFOs always pass). Returns 0 or -errno with err. */
int out_check_writable(const char *path, struct qp_error *err);

/* The writers behind out_write, one per format (output/out_<format>.c). */
int out_write_folded(const out_profile *p, out_names *n, const struct out_write_opts *o, FILE *f,
                     struct qp_error *err);
int out_write_speedscope(const out_profile *p, out_names *n, const struct out_write_opts *o,
                         FILE *f, struct qp_error *err);
int out_write_pprof(const out_profile *p, out_names *n, const struct out_write_opts *o, FILE *f,
                    struct qp_error *err);
int out_write_svg(const out_profile *p, out_names *n, const struct out_write_opts *o, FILE *f,
                  struct qp_error *err);

/* --exact's flat profile by function: a block's instructions count for the function its first
 * instruction is in. The root is the code's binary, as the sampled stacks' roots would show
 * it without a process: "kernel", a user binary's name ("spin": every process that runs it
 * summed), or "[unknown user code]". */
struct out_exact_line {
    const char *root;            /* static, or the module's name (valid while the profile) */
    const struct out_name *leaf; /* the function, owned by the names cache */
    uint64_t insns;
};

/* The lines, the most instructions first (ties by root and name); *n_lines of them, g_free. */
struct out_exact_line *out_exact_lines(const out_profile *p, out_names *n, size_t *n_lines);

/* Leaf-only folded lines of the flat profile, "ROOT;FUNCTION INSTRUCTIONS", sorted by text
 * like the folded output. */
int out_write_exact_folded(const out_profile *p, out_names *n, FILE *f, struct qp_error *err);

/* Where the flat profile of a folded -o PATH goes: PATH with ".exact" before its extension
 * ("stack.folded" -> "stack.exact.folded", "out" -> "out.exact"). g_free. */
char *out_exact_path(const char *path);

/* Writes the flat profile to path as out_write_file writes (a temporary file and a rename). */
int out_write_exact_file(const out_profile *p, out_names *n, const char *path,
                         struct qp_error *err);

/* ---- Record files (docs/record-format.md) ------------------------------------------------ */

/* A record file is written as sampling goes: modules and stacks when first seen, samples in
 * batches, flushed at least once a second, so a run killed with SIGKILL loses at most the last
 * second. */
typedef struct out_recorder out_recorder;

/* Opens path for writing (truncating) and writes the header. A symbolic link at path is refused
 * (-ELOOP, O_NOFOLLOW): the record is written in place as sampling goes, so it cannot be a
 * temporary file renamed over a link. meta: free-form "key=value" lines
 * for the header (QEMU version, qprof version, options), may be NULL. */
int out_recorder_open(const char *path, const char *meta, out_recorder **out, struct qp_error *err);
/* Appends every module, stack and sample p gained since the last call. */
int out_recorder_sync(out_recorder *r, const out_profile *p, struct qp_error *err);
/* Appends a NOTES chunk: `key=value` lines about the run (guest_running_pct, warnings, ...),
 * written with the next flush. The last one in the file is what a reader gets. */
void out_recorder_notes(out_recorder *r, const char *notes);
/* Flushes what is buffered to the file (and to disk). */
int out_recorder_flush(out_recorder *r, struct qp_error *err);
/* Syncs, flushes and closes; NULL is a no-op. Returns the first error of the whole recording. */
int out_recorder_close(out_recorder *r, const out_profile *p, struct qp_error *err);

/* The highest vCPU index a record file's sample may hold; a batch with a higher one is corrupt. */
#define OUT_MAX_CPU 0xffffu

/* Reads a record file into a new profile. A file cut short (the recorder was killed) loads up
 * to its last whole batch; a file from a newer format version or a corrupt one fails with a
 * clear message (-EPROTO). Only a regular file of at most QP_FILE_MAX_RECORD bytes is read
 * (-EINVAL for a FIFO or a device, -EFBIG past it). Every field is checked before use: a batch
 * naming a stack not yet defined or a vCPU past OUT_MAX_CPU ends the load there; comm names
 * lose their control characters as out_profile_add's do. *meta (if not NULL) receives the header's
 * meta text followed by the last NOTES chunk's lines (g_free). */
int out_record_read(const char *path, out_profile **out, char **meta, struct qp_error *err);

#endif
