/* lx_btf: struct offsets and per-CPU variable offsets from the kernel's own BTF, through libbpf.
 *
 * Names are looked up, never positions: a member may sit in an anonymous struct or union at any
 * depth (mm_struct puts everything in one in 6.1; vm_area_struct and qstr use unions), so the
 * lookup descends into unnamed composite members and adds their offsets. */
#include "lx_task.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct lx_btf {
    struct btf *btf;
};

/* libbpf prints its parse warnings on stderr; the caller gets ours through qp_error instead. */
static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    return 0;
}

int lx_btf_new(const void *data, size_t len, lx_btf **out, struct qp_error *err)
{
    *out = NULL;
    if (!data || len < 24 || len > UINT32_MAX)
        return qp_error_set(err, -EINVAL, "BTF: %zu bytes is not a BTF blob", len);
    lx_btf *b = calloc(1, sizeof(*b));
    if (!b)
        return qp_error_set(err, -ENOMEM, "BTF: out of memory");
    libbpf_print_fn_t old = libbpf_set_print(quiet_print);
    b->btf = btf__new(data, (uint32_t)len); /* copies data */
    int saved_errno = errno;
    libbpf_set_print(old);
    if (!b->btf) {
        free(b);
        return qp_error_set(err, -EINVAL, "BTF: libbpf rejected the %zu-byte blob: %s", len,
                            strerror(saved_errno ? saved_errno : EINVAL));
    }
    *out = b;
    return 0;
}

void lx_btf_free(lx_btf *b)
{
    if (!b)
        return;
    btf__free(b->btf);
    free(b);
}

/* The struct or union type id behind id (through typedefs and qualifiers), or 0. */
static uint32_t composite_id(const struct btf *btf, uint32_t id)
{
    int resolved = btf__resolve_type(btf, id);
    if (resolved <= 0)
        return 0;
    const struct btf_type *t = btf__type_by_id(btf, (uint32_t)resolved);
    return t && btf_is_composite(t) ? (uint32_t)resolved : 0;
}

/* The nested search's bounds: a guest's BTF decides how anonymous members nest, and without a
 * cap on the work a small blob (fan-out 8, depth 9) takes tens of minutes. A real kernel's
 * task_struct visits a few hundred members. */
#define MEMBER_MAX_DEPTH  8
#define MEMBER_MAX_VISITS 16384

struct member_search {
    const char *name;
    unsigned visits; /* members looked at so far, all depths together */
    uint64_t bits;   /* the result: offset in bits from the start of the outer type */
    uint32_t type_id;
};

/* Finds s->name in composite type id, descending into anonymous struct/union members up to
 * MEMBER_MAX_DEPTH and MEMBER_MAX_VISITS in all; fills s->bits and s->type_id. */
static bool member_search(const struct btf *btf, uint32_t id, int depth, struct member_search *s)
{
    const struct btf_type *t = btf__type_by_id(btf, id);
    if (!t || !btf_is_composite(t) || depth > MEMBER_MAX_DEPTH)
        return false;
    const struct btf_member *m = btf_members(t);
    for (uint16_t i = 0; i < btf_vlen(t); i++, m++) {
        if (++s->visits > MEMBER_MAX_VISITS)
            return false;
        const char *mname = btf__name_by_offset(btf, m->name_off);
        uint64_t here = btf_member_bit_offset(t, i);
        if (mname && *mname) {
            if (strcmp(mname, s->name) == 0) {
                s->bits = here;
                s->type_id = m->type;
                return true;
            }
            continue;
        }
        uint32_t inner = composite_id(btf, m->type);
        if (inner && member_search(btf, inner, depth + 1, s)) {
            s->bits += here;
            return true;
        }
    }
    return false;
}

/* Member `name` of composite type id (member_search); *bits receives its offset in bits from
 * the start of the type, *type_id (when not NULL) its type. */
static bool member_bits(const struct btf *btf, uint32_t id, const char *name, int depth,
                        uint64_t *bits, uint32_t *type_id)
{
    struct member_search s = {.name = name};
    if (!member_search(btf, id, depth, &s))
        return false;
    *bits = s.bits;
    if (type_id)
        *type_id = s.type_id;
    return true;
}

/* Whether [off, off + width) lies in a struct of size bytes; 64-bit sums, so a guest's offset
 * near 4 GiB does not wrap around into a small one. */
static bool fits(uint64_t off, uint64_t width, uint64_t size)
{
    return off + width <= size;
}

/* Resolves "struct S" (or union) by name. */
static int find_composite(const struct btf *btf, const char *type, uint32_t *id,
                          struct qp_error *err)
{
    int found = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
    if (found <= 0)
        found = btf__find_by_name_kind(btf, type, BTF_KIND_UNION);
    if (found <= 0)
        return qp_error_set(err, -ENOENT, "BTF: no struct %s", type);
    *id = (uint32_t)found;
    return 0;
}

/* Byte offset of member of struct type; fails naming both when absent, a bitfield, or when
 * [offset, offset + width) or the member itself (its size in BTF) does not lie inside the
 * struct: width is what the readers read there, 0 for no more than the member. */
static int member_offset(const struct btf *btf, const char *type, const char *member,
                         uint32_t width, uint32_t *out, struct qp_error *err)
{
    uint32_t id = 0, mtype = 0;
    uint64_t bits;
    int rc = find_composite(btf, type, &id, err);
    if (rc)
        return rc;
    if (!member_bits(btf, id, member, 0, &bits, &mtype))
        return qp_error_set(err, -ENOENT,
                            "BTF: struct %s has no member %s (searched %d levels of anonymous "
                            "members, %d members at most)",
                            type, member, MEMBER_MAX_DEPTH, MEMBER_MAX_VISITS);
    uint32_t size = btf__type_by_id(btf, id)->size;
    long msize = btf__resolve_size(btf, mtype);
    uint64_t need = msize > (long)width ? (uint64_t)msize : width;
    if (bits % 8 || !fits(bits / 8, need, size))
        return qp_error_set(err, -EINVAL,
                            "BTF: %s.%s at bit %llu (%llu bytes) does not lie inside its %u "
                            "bytes",
                            type, member, (unsigned long long)bits, (unsigned long long)need, size);
    *out = (uint32_t)(bits / 8);
    return 0;
}

static int struct_size(const struct btf *btf, const char *type, uint32_t *out, struct qp_error *err)
{
    uint32_t id = 0;
    int rc = find_composite(btf, type, &id, err);
    if (rc)
        return rc;
    *out = btf__type_by_id(btf, id)->size;
    return 0;
}

struct member_spec {
    const char *type, *member;
    uint32_t width; /* bytes the readers read at the member (member_offset), 0: its own size */
    uint32_t *out;
};

static int resolve_members(const struct btf *btf, const struct member_spec *specs, size_t n,
                           struct qp_error *err)
{
    for (size_t i = 0; i < n; i++) {
        int rc =
            member_offset(btf, specs[i].type, specs[i].member, specs[i].width, specs[i].out, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Offset of per-CPU variable `name` in DATASEC .data..percpu; -ENOENT when it is not there. */
static int percpu_var(const struct btf *btf, const char *name, uint64_t *offset, uint32_t *type,
                      struct qp_error *err)
{
    int sec = btf__find_by_name_kind(btf, ".data..percpu", BTF_KIND_DATASEC);
    if (sec <= 0)
        return qp_error_set(err, -ENOENT, "BTF: no DATASEC .data..percpu (per-CPU variables)");
    const struct btf_type *t = btf__type_by_id(btf, (uint32_t)sec);
    const struct btf_var_secinfo *v = btf_var_secinfos(t);
    for (uint16_t i = 0; i < btf_vlen(t); i++, v++) {
        const struct btf_type *var = btf__type_by_id(btf, v->type);
        if (!var || !btf_is_var(var))
            continue;
        const char *vname = btf__name_by_offset(btf, var->name_off);
        if (vname && strcmp(vname, name) == 0) {
            *offset = v->offset;
            if (type)
                *type = var->type;
            return 0;
        }
    }
    return qp_error_set(err, -ENOENT, "BTF: no per-CPU variable %s", name);
}

/* A per-CPU value that is either its own variable (<= 6.1, >= 6.15) or a member of pcpu_hot
 * (6.2 to 6.14). *in_hot tells which. */
static int percpu_var_or_hot(const struct btf *btf, const char *name, uint64_t *offset,
                             bool *in_hot, struct qp_error *err)
{
    *in_hot = false;
    if (percpu_var(btf, name, offset, NULL, NULL) == 0)
        return 0;
    uint64_t hot;
    uint32_t hot_type, hot_id;
    uint64_t bits;
    if (percpu_var(btf, "pcpu_hot", &hot, &hot_type, NULL) == 0 &&
        (hot_id = composite_id(btf, hot_type)) != 0 &&
        member_bits(btf, hot_id, name, 0, &bits, NULL) && bits % 8 == 0) {
        *offset = hot + bits / 8;
        *in_hot = true;
        return 0;
    }
    return qp_error_set(err, -ENOENT, "BTF: no per-CPU variable %s, nor pcpu_hot.%s", name, name);
}

static int resolve_percpu(const struct btf *btf, struct lx_offsets *o, struct qp_error *err)
{
    bool hot_cpu;
    int rc = percpu_var_or_hot(btf, "current_task", &o->percpu_current_task, &o->has_pcpu_hot, err);
    if (!rc)
        rc = percpu_var_or_hot(btf, "cpu_number", &o->percpu_cpu_number, &hot_cpu, err);
    if (!rc)
        rc = percpu_var(btf, "this_cpu_off", &o->percpu_this_cpu_off, NULL, err);
    return rc;
}

/* Length of the array member `member` of struct type (e.g. maple_range_64.pivot). */
static int array_len(const struct btf *btf, const char *type, const char *member, uint32_t *out,
                     struct qp_error *err)
{
    uint32_t id = 0, mtype = 0;
    uint64_t bits;
    int rc = find_composite(btf, type, &id, err);
    if (rc)
        return rc;
    if (!member_bits(btf, id, member, 0, &bits, &mtype))
        return qp_error_set(err, -ENOENT, "BTF: struct %s has no member %s", type, member);
    const struct btf_type *t = btf__type_by_id(btf, mtype);
    if (!t || !btf_is_array(t))
        return qp_error_set(err, -EINVAL, "BTF: %s.%s is not an array", type, member);
    *out = btf_array(t)->nelems;
    return 0;
}

/* The maple node layouts, checked against what the walker assumes: 8-byte pivots and slots in
 * a 256-byte node, as many slots as pivots + 1, metadata inside the node. */
static int resolve_maple(const struct btf *btf, struct lx_offsets *o, struct qp_error *err)
{
    const struct member_spec specs[] = {
        {"maple_tree", "ma_root", 8, &o->mt_root},
        {"maple_range_64", "pivot", 0, &o->mt_r64_pivot},
        {"maple_range_64", "slot", 0, &o->mt_r64_slot},
        {"maple_range_64", "meta", 1, &o->mt_r64_meta},
        {"maple_arange_64", "pivot", 0, &o->mt_a64_pivot},
        {"maple_arange_64", "slot", 0, &o->mt_a64_slot},
        {"maple_arange_64", "meta", 1, &o->mt_a64_meta},
    };
    int rc = resolve_members(btf, specs, sizeof(specs) / sizeof(specs[0]), err);
    uint32_t r64_slots = 0, a64_slots = 0;
    if (!rc)
        rc = array_len(btf, "maple_range_64", "pivot", &o->mt_r64_pivots, err);
    if (!rc)
        rc = array_len(btf, "maple_range_64", "slot", &r64_slots, err);
    if (!rc)
        rc = array_len(btf, "maple_arange_64", "pivot", &o->mt_a64_pivots, err);
    if (!rc)
        rc = array_len(btf, "maple_arange_64", "slot", &a64_slots, err);
    if (rc)
        return rc;
    bool sane = (uint64_t)r64_slots == (uint64_t)o->mt_r64_pivots + 1 &&
                (uint64_t)a64_slots == (uint64_t)o->mt_a64_pivots + 1 && r64_slots <= 32 &&
                a64_slots <= 32 && fits(o->mt_r64_pivot, 8 * (uint64_t)o->mt_r64_pivots, 256) &&
                fits(o->mt_r64_slot, 8 * (uint64_t)r64_slots, 256) && o->mt_r64_meta < 256 &&
                fits(o->mt_a64_pivot, 8 * (uint64_t)o->mt_a64_pivots, 256) &&
                fits(o->mt_a64_slot, 8 * (uint64_t)a64_slots, 256) && o->mt_a64_meta < 256;
    if (!sane)
        return qp_error_set(err, -EINVAL,
                            "BTF: maple node layout not understood (range_64: %u pivots at %u, "
                            "%u slots at %u; arange_64: %u pivots at %u, %u slots at %u)",
                            o->mt_r64_pivots, o->mt_r64_pivot, r64_slots, o->mt_r64_slot,
                            o->mt_a64_pivots, o->mt_a64_pivot, a64_slots, o->mt_a64_slot);
    return 0;
}

/* 6.1+: mm_struct.mm_mt, a maple tree; before: mm_rb and mmap (VMAs in a red-black tree and a
 * list). Whichever mm_struct has decides. */
static int resolve_vma_tree(const struct btf *btf, struct lx_offsets *o, struct qp_error *err)
{
    if (member_offset(btf, "mm_struct", "mm_mt", 0, &o->mm_mt, NULL) == 0)
        return resolve_maple(btf, o, err);
    const struct member_spec rb[] = {
        {"mm_struct", "mm_rb", 8, &o->mm_rb},       {"mm_struct", "mmap", 8, &o->mm_mmap},
        {"vm_area_struct", "vm_rb", 0, &o->vma_rb}, {"vm_area_struct", "vm_next", 8, &o->vma_next},
        {"rb_node", "rb_left", 8, &o->rb_left},     {"rb_node", "rb_right", 8, &o->rb_right},
    };
    struct qp_error why = {0};
    if (resolve_members(btf, rb, sizeof rb / sizeof rb[0], &why))
        return qp_error_set(err, -ENOTSUP,
                            "BTF: struct mm_struct has neither mm_mt (6.1+) nor mm_rb and mmap "
                            "(before 6.1): %s",
                            why.msg);
    o->has_rb = true;
    return 0;
}

/* The page cache's offsets (lx_file_page), all or none: optional. */
static void resolve_page_cache(const struct btf *btf, struct lx_offsets *o)
{
    const struct member_spec specs[] = {
        {"file", "f_mapping", 8, &o->file_mapping},
        {"address_space", "i_pages", 0, &o->mapping_i_pages},
        {"xarray", "xa_head", 8, &o->xa_head},
        {"xa_node", "shift", 1, &o->xa_node_shift},
        {"xa_node", "slots", 0, &o->xa_node_slots},
    };
    struct qp_error ignored = {0};
    o->has_page_cache =
        resolve_members(btf, specs, sizeof specs / sizeof specs[0], &ignored) == 0 &&
        struct_size(btf, "page", &o->page_struct_size, &ignored) == 0 &&
        o->page_struct_size >= 32 && o->page_struct_size <= 256;
}

int lx_btf_offsets(const lx_btf *b, struct lx_offsets *out, struct qp_error *err)
{
    struct lx_offsets o = {0};
    const struct btf *btf = b->btf;
    const struct member_spec specs[] = {
        {"task_struct", "pid", 4, &o.task_pid},
        {"task_struct", "tgid", 4, &o.task_tgid},
        {"task_struct", "comm", 16, &o.task_comm},
        {"task_struct", "mm", 8, &o.task_mm},
        {"task_struct", "stack", 8, &o.task_stack},
        {"task_struct", "flags", 4, &o.task_flags},
        {"mm_struct", "pgd", 8, &o.mm_pgd},
        {"vm_area_struct", "vm_start", 8, &o.vma_start},
        {"vm_area_struct", "vm_end", 8, &o.vma_end},
        {"vm_area_struct", "vm_pgoff", 8, &o.vma_pgoff},
        {"vm_area_struct", "vm_file", 8, &o.vma_file},
        {"vm_area_struct", "vm_flags", 8, &o.vma_flags},
        {"file", "f_path", 0, &o.file_path},
        {"path", "dentry", 8, &o.path_dentry},
        {"dentry", "d_name", 0, &o.dentry_name},
        {"dentry", "d_parent", 8, &o.dentry_parent},
        {"qstr", "name", 8, &o.qstr_name},
        {"qstr", "len", 4, &o.qstr_len},
    };
    int rc = struct_size(btf, "task_struct", &o.task_size, err);
    if (!rc)
        rc = resolve_members(btf, specs, sizeof(specs) / sizeof(specs[0]), err);
    if (!rc)
        rc = resolve_vma_tree(btf, &o, err);
    /* Optional (a VMA cache's generation): 0 when absent, never an error. */
    struct qp_error ignored = {0};
    if (!rc && member_offset(btf, "mm_struct", "map_count", 4, &o.mm_map_count, &ignored))
        o.mm_map_count = 0;
    if (!rc)
        resolve_page_cache(btf, &o);
    if (!rc && struct_size(btf, "pt_regs", &o.pt_regs_size, &ignored))
        o.pt_regs_size = 168;
    if (!rc && member_offset(btf, "task_struct", "tasks", 8, &o.task_tasks, &ignored))
        o.task_tasks = 0;
    if (!rc && resolve_percpu(btf, &o, NULL))
        o.percpu_unknown = true; /* lx_offsets_from_kernel asks kallsyms */
    /* Optional: the run queue's task, for samples in the middle of a context switch. Without the
     * variable in BTF (older pahole), lx_offsets_from_kernel asks kallsyms. */
    if (!rc && member_offset(btf, "rq", "curr", 8, &o.rq_curr, &ignored) == 0)
        o.has_rq_curr = percpu_var(btf, "runqueues", &o.percpu_runqueues, NULL, NULL) == 0;
    if (rc)
        return rc;
    /* member_offset checked each against its struct; the readers' buffers rely on it */
    if (!fits(o.task_comm, 16, o.task_size) || !fits(o.task_pid, 4, o.task_size) ||
        !fits(o.task_tgid, 4, o.task_size) || !fits(o.task_mm, 8, o.task_size) ||
        !fits(o.task_stack, 8, o.task_size) || !fits(o.task_flags, 4, o.task_size))
        return qp_error_set(err, -EINVAL, "BTF: task_struct members lie outside its %u bytes",
                            o.task_size);
    *out = o;
    return 0;
}

void lx_offsets_debian12_6_1(struct lx_offsets *o)
{
    *o = (struct lx_offsets){
        .task_size = 9792,
        .task_pid = 2416,
        .task_tgid = 2420,
        .task_comm = 2976,
        .task_mm = 2272,
        .task_stack = 32,
        .task_flags = 44,
        .mm_pgd = 72,
        .mm_mt = 0,
        .mm_map_count = 104,
        .mt_root = 8,
        .vma_start = 0,
        .vma_end = 8,
        .vma_pgoff = 104,
        .vma_file = 112,
        .vma_flags = 32,
        .file_path = 16,
        .path_dentry = 8,
        .dentry_name = 32,
        .dentry_parent = 24,
        .qstr_name = 8,
        .qstr_len = 4,
        .percpu_current_task = 0x1fb80,
        .percpu_cpu_number = 0x199e0,
        .percpu_this_cpu_off = 0x199e8,
        .has_pcpu_hot = false,
        .has_rq_curr = true,
        .rq_curr = 0x960,
        .percpu_runqueues = 0x31c40,
        .pt_regs_size = 168,
        .mt_r64_pivot = 8,
        .mt_r64_slot = 128,
        .mt_r64_meta = 248,
        .mt_r64_pivots = 15,
        .mt_a64_pivot = 8,
        .mt_a64_slot = 80,
        .mt_a64_meta = 240,
        .mt_a64_pivots = 9,
    };
}

/* ---- struct module (added by modules) ---------------------------------------------------- */

/* Offset and size in bytes of member path[0].path[1]... of struct type, each step a member of
 * the composite the previous one names (through anonymous members, typedefs and qualifiers). */
static int path_offset(const struct btf *btf, const char *type, const char *const *path, int n,
                       uint32_t *off, uint32_t *size, struct qp_error *err)
{
    uint32_t id = 0, mtype = 0;
    uint64_t total = 0, bits;
    int rc = find_composite(btf, type, &id, err);
    for (int i = 0; !rc && i < n; i++) {
        if (!id || !member_bits(btf, id, path[i], 0, &bits, &mtype))
            return qp_error_set(err, -ENOENT, "BTF: struct %s has no member %s%s%s", type,
                                i ? path[i - 1] : "", i ? "." : "", path[i]);
        total += bits;
        id = i + 1 < n ? composite_id(btf, mtype) : 0;
    }
    if (rc)
        return rc;
    long sz = btf__resolve_size(btf, mtype);
    uint32_t outer = 0;
    find_composite(btf, type, &outer, NULL);
    if (total % 8 || sz <= 0 || !fits(total / 8, (uint64_t)sz, btf__type_by_id(btf, outer)->size))
        return qp_error_set(err, -EINVAL,
                            "BTF: %s.%s is not a byte-aligned sized member inside the struct", type,
                            path[n - 1]);
    *off = (uint32_t)(total / 8);
    *size = (uint32_t)sz;
    return 0;
}

struct path_spec {
    const char *type;
    const char *path[3];
    uint32_t size; /* expected size in bytes; 0: any */
    uint32_t *out;
};

static int resolve_paths(const struct btf *btf, const struct path_spec *specs, size_t n,
                         struct qp_error *err)
{
    for (size_t i = 0; i < n; i++) {
        int depth = specs[i].path[2] ? 3 : specs[i].path[1] ? 2 : 1;
        uint32_t size;
        int rc = path_offset(btf, specs[i].type, specs[i].path, depth, specs[i].out, &size, err);
        if (rc)
            return rc;
        if (specs[i].size && size != specs[i].size)
            return qp_error_set(err, -EINVAL, "BTF: %s.%s is %u bytes, not %u", specs[i].type,
                                specs[i].path[depth - 1], size, specs[i].size);
    }
    return 0;
}

/* The value of enumerator name in enum type, or -ENOENT. */
static int enum_value(const struct btf *btf, const char *type, const char *name, uint32_t *out)
{
    int id = btf__find_by_name_kind(btf, type, BTF_KIND_ENUM);
    const struct btf_type *t = id > 0 ? btf__type_by_id(btf, (uint32_t)id) : NULL;
    if (!t)
        return -ENOENT;
    const struct btf_enum *e = btf_enum(t);
    for (uint16_t i = 0; i < btf_vlen(t); i++, e++) {
        const char *n = btf__name_by_offset(btf, e->name_off);
        if (n && strcmp(n, name) == 0) {
            *out = (uint32_t)e->val;
            return 0;
        }
    }
    return -ENOENT;
}

/* A struct module with neither core_layout (up to 6.3) nor mem[] (6.4+) is a layout qprof does
 * not know: one line. A kernel built without the ORC unwinder (arm64, riscv64) has no
 * arch.num_orcs: *has_orc false, its modules still named. */
static int check_module_layout(const struct btf *btf, bool *mem_layout, bool *has_orc,
                               struct qp_error *err)
{
    uint32_t id = 0;
    uint64_t bits;
    int rc = find_composite(btf, "module", &id, err);
    if (rc)
        return rc;
    *mem_layout = !member_bits(btf, id, "core_layout", 0, &bits, NULL);
    if (*mem_layout && !member_bits(btf, id, "mem", 0, &bits, NULL))
        return qp_error_set(err, -ENOTSUP,
                            "struct module has neither core_layout nor mem[]: a layout qprof "
                            "does not know");
    uint32_t arch = 0;
    *has_orc = find_composite(btf, "mod_arch_specific", &arch, NULL) == 0 &&
               member_bits(btf, arch, "num_orcs", 0, &bits, NULL);
    return 0;
}

/* 6.4+: module.mem[MOD_TEXT] is the core text (all of it text: size is text_size too) and
 * mem[MOD_INIT_TEXT] the init text, each a struct module_memory {base, size, ...}; the indexes
 * come from enum mod_mem_type. */
static int resolve_mem_layout(const struct btf *btf, struct lx_module_offsets *o,
                              struct qp_error *err)
{
    uint32_t mem, elem, base, size, text, init_text, n = 0;
    int rc = member_offset(btf, "module", "mem", 0, &mem, err);
    if (!rc)
        rc = struct_size(btf, "module_memory", &elem, err);
    if (!rc)
        rc = member_offset(btf, "module_memory", "base", 8, &base, err);
    if (!rc)
        rc = member_offset(btf, "module_memory", "size", 4, &size, err);
    if (!rc)
        rc = array_len(btf, "module", "mem", &n, err);
    if (rc)
        return rc;
    if (enum_value(btf, "mod_mem_type", "MOD_TEXT", &text) ||
        enum_value(btf, "mod_mem_type", "MOD_INIT_TEXT", &init_text) || text >= n ||
        init_text >= n || elem < 16 || !fits(base, 8, elem) || !fits(size, 4, elem))
        return qp_error_set(err, -ENOTSUP,
                            "struct module's mem[%u] of %u-byte module_memory: no MOD_TEXT or "
                            "MOD_INIT_TEXT in enum mod_mem_type, or members out of place",
                            n, elem);
    /* 64-bit sums: n and elem are the guest's, lx_module_offsets_check bounds the results */
    uint64_t core = mem + (uint64_t)text * elem, init = mem + (uint64_t)init_text * elem;
    if (core + elem > UINT32_MAX || init + elem > UINT32_MAX)
        return qp_error_set(err, -EINVAL, "BTF: struct module's mem[%u] lies past 4 GiB", n);
    o->core_base = (uint32_t)(core + base);
    o->core_size = o->core_text_size = (uint32_t)(core + size);
    o->init_base = (uint32_t)(init + base);
    o->init_size = o->init_text_size = (uint32_t)(init + size);
    return 0;
}

int lx_btf_module_offsets(const lx_btf *b, struct lx_module_offsets *out, struct qp_error *err)
{
    struct lx_module_offsets o = {0};
    const struct btf *btf = b->btf;
    bool mem_layout;
    int rc = check_module_layout(btf, &mem_layout, &o.has_orc, err);
    if (rc)
        return rc;
    const struct path_spec core[] = {
        {"module", {"core_layout", "base"}, 8, &o.core_base},
        {"module", {"core_layout", "size"}, 4, &o.core_size},
        {"module", {"core_layout", "text_size"}, 4, &o.core_text_size},
    };
    rc = mem_layout ? resolve_mem_layout(btf, &o, err) : resolve_paths(btf, core, 3, err);
    if (rc)
        return rc;
    const struct path_spec specs[] = {
        {"module", {"state"}, 4, &o.state},
        {"module", {"list", "next"}, 8, &o.list},
        {"module", {"kallsyms"}, 8, &o.kallsyms},
        {"mod_kallsyms", {"symtab"}, 8, &o.ks_symtab},
        {"mod_kallsyms", {"num_symtab"}, 4, &o.ks_num_symtab},
        {"mod_kallsyms", {"strtab"}, 8, &o.ks_strtab},
    };
    const struct path_spec orc[] = {
        {"module", {"arch", "num_orcs"}, 4, &o.num_orcs},
        {"module", {"arch", "orc_unwind_ip"}, 8, &o.orc_unwind_ip},
        {"module", {"arch", "orc_unwind"}, 8, &o.orc_unwind},
    };
    rc = resolve_paths(btf, specs, sizeof specs / sizeof specs[0], err);
    if (!rc && o.has_orc)
        rc = resolve_paths(btf, orc, sizeof orc / sizeof orc[0], err);
    if (!rc)
        rc = struct_size(btf, "module", &o.module_size, err);
    if (!rc)
        rc = member_offset(btf, "module", "name", 0, &o.name, err);
    if (!rc)
        rc = array_len(btf, "module", "name", &o.name_len, err);
    if (rc)
        return rc;
    /* typetab (4.x+): the nm letters; without it symbols in the text range count as text. */
    const struct path_spec typetab = {"mod_kallsyms", {"typetab"}, 8, &o.ks_typetab};
    o.has_typetab = resolve_paths(btf, &typetab, 1, NULL) == 0;
    if (enum_value(btf, "module_state", "MODULE_STATE_UNFORMED", &o.state_unformed))
        o.state_unformed = 3; /* its value since 3.8 */
    const struct path_spec init[] = {
        {"module", {"init_layout", "base"}, 8, &o.init_base},
        {"module", {"init_layout", "size"}, 4, &o.init_size},
        {"module", {"init_layout", "text_size"}, 4, &o.init_text_size},
    };
    o.has_init = (mem_layout || resolve_paths(btf, init, 3, NULL) == 0) &&
                 enum_value(btf, "module_state", "MODULE_STATE_COMING", &o.state_coming) == 0 &&
                 fits(o.init_base, 8, o.module_size) && fits(o.init_size, 4, o.module_size) &&
                 fits(o.init_text_size, 4, o.module_size);
    rc = lx_module_offsets_check(&o, err);
    if (rc)
        return rc;
    *out = o;
    return 0;
}

int lx_btf_orc_signal_bit(const lx_btf *b, bool *signal_bit)
{
    uint32_t id = 0;
    uint64_t bits;
    if (find_composite(b->btf, "orc_entry", &id, NULL))
        return -ENOENT;
    if (member_bits(b->btf, id, "signal", 0, &bits, NULL))
        *signal_bit = true;
    else if (member_bits(b->btf, id, "end", 0, &bits, NULL))
        *signal_bit = false;
    else
        return -ENOENT;
    return 0;
}
