/* The profile: modules, interned stacks, and one compact record per sample. */
#include "output.h"

#include <glib.h>
#include <string.h>

struct out_profile {
    GArray *modules;         /* struct out_module */
    GPtrArray *stacks;       /* struct out_stack *, owned, index = id */
    GHashTable *ids;         /* struct out_stack * -> id + 1 */
    GArray *samples;         /* struct out_record */
    GArray *exact;           /* struct out_exact, --exact's counts */
    GHashTable *exact_index; /* (module, pc) packed into a key string -> index + 1 */
    GPtrArray *code;         /* struct out_code *, owned with its name and bytes */
};

static guint stack_hash(gconstpointer key)
{
    const struct out_stack *s = key;
    guint h = g_str_hash(s->comm) ^ (s->pid * 2654435761u) ^ ((guint)s->mode << 24) ^
              ((guint)s->user_stop << 16) ^ ((guint)s->kernel_stop << 8) ^ s->n_user;
    for (int i = 0; i < s->n_frames; i++)
        h = h * 31 + (guint)(s->frames[i].pc ^ s->frames[i].pc >> 32) + s->frames[i].module;
    return h;
}

static bool frames_equal(const struct out_frame *a, const struct out_frame *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].pc != b[i].pc || a[i].module != b[i].module || a[i].exact != b[i].exact ||
            a[i].kernel != b[i].kernel)
            return false;
    return true;
}

static gboolean stack_equal(gconstpointer pa, gconstpointer pb)
{
    const struct out_stack *a = pa, *b = pb;
    return a->pid == b->pid && a->mode == b->mode && a->user_stop == b->user_stop &&
           a->kernel_stop == b->kernel_stop && a->n_frames == b->n_frames &&
           a->n_user == b->n_user && strcmp(a->comm, b->comm) == 0 &&
           frames_equal(a->frames, b->frames, a->n_frames);
}

static void stack_free(gpointer p)
{
    struct out_stack *s = p;
    g_free((void *)s->frames);
    g_free(s);
}

static void code_free(gpointer data)
{
    struct out_code *c = data;
    g_free((void *)c->name);
    g_free((void *)c->bytes);
    g_free(c);
}

out_profile *out_profile_new(void)
{
    out_profile *p = g_new0(out_profile, 1);
    p->modules = g_array_new(FALSE, TRUE, sizeof(struct out_module));
    p->stacks = g_ptr_array_new_with_free_func(stack_free);
    p->ids = g_hash_table_new(stack_hash, stack_equal);
    p->samples = g_array_new(FALSE, FALSE, sizeof(struct out_record));
    p->exact = g_array_new(FALSE, FALSE, sizeof(struct out_exact));
    p->code = g_ptr_array_new_with_free_func(code_free);
    p->exact_index =
        g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
    return p;
}

void out_profile_free(out_profile *p)
{
    if (!p)
        return;
    g_hash_table_destroy(p->ids);
    g_ptr_array_free(p->stacks, TRUE);
    g_array_free(p->modules, TRUE);
    g_array_free(p->samples, TRUE);
    g_array_free(p->exact, TRUE);
    g_ptr_array_free(p->code, TRUE);
    g_hash_table_destroy(p->exact_index);
    g_free(p);
}

void out_profile_add_exact(out_profile *p, uint32_t module, uint64_t pc, uint64_t insns)
{
    struct {
        uint64_t pc;
        uint32_t module, pad;
    } packed = {pc, module, 0};
    GBytes *key = g_bytes_new(&packed, sizeof packed);
    guint index = GPOINTER_TO_UINT(g_hash_table_lookup(p->exact_index, key));
    if (index) {
        g_array_index(p->exact, struct out_exact, index - 1).insns += insns;
        g_bytes_unref(key);
        return;
    }
    struct out_exact e = {.module = module, .pc = pc, .insns = insns};
    g_array_append_val(p->exact, e);
    g_hash_table_insert(p->exact_index, key, GUINT_TO_POINTER(p->exact->len));
}

size_t out_profile_exact_count(const out_profile *p)
{
    return p->exact->len;
}

const struct out_exact *out_profile_exact(const out_profile *p)
{
    return (const struct out_exact *)p->exact->data;
}

uint32_t out_profile_add_module(out_profile *p, const struct out_module *m)
{
    struct out_module copy = *m;
    copy.name[sizeof copy.name - 1] = '\0';
    copy.path[sizeof copy.path - 1] = '\0';
    g_array_append_val(p->modules, copy);
    return p->modules->len - 1;
}

void out_profile_set_module_base(out_profile *p, uint32_t index, uint64_t base)
{
    if (index < p->modules->len)
        g_array_index(p->modules, struct out_module, index).base = base;
}

size_t out_profile_module_count(const out_profile *p)
{
    return p->modules->len;
}

const struct out_module *out_profile_module(const out_profile *p, uint32_t index)
{
    return index < p->modules->len ? &g_array_index(p->modules, struct out_module, index) : NULL;
}

/* The interned id of a stack, added when new. */
static uint32_t intern(out_profile *p, const struct out_stack *key)
{
    gpointer found = g_hash_table_lookup(p->ids, key);
    if (found)
        return GPOINTER_TO_UINT(found) - 1;
    struct out_stack *s = g_new(struct out_stack, 1);
    *s = *key;
    s->frames = g_memdup2(key->frames, sizeof(struct out_frame) * key->n_frames);
    g_ptr_array_add(p->stacks, s);
    uint32_t id = p->stacks->len - 1;
    g_hash_table_insert(p->ids, s, GUINT_TO_POINTER(id + 1));
    return id;
}

uint32_t out_profile_intern(out_profile *p, const struct out_stack *s)
{
    return intern(p, s);
}

void out_profile_add_record(out_profile *p, const struct out_record *r)
{
    g_array_append_val(p->samples, *r);
}

uint32_t out_profile_add(out_profile *p, const struct out_sample *s)
{
    struct out_stack key = {.pid = s->pid,
                            .mode = s->mode,
                            .user_stop = s->user_stop,
                            .kernel_stop = s->kernel_stop,
                            .n_frames = s->n_frames,
                            .n_user = s->n_user,
                            .frames = s->frames};
    g_strlcpy(key.comm, s->comm, sizeof key.comm);
    for (char *c = key.comm; *c; c++)
        if (*c == ';' || (unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '_'; /* the guest chose it: it must not split a folded line or a frame */
    struct out_record r = {s->time_ns, s->weight_ns, s->cpu, intern(p, &key)};
    g_array_append_val(p->samples, r);
    return r.stack;
}

size_t out_profile_sample_count(const out_profile *p)
{
    return p->samples->len;
}

const struct out_record *out_profile_samples(const out_profile *p)
{
    return (const struct out_record *)p->samples->data;
}

size_t out_profile_stack_count(const out_profile *p)
{
    return p->stacks->len;
}

const struct out_stack *out_profile_stack(const out_profile *p, uint32_t id)
{
    return id < p->stacks->len ? g_ptr_array_index(p->stacks, id) : NULL;
}

void out_profile_stack_totals(const out_profile *p, uint64_t *counts, uint64_t *weights_ns)
{
    size_t n = p->stacks->len;
    if (counts)
        memset(counts, 0, n * sizeof *counts);
    if (weights_ns)
        memset(weights_ns, 0, n * sizeof *weights_ns);
    for (guint i = 0; i < p->samples->len; i++) {
        const struct out_record *r = &g_array_index(p->samples, struct out_record, i);
        if (counts)
            counts[r->stack]++;
        if (weights_ns)
            weights_ns[r->stack] += r->weight_ns;
    }
}

const char *out_stack_root(const struct out_stack *s, char *out, size_t cap)
{
    if (s->mode == OUT_MODE_IDLE)
        g_strlcpy(out, "idle", cap);
    else if (s->mode == OUT_MODE_BOOT)
        g_strlcpy(out, "[firmware or early boot]", cap);
    else if (s->pid)
        snprintf(out, cap, "%s (%u)", s->comm[0] ? s->comm : "?", s->pid);
    else if (strstr(s->comm, " [as ")) /* an address space standing for a process (--os none) */
        g_strlcpy(out, s->comm, cap);
    else if (s->mode == OUT_MODE_USER)
        g_strlcpy(out, "[unknown process]", cap);
    else
        g_strlcpy(out, "kernel", cap);
    return out;
}

const char *out_stack_root_as(const struct out_stack *s, bool by_name, char *out, size_t cap)
{
    if (by_name && s->pid && s->mode != OUT_MODE_IDLE && s->mode != OUT_MODE_BOOT)
        g_strlcpy(out, s->comm[0] ? s->comm : "?", cap);
    else
        out_stack_root(s, out, cap);
    return out;
}

void out_profile_filter(out_profile *p,
                        bool (*keep)(const struct out_record *r, const struct out_stack *s,
                                     void *ctx),
                        void *ctx)
{
    guint kept = 0;
    for (guint i = 0; i < p->samples->len; i++) {
        struct out_record r = g_array_index(p->samples, struct out_record, i);
        if (keep(&r, g_ptr_array_index(p->stacks, r.stack), ctx))
            g_array_index(p->samples, struct out_record, kept++) = r;
    }
    g_array_set_size(p->samples, kept);
}

bool out_profile_add_code(out_profile *p, const struct out_code *code)
{
    if (!code->len || code->len > OUT_CODE_MAX_LEN || p->code->len >= OUT_CODE_MAX_FUNCTIONS)
        return false;
    for (guint i = 0; i < p->code->len; i++) {
        const struct out_code *c = g_ptr_array_index(p->code, i);
        if (c->module == code->module && c->addr == code->addr)
            return false;
    }
    struct out_code *c = g_new(struct out_code, 1);
    *c = *code;
    c->name = g_strdup(code->name ? code->name : "");
    c->bytes = g_memdup2(code->bytes, code->len);
    g_ptr_array_add(p->code, c);
    return true;
}

size_t out_profile_code_count(const out_profile *p)
{
    return p->code->len;
}

const struct out_code *out_profile_code(const out_profile *p, size_t index)
{
    return index < p->code->len ? g_ptr_array_index(p->code, index) : NULL;
}

/* A linear search: a profile keeps code for a few hundred functions at most. */
const struct out_code *out_profile_code_at(const out_profile *p, uint32_t module, uint64_t pc)
{
    for (guint i = 0; i < p->code->len; i++) {
        const struct out_code *c = g_ptr_array_index(p->code, i);
        if (c->module == module && pc >= c->addr && pc - c->addr < c->len)
            return c;
    }
    return NULL;
}
