/* speedscope's file format (https://www.speedscope.app/file-format-schema.json): one sampled
 * profile per process (or per vCPU), every stack root-first, samples in time order so that
 * speedscope's "Time Order" view replays what the guest did.
 *
 * The file is streamed: a million samples would be a million json-c objects if the document
 * were built in memory, so json-c only escapes the strings and the numbers are printed. */
#include "output.h"

#include <glib.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <string.h>

#define SCHEMA_URL "https://www.speedscope.app/file-format-schema.json"

/* speedscope keys a frame by its index in shared.frames, so frames that should merge in its
 * views (the same function sampled at two PCs) must share one entry: one per (name, module,
 * file), as a function is known by. */
struct ss_frame {
    const char *name, *file;
    int line; /* the lowest line seen: nearest the function's start, the line speedscope shows
                 for a function (its other importers give the definition line) */
};

struct ss_profile {
    char *name;
    uint32_t cpu;    /* with per_cpu */
    GArray *records; /* guint indexes into out_profile_samples() */
};

struct ss_writer {
    const out_profile *p;
    out_names *n;
    GArray *frames;        /* struct ss_frame */
    GHashTable *frame_ids; /* key text -> index + 1 */
    GHashTable *name_ids;  /* struct out_name * -> index + 1: the key text once per name */
    GStringChunk *strings;
    GArray **stack_frames; /* per stack id: frame indexes root-first, NULL until seen */
    GPtrArray *profiles;   /* struct ss_profile * */
    const struct out_name **scratch;
    int scratch_len;
};

static void profile_free(gpointer data)
{
    struct ss_profile *prof = data;
    g_free(prof->name);
    g_array_free(prof->records, TRUE);
    g_free(prof);
}

/* kind keeps a root, a marker and code apart even if their texts were equal. */
static uint32_t frame_id(struct ss_writer *w, char kind, const char *name, const char *module,
                         const char *file, int line)
{
    char *key = g_strdup_printf("%c\x1f%s\x1f%s\x1f%s", kind, name, module, file ? file : "");
    gpointer found = g_hash_table_lookup(w->frame_ids, key);
    if (found) {
        g_free(key);
        struct ss_frame *fr =
            &g_array_index(w->frames, struct ss_frame, GPOINTER_TO_UINT(found) - 1);
        if (line > 0 && (fr->line == 0 || line < fr->line))
            fr->line = line;
        return GPOINTER_TO_UINT(found) - 1;
    }
    struct ss_frame fr = {g_string_chunk_insert_const(w->strings, name),
                          file ? g_string_chunk_insert_const(w->strings, file) : NULL,
                          line > 0 ? line : 0};
    g_array_append_val(w->frames, fr);
    g_hash_table_insert(w->frame_ids, key, GUINT_TO_POINTER(w->frames->len));
    return w->frames->len - 1;
}

/* The frame indexes of stack id, root-first (cached). */
static GArray *stack_frames(struct ss_writer *w, uint32_t id)
{
    if (w->stack_frames[id])
        return w->stack_frames[id];
    const struct out_stack *s = out_profile_stack(w->p, id);
    int len = out_stack_display_len(s);
    if (len > w->scratch_len) {
        w->scratch_len = len * 2;
        w->scratch = g_renew(const struct out_name *, w->scratch, w->scratch_len);
    }
    out_stack_display(w->n, s, w->scratch);
    GArray *ids = g_array_sized_new(FALSE, FALSE, sizeof(uint32_t), len + 1);
    char root[64];
    uint32_t k = frame_id(w, 'r', out_stack_root(s, root, sizeof root), "", NULL, 0);
    g_array_append_val(ids, k);
    for (int i = 0; i < len; i++) {
        const struct out_name *fn = w->scratch[i];
        gpointer known = g_hash_table_lookup(w->name_ids, fn);
        if (known) {
            k = GPOINTER_TO_UINT(known) - 1;
        } else {
            k = frame_id(w, fn->marker ? 'm' : 'c', fn->name, fn->module, fn->file, fn->line);
            g_hash_table_insert(w->name_ids, (gpointer)fn, GUINT_TO_POINTER(k + 1));
        }
        g_array_append_val(ids, k);
    }
    w->stack_frames[id] = ids;
    return ids;
}

/* Samples grouped by process root (in order of first appearance) or by vCPU (by number). */
static void group_samples(struct ss_writer *w, bool per_cpu)
{
    GHashTable *by_key = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    const struct out_record *r = out_profile_samples(w->p);
    size_t count = out_profile_sample_count(w->p);
    char root[64];
    for (size_t i = 0; i < count; i++) {
        const struct out_stack *s = out_profile_stack(w->p, r[i].stack);
        char *key = per_cpu ? g_strdup_printf("cpu%" PRIu32, r[i].cpu)
                            : g_strdup(out_stack_root(s, root, sizeof root));
        struct ss_profile *prof = g_hash_table_lookup(by_key, key);
        if (!prof) {
            prof = g_new0(struct ss_profile, 1);
            prof->name = g_strdup(key);
            prof->cpu = r[i].cpu;
            prof->records = g_array_new(FALSE, FALSE, sizeof(guint));
            g_ptr_array_add(w->profiles, prof);
            g_hash_table_insert(by_key, key, prof);
        } else {
            g_free(key);
        }
        guint index = (guint)i;
        g_array_append_val(prof->records, index);
    }
    g_hash_table_destroy(by_key);
}

static int by_cpu(gconstpointer a, gconstpointer b)
{
    const struct ss_profile *pa = *(struct ss_profile *const *)a;
    const struct ss_profile *pb = *(struct ss_profile *const *)b;
    return (pa->cpu > pb->cpu) - (pa->cpu < pb->cpu);
}

/* Records come in time order from the sampler, but a record file's readers and filters only
 * promise to keep what they were given: sort (stably) rather than trust it. */
static int by_time(const void *a, const void *b, void *ctx)
{
    const struct out_record *r = ctx;
    guint ia = *(const guint *)a, ib = *(const guint *)b;
    if (r[ia].time_ns != r[ib].time_ns)
        return r[ia].time_ns < r[ib].time_ns ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

static void put_string(FILE *f, const char *text)
{
    /* A guest's comm or a symbol may hold bytes that are not UTF-8; JSON must be. */
    char *valid = g_utf8_make_valid(text, -1);
    json_object *s = json_object_new_string(valid);
    fputs(
        json_object_to_json_string_ext(s, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
        f);
    json_object_put(s);
    g_free(valid);
}

static void put_frames(struct ss_writer *w, FILE *f)
{
    fputs("\"shared\":{\"frames\":[", f);
    for (guint i = 0; i < w->frames->len; i++) {
        const struct ss_frame *fr = &g_array_index(w->frames, struct ss_frame, i);
        fputs(i ? ",\n{\"name\":" : "\n{\"name\":", f);
        put_string(f, fr->name);
        if (fr->file) {
            fputs(",\"file\":", f);
            put_string(f, fr->file);
        }
        if (fr->line > 0)
            fprintf(f, ",\"line\":%d", fr->line);
        fputc('}', f);
    }
    fputs("]},\n", f);
}

/* A sample stands for the weight_ns before its time, so the profile spans from the first
 * sample's start to the last sample's time. */
static void put_profile(struct ss_writer *w, const struct ss_profile *prof, FILE *f)
{
    const struct out_record *r = out_profile_samples(w->p);
    const guint *idx = (const guint *)prof->records->data;
    guint len = prof->records->len;
    const struct out_record *first = &r[idx[0]], *last = &r[idx[len - 1]];
    uint64_t start = first->time_ns > first->weight_ns ? first->time_ns - first->weight_ns : 0;
    fputs("{\"type\":\"sampled\",\"name\":", f);
    put_string(f, prof->name);
    fprintf(f, ",\"unit\":\"nanoseconds\",\"startValue\":%" PRIu64 ",\"endValue\":%" PRIu64 ",\n",
            start, last->time_ns);
    fputs("\"samples\":[", f);
    for (guint i = 0; i < len; i++) {
        GArray *ids = stack_frames(w, r[idx[i]].stack);
        fputs(i ? ",\n[" : "\n[", f);
        for (guint k = 0; k < ids->len; k++)
            fprintf(f, k ? ",%" PRIu32 : "%" PRIu32, g_array_index(ids, uint32_t, k));
        fputc(']', f);
    }
    fputs("],\n\"weights\":[", f);
    for (guint i = 0; i < len; i++)
        fprintf(f, i ? ",%" PRIu64 : "%" PRIu64, r[idx[i]].weight_ns);
    fputs("]}", f);
}

/* Frame indexes are given in a first pass over every profile's samples, because
 * shared.frames comes before the profiles in the file and must be complete. */
int out_write_speedscope(const out_profile *p, out_names *n, const struct out_write_opts *o,
                         FILE *f, struct qp_error *err)
{
    struct ss_writer w = {
        .p = p,
        .n = n,
        .frames = g_array_new(FALSE, FALSE, sizeof(struct ss_frame)),
        .frame_ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
        .name_ids = g_hash_table_new(g_direct_hash, g_direct_equal),
        .strings = g_string_chunk_new(4096),
        .stack_frames = g_new0(GArray *, out_profile_stack_count(p) + 1),
        .profiles = g_ptr_array_new_with_free_func(profile_free),
    };
    const struct out_record *r = out_profile_samples(p);
    group_samples(&w, o->per_cpu);
    if (o->per_cpu)
        g_ptr_array_sort(w.profiles, by_cpu);
    guint active = 0;
    for (guint i = 0; i < w.profiles->len; i++) {
        struct ss_profile *prof = g_ptr_array_index(w.profiles, i);
        /* g_array_sort_with_data: g_qsort_with_data is deprecated from GLib 2.82 on */
        g_array_sort_with_data(prof->records, by_time, (gpointer)r);
        for (guint k = 0; k < prof->records->len; k++)
            stack_frames(&w, r[g_array_index(prof->records, guint, k)].stack);
        struct ss_profile *best = g_ptr_array_index(w.profiles, active);
        if (prof->records->len > best->records->len)
            active = i;
    }
    fputs("{\"$schema\":\"" SCHEMA_URL "\",\n\"name\":", f);
    put_string(f, o->title ? o->title : "qprof");
    fprintf(f, ",\"exporter\":\"qprof\",\"activeProfileIndex\":%u,\n", active);
    put_frames(&w, f);
    fputs("\"profiles\":[", f);
    for (guint i = 0; i < w.profiles->len; i++) {
        fputs(i ? ",\n" : "\n", f);
        put_profile(&w, g_ptr_array_index(w.profiles, i), f);
    }
    fputs("]}\n", f);

    for (size_t i = 0; i < out_profile_stack_count(p); i++)
        if (w.stack_frames[i])
            g_array_free(w.stack_frames[i], TRUE);
    g_free(w.stack_frames);
    g_free(w.scratch);
    g_ptr_array_free(w.profiles, TRUE);
    g_string_chunk_free(w.strings);
    g_hash_table_destroy(w.frame_ids);
    g_hash_table_destroy(w.name_ids);
    g_array_free(w.frames, TRUE);
    return 0; /* out_write checks the stream */
}
