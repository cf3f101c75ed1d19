/* The offline subcommands' shared part (cli_internal.h): sample filters and symbol files, as
 * `qprof report` first had them, for report, diff and annotate alike. */
#include "cli_internal.h"
#include "qp_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char prof_load_help[] =
    "  --kernel ELF|MAP       kernel symbols (default: the file recorded, if it exists)\n"
    "  --user-dir DIR         user binaries, matched by .text hash; repeatable (default:\n"
    "                         the files recorded, if they exist and still match)\n"
    "  --kernel-only          only samples taken in kernel mode (incl. idle)\n"
    "  --user-only            only samples taken in user mode\n"
    "  --cpus LIST            only these vCPUs, e.g. 0,2-3\n"
    "  --pid LIST             only these processes, e.g. 1,3\n"
    "  --comm LIST            only processes of these names, e.g. spin,sys\n"
    "  --time START-END       only samples between START and END seconds of the run\n"
    "                         (either may be left out: 2- or -5.5)\n";

void prof_load_opts_init(struct prof_load_opts *o)
{
    *o = (struct prof_load_opts){.cpu_mask = UINT64_MAX,
                                 .time_to = -1,
                                 .pids = g_array_new(FALSE, FALSE, sizeof(uint32_t)),
                                 .comms = g_ptr_array_new_with_free_func(g_free)};
}

void prof_load_opts_clear(struct prof_load_opts *o)
{
    g_array_free(o->pids, TRUE);
    g_ptr_array_free(o->comms, TRUE);
    o->pids = NULL;
    o->comms = NULL;
}

static bool parse_pids(const char *text, GArray *pids)
{
    gchar **parts = g_strsplit(text, ",", -1);
    bool ok = parts[0] != NULL;
    for (gchar **p = parts; ok && *p; p++) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(*p, &end, 10);
        ok = !errno && end != *p && !*end && v > 0 && v <= UINT32_MAX;
        uint32_t pid = (uint32_t)v;
        if (ok)
            g_array_append_val(pids, pid);
    }
    g_strfreev(parts);
    return ok;
}

static bool parse_comms(const char *text, GPtrArray *comms)
{
    gchar **parts = g_strsplit(text, ",", -1);
    bool ok = parts[0] != NULL;
    for (gchar **p = parts; ok && *p; p++) {
        ok = **p != '\0';
        if (ok)
            g_ptr_array_add(comms, g_strdup(*p));
    }
    g_strfreev(parts);
    return ok;
}

static bool parse_time_range(const char *text, double *from, double *to)
{
    const char *dash = strchr(text, '-');
    if (!dash)
        return false;
    char *end;
    *from = 0;
    *to = -1;
    if (dash != text) {
        *from = strtod(text, &end);
        if (end != dash || *from < 0)
            return false;
    }
    if (dash[1]) {
        *to = strtod(dash + 1, &end);
        if (*end || *to < *from)
            return false;
    }
    return true;
}

static int bad(struct qp_error *err, const char *what)
{
    return qp_error_set(err, -EINVAL, "%s", what);
}

int prof_load_option(struct prof_load_opts *o, int c, const char *arg, struct qp_error *err)
{
    switch (c) {
    case PROF_LOAD_KERNEL:
        o->kernel = arg;
        return 1;
    case PROF_LOAD_USER_DIR:
        if (o->n_user_dirs == PROF_MAX_USER_DIRS)
            return bad(err, "--user-dir: too many directories");
        o->user_dirs[o->n_user_dirs++] = arg;
        return 1;
    case PROF_LOAD_KONLY:
    case PROF_LOAD_UONLY:
        o->mode_filter = c == PROF_LOAD_KONLY ? PROF_KERNEL_ONLY : PROF_USER_ONLY;
        return 1;
    case PROF_LOAD_CPUS:
        return prof_parse_cpu_list(arg, &o->cpu_mask, err) == 0 ? 1 : -EINVAL;
    case PROF_LOAD_PID:
        return parse_pids(arg, o->pids) ? 1 : bad(err, "--pid: not a list of pids like 1,3");
    case PROF_LOAD_COMM:
        return parse_comms(arg, o->comms) ? 1 : bad(err, "--comm: not a list of names like a,b");
    case PROF_LOAD_TIME:
        return parse_time_range(arg, &o->time_from, &o->time_to)
                   ? 1
                   : bad(err, "--time: not a range of seconds like 2-5.5, 2- or -5.5");
    default:
        return 0;
    }
}

int prof_cli_usage(const char *cmd, const char *what)
{
    fprintf(stderr, "qprof %s: %s\nTry 'qprof %s --help' for more information.\n", cmd, what, cmd);
    return PROF_EXIT_USAGE;
}

int prof_cli_parse(int argc, char **argv, const char *short_opts, const struct option *long_opts,
                   prof_cli_apply_fn apply, void *opts)
{
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1) {
        char flag[160];
        snprintf(flag, sizeof flag, "%s '%s'",
                 c == ':' ? "option needs a value:" : "unknown option", argv[optind - 1]);
        int rc = apply(opts, c == ':' || c == '?' ? 0 : c, optarg, flag);
        if (rc >= 0)
            return rc;
    }
    return -1;
}

int prof_load_option_or_usage(const char *cmd, struct prof_load_opts *o, int c, const char *arg,
                              const char *flag)
{
    struct qp_error err = {0};
    int shared = prof_load_option(o, c, arg, &err);
    return shared > 0 ? -1 : prof_cli_usage(cmd, shared < 0 ? err.msg : flag);
}

static bool keep_process(const struct prof_load_opts *o, const struct out_stack *s)
{
    bool pid_ok = o->pids->len == 0, comm_ok = o->comms->len == 0;
    for (guint i = 0; !pid_ok && i < o->pids->len; i++)
        pid_ok = g_array_index(o->pids, uint32_t, i) == s->pid;
    for (guint i = 0; !comm_ok && i < o->comms->len; i++)
        comm_ok = s->pid && strcmp(g_ptr_array_index(o->comms, i), s->comm) == 0;
    return pid_ok && comm_ok;
}

bool prof_load_keep(const struct out_record *r, const struct out_stack *s, void *ctx)
{
    const struct prof_load_opts *o = ctx;
    bool user = s->mode == OUT_MODE_USER;
    if ((o->mode_filter == PROF_KERNEL_ONLY && user) || (o->mode_filter == PROF_USER_ONLY && !user))
        return false;
    if (r->cpu < 64 && !((o->cpu_mask >> r->cpu) & 1))
        return false;
    double t = r->time_ns / 1e9;
    if (t < o->time_from || (o->time_to >= 0 && t > o->time_to))
        return false;
    return keep_process(o, s);
}

int prof_load_record(const char *path, const struct prof_load_opts *o, out_profile **out,
                     char **meta, size_t *recorded, struct qp_error *err)
{
    int rc = out_record_read(path, out, meta, err);
    if (rc != 0)
        return rc;
    if (recorded)
        *recorded = out_profile_sample_count(*out);
    out_profile_filter(*out, prof_load_keep, (void *)o);
    return 0;
}

/* ---- Symbols ------------------------------------------------------------------------------ */

struct prof_syms {
    const out_profile *profile;
    sym_store *store;
    GPtrArray *tables; /* module index -> sym_table * (owned unless from the store), may be NULL */
    GPtrArray *owned;
};

/* Whether a file the record names may be opened: one that is missing here is quietly left out
 * (the record came from another machine), one that is not a regular file or is too large
 * (a FIFO would block, /dev/zero never ends) is left out with a line saying so. The symbol
 * readers check again when they open it (qp_file_open_read): this is only for the message. */
static bool record_file_usable(const char *path)
{
    struct qp_error err = {0};
    int fd = qp_file_open_read(path, QP_FILE_MAX_ELF, NULL, &err);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    if (fd != -ENOENT && fd != -EACCES) {
        fputs("qprof: not reading a file the record names: ", stderr);
        qp_file_fput_escaped(err.msg, stderr);
        fputc('\n', stderr);
    }
    return false;
}

int prof_load_read_text(const char *path, uint64_t max_bytes, char **text, struct qp_error *err)
{
    uint64_t size = 0;
    int fd = qp_file_open_read(path, max_bytes, &size, err);
    if (fd < 0)
        return fd;
    char *buf = g_malloc((size_t)size + 1);
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, (size_t)size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the file shrank: what came */
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    *text = buf;
    return 0;
}

int prof_load_read_head(const char *path, void *buf, size_t len)
{
    int fd = qp_file_open_read(path, QP_FILE_MAX_ELF, NULL, NULL);
    if (fd < 0)
        return fd;
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    return got == len ? 0 : -EIO;
}

static sym_table *open_kernel(const char *path)
{
    sym_table *t = NULL;
    if (sym_table_open_elf(path, &t, NULL) == 0 && sym_table_count(t) > 0)
        return t;
    sym_table_free(t);
    t = NULL;
    return sym_table_open_map(path, &t, NULL) == 0 ? t : NULL;
}

/* A recorded user binary: the --user-dir file with its .text hash, else the file it was
 * recorded from when that still has the same .text. */
static const sym_table *user_table(prof_syms *s, const struct out_module *m)
{
    const sym_table *t = m->text_hash ? sym_store_find(s->store, m->text_hash) : NULL;
    if (t || !m->path[0] || !record_file_usable(m->path))
        return t;
    sym_table *own = NULL;
    if (sym_table_open_elf(m->path, &own, NULL) == 0 && sym_table_text_hash(own) == m->text_hash) {
        g_ptr_array_add(s->owned, own);
        return own;
    }
    sym_table_free(own);
    return NULL;
}

static int open_tables(prof_syms *s, const struct prof_load_opts *o, struct qp_error *err)
{
    for (int i = 0; i < o->n_user_dirs; i++) {
        struct qp_error e = {0};
        if (sym_store_add_dir(s->store, o->user_dirs[i], &e) < 0)
            return qp_error_set(err, -ENOENT, "--user-dir %s: %s", o->user_dirs[i], e.msg);
    }
    for (size_t i = 0; i < out_profile_module_count(s->profile); i++) {
        const struct out_module *m = out_profile_module(s->profile, (uint32_t)i);
        const sym_table *t = NULL;
        if (m->kernel) {
            const char *path = o->kernel                                   ? o->kernel
                               : m->path[0] && record_file_usable(m->path) ? m->path
                                                                           : NULL;
            sym_table *k = path ? open_kernel(path) : NULL;
            if (o->kernel && !k) {
                struct qp_error why = {0};
                int fd = qp_file_open_read(o->kernel, QP_FILE_MAX_ELF, NULL, &why);
                if (fd >= 0)
                    close(fd);
                return qp_error_set(err, -ENOENT, "--kernel %s: no symbols could be read%s%s",
                                    o->kernel, fd < 0 ? ": " : "", fd < 0 ? why.msg : "");
            }
            if (k)
                g_ptr_array_add(s->owned, k);
            t = k;
        } else {
            t = user_table(s, m);
        }
        g_ptr_array_add(s->tables, (gpointer)t);
    }
    return 0;
}

prof_syms *prof_syms_new(const out_profile *p, const struct prof_load_opts *o, struct qp_error *err)
{
    prof_syms *s = g_new0(prof_syms, 1);
    s->profile = p;
    s->store = sym_store_new();
    s->tables = g_ptr_array_new();
    s->owned = g_ptr_array_new_with_free_func((GDestroyNotify)sym_table_free);
    if (open_tables(s, o, err) != 0) {
        prof_syms_free(s);
        return NULL;
    }
    return s;
}

void prof_syms_free(prof_syms *s)
{
    if (!s)
        return;
    g_ptr_array_free(s->owned, TRUE);
    g_ptr_array_free(s->tables, TRUE);
    sym_store_free(s->store);
    g_free(s);
}

const sym_table *prof_syms_table(const prof_syms *s, uint32_t module)
{
    return module < s->tables->len ? g_ptr_array_index(s->tables, module) : NULL;
}

int prof_syms_symbolize(void *ctx, const struct out_module *m, uint64_t pc, bool exact,
                        struct out_symbol *sym)
{
    prof_syms *s = ctx;
    const sym_table *t = prof_syms_table(s, (uint32_t)(m - out_profile_module(s->profile, 0)));
    struct sym_info info;
    uint64_t at = exact || pc == 0 ? pc : pc - 1;
    if (!t || sym_lookup(t, at, &info) != 0)
        return -ENOENT;
    *sym = (struct out_symbol){.function = info.name, .offset = pc - info.start};
    sym_lookup_line(t, at, &sym->file, &sym->line);
    return 0;
}
