#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define STACK_CAPTURE_MAX (64 * 1024)

static pid_t start_stopped(const char *fixture, const char *mode)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(fixture, fixture, mode, (char *)NULL);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status)) {
        fprintf(stderr, "capture: %s %s did not stop\n", fixture, mode);
        return -1;
    }
    return pid;
}

static int run_eu_stack(pid_t pid, struct capture *c)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "eu-stack -p %d 2>&1", (int)pid);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -ENOENT;
    char line[512];
    while (fgets(line, sizeof line, p) && c->n_eu < CAPTURE_MAX_NAMES) {
        uint64_t pc;
        char name[256] = "??";
        if (line[0] != '#' || sscanf(line, "#%*d %" SCNx64 " %255s", &pc, name) < 1)
            continue;
        c->eu_pcs[c->n_eu] = pc;
        c->eu_names[c->n_eu++] = strdup(name);
    }
    int rc = pclose(p);
    if (c->n_eu == 0) {
        fprintf(stderr, "capture: eu-stack printed no frames (status %d)\n", rc);
        return -ENOENT;
    }
    return 0;
}

/* Seize the group-stopped fixture and interrupt it into a ptrace-stop. */
static int seize(pid_t pid)
{
    if (ptrace(PTRACE_SEIZE, pid, 0, 0) != 0)
        return -errno;
    if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) != 0)
        return -errno;
    int status;
    if (waitpid(pid, &status, __WALL) != pid || !WIFSTOPPED(status))
        return -EIO;
    return 0;
}

static void regs_from_ptrace(const struct user_regs_struct *u, struct unw_regs *r)
{
    const unsigned long long v[UNW_X86_64_NREGS] = {u->rax, u->rdx, u->rcx, u->rbx, u->rsi, u->rdi,
                                                    u->rbp, u->rsp, u->r8,  u->r9,  u->r10, u->r11,
                                                    u->r12, u->r13, u->r14, u->r15, u->rip};
    for (int i = 0; i < UNW_X86_64_NREGS; i++)
        r->r[i] = v[i];
}

static uint64_t mapping_end(pid_t pid, uint64_t addr)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    uint64_t end = 0;
    while (f && fgets(line, sizeof line, f)) {
        uint64_t lo, hi;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) == 2 && addr >= lo && addr < hi)
            end = hi;
    }
    if (f)
        fclose(f);
    return end;
}

static int read_stack(pid_t pid, struct capture *c)
{
    uint64_t sp = c->regs.r[UNW_RSP];
    c->stack_end = mapping_end(pid, sp);
    if (c->stack_end == 0)
        return -EFAULT;
    size_t len = c->stack_end - sp > STACK_CAPTURE_MAX ? STACK_CAPTURE_MAX : c->stack_end - sp;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -errno;
    c->stack = malloc(len);
    ssize_t got = pread(fd, c->stack, len, (off_t)sp);
    close(fd);
    if (got <= 0)
        return -EIO;
    c->stack_addr = sp;
    c->stack_len = (size_t)got;
    return 0;
}

static int capture_regs_and_stack(pid_t pid, struct capture *c)
{
    int rc = seize(pid);
    if (rc < 0)
        return rc;
    struct user_regs_struct u;
    if (ptrace(PTRACE_GETREGS, pid, 0, &u) != 0)
        return -errno;
    regs_from_ptrace(&u, &c->regs);
    return read_stack(pid, c);
}

int capture_fixture(const char *fixture, const char *mode, int with_eu_stack, struct capture *c)
{
    memset(c, 0, sizeof *c);
    pid_t pid = start_stopped(fixture, mode);
    if (pid < 0)
        return -EIO;
    int rc = with_eu_stack ? run_eu_stack(pid, c) : 0;
    if (rc == 0)
        rc = capture_regs_and_stack(pid, c);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, __WALL);
    return rc;
}

void capture_release(struct capture *c)
{
    for (int i = 0; i < c->n_eu; i++)
        free(c->eu_names[i]);
    free(c->stack);
    memset(c, 0, sizeof *c);
}
