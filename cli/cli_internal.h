/* Private to cli/. What the offline subcommands (report.c, diff.c, annotate.c) share, in load.c:
 * the options that choose samples (--pid, --comm, --kernel-only, --user-only, --cpus, --time)
 * and symbol files (--kernel, --user-dir), the filter they make, and the symbolizer over a
 * record's modules. And setup.c: the target, OS adapter and session a run samples through.
 *
 * Functions returning int return 0 on success or a negative errno-style code and fill the
 * optional err (common/qp_error.h).
 */
#ifndef CLI_INTERNAL_H
#define CLI_INTERNAL_H

#include "cli.h"
#include "symbols.h"

#include <getopt.h>
#include <glib.h>

struct prof_load_opts {
    const char *kernel; /* --kernel: ELF or System.map; NULL: the file recorded */
    const char *user_dirs[PROF_MAX_USER_DIRS];
    int n_user_dirs;
    enum prof_mode_filter mode_filter;
    uint64_t cpu_mask;
    GArray *pids;              /* uint32_t; empty: every process */
    GPtrArray *comms;          /* process names (borrowed from argv); empty: every process */
    double time_from, time_to; /* seconds since the start; to < 0: no end */
};

/* Every option at its default (every sample, the files recorded); clear frees the lists. */
void prof_load_opts_init(struct prof_load_opts *o);
void prof_load_opts_clear(struct prof_load_opts *o);

/* getopt_long codes of the shared options; a subcommand numbers its own from PROF_LOAD_END. */
enum {
    PROF_LOAD_KERNEL = 1000,
    PROF_LOAD_USER_DIR,
    PROF_LOAD_KONLY,
    PROF_LOAD_UONLY,
    PROF_LOAD_CPUS,
    PROF_LOAD_PID,
    PROF_LOAD_COMM,
    PROF_LOAD_TIME,
    PROF_LOAD_END
};

/* The shared entries of a `struct option` table. */
#define PROF_LOAD_LONG_OPTIONS                                                                     \
    {"kernel", required_argument, NULL, PROF_LOAD_KERNEL},                                         \
        {"user-dir", required_argument, NULL, PROF_LOAD_USER_DIR},                                 \
        {"kernel-only", no_argument, NULL, PROF_LOAD_KONLY},                                       \
        {"user-only", no_argument, NULL, PROF_LOAD_UONLY},                                         \
        {"cpus", required_argument, NULL, PROF_LOAD_CPUS},                                         \
        {"pid", required_argument, NULL, PROF_LOAD_PID},                                           \
        {"comm", required_argument, NULL, PROF_LOAD_COMM},                                         \
    {                                                                                              \
        "time", required_argument, NULL, PROF_LOAD_TIME                                            \
    }

/* The --help lines of the shared options. */
extern const char prof_load_help[];

/* Applies getopt code c with its argument. Returns 1 when c is a shared option it applied, 0
 * when c is not one of them, -EINVAL with a one-line message in err for a bad value. */
int prof_load_option(struct prof_load_opts *o, int c, const char *arg, struct qp_error *err);

/* A file named on the command line or by a record, read whole when it is a regular file of at
 * most max_bytes (qp_file_open_read: a FIFO or /dev/zero is refused, never read): *text is
 * NUL-terminated, the caller g_free()s it. */
int prof_load_read_text(const char *path, uint64_t max_bytes, char **text, struct qp_error *err);

/* The first len bytes of a regular file (a magic number, an ELF header): 0, or negative. */
int prof_load_read_head(const char *path, void *buf, size_t len);

/* out_profile_filter's keep() for the options (ctx: the struct prof_load_opts). */
bool prof_load_keep(const struct out_record *r, const struct out_stack *s, void *ctx);

/* `qprof CMD: what` and the --help hint on stderr; returns PROF_EXIT_USAGE. */
int prof_cli_usage(const char *cmd, const char *what);

/* A subcommand's option: returns -1 when it was fine, else the exit code to exit with. flag
 * describes an unknown option or a missing value (c is then 0) for the usage message. */
typedef int (*prof_cli_apply_fn)(void *opts, int c, const char *arg, const char *flag);

/* The getopt_long loop over argv (argv[0] the subcommand) with apply per option; returns -1
 * with optind at the first argument that is not an option, else the exit code. */
int prof_cli_parse(int argc, char **argv, const char *short_opts, const struct option *long_opts,
                   prof_cli_apply_fn apply, void *opts);

/* The end of a subcommand's apply for a code it does not know itself: a shared option
 * (prof_load_option) applied, -1; else the usage error (a bad value, or flag). */
int prof_load_option_or_usage(const char *cmd, struct prof_load_opts *o, int c, const char *arg,
                              const char *flag);

/* Reads a record file and keeps the samples the options choose. *recorded (may be NULL) gets
 * the samples in the file; *meta as out_record_read's. */
int prof_load_record(const char *path, const struct prof_load_opts *o, out_profile **out,
                     char **meta, size_t *recorded, struct qp_error *err);

/* The symbol tables of a record's modules, opened offline: the kernel from --kernel, else the
 * file recorded; a user binary from --user-dir by its .text hash, else the file recorded when it
 * still has that .text. */
typedef struct prof_syms prof_syms;

/* p must outlive the result. NULL with err when --kernel or a --user-dir cannot be read. */
prof_syms *prof_syms_new(const out_profile *p, const struct prof_load_opts *o,
                         struct qp_error *err);
void prof_syms_free(prof_syms *s); /* NULL is a no-op */

/* The table of module index `module`, NULL when none was found (borrowed: valid while s). */
const sym_table *prof_syms_table(const prof_syms *s, uint32_t module);

/* An out_symbolize_fn over the tables (ctx: the prof_syms). */
int prof_syms_symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                        struct out_symbol *sym);

/* ---- setup.c: what a run samples through, chosen and opened from the options ------------- */

/* What prof_setup_open chose and opened; the caller's (prof_setup_close). The options are left
 * as they were: what auto resolved to is here. */
struct prof_setup {
    prof_target *target;
    const struct prof_arch *arch;  /* the target's (a --kernel ELF of another was refused) */
    prof_os_current *current;      /* --current, resolved against the kernel's DWARF; NULL */
    prof_uregs *user_regs;         /* --user-regs, resolved likewise; NULL */
    enum prof_os_choice os_choice; /* --os resolved: never PROF_OS_AUTO */
    uint64_t abi_addr;             /* where the demo guest's qprof_abi is read; 0: nowhere */
    prof_os *os;
    prof_session *session;
};

/* Connects to QEMU as the options say, checks --kernel's architecture against the target's,
 * loads the kernel's symbols, chooses and opens the OS adapter and the session. On failure
 * everything opened is closed again and err says why (one line). */
int prof_setup_open(const struct prof_options *o, struct prof_setup *out, struct qp_error *err);
/* Frees the session, the adapter and the target, in that order (the target resumes a guest it
 * stopped); a zeroed setup is a no-op. */
void prof_setup_close(struct prof_setup *s);

#endif
