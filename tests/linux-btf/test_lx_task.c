/* lx_task over fake kernel memory laid out with the Debian 12 6.1 offsets (the real BTF test
 * checks those against the kernel's own BTF): the per-CPU current task, task fields, and VMA
 * lookups through maple trees built here node by node, at every boundary; then garbage trees
 * (cycles, misaligned and foreign pointers, pivots out of range, dead nodes), each of which must
 * give an error after a bounded number of reads, and random memory that must never crash. */
#include "fake_mem.h"
#include "harness.h"

#define ENC_NULL   0x4ull /* "a NULL somewhere below": set on most encoded node pointers */
#define ROOT_NODE  0x2ull /* the root pointer of a tree whose root is a node */
#define T_DENSE    0u
#define T_LEAF     1u
#define T_RANGE    2u
#define T_ARANGE   3u
#define PF_KTHREAD 0x00200000u

static struct lx_offsets O;

static uint64_t enc(uint64_t node, unsigned type)
{
    return node | ((uint64_t)type << 3) | ENC_NULL;
}

/* ---- the current task and task fields ---- */

static uint64_t make_task(struct fake_mem *m, int32_t pid, int32_t tgid, const char *comm,
                          uint64_t mm, uint32_t flags)
{
    uint64_t t = fake_alloc(m, O.task_size, 64);
    fake_put_u32(m, t + O.task_pid, (uint32_t)pid);
    fake_put_u32(m, t + O.task_tgid, (uint32_t)tgid);
    fake_put_bytes(m, t + O.task_comm, comm, strnlen(comm, 16));
    fake_put_u64(m, t + O.task_mm, mm);
    fake_put_u64(m, t + O.task_stack, 0xffffc90000010000ull);
    fake_put_u32(m, t + O.task_flags, flags);
    return t;
}

static void test_current(void)
{
    struct fake_mem m;
    fake_init(&m, 1 << 20);
    struct lx_reader r = fake_reader(&m);
    uint64_t base = fake_alloc(&m, 0x20000, 4096);
    uint64_t task = make_task(&m, 42, 42, "sh", 0, 0);
    fake_put_u64(&m, base + O.percpu_this_cpu_off, base);
    fake_put_u64(&m, base + O.percpu_current_task, task);

    uint64_t got = 0;
    struct qp_error err = {0};
    CHECK_INT(lx_current_task(&O, &r, base, &got, &err), 0);
    CHECK_U64(got, task);

    /* a base whose this_cpu_off does not point back at it is not a per-CPU base */
    CHECK_INT(lx_current_task(&O, &r, base + 64, &got, &err), -EINVAL);
    CHECK(strstr(err.msg, "per-CPU base") != NULL);
    /* a user-mode GS base (a user address) */
    CHECK_INT(lx_current_task(&O, &r, 0x7f0000001000ull, &got, &err), -EINVAL);
    /* unreadable */
    CHECK_INT(lx_current_task(&O, &r, 0xffffffffff000000ull, &got, &err), -EFAULT);
    CHECK(strstr(err.msg, "this_cpu_off") != NULL);
    /* current_task holding garbage */
    fake_put_u64(&m, base + O.percpu_current_task, 0x1234);
    CHECK_INT(lx_current_task(&O, &r, base, &got, &err), -EINVAL);
    CHECK_U64(got, task); /* untouched on failure */
    fake_fini(&m);
}

/* rq->curr: the run queue's task, read at the per-CPU base's runqueues; garbage and a kernel
 * without the offsets are errors. */
static void test_rq_curr(void)
{
    struct fake_mem m;
    fake_init(&m, 1 << 20);
    struct lx_reader r = fake_reader(&m);
    uint64_t base = fake_alloc(&m, 0x40000, 4096);
    uint64_t next = make_task(&m, 15, 15, "rcu_preempt", 0, PF_KTHREAD);
    fake_put_u64(&m, base + O.percpu_runqueues + O.rq_curr, next);
    uint64_t got = 0;
    struct qp_error err = {0};
    CHECK_INT(lx_rq_curr(&O, &r, base, &got, &err), 0);
    CHECK_U64(got, next);
    fake_put_u64(&m, base + O.percpu_runqueues + O.rq_curr, 0x1235);
    CHECK_INT(lx_rq_curr(&O, &r, base, &got, &err), -EINVAL);
    CHECK(strstr(err.msg, "rq->curr") != NULL);
    CHECK_U64(got, next);
    struct lx_offsets none = O;
    none.has_rq_curr = false;
    CHECK_INT(lx_rq_curr(&none, &r, base, &got, &err), -ENOENT);
    fake_fini(&m);
}

static void test_task(void)
{
    struct fake_mem m;
    fake_init(&m, 1 << 20);
    struct lx_reader r = fake_reader(&m);
    uint64_t mm = fake_alloc(&m, 1096, 64);
    uint64_t dd = make_task(&m, 1234, 1200, "dd", mm, 0x400100);
    uint64_t kw = make_task(&m, 7, 7, "kworker/0:1", 0, PF_KTHREAD | 0x40);
    uint64_t longname = make_task(&m, 9, 9, "0123456789abcdefXYZ", mm, 0);

    struct lx_task_info t;
    struct qp_error err = {0};
    m.reads = 0;
    CHECK_INT(lx_task_read(&O, &r, dd, &t, &err), 0);
    CHECK_INT(m.reads, 1); /* one read for all the fields */
    CHECK_U64(t.task, dd);
    CHECK_INT(t.pid, 1234);
    CHECK_INT(t.tgid, 1200);
    CHECK_STR(t.comm, "dd");
    CHECK_U64(t.mm, mm);
    CHECK_U64(t.stack, 0xffffc90000010000ull);
    CHECK(!t.kthread);

    CHECK_INT(lx_task_read(&O, &r, kw, &t, &err), 0);
    CHECK_STR(t.comm, "kworker/0:1");
    CHECK_U64(t.mm, 0);
    CHECK(t.kthread);

    CHECK_INT(lx_task_read(&O, &r, longname, &t, &err), 0);
    CHECK_STR(t.comm, "0123456789abcde"); /* comm is 16 bytes with its NUL */

    /* garbage: negative pid, a user pointer as mm, a task pointer that is not a kernel one */
    fake_put_u32(&m, dd + O.task_pid, 0xfffffff0u);
    CHECK_INT(lx_task_read(&O, &r, dd, &t, &err), -EINVAL);
    CHECK(strstr(err.msg, "does not look like") != NULL);
    fake_put_u32(&m, dd + O.task_pid, 5);
    fake_put_u64(&m, dd + O.task_mm, 0x7ffd00001000ull);
    CHECK_INT(lx_task_read(&O, &r, dd, &t, &err), -EINVAL);
    CHECK_INT(lx_task_read(&O, &r, 0x400000, &t, &err), -EINVAL);
    CHECK_INT(lx_task_read(&O, &r, FAKE_BASE + (1 << 20) - 64, &t, &err), -EFAULT);
    fake_fini(&m);
}

/* ---- maple trees ---- */

static uint64_t make_vma(struct fake_mem *m, uint64_t start, uint64_t end, const char *file)
{
    uint64_t v = fake_alloc(m, 152, 8);
    fake_put_u64(m, v + O.vma_start, start);
    fake_put_u64(m, v + O.vma_end, end);
    fake_put_u64(m, v + O.vma_pgoff, start >> 12);
    fake_put_u64(m, v + O.vma_flags, 0x875);
    if (file) {
        uint64_t f = fake_alloc(m, 256, 64), d = fake_alloc(m, 192, 64);
        uint64_t name = fake_alloc(m, strlen(file) + 1, 8);
        fake_put_bytes(m, name, file, strlen(file) + 1);
        fake_put_u64(m, f + O.file_path + O.path_dentry, d);
        fake_put_u32(m, d + O.dentry_name + O.qstr_len, (uint32_t)strlen(file));
        fake_put_u64(m, d + O.dentry_name + O.qstr_name, name);
        fake_put_u64(m, v + O.vma_file, f);
    }
    return v;
}

/* A node of type with n used slots: pivots[0..n-2] (the last slot ends at the node's max, its
 * pivot is stored only when given as last_pivot != 0), slots[0..n-1]; meta end = n - 1. */
static uint64_t make_node(struct fake_mem *m, unsigned type, unsigned n, const uint64_t *pivots,
                          const uint64_t *slots, uint64_t last_pivot)
{
    uint64_t node = fake_alloc(m, 256, 256);
    bool arange = type == T_ARANGE;
    uint32_t piv = arange ? O.mt_a64_pivot : O.mt_r64_pivot;
    uint32_t slot = arange ? O.mt_a64_slot : O.mt_r64_slot;
    uint32_t meta = arange ? O.mt_a64_meta : O.mt_r64_meta;
    uint32_t npiv = arange ? O.mt_a64_pivots : O.mt_r64_pivots;
    fake_put_u64(m, node, 0xffff888000ff0006ull); /* some parent, never the node itself */
    for (unsigned i = 0; i + 1 < n; i++)
        fake_put_u64(m, node + piv + 8 * i, pivots[i]);
    if (last_pivot && n - 1 < npiv)
        fake_put_u64(m, node + piv + 8 * (n - 1), last_pivot);
    for (unsigned i = 0; i < n; i++)
        fake_put_u64(m, node + slot + 8 * i, slots[i]);
    if (n - 1 < npiv)
        fake_at(m, node + meta, 1)[0] = (uint8_t)(n - 1);
    return enc(node, type);
}

static uint64_t make_mm(struct fake_mem *m, uint64_t root)
{
    uint64_t mm = fake_alloc(m, 1096, 64);
    fake_put_u64(m, mm + O.mm_mt + O.mt_root, root);
    return mm;
}

struct tree {
    uint64_t mm, root;
    uint64_t prog, heap, stack, small[16], leaf_a, leaf_b, leaf_c, leaf_d;
};

/* Two levels: an arange_64 root over four leaves (gaps, a leaf whose last pivot equals its max,
 * a full leaf of 16 slots whose end the pivots tell, the top of the address space). */
static void make_tree(struct fake_mem *m, struct tree *t)
{
    t->prog = make_vma(m, 0x400000, 0x401000, "prog");
    uint64_t a_piv[] = {0x3fffff};
    uint64_t a_slot[] = {0, t->prog};
    t->leaf_a = make_node(m, T_LEAF, 2, a_piv, a_slot, 0);

    t->heap = make_vma(m, 0x601000, 0x603000, NULL);
    uint64_t b_piv[] = {0x600fff, 0x602fff};
    uint64_t b_slot[] = {0, t->heap, 0};
    t->leaf_b = make_node(m, T_LEAF, 3, b_piv, b_slot, 0xfffffff);

    uint64_t d_piv[15], d_slot[16];
    for (unsigned i = 0; i < 16; i++) {
        uint64_t start = 0x10000000 + 0x1000ull * i;
        t->small[i] = i % 2 ? 0 : make_vma(m, start, start + 0x1000, i == 14 ? "libc.so.6" : NULL);
        d_slot[i] = t->small[i];
        if (i < 15)
            d_piv[i] = start + 0xfff;
    }
    t->leaf_d = make_node(m, T_LEAF, 16, d_piv, d_slot, 0);

    t->stack = make_vma(m, 0x7ffffffde000, 0x7ffffffff000, NULL);
    uint64_t c_piv[] = {0x7ffffffddfff, 0x7fffffffefff};
    uint64_t c_slot[] = {0, t->stack, 0};
    t->leaf_c = make_node(m, T_LEAF, 3, c_piv, c_slot, 0);

    uint64_t r_piv[] = {0x400fff, 0xfffffff, 0x1000ffff};
    uint64_t r_slot[] = {t->leaf_a, t->leaf_b, t->leaf_d, t->leaf_c};
    t->root = make_node(m, T_ARANGE, 4, r_piv, r_slot, 0) | ROOT_NODE;
    t->mm = make_mm(m, t->root);
}

static void expect_vma(const struct lx_reader *r, uint64_t mm, uint64_t addr, int want_rc,
                       uint64_t want_start, const char *want_name)
{
    struct lx_vma v;
    struct qp_error err = {0};
    int rc = lx_vma_find(&O, r, mm, addr, &v, &err);
    CHECK_MSG(rc == want_rc, "0x%" PRIx64 ": rc %d, want %d (%s)", addr, rc, want_rc, err.msg);
    if (rc == 0 && want_rc == 0) {
        CHECK_MSG(v.start == want_start, "0x%" PRIx64 ": start 0x%" PRIx64, addr, v.start);
        CHECK_MSG(v.start <= addr && addr < v.end, "0x%" PRIx64 " not in VMA", addr);
        CHECK_MSG(strcmp(v.name, want_name) == 0, "0x%" PRIx64 ": name \"%s\"", addr, v.name);
        CHECK_U64(v.pgoff, v.start >> 12);
        CHECK_U64(v.flags, 0x875);
    }
}

static void put_slot(struct fake_mem *m, uint64_t enode, unsigned i, uint64_t v)
{
    bool arange = ((enode >> 3) & 0xf) == T_ARANGE;
    fake_put_u64(m, (enode & ~0xffull) + (arange ? O.mt_a64_slot : O.mt_r64_slot) + 8 * i, v);
}

static void put_pivot(struct fake_mem *m, uint64_t enode, unsigned i, uint64_t v)
{
    bool arange = ((enode >> 3) & 0xf) == T_ARANGE;
    fake_put_u64(m, (enode & ~0xffull) + (arange ? O.mt_a64_pivot : O.mt_r64_pivot) + 8 * i, v);
}

static void test_maple(void)
{
    struct fake_mem m;
    fake_init(&m, 1 << 20);
    struct lx_reader r = fake_reader(&m);
    struct tree t;
    make_tree(&m, &t);
    const uint64_t S = 0x10000000;

    expect_vma(&r, t.mm, 0, -ENOENT, 0, "");
    expect_vma(&r, t.mm, 0x3fffff, -ENOENT, 0, "");
    expect_vma(&r, t.mm, 0x400000, 0, 0x400000, "prog"); /* start */
    expect_vma(&r, t.mm, 0x400fff, 0, 0x400000, "prog"); /* end - 1 */
    expect_vma(&r, t.mm, 0x401000, -ENOENT, 0, "");      /* end: the next leaf's gap */
    expect_vma(&r, t.mm, 0x600fff, -ENOENT, 0, "");
    expect_vma(&r, t.mm, 0x601000, 0, 0x601000, "");
    expect_vma(&r, t.mm, 0x602fff, 0, 0x601000, "");
    expect_vma(&r, t.mm, 0x603000, -ENOENT, 0, "");
    expect_vma(&r, t.mm, 0xfffffff, -ENOENT, 0, "");
    for (unsigned i = 0; i < 16; i++) {
        uint64_t start = S + 0x1000ull * i;
        int rc = i % 2 ? -ENOENT : 0;
        const char *name = i == 14 ? "libc.so.6" : "";
        expect_vma(&r, t.mm, start, rc, start, name);
        expect_vma(&r, t.mm, start + 0xfff, rc, start, name);
    }
    expect_vma(&r, t.mm, S + 0x10000, -ENOENT, 0, "");
    expect_vma(&r, t.mm, 0x7ffffffddfff, -ENOENT, 0, "");
    expect_vma(&r, t.mm, 0x7ffffffde000, 0, 0x7ffffffde000, "");
    expect_vma(&r, t.mm, 0x7fffffffefff, 0, 0x7ffffffde000, "");
    expect_vma(&r, t.mm, 0x7ffffffff000, -ENOENT, 0, "");
    expect_vma(&r, t.mm, UINT64_MAX, -ENOENT, 0, "");

    /* cost: root, leaf, VMA, and for a file the dentry pointer, name pointer, len, name */
    struct lx_vma v;
    m.reads = 0;
    CHECK_INT(lx_vma_find(&O, &r, t.mm, 0x400000, &v, NULL), 0);
    CHECK_INT(m.reads, 8);

    /* a tree whose root is a leaf; and a range_64 (non-alloc) internal node */
    uint64_t piv[] = {0x400fff};
    uint64_t slots[] = {t.prog, 0};
    uint64_t leaf_root = make_node(&m, T_LEAF, 2, piv, slots, 0);
    uint64_t mm1 = make_mm(&m, leaf_root | ROOT_NODE);
    expect_vma(&r, mm1, 0x400800, 0, 0x400000, "prog");
    expect_vma(&r, mm1, 0x1000, -EINVAL, 0, ""); /* slot 0 is [0, 0x400fff]: the VMA must hold */
    uint64_t piv2[] = {0x3fffff, 0x400fff};
    uint64_t slots2[] = {0, t.prog, 0};
    leaf_root = make_node(&m, T_LEAF, 3, piv2, slots2, 0);
    mm1 = make_mm(&m, leaf_root | ROOT_NODE);
    expect_vma(&r, mm1, 0x400800, 0, 0x400000, "prog");
    expect_vma(&r, mm1, 0x401000, -ENOENT, 0, "");
    uint64_t rpiv[] = {0xfffffff};
    uint64_t rslots[] = {t.leaf_b, t.leaf_d};
    uint64_t mm2 = make_mm(&m, make_node(&m, T_RANGE, 2, rpiv, rslots, 0) | ROOT_NODE);
    expect_vma(&r, mm2, 0x601000, 0, 0x601000, "");
    expect_vma(&r, mm2, S + 0xe000, 0, S + 0xe000, "libc.so.6");

    /* a leaf of 15 slots whose pivot 14 is its max: the pivots say the end, so neither slot 15
     * nor the metadata byte (garbage here) is looked at */
    const uint64_t E = 0x20000000;
    uint64_t e_piv[15], e_slot[15];
    for (unsigned i = 0; i < 15; i++) {
        e_piv[i] = E + 0x1000ull * i + 0xfff;
        e_slot[i] = i % 2 ? 0 : make_vma(&m, E + 0x1000ull * i, E + 0x1000ull * (i + 1), NULL);
    }
    uint64_t leaf_e = make_node(&m, T_LEAF, 15, e_piv, e_slot, e_piv[14]);
    put_slot(&m, leaf_e, 15, 0xdeadbeefdeadbeefull);
    uint64_t rpiv3[] = {0xfffffff, E + 0xefff};
    uint64_t rslots3[] = {t.leaf_b, leaf_e, t.leaf_c};
    uint64_t mm3 = make_mm(&m, make_node(&m, T_RANGE, 3, rpiv3, rslots3, 0) | ROOT_NODE);
    expect_vma(&r, mm3, E, 0, E, "");
    expect_vma(&r, mm3, E + 0x1fff, -ENOENT, 0, "");
    expect_vma(&r, mm3, E + 0xe000, 0, E + 0xe000, "");
    expect_vma(&r, mm3, E + 0xefff, 0, E + 0xe000, "");
    expect_vma(&r, mm3, E + 0xf000, -ENOENT, 0, ""); /* leaf_c's first gap */
    expect_vma(&r, mm3, 0x7ffffffde000, 0, 0x7ffffffde000, "");

    /* an empty tree, and a tree holding one entry at index 0 */
    expect_vma(&r, make_mm(&m, 0), 0x400000, -ENOENT, 0, "");
    expect_vma(&r, make_mm(&m, t.prog), 0x400000, -ENOENT, 0, "");
    fake_fini(&m);
}

/* Runs a lookup that must fail with want_rc within max_reads reads. */
static void expect_error(struct fake_mem *m, uint64_t mm, uint64_t addr, int want_rc,
                         const char *want_text, unsigned max_reads, int line)
{
    struct lx_reader r = fake_reader(m);
    struct lx_vma v;
    struct qp_error err = {0};
    m->reads = 0;
    int rc = lx_vma_find(&O, &r, mm, addr, &v, &err);
    CHECK_MSG(rc == want_rc, "line %d: rc %d, want %d (%s)", line, rc, want_rc, err.msg);
    CHECK_MSG(m->reads <= max_reads, "line %d: %u reads", line, m->reads);
    CHECK_MSG(!want_text || strstr(err.msg, want_text), "line %d: \"%s\"", line, err.msg);
}
#define EXPECT_ERROR(m, mm, addr, rc, text, reads)                                                 \
    expect_error(m, mm, addr, rc, text, reads, __LINE__)

static void test_maple_garbage(void)
{
    struct fake_mem m;
    fake_init(&m, 1 << 20);
    struct tree t;

    /* a node that lists itself as its child: the depth bound ends it */
    make_tree(&m, &t);
    uint64_t root = t.root & ~ROOT_NODE;
    put_slot(&m, root, 0, root);
    EXPECT_ERROR(&m, t.mm, 0x400000, -ELOOP, "levels", 10);
    /* two internal nodes pointing at each other */
    uint64_t piv[] = {0x400fff};
    uint64_t slots[] = {root, root};
    uint64_t other = make_node(&m, T_ARANGE, 2, piv, slots, 0);
    put_slot(&m, root, 0, other);
    EXPECT_ERROR(&m, t.mm, 0x400000, -ELOOP, NULL, 10);

    /* child pointers: misaligned, not a kernel address, an unknown type, NULL */
    make_tree(&m, &t);
    root = t.root & ~ROOT_NODE;
    put_slot(&m, root, 0, t.leaf_a | 1);
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "not a child node", 3);
    put_slot(&m, root, 0, enc(0x7f0000001000ull, T_LEAF));
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "not a node pointer", 3);
    put_slot(&m, root, 0, (t.leaf_a & ~0xffull) | (9u << 3));
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "not a node pointer", 3);
    put_slot(&m, root, 0, 0);
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "not a child node", 3);
    put_slot(&m, root, 0, enc(FAKE_BASE + (2u << 20), T_LEAF)); /* outside memory */
    EXPECT_ERROR(&m, t.mm, 0x400000, -EFAULT, "maple node", 3);

    /* pivots: falling, beyond the node's range (the leaf's max is the root's pivot) */
    make_tree(&m, &t);
    root = t.root & ~ROOT_NODE;
    put_pivot(&m, root, 1, 0x100);
    EXPECT_ERROR(&m, t.mm, 0x601000, -EINVAL, "pivot 1", 3);
    make_tree(&m, &t);
    put_pivot(&m, t.leaf_b, 0, 0x10000000); /* leaf_b covers 0x401000..0xfffffff */
    EXPECT_ERROR(&m, t.mm, 0x601000, -EINVAL, "lies outside", 3);
    make_tree(&m, &t);
    put_pivot(&m, t.leaf_a, 0, 0x1000); /* fine for 0x400000 (slot 1): containment decides */
    put_slot(&m, t.leaf_a, 0, t.heap);
    EXPECT_ERROR(&m, t.mm, 0x800, -EINVAL, "does not hold", 4);

    /* metadata claiming more slots than the node has */
    make_tree(&m, &t);
    fake_at(&m, (t.root & ~0xffull) + O.mt_a64_meta, 1)[0] = 200;
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "claims", 2);

    /* a dead node (its parent is itself): retry later */
    make_tree(&m, &t);
    fake_put_u64(&m, t.leaf_a & ~0xffull, t.leaf_a & ~0xffull);
    EXPECT_ERROR(&m, t.mm, 0x400000, -EAGAIN, "dead", 3);

    /* leaf entries that are not VMAs: a user pointer, an internal (reserved) value */
    make_tree(&m, &t);
    put_slot(&m, t.leaf_a, 1, 0x400000);
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "entry", 3);
    put_slot(&m, t.leaf_a, 1, 0x406); /* the kernel's XA_ZERO_ENTRY */
    EXPECT_ERROR(&m, t.mm, 0x400000, -ENOENT, NULL, 3);

    /* a VMA whose file has a garbage dentry, or a name of length 0 */
    make_tree(&m, &t);
    uint64_t file = 0;
    struct lx_reader r = fake_reader(&m);
    REQUIRE(r.read(r.ctx, t.prog + O.vma_file, &file, 8) == 0 && file);
    uint64_t dentry = 0;
    REQUIRE(r.read(r.ctx, file + O.file_path + O.path_dentry, &dentry, 8) == 0);
    fake_put_u32(&m, dentry + O.dentry_name + O.qstr_len, 0);
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "no name", 8);
    fake_put_u64(&m, file + O.file_path + O.path_dentry, 0x1234);
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "dentry", 8);

    /* offsets without the maple layout (a caller's struct not from lx_btf_offsets) */
    make_tree(&m, &t);
    struct lx_offsets saved = O;
    O.mt_a64_pivots = 0;
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "layout", 1);
    O = saved;
    O.mt_r64_slot = 250;
    EXPECT_ERROR(&m, t.mm, 0x400000, -EINVAL, "layout", 2);
    O = saved;

    /* the mm itself */
    EXPECT_ERROR(&m, 0, 0x400000, -EINVAL, "mm_struct", 0);
    EXPECT_ERROR(&m, 0xffffffffff000000ull, 0x400000, -EFAULT, "ma_root", 1);
    fake_fini(&m);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

struct collected {
    struct lx_vma v[64];
    unsigned n, stop_after;
};

static int collect(void *ctx, const struct lx_vma *v)
{
    struct collected *c = ctx;
    if (c->n < 64)
        c->v[c->n] = *v;
    c->n++;
    return c->stop_after && c->n == c->stop_after ? 7 : 0;
}

static void test_walk(void)
{
    struct fake_mem m;
    fake_init(&m, 1 << 20);
    struct lx_reader r = fake_reader(&m);
    struct tree t;
    make_tree(&m, &t);
    struct collected c = {0};
    struct qp_error err = {0};
    int rc = lx_vma_for_each(&O, &r, t.mm, collect, &c, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    /* prog, heap, the 8 even slots of the full leaf, the stack */
    CHECK_INT(c.n, 11);
    uint64_t want[11] = {0x400000, 0x601000};
    for (unsigned i = 0; i < 8; i++)
        want[2 + i] = 0x10000000 + 0x2000ull * i;
    want[10] = 0x7ffffffde000;
    for (unsigned i = 0; i < 11 && i < c.n; i++)
        CHECK_MSG(c.v[i].start == want[i], "VMA %u starts at 0x%" PRIx64, i, c.v[i].start);
    CHECK_STR(c.v[0].name, "prog");
    CHECK_STR(c.v[9].name, "libc.so.6");
    CHECK_STR(c.v[10].name, "");

    /* fn stops the walk: its value comes back */
    struct collected stop = {.stop_after = 3};
    CHECK_INT(lx_vma_for_each(&O, &r, t.mm, collect, &stop, &err), 7);
    CHECK_INT(stop.n, 3);

    /* empty tree; a VMA listed twice (out of order); a cycle */
    struct collected none = {0};
    CHECK_INT(lx_vma_for_each(&O, &r, make_mm(&m, 0), collect, &none, &err), 0);
    CHECK_INT(none.n, 0);
    put_slot(&m, t.leaf_c, 1, t.heap); /* the stack's slot now holds the heap VMA */
    struct collected dup = {0};
    CHECK_INT(lx_vma_for_each(&O, &r, t.mm, collect, &dup, &err), -EINVAL);
    CHECK(strstr(err.msg, "does not hold") != NULL);
    make_tree(&m, &t);
    /* a cycle whose ranges narrow: the pivots give it away; one whose ranges hold: the depth */
    put_slot(&m, t.root & ~ROOT_NODE, 2, t.root & ~ROOT_NODE);
    struct collected loop = {0};
    CHECK_INT(lx_vma_for_each(&O, &r, t.mm, collect, &loop, &err), -EINVAL);
    CHECK(strstr(err.msg, "lies outside") != NULL);
    put_slot(&m, t.root & ~ROOT_NODE, 0, t.root & ~ROOT_NODE);
    m.reads = 0;
    CHECK_INT(lx_vma_for_each(&O, &r, t.mm, collect, &loop, &err), -ELOOP);
    CHECK_MSG(m.reads <= 9, "%u reads", m.reads);
    fake_fini(&m);
}

/* Valid trees with random words overwritten, some with plausible node pointers: every lookup
 * must end with few reads (ASan checks the rest), and a VMA it returns must hold the address. */
static void test_maple_random(void)
{
    const size_t size = 1 << 16;
    struct fake_mem m;
    fake_init(&m, size);
    struct lx_reader r = fake_reader(&m);
    unsigned ok = 0, failed = 0, max_reads = 0, walks_ok = 0, max_walk_reads = 0;
    for (int round = 0; round < 2000; round++) {
        memset(m.bytes, 0, size);
        m.used = 0;
        struct tree t;
        make_tree(&m, &t);
        size_t words = m.used / 8;
        for (int k = 0, n = 1 + (int)(rng() % 6); k < n; k++) {
            uint64_t v = rng();
            switch (v % 4) {
            case 0: /* an encoded node pointer into the tree's memory */
                v = enc(FAKE_BASE + (rng() % m.used & ~0xffull), (unsigned)(rng() % 5));
                break;
            case 1: /* a small number (pivots, lengths, metadata) */
                v %= 0x20000000;
                break;
            case 2:
                v = 0;
                break;
            }
            fake_put_u64(&m, FAKE_BASE + 8 * (rng() % words), v);
        }
        for (int k = 0; k < 20; k++) {
            struct lx_vma v;
            uint64_t addr = rng() % 4 ? 0x10000000 + rng() % 0x10000 : rng() % 0x800000;
            m.reads = 0;
            int rc = lx_vma_find(&O, &r, t.mm, addr, &v, NULL);
            if (rc == 0) {
                ok++;
                CHECK(v.start <= addr && addr < v.end);
                CHECK(v.name[sizeof(v.name) - 1] == '\0');
            } else {
                failed++;
            }
            max_reads = m.reads > max_reads ? m.reads : max_reads;
        }
        struct collected c = {0};
        m.reads = 0;
        int rc = lx_vma_for_each(&O, &r, t.mm, collect, &c, NULL);
        walks_ok += rc == 0;
        for (unsigned i = 1; i < c.n && i < 64; i++)
            CHECK(c.v[i - 1].end <= c.v[i].start);
        max_walk_reads = m.reads > max_walk_reads ? m.reads : max_walk_reads;
    }
    fprintf(stderr, "damaged trees: %u lookups found a VMA, %u errors, at most %u reads\n", ok,
            failed, max_reads);
    fprintf(stderr, "whole walks: %u of 2000 completed, at most %u reads\n", walks_ok,
            max_walk_reads);
    CHECK(ok > 1000 && failed > 1000); /* both paths ran */
    CHECK(walks_ok > 100 && walks_ok < 2000);
    CHECK(max_walk_reads <= 1 + LX_MT_MAX_NODES + 5 * LX_VMA_MAX);
    CHECK(max_reads <= 1 + 8 + 1 + 4);
    fake_fini(&m);
}

/* Writes seeds for fuzz_lx_maple into dir: an address, then a memory image whose first bytes are
 * the mm (its maple root at offset 8) and a task, followed by a tree from make_tree. */
/* ---- before 6.1: the red-black tree and the VMA list ---- */

/* 5.10's layout beside 6.1's offsets: mm_rb and mmap in mm_struct, vm_rb and vm_next in the
 * VMA (where 6.1 keeps other members; the fake VMA is 152 bytes), rb_node's children. */
static void use_rb_layout(void)
{
    O.has_rb = true;
    O.mm_rb = 8, O.mm_mmap = 0;
    O.vma_rb = 48, O.vma_next = 80; /* clear of vm_start 0, end 8, flags 32, pgoff 104, file 112 */
    O.rb_right = 8, O.rb_left = 16;
}

/* node (a VMA's vm_rb) gets children left and right (VMAs or 0). */
static void rb_link(struct fake_mem *m, uint64_t vma, uint64_t left, uint64_t right)
{
    fake_put_u64(m, vma + O.vma_rb + O.rb_left, left ? left + O.vma_rb : 0);
    fake_put_u64(m, vma + O.vma_rb + O.rb_right, right ? right + O.vma_rb : 0);
}

static void test_rb(void)
{
    struct lx_offsets saved = O;
    use_rb_layout();
    struct fake_mem m;
    fake_init(&m, 1 << 20);
    struct lx_reader r = {.read = fake_read, .ctx = &m};
    uint64_t v[5];
    const char *files[] = {"busybox", NULL, "libc.so.6", NULL, "[stack]"};
    for (int i = 0; i < 5; i++)
        v[i] = make_vma(&m, 0x400000 + 0x100000 * (uint64_t)i, 0x480000 + 0x100000 * (uint64_t)i,
                        i == 4 ? NULL : files[i]);
    /* tree: v2 at the root, v0 < v1 on the left, v3 < v4 on the right; the list in order */
    rb_link(&m, v[2], v[0], v[3]);
    rb_link(&m, v[0], 0, v[1]);
    rb_link(&m, v[3], 0, v[4]);
    for (int i = 0; i < 5; i++)
        fake_put_u64(&m, v[i] + O.vma_next, i < 4 ? v[i + 1] : 0);
    uint64_t mm = fake_alloc(&m, 1096, 64);
    fake_put_u64(&m, mm + O.mm_rb, v[2] + O.vma_rb);
    fake_put_u64(&m, mm + O.mm_mmap, v[0]);
    expect_vma(&r, mm, 0x400010, 0, 0x400000, "busybox");
    expect_vma(&r, mm, 0x47ffff, 0, 0x400000, "busybox");
    expect_vma(&r, mm, 0x610000, 0, 0x600000, "libc.so.6");
    expect_vma(&r, mm, 0x8000f0, 0, 0x800000, "");
    expect_vma(&r, mm, 0x490000, -ENOENT, 0, NULL); /* a gap */
    expect_vma(&r, mm, 0x10, -ENOENT, 0, NULL);
    struct collected c = {0};
    struct qp_error err = {0};
    CHECK_INT(lx_vma_for_each(&O, &r, mm, collect, &c, &err), 0);
    CHECK_INT((int)c.n, 5);
    for (unsigned i = 1; i < c.n && i < 5; i++)
        CHECK(c.v[i - 1].end <= c.v[i].start);
    /* garbage: a cycle in the tree ends the search, a list out of order ends the walk */
    rb_link(&m, v[3], v[2], v[4]);
    expect_vma(&r, mm, 0x6f0000, -ELOOP, 0, NULL);
    fake_put_u64(&m, v[3] + O.vma_next, v[1]);
    c = (struct collected){0};
    CHECK_INT(lx_vma_for_each(&O, &r, mm, collect, &c, &err), -EINVAL);
    CHECK_MSG(strstr(err.msg, "overlaps") != NULL, "%s", err.msg);
    fake_fini(&m);
    O = saved;
}

static int write_seeds(const char *dir)
{
    const uint64_t addrs[] = {0x400000, 0x602fff, 0x1000e800, 0x7ffffffde000, 0x401000};
    for (size_t k = 0; k < sizeof(addrs) / sizeof(addrs[0]); k++) {
        struct fake_mem m;
        fake_init(&m, 1 << 20);
        uint64_t head = fake_alloc(&m, O.task_size, 256); /* at FAKE_BASE: the mm and a task */
        struct tree t;
        make_tree(&m, &t);
        fake_put_u64(&m, head + O.mm_mt + O.mt_root, t.root);
        fake_put_u32(&m, head + O.task_pid, 77);
        fake_put_u32(&m, head + O.task_tgid, 77);
        fake_put_bytes(&m, head + O.task_comm, "fuzz", 4);
        char path[4096];
        snprintf(path, sizeof(path), "%s/tree-%zu", dir, k);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(&addrs[k], 8, 1, f) != 1 || fwrite(m.bytes, 1, m.used, f) != m.used) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        fclose(f);
        fake_fini(&m);
    }
    return 0;
}

int main(int argc, char **argv)
{
    lx_offsets_debian12_6_1(&O);
    const char *which = argc > 1 ? argv[1] : "";
    if (strcmp(which, "seed") == 0 && argc > 2)
        return write_seeds(argv[2]);
    if (strcmp(which, "current") == 0) {
        test_current();
        test_rq_curr();
    } else if (strcmp(which, "task") == 0)
        test_task();
    else if (strcmp(which, "maple") == 0)
        test_maple();
    else if (strcmp(which, "maple_garbage") == 0)
        test_maple_garbage();
    else if (strcmp(which, "walk") == 0)
        test_walk();
    else if (strcmp(which, "maple_random") == 0)
        test_maple_random();
    else if (strcmp(which, "rb") == 0)
        test_rb();
    else {
        fprintf(stderr, "usage: %s current|task|maple|maple_garbage|walk|maple_random|rb\n",
                argv[0]);
        return 2;
    }
    return harness_result();
}
