/* `qprof report` on record files from someone else (issue 34): a record that names a FIFO or
 * /dev/zero as its kernel or a binary, one whose notes and comm names carry terminal escape
 * sequences, one whose samples claim vCPU 0xffffffff. Each report runs in a child under a
 * deadline (alarm): a hang or an endless read fails the test instead of blocking it.
 *
 * Usage: test_report_files fifo|dev_zero|escapes|vcpu */
#include "cli.h"
#include "harness.h"
#include "output.h"

#include <fcntl.h>
#include <glib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEADLINE_S 60 /* the fixed report takes milliseconds; a hang used to be forever */

static char *dir;

static char *in_dir(const char *name)
{
    return g_build_filename(dir, name, NULL);
}

/* A record of one kernel-mode and one user-mode sample, the kernel and the user binary recorded
 * at kernel_path and user_path, the comm and the notes as given (written raw, as anyone's
 * record may be), every sample on vCPU cpu. */
static char *write_record(const char *kernel_path, const char *user_path, const char *comm,
                          const char *notes, uint32_t cpu)
{
    char *path = in_dir("hostile.qprof");
    out_profile *p = out_profile_new();
    out_recorder *r = NULL;
    struct qp_error err = {0};
    REQUIRE(out_recorder_open(path, "qprof=test\n", &r, &err) == 0);
    struct out_module kernel = {.name = "vmlinux", .base = 0xffffffff81000000, .kernel = true};
    struct out_module user = {.name = "spin", .base = 0x400000, .text_hash = 0x1234};
    g_strlcpy(kernel.path, kernel_path, sizeof kernel.path);
    g_strlcpy(user.path, user_path, sizeof user.path);
    uint32_t mk = out_profile_add_module(p, &kernel), mu = out_profile_add_module(p, &user);
    struct out_frame kf[] = {{0xffffffff81001000, mk, true, true}, {0x401000, mu, false, false}};
    struct out_stack s = {
        .pid = 7, .mode = OUT_MODE_KERNEL, .n_frames = 2, .n_user = 1, .frames = kf};
    g_strlcpy(s.comm, comm, sizeof s.comm);
    uint32_t k = out_profile_intern(p, &s);
    s.mode = OUT_MODE_USER, s.n_frames = 1, s.frames = kf + 1;
    uint32_t u = out_profile_intern(p, &s);
    for (uint32_t i = 0; i < 4; i++)
        out_profile_add_record(p, &(struct out_record){1000 * i, 1000, cpu, i % 2 ? k : u});
    out_recorder_notes(r, notes);
    CHECK_INT(out_recorder_close(r, p, &err), 0);
    out_profile_free(p);
    return path;
}

/* Runs `qprof report ARGS` in a child with stdout and stderr in dir/report.out; returns its exit
 * status, or -SIGNAL when it was killed (by the deadline, or a sanitizer's abort). */
static int run_report(const char *const *args)
{
    char *out = in_dir("report.out");
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(99);
        alarm(DEADLINE_S);
        int argc = 1;
        char *argv[16] = {"report"};
        for (; args[argc - 1] && argc < 15; argc++)
            argv[argc] = (char *)args[argc - 1];
        int rc = prof_report_main(argc, argv);
        fflush(NULL);
        _exit(rc);
    }
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    g_free(out);
    if (WIFSIGNALED(status))
        return -WTERMSIG(status);
    return WEXITSTATUS(status);
}

static char *report_output(void)
{
    char *path = in_dir("report.out"), *text = NULL;
    REQUIRE(g_file_get_contents(path, &text, NULL, NULL));
    g_free(path);
    return text;
}

/* A FIFO as the record's kernel and user binary (nobody ever writes it): before, open() blocked
 * for good. Now the report goes on unsymbolized and says why. --kernel FIFO fails in one line. */
static void test_fifo(void)
{
    char *fifo = in_dir("kernel.fifo");
    REQUIRE(mkfifo(fifo, 0600) == 0);
    char *rec = write_record(fifo, fifo, "spin", "", 0);
    char *folded = in_dir("out.folded");
    int rc = run_report((const char *[]){"-i", rec, "-o", folded, NULL});
    char *text = report_output();
    CHECK_MSG(rc == 0, "report exited %d: %s", rc, text);
    CHECK_MSG(strstr(text, "a FIFO") != NULL, "no word of the FIFO: %s", text);
    g_free(text);
    rc = run_report((const char *[]){"-i", rec, "--kernel", fifo, "-o", folded, NULL});
    text = report_output();
    CHECK_MSG(rc == 1, "--kernel FIFO: report exited %d: %s", rc, text);
    g_free(text);
    /* the record file itself a FIFO */
    rc = run_report((const char *[]){"-i", fifo, NULL});
    text = report_output();
    CHECK_MSG(rc == 1 && strstr(text, "FIFO"), "-i FIFO: report exited %d: %s", rc, text);
    g_free(text);
    unlink(fifo);
    unlink(rec);
    g_free(fifo), g_free(rec), g_free(folded);
}

/* /dev/zero as the kernel (read as a symbol map, line by line: one endless line) and as the
 * record itself: before, memory grew until the OOM killer came (24 GB in 67 s). */
static void test_dev_zero(void)
{
    char *rec = write_record("/dev/zero", "/dev/zero", "spin", "", 0);
    int rc = run_report((const char *[]){"-i", rec, NULL});
    char *text = report_output();
    CHECK_MSG(rc == 0, "report exited %d: %s", rc, text);
    CHECK_MSG(strstr(text, "/dev/zero is a device") != NULL, "no word of /dev/zero: %s", text);
    g_free(text);
    rc = run_report((const char *[]){"-i", "/dev/zero", NULL});
    text = report_output();
    CHECK_MSG(rc == 1 && strstr(text, "device"), "-i /dev/zero: report exited %d: %s", rc, text);
    g_free(text);
    unlink(rec);
    g_free(rec);
}

/* Escape sequences in the record's warning and in a comm name reach no terminal: no ESC, BEL,
 * CR or CSI byte in what report prints; the warning is shown, escaped. */
static void test_escapes(void)
{
    const char *notes = "warning=\x1b]0;owned\x07\x1b[2J\r\xc2\x9b"
                        "31m gone\n"
                        "address_space=\x1b[1mbold\n";
    char *rec = write_record("", "", "e\x1b[5mvil", notes, 0);
    int rc = run_report((const char *[]){"-i", rec, NULL});
    char *text = report_output();
    CHECK_MSG(rc == 0, "report exited %d: %s", rc, text);
    CHECK_MSG(strchr(text, '\x1b') == NULL && strchr(text, '\x07') == NULL &&
                  strchr(text, '\r') == NULL && strstr(text, "\xc2\x9b") == NULL,
              "control characters printed raw: %s", text);
    CHECK_MSG(strstr(text, "warned: \\x1b]0;owned\\x07\\x1b[2J\\x0d\\xc2\\x9b31m gone"),
              "warning not shown escaped: %s", text);
    CHECK_MSG(strstr(text, "address space \\x1b[1mbold"), "note not escaped: %s", text);
    g_free(text);
    unlink(rec);
    g_free(rec);
}

/* Samples on vCPU 0xffffffff: before, every writer shifted it left by 32 in a signed 64-bit
 * key (undefined behaviour, which UBSan stops on). Now the batch is refused as corrupt. */
static void test_vcpu(void)
{
    char *rec = write_record("", "", "spin", "", 0xffffffffu);
    char *folded = in_dir("cpu.folded"), *svg = in_dir("cpu.svg"), *pb = in_dir("cpu.pb.gz");
    char *ss = in_dir("cpu.speedscope.json");
    int rc = run_report((const char *[]){"-i", rec, "--per-cpu", "-o", folded, "-o", svg, "-o", pb,
                                         "-o", ss, NULL});
    char *text = report_output();
    CHECK_MSG(rc == 0, "report exited %d: %s", rc, text);
    CHECK_MSG(strstr(text, "0 samples recorded"), "vCPU 0xffffffff kept: %s", text);
    g_free(text);
    unlink(rec), unlink(folded), unlink(svg), unlink(pb), unlink(ss);
    g_free(rec), g_free(folded), g_free(svg), g_free(pb), g_free(ss);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    dir = g_dir_make_tmp("qprof-report-XXXXXX", NULL);
    REQUIRE(dir);
    if (strcmp(which, "fifo") == 0)
        test_fifo();
    else if (strcmp(which, "dev_zero") == 0)
        test_dev_zero();
    else if (strcmp(which, "escapes") == 0)
        test_escapes();
    else if (strcmp(which, "vcpu") == 0)
        test_vcpu();
    else {
        fprintf(stderr, "usage: %s fifo|dev_zero|escapes|vcpu\n", argv[0]);
        return 2;
    }
    char *out = in_dir("report.out");
    unlink(out);
    g_free(out);
    rmdir(dir);
    g_free(dir);
    return harness_result();
}
