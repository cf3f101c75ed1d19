/* Internal header of the Linux OS adapter (os_linux*.c; the public seam is os.h's
 * prof_os_linux_ops). One file per job, all sharing struct os_linux:
 *   os_linux.c           the ops table, open/free, what each stop and each running spell does
 *   os_linux_kernel.c    finding the kernel (vmcoreinfo, kallsyms, BTF), checking a candidate
 *                        against a vCPU, and dropping it at a reboot
 *   os_linux_modules.c   loaded modules: their list, symbols and ORC, checked while running
 *   os_linux_task.c      the current task of each vCPU (per-CPU data, registers, page tables)
 *   os_linux_unwind.c    kernel stacks (ORC or frame pointers) and a capturing target's plan
 *   os_linux_vma.c       the per-mm cache of VMAs and the mapping of a user pc
 *   os_linux_buildid.c   exec mappings with their paths and build-ids (--sysroot)
 *   os_linux_pagecache.c mapped files' pages read from the page cache
 * Calls point one way: os_linux.c to the others, kernel to modules, buildid and pagecache to
 * vma; none back. Tests include this header to set up an adapter over a fake guest. */
#ifndef OS_LINUX_INTERNAL_H
#define OS_LINUX_INTERNAL_H

#include "linux.h"
#include "lx_module.h"
#include "lx_task.h"
#include "os.h"
#include "qp_clock.h"

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* A kernel not found yet (a guest still booting) is looked for again after 2, 4, 8 ... s, a
 * few times: each look reads all of guest RAM. */
#define RETRY_NS          (UINT64_C(2) * 1000000000)
#define MAX_TRIES         6
#define MAX_RANGES        16
#define THREAD_SIZE       (16u << 10)
#define VMCI_HEAD         512 /* OSRELEASE and the first SYMBOL() lines, which KASLR changes */
#define PAGE_SIZE         4096u
#define MAX_STALE         8
#define OWNERS            256
#define OWNERS_WALK_EVERY 50   /* stops between two walks of the process list */
#define OWNERS_WALK_MAX   4096 /* processes a walk reads at most */
#define MAX_MM_CACHE      256  /* address spaces whose VMAs are kept; all dropped past that */
/* The module list is checked while the guest runs: every second when reads are free (a check
 * reads each struct module once: 20 us with one module), else every ten seconds (each read is a
 * round trip then). A kernel stack that met a pc in module space that no known module covers
 * (a module loaded since) brings the next check forward: to 50 ms, or 1 s. */
#define MODULES_STALE_NS      (UINT64_C(50) * 1000000)
#define MODULES_CHECK_NS      (UINT64_C(1) * 1000000000)
#define MODULES_CHECK_SLOW_NS (UINT64_C(10) * 1000000000)

struct os_linux {
    struct prof_os_config cfg;
    const struct prof_os_mem *mem; /* this stop's, for the physical reader */
    struct lx_phys phys;
    lx_kernel *kernel;
    /* Found while the guest ran, not yet checked against a vCPU's page tables (RAM may hold an
     * earlier boot's vmcoreinfo): nothing is published from it until then. */
    lx_kernel *candidate;
    struct prof_os_refresh found; /* what to report once the candidate is checked */
    bool failed;                  /* for good: a kernel we cannot handle; answer as none */
    uint64_t next_try_ns;
    int tries;
    bool said; /* why the kernel was not found, once */
    unsigned
        refreshes; /* every stop's, found or not: os_linux_say_no_scan waits for a run under way */
    /* Where vmcoreinfo was found and how it began: a guest that os_linux_rebooted (new KASLR
     * offset) no longer has the same bytes there. */
    uint64_t vmci_paddr;
    uint8_t vmci_head[VMCI_HEAD];
    /* The same of boots that ended: a reset leaves their bytes in RAM, and a scan must pass
     * over them (the newest MAX_STALE). */
    struct stale_vmci {
        uint64_t paddr;
        uint8_t head[VMCI_HEAD];
    } stale[MAX_STALE];
    int n_stale;
    GPtrArray *old_syms; /* symbols of earlier boots: the session's older samples use them */
    sym_table *syms;
    bool have_offsets;
    bool said_task_error; /* -v: the first failure to read a current task was said */
    struct lx_offsets off;
    uint64_t per_cpu_offset; /* __per_cpu_offset[] */
    bool have_percpu;        /* it and the per-CPU current task's offsets are known */
    /* The user tasks seen in kernel mode, by the physical address of their page table (the
     * last OWNERS of them): a vCPU in user mode whose root register names one runs that task's
     * process, for a kernel whose current task no per-CPU variable names. */
    struct owner {
        uint64_t pgd_pa;
        struct lx_task_info task;
    } owners[OWNERS];
    unsigned next_owner;
    uint64_t known_task;    /* a task read lately: where a walk of the process list starts */
    uint64_t owners_walked; /* l->stops at the last walk (+1; 0: none yet) */
    struct lx_task_info tasks[PROF_MAX_VCPUS];
    bool task_ok[PROF_MAX_VCPUS];
    uint64_t switching_samples; /* named by rq->curr (take_incoming_task) */
    /* A capturing target (the plugin): reads of the current task served from the sample's
     * instant, and samples left unnamed because their capture lacked one (taken before the
     * target had the plan): a live read then would name whatever runs now, not then. */
    uint64_t task_reads_instant, task_unnamed;
    uint64_t plan_gen; /* changes with each kernel accepted or forgotten (capture_plan) */
    /* The vCPU runs on its task's own page tables (CR3 is mm->pgd's): false in a context switch
     * between switch_mm and the write of current_task, where CR3 is already the next task's and
     * the task's user memory cannot be read through the vCPU. */
    bool own_mm[PROF_MAX_VCPUS];
    uint64_t foreign_mm_samples;
    GHashTable *mm_cache;         /* mm address -> struct mm_vmas (owned) */
    uint64_t stops;               /* refreshes so far: at most one VMA walk per mm per stop */
    const struct prof_vcpu *cpus; /* this stop's (borrowed during the stop): user reads */
    int n_cpus;
    /* Loaded modules: their symbols are part of syms, their ORC tables the unwinder's. */
    bool have_mod_offsets;
    struct lx_module_offsets mod_off;
    uint64_t modules_head; /* the list `modules` (lx_kernel_find_modules_list); 0: not found yet */
    lx_modules *mods;
    GArray *named_mods; /* struct lx_module: the modules whose symbols syms holds */
    bool modules_stale; /* a kernel stack met module text no module in mods covers */
    uint64_t modules_checked_ns;
    uint64_t module_checks, module_check_ns, module_reads, module_read_ns; /* costs */
};

/* The VMAs of one address space, in address order, as one walk of its maple tree found them.
 * Valid while mm->map_count is what it was (a VMA that grows in place, such as the heap, is
 * caught by the lookup missing). */
struct mm_vmas {
    int32_t map_count;  /* -1: unknown (no BTF offset) */
    int32_t tgid;       /* an mm freed and reused by another process */
    uint64_t walked_at; /* l->stops of the walk */
    GArray *vmas;       /* struct lx_vma */
    /* --sysroot: the exec file mappings (struct prof_exec_mapping), built on demand from vmas;
     * files (vm_file -> struct file_info) outlives a walk of the same process. */
    GArray *exec;
    uint64_t exec_gen;
    bool exec_ready; /* every path and build-id that can be read was */
    GHashTable *files;
};

/* What one mapped file of a process is: read once per (mm, file). */
#define FILE_MAX_TRIES 8
struct file_info {
    char path[PROF_PATH_MAX]; /* "" when unreadable */
    uint8_t build_id[PROF_BUILD_ID_MAX];
    uint8_t build_id_len;
    bool path_done, build_id_done; /* read, or failed for good */
    int tries;                     /* reads cut short by the budget */
};

/* The VMA walk's reader: each read counts against the sample's budget first. */
struct charged {
    struct os_linux *l;
    const struct prof_os_mem *mem;
};

/* An lx_reader over the kernel's own page table (ctx: the lx_kernel). */
static inline int os_linux_kread(void *ctx, uint64_t kva, void *buf, size_t len)
{
    return lx_kernel_read(ctx, kva, buf, len);
}

/* ---- os_linux_kernel.c: discovery and reboot ---- */
/* Finds and loads the kernel while the guest runs; it stays l->candidate until checked. */
bool os_linux_find_kernel(struct os_linux *l);
/* The first stop after a find: accepts the candidate when a vCPU maps it, else drops it. */
void os_linux_check_candidate(struct os_linux *l, const struct prof_vcpu *cpus, int n_cpus,
                              struct prof_os_refresh *out);
/* Drops the kernel of a boot that ended (its symbols stay for older samples) and every cache
 * tied to it: tasks, owners, the mm cache. */
void os_linux_forget_kernel(struct os_linux *l);
/* true when the vmcoreinfo bytes the kernel was found with changed (then forgotten). */
bool os_linux_rebooted(struct os_linux *l);
void os_linux_say_no_scan(struct os_linux *l);

/* ---- os_linux_modules.c: loaded modules ---- */
void os_linux_build_symbols(struct os_linux *l);
void os_linux_load_module_offsets(struct os_linux *l, const lx_btf *btf);
bool os_linux_read_modules(struct os_linux *l);
void os_linux_check_modules(struct os_linux *l, const struct prof_os_mem *mem,
                            struct prof_os_refresh *out);

/* ---- os_linux_task.c: the current task ---- */
/* Reads vCPU cpu's current task into l->tasks[i] (l->task_ok[i], l->own_mm[i]). */
void os_linux_read_task(struct os_linux *l, const struct prof_vcpu *cpu, int i);
void os_linux_task(void *impl, const struct prof_vcpu *cpu, int i, struct prof_task *out);

/* ---- os_linux_unwind.c: kernel stacks and the capture plan ---- */
size_t os_linux_kernel_stack_len(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                                 size_t max);
int os_linux_user_regs(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                       const struct prof_os_mem *mem, struct unw_regs *out);
int os_linux_kernel_unwind(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                           const struct prof_os_mem *mem, struct prof_kstack *out);
uint64_t os_linux_capture_plan(void *impl, struct prof_capture_plan *out);
const sym_table *os_linux_kernel_symbols(void *impl);

/* ---- os_linux_vma.c: the VMA cache ---- */
void os_linux_mm_vmas_free(gpointer p);
/* An lx_reader's read (ctx: struct charged) through the kernel, within the sample's budget. */
int os_linux_charged_read(void *ctx, uint64_t kva, void *buf, size_t len);
int os_linux_read_map_count(const struct os_linux *l, const struct lx_task_info *t,
                            const struct lx_reader *r, int32_t *map_count);
struct mm_vmas *os_linux_cached_vmas(struct os_linux *l, const struct lx_task_info *t,
                                     int32_t map_count);
struct mm_vmas *os_linux_rewalk_vmas(struct os_linux *l, const struct lx_task_info *t,
                                     const struct lx_reader *r, int32_t map_count);
int os_linux_user_mapping(void *impl, int i, uint64_t pc, const struct prof_os_mem *mem,
                          struct prof_mapping *out);

/* ---- os_linux_buildid.c and os_linux_pagecache.c: mapped files ---- */
int os_linux_address_space(void *impl, int i, const struct prof_os_mem *mem,
                           struct prof_address_space *out);
int os_linux_file_read(void *impl, uint64_t file_id, uint64_t offset, void *buf, size_t len,
                       size_t *got, const struct prof_os_mem *mem);

#endif
