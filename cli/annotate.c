/* `qprof annotate`: a function's instructions with the samples that landed on each (perf
 * annotate --stdio's view), from a record and the binaries given now: code bytes from the
 * kernel or user binary's file (symbols/sym_code.c), instructions by capstone, source lines by
 * the binary's DWARF (sym_lookup_line), and with an --exact record the instructions each ran.
 *
 * Samples count at their innermost frame: the pc the vCPU was at, which is what an
 * instruction-level view needs; callers' return addresses would smear a call's cost onto the
 * instruction after it. */
#include "arch.h"
#include "cli_internal.h"
#include "qp_file.h"

#include <capstone/capstone.h>
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct annotate_options {
    const char *input;
    const char *function; /* NULL: the hottest few */
    int n_functions;      /* how many when no function is named */
    bool stdio;
    struct prof_load_opts load;
};

/* One sampled function of one module, with its samples per instruction address. */
struct hot_fn {
    uint32_t module;
    const sym_table *table;      /* NULL: the code the record kept */
    const struct out_code *code; /* the record's copy of the code, NULL: the table's file */
    const char *name;            /* owned by the table or the profile */
    uint64_t start, size;
    uint64_t samples;
    GHashTable *pcs;   /* pc -> samples (GUINT_TO_POINTER(pc) keys on 64-bit hosts) */
    GHashTable *exact; /* block start pc -> instructions counted (--exact) */
};

static void annotate_help(FILE *out)
{
    fprintf(out,
            "Usage: qprof annotate [-i FILE] [OPTIONS] [FUNCTION]\n"
            "Prints a function's machine code, one instruction a line, with the samples taken\n"
            "at each instruction and their share of the function's samples, hot lines marked,\n"
            "source lines interleaved where the binary has DWARF line information, and with a\n"
            "record made with --exact, the instructions each one executed; inlined functions\n"
            "are named beside their source lines. Without FUNCTION, the functions with the most\n"
            "samples; a FUNCTION no sample landed in is shown all the same, with none. Code comes "
            "from the --kernel and --user-dir\n"
            "files (default: the files recorded).\n"
            "\n"
            "  -i, --input FILE       the record file [qprof.data]\n"
            "  --functions N          without FUNCTION: this many of the hottest [3]\n"
            "  --stdio                plain text on stdout, no colour and no pager (the default\n"
            "                         when stdout is not a terminal)\n"
            "%s"
            "  -h, --help             this text\n"
            "\n"
            "Disassembles x86_64 and aarch64 code; riscv64 needs capstone 5 (with capstone 4\n"
            "qprof prints addresses and bytes). Exit status: 0 success, 1 the record cannot be\n"
            "read or the function has no samples or no code, 2 usage error.\n"
            "\n"
            "EXAMPLES\n"
            "  qprof annotate -i qprof.data hot_a --user-dir build/guest/user\n"
            "  qprof annotate -i qprof.data --kernel-only --kernel vmlinux --stdio | less\n",
            prof_load_help);
}

static int usage(const char *what)
{
    return prof_cli_usage("annotate", what);
}

enum { A_FUNCTIONS = PROF_LOAD_END, A_STDIO };

static const struct option annotate_long[] = {
    {"input", required_argument, NULL, 'i'}, {"functions", required_argument, NULL, A_FUNCTIONS},
    {"stdio", no_argument, NULL, A_STDIO},   PROF_LOAD_LONG_OPTIONS,
    {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
};

static int apply(void *opts, int c, const char *arg, const char *flag)
{
    struct annotate_options *o = opts;
    switch (c) {
    case 'i':
        o->input = arg;
        return -1;
    case A_FUNCTIONS:
        o->n_functions = atoi(arg);
        return o->n_functions > 0 ? -1 : usage("--functions: not a count above 0");
    case A_STDIO:
        o->stdio = true;
        return -1;
    case 'h':
        annotate_help(stdout);
        return PROF_EXIT_OK;
    }
    return prof_load_option_or_usage("annotate", &o->load, c, arg, flag);
}

static int parse(int argc, char **argv, struct annotate_options *o)
{
    int rc = prof_cli_parse(argc, argv, ":i:h", annotate_long, apply, o);
    if (rc >= 0)
        return rc;
    if (argc - optind > 1)
        return usage("one FUNCTION at most");
    o->function = optind < argc ? argv[optind] : NULL;
    return -1;
}

/* ---- Samples by function and instruction --------------------------------------------------- */

static void hot_fn_free(gpointer p)
{
    struct hot_fn *f = p;
    g_hash_table_destroy(f->pcs);
    g_hash_table_destroy(f->exact);
    g_free(f);
}

static void bump(GHashTable *h, uint64_t key, uint64_t n)
{
    gpointer k = GSIZE_TO_POINTER(key);
    g_hash_table_insert(h, k, GSIZE_TO_POINTER(GPOINTER_TO_SIZE(g_hash_table_lookup(h, k)) + n));
}

/* The function at pc: by the binary's symbols, else the code the record kept (a kernel read
 * from guest memory); false when neither knows it. */
static bool function_at(const out_profile *p, const prof_syms *syms, uint32_t module, uint64_t pc,
                        struct hot_fn *out)
{
    const sym_table *t = prof_syms_table(syms, module);
    struct sym_info info;
    const struct out_code *c = out_profile_code_at(p, module, pc);
    if (t && sym_lookup(t, pc, &info) == 0) {
        /* a symbol of no size covers up to the next one */
        uint64_t size = info.size ? info.size : MIN(info.end - info.start, OUT_CODE_MAX_LEN);
        *out = (struct hot_fn){.table = t, .name = info.name, .start = info.start, .size = size};
        if (c && c->addr == info.start)
            out->code = c;
        return true;
    }
    if (!c)
        return false;
    *out = (struct hot_fn){.code = c, .name = c->name, .start = c->addr, .size = c->len};
    return true;
}

/* The function at pc, made on first sight; NULL when nothing knows it. */
static struct hot_fn *fn_at(GHashTable *fns, const out_profile *p, const prof_syms *syms,
                            uint32_t module, uint64_t pc)
{
    struct hot_fn found;
    if (module == OUT_NO_MODULE || !function_at(p, syms, module, pc, &found))
        return NULL;
    /* by the binary's table when there is one: --exact's counts name a binary by a module of
     * their own, the samples by the process's */
    char *key = found.table ? g_strdup_printf("%p:%" PRIx64, (const void *)found.table, found.start)
                            : g_strdup_printf("%u:%" PRIx64, module, found.start);
    struct hot_fn *f = g_hash_table_lookup(fns, key);
    if (!f) {
        f = g_new(struct hot_fn, 1);
        *f = found;
        f->module = module;
        f->pcs = g_hash_table_new(g_direct_hash, g_direct_equal);
        f->exact = g_hash_table_new(g_direct_hash, g_direct_equal);
        g_hash_table_insert(fns, key, f);
    } else {
        g_free(key);
    }
    return f;
}

/* Every sample's innermost frame, and every --exact block, by function. */
static GHashTable *collect(const out_profile *p, const prof_syms *syms)
{
    GHashTable *fns = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, hot_fn_free);
    uint64_t *per_stack = g_new0(uint64_t, out_profile_stack_count(p) + 1);
    out_profile_stack_totals(p, per_stack, NULL);
    for (uint32_t id = 0; id < out_profile_stack_count(p); id++) {
        const struct out_stack *s = out_profile_stack(p, id);
        if (!per_stack[id] || !s->n_frames)
            continue;
        const struct out_frame *leaf = &s->frames[s->n_frames - 1];
        uint64_t at = leaf->exact ? leaf->pc : leaf->pc - 1;
        struct hot_fn *f = fn_at(fns, p, syms, leaf->module, at);
        if (f) {
            bump(f->pcs, leaf->exact ? leaf->pc : at, per_stack[id]);
            f->samples += per_stack[id];
        }
    }
    g_free(per_stack);
    const struct out_exact *e = out_profile_exact(p);
    for (size_t i = 0; i < out_profile_exact_count(p); i++) {
        struct hot_fn *f = fn_at(fns, p, syms, e[i].module, e[i].pc);
        if (f)
            bump(f->exact, e[i].pc, e[i].insns);
    }
    return fns;
}

static int by_samples(gconstpointer a, gconstpointer b)
{
    const struct hot_fn *x = *(struct hot_fn *const *)a, *y = *(struct hot_fn *const *)b;
    if (x->samples != y->samples)
        return x->samples < y->samples ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* The functions to show, the most samples first: those named `function` (one per binary that
 * has it), else the hottest n. */
static GPtrArray *choose(GHashTable *fns, const char *function, int n)
{
    GPtrArray *all = g_ptr_array_new();
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, fns);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        struct hot_fn *f = value;
        if (f->samples && (!function || strcmp(f->name, function) == 0))
            g_ptr_array_add(all, f);
    }
    g_ptr_array_sort(all, by_samples);
    if (!function && all->len > (guint)n)
        g_ptr_array_set_size(all, (guint)n);
    return all;
}

/* ---- Code ----------------------------------------------------------------------------------- */

struct insn_line {
    uint64_t addr;
    uint16_t size;
    bool ends_block; /* a jump, call or return: where a basic block of --exact ends */
    char text[200];  /* "mnemonic operands", or the bytes in hex when not disassembled */
};

static uint16_t elf_machine(const char *path)
{
    Elf64_Ehdr h = {0};
    bool ok =
        prof_load_read_head(path, &h, sizeof h) == 0 && memcmp(h.e_ident, ELFMAG, SELFMAG) == 0;
    return ok ? h.e_machine : EM_NONE;
}

static bool open_capstone(uint16_t machine, csh *h)
{
    const struct prof_arch *a = prof_arch_for_elf(machine);
    return a && a->capstone_open && a->capstone_open(h);
}

static bool ends_block(csh h, const cs_insn *insn)
{
    return cs_insn_group(h, insn, CS_GRP_JUMP) || cs_insn_group(h, insn, CS_GRP_CALL) ||
           cs_insn_group(h, insn, CS_GRP_RET) || cs_insn_group(h, insn, CS_GRP_IRET);
}

/* Addresses and bytes, 4 at a time: the view without a disassembler. */
static void raw_lines(const uint8_t *code, uint64_t start, uint64_t size, GArray *out)
{
    for (uint64_t off = 0; off < size; off += 4) {
        struct insn_line l = {.addr = start + off, .size = (uint16_t)MIN(4, size - off)};
        for (uint16_t i = 0; i < l.size; i++)
            snprintf(l.text + 3 * i, sizeof l.text - 3 * i, "%02x ", code[off + i]);
        g_array_append_val(out, l);
    }
}

/* The function's bytes: the binary's file, else the record's copy. */
static const uint8_t *code_of(const struct hot_fn *f, sym_code **code, uint64_t *size,
                              uint16_t *machine)
{
    *code = f->table ? sym_code_open(f->table) : NULL;
    const uint8_t *bytes = *code ? sym_code_at(*code, f->start, f->size) : NULL;
    *size = f->size;
    *machine = f->table ? elf_machine(sym_table_path(f->table)) : EM_NONE;
    if (!bytes && f->code) {
        bytes = f->code->bytes;
        *size = MIN(f->size, f->code->len);
        *machine = f->code->machine;
    }
    return bytes;
}

/* The function's instructions, or NULL with a message when its code cannot be read. */
static GArray *disassemble(const struct hot_fn *f, FILE *out)
{
    sym_code *code = NULL;
    uint64_t size;
    uint16_t machine;
    const uint8_t *bytes = code_of(f, &code, &size, &machine);
    if (!bytes) {
        fprintf(stderr,
                "qprof annotate: %s: no code bytes (its binary's file is not here, and the "
                "record kept none)\n",
                f->name);
        sym_code_free(code);
        return NULL;
    }
    GArray *lines = g_array_new(FALSE, FALSE, sizeof(struct insn_line));
    csh h;
    if (!open_capstone(machine, &h)) {
        fprintf(out, "  (no disassembler for this architecture in this capstone: riscv64 needs "
                     "capstone 5; addresses and bytes follow)\n");
        raw_lines(bytes, f->start, size, lines);
        sym_code_free(code);
        return lines;
    }
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    cs_insn *insn = cs_malloc(h);
    const uint8_t *at = bytes;
    size_t left = size;
    uint64_t addr = f->start;
    while (left) {
        struct insn_line l = {.addr = addr};
        uint64_t before = addr;
        if (!cs_disasm_iter(h, &at, &left, &addr, insn)) { /* data in code: show a byte */
            snprintf(l.text, sizeof l.text, ".byte 0x%02x", *at);
            l.size = 1;
            at++, left--, addr++;
        } else {
            snprintf(l.text, sizeof l.text, "%.31s %.160s", insn->mnemonic, insn->op_str);
            l.size = (uint16_t)(addr - before);
            l.ends_block = ends_block(h, insn);
        }
        g_array_append_val(lines, l);
    }
    cs_free(insn, 1);
    cs_close(&h);
    sym_code_free(code);
    return lines;
}

/* Instructions executed per instruction: a block's count is its instructions times its runs,
 * and every instruction of the block (from its first to the first jump, call or return) ran
 * that many times. */
static uint64_t *exact_per_insn(const struct hot_fn *f, const GArray *lines)
{
    if (!g_hash_table_size(f->exact))
        return NULL;
    uint64_t *runs = g_new0(uint64_t, lines->len + 1);
    for (guint i = 0; i < lines->len; i++) {
        const struct insn_line *l = &g_array_index(lines, struct insn_line, i);
        uint64_t insns = GPOINTER_TO_SIZE(g_hash_table_lookup(f->exact, GSIZE_TO_POINTER(l->addr)));
        if (!insns)
            continue;
        guint end = i;
        while (end + 1 < lines->len && !g_array_index(lines, struct insn_line, end).ends_block)
            end++;
        uint64_t per = insns / (end - i + 1);
        for (guint k = i; k <= end; k++)
            runs[k] += per;
    }
    return runs;
}

/* ---- Printing ------------------------------------------------------------------------------- */

/* A source file's lines, read once per file (NULL when the file is not here). */
static const char *source_text(GHashTable *sources, const char *file, int line)
{
    gchar **lines = g_hash_table_lookup(sources, file);
    if (!g_hash_table_contains(sources, file)) {
        char *text = NULL; /* a path the binary's DWARF names: a regular file only */
        lines = prof_load_read_text(file, QP_FILE_MAX_TEXT, &text, NULL) == 0
                    ? g_strsplit(text, "\n", -1)
                    : NULL;
        g_free(text);
        g_hash_table_insert(sources, g_strdup(file), lines);
    }
    if (!lines || line <= 0 || (guint)line > g_strv_length(lines))
        return NULL;
    return lines[line - 1];
}

/* Where the source changes: "file:line  text", and the inlined function the code is of. */
struct source_at {
    const char *file, *inlined;
    int line;
};

static void print_source(const struct hot_fn *f, uint64_t addr, GHashTable *sources,
                         struct source_at *last, FILE *out)
{
    struct source_at now = {0};
    if (!f->table || sym_lookup_line(f->table, addr, &now.file, &now.line) != 0)
        return;
    sym_lookup_inlined(f->table, addr, &now.inlined);
    if (now.file == last->file && now.line == last->line && now.inlined == last->inlined)
        return;
    *last = now;
    char *text = g_strdup(source_text(sources, now.file, now.line));
    const char *base = strrchr(now.file, '/');
    fprintf(out, "%27s : %s:%d  %s%s%s%s\n", "", base ? base + 1 : now.file, now.line,
            text ? g_strstrip(text) : "", now.inlined ? "  [inlined: " : "",
            now.inlined ? now.inlined : "", now.inlined ? "]" : "");
    g_free(text);
}

static void print_function(const struct hot_fn *f, const char *module, bool colour,
                           GHashTable *sources, FILE *out)
{
    fprintf(out,
            "\n Samples  Percent%s : %s [%s], %" PRIu64 " samples, 0x%" PRIx64 "-0x%" PRIx64 "\n",
            g_hash_table_size(f->exact) ? "       Exact" : "", f->name, module, f->samples,
            f->start, f->start + f->size);
    fputs("-----------------------------------------------------------------------------\n", out);
    GArray *lines = disassemble(f, out);
    if (!lines)
        return;
    uint64_t *runs = exact_per_insn(f, lines);
    struct source_at last = {0};
    for (guint i = 0; i < lines->len; i++) {
        const struct insn_line *l = &g_array_index(lines, struct insn_line, i);
        print_source(f, l->addr, sources, &last, out);
        uint64_t n = 0;
        for (uint64_t a = l->addr; a < l->addr + l->size; a++)
            n += GPOINTER_TO_SIZE(g_hash_table_lookup(f->pcs, GSIZE_TO_POINTER(a)));
        double pct = f->samples ? 100.0 * (double)n / (double)f->samples : 0;
        bool hot = pct >= 5;
        fprintf(out, "%s%8" PRIu64 " %7.2f%%", colour && hot ? "\033[31m" : "", n, pct);
        if (runs)
            fprintf(out, " %11" PRIu64, runs[i]);
        fprintf(out, " %s: %" PRIx64 ":  %s%s\n", hot && !colour ? "*" : " ", l->addr, l->text,
                colour && hot ? "\033[m" : "");
    }
    g_free(runs);
    g_array_free(lines, TRUE);
}

static void free_lines(gpointer p)
{
    g_strfreev(p);
}

static int print_all(const out_profile *p, GPtrArray *chosen, bool stdio)
{
    bool pager = !stdio && isatty(STDOUT_FILENO);
    FILE *out = stdout;
    if (pager) {
        const char *cmd = getenv("PAGER");
        setenv("LESS", "FRX", 0);
        out = popen(cmd && *cmd ? cmd : "less", "w");
        if (!out)
            out = stdout, pager = false;
    }
    GHashTable *sources = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, free_lines);
    for (guint i = 0; i < chosen->len; i++) {
        const struct hot_fn *f = g_ptr_array_index(chosen, i);
        print_function(f, out_profile_module(p, f->module)->name, pager, sources, out);
    }
    g_hash_table_destroy(sources);
    if (pager)
        pclose(out);
    return 0;
}

/* A function named on the command line that no sample landed in: its code all the same (the
 * reader asked for it), from the first binary whose symbols have it; NULL when none does. */
static struct hot_fn *unsampled(GHashTable *fns, const out_profile *p, const prof_syms *syms,
                                const char *function)
{
    for (uint32_t m = 0; m < out_profile_module_count(p); m++) {
        const sym_table *t = prof_syms_table(syms, m);
        uint64_t addr;
        if (t && sym_find_by_name(t, function, &addr) == 0)
            return fn_at(fns, p, syms, m, addr);
    }
    return NULL;
}

static int run_annotate(const struct annotate_options *o)
{
    out_profile *p = NULL;
    struct qp_error err = {0};
    prof_syms *syms = NULL;
    int rc = PROF_EXIT_RUNTIME;
    if (prof_load_record(o->input, &o->load, &p, NULL, NULL, &err) != 0 ||
        !(syms = prof_syms_new(p, &o->load, &err))) {
        fprintf(stderr, "qprof annotate: %s\n", err.msg);
        goto out;
    }
    GHashTable *fns = collect(p, syms);
    GPtrArray *chosen = choose(fns, o->function, o->n_functions);
    struct hot_fn *cold = o->function && !chosen->len ? unsampled(fns, p, syms, o->function) : NULL;
    if (cold)
        g_ptr_array_add(chosen, cold);
    if (!chosen->len)
        fprintf(stderr, "qprof annotate: %s: no function with symbols (--kernel, --user-dir)%s\n",
                o->function ? o->function : o->input, o->function ? "" : " has samples");
    else
        rc = print_all(p, chosen, o->stdio) == 0 ? PROF_EXIT_OK : PROF_EXIT_RUNTIME;
    g_ptr_array_free(chosen, TRUE);
    g_hash_table_destroy(fns);
out:
    prof_syms_free(syms);
    out_profile_free(p);
    return rc;
}

int prof_annotate_main(int argc, char **argv)
{
    struct annotate_options o = {.input = "qprof.data", .n_functions = 3};
    prof_load_opts_init(&o.load);
    int rc = parse(argc, argv, &o);
    if (rc < 0)
        rc = run_annotate(&o);
    prof_load_opts_clear(&o.load);
    return rc;
}
