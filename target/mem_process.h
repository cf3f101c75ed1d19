/* Private to the target backends: guest RAM read out of the QEMU process itself
 * (process_vm_readv), for a QEMU started the usual way, with no shared RAM file.
 *
 * The QEMU process is the peer of the transport's socket (SO_PEERCRED on a unix socket, the
 * socket's owner through /proc/net/tcp and /proc/PID/fd on a TCP port of this host). Where guest
 * RAM lies in it is found by content: QEMU's `info mtree -f` gives the guest-physical ranges of
 * its main RAM block and their offsets in it, /proc/PID/maps the host mappings large enough to
 * hold that block, and a candidate is taken only when pages read through it equal the same pages
 * read through the transport. Every function returning int returns 0 or a negative errno-style
 * code and fills the optional `err`. */
#ifndef PROF_TARGET_MEM_PROCESS_H
#define PROF_TARGET_MEM_PROCESS_H

#include "gdb.h"
#include "qmp.h"
#include "target.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What the summary calls this backend. */
#define TARGET_PMEM_NAME "process memory"

#define TARGET_PMEM_MAX_RANGES 16

/* Guest-physical [start, end) lies at byte `offset` of the RAM block. */
struct target_pmem_range {
    uint64_t start, end, offset;
};

/* The main RAM block's ranges in the text of `info mtree -f` (the flat view of address space
 * "memory"; the block is the "ram" region name with the most bytes, e.g. pc.ram, whose part
 * above 4 GiB on x86_64 is a second range at offset 3 GiB or 2 GiB). No I/O. Returns the number
 * of ranges (0: none found), at most max; *block_len (optional) receives the block's extent. */
int target_pmem_parse_mtree(const char *text, struct target_pmem_range *out, int max,
                            uint64_t *block_len);

/* The process at the other end of a connected socket of this host: SO_PEERCRED for a unix
 * socket; for TCP, the owner of the socket whose addresses are this one's reversed (-EREMOTE,
 * "QEMU runs on another host", when this host has none). */
int target_pmem_peer_pid(int sock, pid_t *pid, struct qp_error *err);

/* Whether the process at the other end of sock runs as another user than qprof (effective
 * uids): such a QEMU cannot write memsave's files into qprof's private directory. False when
 * this cannot be told. */
bool target_pmem_peer_is_other_user(int sock);

/* Whether this process may read pid's memory, and if not, why, in one line: not a QEMU (its
 * executable's name has neither "qemu" nor "kvm"), another user's process, Yama's
 * ptrace_scope, no CAP_SYS_PTRACE. Tries a one-byte read at the end. */
int target_pmem_may_read(pid_t pid, struct qp_error *err);

/* Reads len guest-physical bytes through the transport (the proof's other side), 0 when all. */
typedef int (*target_pmem_transport_fn)(void *ctx, uint64_t paddr, void *buf, size_t len);

typedef struct target_pmem target_pmem;

/* Finds the RAM block of ranges in pid's mappings, proved by content against `transport`
 * (which must be callable now). *out is the caller's (target_pmem_free). -ENOENT with a line
 * saying why when no candidate proves. */
int target_pmem_open(pid_t pid, const struct target_pmem_range *ranges, int n_ranges,
                     target_pmem_transport_fn transport, void *ctx, target_pmem **out,
                     struct qp_error *err);
void target_pmem_free(target_pmem *pm); /* NULL is a no-op */

/* Proves the mapping again (after a reset, or a read that failed): the same candidate, else a
 * new search of the maps. On failure pm reads nothing more (every read -EFAULT). */
int target_pmem_reverify(target_pmem *pm, target_pmem_transport_fn transport, void *ctx,
                         struct qp_error *err);
bool target_pmem_usable(const target_pmem *pm);

/* len guest-physical bytes; 0 when all were read, -EFAULT when a byte is not RAM or the read
 * failed (QEMU gone, the mapping went away). */
int target_pmem_phys(target_pmem *pm, uint64_t paddr, void *buf, size_t len);
/* A prof_arch_phys_read_fn over pm (ctx: the target_pmem). */
int target_pmem_phys_word(void *ctx, uint64_t paddr, uint64_t *val);

/* One virtual read through the arch table's page walk from root (cpu->mmu for the rest of the
 * context; physical = virtual when cpu->paging64 is false; nothing when cpu->unwalkable), page
 * by page, as target_qmp_read_walked does over the RAM file. */
void target_pmem_read_walked(target_pmem *pm, const struct prof_arch *a, uint64_t root,
                             const struct prof_vcpu *cpu, struct prof_mem_req *r);

/* The whole setup through a QMP client of that QEMU: its socket's peer, the checks, `info mtree
 * -f`, and the proof against q's guest-physical reads (pmemsave unless q maps a RAM file). q is
 * borrowed for the call; sock is the socket whose peer is QEMU (q's, or a gdbstub's). */
int target_pmem_open_qmp(qmp_client *q, int sock, target_pmem **out, struct qp_error *err);
/* target_pmem_reverify through q. */
int target_pmem_reverify_qmp(target_pmem *pm, qmp_client *q, struct qp_error *err);

/* The same through the gdbstub alone, while g holds the guest stopped: the layout from the
 * monitor (gdb_monitor's `info mtree -f`), the proof against `m` packets in QEMU's physical
 * mode (set back to virtual on every path). g is borrowed for the call. */
int target_pmem_open_gdb(gdb_client *g, target_pmem **out, struct qp_error *err);

/* A guest-virtual window the plugin captured at a sample's instant, with the address space it
 * was read in: the proof's other side where no transport reads guest-physical memory. */
#define TARGET_PMEM_WITNESS_LEN 512
struct target_pmem_witness {
    uint64_t root; /* prof_vcpu's as_root */
    struct prof_arch_mmu mmu;
    uint64_t vaddr;
    uint32_t len; /* at most TARGET_PMEM_WITNESS_LEN */
    uint8_t bytes[TARGET_PMEM_WITNESS_LEN];
};

/* The setup without any layout from QEMU (the plugin alone, no QMP): each large writable
 * mapping of pid is tried as the whole RAM block at the usual machine's place (a's usual_ram:
 * prof_arch_usual_ram), and taken only when the arch's page walk through it, from each
 * witness's root, finds the witnesses' bytes (at least 3, and more matching than not). A block
 * the machine splits at a place QEMU alone says is refused. Call target_pmem_may_read first. */
int target_pmem_open_witnessed(pid_t pid, const struct prof_arch *a,
                               const struct target_pmem_witness *w, int n, target_pmem **out,
                               struct qp_error *err);

/* The guest RAM ranges, as the target seam gives them. */
int target_pmem_ram_ranges(const target_pmem *pm, struct prof_ram_range *out, int max, int *n);

/* Reads through pm since open (for tests and the summary). */
uint64_t target_pmem_reads(const target_pmem *pm);

#endif
