/* qprof top end to end: the demo guest (spin and sys) in real QEMU, the real qprof binary in a
 * real terminal (a tmux session of a fixed size: send-keys, then capture-pane), checked as a
 * user reads the screen: hot_a on top with about 3x hot_b, k leaves kernel functions only, p on
 * sys leaves sys's, Enter on hot_a shows its callers, q gives the terminal back (tmux's
 * alternate screen is left) with the guest running. Every wait is on what the screen says,
 * with a generous deadline.
 *
 * Usage: test_top CASE   (gdb: over the gdbstub; plugin: through qprof-plugin.so in QEMU 10,
 *                         skipped without it; batch: --batch -n 3 snapshots; exits: Ctrl-C
 *                         and QEMU exiting give the terminal back too) */
#define _GNU_SOURCE
#include "child.h"
#include "harness.h"
#include "qmp.h"
#include "vm.h"

#include <glib.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define QPROF_BIN QPROF_BUILD_DIR "/qprof"
/* The table counts since the start (--window longer than any run): it waits for this many. */
#define SAMPLES    1500
#define DEADLINE_S 300.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- tmux --------------------------------------------------------------------------------- */

/* The tmux server's socket, in the VM's private folder (which vm_stop removes). */
static char tmux_socket[512];

/* Runs tmux -S SOCKET ARGS...; its stdout (g_free), NULL when it failed. */
static char *tmux(const char *const *args)
{
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, "tmux");
    g_ptr_array_add(argv, "-S");
    g_ptr_array_add(argv, tmux_socket);
    for (const char *const *a = args; *a; a++)
        g_ptr_array_add(argv, (gpointer)*a);
    g_ptr_array_add(argv, NULL);
    char *out = NULL;
    gint status = 0;
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                               &out, NULL, &status, NULL);
    g_ptr_array_free(argv, TRUE);
    if (!ok || !g_spawn_check_wait_status(status, NULL)) {
        g_free(out);
        return NULL;
    }
    return out;
}

/* The session and the qprof in it end with the test, however it ends. */
static void kill_tmux(void)
{
    g_free(tmux((const char *const[]){"kill-server", NULL}));
}

static char *pane_format(const char *format);

static char *capture(void)
{
    char *text = tmux((const char *const[]){"capture-pane", "-p", "-t", "top", NULL});
    return text ? text : g_strdup("");
}

static void send_keys(const char *key)
{
    g_free(tmux((const char *const[]){"send-keys", "-t", "top", key, NULL}));
}

static char *pane_format(const char *format)
{
    char *text = tmux((const char *const[]){"display-message", "-p", "-t", "top", format, NULL});
    if (text)
        g_strstrip(text);
    return text ? text : g_strdup("");
}

/* Waits until the screen passes ok(); the last capture (g_free), or a failure at the deadline. */
static char *wait_screen(bool (*ok)(const char *screen, const void *arg), const void *arg,
                         const char *what)
{
    double deadline = now_s() + DEADLINE_S;
    for (;;) {
        /* asked first: a screen read after qprof's exit is its last */
        char *dead = pane_format("#{pane_dead}");
        bool gone = strcmp(dead, "1") == 0;
        g_free(dead);
        char *screen = capture();
        if (ok(screen, arg))
            return screen;
        if (gone || now_s() > deadline) {
            fprintf(stderr, "screen:\n%s\n", screen);
            HARNESS_FAIL("the screen never showed %s (%s)", what,
                         gone ? "qprof exited" : "deadline");
            return screen;
        }
        g_free(screen);
        usleep(100 * 1000);
    }
}

static bool lacks_text(const char *screen, const void *needle)
{
    return strstr(screen, needle) == NULL;
}

/* A file's text once it ends in a newline (g_free); "" after the deadline. */
static char *wait_file(const char *path)
{
    double deadline = now_s() + DEADLINE_S;
    char *text = NULL;
    while (!(g_file_get_contents(path, &text, NULL, NULL) && g_str_has_suffix(text, "\n"))) {
        g_free(text);
        text = NULL;
        if (now_s() > deadline) {
            HARNESS_FAIL("no %s within %.0f s", path, DEADLINE_S);
            return g_strdup("");
        }
        usleep(100 * 1000);
    }
    return text;
}

static bool has_text(const char *screen, const void *needle)
{
    return strstr(screen, needle) != NULL;
}

/* The samples the table counts: "...: N samples" on the filter line. */
static uint64_t counted(const char *screen)
{
    const char *line = strstr(screen, "mode: ");
    const char *colon = line ? strstr(line, " samples") : NULL;
    while (colon && colon > line && colon[-1] >= '0' && colon[-1] <= '9')
        colon--;
    return colon ? strtoull(colon, NULL, 10) : 0;
}

static bool enough_samples(const char *screen, const void *n)
{
    return counted(screen) >= *(const uint64_t *)n && strstr(screen, "hot_a");
}

/* ---- the table ---------------------------------------------------------------------------- */

struct row {
    double self, total;
    char ku[2], module[64], function[128];
};

/* The table's rows on the screen, from the line after its header. */
static GArray *table_rows(const char *screen)
{
    GArray *rows = g_array_new(FALSE, TRUE, sizeof(struct row));
    const char *head = strstr(screen, "K/U  MODULE");
    if (!head)
        return rows;
    char **lines = g_strsplit(strchr(head, '\n') + 1, "\n", -1);
    for (char **l = lines; *l; l++) {
        struct row r = {0};
        if (sscanf(*l, "%lf%% %lf%% %1s %63s %127s", &r.self, &r.total, r.ku, r.module,
                   r.function) == 5)
            g_array_append_val(rows, r);
    }
    g_strfreev(lines);
    return rows;
}

static const struct row *find_row(GArray *rows, const char *function)
{
    for (guint i = 0; i < rows->len; i++)
        if (strcmp(g_array_index(rows, struct row, i).function, function) == 0)
            return &g_array_index(rows, struct row, i);
    return NULL;
}

/* The first user function's row: the plugin samples a vCPU at the start of a block, so one that
 * wakes from a halt is caught on the timer's interrupt entry (isr32) more than its share: the
 * kernel's rows may come before hot_a there, the user ones may not. */
static guint first_user_row(GArray *rows)
{
    for (guint i = 0; i < rows->len; i++)
        if (strcmp(g_array_index(rows, struct row, i).ku, "U") == 0)
            return i;
    return rows->len;
}

/* hot_a the first user function, and 3:1 against hot_b within 4.4 standard deviations of a binomial
 * share over the samples the two have (never tighter than 0.03: TCG's own small biases). */
static void check_hot_ratio(const char *screen)
{
    GArray *rows = table_rows(screen);
    REQUIRE(first_user_row(rows) < rows->len);
    CHECK_STR(g_array_index(rows, struct row, first_user_row(rows)).function, "hot_a");
    const struct row *a = find_row(rows, "hot_a"), *b = find_row(rows, "hot_b");
    REQUIRE(a && b);
    double n = (a->self + b->self) / 100.0 * (double)counted(screen);
    double share = a->self / (a->self + b->self);
    double tol = fmax(4.4 * sqrt(0.75 * 0.25 / fmax(n, 1)), 0.03);
    fprintf(stderr, "hot_a %.2f%%, hot_b %.2f%% of %lu samples: share %.3f +- %.3f\n", a->self,
            b->self, (unsigned long)counted(screen), share, tol);
    CHECK_MSG(fabs(share - 0.75) < tol, "hot_a's share of hot_a + hot_b %.3f, designed 0.75",
              share);
    g_array_free(rows, TRUE);
}

static void check_kernel_only(const char *screen)
{
    GArray *rows = table_rows(screen);
    CHECK_MSG(find_row(rows, "kwork_mix"), "no kwork_mix in the kernel view");
    for (guint i = 0; i < rows->len; i++) {
        const struct row *r = &g_array_index(rows, struct row, i);
        CHECK_MSG(strcmp(r->ku, "K") == 0, "a user function in the kernel view: %s", r->function);
    }
    g_array_free(rows, TRUE);
}

/* sys's own functions and the kernel's it calls; none of spin's. */
static void check_sys_only(const char *screen)
{
    GArray *rows = table_rows(screen);
    CHECK_MSG(find_row(rows, "user_mix") && find_row(rows, "kwork_mix"),
              "sys's user_mix or kwork_mix missing under p sys");
    for (guint i = 0; i < rows->len; i++) {
        const struct row *r = &g_array_index(rows, struct row, i);
        CHECK_MSG(strcmp(r->module, "sys") == 0 || strcmp(r->module, "kernel.elf") == 0,
                  "%s of %s under p sys", r->function, r->module);
    }
    g_array_free(rows, TRUE);
}

/* The picker's number for the first line naming needle ("  2  sys (2)"). */
static char picker_choice(const char *screen, const char *needle)
{
    const char *picker = strstr(screen, "pick a ");
    REQUIRE(picker);
    const char *at = strstr(picker, needle);
    REQUIRE(at);
    const char *line = at;
    while (line > screen && line[-1] != '\n')
        line--;
    int n = atoi(line);
    REQUIRE(n > 0 && n < 10);
    return (char)('0' + n);
}

/* ---- the guest ---------------------------------------------------------------------------- */

static bool guest_running(const char *qmp_path)
{
    qmp_client *c = NULL;
    struct qp_error err = {0};
    bool running = false;
    if (qmp_open(qmp_path, NULL, &c, &err) != 0 || qmp_query_running(c, &running, &err) != 0)
        HARNESS_FAIL("query-status: %s", err.msg);
    qmp_free(c);
    return running;
}

static test_vm *boot(bool plugin)
{
    struct vm_opts opts = {.kernel = QPROF_GUEST_KERNEL,
                           .shared_ram = true,
                           .cmdline = "run=spin,sys",
                           .gdbstub = !plugin,
                           .plugin = plugin,
                           .second_qmp = true};
    test_vm *vm = NULL;
    int rc = vm_start(&opts, &vm);
    if (rc == VM_SKIP)
        exit(VM_SKIP);
    REQUIRE(rc == 0);
    REQUIRE(vm_wait_serial(vm, "ready", 60) == 0);
    return vm;
}

/* qprof top's command line for the guest (g_free). */
static char *top_command(test_vm *vm, bool plugin, const char *extra)
{
    const char *target = plugin ? "--plugin" : "--gdb";
    const char *address = plugin ? vm_plugin_address(vm) : vm_gdb_address(vm);
    return g_strdup_printf("%s top %s %s %s %s --kernel %s --user-dir %s --interval 1 %s",
                           QPROF_BIN, target, address, plugin ? "--qmp-socket" : "",
                           plugin ? vm_qmp_path(vm) : "", QPROF_GUEST_KERNEL, QPROF_GUEST_USER_DIR,
                           extra);
}

/* ---- cases -------------------------------------------------------------------------------- */

static void check_callers(void)
{
    /* p 0: every process again; down to hot_a (the table is since the start: its order holds
     * from one refresh to the next but for near ties far below hot_a) */
    send_keys("p");
    g_free(wait_screen(has_text, "pick a process", "the process picker"));
    send_keys("0");
    char *screen = wait_screen(has_text, "process: all", "every process");
    GArray *rows = table_rows(screen);
    guint at = first_user_row(rows);
    REQUIRE(at < rows->len);
    CHECK_STR(g_array_index(rows, struct row, at).function, "hot_a");
    g_array_free(rows, TRUE);
    g_free(screen);
    for (guint i = 0; i < at; i++) /* the cursor is on the first row after a pick */
        send_keys("Down");
    send_keys("Enter");
    screen = wait_screen(has_text, "callers of hot_a", "hot_a's callers");
    CHECK_MSG(strstr(screen, "hot_a <- compute <- main <- _start  [spin ("),
              "no compute <- main <- _start chain under hot_a:\n%s", screen);
    g_free(screen);
    send_keys("Escape");
    g_free(wait_screen(has_text, "K/U  MODULE", "the table again"));
}

/* s sorts by total; z zeroes (w: the table since then, fewer samples than since the start);
 * space freezes the display while sampling goes on. */
static void check_other_keys(void)
{
    send_keys("s");
    char *screen = wait_screen(has_text, "sort: total", "the table by total");
    GArray *rows = table_rows(screen);
    for (guint i = 1; i < rows->len; i++)
        CHECK_MSG(g_array_index(rows, struct row, i - 1).total >=
                      g_array_index(rows, struct row, i).total,
                  "row %u's total above row %u's under s", i, i - 1);
    g_array_free(rows, TRUE);
    uint64_t before = counted(screen);
    g_free(screen);
    send_keys("z");
    send_keys("w");
    screen = wait_screen(has_text, "since z", "the table since z");
    CHECK_MSG(counted(screen) < before, "%lu samples since z, %lu before it",
              (unsigned long)counted(screen), (unsigned long)before);
    g_free(screen);
    send_keys("Space");
    g_free(wait_screen(has_text, "[display paused]", "the paused display"));
    send_keys("Space");
    g_free(wait_screen(lacks_text, "[display paused]", "the display going on"));
}

static bool have_tmux(void)
{
    if (system("tmux -V >/dev/null 2>&1") == 0)
        return true;
    fprintf(stderr, "SKIP: no tmux (xtask deps installs it)\n");
    return false;
}

/* qprof top (extra appended) in a new tmux session "top" of 150x50 whose pane stays after
 * qprof exits (remain-on-exit), to be asked how it left the terminal; returns the file its
 * exit status goes to (g_free). One session at a time. */
static char *start_top(test_vm *vm, bool plugin, const char *extra, int run)
{
    snprintf(tmux_socket, sizeof tmux_socket, "%s/tmux%d", vm_dir(vm), run);
    char *conf = g_strdup_printf("%s/tmux.conf", vm_dir(vm));
    REQUIRE(g_file_set_contents(conf, "set -g remain-on-exit on\n", -1, NULL));
    char *top = top_command(vm, plugin, extra);
    char *status_path = g_strdup_printf("%s/top%d.status", vm_dir(vm), run);
    char *cmd = g_strdup_printf("%s; echo $? > %s", top, status_path);
    char *started = tmux((const char *const[]){"-f", conf, "new-session", "-d", "-s", "top", "-x",
                                               "150", "-y", "50", cmd, NULL});
    REQUIRE(started != NULL);
    g_free(started);
    g_free(cmd);
    g_free(top);
    g_free(conf);
    return status_path;
}

/* After qprof's exit: its status, and the alternate screen left (ncurses' endwin). */
static void check_left_terminal(char *status_path, const char *want_status)
{
    char *status = wait_file(status_path);
    CHECK_STR(status, want_status);
    g_free(status);
    g_free(status_path);
    char *alt = pane_format("#{alternate_on}");
    CHECK_STR(alt, "0");
    g_free(alt);
}

static int case_tui(bool plugin)
{
    if (!have_tmux())
        return VM_SKIP;
    test_vm *vm = boot(plugin);
    atexit(kill_tmux);
    char *status_path = start_top(vm, plugin, "--window 86400", 0);
    uint64_t want = SAMPLES;
    char *screen = wait_screen(enough_samples, &want, "enough samples");
    char *alt = pane_format("#{alternate_on}");
    CHECK_STR(alt, "1");
    g_free(alt);
    check_hot_ratio(screen);
    g_free(screen);

    send_keys("k");
    screen = wait_screen(has_text, "mode: kernel", "the kernel view");
    check_kernel_only(screen);
    g_free(screen);

    send_keys("a");
    g_free(wait_screen(has_text, "mode: all", "every mode"));
    send_keys("p");
    screen = wait_screen(has_text, "pick a process", "the process picker");
    char key[2] = {picker_choice(screen, "sys ("), 0};
    g_free(screen);
    send_keys(key);
    screen = wait_screen(has_text, "process: sys (", "sys alone");
    check_sys_only(screen);
    g_free(screen);

    check_callers();
    check_other_keys();

    send_keys("q");
    check_left_terminal(status_path, "0\n");
    CHECK_MSG(guest_running(vm_qmp2_path(vm)), "qprof top left the guest stopped");
    kill_tmux(); /* before vm_stop removes its socket with the VM's folder */
    vm_stop(vm);
    return harness_result();
}

/* The other ways out give the terminal back too: Ctrl-C (exit 0, the guest running), then QEMU
 * exiting under the view (exit 1, and why, on the terminal it gave back). */
static int case_exits(void)
{
    if (!have_tmux())
        return VM_SKIP;
    test_vm *vm = boot(false);
    atexit(kill_tmux);
    char *status_path = start_top(vm, false, "", 0);
    g_free(wait_screen(has_text, "hot_a", "the table"));
    send_keys("C-c");
    check_left_terminal(status_path, "0\n");
    CHECK_MSG(guest_running(vm_qmp2_path(vm)), "Ctrl-C left the guest stopped");
    kill_tmux();

    status_path = start_top(vm, false, "", 1);
    g_free(wait_screen(has_text, "hot_a", "the table"));
    kill(vm_pid(vm), SIGKILL);
    check_left_terminal(status_path, "1\n");
    char *screen = wait_screen(has_text, "qprof: stopping:", "why qprof stopped");
    g_free(screen);
    kill_tmux(); /* before vm_stop removes its socket with the VM's folder */
    vm_stop(vm);
    return harness_result();
}

/* --batch -n 3: three snapshots, each a header and a table, hot_a on the last one's top; -o's
 * folded file written at the end. */
static int case_batch(void)
{
    test_vm *vm = boot(false);
    /* -o: the usual outputs at the end as well */
    char *extra = g_strdup_printf("--batch -n 3 -d 1 -o %s/top.folded", vm_dir(vm));
    char *cmd = top_command(vm, false, extra);
    g_free(extra);
    char **argv = g_strsplit(cmd, " ", -1);
    char out[512], err[512];
    snprintf(out, sizeof out, "%s/top.out", vm_dir(vm));
    snprintf(err, sizeof err, "%s/top.err", vm_dir(vm));
    /* the empty words of a command line without --qmp-socket */
    GPtrArray *args = g_ptr_array_new();
    for (char **a = argv + 1; *a; a++)
        if (**a)
            g_ptr_array_add(args, *a);
    g_ptr_array_add(args, NULL);
    bool late = false;
    pid_t pid =
        child_start(QPROF_BIN, (const char *const *)args->pdata, vm_dir(vm), out, err, NULL);
    int code = child_wait(pid, DEADLINE_S, &late);
    CHECK_MSG(!late, "qprof top --batch -n 3 did not end");
    char *text = NULL, *errs = NULL;
    g_file_get_contents(out, &text, NULL, NULL);
    g_file_get_contents(err, &errs, NULL, NULL);
    CHECK_MSG(code == 0, "qprof top exited %d: %s", code, errs);
    char **snapshots = g_strsplit(text ? text : "", "qprof top  ", -1);
    CHECK_INT(g_strv_length(snapshots), 4); /* "" before the first */
    for (char **s = snapshots + 1; *s; s++) {
        CHECK_MSG(strstr(*s, "samples/s") && strstr(*s, "K/U  MODULE") && strstr(*s, "cpu0 "),
                  "a snapshot without its header or table:\n%s", *s);
        CHECK_MSG(strstr(*s, "transport: gdbstub"), "not over the gdbstub:\n%s", *s);
    }
    GArray *rows = table_rows(snapshots[3]);
    CHECK_MSG(rows->len && strcmp(g_array_index(rows, struct row, 0).function, "hot_a") == 0,
              "hot_a not on top of the last snapshot:\n%s", snapshots[3]);
    g_array_free(rows, TRUE);
    CHECK_MSG(!strstr(text, "\033["), "escape sequences in --batch output");
    char *folded_path = g_strdup_printf("%s/top.folded", vm_dir(vm)), *folded = NULL;
    CHECK_MSG(g_file_get_contents(folded_path, &folded, NULL, NULL) && strstr(folded, ";hot_a "),
              "no hot_a stacks in -o %s", folded_path);
    g_free(folded);
    g_free(folded_path);
    CHECK_MSG(guest_running(vm_qmp_path(vm)), "qprof top left the guest stopped");
    g_strfreev(snapshots);
    g_free(text);
    g_free(errs);
    g_ptr_array_free(args, TRUE);
    g_strfreev(argv);
    g_free(cmd);
    vm_stop(vm);
    return harness_result();
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    if (strcmp(c, "gdb") == 0)
        return case_tui(false);
    if (strcmp(c, "plugin") == 0)
        return case_tui(true);
    if (strcmp(c, "batch") == 0)
        return case_batch();
    if (strcmp(c, "exits") == 0)
        return case_exits();
    fprintf(stderr, "usage: test_top gdb|plugin|batch|exits\n");
    return 2;
}
