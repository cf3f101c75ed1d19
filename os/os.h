/* The OS adapter: what the guest kernel tells us about the vCPUs the target stopped.
 *
 * While the target is stopped the sampler asks the adapter to refresh (it reads what it needs
 * through a reader the sampler gives it, so that its reads count against the sample's budget),
 * then, per vCPU, for the current task, its kernel stack and the user registers saved at
 * kernel entry. An adapter is a `static const struct prof_os_ops` in its own file, chosen once
 * when the session opens: os_qprof_abi.c (the demo guest's struct qprof_abi), os_linux.c (a
 * stock Linux kernel, found in guest memory) and os_none.c (nothing known). */
#ifndef PROF_OS_H
#define PROF_OS_H

#include "qp_error.h"
#include "qprof/guest_abi.h"
#include "symbols.h"
#include "target.h"

#include <stddef.h>

enum prof_task_state {
    PROF_TASK_UNKNOWN = 0, /* the OS told us nothing about this vCPU */
    PROF_TASK_OFFLINE,     /* the guest never started it */
    PROF_TASK_IDLE,        /* in the idle loop */
    PROF_TASK_KERNEL,      /* kernel code with no process */
    PROF_TASK_USER,        /* a process is current (it may be in the kernel for it) */
};

/* One exec image of a process: enough to copy its .text and .eh_frame and to tell a new exec
 * from the same one. */
struct prof_image_id {
    uint64_t text_addr, text_size, eh_frame_addr, eh_frame_size;
    uint64_t load_base; /* lowest address of the image; 0: text_addr */
    uint64_t generation;
};

#define PROF_COMM_LEN 24 /* = OUT_COMM_LEN: a 15-character name, brackets, NUL */

struct prof_task {
    bool known; /* the adapter vouches for what follows */
    enum prof_task_state state;
    uint32_t pid; /* 0 when none */
    char comm[PROF_COMM_LEN];
    bool has_image; /* a process is current: image names its binary */
    struct prof_image_id image;
    uint64_t kstack_lo, kstack_hi; /* the kernel stack of the current context; 0, 0: unknown */
    uint64_t user_regs_at;         /* where the user registers were saved; 0: not (yet) */
    uint32_t user_regs_arch;       /* qprof_abi: the frame's QPROF_ABI_ARCH_* (regs_arch) */
    bool user_leaf_only; /* user frames cannot be unwound (no tables): show the leaf only */
};

/* Reads len bytes at addr through cpu's address space (while stopped); *got counts from the
 * start. Returns 0 when anything was read. */
struct prof_os_mem {
    int (*read)(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf, size_t len,
                size_t *got);
    /* The same for memory the guest does not write while the process lives (its mapped files:
     * ELF headers, .eh_frame, .dynsym), which a capturing target (captured) may read after the
     * instant, from live memory, where read serves only what it captured. */
    int (*read_unchanging)(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                           size_t len, size_t *got);
    /* Guest-physical memory: 0 when all len bytes were read; NULL when the target has none. */
    int (*read_phys)(void *ctx, uint64_t paddr, void *buf, size_t len);
    /* The guest's RAM ranges; NULL when unknown. A failure says why in err (the target's own
     * reason: no RAM file, or none QMP can place on this machine). */
    int (*ram_ranges)(void *ctx, struct prof_ram_range *out, int max, int *n, struct qp_error *err);
    bool reads_are_cheap; /* no round trip per read (QMP's direct backend) */
    /* The target captured the sample at its instant while the guest ran on (the plugin): read
     * serves only what was captured then, and read_phys reads memory the guest has changed
     * since, good only for what it does not write (code, the kernel's tables). */
    bool captured;
    /* Counts len bytes the adapter is about to read by other means (its kernel page walk)
     * against the sample's budget: false, and nothing counted, when they do not fit. NULL: no
     * budget. */
    bool (*charge)(void *ctx, size_t len);
    void *ctx;
};

/* What a refresh saw, for the sampler to act on. */
struct prof_os_refresh {
    bool published; /* per-task information is available for this stop */
    bool reset;     /* the guest rebooted since the last refresh: drop per-process state */
    uint64_t kernel_text_addr; /* the kernel .text the guest declares, 0 when it does not */
    bool rejected;             /* what the guest published failed the checks */
    char reject_reason[160];
    bool kernel_found;     /* the adapter found the kernel this stop (first time only) */
    uint64_t kernel_stext; /* its run-time _stext, 0 when unknown */
    int64_t kernel_slide;  /* its KASLR slide (run-time minus link-time addresses) */
};

/* A kernel stack the adapter unwound itself while the target was stopped. */
#define PROF_KSTACK_MAX 128
struct prof_kstack {
    int n;
    uint64_t pc[PROF_KSTACK_MAX]; /* innermost first */
    bool exact[PROF_KSTACK_MAX];  /* the interrupted instruction, not a return address */
    enum unw_stop stop;           /* UNW_STOP_OUTERMOST or _LEFT_SPACE when complete */
    bool have_user_regs;          /* it ended at the entry from user mode */
    struct unw_regs user_regs;
    bool by_frame_pointers; /* walked by frame records (arm64 Linux), not by ORC */
};

/* The mapping a user pc lies in, when the OS can tell (Linux: the VMA). */
#define PROF_MAPPING_ANON "[anon]"
struct prof_mapping {
    char name[64]; /* the mapped file's basename, PROF_MAPPING_ANON when anonymous */
    uint64_t base; /* where file offset 0 would be: vm_start - pgoff * page size (anonymous:
                      the mapping's start) */
    uint64_t start, end;
};

/* One executable file mapping of an address space (Linux: a VMA with VM_EXEC and a file), for
 * unwinding user stacks with the guest's own files (--sysroot). */
#define PROF_PATH_MAX     256
#define PROF_BUILD_ID_MAX 32
struct prof_exec_mapping {
    char path[PROF_PATH_MAX]; /* absolute in the guest (within its mount) */
    uint64_t start, end;      /* [start, end) */
    uint64_t pgoff;           /* file offset of start, in 4 KiB pages */
    uint8_t build_id[PROF_BUILD_ID_MAX];
    uint8_t build_id_len; /* 0: unknown (not read, or unreadable) */
    /* The mapping of the same file's offset 0 (its ELF header), where the process's own copy of
     * the file's headers, .eh_frame and .dynsym is read from with no --sysroot; 0, 0: none. */
    uint64_t head_start, head_end;
    uint64_t file_id; /* the OS's handle of the mapped file for file_read (Linux: struct file) */
};

/* An address space as the OS adapter sees it at this stop. Two answers with the same id and
 * generation have the same exec mappings. */
struct prof_address_space {
    uint64_t id;         /* Linux: the mm_struct's address */
    uint64_t generation; /* changes when the exec mappings change */
    int n;
    const struct prof_exec_mapping *maps; /* borrowed: valid until the adapter's next refresh */
};

typedef struct prof_os_current prof_os_current; /* --current, resolved (below) */
typedef struct prof_uregs prof_uregs;           /* --user-regs, resolved (below) */

struct prof_os_config {
    uint64_t abi_addr;            /* qprof_abi: where the guest publishes it */
    struct prof_addr_split split; /* the target's */
    const struct prof_arch *arch; /* the target's: its page walk, its address-space root */
    const char *vmcoreinfo_path;  /* Linux: --vmcoreinfo, NULL to scan guest RAM */
    bool chosen;                  /* named by --os (not picked by auto): say why it fails */
    bool verbose;
    const prof_os_current *current; /* none: --current, borrowed for the adapter's life; NULL */
    const prof_uregs *user_regs;    /* none: --user-regs, borrowed likewise; NULL */
};

struct prof_os_ops {
    const char *name;
    /* Fills *impl, or fails with a negative code and says why in err. */
    int (*open)(const struct prof_os_config *cfg, void **impl, struct qp_error *err);
    void (*free)(void *impl);
    void (*refresh)(void *impl, const struct prof_vcpu *cpus, int n_cpus,
                    const struct prof_os_mem *mem, struct prof_os_refresh *out);
    /* The task on cpus[i] of the last refresh. */
    void (*task)(void *impl, const struct prof_vcpu *cpu, int i, struct prof_task *out);
    /* How much of the kernel stack above cpu->sp to copy, at most max. */
    size_t (*kernel_stack_len)(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                               size_t max);
    /* Reads the user registers t->user_regs_at names: 0, or negative when unreadable or not
     * a user-mode frame. */
    int (*user_regs)(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                     const struct prof_os_mem *mem, struct unw_regs *out);
    /* Optional: unwinds cpu's kernel stack while stopped (Linux: ORC). 0, or negative to let
     * the session unwind it by CFI. */
    int (*kernel_unwind)(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                         const struct prof_os_mem *mem, struct prof_kstack *out);
    /* Optional: work that needs no stopped guest (Linux: finding and loading the kernel's
     * read-only tables), called before each sample while the guest runs. It may use
     * mem->read_phys and mem->ram_ranges only; what it found goes into out as for refresh. */
    void (*while_running)(void *impl, const struct prof_os_mem *mem, struct prof_os_refresh *out);
    /* Optional: kernel symbols found in the guest (borrowed, valid while the adapter lives),
     * NULL when none (yet). */
    const sym_table *(*kernel_symbols)(void *impl);
    /* Optional: the mapping of user pc in the address space of the task on cpus[i] of the last
     * refresh, while stopped. 0, or negative when unknown. */
    int (*user_mapping)(void *impl, int i, uint64_t pc, const struct prof_os_mem *mem,
                        struct prof_mapping *out);
    /* Optional: the target saw the machine reset (QMP's RESET event) since the last stop.
     * RAM keeps what the old kernel wrote until the new one overwrites it, so nothing read
     * from it before may be trusted again (Linux: the kernel is looked for anew). */
    void (*machine_reset)(void *impl);
    /* Optional: what a capturing target should capture at each sample for this adapter (beside
     * registers and stack), into out; returns the plan's generation, which changes when the plan
     * does (a kernel found, a reboot), 0 while there is none. */
    uint64_t (*capture_plan)(void *impl, struct prof_capture_plan *out);
    /* Optional: the address space of the task on cpus[i] of the last refresh and its exec file
     * mappings, while stopped (the adapter's reads go through mem, within the budget). 0, or
     * negative when unknown (a kernel thread, no offsets, no budget left this stop). */
    int (*address_space)(void *impl, int i, const struct prof_os_mem *mem,
                         struct prof_address_space *out);
    /* Optional: reads up to len bytes of a mapped file (a prof_exec_mapping's file_id) at file
     * offset `offset` from the guest's page cache, at most to the end of that 4 KiB page, while
     * stopped and within the budget (the pages of a file a process never touched are in no page
     * table). 0 with *got, -ENOENT when that page is not cached, -ENOSPC out of budget. */
    int (*file_read)(void *impl, uint64_t file_id, uint64_t offset, void *buf, size_t len,
                     size_t *got, const struct prof_os_mem *mem);
};

extern const struct prof_os_ops prof_os_qprof_abi_ops;
extern const struct prof_os_ops prof_os_none_ops;
extern const struct prof_os_ops prof_os_linux_ops;

/* --os */
enum prof_os_choice { PROF_OS_AUTO = 0, PROF_OS_QPROF_ABI, PROF_OS_NONE, PROF_OS_LINUX };

typedef struct prof_os prof_os;

/* Opens an adapter (ops borrowed, static). *out is the caller's (prof_os_free). A failure is
 * the adapter's reason in err, prefixed "opening the NAME OS adapter". */
int prof_os_open(const struct prof_os_ops *ops, const struct prof_os_config *cfg, prof_os **out,
                 struct qp_error *err);
void prof_os_free(prof_os *os); /* NULL is a no-op */
const char *prof_os_name(const prof_os *os);

void prof_os_refresh(prof_os *os, const struct prof_vcpu *cpus, int n_cpus,
                     const struct prof_os_mem *mem, struct prof_os_refresh *out);
void prof_os_task(prof_os *os, const struct prof_vcpu *cpu, int i, struct prof_task *out);
size_t prof_os_kernel_stack_len(prof_os *os, const struct prof_vcpu *cpu, const struct prof_task *t,
                                size_t max);
int prof_os_user_regs(prof_os *os, const struct prof_vcpu *cpu, const struct prof_task *t,
                      const struct prof_os_mem *mem, struct unw_regs *out);
/* -ENOTSUP when the adapter leaves kernel stacks to the session. */
int prof_os_kernel_unwind(prof_os *os, const struct prof_vcpu *cpu, const struct prof_task *t,
                          const struct prof_os_mem *mem, struct prof_kstack *out);
const sym_table *prof_os_kernel_symbols(prof_os *os);
/* -ENOTSUP when the adapter cannot tell. */
int prof_os_user_mapping(prof_os *os, int i, uint64_t pc, const struct prof_os_mem *mem,
                         struct prof_mapping *out);
/* -ENOTSUP when the adapter cannot tell. */
int prof_os_address_space(prof_os *os, int i, const struct prof_os_mem *mem,
                          struct prof_address_space *out);
/* -ENOTSUP when the adapter cannot read files. */
int prof_os_file_read(prof_os *os, uint64_t file_id, uint64_t offset, void *buf, size_t len,
                      size_t *got, const struct prof_os_mem *mem);
void prof_os_while_running(prof_os *os, const struct prof_os_mem *mem, struct prof_os_refresh *out);
void prof_os_machine_reset(prof_os *os);
/* The adapter's capture plan and its generation; 0 when it has none. */
uint64_t prof_os_capture_plan(prof_os *os, struct prof_capture_plan *out);

/* ---- --current: the kernel's current-process variable through its DWARF (os_current.c) -- */

#define PROF_CURRENT_MAX_STEPS 16

enum prof_current_step_kind {
    PROF_STEP_FIELD,     /* .name */
    PROF_STEP_ARROW,     /* ->name */
    PROF_STEP_INDEX,     /* [N] */
    PROF_STEP_INDEX_CPU, /* [$cpu]: the vCPU's guest id (its APIC ID on x86) */
};

struct prof_current_step {
    enum prof_current_step_kind kind;
    char name[64];  /* FIELD, ARROW */
    uint64_t index; /* INDEX */
};

/* VAR followed by steps, e.g. `cpus[$cpu].proc` or `percpu[$cpu].running->task`; or a
 * per-CPU VAR, `per_cpu(VAR)` or `per_cpu(VAR, N)`, followed by steps: VAR's address plus the
 * CPU's entry of the kernel's per-CPU offset table (drgn's per_cpu(), Linux's per_cpu()). */
struct prof_current_path {
    char var[64];
    bool per_cpu;          /* VAR is per-CPU */
    bool per_cpu_at_index; /* per_cpu(VAR, N): CPU per_cpu_index, not the vCPU's */
    uint64_t per_cpu_index;
    int n;
    struct prof_current_step step[PROF_CURRENT_MAX_STEPS];
};

/* Parses an expression; -EINVAL with a one-line reason in err when it is not one. */
int prof_current_parse(const char *expr, struct prof_current_path *out, struct qp_error *err);

/* Names for prof_os_current_open: NULL for the defaults. */
struct prof_current_names {
    const char *pid_field;      /* the process's integer pid field: "pid" */
    const char *name_field;     /* its string name field: "name", else "comm" */
    const char *percpu_offsets; /* per_cpu()'s table, one offset per CPU: "__per_cpu_offset" */
};

/* Resolves expr against the DWARF of the kernel ELF at kernel into offsets, pointer loads,
 * vCPU indexes and per-CPU offsets, ending at a struct (or a pointer to one) with the fields
 * names says. A missing variable, field, offset table or DWARF is a one-line error naming it.
 * *out is the caller's. */
int prof_os_current_open(const char *kernel, const char *expr,
                         const struct prof_current_names *names, prof_os_current **out,
                         struct qp_error *err);
void prof_os_current_free(prof_os_current *c); /* NULL is a no-op */

/* The current process of cpu while stopped, read through mem: 0 with *pid and name (cap
 * bytes, printable); -ENOENT when the pointer is NULL (no process), -EFAULT when a read fails
 * (unmapped memory, or out of budget), -ERANGE when the vCPU is past the array. */
int prof_os_current_read(const prof_os_current *c, const struct prof_vcpu *cpu,
                         const struct prof_os_mem *mem, uint32_t *pid, char *name, size_t cap);

/* ---- --user-regs: where the kernel saved a process's user registers (os_current.c) ------ */

/* What a register field stands for; its unw_regs slot is the architecture's. */
enum prof_user_reg_role {
    PROF_UREG_PC = 0, /* the user pc the trap left: epc, sepc, rip, elr, pc */
    PROF_UREG_SP,     /* sp, rsp */
    PROF_UREG_FP,     /* s0, fp, rbp, x29 */
    PROF_UREG_RA,     /* ra, x30, lr (none on x86_64: calls push it) */
    PROF_UREG_COUNT
};

/* --user-regs 'EXPR' or 'EXPR:ROLE=FIELD,...' (ROLE: pc, sp, fp, ra), parsed. */
struct prof_user_regs_spec {
    char expr[256];
    char field[PROF_UREG_COUNT][64]; /* a field named for a role; "" where matched by name */
};

/* Parses a --user-regs argument; -EINVAL with a one-line reason in err when it is not one (an
 * empty EXPR, an unknown role, a role named twice, an empty field). */
int prof_user_regs_parse(const char *arg, struct prof_user_regs_spec *out, struct qp_error *err);

/* The role a field of a trapframe stands for by its name (riscv64's epc/sepc, sp, s0/fp, ra;
 * x86_64's rip, rsp, rbp; aarch64's elr/pc, sp, x29/fp, x30/lr), or -1 for none. */
int prof_user_regs_role(const char *field);

/* Resolves spec's EXPR against the kernel's DWARF as --current's (ending at a struct or a
 * pointer to one) and finds its register fields: the ones spec names, else those whose names
 * prof_user_regs_role knows. The pc and sp must be found, as 8-byte fields (a one-line error
 * naming the struct's fields otherwise). slots[role] is the unw_regs slot of each role for the
 * target's architecture, -1 where it has none. *out is the caller's. */
int prof_uregs_open(const char *kernel, const struct prof_user_regs_spec *spec,
                    const int slots[PROF_UREG_COUNT], const char *percpu_offsets, prof_uregs **out,
                    struct qp_error *err);
void prof_uregs_free(prof_uregs *u); /* NULL is a no-op */

/* Where cpu's saved user registers are, while stopped, read through mem: 0 with *at; -ENOENT
 * when a pointer on the way is NULL (no process), -EFAULT when a read fails, -ERANGE when the
 * vCPU is past the array. */
int prof_uregs_locate(const prof_uregs *u, const struct prof_vcpu *cpu,
                      const struct prof_os_mem *mem, uint64_t *at);
/* Reads the register fields of the struct at `at` into out (zeroed first): 0; -EFAULT when
 * the read fails or the pc is not below user_end (no user-mode frame: nothing is guessed). */
int prof_uregs_read(const prof_uregs *u, const struct prof_vcpu *cpu, const struct prof_os_mem *mem,
                    uint64_t at, uint64_t user_end, struct unw_regs *out);

/* ---- The qprof_abi checks (os_qprof_abi_check.c; docs/guest-abi.md) ---------------------- */

/* Largest slot stride qprof accepts from a guest (newer guests may append fields). */
#define PROF_ABI_MAX_SLOT 1024u
/* The most bytes a qprof_abi can take: header plus QPROF_ABI_MAX_CPUS slots at that stride. */
#define PROF_ABI_MAX_BYTES (48u + QPROF_ABI_MAX_CPUS * PROF_ABI_MAX_SLOT)

/* Checks the header of a qprof_abi copied from the guest (len bytes). Fills hdr (its cpu[] left
 * zero) and *need, the bytes the guest's declared layout takes (header + cpu_count slots of
 * cpu_slot_size). Returns 0 when the header is sound and len covers the layout; -EAGAIN when
 * the magic is not there (not published yet); -ENODATA when more bytes (*need) must be copied;
 * -EPROTO with the reason in err when the guest's values are not acceptable. */
int prof_abi_check(const void *bytes, size_t len, struct qprof_abi *hdr, size_t *need,
                   struct qp_error *err);

/* Copies slot `cpu` of a checked ABI into out, at the guest's declared stride, with the name
 * NUL-terminated. Returns 0, -ENOENT for a cpu beyond cpu_count, -ENODATA if len is short. */
int prof_abi_slot(const void *bytes, size_t len, const struct qprof_abi *hdr, unsigned cpu,
                  struct qprof_abi_cpu *out);

/* The most bytes a slot's user register frame takes, any architecture's (the ABI's bound). */
#define PROF_ABI_MAX_FRAME QPROF_ABI_MAX_REGS_FRAME

/* The size of the frame a slot's regs_arch names for a guest of ELF machine elf_machine: the
 * x86_64 frame for QPROF_ABI_ARCH_UNSET (a first-revision guest), 0 when regs_arch names
 * another architecture than the guest's or none qprof knows. */
size_t prof_abi_frame_size(uint32_t regs_arch, uint16_t elf_machine);

/* The user registers of a frame copied from the guest (len bytes, of the shape regs_arch
 * names) as unwinder slots for elf_machine. Returns 0; -EPROTO when len is not that frame's
 * size or regs_arch does not fit the machine; -EFAULT when its pc is not below user_end (the
 * frame was not saved on an entry from user mode). */
int prof_abi_frame_regs(const void *frame, size_t len, uint32_t regs_arch, uint16_t elf_machine,
                        uint64_t user_end, struct unw_regs *u);

#endif
