/* What the arch tests that boot a test machine under a real qemu-system-* share
 * (test_arch_riscv64_qemu.c, test_arch_aarch64_qemu.c): QEMU started with its gdbstub and QMP
 * on unix sockets and its RAM in a shared file, that file mapped, the gdbstub target opened,
 * the sampling loops, and the qprof binary run against the same machine. Each test keeps what
 * is its architecture's own: its machine arguments, its checks at a stop, its expected names.
 * CHECKs made here count in this file's harness: a test returns harness_result() and
 * arch_qemu_result() together. */
#ifndef QPROF_TEST_ARCH_QEMU_H
#define QPROF_TEST_ARCH_QEMU_H

#include "target.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct arch_qemu_spec {
    const char *qemu;                /* "qemu-system-riscv64" */
    const char *kernel;              /* the test machine's ELF, for -kernel */
    const char *skip_hint;           /* what installs them, for the SKIP line */
    const char *dir_template;        /* for mkdtemp */
    const char *const *machine_args; /* the architecture's own QEMU arguments, NULL-ended */
    uint64_t ram_base, ram_size;
    int cpus;
    const struct prof_arch *arch; /* what the gdbstub's target.xml must select */
};

struct arch_qemu {
    const struct arch_qemu_spec *spec;
    char dir[64];
    char *gdb;           /* "unix:DIR/gdb": for the target and qprof's --gdb */
    char *qmp;           /* DIR/qmp: qprof's --qmp-socket */
    char *folded;        /* DIR/q.folded: for qprof's -o */
    prof_target *target; /* open from arch_qemu_boot to arch_qemu_release_target */
    const uint8_t *ram;  /* the guest's RAM file, ram_size bytes from ram_base */
    char *qemu_path, *sock, *ram_path, *out, *err, *q_out, *q_err;
    pid_t pid;
    int ram_fd;
};

/* Starts QEMU and opens the target (REQUIRE on failure). 0, or 77 when QEMU or the machine's
 * ELF is missing (then nothing was started). */
int arch_qemu_boot(struct arch_qemu *q, const struct arch_qemu_spec *spec);

/* prof_arch's physical reader over the RAM file; ctx is the struct arch_qemu. */
int arch_qemu_read_phys(void *ctx, uint64_t paddr, uint64_t *val);

/* len bytes of RAM at paddr, NULL when they are not all inside it. */
const uint8_t *arch_qemu_ram_at(const struct arch_qemu *q, uint64_t paddr, size_t len);

/* Samples every 10 ms until booted(ctx) (generous deadline), then REQUIREs it. */
void arch_qemu_wait_boot(struct arch_qemu *q, prof_target_stopped_fn on_stop, void *ctx,
                         bool (*booted)(const void *ctx));

/* A fixed count of samples a few ms apart, as qprof takes them (back to back, TCG would hardly
 * run the guest between two stops). */
void arch_qemu_sample(struct arch_qemu *q, prof_target_stopped_fn on_stop, void *ctx, int samples);

/* Closes the target so that the qprof binary can have the gdbstub. */
void arch_qemu_release_target(struct arch_qemu *q);

/* A file's text, "" when unreadable; g_free it. */
char *arch_qemu_slurp(const char *path);

/* The qprof binary refuses in one line: an x86_64 kernel ELF, a kernel ELF of `other_machine`
 * (named `other_name`), and QMP alone (whose line names the QEMU binary, and `qmp_also` when
 * given) where qprof cannot read the architecture's `info registers` (no monitor_parse in its
 * table); where it can, an x86_64 kernel ELF over QMP instead, and the memory mode QMP cannot
 * have there: memsave where qprof walks the page tables itself (riscv64), direct where QEMU
 * must translate (aarch64, monitor_translated). */
void arch_qemu_expect_refusals(const struct arch_qemu *q, const char *other_name,
                               uint16_t other_machine, const char *qmp_also);

/* Runs the qprof binary with args (its output to q->folded when args say so); returns its exit
 * status, its stderr in *errors when errors is not NULL (g_free it). */
int arch_qemu_run_qprof(const struct arch_qemu *q, const char *const *args, char **errors);

/* Counts the folded stacks of --os none: kernel ones start at `entry` (the trap entry) or are
 * marked truncated, most reach it, and ";ENTRY;ksyscall;kwork " is among them; user ones are
 * marked truncated (with leaf_only, after the leaf and with no caller). A stack per vCPU per
 * sample of `samples`. With `vector` (the trap vector's symbol, NULL for none), kernel stacks
 * rooted at "kernel" that are only "[truncated];VECTOR" (stops at the vector's branch, before
 * the entry has a frame) are left out of the share that must reach the entry: over the gdbstub
 * such stops are rooted at the process's address space and counted as user lines, over QMP on
 * aarch64 (no TTBR0 to tell address spaces) at "kernel". */
void arch_qemu_check_folded(const char *stacks, int cpus, int samples, const char *entry,
                            bool leaf_only, const char *vector);

/* Kills QEMU, unmaps the RAM and removes the files. */
void arch_qemu_stop(struct arch_qemu *q);

/* This file's checks: 0 when all passed. */
int arch_qemu_result(void);

#endif
