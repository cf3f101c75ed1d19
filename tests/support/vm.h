/* Test support: boot the demo guest in a real qemu-system-x86_64 with a QMP socket.
 *
 * Paths to the guest come from compile definitions set by tests/support/CMakeLists.txt:
 * QPROF_GUEST_KERNEL, QPROF_GUEST_KERNEL_NOFP, QPROF_GUEST_USER_DIR. TCG is used unless
 * QPROF_ACCEL=kvm is set in the environment, and on QEMU 10 (QPROF_QEMU10, xtask/qemu10.sh)
 * instead of the system's when QPROF_QEMU=10 is (vm_start then skips without it). */
#ifndef QPROF_TEST_VM_H
#define QPROF_TEST_VM_H

#include <stdbool.h>
#include <sys/types.h>

#define VM_SKIP 77 /* ctest SKIP_RETURN_CODE */

struct vm_opts {
    const char *kernel;            /* NULL: QPROF_GUEST_KERNEL */
    int smp;                       /* 0: 1 vCPU */
    int mem_mb;                    /* 0: 256 */
    bool shared_ram;               /* RAM as a shared file backend (for qmp's direct backend) */
    const char *const *extra_args; /* NULL-terminated, appended to QEMU's command line */
    const char *cmdline;           /* guest kernel command line (-append), may be NULL */
    bool second_qmp;   /* a second QMP socket (vm_qmp2_path), for a client beside qprof */
    bool allow_reset;  /* no -no-reboot: a reset reboots the guest instead of ending QEMU */
    const char *accel; /* -accel value; NULL: $QPROF_ACCEL, else tcg. An -accel in
                          extra_args replaces it. */
    bool gdbstub;      /* a gdbstub on a UNIX socket (vm_gdb_address), for qprof --gdb */
    /* QEMU 10 (QPROF_QEMU10, from xtask/qemu10.sh) with qprof-plugin.so loaded and its socket
     * at vm_plugin_address, for qprof --plugin. vm_start returns VM_SKIP, saying why, when
     * either is missing. */
    bool plugin;
    const char *plugin_args; /* appended to the plugin's arguments, e.g. "trigger=timer" */
    /* The QEMU binary (another architecture's: "qemu-system-aarch64", with its -M in
     * extra_args); NULL: qemu-system-x86_64. On QEMU 10 (plugin, QPROF_QEMU=10) the one of that
     * name beside QPROF_QEMU10. vm_start returns VM_SKIP when it is missing. */
    const char *qemu;
    /* 0: QEMU runs as this process's user. Else as this uid (gid the same, no supplementary
     * groups; needs root), its directory a sticky 01777 one and its sockets 0777, so that a qprof
     * of a third uid can reach them: another user's QEMU. */
    uid_t run_as;
};

typedef struct test_vm test_vm;

/* Whether hardware KVM can run the guest here: 0, or -1 with the reason in why. A test that
 * needs KVM exits VM_SKIP with that reason (a nested kvm_pvm /dev/kvm without vmx/svm does not
 * count: Debian's kernel does not even boot on it). */
int vm_kvm_usable(char *why, size_t len);

/* Starts QEMU. Returns 0, VM_SKIP when qemu-system-x86_64 is not installed (the caller should
 * exit with it), or -1 with a message on stderr. */
int vm_start(const struct vm_opts *opts, test_vm **out);

/* Waits until the serial log contains needle. 0 when found, -1 on time-out or QEMU exit. */
int vm_wait_serial(test_vm *vm, const char *needle, double timeout_s);

/* Counts occurrences of needle in the serial log so far. */
int vm_count_serial(test_vm *vm, const char *needle);

/* Everything the guest printed so far (a fresh malloc'd string, caller frees). */
char *vm_serial_text(test_vm *vm);

const char *vm_qmp_path(const test_vm *vm); /* UNIX socket path */
/* The second QMP socket's path (QEMU serves one client per socket, so a test that talks to
 * QEMU while qprof holds the first uses this one); NULL unless opts.second_qmp. */
const char *vm_qmp2_path(const test_vm *vm);
/* "unix:PATH" of the gdbstub, as qprof --gdb takes it; NULL unless opts.gdbstub. */
const char *vm_gdb_address(const test_vm *vm);
/* "unix:PATH" of qprof-plugin.so's socket, as qprof --plugin takes it; NULL unless
 * opts.plugin. */
const char *vm_plugin_address(const test_vm *vm);
const char *vm_dir(const test_vm *vm); /* private directory for this VM's files */
pid_t vm_pid(const test_vm *vm);
/* The n threads of QEMU's that ran the most over the next 0.3 s, the busiest first, into tids;
 * how many there were. In a spin guest those are the vCPU threads (the test VM names no threads,
 * and QEMU's main thread may have used more CPU than they while starting). */
int vm_busiest_threads(const test_vm *vm, int n, pid_t *tids);
/* A VM manager's pinning, after the boot: the n threads in tids (vCPU threads) on the second
 * host CPU this process may use, every other thread of QEMU's on the first; their numbers into
 * *rest_cpu and *apart_cpu. False, with nothing moved, where this process may use one CPU. */
bool vm_place_apart(const test_vm *vm, const pid_t *tids, int n, int *rest_cpu, int *apart_cpu);
bool vm_alive(test_vm *vm);

/* Kills QEMU (if still running), removes its files, frees vm. NULL is a no-op. */
void vm_stop(test_vm *vm);

#endif
