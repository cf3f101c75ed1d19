/* Private to sampler/: what one stop captured of one vCPU, the hand-over between capture
 * (session.c, while the guest is stopped) and stack building (stacks.c, after it resumed).
 *
 * Capture fills it; stack building only reads it and never calls back into capture. */
#ifndef PROF_CAPTURE_H
#define PROF_CAPTURE_H

#include "model.h"
#include "os.h"
#include "target.h"
#include "unwind.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KSTACK_WINDOW (16u << 10)
#define USTACK_WINDOW (16u << 10)

/* One user binary, identified by its .text hash or its code pages (aspace.c); shared by every
 * process that runs it. Its filler enters it into the model (model.h). */
struct user_binary {
    uint64_t hash;
    const sym_table *syms; /* borrowed from the store; NULL when no file matched */
    unw_space *space;      /* owned; NULL when no unwind tables could be had */
    uint64_t text_addr, load_base;
    int64_t bias;    /* run-time minus link-time addresses (a relocated PIE), else 0 */
    char name[64];   /* module name: the file's, else the process's */
    uint32_t module; /* its index in the session's out_profile */
};

struct proc_image;  /* session.c: one exec image of one process, being copied */
struct user_space;  /* sysroot.h: an address space and the sysroot files that match it */
struct prof_aspace; /* aspace.h: an address space taken for a process (--os none) */

enum page_copy { PAGE_NONE, PAGE_COPIED, PAGE_UNREADABLE };

/* What one vCPU looked like at the stop, copied while the guest was paused. */
struct cpu_capture {
    struct prof_vcpu vcpu; /* its target_cpu is stale once the guest runs again */
    bool selected, started;
    struct prof_task task; /* what the OS adapter said; task.known false when nothing */
    bool have_trap;
    struct unw_regs trap; /* user registers saved at kernel entry */
    bool have_entry_regs; /* user registers recovered through the entry stub's CFI */
    struct unw_regs entry_regs;
    struct proc_image *img; /* the task's process image, NULL when none */
    /* Set after the guest resumed: the model's address space that names this task's user pcs
     * (model.h), the one thing stack building asks about user code; NULL when none. */
    const prof_space *space;
    uint32_t leaf_module;      /* a leaf-only user pc's mapping (OUT_NO_MODULE: unknown) */
    struct user_space *uspace; /* --sysroot: the task's address space, NULL when none */
    bool have_kstack;          /* the OS adapter unwound the kernel stack while stopped */
    struct prof_kstack kst;    /* its frames */
    struct prof_aspace *as;    /* --os none: the vCPU's address space, NULL otherwise */
    int slot;     /* the vCPU's index into per-vCPU state kept across stops (the session's) */
    bool as_lent; /* as is the process this vCPU last ran user code in, it being in the kernel's
                   * own table (session.c, runs_for_last_process) */
    const char *as_label;      /* set after the guest resumed when as is a process */
    enum page_copy page_state; /* a user code page copied for identification */
    uint64_t page_addr;
    uint8_t *page;            /* SYM_PAGE_SIZE bytes, allocated once */
    uint8_t *kstack, *ustack; /* KSTACK_WINDOW / USTACK_WINDOW bytes, allocated once */
    uint64_t kstack_addr, ustack_addr;
    size_t kstack_len, ustack_len;
    bool kstack_short; /* --os none: the kernel window was cut short of KSTACK_WINDOW */
};

#endif
