/* arch: the facts of one CPU architecture, one table per architecture (arch_<name>.c), chosen
 * once (from the gdbstub's target.xml, or the target backend's own; checked against --kernel's
 * e_machine) and passed down. The core names no architecture: it asks the table.
 *
 * Modelled on drgn's struct drgn_architecture_info: what differs between architectures is data
 * or a function in the table, so that riscv64 or aarch64 is one new file that fills another
 * struct prof_arch and one line in arch.c. The unwinder's view of the machine (register slots,
 * address width, the frame-pointer prologue and epilogue reader) is the table's `unwind` entry,
 * which unwind/ takes as given; the CFI rules come from libdwfl's backend for elf_machine.
 * QMP's `info registers` text is the table's too (monitor_parse, by the gdbstub's register
 * names). What the table does not hold: the Linux kernel's saved-register frame, linux/'s
 * (lx_arch_<name>.c).
 *
 * The tables are static and live for the whole process. */
#ifndef PROF_ARCH_H
#define PROF_ARCH_H

#include "qp_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct unw_machine; /* unwind.h */
struct unw_regs;    /* unwind.h */

/* Where user and kernel code live in a virtual address space of this architecture. */
struct prof_addr_split {
    uint64_t user_end;     /* user addresses are below this */
    uint64_t kernel_start; /* kernel addresses are at or above this */
};

/* Reads the 8-byte little-endian word at guest-physical paddr: 0, or negative when paddr is not
 * RAM. */
typedef int (*prof_arch_phys_read_fn)(void *ctx, uint64_t paddr, uint64_t *val);

/* A general register as the gdbstub's target.xml names it, and its slot in struct unw_regs. */
struct prof_arch_reg {
    const char *gdb_name;
    int slot;
};

/* The frame-pointer chain: in a frame whose frame pointer (DWARF slot fp_reg) holds fp, the
 * caller's frame pointer is the word at fp + saved_fp and the return address the word at
 * fp + saved_ra. */
struct prof_frame_rule {
    int fp_reg;
    int saved_fp, saved_ra;
};

/* Reads register `name` of one vCPU from the transport: 0, -ENOENT when the target has no such
 * register, -ENODATA when it could not give its value. */
typedef int (*prof_arch_reg_fn)(void *ctx, const char *name, uint64_t *val);

/* What a page walk needs beyond the root register, for an architecture whose translation one
 * register does not describe: aarch64's high-half root (TTBR1_EL1) and the control register
 * that sets both halves' sizes and granules (TCR_EL1). x86_64 and riscv64 leave it zero and
 * their walks never read it. */
struct prof_arch_mmu {
    uint64_t root_hi; /* aarch64: TTBR1_EL1 (the root itself, TTBR0_EL1, is as_root) */
    uint64_t control; /* aarch64: TCR_EL1 */
};

/* What a vCPU's privileged registers say, for struct prof_vcpu. */
struct prof_arch_cpu_state {
    int privilege;            /* 0 is the most privileged */
    bool paging;              /* translation on, in the mode the page walk knows */
    uint64_t as_root;         /* the address-space root register's value (flags included) */
    struct prof_arch_mmu mmu; /* the rest of the walk's context; zero where none is needed */
    /* The trap CSR that holds the interrupted pc (RISC-V sepc), for the unwinder's column
     * UNW_TRAP_PC_COLUMN: a trap entry names the pc there until it has saved it. */
    bool has_trap_pc;
    uint64_t trap_pc;
    /* The register a kernel keeps its own per-thread pointer in while it runs (aarch64: SP_EL0,
     * where Linux keeps `current` at EL1; riscv64: tp in S-mode), when the target gave it. */
    bool has_kernel_thread_reg;
    uint64_t kernel_thread_reg;
    /* Where the same pointer waits while it is not in that register (riscv64: sscratch, in
     * U-mode and at the trap entry's first instruction; 0 elsewhere in S-mode). */
    bool has_kernel_thread_alt;
    uint64_t kernel_thread_alt;
    /* The register that holds the pc an exception interrupted, for a vCPU stopped at the first
     * instruction of an exception vector (aarch64: ELR_EL1; riscv64: sepc), when given. */
    bool has_exception_pc;
    uint64_t exception_pc;
    /* aarch64: SP_EL0 at EL1, the sp an exception from EL0 interrupted, for the unwinder's
     * column UNW_TRAP_SP_COLUMN: a vector names it there until it has saved it (and ELR_EL1 as
     * the trap pc). */
    bool has_trap_sp;
    uint64_t trap_sp;
    /* Translation is on in a mode page_walk does not serve (x86_64: 32-bit paging, or 5-level
     * paging with CR4.LA57): reads through the walk give nothing rather than wrong bytes, and
     * nothing is proved by a walk there. paging stays what the mode says. */
    bool unwalkable;
    /* The base of the kernel's per-CPU area where a register the transport gave holds it
     * (x86_64: the GS base QEMU's monitor prints); 0 when not given. */
    uint64_t percpu_base;
};

/* One vCPU's registers as QEMU's monitor prints them (HMP `info registers -a`), under the names
 * the gdbstub gives them (riscv64: "ra", "fp", "satp", "sepc"), so that one architecture's
 * gdb_regs and cpu_state read both transports. Registers past PROF_ARCH_MONITOR_REGS are not
 * kept (none that qprof reads). */
#define PROF_ARCH_MONITOR_REGS 112
struct prof_arch_monitor_reg {
    char name[12];
    uint64_t value;
};
struct prof_arch_monitor_cpu {
    int cpu_index; /* QEMU cpu-index (the CPU#n header, 0 when absent) */
    bool halted;   /* waiting for an interrupt (monitor_complete's inference) */
    int n_regs;
    struct prof_arch_monitor_reg regs[PROF_ARCH_MONITOR_REGS];
};

/* A prof_arch_reg_fn over a struct prof_arch_monitor_cpu (ctx): 0, or -ENOENT when it has no
 * register of that name. */
int prof_arch_monitor_reg(void *ctx, const char *name, uint64_t *val);

/* Adds (or replaces) register name in cpu: 0, -ENOSPC when cpu is full, -EINVAL for a name
 * longer than a prof_arch_monitor_reg holds. */
int prof_arch_monitor_set(struct prof_arch_monitor_cpu *cpu, const char *name, uint64_t val);

/* For the arch tables' monitor_parse. A token of a monitor line: s[0..len), not terminated. */
struct prof_arch_token {
    const char *s;
    size_t len;
};
/* Splits [line, end) at spaces and tabs into at most max tokens: their count, or -1 when the
 * line holds more. */
int prof_arch_split_tokens(const char *line, const char *end, struct prof_arch_token *t, int max);

/* How one architecture reads the CPU#n blocks of `info registers -a`: a block of block_size
 * bytes, whose first member is its struct prof_arch_monitor_cpu; start resets it for CPU
 * cpu_index; line reads one non-empty line into it; finish checks a block that ended (0, or a
 * negative code and a one-line message). */
struct prof_arch_monitor_blocks {
    size_t block_size;
    void (*start)(void *block, int cpu_index);
    int (*line)(void *block, const char *line, const char *end, struct qp_error *err);
    int (*finish)(const void *block, struct qp_error *err);
};
/* A monitor_parse over those: lines before the first CPU#n header are CPU 0's; at most max
 * blocks are kept (*n_cpus set), every block is checked. -EPROTO when the text holds none. */
int prof_arch_monitor_parse_blocks(const struct prof_arch_monitor_blocks *b, const char *text,
                                   struct prof_arch_monitor_cpu *out, int max, int *n_cpus,
                                   struct qp_error *err);

/* qprof's own guest ABI (include/qprof/guest_abi.h): the user-register frame an ABI slot points
 * to, as this architecture's demo kernel saves it at entry. */
struct prof_arch_abi_frame {
    uint32_t regs_arch; /* the QPROF_ABI_ARCH_* a slot names for it */
    bool unset_is_mine; /* a first-revision slot (QPROF_ABI_ARCH_UNSET) holds this frame */
    uint32_t size;      /* its bytes */
    uint32_t sp_off;    /* where the user stack pointer is in it */
    /* Fills u's slots from the frame (size bytes, any alignment; u zeroed before) and returns
     * the user pc it holds. */
    uint64_t (*to_regs)(const void *frame, struct unw_regs *u);
};

/* The main RAM block of QEMU's usual machine (x86_64 pc and q35, riscv64 and aarch64 virt). */
struct prof_arch_ram_layout {
    uint64_t base; /* the guest-physical address of the block's first byte */
    /* Bytes [hole_start, hole_end) of the block are not RAM there (x86_64's legacy VGA and ROM
     * hole, 640 KiB to 1 MiB); both 0 when there is none. */
    uint64_t hole_start, hole_end;
    /* A block of this many bytes or more is split where only QEMU says (x86_64: q35 from
     * 2.75 GiB, pc from 3.5 GiB, around the 4 GiB hole); 0 when never. */
    uint64_t split_from;
};

/* Guest-physical [start, end) lies at byte `offset` of a RAM block. */
struct prof_arch_ram_piece {
    uint64_t start, end, offset;
};

struct prof_arch {
    const char *name;             /* "x86_64": as people and ELF tools call it */
    uint16_t elf_machine;         /* EM_X86_64: which ELF files (--sysroot) belong to it */
    struct prof_addr_split split; /* canonical user and kernel halves */
    int pc_reg, sp_reg;           /* DWARF numbers of the pc and the stack pointer in unw_regs */
    int user_privilege;           /* the privilege level user code runs at (0: most privileged) */
    uint64_t as_root_mask;        /* the address bits of the address-space root register */
    /* Whether root (a vCPU's as_root) names the top-level table at guest-physical table_pa (a
     * Linux mm's pgd): x86_64 either half of PTI's 8 KiB pair (bit 12 aside), riscv64 satp's
     * PPN shifted to an address (no Bare mode), aarch64 TTBR0's BADDR (ASID and CnP aside). */
    bool (*root_names_table)(uint64_t root, uint64_t table_pa);
    /* Translates vaddr through the page tables rooted at root (the root register's value, flag
     * bits allowed). Returns 0 with *paddr and *page_size (the size of the page holding vaddr),
     * -EFAULT when vaddr is not canonical, an entry is not present or a table is not in RAM,
     * -ENOTSUP when root names a translation mode the walk does not know. Reads at most one
     * entry per level: tables that point back at themselves end it, never loop it. */
    int (*page_walk)(uint64_t root, uint64_t vaddr, prof_arch_phys_read_fn read_phys, void *ctx,
                     uint64_t *paddr, uint64_t *page_size);
    /* The same with the rest of the translation context (mmu may be NULL: all zero). NULL for
     * an architecture whose walk needs only root; call prof_arch_page_walk, which picks. aarch64
     * has both, and its page_walk, with no TCR_EL1, refuses with -ENOTSUP. */
    int (*page_walk_mmu)(uint64_t root, const struct prof_arch_mmu *mmu, uint64_t vaddr,
                         prof_arch_phys_read_fn read_phys, void *ctx, uint64_t *paddr,
                         uint64_t *page_size);
    struct prof_frame_rule frame;
    /* What the unwinder needs of the machine (unwind.h): register slots, the widest virtual
     * address, and the frame-record reader for code without CFI (unw_space_new takes it). */
    const struct unw_machine *unwind;
    struct prof_arch_abi_frame abi_frame;
    /* QEMU translates debug reads (the gdbstub's `m`, QMP's memsave, HMP's `x`) with the vCPU's
     * own privilege (riscv64): a vCPU stopped in user mode cannot read kernel memory that way,
     * only from a shared RAM file or the QEMU process. */
    bool gdb_reads_by_privilege;

    /* The gdbstub's view: target.xml's <architecture> (the prefix up to the first space or the
     * end, e.g. "i386:x86-64", "riscv:rv64"), the general registers it sends and where they go,
     * and the registers cpu_state asks for. */
    const char *gdb_arch;
    const struct prof_arch_reg *gdb_regs;
    int n_gdb_regs;
    const char *const *gdb_state_regs; /* NULL-terminated */
    const char *gdb_root_reg;          /* the address-space root register: "cr3", "satp" */
    /* A register only this architecture's target.xml has, by which a stub whose target.xml names
     * no <architecture> is known (QEMU's x86 description may leave it out: "rip"); NULL when its
     * stubs always name it. */
    const char *gdb_unnamed_reg;
    /* For a backend that captures inside QEMU without this table at hand (the TCG plugin): a
     * vCPU runs user code when (register capture_mode_reg & capture_mode_mask) ==
     * capture_mode_user, by the gdbstub's register names (x86_64: cs & 3 == 3). */
    const char *capture_mode_reg;
    uint64_t capture_mode_mask, capture_mode_user;
    /* The register that holds the interrupted user sp at a kernel entry until the entry code
     * has saved it (aarch64: SP_EL0), for such a backend's kernel-mode samples; NULL where the
     * CPU saves it itself (x86_64's interrupt frame) or the frame the ABI points to is enough. */
    const char *capture_user_sp_reg;
    /* The registers that may hold the kernel's per-CPU base at a capture, in the order they are
     * tried: the first that holds a kernel-half address is it (x86_64: gs_base, then k_gs_base,
     * the kernel's while user code runs and until an entry's swapgs). NULL-terminated, at most
     * two; NULL where a kernel keeps none (the current task is in a register instead), and such
     * a backend refuses an OS adapter's per-CPU window (PROF_CAPTURE_KERNEL_PERCPU). */
    const char *const *capture_percpu_regs;
    /* A kernel entry from user mode makes the CPU push an interrupt frame (rip, cs, rflags, rsp,
     * ss) on the kernel stack, where such a backend finds the interrupted user sp before the
     * kernel saved anything (x86_64); false where the entry code saves the frame (abi_frame). */
    bool capture_iret_frame;
    /* Privilege, paging and the address-space root from the registers get reads (gdbstub names).
     * A negative code with a one-line message when a register it needs is missing, or when a
     * value is one it cannot interpret (a RISC-V satp mode it has no walk for). */
    int (*cpu_state)(prof_arch_reg_fn get, void *ctx, struct prof_arch_cpu_state *st,
                     struct qp_error *err);

    /* QMP's view (NULL: QMP refuses the guest). query-target's "arch" is the table's name.
     * monitor_parse reads the text of `info registers -a` (or of one CPU without a CPU#n
     * header) into at most max entries of out, *n set: -EPROTO with a one-line message for text
     * it cannot read or a block that lacks a register cpu_state needs, never a crash. */
    int (*monitor_parse)(const char *text, struct prof_arch_monitor_cpu *out, int max, int *n,
                         struct qp_error *err);
    /* Optional: what the monitor does not print but cpu_state reads (riscv64: `priv`, the
     * current mode) and whether the vCPU is halted, inferred from memory (read_phys:
     * guest-physical, the shared RAM file) and added to cpu. 0, or negative with a one-line
     * message. */
    int (*monitor_complete)(struct prof_arch_monitor_cpu *cpu, prof_arch_phys_read_fn read_phys,
                            void *ctx, struct qp_error *err);
    /* Optional: cpu_state for the monitor's registers, for an architecture whose `info registers`
     * says other things than the gdbstub's registers: x86_64's prints the CPL and the GS base;
     * aarch64's lacks SCTLR_EL1, TTBRs and TCR_EL1, so the state it gives has no address-space
     * root (as_root 0) and no mmu, and over QMP such a guest's memory comes through QEMU's own
     * translation by the vCPU (monitor_translated). */
    int (*monitor_cpu_state)(prof_arch_reg_fn get, void *ctx, struct prof_arch_cpu_state *st,
                             struct qp_error *err);
    /* The monitor's text has no register a page walk starts from (aarch64): over QMP memory
     * comes through QEMU's own translation by the vCPU (memsave, HMP), never the RAM file. */
    bool monitor_translated;
    /* The QOM property of a vCPU object that holds the guest's own number for it (x86_64:
     * "apic-id", the initial APIC ID, which is how the guest numbers its CPUs); NULL when
     * QEMU's cpu-index is that number. */
    const char *qom_cpu_id;
    /* Where QEMU's usual machine for this architecture puts its main RAM block, for a reader
     * that has no layout from QEMU (prof_arch_usual_ram); NULL when qprof knows none. */
    const struct prof_arch_ram_layout *usual_ram;
    /* Opens capstone for this architecture's code into *handle (capstone's csh) for `qprof
     * annotate`: true, or false when this capstone has none; NULL where capstone 4, Debian 12's,
     * has none (riscv64). */
    bool (*capstone_open)(size_t *handle);
};

extern const struct prof_arch prof_arch_x86_64;
extern const struct prof_arch prof_arch_riscv64;
extern const struct prof_arch prof_arch_aarch64;

/* a->page_walk_mmu when the architecture has one, else a->page_walk (mmu unused). */
int prof_arch_page_walk(const struct prof_arch *a, uint64_t root, const struct prof_arch_mmu *mmu,
                        uint64_t vaddr, prof_arch_phys_read_fn read_phys, void *ctx,
                        uint64_t *paddr, uint64_t *page_size);

/* The addresses whose pcs the kernel's unwind space takes as kernel code, for a kernel ELF
 * whose executable segments span [elf_lo, elf_hi) once slid (both 0: no ELF, a System.map or
 * none). A kernel in the canonical kernel half gets the whole half (its modules and anything
 * it maps there run beside it); one linked anywhere else (a hobby kernel run at its physical
 * load address, 0x80000000 on riscv64's virt) gets what its program headers say, so that its
 * pcs are unwound and a return into user code still leaves the space. */
void prof_arch_kernel_space(const struct prof_arch *a, uint64_t elf_lo, uint64_t elf_hi,
                            uint64_t *lo, uint64_t *hi);

/* The table whose name is name (QMP's query-target "arch": "riscv64"), NULL when unknown. */
const struct prof_arch *prof_arch_by_name(const char *name);

/* The table for a transport that names no architecture (an old QEMU's QMP without
 * query-target, a test's fake): x86_64, the one qprof began with. */
const struct prof_arch *prof_arch_unnamed(void);

/* The table for a gdbstub whose target.xml names no <architecture>: the one whose
 * gdb_unnamed_reg has(ctx, name) says the description holds; NULL when none. */
const struct prof_arch *prof_arch_for_gdb_regs(bool (*has)(const void *ctx, const char *name),
                                               const void *ctx);

/* The pieces a main RAM block of len bytes makes in guest-physical memory on the usual machine
 * (a->usual_ram), at most max of them into out: their count, 0 when qprof does not know where
 * such a block lies (no layout, a block the machine splits where only QEMU says, or one that
 * ends inside the hole). */
int prof_arch_usual_ram(const struct prof_arch *a, uint64_t len, struct prof_arch_ram_piece *out,
                        int max);

/* The table for an ELF e_machine, NULL when qprof knows no such architecture. */
const struct prof_arch *prof_arch_for_elf(uint16_t elf_machine);

/* The table for a gdbstub target.xml <architecture> ("riscv:rv64"), NULL when unknown. */
const struct prof_arch *prof_arch_for_gdb(const char *xml_arch);

/* The names qprof knows, for messages: "x86_64, riscv64, aarch64" (static). */
const char *prof_arch_known_names(void);

/* The architecture of the ELF file at path, for --kernel: 0 with *arch set, 0 with *arch NULL
 * when path is no ELF file (a System.map), or -ENOTSUP with a one-line message naming its
 * e_machine when qprof knows no such architecture. */
int prof_arch_of_elf_file(const char *path, const struct prof_arch **arch, struct qp_error *err);

/* The one-line error for a kernel ELF of one architecture given for a guest of another: 0 when
 * they agree or either is unknown (NULL). */
int prof_arch_check_match(const struct prof_arch *kernel, const char *kernel_path,
                          const struct prof_arch *guest, const char *transport,
                          struct qp_error *err);

#endif
