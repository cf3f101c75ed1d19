/* pprof output: pprof's profile.proto (output/profile.proto), gzip-compressed, laid out so that
 * `pprof -top` and pprof's flame views show what the folded output shows: the root ("spin (1)",
 * "idle", ...) and the "[truncated]" markers are functions of their own at locations without a
 * mapping, and every other location is one (module, pc) with the name the out_names cache gives.
 *
 * Samples of one stack on one vCPU become one pprof Sample (counts and weights summed); the vCPU,
 * the pid and the process name are labels, so `pprof -tagroot=cpu` gives the per-vCPU view that
 * per_cpu gives the folded output (per_cpu itself changes nothing here).
 *
 * With --exact's counts, a third sample type, instructions (count), holds them: one Sample per
 * counted block, its location the block's first instruction under the root of its binary
 * ("kernel", "spin"), with 0 samples and 0 ns; the sampled stacks have 0 instructions. The
 * default view stays cpu time; `pprof -sample_index=instructions` shows the counts. */
#include "output.h"

#include "profile.pb-c.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <zlib.h>

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

/* What a module's frames told about it, for its Mapping. */
struct module_seen {
    uint64_t max_pc;
    bool any_pc, functions, filenames, line_numbers;
};

/* The location ids of one stack, leaf first and the root last (shared by its vCPUs' samples). */
struct stack_locations {
    uint64_t *ids;
    size_t n;
};

struct pprof_builder {
    const out_profile *profile;
    out_names *names;
    GPtrArray *arena;            /* every protobuf-c struct and array below, g_free'd at the end */
    GPtrArray *strings;          /* char *, owned; index = string id */
    GHashTable *string_ids;      /* text (owned by strings) -> id + 1 */
    GPtrArray *functions;        /* pb_function *, index = id - 1 */
    GHashTable *function_ids;    /* "name\nfile" (owned) -> id */
    GPtrArray *locations;        /* pb_location *, index = id - 1 */
    GHashTable *code_locations;  /* const struct out_name * -> id */
    GHashTable *named_locations; /* root or marker name (owned) -> id */
    GPtrArray *samples;          /* pb_sample * in order of first appearance */
    GHashTable *sample_of;       /* (cpu << 32 | stack id) -> pb_sample * */
    struct stack_locations *stack_locs; /* per stack id, n == 0 until first used */
    struct module_seen *modules;        /* per module */
    size_t n_values;                    /* sample types: 2, or 3 with exact counts */
    bool roots_by_name;                 /* out_write_opts' */
};

static void *arena_new(struct pprof_builder *b, size_t size)
{
    void *p = g_malloc0(size ? size : 1);
    g_ptr_array_add(b->arena, p);
    return p;
}

static int64_t string_id(struct pprof_builder *b, const char *text)
{
    gpointer found = g_hash_table_lookup(b->string_ids, text);
    if (found)
        return GPOINTER_TO_SIZE(found) - 1;
    char *copy = g_strdup(text);
    g_ptr_array_add(b->strings, copy);
    g_hash_table_insert(b->string_ids, copy, GSIZE_TO_POINTER(b->strings->len));
    return b->strings->len - 1;
}

/* Functions are one per (name, file): two PCs in one function share it, so pprof's flat and cum
 * add up per function as the folded output does. */
static uint64_t function_id(struct pprof_builder *b, const char *name, const char *file)
{
    char *key = g_strdup_printf("%s\n%s", name, file ? file : ""); /* names hold no '\n' */
    gpointer found = g_hash_table_lookup(b->function_ids, key);
    if (found) {
        g_free(key);
        return GPOINTER_TO_SIZE(found);
    }
    pb_function *f = arena_new(b, sizeof *f);
    *f = (pb_function)PERFTOOLS__PROFILES__FUNCTION__INIT;
    f->id = b->functions->len + 1;
    f->name = string_id(b, name);
    f->system_name = f->name;
    f->filename = file ? string_id(b, file) : 0;
    g_ptr_array_add(b->functions, f);
    g_hash_table_insert(b->function_ids, key, GSIZE_TO_POINTER(f->id));
    return f->id;
}

static uint64_t location_new(struct pprof_builder *b, uint64_t mapping_id, uint64_t address,
                             uint64_t function, int line)
{
    pb_location *l = arena_new(b, sizeof *l);
    *l = (pb_location)PERFTOOLS__PROFILES__LOCATION__INIT;
    l->id = b->locations->len + 1;
    l->mapping_id = mapping_id;
    l->address = address;
    l->n_line = 1;
    l->line = arena_new(b, sizeof *l->line);
    l->line[0] = arena_new(b, sizeof *l->line[0]);
    *l->line[0] = (pb_line)PERFTOOLS__PROFILES__LINE__INIT;
    l->line[0]->function_id = function;
    l->line[0]->line = line;
    g_ptr_array_add(b->locations, l);
    return l->id;
}

/* A root or a marker: not code, so no mapping and no address. */
static uint64_t named_location(struct pprof_builder *b, const char *name)
{
    gpointer found = g_hash_table_lookup(b->named_locations, name);
    if (found)
        return GPOINTER_TO_SIZE(found);
    uint64_t id = location_new(b, 0, 0, function_id(b, name, NULL), 0);
    g_hash_table_insert(b->named_locations, g_strdup(name), GSIZE_TO_POINTER(id));
    return id;
}

/* One location per cached name, that is per distinct (module, pc): the cache already keys them
 * so, and its pointer is a cheap key. */
static uint64_t code_location(struct pprof_builder *b, const struct out_name *name,
                              const struct out_frame *f)
{
    gpointer found = g_hash_table_lookup(b->code_locations, name);
    if (found)
        return GPOINTER_TO_SIZE(found);
    uint64_t mapping_id = 0;
    if (f->module < out_profile_module_count(b->profile)) {
        struct module_seen *m = &b->modules[f->module];
        mapping_id = f->module + 1;
        m->max_pc = m->any_pc && m->max_pc > f->pc ? m->max_pc : f->pc;
        m->any_pc = true;
        m->functions |= name->has_symbol;
        m->filenames |= name->file != NULL;
        m->line_numbers |= name->line > 0;
    }
    uint64_t id =
        location_new(b, mapping_id, f->pc, function_id(b, name->name, name->file), name->line);
    g_hash_table_insert(b->code_locations, (gpointer)name, GSIZE_TO_POINTER(id));
    return id;
}

/* pprof wants the leaf first: the reverse of the display order, then the root. */
static const struct stack_locations *stack_locations(struct pprof_builder *b, uint32_t stack_id)
{
    struct stack_locations *out = &b->stack_locs[stack_id];
    if (out->n)
        return out;
    const struct out_stack *s = out_profile_stack(b->profile, stack_id);
    int len = out_stack_display_len(s);
    const struct out_name **shown = g_new(const struct out_name *, len ? len : 1);
    out_stack_display(b->names, s, shown);
    out->n = (size_t)len + 1;
    out->ids = arena_new(b, out->n * sizeof *out->ids);
    int frame = 0; /* display frames are the stack's frames in order, markers between them */
    for (int i = 0; i < len; i++)
        out->ids[len - 1 - i] = shown[i]->marker ? named_location(b, shown[i]->name)
                                                 : code_location(b, shown[i], &s->frames[frame++]);
    char root[64];
    out->ids[len] = named_location(b, out_stack_root_as(s, b->roots_by_name, root, sizeof root));
    g_free(shown);
    return out;
}

/* num_unit matters for a number that can be 0 (the vCPU): on the wire a num of 0 without a unit
 * is no label at all, and pprof drops it. pprof shows no unit it does not know. */
static pb_label *label_new(struct pprof_builder *b, const char *key, const char *str, int64_t num,
                           const char *num_unit)
{
    pb_label *l = arena_new(b, sizeof *l);
    *l = (pb_label)PERFTOOLS__PROFILES__LABEL__INIT;
    l->key = string_id(b, key);
    if (str)
        l->str = string_id(b, str);
    else
        l->num = num;
    if (num_unit)
        l->num_unit = string_id(b, num_unit);
    return l;
}

/* Labels say what is known: pid and comm only when the sampler knew the process. */
static pb_sample *sample_new(struct pprof_builder *b, const struct out_record *r)
{
    const struct out_stack *s = out_profile_stack(b->profile, r->stack);
    const struct stack_locations *locs = stack_locations(b, r->stack);
    pb_sample *sample = arena_new(b, sizeof *sample);
    *sample = (pb_sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
    sample->n_location_id = locs->n;
    sample->location_id = locs->ids;
    sample->n_value = b->n_values;
    sample->value = arena_new(b, b->n_values * sizeof *sample->value);
    sample->label = arena_new(b, 3 * sizeof *sample->label);
    if (s->pid)
        sample->label[sample->n_label++] = label_new(b, "pid", NULL, s->pid, NULL);
    if (s->comm[0])
        sample->label[sample->n_label++] = label_new(b, "comm", s->comm, 0, NULL);
    sample->label[sample->n_label++] = label_new(b, "cpu", NULL, r->cpu, "index");
    g_ptr_array_add(b->samples, sample);
    return sample;
}

static void add_samples(struct pprof_builder *b)
{
    const struct out_record *r = out_profile_samples(b->profile);
    for (size_t i = 0; i < out_profile_sample_count(b->profile); i++) {
        gint64 key = (gint64)(((uint64_t)r[i].cpu << 32) | r[i].stack);
        pb_sample *sample = g_hash_table_lookup(b->sample_of, &key);
        if (!sample) {
            sample = sample_new(b, &r[i]);
            g_hash_table_insert(b->sample_of, g_memdup2(&key, sizeof key), sample);
        }
        sample->value[0] += 1;
        sample->value[1] += (int64_t)r[i].weight_ns;
    }
}

/* --exact: a leaf-only Sample per counted block (see the top of this file). */
static void add_exact_samples(struct pprof_builder *b)
{
    const struct out_exact *e = out_profile_exact(b->profile);
    size_t n_modules = out_profile_module_count(b->profile);
    for (size_t i = 0; i < out_profile_exact_count(b->profile); i++) {
        const struct out_module *m =
            e[i].module < n_modules ? out_profile_module(b->profile, e[i].module) : NULL;
        struct out_frame f = {
            .pc = e[i].pc, .module = e[i].module, .exact = true, .kernel = m && m->kernel};
        const struct out_name *name = out_names_frame(b->names, &f);
        const char *root = !m ? "[unknown user code]" : m->kernel ? "kernel" : m->name;
        pb_sample *sample = arena_new(b, sizeof *sample);
        *sample = (pb_sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
        sample->n_location_id = 2;
        sample->location_id = arena_new(b, 2 * sizeof *sample->location_id);
        sample->location_id[0] = code_location(b, name, &f);
        sample->location_id[1] = named_location(b, root);
        sample->n_value = b->n_values;
        sample->value = arena_new(b, b->n_values * sizeof *sample->value);
        sample->value[2] = (int64_t)e[i].insns;
        sample->n_label = 1;
        sample->label = arena_new(b, sizeof *sample->label);
        sample->label[0] = label_new(b, "binary", root, 0, NULL);
        g_ptr_array_add(b->samples, sample);
    }
}

static pb_mapping **mappings_new(struct pprof_builder *b)
{
    size_t n = out_profile_module_count(b->profile);
    pb_mapping **out = arena_new(b, n * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        const struct out_module *m = out_profile_module(b->profile, (uint32_t)i);
        const struct module_seen *seen = &b->modules[i];
        pb_mapping *map = arena_new(b, sizeof *map);
        *map = (pb_mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
        map->id = i + 1;
        map->memory_start = m->base;
        map->memory_limit = seen->any_pc && seen->max_pc >= m->base ? seen->max_pc + 1 : m->base;
        map->filename = string_id(b, m->path[0] ? m->path : m->name);
        if (m->text_hash) {
            char hash[17];
            snprintf(hash, sizeof hash, "%016" PRIx64, m->text_hash);
            map->build_id = string_id(b, hash);
        }
        /* Set, these keep pprof from symbolizing again from whatever file has that name here. */
        map->has_functions = seen->functions;
        map->has_filenames = seen->filenames;
        map->has_line_numbers = seen->line_numbers;
        out[i] = map;
    }
    return out;
}

static pb_value_type *value_type_new(struct pprof_builder *b, const char *type, const char *unit)
{
    pb_value_type *v = arena_new(b, sizeof *v);
    *v = (pb_value_type)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    v->type = string_id(b, type);
    v->unit = string_id(b, unit);
    return v;
}

/* The first sample stands for the interval that ends at its time, so the profile starts there. */
static int64_t duration_ns(const out_profile *p)
{
    size_t n = out_profile_sample_count(p);
    if (n == 0)
        return 0;
    const struct out_record *first = &out_profile_samples(p)[0];
    const struct out_record *last = &out_profile_samples(p)[n - 1];
    uint64_t start = first->time_ns > first->weight_ns ? first->time_ns - first->weight_ns : 0;
    return last->time_ns > start ? (int64_t)(last->time_ns - start) : 0;
}

static void profile_fill(struct pprof_builder *b, const struct out_write_opts *o, pb_profile *pb)
{
    string_id(b, ""); /* string_table[0] must be "" */
    b->n_values = out_profile_exact_count(b->profile) ? 3 : 2;
    pb->n_sample_type = b->n_values;
    pb->sample_type = arena_new(b, b->n_values * sizeof *pb->sample_type);
    /* count first, by pprof's convention; the last (cpu time) is the default shown */
    pb->sample_type[0] = value_type_new(b, "samples", "count");
    pb->sample_type[1] = value_type_new(b, "cpu", "nanoseconds");
    if (b->n_values == 3) { /* counted, not sampled: cpu time stays the default view */
        pb->sample_type[2] = value_type_new(b, "instructions", "count");
        pb->default_sample_type = string_id(b, "cpu");
    }
    pb->period_type = value_type_new(b, "cpu", "nanoseconds");
    pb->period = (int64_t)o->interval_ns;
    pb->duration_nanos = duration_ns(b->profile);
    if (o->title) {
        pb->n_comment = 1;
        pb->comment = arena_new(b, sizeof *pb->comment);
        pb->comment[0] = string_id(b, o->title);
    }
    add_samples(b); /* before the mappings: the locations tell what each module resolved */
    add_exact_samples(b);
    pb->n_mapping = out_profile_module_count(b->profile);
    pb->mapping = mappings_new(b);
    pb->n_sample = b->samples->len;
    pb->sample = (pb_sample **)b->samples->pdata;
    pb->n_location = b->locations->len;
    pb->location = (pb_location **)b->locations->pdata;
    pb->n_function = b->functions->len;
    pb->function = (pb_function **)b->functions->pdata;
    pb->n_string_table = b->strings->len;
    pb->string_table = (char **)b->strings->pdata;
}

static int write_gzip(const uint8_t *data, size_t len, FILE *f, struct qp_error *err)
{
    if (len > UINT_MAX)
        return qp_error_set(err, -EFBIG, "pprof profile of %zu bytes is too large", len);
    z_stream z = {0};
    /* windowBits 15 + 16: a gzip header and trailer, which pprof requires on disk */
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return qp_error_set(err, -ENOMEM, "pprof: cannot start gzip compression");
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    unsigned char chunk[16384];
    int rc = 0, zrc;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        zrc = deflate(&z, Z_FINISH);
        size_t n = sizeof chunk - z.avail_out;
        errno = 0;
        if (n && fwrite(chunk, 1, n, f) != n) {
            rc = qp_error_set(err, errno ? -errno : -EIO, "writing pprof output: %s",
                              strerror(errno ? errno : EIO));
            goto out;
        }
    } while (zrc == Z_OK);
    if (zrc != Z_STREAM_END)
        rc = qp_error_set(err, -EIO, "pprof: gzip compression failed (zlib error %d)", zrc);
out:
    deflateEnd(&z);
    return rc;
}

int out_write_pprof(const out_profile *p, out_names *n, const struct out_write_opts *o, FILE *f,
                    struct qp_error *err)
{
    struct pprof_builder b = {
        .profile = p,
        .names = n,
        .arena = g_ptr_array_new_with_free_func(g_free),
        .strings = g_ptr_array_new_with_free_func(g_free),
        .string_ids = g_hash_table_new(g_str_hash, g_str_equal),
        .functions = g_ptr_array_new(),
        .function_ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
        .locations = g_ptr_array_new(),
        .code_locations = g_hash_table_new(g_direct_hash, g_direct_equal),
        .named_locations = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
        .samples = g_ptr_array_new(),
        .sample_of = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL),
        .stack_locs = g_new0(struct stack_locations, out_profile_stack_count(p) + 1),
        .modules = g_new0(struct module_seen, out_profile_module_count(p) + 1),
        .roots_by_name = o->roots_by_name,
    };
    pb_profile pb = PERFTOOLS__PROFILES__PROFILE__INIT;
    profile_fill(&b, o, &pb);
    size_t len = perftools__profiles__profile__get_packed_size(&pb);
    uint8_t *packed = g_malloc(len ? len : 1);
    perftools__profiles__profile__pack(&pb, packed);
    int rc = write_gzip(packed, len, f, err);
    g_free(packed);
    g_hash_table_destroy(b.sample_of);
    g_ptr_array_free(b.samples, TRUE);
    g_hash_table_destroy(b.named_locations);
    g_hash_table_destroy(b.code_locations);
    g_ptr_array_free(b.locations, TRUE);
    g_hash_table_destroy(b.function_ids);
    g_ptr_array_free(b.functions, TRUE);
    g_hash_table_destroy(b.string_ids);
    g_ptr_array_free(b.strings, TRUE);
    g_ptr_array_free(b.arena, TRUE);
    g_free(b.stack_locs);
    g_free(b.modules);
    return rc;
}
