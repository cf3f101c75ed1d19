/* `qprof top`: a live view riding on the run's sampling loop (run.c's prof_run_hooks). The
 * full-screen view is ncurses; without a terminal, or with --batch, the same lines are printed
 * as text snapshots (top_text.c). */
#define _GNU_SOURCE
#include "cli.h"
#include "top_text.h"
#include "top_view.h"

#include <curses.h>
#include <glib.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

enum top_screen_kind { SCREEN_TABLE, SCREEN_CALLERS, SCREEN_PICK_PROC, SCREEN_PICK_CPU };

struct top_state {
    const struct prof_options *o;
    struct prof_top_options t;
    prof_run *run;
    out_names *names;
    top_view *view;
    struct top_filter filter;
    bool tui, colour, display_paused, zeroed, since_start;
    enum top_screen_kind screen;
    size_t selected, picked, n_choices;
    double next_refresh, last_refresh, run_start;
    uint64_t last_samples, last_paused_ns, zero_ns, frozen_to_ns;
    double samples_per_s, paused_share, refresh_cpu_ms;
    int refreshes, rows, cols;
    int saved_stderr; /* the terminal's stderr while ncurses owns the screen */
    FILE *stderr_log; /* what was written to stderr meanwhile, shown after */
};

/* The one ncurses session, for the atexit safety net. */
static bool curses_active;

static void end_curses(void)
{
    if (curses_active) {
        endwin();
        curses_active = false;
    }
}

static double cpu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The range the table covers, in the profile's clock (ns since the start of sampling). */
static void view_range(const struct top_state *s, double elapsed_s, uint64_t *from, uint64_t *to)
{
    *to = s->display_paused ? s->frozen_to_ns : (uint64_t)(elapsed_s * 1e9);
    uint64_t window = (uint64_t)(s->t.window_s * 1e9);
    *from = !s->since_start && *to > window ? *to - window : 0;
    if (*from < s->zero_ns)
        *from = s->zero_ns;
}

/* samples/s and the paused share since the last refresh. */
static void rates(struct top_state *s, const struct prof_run_status *st, double now)
{
    double dt = now - s->last_refresh;
    if (dt <= 0)
        return;
    s->samples_per_s = (double)(st->samples - s->last_samples) / dt;
    s->paused_share = (double)(st->paused_total_ns - s->last_paused_ns) / 1e9 / dt;
    s->last_samples = st->samples;
    s->last_paused_ns = st->paused_total_ns;
    s->last_refresh = now;
}

static void fill_screen(struct top_state *s, const struct prof_run_status *st,
                        struct top_screen *sc)
{
    prof_session *session = prof_run_session(s->run);
    const prof_target *t = prof_run_target(s->run);
    const struct prof_capture_counters *c = prof_session_capture_counters(session);
    *sc = (struct top_screen){.o = s->o,
                              .status = st,
                              .transport = prof_target_transport(t),
                              .memory = prof_target_describe(t),
                              .view = s->view,
                              .filter = &s->filter,
                              .samples_per_s = s->samples_per_s,
                              .paused_share = s->paused_share,
                              .refresh_cpu_ms = s->refresh_cpu_ms,
                              .window_s = s->since_start ? 0 : s->t.window_s,
                              .zeroed = s->zeroed,
                              .display_paused = s->display_paused,
                              .resets = c->machine_resets ? c->machine_resets : c->resets};
}

/* The lines of the screen in view: the header, then the table, the callers or a picker. */
static GPtrArray *screen_lines(struct top_state *s, const struct top_screen *sc, size_t room,
                               size_t *body_start)
{
    GPtrArray *lines = g_ptr_array_new_with_free_func(g_free);
    top_text_header(sc, lines);
    g_ptr_array_add(lines, g_strdup(""));
    *body_start = lines->len;
    size_t left = room > lines->len + 1 ? room - lines->len - 1 : 1;
    if (s->screen == SCREEN_CALLERS)
        top_text_callers(sc, s->selected, left, lines);
    else if (s->screen == SCREEN_TABLE)
        top_text_table(sc, left, lines);
    else
        s->n_choices = top_text_picker(sc, s->screen == SCREEN_PICK_CPU, lines);
    return lines;
}

/* ---- ncurses ------------------------------------------------------------------------------ */

enum { PAIR_USER = 1, PAIR_KERNEL, PAIR_WARN };

/* A cpu bar's letters in colour (u user, k kernel). */
static void draw_bar_line(const char *line, bool colour)
{
    const char *open = strchr(line, '['), *close = open ? strchr(open, ']') : NULL;
    for (const char *p = line; *p; p++) {
        int pair = 0;
        if (colour && open && p > open && p < close)
            pair = *p == 'u' ? PAIR_USER : *p == 'k' ? PAIR_KERNEL : 0;
        if (pair)
            attron(COLOR_PAIR(pair));
        addch((unsigned char)*p);
        if (pair)
            attroff(COLOR_PAIR(pair));
    }
}

static void draw_line(const struct top_state *s, int y, const char *line, bool highlight)
{
    move(y, 0);
    int attr = 0;
    if (highlight)
        attr = A_REVERSE;
    else if (s->colour && g_str_has_prefix(line, "WARNING"))
        attr = COLOR_PAIR(PAIR_WARN) | A_BOLD;
    else if (y == 0)
        attr = A_BOLD;
    attron(attr);
    if (g_str_has_prefix(line, "cpu") && strchr(line, '['))
        draw_bar_line(line, s->colour);
    else
        addnstr(line, s->cols);
    attroff(attr);
    clrtoeol();
}

static const char *const key_help = "q quit  k/u/a kernel/user/all  p process  c vCPU  s sort  "
                                    "w window  Enter callers  z zero  space pause";

static void draw(struct top_state *s, const struct top_screen *sc)
{
    size_t body = 0;
    GPtrArray *lines = screen_lines(s, sc, (size_t)s->rows - 1, &body);
    erase();
    size_t n_rows = lines->len - body - 1; /* the table's or pickers's title line is first */
    if (s->screen == SCREEN_TABLE && n_rows && s->selected >= n_rows)
        s->selected = n_rows - 1;
    for (guint i = 0; i < lines->len && (int)i < s->rows - 1; i++) {
        bool pick = s->screen == SCREEN_PICK_PROC || s->screen == SCREEN_PICK_CPU;
        bool highlight = (s->screen == SCREEN_TABLE && i == body + 1 + s->selected) ||
                         (pick && i == body + 1 + s->picked);
        draw_line(s, (int)i, g_ptr_array_index(lines, i), highlight);
    }
    move(s->rows - 1, 0);
    attron(A_DIM);
    addnstr(key_help, s->cols);
    attroff(A_DIM);
    g_ptr_array_free(lines, TRUE);
    refresh();
}

/* The terminal's size, asked directly: SIGWINCH stays blocked so that it cannot cut short the
 * loop's sleep (nor a read from QEMU). */
static void follow_resize(struct top_state *s)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || !ws.ws_row || !ws.ws_col)
        return;
    if (ws.ws_row != s->rows || ws.ws_col != s->cols) {
        resizeterm(ws.ws_row, ws.ws_col);
        s->rows = ws.ws_row;
        s->cols = ws.ws_col;
    }
}

static void init_colours(struct top_state *s)
{
    const char *no_colour = getenv("NO_COLOR"); /* https://no-color.org: set and not empty */
    s->colour = has_colors() && !(no_colour && no_colour[0]);
    if (!s->colour)
        return;
    start_color();
    use_default_colors();
    init_pair(PAIR_USER, COLOR_GREEN, -1);
    init_pair(PAIR_KERNEL, COLOR_RED, -1);
    init_pair(PAIR_WARN, COLOR_YELLOW, -1);
}

/* stderr into a file while ncurses owns the screen (warnings would tear it): shown after. */
static void hold_stderr(struct top_state *s)
{
    fflush(stderr);
    s->stderr_log = tmpfile();
    s->saved_stderr = s->stderr_log ? dup(STDERR_FILENO) : -1;
    if (s->saved_stderr >= 0)
        dup2(fileno(s->stderr_log), STDERR_FILENO);
}

static void release_stderr(struct top_state *s)
{
    if (s->saved_stderr < 0)
        return;
    fflush(stderr);
    dup2(s->saved_stderr, STDERR_FILENO);
    close(s->saved_stderr);
    s->saved_stderr = -1;
    rewind(s->stderr_log);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, s->stderr_log)) > 0)
        fwrite(buf, 1, n, stderr);
    fclose(s->stderr_log);
    s->stderr_log = NULL;
}

static int start_curses(struct top_state *s)
{
    sigset_t winch;
    sigemptyset(&winch);
    sigaddset(&winch, SIGWINCH);
    sigprocmask(SIG_BLOCK, &winch, NULL);
    if (!initscr())
        return -1;
    curses_active = true;
    atexit(end_curses);
    raw(); /* Ctrl-C and Ctrl-Z as keys: a stop signal mid-sample must not suspend qprof */
    noecho();
    nodelay(stdscr, TRUE);
    keypad(stdscr, TRUE);
    curs_set(0);
    init_colours(s);
    getmaxyx(stdscr, s->rows, s->cols);
    hold_stderr(s);
    return 0;
}

/* ---- keys --------------------------------------------------------------------------------- */

static void pick(struct top_state *s, size_t choice)
{
    if (s->screen == SCREEN_PICK_CPU) {
        s->filter.cpu = choice ? (int)choice - 1 : -1;
    } else {
        const struct top_proc *procs;
        size_t n = top_view_procs(s->view, &procs);
        if (choice && choice <= n)
            g_strlcpy(s->filter.root, procs[choice - 1].root, sizeof s->filter.root);
        else
            s->filter.root[0] = 0;
    }
    s->screen = SCREEN_TABLE;
    s->selected = 0;
}

static bool picker_key(struct top_state *s, int ch)
{
    if (ch == 27 || ch == KEY_LEFT)
        s->screen = SCREEN_TABLE;
    else if (ch == KEY_UP && s->picked)
        s->picked--;
    else if (ch == KEY_DOWN && s->picked + 1 < s->n_choices)
        s->picked++;
    else if (ch == '\n' || ch == KEY_ENTER)
        pick(s, s->picked);
    else if (ch >= '0' && ch <= '9' && (size_t)(ch - '0') < s->n_choices)
        pick(s, (size_t)(ch - '0'));
    else
        return false;
    return true;
}

static void zero(struct top_state *s, double elapsed_s)
{
    s->zero_ns = (uint64_t)(elapsed_s * 1e9);
    s->zeroed = true;
}

/* Keys that change what the table counts or how. Returns false for a key it does not know. */
static bool table_key(struct top_state *s, int ch, double elapsed_s)
{
    switch (ch) {
    case 'k':
    case 'u':
    case 'a':
        s->filter.mode = ch == 'k' ? TOP_KERNEL : ch == 'u' ? TOP_USER : TOP_ALL;
        s->selected = 0;
        return true;
    case 's':
        s->filter.sort = s->filter.sort == TOP_SORT_SELF ? TOP_SORT_TOTAL : TOP_SORT_SELF;
        return true;
    case 'w':
        s->since_start = !s->since_start;
        return true;
    case 'z':
        zero(s, elapsed_s);
        return true;
    case 'p':
    case 'c':
        s->screen = ch == 'p' ? SCREEN_PICK_PROC : SCREEN_PICK_CPU;
        s->picked = 0;
        return true;
    case ' ':
        s->display_paused = !s->display_paused;
        s->frozen_to_ns = (uint64_t)(elapsed_s * 1e9);
        return true;
    case KEY_UP:
        s->selected -= s->selected > 0;
        return true;
    case KEY_DOWN:
        s->selected++;
        return true;
    case '\n':
    case KEY_ENTER:
        s->screen = s->screen == SCREEN_TABLE ? SCREEN_CALLERS : SCREEN_TABLE;
        return true;
    case 27:
    case KEY_LEFT:
        s->screen = SCREEN_TABLE;
        return true;
    default:
        return false;
    }
}

/* Every key waiting; *quit on q or Ctrl-C. Returns whether the screen must be drawn again. */
static bool read_keys(struct top_state *s, double elapsed_s, bool *quit)
{
    bool changed = false;
    int ch;
    while ((ch = getch()) != ERR) {
        if (ch == 'q' || ch == 3 /* Ctrl-C, raw */) {
            *quit = true;
            return changed;
        }
        if (ch == KEY_RESIZE)
            changed = true;
        else if (s->screen == SCREEN_PICK_PROC || s->screen == SCREEN_PICK_CPU)
            changed |= picker_key(s, ch);
        else
            changed |= table_key(s, ch, elapsed_s);
    }
    return changed;
}

/* ---- refresh ------------------------------------------------------------------------------ */

static void print_snapshot(struct top_state *s, const struct top_screen *sc)
{
    size_t body = 0;
    GPtrArray *lines = screen_lines(s, sc, (size_t)s->o->top + 32, &body);
    for (guint i = 0; i < lines->len; i++)
        printf("%s\n", (const char *)g_ptr_array_index(lines, i));
    printf("\n");
    fflush(stdout);
    g_ptr_array_free(lines, TRUE);
}

/* Recounts and draws (or prints); its CPU time is shown at the next refresh. */
static void refresh_view(struct top_state *s, double now, bool new_period)
{
    double cpu_start = cpu_now_ms();
    struct prof_run_status st;
    prof_run_get_status(s->run, &st);
    if (new_period)
        rates(s, &st, now);
    uint64_t from, to;
    view_range(s, st.elapsed_s, &from, &to);
    top_view_update(s->view, &s->filter, from, to);
    struct top_screen sc;
    fill_screen(s, &st, &sc);
    if (s->tui)
        draw(s, &sc);
    else
        print_snapshot(s, &sc);
    s->refresh_cpu_ms = cpu_now_ms() - cpu_start;
}

static int top_start(void *ctx, prof_run *r)
{
    struct top_state *s = ctx;
    s->run = r;
    s->names = prof_session_names(prof_run_session(r));
    s->view = top_view_new(prof_session_profile(prof_run_session(r)), s->names);
    s->run_start = mono_now();
    s->last_refresh = s->run_start;
    s->next_refresh = s->run_start + s->t.delay_s;
    if (s->tui && start_curses(s) != 0) {
        fprintf(stderr, "qprof top: cannot set up the terminal (TERM=%s)\n",
                getenv("TERM") ? getenv("TERM") : "");
        return -1;
    }
    return 0;
}

static bool top_tick(void *ctx, prof_run *r, double now)
{
    struct top_state *s = ctx;
    (void)r;
    bool quit = false, redraw = false;
    if (s->tui) {
        follow_resize(s);
        struct prof_run_status st;
        prof_run_get_status(s->run, &st);
        redraw = read_keys(s, st.elapsed_s, &quit);
        if (quit)
            return true;
    }
    if (now >= s->next_refresh) {
        refresh_view(s, now, true);
        s->next_refresh += s->t.delay_s;
        if (s->next_refresh < now)
            s->next_refresh = now + s->t.delay_s;
        s->refreshes++;
        return s->t.count && s->refreshes >= s->t.count;
    }
    if (redraw)
        refresh_view(s, now, false);
    return false;
}

static void top_end(void *ctx, prof_run *r)
{
    struct top_state *s = ctx;
    (void)r;
    /* a run that ended otherwise than by -n (--samples, --duration, a signal, QEMU gone) gets
     * its last snapshot: a script's --samples N run prints what the N samples show */
    if (!s->tui && s->view && !(s->t.count && s->refreshes >= s->t.count))
        refresh_view(s, mono_now(), true);
    end_curses();
    release_stderr(s);
    top_view_free(s->view);
    s->view = NULL;
    out_names_free(s->names);
    s->names = NULL;
}

int prof_top_main(int argc, char **argv)
{
    struct prof_options o;
    struct top_state s = {.saved_stderr = -1, .filter = {.cpu = -1}, .refresh_cpu_ms = -1};
    prof_top_options_init(&o, &s.t);
    int rc = prof_parse_top_args(argc, argv, &o, &s.t);
    if (rc >= 0)
        return rc;
    s.o = &o;
    s.tui = !s.t.batch && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    struct prof_run_hooks hooks = {.start = top_start,
                                   .tick = top_tick,
                                   .end = top_end,
                                   .ctx = &s,
                                   .summary_with_outputs_only = true};
    return prof_run_main(&o, &hooks);
}
