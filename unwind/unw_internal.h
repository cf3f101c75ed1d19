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
/* A little-endian ET_EXEC ELF header of elf_machine with no program or section headers;
 * callers fill in the tables they add. */
void unw_ehdr_for(Elf64_Ehdr *eh, uint16_t elf_machine);

/* The image says elf_machine (the space's): libdw takes the default CFI rules (the stack
 * pointer's value is the CFA, ...) from the image's machine, not the space's. */
int unw_build_eh_frame_image(uint16_t elf_machine, uint64_t text_addr, uint64_t text_size,
                             uint64_t eh_frame_addr, const void *eh_frame, size_t eh_frame_len,
                             void **out, size_t *out_len);

/* unw_walk.c */
extern const Dwfl_Thread_Callbacks unw_thread_callbacks;

/* unw_cfi.c */
bool unw_pc_has_cfi(unw_space *s, uint64_t pc);
/* Whether the CFI covering pc marks a signal frame (a trampoline: its pc is exact). */
bool unw_pc_is_signal_frame(unw_space *s, uint64_t pc);
/* Whether pc is an address the machine can have at all (its va_bits sign-extended). */
bool unw_pc_is_canonical(const struct unw_machine *m, uint64_t pc);

/* unw_mem.c: reads the guest word at addr through the walk's memory (bounds, cache, fetch
 * cap). */
bool unw_read_word(unw_space *s, uint64_t addr, uint64_t *out);
/* Whether [addr, addr + len) is inside mem's stack bounds (all of memory when it has none). */
bool unw_mem_in_bounds(const struct unw_memory *mem, uint64_t addr, size_t len);

/* unw_fp.c: continues the walk in progress from the registers of its last frame (already in
 * the result), by frame records, and sets the result's stop. */
void unw_fp_walk(unw_space *s, const struct unw_regs *start, bool activation);

#endif
