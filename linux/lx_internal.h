/* Private to linux/: the kernel handle's state, shared by its source files. */
#ifndef LX_INTERNAL_H
#define LX_INTERNAL_H

#include "linux.h"

#include <glib.h>

#define LX_START_KERNEL_MAP UINT64_C(0xffffffff80000000)
#define LX_TLB_SIZE         64
#define LX_PAGE_CACHE       16 /* physical pages kept per stop: page tables, stack pages */

struct lx_tlb_entry {
    uint64_t va_page, pa_page; /* 4 KiB granules; va_page 0 = empty */
    uint64_t page_size;        /* of the page the granule lies in */
};

/* The ORC entry layouts qprof reads (lx_orc.c tells them apart by the table's contents). */
enum lx_orc_layout {
    LX_ORC_UNKNOWN,
    LX_ORC_END_BIT,     /* 4.14 to 6.2: type:2 (CALL 0, REGS 1, REGS_PARTIAL 2), end:1 */
    LX_ORC_SIGNAL_BIT,  /* 6.3 on: type:3 (UNDEFINED 0, END_OF_STACK 1, CALL 2, REGS 3,
                           REGS_PARTIAL 4), signal:1 */
    LX_ORC_SIGNAL_REGS, /* 7.x: the same with the registers renumbered (SP 3, PREV_SP 8, ...) */
};

/* What a kernel handle does differently per architecture: one table each (lx_arch_x86_64.c,
 * lx_arch_arm64.c), chosen by the page-table keys the vmcoreinfo holds. The rest of linux/ is
 * the same for every architecture. */
struct lx_fp_arch;
struct lx_arch {
    const char *name; /* as the kernel names it: "x86_64", "arm64" */
    /* Whether vi holds what setup needs. */
    bool (*fits)(const struct lx_vmcoreinfo *vi);
    /* Sets k->pgd_paddr and k->levels from k->vi: 0, or negative with a one-line message. */
    int (*setup)(lx_kernel *k, struct qp_error *err);
    /* Translates a kernel address through the kernel page table: 0 with *pa and *size (the
     * size of the page holding va), or -EFAULT. Reads entries through lx__cached_read. */
    int (*walk)(lx_kernel *k, uint64_t va, uint64_t *pa, uint64_t *size);
    /* Where a kernel image address lies in guest-physical memory (no walk). */
    uint64_t (*image_paddr)(const struct lx_vmcoreinfo *vi, uint64_t kva);
    /* Kernel stacks by frame pointers (NULL: by ORC, lx_orc.c). */
    const struct lx_fp_arch *fp;
    /* Where module memory lies (struct module, text, tables): 0 and [*start, *end), or
     * -ENOENT when k lacks what it takes (lx_kernel_module_area). */
    int (*module_area)(const lx_kernel *k, uint64_t *start, uint64_t *end);
    /* The addresses code (len bytes at pc) forms PC-relatively (arm64 ADRP+ADD, riscv64
     * AUIPC+ADDI), up to max of them into out: how a data symbol kallsyms lacks is found from
     * the code that uses it. NULL: kallsyms names the data (x86_64's KALLSYMS_ALL). */
    size_t (*pc_rel_addrs)(const uint8_t *code, size_t len, uint64_t pc, uint64_t *out, size_t max);
    /* An ORC kernel's struct lx_pt_regs from and to registers in DWARF numbering (LX_GREGS
     * slots): NULL for a kernel walked by frame pointers. */
    void (*regs_to_pt)(const uint64_t *regs, struct lx_pt_regs *p);
    void (*regs_from_pt)(const struct lx_pt_regs *p, uint64_t *regs);
    /* The current task is a per-CPU word (x86_64), not a register the capture has (arm64's
     * SP_EL0, riscv64's tp); then pt_regs_iret is where struct pt_regs holds the frame an
     * exception pushed (ip, cs, flags, sp, ss), to its end. */
    bool current_in_percpu;
    uint32_t pt_regs_iret;
};
size_t lx__arm64_pc_rel_addrs(const uint8_t *code, size_t len, uint64_t pc, uint64_t *out,
                              size_t max);
size_t lx__riscv64_pc_rel_addrs(const uint8_t *code, size_t len, uint64_t pc, uint64_t *out,
                                size_t max);
/* Module areas that follow the kernel image: the text bounds _stext and _etext from kallsyms. */
int lx__image_text(const lx_kernel *k, uint64_t *text, uint64_t *etext);
#define LX_SZ_2G UINT64_C(0x80000000)
extern const struct lx_arch lx_arch_x86_64, lx_arch_arm64, lx_arch_riscv64;
/* The table whose fits() accepts vi, NULL when none. */
const struct lx_arch *lx__arch_of(const struct lx_vmcoreinfo *vi);

/* The frame-pointer chain of an architecture's kernel and how its struct pt_regs holds the
 * registers of the mode an exception came from (lx_fp.c walks it). Register numbers are the
 * DWARF ones, the indices of an LX_GREGS array. */
struct lx_fp_arch {
    int pc_reg, sp_reg, fp_reg, lr_reg;
    int saved_fp, saved_ra; /* the caller's fp at fp + saved_fp, the return address at + saved_ra */
    /* Decodes the first bytes of struct pt_regs (len of them) into regs; true when they are the
     * registers of user mode (an entry from user space). */
    bool (*user_regs)(const uint8_t *pt_regs, size_t len, uint64_t regs[LX_GREGS]);
    size_t pt_regs_min; /* the bytes user_regs reads */
    /* An exception taken in the kernel leaves pt_regs next to a frame record: inside them
     * (arm64: pt_regs.stackframe, a record of the interrupted code whose return address is the
     * interrupted pc; record_is_interrupted) or right above the first handler's record (riscv64:
     * the handler's frame pointer is their address, its return address the entry code's, and
     * the interrupted pc comes after it). regs_at: where pt_regs start from the record's frame
     * pointer; regs_pc_off: their saved pc; general register n lies at 8 * n in them (arm64 from
     * x0, riscv64 from x1). A record is taken for one only when the pt_regs agree (saved fp). */
    int regs_at, regs_pc_off;
    bool record_is_interrupted;
    uint32_t pt_regs_align; /* the top pt_regs lie at the stack's top less their size rounded up */
    /* The kallsyms bounds of the exception entry code (arm64: .entry.text; riscv64:
     * .irqentry.text, where handle_exception lies): a pc there runs before the handler set up
     * its frame (or after it left it), so the frame pointer is not yet (or no longer) the
     * kernel's chain, and the stack ends at that leaf, marked. */
    const char *entry_start, *entry_end;
    /* The exception vectors (arm64: `vectors`, 16 slots of 0x80 bytes; riscv64:
     * handle_exception, one): at a slot's first instruction nothing is saved yet, and the
     * exception pc register (struct lx_fp_task) says what was interrupted. */
    const char *vectors;
    uint32_t vector_slots, vector_stride;
};

/* Reads len bytes at guest-physical pa (within one 4 KiB page: page-table entries, stack words)
 * through the handle's page cache (lx_phys_cache.c). */
int lx__cached_read(lx_kernel *k, uint64_t pa, void *buf, size_t len);

/* One ORC entry, normalised: the 4.14 register numbers and types (lx_orc.c's enums). */
struct lx_orc {
    int16_t sp_offset, bp_offset;
    uint8_t sp_reg, bp_reg, type;
    bool end;    /* the end of the stack (a kernel thread's or the boot stack's start) */
    bool signal; /* the ip this entry unwinds to is an interrupted instruction, not a return */
};

/* Where the ORC entry of an ip outside vmlinux comes from (a module's table): the raw 6-byte
 * entry, or NULL. ctx is borrowed. */
typedef const uint8_t *(*lx_orc_lookup_fn)(const void *ctx, uint64_t ip);

struct lx_kernel {
    struct lx_vmcoreinfo vi;
    const struct lx_arch *arch;
    const struct lx_phys *phys;
    uint64_t pgd_paddr;
    int levels;
    int va_bits; /* arm64: the TTBR1 half's size */
    struct lx_tlb_entry tlb[LX_TLB_SIZE];
    /* Small reads (page-table entries, stack words) are served from whole pages read once per
     * stop: one round trip per page instead of one per word with a backend that has them. */
    uint64_t cached_pa[LX_PAGE_CACHE]; /* page addresses + 1; 0 = empty */
    uint8_t *cached[LX_PAGE_CACHE];
    unsigned next_victim;
    /* kallsyms */
    bool have_syms;
    struct lx_symbol *syms;
    size_t n_syms;
    GStringChunk *names;
    GHashTable *by_name; /* name -> struct lx_symbol * (the first of that name) */
    /* ORC */
    uint64_t *orc_ip; /* absolute addresses, ascending */
    struct lx_orc *orc;
    size_t n_orc;
    uint64_t text_start, text_end; /* _text.._etext */
    uint64_t init_start, init_end; /* _sinittext.._einittext */
    enum lx_orc_layout orc_layout;
    /* ORC of text outside vmlinux (lx_kernel_use_modules sets the modules' lookup) */
    lx_orc_lookup_fn more_orc;
    const void *more_orc_ctx;
    /* Modules' text symbols by address (lx_kernel_use_modules; borrowed, NULL for none): where
     * a module function starts, for the frame-pointer walk's leaf rule */
    const struct lx_symbol *mod_syms;
    size_t n_mod_syms;
};

/* Translates kva through the kernel page table: 0 with *paddr and the bytes physically
 * contiguous from there (to the end of its page), or -EFAULT. */
int lx__translate(lx_kernel *k, uint64_t kva, uint64_t *paddr, uint64_t *contiguous);

/* Where the kallsyms tables lie in a kernel image (offsets from its first byte). */
struct lx_kallsyms_at {
    size_t token_index, token_table, names, num_syms, relative_base, offsets;
};
/* Finds the 5.x kallsyms tables in img (len bytes of kernel image) by their shape
 * (lx_kallsyms_scan.c): 0 and *out, or -ENOENT. big_lengths: two-byte name lengths (6.1+). */
int lx__kallsyms_scan(const uint8_t *img, size_t len, bool big_lengths, struct lx_kallsyms_at *out);
/* The same over k's image from _stext; fills k->vi's kallsyms_* addresses. -ENOTSUP with a
 * message when nothing fits. */
int lx__kallsyms_find(lx_kernel *k, bool big_lengths, struct qp_error *err);

/* ORC helpers of lx_orc.c that lx_module.c uses for modules' tables (never the other way:
 * lx_orc.c reaches modules only through k->more_orc). */
/* The index of the rightmost ip of a sorted table that is <= ip (on equal ips the last), or
 * SIZE_MAX when none. */
size_t lx__orc_search(const uint64_t *ips, size_t n, uint64_t ip);
/* Decodes one 6-byte entry of the given layout into the normalised form. */
struct lx_orc lx__orc_decode(const uint8_t *e, enum lx_orc_layout layout);
/* The layout of a table of n raw 6-byte entries, told from their contents: LX_ORC_UNKNOWN when
 * they fit none. */
enum lx_orc_layout lx__orc_layout_of(const uint8_t *raw, size_t n);

#endif
