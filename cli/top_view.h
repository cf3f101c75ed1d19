/* cli/top_view: what `qprof top` shows, computed from the session's profile without a terminal:
 * functions by self and total share over a time range, the processes, each vCPU's
 * busy/kernel/user/idle split, a function's callers. top.c draws it (ncurses or text).
 *
 * The profile keeps every sample in time order with an interned stack (output.h), so a refresh
 * is a walk over the range's records: each stack's frames are named once through the long-lived
 * out_names cache, and a function's row is found by its out_name pointer after the first time.
 */
#ifndef CLI_TOP_VIEW_H
#define CLI_TOP_VIEW_H

#include "output.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum top_mode { TOP_ALL = 0, TOP_KERNEL, TOP_USER };
enum top_sort { TOP_SORT_SELF = 0, TOP_SORT_TOTAL };

#define TOP_ROOT_LEN 64
#define TOP_MAX_CPUS 64

/* Which samples and frames the table counts. */
struct top_filter {
    enum top_mode mode;      /* kernel: kernel-mode and idle samples, their kernel frames; user:
                                user-mode samples, their user frames */
    char root[TOP_ROOT_LEN]; /* a process as out_stack_root names it ("sys (2)"); "" = all */
    int cpu;                 /* a vCPU index, -1 = all */
    enum top_sort sort;
};

/* One function: its name and module are the names cache's (valid while it lives). */
struct top_row {
    const char *name, *module;
    bool kernel;
    uint64_t self, total; /* samples with it as the leaf; samples with it anywhere */
};

struct top_proc {
    char root[TOP_ROOT_LEN];
    uint64_t count;
};

struct top_cpu {
    uint64_t user, kernel, idle, other; /* other: firmware or early boot */
};

struct top_caller {
    char *chain; /* "hot_a <- compute <- main <- _start", innermost first (owned by the view) */
    char root[TOP_ROOT_LEN];
    uint64_t count;
};

typedef struct top_view top_view;

/* A view of p named through names (both borrowed; they must outlive the view). */
top_view *top_view_new(const out_profile *p, out_names *names);
void top_view_free(top_view *v); /* NULL is a no-op */

/* Recounts everything over the samples with from_ns <= time_ns <= to_ns. */
void top_view_update(top_view *v, const struct top_filter *f, uint64_t from_ns, uint64_t to_ns);

/* The table after the last update, sorted by f's key (ties by name); *rows borrowed until the
 * next update. */
size_t top_view_rows(const top_view *v, const struct top_row **rows);
/* Samples the table counted (the shares' denominator), and all samples in the range. */
uint64_t top_view_counted(const top_view *v);
uint64_t top_view_in_range(const top_view *v);
/* The processes in the range (every mode, vCPU filter applied), most samples first. */
size_t top_view_procs(const top_view *v, const struct top_proc **procs);
/* The vCPUs in the range, every sample: cpus[0 .. return). */
int top_view_cpus(const top_view *v, const struct top_cpu **cpus);
/* The hottest distinct caller chains through rows[row] (as top_view_rows gave it) in the
 * table's samples, most first, at most max; borrowed until the next call or update. */
size_t top_view_callers(top_view *v, size_t row, size_t max, const struct top_caller **out);

#endif
