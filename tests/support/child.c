/* Test support: children with their output in files, waited for with a deadline (child.h). */
#include "child.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#define MAX_ARGS 64

int child_die_with_parent(void)
{
    return prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 ? 0 : 127;
}

pid_t child_start(const char *bin, const char *const *args, const char *dir, const char *out_path,
                  const char *err_path, int (*before_exec)(void))
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int rc = before_exec ? before_exec() : 0;
    if (rc)
        _exit(rc);
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || chdir(dir) != 0)
        _exit(126);
    dup2(out, 1);
    dup2(err, 2);
    const char *argv[MAX_ARGS] = {bin};
    int n = 1;
    for (; args && *args && n < MAX_ARGS - 1; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    execv(bin, (char *const *)argv);
    _exit(127);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int child_wait(pid_t pid, double timeout_s, bool *timed_out)
{
    double deadline = now_s() + timeout_s;
    int status = 0;
    *timed_out = false;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (now_s() > deadline) {
            *timed_out = true;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(20000);
    }
    if (WIFSIGNALED(status))
        fprintf(stderr, "child %d died of signal %d\n", (int)pid, WTERMSIG(status));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

uint64_t child_progress_samples(const char *err)
{
    uint64_t best = 0;
    char *copy = strdup(err), *save = NULL;
    for (char *l = copy ? strtok_r(copy, "\r\n", &save) : NULL; l;
         l = strtok_r(NULL, "\r\n", &save)) {
        double seconds;
        unsigned long long samples;
        char word[16];
        if (sscanf(l, "qprof: %lf s %llu %15s", &seconds, &samples, word) == 3 &&
            strcmp(word, "samples") == 0 && samples > best)
            best = samples;
    }
    free(copy);
    return best;
}
