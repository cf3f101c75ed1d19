/* A stock Linux guest seen from outside: the kernel found in guest RAM with no input from the
 * user (vmcoreinfo, the kernel's own page tables, kallsyms, ORC), through a reader of
 * guest-physical memory. Prefix lx_. Nothing here talks to QEMU: the caller hands in a physical
 * reader (struct lx_phys), which is how the same code serves QMP's direct and memsave backends
 * and the tests.
 *
 * Formats are re-implemented from their documentation (docs/linux-guests.md): vmcoreinfo
 * text, x86_64 4- and 5-level page tables, the 6.0+ kallsyms tables (6.1's two-byte name
 * lengths, base-relative, absolute-percpu and 7.0's place-relative offsets), ORC in the layouts
 * of 4.14 to 6.2, 6.3+ and 7.x.
 *
 * The folder is above the ~2.5k lines a folder keeps to: it is one library with one job (a
 * kernel read from outside), already split by format, one file each (vmcoreinfo, kallsyms, ORC,
 * BTF, tasks and VMAs, modules), and every series from 5.10 to 7.x adds its layouts beside the
 * old ones. Another folder would only put a header between formats that always go together. */
#ifndef LINUX_H
#define LINUX_H

#include "qp_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads len bytes of guest-physical memory at paddr: 0 when all were read, else -errno. */
struct lx_phys {
    int (*read)(void *ctx, uint64_t paddr, void *buf, size_t len);
    void *ctx;
};

struct lx_ram_range { /* [start, end) */
    uint64_t start, end;
};

/* ---- vmcoreinfo ------------------------------------------------------------------------- */

/* What qprof uses of the kernel's vmcoreinfo text. Addresses are run-time ones (KASLR
 * applied); 0 when the key was absent. */
struct lx_vmcoreinfo {
    char osrelease[65];
    int version_major, version_minor; /* from osrelease */
    uint64_t page_size, kernel_offset, phys_base;
    uint64_t init_top_pgt, stext, init_uts_ns;
    bool pgtable_l5;
    uint64_t kallsyms_names, kallsyms_num_syms, kallsyms_token_table, kallsyms_token_index;
    uint64_t kallsyms_offsets, kallsyms_relative_base, kallsyms_addresses;
    bool have_phys_base;
    /* arm64: the kernel page table and the image's virtual-to-physical offset, the size of the
     * TTBR1 half, the pointer-authentication bits of kernel return addresses (0: none) */
    uint64_t swapper_pg_dir, kimage_voffset, phys_offset, va_bits, tcr_t1sz, pac_mask;
    uint64_t modules_vaddr, modules_end; /* arm64, riscv64: where modules' text lies */
    bool have_kimage_voffset;
    /* riscv64: the image's virtual-to-physical offset (VA_BITS above gives the levels) */
    uint64_t va_kernel_pa_offset;
    bool have_va_kernel_pa_offset;
};

/* Parses vmcoreinfo text (KEY=VALUE lines). -EPROTO when OSRELEASE, phys_base or init_top_pgt
 * is missing or a value does not parse. */
int lx_vmcoreinfo_parse(const char *text, size_t len, struct lx_vmcoreinfo *out,
                        struct qp_error *err);

/* Reads a file holding vmcoreinfo text (e.g. a copy of the guest's note) and parses it. */
int lx_vmcoreinfo_load_file(const char *path, struct lx_vmcoreinfo *out, struct qp_error *err);

/* Scans the first bytes of every page of the given RAM for the VMCOREINFO ELF note (or the
 * bare text page) and parses the first candidate that does. -ENOENT with a message when none:
 * the guest is not Linux, or its kernel lacks CONFIG_CRASH_CORE. *paddr: where it was found. */
int lx_vmcoreinfo_find(const struct lx_phys *p, const struct lx_ram_range *ram, int n_ram,
                       struct lx_vmcoreinfo *out, uint64_t *paddr, struct qp_error *err);

/* The same, passing over the pages skip accepts (page: its 4096 bytes): after a reset RAM still
 * holds the old boot's vmcoreinfo, which must not be taken for the new one's. */
typedef bool (*lx_vmci_skip_fn)(void *ctx, uint64_t paddr, const void *page);
int lx_vmcoreinfo_find_fresh(const struct lx_phys *p, const struct lx_ram_range *ram, int n_ram,
                             lx_vmci_skip_fn skip, void *skip_ctx, struct lx_vmcoreinfo *out,
                             uint64_t *paddr, struct qp_error *err);

/* ---- The kernel ------------------------------------------------------------------------- */

typedef struct lx_kernel lx_kernel;

/* Sets up kernel-address translation through init_top_pgt (never a vCPU's CR3, which under
 * PTI maps almost no kernel while user code runs) and checks it by finding OSRELEASE in
 * init_uts_ns. p is borrowed and must outlive k. *out is the caller's (lx_kernel_free). */
int lx_kernel_open(const struct lx_vmcoreinfo *vi, const struct lx_phys *p, lx_kernel **out,
                   struct qp_error *err);
void lx_kernel_free(lx_kernel *k); /* NULL is a no-op */
const struct lx_vmcoreinfo *lx_kernel_vmcoreinfo(const lx_kernel *k);

/* The architecture of the kernel ("x86_64", "arm64"), as its vmcoreinfo showed it. */
const char *lx_kernel_arch_name(const lx_kernel *k);
/* Where the kernel image address kva lies in guest-physical memory (the image's own offset, no
 * page walk): for checking a vCPU's page tables against the kernel found. */
uint64_t lx_kernel_image_paddr(const lx_kernel *k, uint64_t kva);

/* Where the kernel's BTF lies when kallsyms does not name __start_BTF (a kernel without
 * CONFIG_KALLSYMS_ALL, such as Debian's arm64 one): the first well-formed BTF header in the
 * image from _stext on (at most LX_BTF_SCAN bytes), as [*start, *stop). -ENOENT when none. */
#define LX_BTF_SCAN (96u << 20)
int lx_kernel_find_btf(lx_kernel *k, uint64_t *start, uint64_t *stop);

/* Reads len bytes at kernel virtual address kva: 0 when all were read, else -EFAULT. */
int lx_kernel_read(lx_kernel *k, uint64_t kva, void *buf, size_t len);
/* The guest-physical address of kernel virtual address kva through the kernel's page table: 0,
 * or -EFAULT when kva is not mapped. */
int lx_kernel_virt_to_phys(lx_kernel *k, uint64_t kva, uint64_t *paddr);
/* Drops cached translations and the few physical pages kept for small reads: call once per
 * stop, since vmalloc'd mappings (task stacks) and stack contents change while the guest runs. */
void lx_kernel_forget_translations(lx_kernel *k);

/* kallsyms decoded from guest memory (Linux 6.0+: vmcoreinfo names the tables). Decodes once;
 * later calls return at once. */
int lx_kernel_load_kallsyms(lx_kernel *k, struct qp_error *err);

struct lx_symbol {
    uint64_t addr;
    char type;        /* nm's letter: T t W w for text, A for absolute (per-CPU offsets), ... */
    const char *name; /* valid while k lives */
};
/* Every symbol, by address (equal addresses in kallsyms order); NULL before the load. */
const struct lx_symbol *lx_kernel_symbols(const lx_kernel *k, size_t *n);
/* The run-time address of a symbol by name: 0 or -ENOENT. */
int lx_kernel_symbol_addr(const lx_kernel *k, const char *name, uint64_t *addr);

/* ---- ORC -------------------------------------------------------------------------------- */

/* Copies vmlinux's ORC tables (a few MB, once) after checking that their entries fit one of the
 * layouts qprof knows (4.14 to 6.2, 6.3+, 7.x's renumbered registers), told from the entries
 * themselves. Needs the kallsyms. -ENOTSUP with one line naming struct orc_entry and the kernel
 * release when they fit none. */
int lx_kernel_load_orc(lx_kernel *k, struct qp_error *err);
size_t lx_kernel_orc_entries(const lx_kernel *k);
/* Checks the layout the entries showed against BTF's struct orc_entry (signal_bit: it has the
 * 6.3+ signal bit, not the end bit). When they disagree the ORC tables are dropped (kernel stacks
 * end at their leaf, marked, rather than follow a misread table) and -EPROTO says so in one line.
 * 0 when they agree or no ORC was loaded. */
int lx_kernel_check_orc_bits(lx_kernel *k, bool signal_bit, struct qp_error *err);
/* The layout found, in words ("6.3+ (signal bit)"), or "unknown" before a load. */
const char *lx_kernel_orc_layout(const lx_kernel *k);

/* struct pt_regs of x86_64 (168 bytes, in the kernel's order). */
struct lx_pt_regs {
    uint64_t r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs,
        flags, sp, ss;
};

#define LX_UNWIND_ENDS(X)                                                                          \
    X(LX_END_USER, "entered from user mode")                                                       \
    X(LX_END_TASK_START, "start of a kernel thread or of the boot stack")                          \
    X(LX_END_NO_ORC, "no ORC entry for the address")                                               \
    X(LX_END_BAD_ORC, "ORC entry says the stack cannot be unwound here")                           \
    X(LX_END_UNREADABLE, "stack memory unreadable")                                                \
    X(LX_END_LOOP, "stack pointer went backwards")                                                 \
    X(LX_END_DEPTH, "too many frames")                                                             \
    X(LX_END_FP_BROKEN, "frame pointer chain broken")

enum lx_unwind_end {
#define X(code, text) code,
    LX_UNWIND_ENDS(X)
#undef X
};
const char *lx_unwind_end_str(enum lx_unwind_end e);
/* A clean end: the walk reached where a kernel stack starts. */
bool lx_unwind_end_is_complete(enum lx_unwind_end e);

struct lx_frame {
    uint64_t pc;
    bool exact; /* pc is the interrupted instruction itself, not a return address */
};

struct lx_unwind_result {
    int n_frames;
    enum lx_unwind_end end;
    bool have_user_regs;    /* end == LX_END_USER: the registers user mode left the kernel with */
    bool user_regs_partial; /* only ip, sp, flags (an iret frame): the rest are the live ones */
    struct lx_pt_regs user_regs;
};

/* Walks the kernel stack from the live registers of a vCPU stopped in kernel mode, innermost
 * first, into frames[0..max). Reads guest memory through k (call while the guest is stopped). */
void lx_unwind(lx_kernel *k, const struct lx_pt_regs *live, struct lx_frame *frames, int max,
               struct lx_unwind_result *out);

/* Reads len bytes of stack memory at kva: 0 when all were read. */
typedef int (*lx_stack_read_fn)(void *ctx, uint64_t kva, void *buf, size_t len);

/* lx_unwind with the stack's words (frames, saved registers) read through read instead of k: a
 * copy taken at the sample's instant while the guest ran on (the TCG plugin's capture). A word
 * it does not have ends the walk as unreadable, marked; the ORC tables still come from k. */
void lx_unwind_from(lx_kernel *k, const struct lx_pt_regs *live, lx_stack_read_fn read,
                    void *read_ctx, struct lx_frame *frames, int max, struct lx_unwind_result *out);

/* ---- Frame pointers (arm64: the kernels that keep them) ----------------------------------- */

/* Registers by DWARF number (arm64: x0..x30, sp 31, pc 32; riscv64: x0..x31, pc 32). */
#define LX_GREGS 33

/* Whether k's kernel stacks are unwound by frame pointers (lx_unwind_fp) rather than ORC. */
bool lx_kernel_unwinds_by_fp(const lx_kernel *k);

/* For a kernel unwound by ORC: the live registers in DWARF numbering (regs, LX_GREGS of them)
 * as lx_unwind's struct lx_pt_regs, and the user registers it found back into DWARF numbering
 * (regs zeroed first). -ENOTSUP for a kernel unwound by frame pointers. */
int lx_kernel_regs_to_pt(const lx_kernel *k, const uint64_t *regs, struct lx_pt_regs *p);
int lx_kernel_regs_from_pt(const lx_kernel *k, const struct lx_pt_regs *p, uint64_t *regs);

/* Whether k's current task is a per-CPU word that a capturing target must copy at the sample
 * (x86_64), rather than a register it has anyway (arm64's SP_EL0, riscv64's tp); then
 * *iret_off is where struct pt_regs holds the frame an exception pushed (ip, cs, flags, sp, ss),
 * which runs to its end. */
bool lx_kernel_current_in_percpu(const lx_kernel *k, uint32_t *iret_off);

/* The task whose kernel stack is walked: its stack [stack_lo, stack_hi) (THREAD_SIZE), the size
 * of struct pt_regs (BTF), at the top of that stack; kthread: no user registers there. */
struct lx_fp_task {
    uint64_t stack_lo, stack_hi;
    uint32_t pt_regs_size;
    bool kthread;
    /* The vCPU's exception pc register (arm64: ELR_EL1, riscv64: sepc), which at an exception
     * vector's first instruction holds the interrupted pc while every other register is still
     * the interrupted code's: the walk then goes on from there (into user mode when it is a
     * user address). */
    bool has_trap_pc;
    uint64_t trap_pc;
    /* Where the stack's words come from: read (a copy of the sample's instant, taken while the
     * guest ran on: the TCG plugin's capture; a word it lacks ends the walk as unreadable,
     * marked), or, NULL, the kernel's memory, read while the guest is stopped. */
    lx_stack_read_fn read;
    void *read_ctx;
};

struct lx_fp_result {
    int n_frames;
    enum lx_unwind_end end;
    bool have_user_regs;          /* end == LX_END_USER */
    uint64_t user_regs[LX_GREGS]; /* the registers user mode entered the kernel with */
};

/* Walks the frame-pointer chain from the live registers of a vCPU stopped in kernel mode,
 * innermost first, into frames[0..max): the pc, the link register when the leaf has not saved
 * it yet (its function is neither the pc's nor the first saved return address's), then each
 * saved return address. The chain ends at the frame record in the task's pt_regs (user
 * registers from there when it entered from user mode), or marked (unreadable, not growing,
 * too deep). Call while the guest is stopped, or with task->read over a capture. */
void lx_unwind_fp(lx_kernel *k, const uint64_t live[LX_GREGS], const struct lx_fp_task *task,
                  struct lx_frame *frames, int max, struct lx_fp_result *out);

#endif
