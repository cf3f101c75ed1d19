/* unwind: DWARF CFI stack unwinding of a foreign (guest) stack from captured registers and
 * memory, with a frame-pointer fallback.
 *
 * An unw_space is one address space's code: the kernel, or one user binary. It holds one
 * long-lived libdwfl context (Dwfl attached once with our own Dwfl_Thread_Callbacks); each
 * unw_unwind call refreshes the registers and the memory source and walks one stack.
 *
 * Functions returning int return 0 on success or a negative errno-style code and fill the
 * optional err (common/qp_error.h).
 */
#ifndef UNWIND_H
#define UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qp_error.h"

#define UNW_DEFAULT_MAX_DEPTH 128

/* Registers in the guest architecture's DWARF numbering (arch/ says which slot holds the pc and
 * the stack pointer). x86_64: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8..15
 * r8..r15, 16 rip (the return address column), the rest unused. riscv64: 0..31 x0..x31, 32 the pc
 * (RISC-V's DWARF has no number for it). aarch64: 0..30 x0..x30, 31 sp, 32 the pc. */
#define UNW_NREGS        33
#define UNW_X86_64_NREGS 17 /* rax..rip: what libdwfl's x86_64 backend takes */
struct unw_regs {
    uint64_t r[UNW_NREGS];
    /* riscv64: the trap CSR sepc (aarch64: ELR_EL1), which libdwfl sees as DWARF column 64
     * (UNW_TRAP_PC_COLUMN): a trap entry's CFI names the interrupted pc there before it has saved
     * it anywhere else (guest/kernel/riscv64/entry.S). Only when has_trap_pc. */
    bool has_trap_pc;
    uint64_t trap_pc;
    /* aarch64: SP_EL0, the interrupted EL0 sp, which libdwfl sees as DWARF column 65
     * (UNW_TRAP_SP_COLUMN): an exception vector's first instruction, entered from EL0, has it
     * nowhere else (guest/kernel/aarch64/entry.S; aarch64 seeds ELR_EL1 as trap_pc too). Only
     * when has_trap_sp. */
    bool has_trap_sp;
    uint64_t trap_sp;
};
#define UNW_TRAP_PC_COLUMN 64
#define UNW_TRAP_SP_COLUMN 65
/* clang-format off */
enum {
    UNW_RAX = 0, UNW_RDX, UNW_RCX, UNW_RBX, UNW_RSI, UNW_RDI, UNW_RBP, UNW_RSP,
    UNW_R8, UNW_R9, UNW_R10, UNW_R11, UNW_R12, UNW_R13, UNW_R14, UNW_R15, UNW_RIP
};
/* clang-format on */

/* Reads guest memory: fill up to len bytes at addr, set *got to the bytes read from the start.
 * Return 0 if *got > 0, a negative code otherwise. The unwinder calls it rarely and in bounded
 * chunks (never per word): once for the initial stack window, then for a chunk when a walk
 * leaves what it already has. */
typedef int (*unw_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len, size_t *got);

struct unw_memory {
    unw_read_fn read;
    void *ctx;
    /* Optional stack snapshot the caller already read (e.g. pipelined with the registers);
     * served first. Borrowed for the duration of the call. */
    uint64_t snapshot_addr;
    const void *snapshot;
    size_t snapshot_len;
    /* Bounds for stack addresses; 0/0 means "no bound known". A frame whose CFA leaves them
     * ends the walk. */
    uint64_t stack_lo, stack_hi;
};

/* Why a walk ended. UNW_STOP_OUTERMOST and UNW_STOP_LEFT_SPACE are normal ends; every other
 * reason means the stack is cut short and the caller should mark it truncated. */
#define UNW_STOP_REASONS(X)                                                                        \
    X(UNW_STOP_OUTERMOST, "outermost frame (CFI marks no caller)")                                 \
    X(UNW_STOP_LEFT_SPACE, "return address outside this address space")                            \
    X(UNW_STOP_DEPTH, "depth limit reached")                                                       \
    X(UNW_STOP_BAD_PC, "pc is zero or not canonical")                                              \
    X(UNW_STOP_MEMORY, "stack memory unreadable")                                                  \
    X(UNW_STOP_NO_CFI, "no unwind information and frame pointer chain broken")                     \
    X(UNW_STOP_NOT_GROWING, "stack does not grow toward its base")                                 \
    X(UNW_STOP_ERROR, "unwinder error")

enum unw_stop {
#define UNW_STOP_ENUM(name, text) name,
    UNW_STOP_REASONS(UNW_STOP_ENUM)
#undef UNW_STOP_ENUM
        UNW_STOP_COUNT
};

const char *unw_stop_str(enum unw_stop s);
static inline bool unw_stop_is_truncation(enum unw_stop s)
{
    return s != UNW_STOP_OUTERMOST && s != UNW_STOP_LEFT_SPACE;
}

enum unw_method { UNW_BY_REGS = 0, UNW_BY_CFI, UNW_BY_FP };

struct unw_frame {
    uint64_t pc;
    /* true when pc is an exact instruction address (the innermost frame, or a frame
     * interrupted asynchronously); false for return addresses, which a symbolizer should look
     * up at pc - 1 so that a call at the end of a function is attributed correctly. */
    bool activation;
    enum unw_method method; /* how this frame's pc was recovered */
};

struct unw_result {
    struct unw_frame *frames; /* caller-provided array of max_depth entries */
    int n_frames;
    enum unw_stop stop;
    uint64_t next_pc;        /* with UNW_STOP_LEFT_SPACE: the return address outside the space */
    unsigned memory_fetches; /* read() calls this walk made */
    /* With UNW_STOP_LEFT_SPACE: the register state of the frame outside the space (e.g. the
     * user registers a kernel entry stub's CFI recovered), to continue the walk in the next
     * space. Bit n of next_regs_known is set when register n was recovered; rip always is. */
    struct unw_regs next_regs;
    uint64_t next_regs_known;
};

typedef struct unw_space unw_space;

/* ---- What the walk needs of a machine: filled by each architecture's table in arch/ ------- */

/* The code of one function: its first address and its bytes, [start, start + len). */
struct unw_code {
    uint64_t start;
    const uint8_t *code;
    size_t len;
};

/* Where a function is in setting up or tearing down its frame record at a pc, as its code says:
 * at entry (and in a leaf that never moves sp) the return address is where the call left it
 * (the link register, or [sp]) and the frame pointer is the caller's; pushed: the caller's frame
 * pointer at [sp], the return address above it; framed: the record the frame pointer points at;
 * popped: the record is gone, the return address where the call left it again. */
enum unw_fp_state {
    UNW_FP_UNKNOWN = 0,
    UNW_FP_AT_ENTRY,
    UNW_FP_PUSHED,
    UNW_FP_FRAMED,
    UNW_FP_FRAMED_LEAF, /* a leaf's record holds only the caller's frame pointer (riscv64) */
    UNW_FP_POPPED
};

/* A machine's frame-record convention and the code reader that says where in its record a
 * function is, for the frame-pointer walk over code without CFI. */
struct unw_fp_rule {
    /* Where f is in its record at pc (an instruction boundary in f, or UNW_FP_UNKNOWN); for
     * UNW_FP_PUSHED, *push: how far the push moved sp. */
    enum unw_fp_state (*state_at)(const struct unw_code *f, uint64_t pc, uint64_t *push);
    /* Whether the instruction that ends at return address ra, in caller's code, is a call to
     * callee (or one with no fixed target): a return address at [sp] is only one if it is. */
    bool (*call_before)(const struct unw_code *caller, uint64_t ra, uint64_t callee);
    unsigned fp_reg;        /* the frame pointer's slot in struct unw_regs */
    int ra_reg;             /* the link register's slot; -1: calls push the return address */
    int saved_fp, saved_ra; /* UNW_FP_FRAMED: the caller's fp and the return address at fp + */
    int leaf_saved_fp;      /* UNW_FP_FRAMED_LEAF: the caller's frame pointer at fp + this */
};

/* What the walk needs to know of an ELF machine's registers and addresses. */
struct unw_machine {
    uint16_t elf_machine; /* libdwfl's backend for it does the CFI */
    const char *name;
    unsigned nregs; /* slots 0..nregs-1 go to libdwfl as DWARF registers 0..nregs-1 */
    unsigned pc_slot, sp_slot;
    /* The widest virtual address: a pc is one only when bits 63 down to va_bits - 1 are all
     * equal (sign-extended), the test that ends a walk at a garbage return address. */
    unsigned va_bits;
    /* Calls leave the return address in a register: a function that has not stored anything
     * yet (a leaf without a frame, say) shares its caller's sp, so the step out of an
     * interrupted frame (the innermost, or one under a trap entry) may keep sp the same. */
    bool link_register;
    /* libdwfl's backend guesses callers by frame pointers where there is no CFI, in a way that
     * invents frames: such frames end the walk instead. */
    bool fp_guess_untrusted;
    /* Seeds DWARF column UNW_TRAP_PC_COLUMN with unw_regs.trap_pc when the regs have one. */
    bool trap_pc_column;
    /* Seeds DWARF column UNW_TRAP_SP_COLUMN with unw_regs.trap_sp when the regs have one. */
    bool trap_sp_column;
    /* The frame-pointer walk for pcs without CFI; NULL leaves them to libdwfl. */
    const struct unw_fp_rule *fp;
    /* The names of DWARF registers 0..nregs-1, for unw_dump_cfi; NULL: "regN". */
    const char *const *reg_names;
};

/* A space for code of machine m (borrowed: static, as the arch tables are) covers code at pc in
 * [lo, hi): e.g. the kernel half 0xffff800000000000..2^64-1 or the user half
 * 0..0x0000800000000000. A return address outside ends the walk with UNW_STOP_LEFT_SPACE. */
int unw_space_new(const struct unw_machine *m, const char *name, uint64_t lo, uint64_t hi,
                  unw_space **out, struct qp_error *err);
void unw_space_free(unw_space *s); /* NULL is a no-op */

/* Adds a host ELF's CFI (.eh_frame, and .debug_frame when present). bias is added to the
 * file's addresses (0 for ET_EXEC at its link address, the slide of a relocated kernel). */
int unw_space_add_elf(unw_space *s, const char *path, int64_t bias, struct qp_error *err);

/* Adds CFI from .eh_frame bytes read out of guest memory when no host ELF matches: code in
 * [text_addr, text_addr + text_size), eh_frame_addr is where the bytes live in the guest
 * (pc-relative encodings need it). The bytes are copied. They are checked first
 * (unw_cfi_check_eh_frame): a table that fails gives -EINVAL and adds nothing. */
int unw_space_add_eh_frame(unw_space *s, const char *name, uint64_t text_addr, uint64_t text_size,
                           uint64_t eh_frame_addr, const void *eh_frame, size_t eh_frame_len,
                           struct qp_error *err);

/* Checks .eh_frame bytes from an untrusted source (guest memory) in one linear pass, the way
 * unw_space_add_eh_frame does before libdw sees them: every entry's length in bounds, every
 * FDE's CIE pointer at a CIE before it, augmentations and pointer encodings that libdw knows,
 * every DW_CFA opcode known with its operands (LEB128s of at most 10 bytes) inside the entry,
 * register numbers at most UNW_CFI_MAX_REGNO, DW_CFA_remember_state nested at most
 * UNW_CFI_MAX_STATE_DEPTH deep, and DWARF expressions of at most UNW_CFI_MAX_EXPR bytes made
 * only of operations libdwfl evaluates, with forward branches only. Stricter than DWARF, so
 * that libdw's costs stay proportional to the table and its error paths (some of which leak)
 * stay out of reach. Returns 0, or -EINVAL with the offset and the reason in err. */
#define UNW_CFI_MAX_REGNO       125 /* the highest x86_64 psABI DWARF register (k7) */
#define UNW_CFI_MAX_EXPR        512
#define UNW_CFI_MAX_STATE_DEPTH 64
int unw_cfi_check_eh_frame(const void *eh_frame, size_t len, struct qp_error *err);

/* Walks the stack starting at regs (the interrupted state, innermost frame first). Frames come
 * out innermost first, at most max_depth. Never loops, never reads outside what mem serves.
 * Returns 0 when the walk ran (even if it stopped early: see res->stop), negative only on
 * misuse or internal failure. */
int unw_unwind(unw_space *s, const struct unw_regs *regs, const struct unw_memory *mem,
               int max_depth, struct unw_result *res, struct qp_error *err);

/* Debugging aid: writes the CFA rule and register rules that cover pc, as text, to out
 * (a FILE *). Returns -ENOENT when no CFI covers pc. */
int unw_dump_cfi(unw_space *s, uint64_t pc, void *out_file, struct qp_error *err);

#endif
