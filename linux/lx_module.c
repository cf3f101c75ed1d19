/* The kernel's list of loaded modules, read from outside (lx_module.h).
 *
 * `modules` is a list_head; each struct module links into it at module.list. A live module's
 * core_layout holds its text ([base, base + text_size)), then read-only data, then data,
 * including the copies of its symbol table that module.kallsyms points at (Elf64_Sym entries of
 * 24 bytes whose st_value the loader already relocated to run-time addresses, the string table,
 * and one nm letter per symbol). On x86_64, module.arch holds its ORC tables, in the same format
 * as vmlinux's and sorted by the kernel at load time; other architectures have none. Where module
 * memory lies is the architecture's (lx_kernel_module_area). */
#include "lx_internal.h"
#include "lx_module.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ELF_SYM_SIZE      24
#define MAX_MODULE_SIZE   (1u << 30)  /* a core larger than this is garbage */
#define MAX_STRTAB        (16u << 20) /* bytes of one module's string table */
#define MAX_MODULE_STRUCT (64u << 10)
#define KALLSYMS_BYTES    256 /* what read_symbols reads of struct mod_kallsyms */

struct mod_entry {
    struct lx_module info;
    uint64_t *orc_ip; /* absolute, ascending, only those inside the core text */
    uint8_t *orc;     /* the raw 6-byte entries, parallel (decoded by lx_orc.c in k's layout) */
};

struct lx_modules {
    GArray *mods; /* struct mod_entry, by base */
    GArray *syms; /* struct lx_symbol, by address */
    GStringChunk *names;
    size_t n_orc;
    char warning[160];
};

static void warn(lx_modules *m, const char *name, const char *what)
{
    if (!m->warning[0])
        g_snprintf(m->warning, sizeof m->warning, "module %s: %s", name, what);
}

static int read_u64(const struct lx_reader *r, uint64_t kva, uint64_t *v)
{
    return r->read(r->ctx, kva, v, 8);
}

/* [off, off + width) inside size bytes, summed in 64 bits (offsets near 4 GiB do not wrap). */
static bool fits(uint32_t off, uint32_t width, uint32_t size)
{
    return (uint64_t)off + width <= size;
}

struct offset_check {
    const char *what;
    uint32_t off, width;
    bool used; /* false: an optional part this kernel lacks */
};

int lx_module_offsets_check(const struct lx_module_offsets *o, struct qp_error *err)
{
    if (o->module_size > MAX_MODULE_STRUCT || o->name_len < 8 || o->name_len > 256)
        return qp_error_set(err, -EINVAL, "struct module of %u bytes, name of %u: implausible",
                            o->module_size, o->name_len);
    const struct offset_check in_module[] = {
        {"name", o->name, o->name_len, true},
        {"state", o->state, 4, true},
        {"list", o->list, 16, true},
        {"kallsyms", o->kallsyms, 8, true},
        {"core base", o->core_base, 8, true},
        {"core size", o->core_size, 4, true},
        {"core text_size", o->core_text_size, 4, true},
        {"arch.num_orcs", o->num_orcs, 4, o->has_orc},
        {"arch.orc_unwind_ip", o->orc_unwind_ip, 8, o->has_orc},
        {"arch.orc_unwind", o->orc_unwind, 8, o->has_orc},
        {"init base", o->init_base, 8, o->has_init},
        {"init size", o->init_size, 4, o->has_init},
        {"init text_size", o->init_text_size, 4, o->has_init},
    };
    const struct offset_check in_kallsyms[] = {
        {"mod_kallsyms.symtab", o->ks_symtab, 8, true},
        {"mod_kallsyms.strtab", o->ks_strtab, 8, true},
        {"mod_kallsyms.num_symtab", o->ks_num_symtab, 4, true},
        {"mod_kallsyms.typetab", o->ks_typetab, 8, o->has_typetab},
    };
    for (size_t i = 0; i < sizeof in_module / sizeof in_module[0]; i++)
        if (in_module[i].used && !fits(in_module[i].off, in_module[i].width, o->module_size))
            return qp_error_set(
                err, -EINVAL, "struct module's %s at %u (%u bytes) lies outside its %u bytes",
                in_module[i].what, in_module[i].off, in_module[i].width, o->module_size);
    for (size_t i = 0; i < sizeof in_kallsyms / sizeof in_kallsyms[0]; i++)
        if (in_kallsyms[i].used && !fits(in_kallsyms[i].off, in_kallsyms[i].width, KALLSYMS_BYTES))
            return qp_error_set(err, -EINVAL, "%s at %u lies past the %u bytes qprof reads",
                                in_kallsyms[i].what, in_kallsyms[i].off, KALLSYMS_BYTES);
    return 0;
}

static uint64_t get_u64(const uint8_t *buf, uint32_t off)
{
    uint64_t v;
    memcpy(&v, buf + off, 8);
    return v;
}

static uint32_t get_u32(const uint8_t *buf, uint32_t off)
{
    uint32_t v;
    memcpy(&v, buf + off, 4);
    return v;
}

/* [kva, kva + len) lies in the module area [o->area_start, o->area_end). */
static bool in_area(const struct lx_module_offsets *o, uint64_t kva, uint64_t len)
{
    return kva >= o->area_start && kva < o->area_end && len <= o->area_end - kva;
}

int lx__image_text(const lx_kernel *k, uint64_t *text, uint64_t *etext)
{
    if (lx_kernel_symbol_addr(k, "_stext", text) || lx_kernel_symbol_addr(k, "_etext", etext) ||
        *etext <= *text || *text < LX_SZ_2G)
        return -ENOENT;
    return 0;
}

int lx_kernel_module_area(const lx_kernel *k, uint64_t *start, uint64_t *end)
{
    return k->arch->module_area(k, start, end);
}

/* Whether the list_head at kva is the head of a non-empty list of nodes in the module area:
 * its first and last node link back to it. */
static bool is_module_list_head(lx_kernel *k, const struct lx_module_offsets *o, uint64_t kva)
{
    uint64_t head[2], first_prev, last_next;
    if (lx_kernel_read(k, kva, head, sizeof head) || head[0] == kva || !in_area(o, head[0], 16) ||
        !in_area(o, head[1], 16) || lx_kernel_read(k, head[0] + 8, &first_prev, 8) ||
        lx_kernel_read(k, head[1], &last_next, 8))
        return false;
    return first_prev == kva && last_next == kva;
}

/* Functions that walk the module list, from /proc/modules' seq_file up: the first of them in
 * which the list head is found (kallsyms names the first symbol of a name: a static m_next of
 * another file fails the check and the next name is tried). */
static const char *const list_users[] = {"m_next", "m_start", "print_modules", "find_module_all",
                                         "module_kallsyms_on_each_symbol"};
#define LIST_USER_BYTES 512

int lx_kernel_find_modules_list(lx_kernel *k, const struct lx_module_offsets *o, uint64_t *head)
{
    if (lx_kernel_symbol_addr(k, "modules", head) == 0)
        return 0;
    if (!k->arch->pc_rel_addrs)
        return -ENOENT;
    for (size_t i = 0; i < sizeof list_users / sizeof list_users[0]; i++) {
        uint64_t fn, addrs[64];
        uint8_t code[LIST_USER_BYTES];
        if (lx_kernel_symbol_addr(k, list_users[i], &fn) ||
            lx_kernel_read(k, fn, code, sizeof code))
            continue;
        size_t n = k->arch->pc_rel_addrs(code, sizeof code, fn, addrs, 64);
        for (size_t j = 0; j < n; j++)
            if (lx_is_kernel_addr(addrs[j]) && is_module_list_head(k, o, addrs[j])) {
                *head = addrs[j];
                return 0;
            }
    }
    return -ENOENT;
}

/* ---- Symbols ------------------------------------------------------------------------------ */

struct ksyms {
    uint64_t symtab, strtab, typetab;
    uint32_t num;
};

static bool is_text_letter(char c)
{
    return c == 't' || c == 'T' || c == 'w' || c == 'W';
}

/* The kernel's is_mapping_symbol(): assembler labels a module's symbol table keeps (riscv64's
 * .L* and L0, arm64's $x/$d), never a function's name. */
static bool is_label(const char *n)
{
    return n[0] == '$' || (n[0] == '.' && n[1] == 'L') || (n[0] == 'L' && n[1] == '0');
}

/* The string table has no stored length: it ends where the type table starts (the loader lays
 * them out back to back), else a little past the largest name offset, inside the core. */
static uint64_t strtab_len(const struct ksyms *ks, const struct lx_module *mi, uint32_t max_name)
{
    if (ks->typetab > ks->strtab && ks->typetab - ks->strtab <= MAX_STRTAB &&
        ks->typetab - ks->strtab > max_name)
        return ks->typetab - ks->strtab;
    uint64_t want = (uint64_t)max_name + 256;
    if (ks->strtab >= mi->base && ks->strtab < mi->base + mi->size &&
        mi->base + mi->size - ks->strtab < want)
        want = mi->base + mi->size - ks->strtab;
    return want;
}

static void add_symbol(lx_modules *m, const struct lx_module *mi, uint64_t addr, char type,
                       const char *name)
{
    char *full = g_strdup_printf("%s [%s]", name, mi->name);
    struct lx_symbol s = {
        .addr = addr, .type = type, .name = g_string_chunk_insert_const(m->names, full)};
    g_free(full);
    g_array_append_val(m->syms, s);
}

/* Adds the text symbols of the symbol table ks; the string table is read once, in one go. */
static int copy_symbols(lx_modules *m, const struct lx_module_offsets *o, const struct lx_reader *r,
                        const struct ksyms *ks, struct lx_module *mi, const char **why)
{
    uint8_t *syms = g_malloc((size_t)ks->num * ELF_SYM_SIZE);
    char *types = ks->typetab ? g_malloc(ks->num) : NULL;
    char *strs = NULL;
    int rc = -EFAULT;
    *why = "symbol table unreadable";
    if (r->read(r->ctx, ks->symtab, syms, (size_t)ks->num * ELF_SYM_SIZE) ||
        (types && r->read(r->ctx, ks->typetab, types, ks->num)))
        goto out;
    uint32_t max_name = 0;
    for (uint32_t i = 0; i < ks->num; i++)
        max_name = MAX(max_name, get_u32(syms + i * ELF_SYM_SIZE, 0));
    uint64_t len = strtab_len(ks, mi, max_name);
    *why = "string table out of range or unreadable";
    if (len > MAX_STRTAB || len <= max_name || !in_area(o, ks->strtab, len))
        goto out;
    strs = g_malloc0(len + 1); /* NUL-terminated whatever the guest wrote */
    if (r->read(r->ctx, ks->strtab, strs, len))
        goto out;
    for (uint32_t i = 1; i < ks->num; i++) { /* entry 0 is the null symbol */
        const uint8_t *s = syms + (size_t)i * ELF_SYM_SIZE;
        uint32_t name = get_u32(s, 0);
        uint16_t shndx;
        memcpy(&shndx, s + 6, 2);
        uint64_t value = get_u64(s, 8);
        char type = types ? types[i] : 't';
        const char *n = strs + name;
        if (shndx == 0 || !is_text_letter(type) || !n[0] || is_label(n) || value < mi->base ||
            value >= mi->base + mi->text_size)
            continue;
        add_symbol(m, mi, value, type, n);
        mi->n_syms++;
    }
    add_symbol(m, mi, mi->base + mi->text_size, 'r', "_etext");
    rc = 0;
out:
    g_free(syms);
    g_free(types);
    g_free(strs);
    return rc;
}

static void read_symbols(lx_modules *m, const struct lx_module_offsets *o,
                         const struct lx_reader *r, const uint8_t *mod, struct lx_module *mi)
{
    uint64_t kallsyms = get_u64(mod, o->kallsyms);
    /* lx_module_offsets_check kept every ks_* field inside KALLSYMS_BYTES */
    uint32_t span = MAX(MAX(o->ks_symtab, o->ks_strtab), o->has_typetab ? o->ks_typetab : 0) + 8;
    span = MAX(span, o->ks_num_symtab + 4);
    uint8_t ks_buf[KALLSYMS_BYTES];
    const char *why = "no symbol table";
    if (!lx_is_kernel_addr(kallsyms) || span > sizeof ks_buf ||
        r->read(r->ctx, kallsyms, ks_buf, span)) {
        warn(m, mi->name, why);
        return;
    }
    struct ksyms ks = {.symtab = get_u64(ks_buf, o->ks_symtab),
                       .strtab = get_u64(ks_buf, o->ks_strtab),
                       .typetab = o->has_typetab ? get_u64(ks_buf, o->ks_typetab) : 0,
                       .num = get_u32(ks_buf, o->ks_num_symtab)};
    if (ks.num == 0)
        return;
    if (ks.num > LX_MODULE_MAX_SYMS || !in_area(o, ks.symtab, (uint64_t)ks.num * ELF_SYM_SIZE) ||
        (ks.typetab && !in_area(o, ks.typetab, ks.num)))
        why = "symbol table out of range";
    else if (copy_symbols(m, o, r, &ks, mi, &why) == 0)
        return;
    warn(m, mi->name, why);
}

/* ---- ORC ---------------------------------------------------------------------------------- */

static void read_orc(lx_modules *m, const struct lx_module_offsets *o, const struct lx_reader *r,
                     const uint8_t *mod, struct mod_entry *e)
{
    if (!o->has_orc)
        return;
    uint32_t n = get_u32(mod, o->num_orcs);
    uint64_t ip_at = get_u64(mod, o->orc_unwind_ip), orc_at = get_u64(mod, o->orc_unwind);
    if (n == 0)
        return;
    if (n > LX_MODULE_MAX_ORCS || !in_area(o, ip_at, (uint64_t)n * 4) ||
        !in_area(o, orc_at, (uint64_t)n * 6)) {
        warn(m, e->info.name, "ORC tables out of range");
        return;
    }
    int32_t *rel = g_new(int32_t, n);
    uint8_t *raw = g_new(uint8_t, (size_t)n * 6);
    e->orc_ip = g_new(uint64_t, n);
    e->orc = g_new(uint8_t, (size_t)n * 6);
    size_t kept = 0;
    const char *why = NULL;
    if (r->read(r->ctx, ip_at, rel, (size_t)n * 4) || r->read(r->ctx, orc_at, raw, (size_t)n * 6))
        why = "ORC tables unreadable";
    uint64_t text_end = e->info.base + e->info.text_size;
    for (uint32_t i = 0; !why && i < n; i++) {
        uint64_t ip = ip_at + 4 * (uint64_t)i + (uint64_t)(int64_t)rel[i];
        /* Entries of the freed init text lie elsewhere; the terminator at the end is kept. */
        if (ip < e->info.base || ip > text_end)
            continue;
        if (kept && ip < e->orc_ip[kept - 1])
            why = "ORC table not sorted";
        e->orc_ip[kept] = ip;
        memcpy(e->orc + 6 * kept++, raw + 6 * (size_t)i, 6);
    }
    if (why) {
        warn(m, e->info.name, why);
        kept = 0;
    }
    e->info.n_orc = kept;
    m->n_orc += kept;
    g_free(rel);
    g_free(raw);
}

/* ---- The list ----------------------------------------------------------------------------- */

/* Fills mi from a struct module read into mod; false when its core range is implausible. */
static bool module_info(const struct lx_module_offsets *o, const uint8_t *mod, uint64_t addr,
                        struct lx_module *mi)
{
    *mi = (struct lx_module){.addr = addr,
                             .base = get_u64(mod, o->core_base),
                             .size = get_u32(mod, o->core_size),
                             .text_size = get_u32(mod, o->core_text_size)};
    size_t len = MIN((size_t)o->name_len, sizeof mi->name - 1);
    memcpy(mi->name, mod + o->name, len);
    mi->name[len] = '\0';
    for (char *c = mi->name; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == ';' || *c == '[' || *c == ']' || *c == ' ')
            *c = '_';
    return mi->size > 0 && mi->size <= MAX_MODULE_SIZE && mi->text_size <= mi->size &&
           in_area(o, mi->base, mi->size) && mi->name[0];
}

/* A module running its init function (insmod's stacks) has a second text range, freed once it
 * is live: an entry of its own, with the symbols and ORC entries that lie in it. Its going away
 * changes the list's identity, so the next check reads the list again without it. */
static void add_init_text(lx_modules *m, const struct lx_module_offsets *o,
                          const struct lx_reader *r, const uint8_t *mod,
                          const struct lx_module *core, bool full)
{
    if (!o->has_init || get_u32(mod, o->state) != o->state_coming)
        return;
    struct mod_entry e = {.info = *core};
    e.info.base = get_u64(mod, o->init_base);
    e.info.size = get_u32(mod, o->init_size);
    e.info.text_size = get_u32(mod, o->init_text_size);
    e.info.n_syms = e.info.n_orc = 0;
    if (!e.info.text_size || e.info.text_size > e.info.size || e.info.size > MAX_MODULE_SIZE ||
        !in_area(o, e.info.base, e.info.size))
        return;
    if (full) {
        read_symbols(m, o, r, mod, &e.info);
        read_orc(m, o, r, mod, &e);
    }
    g_array_append_val(m->mods, e);
}

static int cmp_entry(const void *a, const void *b)
{
    const struct mod_entry *x = a, *y = b;
    return x->info.base < y->info.base ? -1 : x->info.base > y->info.base;
}

static int cmp_symbol(const void *a, const void *b)
{
    const struct lx_symbol *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* One node of the list: reads the struct module around it, checks that it links back to prev,
 * and adds it when live. *next: the following node. */
static int visit(lx_modules *m, const struct lx_module_offsets *o, const struct lx_reader *r,
                 uint64_t node, uint64_t prev, bool full, uint8_t *mod, uint64_t *next,
                 struct qp_error *err)
{
    uint64_t addr = node - o->list;
    if ((node & 7) || !in_area(o, addr, o->module_size))
        return qp_error_set(err, -EFAULT, "module list: node 0x%llx is outside the module area",
                            (unsigned long long)node);
    if (r->read(r->ctx, addr, mod, o->module_size))
        return qp_error_set(err, -EFAULT, "module list: struct module at 0x%llx unreadable",
                            (unsigned long long)addr);
    if (get_u64(mod, o->list + 8) != prev)
        return qp_error_set(err, -EAGAIN,
                            "module list: node 0x%llx does not link back (the list is changing, "
                            "or garbage)",
                            (unsigned long long)node);
    *next = get_u64(mod, o->list);
    struct mod_entry e = {0};
    /* Coming (its init running) and going modules have their core text and tables in place;
     * an unformed one may not yet. */
    if (get_u32(mod, o->state) == o->state_unformed)
        return 0;
    if (!module_info(o, mod, addr, &e.info))
        return qp_error_set(err, -EPROTO, "module at 0x%llx: core 0x%llx+%llu is implausible",
                            (unsigned long long)addr, (unsigned long long)e.info.base,
                            (unsigned long long)e.info.size);
    if (full) {
        read_symbols(m, o, r, mod, &e.info);
        read_orc(m, o, r, mod, &e);
    }
    g_array_append_val(m->mods, e);
    add_init_text(m, o, r, mod, &e.info, full);
    return 0;
}

static lx_modules *modules_new(void)
{
    lx_modules *m = g_new0(lx_modules, 1);
    m->mods = g_array_new(FALSE, FALSE, sizeof(struct mod_entry));
    m->syms = g_array_new(FALSE, FALSE, sizeof(struct lx_symbol));
    m->names = g_string_chunk_new(4096);
    return m;
}

int lx_modules_read(const struct lx_module_offsets *o, const struct lx_reader *r,
                    uint64_t list_head, bool full, lx_modules **out, struct qp_error *err)
{
    int rc = lx_module_offsets_check(o, err);
    if (rc)
        return rc;
    if (o->area_end <= o->area_start)
        return qp_error_set(err, -EINVAL, "no module area (0x%llx..0x%llx)",
                            (unsigned long long)o->area_start, (unsigned long long)o->area_end);
    lx_modules *m = modules_new();
    uint8_t *mod = g_malloc(o->module_size);
    uint64_t node = 0, prev = list_head;
    rc = read_u64(r, list_head, &node)
             ? qp_error_set(err, -EFAULT, "module list head at 0x%llx unreadable",
                            (unsigned long long)list_head)
             : 0;
    for (int count = 0; !rc && node != list_head; count++) {
        uint64_t next = 0;
        if (count >= LX_MAX_MODULES)
            rc = qp_error_set(err, -ELOOP, "module list longer than %d entries: a loop?",
                              LX_MAX_MODULES);
        else
            rc = visit(m, o, r, node, prev, full, mod, &next, err);
        prev = node, node = next;
    }
    g_free(mod);
    if (rc) {
        lx_modules_free(m);
        return rc;
    }
    g_array_sort(m->mods, cmp_entry);
    g_array_sort(m->syms, cmp_symbol);
    *out = m;
    return 0;
}

void lx_modules_free(lx_modules *m)
{
    if (!m)
        return;
    for (guint i = 0; i < m->mods->len; i++) {
        struct mod_entry *e = &g_array_index(m->mods, struct mod_entry, i);
        g_free(e->orc_ip);
        g_free(e->orc);
    }
    g_array_free(m->mods, TRUE);
    g_array_free(m->syms, TRUE);
    g_string_chunk_free(m->names);
    g_free(m);
}

size_t lx_modules_count(const lx_modules *m)
{
    return m ? m->mods->len : 0;
}

const struct lx_module *lx_modules_at(const lx_modules *m, size_t i)
{
    return m && i < m->mods->len ? &g_array_index(m->mods, struct mod_entry, i).info : NULL;
}

const char *lx_modules_warning(const lx_modules *m)
{
    return m && m->warning[0] ? m->warning : NULL;
}

bool lx_modules_same(const lx_modules *a, const lx_modules *b)
{
    if (!a || !b || a->mods->len != b->mods->len)
        return false;
    for (guint i = 0; i < a->mods->len; i++) {
        const struct lx_module *x = lx_modules_at(a, i), *y = lx_modules_at(b, i);
        if (x->addr != y->addr || x->base != y->base || x->size != y->size ||
            x->text_size != y->text_size || strcmp(x->name, y->name) != 0)
            return false;
    }
    return true;
}

static const struct mod_entry *find_entry(const lx_modules *m, uint64_t pc)
{
    if (!m || !m->mods->len)
        return NULL;
    const struct mod_entry *e = (const struct mod_entry *)m->mods->data;
    size_t lo = 0, hi = m->mods->len;
    while (lo < hi) { /* the first module whose base is above pc */
        size_t mid = lo + (hi - lo) / 2;
        if (e[mid].info.base <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct mod_entry *c = &e[lo - 1];
    return pc < c->info.base + c->info.text_size ? c : NULL;
}

const struct lx_module *lx_modules_find(const lx_modules *m, uint64_t pc)
{
    const struct mod_entry *e = find_entry(m, pc);
    return e ? &e->info : NULL;
}

size_t lx_modules_orc_entries(const lx_modules *m)
{
    return m ? m->n_orc : 0;
}

const struct lx_symbol *lx_modules_symbols(const lx_modules *m, size_t *n)
{
    *n = m ? m->syms->len : 0;
    return *n ? (const struct lx_symbol *)m->syms->data : NULL;
}

const uint8_t *lx_modules_orc_find(const void *modules, uint64_t ip)
{
    const struct mod_entry *e = find_entry(modules, ip);
    size_t i = e ? lx__orc_search(e->orc_ip, e->info.n_orc, ip) : SIZE_MAX;
    return i == SIZE_MAX ? NULL : e->orc + 6 * i;
}

void lx_kernel_use_modules(lx_kernel *k, const lx_modules *m)
{
    k->more_orc = m ? lx_modules_orc_find : NULL;
    k->more_orc_ctx = m;
    k->mod_syms = lx_modules_symbols(m, &k->n_mod_syms);
}
