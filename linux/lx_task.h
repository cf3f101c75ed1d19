/* lx_task: what a stock Linux kernel's own memory says about tasks and address spaces, read from
 * outside through a reader, with struct offsets taken from the kernel's BTF.
 *
 * Internal header of the linux/ module (lx_btf.c, lx_task.c). Everything here reads guest
 * memory the guest may be rewriting, or that is plain garbage: every function bounds its loops
 * and validates each pointer before following it, and answers an error (never a hang) when the
 * data does not hold together.
 *
 * Ownership: an lx_btf owns a copy of the blob it was made from; lx_offsets is a plain value.
 * The reader's ctx is borrowed for the call only.
 */
#ifndef LX_TASK_H
#define LX_TASK_H

#include "linux.h"    /* lx_kernel */
#include "qp_error.h" /* struct qp_error, as used everywhere in the repo */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads len bytes at kernel virtual address kva; 0 when all len bytes were read, else -errno. */
struct lx_reader {
    int (*read)(void *ctx, uint64_t kva, void *buf, size_t len);
    void *ctx;
};

typedef struct lx_btf lx_btf;
/* Parses a BTF blob (the bytes __start_BTF..__stop_BTF) with libbpf; data is copied.
 * Returns 0 and *out (free with lx_btf_free), or -EINVAL when the blob is not BTF. */
int lx_btf_new(const void *data, size_t len, lx_btf **out, struct qp_error *err);
void lx_btf_free(lx_btf *b); /* NULL is a no-op */

/* Offsets resolved from BTF (recursing into anonymous struct/union members). */
struct lx_offsets {
    uint32_t task_size, task_pid, task_tgid, task_comm, task_mm, task_stack, task_flags;
    uint32_t mm_pgd, mm_mt; /* mm_struct (members live in an anonymous struct in 6.1) */
    uint32_t mt_root;       /* maple_tree.ma_root */
    /* Before 6.1 VMAs hang in a red-black tree (mm_struct.mm_rb, an rb_root whose node is
     * vm_area_struct.vm_rb) and in a list by address (mm_struct.mmap, vm_area_struct.vm_next);
     * has_rb tells which layout the mm_mt and mt_* or these members describe. */
    bool has_rb;
    uint32_t mm_rb, mm_mmap, vma_rb, vma_next, rb_left, rb_right;
    uint32_t vma_start, vma_end, vma_pgoff, vma_file, vma_flags;
    uint32_t file_path, path_dentry, dentry_name, dentry_parent, qstr_name, qstr_len;
    uint64_t percpu_current_task; /* offset of current_task (or pcpu_hot.current_task) in
                                     .data..percpu */
    uint64_t percpu_cpu_number, percpu_this_cpu_off;
    /* Where .data..percpu is linked (the kallsyms symbol __per_cpu_start): 0 while x86_64's
     * per-CPU variables were zero-based (up to 6.14); a kernel address since 6.15, where a
     * CPU's copy of a variable lies at its link address plus the CPU's per-CPU offset. Not in
     * BTF: the caller sets it (0 by default). */
    uint64_t percpu_start;
    bool has_pcpu_hot;
    /* BTF names no per-CPU variables (older pahole, e.g. Debian's 5.10): lx_offsets_from_kernel
     * takes them from kallsyms. */
    bool percpu_unknown;
    /* Added by linuxt (not in the first contract): the maple node layouts, from BTF.
     * mt_r64_*: struct maple_range_64 (leaf_64 and range_64 nodes), mt_a64_*: struct
     * maple_arange_64; *_pivots is the length of the pivot array (slots = pivots + 1);
     * *_meta the offset of the maple_metadata whose first byte is the last used offset. */
    uint32_t mt_r64_pivot, mt_r64_slot, mt_r64_meta, mt_r64_pivots;
    uint32_t mt_a64_pivot, mt_a64_slot, mt_a64_meta, mt_a64_pivots;
    /* Added by linuxu: mm_struct.map_count (an int, the number of VMAs), which changes when a
     * VMA comes or goes: a per-mm VMA cache's generation. 0 when BTF does not have it. */
    uint32_t mm_map_count;
    /* Added by lxuser: the page cache (file->f_mapping->i_pages, an xarray of struct page or
     * folio pointers), for the pages of a mapped file a process never touched. has_page_cache
     * is false when BTF lacks one of these (optional: nothing else needs them). vmemmap_base
     * (the kallsyms variable of that name under CONFIG_RANDOMIZE_MEMORY, else x86_64's fixed
     * 0xffffea0000000000) is set by lx_offsets_from_kernel's caller. */
    bool has_page_cache;
    uint32_t file_mapping, mapping_i_pages, xa_head, xa_node_shift, xa_node_slots;
    uint32_t page_struct_size;
    uint64_t vmemmap_base;
    /* The run queue's task (the per-CPU `runqueues`, struct rq's `curr`): during a context
     * switch, from the stack pointer's move to the incoming task's stack until current_task is
     * written in __switch_to, the stack is the incoming task's while current_task still names
     * the outgoing one; rq->curr already names the incoming one. has_rq_curr is false when
     * neither BTF nor kallsyms has them (optional). */
    bool has_rq_curr;
    uint32_t rq_curr;
    uint64_t percpu_runqueues;
    /* Added by lxarch: sizeof(struct pt_regs) (BTF; 168, x86_64's, when BTF lacks it), at the
     * top of a task's stack. current_by_rq: the kernel keeps no per-CPU current_task (arm64
     * holds current in sp_el0): the run queue's curr names the current task, and cpu_number
     * checks the per-CPU base. */
    uint32_t pt_regs_size;
    bool current_by_rq;
    /* task_struct.tasks, the list of every process's leader (0 when BTF lacks it). */
    uint32_t task_tasks;
};
/* Fills *out from b. Fails with -ENOENT and a message naming the missing type, member or
 * per-CPU variable, or -EINVAL when a layout is not one this code can read. */
int lx_btf_offsets(const lx_btf *b, struct lx_offsets *out, struct qp_error *err);

/* The offsets of the Debian 12 6.1.0-56-amd64 build (as its BTF says): for tests and as a
 * reference, never as a fallback for another kernel. */
void lx_offsets_debian12_6_1(struct lx_offsets *out);

struct lx_task_info {
    uint64_t task; /* task_struct address */
    int32_t pid, tgid;
    char comm[16];  /* NUL-terminated */
    uint64_t mm;    /* 0 for kernel threads */
    uint64_t stack; /* task->stack (THREAD_SIZE 16 KiB below the top) */
    bool kthread;   /* PF_KTHREAD */
};
/* Whether BTF's struct orc_entry has the 6.3+ `signal` bit (true) or the older `end` bit
 * (false): 0, or -ENOENT when BTF has no such struct (e.g. a kernel without ORC). */
int lx_btf_orc_signal_bit(const lx_btf *b, bool *signal_bit);

/* What BTF cannot give, from the kernel's kallsyms: percpu_start (__per_cpu_start; 0 when
 * absent) and, when o->percpu_unknown, the per-CPU variables current_task, cpu_number and
 * this_cpu_off (their kallsyms addresses less __per_cpu_start). -ENOENT with a message when one
 * is missing. */
int lx_offsets_from_kernel(const lx_kernel *k, struct lx_offsets *o, struct qp_error *err);

/* The per-CPU base is the vCPU's GS base while in kernel mode (or __per_cpu_offset[cpu]);
 * checks *(base + this_cpu_off) == base before trusting it. */
int lx_current_task(const struct lx_offsets *o, const struct lx_reader *r, uint64_t percpu_base,
                    uint64_t *task, struct qp_error *err);
/* rq->curr of the CPU whose per-CPU base is percpu_base (checked by lx_current_task first);
 * -ENOENT when o has no run queue offsets. */
int lx_rq_curr(const struct lx_offsets *o, const struct lx_reader *r, uint64_t percpu_base,
               uint64_t *task, struct qp_error *err);
/* The task after task in the kernel's list of processes (task_struct.tasks, circular through
 * init_task): 0 with *next, -ENOENT when o has no such member, -EINVAL for a pointer that is
 * not an aligned kernel address. */
int lx_task_next(const struct lx_offsets *o, const struct lx_reader *r, uint64_t task,
                 uint64_t *next, struct qp_error *err);

/* The span [lo, hi) of the task_struct fields lx_task_read reads (one read). */
void lx_task_span(const struct lx_offsets *o, uint32_t *lo, uint32_t *hi);
/* Reads pid, tgid, comm, mm, stack and flags of task (one read spanning those fields). */
int lx_task_read(const struct lx_offsets *o, const struct lx_reader *r, uint64_t task,
                 struct lx_task_info *out, struct qp_error *err);

struct lx_vma {
    uint64_t start, end, pgoff, flags, file;
    char name[64]; /* the file's basename (dentry name), "" when anonymous */
};
/* Added by sysroot: the full path of a mapped file, for matching it against a --sysroot.
 * Walks file->f_path.dentry up its d_parent chain to the root (a dentry that is its own parent),
 * at most LX_PATH_MAX_DEPTH names and size - 1 bytes: a longer chain or a name that does not
 * hold together is an error, never a truncated path. Within one mount only: a file on a
 * filesystem mounted below / comes out relative to its mount's root (the walk does not follow
 * vfsmount), which a sysroot of the same layout then cannot match. */
#define LX_PATH_MAX_DEPTH 64
int lx_file_path(const struct lx_offsets *o, const struct lx_reader *r, uint64_t file, char *out,
                 size_t size, struct qp_error *err);

/* For --sysroot: the GNU build-id of an ELF mapped at base (a mapping of file offset 0,
 * map_len bytes), read by symbols/' one reader of ELF images in guest memory
 * (sym_mem_build_id): ELF header, program headers, each PT_NOTE inside the mapping, the
 * NT_GNU_BUILD_ID note. r reads user addresses here (the mapping's address space). Every size
 * and offset is checked against map_len and small fixed bounds; anything else (not ELF, no
 * note, an unreadable page) is an error with *len untouched. At most LX_BUILD_ID_MAX bytes. */
#define LX_BUILD_ID_MAX 32
int lx_elf_build_id(const struct lx_reader *r, uint64_t base, uint64_t map_len,
                    uint8_t id[LX_BUILD_ID_MAX], size_t *len, struct qp_error *err);

/* Added by lxuser: the guest-physical address of page `index` (file offset index * 4096) of
 * file's page cache, by a walk of file->f_mapping->i_pages (an xarray: at most LX_XA_MAX_DEPTH
 * nodes, 64 slots each; sibling entries of a large folio lead to its first slot, the page then
 * being that many struct pages further), and vmemmap_base (pfn = (page - vmemmap_base) /
 * sizeof(struct page)). -ENOENT when the page is not cached (an empty slot, a shadow or other
 * value entry), -EINVAL when what was read does not hold together, other codes from r. */
#define LX_XA_MAX_DEPTH 12
int lx_file_page(const struct lx_offsets *o, const struct lx_reader *r, uint64_t file,
                 uint64_t index, uint64_t *paddr, struct qp_error *err);

/* The VMA of mm containing addr, by a maple tree walk (6.1+) or a red-black tree search: 0, -ENOENT
 * when none, other -errno. A walk that meets a node the kernel is replacing answers -EAGAIN (retry
 * later). */
int lx_vma_find(const struct lx_offsets *o, const struct lx_reader *r, uint64_t mm, uint64_t addr,
                struct lx_vma *out, struct qp_error *err);

/* Added by linuxt: every VMA of mm in address order, for a per-mm cache (one walk instead of a
 * lookup per user frame). Calls fn for each; a non-zero return from fn stops the walk and is
 * returned. Garbage ends the walk with an error (VMAs out of order, more than LX_VMA_MAX VMAs or
 * LX_MT_MAX_NODES nodes, the lookup's checks); VMAs already given to fn stay valid then. */
#define LX_VMA_MAX      65536 /* above the kernel's default vm.max_map_count (65530) */
#define LX_MT_MAX_NODES 16384
typedef int (*lx_vma_fn)(void *ctx, const struct lx_vma *vma);
int lx_vma_for_each(const struct lx_offsets *o, const struct lx_reader *r, uint64_t mm,
                    lx_vma_fn fn, void *ctx, struct qp_error *err);

/* True for an address in the kernel half (bits 63..56 set: the 4- and 5-level kernel halves). */
static inline bool lx_is_kernel_addr(uint64_t addr)
{
    return (addr >> 56) == 0xff;
}

/* Added by modules: struct module and struct mod_kallsyms, for the loaded modules' symbols and
 * ORC tables (lx_module.h). Sizes are checked: the 4-byte fields must be 4 bytes, pointers 8. */
struct lx_module_offsets {
    uint32_t module_size;
    uint32_t state, list, name, name_len;          /* name: char[name_len] */
    uint32_t core_base, core_size, core_text_size; /* module.core_layout.{base,size,text_size} */
    bool has_orc;                                  /* false: a kernel without ORC */
    uint32_t num_orcs, orc_unwind_ip, orc_unwind;  /* module.arch.*, when has_orc */
    uint32_t kallsyms;                             /* module.kallsyms (struct mod_kallsyms *) */
    uint32_t ks_symtab, ks_num_symtab, ks_strtab, ks_typetab; /* struct mod_kallsyms */
    bool has_typetab;
    uint32_t state_unformed; /* MODULE_STATE_UNFORMED's value: a module not set up yet */
    /* module.init_layout.{base,size,text_size}: the init text, while the module runs its init
     * function (MODULE_STATE_COMING); has_init false when BTF lacks them. */
    bool has_init;
    uint32_t init_base, init_size, init_text_size, state_coming;
    /* Where module memory lies, [area_start, area_end): not from BTF but from the kernel's
     * architecture (lx_kernel_module_area); every pointer the reader follows must be inside. */
    uint64_t area_start, area_end;
};
/* Fills *out from b (all but the area). -ENOTSUP with a one-line reason when this kernel's struct
 * module has neither the 4.x to 6.3 layout (core_layout) nor 6.4's mem[], -ENOENT when a type or
 * member is missing; a kernel without ORC (no arch.num_orcs) gets has_orc false. */
int lx_btf_module_offsets(const lx_btf *b, struct lx_module_offsets *out, struct qp_error *err);
/* Whether every offset of o, plus the bytes the module reader reads there, lies inside struct
 * module (module_size, at most 64 KiB) or, for ks_*, inside the 256 bytes it reads of struct
 * mod_kallsyms: 0, or -EINVAL naming the first that does not. lx_btf_module_offsets and
 * lx_modules_read both check. */
int lx_module_offsets_check(const struct lx_module_offsets *o, struct qp_error *err);

#endif
