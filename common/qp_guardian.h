/* qp_guardian: a process forked beside a protocol connection that puts the guest right if qprof
 * dies while it holds the guest stopped.
 *
 * QEMU keeps a guest paused when the QMP client or the debugger that stopped it just goes, and
 * nobody else could resume it. The guardian holds a copy of the connected socket and a lifeline,
 * a pipe whose write end only qprof holds. qprof says goodbye (one byte) when it leaves with
 * nothing owed; if the lifeline breaks without one, whatever killed qprof (a signal, abort, the
 * OOM killer), the guardian runs the protocol's rescue on its copy of the socket and exits.
 *
 * What the rescue needs to know as qprof goes (is a cont owed, which detach command) lives in a
 * small page shared with the guardian, written by qprof without a system call per sample. */
#ifndef QP_GUARDIAN_H
#define QP_GUARDIAN_H

#include "qp_error.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct qp_guardian qp_guardian;

/* Runs in the guardian once the lifeline broke without a goodbye: sock is its copy of the
 * connection, shared the page qprof wrote last. It must not return to the owner's code. */
typedef void (*qp_guardian_rescue_fn)(int sock, void *shared);

/* Forks the guardian over sock with a zeroed shared page of shared_size bytes (at most a page).
 * NULL on failure (err: "guardian: fork: ..."). */
qp_guardian *qp_guardian_start(int sock, size_t shared_size, qp_guardian_rescue_fn rescue,
                               struct qp_error *err);

/* The page shared with the guardian: write what its rescue reads. */
void *qp_guardian_shared(qp_guardian *g);

/* Ends the guardian: goodbye when nothing is owed (it exits quietly), else it runs its rescue
 * now, and this waits for it to finish. */
void qp_guardian_stop(qp_guardian *g, bool goodbye);

/* Lets the guardian go without a goodbye and without waiting: its rescue runs on its own, for as
 * long as it takes (a connection QEMU has not taken on yet). */
void qp_guardian_release(qp_guardian *g);

#endif
