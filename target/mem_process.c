/* Guest RAM out of the QEMU process (mem_process.h): finding the process, the refusals, the
 * search of its mappings, the proof by content and the reads. */
#define _GNU_SOURCE
#include "mem_process.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE_SIZE          4096u
#define MAX_CANDIDATES     256
#define PROOF_CHUNKS       12
#define PROOF_CHUNK_LEN    (64u << 10)
#define CAP_SYS_PTRACE_BIT 19

struct proof_chunk {
    uint64_t paddr;
    size_t len;
    uint8_t *via_transport; /* g_malloc'd */
};

struct target_pmem {
    pid_t pid;
    struct target_pmem_range ranges[TARGET_PMEM_MAX_RANGES];
    int n_ranges;
    uint64_t block_len;
    uint64_t base; /* host address of the block's byte 0 in QEMU; 0: none proved */
    uint64_t reads;
    struct proof_chunk chunks[PROOF_CHUNKS];
    int n_chunks;
};

/* ---- info mtree -f ------------------------------------------------------------------------ */

/* "  0000000000100000-0000000007ffffff (prio 0, ram): pc.ram @0000000000100000" */
static bool parse_mtree_line(const char *line, struct target_pmem_range *r, char *name,
                             size_t name_len)
{
    unsigned long long start, end, off = 0;
    char kind[16], nm[64];
    int n =
        sscanf(line, " %llx-%llx (prio %*d, %15[^)]): %63s @%llx", &start, &end, kind, nm, &off);
    if (n < 4 || strcmp(kind, "ram") != 0 || end < start || off + (end - start) < off)
        return false;
    *r = (struct target_pmem_range){start, end + 1, off};
    g_strlcpy(name, nm, name_len);
    return true;
}

/* The flat view of AS "memory" (the system address space), else the first view. */
static gchar *memory_view(const char *text)
{
    gchar **views = g_strsplit(text, "FlatView #", -1);
    gchar *chosen = NULL;
    for (gchar **v = views; *v && !chosen; v++)
        if (strstr(*v, "AS \"memory\","))
            chosen = g_strdup(*v);
    if (!chosen && views[0])
        chosen = g_strdup(views[1] ? views[1] : views[0]);
    g_strfreev(views);
    return chosen;
}

/* The "ram" name with the most bytes in lines: the guest's main RAM block. */
static void main_block(gchar **lines, char *best, size_t best_len)
{
    GHashTable *bytes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    uint64_t most = 0;
    best[0] = 0;
    for (gchar **l = lines; *l; l++) {
        struct target_pmem_range r;
        char name[64];
        if (!parse_mtree_line(*l, &r, name, sizeof name))
            continue;
        uint64_t *sum = g_hash_table_lookup(bytes, name);
        if (!sum) {
            sum = g_new0(uint64_t, 1);
            g_hash_table_insert(bytes, g_strdup(name), sum);
        }
        *sum += r.end - r.start;
        if (*sum > most) {
            most = *sum;
            g_strlcpy(best, name, best_len);
        }
    }
    g_hash_table_destroy(bytes);
}

int target_pmem_parse_mtree(const char *text, struct target_pmem_range *out, int max,
                            uint64_t *block_len)
{
    gchar *view = memory_view(text);
    if (!view)
        return 0;
    gchar **lines = g_strsplit(view, "\n", -1);
    char block[64];
    int n = 0;
    uint64_t extent = 0;
    main_block(lines, block, sizeof block);
    for (gchar **l = lines; *l && block[0] && n < max; l++) {
        struct target_pmem_range r;
        char name[64];
        if (!parse_mtree_line(*l, &r, name, sizeof name) || strcmp(name, block) != 0)
            continue;
        out[n++] = r;
        extent = MAX(extent, r.offset + (r.end - r.start));
    }
    g_strfreev(lines);
    g_free(view);
    if (block_len)
        *block_len = extent;
    return n;
}

/* ---- Finding the QEMU process ------------------------------------------------------------- */

/* An address as /proc/net/tcp{,6} prints it: the 32-bit words in host order, then the port. */
static void proc_net_addr(const struct sockaddr_storage *ss, char *out, size_t len)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ss;
        snprintf(out, len, "%08X:%04X", a->sin_addr.s_addr, ntohs(a->sin_port));
        return;
    }
    const struct sockaddr_in6 *a = (const void *)ss;
    uint32_t w[4];
    memcpy(w, &a->sin6_addr, sizeof w);
    snprintf(out, len, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3], ntohs(a->sin6_port));
}

/* The inode of the socket in /proc/net/tcp{,6} whose local address is `local` and remote
 * `remote`; 0 when none. */
static unsigned long tcp_inode(const char *table, const char *local, const char *remote)
{
    FILE *f = fopen(table, "re");
    char line[512];
    unsigned long inode = 0;
    while (f && !inode && fgets(line, sizeof line, f)) {
        char loc[64], rem[64];
        unsigned long ino;
        if (sscanf(line, " %*d: %63s %63s %*x %*s %*s %*s %*u %*d %lu", loc, rem, &ino) == 3 &&
            strcmp(loc, local) == 0 && strcmp(rem, remote) == 0)
            inode = ino;
    }
    if (f)
        fclose(f);
    return inode;
}

/* Whether one of pid's open files is socket:[inode]. */
static bool pid_has_socket(int pid, const char *want)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;
    while (d && !found && (e = readdir(d))) {
        char path[64 + sizeof e->d_name], target[64];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) {
            target[n] = 0;
            found = strcmp(target, want) == 0;
        }
    }
    if (d)
        closedir(d);
    return found;
}

static pid_t socket_owner(unsigned long inode)
{
    char want[48];
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t pid = 0;
    while (d && !pid && (e = readdir(d)))
        if (isdigit((unsigned char)e->d_name[0]) && atoi(e->d_name) != getpid() &&
            pid_has_socket(atoi(e->d_name), want))
            pid = atoi(e->d_name);
    if (d)
        closedir(d);
    return pid;
}

static int tcp_peer_pid(int sock, const struct sockaddr_storage *local, pid_t *pid,
                        struct qp_error *err)
{
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    if (getpeername(sock, (struct sockaddr *)&peer, &len) != 0)
        return qp_error_set(err, -errno, "finding QEMU's process: getpeername: %s",
                            strerror(errno));
    char loc[64], rem[64];
    proc_net_addr(&peer, loc, sizeof loc); /* QEMU's side is the reverse of ours */
    proc_net_addr(local, rem, sizeof rem);
    unsigned long inode =
        tcp_inode(local->ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", loc, rem);
    if (!inode)
        return qp_error_set(err, -EREMOTE,
                            "QEMU runs on another host (or network namespace): no socket of this "
                            "host is the other end of the connection");
    *pid = socket_owner(inode);
    if (!*pid)
        return qp_error_set(err, -ESRCH,
                            "the other end of the connection is a socket of this host that no "
                            "process qprof can see holds (another user's, or another PID "
                            "namespace's)");
    return 0;
}

int target_pmem_peer_pid(int sock, pid_t *pid, struct qp_error *err)
{
    struct sockaddr_storage local;
    socklen_t len = sizeof local;
    if (getsockname(sock, (struct sockaddr *)&local, &len) != 0)
        return qp_error_set(err, -errno, "finding QEMU's process: getsockname: %s",
                            strerror(errno));
    if (local.ss_family == AF_INET || local.ss_family == AF_INET6)
        return tcp_peer_pid(sock, &local, pid, err);
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (local.ss_family != AF_UNIX ||
        getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.pid <= 0)
        return qp_error_set(err, -ENOTSUP, "finding QEMU's process: the socket names no peer");
    *pid = cred.pid;
    return 0;
}

/* ---- May qprof read it? ------------------------------------------------------------------- */

/* A "Key:\tvalue..." line of /proc/PID/status (pid 0: self), as text; false when absent. */
static bool status_field(pid_t pid, const char *key, char *out, size_t len)
{
    char path[64], line[512];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    else
        g_strlcpy(path, "/proc/self/status", sizeof path);
    FILE *f = fopen(path, "re");
    size_t klen = strlen(key);
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            g_strlcpy(out, g_strstrip(line + klen + 1), len);
            found = true;
        }
    if (f)
        fclose(f);
    return found;
}

static uint64_t status_hex(pid_t pid, const char *key)
{
    char v[64];
    return status_field(pid, key, v, sizeof v) ? strtoull(v, NULL, 16) : 0;
}

/* Whether pid descends from this process (Yama's ptrace_scope 1 allows that). */
static bool is_descendant(pid_t pid)
{
    for (int depth = 0; pid > 1 && depth < 64; depth++) {
        char v[64];
        if (!status_field(pid, "PPid", v, sizeof v))
            return false;
        pid = atoi(v);
        if (pid == getpid())
            return true;
    }
    return false;
}

static int yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    int scope = 0;
    if (f && fscanf(f, "%d", &scope) != 1)
        scope = 0;
    if (f)
        fclose(f);
    return scope;
}

/* The reasons the kernel would refuse, said before it does (its EPERM says none of them). */
static int explain_refusal(pid_t pid, struct qp_error *err)
{
    bool ptrace_cap = status_hex(0, "CapEff") >> CAP_SYS_PTRACE_BIT & 1;
    char uids[128];
    unsigned quid = 0;
    if (status_field(pid, "Uid", uids, sizeof uids))
        quid = (unsigned)strtoul(uids, NULL, 10);
    if (!ptrace_cap && quid != geteuid())
        return qp_error_set(err, -EPERM,
                            "QEMU (pid %d) is another user's (uid %u; qprof runs as uid %u) and "
                            "qprof has no CAP_SYS_PTRACE",
                            (int)pid, quid, (unsigned)geteuid());
    int scope = yama_scope();
    if (scope >= 3 || (scope == 2 && !ptrace_cap) ||
        (scope == 1 && !ptrace_cap && !is_descendant(pid)))
        return qp_error_set(err, -EPERM,
                            "Yama's kernel.yama.ptrace_scope is %d and qprof is not QEMU's "
                            "(pid %d) parent%s",
                            scope, (int)pid,
                            scope >= 3 ? " (3: no process may read another's memory)"
                                       : " and has no CAP_SYS_PTRACE");
    uint64_t theirs = status_hex(pid, "CapPrm"), ours = status_hex(0, "CapPrm");
    if (!ptrace_cap && (theirs & ~ours))
        return qp_error_set(err, -EPERM,
                            "QEMU (pid %d) holds capabilities qprof lacks, and qprof has no "
                            "CAP_SYS_PTRACE",
                            (int)pid);
    return 0;
}

bool target_pmem_peer_is_other_user(int sock)
{
    pid_t pid = 0;
    struct qp_error ignored = {0};
    unsigned real, effective;
    char uids[128];
    return target_pmem_peer_pid(sock, &pid, &ignored) == 0 &&
           status_field(pid, "Uid", uids, sizeof uids) &&
           sscanf(uids, "%u %u", &real, &effective) == 2 && effective != geteuid();
}

/* The first readable mapping of pid, for a one-byte trial read; 0 when none. */
static uint64_t first_readable(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    uint64_t at = 0;
    while (f && !at && fgets(line, sizeof line, f)) {
        unsigned long long start, end;
        char perms[8];
        if (sscanf(line, "%llx-%llx %7s", &start, &end, perms) == 3 && perms[0] == 'r')
            at = start;
    }
    if (f)
        fclose(f);
    return at;
}

/* The peer must be a QEMU: a test's fake server, or a proxy, is told apart before any of its
 * memory is searched (the proof would refuse it too, at the cost of reading its mappings). An
 * executable qprof may not see (another user's) is left to the refusal's reasons. */
static int check_qemu(pid_t pid, struct qp_error *err)
{
    char path[64], exe[512];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    if (strstr(base, "qemu") || strstr(base, "kvm"))
        return 0;
    return qp_error_set(err, -ENOTSUP, "the socket's peer (pid %d, %s) is not a QEMU process",
                        (int)pid, base);
}

int target_pmem_may_read(pid_t pid, struct qp_error *err)
{
    int rc = check_qemu(pid, err);
    if (!rc)
        rc = explain_refusal(pid, err);
    if (rc)
        return rc;
    uint64_t at = first_readable(pid);
    if (!at)
        return qp_error_set(err, -EPERM, "QEMU's (pid %d) mappings are not readable to qprof",
                            (int)pid);
    uint8_t byte;
    struct iovec l = {&byte, 1}, r = {(void *)(uintptr_t)at, 1};
    if (process_vm_readv(pid, &l, 1, &r, 1, 0) != 1)
        return qp_error_set(err, -errno, "reading QEMU's (pid %d) memory: %s%s", (int)pid,
                            strerror(errno),
                            errno == EPERM ? " (qprof needs CAP_SYS_PTRACE, or to be QEMU's "
                                             "user and parent)"
                                           : "");
    return 0;
}

/* ---- Reads -------------------------------------------------------------------------------- */

static bool remote_read(pid_t pid, uint64_t hva, void *buf, size_t len)
{
    struct iovec l = {buf, len}, r = {(void *)(uintptr_t)hva, len};
    return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len;
}

/* The range holding paddr, NULL when it is not RAM. */
static const struct target_pmem_range *range_of(const target_pmem *pm, uint64_t paddr)
{
    for (int i = 0; i < pm->n_ranges; i++)
        if (paddr >= pm->ranges[i].start && paddr < pm->ranges[i].end)
            return &pm->ranges[i];
    return NULL;
}

/* Reads through host base `base` (a candidate's or the proved one). */
static int phys_at(target_pmem *pm, uint64_t base, uint64_t paddr, uint8_t *buf, size_t len)
{
    while (len > 0) {
        const struct target_pmem_range *r = range_of(pm, paddr);
        if (!r || !base)
            return -EFAULT;
        uint64_t n = MIN((uint64_t)len, r->end - paddr);
        if (!remote_read(pm->pid, base + r->offset + (paddr - r->start), buf, (size_t)n))
            return -EFAULT;
        pm->reads++;
        buf += n, paddr += n, len -= (size_t)n;
    }
    return 0;
}

int target_pmem_phys(target_pmem *pm, uint64_t paddr, void *buf, size_t len)
{
    return phys_at(pm, pm->base, paddr, buf, len);
}

int target_pmem_phys_word(void *ctx, uint64_t paddr, uint64_t *val)
{
    return target_pmem_phys(ctx, paddr, val, sizeof *val); /* little-endian hosts and guests */
}

void target_pmem_read_walked(target_pmem *pm, const struct prof_arch *a, uint64_t root,
                             const struct prof_vcpu *cpu, struct prof_mem_req *r)
{
    r->got = 0;
    r->rc = 0;
    if (r->vaddr && r->len > 0 - r->vaddr) /* never wrap past the top of the address space */
        r->len = 0 - r->vaddr;
    while (!cpu->unwalkable && r->got < r->len) {
        uint64_t va = r->vaddr + r->got, pa = va, page = PAGE_SIZE;
        if (cpu->paging64 &&
            prof_arch_page_walk(a, root, &cpu->mmu, va, target_pmem_phys_word, pm, &pa, &page))
            break;
        size_t len = (size_t)MIN((uint64_t)(r->len - r->got), page - va % page);
        if (target_pmem_phys(pm, pa, (uint8_t *)r->buf + r->got, len) != 0)
            break;
        r->got += len;
    }
    if (r->got == 0 && r->len > 0)
        r->rc = -EFAULT;
}

int target_pmem_ram_ranges(const target_pmem *pm, struct prof_ram_range *out, int max, int *n)
{
    *n = 0;
    for (int i = 0; i < pm->n_ranges && *n < max; i++)
        out[(*n)++] = (struct prof_ram_range){pm->ranges[i].start, pm->ranges[i].end};
    return 0;
}

uint64_t target_pmem_reads(const target_pmem *pm)
{
    return pm ? pm->reads : 0;
}

bool target_pmem_usable(const target_pmem *pm)
{
    return pm && pm->base != 0;
}

/* ---- The proof ---------------------------------------------------------------------------- */

static void add_chunk(target_pmem *pm, uint64_t paddr, size_t len)
{
    const struct target_pmem_range *r = range_of(pm, paddr);
    if (!r || pm->n_chunks >= PROOF_CHUNKS)
        return;
    paddr &= ~(uint64_t)(PAGE_SIZE - 1);
    len = (size_t)MIN((uint64_t)len, r->end - paddr);
    for (int i = 0; i < pm->n_chunks; i++)
        if (pm->chunks[i].paddr == paddr)
            return;
    pm->chunks[pm->n_chunks++] = (struct proof_chunk){paddr, len, g_malloc(len)};
}

/* Where a kernel usually lies (1, 2 and 16 MiB; riscv64 and aarch64 put RAM at 2 and 1 GiB),
 * then each range's start, 512 KiB in (where aarch64 loads a kernel: the Image format's text
 * offset, and an ELF linked for it), 2 MiB in and its middle: pages that hold something, so
 * that the proof compares bytes and not zeros. */
static void choose_chunks(target_pmem *pm)
{
    static const uint64_t usual[] = {1u << 20, 2u << 20, 16u << 20};
    for (size_t i = 0; i < G_N_ELEMENTS(usual); i++)
        add_chunk(pm, usual[i], PROOF_CHUNK_LEN);
    for (int i = 0; i < pm->n_ranges; i++) {
        const struct target_pmem_range *r = &pm->ranges[i];
        add_chunk(pm, r->start, PROOF_CHUNK_LEN);
        add_chunk(pm, r->start + (512u << 10), PROOF_CHUNK_LEN);
        add_chunk(pm, r->start + (r->end - r->start) / 2, PROOF_CHUNK_LEN);
        add_chunk(pm, r->start + (2u << 20), PROOF_CHUNK_LEN);
    }
}

static int read_chunks(target_pmem *pm, target_pmem_transport_fn transport, void *ctx)
{
    for (int i = 0; i < pm->n_chunks; i++)
        if (transport(ctx, pm->chunks[i].paddr, pm->chunks[i].via_transport, pm->chunks[i].len))
            return -EIO;
    return 0;
}

static bool all_zero(const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i])
            return false;
    return true;
}

/* Whether base proves: at least 4 pages that hold something equal their transport copies, and
 * no more than one in 8 such pages differs (a running guest writes some between the two reads;
 * a wrong mapping matches none). */
static bool proves(target_pmem *pm, uint64_t base)
{
    unsigned match = 0, differ = 0;
    uint8_t *page = g_malloc(PAGE_SIZE);
    for (int i = 0; i < pm->n_chunks; i++) {
        const struct proof_chunk *c = &pm->chunks[i];
        for (size_t off = 0; off + PAGE_SIZE <= c->len; off += PAGE_SIZE) {
            const uint8_t *want = c->via_transport + off;
            if (phys_at(pm, base, c->paddr + off, page, PAGE_SIZE) != 0) {
                differ++;
                continue;
            }
            if (memcmp(page, want, PAGE_SIZE) != 0)
                differ++;
            else if (!all_zero(want, PAGE_SIZE))
                match++;
        }
    }
    g_free(page);
    return match >= 4 && differ * 8 <= match;
}

struct mapping {
    uint64_t start, end;
};

/* pid's readable and writable mappings, in order (g_array of struct mapping). */
static GArray *rw_mappings(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    GArray *maps = g_array_new(false, false, sizeof(struct mapping));
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long start, end;
        char perms[8];
        if (sscanf(line, "%llx-%llx %7s", &start, &end, perms) == 3 && perms[0] == 'r' &&
            perms[1] == 'w')
            g_array_append_val(maps, ((struct mapping){start, end}));
    }
    if (f)
        fclose(f);
    return maps;
}

/* Host addresses where the block could start: the start of each mapping, and the end of each
 * less the block's length (QEMU puts a guard page after the block, but the kernel may merge it
 * with a mapping before), wherever a contiguous run of mappings from there holds the block. */
static int candidates(GArray *maps, uint64_t block_len, uint64_t *out, int max)
{
    int n = 0;
    for (guint i = 0; i < maps->len && n < max; i++) {
        const struct mapping *m = &g_array_index(maps, struct mapping, i);
        uint64_t run_end = m->end, run_start = m->start;
        for (guint j = i + 1; j < maps->len; j++) {
            const struct mapping *next = &g_array_index(maps, struct mapping, j);
            if (next->start != run_end)
                break;
            run_end = next->end;
        }
        for (guint j = i; j > 0; j--) {
            const struct mapping *prev = &g_array_index(maps, struct mapping, j - 1);
            if (prev->end != run_start)
                break;
            run_start = prev->start;
        }
        if (run_end - m->start >= block_len)
            out[n++] = m->start;
        if (n < max && m->end - run_start >= block_len && m->end - block_len != m->start)
            out[n++] = m->end - block_len;
    }
    return n;
}

static int search(target_pmem *pm, struct qp_error *err)
{
    GArray *maps = rw_mappings(pm->pid);
    uint64_t cand[MAX_CANDIDATES];
    int n = candidates(maps, pm->block_len, cand, MAX_CANDIDATES);
    g_array_free(maps, true);
    pm->base = 0;
    for (int i = 0; i < n && !pm->base; i++)
        if (proves(pm, cand[i]))
            pm->base = cand[i];
    if (pm->base)
        return 0;
    return qp_error_set(err, -ENOENT,
                        "no mapping of QEMU's (pid %d) %d of %" PRIu64
                        " MiB or more holds the pages the transport reads (content proof)",
                        (int)pm->pid, n, pm->block_len >> 20);
}

int target_pmem_open(pid_t pid, const struct target_pmem_range *ranges, int n_ranges,
                     target_pmem_transport_fn transport, void *ctx, target_pmem **out,
                     struct qp_error *err)
{
    if (n_ranges <= 0)
        return qp_error_set(err, -ENOENT, "QEMU names no guest RAM block (info mtree -f)");
    target_pmem *pm = g_new0(target_pmem, 1);
    pm->pid = pid;
    pm->n_ranges = MIN(n_ranges, TARGET_PMEM_MAX_RANGES);
    for (int i = 0; i < pm->n_ranges; i++) {
        pm->ranges[i] = ranges[i];
        pm->block_len = MAX(pm->block_len, ranges[i].offset + (ranges[i].end - ranges[i].start));
    }
    choose_chunks(pm);
    int rc = read_chunks(pm, transport, ctx)
                 ? qp_error_set(err, -EIO, "reading the proof's pages through the transport")
                 : search(pm, err);
    if (rc) {
        target_pmem_free(pm);
        return rc;
    }
    *out = pm;
    return 0;
}

int target_pmem_reverify(target_pmem *pm, target_pmem_transport_fn transport, void *ctx,
                         struct qp_error *err)
{
    uint64_t before = pm->base;
    pm->base = 0;
    if (read_chunks(pm, transport, ctx))
        return qp_error_set(err, -EIO, "reading the proof's pages through the transport");
    if (before && proves(pm, before)) {
        pm->base = before;
        return 0;
    }
    return search(pm, err);
}

/* ---- Without a layout: the plugin alone ------------------------------------------------- */

#define MIN_RAM_MAPPING   (4u << 20)
#define WITNESS_MIN_WORDS 4 /* 8-byte words not zero that a witness must hold, and match */

/* The main RAM block's ranges as QEMU's usual machine for a lays out a block of len bytes
 * (prof_arch_usual_ram); 0 when this is not known. */
static int usual_layout(const struct prof_arch *a, uint64_t len, struct target_pmem_range *r)
{
    struct prof_arch_ram_piece p[TARGET_PMEM_MAX_RANGES];
    int n = prof_arch_usual_ram(a, len, p, TARGET_PMEM_MAX_RANGES);
    for (int i = 0; i < n; i++)
        r[i] = (struct target_pmem_range){p[i].start, p[i].end, p[i].offset};
    return n;
}

struct walk_ctx {
    target_pmem *pm;
    uint64_t base;
};

static int walk_word(void *ctx, uint64_t paddr, uint64_t *val)
{
    struct walk_ctx *c = ctx;
    return phys_at(c->pm, c->base, paddr, (uint8_t *)val, sizeof *val);
}

/* 1: the witness's words are what base's block holds at its address, at least 4 and half of
 * those that are not zero; 0: they are not; -1: they prove nothing (too few words that are not
 * zero). Half: the guest ran on since the capture, and a short stack window's counters or the
 * ABI table's changing fields moved (4 of a spin stack's 6 in one run); a wrong mapping matches
 * no word that is not zero. */
static int witness_matches(target_pmem *pm, const struct prof_arch *a, uint64_t base,
                           const struct target_pmem_witness *w)
{
    uint64_t want[TARGET_PMEM_WITNESS_LEN / 8], got[TARGET_PMEM_WITNESS_LEN / 8];
    uint32_t words = w->len / 8, len = words * 8, nonzero = 0;
    memcpy(want, w->bytes, len);
    for (uint32_t i = 0; i < words; i++)
        nonzero += want[i] != 0;
    if (nonzero < WITNESS_MIN_WORDS)
        return -1;
    struct walk_ctx c = {pm, base};
    for (uint32_t done = 0; done < len;) {
        uint64_t va = w->vaddr + done, pa, page;
        if (prof_arch_page_walk(a, w->root, &w->mmu, va, walk_word, &c, &pa, &page) != 0)
            return 0;
        uint32_t n = (uint32_t)MIN((uint64_t)(len - done), page - va % page);
        if (phys_at(pm, base, pa, (uint8_t *)got + done, n) != 0)
            return 0;
        done += n;
    }
    uint32_t same = 0;
    for (uint32_t i = 0; i < words; i++)
        same += want[i] != 0 && want[i] == got[i];
    return same >= WITNESS_MIN_WORDS && same * 2 >= nonzero;
}

static bool witnessed(target_pmem *pm, const struct prof_arch *a, uint64_t base,
                      const struct target_pmem_witness *w, int n)
{
    int match = 0, differ = 0;
    for (int i = 0; i < n && differ <= n / 2; i++) {
        int m = witness_matches(pm, a, base, &w[i]);
        match += m == 1;
        differ += m == 0;
    }
    return match >= 3 && match > differ;
}

int target_pmem_open_witnessed(pid_t pid, const struct prof_arch *a,
                               const struct target_pmem_witness *w, int n, target_pmem **out,
                               struct qp_error *err)
{
    *out = NULL;
    GArray *maps = rw_mappings(pid);
    target_pmem *pm = g_new0(target_pmem, 1);
    pm->pid = pid;
    int tried = 0;
    bool too_big = false;
    for (guint i = 0; i < maps->len && !pm->base; i++) {
        const struct mapping *m = &g_array_index(maps, struct mapping, i);
        uint64_t len = m->end - m->start;
        if (len < MIN_RAM_MAPPING)
            continue;
        pm->n_ranges = usual_layout(a, len, pm->ranges);
        too_big |= pm->n_ranges == 0;
        if (pm->n_ranges == 0)
            continue;
        pm->block_len = len;
        tried++;
        if (witnessed(pm, a, m->start, w, n))
            pm->base = m->start;
    }
    g_array_free(maps, true);
    if (pm->base) {
        *out = pm;
        return 0;
    }
    target_pmem_free(pm);
    if (tried == 0 && too_big)
        return qp_error_set(err, -ENOTSUP,
                            "without QMP, qprof knows no %s RAM layout for QEMU's (pid %d) "
                            "mappings (its usual machine splits RAM that large where only "
                            "--qmp-socket's info mtree says)",
                            a->name, (int)pid);
    return qp_error_set(err, -ENOENT,
                        "none of QEMU's (pid %d) %d large mappings holds the pages the plugin "
                        "captured (%d windows, content proof)",
                        (int)pid, tried, n);
}

void target_pmem_free(target_pmem *pm)
{
    if (!pm)
        return;
    for (int i = 0; i < pm->n_chunks; i++)
        g_free(pm->chunks[i].via_transport);
    g_free(pm);
}
