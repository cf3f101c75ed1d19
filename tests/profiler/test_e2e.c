/* End-to-end tests: boot the demo guest in real QEMU, run the real qprof binary against it, and
 * check what a user would check by eye in the folded file and the console output.
 *
 * Usage: test_e2e CASE   (one ctest entry per case, see CMakeLists.txt) */
#define _GNU_SOURCE
#include "child.h"
#include "folded.h"
#include "harness.h"
#include "qmp.h"
#include "symbols.h"
#include "guest_names.h"
#include "vm.h"
#include "qprof_ring.h"

#include <fcntl.h>
#include <grp.h>
#include <glib.h>
#include <json-c/json.h>
#include <math.h>
#include <sched.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define QPROF_BIN QPROF_BUILD_DIR "/qprof"

/* ---- Running qprof ----------------------------------------------------------------------- */

struct qprof_run {
    int exit_code; /* -1 when killed by a signal */
    char *out, *err;
};

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

/* Starts qprof with args (NULL-terminated) in dir; output to dir/qprof.{out,err}. */
static pid_t start_qprof(const char *dir, const char *const *args)
{
    char out[512], err[512];
    snprintf(out, sizeof out, "%s/qprof.out", dir);
    snprintf(err, sizeof err, "%s/qprof.err", dir);
    return child_start(QPROF_BIN, args, dir, out, err, NULL);
}

static struct qprof_run wait_qprof(const char *dir, pid_t pid, double timeout_s)
{
    struct qprof_run r;
    bool late;
    r.exit_code = child_wait(pid, timeout_s, &late);
    if (late)
        HARNESS_FAIL("qprof did not finish within %.0f s: killed it", timeout_s);
    char path[512];
    snprintf(path, sizeof path, "%s/qprof.out", dir);
    r.out = slurp(path);
    snprintf(path, sizeof path, "%s/qprof.err", dir);
    r.err = slurp(path);
    return r;
}

static struct qprof_run run_qprof(const char *dir, const char *const *args, double timeout_s)
{
    return wait_qprof(dir, start_qprof(dir, args), timeout_s);
}

static void run_free(struct qprof_run *r)
{
    g_free(r->out);
    g_free(r->err);
}

/* ---- Folded files ------------------------------------------------------------------------ */

/* Reads a folded file, checking every line's form: "frames COUNT", integer count. */
static struct folded read_folded(const char *path)
{
    struct folded f = folded_read(path);
    CHECK_MSG(!f.malformed, "%u malformed folded lines, the first: '%s'", f.malformed,
              f.first_malformed);
    return f;
}

static uint64_t count_matching(const struct folded *f, bool (*pred)(const char *, const void *),
                               const void *arg)
{
    uint64_t n = 0;
    for (guint i = 0; i < f->stacks->len; i++)
        if (pred(STACK(f, i), arg))
            n += COUNT(f, i);
    return n;
}

static bool pred_has_frame(const char *stack, const void *frame)
{
    return folded_has_frame(stack, frame);
}

static bool pred_root_prefix(const char *stack, const void *prefix)
{
    return g_str_has_prefix(stack, prefix);
}

/* ---- Guest + qprof ----------------------------------------------------------------------- */

/* Which of QEMU's interfaces qprof samples through: a case named gdb-X runs case X over the
 * gdbstub (--gdb), with the same assertions. The guest then has a gdbstub too, and QMP stays
 * free for the test's own checks. A case named plugin-X runs case X through qprof-plugin.so in
 * QEMU 10 (--plugin, with --qmp-socket for the RAM file that user code is identified from). */
enum transport { OVER_QMP, OVER_GDB, OVER_PLUGIN };
static enum transport transport = OVER_QMP;
/* plugin-counter-X: the plugin loaded with trigger=counter (its default is auto) */
static const char *plugin_args;
/* plugin-timer-X: qprof asks the plugin for a trigger (--plugin-trigger), whatever it was loaded
 * with */
static const char *qprof_trigger;

struct guest {
    test_vm *vm;
    const char *kernel, *user_dir;
};

/* The guest build a CASE-dframe or CASE-fponly case boots instead of the one `nofp` picks: CFI
 * in .debug_frame only (the host files', never loaded into the guest), or frame pointers and no
 * CFI at all (guest/CMakeLists.txt). */
static const char *variant_kernel, *variant_user_dir;

/* procmem-CASE: QEMU started the usual way, without the shared RAM file, so that qprof reads
 * guest memory out of the QEMU process; every run's summary must name that backend. */
static bool no_ram_file;
#define PROCMEM_SUMMARY "memory: process memory)"
/* plugin-alone-CASE: qprof is given the plugin's socket and nothing else (no --qmp-socket): the
 * plugin's own captures prove where guest RAM lies in QEMU. */
static bool plugin_alone;
/* 0, or the uid QEMU runs as (another user's QEMU: vm_opts.run_as). */
static uid_t qemu_uid;

static int boot_with(struct guest *g, const char *run, bool nofp, const char *const *extra_args)
{
    g->kernel = nofp ? QPROF_GUEST_KERNEL_NOFP : QPROF_GUEST_KERNEL;
    g->user_dir = nofp ? QPROF_GUEST_USER_DIR_NOFP : QPROF_GUEST_USER_DIR;
    if (variant_kernel) {
        g->kernel = variant_kernel;
        g->user_dir = variant_user_dir;
    }
    char cmdline[128];
    snprintf(cmdline, sizeof cmdline, "run=%s", run);
    struct vm_opts opts = {.kernel = g->kernel,
                           .shared_ram = !no_ram_file,
                           .cmdline = cmdline,
                           .extra_args = extra_args,
                           .gdbstub = transport == OVER_GDB,
                           .plugin = transport == OVER_PLUGIN,
                           .plugin_args = plugin_args,
                           .run_as = qemu_uid};
    int rc = vm_start(&opts, &g->vm);
    if (rc == VM_SKIP)
        exit(VM_SKIP);
    REQUIRE(rc == 0);
    REQUIRE(vm_wait_serial(g->vm, "ready", 60) == 0);
    return 0;
}

static int boot(struct guest *g, const char *run, bool nofp)
{
    return boot_with(g, run, nofp, NULL);
}

/* qprof's arguments that point it at the guest: its QMP socket or gdbstub, kernel and user
 * programs. */
#define GUEST_ARGS(g)                                                                              \
    target_flag(), target_address(g), beside_flag(), beside_value(g), "--kernel", (g)->kernel,     \
        "--user-dir", (g)->user_dir

/* The pair after the target's address: the plugin's QMP socket, or an option at its default. */
static const char *beside_flag(void)
{
    if (transport != OVER_PLUGIN)
        return "--transport";
    return plugin_alone ? "--memory" : "--qmp-socket";
}

static const char *beside_value(const struct guest *g)
{
    return transport != OVER_PLUGIN || plugin_alone ? "auto" : vm_qmp_path(g->vm);
}

static const char *target_flag(void)
{
    return transport == OVER_GDB ? "--gdb" : transport == OVER_PLUGIN ? "--plugin" : "--qmp-socket";
}

static const char *target_address(const struct guest *g)
{
    return transport == OVER_GDB      ? vm_gdb_address(g->vm)
           : transport == OVER_PLUGIN ? vm_plugin_address(g->vm)
                                      : vm_qmp_path(g->vm);
}

/* How long a run of n samples may take before the test gives up: generous, so that a slow or
 * loaded machine only makes the test slower, never red. */
static double run_deadline_s(unsigned samples)
{
    return 120 + samples * 0.05;
}

/* Takes exactly `samples` samples of the guest at ~interval_ms into dir/out.folded; extra args
 * appended. The file then holds every sample but those a filter (extra) dropped, which the
 * summary counts. */
static void check_trigger_line(const char *err, const char *interval_ms, const char *extra);

/* What the last profile's busy (not idle) samples amount to as independent samples, as a share
 * of them: 1, or less through the plugin, whose repeats of a sample (one per interval its vCPU's
 * thread was not run) add no information: its summary says what they "amount to". A share's
 * spread is sized from it (share_tolerance). */
static double independent_part = 1;

static void note_independent(const char *summary, const struct folded *f)
{
    const char *at = strstr(summary, "samples amount to ");
    uint64_t n = at ? strtoull(at + strlen("samples amount to "), NULL, 10) : 0, idle = 0;
    for (guint i = 0; i < f->stacks->len; i++)
        if (strcmp(STACK(f, i), "idle") == 0 || g_str_has_prefix(STACK(f, i), "idle;"))
            idle += COUNT(f, i);
    uint64_t busy = f->total > idle ? f->total - idle : 0;
    independent_part = n && n < busy ? (double)n / (double)busy : 1;
    if (independent_part < 1)
        fprintf(stderr, "the busy samples amount to %.1f%% as many independent ones\n",
                100 * independent_part);
}

static struct folded profile_full(struct guest *g, unsigned samples, const char *interval_ms,
                                  const char *extra, uint64_t *at_kernel_entry)
{
    char count[32], output[512];
    snprintf(count, sizeof count, "%u", samples);
    snprintf(output, sizeof output, "%s/out.folded", vm_dir(g->vm));
    const char *args[] = {GUEST_ARGS(g), "--samples",     count, "--interval", interval_ms, "-o",
                          output,        "--no-progress", NULL,  NULL,         NULL,        NULL};
    size_t n = sizeof args / sizeof args[0] - 4;
    if (qprof_trigger && transport == OVER_PLUGIN) {
        args[n++] = "--plugin-trigger";
        args[n++] = qprof_trigger;
    }
    args[n] = extra;
    struct qprof_run r = run_qprof(vm_dir(g->vm), args, run_deadline_s(samples));
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    fprintf(stderr, "%s", r.err);
    /* the plugin captures the samples and reads only code through the process */
    const char *procmem = transport == OVER_PLUGIN ? "code from process memory)" : PROCMEM_SUMMARY;
    if (no_ram_file)
        CHECK_MSG(strstr(r.err, procmem) && !strstr(r.err, "qprof: process memory:"),
                  "the summary does not name process memory: %s", r.err);
    if (transport == OVER_PLUGIN && r.exit_code == 0)
        check_trigger_line(r.err, interval_ms, extra);
    struct folded f = read_folded(output);
    note_independent(r.err, &f);
    /* One vCPU: every sample is one stack, in the file or dropped by a filter. */
    const char *dropped = strstr(r.err, "dropped by --");
    uint64_t n_dropped = dropped ? strtoull(strchr(dropped, ':') + 1, NULL, 10) : 0;
    CHECK_MSG(f.total + n_dropped == samples,
              "asked for %u samples, the file holds %lu (%lu dropped)", samples,
              (unsigned long)f.total, (unsigned long)n_dropped);
    const char *entry = strstr(r.err, "kernel entry from user space: ");
    if (entry && at_kernel_entry)
        *at_kernel_entry = strtoull(strchr(entry, ':') + 1, NULL, 10);
    run_free(&r);
    return f;
}

static struct folded profile(struct guest *g, unsigned samples, const char *interval_ms,
                             const char *extra)
{
    return profile_full(g, samples, interval_ms, extra, NULL);
}

static bool guest_running(struct guest *g)
{
    qmp_client *c = NULL;
    struct qp_error err = {0};
    bool running = false;
    if (qmp_open(vm_qmp_path(g->vm), NULL, &c, &err) != 0 ||
        qmp_query_running(c, &running, &err) != 0)
        HARNESS_FAIL("query-status: %s", err.msg);
    qmp_free(c);
    return running;
}

/* The guest runs within timeout_s (after qprof's exit, whoever detaches does so at once; the
 * deadline is only for a loaded machine). */
static bool guest_running_soon(struct guest *g, double timeout_s)
{
    double deadline = now_s() + timeout_s;
    while (!guest_running(g) && now_s() < deadline)
        usleep(50 * 1000);
    return guest_running(g);
}

/* ---- Checks shared by the spin cases ----------------------------------------------------- */

/* Every stack rooted at a spin process starts at _start;main, and one that reached hot_a or
 * hot_b went through exactly _start;main;compute. No stack is cut short. */
static void check_spin_stacks(const struct folded *f, GHashTable *spin_roots)
{
    for (guint i = 0; i < f->stacks->len; i++) {
        const char *s = STACK(f, i);
        if (!g_str_has_prefix(s, "spin ("))
            continue;
        const char *after_root = strchr(s, ';');
        char *root = g_strndup(s, after_root ? (gsize)(after_root - s) : strlen(s));
        uint64_t *c = g_hash_table_lookup(spin_roots, root);
        if (!c) {
            c = g_new0(uint64_t, 1);
            g_hash_table_insert(spin_roots, g_strdup(root), c);
        }
        *c += COUNT(f, i);
        CHECK_MSG(after_root && g_str_has_prefix(after_root, ";_start;main"),
                  "orphan spin stack: %s", s);
        CHECK_MSG(!strstr(s, "[truncated]"), "truncated spin stack: %s", s);
        bool hot = folded_has_frame(s, "hot_a") || folded_has_frame(s, "hot_b");
        if (hot) {
            char *a = g_strdup_printf("%s;_start;main;compute;hot_a", root);
            char *b = g_strdup_printf("%s;_start;main;compute;hot_b", root);
            CHECK_MSG(g_str_has_prefix(s, a) || g_str_has_prefix(s, b),
                      "hot function under the wrong parents: %s", s);
            g_free(a);
            g_free(b);
        }
        g_free(root);
    }
}

/* The band a measured share may stray from its designed value p over n samples of the last
 * profile: 4.4 standard deviations of a binomial share over what they amount to as independent
 * samples (independent_part), and never tighter than `floor` (which covers TCG's own small
 * biases, docs/accuracy.md, "TCG and the moment of a sample"). */
static double share_tolerance(double p, uint64_t n, double floor)
{
    double independent = (double)(n ? n : 1) * independent_part;
    double t = 4.4 * sqrt(p * (1 - p) / (independent < 1 ? 1 : independent));
    return t > floor ? t : floor;
}

static void check_spin_ratio(const struct folded *f)
{
    uint64_t a = count_matching(f, pred_has_frame, "hot_a");
    uint64_t b = count_matching(f, pred_has_frame, "hot_b");
    fprintf(stderr, "hot_a %lu, hot_b %lu samples\n", (unsigned long)a, (unsigned long)b);
    /* Most samples land in the hot loops (the guest idles ~15% of the time); a run that
     * caught almost none of them says nothing about the ratio. */
    REQUIRE(a + b >= f->total / 2);
    /* Designed 0.75 (3:1 iterations of one loop body). It holds only because spin makes no
     * system call between batches (it reads the guest's clock page): under TCG a stop that
     * QEMU is still processing when the vCPU enters the kernel lands on the entry stub instead
     * (docs/accuracy.md, "TCG and the moment of a sample"), and spin's old per-batch system calls
     * took 10-18% of hot_a's samples that way. */
    double share = (double)a / (double)(a + b);
    double tol = share_tolerance(0.75, a + b, 0.03);
    CHECK_MSG(fabs(share - 0.75) < tol, "hot_a share %.3f over %lu samples, designed 0.75 +- %.3f",
              share, (unsigned long)(a + b), tol);
}

static void check_two_spins(GHashTable *spin_roots)
{
    CHECK_MSG(g_hash_table_size(spin_roots) == 2, "expected 2 spin processes, got %u",
              g_hash_table_size(spin_roots));
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, spin_roots);
    while (g_hash_table_iter_next(&it, &key, &value))
        CHECK_MSG(*(uint64_t *)value >= 200, "%s has only %lu samples", (char *)key,
                  (unsigned long)*(uint64_t *)value);
}

/* `samples` samples of a spin,spin guest at interval_ms (extra appended): both processes
 * named with whole stacks, in the designed 3:1 split. */
static void profile_two_spins(struct guest *g, unsigned samples, const char *interval_ms,
                              const char *extra)
{
    struct folded f = profile(g, samples, interval_ms, extra);
    GHashTable *roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    check_spin_stacks(&f, roots);
    check_spin_ratio(&f);
    check_two_spins(roots);
    if (harness_failures)
        folded_dump(&f);
    g_hash_table_destroy(roots);
    folded_free(&f);
}

/* Tests 1, 2 and 4: ratio, exact stacks, two processes of one binary, idle. */
static void case_spin(bool nofp)
{
    struct guest g;
    boot(&g, "spin,spin", nofp);
    struct folded f = profile(&g, 5000, "1", NULL);
    GHashTable *roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    check_spin_stacks(&f, roots);
    check_spin_ratio(&f);
    check_two_spins(roots);
    uint64_t idle = count_matching(&f, pred_root_prefix, "idle");
    CHECK_MSG(idle > 0, "no idle samples though the guest sleeps between work windows");
    if (harness_failures)
        folded_dump(&f);
    g_hash_table_destroy(roots);
    folded_free(&f);
    vm_stop(g.vm);
}

/* The caller of a stack's leaf frame is a function of the sys program, not of the kernel. */
static bool leaf_called_from_user(const char *stack, const char *leaf, const struct guest_names *n)
{
    char *prev = g_strndup(stack, (size_t)(leaf - stack));
    const char *semi = strrchr(prev, ';');
    const char *caller = semi ? semi + 1 : prev;
    bool user = guest_is_function_of(n->sys, caller) && !guest_is_function_of(n->kernel, caller);
    g_free(prev);
    return user;
}

/* A sample stopped in an entry stub (isrN) entered from user code: the frame before the stub
 * is a function of the sys program, not of the kernel. */
static bool pred_stub_below_user(const char *stack, const void *arg)
{
    const char *leaf = strrchr(stack, ';');
    if (!leaf || !g_str_has_prefix(leaf, ";isr") || !g_ascii_isdigit(leaf[4]))
        return false;
    return leaf_called_from_user(stack, leaf, arg);
}

/* A sample in the common entry code every stub jumps to, entered from user code. */
static bool pred_common_entry_below_user(const char *stack, const void *arg)
{
    const char *leaf = strrchr(stack, ';');
    if (!leaf || strcmp(leaf, ";isr_common") != 0)
        return false;
    return leaf_called_from_user(stack, leaf, arg);
}

/* Test 3: a system call's stack reads user frames, the entry, then the kernel work. */
static void case_sys(bool nofp)
{
    struct guest g;
    boot(&g, "sys", nofp);
    uint64_t at_kernel_entry = 0;
    struct folded f = profile_full(&g, 2500, "1", NULL, &at_kernel_entry);
    uint64_t kernel_work = 0, chained = 0, sys = 0, complete = 0;
    for (guint i = 0; i < f.stacks->len; i++) {
        const char *s = STACK(&f, i);
        if (g_str_has_prefix(s, "sys (")) {
            sys += COUNT(&f, i);
            complete += g_regex_match_simple("^sys \\(\\d+\\);_start;main;", s, 0, 0) &&
                                !strstr(s, "[truncated]")
                            ? COUNT(&f, i)
                            : 0;
        }
        if (!folded_has_frame(s, "kwork_mix"))
            continue;
        kernel_work += COUNT(&f, i);
        /* user frames, the trap into the kernel, the syscall path down to the work function */
        GRegex *re = g_regex_new("^sys \\(\\d+\\);_start;main;kernel_work;sys_call;"
                                 "([A-Za-z0-9_]+;)*syscall_dispatch;sys_work;kwork_checksum;"
                                 "kwork_mix(;|$)",
                                 0, 0, NULL);
        bool ok = g_regex_match(re, s, 0, NULL);
        g_regex_unref(re);
        CHECK_MSG(ok, "sys kernel stack not user -> entry -> kernel work: %s", s);
        if (ok)
            chained += COUNT(&f, i);
    }
    /* The summary counts samples on the first instruction of an entry from user space. Under
     * TCG an entry stub is one translation block, so a sample can stop only at its start: the
     * count matches the stacks that end in a stub right below user frames (within a few: a
     * stop can also fall on the first instruction of the common entry code the stub jumps
     * to). sys enters the kernel all the time, so some samples always land there. */
    struct guest_names n;
    REQUIRE(guest_names_load(g.kernel, g.user_dir, &n) == 0);
    uint64_t in_stub = count_matching(&f, pred_stub_below_user, &n);
    uint64_t in_common = count_matching(&f, pred_common_entry_below_user, &n);
    fprintf(stderr,
            "at a kernel entry: %lu in the summary, %lu stacks end in a stub, %lu in isr_common\n",
            (unsigned long)at_kernel_entry, (unsigned long)in_stub, (unsigned long)in_common);
    /* The plugin samples at the start of a block the vCPU is about to run, not where QEMU
     * stopped to take an interrupt: it shows no pile-up on entry stubs, and may catch none. A
     * sample can also land on isr_common's first instruction (its own block, after the stub's
     * jump), more often on a loaded host: the stacks in isr_common bound those from above. */
    CHECK_MSG((in_stub > 0 || transport == OVER_PLUGIN) && at_kernel_entry >= in_stub &&
                  at_kernel_entry <= in_stub + in_common + 2 + in_stub / 20,
              "summary says %lu samples at a kernel entry, %lu stacks end in a stub, %lu in "
              "isr_common",
              (unsigned long)at_kernel_entry, (unsigned long)in_stub, (unsigned long)in_common);
    uint64_t user_work = count_matching(&f, pred_has_frame, "user_mix");
    fprintf(stderr, "kwork_mix %lu, user_mix %lu samples\n", (unsigned long)kernel_work,
            (unsigned long)user_work);
    REQUIRE(kernel_work + user_work >= f.total / 2);
    /* Designed 50:50 by iteration counts of the same loop body in user and kernel code; the
     * 0.10 floor allows for TCG running kernel and user code at slightly different speeds. */
    double share = (double)kernel_work / (double)(kernel_work + user_work);
    double tol = share_tolerance(0.5, kernel_work + user_work, 0.10);
    CHECK_MSG(fabs(share - 0.5) < tol, "kernel share of sys %.3f, designed 0.5 +- %.3f", share,
              tol);
    /* on the dframe build, every sys stack whole from _start but for a stop that cannot be
     * unwound (the riscv64 and aarch64 suites' 99.5%) */
    fprintf(stderr, "%lu of %lu sys stacks complete to _start\n", (unsigned long)complete,
            (unsigned long)sys);
    CHECK_MSG(!variant_kernel || complete * 1000 >= sys * 995,
              "only %lu of %lu sys stacks complete to _start", (unsigned long)complete,
              (unsigned long)sys);
    if (harness_failures)
        folded_dump(&f);
    guest_names_free(&n);
    folded_free(&f);
    vm_stop(g.vm);
}

/* Whether stack i's frames (markers skipped) appear in chain, in its order, up to and including
 * `last` (what follows it, an interrupt's frames, say, is not checked). */
static bool frames_in_order(const struct folded *f, guint i, const char *last,
                            const char *const *chain)
{
    gchar **frames = folded_frames(f, i);
    bool ok = true;
    size_t j = 0;
    for (gchar **p = frames + 1; ok && *p; p++) { /* frames[0]: the process */
        if (strcmp(*p, "[truncated]") == 0)
            continue;
        while (chain[j] && strcmp(chain[j], *p) != 0)
            j++;
        ok = chain[j] != NULL;
        if (strcmp(*p, last) == 0)
            break;
    }
    g_strfreev(frames);
    return ok;
}

/* sys-fponly: sys on the guest built with frame pointers and no CFI at all. qprof's frame-pointer
 * walk reads each function's code to find where its return address is, so an interrupted leaf
 * with no frame record (GCC 12 gives leaves none even with -mno-omit-leaf-frame-pointer) keeps
 * its caller: user_mix under user_work, kwork_mix under kwork_checksum, and user stacks end at
 * _start, whose zero frame pointer marks the end, complete. The kernel's entry stubs keep no
 * record, so the kernel part ends at isr_common marked [truncated], and the sampler goes on from
 * the user registers the qprof_abi slot saved. Asserted: processes named, the designed 50:50
 * split, and the work stacks whole, every frame in order with none skipped: libdwfl's own
 * fallback (sys_work;kwork_mix, main;user_mix; nothing to _start) fails here. */
static void case_sys_fponly(void)
{
    static const char *const kernel_path[] = {
        "_start",   "main",           "kernel_work",  "sys_call",
        "isr128",   "isr_common",     "isr_dispatch", "syscall_dispatch",
        "sys_work", "kwork_checksum", "kwork_mix",    NULL};
    static const char *const user_path[] = {"_start", "main", "user_work", "user_mix", NULL};
    static const char kernel_stack[] = "sys (1);_start;main;kernel_work;sys_call;[truncated];"
                                       "isr_common;isr_dispatch;syscall_dispatch;sys_work;"
                                       "kwork_checksum;kwork_mix";
    static const char user_stack[] = "sys (1);_start;main;user_work;user_mix";
    struct guest g;
    boot(&g, "sys", false);
    struct folded f = profile(&g, 2500, "1", NULL);
    uint64_t kernel_whole = 0, user_whole = 0;
    for (guint i = 0; i < f.stacks->len; i++) {
        const char *s = STACK(&f, i);
        if (!g_str_has_prefix(s, "sys ("))
            continue;
        if (folded_has_frame(s, "kwork_mix"))
            CHECK_MSG(frames_in_order(&f, i, "kwork_mix", kernel_path),
                      "kwork_mix off its path: %s", s);
        if (folded_has_frame(s, "user_mix"))
            CHECK_MSG(frames_in_order(&f, i, "user_mix", user_path), "user_mix off its path: %s",
                      s);
        kernel_whole += strcmp(s, kernel_stack) == 0 ? COUNT(&f, i) : 0;
        /* a timer interrupt in user_mix adds its kernel part after the user one */
        user_whole += strcmp(s, user_stack) == 0 ||
                              (g_str_has_prefix(s, user_stack) && s[sizeof user_stack - 1] == ';')
                          ? COUNT(&f, i)
                          : 0;
    }
    uint64_t kernel_work = count_matching(&f, pred_has_frame, "kwork_mix");
    uint64_t user_work = count_matching(&f, pred_has_frame, "user_mix");
    fprintf(stderr, "kwork_mix %lu (%lu whole), user_mix %lu (%lu whole) samples\n",
            (unsigned long)kernel_work, (unsigned long)kernel_whole, (unsigned long)user_work,
            (unsigned long)user_whole);
    REQUIRE(kernel_work + user_work >= f.total / 2);
    /* Every sample in the work loops unwinds whole: the walk vouches for each of these frames,
     * whatever instruction the sample stopped at (a sample taken as a timer interrupt enters
     * kwork_mix's stack in isr32 instead: a few). */
    CHECK_MSG(kernel_whole * 100 >= kernel_work * 98, "kwork_mix stacks whole: %lu of %lu",
              (unsigned long)kernel_whole, (unsigned long)kernel_work);
    CHECK_MSG(user_whole * 100 >= user_work * 99, "user_mix stacks whole: %lu of %lu",
              (unsigned long)user_whole, (unsigned long)user_work);
    double share = (double)kernel_work / (double)(kernel_work + user_work);
    double tol = share_tolerance(0.5, kernel_work + user_work, 0.10);
    CHECK_MSG(fabs(share - 0.5) < tol, "kernel share of sys %.3f, designed 0.5 +- %.3f", share,
              tol);
    if (harness_failures)
        folded_dump(&f);
    folded_free(&f);
    vm_stop(g.vm);
}

/* sys-dframe: sys (kernel and user stacks) on the guest built with CFI in .debug_frame only,
 * with sys's assertions and every stack complete to _start; sys-fponly: see case_sys_fponly. */
static void case_variant(const char *which)
{
    bool dframe = g_str_has_suffix(which, "-dframe");
    variant_kernel = dframe ? QPROF_GUEST_KERNEL_DFRAME : QPROF_GUEST_KERNEL_FPONLY;
    variant_user_dir = dframe ? QPROF_GUEST_USER_DIR_DFRAME : QPROF_GUEST_USER_DIR_FPONLY;
    if (dframe)
        case_sys(false);
    else
        case_sys_fponly();
}

/* ---- Test 6: --kernel-only, --user-only, --one-shot -------------------------------------- */

static const char *leaf_of(const char *stack)
{
    const char *semi = strrchr(stack, ';');
    return semi ? semi + 1 : stack;
}

static void case_modes(void)
{
    struct guest g;
    boot(&g, "spin,sys", false);
    struct guest_names n;
    REQUIRE(guest_names_load(g.kernel, g.user_dir, &n) == 0);

    struct folded k = profile(&g, 600, "2", "--kernel-only");
    REQUIRE(k.total > 0);
    for (guint i = 0; i < k.stacks->len; i++) {
        const char *s = STACK(&k, i), *leaf = leaf_of(s);
        CHECK_MSG(strcmp(s, "idle") == 0 || guest_is_function_of(n.kernel, leaf),
                  "--kernel-only kept a sample whose leaf is not kernel code: %s", s);
    }
    struct folded u = profile(&g, 600, "2", "--user-only");
    REQUIRE(u.total > 0);
    for (guint i = 0; i < u.stacks->len; i++) {
        const char *s = STACK(&u, i), *leaf = leaf_of(s);
        CHECK_MSG(!g_str_has_prefix(s, "idle") && !g_str_has_prefix(s, "kernel"),
                  "--user-only kept %s", s);
        CHECK_MSG(guest_is_function_of(n.spin, leaf) || guest_is_function_of(n.sys, leaf),
                  "--user-only kept a sample whose leaf is not user code: %s", s);
        gchar **frames = g_strsplit(s, ";", -1);
        for (gchar **fr = frames + 1; *fr; fr++)
            CHECK_MSG(!guest_is_function_of(n.kernel, *fr) || guest_is_function_of(n.spin, *fr) ||
                          guest_is_function_of(n.sys, *fr),
                      "--user-only stack has kernel frame %s: %s", *fr, s);
        g_strfreev(frames);
    }
    folded_free(&k);
    folded_free(&u);
    CHECK(guest_running(&g));
    guest_names_free(&n);
    vm_stop(g.vm);
}

/* Checks one frame line "  #N  0xADDR name+0xOFF [module]": the address lies in the named
 * function at that offset. */
static void check_one_shot_frame(const char *line, const struct guest_names *n)
{
    unsigned long long addr = 0, off = 0;
    char name[160] = "", module[64] = "";
    int idx;
    int got =
        sscanf(line, " #%d 0x%llx %159[^+ ]+0x%llx [%63[^]]]", &idx, &addr, name, &off, module);
    CHECK_MSG(got == 5, "one-shot frame line not 'N ADDR name+OFF [module]': %s", line);
    if (got != 5)
        return;
    const sym_table *t = strcmp(module, "spin") == 0  ? n->spin
                         : strcmp(module, "sys") == 0 ? n->sys
                                                      : n->kernel;
    /* A return address names the function of the call before it (addr - 1); an exact pc
     * (frame #0, or a frame the CFI marks as interrupted) names the function at addr. Either
     * way the printed offset must be addr - start of the printed function. */
    struct sym_info at, before;
    bool ok_at = sym_lookup(t, addr, &at) == 0 && strcmp(at.name, name) == 0;
    bool ok_before =
        idx > 0 && sym_lookup(t, addr - 1, &before) == 0 && strcmp(before.name, name) == 0;
    uint64_t start = ok_at ? at.start : before.start;
    CHECK_MSG((ok_at || ok_before) && addr - start == off,
              "frame %s: address does not match the symbol", line);
}

static void case_one_shot(void)
{
    struct guest g;
    boot(&g, "spin,sys", false);
    struct guest_names n;
    REQUIRE(guest_names_load(g.kernel, g.user_dir, &n) == 0);
    int frames_checked = 0, user_stacks = 0;
    for (int round = 0; round < 8; round++) {
        const char *args[] = {GUEST_ARGS(&g), "--one-shot", "--show-addresses", NULL};
        struct qprof_run r = run_qprof(vm_dir(g.vm), args, 60);
        CHECK_MSG(r.exit_code == 0, "one-shot exited %d: %s", r.exit_code, r.err);
        gchar **lines = g_strsplit(r.out, "\n", -1);
        CHECK_MSG(g_str_has_prefix(lines[0], "vCPU 0: "), "first line: %s", lines[0]);
        if (strstr(lines[0], "spin (") || strstr(lines[0], "sys ("))
            user_stacks++;
        /* the header's pc is where the innermost frame is */
        const char *pc_at = strstr(lines[0], ", pc 0x");
        CHECK_MSG(pc_at != NULL, "no ', pc 0x' in the header: %s", lines[0]);
        unsigned long long pc = pc_at ? strtoull(pc_at + 5, NULL, 16) : 0, at0 = 0;
        for (gchar **l = lines + 1; *l && **l; l++) {
            if (sscanf(*l, "  #0 0x%llx", &at0) == 1)
                CHECK_MSG(at0 == pc, "frame #0 at 0x%llx, the header says pc 0x%llx", at0, pc);
            if (g_str_has_prefix(*l, "  #")) {
                check_one_shot_frame(*l, &n);
                frames_checked++;
            } else {
                /* a stack cut short says so (a kernel stack caught mid-switch, say) */
                CHECK_MSG(g_str_has_prefix(*l, "    -- entered the kernel") ||
                              g_str_has_prefix(*l, "    [truncated: ") ||
                              g_str_has_prefix(*l, "(guest paused") ||
                              g_str_has_prefix(*l, "(captured inside QEMU") ||
                              g_str_has_prefix(*l, "vCPU "),
                          "unexpected one-shot line: %s", *l);
            }
        }
        g_strfreev(lines);
        run_free(&r);
        CHECK(guest_running(&g));
    }
    CHECK_MSG(user_stacks >= 2, "only %d of 8 one-shots caught a process", user_stacks);
    CHECK_MSG(frames_checked >= 10, "only %d frames checked", frames_checked);
    guest_names_free(&n);
    vm_stop(g.vm);
}

/* ---- Test 7: Ctrl-C; QEMU exiting mid-run ------------------------------------------------ */

/* The sample count of qprof's last progress line ("\rqprof:    1.2 s       345 samples ..."),
 * 0 before the first. */
static uint64_t progress_at(const char *err_text, double *secs_out)
{
    const char *last = NULL;
    for (const char *p = strstr(err_text, "\rqprof:"); p; p = strstr(p + 1, "\rqprof:"))
        last = p;
    double secs = 0;
    unsigned long long n = 0;
    if (!last || sscanf(last, "\rqprof: %lf s %llu samples", &secs, &n) != 2)
        n = 0, secs = 0;
    if (secs_out)
        *secs_out = secs;
    return n;
}

static uint64_t progress_samples(const char *err_text)
{
    return progress_at(err_text, NULL);
}

/* Waits until the running qprof (pid, writing dir/qprof.err) has taken at least n samples. */
static bool wait_for_samples(const char *dir, pid_t pid, uint64_t n, double timeout_s)
{
    char path[512];
    snprintf(path, sizeof path, "%s/qprof.err", dir);
    double deadline = now_s() + timeout_s;
    while (now_s() < deadline) {
        char *text = slurp(path);
        uint64_t got = progress_samples(text);
        g_free(text);
        if (got >= n)
            return true;
        if (waitpid(pid, NULL, WNOHANG) != 0)
            return false; /* qprof ended early; the caller's checks say why */
        usleep(20000);
    }
    return false;
}

/* Starts qprof sampling at ~1 kHz until stopped, writing to output (dir/out.folded), and waits
 * until it has taken at least min_samples. */
static pid_t start_open_ended_run(struct guest *g, char *output, size_t cap, uint64_t min_samples)
{
    snprintf(output, cap, "%s/out.folded", vm_dir(g->vm));
    const char *args[] = {GUEST_ARGS(g), "--duration", "0",          "--interval", "1",
                          "-o",          output,       "--progress", NULL};
    pid_t pid = start_qprof(vm_dir(g->vm), args);
    CHECK_MSG(wait_for_samples(vm_dir(g->vm), pid, min_samples, 120),
              "qprof did not reach %lu samples", (unsigned long)min_samples);
    return pid;
}

static void case_sigint(void)
{
    struct guest g;
    boot(&g, "spin,spin,sys", false);
    char output[512];
    pid_t pid = start_open_ended_run(&g, output, sizeof output, 200);
    kill(pid, SIGINT);
    struct qprof_run r = wait_qprof(vm_dir(g.vm), pid, 30);
    CHECK_MSG(r.exit_code == 0, "qprof after Ctrl-C exited %d: %s", r.exit_code, r.err);
    CHECK_MSG(strstr(r.err, "interrupted"), "no message about the interruption: %s", r.err);
    struct folded f = read_folded(output);
    CHECK_MSG(f.total >= 200, "only %lu samples written after 200 were taken",
              (unsigned long)f.total);
    CHECK(count_matching(&f, pred_root_prefix, "spin (") > 0);
    /* out_write_file's temporary is OUTPUT.tmp.XXXXXX (mkstemp) beside it */
    char *out_dir = g_path_get_dirname(output), *prefix = g_strdup_printf("%s.tmp.", output);
    GDir *d = g_dir_open(out_dir, 0, NULL);
    for (const char *e; d && (e = g_dir_read_name(d));) {
        char *full = g_build_filename(out_dir, e, NULL);
        CHECK_MSG(!g_str_has_prefix(full, prefix), "temporary file left behind: %s", full);
        g_free(full);
    }
    if (d)
        g_dir_close(d);
    g_free(out_dir), g_free(prefix);
    CHECK_MSG(guest_running(&g), "guest left paused after Ctrl-C");
    folded_free(&f);
    run_free(&r);
    vm_stop(g.vm);
}

static void case_qemu_exit(void)
{
    struct guest g;
    boot(&g, "spin", false);
    char output[512];
    pid_t pid = start_open_ended_run(&g, output, sizeof output, 100);
    kill(vm_pid(g.vm), SIGKILL);
    struct qprof_run r = wait_qprof(vm_dir(g.vm), pid, 60);
    CHECK_MSG(r.exit_code == 1, "qprof exited %d after QEMU died: %s", r.exit_code, r.err);
    CHECK_MSG(strstr(r.err, "wrote "), "what was sampled was not written: %s", r.err);
    struct folded f = read_folded(output);
    CHECK_MSG(f.total >= 100, "only %lu samples written after 100 were taken",
              (unsigned long)f.total);
    folded_free(&f);
    run_free(&r);
    vm_stop(g.vm);
}

/* ---- Outputs: one run in every format; record / report ------------------------------------ */

/* hot_a and hot_b samples of a speedscope file: every sample of every profile whose stack
 * (frame indices) holds that function; *total gets every sample. */
static void speedscope_counts(const char *path, uint64_t *a, uint64_t *b, uint64_t *total)
{
    *a = *b = *total = 0;
    json_object *root = json_object_from_file(path), *shared, *frames, *profiles;
    REQUIRE(root && json_object_object_get_ex(root, "shared", &shared) &&
            json_object_object_get_ex(shared, "frames", &frames) &&
            json_object_object_get_ex(root, "profiles", &profiles));
    size_t n_frames = json_object_array_length(frames);
    int hot_a = -1, hot_b = -1;
    for (size_t i = 0; i < n_frames; i++) {
        json_object *name, *file = NULL, *line = NULL,
                           *frame = json_object_array_get_idx(frames, i);
        json_object_object_get_ex(frame, "name", &name);
        if (strcmp(json_object_get_string(name), "hot_a") == 0) {
            hot_a = (int)i;
            /* the demo's user programs are built with DWARF: frames carry their source */
            json_object_object_get_ex(frame, "file", &file);
            json_object_object_get_ex(frame, "line", &line);
            CHECK_MSG(file && g_str_has_suffix(json_object_get_string(file), "spin.c") && line &&
                          json_object_get_int(line) > 0,
                      "speedscope's hot_a frame has no spin.c line: %s",
                      json_object_to_json_string(frame));
        }
        if (strcmp(json_object_get_string(name), "hot_b") == 0)
            hot_b = (int)i;
    }
    for (size_t p = 0; p < json_object_array_length(profiles); p++) {
        json_object *samples, *prof = json_object_array_get_idx(profiles, p);
        REQUIRE(json_object_object_get_ex(prof, "samples", &samples));
        for (size_t i = 0; i < json_object_array_length(samples); i++) {
            json_object *stack = json_object_array_get_idx(samples, i);
            (*total)++;
            for (size_t k = 0; k < json_object_array_length(stack); k++) {
                int f = json_object_get_int(json_object_array_get_idx(stack, k));
                *a += f == hot_a;
                *b += f == hot_b;
            }
        }
    }
    json_object_put(root);
}

/* Flat sample counts of hot_a and hot_b, and which function `go tool pprof -top` lists first. */
static bool pprof_counts(const char *dir, const char *path, uint64_t *a, uint64_t *b, char *first,
                         size_t cap)
{
    char *cmd = g_strdup_printf("cd %s && HOME=%s GOCACHE=%s/gocache go tool pprof -top "
                                "-sample_index=samples %s 2>&1",
                                dir, dir, dir, path);
    FILE *f = popen(cmd, "r");
    g_free(cmd);
    char line[512];
    bool table = false;
    *a = *b = 0;
    first[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, "flat%")) {
            table = true;
            continue;
        }
        unsigned long long flat;
        char name[256];
        if (!table || sscanf(line, " %llu %*s %*s %*s %*s %255s", &flat, name) != 2)
            continue;
        if (!first[0])
            g_strlcpy(first, name, cap);
        if (strcmp(name, "hot_a") == 0)
            *a = flat;
        if (strcmp(name, "hot_b") == 0)
            *b = flat;
    }
    return f && pclose(f) == 0 && table;
}

/* Samples the SVG attributes to hot_a and hot_b: the sums of their nodes' "(N samples" titles. */
static void svg_counts(const char *path, uint64_t *a, uint64_t *b)
{
    char *text = slurp(path);
    *a = *b = 0;
    for (const char *p = strstr(text, "<title>"); p; p = strstr(p + 1, "<title>")) {
        char name[128];
        unsigned long long n;
        if (sscanf(p, "<title>%127[^ (<] (%llu sample", name, &n) != 2)
            continue;
        *a += strcmp(name, "hot_a") == 0 ? n : 0;
        *b += strcmp(name, "hot_b") == 0 ? n : 0;
    }
    CHECK_MSG(strstr(text, "<svg") && strstr(text, "</svg>"), "%s is not a whole SVG", path);
    g_free(text);
}

static void check_share(const char *format, uint64_t a, uint64_t b)
{
    double share = a + b ? (double)a / (double)(a + b) : 0;
    double tol = share_tolerance(0.75, a + b, 0.03);
    fprintf(stderr, "%s: hot_a %lu hot_b %lu share %.3f\n", format, (unsigned long)a,
            (unsigned long)b, share);
    CHECK_MSG(a + b > 0 && fabs(share - 0.75) < tol, "%s: hot_a share %.3f, designed 0.75 +- %.3f",
              format, share, tol);
}

/* One run written as folded, speedscope JSON, pprof, SVG and a record file agrees on the
 * samples and on hot_a's share of spin; `qprof report` gives back the same folded stacks. */
static void case_formats(void)
{
    struct guest g;
    boot(&g, "spin", false);
    const char *dir = vm_dir(g.vm);
    char *folded = g_strdup_printf("%s/a.folded", dir),
         *ss = g_strdup_printf("%s/a.speedscope.json", dir);
    char *pb = g_strdup_printf("%s/a.pb.gz", dir), *svg = g_strdup_printf("%s/a.svg", dir);
    char *data = g_strdup_printf("%s/a.data", dir), *again = g_strdup_printf("%s/b.folded", dir);
    const char *args[] = {GUEST_ARGS(&g), "--samples", "3000", "--interval", "1",  "--no-progress",
                          "-o",           folded,      "-o",   ss,           "-o", pb,
                          "-o",           svg,         "-o",   data,         NULL};
    struct qprof_run r = run_qprof(dir, args, run_deadline_s(3000));
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    run_free(&r);
    struct folded f = read_folded(folded);
    CHECK_U64(f.total, 3000);
    check_share("folded", count_matching(&f, pred_has_frame, "hot_a"),
                count_matching(&f, pred_has_frame, "hot_b"));
    uint64_t a, b, total;
    speedscope_counts(ss, &a, &b, &total);
    CHECK_U64(total, 3000);
    CHECK_U64(a, count_matching(&f, pred_has_frame, "hot_a"));
    check_share("speedscope", a, b);
    char first[256];
    CHECK_MSG(pprof_counts(dir, pb, &a, &b, first, sizeof first), "go tool pprof -top failed");
    CHECK_STR(first, "hot_a");
    check_share("pprof", a, b);
    svg_counts(svg, &a, &b);
    check_share("svg", a, b);
    const char *report[] = {"report",   "-i",     data,         "-o",       again,
                            "--kernel", g.kernel, "--user-dir", g.user_dir, NULL};
    r = run_qprof(dir, report, 120);
    CHECK_MSG(r.exit_code == 0, "qprof report exited %d: %s", r.exit_code, r.err);
    run_free(&r);
    char *x = slurp(folded), *y = slurp(again);
    CHECK_MSG(strcmp(x, y) == 0, "report's folded output differs from the run's");
    g_free(x);
    g_free(y);
    folded_free(&f);
    g_free(folded), g_free(ss), g_free(pb), g_free(svg), g_free(data), g_free(again);
    vm_stop(g.vm);
}

/* A record file keeps what was sampled up to the last second before qprof was killed. */
static void case_record_sigkill(void)
{
    struct guest g;
    boot(&g, "spin,sys", false);
    const char *dir = vm_dir(g.vm);
    char *data = g_strdup_printf("%s/r.data", dir), *out = g_strdup_printf("%s/r.folded", dir);
    const char *args[] = {"record", GUEST_ARGS(&g), "--duration", "0",  "--interval",
                          "1",      "--progress",   "-o",         data, NULL};
    pid_t pid = start_qprof(dir, args);
    REQUIRE(wait_for_samples(dir, pid, 1000, 120));
    /* qprof flushes the record file at least once a second of its own clock, before it prints
     * the progress line of that loop: once a line stamped a second after the one counted here
     * is out, those samples are on disk. */
    char *err_path = g_strdup_printf("%s/qprof.err", dir);
    char *text = slurp(err_path);
    double t_before, t_now = 0;
    uint64_t before = progress_at(text, &t_before);
    g_free(text);
    double deadline = now_s() + 120;
    while (t_now < t_before + 1.0 && now_s() < deadline) {
        usleep(20000);
        text = slurp(err_path);
        progress_at(text, &t_now);
        g_free(text);
    }
    CHECK_MSG(t_now >= t_before + 1.0, "qprof's progress stopped at %.1f s", t_now);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    const char *report[] = {"report", "-i", data, "-o", out, NULL};
    struct qprof_run r = run_qprof(dir, report, 120);
    CHECK_MSG(r.exit_code == 0, "report of a killed recording exited %d: %s", r.exit_code, r.err);
    run_free(&r);
    struct folded f = read_folded(out);
    fprintf(stderr, "%lu samples taken 1.5 s before the kill, %lu in the report\n",
            (unsigned long)before, (unsigned long)f.total);
    CHECK_MSG(f.total >= before, "the report holds %lu samples, %lu were taken 1.5 s before",
              (unsigned long)f.total, (unsigned long)before);
    folded_free(&f);
    g_free(err_path), g_free(data), g_free(out);
    vm_stop(g.vm);
}

/* ---- Test 8: usage errors ---------------------------------------------------------------- */

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

static void expect_failure(const char *dir, const char *const *args, int code, const char *needle)
{
    struct qprof_run r = run_qprof(dir, args, 30);
    CHECK_MSG(r.exit_code == code, "qprof %s exited %d, want %d", args[0], r.exit_code, code);
    CHECK_MSG(strstr(r.err, needle), "qprof %s: message lacks '%s': %s", args[0], needle, r.err);
    /* one line saying what is wrong (plus, for usage errors, the --help hint) */
    CHECK_MSG(count_lines(r.err) <= 2, "qprof %s printed more than a clear line: %s", args[0],
              r.err);
    run_free(&r);
}

static void case_usage(void)
{
    char dir[] = "/tmp/qprof-usage-XXXXXX";
    REQUIRE(mkdtemp(dir));
    expect_failure(dir, (const char *[]){"--bogus", NULL}, 2, "unknown option '--bogus'");
    expect_failure(dir, (const char *[]){"--interval", "0", NULL}, 2, "--interval");
    expect_failure(dir, (const char *[]){"--max-depth", "x", NULL}, 2, "--max-depth");
    expect_failure(dir, (const char *[]){"--transport", "serial", NULL}, 2, "--transport");
    expect_failure(dir, (const char *[]){"--transport", "gdb", NULL}, 2, "needs --gdb");
    expect_failure(dir, (const char *[]){"--qmp-socket", "./nope", NULL}, 1,
                   "no QMP socket at ./nope");
    char file[600];
    snprintf(file, sizeof file, "%s/regular", dir);
    g_file_set_contents(file, "not a socket", -1, NULL);
    expect_failure(dir, (const char *[]){"--qmp-socket", file, NULL}, 1, file);
    /* A mistyped path is said before qprof looks for QEMU (none runs here). */
    expect_failure(dir, (const char *[]){"--kernel", "./nope.elf", NULL}, 2,
                   "--kernel: './nope.elf': No such file");
    expect_failure(dir, (const char *[]){"--kernel", dir, NULL}, 2, "is not a file");
    expect_failure(dir, (const char *[]){"--user-dir", file, NULL}, 2, "is not a directory");
    struct qprof_run r = run_qprof(dir, (const char *[]){"--help", NULL}, 30);
    CHECK_INT(r.exit_code, 0);
    CHECK(strstr(r.out, "EXAMPLES") != NULL);
    CHECK(strstr(r.out, "--qmp-socket") != NULL);
    run_free(&r);
    unlink(file);
    rmdir(dir);
}

/* ---- Over the gdbstub only ------------------------------------------------------------- */

/* A second qprof on a target that serves one at a time: it is told so in one line (`message`)
 * and exits 1, and the first goes on sampling, then ends well, and the guest runs after both. */
static void check_second_qprof_refused(const char *what, const char *message)
{
    struct guest g;
    boot(&g, "spin", false);
    char output[512];
    pid_t first = start_open_ended_run(&g, output, sizeof output, 100);
    /* its own directory: qprof.out and qprof.err of the first are in use */
    char *second_dir = g_strdup_printf("%s/second", vm_dir(g.vm));
    REQUIRE(mkdir(second_dir, 0700) == 0);
    const char *args[] = {GUEST_ARGS(&g), "--samples", "10", "-o", "second.folded", NULL};
    struct qprof_run r = run_qprof(second_dir, args, 60);
    fprintf(stderr, "second qprof: %s", r.err);
    CHECK_MSG(r.exit_code == 1, "a second qprof on a busy %s exited %d", what, r.exit_code);
    CHECK_MSG(strstr(r.err, message), "no clear message: %s", r.err);
    CHECK_MSG(count_lines(r.err) <= 1, "more than one line: %s", r.err);
    run_free(&r);
    CHECK_MSG(waitpid(first, NULL, WNOHANG) == 0, "the first qprof ended");
    kill(first, SIGINT);
    r = wait_qprof(vm_dir(g.vm), first, 30);
    CHECK_MSG(r.exit_code == 0, "the first qprof exited %d: %s", r.exit_code, r.err);
    run_free(&r);
    struct folded f = read_folded(output);
    CHECK_MSG(f.total >= 100, "the first qprof wrote %lu samples", (unsigned long)f.total);
    folded_free(&f);
    CHECK_MSG(guest_running_soon(&g, 30), "guest left paused after the busy %s", what);
    const char *names[] = {"qprof.out", "qprof.err", "second.folded"};
    for (int i = 0; i < 3; i++) {
        char *path = g_strdup_printf("%s/%s", second_dir, names[i]);
        unlink(path);
        g_free(path);
    }
    rmdir(second_dir);
    g_free(second_dir);
    vm_stop(g.vm);
}

/* QEMU serves one debugger at a time, and 7.2 accepts a second connection without ever
 * answering it: qprof says so in one clear line and exits 1, and neither it nor the qprof
 * already attached leaves the guest paused, once that one is gone too (QEMU takes the queued
 * connection on then, and stops the guest for it). */
static void case_gdb_busy(void)
{
    check_second_qprof_refused("gdbstub", "one debugger at a time");
}

/* Runs 300 samples with args (NULL-terminated, after the guest's kernel and user programs) and
 * returns qprof's stderr (caller g_free()s it). */
static char *run_with(struct guest *g, const char *const *args)
{
    const char *all[24] = {"--kernel",      g->kernel, "--user-dir", g->user_dir,
                           "--samples",     "300",     "--interval", "1",
                           "--no-progress", "-o",      "auto.folded"};
    int n = 11;
    for (; *args && n < 23; args++)
        all[n++] = *args;
    all[n] = NULL;
    struct qprof_run r = run_qprof(vm_dir(g->vm), all, run_deadline_s(300));
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    g_free(r.out);
    return r.err;
}

/* --transport auto with both --gdb and --qmp-socket: the gdbstub when it answers, with the
 * shared RAM file QMP finds (no `m` packets); QMP, after a note, when it does not; and what the
 * summary says names the transport and its round trips. --transport qmp picks QMP. */
static void case_gdb_auto(void)
{
    struct guest g;
    boot(&g, "spin", false);
    const char *gdb = vm_gdb_address(g.vm), *qmp = vm_qmp_path(g.vm);
    char *err = run_with(&g, (const char *[]){"--gdb", gdb, "--qmp-socket", qmp, NULL});
    CHECK_MSG(strstr(err, "gdbstub round trips per sample (transport: gdbstub, memory: direct)"),
              "both given: not the gdbstub with the RAM file: %s", err);
    g_free(err);
    /* the gdbstub alone: auto reads out of the QEMU process (this host's), `m` packets when
     * asked not to */
    err = run_with(&g, (const char *[]){"--gdb", gdb, NULL});
    CHECK_MSG(strstr(err, "(transport: gdbstub, memory: process memory)"),
              "--gdb alone: not process memory: %s", err);
    g_free(err);
    err = run_with(&g, (const char *[]){"--gdb", gdb, "--memory", "memsave", NULL});
    CHECK_MSG(strstr(err, "(transport: gdbstub, memory: gdbstub m packets)"),
              "--gdb alone, --memory memsave: not `m` packets: %s", err);
    g_free(err);
    char *nowhere = g_strdup_printf("unix:%s/no-such-socket", vm_dir(g.vm));
    err = run_with(&g, (const char *[]){"--gdb", nowhere, "--qmp-socket", qmp, NULL});
    CHECK_MSG(strstr(err, "sampling through QMP instead"), "no note about the fallback: %s", err);
    CHECK_MSG(strstr(err, "QMP round trips per sample (transport: QMP, memory: direct)"),
              "no fallback to QMP: %s", err);
    g_free(err);
    err = run_with(&g,
                   (const char *[]){"--gdb", gdb, "--qmp-socket", qmp, "--transport", "qmp", NULL});
    CHECK_MSG(strstr(err, "(transport: QMP, memory: direct)"), "--transport qmp: %s", err);
    g_free(err);
    g_free(nowhere);
    CHECK(guest_running(&g));
    vm_stop(g.vm);
}

/* qprof SIGKILLed mid-run: nobody sends QEMU a `D`, and 7.2 keeps a guest paused when its
 * debugger's connection just closes; qprof's guardian process detaches for it. Several kills
 * at different moments, so that some land while the guest is stopped for a sample. */
static void case_gdb_sigkill(void)
{
    struct guest g;
    boot(&g, "spin", false);
    for (int round = 0; round < 5; round++) {
        char output[512];
        pid_t pid = start_open_ended_run(&g, output, sizeof output, 50 + 37 * round);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        CHECK_MSG(guest_running_soon(&g, 30), "guest left paused after SIGKILL (round %d)", round);
    }
    vm_stop(g.vm);
}

/* ---- The plugin target only ------------------------------------------------------------ */

static void check_line_prefix(const char *line, const char *want)
{
    CHECK_MSG(g_str_has_prefix(line, want), "plugin trigger: %.*s, expected %s",
              (int)strcspn(line, "\n"), line, want);
}

/* Auto's line must follow its rule from the figures it gives: the timer with a host CPU to spare
 * beside the vCPU threads; else the counter when the timer's wake-ups, at the cost the plugin
 * measured on this host, take more of the guest's CPUs than the counter's flat cost. */
static void check_auto_line(const char *line, const char *interval_ms)
{
    char which[16] = "";
    unsigned cpus = 0, threads = 0;
    if (strstr(line, "(auto: the host CPUs QEMU may use are not known)")) {
        check_line_prefix(line, "timer (auto: the host CPUs");
        return;
    }
    const char *f = strstr(line, " for ");
    CHECK_MSG(sscanf(line, "%15s (auto: %u host CPU", which, &cpus) == 2 && f &&
                  sscanf(f, " for %u vCPU thread", &threads) == 1 && cpus && threads,
              "not auto's line: %.*s", (int)strcspn(line, "\n"), line);
    if (!cpus || !threads)
        return;
    unsigned own = 0;
    const char *o = strstr(line, " of them the timer thread's alone");
    if (o) { /* "..., N of them the timer thread's alone" */
        while (o > line && o[-1] >= '0' && o[-1] <= '9')
            o--;
        own = (unsigned)atoi(o);
    }
    if (qpr_auto_spare_cpu(threads, cpus, own)) {
        CHECK_MSG(strcmp(which, "timer") == 0, "auto chose %s with %u CPUs for %u vCPU threads",
                  which, cpus, threads);
        return;
    }
    double wake_us = 0;
    const char *c = strstr(line, "a timer wake-up takes ");
    CHECK_MSG(c && sscanf(c, "a timer wake-up takes %lf us", &wake_us) == 1,
              "no wake-up cost in auto's line: %.*s", (int)strcspn(line, "\n"), line);
    double share =
        qpr_timer_guest_share((uint32_t)(wake_us * 1e3), (uint64_t)(atof(interval_ms) * 1e6), cpus);
    fprintf(stderr, "auto: wake-ups %.1f%% of the guest's CPUs against %.0f%%: %s\n", 100 * share,
            100 * QPR_COUNTER_GUEST_COST, which);
    if (fabs(share - QPR_COUNTER_GUEST_COST) > 0.0006) /* the line rounds the cost to 0.1 us */
        CHECK_MSG(strcmp(which, share > QPR_COUNTER_GUEST_COST ? "counter" : "timer") == 0,
                  "auto chose %s at %.1f%% of the guest's CPUs against %.0f%%", which, 100 * share,
                  100 * QPR_COUNTER_GUEST_COST);
}

/* The summary's "plugin trigger:" line names the trigger that sampled and why: what qprof asked
 * for, what QEMU loaded the plugin with, --period-insns's counter, or auto's choice, which must
 * follow its rule (check_auto_line). */
static void check_trigger_line(const char *err, const char *interval_ms, const char *extra)
{
    const char *line = strstr(err, "plugin trigger: ");
    CHECK_MSG(line, "no plugin trigger line in the summary: %s", err);
    if (!line)
        return;
    line += strlen("plugin trigger: ");
    if (qprof_trigger) {
        char want[64];
        snprintf(want, sizeof want, "%s (--plugin-trigger)", qprof_trigger);
        check_line_prefix(line, want);
    } else if (extra && strstr(extra, "--period-insns")) {
        check_line_prefix(line, "counter (--period-insns)");
    } else if (plugin_args && strstr(plugin_args, "trigger=counter")) {
        check_line_prefix(line, "counter (QEMU loaded the plugin with trigger=counter)");
    } else if (strstr(line, "(auto, before")) {
        check_line_prefix(line, "timer (auto, before");
    } else {
        check_auto_line(line, interval_ms);
    }
}

/* qprof killed outright, again and again, against one QEMU: the plugin disarms when its socket
 * closes and serves the next qprof, whose profile is as right as the first's. */
static void case_plugin_restart(void)
{
    struct guest g;
    boot(&g, "spin,spin", false);
    for (int round = 0; round < 3; round++) {
        char output[512];
        pid_t pid = start_open_ended_run(&g, output, sizeof output, 100 + 50 * round);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        CHECK_MSG(vm_alive(g.vm), "QEMU died with the plugin after qprof was killed");
    }
    profile_two_spins(&g, 3000, "1", NULL);
    CHECK(guest_running(&g));
    vm_stop(g.vm);
}

/* One qprof at a time through the plugin too. */
static void case_plugin_busy(void)
{
    check_second_qprof_refused("plugin", "another qprof is sampling through the plugin");
}

/* --plugin where no plugin answers (a QEMU started without it, or one too old to load it), or
 * at a socket that is not the plugin's: one line that says what to install or start. */
static void case_plugin_missing(void)
{
    transport = OVER_QMP; /* a QEMU without the plugin */
    struct guest g;
    boot(&g, "spin", false);
    char *nowhere = g_strdup_printf("unix:%s/qprof-plugin", vm_dir(g.vm));
    char *qmp = g_strdup_printf("unix:%s", vm_qmp_path(g.vm));
    const char *addresses[] = {nowhere, qmp};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {"--plugin", addresses[i], "--samples", "10", "-o", "x.folded", NULL};
        struct qprof_run r = run_qprof(vm_dir(g.vm), args, 60);
        fprintf(stderr, "qprof --plugin %s: %s", addresses[i], r.err);
        CHECK_MSG(r.exit_code == 1, "exited %d", r.exit_code);
        CHECK_MSG(count_lines(r.err) == 1, "not one line: %s", r.err);
        /* which QEMUs, which plugin API, and the rebuild a QEMU refusing the plugin needs */
        CHECK_MSG(strstr(r.err, "QEMU 9.2 to 11.x (plugin API 4 to 7)") &&
                      strstr(r.err, "-plugin") && strstr(r.err, "rebuild it for that QEMU"),
                  "the line does not say what to install or rebuild: %s", r.err);
        run_free(&r);
    }
    CHECK(guest_running(&g));
    g_free(nowhere);
    g_free(qmp);
    vm_stop(g.vm);
}

/* qprof stopped (SIGSTOP) while the guest runs on at 10 kHz: the ring fills, the plugin drops
 * and counts samples instead of waiting, qprof says so once it runs again, and what it sampled
 * is written. */
static void case_plugin_full_ring(void)
{
    struct guest g;
    boot(&g, "spin", false);
    char output[512];
    snprintf(output, sizeof output, "%s/out.folded", vm_dir(g.vm));
    const char *args[] = {GUEST_ARGS(&g), "--duration", "0",          "--interval", "0.1",
                          "-o",           output,       "--progress", NULL};
    pid_t pid = start_qprof(vm_dir(g.vm), args);
    CHECK_MSG(wait_for_samples(vm_dir(g.vm), pid, 500, 120), "qprof did not reach 500 samples");
    kill(pid, SIGSTOP);
    /* the guest runs on: two more progress lines of spin are well over 512 samples' time */
    int lines = vm_count_serial(g.vm, "spin[1] iter=");
    double deadline = now_s() + 60;
    while (vm_count_serial(g.vm, "spin[1] iter=") < lines + 2 && now_s() < deadline)
        usleep(20000);
    kill(pid, SIGCONT);
    CHECK_MSG(wait_for_samples(vm_dir(g.vm), pid, 1500, 120), "qprof did not go on sampling");
    kill(pid, SIGINT);
    struct qprof_run r = wait_qprof(vm_dir(g.vm), pid, 30);
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    CHECK_MSG(strstr(r.err, "the plugin's ring was full"), "no word of the full ring: %s", r.err);
    const char *lost = strstr(r.err, "samples lost to a full ring: ");
    CHECK_MSG(lost && strtoull(lost + strlen("samples lost to a full ring: "), NULL, 10) > 0,
              "the summary counts no lost samples: %s", r.err);
    struct folded f = read_folded(output);
    CHECK_MSG(f.total >= 1500, "only %lu samples written", (unsigned long)f.total);
    GHashTable *roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    check_spin_stacks(&f, roots);
    g_hash_table_destroy(roots);
    folded_free(&f);
    run_free(&r);
    CHECK(guest_running(&g));
    vm_stop(g.vm);
}

/* 20,000 samples at 10 kHz: the designed 3:1 split within 1.5 points, the guest never stopped. */
static void case_plugin_spin_20k(void)
{
    struct guest g;
    boot(&g, "spin,spin", false);
    struct folded f = profile(&g, 20000, "0.1", NULL);
    GHashTable *roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    check_spin_stacks(&f, roots);
    check_two_spins(roots);
    uint64_t a = count_matching(&f, pred_has_frame, "hot_a");
    uint64_t b = count_matching(&f, pred_has_frame, "hot_b");
    double share = (double)a / (double)(a + b ? a + b : 1);
    fprintf(stderr, "hot_a %lu, hot_b %lu: share %.4f\n", (unsigned long)a, (unsigned long)b,
            share);
    REQUIRE(a + b >= f.total / 2);
    /* 1.5 points, or 4.4 standard deviations of what the samples amount to through a host that
     * did not run the vCPU's thread all the time (the plugin fills those intervals) */
    double tol = share_tolerance(0.75, a + b, 0.015);
    CHECK_MSG(fabs(share - 0.75) <= tol, "hot_a share %.4f over %lu samples, designed 0.75 +- %.3f",
              share, (unsigned long)(a + b), tol);
    if (harness_failures)
        folded_dump(&f);
    g_hash_table_destroy(roots);
    folded_free(&f);
    vm_stop(g.vm);
}

/* The bench's pinned placement, met by the first qprof of a boot: QEMU's threads on one host
 * CPU, the vCPU's moved to another. The timer's wake-ups then have a CPU beside the guest, and
 * auto must see it before any block has called back (until a qprof connects none does, so the
 * plugin learns the vCPU's thread at vCPU init): it once counted the main thread's CPU for the
 * vCPU, found none to spare and took the counter, which costs the guest five times more. */
static void case_plugin_pinned_auto(void)
{
    struct guest g;
    boot(&g, "spin", false);
    pid_t vcpu = 0;
    REQUIRE(vm_busiest_threads(g.vm, 1, &vcpu) == 1);
    int a, b;
    if (!vm_place_apart(g.vm, &vcpu, 1, &a, &b)) {
        fprintf(stderr, "SKIP: needs two host CPUs, this process may use one\n");
        vm_stop(g.vm);
        exit(VM_SKIP);
    }
    fprintf(stderr, "QEMU's threads on CPU %d, the vCPU's (%d) on CPU %d\n", a, (int)vcpu, b);
    char output[512];
    snprintf(output, sizeof output, "%s/out.folded", vm_dir(g.vm));
    const char *args[] = {GUEST_ARGS(&g), "--samples", "500",           "--interval", "1",
                          "-o",           output,      "--no-progress", NULL};
    struct qprof_run r = run_qprof(vm_dir(g.vm), args, run_deadline_s(500));
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    CHECK_MSG(strstr(r.err, "plugin trigger: timer (auto: 2 host CPUs for 1 vCPU thread"),
              "auto did not see the vCPU's own CPU: %s", r.err);
    check_trigger_line(r.err, "1", NULL);
    run_free(&r);
    vm_stop(g.vm);
}

/* The host CPU case_plugin_one_core puts everything on, qprof too (child_start's before_exec). */
static int one_core_cpu;
/* qprof's wake-ups besides its sleeps on empty rings: its start (the plugin's hello, proving
 * process memory from the first captures) and its end. */
#define ONE_CORE_OTHER_WAKES 50
static int pin_to_one_core(void)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(one_core_cpu, &one);
    return sched_setaffinity(0, sizeof one, &one);
}

static double rusage_cpu_s(const struct rusage *u)
{
    return (double)u->ru_utime.tv_sec + u->ru_utime.tv_usec / 1e6 + (double)u->ru_stime.tv_sec +
           u->ru_stime.tv_usec / 1e6;
}

/* Every thread of QEMU on one host CPU, the vCPU's among them, and qprof on it too: no CPU to
 * spare, so auto weighs the timer's wake-ups against the counter's flat cost (check_auto_line)
 * and says so; the profile at 10 kHz is as right as with a core to spare; and qprof, whose every
 * wake-up is taken from the guest here, sleeps on empty rings a batch of intervals at a time
 * (qpr_drain_wait_ns: at most one wake-up per 1.6 ms at 10 kHz, where a fixed 0.5 ms woke it up to
 * 2,000 times a second). */
static void case_plugin_one_core(void)
{
    cpu_set_t mine, one;
    REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &mine))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    struct guest g;
    boot(&g, "spin,spin", false);
    char *task_dir = g_strdup_printf("/proc/%d/task", (int)vm_pid(g.vm));
    GDir *d = g_dir_open(task_dir, 0, NULL);
    REQUIRE(d);
    int pinned = 0;
    for (const char *t; (t = g_dir_read_name(d));)
        pinned += sched_setaffinity(atoi(t), sizeof one, &one) == 0;
    g_dir_close(d);
    g_free(task_dir);
    fprintf(stderr, "QEMU's %d threads on CPU %d\n", pinned, cpu);
    char output[512];
    snprintf(output, sizeof output, "%s/out.folded", vm_dir(g.vm));
    const char *args[] = {GUEST_ARGS(&g), "--samples", "3000",          "--interval", "0.1",
                          "-o",           output,      "--no-progress", NULL};
    one_core_cpu = cpu;
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/qprof.out", vm_dir(g.vm));
    snprintf(err_path, sizeof err_path, "%s/qprof.err", vm_dir(g.vm));
    struct rusage before, after;
    getrusage(RUSAGE_CHILDREN, &before);
    double t0 = now_s();
    pid_t q = child_start(QPROF_BIN, args, vm_dir(g.vm), out_path, err_path, pin_to_one_core);
    struct qprof_run r = wait_qprof(vm_dir(g.vm), q, run_deadline_s(3000));
    double wall = now_s() - t0;
    getrusage(RUSAGE_CHILDREN, &after);
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    long wakes = after.ru_nvcsw - before.ru_nvcsw;
    double most = wall / (qpr_drain_wait_ns(100000) / 1e9) + ONE_CORE_OTHER_WAKES;
    fprintf(stderr,
            "qprof on CPU %d too: %.1f us of CPU and %.3f wake-ups per sample, %ld over "
            "%.2f s (at most %.0f)\n",
            cpu, (rusage_cpu_s(&after) - rusage_cpu_s(&before)) / 3000 * 1e6, wakes / 3000.0, wakes,
            wall, most);
    CHECK_MSG(wakes <= most, "qprof woke %ld times in %.2f s: more than once per %.1f ms", wakes,
              wall, qpr_drain_wait_ns(100000) / 1e6);
    CHECK_MSG(strstr(r.err, "(auto: 1 host CPU for 1 vCPU thread, none to spare"),
              "auto did not see QEMU on one CPU: %s", r.err);
    check_trigger_line(r.err, "0.1", NULL);
    struct folded f = read_folded(output);
    note_independent(r.err, &f);
    GHashTable *roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    check_spin_stacks(&f, roots);
    uint64_t a = count_matching(&f, pred_has_frame, "hot_a");
    uint64_t b = count_matching(&f, pred_has_frame, "hot_b");
    double n = (double)(a + b ? a + b : 1), share = (double)a / n;
    /* 4 sigma of what the count amounts to as independent samples, plus design */
    double tolerance = 4 * sqrt(0.75 * 0.25 / fmax(n * independent_part, 1)) + 0.01;
    fprintf(stderr, "hot_a %lu, hot_b %lu: share %.4f (+- %.4f)\n", (unsigned long)a,
            (unsigned long)b, share, tolerance);
    CHECK(a + b >= f.total / 2);
    CHECK_MSG(fabs(share - 0.75) <= tolerance, "hot_a share %.4f over %.0f samples", share, n);
    g_hash_table_destroy(roots);
    folded_free(&f);
    run_free(&r);
    vm_stop(g.vm);
}

/* Flat instructions of hot_a and hot_b in a pprof file's instructions sample type, and the
 * function listed first. */
static bool pprof_instructions(const char *dir, const char *path, double *a, double *b, char *first,
                               size_t cap)
{
    char *cmd = g_strdup_printf("cd %s && HOME=%s GOCACHE=%s/gocache go tool pprof -top "
                                "-sample_index=instructions -nodecount=1000 %s 2>&1",
                                dir, dir, dir, path);
    FILE *f = popen(cmd, "r");
    g_free(cmd);
    char line[512];
    bool table = false, typed = false;
    *a = *b = 0;
    first[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        typed |= strstr(line, "Type: instructions") != NULL;
        if (strstr(line, "flat%")) {
            table = true;
            continue;
        }
        double flat;
        char name[256];
        if (!table || sscanf(line, " %lf %*s %*s %*s %*s %255s", &flat, name) != 2)
            continue;
        if (!first[0])
            g_strlcpy(first, name, cap);
        if (strcmp(name, "hot_a") == 0)
            *a = flat;
        if (strcmp(name, "hot_b") == 0)
            *b = flat;
    }
    fprintf(stderr, "pprof: %s\n", typed ? "Type: instructions" : "no 'Type: instructions' line");
    return f && pclose(f) == 0 && table && typed;
}

/* The instructions of the line "root;leaf" of a flat profile, 0 when absent. */
static uint64_t exact_line(const struct folded *f, const char *root_leaf)
{
    for (guint i = 0; i < f->stacks->len; i++)
        if (strcmp(STACK(f, i), root_leaf) == 0)
            return COUNT(f, i);
    return 0;
}

/* The kernel part of a flat profile: leaf-only lines, and how many name a function. */
static unsigned check_exact_kernel(const struct folded *f)
{
    unsigned kernel_named = 0;
    uint64_t kernel = 0;
    for (guint i = 0; i < f->stacks->len; i++) {
        if (!g_str_has_prefix(STACK(f, i), "kernel;"))
            continue;
        kernel += COUNT(f, i);
        kernel_named += !g_str_has_prefix(STACK(f, i), "kernel;0x");
        CHECK_MSG(strchr(STACK(f, i) + 7, ';') == NULL, "not leaf-only: %s", STACK(f, i));
    }
    fprintf(stderr, "exact: %u named kernel functions, %lu kernel instructions\n", kernel_named,
            (unsigned long)kernel);
    return kernel_named;
}

/* The batches spin (pid 1) reported done so far: its latest "spin[1] iter=N" line. */
static uint64_t spin_batches(struct guest *g)
{
    char *text = vm_serial_text(g->vm);
    const char *last = NULL;
    for (const char *p = strstr(text, "spin[1] iter="); p; p = strstr(p + 1, "spin[1] iter="))
        last = p;
    uint64_t n = last ? strtoull(last + strlen("spin[1] iter="), NULL, 10) : 0;
    g_free(text);
    return n;
}

/* Batches an --exact run lets spin do: a count cut mid-call at either end is off by at most a
 * batch of each function, so the 3:1 ratio's error is below 2 / EXACT_BATCHES (0.1%), however
 * fast or loaded the host (the run lasts until the guest has done them). */
#define EXACT_BATCHES 2000

/* One qprof --exact run (until spin has done EXACT_BATCHES more batches): the designed 3:1 split
 * of hot_a and hot_b within 1% in the flat profile and in pprof's instructions, kernel functions
 * by name, the second program counted too, the sampled stacks as usual. Returns how long the
 * plugin said it counted; *wall_s gets how long qprof ran. */
static double check_exact_run(struct guest *g, double *wall_s)
{
    const char *dir = vm_dir(g->vm);
    char *folded = g_strdup_printf("%s/out.folded", dir);
    char *pb = g_strdup_printf("%s/out.pb.gz", dir);
    char *exact = g_strdup_printf("%s/out.exact.folded", dir);
    const char *args[] = {GUEST_ARGS(g), "--exact", "--duration", "0", "--interval", "1",
                          "-o",          folded,    "-o",         pb,  "--progress", NULL};
    double t0 = now_s();
    pid_t pid = start_qprof(dir, args);
    CHECK_MSG(wait_for_samples(dir, pid, 50, 120), "qprof --exact took no samples");
    uint64_t from = spin_batches(g);
    double deadline = now_s() + 300;
    while (spin_batches(g) < from + EXACT_BATCHES && now_s() < deadline)
        usleep(50000);
    kill(pid, SIGINT);
    struct qprof_run r = wait_qprof(dir, pid, 120);
    *wall_s = now_s() - t0;
    fprintf(stderr, "%s", r.err);
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    const char *summary = strstr(r.err, "exact instructions (--exact, counted for ");
    CHECK_MSG(summary, "no exact counts in the summary");
    double counted =
        summary ? strtod(summary + strlen("exact instructions (--exact, counted for "), NULL) : 0;
    struct folded f = read_folded(exact);
    uint64_t a = exact_line(&f, "spin;hot_a"), b = exact_line(&f, "spin;hot_b");
    double ratio = b ? (double)a / (double)b : 0;
    fprintf(stderr, "exact: hot_a %lu, hot_b %lu instructions: %.5f to 1\n", (unsigned long)a,
            (unsigned long)b, ratio);
    /* a batch is BATCH = 20000 iterations of hot_b, a few instructions each */
    CHECK_MSG(b > (uint64_t)EXACT_BATCHES * 20000 * 2, "hot_b ran only %lu instructions",
              (unsigned long)b);
    CHECK_MSG(fabs(ratio / 3 - 1) < 0.01, "hot_a : hot_b = %.4f, designed 3 within 1%%", ratio);
    /* kernel code by its names: sys's system calls, the timer's interrupts */
    unsigned kernel_named = check_exact_kernel(&f);
    CHECK_MSG(kernel_named >= 5, "only %u kernel functions counted by name", kernel_named);
    CHECK_MSG(count_matching(&f, pred_root_prefix, "sys;") > 0, "sys's own code is not counted");
    struct folded sampled = read_folded(folded);
    CHECK_MSG(count_matching(&sampled, pred_has_frame, "hot_a") > 0, "no sampled hot_a");
    double pa, pb_flat;
    char first[256];
    CHECK_MSG(pprof_instructions(dir, pb, &pa, &pb_flat, first, sizeof first),
              "go tool pprof -sample_index=instructions failed");
    fprintf(stderr, "pprof instructions: first %s, hot_a %.0f hot_b %.0f\n", first, pa, pb_flat);
    CHECK_STR(first, "hot_a");
    CHECK_MSG(pb_flat > 0 && fabs(pa / pb_flat / 3 - 1) < 0.01,
              "pprof: hot_a : hot_b = %.4f, designed 3 within 1%%", pb_flat ? pa / pb_flat : 0);
    if (harness_failures)
        folded_dump(&f);
    folded_free(&sampled);
    folded_free(&f);
    run_free(&r);
    g_free(folded), g_free(pb), g_free(exact);
    return counted;
}

/* --exact on the demo guest: every instruction counted, so spin's designed 3:1 work split of
 * hot_a and hot_b (the same loop body, 3 x BATCH and BATCH iterations) shows within 1% (a run
 * cut mid-batch is off by at most one batch in thousands). An --exact qprof killed outright
 * leaves nothing behind: the next --exact run against the same QEMU counts from its own start
 * (so does the one after it); a qprof without --exact after them is served as usual (the
 * plugin removed its counters). */
static void case_plugin_exact(void)
{
    struct guest g;
    boot(&g, "spin,sys", false);
    const char *dir = vm_dir(g.vm);
    const char *killed[] = {GUEST_ARGS(&g), "--exact", "--duration", "0",
                            "--interval",   "1",       "--progress", NULL};
    pid_t pid = start_qprof(dir, killed);
    CHECK_MSG(wait_for_samples(dir, pid, 2000, 120), "the first --exact qprof took no samples");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    double wall1, wall2;
    double first = check_exact_run(&g, &wall1);
    double second = check_exact_run(&g, &wall2);
    fprintf(stderr, "counted for %.2f s of %.2f s, then %.2f s of %.2f s\n", first, wall1, second,
            wall2);
    /* counted from the run's own start: within the time its qprof ran, not since the killed one */
    CHECK_MSG(first > 0 && first < wall1, "the first run counted for %.2f s in %.2f s", first,
              wall1);
    CHECK_MSG(second > 0 && second < wall2, "the second run counted for %.2f s in %.2f s", second,
              wall2);
    struct folded f = profile(&g, 300, "1", NULL);
    GHashTable *roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    check_spin_stacks(&f, roots);
    g_hash_table_destroy(roots);
    folded_free(&f);
    CHECK(guest_running(&g));
    vm_stop(g.vm);
}

/* Whether sys's code calls callee from caller (guest/user/sys.c, ulib.c; line_* may be inlined). */
static bool sys_calls(const char *caller, const char *callee)
{
    static const char *const edges[][2] = {
        {"main", "getpid"},
        {"main", "ticks"},
        {"main", "user_work"},
        {"main", "kernel_work"},
        {"main", "duty_cycle_pause"},
        {"main", "report"},
        {"user_work", "user_mix"},
        {"kernel_work", "sys_call"},
        {"getpid", "sys_call"},
        {"sleep_until", "sys_call"},
        {"duty_cycle_pause", "sleep_until"},
        {"duty_cycle_pause", "ticks"},
        {"report", "line_str"},
        {"report", "line_num"},
        {"report", "line_emit"},
        {"line_emit", "sys_call"},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        if (strcmp(edges[i][0], caller) == 0 && strcmp(edges[i][1], callee) == 0)
            return true;
    return false;
}

/* The user frames of a sys stack (up to the first kernel frame) follow sys's call graph, or the
 * stack is marked truncated. */
static bool sys_user_part_designed(const char *stack, const struct guest_names *n)
{
    if (strstr(stack, "[truncated]"))
        return true;
    char **frames = g_strsplit(stack, ";", -1);
    bool ok = frames[0] && frames[1] && frames[2] && strcmp(frames[1], "_start") == 0 &&
              strcmp(frames[2], "main") == 0;
    for (int i = 3; ok && frames[i]; i++) {
        if (!guest_is_function_of(n->sys, frames[i]) || guest_is_function_of(n->kernel, frames[i]))
            break; /* the kernel part */
        ok = sys_calls(frames[i - 1], frames[i]);
    }
    g_strfreev(frames);
    return ok;
}

/* sys at 10 kHz, 20,000 samples: many land in the kernel's entry and exit paths (a timer flag
 * meets the vCPU anywhere), where the user part of a stack comes from an interrupt frame. Every
 * user part follows sys's call graph, or is marked: before the plugin captured the user stack
 * there too, qprof read it later from the RAM file, and about one stack in 3,000 came out with
 * parents sys never has (`main;user_work;sys_call;isr_return`) or cut short unmarked. */
static void case_plugin_sys_10k(void)
{
    struct guest g;
    boot(&g, "sys", false);
    struct folded f = profile(&g, 20000, "0.1", NULL);
    struct guest_names n;
    REQUIRE(guest_names_load(g.kernel, g.user_dir, &n) == 0);
    uint64_t in_sys = 0, truncated = 0;
    for (guint i = 0; i < f.stacks->len; i++) {
        const char *s = STACK(&f, i);
        if (!g_str_has_prefix(s, "sys ("))
            continue;
        in_sys += COUNT(&f, i);
        truncated += strstr(s, "[truncated]") ? COUNT(&f, i) : 0;
        CHECK_MSG(sys_user_part_designed(s, &n), "a sys stack sys's code never makes: %s (%lu)", s,
                  (unsigned long)COUNT(&f, i));
    }
    fprintf(stderr, "sys: %lu samples, %lu marked truncated\n", (unsigned long)in_sys,
            (unsigned long)truncated);
    REQUIRE(in_sys >= f.total / 2);
    /* marked, not wrong: and rare, or the capture misses what it should find */
    CHECK_MSG(truncated <= in_sys / 100, "%lu of %lu sys stacks truncated",
              (unsigned long)truncated, (unsigned long)in_sys);
    guest_names_free(&n);
    folded_free(&f);
    vm_stop(g.vm);
}

/* --period-insns: a sample every ~N guest instructions, which the counter trigger takes
 * (whatever the plugin was loaded with: qprof's configuration switches it); spin's hot loops run
 * one loop body, so their designed 3:1 split in iterations is one in instructions too. With
 * --plugin-trigger timer it is a usage error, in one line, and the guest runs on. */
static void case_plugin_period(void)
{
    struct guest g;
    boot(&g, "spin,spin", false);
    const char *args[] = {
        GUEST_ARGS(&g), "--period-insns", "100000", "--plugin-trigger", "timer", "--samples", "10",
        "-o",           "x.folded",       NULL};
    struct qprof_run r = run_qprof(vm_dir(g.vm), args, 60);
    fprintf(stderr, "with --plugin-trigger timer: %s", r.err);
    CHECK_MSG(r.exit_code == 2, "exited %d", r.exit_code);
    CHECK_MSG(strstr(r.err, "--period-insns") && strstr(r.err, "counter"),
              "the error names neither --period-insns nor the counter: %s", r.err);
    run_free(&r);
    CHECK(guest_running(&g));
    profile_two_spins(&g, 3000, "1", "--period-insns=100000");
    vm_stop(g.vm);
}

/* ---- --os none: address spaces and binaries by content ------------------------------------ */

/* Samples per root ("spin (1)", "spin [as 2]", "idle", ...) of a folded file. */
static GHashTable *root_counts(const struct folded *f)
{
    GHashTable *roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (guint i = 0; i < f->stacks->len; i++) {
        const char *s = STACK(f, i);
        const char *semi = strchr(s, ';');
        char *root = g_strndup(s, semi ? (gsize)(semi - s) : strlen(s));
        uint64_t *c = g_hash_table_lookup(roots, root);
        if (!c) {
            c = g_new0(uint64_t, 1);
            g_hash_table_insert(roots, g_strdup(root), c);
        }
        *c += COUNT(f, i);
        g_free(root);
    }
    return roots;
}

/* The counts of the roots that start with prefix, in ascending order (at most 8). */
static int counts_of(GHashTable *roots, const char *prefix, uint64_t out[8])
{
    int n = 0;
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, roots);
    while (g_hash_table_iter_next(&it, &key, &value))
        if (g_str_has_prefix(key, prefix) && n < 8)
            out[n++] = *(uint64_t *)value;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            uint64_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* Two measured shares of the same thing over n1 and n2 samples agree within 4.4 standard
 * deviations of their difference, never tighter than 0.03. */
/* Samples not in the idle root: the shares compared are of the guest's busy time. How much of
 * a run is idle moves between runs on one boot (0.12 to 0.38 measured, with the duty cycle's
 * sleeps and TCG's timer), and would move every process's share with it. */
static uint64_t busy_total(const struct folded *f, GHashTable *roots)
{
    const uint64_t *idle = g_hash_table_lookup(roots, "idle");
    return f->total - (idle ? *idle : 0);
}

static void check_same_share(const char *what, uint64_t a, uint64_t n1, uint64_t b, uint64_t n2)
{
    double p1 = (double)a / (double)n1, p2 = (double)b / (double)n2, p = (p1 + p2) / 2;
    /* Samples 1 ms apart inside the guest's 10 ms time slices are not independent: the spread
     * between two runs on one boot is wider than a binomial one (differences of 0.06 at a
     * binomial 0.059 in CI), so the variance counts twice (a design effect of 2). A process
     * taken for another moves a share by a whole process's, 0.3. */
    double tol = 4.4 * sqrt(2 * p * (1 - p) * (1.0 / (double)n1 + 1.0 / (double)n2));
    tol = tol > 0.03 ? tol : 0.03;
    fprintf(stderr, "%s: share %.3f with qprof_abi, %.3f with --os none (+- %.3f)\n", what, p1, p2,
            tol);
    CHECK_MSG(fabs(p1 - p2) < tol, "%s: share %.3f with qprof_abi, %.3f with --os none (+- %.3f)",
              what, p1, p2, tol);
}

/* A process's user stack is whole when its first frame is _start and nothing is cut; the roots
 * of processes contain `marker` (" [as " for address spaces, " (" for pids). */
static void check_as_stacks_complete_in(const struct folded *f, const char *marker)
{
    uint64_t in_as = 0, complete = 0;
    for (guint i = 0; i < f->stacks->len; i++) {
        const char *s = STACK(f, i);
        const char *semi = strchr(s, ';');
        if (!semi || !g_strstr_len(s, semi - s, marker))
            continue;
        in_as += COUNT(f, i);
        if (g_str_has_prefix(semi, ";_start;") && !strstr(s, "[truncated]"))
            complete += COUNT(f, i);
        else
            fprintf(stderr, "not complete to _start: %s\n", s);
    }
    fprintf(stderr, "%lu of %lu process stacks complete to _start\n", (unsigned long)complete,
            (unsigned long)in_as);
    REQUIRE(in_as > 0);
    CHECK_MSG(complete * 100 >= in_as * 99, "only %lu of %lu stacks complete to _start",
              (unsigned long)complete, (unsigned long)in_as);
}

static void check_as_stacks_complete(const struct folded *f)
{
    check_as_stacks_complete_in(f, " [as ");
}

/* The demo guest as a kernel that publishes nothing: with --os none and --user-dir, the two
 * spin processes and sys are separate roots named after their binaries, in the shares the
 * qprof_abi run measures, with whole user stacks. */
/* A record of an --os none run keeps each address space's root value beside its label, and
 * `qprof report` says them again. */
static void check_as_roots_recorded(struct guest *g)
{
    const char *dir = vm_dir(g->vm);
    char *data = g_strdup_printf("%s/none.data", dir);
    const char *args[] = {GUEST_ARGS(g), "--os=none",     "--samples", "300", "--interval",
                          "1",           "--no-progress", "-o",        data,  NULL};
    struct qprof_run r = run_qprof(dir, args, run_deadline_s(300));
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    run_free(&r);
    const char *report[] = {"report", "-i", data, NULL};
    r = run_qprof(dir, report, 120);
    CHECK_MSG(r.exit_code == 0, "qprof report exited %d: %s", r.exit_code, r.err);
    CHECK_MSG(strstr(r.out, "address space spin [as ") && strstr(r.out, " root=0x"),
              "qprof report names no address space with its root:\n%s", r.out);
    run_free(&r);
    g_free(data);
}

static void case_os_none(bool nofp)
{
    struct guest g;
    boot(&g, "spin,spin,sys", nofp);
    const unsigned samples = 3000;
    struct folded abi = profile(&g, samples, "1", "--os=qprof-abi");
    struct folded none = profile(&g, samples, "1", "--os=none");
    GHashTable *abi_roots = root_counts(&abi), *none_roots = root_counts(&none);
    uint64_t abi_spin[8], none_spin[8], abi_sys[8], none_sys[8], user[8];
    int n_abi_spin = counts_of(abi_roots, "spin (", abi_spin);
    int n_none_spin = counts_of(none_roots, "spin [as ", none_spin);
    int n_abi_sys = counts_of(abi_roots, "sys (", abi_sys);
    int n_none_sys = counts_of(none_roots, "sys [as ", none_sys);
    CHECK_MSG(n_abi_spin == 2 && n_abi_sys == 1, "the qprof_abi run has %d spin and %d sys roots",
              n_abi_spin, n_abi_sys);
    CHECK_MSG(n_none_spin == 2, "--os none: %d spin roots, expected 2", n_none_spin);
    CHECK_MSG(n_none_sys == 1, "--os none: %d sys roots, expected 1", n_none_sys);
    CHECK_MSG(counts_of(none_roots, "user [as ", user) == 0, "an address space matched no binary");
    if (n_abi_spin == 2 && n_none_spin == 2 && n_abi_sys == 1 && n_none_sys == 1) {
        uint64_t abi_busy = busy_total(&abi, abi_roots), none_busy = busy_total(&none, none_roots);
        check_same_share("spin, the busier process", abi_spin[1], abi_busy, none_spin[1],
                         none_busy);
        check_same_share("spin, the other process", abi_spin[0], abi_busy, none_spin[0], none_busy);
        check_same_share("sys", abi_sys[0], abi_busy, none_sys[0], none_busy);
    }
    check_as_stacks_complete(&none);
    check_as_roots_recorded(&g);
    if (harness_failures) {
        folded_dump(&abi);
        folded_dump(&none);
    }
    g_hash_table_destroy(abi_roots);
    g_hash_table_destroy(none_roots);
    folded_free(&abi);
    folded_free(&none);
    vm_stop(g.vm);
}

/* --os auto, a kernel ELF that publishes nothing (the demo kernel without its qprof_abi symbol)
 * and is no Linux: address spaces stand for processes by default, no --os needed. */
static void case_os_auto_none(void)
{
    struct guest g;
    boot(&g, "spin,spin,sys", false);
    char *plain = g_strdup_printf("%s/kernel-no-abi.elf", vm_dir(g.vm));
    char *cmd = g_strdup_printf("objcopy --strip-symbol=qprof_abi '%s' '%s'", g.kernel, plain);
    REQUIRE(system(cmd) == 0);
    g.kernel = plain;
    struct folded f = profile(&g, 1000, "1", NULL);
    GHashTable *roots = root_counts(&f);
    uint64_t spin[8], sys[8];
    CHECK_MSG(counts_of(roots, "spin [as ", spin) == 2, "not two spin address spaces");
    CHECK_MSG(counts_of(roots, "sys [as ", sys) == 1, "not one sys address space");
    if (harness_failures)
        folded_dump(&f);
    g_hash_table_destroy(roots);
    folded_free(&f);
    g_free(cmd);
    g_free(plain);
    vm_stop(g.vm);
}

/* The roots of a qprof_abi run and of a --current run are the same processes ("spin (1)", ...),
 * each in the same share of the busy samples. */
static void check_same_roots(const struct folded *abi, const struct folded *cur)
{
    GHashTable *a = root_counts(abi), *c = root_counts(cur);
    GHashTableIter it;
    gpointer key, value;
    int processes = 0;
    g_hash_table_iter_init(&it, a);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        if (!strchr(key, '(') || *(uint64_t *)value < abi->total / 20)
            continue; /* idle, kernel, a process seen a few times */
        processes++;
        uint64_t *other = g_hash_table_lookup(c, key);
        CHECK_MSG(other, "--current has no root '%s'", (char *)key);
        if (other)
            check_same_share(key, *(uint64_t *)value, busy_total(abi, a), *other,
                             busy_total(cur, c));
    }
    CHECK_MSG(processes == 3, "the qprof_abi run shows %d processes, expected spin, spin, sys",
              processes);
    g_hash_table_iter_init(&it, c);
    while (g_hash_table_iter_next(&it, &key, &value))
        CHECK_MSG(!strchr(key, '(') || g_hash_table_contains(a, key),
                  "--current names a process the qprof_abi does not: '%s'", (char *)key);
    g_hash_table_destroy(a);
    g_hash_table_destroy(c);
}

/* --current with the demo kernel's own variable (`current` is `cpus[cpu_id()].proc`): the same
 * pids and names as the qprof_abi run. A missing variable or field is a one-line error before
 * anything is sampled; a pointer into unmapped memory leaves the samples without a process,
 * never with a wrong one. */
static void case_current(void)
{
    struct guest g;
    boot(&g, "spin,spin,sys", false);
    const unsigned samples = 2000;
    struct folded abi = profile(&g, samples, "1", "--os=qprof-abi");
    struct folded cur = profile(&g, samples, "1", "--current=cpus[$cpu].proc");
    check_same_roots(&abi, &cur);
    check_as_stacks_complete_in(&cur, " (");

    const char *dir = vm_dir(g.vm);
    const char *no_var[] = {"--qmp-socket", vm_qmp_path(g.vm),      "--kernel", g.kernel,
                            "--current",    "cpu_table[$cpu].proc", NULL};
    expect_failure(dir, no_var, 1, "no variable 'cpu_table'");
    const char *no_field[] = {"--qmp-socket", vm_qmp_path(g.vm),    "--kernel", g.kernel,
                              "--current",    "cpus[$cpu].process", NULL};
    expect_failure(dir, no_field, 1, "struct cpu has no field 'process'");
    const char *no_pid[] = {"--qmp-socket",  vm_qmp_path(g.vm), "--kernel",
                            g.kernel,        "--current",       "cpus[$cpu].proc",
                            "--current-pid", "process_id",      NULL};
    expect_failure(dir, no_pid, 1, "no field 'process_id'");

    /* 10 million structs past the table: beyond the direct map, unmapped. */
    struct folded wild = profile(&g, 300, "1", "--current=cpus[$cpu].proc[10000000]");
    for (guint i = 0; i < wild.stacks->len; i++)
        CHECK_MSG(!strchr(STACK(&wild, i), '('), "a process named from unmapped memory: %s",
                  STACK(&wild, i));
    if (harness_failures) {
        folded_dump(&abi);
        folded_dump(&cur);
    }
    folded_free(&abi);
    folded_free(&cur);
    folded_free(&wild);
    vm_stop(g.vm);
}

/* A position-independent build of spin (linked at 0, loaded at USER_PIE_BASE) is matched by the
 * content of its pages at the address it runs at, and symbolized there. */
static void case_os_none_pie(void)
{
    struct guest g;
    boot(&g, "spin-pie,sys", false);
    struct folded f = profile(&g, 1500, "1", "--os=none");
    uint64_t pie = count_matching(&f, pred_root_prefix, "spin-pie [as ");
    uint64_t hot = 0;
    for (guint i = 0; i < f.stacks->len; i++) {
        const char *s = STACK(&f, i);
        if (g_str_has_prefix(s, "spin-pie [as ") &&
            (strstr(s, "];_start;main;compute;hot_a") || strstr(s, "];_start;main;compute;hot_b")))
            hot += COUNT(&f, i);
    }
    fprintf(stderr, "spin-pie: %lu samples, %lu in its hot loops\n", (unsigned long)pie,
            (unsigned long)hot);
    CHECK_MSG(pie >= f.total / 5, "spin-pie has %lu of %lu samples", (unsigned long)pie,
              (unsigned long)f.total);
    CHECK_MSG(hot >= pie / 2, "only %lu of spin-pie's %lu samples in _start;main;compute;hot_*",
              (unsigned long)hot, (unsigned long)pie);
    check_as_stacks_complete(&f);
    if (harness_failures)
        folded_dump(&f);
    folded_free(&f);
    vm_stop(g.vm);
}

static unsigned count_substr(const char *text, const char *what)
{
    unsigned n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* Samples of a root named `root` ("spin [as ") whose stack has one of frames (";hot_a"...). */
static uint64_t count_root_frames(const struct folded *f, const char *root,
                                  const char *const *frames)
{
    uint64_t n = 0;
    for (guint i = 0; i < f->stacks->len; i++) {
        const char *s = STACK(f, i);
        if (!g_str_has_prefix(s, root))
            continue;
        for (const char *const *fr = frames; *fr; fr++)
            if (strstr(s, *fr)) {
                n += COUNT(f, i);
                break;
            }
    }
    return n;
}

/* recycle=25: every 250 ms the demo kernel retires a process and starts the other program in
 * its freed top-level page table, so one address-space root holds spin, then sys, then spin...
 * (guest/README.md). With --os none, each new process under a reused root is told by its code
 * and gets a root of its own, named after its binary: spin's hot loops show under spin roots,
 * and the samples that land under the other program's root are the few before a check lands
 * (at most 8 user pcs, plus margin, per reuse). */
static void case_os_none_recycle(void)
{
    struct guest g;
    boot(&g, "spin,sys recycle=25", false);
    const unsigned samples = 2000;
    char *before = vm_serial_text(g.vm);
    unsigned recycles_before = count_substr(before, "recycle pid=");
    g_free(before);
    char count[32], output[512];
    snprintf(count, sizeof count, "%u", samples);
    snprintf(output, sizeof output, "%s/recycle.folded", vm_dir(g.vm));
    const char *args[] = {GUEST_ARGS(&g), "--os=none", "--samples",     count, "--interval", "1",
                          "-o",           output,      "--no-progress", NULL};
    struct qprof_run r = run_qprof(vm_dir(g.vm), args, run_deadline_s(samples));
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    fprintf(stderr, "%s", r.err);
    char *after = vm_serial_text(g.vm);
    unsigned recycles = count_substr(after, "recycle pid=") - recycles_before;
    g_free(after);
    const char *line = strstr(r.err, "address-space roots given to a new process");
    uint64_t reused = line ? strtoull(strchr(line, ':') + 1, NULL, 10) : 0;
    struct folded f = read_folded(output);
    static const char *const spin_frames[] = {";compute", ";hot_a", ";hot_b", NULL};
    static const char *const sys_frames[] = {";user_work", ";user_mix", ";kernel_work", NULL};
    uint64_t in_as = 0;
    for (guint i = 0; i < f.stacks->len; i++)
        if (strstr(STACK(&f, i), " [as "))
            in_as += COUNT(&f, i);
    uint64_t spin_hot = count_root_frames(&f, "spin [as ", spin_frames);
    uint64_t wrong = count_root_frames(&f, "spin [as ", sys_frames) +
                     count_root_frames(&f, "sys [as ", spin_frames);
    fprintf(stderr,
            "recycle: the guest recycled %u times, qprof saw %lu roots reused; %lu of %lu "
            "process samples in spin's code under spin roots, %lu under the other program's\n",
            recycles, (unsigned long)reused, (unsigned long)spin_hot, (unsigned long)in_as,
            (unsigned long)wrong);
    REQUIRE(recycles >= 1); /* >= 0.5 s of guest time: 2000 stops, each >= 0.25 ms apart */
    CHECK_MSG(reused >= 1, "no reused root counted (the guest recycled %u times)", recycles);
    CHECK_MSG(reused <= recycles + 1, "%lu reused roots for %u recycles", (unsigned long)reused,
              recycles);
    CHECK_MSG(spin_hot * 10 >= in_as, "spin's code in only %lu of %lu process samples",
              (unsigned long)spin_hot, (unsigned long)in_as);
    CHECK_MSG(wrong <= 10 * reused + in_as / 100,
              "%lu samples under the other program's root (%lu reuses)", (unsigned long)wrong,
              (unsigned long)reused);
    if (harness_failures)
        folded_dump(&f);
    run_free(&r);
    folded_free(&f);
    vm_stop(g.vm);
}

/* One QEMU, one plugin, qprofs asking for each trigger in turn at 5 kHz: each switch flushes
 * QEMU's code cache and re-instruments every block (the counter's add on or off), and each
 * profile after it is as right as the first (spin's stacks whole, its designed 3:1 split), with
 * the summary naming the trigger asked for; then auto's choice, by its stated rule. */
static void case_plugin_trigger_switch(void)
{
    struct guest g;
    boot(&g, "spin,spin", false);
    const char *order[] = {"counter", "timer", "counter", NULL};
    for (int i = 0; i < 4; i++) {
        qprof_trigger = order[i]; /* the last: auto */
        fprintf(stderr, "--- trigger %s\n", qprof_trigger ? qprof_trigger : "auto");
        /* a second of the guest each: 3,000 samples at 10 kHz held 0.3-0.4 s, over which the
         * share drifted past its tolerance once in CI (0.694 over 1,511 spin samples) */
        profile_two_spins(&g, 5000, "0.2", NULL);
    }
    CHECK(guest_running(&g));
    vm_stop(g.vm);
}

/* ---- qprof diff and qprof annotate --------------------------------------------------------- */

/* Boots the demo guest with run=RUN, records `samples` samples into data (outside the VM's
 * directory, which goes with the VM) and stops it. */
static void record_boot(const char *run, unsigned samples, const char *data, const char *extra)
{
    struct guest g;
    boot(&g, run, false);
    char count[32];
    snprintf(count, sizeof count, "%u", samples);
    const char *args[] = {"record",        GUEST_ARGS(&g), "--samples", count, "--interval", "1",
                          "--no-progress", "-o",           data,        extra, NULL};
    struct qprof_run r = run_qprof(vm_dir(g.vm), args, run_deadline_s(samples));
    fprintf(stderr, "%s", r.err);
    CHECK_MSG(r.exit_code == 0, "qprof record exited %d", r.exit_code);
    run_free(&r);
    vm_stop(g.vm);
}

/* A record's stacks as `qprof report` folds them, with the demo's files. */
static struct folded report_folded(const char *dir, const char *data, const char *out)
{
    const char *args[] = {"report",
                          "-i",
                          data,
                          "-o",
                          out,
                          "--kernel",
                          QPROF_GUEST_KERNEL,
                          "--user-dir",
                          QPROF_GUEST_USER_DIR,
                          NULL};
    struct qprof_run r = run_qprof(dir, args, 120);
    CHECK_MSG(r.exit_code == 0, "qprof report exited %d: %s", r.exit_code, r.err);
    run_free(&r);
    return read_folded(out);
}

struct diff_row {
    double base_self, base_total, new_self, new_total, d_self, d_total;
    char status[16];
};

/* The row of function in `qprof diff`'s table; false when it has none. */
static bool diff_row(const char *table, const char *function, struct diff_row *row)
{
    gchar **lines = g_strsplit(table, "\n", -1);
    bool found = false;
    for (gchar **l = lines; *l && !found; l++) {
        gchar **tok = g_strsplit_set(g_strstrip(*l), " \t", -1);
        GPtrArray *words = g_ptr_array_new();
        for (gchar **t = tok; *t; t++)
            if (**t)
                g_ptr_array_add(words, *t);
        guint n = words->len;
        if (**l != '#' && (n == 7 || n == 8) &&
            strcmp(g_ptr_array_index(words, n - 1), function) == 0) {
            double *v[] = {&row->base_self, &row->base_total, &row->new_self,
                           &row->new_total, &row->d_self,     &row->d_total};
            for (int i = 0; i < 6; i++)
                *v[i] = strtod(g_ptr_array_index(words, i), NULL);
            g_strlcpy(row->status, n == 8 ? (const char *)g_ptr_array_index(words, 6) : "",
                      sizeof row->status);
            found = true;
        }
        g_ptr_array_free(words, TRUE);
        g_strfreev(tok);
    }
    g_strfreev(lines);
    return found;
}

/* hot_a's share as `qprof diff` prints it agrees with the share the report's own counts give
 * (to the table's rounding). */
static void check_diff_share(const char *which, double shown, uint64_t a, uint64_t n)
{
    double want = 100.0 * (double)a / (double)n;
    fprintf(stderr, "diff: hot_a's total share in %s %.2f%%, by report's counts %lu/%lu = %.3f%%\n",
            which, shown, (unsigned long)a, (unsigned long)n, want);
    CHECK_MSG(fabs(shown - want) <= 0.006, "hot_a in %s: the table says %.2f%%, the counts %.3f%%",
              which, shown, want);
}

/* GMarkup parses XML strictly enough for well-formedness: tags balanced, entities escaped. */
static void check_well_formed(const char *path)
{
    char *text = slurp(path);
    GMarkupParser parser = {0};
    GMarkupParseContext *ctx = g_markup_parse_context_new(&parser, 0, NULL, NULL);
    GError *gerr = NULL;
    bool ok = g_markup_parse_context_parse(ctx, text, -1, &gerr) &&
              g_markup_parse_context_end_parse(ctx, &gerr);
    CHECK_MSG(ok, "%s is not well-formed XML: %s", path, gerr ? gerr->message : "?");
    if (gerr)
        g_error_free(gerr);
    g_markup_parse_context_free(ctx);
    g_free(text);
}

/* The fills of the SVG's boxes titled `name`: how many are red (grew) and blue (shrank). */
static void svg_fills(const char *path, const char *name, unsigned *red, unsigned *blue)
{
    char *text = slurp(path), *title = g_strdup_printf("<title>%s (", name);
    *red = *blue = 0;
    for (const char *p = strstr(text, title); p; p = strstr(p + 1, title)) {
        const char *fill = strstr(p, "fill=\"rgb(");
        unsigned r, g, b;
        if (fill && sscanf(fill, "fill=\"rgb(%u,%u,%u)", &r, &g, &b) == 3) {
            *red += r == 255 && b < 255;
            *blue += b == 255 && r < 255;
        }
    }
    g_free(title);
    g_free(text);
}

/* difffolded's columns: every line "STACK BASE NEW"; sums of each, and of BASE's under sys. */
static void check_difffolded(const char *path, uint64_t n_new)
{
    char *text = slurp(path);
    gchar **lines = g_strsplit(text, "\n", -1);
    uint64_t sum_base = 0, sum_new = 0, sys_base = 0, sys_new = 0;
    unsigned bad = 0, n_lines = 0;
    for (gchar **l = lines; *l; l++) {
        if (!**l)
            continue;
        char *b = strrchr(*l, ' ');
        if (!b) {
            bad++;
            continue;
        }
        *b = '\0';
        char *a = strrchr(*l, ' ');
        if (!a) {
            bad++;
            continue;
        }
        uint64_t nb = strtoull(a + 1, NULL, 10), nn = strtoull(b + 1, NULL, 10);
        sum_base += nb, sum_new += nn, n_lines++;
        if (g_str_has_prefix(*l, "sys;"))
            sys_base += nb, sys_new += nn;
    }
    fprintf(stderr, "difffolded: %u lines, BASE %lu (scaled), NEW %lu, sys %lu -> %lu\n", n_lines,
            (unsigned long)sum_base, (unsigned long)sum_new, (unsigned long)sys_base,
            (unsigned long)sys_new);
    CHECK_MSG(!bad && n_lines > 0, "%u malformed difffolded lines", bad);
    CHECK_U64(sum_new, n_new);
    /* BASE scaled to NEW's total, each line rounded */
    CHECK_MSG(sum_base + n_lines >= n_new && sum_base <= n_new + n_lines,
              "BASE's scaled column sums to %lu for %lu", (unsigned long)sum_base,
              (unsigned long)n_new);
    CHECK_MSG(sys_base > 0 && sys_new == 0, "sys: %lu in BASE, %lu in NEW", (unsigned long)sys_base,
              (unsigned long)sys_new);
    g_strfreev(lines);
    g_free(text);
}

/* `go tool pprof -diff_base` reads the pair: hot_a grew, user_work (sys's) went. */
static void check_pprof_diff(const char *dir, const char *base, const char *new_pb)
{
    if (system("command -v go >/dev/null 2>&1") != 0) {
        fprintf(stderr, "no go on PATH: go tool pprof -diff_base not checked\n");
        return;
    }
    char *cmd = g_strdup_printf("cd %s && HOME=%s GOCACHE=%s/gocache go tool pprof -top "
                                "-nodecount=1000 -sample_index=samples -diff_base %s %s 2>&1",
                                dir, dir, dir, base, new_pb);
    FILE *f = popen(cmd, "r");
    g_free(cmd);
    char line[512];
    double hot_a = 0, user_work = 0; /* flat, and cumulative (user_work's own samples are few) */
    bool table = false;
    while (f && fgets(line, sizeof line, f)) {
        fputs(line, stderr);
        double flat, cum;
        char name[256];
        table |= strstr(line, "flat%") != NULL;
        if (!table || sscanf(line, " %lf %*s %*s %lf %*s %255s", &flat, &cum, name) != 3)
            continue;
        hot_a = strcmp(name, "hot_a") == 0 ? flat : hot_a;
        user_work = strcmp(name, "user_work") == 0 ? cum : user_work;
    }
    CHECK_MSG(f && pclose(f) == 0 && table, "go tool pprof -diff_base failed");
    CHECK_MSG(hot_a > 0 && user_work < 0, "pprof -diff_base: hot_a flat %+.0f, user_work cum %+.0f",
              hot_a, user_work);
}

/* Two boots, `run=spin,sys` then `run=spin,spin`, compared: sys's own functions vanish, hot_a's
 * share rises by what each record's counts say, and each output reads. */
static void case_diff(void)
{
    char *dir = g_dir_make_tmp("qprof-diff-XXXXXX", NULL);
    REQUIRE(dir);
    char *base = g_strdup_printf("%s/base.data", dir),
         *new_data = g_strdup_printf("%s/new.data", dir);
    record_boot("spin,sys", 3000, base, NULL);
    record_boot("spin,spin", 3000, new_data, NULL);
    char *bf = g_strdup_printf("%s/base.folded", dir), *nf = g_strdup_printf("%s/new.folded", dir);
    struct folded fb = report_folded(dir, base, bf), fn = report_folded(dir, new_data, nf);
    uint64_t a0 = count_matching(&fb, pred_has_frame, "hot_a"),
             a1 = count_matching(&fn, pred_has_frame, "hot_a");
    char *svg = g_strdup_printf("%s/diff.svg", dir), *df = g_strdup_printf("%s/diff.folded", dir);
    char *pb_new = g_strdup_printf("%s/new.pb.gz", dir),
         *pb_base = g_strdup_printf("%s/base.pb.gz", dir);
    const char *args[] = {"diff",
                          "--kernel",
                          QPROF_GUEST_KERNEL,
                          "--user-dir",
                          QPROF_GUEST_USER_DIR,
                          "--top",
                          "0",
                          base,
                          new_data,
                          "-o",
                          svg,
                          "-o",
                          df,
                          "-o",
                          pb_new,
                          "--diff-base",
                          pb_base,
                          NULL};
    struct qprof_run r = run_qprof(dir, args, 120);
    fprintf(stderr, "%s%s", r.out, r.err);
    CHECK_MSG(r.exit_code == 0, "qprof diff exited %d", r.exit_code);
    struct diff_row row = {0};
    CHECK_MSG(diff_row(r.out, "hot_a", &row), "no hot_a row");
    check_diff_share("BASE", row.base_total, a0, fb.total);
    check_diff_share("NEW", row.new_total, a1, fn.total);
    double p0 = (double)a0 / (double)fb.total, p1 = (double)a1 / (double)fn.total;
    double tol = 100 * (share_tolerance(p0, fb.total, 0) + share_tolerance(p1, fn.total, 0));
    CHECK_MSG(fabs(row.d_total - (row.new_total - row.base_total)) <= 0.011,
              "hot_a's change %+.2f is not NEW - BASE", row.d_total);
    /* one spin of two processes, then both: hot_a's share grows well past the noise */
    CHECK_MSG(row.d_total > tol, "hot_a's total share rose by %+.2f points, noise %.2f",
              row.d_total, tol);
    CHECK_STR(row.status, "");
    const char *sys_own[] = {"user_work", "user_mix", NULL};
    for (int i = 0; sys_own[i]; i++) {
        struct diff_row s = {0};
        CHECK_MSG(diff_row(r.out, sys_own[i], &s), "no %s row", sys_own[i]);
        CHECK_MSG(strcmp(s.status, "vanished") == 0 && s.base_total > 0 && s.new_total == 0,
                  "%s: status '%s', %.2f%% -> %.2f%%", sys_own[i], s.status, s.base_total,
                  s.new_total);
    }
    check_well_formed(svg);
    char *text = slurp(svg);
    CHECK_MSG(strstr(text, "id=\"legend\"") && strstr(text, ">grew<") && strstr(text, ">shrank<"),
              "the SVG has no legend");
    g_free(text);
    unsigned red, blue;
    svg_fills(svg, "hot_a", &red, &blue);
    CHECK_MSG(red > 0 && blue == 0, "hot_a's boxes: %u red, %u blue", red, blue);
    check_difffolded(df, fn.total);
    check_pprof_diff(dir, pb_base, pb_new);
    /* the same record read by annotate: the demo kernel's timer_tick takes its lock through
     * an inlined spin_lock, named beside the source (shown whether sampled or not) */
    const char *tick[] = {"annotate",         "-i",         base, "--stdio", "--kernel",
                          QPROF_GUEST_KERNEL, "timer_tick", NULL};
    struct qprof_run t = run_qprof(dir, tick, 120);
    CHECK_MSG(t.exit_code == 0, "qprof annotate timer_tick exited %d: %s", t.exit_code, t.err);
    CHECK_MSG(strstr(t.out, "timer_tick [kernel.elf]") && strstr(t.out, "[inlined: spin_lock]"),
              "timer_tick's inlined spin_lock is not named:\n%s", t.out);
    run_free(&t);
    run_free(&r);
    folded_free(&fb);
    folded_free(&fn);
    const char *files[] = {base, new_data, bf, nf, svg, df, pb_new, pb_base, NULL};
    for (int i = 0; files[i]; i++)
        unlink(files[i]);
    char *gocache = g_strdup_printf("rm -rf '%s/gocache'", dir);
    CHECK(system(gocache) == 0);
    g_free(gocache);
    rmdir(dir);
    g_free(base), g_free(new_data), g_free(bf), g_free(nf), g_free(svg), g_free(df);
    g_free(pb_new), g_free(pb_base), g_free(dir);
}

struct annotated {
    uint64_t samples;               /* the function's, from its header */
    GArray *addrs, *counts, *exact; /* uint64_t per instruction line */
    GPtrArray *texts;               /* char *: the instruction */
};

/* Parses `qprof annotate --stdio`'s first function: its header, then "N PCT% [EXACT] M: ADDR:
 * TEXT" per instruction (M: '*' on a hot line), source lines (": file:line text") between. */
static struct annotated parse_annotate(const char *out, bool with_exact, char *name, size_t cap)
{
    struct annotated a = {.addrs = g_array_new(FALSE, FALSE, sizeof(uint64_t)),
                          .counts = g_array_new(FALSE, FALSE, sizeof(uint64_t)),
                          .exact = g_array_new(FALSE, FALSE, sizeof(uint64_t)),
                          .texts = g_ptr_array_new_with_free_func(g_free)};
    gchar **lines = g_strsplit(out, "\n", -1);
    int functions = 0;
    for (gchar **l = lines; *l && functions < 2; l++) {
        const char *head = strstr(*l, "Percent");
        if (head && strstr(*l, " samples, 0x")) {
            functions++;
            if (functions == 1) {
                const char *colon = strstr(head, ": ");
                sscanf(colon + 2, "%*s %*s %lu", (unsigned long *)&a.samples);
                char fn[128] = "";
                sscanf(colon + 2, "%127s", fn);
                g_strlcpy(name, fn, cap);
            }
            continue;
        }
        unsigned long n, x = 0;
        double pct;
        int used = 0;
        if (functions != 1 || sscanf(*l, " %lu %lf%%%n", &n, &pct, &used) != 2)
            continue;
        const char *rest = *l + used;
        if (with_exact)
            x = strtoul(rest, (char **)&rest, 10);
        const char *addr = strstr(rest, ": ");
        if (!addr)
            continue;
        char *end;
        uint64_t at = strtoull(addr + 2, &end, 16), count = n, exact = x;
        g_array_append_val(a.addrs, at);
        g_array_append_val(a.counts, count);
        g_array_append_val(a.exact, exact);
        g_ptr_array_add(a.texts, g_strdup(g_strstrip(end + 1)));
    }
    g_strfreev(lines);
    return a;
}

static void annotated_free(struct annotated *a)
{
    g_array_free(a->addrs, TRUE);
    g_array_free(a->counts, TRUE);
    g_array_free(a->exact, TRUE);
    g_ptr_array_free(a->texts, TRUE);
}

/* The loop: from the target of the function's backward jump to the jump itself, as index range
 * [*from, *to]; false when there is none. */
static bool find_loop(const struct annotated *a, guint *from, guint *to)
{
    for (guint i = 0; i < a->addrs->len; i++) {
        const char *t = g_ptr_array_index(a->texts, i);
        uint64_t at = g_array_index(a->addrs, uint64_t, i);
        const char *target = strstr(t, "0x");
        uint64_t dest = target && (t[0] == 'j' || t[0] == 'b') ? strtoull(target, NULL, 16) : 0;
        if (!dest || dest >= at || dest < g_array_index(a->addrs, uint64_t, 0))
            continue;
        for (guint k = 0; k <= i; k++)
            if (g_array_index(a->addrs, uint64_t, k) == dest) {
                *from = k;
                *to = i;
                return true;
            }
    }
    return false;
}

static uint64_t sum_range(const GArray *v, guint from, guint to)
{
    uint64_t n = 0;
    for (guint i = from; i <= to && i < v->len; i++)
        n += g_array_index(v, uint64_t, i);
    return n;
}

/* hot_a's loop carries nearly all its samples, and the source shows beside the code. */
static void check_hot_a_annotated(const char *out, bool with_exact)
{
    char name[128] = "";
    struct annotated a = parse_annotate(out, with_exact, name, sizeof name);
    CHECK_STR(name, "hot_a");
    guint from = 0, to = 0;
    CHECK_MSG(find_loop(&a, &from, &to), "no backward jump in hot_a's %u instructions",
              a.addrs->len);
    uint64_t in_loop = sum_range(a.counts, from, to), all = sum_range(a.counts, 0, a.addrs->len);
    fprintf(stderr, "annotate: hot_a %lu samples (%lu on its lines), %lu in the loop %#lx-%#lx\n",
            (unsigned long)a.samples, (unsigned long)all, (unsigned long)in_loop,
            (unsigned long)g_array_index(a.addrs, uint64_t, from),
            (unsigned long)g_array_index(a.addrs, uint64_t, to));
    CHECK_U64(all, a.samples);
    CHECK_MSG(a.samples >= 100, "hot_a has only %lu samples", (unsigned long)a.samples);
    CHECK_MSG(in_loop * 10 >= a.samples * 9, "the loop has %lu of hot_a's %lu samples",
              (unsigned long)in_loop, (unsigned long)a.samples);
    CHECK_MSG(strstr(out, "spin.c:") && strstr(out, "6364136223846793005ull"),
              "no spin.c source lines beside the code");
    if (with_exact) {
        /* every instruction of the loop ran as often as the loop's branch */
        uint64_t runs = g_array_index(a.exact, uint64_t, to);
        fprintf(stderr, "annotate --exact: the loop's branch ran %lu times\n", (unsigned long)runs);
        CHECK_MSG(runs > 20000, "hot_a's loop ran %lu times by the exact counts",
                  (unsigned long)runs);
        for (guint i = from; i <= to; i++)
            CHECK_MSG(g_array_index(a.exact, uint64_t, i) == runs,
                      "loop instruction %u ran %lu times, its branch %lu", i,
                      (unsigned long)g_array_index(a.exact, uint64_t, i), (unsigned long)runs);
    }
    annotated_free(&a);
}

static void case_annotate(bool exact)
{
    char *dir = g_dir_make_tmp("qprof-annotate-XXXXXX", NULL);
    REQUIRE(dir);
    char *data = g_strdup_printf("%s/spin.data", dir);
    record_boot("spin", 2000, data, exact ? "--exact" : NULL);
    const char *named[] = {"annotate",   "-i",
                           data,         "--stdio",
                           "--kernel",   QPROF_GUEST_KERNEL,
                           "--user-dir", QPROF_GUEST_USER_DIR,
                           "hot_a",      NULL};
    struct qprof_run r = run_qprof(dir, named, 120);
    fprintf(stderr, "%s%s", r.out, r.err);
    CHECK_MSG(r.exit_code == 0, "qprof annotate exited %d", r.exit_code);
    CHECK_MSG(!exact || strstr(r.out, "Exact"), "no Exact column");
    check_hot_a_annotated(r.out, exact);
    run_free(&r);
    /* no function named: the hottest first; spin's user code makes it hot_a (idle time is the
     * kernel's) */
    if (!exact) {
        const char *hottest[] = {"annotate",           "-i",          data, "--stdio", "--user-dir",
                                 QPROF_GUEST_USER_DIR, "--user-only", NULL};
        r = run_qprof(dir, hottest, 120);
        CHECK_MSG(r.exit_code == 0, "qprof annotate without a function exited %d: %s", r.exit_code,
                  r.err);
        check_hot_a_annotated(r.out, false);
        run_free(&r);
    }
    unlink(data);
    rmdir(dir);
    g_free(data);
    g_free(dir);
}

/* Drops CAP_SYS_PTRACE from the bounding set before qprof is run: a root qprof then holds all
 * of root's capabilities but that one, and may not read a root QEMU's memory. */
static int drop_ptrace_cap(void)
{
    return prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) == 0 ? 0 : 125;
}

/* Refusals against a real QEMU without the RAM file: --memory process fails in one line that
 * says why; auto says it in one line and reads through memsave, and the summary says memsave. */
static void case_procmem_no_ptrace(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: dropping CAP_SYS_PTRACE from qprof's bounding set needs root\n");
        exit(VM_SKIP);
    }
    struct guest g;
    boot(&g, "spin", false);
    char out[512], err_path[512], output[512];
    snprintf(out, sizeof out, "%s/qprof.out", vm_dir(g.vm));
    snprintf(err_path, sizeof err_path, "%s/qprof.err", vm_dir(g.vm));
    snprintf(output, sizeof output, "%s/out.folded", vm_dir(g.vm));
    const char *forced[] = {GUEST_ARGS(&g), "--memory", "process",       "--samples", "20",
                            "-o",           output,     "--no-progress", NULL};
    const char *auto_args[] = {GUEST_ARGS(&g), "--samples",     "20", "-o",
                               output,         "--no-progress", NULL};
    pid_t pid = child_start(QPROF_BIN, forced, vm_dir(g.vm), out, err_path, drop_ptrace_cap);
    struct qprof_run r = wait_qprof(vm_dir(g.vm), pid, 60);
    CHECK_MSG(r.exit_code == 1, "--memory process without CAP_SYS_PTRACE exited %d: %s",
              r.exit_code, r.err);
    CHECK_MSG(strstr(r.err, "--memory process") && strstr(r.err, "CAP_SYS_PTRACE") &&
                  count_lines(r.err) == 1,
              "want one line naming CAP_SYS_PTRACE: %s", r.err);
    run_free(&r);
    pid = child_start(QPROF_BIN, auto_args, vm_dir(g.vm), out, err_path, drop_ptrace_cap);
    r = wait_qprof(vm_dir(g.vm), pid, run_deadline_s(20));
    CHECK_MSG(r.exit_code == 0, "auto without CAP_SYS_PTRACE exited %d: %s", r.exit_code, r.err);
    CHECK_MSG(count_substr(r.err, "qprof: process memory: ") == 1 &&
                  strstr(r.err, "CAP_SYS_PTRACE") && strstr(r.err, "memory: memsave)"),
              "want one line saying why, then memsave: %s", r.err);
    run_free(&r);
    vm_stop(g.vm);
}

#define OTHER_QEMU_UID 65534 /* nobody: another user's QEMU */
#define THIRD_UID      65533 /* qprof's: neither root nor QEMU's user */

/* qprof as a third user, without any capability: the kernel refuses it QEMU's memory. */
static int become_third_user(void)
{
    if (setgroups(0, NULL) != 0 || setresgid(THIRD_UID, THIRD_UID, THIRD_UID) != 0 ||
        setresuid(THIRD_UID, THIRD_UID, THIRD_UID) != 0)
        return 125;
    return 0;
}

/* One run of 300 samples of spin: the refusal (if any) in one line, the backend the summary
 * names, and the profile's hot loops in their 75:25. */
static void other_user_run(struct guest *g, int (*before_exec)(void), const char *refusal,
                           const char *backend)
{
    char out[512], err_path[512], output[512];
    snprintf(out, sizeof out, "%s/qprof.out", vm_dir(g->vm));
    snprintf(err_path, sizeof err_path, "%s/qprof.err", vm_dir(g->vm));
    snprintf(output, sizeof output, "%s/out.folded", vm_dir(g->vm));
    const char *args[] = {GUEST_ARGS(g), "--samples", "300", "-o", output, "--no-progress", NULL};
    unlink(output);
    pid_t pid = child_start(QPROF_BIN, args, vm_dir(g->vm), out, err_path, before_exec);
    struct qprof_run r = wait_qprof(vm_dir(g->vm), pid, run_deadline_s(300));
    fprintf(stderr, "%s", r.err);
    CHECK_MSG(r.exit_code == 0, "qprof exited %d: %s", r.exit_code, r.err);
    if (refusal)
        CHECK_MSG(count_substr(r.err, "qprof: process memory: ") == 1 &&
                      count_substr(r.err, refusal) == 1,
                  "want one line saying '%s': %s", refusal, r.err);
    else
        CHECK_MSG(!strstr(r.err, "qprof: process memory: "), "a refusal: %s", r.err);
    CHECK_MSG(strstr(r.err, backend) != NULL, "the summary does not say '%s': %s", backend, r.err);
    run_free(&r);
    struct folded f = read_folded(output);
    CHECK_MSG(f.total == 300, "asked for 300 samples, the file holds %lu", (unsigned long)f.total);
    check_spin_ratio(&f);
    folded_free(&f);
}

/* Another user's QEMU (nobody's), without the RAM file: a qprof of a third user, and root's
 * without CAP_SYS_PTRACE, are refused its memory in one line that says why and read through
 * HMP (memsave's files lie in qprof's private directory, which that QEMU cannot write); root's
 * reads it. */
static void case_procmem_other_user(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: starting QEMU as another user needs root\n");
        exit(VM_SKIP);
    }
    qemu_uid = OTHER_QEMU_UID;
    struct guest g;
    boot(&g, "spin,spin", false);
    other_user_run(&g, become_third_user, "is another user's (uid 65534; qprof runs as uid 65533)",
                   "memory: hmp)");
    other_user_run(&g, drop_ptrace_cap, "is another user's (uid 65534; qprof runs as uid 0)",
                   "memory: hmp)");
    other_user_run(&g, NULL, NULL, PROCMEM_SUMMARY);
    vm_stop(g.vm);
}

/* Yama's ptrace_scope 1 or more, where the kernel has Yama: QEMU and qprof of one user (a third
 * one, without capabilities), qprof not QEMU's parent. One line names the setting, and memsave
 * (QEMU's user may write qprof's directory) reads on. The setting itself is left as it is. */
static void case_procmem_yama(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    int scope = -1;
    if (f && fscanf(f, "%d", &scope) != 1)
        scope = -1;
    if (f)
        fclose(f);
    if (!f || scope < 1 || geteuid() != 0) {
        fprintf(stderr, "SKIP: %s\n",
                !f          ? "no Yama on this kernel (/proc/sys/kernel/yama absent)"
                : scope < 1 ? "Yama's ptrace_scope is 0 here: nothing refuses"
                            : "starting QEMU as another user needs root");
        exit(VM_SKIP);
    }
    qemu_uid = THIRD_UID;
    struct guest g;
    boot(&g, "spin,spin", false);
    other_user_run(&g, become_third_user, "Yama's kernel.yama.ptrace_scope is", "memory: memsave)");
    vm_stop(g.vm);
}

/* The prefixes of an argument choose the target, the plugin's trigger and the memory: plugin-
 * [counter-|timer-], gdb-, and procmem- after them; the case itself is looked up by the whole
 * argument in run_case's table. */
static void choose_target(const char *which)
{
    if (g_str_has_prefix(which, "plugin-")) {
        transport = OVER_PLUGIN;
        which += 7;
        if (g_str_has_prefix(which, "counter-"))
            plugin_args = "trigger=counter";
        else if (g_str_has_prefix(which, "timer-"))
            qprof_trigger = "timer";
    } else if (g_str_has_prefix(which, "gdb-")) {
        transport = OVER_GDB;
    }
    /* procmem-: QEMU started without the shared RAM file (guest memory out of its process) */
    no_ram_file = strstr(which, "procmem-") != NULL;
    /* plugin-alone-: no --qmp-socket beside the plugin, and no RAM file */
    plugin_alone = transport == OVER_PLUGIN && g_str_has_prefix(which, "alone-");
    no_ram_file |= plugin_alone;
}

/* Every case, named once: CMake makes the ctest cases from the CASE lines (qp_add_cases in
 * tests/CMakeLists.txt), so the table below is the one list of this binary's cases. Each line:
 * the argument, what it runs, and the ctest cases that run it (NAME,VAR=VALUE for one run with
 * that environment: QPROF_QEMU=10 boots QEMU 10, QPROF_ACCEL=kvm hardware KVM). */
static int run_case(const char *which)
{
#define CASE(argument, call, ctest_cases)                                                          \
    if (strcmp(which, argument) == 0) {                                                            \
        call;                                                                                      \
        return harness_result();                                                                   \
    }
    // clang-format off
    CASE("spin",                   case_spin(false),               "e2e_spin e2e_qemu10_spin,QPROF_QEMU=10 e2e_kvm_spin,QPROF_ACCEL=kvm")
    CASE("spin-nofp",              case_spin(true),                "e2e_spin-nofp")
    CASE("sys",                    case_sys(false),                "e2e_sys e2e_qemu10_sys,QPROF_QEMU=10 e2e_kvm_sys,QPROF_ACCEL=kvm")
    CASE("sys-nofp",               case_sys(true),                 "e2e_sys-nofp")
    CASE("sys-dframe",             case_variant("sys-dframe"),     "e2e_sys-dframe")
    CASE("sys-fponly",             case_variant("sys-fponly"),     "e2e_sys-fponly")
    CASE("modes",                  case_modes(),                   "e2e_modes e2e_qemu10_modes,QPROF_QEMU=10")
    CASE("one-shot",               case_one_shot(),                "e2e_one-shot e2e_qemu10_one_shot,QPROF_QEMU=10 e2e_kvm_one-shot,QPROF_ACCEL=kvm")
    CASE("sigint",                 case_sigint(),                  "e2e_sigint e2e_kvm_sigint,QPROF_ACCEL=kvm")
    CASE("qemu-exit",              case_qemu_exit(),               "e2e_qemu-exit e2e_kvm_qemu-exit,QPROF_ACCEL=kvm")
    CASE("usage",                  case_usage(),                   "e2e_usage")
    CASE("formats",                case_formats(),                 "e2e_formats")
    CASE("record-sigkill",         case_record_sigkill(),          "e2e_record-sigkill")
    CASE("os-none",                case_os_none(false),            "e2e_os-none")
    CASE("os-none-nofp",           case_os_none(true),             "e2e_os-none-nofp")
    CASE("os-none-pie",            case_os_none_pie(),             "e2e_os-none-pie")
    CASE("os-auto-none",           case_os_auto_none(),            "e2e_os-auto-none")
    CASE("current",                case_current(),                 "e2e_current")
    CASE("os-none-recycle",        case_os_none_recycle(),         "e2e_os-none-recycle")
    CASE("diff",                   case_diff(),                    "e2e_diff")
    CASE("annotate",               case_annotate(false),           "e2e_annotate")
    CASE("gdb-spin",               case_spin(false),               "e2e_gdb_spin e2e_qemu10_gdb_spin,QPROF_QEMU=10")
    CASE("gdb-sys",                case_sys(false),                "e2e_gdb_sys e2e_qemu10_gdb_sys,QPROF_QEMU=10")
    CASE("gdb-one-shot",           case_one_shot(),                "e2e_gdb_one_shot e2e_qemu10_gdb_one_shot,QPROF_QEMU=10")
    CASE("gdb-sigint",             case_sigint(),                  "e2e_gdb_sigint")
    CASE("gdb-qemu-exit",          case_qemu_exit(),               "e2e_gdb_qemu_exit")
    CASE("gdb-busy",               case_gdb_busy(),                "e2e_gdb_busy")
    CASE("gdb-sigkill",            case_gdb_sigkill(),             "e2e_gdb_sigkill")
    CASE("gdb-auto",               case_gdb_auto(),                "e2e_gdb_auto")
    CASE("gdb-os-none",            case_os_none(false),            "e2e_gdb_os_none")
    CASE("plugin-spin",            case_spin(false),               "e2e_plugin_spin")
    CASE("plugin-spin-nofp",       case_spin(true),                "e2e_plugin_spin_nofp")
    CASE("plugin-sys",             case_sys(false),                "e2e_plugin_sys")
    CASE("plugin-one-shot",        case_one_shot(),                "e2e_plugin_one_shot")
    CASE("plugin-sigint",          case_sigint(),                  "e2e_plugin_sigint")
    CASE("plugin-qemu-exit",       case_qemu_exit(),               "e2e_plugin_qemu_exit")
    CASE("plugin-restart",         case_plugin_restart(),          "e2e_plugin_restart")
    CASE("plugin-busy",            case_plugin_busy(),             "e2e_plugin_busy")
    CASE("plugin-missing",         case_plugin_missing(),          "e2e_plugin_missing")
    CASE("plugin-full-ring",       case_plugin_full_ring(),        "e2e_plugin_full_ring")
    CASE("plugin-spin-20k",        case_plugin_spin_20k(),         "e2e_plugin_spin_20k")
    CASE("plugin-one-core",        case_plugin_one_core(),         "e2e_plugin_one_core")
    CASE("plugin-pinned-auto",     case_plugin_pinned_auto(),      "e2e_plugin_pinned_auto")
    CASE("plugin-sys-10k",         case_plugin_sys_10k(),          "e2e_plugin_sys_10k")
    CASE("plugin-counter-spin",    case_spin(false),               "e2e_plugin_counter_spin")
    CASE("plugin-counter-sys",     case_sys(false),                "e2e_plugin_counter_sys")
    CASE("plugin-period",          case_plugin_period(),           "e2e_plugin_period")
    CASE("plugin-timer-sys-10k",   case_plugin_sys_10k(),          "e2e_plugin_timer_sys_10k")
    CASE("plugin-exact",           case_plugin_exact(),            "e2e_plugin_exact")
    CASE("plugin-counter-exact",   case_plugin_exact(),            "e2e_plugin_counter_exact")
    CASE("plugin-trigger-switch",  case_plugin_trigger_switch(),   "e2e_plugin_trigger_switch")
    CASE("plugin-annotate-exact",  case_annotate(true),            "e2e_plugin_annotate_exact")
    CASE("procmem-spin",           case_spin(false),               "e2e_procmem_spin")
    CASE("procmem-sys",            case_sys(false),                "e2e_procmem_sys")
    CASE("procmem-no-ptrace",      case_procmem_no_ptrace(),       "e2e_procmem_no_ptrace")
    CASE("procmem-other-user",     case_procmem_other_user(),      "e2e_procmem_other_user")
    CASE("procmem-yama",           case_procmem_yama(),            "e2e_procmem_yama")
    CASE("gdb-procmem-spin",       case_spin(false),               "e2e_gdb_procmem_spin")
    CASE("gdb-procmem-sys",        case_sys(false),                "e2e_gdb_procmem_sys")
    CASE("plugin-procmem-spin",    case_spin(false),               "e2e_plugin_procmem_spin")
    CASE("plugin-alone-spin",      case_spin(false),               "e2e_plugin_alone_spin")
    CASE("plugin-alone-sys",       case_sys(false),                "e2e_plugin_alone_sys")
    // clang-format on
#undef CASE
    fprintf(stderr, "unknown case '%s'\n", which);
    return 2;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    choose_target(which);
    return run_case(which);
}
