/* The riscv64 and aarch64 demo guests (guest/kernel/riscv64/, guest/kernel/aarch64/; this file
 * is built once for each, DEMO_AARCH64 choosing) under a real qemu-system-riscv64 or
 * qemu-system-aarch64, profiled by the qprof binary over the gdbstub (with QMP for the shared
 * RAM file), with the x86_64 e2e suite's assertions: processes named, every spin stack complete
 * from _start, hot_a 75% of hot_a + hot_b, idle separate; sys's kernel stacks from its user
 * frames through the trap entry to kwork_mix, about half its time in the kernel. Cases: spin,
 * sys (one CPU), smp4 (four CPUs under MTTCG, one process pinned to each); qmp_spin, qmp_sys and
 * qmp_smp4 are the same through QMP alone (no --gdb: `info registers -a`), with the same
 * assertions. riscv64 over QMP infers the mode from the page tables and reads memory from the
 * shared RAM file; aarch64 over QMP reads memory through QEMU's translation (HMP reads, a few
 * ms a sample: fewer samples, tolerances sized from them) and knows no halted state, so its idle
 * CPUs are the kernel's idle loop stacks. plugin_spin, plugin_sys and plugin_smp4 sample through
 * qprof-plugin.so inside QEMU 10 (xtask/qemu10.sh's qemu-system-riscv64 or -aarch64), the guest
 * never stopped, with the same assertions (a sample per vCPU: smp4 takes four times as many).
 *
 * Skips (77) without the QEMU or the guest (its cross compiler). */
#define _GNU_SOURCE
#include "child.h"
#include "harness.h"

#include <glib.h>
#include <math.h>
#include <signal.h>
#include <unistd.h>

#if defined(DEMO_AARCH64)
#define DEMO_QEMU      "qemu-system-aarch64"
#define DEMO_CC        "aarch64-linux-gnu-gcc"
#define DEMO_MACHINE   "-cpu", "cortex-a57" /* EL1, no firmware */
#define QMP_MEMORY     "memory: hmp"
#define QMP_SAMPLES(n) ((n) / 3) /* a few ms a sample through HMP reads */
#define QMP_HAS_HALTED false
/* A stop at a vector stub's first instruction (el0_irq_vector...), where the interrupted pc is
 * only in ELR_EL1, which QMP does not give: the stack ends there, marked. QEMU's stops land on
 * kernel entries often (docs/accuracy.md, "TCG and the moment of a sample"): 5-10% of the samples
 * with one CPU at 1 ms, up to half with four under MTTCG at 10 ms. */
#define QMP_BLIND_STOP ";[truncated];el"
#define QMP_BLIND_LEAF "_vector "
#else
#define DEMO_QEMU      "qemu-system-riscv64"
#define DEMO_CC        "riscv64-linux-gnu-gcc"
#define DEMO_MACHINE   "-bios", "none"
#define QMP_MEMORY     "memory: direct"
#define QMP_SAMPLES(n) (n)
#define QMP_HAS_HALTED true
#define QMP_BLIND_STOP "" /* none */
#define QMP_BLIND_LEAF ""
#endif

/* The guest build a case boots: the default (frame pointers and CFI in .eh_frame), or with the
 * prefix dframe_ (CFI in .debug_frame only, in the host files) or fponly_ (frame pointers and no
 * CFI at all), guest/CMakeLists.txt. */
static const char *demo_kernel = QPROF_DEMO_DIR "/kernel.elf";
static const char *demo_user = QPROF_DEMO_DIR "/user";

struct stacks {
    char **lines; /* "frame;frame;... count" */
    uint64_t total;
};

static uint64_t line_count(const char *line)
{
    const char *sp = strrchr(line, ' ');
    return sp ? strtoull(sp + 1, NULL, 10) : 0;
}

static struct stacks load_folded(const char *path)
{
    char *text = NULL;
    g_file_get_contents(path, &text, NULL, NULL);
    struct stacks s = {g_strsplit(text ? text : "", "\n", -1), 0};
    g_free(text);
    for (char **l = s.lines; *l; l++)
        s.total += line_count(*l);
    return s;
}

static bool has_frame(const char *line, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(line, name); p; p = strstr(p + 1, name))
        if ((p == line || p[-1] == ';') && (p[n] == ';' || p[n] == ' '))
            return true;
    return false;
}

static uint64_t count_frame(const struct stacks *s, const char *name)
{
    uint64_t n = 0;
    for (char **l = s->lines; *l; l++)
        n += has_frame(*l, name) ? line_count(*l) : 0;
    return n;
}

/* x86_64's e2e band: 4.4 standard deviations of a binomial share, never below floor. */
static double share_tolerance(double p, uint64_t n, double floor)
{
    double t = 4.4 * sqrt(p * (1 - p) / (double)(n ? n : 1));
    return t > floor ? t : floor;
}

struct vm {
    char dir[32];
    char *gdb, *qmp, *serial, *plugin;
    pid_t pid;
};

/* Which transport a case samples through: the gdbstub (with QMP for the RAM file), QMP, or the
 * plugin (with QMP for the RAM file). */
static bool over_qmp, over_plugin;
/* lowhalf_current_CASE: --current EXPR for qprof (the kernel's own variable names the process) */
static const char *current_expr;
/* lowhalf_user_regs_CASE: --current as above and --user-regs EXPR (the trapframe) */
static const char *user_regs_expr;
/* procmem_CASE: QEMU without the shared RAM file; qprof reads guest memory out of the QEMU
 * process (its summary must say so) */
static bool no_ram_file;
/* plugin_alone_CASE: the plugin without --qmp-socket (and, with procmem_, without a RAM file) */
static bool plugin_alone;

static bool serial_has(const struct vm *vm, const char *text)
{
    char *log = NULL;
    g_file_get_contents(vm->serial, &log, NULL, NULL);
    bool has = log && strstr(log, text);
    g_free(log);
    return has;
}

static void vm_boot(struct vm *vm, const char *qemu, const char *run, int harts)
{
    g_strlcpy(vm->dir, "/tmp/qpdemoXXXXXX", sizeof vm->dir);
    REQUIRE(mkdtemp(vm->dir));
    vm->gdb = g_strdup_printf("%s/gdb", vm->dir);
    vm->qmp = g_strdup_printf("%s/qmp", vm->dir);
    vm->serial = g_strdup_printf("%s/serial", vm->dir);
    vm->plugin = g_strdup_printf("%s/plugin", vm->dir);
    char *plugin = g_strdup_printf("%s,socket=%s", QPROF_PLUGIN_SO, vm->plugin);
    char *qemu_dir = g_path_get_dirname(QPROF_QEMU10);
    char *datadir = g_strdup_printf("%s/../share/qemu", qemu_dir); /* QEMU 10's own firmware */
    char *mem =
        g_strdup_printf("memory-backend-file,id=mem,size=128M,mem-path=%s/ram,share=on", vm->dir);
    char *chardev = g_strdup_printf("socket,path=%s,server=on,wait=off,id=g", vm->gdb);
    char *qmp = g_strdup_printf("unix:%s,server=on,wait=off", vm->qmp);
    char *serial = g_strdup_printf("file:%s", vm->serial);
    char *smp = g_strdup_printf("%d", harts);
    char *append = g_strdup_printf("run=%s", run);
    const char *args[] = {"-machine",
                          no_ram_file ? "virt" : "virt,memory-backend=mem",
                          "-m",
                          "128M",
                          no_ram_file ? "-name" : "-object",
                          no_ram_file ? "qprof-demo" : mem,
                          DEMO_MACHINE,
                          "-kernel",
                          demo_kernel,
                          "-append",
                          append,
                          "-smp",
                          smp,
                          "-accel",
                          harts > 1 ? "tcg,thread=multi" : "tcg",
                          "-display",
                          "none",
                          "-monitor",
                          "none",
                          "-serial",
                          serial,
                          "-chardev",
                          chardev,
                          "-gdb",
                          "chardev:g",
                          "-qmp",
                          qmp,
                          over_plugin ? "-plugin" : NULL, /* the system's QEMU: ends here */
                          plugin,
                          "-L",
                          datadir,
                          NULL};
    char *out = g_strdup_printf("%s/qemu.out", vm->dir);
    vm->pid = child_start(qemu, args, vm->dir, out, out, child_die_with_parent);
    REQUIRE(vm->pid > 0);
    /* Up once the kernel has started its programs (generous deadline: the host is shared). */
    for (int i = 0; i < 1200 && !serial_has(vm, "\nready"); i++)
        usleep(50000);
    REQUIRE(serial_has(vm, "\nready") || (fprintf(stderr, "guest not ready\n"), 0));
    g_free(mem), g_free(chardev), g_free(qmp), g_free(serial), g_free(smp), g_free(append);
    g_free(out), g_free(plugin), g_free(qemu_dir), g_free(datadir);
}

static void vm_stop(struct vm *vm)
{
    kill(vm->pid, SIGKILL);
    bool timed_out = false;
    child_wait(vm->pid, 30, &timed_out);
    char *rm = g_strdup_printf("rm -rf %s", vm->dir);
    CHECK(system(rm) == 0);
    g_free(rm);
    g_free(vm->gdb), g_free(vm->qmp), g_free(vm->serial), g_free(vm->plugin);
}

/* qprof over the gdbstub, QMP or the plugin, --samples n every interval_ms, folded stacks
 * back. */
static struct stacks profile(struct vm *vm, int samples, const char *interval_ms)
{
    char *gdb = g_strdup_printf("unix:%s", over_plugin ? vm->plugin : vm->gdb);
    char *folded = g_strdup_printf("%s/out.folded", vm->dir);
    char *out = g_strdup_printf("%s/qprof.out", vm->dir),
         *err = g_strdup_printf("%s/qprof.err", vm->dir);
    char *count = g_strdup_printf("%d", samples);
    const char *args[] = {plugin_alone ? "--memory" : "--qmp-socket",
                          plugin_alone ? "auto" : vm->qmp,
                          "--kernel",
                          demo_kernel,
                          "--user-dir",
                          demo_user,
                          "--samples",
                          count,
                          "--interval",
                          interval_ms,
                          "--no-progress",
                          "-o",
                          folded,
                          current_expr ? "--current" : "--os", /* auto: the default */
                          current_expr ? current_expr : "auto",
                          user_regs_expr ? "--user-regs" : "--os",
                          user_regs_expr ? user_regs_expr : "auto",
                          over_qmp      ? NULL
                          : over_plugin ? "--plugin"
                                        : "--gdb", /* QMP: ends here */
                          gdb,
                          NULL};
    char *bin = g_strdup_printf("%s/qprof", QPROF_BUILD_DIR);
    bool timed_out = false;
    int status = child_wait(child_start(bin, args, vm->dir, out, err, NULL), 300, &timed_out);
    char *log = NULL;
    g_file_get_contents(err, &log, NULL, NULL);
    fprintf(stderr, "%s", log ? log : "");
    CHECK_MSG(status == 0 && !timed_out, "qprof exited %d", status);
    const char *memory = no_ram_file && over_plugin ? "code from process memory)"
                         : no_ram_file              ? "memory: process memory)"
                         : over_qmp                 ? QMP_MEMORY
                         : over_plugin ? "memory: captured by the plugin, code from the RAM file"
                                       : "memory: direct";
    CHECK_MSG(log && strstr(log, memory), "not %s: %s", memory, log ? log : "");
    const char *transport = over_qmp      ? "transport: QMP"
                            : over_plugin ? "transport: plugin"
                                          : "transport: gdbstub";
    CHECK_MSG(log && strstr(log, transport), "not %s: %s", transport, log ? log : "");
    g_free(log);
    struct stacks s = load_folded(folded);
    g_free(gdb), g_free(folded), g_free(out), g_free(err), g_free(count), g_free(bin);
    return s;
}

/* The gdbstub alone with `m` packets (--memory memsave: auto would read out of the QEMU
 * process): samples still come, and qprof says once, up front, why those of a hart in U mode
 * name no process. procmem_: auto reads through the process, which serves the kernel's
 * qprof_abi whatever mode the hart is in, so there is no such note. */
static void check_gdb_alone(struct vm *vm)
{
    char *gdb = g_strdup_printf("unix:%s", vm->gdb);
    char *out = g_strdup_printf("%s/alone.out", vm->dir),
         *err = g_strdup_printf("%s/alone.err", vm->dir);
    const char *args[] = {"--gdb",         gdb,       "--kernel",  demo_kernel,
                          "--user-dir",    demo_user, "--samples", "50",
                          "--no-progress", "-o",      "-",         no_ram_file ? NULL : "--memory",
                          "memsave",       NULL};
    char *bin = g_strdup_printf("%s/qprof", QPROF_BUILD_DIR);
    bool timed_out = false;
    int status = child_wait(child_start(bin, args, vm->dir, out, err, NULL), 300, &timed_out);
    char *log = NULL;
    g_file_get_contents(err, &log, NULL, NULL);
    CHECK_MSG(status == 0, "qprof --gdb alone exited %d: %s", status, log ? log : "");
    if (no_ram_file)
        CHECK_MSG(log && strstr(log, "memory: process memory)") &&
                      !strstr(log, "cannot read the kernel's qprof_abi"),
                  "--gdb alone: not process memory, or a note it needs none for: %s",
                  log ? log : "");
    else
        CHECK_MSG(log && strstr(log, "cannot read the kernel's qprof_abi") &&
                      strstr(log, "--qmp-socket"),
                  "no note on --gdb alone: %s", log ? log : "");
    g_free(log), g_free(gdb), g_free(out), g_free(err), g_free(bin);
}

/* --user-regs over the gdbstub alone (--memory memsave: `m` packets, which read through the
 * vCPU's current table only): the trapframe is read, but the process's table cannot be walked,
 * so no kernel-mode sample gets user frames; the summary says why, once. */
static void check_user_regs_gdb_alone(struct vm *vm)
{
    char *gdb = g_strdup_printf("unix:%s", vm->gdb);
    char *folded = g_strdup_printf("%s/alone.folded", vm->dir);
    char *out = g_strdup_printf("%s/alone.out", vm->dir),
         *err = g_strdup_printf("%s/alone.err", vm->dir);
    const char *args[] = {"--gdb",      gdb,           "--kernel",      demo_kernel,
                          "--user-dir", demo_user,     "--samples",     "300",
                          "--interval", "1",           "--no-progress", "-o",
                          folded,       "--memory",    "memsave",       "--current",
                          current_expr, "--user-regs", user_regs_expr,  NULL};
    char *bin = g_strdup_printf("%s/qprof", QPROF_BUILD_DIR);
    bool timed_out = false;
    int status = child_wait(child_start(bin, args, vm->dir, out, err, NULL), 300, &timed_out);
    char *log = NULL;
    g_file_get_contents(err, &log, NULL, NULL);
    CHECK_MSG(status == 0, "--user-regs, --gdb alone: qprof exited %d: %s", status, log ? log : "");
    const char *note = log ? strstr(log, "--user-regs: ") : NULL;
    CHECK_MSG(note && strstr(note, "could not be read in their process's table") &&
                  strstr(note, "--qmp-socket") && !strstr(note + 1, "--user-regs: "),
              "--user-regs, --gdb alone: no note, or more than one: %s", log ? log : "");
    struct stacks s = load_folded(folded);
    uint64_t with_user = 0;
    for (char **l = s.lines; *l; l++)
        if (g_str_has_prefix(*l, "sys (") && has_frame(*l, "usertrap") && has_frame(*l, "main"))
            with_user += line_count(*l);
    CHECK_U64(with_user, 0);
    g_strfreev(s.lines);
    g_free(log), g_free(gdb), g_free(folded), g_free(out), g_free(err), g_free(bin);
}

/* A stack QMP cannot see past (QMP_BLIND_STOP), which ends there: not counted as whole or
 * broken, only counted. */
static uint64_t blind_stops;
static bool blind_stop(const char *line)
{
    const char *at = over_qmp && *QMP_BLIND_STOP ? strstr(line, QMP_BLIND_STOP) : NULL;
    const char *leaf = at ? strstr(at, QMP_BLIND_LEAF) : NULL;
    if (!at || !leaf)
        return false;
    /* the leaf: over the process, or over the user frames a system call saved (a stop at the
     * vector of an interrupt in the kernel) */
    CHECK_MSG(!strchr(at + strlen(QMP_BLIND_STOP), ';'), "a blind stop under other frames: %s",
              line);
    blind_stops += line_count(line);
    return true;
}

static void dump(const struct stacks *s)
{
    for (char **l = s->lines; *l; l++)
        if (**l)
            fprintf(stderr, "  %s\n", *l);
}

/* Spin stacks are complete from _start, but for at most 0.5% that say they are not: a stop
 * at the trap entry's second instruction, where the interrupted pc is only in sepc and tp only
 * in sscratch (guest/kernel/riscv64/entry.S; the first instruction qprof recovers from sepc).
 * A hot stack went exactly through main and compute. Returns the spin processes seen (their
 * roots), with their sample counts. */
static GHashTable *check_spin_stacks(const struct stacks *s)
{
    uint64_t complete = 0, all = 0;
    GHashTable *roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (char **l = s->lines; *l; l++) {
        if (!g_str_has_prefix(*l, "spin (") || blind_stop(*l))
            continue;
        const char *semi = strchr(*l, ';');
        char *root = g_strndup(*l, semi ? (size_t)(semi - *l) : strcspn(*l, " "));
        uint64_t *c = g_hash_table_lookup(roots, root);
        if (!c) {
            c = g_new0(uint64_t, 1);
            g_hash_table_insert(roots, g_strdup(root), c);
        }
        *c += line_count(*l);
        all += line_count(*l);
        /* whole: from _start, through main, or a process stopped in _start before it called
         * main (a trap from its first instructions) */
        bool whole = semi &&
                     (g_str_has_prefix(semi, ";_start;main") ||
                      g_str_has_prefix(semi, ";_start;trap_entry ")) &&
                     !strstr(*l, "[truncated]");
        complete += whole ? line_count(*l) : 0;
        if (!whole)
            fprintf(stderr, "incomplete: %s\n", *l);
        CHECK_MSG(whole || g_str_has_prefix(semi ? semi : "", ";[truncated];trap_entry "),
                  "orphan spin stack: %s", *l);
        if (has_frame(*l, "hot_a") || has_frame(*l, "hot_b")) {
            char *a = g_strdup_printf("%s;_start;main;compute;hot_a", root);
            char *b = g_strdup_printf("%s;_start;main;compute;hot_b", root);
            CHECK_MSG(g_str_has_prefix(*l, a) || g_str_has_prefix(*l, b),
                      "hot function under the wrong parents: %s", *l);
            g_free(a), g_free(b);
        }
        /* a kernel part sits on user frames and starts at the trap entry */
        const char *k = strstr(*l, ";trap_entry");
        CHECK_MSG(!has_frame(*l, "trap_dispatch") || k, "kernel frames not from the entry: %s", *l);
        g_free(root);
    }
    /* A trap from user mode stopped before its entry swapped stacks belongs to the interrupted
     * process (every register still its own), not to a "kernel" root cut short: what is left
     * there is the stop inside a switch, between the next process's page tables going live and
     * the switch to its stack (switch_to): no process owns that instant, and the interrupted
     * user stack cannot be read through the next one's tables, so it ends marked. Those are
     * counted apart (0.67% of 3,000 in one CI run, TCG's stops cluster after the satp write);
     * any other truncated kernel root is rarer still. */
    uint64_t orphans = 0, in_switch = 0;
    for (char **l = s->lines; *l; l++) {
        if (!g_str_has_prefix(*l, "kernel;[truncated]"))
            continue;
        if (has_frame(*l, "switch_to"))
            in_switch += line_count(*l);
        else
            orphans += line_count(*l);
    }
    CHECK_MSG(orphans * 200 <= s->total, "%lu of %lu stacks rooted at a truncated kernel",
              (unsigned long)orphans, (unsigned long)s->total);
    CHECK_MSG(in_switch * 50 <= s->total, "%lu of %lu stacks stopped inside a switch",
              (unsigned long)in_switch, (unsigned long)s->total);
    fprintf(stderr, "%lu of %lu spin stacks complete to _start\n", (unsigned long)complete,
            (unsigned long)all);
    CHECK_MSG(complete * 1000 >= all * 995, "only %lu of %lu spin stacks complete",
              (unsigned long)complete, (unsigned long)all);
    return roots;
}

static void check_spin_ratio(const struct stacks *s)
{
    uint64_t a = count_frame(s, "hot_a"), b = count_frame(s, "hot_b");
    fprintf(stderr, "hot_a %lu, hot_b %lu of %lu samples\n", (unsigned long)a, (unsigned long)b,
            (unsigned long)s->total);
    /* enough hot-loop samples for the ratio: with -smp 4 three harts of four run spin, ~15%
     * idle and the timer's traps (stops gather at trap_entry) leave about half (once 49.8%) */
    REQUIRE(a + b >= (s->total - blind_stops) / 3); /* of the stacks that could name them */
    double share = (double)a / (double)(a + b), tol = share_tolerance(0.75, a + b, 0.03);
    CHECK_MSG(fabs(share - 0.75) < tol, "hot_a share %.3f over %lu samples, designed 0.75 +- %.3f",
              share, (unsigned long)(a + b), tol);
}

static uint64_t count_root(const struct stacks *s, const char *prefix)
{
    uint64_t n = 0;
    for (char **l = s->lines; *l; l++)
        n += g_str_has_prefix(*l, prefix) ? line_count(*l) : 0;
    return n;
}

/* Idle time: the idle root where the transport tells a halted vCPU (the gdbstub, riscv64's
 * QMP), else the kernel's idle loop stacks, which no process owns (aarch64 over QMP). */
static uint64_t count_idle(const struct stacks *s)
{
    if (!over_qmp || QMP_HAS_HALTED)
        return count_root(s, "idle");
    uint64_t n = 0;
    for (char **l = s->lines; *l; l++)
        n += g_str_has_prefix(*l, "kernel;") && strstr(*l, ";idle_loop") ? line_count(*l) : 0;
    return n;
}

/* The samples a case asks for: fewer where a sample costs more. */
static int samples(int n)
{
    return over_qmp ? QMP_SAMPLES(n) : n;
}

static void case_spin(const char *qemu)
{
    struct vm vm;
    vm_boot(&vm, qemu, "spin,spin", 1);
    int n = samples(3000);
    struct stacks s = profile(&vm, n, "1");
    CHECK_U64(s.total, (uint64_t)n);
    GHashTable *roots = check_spin_stacks(&s);
    CHECK_MSG(g_hash_table_size(roots) == 2, "expected 2 spin processes, got %u",
              g_hash_table_size(roots));
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, roots);
    while (g_hash_table_iter_next(&it, &key, &value))
        CHECK_MSG(*(uint64_t *)value >= (uint64_t)n / 15, "%s has only %lu samples", (char *)key,
                  (unsigned long)*(uint64_t *)value);
    check_spin_ratio(&s);
    uint64_t idle = count_idle(&s);
    fprintf(stderr, "idle %lu of %lu\n", (unsigned long)idle, (unsigned long)s.total);
    CHECK_MSG(idle > 0, "no idle samples though the guest sleeps between work windows");
    if (harness_failures)
        dump(&s);
    g_hash_table_destroy(roots);
    g_strfreev(s.lines);
    if (!over_qmp && !over_plugin)
        check_gdb_alone(&vm);
    vm_stop(&vm);
}

static void case_sys(const char *qemu)
{
    struct vm vm;
    vm_boot(&vm, qemu, "sys", 1);
    struct stacks s = profile(&vm, samples(2500), "1");
    GRegex *re = g_regex_new("^sys \\(\\d+\\);_start;main;kernel_work;sys_call;trap_entry;"
                             "trap_dispatch;syscall_dispatch;sys_work;kwork_checksum;kwork_mix"
                             "(;|\\s)",
                             0, 0, NULL);
    uint64_t kernel_work = 0, user_work = count_frame(&s, "user_mix"), complete = 0, sys = 0;
    for (char **l = s.lines; *l; l++) {
        if (!g_str_has_prefix(*l, "sys (") || blind_stop(*l))
            continue;
        sys += line_count(*l);
        const char *semi = strchr(*l, ';');
        complete += semi && g_str_has_prefix(semi, ";_start;main") && !strstr(*l, "[truncated]")
                        ? line_count(*l)
                        : 0;
        /* no stack without its user frames that does not say so */
        CHECK_MSG((semi && g_str_has_prefix(semi, ";_start;main")) || strstr(*l, "[truncated]"),
                  "sys stack without user frames, unmarked: %s", *l);
        if (!has_frame(*l, "kwork_mix"))
            continue;
        kernel_work += line_count(*l);
        CHECK_MSG(g_regex_match(re, *l, 0, NULL), "sys kernel stack not user -> entry -> work: %s",
                  *l);
    }
    g_regex_unref(re);
    fprintf(stderr, "kwork_mix %lu, user_mix %lu; %lu of %lu sys stacks complete\n",
            (unsigned long)kernel_work, (unsigned long)user_work, (unsigned long)complete,
            (unsigned long)sys);
    /* of sys's own samples (not idle's, which QMP on aarch64 cannot tell from the kernel's
     * idle loop, nor the stops QMP cannot see past), most are in its two work functions */
    REQUIRE(kernel_work + user_work >= sys / 2);
    double share = (double)kernel_work / (double)(kernel_work + user_work);
    double tol = share_tolerance(0.5, kernel_work + user_work, 0.10);
    CHECK_MSG(fabs(share - 0.5) < tol, "kernel share of sys %.3f, designed 0.5 +- %.3f", share,
              tol);
    CHECK_MSG(complete * 1000 >= sys * 995, "only %lu of %lu sys stacks complete to _start",
              (unsigned long)complete, (unsigned long)sys);
    if (harness_failures)
        dump(&s);
    g_strfreev(s.lines);
    vm_stop(&vm);
}

/* Whether the frames of line after its root (markers skipped) appear in chain, in its order. */
static bool frames_in_order(const char *line, const char *const *chain)
{
    const char *semi = strchr(line, ';');
    char *frames = g_strndup(semi ? semi + 1 : "", strcspn(semi ? semi + 1 : "", " "));
    char **f = g_strsplit(frames, ";", -1);
    bool ok = true;
    size_t j = 0;
    for (char **p = f; ok && *p; p++) {
        if (strcmp(*p, "[truncated]") == 0)
            continue;
        while (chain[j] && strcmp(chain[j], *p) != 0)
            j++;
        ok = chain[j] != NULL;
    }
    g_strfreev(f);
    g_free(frames);
    return ok;
}

/* fponly_sys: sys on the guest built with frame pointers and no CFI at all. qprof's
 * frame-pointer walk reads each function's code to tell where its return address is (the link
 * register, x30 or ra, before the record is pushed and after it is popped, and in a riscv64 leaf,
 * whose record is only s0; the record otherwise), so the work stacks unwind whole: every frame in
 * order, none skipped, user stacks complete to _start (whose zeroed frame pointer ends them); the
 * kernel part ends marked at trap_entry, which keeps no record, and the user part comes from the
 * registers the qprof_abi slot saved. Without it, libdwfl (0.188) has no riscv64 frame-pointer
 * unwinder, and its aarch64 guess from the link register invents callers (unwind/unw_walk.c):
 * stacks of one frame, marked. Also asserted: processes named, the designed 50:50 split between
 * kernel and user work by the leaves, and only frames of the real call path, in its order. */
/* Samples whose stack is exactly `stack`, or `stack` followed by an interrupt's frames. */
static uint64_t count_whole(const struct stacks *s, const char *stack)
{
    size_t n = strlen(stack);
    uint64_t count = 0;
    for (char **l = s->lines; *l; l++)
        if (strncmp(*l, stack, n) == 0 && ((*l)[n] == ' ' || (*l)[n] == ';'))
            count += line_count(*l);
    return count;
}

static void case_fponly_sys(const char *qemu)
{
    static const char *const kernel_path[] = {
        "_start",          "main",           "kernel_work",   "sys_call",
        "el0_sync_vector", "trap_entry",     "trap_dispatch", "syscall_dispatch",
        "sys_work",        "kwork_checksum", "kwork_mix",     NULL};
    static const char *const user_path[] = {"_start", "main", "user_work", "user_mix", NULL};
    struct vm vm;
    vm_boot(&vm, qemu, "sys", 1);
    struct stacks s = profile(&vm, samples(2500), "1");
    uint64_t kernel_work = count_frame(&s, "kwork_mix"), user_work = count_frame(&s, "user_mix");
    uint64_t sys = count_root(&s, "sys (");
    for (char **l = s.lines; *l; l++) {
        if (!g_str_has_prefix(*l, "sys ("))
            continue;
        if (has_frame(*l, "kwork_mix"))
            CHECK_MSG(frames_in_order(*l, kernel_path), "kwork_mix off its path: %s", *l);
        if (has_frame(*l, "user_mix")) { /* up to user_mix: an interrupt's frames may follow */
            char *user = g_strndup(*l, (size_t)(strstr(*l, "user_mix") - *l) + strlen("user_mix"));
            CHECK_MSG(frames_in_order(user, user_path), "user_mix off its path: %s", *l);
            g_free(user);
        }
    }
    fprintf(stderr, "kwork_mix %lu, user_mix %lu of %lu sys samples\n", (unsigned long)kernel_work,
            (unsigned long)user_work, (unsigned long)sys);
    /* of sys's own samples (not idle's, which QMP on aarch64 cannot tell from the kernel's
     * idle loop, nor the stops QMP cannot see past), most are in its two work functions */
    REQUIRE(kernel_work + user_work >= sys / 2);
    /* Every sample in the work loops unwinds whole, whatever instruction it stopped at (one taken
     * as an interrupt enters the stack in the vector instead: a few). */
    uint64_t kernel_whole = count_whole(&s, "sys (1);_start;main;kernel_work;sys_call;[truncated];"
                                            "trap_entry;trap_dispatch;syscall_dispatch;sys_work;"
                                            "kwork_checksum;kwork_mix");
    uint64_t user_whole = count_whole(&s, "sys (1);_start;main;user_work;user_mix");
    CHECK_MSG(kernel_whole * 100 >= kernel_work * 98, "kwork_mix stacks whole: %lu of %lu",
              (unsigned long)kernel_whole, (unsigned long)kernel_work);
    CHECK_MSG(user_whole * 100 >= user_work * 98, "user_mix stacks whole: %lu of %lu",
              (unsigned long)user_whole, (unsigned long)user_work);
    double share = (double)kernel_work / (double)(kernel_work + user_work);
    double tol = share_tolerance(0.5, kernel_work + user_work, 0.10);
    CHECK_MSG(fabs(share - 0.5) < tol, "kernel share of sys %.3f, designed 0.5 +- %.3f", share,
              tol);
    if (harness_failures)
        dump(&s);
    g_strfreev(s.lines);
    vm_stop(&vm);
}

/* Four harts under MTTCG, a process pinned to each: all four named and sampled, the spin
 * stacks complete and in their ratio. */
static void case_smp4(const char *qemu)
{
    struct vm vm;
    vm_boot(&vm, qemu, "spin@0,spin@1,sys@2,spin@3", 4);
    REQUIRE(serial_has(&vm, "smp: 4 cpus online"));
    /* 10 ms apart, as x86_64's test_smp: under MTTCG back-to-back stops leave the hart threads
     * too little host time between them, and the shares drift */
    int n = samples(900);
    /* a stack per hart per stop; the plugin's samples are a hart's each */
    struct stacks s = profile(&vm, over_plugin ? 4 * n : n, "10");
    CHECK_U64(s.total, 4 * (uint64_t)n);
    GHashTable *roots = check_spin_stacks(&s);
    CHECK_MSG(g_hash_table_size(roots) == 3, "expected 3 spin processes, got %u",
              g_hash_table_size(roots));
    check_spin_ratio(&s);
    uint64_t sys = count_root(&s, "sys (3)");
    fprintf(stderr, "sys (3): %lu samples\n", (unsigned long)sys);
    CHECK(sys >= (uint64_t)n / 3);
    CHECK(count_frame(&s, "kwork_mix") > (uint64_t)n / 15);
    if (harness_failures)
        dump(&s);
    g_hash_table_destroy(roots);
    g_strfreev(s.lines);
    vm_stop(&vm);
}

/* Adds (add) or removes the names of the functions of ELF file path (nm) to or from names. */
static void nm_names(GHashTable *names, const char *path, bool add)
{
    char *cmd = g_strdup_printf("nm %s", path), *out = NULL;
    int status = -1;
    REQUIRE(g_spawn_command_line_sync(cmd, &out, NULL, &status, NULL) && status == 0);
    char **lines = g_strsplit(out, "\n", -1);
    for (char **l = lines; *l; l++) {
        char **f = g_strsplit(*l, " ", 3);
        if (f[0] && f[1] && f[2] && (f[1][0] == 'T' || f[1][0] == 't')) {
            if (add)
                g_hash_table_add(names, g_strdup(f[2]));
            else
                g_hash_table_remove(names, f[2]);
        }
        g_strfreev(f);
    }
    g_strfreev(lines);
    g_free(cmd), g_free(out);
}

/* The names of the kernel's functions that no user program has (both have a _start), for
 * telling kernel frames in folded stacks. */
static GHashTable *kernel_names(void)
{
    GHashTable *names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    nm_names(names, demo_kernel, true);
    const char *programs[] = {"spin", "sys"};
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
        char *path = g_strdup_printf("%s/%s", demo_user, programs[i]);
        nm_names(names, path, false);
        g_free(path);
    }
    REQUIRE(g_hash_table_size(names) > 10);
    return names;
}

struct lowhalf_figures {
    uint64_t kernel, leaf_named, three_named, in_process;
    uint64_t spin, spin_main, made_up;
    /* kernel-mode samples of spin and sys, and those whose user frames reach main: all, and
     * those the kernel's variable named (--current's "sys (2)": in the kernel's own table, where
     * --user-regs applies; the trampoline's, in the process's table, are "sys [as N]") */
    uint64_t proc_kernel, proc_kernel_main, named_kernel, named_kernel_main;
    uint64_t
        sys_call_main; /* sys's system calls under its main: sys;_start;main;...;syscall_dispatch */
};

/* One folded line of the low-half guest: a kernel-mode sample is one with a kernel frame, or
 * none named at all (a stack cut before its leaf, counted against the kernel's figures). */
static void lowhalf_line(GHashTable *kernel, const char *line, struct lowhalf_figures *f)
{
    const char *count = strrchr(line, ' ');
    if (!count)
        return;
    uint64_t n = line_count(line);
    char *stack = g_strndup(line, (size_t)(count - line));
    char **frames = g_strsplit(stack, ";", -1);
    int len = (int)g_strv_length(frames), in_kernel = 0;
    for (int i = 1; i < len; i++) {
        in_kernel += g_hash_table_contains(kernel, frames[i]);
        f->made_up += g_str_has_prefix(frames[i], "0x") ? n : 0;
    }
    bool root_process = !g_str_has_prefix(stack, "kernel") && !g_str_has_prefix(stack, "idle") &&
                        !g_str_has_prefix(stack, "[");
    bool named_any = false;
    for (int i = 1; i < len; i++)
        named_any |= strcmp(frames[i], "[truncated]") != 0;
    if (g_str_has_prefix(stack, "spin ")) {
        f->spin += n;
        f->spin_main += has_frame(line, "main") ? n : 0;
    }
    /* The M-mode timer (timervec) is no S-mode kernel code: the gdbstub's priv says M there
     * (counted as firmware); QMP's text names no mode, and the pc, identity-mapped in the
     * kernel's table, reads as S-mode code with nothing under it. */
    bool m_mode = strcmp(frames[len - 1], "timervec") == 0;
    if ((in_kernel || !named_any) && !m_mode && !g_str_has_prefix(stack, "idle") &&
        !g_str_has_prefix(stack, "[firmware")) {
        f->kernel += n;
        f->leaf_named += g_hash_table_contains(kernel, frames[len - 1]) ? n : 0;
        f->three_named += in_kernel >= 3 ? n : 0;
        f->in_process += root_process ? n : 0;
        bool spin_or_sys = g_str_has_prefix(stack, "spin ") || g_str_has_prefix(stack, "sys ");
        f->proc_kernel += spin_or_sys && in_kernel ? n : 0;
        f->proc_kernel_main += spin_or_sys && in_kernel && has_frame(line, "main") ? n : 0;
        bool named = spin_or_sys && strstr(stack, " (") == strchr(stack, ' ');
        f->named_kernel += named && in_kernel ? n : 0;
        f->named_kernel_main += named && in_kernel && has_frame(line, "main") ? n : 0;
        f->sys_call_main += g_str_has_prefix(stack, "sys ") && has_frame(line, "main") &&
                                    has_frame(line, "syscall_dispatch")
                                ? n
                                : 0;
    }
    g_strfreev(frames);
    g_free(stack);
}

/* lowhalf_mix: the riscv64 guest laid out as teaching kernels are (kernel-lowhalf.elf at
 * 0x80000000 on a table of its own, a trampoline, per-process kernel stacks mapped high, user
 * programs at 0, no qprof_abi), spin beside sys on two harts, profiled with the kernel ELF and
 * the user folder alone (--os auto picks none). Issue 37's "done means": >= 90% of kernel
 * leaves named, >= 50% of kernel samples with >= 3 named kernel frames, spin's stacks through
 * main for >= 90% of its samples, its 75:25 within the usual tolerance, no made-up frame; and
 * most kernel-mode samples carry their process (the one that last ran user code on that hart). */
static void case_lowhalf_mix(const char *qemu)
{
    struct vm vm;
    vm_boot(&vm, qemu, "spin,sys", 2);
    int n = samples(2000);
    /* a stack per hart per stop; the plugin's samples are a hart's each */
    struct stacks s = profile(&vm, over_plugin ? 2 * n : n, "1");
    CHECK_U64(s.total, 2 * (uint64_t)n);
    GHashTable *kernel = kernel_names();
    struct lowhalf_figures f = {0};
    for (char **l = s.lines; *l; l++)
        lowhalf_line(kernel, *l, &f);
    fprintf(stderr,
            "kernel samples %lu: leaf named %lu, >= 3 named frames %lu, in a process %lu; "
            "spin %lu, through main %lu; made-up frames %lu\n",
            (unsigned long)f.kernel, (unsigned long)f.leaf_named, (unsigned long)f.three_named,
            (unsigned long)f.in_process, (unsigned long)f.spin, (unsigned long)f.spin_main,
            (unsigned long)f.made_up);
    REQUIRE(f.kernel >= (uint64_t)n / 10 && f.spin >= (uint64_t)n / 10);
    CHECK(f.leaf_named * 10 >= f.kernel * 9);
    CHECK(f.three_named * 2 >= f.kernel);
    /* --current: the kernel's cpus[$cpu].proc names the process of every sample, kernel-mode
     * ones in its own table included (the idle context's are no process's: they run for none) */
    CHECK(f.in_process * (current_expr ? 10 : 2) >= f.kernel * (current_expr ? 9 : 1));
    if (current_expr)
        CHECK(count_root(&s, "spin (1)") > 0 && count_root(&s, "sys (2)") > 0);
    /* --user-regs: the trapframe gives the user registers, the process's own table its stack */
    fprintf(stderr,
            "kernel-mode samples of spin and sys %lu, with user frames through main %lu; in the "
            "kernel's table %lu, through main %lu; sys's system calls under main %lu\n",
            (unsigned long)f.proc_kernel, (unsigned long)f.proc_kernel_main,
            (unsigned long)f.named_kernel, (unsigned long)f.named_kernel_main,
            (unsigned long)f.sys_call_main);
    if (user_regs_expr) {
        REQUIRE(f.named_kernel >= (uint64_t)n / 20);
        CHECK(f.named_kernel_main * 10 >= f.named_kernel * 9);
        /* the trampoline's samples stay marked [truncated]: its registers are half saved */
        CHECK(f.proc_kernel_main * 10 >= f.proc_kernel * 7);
        CHECK(f.sys_call_main > 0);
        if (!over_qmp && !over_plugin)
            check_user_regs_gdb_alone(&vm);
    }
    CHECK(f.spin_main * 10 >= f.spin * 9);
    CHECK_U64(f.made_up, 0);
    uint64_t a = count_frame(&s, "hot_a"), b = count_frame(&s, "hot_b");
    REQUIRE(a + b >= (uint64_t)n / 10);
    double share = (double)a / (double)(a + b), tol = share_tolerance(0.75, a + b, 0.03);
    fprintf(stderr, "hot_a share %.3f over %lu samples\n", share, (unsigned long)(a + b));
    CHECK_MSG(fabs(share - 0.75) < tol, "hot_a share %.3f over %lu samples, designed 0.75 +- %.3f",
              share, (unsigned long)(a + b), tol);
    if (harness_failures)
        dump(&s);
    g_hash_table_destroy(kernel);
    g_strfreev(s.lines);
    vm_stop(&vm);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "spin";
    bool fponly = false;
    char *qemu = g_find_program_in_path(DEMO_QEMU);
    if (g_str_has_prefix(which, "lowhalf_")) {
        demo_kernel = QPROF_DEMO_DIR "/kernel-lowhalf.elf";
        demo_user = QPROF_DEMO_DIR "/user-lowhalf";
        which += strlen("lowhalf_");
        if (g_str_has_prefix(which, "current_")) {
            current_expr = "cpus[$cpu].proc";
            which += strlen("current_");
        } else if (g_str_has_prefix(which, "user_regs_")) {
            current_expr = "cpus[$cpu].proc";
            user_regs_expr = "cpus[$cpu].proc->trapframe";
            which += strlen("user_regs_");
        }
    } else if (g_str_has_prefix(which, "dframe_")) {
        demo_kernel = QPROF_DEMO_DIR "/kernel-dframe.elf";
        demo_user = QPROF_DEMO_DIR "/user-dframe";
        which += strlen("dframe_");
    } else if (g_str_has_prefix(which, "fponly_")) {
        demo_kernel = QPROF_DEMO_DIR "/kernel-fponly.elf";
        demo_user = QPROF_DEMO_DIR "/user-fponly";
        which += strlen("fponly_");
        fponly = true;
    }
    if (!qemu || access(demo_kernel, R_OK) != 0) {
        fprintf(stderr, "SKIP: needs " DEMO_QEMU " and %s (" DEMO_CC "; xtask deps)\n",
                demo_kernel);
        g_free(qemu);
        return 77;
    }
    no_ram_file = g_str_has_prefix(which, "procmem_");
    if (no_ram_file)
        which += strlen("procmem_");
    over_qmp = g_str_has_prefix(which, "qmp_");
    if (over_qmp)
        which += 4;
    over_plugin = g_str_has_prefix(which, "plugin_");
    if (over_plugin) {
        which += strlen("plugin_");
        plugin_alone = g_str_has_prefix(which, "alone_");
        if (plugin_alone)
            which += strlen("alone_");
        g_free(qemu);
        char *dir = g_path_get_dirname(QPROF_QEMU10);
        qemu = g_strdup_printf("%s/" DEMO_QEMU, dir);
        /* QEMU 10 from a private prefix loads modules of its own build only */
        char *mods = g_strdup_printf("%s/../lib/x86_64-linux-gnu/qemu", dir);
        setenv("QEMU_MODULE_DIR", mods, 1);
        g_free(dir), g_free(mods);
        if (!*QPROF_PLUGIN_SO || access(QPROF_PLUGIN_SO, R_OK) != 0 || access(qemu, X_OK) != 0) {
            fprintf(stderr, "SKIP: needs qprof-plugin.so and QEMU 10's %s (xtask/qemu10.sh)\n",
                    qemu);
            g_free(qemu);
            return 77;
        }
    }
    if (strcmp(which, "spin") == 0)
        case_spin(qemu);
    else if (strcmp(which, "sys") == 0 && fponly)
        case_fponly_sys(qemu);
    else if (strcmp(which, "sys") == 0)
        case_sys(qemu);
    else if (strcmp(which, "smp4") == 0)
        case_smp4(qemu);
    else if (strcmp(which, "mix") == 0 && strstr(demo_kernel, "lowhalf"))
        case_lowhalf_mix(qemu);
    else
        REQUIRE(!"unknown case");
    if (blind_stops)
        fprintf(stderr, "%lu stacks stopped where QMP cannot see past (%s)\n",
                (unsigned long)blind_stops, QMP_BLIND_STOP "*" QMP_BLIND_LEAF);
    g_free(qemu);
    return harness_result();
}
