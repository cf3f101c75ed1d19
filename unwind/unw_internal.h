/* Private state shared by the unwind module's source files. */
#ifndef UNW_INTERNAL_H
#define UNW_INTERNAL_H

#include <elf.h>
#include <elfutils/libdwfl.h>
#include <glib.h>

#include "unwind.h"

/* Memory fetched on a snapshot miss is cached per walk in a few aligned chunks; the cap on
 * fetches bounds what one garbage stack can cost (each fetch may be a QMP round trip). */
#define UNW_CHUNK_SIZE  1024u
#define UNW_NCHUNKS     8u
#define UNW_MAX_FETCHES 32u

/* Direct-mapped cache of "does CFI cover this pc" answers, used to label frames UNW_BY_CFI or
 * UNW_BY_FP (libdwfl does not say which way it recovered a frame). */
#define UNW_CFI_CACHE_SIZE 512u

struct unw_chunk {
    uint64_t addr;
    size_t len;
    uint8_t bytes[UNW_CHUNK_SIZE];
};

enum unw_mem_fail { UNW_MEM_OK = 0, UNW_MEM_OUT_OF_BOUNDS, UNW_MEM_FETCH_FAILED, UNW_MEM_CAPPED };

/* The state of the walk in progress; refreshed by unw_unwind for every sample. */
struct unw_walk {
    const struct unw_regs *regs;
    const struct unw_memory *mem;
    struct unw_result *res;
    int max_depth;
    struct unw_chunk chunks[UNW_NCHUNKS];
    unsigned n_chunks, next_victim;
    enum unw_mem_fail mem_fail;
    bool stopped; /* our frame callback chose res->stop */
    uint64_t prev_pc, prev_sp, prev_lookup_pc;
    bool prev_sp_known;
    bool prev_activation; /* the frame before was interrupted (innermost, or under a trap) */
    /* The last frame has no CFI: the frame-pointer walk goes on from these registers. */
    bool fp_pending, fp_activation;
    /* unw_fp_walk found a caller with CFI (in fp_regs; fp_activation when it is a signal frame):
     * libdwfl goes on from it, its first frame already recorded. */
    bool fp_resume, resuming, resumed_first_seen;
    struct unw_regs fp_regs;
};

struct unw_cfi_cache_entry {
    uint64_t pc; /* pc + 1, so that 0 means empty */
    bool has_cfi;
};

/* Where a module's ELF comes from: a host file, or an image we built around guest .eh_frame
 * bytes. Owned by the space; the Elf libdwfl opens on it is owned by libdwfl. */
struct unw_source {
    char *path;
    void *image;
    size_t image_len;
};

struct unw_func;

/* Where a function is in setting up or tearing down its frame record at a pc, as its code says
 * (unw_fp.c): at entry (and in a leaf that never moves sp) the return address is at [sp] and the
 * frame pointer is the caller's; pushed: the caller's frame pointer at [sp], the return address
 * above it; framed: the record the frame pointer points at; popped: the record is gone, the
 * return address at [sp] again. */
enum unw_fp_state {
    UNW_FP_UNKNOWN = 0,
    UNW_FP_AT_ENTRY,
    UNW_FP_PUSHED,
    UNW_FP_FRAMED,
    UNW_FP_FRAMED_LEAF, /* riscv64: a leaf's record holds only the caller's s0 */
    UNW_FP_POPPED
};

/* A machine's frame-record rule (arch/'s struct prof_frame_rule, with the code reader that says
 * where in its record a function is). */
struct unw_fp_arch {
    /* Where f is in its record at pc; for UNW_FP_PUSHED, *push: how far the push moved sp. */
    enum unw_fp_state (*state_at)(const struct unw_func *f, uint64_t pc, uint64_t *push);
    /* Whether the instruction before return address ra calls callee (or has no fixed target). */
    bool (*call_before)(unw_space *s, uint64_t ra, uint64_t callee);
    unsigned fp_reg;
    int ra_reg; /* the link register's slot; -1: calls push the return address */
    int saved_fp, saved_ra;
    int leaf_saved_fp; /* UNW_FP_FRAMED_LEAF: the caller's frame pointer at fp + this */
};
extern const struct unw_fp_arch unw_fp_x86_64, unw_fp_aarch64, unw_fp_riscv64;

/* What the walk needs to know of an ELF machine's registers. */
struct unw_machine {
    uint16_t elf_machine;
    const char *name;
    unsigned nregs; /* slots 0..nregs-1 go to libdwfl as DWARF registers 0..nregs-1 */
    unsigned pc_slot, sp_slot;
    /* Calls leave the return address in a register (riscv's ra): a function that has not
     * stored anything yet (a leaf without a frame, say) shares its caller's sp, so the step out
     * of an interrupted frame (the innermost, or one under a trap entry) may keep sp the same. */
    bool link_register;
    /* libdwfl's backend guesses callers by frame pointers where there is no CFI, in a way that
     * invents frames (aarch64's: see on_frame): such frames end the walk instead. */
    bool fp_guess_untrusted;
    /* Seeds DWARF column UNW_TRAP_PC_COLUMN with unw_regs.trap_pc when the regs have one. */
    bool trap_pc_column;
    /* Seeds DWARF column UNW_TRAP_SP_COLUMN with unw_regs.trap_sp when the regs have one. */
    bool trap_sp_column;
    /* The frame-pointer walk for pcs without CFI (unw_fp.c); NULL leaves them to libdwfl. */
    const struct unw_fp_arch *fp;
};

struct unw_space {
    const struct unw_machine *machine;
    char *name;
    uint64_t lo, hi;
    Dwfl *dwfl;
    Elf *arch_elf; /* tells dwfl_attach_state the architecture before any module exists */
    unsigned char arch_ehdr[64];
    GPtrArray *sources;
    struct unw_walk walk;
    struct unw_cfi_cache_entry cfi_cache[UNW_CFI_CACHE_SIZE];
};

/* unw_image.c: builds an ELF image holding .eh_frame; *out is g_free'd by the caller. */
/* An x86_64 little-endian ET_EXEC ELF header with no program or section headers; callers fill
 * in the tables they add. */
void unw_x86_64_ehdr(Elf64_Ehdr *eh);
/* The same for another machine. */
void unw_ehdr_for(Elf64_Ehdr *eh, uint16_t elf_machine);

int unw_build_eh_frame_image(uint64_t text_addr, uint64_t text_size, uint64_t eh_frame_addr,
                             const void *eh_frame, size_t eh_frame_len, void **out,
                             size_t *out_len);

/* unw_walk.c */
extern const Dwfl_Thread_Callbacks unw_thread_callbacks;
bool unw_pc_has_cfi(unw_space *s, uint64_t pc);
bool unw_pc_is_canonical(uint64_t pc);
/* Whether the CFI covering pc marks a signal frame (a trampoline: its pc is exact). */
bool unw_pc_is_signal_frame(unw_space *s, uint64_t pc);
/* Reads the guest word at addr through the walk's memory (bounds, cache, fetch cap). */
bool unw_read_word(unw_space *s, uint64_t addr, uint64_t *out);

/* unw_fp.c: continues the walk in progress from the registers of its last frame (already in
 * the result), by frame records, and sets the result's stop. */
void unw_fp_walk(unw_space *s, const struct unw_regs *start, bool activation);

#endif
