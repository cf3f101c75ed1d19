/* lx_task: the current task of a CPU, a task's identity, and the VMA that holds a user address,
 * all read from guest memory the guest owns. Nothing read is trusted: pointers must be kernel
 * addresses, loops have fixed bounds, and a structure that does not hold together is an error.
 *
 * The VMA lookup walks the mm's maple tree (Linux 6.1+). The facts it relies on, from the
 * kernel's documented maple tree format (include/linux/maple_tree.h, lib/maple_tree.c):
 *  - the tree's root (maple_tree.ma_root) is either an entry stored at index 0 only, or an
 *    encoded node pointer with bit 1 set (an "internal" xarray-style value above 4096);
 *  - an encoded node pointer is a 256-byte-aligned node address with the node type in bits 3-6
 *    (0 dense, 1 leaf_64, 2 range_64, 3 arange_64; the first two are leaves) and flags below;
 *  - a node's first word is its parent pointer; a node whose parent points at itself is dead
 *    (being replaced), and a reader must start again;
 *  - a range node holds n pivots and n+1 slots; slot i covers (pivot[i-1], pivot[i]], slot 0
 *    starts at the node's minimum and the last used slot ends at the node's maximum (the whole
 *    index space at the root). The last used slot is told by the pivots when the last pivot is
 *    set, else by the node's metadata byte `end` (always, for arange_64 nodes);
 *  - a dense node holds 31 slots, one index each, starting at the node's minimum. */
#include "lx_task.h"
#include "symbols.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define LX_PF_KTHREAD      0x00200000u
#define MT_NODE_SIZE       256
#define MT_NODE_MASK       0xffull
#define MT_TYPE_SHIFT      3
#define MT_TYPE_MASK       0xfu
#define MT_DENSE_SLOTS     31
#define MT_MAX_DEPTH       8
#define LX_TASK_SPAN_LIMIT 65536

enum mt_type { MT_DENSE = 0, MT_LEAF_64 = 1, MT_RANGE_64 = 2, MT_ARANGE_64 = 3 };

static int lx_read(const struct lx_reader *r, uint64_t kva, void *buf, size_t len, const char *what,
                   struct qp_error *err)
{
    int rc = r->read(r->ctx, kva, buf, len);
    if (rc == 0)
        return 0;
    if (rc > 0)
        rc = -EIO;
    return qp_error_set(err, rc, "reading %s (%zu bytes at 0x%" PRIx64 "): %s", what, len, kva,
                        qp_error_str(rc));
}

static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static int read_u64(const struct lx_reader *r, uint64_t kva, uint64_t *out, const char *what,
                    struct qp_error *err)
{
    uint8_t buf[8];
    int rc = lx_read(r, kva, buf, sizeof(buf), what, err);
    if (!rc)
        *out = load_u64(buf);
    return rc;
}

static int check_kernel_ptr(uint64_t p, const char *what, struct qp_error *err)
{
    if (!lx_is_kernel_addr(p) || (p & 7))
        return qp_error_set(err, -EINVAL, "%s 0x%" PRIx64 " is not an aligned kernel address", what,
                            p);
    return 0;
}

int lx_offsets_from_kernel(const lx_kernel *k, struct lx_offsets *o, struct qp_error *err)
{
    /* 6.15+ links per-CPU variables at kernel addresses (before: zero-based, 0). */
    if (lx_kernel_symbol_addr(k, "__per_cpu_start", &o->percpu_start))
        o->percpu_start = 0;
    uint64_t rq; /* rq_curr is never 0 once BTF named it: struct rq opens with its lock */
    if (!o->has_rq_curr && o->rq_curr && lx_kernel_symbol_addr(k, "runqueues", &rq) == 0 &&
        rq >= o->percpu_start) {
        o->percpu_runqueues = rq - o->percpu_start;
        o->has_rq_curr = true;
    }
    if (!o->percpu_unknown)
        return 0;
    uint64_t cur, cpu;
    if (o->has_rq_curr && lx_kernel_symbol_addr(k, "current_task", &cur) &&
        lx_kernel_symbol_addr(k, "this_cpu_off", &cur) &&
        lx_kernel_symbol_addr(k, "cpu_number", &cpu) == 0 && cpu >= o->percpu_start) {
        /* No per-CPU current_task at all (arm64): the run queue names it. */
        o->percpu_cpu_number = cpu - o->percpu_start;
        o->current_by_rq = true;
        o->percpu_unknown = false;
        return 0;
    }
    const char *names[] = {"current_task", "cpu_number", "this_cpu_off"};
    uint64_t *outs[] = {&o->percpu_current_task, &o->percpu_cpu_number, &o->percpu_this_cpu_off};
    for (int i = 0; i < 3; i++) {
        uint64_t addr;
        if (lx_kernel_symbol_addr(k, names[i], &addr) || addr < o->percpu_start)
            return qp_error_set(err, -ENOENT,
                                "neither BTF nor kallsyms names the per-CPU variable %s", names[i]);
        *outs[i] = addr - o->percpu_start;
    }
    o->percpu_unknown = false;
    return 0;
}

#define LX_MAX_CPUS 8192 /* arm64's NR_CPUS limit */

int lx_current_task(const struct lx_offsets *o, const struct lx_reader *r, uint64_t percpu_base,
                    uint64_t *task, struct qp_error *err)
{
    uint64_t self, current, area = percpu_base + o->percpu_start;
    int rc = check_kernel_ptr(area, "per-CPU area", err);
    if (!rc && o->current_by_rq) {
        uint32_t cpu;
        rc = lx_read(r, area + o->percpu_cpu_number, &cpu, sizeof cpu, "cpu_number", err);
        if (!rc && cpu >= LX_MAX_CPUS)
            rc = qp_error_set(err, -EINVAL,
                              "0x%" PRIx64 " is not a per-CPU base: its cpu_number reads %u",
                              percpu_base, cpu);
        return rc ? rc : lx_rq_curr(o, r, percpu_base, task, err);
    }
    if (!rc)
        rc = read_u64(r, area + o->percpu_this_cpu_off, &self, "this_cpu_off", err);
    if (rc)
        return rc;
    if (self != percpu_base)
        return qp_error_set(
            err, -EINVAL, "0x%" PRIx64 " is not a per-CPU base: its this_cpu_off reads 0x%" PRIx64,
            percpu_base, self);
    rc = read_u64(r, area + o->percpu_current_task, &current, "current_task", err);
    if (!rc)
        rc = check_kernel_ptr(current, "current_task", err);
    if (!rc)
        *task = current;
    return rc;
}

int lx_rq_curr(const struct lx_offsets *o, const struct lx_reader *r, uint64_t percpu_base,
               uint64_t *task, struct qp_error *err)
{
    if (!o->has_rq_curr)
        return qp_error_set(err, -ENOENT, "no run queue offsets (runqueues, rq.curr)");
    uint64_t curr, area = percpu_base + o->percpu_start;
    int rc = read_u64(r, area + o->percpu_runqueues + o->rq_curr, &curr, "rq->curr", err);
    if (!rc)
        rc = check_kernel_ptr(curr, "rq->curr", err);
    if (!rc)
        *task = curr;
    return rc;
}

void lx_task_span(const struct lx_offsets *o, uint32_t *lo, uint32_t *hi)
{
    const uint32_t start[] = {o->task_pid, o->task_tgid,  o->task_comm,
                              o->task_mm,  o->task_stack, o->task_flags};
    const uint32_t size[] = {4, 4, 16, 8, 8, 4};
    uint64_t low = UINT32_MAX, high = 0; /* 64 bits: an offset near 4 GiB must not wrap */
    for (size_t i = 0; i < sizeof(start) / sizeof(start[0]); i++) {
        if (start[i] < low)
            low = start[i];
        if ((uint64_t)start[i] + size[i] > high)
            high = (uint64_t)start[i] + size[i];
    }
    if (high > UINT32_MAX) { /* a span no caller reads: every field is inside the one read */
        low = 0;
        high = UINT32_MAX;
    }
    *lo = (uint32_t)low;
    *hi = (uint32_t)high;
}

/* Decodes the fields from buf, which holds the task's bytes from offset lo on. */
static int task_decode(const struct lx_offsets *o, uint64_t task, const uint8_t *buf, uint32_t lo,
                       struct lx_task_info *out, struct qp_error *err)
{
    struct lx_task_info t = {.task = task};
    t.pid = (int32_t)load_u32(buf + o->task_pid - lo);
    t.tgid = (int32_t)load_u32(buf + o->task_tgid - lo);
    memcpy(t.comm, buf + o->task_comm - lo, sizeof(t.comm));
    t.comm[sizeof(t.comm) - 1] = '\0';
    t.mm = load_u64(buf + o->task_mm - lo);
    t.stack = load_u64(buf + o->task_stack - lo);
    t.kthread = (load_u32(buf + o->task_flags - lo) & LX_PF_KTHREAD) != 0;
    if (t.pid < 0 || t.tgid < 0 || (t.mm && check_kernel_ptr(t.mm, "task->mm", NULL)))
        return qp_error_set(err, -EINVAL,
                            "task_struct at 0x%" PRIx64 " does not look like one (pid %d, tgid "
                            "%d, mm 0x%" PRIx64 ")",
                            task, t.pid, t.tgid, t.mm);
    *out = t;
    return 0;
}

int lx_task_next(const struct lx_offsets *o, const struct lx_reader *r, uint64_t task,
                 uint64_t *next, struct qp_error *err)
{
    uint64_t node;
    if (!o->task_tasks)
        return qp_error_set(err, -ENOENT, "BTF has no task_struct.tasks");
    int rc = check_kernel_ptr(task, "task_struct", err);
    if (!rc)
        rc = read_u64(r, task + o->task_tasks, &node, "task_struct.tasks", err);
    if (!rc)
        rc = check_kernel_ptr(node, "task_struct.tasks.next", err);
    if (!rc)
        *next = node - o->task_tasks;
    return rc;
}

int lx_task_read(const struct lx_offsets *o, const struct lx_reader *r, uint64_t task,
                 struct lx_task_info *out, struct qp_error *err)
{
    uint32_t lo, hi;
    int rc = check_kernel_ptr(task, "task_struct", err);
    if (rc)
        return rc;
    lx_task_span(o, &lo, &hi);
    if (hi - lo > LX_TASK_SPAN_LIMIT)
        return qp_error_set(err, -EINVAL, "task_struct fields span %u bytes", hi - lo);
    uint8_t *buf = malloc(hi - lo); /* one read: a round trip per field is slow over QMP */
    if (!buf)
        return qp_error_set(err, -ENOMEM, "out of memory");
    rc = lx_read(r, task + lo, buf, hi - lo, "task_struct", err);
    if (!rc)
        rc = task_decode(o, task, buf, lo, out, err);
    free(buf);
    return rc;
}

/* One maple node as read: its layout for its type, and where the walk stands in index space. */
struct mt_node {
    uint64_t addr; /* the node's address (encoded pointer with the low byte cleared) */
    enum mt_type type;
    uint64_t min, max; /* the indexes this node covers */
    uint8_t bytes[MT_NODE_SIZE];
    uint32_t pivot_at, slot_at, meta_at, pivots;
};

static uint64_t mt_pivot(const struct mt_node *n, unsigned i)
{
    return load_u64(n->bytes + n->pivot_at + 8 * i);
}

static uint64_t mt_slot(const struct mt_node *n, unsigned i)
{
    return load_u64(n->bytes + n->slot_at + 8 * i);
}

/* Decodes an encoded node pointer, reads the node and checks it is alive. */
static int mt_node_read(const struct lx_offsets *o, const struct lx_reader *r, uint64_t enode,
                        struct mt_node *n, struct qp_error *err)
{
    n->addr = enode & ~MT_NODE_MASK;
    n->type = (enum mt_type)((enode >> MT_TYPE_SHIFT) & MT_TYPE_MASK);
    if (n->type > MT_ARANGE_64 || (enode & 0x80) || !lx_is_kernel_addr(n->addr))
        return qp_error_set(err, -EINVAL, "maple tree: 0x%" PRIx64 " is not a node pointer", enode);
    bool arange = n->type == MT_ARANGE_64;
    n->pivot_at = arange ? o->mt_a64_pivot : o->mt_r64_pivot;
    n->slot_at = arange ? o->mt_a64_slot : o->mt_r64_slot;
    n->meta_at = arange ? o->mt_a64_meta : o->mt_r64_meta;
    n->pivots = arange ? o->mt_a64_pivots : o->mt_r64_pivots;
    if (n->type == MT_DENSE) {
        n->slot_at = 8;
        n->pivots = 0;
    } else if (n->pivots == 0 || n->pivot_at + 8 * n->pivots > MT_NODE_SIZE ||
               n->slot_at + 8 * (n->pivots + 1) > MT_NODE_SIZE || n->meta_at >= MT_NODE_SIZE) {
        return qp_error_set(err, -EINVAL,
                            "maple tree: node layout unknown (offsets not from "
                            "lx_btf_offsets?)");
    }
    int rc = lx_read(r, n->addr, n->bytes, sizeof(n->bytes), "maple node", err);
    if (rc)
        return rc;
    if ((load_u64(n->bytes) & ~MT_NODE_MASK) == n->addr)
        return qp_error_set(err, -EAGAIN,
                            "maple tree: node 0x%" PRIx64 " is dead (being "
                            "replaced); retry",
                            n->addr);
    return 0;
}

/* The last used slot of a range node (see the header comment for the rule). */
static int mt_data_end(const struct mt_node *n, unsigned *end, struct qp_error *err)
{
    uint64_t last = mt_pivot(n, n->pivots - 1);
    if (n->type != MT_ARANGE_64 && last != 0)
        *end = last == n->max ? n->pivots - 1 : n->pivots;
    else
        *end = n->bytes[n->meta_at];
    if (*end > n->pivots)
        return qp_error_set(err, -EINVAL, "maple tree: node 0x%" PRIx64 " claims %u slots of %u",
                            n->addr, *end + 1, n->pivots + 1);
    return 0;
}

/* Picks the slot of a range node that covers index; narrows [min, max] to that slot's range.
 * Pivots must rise strictly within the node's range, else the node is garbage. */
static int mt_range_slot(struct mt_node *n, uint64_t index, unsigned *slot, uint64_t *slot_min,
                         uint64_t *slot_max, struct qp_error *err)
{
    unsigned end;
    int rc = mt_data_end(n, &end, err);
    if (rc)
        return rc;
    uint64_t lo = n->min;
    for (unsigned i = 0; i < end; i++) {
        uint64_t pivot = mt_pivot(n, i);
        if (pivot < lo || pivot > n->max)
            return qp_error_set(err, -EINVAL,
                                "maple tree: node 0x%" PRIx64 " pivot %u (0x%" PRIx64
                                ") lies outside 0x%" PRIx64 "..0x%" PRIx64,
                                n->addr, i, pivot, lo, n->max);
        if (index <= pivot) {
            *slot = i, *slot_min = lo, *slot_max = pivot;
            return 0;
        }
        lo = pivot + 1; /* no overflow: pivot < index here */
    }
    *slot = end, *slot_min = lo, *slot_max = n->max;
    return 0;
}

/* The entry the tree stores at index (0 when none), by descending from the root. */
static int mt_load(const struct lx_offsets *o, const struct lx_reader *r, uint64_t root,
                   uint64_t index, uint64_t *entry, struct qp_error *err)
{
    bool root_is_node = (root & 3) == 2 && root > 4096;
    if (!root_is_node) { /* an empty tree, or one entry stored at index 0 */
        *entry = index == 0 ? root : 0;
        return 0;
    }
    struct mt_node n = {.min = 0, .max = UINT64_MAX};
    uint64_t enode = root;
    for (int depth = 0; depth < MT_MAX_DEPTH; depth++) {
        int rc = mt_node_read(o, r, enode, &n, err);
        if (rc)
            return rc;
        if (n.type == MT_DENSE) {
            uint64_t i = index - n.min;
            *entry = i < MT_DENSE_SLOTS ? mt_slot(&n, (unsigned)i) : 0;
            return 0;
        }
        unsigned slot = 0;
        uint64_t lo = 0, hi = 0;
        rc = mt_range_slot(&n, index, &slot, &lo, &hi, err);
        if (rc)
            return rc;
        uint64_t next = mt_slot(&n, slot);
        if (n.type == MT_LEAF_64) {
            *entry = next;
            return 0;
        }
        if (next == 0 || (next & 3) != 0)
            return qp_error_set(err, -EINVAL,
                                "maple tree: node 0x%" PRIx64 " slot %u holds 0x%" PRIx64
                                ", not a child node",
                                n.addr, slot, next);
        enode = next;
        n.min = lo;
        n.max = hi;
    }
    return qp_error_set(err, -ELOOP, "maple tree: deeper than %d levels (a cycle or garbage)",
                        MT_MAX_DEPTH);
}

/* A dentry's own name (d_name), NUL-terminated; cut to size - 1 bytes (*cut says so). The root
 * dentry's name is "/". */
static int dentry_name(const struct lx_offsets *o, const struct lx_reader *r, uint64_t dentry,
                       char *name, size_t size, bool *cut, struct qp_error *err)
{
    uint64_t str;
    uint8_t qstr[4];
    int rc = read_u64(r, dentry + o->dentry_name + o->qstr_name, &str, "d_name.name", err);
    if (!rc)
        rc = lx_read(r, dentry + o->dentry_name + o->qstr_len, qstr, 4, "d_name.len", err);
    if (rc)
        return rc;
    uint32_t len = load_u32(qstr);
    if (!lx_is_kernel_addr(str) || len == 0 || len > 255)
        return qp_error_set(err, -EINVAL,
                            "dentry 0x%" PRIx64 " has no name (len %u at 0x%" PRIx64 ")", dentry,
                            len, str);
    *cut = len > size - 1;
    if (*cut)
        len = (uint32_t)(size - 1);
    rc = lx_read(r, str, name, len, "file name", err);
    name[rc ? 0 : len] = '\0';
    return rc;
}

static int file_dentry(const struct lx_offsets *o, const struct lx_reader *r, uint64_t file,
                       uint64_t *dentry, struct qp_error *err)
{
    int rc = read_u64(r, file + o->file_path + o->path_dentry, dentry, "file->f_path.dentry", err);
    return rc ? rc : check_kernel_ptr(*dentry, "dentry", err);
}

/* The basename of the file behind a VMA: file->f_path.dentry->d_name. */
static int vma_file_name(const struct lx_offsets *o, const struct lx_reader *r, uint64_t file,
                         char *name, size_t size, struct qp_error *err)
{
    uint64_t dentry;
    bool cut;
    int rc = file_dentry(o, r, file, &dentry, err);
    return rc ? rc : dentry_name(o, r, dentry, name, size, &cut, err);
}

/* Names from the file up to the root, innermost first, into names[*depth]. */
static int dentry_chain(const struct lx_offsets *o, const struct lx_reader *r, uint64_t dentry,
                        char names[][256], int *depth, struct qp_error *err)
{
    *depth = 0;
    for (int i = 0; i <= LX_PATH_MAX_DEPTH; i++) {
        uint64_t parent;
        int rc = read_u64(r, dentry + o->dentry_parent, &parent, "dentry->d_parent", err);
        if (!rc)
            rc = check_kernel_ptr(parent, "d_parent", err);
        if (rc)
            return rc;
        if (parent == dentry)
            return 0; /* the root of the mount */
        if (i == LX_PATH_MAX_DEPTH)
            break;
        bool cut;
        rc = dentry_name(o, r, dentry, names[i], 256, &cut, err);
        if (rc)
            return rc;
        if (strchr(names[i], '/'))
            return qp_error_set(err, -EINVAL, "dentry 0x%" PRIx64 ": a name with a '/'", dentry);
        (*depth)++;
        dentry = parent;
    }
    return qp_error_set(err, -ELOOP, "file path deeper than %d names (a cycle or garbage)",
                        LX_PATH_MAX_DEPTH);
}

int lx_file_path(const struct lx_offsets *o, const struct lx_reader *r, uint64_t file, char *out,
                 size_t size, struct qp_error *err)
{
    uint64_t dentry;
    int depth = 0;
    char(*names)[256] = malloc(sizeof(char[256]) * LX_PATH_MAX_DEPTH);
    if (!names)
        return qp_error_set(err, -ENOMEM, "no memory for a file path");
    int rc = check_kernel_ptr(file, "file", err);
    if (!rc)
        rc = file_dentry(o, r, file, &dentry, err);
    if (!rc)
        rc = dentry_chain(o, r, dentry, names, &depth, err);
    size_t used = 0;
    for (int i = depth - 1; i >= 0 && !rc; i--) {
        size_t n = strlen(names[i]);
        if (used + 1 + n + 1 > size)
            rc = qp_error_set(err, -ENAMETOOLONG, "file path longer than %zu bytes", size - 1);
        else {
            out[used++] = '/';
            memcpy(out + used, names[i], n);
            used += n;
        }
    }
    if (!rc && depth == 0)
        rc = qp_error_set(err, -EINVAL, "file 0x%" PRIx64 " is a mount's root, not a file", file);
    if (!rc)
        out[used] = '\0';
    free(names);
    return rc;
}

/* Reads the VMA's fields (one read over their span) and checks it holds addr. */
static int vma_read(const struct lx_offsets *o, const struct lx_reader *r, uint64_t vma,
                    uint64_t addr, struct lx_vma *out, struct qp_error *err)
{
    const uint32_t at[5] = {o->vma_start, o->vma_end, o->vma_pgoff, o->vma_flags, o->vma_file};
    uint64_t lo = UINT32_MAX, hi = 0; /* 64 bits: an offset near 4 GiB must not wrap */
    for (int i = 0; i < 5; i++) {
        lo = at[i] < lo ? at[i] : lo;
        hi = (uint64_t)at[i] + 8 > hi ? (uint64_t)at[i] + 8 : hi;
    }
    uint8_t buf[512];
    if (hi - lo > sizeof(buf))
        return qp_error_set(err, -EINVAL, "vm_area_struct fields span %llu bytes",
                            (unsigned long long)(hi - lo));
    int rc = lx_read(r, vma + lo, buf, hi - lo, "vm_area_struct", err);
    if (rc)
        return rc;
    uint64_t v[5];
    for (int i = 0; i < 5; i++)
        v[i] = load_u64(buf + at[i] - lo);
    struct lx_vma res = {.start = v[0], .end = v[1], .pgoff = v[2], .flags = v[3], .file = v[4]};
    if (!(res.start <= addr && addr < res.end))
        return qp_error_set(err, -EINVAL,
                            "maple tree gave VMA 0x%" PRIx64 " [0x%" PRIx64 ", 0x%" PRIx64
                            ") for 0x%" PRIx64 ", which it does not hold",
                            vma, res.start, res.end, addr);
    if (res.file) {
        int rc = check_kernel_ptr(res.file, "vm_file", err);
        if (!rc)
            rc = vma_file_name(o, r, res.file, res.name, sizeof(res.name), err);
        if (rc)
            return rc;
    }
    *out = res;
    return 0;
}

/* ---- before 6.1: the red-black tree and the list ---- */

#define RB_MAX_DEPTH 128 /* a red-black tree of LX_VMA_MAX nodes is at most 2 log2(n) deep */

/* vm_start and vm_end of the VMA at vma. */
static int vma_range(const struct lx_offsets *o, const struct lx_reader *r, uint64_t vma,
                     uint64_t *start, uint64_t *end, struct qp_error *err)
{
    int rc = check_kernel_ptr(vma, "vm_area_struct", err);
    if (!rc)
        rc = read_u64(r, vma + o->vma_start, start, "vm_start", err);
    if (!rc)
        rc = read_u64(r, vma + o->vma_end, end, "vm_end", err);
    if (!rc && *end <= *start)
        rc = qp_error_set(err, -EINVAL, "VMA 0x%" PRIx64 " ends (0x%" PRIx64 ") before it starts",
                          vma, *end);
    return rc;
}

/* The kernel's find_vma: down mm->mm_rb by vm_start/vm_end. */
static int rb_vma_find(const struct lx_offsets *o, const struct lx_reader *r, uint64_t mm,
                       uint64_t addr, struct lx_vma *out, struct qp_error *err)
{
    uint64_t node;
    int rc = read_u64(r, mm + o->mm_rb, &node, "mm->mm_rb", err);
    for (int depth = 0; !rc && node; depth++) {
        uint64_t vma = node - o->vma_rb, start, end;
        if (depth >= RB_MAX_DEPTH)
            return qp_error_set(err, -ELOOP, "VMA tree deeper than %d (a cycle or garbage)",
                                RB_MAX_DEPTH);
        rc = vma_range(o, r, vma, &start, &end, err);
        if (!rc && start <= addr && addr < end)
            return vma_read(o, r, vma, addr, out, err);
        if (!rc)
            rc = read_u64(r, node + (addr < start ? o->rb_left : o->rb_right), &node,
                          "rb_node child", err);
    }
    return rc ? rc : qp_error_set(err, -ENOENT, "no VMA holds 0x%" PRIx64, addr);
}

/* mm->mmap, then vm_next: every VMA by address. */
static int list_vma_for_each(const struct lx_offsets *o, const struct lx_reader *r, uint64_t mm,
                             lx_vma_fn fn, void *ctx, struct qp_error *err)
{
    uint64_t vma, prev_end = 0;
    int rc = read_u64(r, mm + o->mm_mmap, &vma, "mm->mmap", err);
    for (unsigned n = 0; !rc && vma; n++) {
        uint64_t start, end;
        struct lx_vma v;
        if (n >= LX_VMA_MAX)
            return qp_error_set(err, -E2BIG, "VMA list: more than %d VMAs", LX_VMA_MAX);
        rc = vma_range(o, r, vma, &start, &end, err);
        if (!rc && start < prev_end)
            rc = qp_error_set(err, -EINVAL,
                              "VMA list: [0x%" PRIx64 ", 0x%" PRIx64
                              ") overlaps the one before (ending 0x%" PRIx64 ")",
                              start, end, prev_end);
        if (!rc)
            rc = vma_read(o, r, vma, start, &v, err);
        if (!rc)
            rc = fn(ctx, &v);
        prev_end = end;
        if (!rc)
            rc = read_u64(r, vma + o->vma_next, &vma, "vm_next", err);
    }
    return rc;
}

int lx_vma_find(const struct lx_offsets *o, const struct lx_reader *r, uint64_t mm, uint64_t addr,
                struct lx_vma *out, struct qp_error *err)
{
    uint64_t root, entry;
    if (o->has_rb) {
        int rc = check_kernel_ptr(mm, "mm_struct", err);
        return rc ? rc : rb_vma_find(o, r, mm, addr, out, err);
    }
    int rc = check_kernel_ptr(mm, "mm_struct", err);
    if (!rc)
        rc = read_u64(r, mm + o->mm_mt + o->mt_root, &root, "mm->mm_mt.ma_root", err);
    if (!rc)
        rc = mt_load(o, r, root, addr, &entry, err);
    if (rc)
        return rc;
    /* Nothing, or an internal value (the kernel's placeholders, e.g. during fork): no VMA. */
    if (entry == 0 || (entry & 3) == 2)
        return qp_error_set(err, -ENOENT, "no VMA holds 0x%" PRIx64, addr);
    rc = check_kernel_ptr(entry, "maple tree entry", err);
    if (!rc)
        rc = vma_read(o, r, entry, addr, out, err);
    return rc;
}

/* ---- walking every VMA ---- */

struct mt_walk {
    const struct lx_offsets *o;
    const struct lx_reader *r;
    lx_vma_fn fn;
    void *ctx;
    unsigned nodes, vmas;
    uint64_t prev_end;
};

/* One leaf entry covering [lo, ...]: a VMA that must hold lo and follow the previous one. */
static int mt_walk_entry(struct mt_walk *w, uint64_t entry, uint64_t lo, struct qp_error *err)
{
    if (entry == 0 || (entry & 3) == 2)
        return 0; /* a gap, or one of the kernel's internal placeholders */
    if (++w->vmas > LX_VMA_MAX)
        return qp_error_set(err, -E2BIG, "maple tree: more than %d VMAs", LX_VMA_MAX);
    struct lx_vma v;
    int rc = check_kernel_ptr(entry, "maple tree entry", err);
    if (!rc)
        rc = vma_read(w->o, w->r, entry, lo, &v, err);
    if (rc)
        return rc;
    if (v.start < w->prev_end)
        return qp_error_set(err, -EINVAL,
                            "maple tree: VMA [0x%" PRIx64 ", 0x%" PRIx64
                            ") overlaps the one before (ending 0x%" PRIx64 ")",
                            v.start, v.end, w->prev_end);
    w->prev_end = v.end;
    return w->fn(w->ctx, &v);
}

static int mt_walk_node(struct mt_walk *w, uint64_t enode, uint64_t min, uint64_t max, int depth,
                        struct qp_error *err);

/* Slot i of n covering [lo, hi]: an entry of a leaf, or a child node to descend into. */
static int mt_walk_slot(struct mt_walk *w, const struct mt_node *n, unsigned i, uint64_t lo,
                        uint64_t hi, int depth, struct qp_error *err)
{
    uint64_t slot = mt_slot(n, i);
    if (n->type == MT_LEAF_64)
        return mt_walk_entry(w, slot, lo, err);
    if (slot == 0 || (slot & 3) != 0)
        return qp_error_set(err, -EINVAL,
                            "maple tree: node 0x%" PRIx64 " slot %u holds 0x%" PRIx64
                            ", not a child node",
                            n->addr, i, slot);
    return mt_walk_node(w, slot, lo, hi, depth + 1, err);
}

static int mt_walk_node(struct mt_walk *w, uint64_t enode, uint64_t min, uint64_t max, int depth,
                        struct qp_error *err)
{
    if (depth >= MT_MAX_DEPTH)
        return qp_error_set(err, -ELOOP, "maple tree: deeper than %d levels (a cycle or garbage)",
                            MT_MAX_DEPTH);
    if (++w->nodes > LX_MT_MAX_NODES)
        return qp_error_set(err, -E2BIG, "maple tree: more than %d nodes", LX_MT_MAX_NODES);
    struct mt_node n = {.min = min, .max = max};
    unsigned end;
    int rc = mt_node_read(w->o, w->r, enode, &n, err);
    if (rc)
        return rc;
    if (n.type == MT_DENSE) {
        for (unsigned i = 0; i < MT_DENSE_SLOTS && !rc && i <= max - min; i++)
            rc = mt_walk_entry(w, mt_slot(&n, i), min + i, err);
        return rc;
    }
    rc = mt_data_end(&n, &end, err);
    uint64_t lo = min;
    for (unsigned i = 0; i <= end && !rc; i++) {
        uint64_t hi = i < end ? mt_pivot(&n, i) : max;
        if (hi < lo || hi > max)
            return qp_error_set(err, -EINVAL,
                                "maple tree: node 0x%" PRIx64 " pivot %u (0x%" PRIx64
                                ") lies outside 0x%" PRIx64 "..0x%" PRIx64,
                                n.addr, i, hi, lo, max);
        rc = mt_walk_slot(w, &n, i, lo, hi, depth, err);
        if (hi == max)
            break; /* the node's range is covered (and hi + 1 could wrap) */
        lo = hi + 1;
    }
    return rc;
}

int lx_vma_for_each(const struct lx_offsets *o, const struct lx_reader *r, uint64_t mm,
                    lx_vma_fn fn, void *ctx, struct qp_error *err)
{
    uint64_t root;
    int rc = check_kernel_ptr(mm, "mm_struct", err);
    if (!rc && o->has_rb)
        return list_vma_for_each(o, r, mm, fn, ctx, err);
    if (!rc)
        rc = read_u64(r, mm + o->mm_mt + o->mt_root, &root, "mm->mm_mt.ma_root", err);
    if (rc)
        return rc;
    struct mt_walk w = {.o = o, .r = r, .fn = fn, .ctx = ctx};
    if ((root & 3) == 2 && root > 4096)
        return mt_walk_node(&w, root, 0, UINT64_MAX, 0, err);
    return mt_walk_entry(&w, root, 0, err); /* empty, or one entry at index 0 */
}

/* ---- the build-id of a mapped ELF ---- */

/* symbols/ holds the one reader of ELF headers in guest memory; a VMA's file is read with it. */
int lx_elf_build_id(const struct lx_reader *r, uint64_t base, uint64_t map_len,
                    uint8_t id[LX_BUILD_ID_MAX], size_t *len, struct qp_error *err)
{
    return sym_mem_build_id(r->read, r->ctx, base, map_len, id, LX_BUILD_ID_MAX, len, err);
}

/* ---- The page cache (lxuser) --------------------------------------------------------------- */

/* xarray entries (include/linux/xarray.h): bits 1..0 = 10 mark an internal entry; one above
 * 4096 is a node pointer (plus 2), one below 256 a sibling (its slot's offset << 2); bit 0 set
 * marks a value entry (a shadow of an evicted page). */
#define XA_CHUNK_SHIFT 6
#define XA_CHUNK_SIZE  (1u << XA_CHUNK_SHIFT)

static bool xa_is_internal(uint64_t e)
{
    return (e & 3) == 2;
}

static bool xa_is_node(uint64_t e)
{
    return xa_is_internal(e) && e > 4096;
}

static bool xa_is_sibling(uint64_t e)
{
    return xa_is_internal(e) && e < ((uint64_t)(XA_CHUNK_SIZE - 1) << 2 | 2);
}

/* The leaf entry for index under node and the index its entry starts at (a large folio's
 * first page). */
static int xa_descend(const struct lx_offsets *o, const struct lx_reader *r, uint64_t node,
                      uint64_t index, uint64_t *entry, uint64_t *first, struct qp_error *err)
{
    for (int depth = 0; depth < LX_XA_MAX_DEPTH; depth++) {
        uint8_t shift;
        int rc = lx_read(r, node + o->xa_node_shift, &shift, 1, "xa_node.shift", err);
        if (rc)
            return rc;
        if (shift % XA_CHUNK_SHIFT || shift >= 64)
            return qp_error_set(err, -EINVAL, "xa_node shift %u", shift);
        if (depth == 0 && shift + XA_CHUNK_SHIFT < 64 && index >> (shift + XA_CHUNK_SHIFT))
            return -ENOENT; /* beyond what the tree holds */
        unsigned offset = (unsigned)(index >> shift) & (XA_CHUNK_SIZE - 1);
        uint64_t e;
        rc = read_u64(r, node + o->xa_node_slots + 8u * offset, &e, "xa_node.slots[]", err);
        bool sibling = rc == 0 && xa_is_sibling(e);
        if (sibling) {
            offset = (unsigned)(e >> 2);
            rc = read_u64(r, node + o->xa_node_slots + 8u * offset, &e, "xa_node.slots[]", err);
        }
        if (rc)
            return rc;
        /* a sibling stands for a multi-index entry, never for a node: one that leads to a node
         * is garbage (and would cost a third read at every level) */
        if (sibling && xa_is_node(e))
            return qp_error_set(err, -EINVAL, "xa sibling entry leads to a node");
        if (xa_is_node(e) && shift > 0) {
            node = e - 2;
            if (!lx_is_kernel_addr(node))
                return qp_error_set(err, -EINVAL, "xa_node 0x%" PRIx64, node);
            continue;
        }
        uint64_t span = (uint64_t)XA_CHUNK_SIZE << shift;
        *first = (span ? index & ~(span - 1) : 0) | ((uint64_t)offset << shift);
        *entry = e;
        return 0;
    }
    return qp_error_set(err, -EINVAL, "xarray deeper than %d nodes", LX_XA_MAX_DEPTH);
}

int lx_file_page(const struct lx_offsets *o, const struct lx_reader *r, uint64_t file,
                 uint64_t index, uint64_t *paddr, struct qp_error *err)
{
    if (!o->has_page_cache)
        return qp_error_set(err, -ENOTSUP, "BTF names no page cache offsets");
    uint64_t mapping, entry, first = 0;
    int rc = read_u64(r, file + o->file_mapping, &mapping, "file->f_mapping", err);
    if (!rc)
        rc = check_kernel_ptr(mapping, "f_mapping", err);
    if (!rc)
        rc = read_u64(r, mapping + o->mapping_i_pages + o->xa_head, &entry, "i_pages.xa_head", err);
    if (rc)
        return rc;
    if (xa_is_node(entry)) {
        if (!lx_is_kernel_addr(entry - 2))
            return qp_error_set(err, -EINVAL, "xa_node 0x%" PRIx64, entry - 2);
        rc = xa_descend(o, r, entry - 2, index, &entry, &first, err);
        if (rc)
            return rc;
    } else if (index != 0) {
        return -ENOENT; /* a head that is no node holds index 0 alone */
    }
    if (entry == 0 || (entry & 3) != 0)
        return -ENOENT; /* empty, a value (shadow) entry, or another internal one */
    uint64_t page = entry + (index - first) * o->page_struct_size;
    if (!lx_is_kernel_addr(entry) || index - first >= 512 || page < o->vmemmap_base ||
        (page - o->vmemmap_base) % o->page_struct_size)
        return qp_error_set(err, -EINVAL, "page cache entry 0x%" PRIx64 " is no struct page",
                            entry);
    uint64_t pfn = (page - o->vmemmap_base) / o->page_struct_size;
    if (pfn >= (UINT64_C(1) << 40))
        return qp_error_set(err, -EINVAL, "page frame %" PRIu64 " out of range", pfn);
    *paddr = pfn << 12;
    return 0;
}
