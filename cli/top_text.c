/* qprof top's screen as lines of text: the same lines make the ncurses view (top.c) and the
 * --batch snapshots, so the two cannot say different things. */
#include "top_text.h"

#include <inttypes.h>
#include <string.h>

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void add_line(GPtrArray *lines, char *text)
{
    g_ptr_array_add(lines, text);
}

static const char *target_name(const struct prof_options *o)
{
    if (o->plugin_address)
        return o->plugin_address;
    if (o->gdb_address)
        return o->gdb_address;
    return o->qmp_socket;
}

static void header_line(const struct top_screen *sc, GPtrArray *lines)
{
    const struct prof_run_status *st = sc->status;
    const char *cost = st->captures ? "capture cost" : "guest paused";
    add_line(lines, g_strdup_printf("qprof top  %s (transport: %s, memory: %s)  %.0f s",
                                    target_name(sc->o), sc->transport, sc->memory, st->elapsed_s));
    char refresh[48] = "";
    if (sc->refresh_cpu_ms >= 0) /* none yet before the second refresh */
        snprintf(refresh, sizeof refresh, "  refresh %.2f ms CPU", sc->refresh_cpu_ms);
    add_line(lines,
             g_strdup_printf("%.0f samples/s  %s %.1f%%  %" PRIu64 " samples, %" PRIu64 " failed%s",
                             sc->samples_per_s, cost, 100 * sc->paused_share, st->samples,
                             st->failed, refresh));
}

/* "cpu0 [uuuuuukkkk..........] busy  50% user 30% kernel 20% idle 50%": u user, k kernel,
 * '.' idle (top.c colours the letters). */
static void cpu_lines(const struct top_screen *sc, GPtrArray *lines)
{
    const struct top_cpu *cpus;
    int n = top_view_cpus(sc->view, &cpus);
    enum { BAR = 20 };
    for (int i = 0; i < n; i++) {
        const struct top_cpu *c = &cpus[i];
        uint64_t all = c->user + c->kernel + c->idle + c->other;
        if (!all)
            continue;
        char bar[BAR + 1];
        int u = (int)(BAR * c->user / all), k = (int)(BAR * (c->kernel + c->other) / all);
        memset(bar, '.', BAR);
        memset(bar, 'u', u);
        memset(bar + u, 'k', k);
        bar[BAR] = 0;
        add_line(lines, g_strdup_printf("cpu%-2d [%s] busy %5.1f%%  user %5.1f%%  kernel %5.1f%%  "
                                        "idle %5.1f%%",
                                        i, bar, pct(all - c->idle, all), pct(c->user, all),
                                        pct(c->kernel + c->other, all), pct(c->idle, all)));
    }
}

static void process_line(const struct top_screen *sc, GPtrArray *lines)
{
    const struct top_proc *procs;
    size_t n = top_view_procs(sc->view, &procs);
    uint64_t all = 0;
    for (size_t i = 0; i < n; i++)
        all += procs[i].count;
    GString *line = g_string_new("processes:");
    for (size_t i = 0; i < n && i < 8; i++)
        g_string_append_printf(line, "  %s %.1f%%", procs[i].root, pct(procs[i].count, all));
    add_line(lines, g_string_free(line, FALSE));
}

/* The summary's health warnings, while they hold. */
static void health_lines(const struct top_screen *sc, GPtrArray *lines)
{
    const struct prof_run_status *st = sc->status;
    if (st->paused_by_other)
        add_line(lines, g_strdup("WARNING: the guest is paused by another client: not sampling "
                                 "(qprof leaves it paused)"));
    if (st->qemu_gone)
        add_line(lines, g_strdup_printf("WARNING: QEMU is gone: %s", st->last_failure));
    if (sc->resets)
        add_line(lines, g_strdup_printf("WARNING: guest reset %" PRIu64 " time(s) (process "
                                        "caches cleared)",
                                        sc->resets));
    if (st->failed)
        add_line(lines, g_strdup_printf("WARNING: %" PRIu64 " failed samples; last: %s", st->failed,
                                        st->last_failure));
    char **warnings = g_strsplit(st->warnings, "\n", -1);
    for (char **w = warnings; *w; w++)
        if (g_str_has_prefix(*w, "warning="))
            add_line(lines, g_strdup_printf("WARNING: %s", *w + strlen("warning=")));
    g_strfreev(warnings);
}

static const char *const mode_names[] = {"all", "kernel", "user"};

static void filter_line(const struct top_screen *sc, GPtrArray *lines)
{
    const struct top_filter *f = sc->filter;
    char cpu[16] = "all";
    if (f->cpu >= 0)
        snprintf(cpu, sizeof cpu, "cpu%d", f->cpu);
    char range[48];
    if (sc->window_s > 0)
        snprintf(range, sizeof range, "last %g s", sc->window_s);
    else
        snprintf(range, sizeof range, "since %s", sc->zeroed ? "z" : "start");
    add_line(lines,
             g_strdup_printf("mode: %s  process: %s  vCPU: %s  sort: %s  %s: %" PRIu64 " samples%s",
                             mode_names[f->mode], f->root[0] ? f->root : "all", cpu,
                             f->sort == TOP_SORT_SELF ? "self" : "total", range,
                             top_view_counted(sc->view),
                             sc->display_paused ? "  [display paused]" : ""));
}

void top_text_header(const struct top_screen *sc, GPtrArray *lines)
{
    header_line(sc, lines);
    cpu_lines(sc, lines);
    process_line(sc, lines);
    health_lines(sc, lines);
    filter_line(sc, lines);
}

void top_text_table(const struct top_screen *sc, size_t max_rows, GPtrArray *lines)
{
    const struct top_row *rows;
    size_t n = top_view_rows(sc->view, &rows);
    uint64_t all = top_view_counted(sc->view);
    add_line(lines, g_strdup_printf("%7s %7s  %s  %-16s %s", "SELF", "TOTAL", "K/U", "MODULE",
                                    "FUNCTION"));
    for (size_t i = 0; i < n && i < max_rows; i++)
        add_line(lines, g_strdup_printf("%6.2f%% %6.2f%%   %s  %-16.16s %s", pct(rows[i].self, all),
                                        pct(rows[i].total, all), rows[i].kernel ? "K" : "U",
                                        rows[i].module[0] ? rows[i].module : "?", rows[i].name));
}

void top_text_callers(const struct top_screen *sc, size_t row, size_t max_rows, GPtrArray *lines)
{
    const struct top_row *rows;
    size_t n = top_view_rows(sc->view, &rows);
    if (row >= n) {
        add_line(lines, g_strdup("(no function in this range: Esc goes back)"));
        return;
    }
    const struct top_caller *callers;
    size_t n_callers = top_view_callers(sc->view, row, max_rows, &callers);
    add_line(lines, g_strdup_printf("callers of %s (%s): the hottest stacks through it, innermost "
                                    "first (Esc: back)",
                                    rows[row].name, rows[row].module));
    for (size_t i = 0; i < n_callers; i++)
        add_line(lines, g_strdup_printf("%6.2f%%  %s  [%s]", pct(callers[i].count, rows[row].total),
                                        callers[i].chain, callers[i].root));
}

size_t top_text_picker(const struct top_screen *sc, bool cpus, GPtrArray *lines)
{
    add_line(lines, g_strdup_printf("pick a %s (Up/Down and Enter, or its number; Esc: back):",
                                    cpus ? "vCPU" : "process"));
    add_line(lines, g_strdup("  0  all"));
    size_t n = 0;
    if (cpus) {
        const struct top_cpu *c;
        n = (size_t)top_view_cpus(sc->view, &c);
        for (size_t i = 0; i < n; i++)
            add_line(lines, g_strdup_printf("%3zu  cpu%zu", i + 1, i));
    } else {
        const struct top_proc *procs;
        n = top_view_procs(sc->view, &procs);
        for (size_t i = 0; i < n; i++)
            add_line(lines, g_strdup_printf("%3zu  %s", i + 1, procs[i].root));
    }
    return n + 1;
}
