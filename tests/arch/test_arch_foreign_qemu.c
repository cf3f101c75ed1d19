/* Guests of an architecture qprof does not know, through the gdbstub: a 32-bit RISC-V machine
 * (target.xml says riscv:rv32) and an m68k one (whose target.xml names no architecture). Each
 * is one line on stderr and exit status 1 before any sample, never a run of failed samples. */
#define _GNU_SOURCE
#include "child.h"
#include "harness.h"

#include <glib.h>
#include <signal.h>
#include <unistd.h>

/* Returns 1 when the check ran, 0 when that QEMU is not installed. */
static int check_refused(const char *qemu, const char *const *machine, const char *want)
{
    char *bin = g_find_program_in_path(qemu);
    if (!bin)
        return 0;
    char dir[] = "/tmp/qparchfXXXXXX";
    REQUIRE(mkdtemp(dir));
    char *sock = g_strdup_printf("%s/gdb", dir), *gdb = g_strdup_printf("unix:%s", sock);
    char *gdb_arg = g_strdup_printf("unix:%s,server=on,wait=off", sock);
    char *out = g_strdup_printf("%s/out", dir), *err = g_strdup_printf("%s/err", dir);
    const char *args[16];
    int k = 0;
    for (int i = 0; machine[i]; i++)
        args[k++] = machine[i];
    for (const char *const *a = (const char *const[]){"-S", "-display", "none", "-serial", "none",
                                                      "-monitor", "none", "-gdb", NULL};
         *a; a++)
        args[k++] = *a;
    args[k++] = gdb_arg;
    args[k] = NULL;
    pid_t qpid = child_start(bin, args, dir, out, err, child_die_with_parent);
    REQUIRE(qpid > 0);
    for (int i = 0; i < 600 && access(sock, F_OK) != 0; i++) /* QEMU creates it at start */
        usleep(50000);
    char *qprof = g_strdup_printf("%s/qprof", QPROF_BUILD_DIR);
    char *qout = g_strdup_printf("%s/qout", dir), *qerr = g_strdup_printf("%s/qerr", dir);
    const char *qargs[] = {"--gdb", gdb, "--samples", "5", "--no-progress", NULL};
    bool timed_out = false;
    int status = child_wait(child_start(qprof, qargs, dir, qout, qerr, NULL), 120, &timed_out);
    char *text = NULL;
    g_file_get_contents(qerr, &text, NULL, NULL);
    CHECK_MSG(status == 1, "%s: qprof exited %d", qemu, status);
    CHECK_MSG(text && strstr(text, want) && strstr(text, "qprof knows x86_64, riscv64") &&
                  strchr(text, '\n') == text + strlen(text) - 1,
              "%s: %s", qemu, text ? text : "(no stderr)");
    g_free(text);
    kill(qpid, SIGKILL);
    child_wait(qpid, 30, &timed_out);
    for (char **p = (char *[]){sock, out, err, qout, qerr, NULL}; *p; p++) {
        unlink(*p);
        g_free(*p);
    }
    rmdir(dir);
    g_free(gdb);
    g_free(gdb_arg);
    g_free(qprof);
    g_free(bin);
    return 1;
}

int main(void)
{
    int ran = 0;
    ran += check_refused("qemu-system-riscv32",
                         (const char *const[]){"-machine", "virt", "-bios", "none", NULL},
                         "the gdbstub's guest is riscv:rv32 (target.xml)");
    ran += check_refused("qemu-system-m68k", (const char *const[]){"-machine", "virt", NULL},
                         "its target.xml does not name");
    if (!ran) {
        fprintf(stderr, "SKIP: needs qemu-system-riscv32 or qemu-system-m68k (qemu-system-misc)\n");
        return 77;
    }
    return harness_result();
}
