/* qprof top's numbers: functions, processes, vCPUs and callers over a range of the profile. */
#include "top_view.h"

#include <glib.h>
#include <string.h>

struct fn_row {
    struct top_row row;
    uint64_t stamp; /* the last stack that counted it towards total (recursion counts once) */
};

struct stack_count {
    uint32_t stack;
    uint64_t count;
};

struct top_view {
    const out_profile *profile;
    out_names *names;
    struct top_filter filter;
    GArray *fns;           /* struct fn_row, every function ever seen */
    GHashTable *fn_by_key; /* "module\tname" -> index + 1 */
    GHashTable *fn_by_pc;  /* const struct out_name * (one per distinct pc) -> index + 1 */
    GArray *rows;          /* struct top_row: the last update's table, sorted */
    GArray *counted;       /* struct stack_count: the table's stacks in the range */
    GArray *procs;         /* struct top_proc */
    struct top_cpu cpus[TOP_MAX_CPUS];
    int n_cpus;
    uint64_t *per_stack; /* samples per stack id in the range (n_per_stack of them) */
    size_t n_per_stack;
    uint64_t in_range, n_counted, stamp;
    GArray *callers; /* struct top_caller */
    GPtrArray *frames;
};

top_view *top_view_new(const out_profile *p, out_names *names)
{
    top_view *v = g_new0(top_view, 1);
    v->profile = p;
    v->names = names;
    v->fns = g_array_new(FALSE, TRUE, sizeof(struct fn_row));
    v->fn_by_key = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    v->fn_by_pc = g_hash_table_new(g_direct_hash, g_direct_equal);
    v->rows = g_array_new(FALSE, TRUE, sizeof(struct top_row));
    v->counted = g_array_new(FALSE, TRUE, sizeof(struct stack_count));
    v->procs = g_array_new(FALSE, TRUE, sizeof(struct top_proc));
    v->callers = g_array_new(FALSE, TRUE, sizeof(struct top_caller));
    v->frames = g_ptr_array_new();
    return v;
}

static void clear_callers(top_view *v)
{
    for (guint i = 0; i < v->callers->len; i++)
        g_free(g_array_index(v->callers, struct top_caller, i).chain);
    g_array_set_size(v->callers, 0);
}

void top_view_free(top_view *v)
{
    if (!v)
        return;
    clear_callers(v);
    g_array_free(v->callers, TRUE);
    g_array_free(v->fns, TRUE);
    g_hash_table_destroy(v->fn_by_key);
    g_hash_table_destroy(v->fn_by_pc);
    g_array_free(v->rows, TRUE);
    g_array_free(v->counted, TRUE);
    g_array_free(v->procs, TRUE);
    g_ptr_array_free(v->frames, TRUE);
    g_free(v->per_stack);
    g_free(v);
}

/* The first record at or after from_ns: records are in time order. */
static size_t first_at(const struct out_record *r, size_t n, uint64_t from_ns)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].time_ns < from_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void count_cpu(top_view *v, uint32_t cpu, uint8_t mode)
{
    if (cpu >= TOP_MAX_CPUS)
        return;
    struct top_cpu *c = &v->cpus[cpu];
    if (mode == OUT_MODE_USER)
        c->user++;
    else if (mode == OUT_MODE_KERNEL)
        c->kernel++;
    else if (mode == OUT_MODE_IDLE)
        c->idle++;
    else
        c->other++;
    if ((int)cpu >= v->n_cpus)
        v->n_cpus = (int)cpu + 1;
}

/* Samples per stack in the range (vCPU filter applied), and every sample into the vCPU bars. */
static void count_range(top_view *v, uint64_t from_ns, uint64_t to_ns)
{
    size_t n_stacks = out_profile_stack_count(v->profile);
    if (n_stacks > v->n_per_stack) {
        v->per_stack = g_renew(uint64_t, v->per_stack, n_stacks);
        v->n_per_stack = n_stacks;
    }
    memset(v->per_stack, 0, n_stacks * sizeof *v->per_stack);
    memset(v->cpus, 0, sizeof v->cpus);
    v->n_cpus = 0;
    v->in_range = 0;
    const struct out_record *r = out_profile_samples(v->profile);
    size_t n = out_profile_sample_count(v->profile);
    for (size_t i = first_at(r, n, from_ns); i < n && r[i].time_ns <= to_ns; i++) {
        count_cpu(v, r[i].cpu, out_profile_stack(v->profile, r[i].stack)->mode);
        v->in_range++;
        if (v->filter.cpu < 0 || r[i].cpu == (uint32_t)v->filter.cpu)
            v->per_stack[r[i].stack]++;
    }
}

static void add_proc(top_view *v, GHashTable *by_root, const char *root, uint64_t count)
{
    gsize index = GPOINTER_TO_SIZE(g_hash_table_lookup(by_root, root));
    if (!index) {
        struct top_proc p = {.count = 0};
        g_strlcpy(p.root, root, sizeof p.root);
        g_array_append_val(v->procs, p);
        index = v->procs->len;
        g_hash_table_insert(by_root, g_strdup(root), GSIZE_TO_POINTER(index));
    }
    g_array_index(v->procs, struct top_proc, index - 1).count += count;
}

static bool mode_passes(enum top_mode mode, uint8_t stack_mode)
{
    if (mode == TOP_KERNEL)
        return stack_mode == OUT_MODE_KERNEL || stack_mode == OUT_MODE_IDLE;
    if (mode == TOP_USER)
        return stack_mode == OUT_MODE_USER;
    return true;
}

/* A frame the table shows under the filter's mode (no [truncated] markers). */
static bool frame_shown(const top_view *v, const struct out_name *f)
{
    if (f->marker)
        return false;
    return v->filter.mode == TOP_ALL || f->kernel == (v->filter.mode == TOP_KERNEL);
}

/* Processes from the counted stacks; the table's stacks into v->counted. */
static void split_stacks(top_view *v)
{
    GHashTable *by_root = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_array_set_size(v->procs, 0);
    g_array_set_size(v->counted, 0);
    size_t n_stacks = out_profile_stack_count(v->profile);
    for (size_t id = 0; id < v->n_per_stack && id < n_stacks; id++) {
        if (!v->per_stack[id])
            continue;
        const struct out_stack *s = out_profile_stack(v->profile, (uint32_t)id);
        char root[TOP_ROOT_LEN];
        out_stack_root(s, root, sizeof root);
        add_proc(v, by_root, root, v->per_stack[id]);
        if (!mode_passes(v->filter.mode, s->mode) ||
            (v->filter.root[0] && strcmp(v->filter.root, root) != 0))
            continue;
        struct stack_count c = {(uint32_t)id, v->per_stack[id]};
        g_array_append_val(v->counted, c);
    }
    g_hash_table_destroy(by_root);
}

static int compare_procs(const void *a, const void *b)
{
    const struct top_proc *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->root, y->root);
}

/* The row of a frame's function: by its pc's name the second time, by module and name the
 * first (a function's pcs share a row). */
static struct fn_row *row_of(top_view *v, const struct out_name *f)
{
    gsize index = GPOINTER_TO_SIZE(g_hash_table_lookup(v->fn_by_pc, f));
    if (!index) {
        char *key = g_strdup_printf("%s\t%s", f->module, f->name);
        index = GPOINTER_TO_SIZE(g_hash_table_lookup(v->fn_by_key, key));
        if (!index) {
            struct fn_row r = {.row = {.name = f->name, .module = f->module, .kernel = f->kernel}};
            g_array_append_val(v->fns, r);
            index = v->fns->len;
            g_hash_table_insert(v->fn_by_key, key, GSIZE_TO_POINTER(index));
        } else {
            g_free(key);
        }
        g_hash_table_insert(v->fn_by_pc, (gpointer)f, GSIZE_TO_POINTER(index));
    }
    return &g_array_index(v->fns, struct fn_row, index - 1);
}

/* The display frames of a stack into v->frames (outermost first). */
static void stack_frames(top_view *v, const struct out_stack *s)
{
    int len = out_stack_display_len(s);
    g_ptr_array_set_size(v->frames, len);
    out_stack_display(v->names, s, (const struct out_name **)v->frames->pdata);
}

/* One stack's samples into its functions: self for the innermost shown frame, total once for
 * every function shown. */
static void count_stack(top_view *v, const struct stack_count *c)
{
    stack_frames(v, out_profile_stack(v->profile, c->stack));
    v->stamp++;
    struct fn_row *leaf = NULL;
    for (guint i = 0; i < v->frames->len; i++) {
        const struct out_name *f = g_ptr_array_index(v->frames, i);
        if (!frame_shown(v, f))
            continue;
        leaf = row_of(v, f);
        if (leaf->stamp != v->stamp) {
            leaf->stamp = v->stamp;
            leaf->row.total += c->count;
        }
    }
    if (leaf)
        leaf->row.self += c->count;
}

static enum top_sort sort_key;

static int compare_rows(const void *a, const void *b)
{
    const struct top_row *x = a, *y = b;
    uint64_t kx = sort_key == TOP_SORT_SELF ? x->self : x->total;
    uint64_t ky = sort_key == TOP_SORT_SELF ? y->self : y->total;
    if (kx != ky)
        return kx < ky ? 1 : -1;
    int by_name = strcmp(x->name, y->name);
    return by_name ? by_name : strcmp(x->module, y->module);
}

static void build_rows(top_view *v)
{
    for (guint i = 0; i < v->fns->len; i++) {
        struct fn_row *r = &g_array_index(v->fns, struct fn_row, i);
        r->row.self = r->row.total = 0;
    }
    v->n_counted = 0;
    for (guint i = 0; i < v->counted->len; i++) {
        const struct stack_count *c = &g_array_index(v->counted, struct stack_count, i);
        count_stack(v, c);
        v->n_counted += c->count;
    }
    g_array_set_size(v->rows, 0);
    for (guint i = 0; i < v->fns->len; i++) {
        const struct fn_row *r = &g_array_index(v->fns, struct fn_row, i);
        if (r->row.total)
            g_array_append_val(v->rows, r->row);
    }
    sort_key = v->filter.sort; /* qsort has no context argument in C11 */
    qsort(v->rows->data, v->rows->len, sizeof(struct top_row), compare_rows);
}

void top_view_update(top_view *v, const struct top_filter *f, uint64_t from_ns, uint64_t to_ns)
{
    v->filter = *f;
    clear_callers(v);
    count_range(v, from_ns, to_ns);
    split_stacks(v);
    qsort(v->procs->data, v->procs->len, sizeof(struct top_proc), compare_procs);
    build_rows(v);
}

size_t top_view_rows(const top_view *v, const struct top_row **rows)
{
    *rows = (const struct top_row *)v->rows->data;
    return v->rows->len;
}

uint64_t top_view_counted(const top_view *v)
{
    return v->n_counted;
}

uint64_t top_view_in_range(const top_view *v)
{
    return v->in_range;
}

size_t top_view_procs(const top_view *v, const struct top_proc **procs)
{
    *procs = (const struct top_proc *)v->procs->data;
    return v->procs->len;
}

int top_view_cpus(const top_view *v, const struct top_cpu **cpus)
{
    *cpus = v->cpus;
    return v->n_cpus;
}

/* The chain from the innermost frame of fn outwards (shown frames only), or NULL when the stack
 * does not go through fn. */
static char *chain_through(top_view *v, const struct top_row *fn)
{
    int at = -1;
    for (guint i = 0; i < v->frames->len; i++) {
        const struct out_name *f = g_ptr_array_index(v->frames, i);
        if (frame_shown(v, f) && strcmp(f->name, fn->name) == 0 &&
            strcmp(f->module, fn->module) == 0)
            at = (int)i;
    }
    if (at < 0)
        return NULL;
    GString *chain = g_string_new(NULL);
    for (int i = at; i >= 0; i--) {
        const struct out_name *f = g_ptr_array_index(v->frames, i);
        if (!frame_shown(v, f))
            continue;
        g_string_append_printf(chain, "%s%s", chain->len ? " <- " : "", f->name);
    }
    return g_string_free(chain, FALSE);
}

static int compare_callers(const void *a, const void *b)
{
    const struct top_caller *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    int by_chain = strcmp(x->chain, y->chain);
    return by_chain ? by_chain : strcmp(x->root, y->root);
}

static void add_caller(top_view *v, GHashTable *seen, char *chain, const char *root, uint64_t count)
{
    char *key = g_strdup_printf("%s\t%s", root, chain);
    gsize index = GPOINTER_TO_SIZE(g_hash_table_lookup(seen, key));
    if (index) {
        g_array_index(v->callers, struct top_caller, index - 1).count += count;
        g_free(chain);
        g_free(key);
        return;
    }
    struct top_caller c = {.chain = chain, .count = count};
    g_strlcpy(c.root, root, sizeof c.root);
    g_array_append_val(v->callers, c);
    g_hash_table_insert(seen, key, GSIZE_TO_POINTER(v->callers->len));
}

size_t top_view_callers(top_view *v, size_t row, size_t max, const struct top_caller **out)
{
    clear_callers(v);
    *out = NULL;
    if (row >= v->rows->len)
        return 0;
    const struct top_row *fn = &g_array_index(v->rows, struct top_row, row);
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint i = 0; i < v->counted->len; i++) {
        const struct stack_count *c = &g_array_index(v->counted, struct stack_count, i);
        const struct out_stack *s = out_profile_stack(v->profile, c->stack);
        stack_frames(v, s);
        char *chain = chain_through(v, fn);
        if (!chain)
            continue;
        char root[TOP_ROOT_LEN];
        add_caller(v, seen, chain, out_stack_root(s, root, sizeof root), c->count);
    }
    g_hash_table_destroy(seen);
    qsort(v->callers->data, v->callers->len, sizeof(struct top_caller), compare_callers);
    *out = (const struct top_caller *)v->callers->data;
    return v->callers->len < max ? v->callers->len : max;
}
