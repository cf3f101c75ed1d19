#define _GNU_SOURCE
#include "vm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct test_vm {
    pid_t pid;
    int exit_status;
    bool exited;
    char dir[256];
    char qmp[300];
    char qmp2[300]; /* empty without opts.second_qmp */
    char gdb[300];  /* the gdbstub's socket path, empty without opts.gdbstub */
    char gdb_address[310];
    char serial[300];
    char ram[300];
    char plugin[300]; /* qprof-plugin.so's socket, empty without opts.plugin */
    char plugin_address[310];
};

/* VMs still running, stopped at exit so that a test that fails early (REQUIRE exits) leaves no
 * QEMU behind and no guest-RAM file in /dev/shm. */
#define MAX_LIVE_VMS 8
static test_vm *live_vms[MAX_LIVE_VMS];

static void stop_live_vms(void)
{
    for (int i = 0; i < MAX_LIVE_VMS; i++)
        if (live_vms[i])
            vm_stop(live_vms[i]);
}

static void track_vm(test_vm *vm, bool live)
{
    static bool registered;
    if (!registered) {
        atexit(stop_live_vms);
        registered = true;
    }
    for (int i = 0; i < MAX_LIVE_VMS; i++) {
        if (live && !live_vms[i]) {
            live_vms[i] = vm;
            return;
        }
        if (!live && live_vms[i] == vm) {
            live_vms[i] = NULL;
            return;
        }
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool have_qemu(const char *name)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char *copy = strdup(path), *save = NULL;
    bool found = false;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char full[1024];
        snprintf(full, sizeof full, "%s/%s", d, name);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

#define MAX_ARGS 64

static void push(const char **argv, int *argc, const char *a)
{
    if (*argc < MAX_ARGS - 1)
        argv[(*argc)++] = a;
}

static bool has_arg(const char *const *args, const char *name)
{
    for (; args && *args; args++)
        if (strcmp(*args, name) == 0)
            return true;
    return false;
}

static const char *accel_for(const struct vm_opts *opts)
{
    const char *accel = getenv("QPROF_ACCEL");
    if (opts->accel)
        accel = opts->accel;
    return accel && *accel ? accel : "tcg";
}

int vm_kvm_usable(char *why, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    bool hw = false;
    char line[4096];
    while (f && !hw && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0)
            hw = strstr(line, " vmx") || strstr(line, " svm");
    if (f)
        fclose(f);
    if (!hw) {
        snprintf(why, len, "no hardware KVM: /proc/cpuinfo has neither vmx nor svm");
        return -1;
    }
    if (access("/dev/kvm", R_OK | W_OK) != 0) {
        snprintf(why, len, "/dev/kvm is not usable here: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* QEMU 10's binary for opts->qemu (qemu-system-x86_64 when NULL): beside QPROF_QEMU10 in
 * xtask/qemu10.sh's private prefix. */
static const char *qemu10_binary(const struct vm_opts *opts)
{
    static char path[1024];
    if (!opts->qemu)
        return QPROF_QEMU10;
    char *dir = g_path_get_dirname(QPROF_QEMU10);
    snprintf(path, sizeof path, "%s/%s", dir, opts->qemu);
    g_free(dir);
    return path;
}

/* QEMU 10 (xtask/qemu10.sh's private prefix) and the plugin built against its header: 0, or
 * VM_SKIP with the reason on stderr. */
static int plugin_usable(const struct vm_opts *opts)
{
    if (!*QPROF_PLUGIN_SO || access(QPROF_PLUGIN_SO, R_OK) != 0) {
        fprintf(stderr, "SKIP: qprof-plugin.so was not built (no qemu-plugin.h at configure "
                        "time: run xtask/qemu10.sh, then reconfigure)\n");
        return VM_SKIP;
    }
    if (access(qemu10_binary(opts), X_OK) != 0) {
        fprintf(stderr, "SKIP: no QEMU 10 at %s (xtask/qemu10.sh fetches it)\n",
                qemu10_binary(opts));
        return VM_SKIP;
    }
    return 0;
}

/* QPROF_QEMU=10 in the environment: the e2e suite's QEMU 10 variants (QMP and the gdbstub on
 * QEMU 10 as on the system's 7.2); the plugin's cases always run there. */
static bool wants_qemu10(const struct vm_opts *opts)
{
    const char *which = getenv("QPROF_QEMU");
    return opts->plugin || (which && strcmp(which, "10") == 0);
}

static int qemu10_usable(const struct vm_opts *opts)
{
    if (access(qemu10_binary(opts), X_OK) != 0) {
        fprintf(stderr, "SKIP (QEMU 10 variant): no QEMU 10 at %s (xtask/qemu10.sh fetches it)\n",
                qemu10_binary(opts));
        return VM_SKIP;
    }
    return 0;
}

/* QEMU 10 from a private prefix must load modules and firmware of its own build. */
static void push_qemu10(const char **argv, int *argc, char *datadir, size_t len)
{
    char *bin_dir = g_path_get_dirname(QPROF_QEMU10);
    snprintf(datadir, len, "%s/../share/qemu", bin_dir);
    g_free(bin_dir);
    push(argv, argc, "-L");
    push(argv, argc, datadir);
    push(argv, argc, "-L");
    push(argv, argc, "/usr/share/seabios");
}

static void set_qemu10_module_dir(void)
{
    char *bin_dir = g_path_get_dirname(QPROF_QEMU10);
    char *mods = g_strdup_printf("%s/../lib/x86_64-linux-gnu/qemu", bin_dir);
    setenv("QEMU_MODULE_DIR", mods, 1);
    g_free(mods);
    g_free(bin_dir);
}

int vm_start(const struct vm_opts *opts, test_vm **out)
{
    static const struct vm_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    bool qemu10 = wants_qemu10(opts);
    if (opts->plugin) {
        int rc = plugin_usable(opts);
        if (rc)
            return rc;
    } else if (qemu10) {
        int rc = qemu10_usable(opts);
        if (rc)
            return rc;
    } else if (!have_qemu(opts->qemu ? opts->qemu : "qemu-system-x86_64")) {
        fprintf(stderr, "%s not found: skipping\n", opts->qemu ? opts->qemu : "qemu-system-x86_64");
        return VM_SKIP;
    }
    char why[200];
    if (strncmp(accel_for(opts), "kvm", 3) == 0 && vm_kvm_usable(why, sizeof why) != 0) {
        fprintf(stderr, "SKIP (KVM variant): %s\n", why);
        return VM_SKIP;
    }
    test_vm *vm = calloc(1, sizeof *vm);
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(vm->dir, sizeof vm->dir, "%s/qprof-test-XXXXXX", base);
    if (!mkdtemp(vm->dir)) {
        perror("mkdtemp");
        free(vm);
        return -1;
    }
    if (opts->run_as &&
        (chown(vm->dir, opts->run_as, opts->run_as) != 0 || chmod(vm->dir, 01777) != 0)) {
        perror("vm_start: giving QEMU's directory to run_as");
        rmdir(vm->dir);
        free(vm);
        return -1;
    }
    snprintf(vm->qmp, sizeof vm->qmp, "%s/qmp", vm->dir);
    if (opts->second_qmp)
        snprintf(vm->qmp2, sizeof vm->qmp2, "%s/qmp2", vm->dir);
    if (opts->gdbstub) {
        snprintf(vm->gdb, sizeof vm->gdb, "%s/gdb", vm->dir);
        snprintf(vm->gdb_address, sizeof vm->gdb_address, "unix:%s", vm->gdb);
    }
    if (opts->plugin) {
        snprintf(vm->plugin, sizeof vm->plugin, "%s/plugin", vm->dir);
        snprintf(vm->plugin_address, sizeof vm->plugin_address, "unix:%s", vm->plugin);
    }
    snprintf(vm->serial, sizeof vm->serial, "%s/serial.log", vm->dir);
    snprintf(vm->ram, sizeof vm->ram, "%s/ram", vm->dir);

    char kernel_arg[1024], serial_arg[400], qmp_arg[400], qmp2_arg[400], smp_arg[32], mem_arg[32],
        ram_arg[512], gdb_arg[400], plugin_arg[800], datadir[1100];
    snprintf(kernel_arg, sizeof kernel_arg, "%s", opts->kernel ? opts->kernel : QPROF_GUEST_KERNEL);
    snprintf(serial_arg, sizeof serial_arg, "file:%s", vm->serial);
    snprintf(qmp_arg, sizeof qmp_arg, "unix:%s,server=on,wait=off", vm->qmp);
    snprintf(qmp2_arg, sizeof qmp2_arg, "unix:%s,server=on,wait=off", vm->qmp2);
    snprintf(gdb_arg, sizeof gdb_arg, "socket,path=%s,server=on,wait=off,id=gdb0", vm->gdb);
    snprintf(smp_arg, sizeof smp_arg, "%d", opts->smp > 0 ? opts->smp : 1);
    int mem = opts->mem_mb > 0 ? opts->mem_mb : 256;
    snprintf(mem_arg, sizeof mem_arg, "%dM", mem);
    snprintf(ram_arg, sizeof ram_arg, "memory-backend-file,id=ram,size=%dM,mem-path=%s,share=on",
             mem, vm->ram);
    const char *accel = accel_for(opts);

    const char *argv[MAX_ARGS];
    int argc = 0;
    const char *fixed[] = {
        "qemu-system-x86_64", "-display", "none",  "-nodefaults", "-kernel", kernel_arg, "-serial",
        serial_arg,           "-qmp",     qmp_arg, "-smp",        smp_arg,   "-m",       mem_arg};
    if (qemu10)
        fixed[0] = qemu10_binary(opts);
    else if (opts->qemu)
        fixed[0] = opts->qemu;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        push(argv, &argc, fixed[i]);
    if (qemu10)
        push_qemu10(argv, &argc, datadir, sizeof datadir);
    if (opts->plugin) {
        snprintf(plugin_arg, sizeof plugin_arg, "%s,socket=%s%s%s", QPROF_PLUGIN_SO, vm->plugin,
                 opts->plugin_args ? "," : "", opts->plugin_args ? opts->plugin_args : "");
        push(argv, &argc, "-plugin");
        push(argv, &argc, plugin_arg);
    }
    /* QEMU takes the first -accel that works, so a test's own (MTTCG, say) must be the only one. */
    if (!has_arg(opts->extra_args, "-accel")) {
        push(argv, &argc, "-accel");
        push(argv, &argc, accel);
    }
    /* -no-reboot turns every reset, a QMP system_reset too, into QEMU's exit: a guest that
     * crashes ends the test at once instead of rebooting in a loop. */
    if (!opts->allow_reset)
        push(argv, &argc, "-no-reboot");
    if (opts->second_qmp) {
        push(argv, &argc, "-qmp");
        push(argv, &argc, qmp2_arg);
    }
    if (opts->gdbstub) {
        push(argv, &argc, "-chardev");
        push(argv, &argc, gdb_arg);
        push(argv, &argc, "-gdb");
        push(argv, &argc, "chardev:gdb0");
    }
    if (opts->shared_ram) {
        push(argv, &argc, "-object");
        push(argv, &argc, ram_arg);
        push(argv, &argc, "-machine");
        push(argv, &argc, "memory-backend=ram");
    }
    if (opts->cmdline) {
        push(argv, &argc, "-append");
        push(argv, &argc, opts->cmdline);
    }
    for (const char *const *e = opts->extra_args; e && *e; e++)
        push(argv, &argc, *e);
    argv[argc] = NULL;

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        free(vm);
        return -1;
    }
    if (pid == 0) {
        /* A test killed by ctest's timeout (SIGTERM: no atexit) takes its QEMU with it: an
         * orphaned guest would load the machine under every later test. vm_start runs on the
         * test's main thread, whose exit is the one this watches. */
        if (opts->run_as) { /* before the death signal: a change of user clears it */
            umask(0);
            if (setgroups(0, NULL) != 0 || setresgid(opts->run_as, opts->run_as, opts->run_as) ||
                setresuid(opts->run_as, opts->run_as, opts->run_as))
                _exit(126);
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        if (qemu10)
            set_qemu10_module_dir();
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    vm->pid = pid;
    /* The QMP sockets appear once QEMU has parsed its options. */
    double deadline = now_s() + 30;
    struct stat st;
    while (stat(vm->qmp, &st) != 0 || (vm->qmp2[0] && stat(vm->qmp2, &st) != 0) ||
           (vm->gdb[0] && stat(vm->gdb, &st) != 0) ||
           (vm->plugin[0] && stat(vm->plugin, &st) != 0)) {
        if (!vm_alive(vm) || now_s() > deadline) {
            fprintf(stderr, "QEMU did not open its QMP socket (exit status %d)\n", vm->exit_status);
            vm_stop(vm);
            return -1;
        }
        usleep(10000);
    }
    track_vm(vm, true);
    *out = vm;
    return 0;
}

bool vm_alive(test_vm *vm)
{
    if (vm->exited)
        return false;
    int status;
    pid_t r = waitpid(vm->pid, &status, WNOHANG);
    if (r == vm->pid) {
        vm->exited = true;
        vm->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return false;
    }
    return true;
}

char *vm_serial_text(test_vm *vm)
{
    FILE *f = fopen(vm->serial, "rb");
    if (!f)
        return strdup("");
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    size_t n;
    while ((n = fread(text + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2)
            text = realloc(text, cap *= 2);
    }
    fclose(f);
    text[len] = '\0';
    /* NULs would hide later text from strstr */
    for (size_t i = 0; i < len; i++)
        if (text[i] == '\0')
            text[i] = '?';
    return text;
}

int vm_count_serial(test_vm *vm, const char *needle)
{
    char *text = vm_serial_text(vm);
    int count = 0;
    for (char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        count++;
    free(text);
    return count;
}

int vm_wait_serial(test_vm *vm, const char *needle, double timeout_s)
{
    double deadline = now_s() + timeout_s;
    for (;;) {
        if (vm_count_serial(vm, needle) > 0)
            return 0;
        if (!vm_alive(vm)) {
            fprintf(stderr, "QEMU exited (status %d) before the guest printed \"%s\"\n",
                    vm->exit_status, needle);
            return -1;
        }
        if (now_s() > deadline) {
            char *text = vm_serial_text(vm);
            fprintf(stderr, "time-out waiting for \"%s\"; serial so far:\n%s\n", needle, text);
            free(text);
            return -1;
        }
        usleep(20000);
    }
}

const char *vm_qmp_path(const test_vm *vm)
{
    return vm->qmp;
}

const char *vm_qmp2_path(const test_vm *vm)
{
    return vm->qmp2[0] ? vm->qmp2 : NULL;
}

const char *vm_plugin_address(const test_vm *vm)
{
    return vm->plugin[0] ? vm->plugin_address : NULL;
}

const char *vm_gdb_address(const test_vm *vm)
{
    return vm->gdb[0] ? vm->gdb_address : NULL;
}

const char *vm_dir(const test_vm *vm)
{
    return vm->dir;
}

pid_t vm_pid(const test_vm *vm)
{
    return vm->pid;
}

void vm_stop(test_vm *vm)
{
    if (!vm)
        return;
    track_vm(vm, false);
    if (vm_alive(vm)) {
        kill(vm->pid, SIGTERM);
        for (int i = 0; i < 200 && vm_alive(vm); i++)
            usleep(10000);
        if (vm_alive(vm)) {
            kill(vm->pid, SIGKILL);
            waitpid(vm->pid, NULL, 0);
        }
    }
    /* The directory also holds what tests wrote there (qprof's output files). */
    DIR *d = opendir(vm->dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[600];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", vm->dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(vm->dir);
    free(vm);
}

/* Each thread of process pid and its CPU time so far (ns), from /proc's schedstat. */
static GHashTable *thread_cpu_ns(pid_t pid)
{
    char dir[64], path[128];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    GHashTable *h = g_hash_table_new(g_direct_hash, g_direct_equal);
    GDir *d = g_dir_open(dir, 0, NULL);
    for (const char *t; d && (t = g_dir_read_name(d));) {
        snprintf(path, sizeof path, "%s/%s/schedstat", dir, t);
        char *text = NULL;
        unsigned long long run = 0;
        if (g_file_get_contents(path, &text, NULL, NULL) && sscanf(text, "%llu", &run) == 1)
            g_hash_table_insert(h, GINT_TO_POINTER(atoi(t)), GSIZE_TO_POINTER((gsize)run));
        g_free(text);
    }
    if (d)
        g_dir_close(d);
    return h;
}

struct thread_ran {
    pid_t tid;
    gsize ns;
};

static int by_most_ran(const void *a, const void *b)
{
    gsize x = ((const struct thread_ran *)a)->ns, y = ((const struct thread_ran *)b)->ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

int vm_busiest_threads(const test_vm *vm, int n, pid_t *tids)
{
    GHashTable *before = thread_cpu_ns(vm_pid(vm));
    struct timespec window = {0, 300000000};
    nanosleep(&window, NULL);
    GHashTable *after = thread_cpu_ns(vm_pid(vm));
    GArray *ran = g_array_new(FALSE, FALSE, sizeof(struct thread_ran));
    GHashTableIter it;
    gpointer tid, run;
    g_hash_table_iter_init(&it, after);
    while (g_hash_table_iter_next(&it, &tid, &run)) {
        struct thread_ran r = {(pid_t)GPOINTER_TO_INT(tid),
                               GPOINTER_TO_SIZE(run) -
                                   GPOINTER_TO_SIZE(g_hash_table_lookup(before, tid))};
        g_array_append_val(ran, r);
    }
    g_array_sort(ran, by_most_ran);
    int found = MIN(n, (int)ran->len);
    for (int i = 0; i < found; i++)
        tids[i] = g_array_index(ran, struct thread_ran, i).tid;
    g_array_free(ran, TRUE);
    g_hash_table_destroy(before);
    g_hash_table_destroy(after);
    return found;
}

bool vm_place_apart(const test_vm *vm, const pid_t *tids, int n, int *rest_cpu, int *apart_cpu)
{
    cpu_set_t mine, rest, apart;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2)
        return false;
    int a = 0, b;
    while (!CPU_ISSET(a, &mine))
        a++;
    for (b = a + 1; !CPU_ISSET(b, &mine); b++)
        ;
    CPU_ZERO(&rest);
    CPU_SET(a, &rest);
    CPU_ZERO(&apart);
    CPU_SET(b, &apart);
    char task_dir[64];
    snprintf(task_dir, sizeof task_dir, "/proc/%d/task", (int)vm_pid(vm));
    GDir *d = g_dir_open(task_dir, 0, NULL);
    for (const char *t; d && (t = g_dir_read_name(d));) {
        bool listed = false;
        for (int k = 0; k < n; k++)
            listed |= tids[k] == atoi(t);
        sched_setaffinity(atoi(t), sizeof rest, listed ? &apart : &rest);
    }
    if (d)
        g_dir_close(d);
    *rest_cpu = a;
    *apart_cpu = b;
    return true;
}
