/* Test support: run a program (qprof, mostly) as a child with its output in files, and wait for
 * it with a deadline, so that no test can hang on it. */
#ifndef QPROF_TEST_CHILD_H
#define QPROF_TEST_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Starts bin with args (NULL-terminated; argv[0] is bin) in dir, stdout and stderr truncated
 * into out_path and err_path. before_exec, when not NULL, runs in the child first; a nonzero
 * return ends the child with that code. Returns the pid, or -1 when fork fails. The child exits
 * 126 when it cannot set up its files or directory, 127 when bin cannot be run. */
/* A before_exec for children that must not outlive the test (a QEMU): killed when the test
 * process's main thread ends, however it ends (a failed REQUIRE, ctest's SIGTERM). */
int child_die_with_parent(void);

pid_t child_start(const char *bin, const char *const *args, const char *dir, const char *out_path,
                  const char *err_path, int (*before_exec)(void));

/* Waits at most timeout_s for pid. Returns its exit status, or -1 when a signal ended it or it
 * had to be killed at the deadline (then *timed_out is set, for the caller to fail the test). */
int child_wait(pid_t pid, double timeout_s, bool *timed_out);

/* The highest sample count on qprof's --progress lines in its stderr so far ("\rqprof:    1.2 s
 *       345 samples ..."); a line still being written does not parse and is skipped. */
uint64_t child_progress_samples(const char *err);

#endif
