/* --current: the current process of each vCPU, read from the kernel's own variables through
 * the types its DWARF describes (libdw), the way a debugger prints `*myproc()`.
 *
 * The expression is parsed (prof_current_parse) and resolved once, at start, into a short list
 * of operations on an address (add an offset, follow a pointer, index by the vCPU); a sample
 * then costs one read per pointer followed plus the pid and name. Nothing about DWARF is parsed
 * here by hand: libdw finds the variable, its location and every type. */
#include "os.h"

#include <ctype.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- The expression ---------------------------------------------------------------------- */

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Copies an identifier at *p into out (cap bytes); NULL when there is none or it is too long. */
static const char *parse_ident(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    if (!isalpha((unsigned char)*p) && *p != '_')
        return NULL;
    while (isalnum((unsigned char)p[n]) || p[n] == '_')
        n++;
    if (n >= cap)
        return NULL;
    memcpy(out, p, n);
    out[n] = '\0';
    return p + n;
}

/* `$cpu` or a number, then `close`; NULL when not. */
static const char *parse_index(const char *p, struct prof_current_step *st, char close)
{
    p = skip_space(p);
    if (strncmp(p, "$cpu", 4) == 0 && !isalnum((unsigned char)p[4]) && p[4] != '_') {
        st->kind = PROF_STEP_INDEX_CPU;
        p += 4;
    } else {
        if (!isdigit((unsigned char)*p))
            return NULL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 0);
        if (errno || end == p || v > UINT32_MAX)
            return NULL;
        st->kind = PROF_STEP_INDEX;
        st->index = v;
        p = end;
    }
    p = skip_space(p);
    return *p == close ? p + 1 : NULL;
}

/* After `per_cpu(` at p: `VAR)` or `VAR, $cpu)` or `VAR, N)`; NULL when it is none of them. */
static const char *parse_per_cpu(const char *p, struct prof_current_path *out)
{
    p = parse_ident(skip_space(p), out->var, sizeof out->var);
    if (!p)
        return NULL;
    out->per_cpu = true;
    p = skip_space(p);
    if (*p == ',') {
        struct prof_current_step index = {0};
        p = parse_index(p + 1, &index, ')');
        out->per_cpu_at_index = index.kind == PROF_STEP_INDEX;
        out->per_cpu_index = index.index;
        return p;
    }
    return *p == ')' ? p + 1 : NULL;
}

/* The expression's start: `VAR`, or `per_cpu(VAR...)` (a variable of that name is one when no
 * parenthesis follows). */
static const char *parse_start(const char *expr, struct prof_current_path *out)
{
    const char *p = parse_ident(skip_space(expr), out->var, sizeof out->var);
    if (p && strcmp(out->var, "per_cpu") == 0 && *skip_space(p) == '(') {
        out->var[0] = '\0';
        return parse_per_cpu(skip_space(p) + 1, out);
    }
    return p;
}

int prof_current_parse(const char *expr, struct prof_current_path *out, struct qp_error *err)
{
    memset(out, 0, sizeof *out);
    const char *p = parse_start(expr, out);
    if (!p)
        return qp_error_set(err, -EINVAL,
                            "--current '%s': expected a variable name or per_cpu(VARIABLE) first",
                            expr);
    for (p = skip_space(p); *p; p = skip_space(p)) {
        if (out->n == PROF_CURRENT_MAX_STEPS)
            return qp_error_set(err, -EINVAL, "--current '%s': more than %d steps", expr,
                                PROF_CURRENT_MAX_STEPS);
        struct prof_current_step *st = &out->step[out->n];
        const char *at = p;
        if (*p == '.' || (p[0] == '-' && p[1] == '>')) {
            st->kind = *p == '.' ? PROF_STEP_FIELD : PROF_STEP_ARROW;
            p = parse_ident(skip_space(p + (*p == '.' ? 1 : 2)), st->name, sizeof st->name);
        } else if (*p == '[') {
            p = parse_index(p + 1, st, ']');
        } else {
            p = NULL;
        }
        if (!p)
            return qp_error_set(err, -EINVAL, "--current '%s': cannot read '%s'", expr, at);
        out->n++;
    }
    return 0;
}

/* ---- Resolving it with libdw ------------------------------------------------------------- */

enum op_kind { OP_ADD, OP_DEREF, OP_INDEX_CPU, OP_PER_CPU };

struct op {
    enum op_kind kind;
    uint64_t value; /* OP_ADD: the offset; OP_INDEX_CPU: the element size; OP_PER_CPU: the
                       offset table's address (of the pointer to it when table_is_pointer) */
    uint64_t bound; /* OP_INDEX_CPU, OP_PER_CPU: the array's length, 0 when unknown */
    /* OP_PER_CPU: add the table's entry for the CPU: its element size, whether the table is
     * reached through a pointer, and the CPU (UINT64_MAX: the vCPU's). */
    uint8_t elem_size;
    bool table_is_pointer;
    uint64_t cpu;
};

#define MAX_OPS (3 * PROF_CURRENT_MAX_STEPS + 8)

struct prof_os_current {
    char expr[256];
    struct op ops[MAX_OPS];
    int n_ops;
    uint64_t pid_offset, pid_size;
    uint64_t name_offset, name_len;
    bool name_is_pointer; /* char *name: follow it */
};

/* What an expression names so far: an object of type `type` at the address the ops compute. */
struct cursor {
    prof_os_current *c;
    Dwarf_Die type; /* peeled of typedefs and qualifiers */
    const char *expr;
    bool per_cpu; /* the expression starts with per_cpu() */
    struct qp_error *err;
};

static int add_op(struct cursor *k, enum op_kind kind, uint64_t value, uint64_t bound)
{
    prof_os_current *c = k->c;
    if (kind == OP_ADD && value == 0)
        return 0;
    if (kind == OP_ADD && c->n_ops && c->ops[c->n_ops - 1].kind == OP_ADD) {
        c->ops[c->n_ops - 1].value += value;
        return 0;
    }
    if (c->n_ops == MAX_OPS)
        return qp_error_set(k->err, -EINVAL, "--current '%s': too long", k->expr);
    c->ops[c->n_ops++] = (struct op){.kind = kind, .value = value, .bound = bound};
    return 0;
}

static const char *type_name(Dwarf_Die *type)
{
    const char *n = dwarf_diename(type);
    return n ? n : "(anonymous)";
}

static const char *tag_word(int tag)
{
    switch (tag) {
    case DW_TAG_structure_type:
        return "struct ";
    case DW_TAG_union_type:
        return "union ";
    case DW_TAG_pointer_type:
        return "pointer ";
    case DW_TAG_array_type:
        return "array ";
    default:
        return "";
    }
}

/* The type a DIE's DW_AT_type names, peeled; false when it has none (void). */
static bool type_of(Dwarf_Die *die, Dwarf_Die *out)
{
    Dwarf_Attribute a;
    Dwarf_Die t;
    if (!dwarf_attr_integrate(die, DW_AT_type, &a) || !dwarf_formref_die(&a, &t))
        return false;
    return dwarf_peel_type(&t, out) == 0;
}

/* The search through anonymous members is bounded: the kernel's DWARF is a file anyone may hand
 * qprof, and one whose anonymous member names its own struct recursed until the stack ran out;
 * a wide fan-out took time exponential in the depth. Real kernels nest a few levels. */
#define MEMBER_MAX_DEPTH  16
#define MEMBER_MAX_VISITS 65536

/* find_member's search below type, depth levels of anonymous members down; *visits counts the
 * members looked at in all. */
static bool find_member_in(Dwarf_Die *type, const char *name, int depth, unsigned *visits,
                           uint64_t *offset, Dwarf_Die *member)
{
    Dwarf_Die child;
    if (depth > MEMBER_MAX_DEPTH || dwarf_child(type, &child) != 0)
        return false;
    do {
        if (++*visits > MEMBER_MAX_VISITS)
            return false;
        if (dwarf_tag(&child) != DW_TAG_member)
            continue;
        Dwarf_Word off = 0;
        Dwarf_Attribute a;
        if (dwarf_attr(&child, DW_AT_data_member_location, &a) && dwarf_formudata(&a, &off) != 0)
            continue; /* a location expression: not a plain offset */
        const char *n = dwarf_diename(&child);
        Dwarf_Die inner;
        if (n && strcmp(n, name) == 0) {
            *offset = off;
            *member = child;
            return true;
        }
        if (!n && type_of(&child, &inner) &&
            find_member_in(&inner, name, depth + 1, visits, offset, member)) {
            *offset += off;
            return true;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return false;
}

/* Finds member `name` of struct or union type, looking into anonymous members too, at most
 * MEMBER_MAX_DEPTH levels of them and MEMBER_MAX_VISITS members in all. */
static bool find_member(Dwarf_Die *type, const char *name, uint64_t *offset, Dwarf_Die *member)
{
    unsigned visits = 0;
    return find_member_in(type, name, 0, &visits, offset, member);
}

static int step_member(struct cursor *k, const char *name)
{
    int tag = dwarf_tag(&k->type);
    if (tag != DW_TAG_structure_type && tag != DW_TAG_union_type)
        return qp_error_set(k->err, -EINVAL, "--current '%s': %s%s is no struct, it has no '%s'",
                            k->expr, tag_word(tag), type_name(&k->type), name);
    uint64_t off;
    Dwarf_Die member;
    if (!find_member(&k->type, name, &off, &member))
        return qp_error_set(k->err, -ENOENT,
                            "--current '%s': %s%s has no field '%s' (anonymous members searched "
                            "%d levels deep)",
                            k->expr, tag_word(tag), type_name(&k->type), name, MEMBER_MAX_DEPTH);
    Dwarf_Die t;
    if (!type_of(&member, &t))
        return qp_error_set(k->err, -EINVAL, "--current '%s': field '%s' has no type", k->expr,
                            name);
    k->type = t;
    return add_op(k, OP_ADD, off, 0);
}

/* Follows a pointer: the object is now the one it points to. */
static int step_deref(struct cursor *k, const char *why)
{
    if (dwarf_tag(&k->type) != DW_TAG_pointer_type)
        return qp_error_set(k->err, -EINVAL, "--current '%s': %s: %s%s is no pointer", k->expr, why,
                            tag_word(dwarf_tag(&k->type)), type_name(&k->type));
    Dwarf_Die t;
    if (!type_of(&k->type, &t))
        return qp_error_set(k->err, -EINVAL, "--current '%s': %s: a void pointer", k->expr, why);
    k->type = t;
    return add_op(k, OP_DEREF, 0, 0);
}

static uint64_t array_length(Dwarf_Die *array)
{
    Dwarf_Die sub;
    Dwarf_Attribute a;
    Dwarf_Word v;
    if (dwarf_child(array, &sub) != 0 || dwarf_tag(&sub) != DW_TAG_subrange_type)
        return 0;
    if (dwarf_attr(&sub, DW_AT_count, &a) && dwarf_formudata(&a, &v) == 0)
        return v;
    if (dwarf_attr(&sub, DW_AT_upper_bound, &a) && dwarf_formudata(&a, &v) == 0)
        return v + 1;
    return 0;
}

static int step_index(struct cursor *k, const struct prof_current_step *st)
{
    uint64_t length = 0;
    if (dwarf_tag(&k->type) == DW_TAG_pointer_type) {
        int rc = step_deref(k, "indexing");
        if (rc)
            return rc;
    } else if (dwarf_tag(&k->type) == DW_TAG_array_type) {
        length = array_length(&k->type);
        Dwarf_Die elem;
        if (!type_of(&k->type, &elem))
            return qp_error_set(k->err, -EINVAL, "--current '%s': array of no type", k->expr);
        k->type = elem;
    } else {
        return qp_error_set(k->err, -EINVAL, "--current '%s': %s%s cannot be indexed", k->expr,
                            tag_word(dwarf_tag(&k->type)), type_name(&k->type));
    }
    Dwarf_Word size;
    if (dwarf_aggregate_size(&k->type, &size) != 0 || size == 0)
        return qp_error_set(k->err, -EINVAL, "--current '%s': elements of %s have no size", k->expr,
                            type_name(&k->type));
    if (st->kind == PROF_STEP_INDEX_CPU)
        return add_op(k, OP_INDEX_CPU, size, length);
    if (length && st->index >= length)
        return qp_error_set(k->err, -ERANGE, "--current '%s': index %" PRIu64 " past %" PRIu64,
                            k->expr, st->index, length);
    return add_op(k, OP_ADD, st->index * size, 0);
}

/* A global variable's definition (with a location) named name, in any compile unit. */
static bool find_variable(Dwarf *dw, const char *name, Dwarf_Die *out)
{
    Dwarf_Off off = 0, next;
    size_t header;
    while (dwarf_nextcu(dw, off, &next, &header, NULL, NULL, NULL) == 0) {
        Dwarf_Die cu, child;
        if (dwarf_offdie(dw, off + header, &cu) && dwarf_child(&cu, &child) == 0) {
            do {
                const char *n;
                if (dwarf_tag(&child) == DW_TAG_variable && dwarf_hasattr(&child, DW_AT_location) &&
                    (n = dwarf_diename(&child)) && strcmp(n, name) == 0) {
                    *out = child;
                    return true;
                }
            } while (dwarf_siblingof(&child, &child) == 0);
        }
        off = next;
    }
    return false;
}

/* Whether addr lies in the ELF's per-CPU section (Linux's .data..percpu): the address of such a
 * variable is an offset into each CPU's copy, not where any copy is. */
static bool in_per_cpu_section(Dwarf *dw, uint64_t addr)
{
    Elf *elf = dwarf_getelf(dw);
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
        return false;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        const char *name;
        if (gelf_getshdr(scn, &sh) && (name = elf_strptr(elf, shstrndx, sh.sh_name)) &&
            strcmp(name, ".data..percpu") == 0 && addr - sh.sh_addr < sh.sh_size)
            return true;
    }
    return false;
}

static int start_at_variable(struct cursor *k, Dwarf *dw, const char *var, const char *kernel)
{
    Dwarf_Die die;
    if (!find_variable(dw, var, &die))
        return qp_error_set(k->err, -ENOENT, "--current '%s': no variable '%s' in the DWARF of %s",
                            k->expr, var, kernel);
    Dwarf_Attribute a;
    Dwarf_Op *loc;
    size_t n;
    if (!dwarf_attr(&die, DW_AT_location, &a) || dwarf_getlocation(&a, &loc, &n) != 0 || n != 1 ||
        loc[0].atom != DW_OP_addr)
        return qp_error_set(k->err, -EINVAL,
                            "--current '%s': '%s' has no fixed address (thread-local "
                            "variables are not supported)",
                            k->expr, var);
    if (!k->per_cpu && in_per_cpu_section(dw, loc[0].number))
        return qp_error_set(k->err, -EINVAL,
                            "--current '%s': '%s' is a per-CPU variable (.data..percpu): write "
                            "per_cpu(%s)",
                            k->expr, var, var);
    if (!type_of(&die, &k->type))
        return qp_error_set(k->err, -EINVAL, "--current '%s': '%s' has no type", k->expr, var);
    return add_op(k, OP_ADD, loc[0].number, 0);
}

/* per_cpu(VAR): VAR's address is an offset into each CPU's copy; the table named `table` (an
 * array of integers, or a pointer to them) holds each CPU's base. Resolved here to its address
 * and element size; read per sample. */
static int add_per_cpu(struct cursor *k, Dwarf *dw, const struct prof_current_path *path,
                       const char *table, const char *kernel)
{
    Dwarf_Die die, t, elem;
    Dwarf_Attribute a;
    Dwarf_Op *loc;
    size_t n;
    Dwarf_Word size = 0;
    if (!find_variable(dw, table, &die))
        return qp_error_set(k->err, -ENOENT,
                            "--current '%s': no per-CPU offset table '%s' in the DWARF of %s "
                            "(name the kernel's with --percpu-offsets)",
                            k->expr, table, kernel);
    if (!dwarf_attr(&die, DW_AT_location, &a) || dwarf_getlocation(&a, &loc, &n) != 0 || n != 1 ||
        loc[0].atom != DW_OP_addr || !type_of(&die, &t))
        return qp_error_set(k->err, -EINVAL, "--current '%s': '%s' has no fixed address", k->expr,
                            table);
    int tag = dwarf_tag(&t);
    bool typed =
        (tag == DW_TAG_array_type || tag == DW_TAG_pointer_type) && type_of(&t, &elem) &&
        (dwarf_tag(&elem) == DW_TAG_base_type || dwarf_tag(&elem) == DW_TAG_pointer_type) &&
        dwarf_aggregate_size(&elem, &size) == 0 && (size == 4 || size == 8);
    if (!typed)
        return qp_error_set(k->err, -EINVAL,
                            "--current '%s': per-CPU offset table '%s' is no array of (or pointer "
                            "to) 4- or 8-byte integers",
                            k->expr, table);
    prof_os_current *c = k->c;
    if (c->n_ops == MAX_OPS)
        return qp_error_set(k->err, -EINVAL, "--current '%s': too long", k->expr);
    c->ops[c->n_ops++] = (struct op){
        .kind = OP_PER_CPU,
        .value = loc[0].number,
        .bound = tag == DW_TAG_array_type ? array_length(&t) : 0,
        .elem_size = (uint8_t)size,
        .table_is_pointer = tag == DW_TAG_pointer_type,
        .cpu = path->per_cpu_at_index ? path->per_cpu_index : UINT64_MAX,
    };
    if (path->per_cpu_at_index && c->ops[c->n_ops - 1].bound &&
        path->per_cpu_index >= c->ops[c->n_ops - 1].bound)
        return qp_error_set(k->err, -ERANGE, "--current '%s': CPU %" PRIu64 " past %" PRIu64,
                            k->expr, path->per_cpu_index, c->ops[c->n_ops - 1].bound);
    return 0;
}

/* The object the expression ends at is the process: a struct, or a pointer to one. */
static int end_at_struct(struct cursor *k)
{
    if (dwarf_tag(&k->type) == DW_TAG_pointer_type) {
        int rc = step_deref(k, "the process");
        if (rc)
            return rc;
    }
    int tag = dwarf_tag(&k->type);
    if (tag != DW_TAG_structure_type && tag != DW_TAG_union_type)
        return qp_error_set(k->err, -EINVAL,
                            "--current '%s': names %s%s, not a struct or a pointer to one", k->expr,
                            tag_word(tag), type_name(&k->type));
    return 0;
}

static int resolve_pid(struct cursor *k, const char *field)
{
    uint64_t off;
    Dwarf_Die member, t;
    Dwarf_Word size;
    if (!find_member(&k->type, field, &off, &member))
        return qp_error_set(k->err, -ENOENT, "--current-pid: struct %s has no field '%s'",
                            type_name(&k->type), field);
    int tag = type_of(&member, &t) ? dwarf_tag(&t) : 0;
    if ((tag != DW_TAG_base_type && tag != DW_TAG_enumeration_type) ||
        dwarf_aggregate_size(&t, &size) != 0 || size == 0 || size > 8)
        return qp_error_set(k->err, -EINVAL, "--current-pid: field '%s' is no integer", field);
    k->c->pid_offset = off;
    k->c->pid_size = size;
    return 0;
}

static int resolve_name(struct cursor *k, const char *field, bool required)
{
    uint64_t off;
    Dwarf_Die member, t;
    Dwarf_Word size;
    if (!find_member(&k->type, field, &off, &member))
        return required
                   ? qp_error_set(k->err, -ENOENT, "--current-name: struct %s has no field '%s'",
                                  type_name(&k->type), field)
                   : -ENOENT;
    int tag = type_of(&member, &t) ? dwarf_tag(&t) : 0;
    k->c->name_offset = off;
    k->c->name_is_pointer = tag == DW_TAG_pointer_type;
    if (tag == DW_TAG_array_type && dwarf_aggregate_size(&t, &size) == 0 && size > 0)
        k->c->name_len = size < PROF_COMM_LEN - 9 ? size : PROF_COMM_LEN - 9;
    else if (tag == DW_TAG_pointer_type)
        k->c->name_len = 15;
    else
        return qp_error_set(k->err, -EINVAL, "--current-name: field '%s' is no string", field);
    return 0;
}

/* The path to the struct the expression names: --current's process, --user-regs' frame. */
static int resolve_path(struct cursor *k, Dwarf *dw, const struct prof_current_path *path,
                        const char *kernel, const char *percpu_offsets)
{
    const char *table = percpu_offsets ? percpu_offsets : "__per_cpu_offset";
    int rc = start_at_variable(k, dw, path->var, kernel);
    if (rc == 0 && path->per_cpu)
        rc = add_per_cpu(k, dw, path, table, kernel);
    for (int i = 0; rc == 0 && i < path->n; i++) {
        const struct prof_current_step *st = &path->step[i];
        if (st->kind == PROF_STEP_ARROW && (rc = step_deref(k, st->name)))
            break;
        if (st->kind == PROF_STEP_FIELD || st->kind == PROF_STEP_ARROW)
            rc = step_member(k, st->name);
        else
            rc = step_index(k, st);
    }
    return rc ? rc : end_at_struct(k);
}

static int resolve(struct cursor *k, Dwarf *dw, const struct prof_current_path *path,
                   const char *kernel, const struct prof_current_names *names)
{
    const char *pid_field = names ? names->pid_field : NULL;
    const char *name_field = names ? names->name_field : NULL;
    int rc = resolve_path(k, dw, path, kernel, names ? names->percpu_offsets : NULL);
    if (rc || (rc = resolve_pid(k, pid_field ? pid_field : "pid")))
        return rc;
    if (name_field)
        return resolve_name(k, name_field, true);
    if (resolve_name(k, "name", false) == 0)
        return 0;
    return resolve_name(k, "comm", true);
}

/* The kernel ELF's DWARF, for the option (--current, --user-regs) that names its types. */
static int open_kernel_dwarf(const char *kernel, const char *option, int *fd, Dwarf **dw,
                             struct qp_error *err)
{
    if (!kernel)
        return qp_error_set(err, -EINVAL, "%s needs --kernel: an ELF with DWARF types", option);
    *fd = open(kernel, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return qp_error_set(err, -errno, "%s: opening %s: %s", option, kernel, strerror(errno));
    *dw = dwarf_begin(*fd, DWARF_C_READ);
    if (!*dw) {
        close(*fd);
        return qp_error_set(err, -ENOENT, "%s: %s has no DWARF (build it with -g)", option, kernel);
    }
    return 0;
}

int prof_os_current_open(const char *kernel, const char *expr,
                         const struct prof_current_names *names, prof_os_current **out,
                         struct qp_error *err)
{
    struct prof_current_path path;
    int rc = prof_current_parse(expr, &path, err);
    if (rc)
        return rc;
    int fd;
    Dwarf *dw;
    if ((rc = open_kernel_dwarf(kernel, "--current", &fd, &dw, err)))
        return rc;
    prof_os_current *c = g_new0(prof_os_current, 1);
    g_strlcpy(c->expr, expr, sizeof c->expr);
    struct cursor k = {.c = c, .expr = expr, .per_cpu = path.per_cpu, .err = err};
    rc = resolve(&k, dw, &path, kernel, names);
    dwarf_end(dw);
    close(fd);
    if (rc) {
        g_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void prof_os_current_free(prof_os_current *c)
{
    g_free(c);
}

/* ---- Reading it at a stop ---------------------------------------------------------------- */

static int read_exact(const struct prof_os_mem *mem, const struct prof_vcpu *cpu, uint64_t addr,
                      void *buf, size_t len)
{
    size_t got = 0;
    int rc = mem->read(mem->ctx, cpu, addr, buf, len, &got);
    return rc == 0 && got == len ? 0 : -EFAULT;
}

static int read_uint(const struct prof_os_mem *mem, const struct prof_vcpu *cpu, uint64_t addr,
                     size_t size, uint64_t *out)
{
    uint8_t b[8] = {0};
    int rc = read_exact(mem, cpu, addr, b, size);
    *out = 0;
    for (size_t i = size; rc == 0 && i > 0; i--) /* little-endian */
        *out = *out << 8 | b[i - 1];
    return rc;
}

/* OP_PER_CPU: *addr plus the table's entry for the CPU (vcpu_index unless the op names one). */
static int add_cpu_offset(const struct op *op, uint64_t vcpu_index, const struct prof_vcpu *cpu,
                          const struct prof_os_mem *mem, uint64_t *addr)
{
    uint64_t table = op->value, offset;
    uint64_t index = op->cpu == UINT64_MAX ? vcpu_index : op->cpu;
    if (op->bound && index >= op->bound)
        return -ERANGE;
    if (op->table_is_pointer && (read_uint(mem, cpu, table, 8, &table) != 0 || !table))
        return -EFAULT;
    if (read_uint(mem, cpu, table + index * op->elem_size, op->elem_size, &offset) != 0)
        return -EFAULT;
    *addr += offset;
    return 0;
}

/* The address the resolved path names for cpu: 0, -ENOENT at a NULL pointer, -EFAULT, -ERANGE. */
static int walk_ops(const prof_os_current *c, const struct prof_vcpu *cpu,
                    const struct prof_os_mem *mem, uint64_t *out)
{
    uint64_t addr = 0, index = prof_vcpu_guest_id(cpu);
    for (int i = 0; i < c->n_ops; i++) {
        const struct op *op = &c->ops[i];
        if (op->kind == OP_ADD) {
            addr += op->value;
        } else if (op->kind == OP_INDEX_CPU) {
            if (op->bound && index >= op->bound)
                return -ERANGE;
            addr += index * op->value;
        } else if (op->kind == OP_PER_CPU) {
            int rc = add_cpu_offset(op, index, cpu, mem, &addr);
            if (rc)
                return rc;
        } else if (read_uint(mem, cpu, addr, 8, &addr) != 0) {
            return -EFAULT;
        } else if (addr == 0) {
            return -ENOENT; /* no process */
        }
    }
    *out = addr;
    return 0;
}

int prof_os_current_read(const prof_os_current *c, const struct prof_vcpu *cpu,
                         const struct prof_os_mem *mem, uint32_t *pid, char *name, size_t cap)
{
    uint64_t addr;
    int rc = walk_ops(c, cpu, mem, &addr);
    if (rc)
        return rc;
    uint64_t v, name_at = addr + c->name_offset;
    if (read_uint(mem, cpu, addr + c->pid_offset, c->pid_size, &v) != 0)
        return -EFAULT;
    *pid = (uint32_t)v;
    if (c->name_is_pointer && (read_uint(mem, cpu, name_at, 8, &name_at) != 0 || !name_at))
        return -EFAULT;
    char buf[PROF_COMM_LEN] = {0};
    size_t len = c->name_len < cap ? c->name_len : cap - 1;
    if (read_exact(mem, cpu, name_at, buf, len) != 0)
        return -EFAULT;
    buf[len] = '\0';
    for (size_t i = 0; buf[i]; i++) /* a name goes into folded lines: no separators in it */
        if (!isprint((unsigned char)buf[i]) || buf[i] == ';')
            buf[i] = '?';
    g_strlcpy(name, buf, cap);
    return 0;
}

/* ---- --user-regs ------------------------------------------------------------------------- */

static const char *const role_names[PROF_UREG_COUNT] = {"pc", "sp", "fp", "ra"};

/* Field names trapframes give each role, on the three architectures (xv6's struct trapframe,
 * Linux's pt_regs and user_pt_regs, hobby kernels' frames). */
static const char *const role_fields[PROF_UREG_COUNT][8] = {
    [PROF_UREG_PC] = {"epc", "sepc", "pc", "rip", "ip", "elr", "elr_el1", NULL},
    [PROF_UREG_SP] = {"sp", "rsp", "usp", "sp_el0", NULL},
    [PROF_UREG_FP] = {"s0", "fp", "rbp", "x29", NULL},
    [PROF_UREG_RA] = {"ra", "x30", "lr", NULL},
};

int prof_user_regs_role(const char *field)
{
    for (int r = 0; r < PROF_UREG_COUNT; r++)
        for (int i = 0; role_fields[r][i]; i++)
            if (strcmp(field, role_fields[r][i]) == 0)
                return r;
    return -1;
}

static int role_by_name(const char *p, size_t n)
{
    for (int r = 0; r < PROF_UREG_COUNT; r++)
        if (strlen(role_names[r]) == n && strncmp(p, role_names[r], n) == 0)
            return r;
    return -1;
}

/* One `ROLE=FIELD` of the list after the colon, at p up to end. */
static int parse_naming(const char *arg, const char *p, const char *end,
                        struct prof_user_regs_spec *out, struct qp_error *err)
{
    const char *eq = memchr(p, '=', (size_t)(end - p));
    int role = eq ? role_by_name(p, (size_t)(eq - p)) : -1;
    if (role < 0)
        return qp_error_set(err, -EINVAL,
                            "--user-regs '%s': expected ROLE=FIELD with ROLE one of pc, sp, fp, "
                            "ra, at '%.*s'",
                            arg, (int)(end - p), p);
    char *field = out->field[role];
    if (field[0])
        return qp_error_set(err, -EINVAL, "--user-regs '%s': %s named twice", arg,
                            role_names[role]);
    const char *after = parse_ident(eq + 1, field, sizeof out->field[role]);
    if (!after || after != end) {
        field[0] = '\0';
        return qp_error_set(err, -EINVAL, "--user-regs '%s': '%.*s' is no field name", arg,
                            (int)(end - eq - 1), eq + 1);
    }
    return 0;
}

/* The path's messages name --current, whose code they share; this option is --user-regs. */
static int as_user_regs_error(struct qp_error *err, int rc)
{
    if (err && strncmp(err->msg, "--current ", 10) == 0) {
        char msg[sizeof err->msg];
        g_snprintf(msg, sizeof msg, "--user-regs %s", err->msg + 10);
        g_strlcpy(err->msg, msg, sizeof err->msg);
    }
    return rc;
}

int prof_user_regs_parse(const char *arg, struct prof_user_regs_spec *out, struct qp_error *err)
{
    memset(out, 0, sizeof *out);
    const char *colon = strchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
    if (n == 0 || n >= sizeof out->expr)
        return qp_error_set(err, -EINVAL, "--user-regs '%s': %s expression", arg,
                            n ? "too long an" : "no");
    memcpy(out->expr, arg, n);
    struct prof_current_path path;
    int rc = prof_current_parse(out->expr, &path, err);
    if (rc)
        return as_user_regs_error(err, rc);
    for (const char *p = colon ? colon + 1 : NULL; p;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        if ((rc = parse_naming(arg, p, end, out, err)))
            return rc;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

struct prof_uregs {
    prof_os_current path; /* its ops lead to the frame; pid and name unused */
    int slot[PROF_UREG_COUNT];
    uint64_t offset[PROF_UREG_COUNT]; /* within the frame; UINT64_MAX: not found */
    uint64_t span;                    /* bytes from the frame's start to the last field's end */
};

/* Finds role's field: the one spec names, else the first of its usual names the struct has. */
static int find_role(struct cursor *k, const struct prof_user_regs_spec *spec, int role,
                     prof_uregs *u)
{
    const char *named = spec->field[role];
    uint64_t off;
    Dwarf_Die member, t;
    Dwarf_Word size = 0;
    const char *found = NULL;
    for (int i = 0; !found && (named[0] ? i < 1 : role_fields[role][i] != NULL); i++) {
        const char *name = named[0] ? named : role_fields[role][i];
        if (find_member(&k->type, name, &off, &member))
            found = name;
    }
    if (!found)
        return named[0] || role <= PROF_UREG_SP
                   ? qp_error_set(k->err, -ENOENT,
                                  "--user-regs '%s': struct %s has no field %s%s%s (name it: "
                                  "'%s:%s=FIELD')",
                                  spec->expr, type_name(&k->type), named[0] ? "'" : "for the ",
                                  named[0] ? named : role_names[role], named[0] ? "'" : "",
                                  spec->expr, role_names[role])
                   : 0;
    if (!type_of(&member, &t) || dwarf_aggregate_size(&t, &size) != 0 || size != 8)
        return qp_error_set(k->err, -EINVAL, "--user-regs '%s': field '%s' is no 8-byte register",
                            spec->expr, found);
    u->offset[role] = off;
    if (off + 8 > u->span)
        u->span = off + 8;
    return 0;
}

static int resolve_user_regs(struct cursor *k, Dwarf *dw, const struct prof_current_path *path,
                             const char *kernel, const struct prof_user_regs_spec *spec,
                             const char *percpu_offsets, prof_uregs *u)
{
    int rc = resolve_path(k, dw, path, kernel, percpu_offsets);
    if (rc)
        return as_user_regs_error(k->err, rc);
    for (int r = 0; r < PROF_UREG_COUNT; r++) {
        u->offset[r] = UINT64_MAX;
        if (u->slot[r] >= 0 && (rc = find_role(k, spec, r, u)))
            return rc;
    }
    return 0;
}

int prof_uregs_open(const char *kernel, const struct prof_user_regs_spec *spec,
                    const int slots[PROF_UREG_COUNT], const char *percpu_offsets, prof_uregs **out,
                    struct qp_error *err)
{
    struct prof_current_path path;
    int rc = prof_current_parse(spec->expr, &path, err);
    if (rc)
        return as_user_regs_error(err, rc);
    int fd;
    Dwarf *dw;
    if ((rc = open_kernel_dwarf(kernel, "--user-regs", &fd, &dw, err)))
        return rc;
    prof_uregs *u = g_new0(prof_uregs, 1);
    g_strlcpy(u->path.expr, spec->expr, sizeof u->path.expr);
    memcpy(u->slot, slots, sizeof u->slot);
    struct cursor k = {.c = &u->path, .expr = spec->expr, .per_cpu = path.per_cpu, .err = err};
    rc = resolve_user_regs(&k, dw, &path, kernel, spec, percpu_offsets, u);
    dwarf_end(dw);
    close(fd);
    if (rc) {
        g_free(u);
        return rc;
    }
    *out = u;
    return 0;
}

void prof_uregs_free(prof_uregs *u)
{
    g_free(u);
}

int prof_uregs_locate(const prof_uregs *u, const struct prof_vcpu *cpu,
                      const struct prof_os_mem *mem, uint64_t *at)
{
    return walk_ops(&u->path, cpu, mem, at);
}

/* One read of the frame's span (a trapframe is a few hundred bytes): one round trip, not four. */
#define USER_REGS_MAX_SPAN 4096

int prof_uregs_read(const prof_uregs *u, const struct prof_vcpu *cpu, const struct prof_os_mem *mem,
                    uint64_t at, uint64_t user_end, struct unw_regs *out)
{
    uint8_t frame[USER_REGS_MAX_SPAN];
    memset(out, 0, sizeof *out);
    if (u->span > sizeof frame || read_exact(mem, cpu, at, frame, u->span) != 0)
        return -EFAULT;
    for (int r = 0; r < PROF_UREG_COUNT; r++) {
        if (u->slot[r] < 0 || u->offset[r] == UINT64_MAX)
            continue;
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--) /* little-endian */
            v = v << 8 | frame[u->offset[r] + (uint64_t)i];
        out->r[u->slot[r]] = v;
    }
    /* a frame no entry filled yet holds zeros: no stack to read, not a frame to guess from */
    uint64_t pc = out->r[u->slot[PROF_UREG_PC]], sp = out->r[u->slot[PROF_UREG_SP]];
    return sp && pc < user_end ? 0 : -EFAULT;
}
