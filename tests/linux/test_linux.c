/* A stock Debian Linux guest (Debian's kernel and busybox, nothing else; KASLR on), profiled by
 * the real qprof with no symbol options at all. Checks what a user checks by eye: dd's kernel
 * time is named read_zero/clear_user* under ksys_read, do_syscall_64 and entry_SYSCALL_64*, in
 * that order; every named kernel frame lies inside that symbol per the guest's own
 * /proc/kallsyms; user leaves of dd and of a busy shell loop (sh) are named by their mapping,
 * busybox+0xOFFSET with the offset inside busybox's file; a guest that is not Linux gets one line
 * and the address split.
 *
 * dd-gdb samples the same guest through the gdbstub (with QMP for the shared RAM file);
 * dd-plugin and dd-plugin-2cpu through qprof-plugin.so in QEMU 10, which captures the current
 * task and its saved user registers at each sample's instant (skipped without QEMU 10).
 *
 * no-btf spoils the guest's BTF in its RAM: one line, and kernel stacks without process names.
 *
 * reboot resets the guest while qprof samples it: nothing of the new boot is counted as the old.
 *
 * The sysroot case runs hotpath (hotpath.c: main -> outer_work -> middle_work -> hot_leaf, no
 * frame pointers, linked -rdynamic) and checks that --sysroot names that whole chain by DWARF,
 * that without it the same chain, up to _start, comes out of the guest's own memory (the
 * .eh_frame of hotpath and libc, from the process's pages or the page cache, and the names
 * hotpath's .dynsym exports), and that a sysroot whose hotpath is another build is
 * not used (the guest's own copy names the chain instead).
 *
 * modules: dd reading a RAM disk (brd.ko, loaded by the guest's /init) with O_DIRECT: its kernel
 * time is named by brd's own functions, "brd_do_bvec [brd]" under "brd_submit_bio [brd]" under
 * submit_bio* ... entry_SYSCALL_64*, read from the module's struct module and unwound with its
 * ORC tables, every module frame inside that symbol per the guest's /proc/kallsyms.
 *
 * modules-cycle: the same module loaded and unloaded over and over while qprof samples.
 *
 * top: qprof top --batch names dd's kernel functions, with no input.
 *
 * sysroot-plugin: the sysroot case through qprof-plugin.so (user stacks captured at the instant).
 *
 * distro: Debian's own xz (liblzma) and openssl (libcrypto), unmodified, at work: their user
 * stacks whole from the leaf through the libraries to __libc_start_main, every frame named by
 * its object's symbols (or the host's debug file for it) or object+0xOFFSET, with nothing but
 * the sockets and with the host's / as --sysroot, through QMP, the gdbstub and the plugin.
 *
 * arch-dd and the other arch-* cases: stock arm64 and riscv64 kernels (SERIES arm64-6.1,
 * riscv64-7.x); arch-dd over the gdbstub on one vCPU runs qprof again on the same boot with the
 * guest's files as --sysroot: dd's user stack unwound by busybox's CFI, under "dd (PID)" and
 * above the kernel's entry.
 *
 * Usage: test_linux CASE   (dd-1cpu, dd-2cpu, dd-gdb, dd-plugin, dd-plugin-2cpu, not-linux,
 *                          no-btf, reboot, sysroot, sysroot-plugin, modules, modules-cycle,
 *                          distro) */
#define _GNU_SOURCE
#include "child.h"
#include "folded.h"
#include "harness.h"
#include "qmp.h"
#include "vm.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define QPROF_BIN    QPROF_BUILD_DIR "/qprof"
#define BOOT_TIMEOUT 300.0
#define SAMPLES      "150"
/* The plugin samples without stopping the guest: more samples cost seconds, not minutes. */
#define PLUGIN_SAMPLES "1000"
/* Other architectures' module cases: enough for a share of brd that varies by kernel build. */
#define MODULE_SAMPLES "600"
/* arch-dd's second run, with --sysroot: enough for the floors of check_foreign_sysroot */
#define FOREIGN_SYSROOT_SAMPLES "60"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Builds (or reuses) the guest; 77 when the Debian packages cannot be had. */
/* The kernel series under test: "6.1" (the machine's own, the default) or the SERIES argument
 * (5.10, 6.12, 7.x), whose guest make-guest.sh builds in a folder of its own. */
static const char *series = "6.1";
/* dd-procmem, dd-gdb-procmem: QEMU without the shared RAM file; qprof reads guest memory (the
 * kernel search, kallsyms, ORC, BTF, the samples' stacks) out of the QEMU process */
static bool no_ram_file;

/* A file of the guest's folder; the returned string lives until the 8th call after. */
static const char *guest_file(const char *name)
{
    static char ring[8][512];
    static unsigned next;
    char *out = ring[next++ % 8];
    if (strcmp(series, "6.1") == 0)
        snprintf(out, sizeof ring[0], "%s%s", QPROF_LINUX_GUEST_DIR, name);
    else
        snprintf(out, sizeof ring[0], "%s-%s%s", QPROF_LINUX_GUEST_DIR, series, name);
    return out;
}

static int make_guest(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", QPROF_LINUX_MAKE_GUEST, guest_file(""), series);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

struct run {
    int exit_code;
    char *out, *err;
};

/* Runs qprof with args (NULL-terminated) in dir, stdout and stderr to files, bounded time. */
static struct run run_qprof(const char *dir, const char *const *args, double timeout_s)
{
    struct run r = {.exit_code = -1};
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/qprof.out", dir);
    snprintf(err_path, sizeof err_path, "%s/qprof.err", dir);
    bool late;
    r.exit_code =
        child_wait(child_start(QPROF_BIN, args, dir, out_path, err_path, NULL), timeout_s, &late);
    if (late)
        HARNESS_FAIL("qprof did not finish within %.0f s: killed it", timeout_s);
    if (!g_file_get_contents(out_path, &r.out, NULL, NULL))
        r.out = g_strdup("");
    if (!g_file_get_contents(err_path, &r.err, NULL, NULL))
        r.err = g_strdup("");
    return r;
}

static void run_free(struct run *r)
{
    g_free(r->out);
    g_free(r->err);
}

/* ---- The guest's /proc/kallsyms (its text symbols) -------------------------------------- */

struct ksym {
    uint64_t addr;
    char *name;
};

static int cmp_ksym(const void *a, const void *b)
{
    const struct ksym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The lines of text, split in place (text keeps them; free the array only). g_strsplit's strstr
 * per line is quadratic under ASan, whose strstr measures the whole rest of the text each time:
 * minutes for 7.x's 150,000 kallsyms lines. */
static char **split_lines(char *text)
{
    GPtrArray *lines = g_ptr_array_new();
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        g_ptr_array_add(lines, line);
    }
    g_ptr_array_add(lines, NULL);
    return (char **)g_ptr_array_free(lines, FALSE);
}

static GArray *read_kallsyms(const char *path)
{
    GArray *syms = g_array_new(FALSE, FALSE, sizeof(struct ksym));
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return syms;
    char **lines = split_lines(text);
    for (char **l = lines; *l; l++) {
        char name[256], type;
        unsigned long long addr;
        if (sscanf(*l, "%llx %c %255s", &addr, &type, name) != 3 || strchr(*l, '['))
            continue;
        if (type != 't' && type != 'T' && type != 'w' && type != 'W')
            continue;
        struct ksym k = {addr, g_strdup(name)};
        g_array_append_val(syms, k);
    }
    g_free(lines);
    g_free(text);
    g_array_sort(syms, cmp_ksym);
    return syms;
}

/* pc (a return address unless exact) lies in a symbol called name: the symbol at or below pc
 * (pc - 1 for a return address) has that name, or one of its aliases does. */
static bool inside(GArray *syms, uint64_t pc, bool exact, const char *name)
{
    uint64_t at = exact ? pc : pc - 1;
    const struct ksym *s = (const struct ksym *)syms->data;
    size_t lo = 0, hi = syms->len;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid].addr <= at)
            lo = mid;
        else
            hi = mid;
    }
    if (!syms->len || s[lo].addr > at)
        return false;
    for (size_t i = lo; i < syms->len && s[i].addr == s[lo].addr; i--) {
        if (strcmp(s[i].name, name) == 0)
            return true;
        if (i == 0)
            break;
    }
    return false;
}

/* ---- Booting -------------------------------------------------------------------------------- */

struct guest {
    test_vm *vm;
    char dir[256];
    char kallsyms[300];
    int dd_pid, sh_pid;     /* -1 when not started */
    int hot_pid, nopie_pid; /* hotpath's and hotpath-nopie's, -1 when not started */
    bool gdbstub;           /* set before boot(): QEMU gets a gdbstub too */
    bool plugin;            /* set before boot(): QEMU 10 with qprof-plugin.so loaded */
    bool reboots;           /* set before boot(): a reset reboots; a second QMP socket */
    /* set before boot(): /init dumps /proc/kallsyms into g->kallsyms (a second serial port),
     * seconds of every boot under TCG (3-6 s less per test without it): only for the cases
     * that read it */
    bool want_kallsyms;
};

/* The pid /init printed for workload name ("qprof-linux: ready pid=N name=NAME"), or -1. */
static int workload_pid(const char *log, const char *name)
{
    char tail[64];
    snprintf(tail, sizeof tail, " name=%s\n", name);
    for (const char *p = strstr(log, "qprof-linux: ready pid="); p;
         p = strstr(p + 1, "qprof-linux: ready pid=")) {
        const char *num = p + strlen("qprof-linux: ready pid=");
        const char *end = num + strspn(num, "0123456789");
        if (end > num && strncmp(end, tail, strlen(tail)) == 0)
            return atoi(num);
    }
    return -1;
}

static int boot(int smp, const char *run, struct guest *g)
{
    snprintf(g->dir, sizeof g->dir, "/tmp/qprof-linux-XXXXXX");
    if (!mkdtemp(g->dir))
        return -1;
    snprintf(g->kallsyms, sizeof g->kallsyms, "%s/kallsyms.txt", g->dir);
    char serial2[320];
    snprintf(serial2, sizeof serial2, "file:%s", g->kallsyms);
    const char *extra[] = {"-initrd", guest_file("/initrd.cpio"),
                           g->want_kallsyms ? "-serial" : NULL, serial2, NULL};
    char cmdline[256];
    /* no_timer_check: on a loaded host TCG can miss the kernel's IO-APIC timer check, which then
     * panics at boot ("IO-APIC + timer doesn't work!"); panic=-1 (with QEMU's -no-reboot) ends a
     * guest that panics at once instead of at the boot deadline. */
    snprintf(cmdline, sizeof cmdline, "console=ttyS0 quiet no_timer_check%s%s qprof_run=%s",
             g->reboots ? "" : " panic=-1", g->want_kallsyms ? " qprof_kallsyms" : "", run);
    struct vm_opts o = {.kernel = guest_file("/vmlinuz"),
                        .smp = smp,
                        .mem_mb = 512,
                        .shared_ram = !no_ram_file,
                        .gdbstub = g->gdbstub,
                        .plugin = g->plugin,
                        .allow_reset = g->reboots,
                        .second_qmp = g->reboots,
                        .extra_args = extra,
                        .cmdline = cmdline};
    double t0 = now_s();
    int rc = vm_start(&o, &g->vm);
    if (rc)
        return rc;
    if (vm_wait_serial(g->vm, "qprof-linux: all started", BOOT_TIMEOUT) != 0) {
        char *log = vm_serial_text(g->vm);
        fprintf(stderr, "the Linux guest did not come up; console:\n%s\n", log);
        bool panicked = log && strstr(log, "Kernel panic");
        free(log);
        return panicked ? -EAGAIN : -1;
    }
    char *log = vm_serial_text(g->vm);
    /* The console may end lines with \r\n. */
    for (char *p = log; *p; p++)
        if (*p == '\r')
            *p = '\n';
    g->dd_pid = workload_pid(log, "dd");
    g->sh_pid = workload_pid(log, "shloop");
    g->hot_pid = workload_pid(log, "hotpath");
    g->nopie_pid = workload_pid(log, "hotpath-nopie");
    free(log);
    fprintf(stderr, "Linux guest (%d vCPUs) up in %.1f s, dd is pid %d, shloop pid %d\n", smp,
            now_s() - t0, g->dd_pid, g->sh_pid);
    return 0;
}

/* make_guest() and boot(): 0, VM_SKIP (the caller exits with it), or -1 after a failed check. */
static int start_guest(int smp, const char *run, struct guest *g)
{
    int rc = make_guest();
    if (rc == 0)
        rc = boot(smp, run, g);
    if (rc == -EAGAIN) {
        /* The guest's kernel died booting, before qprof was started (CI once: an int3 Oops in
         * run_timer_softirq of 7.3 under MTTCG): a fault of the guest under TCG, not of what
         * the case tests. One more boot; a second panic fails the case. */
        fprintf(stderr, "the guest kernel panicked while booting, before qprof ran: booting it "
                        "once more\n");
        vm_stop(g->vm);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g->dir);
        CHECK_INT(system(cmd), 0);
        rc = boot(smp, run, g);
    }
    if (rc != VM_SKIP)
        CHECK_INT(rc, 0);
    return rc;
}

/* Stops the guest and removes its files; the case's result. */
static int end_guest(struct guest *g)
{
    vm_stop(g->vm);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g->dir);
    CHECK_INT(system(cmd), 0);
    return harness_result();
}

/* Reads a folded file qprof wrote; every line must be "STACK COUNT". */
static struct folded read_folded(const char *path)
{
    CHECK_MSG(access(path, R_OK) == 0, "no %s", path);
    struct folded f = folded_read(path);
    CHECK_MSG(!f.malformed, "%u malformed lines in %s, the first: '%s'", f.malformed, path,
              f.first_malformed);
    return f;
}

/* ---- Checks ------------------------------------------------------------------------------ */

/* Position of frame name in a folded stack's frames, or -1; prefix matches names like
 * entry_SYSCALL_64_after_hwframe or clear_user_rep_good. */
static int frame_index(gchar **frames, const char *prefix)
{
    for (int i = 0; frames[i]; i++)
        if (g_str_has_prefix(frames[i], prefix))
            return i;
    return -1;
}

/* A kernel thread's stack ("[name] (pid)") never holds a system call's entry: one that does was
 * named by the wrong task (a sample in the middle of a context switch, say). */
static void check_kthread_root(gchar **frames, const char *stack)
{
    if (frames[0][0] != '[')
        return;
    CHECK_MSG(frame_index(frames, "entry_SYSCALL_64") < 0,
              "a kernel thread's stack with a system call in it: %s", stack);
}

/* dd's kernel samples: read_zero (or clear_user*, iov_iter_zero) under ksys_read under
 * do_syscall_64 under entry_SYSCALL_64*, parent before child. Up to `unnamed` of them may be
 * rooted at "kernel": samples qprof said it could not name (check_named_at_instant). */
static void check_dd_stacks(const char *folded_path, const struct guest *g, uint64_t unnamed)
{
    struct folded f = read_folded(folded_path);
    uint64_t busy = 0, dd_kernel = 0, ordered = 0;
    for (guint si = 0; si < f.stacks->len; si++) {
        uint64_t count = COUNT(&f, si);
        gchar **frames = folded_frames(&f, si);
        check_kthread_root(frames, STACK(&f, si));
        if (strcmp(frames[0], "idle") != 0)
            busy += count;
        int leaf = frame_index(frames, "read_zero");
        if (leaf < 0)
            leaf = frame_index(frames, "iov_iter_zero");
        if (leaf < 0)
            leaf = frame_index(frames, "clear_user");
        if (leaf >= 0) {
            dd_kernel += count;
            int entry = frame_index(frames, "entry_SYSCALL_64");
            int sys = frame_index(frames, "do_syscall_64");
            int read = frame_index(frames, "ksys_read");
            bool ok = entry >= 0 && entry < sys && sys < read && read < leaf;
            CHECK_MSG(ok, "dd stack out of order: %s", STACK(&f, si));
            ordered += ok ? count : 0;
            char root[64];
            snprintf(root, sizeof root, "dd (%d)", g->dd_pid);
            bool said_unnamed = strcmp(frames[0], "kernel") == 0 && count <= unnamed;
            unnamed -= said_unnamed ? count : 0;
            CHECK_MSG(said_unnamed || strcmp(frames[0], root) == 0, "dd stack rooted at %s, not %s",
                      frames[0], root);
        }
        g_strfreev(frames);
    }
    (void)g;
    fprintf(stderr, "busy samples %" PRIu64 ", dd in read_zero/clear_user %" PRIu64 "\n", busy,
            dd_kernel);
    /* dd spends nearly all its time clearing its buffer in the kernel; a quarter leaves room
     * for TCG's late stops, interrupts and the other workloads. */
    CHECK_MSG(busy > 0 && dd_kernel * 4 >= busy,
              "only %" PRIu64 " of %" PRIu64 " busy samples in dd's read path", dd_kernel, busy);
    CHECK(ordered == dd_kernel);
    folded_free(&f);
}

/* User leaves of the stacks rooted at "comm (pid)": a stack with a user part shows
 * "root;[truncated];LEAF;..." (the leaf is all Linux userland without frame pointers gives).
 * Counts the samples whose leaf is busybox+0xOFF with OFF inside the file, and those with
 * another (or no) name. */
struct leaves {
    uint64_t samples, named, unnamed;
};

static struct leaves user_leaves(const char *folded_path, const char *comm, int pid,
                                 uint64_t busybox_size)
{
    struct leaves n = {0};
    char root[64];
    snprintf(root, sizeof root, "%s (%d)", comm, pid);
    struct folded f = read_folded(folded_path);
    for (guint si = 0; si < f.stacks->len; si++) {
        uint64_t count = COUNT(&f, si);
        gchar **frames = folded_frames(&f, si);
        if (strcmp(frames[0], root) == 0) {
            n.samples += count;
            unsigned long long off;
            char end;
            if (frames[1] && strcmp(frames[1], "[truncated]") == 0 && frames[2]) {
                bool ok = sscanf(frames[2], "busybox+0x%llx%c", &off, &end) == 1;
                CHECK_MSG(!ok || off < busybox_size,
                          "%s: offset 0x%llx is past busybox's %" PRIu64 " bytes", frames[2], off,
                          busybox_size);
                if (ok)
                    n.named += count;
                else
                    n.unnamed += count;
                if (!ok)
                    fprintf(stderr, "user leaf not named by busybox: %s\n", STACK(&f, si));
            }
        }
        g_strfreev(frames);
    }
    folded_free(&f);
    fprintf(stderr,
            "%s: %" PRIu64 " samples, user leaves busybox+0x... %" PRIu64 ", other %" PRIu64 "\n",
            root, n.samples, n.named, n.unnamed);
    return n;
}

static uint64_t busybox_size(void)
{
    struct stat st;
    return stat(guest_file("/busybox"), &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* dd enters the kernel from busybox's code (read and write system calls): its stacks carry that
 * user leaf; the shell loop runs busybox's interpreter in user mode. */
static void check_user_leaves(const char *folded_path, const struct guest *g)
{
    uint64_t size = busybox_size();
    CHECK_MSG(size > 100000, "no copy of the guest's busybox (%" PRIu64 " bytes)", size);
    struct leaves dd = user_leaves(folded_path, "dd", g->dd_pid, size);
    /* Nearly every dd sample is a system call from user mode; a late or torn stop may lose the
     * user part, a VMA walk may meet a node the kernel is rewriting: half is ample. */
    CHECK_MSG(dd.named * 2 >= dd.samples && dd.samples > 0,
              "only %" PRIu64 " of dd's %" PRIu64 " samples have a busybox+0x... user leaf",
              dd.named, dd.samples);
    CHECK_MSG(dd.unnamed * 10 <= dd.named + dd.unnamed,
              "%" PRIu64 " of dd's user leaves are not named busybox+0x...", dd.unnamed);
    if (g->sh_pid < 0)
        return;
    struct leaves sh = user_leaves(folded_path, "sh", g->sh_pid, size);
    CHECK_MSG(sh.named * 2 >= sh.samples && sh.samples > 0,
              "only %" PRIu64 " of the shell loop's %" PRIu64
              " samples have a busybox+0x... user leaf",
              sh.named, sh.samples);
    CHECK_MSG(sh.unnamed * 10 <= sh.named + sh.unnamed,
              "%" PRIu64 " of the shell loop's user leaves are not named busybox+0x...",
              sh.unnamed);
}

/* --one-shot --show-addresses prints "#N 0xPC name+0xOFF [module]" per frame. */
static void check_one_shot_addresses(const char *text, GArray *syms, int *kernel_frames)
{
    gchar **lines = g_strsplit(text, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        unsigned long long pc, off;
        char name[256];
        int index;
        if (!strstr(*l, "[kernel]") ||
            sscanf(*l, " #%d 0x%llx %255[^+]+0x%llx", &index, &pc, name, &off) != 4)
            continue;
        (*kernel_frames)++;
        /* Frame 0 is the interrupted instruction; the others are return addresses. */
        CHECK_MSG(inside(syms, pc, index == 0, name),
                  "kernel frame 0x%llx named %s is not "
                  "inside that symbol in the guest's /proc/kallsyms",
                  pc, name);
    }
    g_strfreev(lines);
}

/* Through the plugin, the current task of each sample comes from what the plugin captured at
 * its instant (qprof -v counts the adapter's reads of it), never from a live read: a sample
 * whose capture lacks it (taken before the plugin had the adapter's windows) is not named. */
static uint64_t check_named_at_instant(const char *err)
{
    CHECK_MSG(strstr(err, "linux adapter's ") && strstr(err, "windows are captured at each sample"),
              "the Linux adapter's windows were not sent to the plugin:\n%s", err);
    const char *at = strstr(err, "Linux current tasks: ");
    unsigned long long instant = 0, unnamed = 0;
    CHECK_MSG(at && sscanf(at,
                           "Linux current tasks: %llu reads from the sample's capture, %llu "
                           "samples not named",
                           &instant, &unnamed) == 2,
              "no count of the current task's reads:\n%s", err);
    fprintf(stderr, "current task reads from the capture: %llu, samples not named: %llu\n", instant,
            unnamed);
    /* unnamed: the sample that found the kernel, before the plugin had the windows (the rest of
     * those are passed over), and switches whose incoming task was not captured */
    CHECK_MSG(instant > 0 && unnamed * 100 <= instant,
              "%llu samples not named, %llu reads from the capture", unnamed, instant);
    return unnamed;
}

/* How case_dd samples the guest. */
enum dd_via {
    VIA_QMP,
    VIA_GDB,    /* the gdbstub, with QMP beside it for the shared RAM file (how the adapter
                   finds the kernel while the guest runs) */
    VIA_PLUGIN, /* qprof-plugin.so in QEMU 10, with QMP beside it for the RAM file */
};

static int case_dd(int smp, enum dd_via via)
{
    struct guest g = {
        .gdbstub = via == VIA_GDB, .plugin = via == VIA_PLUGIN, .want_kallsyms = true};
    int rc = start_guest(smp, smp > 1 ? "dd,shloop" : "dd", &g);
    if (rc)
        return rc == VM_SKIP ? VM_SKIP : harness_result();
    GArray *syms = read_kallsyms(g.kallsyms);
    CHECK_MSG(syms->len > 10000, "the guest's kallsyms dump has %u text symbols", syms->len);

    char folded[320];
    snprintf(folded, sizeof folded, "%s/linux.folded", g.dir);
    const char *args[] = {"--qmp-socket", vm_qmp_path(g.vm), "--samples", SAMPLES, "-o",
                          folded,         "--no-progress",   NULL};
    const char *gdb_args[] = {"--transport",
                              "gdb",
                              "--gdb",
                              vm_gdb_address(g.vm),
                              "--qmp-socket",
                              vm_qmp_path(g.vm),
                              "--samples",
                              SAMPLES,
                              "-o",
                              folded,
                              "--no-progress",
                              NULL};
    /* -v: the plugin's capture counts (how many task reads came from the sample's instant) */
    const char *plugin_args[] = {"--plugin",
                                 vm_plugin_address(g.vm),
                                 "--qmp-socket",
                                 vm_qmp_path(g.vm),
                                 "--samples",
                                 PLUGIN_SAMPLES,
                                 "-v",
                                 "-o",
                                 folded,
                                 "--no-progress",
                                 NULL};
    const char *const *use = via == VIA_GDB ? gdb_args : via == VIA_PLUGIN ? plugin_args : args;
    struct run r = run_qprof(g.dir, use, 240);
    CHECK_INT(r.exit_code, 0);
    fprintf(stderr, "%s", r.err);
    CHECK_MSG(strstr(r.err, "kernel stacks by ORC"), "no ORC summary line");
    if (via == VIA_GDB)
        CHECK_MSG(strstr(r.err, no_ram_file ? "transport: gdbstub, memory: process memory)"
                                            : "transport: gdbstub, memory: direct"),
                  "not sampled through the gdbstub with %s:\n%s",
                  no_ram_file ? "process memory" : "the RAM file", r.err);
    if (via == VIA_QMP && no_ram_file)
        CHECK_MSG(strstr(r.err, "transport: QMP, memory: process memory)") &&
                      !strstr(r.err, "qprof: process memory:"),
                  "not sampled through QMP with process memory:\n%s", r.err);
    uint64_t unnamed = via == VIA_PLUGIN ? check_named_at_instant(r.err) : 0;
    check_dd_stacks(folded, &g, unnamed);
    check_user_leaves(folded, &g);
    run_free(&r);

    /* Each --one-shot finds the kernel again (a second or more under ASan): stop as soon as
     * one sample has shown enough kernel frames (dd is nearly always in the kernel). The
     * plugin's one sample is the first vCPU's with a record, mostly vCPU 0's, which at 2 vCPUs
     * may be the shell loop's every time: that case leaves this to dd-plugin (1 vCPU). */
    int kernel_frames = 0, tries = via == VIA_PLUGIN ? (smp > 1 ? 0 : 8) : 3;
    for (int i = 0; i < tries && kernel_frames < 5; i++) {
        const char *one[] = {"--qmp-socket", vm_qmp_path(g.vm), "--one-shot", "--show-addresses",
                             NULL};
        const char *one_plugin[] = {"--plugin",
                                    vm_plugin_address(g.vm),
                                    "--qmp-socket",
                                    vm_qmp_path(g.vm),
                                    "--one-shot",
                                    "--show-addresses",
                                    NULL};
        r = run_qprof(g.dir, via == VIA_PLUGIN ? one_plugin : one, 120);
        CHECK_INT(r.exit_code, 0);
        check_one_shot_addresses(r.out, syms, &kernel_frames);
        run_free(&r);
    }
    CHECK_MSG(!tries || kernel_frames >= 5, "only %d kernel frames in up to %d one-shot samples",
              kernel_frames, tries);
    for (guint i = 0; i < syms->len; i++)
        g_free(g_array_index(syms, struct ksym, i).name);
    g_array_free(syms, TRUE);
    return end_guest(&g);
}

/* Overwrites the start of the guest's BTF (where qprof -v says it is) in the shared RAM file:
 * 0, or -1 with a failed check. */
static int spoil_btf(const struct guest *g)
{
    const char *one[] = {"--qmp-socket", vm_qmp_path(g->vm), "--one-shot", "-v", NULL};
    struct run r = run_qprof(g->dir, one, 120);
    CHECK_INT(r.exit_code, 0);
    const char *at = strstr(r.err, "(guest-physical 0x");
    CHECK_MSG(at != NULL, "qprof -v did not say where the BTF is:\n%s", r.err);
    unsigned long long paddr = at ? strtoull(at + strlen("(guest-physical "), NULL, 16) : 0;
    run_free(&r);
    char ram[400];
    snprintf(ram, sizeof ram, "%s/ram", vm_dir(g->vm));
    int fd = open(ram, O_RDWR);
    CHECK_MSG(fd >= 0, "cannot open the guest's RAM file %s", ram);
    if (!at || fd < 0)
        return -1;
    uint8_t magic[2] = {0}, zero[64] = {0};
    /* 0xeB9F, little-endian: the BTF header's magic, as the test expects to find it */
    CHECK_INT((int)pread(fd, magic, 2, (off_t)paddr), 2);
    CHECK_MSG(magic[0] == 0x9f && magic[1] == 0xeb, "no BTF magic at guest-physical 0x%llx", paddr);
    CHECK_INT((int)pwrite(fd, zero, sizeof zero, (off_t)paddr), (int)sizeof zero);
    close(fd);
    return 0;
}

/* A kernel whose BTF is garbage: one line says so, kernel stacks keep their names (ORC and
 * kallsyms need no BTF), and no stack claims a process it cannot know. */
static int case_no_btf(void)
{
    struct guest g = {0};
    int rc = start_guest(1, "dd", &g);
    if (rc)
        return rc == VM_SKIP ? VM_SKIP : harness_result();
    if (spoil_btf(&g))
        return harness_result();
    char folded[320];
    snprintf(folded, sizeof folded, "%s/nobtf.folded", g.dir);
    const char *args[] = {"--qmp-socket", vm_qmp_path(g.vm), "--samples", "40", "-o",
                          folded,         "--no-progress",   NULL};
    struct run r = run_qprof(g.dir, args, 240);
    CHECK_INT(r.exit_code, 0);
    const char *line = strstr(r.err, "Linux BTF unusable");
    CHECK_MSG(line != NULL, "no line about the spoiled BTF:\n%s", r.err);
    CHECK_MSG(!line || !strstr(line + 1, "Linux BTF unusable"), "said more than once:\n%s", r.err);
    CHECK_MSG(strstr(r.err, "40 samples"), "no samples after the fallback:\n%s", r.err);
    run_free(&r);
    struct folded f = read_folded(folded);
    int named = 0;
    for (guint i = 0; i < f.stacks->len; i++) {
        const char *stack = STACK(&f, i);
        CHECK_MSG(!g_str_has_prefix(stack, "dd ("), "a process named without BTF: %s", stack);
        named += strstr(stack, ";ksys_read;") && strstr(stack, ";read_zero");
    }
    CHECK_MSG(named > 0, "no kernel stack of dd named by ORC and kallsyms in %u stacks",
              f.stacks->len);
    folded_free(&f);
    return end_guest(&g);
}

/* ---- A reboot under qprof's feet ----------------------------------------------------------- */

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Waits until qprof's stderr (in err_path) has verified the kernel `finds` times and shows at
 * least min_samples samples (or min_more past the count when the kernel was verified). */
static bool wait_qprof(const char *err_path, int finds, uint64_t min_more, double timeout_s)
{
    double deadline = now_s() + timeout_s;
    uint64_t at_find = UINT64_MAX;
    while (now_s() < deadline) {
        gchar *err = NULL;
        g_file_get_contents(err_path, &err, NULL, NULL);
        uint64_t n = err ? child_progress_samples(err) : 0;
        if (err && count_of(err, "it is the running one") >= finds && at_find == UINT64_MAX)
            at_find = n;
        g_free(err);
        if (at_find != UINT64_MAX && n >= at_find + min_more)
            return true;
        usleep(50000);
    }
    return false;
}

/* True when frame is a bare user address ("0x4f3a568") outside [lo, hi). */
static bool stray_user_frame(const char *frame, uint64_t lo, uint64_t hi)
{
    char *end;
    if (strncmp(frame, "0x", 2) != 0)
        return false;
    uint64_t a = strtoull(frame + 2, &end, 16);
    return *end == '\0' && a < UINT64_C(0xffff800000000000) && (a < lo || a >= hi);
}

/* system_reset from a second QMP client while qprof samples dd: QMP's RESET event tells qprof
 * at once, before the new boot overwrote what the old one left in RAM (vmcoreinfo, task_structs,
 * per-CPU data). Without that, the new boot's early code (at physical addresses, in kernel mode)
 * was counted as dd's, and a scan could find the old boot's vmcoreinfo again. */
static int case_reboot(void)
{
    struct guest g = {.reboots = true};
    int rc = start_guest(1, "dd", &g);
    if (rc)
        return rc == VM_SKIP ? VM_SKIP : harness_result();
    char folded[320], out_path[400], err_path[400];
    snprintf(folded, sizeof folded, "%s/reboot.folded", g.dir);
    snprintf(out_path, sizeof out_path, "%s/reboot.out", g.dir);
    snprintf(err_path, sizeof err_path, "%s/reboot.err", g.dir);
    const char *args[] = {"--qmp-socket",
                          vm_qmp_path(g.vm),
                          "--samples",
                          "1000000",
                          "-v",
                          "--progress",
                          "-o",
                          folded,
                          NULL};
    pid_t q = child_start(QPROF_BIN, args, g.dir, out_path, err_path, NULL);
    CHECK_MSG(q > 0, "qprof did not start");
    bool before = wait_qprof(err_path, 1, 50, 240);
    CHECK_MSG(before, "qprof did not find the kernel and take 50 samples");
    if (before) {
        qmp_client *c = NULL;
        struct qp_error err = {0};
        CHECK_MSG(qmp_open(vm_qmp2_path(g.vm), NULL, &c, &err) == 0 &&
                      qmp_execute(c, "system_reset", NULL, NULL, &err) == 0,
                  "system_reset on socket 2: %s", err.msg);
        qmp_free(c);
        double t0 = now_s();
        while (vm_count_serial(g.vm, "qprof-linux: all started") < 2 && now_s() < t0 + BOOT_TIMEOUT)
            usleep(100000);
        CHECK_MSG(vm_count_serial(g.vm, "qprof-linux: all started") == 2,
                  "the guest did not boot again");
        CHECK_MSG(wait_qprof(err_path, 2, 100, 240),
                  "qprof did not find the new boot's kernel and take 100 samples of it");
    }
    kill(q, SIGINT);
    bool late;
    CHECK_INT(child_wait(q, 120, &late), 0);
    gchar *err = NULL;
    g_file_get_contents(err_path, &err, NULL, NULL);
    /* Not "1 time(s)": after a system_reset QEMU reports a second RESET (the firmware's own, by
     * the look of it), and the summary counts what QEMU reports. */
    CHECK_MSG(err && strstr(err, "guest reset"), "no 'guest reset' in the summary:\n%s", err);
    CHECK_MSG(err && !strstr(err, "runtime error:") && !strstr(err, "Sanitizer"),
              "sanitizer report:\n%s", err);
    struct folded f = read_folded(folded);
    /* Each boot's dd is pid 88 or so: what tells them apart is where their code is. dd's user
     * frames lie in busybox (0x400000 on, non-PIE); a bare address elsewhere is the new boot's
     * early code counted as the old dd. */
    uint64_t lo = 0x400000, hi = lo + busybox_size(), dd = 0, dd_named = 0, stray = 0;
    uint64_t kthreads = 0; /* samples rooted at a kernel thread: "[name] (pid)" */
    char root[32];
    snprintf(root, sizeof root, "dd (%d);", g.dd_pid);
    for (guint si = 0; si < f.stacks->len; si++) {
        const char *stack = STACK(&f, si);
        uint64_t count = COUNT(&f, si);
        /* The boot under qprof runs kernel threads (kworker/N, cryptomgr_test, ...): marked. */
        if (stack[0] == '[' && strstr(stack, "] ("))
            kthreads += count;
        /* Not kworker: a usermode helper starts as a kworker's child with its name and no
         * PF_KTHREAD (user_mode_thread), on its way to exec: a process, rightly unmarked. */
        const char *kthread_names[] = {"ksoftirqd/", "cryptomgr_", "kthreadd ", "rcu_",
                                       "migration/"};
        for (size_t k = 0; k < G_N_ELEMENTS(kthread_names); k++)
            CHECK_MSG(!g_str_has_prefix(stack, kthread_names[k]),
                      "a kernel thread's root without its brackets: %s", stack);
        if (!g_str_has_prefix(stack, root))
            continue;
        dd += count;
        dd_named += strstr(stack, ";ksys_read;") && strstr(stack, ";read_zero") ? count : 0;
        gchar **frames = folded_frames(&f, si);
        bool bad = false;
        for (int i = 1; frames[i]; i++)
            bad = bad || stray_user_frame(frames[i], lo, hi);
        if (bad) {
            stray += count;
            fprintf(stderr, "not dd's code: %s %" PRIu64 "\n", stack, count);
        }
        g_strfreev(frames);
    }
    fprintf(stderr,
            "dd: %" PRIu64 " samples, %" PRIu64 " in read_zero under ksys_read, %" PRIu64
            " with code outside busybox\n",
            dd, dd_named, stray);
    CHECK_MSG(stray == 0, "%" PRIu64 " samples of dd hold addresses outside its code", stray);
    /* What qprof saw of the reset, for a failure's reader: the summary's reset lines. */
    gchar **lines = g_strsplit(err ? err : "", "\n", -1);
    for (int i = 0; lines[i]; i++)
        if (strstr(lines[i], "reset") || strstr(lines[i], "vmcoreinfo at"))
            fprintf(stderr, "qprof: %s\n", lines[i]);
    g_strfreev(lines);
    /* How many depends on when the new kernel was found: reported, not required. */
    fprintf(stderr, "samples rooted at a kernel thread: %" PRIu64 "\n", kthreads);
    /* 50 samples before the reset, 100 after the new kernel was found, dd nearly always in
     * read(): well over 60 of them. */
    CHECK_MSG(dd_named >= 60, "only %" PRIu64 " named dd stacks across the reboot", dd_named);
    folded_free(&f);
    g_free(err);
    return end_guest(&g);
}

/* The demo guest is not Linux: --os linux says so in one line and samples by address split. */
static int case_not_linux(void)
{
    struct vm_opts o = {.shared_ram = true};
    test_vm *vm = NULL;
    int rc = vm_start(&o, &vm);
    if (rc == VM_SKIP)
        return VM_SKIP;
    CHECK_INT(rc, 0);
    if (rc)
        return harness_result();
    CHECK_INT(vm_wait_serial(vm, "qprof-guest: ", 120), 0);
    const char *args[] = {"--qmp-socket", vm_qmp_path(vm), "--os", "linux", "--samples", "20", "-o",
                          "out.folded",   "--no-progress", NULL};
    struct run r = run_qprof(vm_dir(vm), args, 120);
    CHECK_INT(r.exit_code, 0);
    const char *line = strstr(r.err, "--os linux: no Linux vmcoreinfo");
    CHECK_MSG(line != NULL, "no clear line for a guest that is not Linux:\n%s", r.err);
    CHECK_MSG(!line || !strstr(line + 1, "--os linux:"), "said more than once:\n%s", r.err);
    CHECK_MSG(strstr(r.err, "20 samples"), "no samples after the fallback:\n%s", r.err);
    run_free(&r);
    vm_stop(vm);
    return harness_result();
}

/* ---- --sysroot ------------------------------------------------------------------------- */

#define SYSROOT_SAMPLES 200
#define HOTPATH_GUEST   "/usr/local/bin/hotpath"

/* What the stacks of one hotpath process ("COMM (PID);...") in a folded file show. */
struct hot_stacks {
    uint64_t samples; /* rooted at hotpath (PID) */
    uint64_t chain;   /* main;outer_work;middle_work;hot_leaf in that order, nothing between */
    uint64_t named;   /* any of those four names, anywhere */
    uint64_t leaf_by_mapping; /* user part "[truncated];hotpath+0x..." */
    uint64_t from_start;      /* the chain under _start, the outermost frame */
};

/* The frames above main are libc's start code and the executable's _start, nothing else (and,
 * first, the mark of a walk that ended in libc: its .eh_frame pages are not in the process's page
 * tables when qprof has no --sysroot). */
static bool start_frames_ok(gchar **frames, int main_at)
{
    for (int i = 1; i < main_at; i++)
        if (strcmp(frames[i], "_start") != 0 && !g_str_has_prefix(frames[i], "__libc_start") &&
            !g_str_has_prefix(frames[i], "libc.so.6+0x") &&
            !(i == 1 && strcmp(frames[i], "[truncated]") == 0))
            return false;
    return true;
}

static void count_hot_stack(gchar **frames, uint64_t count, const char *leaf_prefix,
                            struct hot_stacks *h)
{
    const char *chain[] = {"main", "outer_work", "middle_work", "hot_leaf"};
    int at[4];
    bool any = false;
    for (int k = 0; k < 4; k++) {
        at[k] = -1;
        for (int i = 1; frames[i]; i++)
            if (strcmp(frames[i], chain[k]) == 0)
                at[k] = i;
        any |= at[k] >= 0;
    }
    h->samples += count;
    h->named += any ? count : 0;
    bool in_order = at[0] > 0 && at[1] == at[0] + 1 && at[2] == at[1] + 1 && at[3] == at[2] + 1;
    if (in_order) {
        CHECK_MSG(start_frames_ok(frames, at[0]), "unexpected frames above main in: %s (...)",
                  frames[1]);
        h->chain += count;
        h->from_start += strcmp(frames[1], "_start") == 0 ? count : 0;
    }
    if (frames[1] && strcmp(frames[1], "[truncated]") == 0 && frames[2] &&
        g_str_has_prefix(frames[2], leaf_prefix))
        h->leaf_by_mapping += count;
}

static struct hot_stacks hot_stacks(const char *folded_path, const char *comm, int pid)
{
    struct hot_stacks h = {0};
    char root[64], leaf_prefix[64];
    snprintf(root, sizeof root, "%s (%d)", comm, pid);
    snprintf(leaf_prefix, sizeof leaf_prefix, "%s+0x", comm);
    struct folded f = read_folded(folded_path);
    for (guint si = 0; si < f.stacks->len; si++) {
        uint64_t count = COUNT(&f, si);
        gchar **frames = folded_frames(&f, si);
        if (strcmp(frames[0], root) == 0)
            count_hot_stack(frames, count, leaf_prefix, &h);
        g_strfreev(frames);
    }
    folded_free(&f);
    fprintf(stderr,
            "%s: %" PRIu64 " samples, main..hot_leaf chain %" PRIu64 ", any of those names %" PRIu64
            ", leaf only as %s... %" PRIu64 ", chain from _start %" PRIu64 "\n",
            root, h.samples, h.chain, h.named, leaf_prefix, h.leaf_by_mapping, h.from_start);
    return h;
}

/* Runs qprof on g's guest with extra args (NULL-terminated, at most 4); the folded file is
 * dir/name. */
static struct run profile_hotpath(const struct guest *g, const char *name, const char *samples,
                                  const char *const *extra, char *folded, size_t folded_size)
{
    snprintf(folded, folded_size, "%s/%s", g->dir, name);
    const char *args[18] = {"--qmp-socket", vm_qmp_path(g->vm), "--samples", samples, "-o",
                            folded,         "--no-progress"};
    int n = 7;
    if (g->plugin) {
        args[n++] = "--plugin";
        args[n++] = vm_plugin_address(g->vm);
    }
    for (int i = 0; extra && extra[i] && n < 16; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    struct run r = run_qprof(g->dir, args, 240);
    CHECK_INT(r.exit_code, 0);
    fprintf(stderr, "%s", r.err);
    return r;
}

/* plugin: the same through qprof-plugin.so (the user stacks captured at each sample's instant,
 * the mapped files' tables read from the RAM file). */
static int case_sysroot(bool plugin)
{
    struct guest g = {.plugin = plugin};
    int rc = make_guest();
    if (rc == VM_SKIP)
        return VM_SKIP;
    CHECK_INT(rc, 0);
    if (rc)
        return harness_result();
    if (access(guest_file("/sysroot" HOTPATH_GUEST), R_OK) != 0) {
        fprintf(stderr, "SKIP: make-guest.sh built no hotpath (no host cc)\n");
        return VM_SKIP;
    }
    rc = boot(1, "hotpath,hotpath-nopie", &g);
    if (rc == VM_SKIP)
        return VM_SKIP;
    CHECK_INT(rc, 0);
    if (rc)
        return harness_result();
    int pid = g.hot_pid;
    CHECK_MSG(pid > 0 && g.nopie_pid > 0, "the guest printed no pid for hotpath(-nopie)");
    char folded[320], samples[16];
    snprintf(samples, sizeof samples, "%d", SYSROOT_SAMPLES);

    /* With the guest's files: the whole chain, named, for the PIE hotpath and the fixed-address
     * hotpath-nopie alike. Both spin in user mode (timer interrupts land on top of the same
     * chain) and share the single vCPU about evenly, so each has about half the samples; a fifth
     * each, and a quarter of a process's samples lost to late stops, leave a wide margin at 200
     * samples. */
    const char *with[] = {"--sysroot", guest_file("/sysroot"), NULL};
    struct run r = profile_hotpath(&g, "sysroot.folded", samples, with, folded, sizeof folded);
    struct hot_stacks h = hot_stacks(folded, "hotpath", pid);
    struct hot_stacks np = hot_stacks(folded, "hotpath-nopie", g.nopie_pid);
    CHECK_MSG(h.samples * 5 >= SYSROOT_SAMPLES && np.samples * 5 >= SYSROOT_SAMPLES,
              "hotpath has only %" PRIu64 " and hotpath-nopie %" PRIu64 " of %d samples", h.samples,
              np.samples, SYSROOT_SAMPLES);
    CHECK_MSG(h.chain * 4 >= h.samples * 3,
              "only %" PRIu64 " of hotpath's %" PRIu64
              " samples show main;outer_work;middle_work;hot_leaf",
              h.chain, h.samples);
    CHECK_MSG(np.chain * 4 >= np.samples * 3,
              "only %" PRIu64 " of hotpath-nopie's %" PRIu64
              " samples show main;outer_work;middle_work;hot_leaf",
              np.chain, np.samples);
    /* A file of another build is refused ("has build-id X, the guest's ... has Y"); a guest
     * whose build-id page is not in memory at a sample is no rejection (its own copy serves). */
    CHECK_MSG(!strstr(r.err, " has build-id "), "a matching sysroot file was rejected:\n%s", r.err);
    run_free(&r);

    /* Without it: the same chain, unwound by the .eh_frame the process has mapped and named by
     * its .dynsym (hotpath is linked -rdynamic, so that it exports its functions), for the PIE
     * and the fixed-address build alike, up to _start: libc's .eh_frame, which no page table of
     * the process maps, comes from the page cache. */
    r = profile_hotpath(&g, "plain.folded", samples, NULL, folded, sizeof folded);
    h = hot_stacks(folded, "hotpath", pid);
    np = hot_stacks(folded, "hotpath-nopie", g.nopie_pid);
    CHECK_MSG(h.samples * 5 >= SYSROOT_SAMPLES && np.samples * 5 >= SYSROOT_SAMPLES,
              "without --sysroot hotpath has %" PRIu64 " and hotpath-nopie %" PRIu64
              " of %d samples",
              h.samples, np.samples, SYSROOT_SAMPLES);
    CHECK_MSG(h.chain * 4 >= h.samples * 3,
              "without --sysroot only %" PRIu64 " of hotpath's %" PRIu64
              " samples show main;outer_work;middle_work;hot_leaf",
              h.chain, h.samples);
    CHECK_MSG(np.chain * 4 >= np.samples * 3,
              "without --sysroot only %" PRIu64 " of hotpath-nopie's %" PRIu64
              " samples show main;outer_work;middle_work;hot_leaf",
              np.chain, np.samples);
    CHECK_MSG(h.from_start * 4 >= h.samples * 3 && np.from_start * 4 >= np.samples * 3,
              "without --sysroot only %" PRIu64 " of hotpath's %" PRIu64 " and %" PRIu64
              " of hotpath-nopie's %" PRIu64 " samples reach _start",
              h.from_start, h.samples, np.from_start, np.samples);
    CHECK_MSG(strstr(r.err, "user stacks by the guest's own .eh_frame: "),
              "no summary line for stacks unwound from the guest's memory:\n%s", r.err);
    run_free(&r);

    /* A sysroot whose hotpath is another build: said once, not used; the guest's own mapped
     * copy names the chain instead (never the other build's names, which would be wrong). */
    const char *other[] = {"--sysroot", guest_file("/sysroot-other"), NULL};
    r = profile_hotpath(&g, "other.folded", "60", other, folded, sizeof folded);
    h = hot_stacks(folded, "hotpath", pid);
    const char *said = strstr(r.err, "sysroot-other" HOTPATH_GUEST " has build-id ");
    CHECK_MSG(said && strstr(said, "not used"), "no word that the other build was not used:\n%s",
              r.err);
    CHECK_MSG(!said || !strstr(said + 1, "sysroot-other" HOTPATH_GUEST " has build-id "),
              "said more than once:\n%s", r.err);
    CHECK_MSG(h.samples > 0 && h.chain * 4 >= h.samples * 3,
              "with another build under --sysroot only %" PRIu64 " of %" PRIu64
              " hotpath samples show the chain from the guest's memory",
              h.chain, h.samples);
    run_free(&r);

    return end_guest(&g);
}

/* ---- Modules (brd.ko) --------------------------------------------------------------------- */

/* Adds the guest's module text symbols ("ADDR t NAME\t[MODULE]") to syms as "NAME [MODULE]",
 * qprof's naming; returns how many. */
static unsigned add_module_kallsyms(GArray *syms, const char *path)
{
    char *text = NULL;
    unsigned n = 0;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    char **lines = split_lines(text);
    for (char **l = lines; *l; l++) {
        char name[256], module[64], type;
        unsigned long long addr;
        if (sscanf(*l, "%llx %c %255s [%63[^]]]", &addr, &type, name, module) != 4)
            continue;
        if (type != 't' && type != 'T' && type != 'w' && type != 'W')
            continue;
        struct ksym k = {addr, g_strdup_printf("%s [%s]", name, module)};
        g_array_append_val(syms, k);
        n++;
    }
    g_free(lines);
    g_free(text);
    g_array_sort(syms, cmp_ksym);
    return n;
}

static bool is_known(GArray *syms, const char *name)
{
    for (guint i = 0; i < syms->len; i++)
        if (strcmp(g_array_index(syms, struct ksym, i).name, name) == 0)
            return true;
    return false;
}

/* dd's read through brd: entry_SYSCALL_64* ... do_syscall_64 ... ksys_read ... submit_bio* ...
 * brd_submit_bio [brd] (the first [brd] frame, at first_brd) ..., parent before child. */
static bool brd_read_ordered(gchar **frames, int first_brd)
{
    int entry = frame_index(frames, "entry_SYSCALL_64");
    int sys = frame_index(frames, "do_syscall_64");
    int read = frame_index(frames, "ksys_read");
    int submit = frame_index(frames, "submit_bio");
    int brd = frame_index(frames, "brd_submit_bio [brd]");
    return entry >= 0 && entry < sys && sys < read && read < submit && submit < first_brd &&
           brd == first_brd;
}

/* Samples with brd frames: dd's, and below the block layer: entry_SYSCALL_64* ... do_syscall_64
 * ... ksys_read ... submit_bio* ... brd_submit_bio [brd] ... (any other [brd] frame), parent
 * before child; every [brd] name one of brd's functions. */
static void check_module_stacks(const char *folded_path, GArray *syms)
{
    struct folded f = read_folded(folded_path);
    uint64_t busy = 0, in_brd = 0, ordered = 0;
    for (guint si = 0; si < f.stacks->len; si++) {
        uint64_t count = COUNT(&f, si);
        gchar **frames = folded_frames(&f, si);
        if (strcmp(frames[0], "idle") != 0)
            busy += count;
        int first_brd = -1;
        for (int i = 0; frames[i]; i++) {
            if (!g_str_has_suffix(frames[i], " [brd]"))
                continue;
            first_brd = first_brd < 0 ? i : first_brd;
            CHECK_MSG(is_known(syms, frames[i]), "%s is not a function of brd's per kallsyms",
                      frames[i]);
        }
        if (first_brd >= 0) {
            in_brd += count;
            bool ok = brd_read_ordered(frames, first_brd);
            CHECK_MSG(ok, "brd stack out of order or cut short: %s", STACK(&f, si));
            CHECK_MSG(g_str_has_prefix(frames[0], "dd ("), "brd stack rooted at %s", frames[0]);
            ordered += ok ? count : 0;
        }
        g_strfreev(frames);
    }
    fprintf(stderr, "busy samples %" PRIu64 ", in brd's functions %" PRIu64 "\n", busy, in_brd);
    /* dd spends about half its time in brd_do_bvec handing out zeroes (55% measured); a quarter
     * leaves room for TCG's late stops and interrupts. */
    CHECK_MSG(busy > 0 && in_brd * 4 >= busy,
              "only %" PRIu64 " of %" PRIu64 " busy samples in brd's functions", in_brd, busy);
    CHECK(ordered == in_brd);
    folded_free(&f);
}

/* The summary's "kernel stacks by WALK: N, complete (...): X%" (WALK: ORC, frame pointers). */
static double completeness_by(const char *err_text, const char *walk)
{
    char key[64];
    snprintf(key, sizeof key, "kernel stacks by %s:", walk);
    const char *p = strstr(err_text, key);
    const char *pct = p ? strstr(p, "): ") : NULL;
    return pct ? strtod(pct + 3, NULL) : -1;
}

static double kernel_completeness(const char *err_text)
{
    return completeness_by(err_text, "ORC");
}

static double kernel_fp_completeness(const char *err_text)
{
    return completeness_by(err_text, "frame pointers");
}

/* modcycle: brd is loaded, read by one dd, unloaded, again and again while qprof samples. dd's
 * reads through brd stay named and whole across the reloads (the list is read again when it
 * changed, and at once when a stack meets module text no known module covers), few of dd's
 * samples keep an unnamed frame in module space, and brd frames appear only in the processes
 * that load (insmod: brd_init's callees), read or unload it. */
static void check_cycle_stacks(const char *folded_path)
{
    struct folded f = read_folded(folded_path);
    uint64_t busy = 0, dd = 0, dd_brd = 0, dd_unnamed = 0, dd_cut = 0;
    GHashTable *dd_pids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint si = 0; si < f.stacks->len; si++) {
        uint64_t count = COUNT(&f, si);
        gchar **frames = folded_frames(&f, si);
        check_kthread_root(frames, STACK(&f, si));
        busy += strcmp(frames[0], "idle") != 0 ? count : 0;
        bool is_dd = g_str_has_prefix(frames[0], "dd (");
        int first_brd = -1;
        for (int i = 0; frames[i]; i++) {
            if (is_dd && g_str_has_prefix(frames[i], "kernel+0x")) {
                dd_unnamed += count;
                break;
            }
            if (g_str_has_suffix(frames[i], " [brd]") && first_brd < 0)
                first_brd = i;
        }
        dd += is_dd ? count : 0;
        if (first_brd >= 0) {
            bool loader =
                g_str_has_prefix(frames[0], "insmod (") || g_str_has_prefix(frames[0], "rmmod (");
            CHECK_MSG(g_str_has_prefix(frames[first_brd], "brd_"), "not brd's: %s",
                      frames[first_brd]);
            /* A brd loaded since the last look at the module list: its ORC is not read yet, so
             * the walk ends in it, marked, until the next look (at most 50 ms later). */
            bool cut = is_dd && first_brd == 2 && strcmp(frames[1], "[truncated]") == 0;
            dd_cut += cut ? count : 0;
            CHECK_MSG(loader || cut || (is_dd && brd_read_ordered(frames, first_brd)),
                      "brd frames out of place: %s", STACK(&f, si));
            if (is_dd) {
                dd_brd += count;
                g_hash_table_add(dd_pids, g_strdup(frames[0]));
            }
        }
        g_strfreev(frames);
    }
    fprintf(stderr,
            "busy %" PRIu64 ", dd %" PRIu64 " (through brd %" PRIu64 ", %u dd processes; "
            "unnamed module frames %" PRIu64 ", cut at a brd frame %" PRIu64 ")\n",
            busy, dd, dd_brd, g_hash_table_size(dd_pids), dd_unnamed, dd_cut);
    /* Loading brd (its signature check) takes part of each cycle; dd reads through brd half of
     * its time. */
    CHECK_MSG(busy > 0 && dd_brd * 8 >= busy, "only %" PRIu64 " of %" PRIu64 " samples in brd",
              dd_brd, busy);
    CHECK_MSG(dd_unnamed * 10 <= dd, "%" PRIu64 " of dd's %" PRIu64 " samples unnamed in brd",
              dd_unnamed, dd);
    CHECK_MSG(dd_cut * 10 <= dd_brd, "%" PRIu64 " of dd's %" PRIu64 " brd samples cut short in brd",
              dd_cut, dd_brd);
    g_hash_table_destroy(dd_pids);
    folded_free(&f);
}

static int case_modules_cycle(void)
{
    struct guest g = {0};
    int rc = start_guest(1, "modcycle", &g);
    if (rc)
        return rc == VM_SKIP ? VM_SKIP : harness_result();
    char folded[320];
    snprintf(folded, sizeof folded, "%s/cycle.folded", g.dir);
    const char *args[] = {"--qmp-socket", vm_qmp_path(g.vm), "--samples", "400", "-o",
                          folded,         "--no-progress",   NULL};
    struct run r = run_qprof(g.dir, args, 300);
    CHECK_INT(r.exit_code, 0);
    fprintf(stderr, "%s", r.err);
    check_cycle_stacks(folded);
    run_free(&r);
    return end_guest(&g);
}

static int case_modules(void)
{
    struct guest g = {.want_kallsyms = true};
    int rc = start_guest(1, "ramdd", &g);
    if (rc)
        return rc == VM_SKIP ? VM_SKIP : harness_result();
    GArray *syms = read_kallsyms(g.kallsyms);
    unsigned n_mod = add_module_kallsyms(syms, g.kallsyms);
    CHECK_MSG(syms->len > 10000 && n_mod >= 5,
              "the guest's kallsyms dump has %u text symbols, %u of modules", syms->len, n_mod);

    char folded[320];
    snprintf(folded, sizeof folded, "%s/modules.folded", g.dir);
    const char *args[] = {"--qmp-socket", vm_qmp_path(g.vm), "--samples", SAMPLES, "-o",
                          folded,         "--no-progress",   NULL};
    struct run r = run_qprof(g.dir, args, 240);
    CHECK_INT(r.exit_code, 0);
    fprintf(stderr, "%s", r.err);
    check_module_stacks(folded, syms);
    /* Nearly every stack is dd's system call; a module without ORC would end them in brd. */
    double complete = kernel_completeness(r.err);
    CHECK_MSG(complete >= 90.0, "kernel stacks complete: %.1f%%", complete);
    run_free(&r);

    /* One-shot samples with addresses until a few brd frames were seen: each frame, vmlinux's
     * and brd's, inside the symbol it is named by. About two in five samples are in brd (42% of
     * 150 in one CI run), so 8 tries missed two brd frames about one run in ten; 32 miss
     * them about once in 10^6, and stop as soon as they are seen. */
    int kernel_frames = 0, module_frames = 0, tries = 0;
    for (; tries < 32 && module_frames < 2; tries++) {
        const char *one[] = {"--qmp-socket", vm_qmp_path(g.vm), "--one-shot", "--show-addresses",
                             NULL};
        r = run_qprof(g.dir, one, 120);
        CHECK_INT(r.exit_code, 0);
        check_one_shot_addresses(r.out, syms, &kernel_frames);
        for (const char *p = strstr(r.out, " [brd]+0x"); p; p = strstr(p + 1, " [brd]+0x"))
            module_frames++;
        run_free(&r);
    }
    fprintf(stderr, "one-shot: %d kernel frames checked, %d in brd, %d samples\n", kernel_frames,
            module_frames, tries);
    CHECK_MSG(module_frames >= 2, "only %d brd frames in %d one-shot samples", module_frames,
              tries);
    for (guint i = 0; i < syms->len; i++)
        g_free(g_array_index(syms, struct ksym, i).name);
    g_array_free(syms, TRUE);
    return end_guest(&g);
}

/* ---- Other architectures' stock kernels --------------------------------------------------- */

/* How a series of another architecture boots, and the names of dd's read of /dev/zero from the
 * system call's entry to the zeroing leaf, parents first. */
struct foreign {
    const char *series, *qemu, *console;
    const char *const *machine; /* QEMU arguments, NULL-terminated */
    const char *const *chain;   /* NULL-terminated: entry first, leaf last */
};
static const char *const arm64_machine[] = {"-M", "virt", "-cpu", "cortex-a57", NULL};
static const char *const arm64_chain[] = {"el0t_64_sync",      "el0t_64_sync_handler",
                                          "el0_svc",           "do_el0_svc",
                                          "invoke_syscall",    "ksys_read",
                                          "vfs_read",          "read_zero",
                                          "__arch_clear_user", NULL};
static const char *const riscv64_machine[] = {"-M", "virt", "-bios", "default", NULL};
static const char *const riscv64_chain[] = {
    "handle_exception", "do_trap_ecall_u", "ksys_read", "vfs_read",
    "read_zero",        "__clear_user",    NULL};
static const struct foreign foreigns[] = {
    {"arm64-6.1", "qemu-system-aarch64", "ttyAMA0", arm64_machine, arm64_chain},
    {"riscv64-7.x", "qemu-system-riscv64", "ttyS0", riscv64_machine, riscv64_chain},
};

/* The guest of series f under its QEMU, with a gdbstub and shared RAM, nokaslr (the DT seed is
 * left alone: the kernel's own vmcoreinfo gives its offset either way), running the workloads
 * run names (NULL: dd, and a shell loop with 2 vCPUs). */
static int boot_foreign(const struct foreign *f, int smp, const char *run, struct guest *g)
{
    int rc = make_guest();
    if (rc)
        return rc;
    snprintf(g->dir, sizeof g->dir, "/tmp/qprof-linux-XXXXXX");
    if (!mkdtemp(g->dir))
        return -1;
    const char *extra[16];
    int n = 0;
    extra[n++] = "-initrd";
    extra[n++] = guest_file("/initrd.cpio");
    for (const char *const *m = f->machine; *m && n < 14; m++)
        extra[n++] = *m;
    extra[n] = NULL;
    char cmdline[256];
    if (!run)
        run = smp > 1 ? "dd,shloop" : "dd";
    snprintf(cmdline, sizeof cmdline, "console=%s rdinit=/init nokaslr quiet panic=-1 qprof_run=%s",
             f->console, run);
    struct vm_opts o = {.kernel = guest_file("/vmlinuz"),
                        .smp = smp,
                        .mem_mb = 512,
                        .shared_ram = true,
                        .gdbstub = !g->plugin,
                        .plugin = g->plugin,
                        .extra_args = extra,
                        .cmdline = cmdline,
                        .qemu = f->qemu};
    double t0 = now_s();
    rc = vm_start(&o, &g->vm);
    if (rc)
        return rc;
    if (vm_wait_serial(g->vm, "qprof-linux: all started", BOOT_TIMEOUT) != 0)
        return -1;
    char *log = vm_serial_text(g->vm);
    for (char *p = log; *p; p++)
        if (*p == '\r')
            *p = '\n';
    bool ramdd = strstr(run, "ramdd") != NULL;
    g->dd_pid = workload_pid(log, ramdd ? "ramdd" : "dd");
    g->sh_pid = workload_pid(log, "shloop");
    bool brd_loaded = strstr(log, "qprof-linux: brd loaded") != NULL;
    free(log);
    fprintf(stderr, "%s guest (%d vCPUs) up in %.1f s, dd is pid %d, shloop %d\n", f->series, smp,
            now_s() - t0, g->dd_pid, g->sh_pid);
    CHECK_MSG(!ramdd || brd_loaded, "the guest's insmod of brd.ko failed (see its console)");
    return g->dd_pid > 0 && (smp == 1 || g->sh_pid > 0) && (!ramdd || brd_loaded) ? 0 : -1;
}

/* dd's stacks: every one through read_zero holds the whole chain in order, rooted at
 * "dd (PID)", with a user leaf in busybox below the entry; most of dd's samples are there. With
 * a shell loop beside it (sh_pid > 0), on the other vCPU: its samples, nearly all in user mode,
 * are named too. */
static void check_foreign_dd(const struct foreign *fo, const char *folded_path, int dd_pid,
                             int sh_pid)
{
    struct folded f = read_folded(folded_path);
    char root[64], sh_root[64];
    snprintf(root, sizeof root, "dd (%d)", dd_pid);
    snprintf(sh_root, sizeof sh_root, "sh (%d)", sh_pid);
    uint64_t busy = 0, dd = 0, sh = 0, path = 0, ordered = 0, user_named = 0;
    for (guint si = 0; si < f.stacks->len; si++) {
        uint64_t count = COUNT(&f, si);
        gchar **frames = folded_frames(&f, si);
        busy += strcmp(frames[0], "idle") != 0 ? count : 0;
        dd += strcmp(frames[0], root) == 0 ? count : 0;
        sh += strcmp(frames[0], sh_root) == 0 ? count : 0;
        if (frame_index(frames, "read_zero") >= 0) {
            path += count;
            CHECK_MSG(strcmp(frames[0], root) == 0, "dd's read rooted at %s, not %s: %s", frames[0],
                      root, STACK(&f, si));
            int prev = 0;
            bool ok = true;
            for (const char *const *c = fo->chain; *c && ok; c++) {
                int at = frame_index(frames, *c);
                /* The leaf may be read_zero itself (a sample between two clears). */
                if (at < 0 && c[1] == NULL)
                    break;
                ok = at > prev;
                prev = at;
            }
            CHECK_MSG(ok, "dd stack out of order or incomplete: %s", STACK(&f, si));
            ordered += ok ? count : 0;
            int entry = frame_index(frames, fo->chain[0]);
            if (entry >= 2 && g_str_has_prefix(frames[entry - 1], "busybox+0x"))
                user_named += count;
        }
        g_strfreev(frames);
    }
    fprintf(stderr,
            "busy %" PRIu64 ", dd %" PRIu64 ", sh %" PRIu64 ", dd in read_zero %" PRIu64
            " (in order %" PRIu64 ", with a busybox user frame %" PRIu64 ")\n",
            busy, dd, sh, path, ordered, user_named);
    /* dd clears its 1 MiB buffer in the kernel nearly all the time: half its vCPU's samples
     * leaves room for TCG's late stops and the write side; the rest of the guest is idle, or
     * the shell loop on the other vCPU (a quarter each then). */
    uint64_t share = sh_pid > 0 ? 4 : 2;
    CHECK_MSG(dd * share >= busy, "only %" PRIu64 " of %" PRIu64 " busy samples are dd's", dd,
              busy);
    CHECK_MSG(sh_pid <= 0 || sh * 4 >= busy,
              "only %" PRIu64 " of %" PRIu64 " busy samples are the shell loop's (%s)", sh, busy,
              sh_root);
    CHECK_MSG(path * 2 >= dd, "only %" PRIu64 " of dd's %" PRIu64 " samples in read_zero", path,
              dd);
    CHECK(ordered == path);
    CHECK_MSG(user_named * 10 >= path * 9, "%" PRIu64 " of %" PRIu64 " with a user frame",
              user_named, path);
    folded_free(&f);
}

/* The figure after `label` in qprof's summary (err), -1 when the line is not there. */
static double summary_figure(const char *err, const char *label)
{
    const char *at = strstr(err, label);
    return at ? g_ascii_strtod(at + strlen(label), NULL) : -1;
}

/* dd's stacks with the guest's own files as --sysroot (make-guest.sh's sysroot: Debian's
 * busybox, static and stripped, with its build-id and .eh_frame): busybox is matched by
 * build-id in dd's address space, and dd's user stack is unwound by busybox's CFI. Every stack
 * through read_zero is rooted at "dd (PID)", then busybox's frames, named busybox+0xOFFSET,
 * then the kernel's entry chain. Only static glibc's code has CFI there (busybox's own is
 * built without unwind tables): the read wrapper's CFI gives its caller in busybox's dd, where
 * the walk ends, marked. Without the address space the leaf alone is shown, so two busybox
 * frames prove it. n_samples sizes the floors. */
static void check_foreign_sysroot(const struct foreign *fo, const char *folded_path, int dd_pid,
                                  const char *err, uint64_t n_samples)
{
    double by_sysroot = summary_figure(err, "user stacks by --sysroot: ");
    CHECK_MSG(by_sysroot > 0, "no user stack unwound by --sysroot's busybox");
    CHECK_MSG(!strstr(err, "guest files not used from --sysroot"), "a guest file went unused");
    struct folded f = read_folded(folded_path);
    char root[64];
    snprintf(root, sizeof root, "dd (%d)", dd_pid);
    uint64_t path = 0, deep = 0;
    for (guint si = 0; si < f.stacks->len; si++) {
        uint64_t count = COUNT(&f, si);
        gchar **frames = folded_frames(&f, si);
        int entry = frame_index(frames, fo->chain[0]);
        if (frame_index(frames, "read_zero") >= 0) {
            path += count;
            CHECK_MSG(strcmp(frames[0], root) == 0, "dd's read rooted at %s, not %s: %s", frames[0],
                      root, STACK(&f, si));
            /* a walk cut short says so first ("[truncated]") */
            int first = frames[1] && strcmp(frames[1], "[truncated]") == 0 ? 2 : 1;
            bool user_ok = entry > first;
            for (int i = first; i < entry; i++)
                user_ok &= g_str_has_prefix(frames[i], "busybox+0x");
            CHECK_MSG(user_ok, "dd's user frames are not all busybox's: %s", STACK(&f, si));
            int at = entry, prev = entry;
            for (const char *const *c = fo->chain + 1; *c && c[1] && at >= 0; c++) {
                at = frame_index(frames, *c);
                CHECK_MSG(at > prev, "kernel frames out of order after the user's: %s",
                          STACK(&f, si));
                prev = at;
            }
            deep += user_ok && entry - first >= 2 ? count : 0;
        }
        g_strfreev(frames);
    }
    fprintf(stderr,
            "--sysroot: %.0f user stacks by it, %.1f%% complete; dd in read_zero %" PRIu64
            " of %" PRIu64 ", with busybox callers above the leaf %" PRIu64 "\n",
            by_sysroot, summary_figure(err, "complete (reach the outermost frame): "), path,
            n_samples, deep);
    /* dd spends most of its time in read_zero (the first run asks half of its samples): a
     * quarter of all samples is far below that; nearly every such stack unwinds past the leaf
     * (all of them on arm64, 60 of 60, and riscv64, 59 of 60, when this was written). */
    CHECK_MSG(path * 4 >= n_samples, "only %" PRIu64 " of %" PRIu64 " samples in read_zero", path,
              n_samples);
    CHECK_MSG(deep * 10 >= path * 9,
              "%" PRIu64 " of %" PRIu64 " read_zero stacks have busybox's callers", deep, path);
    folded_free(&f);
}

/* Through the gdbstub (with QMP for the RAM file), QMP alone, or the plugin (with QMP for the
 * RAM file: its kernel stacks walked only through what it captured at each sample's instant, the
 * task from the register the kernel keeps it in, SP_EL0 or tp, captured with the others). */
static int case_foreign_dd(int smp, enum dd_via via)
{
    const struct foreign *f = NULL;
    for (size_t i = 0; i < sizeof foreigns / sizeof foreigns[0]; i++)
        if (strcmp(foreigns[i].series, series) == 0)
            f = &foreigns[i];
    if (!f) {
        fprintf(stderr, "arch-dd: no such series %s\n", series);
        return 2;
    }
    struct guest g = {.gdbstub = via == VIA_GDB, .plugin = via == VIA_PLUGIN, .sh_pid = -1};
    int rc = boot_foreign(f, smp, NULL, &g);
    if (rc == VM_SKIP)
        return VM_SKIP;
    CHECK_INT(rc, 0);
    if (rc) {
        if (g.vm)
            return end_guest(&g);
        return harness_result();
    }
    char folded[320];
    snprintf(folded, sizeof folded, "%s/linux.folded", g.dir);
    const char *args[] = {via == VIA_PLUGIN ? "--plugin" : "--gdb",
                          via == VIA_PLUGIN ? vm_plugin_address(g.vm) : vm_gdb_address(g.vm),
                          "--qmp-socket",
                          vm_qmp_path(g.vm),
                          "--samples",
                          SAMPLES,
                          "-o",
                          folded,
                          "--no-progress",
                          NULL};
    struct run r = run_qprof(g.dir, via == VIA_QMP ? args + 2 : args, 240);
    CHECK_INT(r.exit_code, 0);
    fprintf(stderr, "%s", r.err);
    const char *how = via == VIA_QMP   ? "transport: QMP, memory: direct"
                      : via == VIA_GDB ? "transport: gdbstub, memory: direct"
                                       : "transport: plugin, memory: captured by the plugin, "
                                         "code from the RAM file";
    CHECK_MSG(strstr(r.err, how), "not sampled so: %s", how);
    /* the kernel stacks nearly as complete as over a stopping transport (walked from the
     * capture). Through the plugin a capture window that crosses an unmapped page fails whole,
     * and an exception taken inside __clear_user nests: riscv64 7.2 measured 89.3-94.6% over
     * 150 samples (2026-11-28), so 85% there, about 3.5 standard deviations below the mean. */
    double complete = kernel_fp_completeness(r.err);
    double floor = via == VIA_PLUGIN ? 85.0 : 90.0;
    CHECK_MSG(complete >= floor, "kernel stacks complete: %.1f%% (at least %.0f%%)", complete,
              floor);
    check_foreign_dd(f, folded, g.dd_pid, smp > 1 ? g.sh_pid : -1);
    run_free(&r);
    if (via == VIA_GDB && smp == 1) {
        /* The same boot, with the guest's files as --sysroot. */
        snprintf(folded, sizeof folded, "%s/sysroot.folded", g.dir);
        const char *with[] = {"--gdb",
                              vm_gdb_address(g.vm),
                              "--qmp-socket",
                              vm_qmp_path(g.vm),
                              "--samples",
                              FOREIGN_SYSROOT_SAMPLES,
                              "--sysroot",
                              guest_file("/sysroot"),
                              "-o",
                              folded,
                              "--no-progress",
                              "-v",
                              NULL};
        r = run_qprof(g.dir, with, 240);
        CHECK_INT(r.exit_code, 0);
        fprintf(stderr, "%s", r.err);
        check_foreign_sysroot(f, folded, g.dd_pid, r.err,
                              g_ascii_strtoull(FOREIGN_SYSROOT_SAMPLES, NULL, 10));
        run_free(&r);
    }
    return end_guest(&g);
}

/* arm64 through QMP alone (QEMU 7.2's `info registers` has no SP_EL0 and no TTBRs; QMP cannot
 * tell where RAM lies): no Linux, and qprof says so in one line that names the way (--gdb beside
 * --qmp-socket) instead of leaving bare addresses unexplained; no stack is given a process. */
static int case_foreign_qmp_refused(void)
{
    const struct foreign *f = NULL;
    for (size_t i = 0; i < sizeof foreigns / sizeof foreigns[0]; i++)
        if (strcmp(foreigns[i].series, series) == 0)
            f = &foreigns[i];
    if (!f) {
        fprintf(stderr, "arch-qmp-refused: no such series %s\n", series);
        return 2;
    }
    struct guest g = {.gdbstub = true, .sh_pid = -1};
    int rc = boot_foreign(f, 1, NULL, &g);
    if (rc == VM_SKIP)
        return VM_SKIP;
    CHECK_INT(rc, 0);
    if (rc) {
        if (g.vm)
            return end_guest(&g);
        return harness_result();
    }
    char folded[320];
    snprintf(folded, sizeof folded, "%s/linux.folded", g.dir);
    const char *args[] = {"--qmp-socket", vm_qmp_path(g.vm), "--samples", "50", "-o",
                          folded,         "--no-progress",   NULL};
    struct run r = run_qprof(g.dir, args, 240);
    CHECK_INT(r.exit_code, 0);
    fprintf(stderr, "%s", r.err);
    CHECK_MSG(strstr(r.err, "if the guest runs Linux") &&
                  strstr(r.err, "--gdb beside --qmp-socket"),
              "no line saying why the kernel was not looked for");
    struct folded fo = read_folded(folded);
    for (guint si = 0; si < fo.stacks->len; si++) {
        gchar **frames = folded_frames(&fo, si);
        CHECK_MSG(!strchr(frames[0], '('), "a process named without a kernel: %s", frames[0]);
        g_strfreev(frames);
    }
    CHECK_MSG(fo.total == 50, "%" PRIu64 " samples written, not 50", (uint64_t)fo.total);
    folded_free(&fo);
    run_free(&r);
    /* --os linux asks for the kernel all the same: the line gives QMP's own reason, not the
     * gdbstub's advice */
    const char *as_linux[] = {
        "--qmp-socket", vm_qmp_path(g.vm), "--os", "linux", "--samples", "5", "-o", "-", NULL};
    r = run_qprof(g.dir, as_linux, 240);
    fprintf(stderr, "%s", r.err);
    CHECK_MSG(strstr(r.err, "cannot tell where guest RAM lies") &&
                  !strstr(r.err, "through the gdbstub"),
              "--os linux over QMP does not say QMP's reason");
    run_free(&r);
    return end_guest(&g);
}

static bool has_name(GPtrArray *names, const char *name)
{
    for (guint i = 0; i < names->len; i++)
        if (strcmp(g_ptr_array_index(names, i), name) == 0)
            return true;
    return false;
}

/* The function names of the module file path (readelf's FUNC symbols), as "NAME [brd]". */
static GPtrArray *module_functions(const char *path)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    char *quoted = g_shell_quote(path), *cmd = g_strdup_printf("readelf -sW %s", quoted);
    char *out = NULL;
    gint status = -1;
    if (g_spawn_command_line_sync(cmd, &out, NULL, &status, NULL) && status == 0) {
        char **lines = split_lines(out);
        for (char **l = lines; *l; l++) {
            char type[32], name[256];
            if (sscanf(*l, "%*s %*s %*s %31s %*s %*s %*s %255s", type, name) == 2 &&
                strcmp(type, "FUNC") == 0)
                g_ptr_array_add(names, g_strdup_printf("%s [brd]", name));
        }
        g_free(lines);
    }
    g_free(out);
    g_free(cmd);
    g_free(quoted);
    return names;
}

/* dd reading brd's RAM disk on another architecture (a kernel without ORC: brd's frames named
 * from its struct module's symbols, the walk by frame pointers through them): every sample with
 * a [brd] frame is dd's, rooted at "dd (PID)", entry ... ksys_read ... submit_bio* ...
 * "brd_submit_bio [brd]" first among brd's frames, parents first; every [brd] name a function
 * of brd.ko; an eighth of the busy samples or more there. */
static void check_foreign_module_stacks(const struct foreign *fo, const char *folded_path,
                                        GPtrArray *brd_funcs)
{
    struct folded f = read_folded(folded_path);
    uint64_t busy = 0, in_brd = 0, ordered = 0;
    for (guint si = 0; si < f.stacks->len; si++) {
        uint64_t count = COUNT(&f, si);
        gchar **frames = folded_frames(&f, si);
        busy += strcmp(frames[0], "idle") != 0 ? count : 0;
        int first_brd = -1;
        for (int i = 0; frames[i]; i++) {
            if (!g_str_has_suffix(frames[i], " [brd]"))
                continue;
            first_brd = first_brd < 0 ? i : first_brd;
            CHECK_MSG(has_name(brd_funcs, frames[i]), "%s is not a function of brd.ko", frames[i]);
        }
        if (first_brd >= 0) {
            in_brd += count;
            int pid = 0;
            CHECK_MSG(sscanf(frames[0], "dd (%d)", &pid) == 1 && pid > 0,
                      "brd stack rooted at %s: %s", frames[0], STACK(&f, si));
            int entry = frame_index(frames, fo->chain[0]);
            int read = frame_index(frames, "ksys_read");
            int submit = frame_index(frames, "submit_bio");
            bool ok = entry > 0 && entry < read && read < submit && submit < first_brd &&
                      strcmp(frames[first_brd], "brd_submit_bio [brd]") == 0;
            CHECK_MSG(ok, "brd stack out of order or cut short: %s", STACK(&f, si));
            ordered += ok ? count : 0;
        }
        g_strfreev(frames);
    }
    fprintf(stderr, "busy samples %" PRIu64 ", through brd's functions %" PRIu64 "\n", busy,
            in_brd);
    /* How much of dd's time brd takes depends on the kernel and busybox builds: 77 and 40 of
     * 150 (arm64, riscv64) when this was written, 4 to 45 of 150 with the archive's builds of
     * 2026-11-28 (busybox's dd then spends most of its time in user mode). At the lowest share
     * seen (2.7%), MODULE_SAMPLES give about 16 samples through brd: 5 is more than 4 standard
     * deviations below that, and enough to check naming and order. */
    CHECK_MSG(busy > 0 && in_brd >= 5,
              "only %" PRIu64 " of %" PRIu64 " busy samples through brd's functions", in_brd, busy);
    CHECK(ordered == in_brd);
    folded_free(&f);
}

static int case_foreign_modules(void)
{
    const struct foreign *f = NULL;
    for (size_t i = 0; i < sizeof foreigns / sizeof foreigns[0]; i++)
        if (strcmp(foreigns[i].series, series) == 0)
            f = &foreigns[i];
    if (!f) {
        fprintf(stderr, "arch-modules: no such series %s\n", series);
        return 2;
    }
    struct guest g = {.gdbstub = true, .sh_pid = -1};
    int rc = boot_foreign(f, 1, "ramdd", &g);
    if (rc == VM_SKIP)
        return VM_SKIP;
    CHECK_INT(rc, 0);
    if (rc)
        return g.vm ? end_guest(&g) : harness_result();
    GPtrArray *brd_funcs = module_functions(guest_file("/sysroot/lib/modules/brd.ko"));
    CHECK_MSG(has_name(brd_funcs, "brd_submit_bio [brd]"), "readelf names no brd_submit_bio");
    char folded[320];
    snprintf(folded, sizeof folded, "%s/modules.folded", g.dir);
    const char *args[] = {"--gdb",
                          vm_gdb_address(g.vm),
                          "--qmp-socket",
                          vm_qmp_path(g.vm),
                          "--samples",
                          MODULE_SAMPLES,
                          "-o",
                          folded,
                          "--no-progress",
                          "-v",
                          NULL};
    struct run r = run_qprof(g.dir, args, 240);
    CHECK_INT(r.exit_code, 0);
    fprintf(stderr, "%s", r.err);
    CHECK_MSG(!strstr(r.err, "frames in modules stay addresses") &&
                  !strstr(r.err, "its frames stay addresses"),
              "module frames left as addresses");
    check_foreign_module_stacks(f, folded, brd_funcs);
    run_free(&r);
    g_ptr_array_free(brd_funcs, TRUE);
    return end_guest(&g);
}

/* qprof top --batch on the stock guest with no symbol options: one snapshot after a fixed
 * number of samples, dd among the processes and its kernel time named (read_zero or
 * clear_user*, the functions dd-1cpu checks in its stacks). */
static int case_top(void)
{
    struct guest g = {.want_kallsyms = false};
    int rc = start_guest(1, "dd", &g);
    if (rc)
        return rc == VM_SKIP ? VM_SKIP : harness_result();
    const char *args[] = {"top", "--qmp-socket", vm_qmp_path(g.vm), "--samples", SAMPLES, "--batch",
                          "-d",  "3600",         "--window",        "86400",     NULL};
    struct run r = run_qprof(g.dir, args, 240);
    CHECK_INT(r.exit_code, 0);
    fprintf(stderr, "%s%s", r.out, r.err);
    CHECK_INT(count_of(r.out, "qprof top  "), 1);
    CHECK_MSG(strstr(r.out, " dd ("), "dd is not among the processes");
    bool named = false;
    char **lines = g_strsplit(r.out, "\n", -1);
    for (char **l = lines; *l; l++)
        named |= g_regex_match_simple("^ *[0-9.]+% +[0-9.]+% +K +\\S+ +(read_zero|clear_user)", *l,
                                      0, 0);
    g_strfreev(lines);
    CHECK_MSG(named, "no read_zero or clear_user* row among the kernel functions");
    run_free(&r);
    return end_guest(&g);
}

/* ---- qprof annotate on a record alone ---------------------------------------------------- */

/* The functions `qprof annotate --stdio` printed: name -> the samples its header states, and
 * how many of those its instruction lines carry (they must agree: every sample on a line). */
struct annotated_fn {
    uint64_t header, on_lines;
    unsigned insns;
};

static GHashTable *parse_annotated(const char *out)
{
    GHashTable *fns = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    struct annotated_fn *at = NULL;
    gchar **lines = g_strsplit(out, "\n", -1);
    for (gchar **l = lines; *l; l++) {
        const char *head = strstr(*l, "Percent : ");
        char name[128];
        unsigned long n;
        double pct;
        if (head && sscanf(head, "Percent : %127s [%*[^]]], %lu samples", name, &n) == 2) {
            at = g_new0(struct annotated_fn, 1);
            at->header = n;
            g_hash_table_insert(fns, g_strdup(name), at);
        } else if (at && sscanf(*l, " %lu %lf%%", &n, &pct) == 2 && strstr(*l, ": ")) {
            at->on_lines += n;
            at->insns++;
        }
    }
    g_strfreev(lines);
    return fns;
}

/* `qprof record` of dd if=/dev/zero without a vmlinux, then `qprof annotate` with nothing but
 * the record: the kernel's zeroing leaf (clear_user and its variants), named by the kallsyms
 * the recording read and disassembled from the code the recording kept. */
static int case_annotate(void)
{
    struct guest g = {0};
    int rc = start_guest(1, "dd", &g);
    if (rc)
        return rc == VM_SKIP ? VM_SKIP : harness_result();
    char data[320];
    snprintf(data, sizeof data, "%s/dd.data", g.dir);
    const char *record[] = {"record", "--qmp-socket", vm_qmp_path(g.vm), "--samples", "300",
                            "-o",     data,           "--no-progress",   NULL};
    struct run r = run_qprof(g.dir, record, 240);
    fprintf(stderr, "%s", r.err);
    CHECK_INT(r.exit_code, 0);
    run_free(&r);
    vm_stop(g.vm); /* offline from here: the record is all annotate has */
    g.vm = NULL;
    const char *annotate[] = {"annotate",      "-i",          data, "--stdio",
                              "--kernel-only", "--functions", "8",  NULL};
    r = run_qprof(g.dir, annotate, 120);
    fprintf(stderr, "%s%s", r.out, r.err);
    CHECK_INT(r.exit_code, 0);
    GHashTable *fns = parse_annotated(r.out);
    GHashTableIter it;
    gpointer key, value;
    const char *zeroing = NULL;
    g_hash_table_iter_init(&it, fns);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        const struct annotated_fn *f = value;
        CHECK_MSG(f->insns > 0 && f->on_lines == f->header,
                  "%s: %u instruction lines carry %lu of its %lu samples", (const char *)key,
                  f->insns, (unsigned long)f->on_lines, (unsigned long)f->header);
        if (strstr(key, "clear_user"))
            zeroing = key;
    }
    CHECK_MSG(zeroing, "no clear_user function among the %u annotated", g_hash_table_size(fns));
    CHECK_MSG(strstr(r.out, "rep stos"), "the zeroing leaf's rep stos is not disassembled");
    g_hash_table_destroy(fns);
    run_free(&r);
    return end_guest(&g);
}

/* ---- Distro programs (Debian's xz and openssl, unmodified) ------------------------------- */

#define DISTRO_SAMPLES        "200"
#define DISTRO_PLUGIN_SAMPLES "1000"
#define DISTRO_OBJECTS        5

/* A program of Debian's in the guest: the files it maps (ldd's list, as make-guest.sh copied
 * them) by their module names, and the library function its hot loop goes through. */
struct distro_prog {
    const char *comm;
    const char *objects[DISTRO_OBJECTS][2]; /* module name, guest path */
    const char *entry;                      /* called from the program, its callees below */
};

static const struct distro_prog distro_progs[] = {
    {"xz",
     {{"xz", "/usr/bin/xz"},
      {"liblzma.so.5", "/lib/x86_64-linux-gnu/liblzma.so.5"},
      {"libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"},
      {"ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2"}},
     "lzma_code"},
    /* its own .eh_frame mostly in pages it never touched: those come from the page cache */
    {"openssl",
     {{"openssl", "/usr/bin/openssl"},
      {"libssl.so.3", "/lib/x86_64-linux-gnu/libssl.so.3"},
      {"libcrypto.so.3", "/lib/x86_64-linux-gnu/libcrypto.so.3"},
      {"libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"},
      {"ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2"}},
     "EVP_Digest"},
};
#define N_DISTRO ((int)(sizeof distro_progs / sizeof distro_progs[0]))

/* Adds the FUNC symbols readelf lists in path (its .dynsym and .symtab) to names. */
static void add_functions(GPtrArray *names, const char *path)
{
    char *quoted = g_shell_quote(path), *cmd = g_strdup_printf("readelf -sW %s", quoted);
    char *out = NULL, *errs = NULL; /* readelf's complaints about a debug file's NOBITS */
    gint status = -1;
    if (g_spawn_command_line_sync(cmd, &out, &errs, &status, NULL) && status == 0) {
        char **lines = split_lines(out);
        for (char **l = lines; *l; l++) {
            char type[32], name[256];
            if (sscanf(*l, "%*s %*s %*s %31s %*s %*s %*s %255s", type, name) == 2 &&
                (strcmp(type, "FUNC") == 0 || strcmp(type, "IFUNC") == 0))
                g_ptr_array_add(names, g_strndup(name, strcspn(name, "@")));
        }
        g_free(lines);
    }
    g_free(errs);
    g_free(out);
    g_free(cmd);
    g_free(quoted);
}

/* The host's debug file of path by its GNU build-id (/usr/lib/debug/.build-id/xx/rest.debug,
 * as Debian's -dbgsym and -dbg packages install them), or NULL. */
static char *host_debug_file(const char *path)
{
    char *quoted = g_shell_quote(path), *cmd = g_strdup_printf("readelf -nW %s", quoted);
    char *out = NULL, *debug = NULL, *errs = NULL;
    gint status = -1;
    if (g_spawn_command_line_sync(cmd, &out, &errs, &status, NULL) && status == 0) {
        const char *id = strstr(out, "Build ID: ");
        char hex[129];
        if (id && sscanf(id, "Build ID: %128[0-9a-f]", hex) == 1 && strlen(hex) > 2) {
            debug = g_strdup_printf("/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
            if (access(debug, R_OK) != 0)
                g_clear_pointer(&debug, g_free);
        }
    }
    g_free(errs);
    g_free(out);
    g_free(cmd);
    g_free(quoted);
    return debug;
}

/* Every function name a frame of p's may rightly carry: the symbols of the guest's copies of
 * its objects and of the host's debug files for them. */
static GPtrArray *prog_functions(const struct distro_prog *p)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (int i = 0; i < DISTRO_OBJECTS && p->objects[i][0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/sysroot%s", guest_file(""), p->objects[i][1]);
        add_functions(names, path);
        char *debug = host_debug_file(path);
        if (debug)
            add_functions(names, debug);
        g_free(debug);
    }
    return names;
}

static bool is_module_offset(const struct distro_prog *p, const char *frame)
{
    for (int i = 0; i < DISTRO_OBJECTS && p->objects[i][0]; i++) {
        size_t n = strlen(p->objects[i][0]);
        if (strncmp(frame, p->objects[i][0], n) == 0 && strncmp(frame + n, "+0x", 3) == 0)
            return true;
    }
    return false;
}

struct prog_stacks {
    uint64_t samples;  /* rooted at "COMM (PID)" */
    uint64_t whole;    /* _start (COMM+0x...), then __libc_start_main*, the outermost frames */
    uint64_t through;  /* whole, and through the library's entry into its callees */
    uint64_t by_debug; /* whole, with libc's __libc_start_call_main named (its debug file) */
    uint64_t misnamed; /* a user frame named by no symbol of its objects */
    uint64_t unmapped; /* a user frame at an address no object maps */
    unsigned said;     /* odd frames printed */
};

/* The user frames of a stack: up to the first the guest's /proc/kallsyms names. */
static void count_prog_stack(const struct distro_prog *p, gchar **frames, uint64_t count,
                             GPtrArray *names, GArray *ksyms, struct prog_stacks *x)
{
    char start[64];
    snprintf(start, sizeof start, "%s+0x", p->comm);
    x->samples += count;
    bool whole = frames[1] && g_str_has_prefix(frames[1], start) && frames[2] &&
                 g_str_has_prefix(frames[2], "__libc_start_main");
    bool entry = false, into = false;
    for (int i = 1; frames[i]; i++) {
        const char *f = frames[i];
        if (is_known(ksyms, f))
            break;
        if (i == 1 && strcmp(f, "[truncated]") == 0)
            continue;
        /* An address in no mapped file is shown as such (0x...): no name, so no wrong one. */
        bool unmapped = g_str_has_prefix(f, "0x");
        if (unmapped || (!is_module_offset(p, f) && !has_name(names, f))) {
            x->misnamed += unmapped ? 0 : count;
            x->unmapped += unmapped ? count : 0;
            char *stack = g_strjoinv(";", frames);
            if (x->said++ < 3)
                fprintf(stderr, "%s %s, in %s\n",
                        unmapped ? "a user pc in no mapped file:"
                                 : "a user frame no object of the program names so:",
                        f, stack);
            g_free(stack);
        }
        into |= entry;
        entry |= strcmp(f, p->entry) == 0;
    }
    x->whole += whole ? count : 0;
    x->through += whole && into ? count : 0;
    if (whole && frames[3] && strcmp(frames[3], "__libc_start_call_main") == 0)
        x->by_debug += count;
}

static struct prog_stacks prog_stacks(const struct distro_prog *p, const char *folded_path, int pid,
                                      GPtrArray *names, GArray *ksyms)
{
    struct prog_stacks x = {0};
    char root[64];
    snprintf(root, sizeof root, "%s (%d)", p->comm, pid);
    struct folded f = read_folded(folded_path);
    for (guint si = 0; si < f.stacks->len; si++) {
        gchar **frames = folded_frames(&f, si);
        if (strcmp(frames[0], root) == 0)
            count_prog_stack(p, frames, COUNT(&f, si), names, ksyms, &x);
        g_strfreev(frames);
    }
    folded_free(&f);
    return x;
}

struct distro_guest {
    struct guest g;
    int pids[N_DISTRO];
    GPtrArray *names[N_DISTRO];
    GArray *ksyms;
    bool libc_debug; /* the host has libc's debug file (libc6-dbg) */
};

/* One qprof run through via ("qmp", "gdb", "plugin"), with or without --sysroot /: for each
 * program, 90% of its samples whole from the leaf to __libc_start_main, most through its
 * library's entry, no frame misnamed. */
static void check_distro_run(const struct distro_guest *d, const char *via, bool sysroot)
{
    char folded[320];
    snprintf(folded, sizeof folded, "%s/distro-%s%s.folded", d->g.dir, via,
             sysroot ? "-sysroot" : "");
    bool plugin = strcmp(via, "plugin") == 0;
    const char *samples = plugin ? DISTRO_PLUGIN_SAMPLES : DISTRO_SAMPLES;
    const char *args[16] = {"--qmp-socket", vm_qmp_path(d->g.vm), "--samples", samples, "-o",
                            folded,         "--no-progress"};
    int n = 7;
    if (plugin) {
        args[n++] = "--plugin";
        args[n++] = vm_plugin_address(d->g.vm);
    } else if (strcmp(via, "gdb") == 0) {
        args[n++] = "--gdb";
        args[n++] = vm_gdb_address(d->g.vm);
    }
    if (sysroot) {
        args[n++] = "--sysroot";
        args[n++] = "/";
    }
    args[n] = NULL;
    struct run r = run_qprof(d->g.dir, args, 300);
    CHECK_INT(r.exit_code, 0);
    for (int k = 0; k < N_DISTRO; k++) {
        const struct distro_prog *p = &distro_progs[k];
        struct prog_stacks x = prog_stacks(p, folded, d->pids[k], d->names[k], d->ksyms);
        const char *how = sysroot ? " --sysroot /" : "";
        fprintf(stderr,
                "distro %s on %s via %s%s: %" PRIu64 " samples, whole to __libc_start_main %" PRIu64
                " (%.1f%%), through %s %" PRIu64 ", libc named by its debug file %" PRIu64
                ", misnamed %" PRIu64 ", unmapped pcs %" PRIu64 "\n",
                p->comm, series, via, how, x.samples, x.whole,
                x.samples ? 100.0 * (double)x.whole / (double)x.samples : 0.0, p->entry, x.through,
                x.by_debug, x.misnamed, x.unmapped);
        /* Both programs spin on the one vCPU, about half the samples each: a fifth is a wide
         * margin. */
        CHECK_MSG(x.samples * 5 >= strtoull(samples, NULL, 10),
                  "%s has only %" PRIu64 " of %s samples", p->comm, x.samples, samples);
        CHECK_MSG(x.whole * 10 >= x.samples * 9,
                  "via %s%s only %" PRIu64 " of %s's %" PRIu64
                  " samples reach __libc_start_main:\n%s",
                  via, how, x.whole, p->comm, x.samples, r.err);
        CHECK_MSG(x.through * 2 >= x.samples,
                  "via %s%s only %" PRIu64 " of %s's %" PRIu64 " samples go through %s", via, how,
                  x.through, p->comm, x.samples, p->entry);
        /* libc's local __libc_start_call_main, which only its debug file names. */
        CHECK_MSG(!d->libc_debug || x.by_debug * 10 >= x.whole * 9,
                  "via %s%s only %" PRIu64 " of %s's %" PRIu64
                  " whole stacks name libc's frame by its debug file",
                  via, how, x.by_debug, p->comm, x.whole);
        CHECK_MSG(x.misnamed == 0,
                  "via %s%s %" PRIu64 " of %s's samples carry a name none of its objects has", via,
                  how, x.misnamed, p->comm);
    }
    run_free(&r);
}

/* Debian's xz (liblzma) and openssl (libcrypto) at work, profiled with nothing but the sockets,
 * then with the host's / as --sysroot (the host is Debian 12 like the guest's files): through
 * QMP, the gdbstub and the plugin, one boot of QEMU 10 serving all three. */
static int case_distro(void)
{
    struct distro_guest d = {.g = {.plugin = true, .gdbstub = true, .want_kallsyms = true}};
    int rc = make_guest();
    if (rc == VM_SKIP)
        return VM_SKIP;
    CHECK_INT(rc, 0);
    if (rc)
        return harness_result();
    for (int k = 0; k < N_DISTRO; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/sysroot%s", guest_file(""), distro_progs[k].objects[0][1]);
        if (access(path, R_OK) != 0) {
            fprintf(stderr, "SKIP: make-guest.sh put no %s in the guest (none on the host)\n",
                    path);
            return VM_SKIP;
        }
    }
    rc = start_guest(1, "xz,openssl", &d.g);
    if (rc)
        return rc == VM_SKIP ? VM_SKIP : harness_result();
    char *log = vm_serial_text(d.g.vm);
    for (char *c = log; *c; c++) /* the console may end lines with \r\n */
        if (*c == '\r')
            *c = '\n';
    for (int k = 0; k < N_DISTRO; k++) {
        d.pids[k] = workload_pid(log, distro_progs[k].comm);
        CHECK_MSG(d.pids[k] > 0, "the guest printed no pid for %s", distro_progs[k].comm);
        d.names[k] = prog_functions(&distro_progs[k]);
    }
    free(log);
    char libc[512];
    snprintf(libc, sizeof libc, "%s/sysroot/lib/x86_64-linux-gnu/libc.so.6", guest_file(""));
    char *libc_debug = host_debug_file(libc);
    d.libc_debug = libc_debug != NULL;
    fprintf(stderr, "libc's debug file on the host: %s\n", libc_debug ? libc_debug : "none");
    g_free(libc_debug);
    d.ksyms = read_kallsyms(d.g.kallsyms);
    CHECK_MSG(d.ksyms->len > 10000, "the guest's kallsyms dump has %u text symbols", d.ksyms->len);
    const char *vias[] = {"qmp", "gdb", "plugin"};
    for (int sysroot = 0; sysroot < 2; sysroot++)
        for (size_t i = 0; i < sizeof vias / sizeof vias[0]; i++)
            check_distro_run(&d, vias[i], sysroot);
    for (int k = 0; k < N_DISTRO; k++)
        g_ptr_array_free(d.names[k], TRUE);
    for (guint i = 0; i < d.ksyms->len; i++)
        g_free(g_array_index(d.ksyms, struct ksym, i).name);
    g_array_free(d.ksyms, TRUE);
    return end_guest(&d.g);
}

/* dd with QEMU started without the shared RAM file: guest memory out of the QEMU process. */
static int no_ram_file_dd(enum dd_via via)
{
    no_ram_file = true;
    return case_dd(1, via);
}

/* Every case, named once: CMake makes the ctest cases from the CASE lines (qp_add_cases in
 * tests/CMakeLists.txt), so the table below is the one list of this binary's cases. Each line:
 * the argument, what it runs, and the ctest cases that run it (NAME,SERIES for a run on that
 * kernel series, timeout:N for a longer TIMEOUT). With list, the arguments are printed instead.
 * -1: no such case. */
static int run_case(const char *c, bool list)
{
#define CASE(argument, call, ctest_cases)                                                          \
    if (list)                                                                                      \
        fprintf(stderr, " %s", argument);                                                          \
    else if (strcmp(c, argument) == 0)                                                             \
        return call;
    // clang-format off
    CASE("dd-1cpu",           case_dd(1, VIA_QMP),              "linux_dd-1cpu linux_5.10_dd_1cpu,5.10 linux_6.12_dd_1cpu,6.12 linux_7.x_dd_1cpu,7.x")
    CASE("dd-2cpu",           case_dd(2, VIA_QMP),              "linux_dd-2cpu linux_5.10_dd_2cpu,5.10 linux_6.12_dd_2cpu,6.12 linux_7.x_dd_2cpu,7.x")
    CASE("dd-gdb",            case_dd(1, VIA_GDB),              "linux_dd-gdb")
    CASE("dd-procmem",        no_ram_file_dd(VIA_QMP),          "linux_dd-procmem")
    CASE("dd-gdb-procmem",    no_ram_file_dd(VIA_GDB),          "linux_dd-gdb-procmem")
    CASE("dd-plugin",         case_dd(1, VIA_PLUGIN),           "linux_plugin_dd")
    CASE("dd-plugin-2cpu",    case_dd(2, VIA_PLUGIN),           "linux_plugin_dd_2cpu")
    CASE("not-linux",         case_not_linux(),                 "linux_not-linux")
    CASE("no-btf",            case_no_btf(),                    "linux_no-btf")
    CASE("reboot",            case_reboot(),                    "linux_reboot")
    CASE("top",               case_top(),                       "linux_top")
    CASE("annotate",          case_annotate(),                  "linux_annotate")
    CASE("sysroot",           case_sysroot(false),              "linux_sysroot linux_5.10_sysroot,5.10 linux_6.12_sysroot,6.12 linux_7.x_sysroot,7.x")
    CASE("sysroot-plugin",    case_sysroot(true),               "linux_plugin_sysroot")
    CASE("modules",           case_modules(),                   "linux_modules linux_5.10_modules,5.10 linux_6.12_modules,6.12 linux_7.x_modules,7.x")
    CASE("modules-cycle",     case_modules_cycle(),             "linux_modules-cycle")
    CASE("distro",            case_distro(),                    "linux_distro,6.1,timeout:600 linux_6.12_distro,6.12,timeout:600")
    CASE("arch-dd",           case_foreign_dd(1, VIA_GDB),      "linux_arm64_dd,arm64-6.1 linux_riscv64_dd,riscv64-7.x")
    CASE("arch-dd-2cpu",      case_foreign_dd(2, VIA_GDB),      "linux_arm64_dd_2cpu,arm64-6.1 linux_riscv64_dd_2cpu,riscv64-7.x")
    CASE("arch-dd-qmp",       case_foreign_dd(1, VIA_QMP),      "linux_riscv64_dd_qmp,riscv64-7.x")
    CASE("arch-dd-plugin",    case_foreign_dd(1, VIA_PLUGIN),   "linux_arm64_dd_plugin,arm64-6.1 linux_riscv64_dd_plugin,riscv64-7.x")
    CASE("arch-modules",      case_foreign_modules(),           "linux_arm64_modules,arm64-6.1 linux_riscv64_modules,riscv64-7.x")
    CASE("arch-qmp-refused",  case_foreign_qmp_refused(),       "linux_arm64_qmp_refused,arm64-6.1")
    // clang-format on
#undef CASE
    return -1;
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    if (argc > 2)
        series = argv[2];
    int rc = run_case(c, false);
    if (rc >= 0)
        return rc;
    fprintf(stderr, "usage: test_linux CASE [SERIES: 5.10, 6.12, 7.x, arm64-6.1, riscv64-7.x; 6.1 "
                    "when absent]\ncases:");
    run_case(c, true);
    fprintf(stderr, "\n");
    return 2;
}
