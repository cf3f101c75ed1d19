/* lx_btf: offsets from BTF. `synthetic` builds BTF with libbpf's writer in the shapes kernels use
 * (anonymous structs and unions, pcpu_hot) and checks every offset; `missing` and `garbage`
 * check the errors; `real FILE` reads the .BTF of a real Debian kernel (vmlinux-btf.sh extracts
 * it, real-btf.sh drives it) and checks the values LINUX-GUESTS.md §0.2 lists for 6.1.0-56, or
 * sanity relations for any other build. */
#include "harness.h"
#include "lx_task.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <glib.h>
#include <signal.h>
#include <unistd.h>

/* Every read succeeds with zeros (the test checks what is refused before any read). */
static int read_zeros(void *ctx, uint64_t kva, void *buf, size_t len)
{
    (void)ctx, (void)kva;
    memset(buf, 0, len);
    return 0;
}

/* A guest's BTF built to hurt (issue 34): comm reached through 8 anonymous structs, each
 * 0x1fffffff bytes into the one above, so that it sits at byte 0xfffffff8 of a 4 KiB
 * task_struct; or a fan-out of anonymous members (16 wide, 8 deep: 16^8 paths) in front of
 * every task_struct member, which a search without a bound walks for hours. */
enum shape { SHAPE_PLAIN, SHAPE_COMM_WRAPS, SHAPE_FAN_OUT, SHAPE_MODULE_OUTSIDE };
static enum shape shape = SHAPE_PLAIN;

#define HOSTILE_DEPTH 8
#define FAN_OUT       16

/* The outermost of a chain of HOSTILE_DEPTH anonymous structs, comm at the bottom. */
static int add_wrapping_comm(struct btf *b, int comm)
{
    int inner = btf__add_struct(b, NULL, 16);
    REQUIRE(btf__add_field(b, "comm", comm, 0, 0) == 0);
    for (int level = 1; level < HOSTILE_DEPTH; level++) {
        int outer = btf__add_struct(b, NULL, 16);
        REQUIRE(btf__add_field(b, NULL, inner, 0xfffffff8u, 0) == 0);
        inner = outer;
    }
    return inner;
}

/* The outermost of HOSTILE_DEPTH levels of FAN_OUT anonymous members each. */
static int add_fan_out(struct btf *b, int leaf_type)
{
    int inner = btf__add_struct(b, NULL, 4);
    REQUIRE(btf__add_field(b, "leaf", leaf_type, 0, 0) == 0);
    for (int level = 1; level < HOSTILE_DEPTH; level++) {
        int outer = btf__add_struct(b, NULL, 4);
        for (int i = 0; i < FAN_OUT; i++)
            REQUIRE(btf__add_field(b, NULL, inner, 0, 0) == 0);
        inner = outer;
    }
    return inner;
}

/* A 6.1-like struct module (core_layout, ORC in arch, mod_kallsyms): lx_btf_module_offsets
 * resolves it; SHAPE_MODULE_OUTSIDE puts its state 2000 bytes into its 1024. */
static void add_module(struct btf *b, int u32, int chr, int vptr)
{
    int name = btf__add_array(b, u32, chr, 56);
    int list = btf__add_struct(b, "list_head", 16);
    REQUIRE(btf__add_field(b, "next", vptr, 0, 0) == 0);
    REQUIRE(btf__add_field(b, "prev", vptr, 64, 0) == 0);
    int layout = btf__add_struct(b, "module_layout", 16);
    REQUIRE(btf__add_field(b, "base", vptr, 0, 0) == 0);
    REQUIRE(btf__add_field(b, "size", u32, 64, 0) == 0);
    REQUIRE(btf__add_field(b, "text_size", u32, 96, 0) == 0);
    int arch = btf__add_struct(b, "mod_arch_specific", 24);
    REQUIRE(btf__add_field(b, "num_orcs", u32, 0, 0) == 0);
    REQUIRE(btf__add_field(b, "orc_unwind_ip", vptr, 64, 0) == 0);
    REQUIRE(btf__add_field(b, "orc_unwind", vptr, 128, 0) == 0);
    btf__add_struct(b, "mod_kallsyms", 32);
    REQUIRE(btf__add_field(b, "symtab", vptr, 0, 0) == 0);
    REQUIRE(btf__add_field(b, "num_symtab", u32, 64, 0) == 0);
    REQUIRE(btf__add_field(b, "strtab", vptr, 128, 0) == 0);
    REQUIRE(btf__add_field(b, "typetab", vptr, 192, 0) == 0);
    btf__add_struct(b, "module", 1024);
    uint32_t state_at = shape == SHAPE_MODULE_OUTSIDE ? 2000 : 0;
    REQUIRE(btf__add_field(b, "state", u32, state_at * 8, 0) == 0);
    REQUIRE(btf__add_field(b, "list", list, 64, 0) == 0);
    REQUIRE(btf__add_field(b, "name", name, 192, 0) == 0);
    REQUIRE(btf__add_field(b, "core_layout", layout, 320 * 8, 0) == 0);
    REQUIRE(btf__add_field(b, "init_layout", layout, 336 * 8, 0) == 0);
    REQUIRE(btf__add_field(b, "arch", arch, 832 * 8, 0) == 0);
    REQUIRE(btf__add_field(b, "kallsyms", vptr, 864 * 8, 0) == 0);
    btf__add_enum(b, "module_state", 4);
    REQUIRE(btf__add_enum_value(b, "MODULE_STATE_LIVE", 0) == 0);
    REQUIRE(btf__add_enum_value(b, "MODULE_STATE_COMING", 1) == 0);
    REQUIRE(btf__add_enum_value(b, "MODULE_STATE_GOING", 2) == 0);
    REQUIRE(btf__add_enum_value(b, "MODULE_STATE_UNFORMED", 3) == 0);
}

/* Builds the synthetic BTF; drop names one member to leave out, to test the error. Returns a
 * malloc'd raw blob. */
static void *build_btf(const char *drop, uint32_t *size)
{
    struct btf *b = btf__new_empty();
    REQUIRE(b);
    int u32 = btf__add_int(b, "unsigned int", 4, 0);
    int s32 = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
    int u64 = btf__add_int(b, "long unsigned int", 8, 0);
    int chr = btf__add_int(b, "char", 1, BTF_INT_CHAR);
    int comm = btf__add_array(b, u32, chr, 16);
    int vptr = btf__add_ptr(b, 0);
#define FIELD(name, type, byte)                                                                    \
    if (!drop || strcmp(drop, name) != 0)                                                          \
    REQUIRE(btf__add_field(b, name, type, (byte)*8, 0) == 0)

    /* task_struct: pid and tgid inside an anonymous struct inside an anonymous union */
    int task_in = btf__add_struct(b, NULL, 8);
    FIELD("pid", s32, 0);
    FIELD("tgid", s32, 4);
    int task_un = btf__add_union(b, NULL, 8);
    REQUIRE(btf__add_field(b, NULL, task_in, 0, 0) == 0);
    int wrapping = shape == SHAPE_COMM_WRAPS ? add_wrapping_comm(b, comm) : 0;
    int fan_out = shape == SHAPE_FAN_OUT ? add_fan_out(b, u32) : 0;
    int task = btf__add_struct(b, "task_struct", 4096);
    if (fan_out)
        REQUIRE(btf__add_field(b, NULL, fan_out, 0, 0) == 0);
    if (wrapping)
        REQUIRE(btf__add_field(b, NULL, wrapping, 0xfffffff8u, 0) == 0);
    FIELD("stack", vptr, 32);
    FIELD("flags", u32, 44);
    REQUIRE(btf__add_field(b, NULL, task_un, 1000 * 8, 0) == 0);
    FIELD("mm", vptr, 2000);
    if (!wrapping)
        FIELD("comm", comm, 3000);

    int mt = btf__add_struct(b, "maple_tree", 24);
    FIELD("ma_root", vptr, 8);
    int mm_in = btf__add_struct(b, NULL, 1000); /* 6.1: everything in one anonymous struct */
    FIELD("mm_mt", mt, 0);
    FIELD("pgd", vptr, 72);
    int mm = btf__add_struct(b, "mm_struct", 1096);
    REQUIRE(btf__add_field(b, NULL, mm_in, 64 * 8, 0) == 0);

    int meta = btf__add_struct(b, "maple_metadata", 2);
    int piv15 = btf__add_array(b, u32, u64, 15), slot16 = btf__add_array(b, u32, vptr, 16);
    int pad15 = btf__add_array(b, u32, vptr, 15);
    int r64_pad = btf__add_struct(b, NULL, 128);
    REQUIRE(btf__add_field(b, "pad", pad15, 0, 0) == 0);
    FIELD("meta", meta, 120);
    int r64_un = btf__add_union(b, NULL, 128);
    FIELD("slot", slot16, 0);
    REQUIRE(btf__add_field(b, NULL, r64_pad, 0, 0) == 0);
    btf__add_struct(b, "maple_range_64", 256);
    REQUIRE(btf__add_field(b, "parent", vptr, 0, 0) == 0);
    FIELD("pivot", piv15, 8);
    REQUIRE(btf__add_field(b, NULL, r64_un, 128 * 8, 0) == 0);
    int piv9 = btf__add_array(b, u32, u64, 9), slot10 = btf__add_array(b, u32, vptr, 10);
    btf__add_struct(b, "maple_arange_64", 248);
    FIELD("pivot", piv9, 8);
    FIELD("slot", slot10, 80);
    FIELD("meta", meta, 240);

    /* vm_area_struct: vm_flags in an anonymous union, as in 6.3+ */
    int vflags = btf__add_union(b, NULL, 8);
    FIELD("vm_flags", u64, 0);
    btf__add_struct(b, "vm_area_struct", 200);
    FIELD("vm_start", u64, 0);
    FIELD("vm_end", u64, 8);
    REQUIRE(btf__add_field(b, NULL, vflags, 40 * 8, 0) == 0);
    FIELD("vm_pgoff", u64, 120);
    FIELD("vm_file", vptr, 160);
    int path = btf__add_struct(b, "path", 16);
    FIELD("dentry", vptr, 8);
    btf__add_struct(b, "file", 256);
    FIELD("f_path", path, 64);
    int hash_len = btf__add_struct(b, NULL, 8);
    REQUIRE(btf__add_field(b, "hash", u32, 0, 0) == 0);
    FIELD("len", u32, 4);
    int qstr_un = btf__add_union(b, NULL, 8);
    REQUIRE(btf__add_field(b, NULL, hash_len, 0, 0) == 0);
    int qstr = btf__add_struct(b, "qstr", 16);
    REQUIRE(btf__add_field(b, NULL, qstr_un, 0, 0) == 0);
    FIELD("name", vptr, 8);
    btf__add_struct(b, "dentry", 192);
    FIELD("d_parent", vptr, 24);
    FIELD("d_name", qstr, 48);

    /* 6.2 to 6.14: current_task and cpu_number in pcpu_hot */
    int hot = btf__add_struct(b, "pcpu_hot", 64);
    FIELD("current_task", vptr, 0);
    FIELD("cpu_number", s32, 16);
    int v_hot = btf__add_var(b, "pcpu_hot", BTF_VAR_GLOBAL_ALLOCATED, hot);
    int v_off = btf__add_var(b, "this_cpu_off", BTF_VAR_GLOBAL_ALLOCATED, u64);
    btf__add_datasec(b, ".data..percpu", 0x10000);
    REQUIRE(btf__add_datasec_var_info(b, v_off, 0x100, 8) == 0);
    REQUIRE(btf__add_datasec_var_info(b, v_hot, 0x2000, 64) == 0);
#undef FIELD
    add_module(b, u32, chr, vptr);
    (void)task, (void)mm;
    const void *raw = btf__raw_data(b, size);
    REQUIRE(raw);
    void *copy = malloc(*size);
    REQUIRE(copy);
    memcpy(copy, raw, *size);
    btf__free(b);
    return copy;
}

static int offsets_of(const void *raw, size_t size, struct lx_offsets *o, struct qp_error *err)
{
    lx_btf *b = NULL;
    int rc = lx_btf_new(raw, size, &b, err);
    if (!rc)
        rc = lx_btf_offsets(b, o, err);
    lx_btf_free(b);
    return rc;
}

static void test_synthetic(void)
{
    uint32_t size;
    void *raw = build_btf(NULL, &size);
    struct lx_offsets o;
    struct qp_error err = {0};
    int rc = offsets_of(raw, size, &o, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    CHECK_INT(o.task_size, 4096);
    CHECK_INT(o.task_pid, 1000);
    CHECK_INT(o.task_tgid, 1004);
    CHECK_INT(o.task_comm, 3000);
    CHECK_INT(o.task_mm, 2000);
    CHECK_INT(o.task_stack, 32);
    CHECK_INT(o.task_flags, 44);
    CHECK_INT(o.mm_mt, 64);
    CHECK_INT(o.mm_pgd, 64 + 72);
    CHECK_INT(o.mt_root, 8);
    CHECK_INT(o.vma_start, 0);
    CHECK_INT(o.vma_end, 8);
    CHECK_INT(o.vma_flags, 40);
    CHECK_INT(o.vma_pgoff, 120);
    CHECK_INT(o.vma_file, 160);
    CHECK_INT(o.file_path, 64);
    CHECK_INT(o.path_dentry, 8);
    CHECK_INT(o.dentry_name, 48);
    CHECK_INT(o.dentry_parent, 24);
    CHECK_INT(o.qstr_len, 4);
    CHECK_INT(o.qstr_name, 8);
    CHECK_U64(o.percpu_current_task, 0x2000);
    CHECK_U64(o.percpu_cpu_number, 0x2010);
    CHECK_U64(o.percpu_this_cpu_off, 0x100);
    CHECK(o.has_pcpu_hot);
    CHECK_INT(o.mt_r64_pivot, 8);
    CHECK_INT(o.mt_r64_slot, 128);
    CHECK_INT(o.mt_r64_meta, 248);
    CHECK_INT(o.mt_r64_pivots, 15);
    CHECK_INT(o.mt_a64_pivot, 8);
    CHECK_INT(o.mt_a64_slot, 80);
    CHECK_INT(o.mt_a64_meta, 240);
    CHECK_INT(o.mt_a64_pivots, 9);
    free(raw);
}

/* Each missing member gives an error that names it. */
static void test_missing(void)
{
    const char *drops[] = {"comm", "pgd", "d_parent", "len", "vm_flags", "meta"};
    for (size_t i = 0; i < sizeof(drops) / sizeof(drops[0]); i++) {
        uint32_t size;
        void *raw = build_btf(drops[i], &size);
        struct lx_offsets o;
        struct qp_error err = {0};
        int rc = offsets_of(raw, size, &o, &err);
        CHECK_MSG(rc == -ENOENT, "dropping %s: rc %d", drops[i], rc);
        CHECK_MSG(strstr(err.msg, drops[i]) != NULL, "dropping %s: \"%s\"", drops[i], err.msg);
        free(raw);
    }
}

/* No per-CPU variables in BTF (Debian 5.10's pahole): the offsets stand, marked for kallsyms
 * to fill in. A mm_struct with neither a maple tree nor the red-black tree: one line naming it. */
static void test_older_layouts(void)
{
    uint32_t size;
    void *raw = build_btf("current_task", &size);
    struct lx_offsets o;
    struct qp_error err = {0};
    CHECK_INT(offsets_of(raw, size, &o, &err), 0);
    CHECK(o.percpu_unknown);
    free(raw);
    raw = build_btf("mm_mt", &size);
    CHECK_INT(offsets_of(raw, size, &o, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "mm_struct") && strstr(err.msg, "mm_rb") && !strchr(err.msg, '\n'),
              "\"%s\"", err.msg);
    free(raw);
}

static void test_garbage(void)
{
    struct qp_error err = {0};
    lx_btf *b = (lx_btf *)1;
    uint8_t junk[256];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    CHECK_INT(lx_btf_new(junk, sizeof(junk), &b, &err), -EINVAL);
    CHECK(b == NULL);
    CHECK(strstr(err.msg, "BTF") != NULL);
    CHECK_INT(lx_btf_new(junk, 3, &b, &err), -EINVAL);
    /* a valid header over a truncated type section */
    uint32_t size;
    void *raw = build_btf(NULL, &size);
    CHECK_INT(lx_btf_new(raw, size / 2, &b, &err), -EINVAL);
    /* the right magic, nothing else right */
    memset(junk, 0xff, sizeof(junk));
    junk[0] = 0x9f, junk[1] = 0xeb, junk[2] = 1;
    CHECK_INT(lx_btf_new(junk, sizeof(junk), &b, &err), -EINVAL);
    free(raw);
}

/* lx_btf_offsets on a hostile shape: refused with an error, in milliseconds. The alarm turns
 * the old unbounded search (hours) into a failure instead of a test that never ends. */
static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: lx_btf_offsets still searching after 120 s\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(1);
    _exit(1);
}

static void check_refused(enum shape which, const char *expect)
{
    shape = which;
    uint32_t size;
    void *raw = build_btf(NULL, &size);
    shape = SHAPE_PLAIN;
    struct lx_offsets o;
    struct qp_error err = {0};
    signal(SIGALRM, on_alarm);
    alarm(120);
    int rc = offsets_of(raw, size, &o, &err);
    alarm(0);
    CHECK_MSG(rc < 0, "shape %d accepted: comm at %u of %u", (int)which, o.task_comm, o.task_size);
    CHECK_MSG(strstr(err.msg, expect) != NULL, "shape %d: \"%s\"", (int)which, err.msg);
    free(raw);
}

/* Issue 34: comm at byte 0xfffffff8 (the 32-bit check wrapped to 8 and passed; lx_task_read
 * then read 4 GiB past its buffer), and an anonymous-member fan-out (the search had no bound).
 * lx_task_read is also given the wrapping offsets directly, as a caller's struct might. */
static void test_hostile(void)
{
    check_refused(SHAPE_COMM_WRAPS, "comm");
    check_refused(SHAPE_FAN_OUT, "no member");
    /* struct module's state past its end: refused (get_u32 read past the module's copy) */
    uint32_t size;
    struct lx_module_offsets mo;
    struct qp_error merr = {0};
    lx_btf *b = NULL;
    void *raw = build_btf(NULL, &size);
    CHECK_INT(lx_btf_new(raw, size, &b, &merr), 0);
    CHECK_MSG(lx_btf_module_offsets(b, &mo, &merr) == 0, "%s", merr.msg);
    CHECK_INT((int)mo.state, 0);
    CHECK_INT((int)mo.init_text_size, 348);
    lx_btf_free(b);
    free(raw);
    shape = SHAPE_MODULE_OUTSIDE;
    raw = build_btf(NULL, &size);
    shape = SHAPE_PLAIN;
    CHECK_INT(lx_btf_new(raw, size, &b, &merr), 0);
    CHECK_INT(lx_btf_module_offsets(b, &mo, &merr), -EINVAL);
    CHECK_MSG(strstr(merr.msg, "state") != NULL, "\"%s\"", merr.msg);
    lx_btf_free(b);
    free(raw);
    struct lx_offsets o;
    lx_offsets_debian12_6_1(&o);
    o.task_comm = 0xfffffff8u;
    o.task_pid = o.task_tgid = o.task_mm = o.task_stack = o.task_flags = 0xfffffff0u;
    uint32_t lo, hi;
    lx_task_span(&o, &lo, &hi);
    CHECK_MSG(hi - lo > 65536, "span [%u, %u) looks readable", lo, hi);
    static uint8_t task[4096];
    struct lx_reader r = {.read = read_zeros, .ctx = task};
    struct lx_task_info info;
    struct qp_error err = {0};
    CHECK_INT(lx_task_read(&o, &r, 0xffff888000001000ull, &info, &err), -EINVAL);
}

/* Writes the seeds of fuzz target lx_btf into dir: the synthetic BTF and each hostile shape. */
static int write_seeds(const char *dir)
{
    static const char *const names[] = {"synthetic", "comm_wraps", "fan_out", "module_outside"};
    for (int i = 0; i < 4; i++) {
        shape = (enum shape)i;
        uint32_t size;
        void *raw = build_btf(NULL, &size);
        char *path = g_strdup_printf("%s/%s.btf", dir, names[i]);
        GError *gerr = NULL;
        if (!g_file_set_contents(path, raw, size, &gerr)) {
            fprintf(stderr, "%s\n", gerr->message);
            return 1;
        }
        g_free(path);
        free(raw);
    }
    shape = SHAPE_PLAIN;
    return 0;
}

/* The enum maple_type values lx_task.c decodes node pointers with (0 dense ... 3 arange_64). */
static void check_maple_enum(const struct btf *btf)
{
    const char *names[] = {"maple_dense", "maple_leaf_64", "maple_range_64", "maple_arange_64"};
    int id = btf__find_by_name_kind(btf, "maple_type", BTF_KIND_ENUM);
    REQUIRE(id > 0);
    const struct btf_type *t = btf__type_by_id(btf, (uint32_t)id);
    const struct btf_enum *e = btf_enum(t);
    int matched = 0;
    for (uint16_t i = 0; i < btf_vlen(t); i++, e++)
        for (int k = 0; k < 4; k++)
            if (strcmp(btf__name_by_offset(btf, e->name_off), names[k]) == 0) {
                CHECK_MSG(e->val == k, "%s = %d", names[k], e->val);
                matched++;
            }
    CHECK_INT(matched, 4);
}

static void check_debian_6_1_0_56(const struct lx_offsets *o)
{
    /* LINUX-GUESTS.md §0.2, read from this build's BTF by an independent reader */
    CHECK_INT(o->task_pid, 2416);
    CHECK_INT(o->task_tgid, 2420);
    CHECK_INT(o->task_comm, 2976);
    CHECK_INT(o->task_mm, 2272);
    CHECK_INT(o->task_stack, 32);
    CHECK_INT(o->task_flags, 44);
    CHECK_INT(o->task_size, 9792);
    CHECK_INT(o->mm_pgd, 72);
    CHECK_INT(o->mm_mt, 0);
    CHECK_INT(o->mt_root, 8);
    CHECK_INT(o->vma_start, 0);
    CHECK_INT(o->vma_end, 8);
    CHECK_INT(o->vma_flags, 32);
    CHECK_INT(o->vma_pgoff, 104);
    CHECK_INT(o->vma_file, 112);
    CHECK_INT(o->file_path, 16);
    CHECK_INT(o->path_dentry, 8);
    CHECK_INT(o->dentry_parent, 24);
    CHECK_INT(o->dentry_name, 32);
    CHECK_INT(o->qstr_len, 4);
    CHECK_INT(o->qstr_name, 8);
    CHECK_U64(o->percpu_current_task, 0x1fb80);
    CHECK_U64(o->percpu_cpu_number, 0x199e0);
    CHECK_U64(o->percpu_this_cpu_off, 0x199e8);
    CHECK(!o->has_pcpu_hot);
    CHECK_INT(o->mt_r64_pivot, 8);
    CHECK_INT(o->mt_r64_slot, 128);
    CHECK_INT(o->mt_r64_meta, 248);
    CHECK_INT(o->mt_a64_slot, 80);
    CHECK_INT(o->mt_a64_meta, 240);
    CHECK_INT(o->mt_a64_pivot, 8);
    CHECK_INT(o->mt_r64_pivots, 15);
    CHECK_INT(o->mt_a64_pivots, 9);
    /* the reference table the other tests use is this build's */
    struct lx_offsets ref;
    lx_offsets_debian12_6_1(&ref);
#define SAME(field) CHECK_U64(ref.field, o->field)
    SAME(task_size);
    SAME(task_pid);
    SAME(task_tgid);
    SAME(task_comm);
    SAME(task_mm);
    SAME(task_stack);
    SAME(task_flags);
    SAME(mm_pgd);
    SAME(mm_mt);
    SAME(mt_root);
    SAME(vma_start);
    SAME(vma_end);
    SAME(vma_pgoff);
    SAME(vma_file);
    SAME(vma_flags);
    SAME(file_path);
    SAME(path_dentry);
    SAME(dentry_name);
    SAME(dentry_parent);
    SAME(qstr_name);
    SAME(qstr_len);
    SAME(percpu_current_task);
    SAME(percpu_cpu_number);
    SAME(percpu_this_cpu_off);
    SAME(has_pcpu_hot);
    SAME(has_rq_curr);
    SAME(rq_curr);
    SAME(percpu_runqueues);
    SAME(mt_r64_pivot);
    SAME(mt_r64_slot);
    SAME(mt_r64_meta);
    SAME(mt_r64_pivots);
    SAME(mt_a64_pivot);
    SAME(mt_a64_slot);
    SAME(mt_a64_meta);
    SAME(mt_a64_pivots);
#undef SAME
}

/* For other builds: relations every x86_64 kernel with a maple tree satisfies. */
static void check_sanity(const struct lx_offsets *o)
{
    CHECK(o->task_comm + 16 <= o->task_size);
    CHECK(o->task_tgid == o->task_pid + 4);
    CHECK(o->task_stack < o->task_mm && o->task_mm < o->task_pid);
    CHECK_INT(o->vma_end, o->vma_start + 8);
    CHECK_INT(o->mt_r64_pivots, 15);
    CHECK_INT(o->mt_a64_pivots, 9);
    CHECK(o->percpu_this_cpu_off != o->percpu_current_task);
    CHECK(o->percpu_current_task < 0x100000 && o->percpu_this_cpu_off < 0x100000);
    /* BTF that names per-CPU variables names the run queue too */
    CHECK(o->percpu_unknown || (o->has_rq_curr && o->rq_curr > 0 && o->percpu_runqueues > 0));
}

static int test_real(const char *path)
{
    gsize len = 0;
    gchar *raw = NULL;
    g_file_get_contents(path, &raw, &len, NULL);
    if (!raw) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    char release[128] = "";
    char rel_path[4096];
    snprintf(rel_path, sizeof(rel_path), "%s.release", path);
    FILE *f = fopen(rel_path, "r");
    if (f) {
        if (fgets(release, sizeof(release), f))
            release[strcspn(release, "\n")] = '\0';
        fclose(f);
    }
    struct lx_offsets o;
    struct qp_error err = {0};
    lx_btf *b = NULL;
    int rc = lx_btf_new(raw, len, &b, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc == 0) {
        rc = lx_btf_offsets(b, &o, &err);
        CHECK_MSG(rc == 0, "%s", err.msg);
        struct btf *raw_btf = btf__new(raw, (uint32_t)len);
        REQUIRE(raw_btf);
        check_maple_enum(raw_btf);
        btf__free(raw_btf);
    }
    if (rc == 0) {
        fprintf(stderr,
                "%s: task_struct %u bytes, pid %u tgid %u comm %u mm %u stack %u; mm pgd %u mm_mt "
                "%u; current_task %s+0x%llx; rq->curr %s runqueues+0x%llx at 0x%x\n",
                release[0] ? release : "?", o.task_size, o.task_pid, o.task_tgid, o.task_comm,
                o.task_mm, o.task_stack, o.mm_pgd, o.mm_mt,
                o.has_pcpu_hot ? "pcpu_hot " : "percpu ", (unsigned long long)o.percpu_current_task,
                o.has_rq_curr ? "at" : "not in BTF:", (unsigned long long)o.percpu_runqueues,
                o.rq_curr);
        check_sanity(&o);
        if (strcmp(release, "6.1.0-56-amd64") == 0)
            check_debian_6_1_0_56(&o);
    }
    lx_btf_free(b);
    g_free(raw);
    return harness_result();
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    if (strcmp(which, "real") == 0 && argc > 2)
        return test_real(argv[2]);
    if (strcmp(which, "seed") == 0 && argc > 2)
        return write_seeds(argv[2]);
    if (strcmp(which, "synthetic") == 0)
        test_synthetic();
    else if (strcmp(which, "missing") == 0) {
        test_missing();
        test_older_layouts();
    } else if (strcmp(which, "garbage") == 0)
        test_garbage();
    else if (strcmp(which, "hostile") == 0)
        test_hostile();
    else {
        fprintf(stderr, "usage: %s synthetic|missing|garbage|hostile|real FILE\n", argv[0]);
        return 2;
    }
    return harness_result();
}
