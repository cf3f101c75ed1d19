/* The riscv64 demo guest in the low-half layout (guest/kernel/riscv64-lowhalf/, guest/README.md
 * "riscv64, low-half layout"): its files are laid out as teaching kernels are (the kernel linked
 * and loaded at 0x80000000, the user programs ET_EXEC at 0), and it boots under the system's
 * qemu-system-riscv64 (Debian 12's QEMU 7.2, the oldest supported) with `-bios none` and runs
 * spin and sys through its trampoline: their serial lines appear, on one hart ("smp1") and on
 * two under MTTCG with a spin pinned to hart 1 ("smp2"), and nothing panics or faults. It does
 * not profile.
 *
 * Skips (77) without qemu-system-riscv64 or the guest (riscv64-linux-gnu-gcc; xtask deps). */
#define _GNU_SOURCE
#include "child.h"
#include "harness.h"

#include <elf.h>
#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define KERNEL QPROF_DEMO_DIR "/kernel-lowhalf.elf"
#define USER   QPROF_DEMO_DIR "/user-lowhalf"

/* The ELF header and first PT_LOAD of path. */
static bool read_elf(const char *path, Elf64_Ehdr *eh, Elf64_Phdr *load)
{
    FILE *f = fopen(path, "rb");
    bool ok = f && fread(eh, sizeof *eh, 1, f) == 1;
    for (int i = 0; ok && i < eh->e_phnum; i++) {
        ok = fseek(f, (long)(eh->e_phoff + (uint64_t)i * eh->e_phentsize), SEEK_SET) == 0 &&
             fread(load, sizeof *load, 1, f) == 1;
        if (ok && load->p_type == PT_LOAD)
            break;
    }
    if (f)
        fclose(f);
    return ok && load->p_type == PT_LOAD;
}

static void check_files(void)
{
    Elf64_Ehdr eh;
    Elf64_Phdr load;
    REQUIRE(read_elf(KERNEL, &eh, &load));
    CHECK_INT(eh.e_type, ET_EXEC);
    CHECK_INT(eh.e_machine, EM_RISCV);
    CHECK_U64(eh.e_entry, 0x80000000);
    CHECK_U64(load.p_vaddr, 0x80000000); /* linked where it runs: VA = PA */
    CHECK_U64(load.p_paddr, 0x80000000);
    static const char *const progs[] = {USER "/spin", USER "/sys"};
    for (size_t i = 0; i < G_N_ELEMENTS(progs); i++) {
        REQUIRE(read_elf(progs[i], &eh, &load));
        CHECK_MSG(eh.e_type == ET_EXEC, "%s: e_type %d, not ET_EXEC", progs[i], eh.e_type);
        CHECK_MSG(load.p_vaddr == 0, "%s: first PT_LOAD at %#lx, not 0", progs[i],
                  (unsigned long)load.p_vaddr);
    }
}

static bool serial_has(const char *serial, const char *text)
{
    char *log = NULL;
    g_file_get_contents(serial, &log, NULL, NULL);
    bool has = log && strstr(log, text);
    g_free(log);
    return has;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Polls the serial log for text until the monotonic time `until` (one deadline for all the
 * lines of a boot, generous: the host is shared and TCG slow). */
static bool wait_serial(const char *serial, const char *text, double until)
{
    while (!serial_has(serial, text)) {
        if (now_s() > until)
            return false;
        usleep(50000);
    }
    return true;
}

/* Boots the guest on harts CPUs with run=, waits for each needle, then checks the log. */
static void boot(const char *qemu, int harts, const char *run, const char *const *needles)
{
    char dir[] = "/tmp/qplowhalfXXXXXX";
    REQUIRE(mkdtemp(dir));
    char *serial = g_strdup_printf("%s/serial", dir);
    char *serial_arg = g_strdup_printf("file:%s", serial);
    char *smp = g_strdup_printf("%d", harts);
    char *append = g_strdup_printf("run=%s", run);
    char *out = g_strdup_printf("%s/qemu.out", dir);
    const char *args[] = {
        "-machine",    "virt",     "-bios",   "none",    "-m",
        "128M",        "-smp",     smp,       "-accel",  harts > 1 ? "tcg,thread=multi" : "tcg",
        "-kernel",     KERNEL,     "-append", append,    "-display",
        "none",        "-monitor", "none",    "-serial", serial_arg,
        "-nodefaults", NULL};
    pid_t pid = child_start(qemu, args, dir, out, out, child_die_with_parent);
    REQUIRE(pid > 0);
    double until = now_s() + 120;
    CHECK_MSG(wait_serial(serial, "\nready", until), "smp%d: no 'ready'", harts);
    for (const char *const *n = needles; *n; n++)
        CHECK_MSG(wait_serial(serial, *n, until), "smp%d: no '%s'", harts, *n);
    char *log = NULL;
    g_file_get_contents(serial, &log, NULL, NULL);
    CHECK_MSG(log && !strstr(log, "panic") && !strstr(log, "fault pid="),
              "smp%d: the guest reported a failure", harts);
    fprintf(stderr, "smp%d serial:\n%s\n", harts, log ? log : "(none)");
    g_free(log);
    kill(pid, SIGKILL);
    bool timed_out = false;
    child_wait(pid, 30, &timed_out);
    char *rm = g_strdup_printf("rm -rf %s", dir);
    CHECK(system(rm) == 0);
    g_free(rm), g_free(serial), g_free(serial_arg), g_free(smp), g_free(append), g_free(out);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "smp1";
    char *qemu = g_find_program_in_path("qemu-system-riscv64");
    if (!qemu || access(KERNEL, R_OK) != 0) {
        fprintf(stderr, "SKIP: needs qemu-system-riscv64 and " KERNEL
                        " (riscv64-linux-gnu-gcc; xtask deps)\n");
        g_free(qemu);
        return 77;
    }
    check_files();
    if (strcmp(which, "smp1") == 0) {
        static const char *const lines[] = {"start pid=1 name=spin", "start pid=2 name=spin",
                                            "start pid=3 name=sys",  "spin[1] iter=",
                                            "spin[2] iter=",         "sys[3] calls=",
                                            "rate pid=1 iters=",     "rate pid=2 iters=",
                                            "rate pid=3 iters=",     NULL};
        boot(qemu, 1, "spin,spin,sys", lines);
    } else if (strcmp(which, "smp2") == 0) {
        /* pid 2 runs on hart 1 only: its lines prove that hart 1 runs user code too */
        static const char *const lines[] = {"smp: 2 cpus online",
                                            "start pid=2 name=spin cpu=1\r\n",
                                            "spin[1] iter=",
                                            "spin[2] iter=",
                                            "sys[3] calls=",
                                            "rate pid=1 iters=",
                                            "rate pid=2 iters=",
                                            "rate pid=3 iters=",
                                            NULL};
        boot(qemu, 2, "spin@0,spin@1,sys", lines);
    } else {
        REQUIRE(!"unknown case");
    }
    g_free(qemu);
    return harness_result();
}
