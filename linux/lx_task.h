/* Tasks, BTF offsets and VMAs of a Linux guest (lx_btf.c, lx_task.c). Internal to linux/. */
#ifndef LX_TASK_H
#define LX_TASK_H

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
/* Parses a BTF blob (the bytes __start_BTF..__stop_BTF) with libbpf; data is copied. */
int lx_btf_new(const void *data, size_t len, lx_btf **out, struct qp_error *err);
void lx_btf_free(lx_btf *b);

/* Offsets resolved from BTF (recursing into anonymous struct/union members). */
struct lx_offsets {
    uint32_t task_size, task_pid, task_tgid, task_comm, task_mm, task_stack, task_flags;
    uint32_t mm_pgd, mm_mt; /* mm_struct (members live in an anonymous struct in 6.1) */
    uint32_t mt_root;       /* maple_tree.ma_root */
    uint32_t vma_start, vma_end, vma_pgoff, vma_file, vma_flags;
    uint32_t file_path, path_dentry, dentry_name, dentry_parent, qstr_name, qstr_len;
    uint64_t percpu_current_task; /* offset of current_task (or pcpu_hot.current_task) in
                                     .data..percpu */
    uint64_t percpu_cpu_number, percpu_this_cpu_off;
    bool has_pcpu_hot;
};
int lx_btf_offsets(const lx_btf *b, struct lx_offsets *out, struct qp_error *err);

struct lx_task_info {
    uint64_t task; /* task_struct address */
    int32_t pid, tgid;
    char comm[16];  /* NUL-terminated */
    uint64_t mm;    /* 0 for kernel threads */
    uint64_t stack; /* task->stack (THREAD_SIZE 16 KiB below the top) */
    bool kthread;   /* PF_KTHREAD */
};
/* The per-CPU base is the vCPU's GS base while in kernel mode (or __per_cpu_offset[cpu]);
 * checks *(base + this_cpu_off) == base before trusting it. */
int lx_current_task(const struct lx_offsets *o, const struct lx_reader *r, uint64_t percpu_base,
                    uint64_t *task, struct qp_error *err);
int lx_task_read(const struct lx_offsets *o, const struct lx_reader *r, uint64_t task,
                 struct lx_task_info *out, struct qp_error *err);

struct lx_vma {
    uint64_t start, end, pgoff, flags, file;
    char name[64]; /* the file's basename (dentry name), "" when anonymous */
};
/* The VMA of mm containing addr, by a maple tree walk: 0, -ENOENT when none, other -errno. */
int lx_vma_find(const struct lx_offsets *o, const struct lx_reader *r, uint64_t mm, uint64_t addr,
                struct lx_vma *out, struct qp_error *err);

#endif
