/* Test support: a scripted fake QMP server, for what real QEMU does not do on demand (a peer
 * that closes in the middle of a reply, a guest paused by someone else, a busy monitor).
 *
 * The server listens on a UNIX socket in its own mkdtemp directory and serves one client in a
 * thread of the test process, so the real qprof binary (a child process) can be pointed at it.
 * Like QEMU, it greets, wants qmp_capabilities, sends STOP/RESUME events around stop/cont and
 * answers `info registers -a` with a register dump captured from QEMU (two vCPUs). Everything
 * else it answers with an empty return. */
#ifndef QPROF_TEST_FAKE_QMP_H
#define QPROF_TEST_FAKE_QMP_H

enum fake_qmp_script {
    FAKE_QMP_NORMAL,        /* a running guest; every command answered */
    FAKE_QMP_PAUSED,        /* query-status says the guest is paused */
    FAKE_QMP_CLOSE_MID_HMP, /* the first human-monitor-command gets half a reply, then close */
    FAKE_QMP_SILENT,        /* accepts, never greets (QEMU busy with another client) */
};

typedef struct fake_qmp fake_qmp;

/* Starts the server. Returns NULL with a message on stderr when the socket cannot be made.
 * The caller owns the result and ends it with fake_qmp_stop. */
fake_qmp *fake_qmp_start(enum fake_qmp_script script);

/* The socket's path, valid until fake_qmp_stop. */
const char *fake_qmp_path(const fake_qmp *f);

/* Ends the server: waits for the client's session to end (at most timeout_s, then cuts it),
 * removes the socket and its directory, frees f. Returns the names of the commands received,
 * each followed by ',' (e.g. "qmp_capabilities,query-status,"); the caller g_free()s it.
 * NULL is a no-op returning NULL. */
char *fake_qmp_stop(fake_qmp *f, double timeout_s);

#endif
