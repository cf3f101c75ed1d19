/* The fault matrix, end to end: the real qprof binary against the demo guest in real QEMU (or a
 * fake QMP server) while something goes wrong: QEMU killed, signals, a reset, a guest paused by
 * another client, unwritable output, a second qprof, a guest that publishes a hostile qprof_abi,
 * a peer that closes mid-reply. Each case checks the exit status, a clear message, that the
 * guest is running afterwards when QEMU still lives (or still paused when someone else paused
 * it), and that the samples taken so far were written completely.
 *
 * Nothing here depends on machine speed: runs take a fixed number of samples (--samples), and
 * a fault is injected once qprof's progress line (--progress) shows enough samples, polled with
 * generous deadlines. The suite must pass on a loaded 2-core machine.
 *
 * Usage: test_faults CASE   (one ctest entry per case, see CMakeLists.txt) */
#define _GNU_SOURCE
#include "fake_qmp.h"
#include "child.h"
#include "folded.h"
#include "harness.h"
#include "qmp.h"
#include "qmp_internal.h" /* qmp__send: a command half written by a client that dies */
#include "symbols.h"
#include "guest_names.h"
#include "vm.h"

#include <dirent.h>
#include <fcntl.h>
#include <glib.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define QPROF_BIN QPROF_BUILD_DIR "/qprof"

/* Generous: TCG under ASan on a loaded 2-core machine. None of these is a measurement. */
#define PROGRESS_DEADLINE_S 120.0
#define RUN_DEADLINE_S      300.0
#define SHORT_RUN_S         60.0

/* The child exits with this when it could not protect /dev/full (see start_qprof). */
#define EXIT_NO_ISOLATION 125

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static char *slurp(const char *path)
{
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return g_strdup("");
    return text;
}

/* ---- Running qprof ----------------------------------------------------------------------- */

struct qprof {
    pid_t pid;
    bool exited;
    int exit_code; /* -1 when killed by a signal */
    char err_path[512], out_path[512];
};

/* qprof writes its tmp file beside the output and renames it over the output. As root, that
 * would replace /dev/full itself with a regular file. In a private mount namespace where
 * /dev/full is a bind mount of itself, such a rename fails (EBUSY: a mount point) instead of
 * damaging the machine, and writes still reach the real device. */
static bool protect_dev_full(void)
{
    return unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
           mount("/dev/full", "/dev/full", NULL, MS_BIND, NULL) == 0;
}

/* In the child, before qprof runs: 0, or the exit code that says isolation was impossible. */
static int isolate_dev_full(void)
{
    return protect_dev_full() ? 0 : EXIT_NO_ISOLATION;
}

/* Starts qprof with args (NULL-terminated) in dir; stdout and stderr go to dir/TAG.out and
 * dir/TAG.err. */
static void start_qprof(struct qprof *q, const char *dir, const char *tag, const char *const *args,
                        bool private_dev_full)
{
    memset(q, 0, sizeof *q);
    snprintf(q->out_path, sizeof q->out_path, "%s/%s.out", dir, tag);
    snprintf(q->err_path, sizeof q->err_path, "%s/%s.err", dir, tag);
    /* An earlier run's files would show its progress until the child truncates them. */
    unlink(q->out_path);
    unlink(q->err_path);
    q->pid = child_start(QPROF_BIN, args, dir, q->out_path, q->err_path,
                         private_dev_full ? isolate_dev_full : NULL);
    REQUIRE(q->pid >= 0);
}

/* Reaps qprof if it has exited; true once it has. */
static bool qprof_exited(struct qprof *q)
{
    int status;
    if (!q->exited && waitpid(q->pid, &status, WNOHANG) == q->pid) {
        q->exited = true;
        q->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (WIFSIGNALED(status))
            fprintf(stderr, "qprof died of signal %d\n", WTERMSIG(status));
    }
    return q->exited;
}

/* Waits for qprof to exit; past the deadline, fails and kills it. Returns its exit code. */
static int wait_qprof(struct qprof *q, double timeout_s)
{
    double deadline = now_s() + timeout_s;
    while (!qprof_exited(q)) {
        if (now_s() > deadline) {
            HARNESS_FAIL("qprof did not finish within %.0f s: killing it", timeout_s);
            kill(q->pid, SIGKILL);
            waitpid(q->pid, NULL, 0);
            q->exited = true;
            q->exit_code = -1;
            break;
        }
        usleep(20000);
    }
    return q->exit_code;
}

static char *qprof_stderr(const struct qprof *q)
{
    return slurp(q->err_path);
}

/* Echoes qprof's stderr into the test's log without the progress lines, for whoever reads a
 * failure. */
static void show_stderr(const char *who, const char *err)
{
    fprintf(stderr, "--- %s's stderr:\n", who);
    gchar **lines = g_strsplit_set(err, "\r\n", -1);
    for (gchar **l = lines; *l; l++) {
        char word[16];
        double seconds;
        unsigned long long samples;
        bool progress = sscanf(*l, "qprof: %lf s %llu %15s", &seconds, &samples, word) == 3;
        if (**l && !progress)
            fprintf(stderr, "    %s\n", *l);
    }
    g_strfreev(lines);
}

/* Polls qprof's stderr until its progress shows at least n samples. Fails (and returns false)
 * when qprof exits first or the deadline passes. */
static bool wait_samples(struct qprof *q, uint64_t n)
{
    double deadline = now_s() + PROGRESS_DEADLINE_S;
    for (;;) {
        char *err = qprof_stderr(q);
        uint64_t got = child_progress_samples(err);
        bool exited = got < n && qprof_exited(q);
        if (got >= n || exited || now_s() > deadline) {
            if (got < n)
                HARNESS_FAIL("waiting for %lu samples: %s after %lu; stderr:\n%s", (unsigned long)n,
                             exited ? "qprof exited" : "time-out", (unsigned long)got, err);
            g_free(err);
            return got >= n;
        }
        g_free(err);
        usleep(20000);
    }
}

/* What an exited qprof said (caller g_free()s it), shown in the test's log, so that the checks
 * on it need not repeat it. An ASan or UBSan report there means qprof read or wrote what it
 * must not, whatever else it printed. */
static char *finished_stderr(const struct qprof *q, const char *who)
{
    char *err = qprof_stderr(q);
    show_stderr(who, err);
    CHECK_MSG(!strstr(err, "AddressSanitizer") && !strstr(err, "LeakSanitizer") &&
                  !strstr(err, "runtime error:"),
              "sanitizer report on %s's stderr", who);
    return err;
}

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* ---- Folded files ------------------------------------------------------------------------ */

/* A root names a process as "name (pid)", or is one of qprof's fixed roots. */
static bool root_well_formed(const char *root)
{
    if (strcmp(root, "idle") == 0 || strcmp(root, "kernel") == 0 ||
        strcmp(root, "[unknown process]") == 0 || strcmp(root, "[firmware or early boot]") == 0)
        return true;
    const char *open = strrchr(root, '(');
    if (!open || open - root < 2 || open[-1] != ' ' || root[0] == ' ')
        return false;
    const char *p = open + 1;
    if (!g_ascii_isdigit(*p))
        return false;
    while (g_ascii_isdigit(*p))
        p++;
    return strcmp(p, ")") == 0;
}

/* Every frame is non-empty and printable, the root well formed. A name with a ';' or a newline
 * that reached the file breaks exactly this: it splits a frame or a line. */
static bool stack_well_formed(const char *stack)
{
    for (const char *p = stack; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return false;
    gchar **frames = g_strsplit(stack, ";", -1);
    bool ok = frames[0] && root_well_formed(frames[0]);
    for (gchar **f = frames; ok && *f; f++)
        ok = **f != '\0';
    g_strfreev(frames);
    return ok;
}

/* Reads a folded file, checking every line's form: "root;frame;...;leaf COUNT". */
static struct folded read_folded(const char *path)
{
    struct folded f = folded_read(path);
    CHECK_MSG(!f.missing_newline, "%s does not end in a newline", path);
    CHECK_MSG(!f.malformed, "%u malformed folded lines, the first: '%s'", f.malformed,
              f.first_malformed);
    for (guint i = 0; i < f.stacks->len; i++)
        CHECK_MSG(stack_well_formed(STACK(&f, i)), "malformed stack: '%s'", STACK(&f, i));
    return f;
}

/* The samples so far were written completely: the file parses, and qprof's
 * "wrote N stacks (M samples) to PATH" agrees with it. */
static struct folded check_written(const char *err, const char *output)
{
    struct folded f = read_folded(output);
    char *needle = g_strdup_printf(" samples) to %s\n", output);
    const char *line = strstr(err, "qprof: wrote ");
    unsigned long stacks = 0, samples = 0;
    bool ok = line && strstr(line, needle) &&
              sscanf(line, "qprof: wrote %lu stacks (%lu samples)", &stacks, &samples) == 2;
    CHECK_MSG(ok, "no 'qprof: wrote N stacks (M samples) to %s' line", output);
    if (ok) {
        CHECK_MSG(samples == f.total, "qprof says %lu samples, %s holds %lu", samples, output,
                  (unsigned long)f.total);
        CHECK_MSG(stacks == f.stacks->len, "qprof says %lu stacks, %s holds %u", stacks, output,
                  f.stacks->len);
    }
    g_free(needle);
    return f;
}

/* No temporary file (*.tmp.*) is left beside output. */
static void check_no_tmp_left(const char *output)
{
    char *dir = g_path_get_dirname(output);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        CHECK_MSG(!strstr(e->d_name, ".tmp."), "temporary file left: %s/%s", dir, e->d_name);
    if (d)
        closedir(d);
    g_free(dir);
}

/* ---- The guest --------------------------------------------------------------------------- */

/* Which of QEMU's interfaces qprof samples through: a case named gdb_X runs case X over the
 * gdbstub (--gdb), with the same assertions; QMP then stays free for the test's checks. */
/* OVER_GDB_QMP: the gdbstub samples, QMP beside it finds the RAM file and tells who paused. */
/* OVER_PLUGIN: qprof-plugin.so in QEMU 10 captures, QMP beside it tells who paused. */
enum transport { OVER_QMP, OVER_GDB, OVER_GDB_QMP, OVER_PLUGIN };
static enum transport transport = OVER_QMP;
/* procmem_CASE: QEMU without the shared RAM file; qprof reads guest memory out of the QEMU
 * process, proved again after the reset */
static bool no_ram_file;

struct guest {
    test_vm *vm;
    const char *kernel, *user_dir;
    char output[512]; /* vm_dir/out.folded */
};

struct boot_opts {
    const char *cmdline; /* the guest's command line */
    int smp;
    bool second_qmp, allow_reset;
};

static void boot(struct guest *g, const struct boot_opts *b)
{
    g->kernel = QPROF_GUEST_KERNEL;
    g->user_dir = QPROF_GUEST_USER_DIR;
    struct vm_opts opts = {.kernel = g->kernel,
                           .shared_ram = !no_ram_file,
                           .cmdline = b->cmdline,
                           .smp = b->smp,
                           .second_qmp = b->second_qmp,
                           .allow_reset = b->allow_reset,
                           .gdbstub = transport == OVER_GDB || transport == OVER_GDB_QMP,
                           .plugin = transport == OVER_PLUGIN};
    int rc = vm_start(&opts, &g->vm);
    if (rc == VM_SKIP)
        exit(VM_SKIP);
    REQUIRE(rc == 0);
    REQUIRE(vm_wait_serial(g->vm, "ready", 60) == 0);
    snprintf(g->output, sizeof g->output, "%s/out.folded", vm_dir(g->vm));
}

/* qprof's arguments that point it at the guest: its QMP socket or gdbstub, kernel and user
 * programs. */
#define GUEST_ARGS(g)                                                                              \
    transport == OVER_QMP      ? "--qmp-socket"                                                    \
    : transport == OVER_PLUGIN ? "--plugin"                                                        \
                               : "--gdb",                                                          \
        transport == OVER_QMP      ? vm_qmp_path((g)->vm)                                          \
        : transport == OVER_PLUGIN ? vm_plugin_address((g)->vm)                                    \
                                   : vm_gdb_address((g)->vm),                                      \
        transport == OVER_GDB_QMP || transport == OVER_PLUGIN ? "--qmp-socket" : "--transport",    \
        transport == OVER_GDB_QMP || transport == OVER_PLUGIN ? vm_qmp_path((g)->vm)               \
        : transport == OVER_QMP                               ? "qmp"                              \
                                                              : "gdb",                                                           \
        "--kernel", (g)->kernel, "--user-dir", (g)->user_dir

/* A client on the given socket; the test fails and ends when QEMU does not answer. */
static qmp_client *qmp_connect(const char *path)
{
    qmp_client *c = NULL;
    struct qp_error err = {0};
    if (!path || qmp_open(path, NULL, &c, &err) != 0) {
        HARNESS_FAIL("connecting to QMP at %s: %s", path ? path : "(none)", err.msg);
        exit(1);
    }
    return c;
}

static bool running_on(qmp_client *c)
{
    bool running = false;
    struct qp_error err = {0};
    if (qmp_query_running(c, &running, &err) != 0)
        HARNESS_FAIL("query-status: %s", err.msg);
    return running;
}

/* query-status through socket 1 (qprof has exited) or socket 2. */
static bool guest_running(struct guest *g, bool second)
{
    qmp_client *c = qmp_connect(second ? vm_qmp2_path(g->vm) : vm_qmp_path(g->vm));
    bool running = running_on(c);
    qmp_free(c);
    return running;
}

/* Runs one command through the second socket, beside the qprof that holds the first. */
static void qmp2_command(struct guest *g, const char *command)
{
    qmp_client *c = qmp_connect(vm_qmp2_path(g->vm));
    struct qp_error err = {0};
    CHECK_MSG(qmp_execute(c, command, NULL, NULL, &err) == 0, "%s on socket 2: %s", command,
              err.msg);
    qmp_free(c);
}

/* Starts qprof on the guest, writing g->output, with extra args (NULL-terminated, at most 12). */
static void start_on_guest(struct qprof *q, struct guest *g, const char *const *extra)
{
    const char *args[32] = {GUEST_ARGS(g), "--interval", "1", "-o", g->output};
    int n = 0;
    while (args[n])
        n++;
    for (; *extra && n < 31; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    start_qprof(q, vm_dir(g->vm), "qprof", args, false);
}

/* The usual end of a case: a clean exit with code, the samples written, guest running. */
static struct folded finish_run(struct qprof *q, struct guest *g, int code, char **err_out)
{
    int rc = wait_qprof(q, RUN_DEADLINE_S);
    char *err = finished_stderr(q, "qprof");
    CHECK_MSG(rc == code, "qprof exited %d, want %d", rc, code);
    struct folded f = check_written(err, g->output);
    check_no_tmp_left(g->output);
    if (vm_alive(g->vm))
        CHECK_MSG(guest_running(g, false), "guest left paused");
    *err_out = err;
    return f;
}

/* ---- Symbols, for checking what stacks name ---------------------------------------------- */

/* A stack rooted at a process of program `own` (spin or sys) starts at _start (then main, or
 * nothing more for a sample on _start itself, as a process just started after a reset shows),
 * and every frame below the root is a function of that program or of the kernel: a stack
 * unwound with another program's tables, or with the wrong process's memory, names foreign
 * functions. */
static bool process_stack_ok(const char *stack, const sym_table *own, const struct guest_names *n)
{
    const char *after_root = strchr(stack, ';');
    if (!after_root || !g_str_has_prefix(after_root, ";_start") ||
        (after_root[7] != '\0' && after_root[7] != ';'))
        return false;
    gchar **frames = g_strsplit(after_root + 1, ";", -1);
    bool ok = true;
    for (gchar **f = frames; ok && *f; f++)
        ok = guest_is_function_of(own, *f) || guest_is_function_of(n->kernel, *f);
    g_strfreev(frames);
    return ok;
}

/* Checks every process stack against its program, and adds the samples rooted at roots[i]
 * (NULL-terminated, e.g. "sys (1)") to counts[i]. */
static void check_process_stacks(const struct folded *f, const struct guest_names *n,
                                 const char *const *roots, uint64_t *counts)
{
    for (guint i = 0; i < f->stacks->len; i++) {
        const char *s = STACK(f, i);
        const sym_table *own = g_str_has_prefix(s, "spin (")  ? n->spin
                               : g_str_has_prefix(s, "sys (") ? n->sys
                                                              : NULL;
        if (own)
            CHECK_MSG(process_stack_ok(s, own, n), "stack mixes programs or is cut: %s", s);
        for (int r = 0; roots[r]; r++) {
            size_t len = strlen(roots[r]);
            if (strncmp(s, roots[r], len) == 0 && (s[len] == ';' || !s[len]))
                counts[r] += COUNT(f, i);
        }
    }
}

/* ---- 1: QEMU killed mid-run -------------------------------------------------------------- */

static void case_sigkill_qemu(void)
{
    struct guest g;
    boot(&g, &(struct boot_opts){.cmdline = "run=spin"});
    struct qprof q;
    start_on_guest(&q, &g, (const char *[]){"--samples", "1000000", "--progress", NULL});
    if (wait_samples(&q, 100))
        kill(vm_pid(g.vm), SIGKILL);
    char *err;
    struct folded f = finish_run(&q, &g, 1, &err);
    CHECK_MSG(strstr(err, "qprof: stopping:"), "no 'qprof: stopping:' after QEMU died");
    CHECK_MSG(f.total >= 100, "only %lu samples written", (unsigned long)f.total);
    CHECK(!vm_alive(g.vm));
    folded_free(&f);
    g_free(err);
    vm_stop(g.vm);
}

/* ---- 2: SIGINT, SIGTERM, SIGHUP ---------------------------------------------------------- */

static void case_signal(int sig)
{
    struct guest g;
    boot(&g, &(struct boot_opts){.cmdline = "run=spin,spin,sys"});
    struct qprof q;
    start_on_guest(&q, &g, (const char *[]){"--samples", "1000000", "--progress", NULL});
    if (wait_samples(&q, 100))
        kill(q.pid, sig);
    char *err;
    struct folded f = finish_run(&q, &g, 0, &err);
    char *said = g_strdup_printf("interrupted by %s", strsignal(sig));
    CHECK_MSG(strstr(err, said), "no '%s' on stderr", said);
    CHECK_MSG(f.total >= 100, "only %lu samples written", (unsigned long)f.total);
    g_free(said);
    folded_free(&f);
    g_free(err);
    vm_stop(g.vm);
}

/* ---- 3 and 4: system_reset from another client mid-run ---------------------------------- */

/* Samples 3000 times at ~1 kHz with a system_reset through socket 2 after the first 100; the
 * guest boots again under qprof's feet. */
static struct folded profile_across_reset(struct guest *g, const char *cmdline, char **err)
{
    boot(g, &(struct boot_opts){.cmdline = cmdline, .second_qmp = true, .allow_reset = true});
    struct qprof q;
    start_on_guest(&q, g, (const char *[]){"--samples", "3000", "--progress", NULL});
    if (wait_samples(&q, 100))
        qmp2_command(g, "system_reset");
    struct folded f = finish_run(&q, g, 0, err);
    CHECK_MSG(vm_count_serial(g->vm, "qprof-guest: boot") == 2,
              "the guest did not boot again during the run");
    CHECK_MSG(strstr(*err, "guest reset"), "no 'guest reset' in the summary");
    if (no_ram_file)
        CHECK_MSG(strstr(*err, "memory: process memory)") && !strstr(*err, "process memory, after"),
                  "not process memory all through the reset: %s", *err);
    return f;
}

/* One vCPU running spin alone: 3000 samples are 3000 vCPU stacks, and every spin stack is
 * spin's, before and after the reset. */
static void case_reset(void)
{
    struct guest g;
    char *err;
    struct folded f = profile_across_reset(&g, "run=spin", &err);
    CHECK_MSG(f.total == 3000, "%lu vCPU stacks written for 3000 samples of 1 vCPU",
              (unsigned long)f.total);
    struct guest_names n;
    REQUIRE(guest_names_load(g.kernel, g.user_dir, &n) == 0);
    uint64_t spin1 = 0;
    check_process_stacks(&f, &n, (const char *[]){"spin (1)", NULL}, &spin1);
    CHECK_MSG(spin1 >= 1000, "only %lu samples of spin (1)", (unsigned long)spin1);
    if (harness_failures)
        folded_dump(&f);
    guest_names_free(&n);
    folded_free(&f);
    g_free(err);
    vm_stop(g.vm);
}

/* After the reset pid 1 is sys and spin is pid 2 (reset_run=, a boot count in CMOS), so a
 * qprof that kept pid 1's binary across the reboot (instead of noticing the new boot_id)
 * unwinds sys with spin's tables. */
static void case_reboot(void)
{
    struct guest g;
    char *err;
    struct folded f = profile_across_reset(&g, "run=spin reset_run=sys,spin", &err);
    CHECK_MSG(vm_count_serial(g.vm, "start pid=1 name=sys") == 1, "sys is not pid 1 after reset");
    struct guest_names n;
    REQUIRE(guest_names_load(g.kernel, g.user_dir, &n) == 0);
    uint64_t counts[3] = {0};
    check_process_stacks(&f, &n, (const char *[]){"spin (1)", "sys (1)", "spin (2)", NULL}, counts);
    fprintf(stderr, "spin (1): %lu, sys (1): %lu, spin (2): %lu samples\n",
            (unsigned long)counts[0], (unsigned long)counts[1], (unsigned long)counts[2]);
    CHECK_MSG(counts[0] > 0, "no samples of spin (1) before the reset");
    CHECK_MSG(counts[1] >= 100 && counts[2] >= 100, "too few samples of the processes after it");
    uint64_t sys_work = 0, spin_work = 0;
    for (guint i = 0; i < f.stacks->len; i++) {
        const char *s = STACK(&f, i);
        if (g_str_has_prefix(s, "sys (1);") &&
            (folded_has_frame(s, "user_mix") || folded_has_frame(s, "kwork_mix")))
            sys_work += COUNT(&f, i);
        if (g_str_has_prefix(s, "spin (2);") &&
            (folded_has_frame(s, "hot_a") || folded_has_frame(s, "hot_b")))
            spin_work += COUNT(&f, i);
    }
    CHECK_MSG(sys_work > 0 && spin_work > 0,
              "after the reset, sys (1) reached its work %lu times, spin (2) %lu times",
              (unsigned long)sys_work, (unsigned long)spin_work);
    if (harness_failures)
        folded_dump(&f);
    guest_names_free(&n);
    folded_free(&f);
    g_free(err);
    vm_stop(g.vm);
}

/* ---- 5 and 6: a guest paused by another client ------------------------------------------- */

static void case_paused_before(void)
{
    struct guest g;
    boot(&g, &(struct boot_opts){.cmdline = "run=spin", .second_qmp = true});
    qmp2_command(&g, "stop");
    struct qprof q;
    start_on_guest(&q, &g, (const char *[]){"--samples", "50", "--duration", "3", NULL});
    int rc = wait_qprof(&q, RUN_DEADLINE_S);
    char *err = finished_stderr(&q, "qprof");
    CHECK_MSG(rc == 0, "qprof exited %d", rc);
    CHECK_MSG(strstr(err, "paused by another client"), "no 'paused by another client'");
    struct folded f = check_written(err, g.output);
    CHECK_MSG(f.total == 0, "%lu samples counted from a guest paused all along",
              (unsigned long)f.total);
    CHECK_MSG(!guest_running(&g, true), "qprof resumed a guest that another client paused");
    qmp2_command(&g, "cont");
    CHECK(guest_running(&g, true));
    folded_free(&f);
    g_free(err);
    vm_stop(g.vm);
}

/* Pauses the guest through socket 2 until qprof says it noticed. The stop is repeated while the
 * guest runs: one that reaches QEMU while qprof holds the guest stopped for a sample is undone
 * by qprof's cont, which cannot know that someone else wanted the guest paused meanwhile. */
static void pause_until_noticed(struct guest *g, struct qprof *q)
{
    qmp_client *c = qmp_connect(vm_qmp2_path(g->vm));
    double deadline = now_s() + PROGRESS_DEADLINE_S;
    for (;;) {
        char *err = qprof_stderr(q);
        bool noticed = strstr(err, "paused by another client") != NULL;
        bool gone = !noticed && qprof_exited(q);
        if (noticed || gone || now_s() > deadline) {
            if (!noticed)
                HARNESS_FAIL("qprof never said 'paused by another client' (%s):\n%s",
                             gone ? "it exited" : "time-out", err);
            g_free(err);
            break;
        }
        g_free(err);
        if (running_on(c))
            CHECK_MSG(qmp_execute(c, "stop", NULL, NULL, NULL) == 0, "stop on socket 2");
        struct qmp_event ev;
        while (qmp_pop_event(c, &ev) == 1) /* qprof's STOP/RESUME reach every monitor */
            json_object_put(ev.data);
        usleep(20000);
    }
    qmp_free(c);
}

/* The sample count of the first progress line qprof printed after `notice` (progress lines
 * come at most 4 times a second, so one printed before it may lag the samples taken by then). */
static uint64_t samples_after(struct qprof *q, const char *notice)
{
    double deadline = now_s() + PROGRESS_DEADLINE_S;
    for (;;) {
        char *err = qprof_stderr(q);
        const char *at = strstr(err, notice);
        uint64_t n = at ? child_progress_samples(at) : 0;
        g_free(err);
        if (n || now_s() > deadline || qprof_exited(q)) {
            CHECK_MSG(n, "no progress line after '%s'", notice);
            return n;
        }
        usleep(20000);
    }
}

/* QEMU started with -S: the guest has not run yet. qprof waits for it, says why, takes nothing
 * and never starts it (attaching a debugger would, were it let); the guest boots only on the
 * user's cont. */
static void case_prelaunch(void)
{
    struct guest g = {.kernel = QPROF_GUEST_KERNEL, .user_dir = QPROF_GUEST_USER_DIR};
    struct vm_opts opts = {.kernel = g.kernel,
                           .shared_ram = true,
                           .cmdline = "run=spin",
                           .second_qmp = true,
                           .extra_args = (const char *[]){"-S", NULL},
                           .gdbstub = transport != OVER_QMP};
    int rc = vm_start(&opts, &g.vm);
    if (rc == VM_SKIP)
        exit(VM_SKIP);
    REQUIRE(rc == 0);
    snprintf(g.output, sizeof g.output, "%s/out.folded", vm_dir(g.vm));
    struct qprof q;
    start_on_guest(&q, &g, (const char *[]){"--duration", "3", NULL});
    qmp_client *c = qmp_connect(vm_qmp2_path(g.vm));
    while (!qprof_exited(&q)) {
        CHECK_MSG(!running_on(c), "qprof started a guest QEMU holds with -S");
        usleep(100 * 1000); /* a look now and then while qprof runs its 3 s */
    }
    rc = wait_qprof(&q, RUN_DEADLINE_S);
    char *err = finished_stderr(&q, "qprof");
    CHECK_MSG(rc == 0, "qprof exited %d", rc);
    CHECK_MSG(strstr(err, "paused by another client"), "no word on why nothing is sampled");
    struct folded f = check_written(err, g.output);
    CHECK_MSG(f.total == 0, "%lu samples of a guest that never ran", (unsigned long)f.total);
    CHECK_MSG(!running_on(c), "the guest runs after qprof left");
    CHECK_MSG(vm_count_serial(g.vm, "ready") == 0, "the guest booted before anyone let it");
    CHECK(qmp_execute(c, "cont", NULL, NULL, NULL) == 0);
    CHECK_MSG(vm_wait_serial(g.vm, "ready", 60) == 0, "the guest did not boot after cont");
    qmp_free(c);
    folded_free(&f);
    g_free(err);
    vm_stop(g.vm);
}

/* Someone else pauses the guest mid-run: qprof says so, takes no sample and never resumes it
 * (query-status through the other socket says paused, again and again, for as long as that
 * client wants), and samples again once that client resumes it. */
/* Through the plugin a pause looks like vCPUs waiting in hlt (or, caught between checks, like
 * a thread the host did not run); the pause above held the guest for at least 1.5 s, 1,500
 * intervals of 1 ms: as idle samples they would be 1,500 or more. */
static void check_pause_not_idle(const struct folded *f, const char *err)
{
    uint64_t idle = 0;
    for (guint i = 0; i < f->stacks->len; i++)
        if (g_str_has_prefix(g_ptr_array_index(f->stacks, i), "idle"))
            idle += g_array_index(f->counts, uint64_t, i);
    CHECK_MSG(idle < 750, "%lu of %lu samples idle: the pause became idle time",
              (unsigned long)idle, (unsigned long)f->total);
    const char *skipped = strstr(err, "guest paused by another client: ");
    unsigned long n =
        skipped ? strtoul(skipped + strlen("guest paused by another client: "), NULL, 10) : 0;
    CHECK_MSG(n >= 1000, "%lu intervals counted as skipped for a pause of 1.5 s or more", n);
}

static void case_paused_during(void)
{
    struct guest g;
    boot(&g, &(struct boot_opts){.cmdline = "run=spin", .second_qmp = true});
    struct qprof q;
    start_on_guest(&q, &g, (const char *[]){"--duration", "0", "--progress", NULL});
    if (wait_samples(&q, 100)) {
        pause_until_noticed(&g, &q);
        uint64_t at_pause = samples_after(&q, "paused by another client");
        qmp_client *c = qmp_connect(vm_qmp2_path(g.vm));
        for (int i = 0; i < 15; i++) {
            CHECK_MSG(!running_on(c), "qprof resumed a guest that another client paused (%d)", i);
            usleep(100 * 1000); /* how long the other client keeps it paused, not a wait */
        }
        char *during = qprof_stderr(&q);
        uint64_t in_pause = child_progress_samples(during);
        g_free(during);
        CHECK_MSG(in_pause == at_pause, "%lu samples taken while paused",
                  (unsigned long)(in_pause - at_pause));
        CHECK_MSG(qmp_execute(c, "cont", NULL, NULL, NULL) == 0, "cont on socket 2");
        qmp_free(c);
        wait_samples(&q, in_pause + 100);
        kill(q.pid, SIGINT);
    }
    int rc = wait_qprof(&q, RUN_DEADLINE_S);
    char *err = finished_stderr(&q, "qprof");
    CHECK_MSG(rc == 0, "qprof exited %d", rc);
    CHECK_MSG(strstr(err, "interrupted by Interrupt"), "no 'interrupted by Interrupt'");
    CHECK_MSG(strstr(err, "the guest runs again: sampling"), "no word on sampling again");
    CHECK_MSG(strstr(err, "sampling intervals skipped"), "the summary counts no skipped interval");
    struct folded f = check_written(err, g.output);
    CHECK_MSG(f.total >= 200, "only %lu samples written", (unsigned long)f.total);
    if (transport == OVER_PLUGIN)
        check_pause_not_idle(&f, err);
    check_no_tmp_left(g.output);
    CHECK_MSG(guest_running(&g, true), "the guest does not run after the other client's cont");
    folded_free(&f);
    g_free(err);
    vm_stop(g.vm);
}

/* ---- qprof killed while it holds the guest stopped ---------------------------------------- */

/* Drops the STOP/RESUME events that qprof's samples send to every monitor. */
static void drain_events(qmp_client *c)
{
    struct qmp_event ev;
    while (qmp_pop_event(c, &ev) == 1)
        json_object_put(ev.data);
}

/* Freezes qprof (SIGSTOP) while the guest is stopped for one of its samples: polls the status on
 * socket 2 until it says paused, freezes qprof, and keeps it frozen only when the guest is still
 * paused once qprof has stopped (else lets it go on and tries again). Nobody else pauses this
 * guest, so a pause that lasts while qprof is frozen is its own. Which sample is caught depends
 * on timing; that one is caught does not. */
static bool freeze_while_stopped(struct qprof *q, qmp_client *c2)
{
    double deadline = now_s() + PROGRESS_DEADLINE_S;
    while (now_s() < deadline) {
        drain_events(c2);
        if (running_on(c2))
            continue;
        kill(q->pid, SIGSTOP);
        int status;
        if (waitpid(q->pid, &status, WUNTRACED) != q->pid || !WIFSTOPPED(status)) {
            HARNESS_FAIL("qprof ended before it could be frozen (status 0x%x)", status);
            q->exited = true;
            return false;
        }
        if (!running_on(c2))
            return true;
        kill(q->pid, SIGCONT);
    }
    HARNESS_FAIL("qprof was never caught with the guest stopped in %.0f s", PROGRESS_DEADLINE_S);
    return false;
}

/* Kills a frozen qprof with sig (SIGCONT after it: a signal but SIGKILL waits for the process
 * to run) and reaps it; true when sig is what ended it. */
static bool kill_frozen(struct qprof *q, int sig)
{
    kill(q->pid, sig);
    kill(q->pid, SIGCONT);
    int status = 0;
    waitpid(q->pid, &status, 0);
    q->exited = true;
    q->exit_code = -1;
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == sig,
              "qprof ended with status 0x%x, not by signal %d", status, sig);
    return WIFSIGNALED(status);
}

/* Seconds until socket 2 says the guest runs (a generous deadline: a loaded machine only makes
 * it slower); -1 when it never does. */
static double seconds_until_running(qmp_client *c2)
{
    double t0 = now_s(), deadline = t0 + 30;
    while (now_s() < deadline) {
        drain_events(c2);
        if (running_on(c2))
            return now_s() - t0;
        usleep(10 * 1000);
    }
    return -1;
}

/* A client that dies while the guest is stopped for its sample, in the middle of writing a
 * command (inside a JSON string): its guardian must get QEMU's parser past the half command. */
static int die_mid_command(qmp_client *c, const char *regs_text, void *ctx, struct qp_error *err)
{
    (void)regs_text, (void)ctx, (void)err;
    static const char half[] = "{\"execute\": \"query-sta";
    qmp__send(c, half, sizeof half - 1, NULL);
    raise(SIGKILL);
    return 0;
}

static void check_half_written_command(struct guest *g, qmp_client *c2)
{
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        qmp_client *c = NULL;
        struct qmp_open_opts o = {.guard = true};
        if (qmp_open(vm_qmp_path(g->vm), &o, &c, NULL) == 0)
            qmp_sample_text(c, die_mid_command, NULL, NULL, NULL);
        _exit(1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
              "the client did not die in its sample (status 0x%x)", status);
    double took = seconds_until_running(c2);
    fprintf(stderr, "a client killed half-way through a command: the guest ran after %.3f s\n",
            took);
    CHECK_MSG(took >= 0, "guest left paused by a client killed half-way through a command");
}

/* QEMU killed while another client has the guest paused: qprof stops with its samples written
 * (it once waited for ever for a guest that would never run again). The guest's last use. */
static void check_qemu_dies_while_paused(struct guest *g)
{
    qmp2_command(g, "stop");
    struct qprof q;
    start_on_guest(&q, g, (const char *[]){"--duration", "0", NULL});
    pause_until_noticed(g, &q);
    kill(vm_pid(g->vm), SIGKILL);
    int rc = wait_qprof(&q, RUN_DEADLINE_S);
    char *err = finished_stderr(&q, "qprof");
    CHECK_MSG(rc == 1, "qprof exited %d after QEMU died under a pause, want 1", rc);
    CHECK_MSG(strstr(err, "qprof: stopping:"), "no 'qprof: stopping:' after QEMU died");
    g_free(err);
}

/* Whatever kills qprof (SIGKILL, abort) while a sample holds the guest stopped, the guest runs
 * again: QEMU keeps it paused when qprof's QMP connection (or, on 7.2, its gdbstub connection)
 * just closes, so qprof's guardian process resumes it. Then, over QMP, a guest another client
 * paused is left paused by the guardian of a qprof killed meanwhile. One guest for all rounds. */
static void case_killed_while_stopped(void)
{
    struct guest g;
    boot(&g, &(struct boot_opts){.cmdline = "run=spin", .second_qmp = true});
    qmp_client *c2 = qmp_connect(vm_qmp2_path(g.vm));
    const int sigs[] = {SIGKILL, SIGABRT};
    for (int i = 0; i < 2; i++) {
        struct qprof q;
        start_on_guest(&q, &g, (const char *[]){"--duration", "0", "--progress", NULL});
        if (!wait_samples(&q, 20) || !freeze_while_stopped(&q, c2)) {
            kill(q.pid, SIGKILL); /* not caught: no later round with it holding socket 1 */
            waitpid(q.pid, NULL, 0);
            break;
        }
        kill_frozen(&q, sigs[i]);
        double took = seconds_until_running(c2);
        fprintf(stderr, "%s while the guest was stopped: it ran again after %.3f s\n",
                strsignal(sigs[i]), took);
        CHECK_MSG(took >= 0, "guest left paused after qprof died of %s", strsignal(sigs[i]));
        char *err = qprof_stderr(&q);
        show_stderr("qprof", err);
        g_free(err);
    }
    if (transport == OVER_QMP)
        check_half_written_command(&g, c2);
    qmp_free(c2);
    if (transport == OVER_QMP) {
        qmp2_command(&g, "stop");
        struct qprof q;
        start_on_guest(&q, &g, (const char *[]){"--duration", "0", NULL});
        pause_until_noticed(&g, &q);
        kill(q.pid, SIGKILL);
        waitpid(q.pid, NULL, 0);
        /* Socket 1 serves a new client once qprof's guardian has let go of it. */
        CHECK_MSG(!guest_running(&g, false),
                  "a dead qprof's guardian resumed a guest another client paused");
        qmp2_command(&g, "cont");
        CHECK(guest_running(&g, true));
        check_qemu_dies_while_paused(&g);
    }
    vm_stop(g.vm);
}

/* ---- qprof killed in the middle of the gdbstub handshake ---------------------------------- */

/* Between qprof and QEMU's gdbstub: passes everything qprof sends, and QEMU's first reply (to
 * qSupported), then holds QEMU's replies until released, so qprof waits mid-handshake for as
 * long as the test likes while QEMU holds the guest stopped for the new debugger. */
struct hold_proxy {
    char path[300];
    const char *upstream; /* QEMU's gdbstub socket */
    int listen_fd;
    atomic_size_t held; /* bytes of QEMU's replies held back so far */
    atomic_bool release;
    pthread_t thread;
};

/* True once buf[0..len) holds one whole packet ($...#xx). */
static bool has_whole_packet(const char *buf, size_t len)
{
    const char *dollar = memchr(buf, '$', len);
    const char *hash = dollar ? memchr(dollar, '#', len - (size_t)(dollar - buf)) : NULL;
    return hash && (size_t)(hash - buf) + 3 <= len;
}

static void *hold_proxy_main(void *arg)
{
    struct hold_proxy *p = arg;
    int client = accept(p->listen_fd, NULL, NULL);
    int up = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    g_strlcpy(sa.sun_path, p->upstream, sizeof sa.sun_path);
    if (client < 0 || up < 0 || connect(up, (struct sockaddr *)&sa, sizeof sa) != 0) {
        HARNESS_FAIL("proxy: cannot join qprof to the gdbstub: %s", strerror(errno));
        return NULL;
    }
    GString *first = g_string_new(NULL), *held = g_string_new(NULL);
    bool passed_first = false;
    for (;;) {
        if (atomic_load(&p->release) && held->len) {
            if (write(client, held->str, held->len) < 0)
                break;
            g_string_truncate(held, 0);
        }
        struct pollfd fds[2] = {{.fd = client, .events = POLLIN}, {.fd = up, .events = POLLIN}};
        if (poll(fds, 2, 50) < 0)
            break;
        char buf[4096];
        if (fds[0].revents) {
            ssize_t n = read(client, buf, sizeof buf);
            if (n <= 0 || write(up, buf, (size_t)n) != n)
                break;
        }
        if (fds[1].revents) {
            ssize_t n = read(up, buf, sizeof buf);
            if (n <= 0)
                break;
            if (passed_first || atomic_load(&p->release)) {
                g_string_append_len(held, buf, n);
                atomic_store(&p->held, held->len);
                continue;
            }
            g_string_append_len(first, buf, n);
            passed_first = has_whole_packet(first->str, first->len);
            if (write(client, buf, (size_t)n) != n)
                break;
        }
    }
    g_string_free(first, TRUE);
    g_string_free(held, TRUE);
    close(client);
    close(up);
    return NULL;
}

static void hold_proxy_start(struct hold_proxy *p, const char *dir, const char *upstream)
{
    memset(p, 0, sizeof *p);
    snprintf(p->path, sizeof p->path, "%s/gdb-proxy.sock", dir);
    p->upstream = upstream;
    p->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    g_strlcpy(sa.sun_path, p->path, sizeof sa.sun_path);
    REQUIRE(p->listen_fd >= 0 && bind(p->listen_fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
            listen(p->listen_fd, 1) == 0);
    REQUIRE(pthread_create(&p->thread, NULL, hold_proxy_main, p) == 0);
}

/* QEMU stops the guest when a debugger connects, before a word of the handshake: a qprof killed
 * there must leave the guest running too. Over the proxy, qprof waits for its second reply of
 * the handshake while the guest stands stopped; then SIGKILL, and the replies flow again (to
 * whatever still holds qprof's end of the connection). */
static void case_killed_in_handshake(void)
{
    struct guest g;
    boot(&g, &(struct boot_opts){.cmdline = "run=spin", .second_qmp = true});
    qmp_client *c2 = qmp_connect(vm_qmp2_path(g.vm));
    struct hold_proxy p;
    const char *upstream = vm_gdb_address(g.vm);
    REQUIRE(g_str_has_prefix(upstream, "unix:"));
    hold_proxy_start(&p, vm_dir(g.vm), upstream + strlen("unix:"));
    char address[320];
    snprintf(address, sizeof address, "unix:%s", p.path);
    const char *args[] = {"--gdb",  address,      "--transport", "gdb",       "--kernel",
                          g.kernel, "--user-dir", g.user_dir,    "--samples", "50",
                          "-o",     g.output,     NULL};
    struct qprof q;
    start_qprof(&q, vm_dir(g.vm), "qprof", args, false);
    double deadline = now_s() + PROGRESS_DEADLINE_S;
    while (atomic_load(&p.held) == 0 && !qprof_exited(&q) && now_s() < deadline)
        usleep(10 * 1000);
    CHECK_MSG(atomic_load(&p.held) > 0, "qprof never got to its second handshake reply");
    drain_events(c2);
    CHECK_MSG(!running_on(c2), "the guest runs while a debugger is mid-handshake");
    if (!qprof_exited(&q)) {
        kill(q.pid, SIGKILL);
        waitpid(q.pid, NULL, 0);
        q.exited = true;
    }
    atomic_store(&p.release, true);
    double took = seconds_until_running(c2);
    fprintf(stderr, "qprof killed mid-handshake: the guest ran again after %.3f s\n", took);
    CHECK_MSG(took >= 0, "guest left stopped by a qprof killed in the gdbstub handshake");
    pthread_join(p.thread, NULL);
    close(p.listen_fd);
    unlink(p.path);
    qmp_free(c2);
    vm_stop(g.vm);
}

/* ---- 7 and 8: output that cannot be written ---------------------------------------------- */

/* The leftovers a temp-file-and-rename writer would put in /dev, removed so that a failing run
 * does not leave litter on the machine. */
static void check_no_dev_full_litter(void)
{
    DIR *d = opendir("/dev");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!g_str_has_prefix(e->d_name, "full.tmp."))
            continue;
        HARNESS_FAIL("temporary file left: /dev/%s", e->d_name);
        char *path = g_strdup_printf("/dev/%s", e->d_name);
        unlink(path);
        g_free(path);
    }
    if (d)
        closedir(d);
}

static void case_dev_full(void)
{
    struct stat st;
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) {
        fprintf(stderr, "/dev/full is not a character device here: skipping\n");
        exit(VM_SKIP);
    }
    struct guest g;
    boot(&g, &(struct boot_opts){.cmdline = "run=spin"});
    const char *args[] = {GUEST_ARGS(&g), "--interval", "1",         "--samples",
                          "50",           "-o",         "/dev/full", NULL};
    struct qprof q;
    start_qprof(&q, vm_dir(g.vm), "qprof", args, geteuid() == 0);
    int rc = wait_qprof(&q, RUN_DEADLINE_S);
    if (rc == EXIT_NO_ISOLATION) {
        /* As root, an unprotected run of a temp-file-and-rename writer replaces /dev/full. */
        fprintf(stderr, "cannot bind-mount /dev/full in a private mount namespace: skipping\n");
        vm_stop(g.vm);
        exit(VM_SKIP);
    }
    char *err = finished_stderr(&q, "qprof");
    CHECK_MSG(rc == 1, "qprof exited %d, want 1", rc);
    CHECK_MSG(strstr(err, "/dev/full") && strstr(err, "No space left on device"),
              "no '/dev/full' and 'No space left on device' on stderr");
    CHECK_MSG(stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode),
              "/dev/full is no longer a character device");
    check_no_dev_full_litter();
    CHECK_MSG(guest_running(&g, false), "guest left paused");
    g_free(err);
    vm_stop(g.vm);
}

/* qprof cannot create output (its parent directory cannot exist): exit 1, a message that
 * names it, nothing left behind. Root ignores permission bits, so "unwritable" here means
 * a directory inside /proc, or a parent that is a regular file. */
static void expect_unwritable(struct guest *g, const char *output)
{
    const char *args[] = {GUEST_ARGS(g), "--interval", "1", "--samples", "50", "-o", output, NULL};
    struct qprof q;
    start_qprof(&q, vm_dir(g->vm), "qprof", args, false);
    int rc = wait_qprof(&q, RUN_DEADLINE_S);
    char *err = finished_stderr(&q, "qprof");
    CHECK_MSG(rc == 1, "-o %s: qprof exited %d, want 1", output, rc);
    CHECK_MSG(strstr(err, output), "the message does not name %s", output);
    CHECK_MSG(access(output, F_OK) != 0, "%s exists", output);
    check_no_tmp_left(output);
    CHECK_MSG(guest_running(g, false), "guest left paused");
    g_free(err);
}

static void case_unwritable_dir(void)
{
    struct guest g;
    boot(&g, &(struct boot_opts){.cmdline = "run=spin"});
    expect_unwritable(&g, "/proc/qprof-nope/out.folded");
    char *file = g_strdup_printf("%s/plain", vm_dir(g.vm));
    char *output = g_strdup_printf("%s/out.folded", file);
    REQUIRE(g_file_set_contents(file, "not a directory\n", -1, NULL));
    expect_unwritable(&g, output);
    char *text = slurp(file);
    CHECK_STR(text, "not a directory\n");
    /* the directory holding the file got nothing new either */
    DIR *d = opendir(vm_dir(g.vm));
    struct dirent *e;
    while (d && (e = readdir(d)))
        CHECK_MSG(!g_str_has_prefix(e->d_name, "out.folded") && !strstr(e->d_name, ".tmp."),
                  "left behind: %s", e->d_name);
    if (d)
        closedir(d);
    g_free(text);
    g_free(output);
    g_free(file);
    vm_stop(g.vm);
}

/* ---- 9: a second qprof on a socket in use ------------------------------------------------ */

static void case_second_qprof(void)
{
    struct guest g;
    boot(&g, &(struct boot_opts){.cmdline = "run=spin,sys"});
    struct qprof first, second;
    start_on_guest(&first, &g, (const char *[]){"--samples", "100000", "--progress", NULL});
    if (wait_samples(&first, 50)) {
        char *output2 = g_strdup_printf("%s/second.folded", vm_dir(g.vm));
        const char *args[] = {GUEST_ARGS(&g), "--samples", "10", "-o", output2, NULL};
        start_qprof(&second, vm_dir(g.vm), "second", args, false);
        /* qprof waits 5 s for a greeting QEMU sends only when the first client leaves */
        int rc = wait_qprof(&second, SHORT_RUN_S);
        char *err = finished_stderr(&second, "the second qprof");
        CHECK_MSG(rc == 1, "the second qprof exited %d, want 1", rc);
        CHECK_MSG(strstr(err, "another client"), "no 'another client' on stderr");
        CHECK_MSG(count_lines(err) <= 2, "more than a clear line");
        CHECK_MSG(access(output2, F_OK) != 0, "the second qprof wrote %s", output2);
        g_free(err);
        g_free(output2);
        CHECK_MSG(!qprof_exited(&first), "the first qprof ended beside the second");
        kill(first.pid, SIGINT);
    }
    char *err;
    struct folded f = finish_run(&first, &g, 0, &err);
    CHECK_MSG(f.total >= 50, "only %lu samples written", (unsigned long)f.total);
    CHECK_MSG(strstr(err, "interrupted by Interrupt"), "no 'interrupted by Interrupt'");
    folded_free(&f);
    g_free(err);
    vm_stop(g.vm);
}

/* ---- 10: a guest publishing a hostile qprof_abi ------------------------------------------ */

static void case_hostile_abi(const char *variant)
{
    struct guest g;
    char *cmdline = g_strdup_printf("run=spin@0,sys@1 abi_fault=%s", variant);
    /* Two vCPUs, both running (SMP guest): a stride fault also misplaces the live second slot,
     * which a reader that trusts the declared stride reads from the wrong bytes. spin is pinned
     * to vCPU 0, whose slot sits at the same offset at either stride, so its samples must keep
     * their process; sys on vCPU 1 must never show a wrong one. */
    boot(&g, &(struct boot_opts){.cmdline = cmdline, .smp = 2});
    char *fault = g_strdup_printf("qprof_abi fault: %s", variant);
    REQUIRE(vm_count_serial(g.vm, fault) == 1);
    struct qprof q;
    start_on_guest(&q, &g, (const char *[]){"--samples", "300", NULL});
    char *err;
    struct folded f = finish_run(&q, &g, 0, &err);
    /* text: a per-sample read budget may cut such samples short; only their form counts */
    if (strcmp(variant, "text") != 0)
        CHECK_MSG(f.total >= 300, "only %lu vCPU stacks for 300 samples", (unsigned long)f.total);
    bool rejected = strcmp(variant, "size") == 0 || strcmp(variant, "count") == 0;
    if (rejected) {
        CHECK_MSG(g_str_has_prefix(err, "qprof_abi rejected:") ||
                      strstr(err, "\nqprof_abi rejected:"),
                  "no line starting 'qprof_abi rejected:'");
    }
    uint64_t spin1 = 0;
    for (guint i = 0; i < f.stacks->len; i++) {
        const char *s = STACK(&f, i);
        if (g_str_has_prefix(s, "spin (1);"))
            spin1 += COUNT(&f, i);
        if (strcmp(variant, "name") == 0)
            CHECK_MSG(!strstr(s, "evil;") && !strstr(s, "qprof!;"),
                      "the guest's name split a frame: %s", s);
        if (strcmp(variant, "stride") == 0 && g_str_has_prefix(s, "spin ("))
            CHECK_MSG(g_str_has_prefix(s, "spin (1);_start;main"), "spin stack wrong: %s", s);
    }
    /* A larger cpu_slot_size is what a newer minor version of the ABI declares (guest_abi.h):
     * a reader accepts it, and slot 0 sits at the same offset at either stride. */
    if (strcmp(variant, "stride") == 0)
        CHECK_MSG(spin1 > 0, "no samples of spin (1): the larger stride was not accepted");
    if (harness_failures)
        folded_dump(&f);
    folded_free(&f);
    g_free(err);
    g_free(fault);
    g_free(cmdline);
    vm_stop(g.vm);
}

/* ---- 11: the QMP peer closes in the middle of a reply ------------------------------------ */

static void case_socket_closed_mid_reply(void)
{
    fake_qmp *fake = fake_qmp_start(FAKE_QMP_CLOSE_MID_HMP);
    REQUIRE(fake);
    char dir[] = "/tmp/qprof-faults-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const char *args[] = {
        "--qmp-socket", fake_qmp_path(fake), "--memory", "memsave", "--samples", "10", NULL};
    struct qprof q;
    start_qprof(&q, dir, "qprof", args, false);
    int rc = wait_qprof(&q, 30);
    char *err = finished_stderr(&q, "qprof");
    char *log = fake_qmp_stop(fake, 5);
    CHECK_MSG(rc == 1, "qprof exited %d, want 1", rc);
    CHECK_MSG(strstr(err, "QEMU closed the QMP connection"),
              "no 'QEMU closed the QMP connection' on stderr");
    CHECK_MSG(count_lines(err) == 1, "not a one-line message");
    CHECK_MSG(strstr(log, "human-monitor-command,"), "qprof never asked for registers: %s", log);
    g_free(log);
    g_free(err);
    unlink(q.err_path);
    unlink(q.out_path);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    if (g_str_has_prefix(which, "gdb_")) {
        transport = OVER_GDB;
        which += 4;
    } else if (g_str_has_prefix(which, "gdbqmp_")) {
        transport = OVER_GDB_QMP;
        which += 7;
    } else if (g_str_has_prefix(which, "plugin_")) {
        transport = OVER_PLUGIN;
        which += 7;
    }
    if (g_str_has_prefix(which, "procmem_")) {
        no_ram_file = true;
        which += 8;
    }
    if (strcmp(which, "sigkill_qemu") == 0)
        case_sigkill_qemu();
    else if (strcmp(which, "sigint") == 0)
        case_signal(SIGINT);
    else if (strcmp(which, "sigterm") == 0)
        case_signal(SIGTERM);
    else if (strcmp(which, "sighup") == 0)
        case_signal(SIGHUP);
    else if (strcmp(which, "reset") == 0)
        case_reset();
    else if (strcmp(which, "reboot") == 0)
        case_reboot();
    else if (strcmp(which, "paused_before") == 0)
        case_paused_before();
    else if (strcmp(which, "paused_during") == 0)
        case_paused_during();
    else if (strcmp(which, "killed_while_stopped") == 0)
        case_killed_while_stopped();
    else if (strcmp(which, "killed_in_handshake") == 0 && transport == OVER_GDB)
        case_killed_in_handshake();
    else if (strcmp(which, "prelaunch") == 0)
        case_prelaunch();
    else if (strcmp(which, "dev_full") == 0)
        case_dev_full();
    else if (strcmp(which, "unwritable_dir") == 0)
        case_unwritable_dir();
    else if (strcmp(which, "second_qprof") == 0)
        case_second_qprof();
    else if (g_str_has_prefix(which, "hostile_abi_"))
        case_hostile_abi(which + strlen("hostile_abi_"));
    else if (strcmp(which, "socket_closed_mid_reply") == 0)
        case_socket_closed_mid_reply();
    else {
        fprintf(stderr, "unknown case '%s'\n", which);
        return 2;
    }
    return harness_result();
}
