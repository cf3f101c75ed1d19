/* Process memory (target/mem_process.c) without QEMU: `info mtree -f` transcripts captured from
 * QEMU 7.2, and a child process that plays QEMU's part, holding a "RAM block" among mappings of
 * the same size, for the search, the proof by content, a remap and the socket's peer. */
#define _GNU_SOURCE
#include "harness.h"
#include "mem_process.h"
#include "arch_x86_64.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <glib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK   (8u << 20)
#define LOW_LEN (4u << 20)
#define HIGH    UINT64_C(0x100000000)

static char *slurp(const char *name)
{
    char *path = g_build_filename(QPROF_TRANSCRIPTS, name, NULL), *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        HARNESS_FAIL("cannot read %s", path);
    g_free(path);
    return text;
}

static void test_mtree_x86_64_above_4g(void)
{
    char *text = slurp("x86_64_q35_5g_info_mtree_f.txt");
    struct target_pmem_range r[8];
    uint64_t len = 0;
    int n = text ? target_pmem_parse_mtree(text, r, 8, &len) : 0;
    CHECK_INT(n, 3);
    if (n == 3) {
        /* below the VGA hole, up to 2 GiB at its own offset, and the rest above 4 GiB */
        CHECK(r[0].start == 0 && r[0].end == 0xc0000 && r[0].offset == 0);
        CHECK(r[1].start == 0x100000 && r[1].end == 0x80000000 && r[1].offset == 0x100000);
        CHECK(r[2].start == HIGH && r[2].end == 0x1c0000000 && r[2].offset == 0x80000000);
    }
    CHECK(len == UINT64_C(5) << 30);
    g_free(text);
}

static void test_mtree_riscv64(void)
{
    char *text = slurp("riscv64_virt_info_mtree_f.txt");
    struct target_pmem_range r[8];
    int n = text ? target_pmem_parse_mtree(text, r, 8, NULL) : 0;
    CHECK_INT(n, 1);
    CHECK(n == 1 && r[0].start == 0x80000000 && r[0].end == 0x90000000 && r[0].offset == 0);
    CHECK_INT(target_pmem_parse_mtree("no flat view here\n", r, 8, NULL), 0);
    g_free(text);
}

/* The block's byte at offset: a pattern from seed, so that parent and child agree. */
static void fill(uint8_t *p, size_t len, uint64_t off0, uint64_t seed)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t x = (off0 + i) * UINT64_C(0x9e3779b97f4a7c15) ^ seed;
        x ^= x >> 29;
        memcpy(p + i, &x, 8);
    }
}

struct fake_ram {
    uint64_t seed;
};

/* The transport's side: guest-physical low [0, 4 MiB) at block offset 0, high [4 GiB, +4 MiB)
 * at offset 4 MiB, as x86_64 splits RAM around the PCI hole. */
static uint64_t block_offset(uint64_t paddr)
{
    return paddr >= HIGH ? paddr - HIGH + LOW_LEN : paddr;
}

static int fake_transport(void *ctx, uint64_t paddr, void *buf, size_t len)
{
    const struct fake_ram *f = ctx;
    fill(buf, len, block_offset(paddr), f->seed);
    return 0;
}

static const struct target_pmem_range layout[] = {
    {0, LOW_LEN, 0},
    {HIGH, HIGH + (BLOCK - LOW_LEN), LOW_LEN},
};

/* The child: a decoy of the block's size (other bytes) and the block, each surrounded by a
 * PROT_NONE guard as QEMU does; on 'm' it moves the block elsewhere (a remap), on EOF it ends. */
static void child_main(int cmd, int reply)
{
    uint8_t *area =
        mmap(NULL, 3 * (size_t)BLOCK + 3 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *decoy = area + 4096, *block = decoy + BLOCK + 4096;
    mprotect(decoy, BLOCK, PROT_READ | PROT_WRITE);
    mprotect(block, BLOCK, PROT_READ | PROT_WRITE);
    fill(decoy, BLOCK, 0, 7);
    fill(block, BLOCK, 0, 42);
    char c;
    if (write(reply, "r", 1) != 1)
        _exit(1);
    while (read(cmd, &c, 1) == 1) {
        if (c == 'm') {
            uint8_t *moved = mremap(block, BLOCK, BLOCK, MREMAP_MAYMOVE | MREMAP_FIXED,
                                    area + 2 * (size_t)BLOCK + 3 * 4096 - 4096);
            block = moved == MAP_FAILED ? block : moved;
        }
        if (write(reply, "k", 1) != 1)
            _exit(1);
    }
    _exit(0);
}

static pid_t start_child(int *cmd, int *reply)
{
    int to[2], from[2];
    if (pipe(to) || pipe(from))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(to[1]);
        close(from[0]);
        child_main(to[0], from[1]);
    }
    close(to[0]);
    close(from[1]);
    *cmd = to[1];
    *reply = from[0];
    char c;
    if (read(*reply, &c, 1) != 1)
        return -1;
    return pid;
}

static bool reads_pattern(target_pmem *pm, uint64_t paddr, uint64_t seed)
{
    uint8_t got[4096], want[4096];
    fill(want, sizeof want, block_offset(paddr), seed);
    return target_pmem_phys(pm, paddr, got, sizeof got) == 0 && memcmp(got, want, 4096) == 0;
}

static void test_search_and_remap(void)
{
    int cmd, reply;
    pid_t pid = start_child(&cmd, &reply);
    REQUIRE(pid > 0);
    struct qp_error err = {0};
    struct fake_ram wrong = {9}, right = {42};
    target_pmem *pm = NULL;
    /* a transport whose pages no mapping holds: refused, never a guess */
    CHECK_INT(target_pmem_open(pid, layout, 2, fake_transport, &wrong, &pm, &err), -ENOENT);
    CHECK_MSG(strstr(err.msg, "content proof") != NULL, "%s", err.msg);
    CHECK(pm == NULL);
    err = (struct qp_error){0};
    CHECK_INT(target_pmem_open(pid, layout, 2, fake_transport, &right, &pm, &err), 0);
    if (!pm) {
        HARNESS_FAIL("%s", err.msg);
        goto out;
    }
    CHECK(reads_pattern(pm, 0x1000, 42));
    CHECK(reads_pattern(pm, LOW_LEN - 4096, 42));
    CHECK(reads_pattern(pm, HIGH + 0x3000, 42)); /* above 4 GiB: the block's second half */
    uint8_t hole[8];
    CHECK_INT(target_pmem_phys(pm, LOW_LEN, hole, sizeof hole), -EFAULT); /* not RAM */
    /* QEMU remaps the block: the old place reads nothing (never stale bytes), the proof finds
     * the new one */
    char c;
    REQUIRE(write(cmd, "m", 1) == 1 && read(reply, &c, 1) == 1);
    uint8_t page[4096];
    CHECK_INT(target_pmem_phys(pm, 0x1000, page, sizeof page), -EFAULT);
    CHECK_INT(target_pmem_reverify(pm, fake_transport, &right, &err), 0);
    CHECK(target_pmem_usable(pm));
    CHECK(reads_pattern(pm, HIGH + 0x3000, 42));
    /* a reverify against other bytes leaves nothing readable */
    CHECK(target_pmem_reverify(pm, fake_transport, &wrong, &err) < 0);
    CHECK(!target_pmem_usable(pm));
    CHECK_INT(target_pmem_phys(pm, 0x1000, page, sizeof page), -EFAULT);
out:
    target_pmem_free(pm);
    close(cmd);
    close(reply);
    waitpid(pid, NULL, 0);
}

/* ---- The plugin alone: the layout from the captures (target_pmem_open_witnessed) ---------- */

#define PT_ROOT  0x200000u /* x86_64 tables: PML4, PDPT, PD, PT at 2 MiB and the pages after */
#define PT_DATA  0x300000u /* the page virtual 0x400000 maps to */
#define PT_VADDR 0x400000u
#define PT_ENTRY 3u /* present, writable */
#define W_SEED   42
#define W_DECOY  7

/* A guest's x86_64 page tables mapping PT_VADDR to PT_DATA, in a block laid out as QEMU lays
 * out x86_64 RAM (guest-physical = offset below the 640 KiB hole and above 1 MiB). */
static void guest_tables(uint8_t *block, uint64_t seed)
{
    uint64_t e[4] = {(PT_ROOT + 0x1000) | PT_ENTRY, (PT_ROOT + 0x2000) | PT_ENTRY,
                     (PT_ROOT + 0x3000) | PT_ENTRY, PT_DATA | PT_ENTRY};
    memcpy(block + PT_ROOT, &e[0], 8);                                 /* PML4[0] */
    memcpy(block + PT_ROOT + 0x1000, &e[1], 8);                        /* PDPT[0] */
    memcpy(block + PT_ROOT + 0x2000 + (PT_VADDR >> 21) * 8, &e[2], 8); /* PD[2] */
    memcpy(block + PT_ROOT + 0x3000, &e[3], 8);                        /* PT[0] */
    fill(block + PT_DATA, 4096, PT_DATA, seed);
}

/* The child: a decoy with the same tables but another page behind them, and the block, each
 * between PROT_NONE guards; it ends on EOF. */
static void witness_child(int cmd, int reply)
{
    uint8_t *area =
        mmap(NULL, 2 * (size_t)BLOCK + 3 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *decoy = area + 4096, *block = decoy + BLOCK + 4096;
    mprotect(decoy, BLOCK, PROT_READ | PROT_WRITE);
    mprotect(block, BLOCK, PROT_READ | PROT_WRITE);
    guest_tables(decoy, W_DECOY);
    guest_tables(block, W_SEED);
    char c;
    if (write(reply, "r", 1) != 1)
        _exit(1);
    while (read(cmd, &c, 1) == 1)
        ;
    _exit(0);
}

/* Witness i: 512 bytes at PT_VADDR + 512 i as the plugin captured them, with `moved` of their
 * 64 words changed since (the guest ran on). */
static void witness(struct target_pmem_witness *w, int i, uint64_t seed, int moved)
{
    uint8_t page[4096];
    fill(page, sizeof page, PT_DATA, seed);
    *w = (struct target_pmem_witness){.root = PT_ROOT, .vaddr = PT_VADDR + 512u * i, .len = 512};
    memcpy(w->bytes, page + 512 * i, 512);
    for (int k = 0; k < moved; k++)
        w->bytes[8 * k] ^= 0xff;
}

static void test_witnessed(void)
{
    int to[2], from[2];
    REQUIRE(pipe(to) == 0 && pipe(from) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(to[1]);
        close(from[0]);
        witness_child(to[0], from[1]);
    }
    close(to[0]);
    close(from[1]);
    char c;
    REQUIRE(read(from[0], &c, 1) == 1);
    struct target_pmem_witness w[4];
    struct qp_error err = {0};
    target_pmem *pm = NULL;
    /* windows that neither mapping holds: refused, though both walks succeed */
    for (int i = 0; i < 4; i++)
        witness(&w[i], i, 9, 0);
    CHECK_INT(target_pmem_open_witnessed(pid, &prof_arch_x86_64, w, 4, &pm, &err), -ENOENT);
    CHECK_MSG(strstr(err.msg, "content proof") != NULL, "%s", err.msg);
    CHECK(pm == NULL);
    /* the block's windows, half the words of two moved since the capture: the block, not the
     * decoy whose tables are the same */
    for (int i = 0; i < 4; i++)
        witness(&w[i], i, W_SEED, i < 2 ? 32 : 0);
    err = (struct qp_error){0};
    CHECK_INT(target_pmem_open_witnessed(pid, &prof_arch_x86_64, w, 4, &pm, &err), 0);
    uint8_t got[4096], want[4096];
    fill(want, sizeof want, PT_DATA, W_SEED);
    CHECK(pm && target_pmem_phys(pm, PT_DATA, got, sizeof got) == 0 &&
          memcmp(got, want, sizeof got) == 0);
    if (pm)
        CHECK_INT(target_pmem_phys(pm, 0xa0000, got, 8), -EFAULT); /* the legacy hole */
    target_pmem_free(pm);
    pm = NULL;
    /* more than half moved in every window: not proof enough */
    for (int i = 0; i < 4; i++)
        witness(&w[i], i, W_SEED, 40);
    CHECK(target_pmem_open_witnessed(pid, &prof_arch_x86_64, w, 4, &pm, &err) < 0);
    target_pmem_free(pm);
    close(to[1]);
    close(from[0]);
    waitpid(pid, NULL, 0);
}

/* The child's side of test_peer: a unix and a TCP listener of its own (a unix socket's peer
 * credentials are its listener's), their port told through `ready`, both accepted, then it waits
 * for `done` to close. */
static void peer_child(int ready, int done, const char *unix_name)
{
    int us = socket(AF_UNIX, SOCK_STREAM, 0), ts = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    memcpy(ua.sun_path + 1, unix_name, strlen(unix_name)); /* abstract: no file to remove */
    socklen_t ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(unix_name));
    struct sockaddr_in ta = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t tlen = sizeof ta;
    if (bind(us, (struct sockaddr *)&ua, ulen) || listen(us, 1) ||
        bind(ts, (struct sockaddr *)&ta, sizeof ta) || listen(ts, 1) ||
        getsockname(ts, (struct sockaddr *)&ta, &tlen))
        _exit(1);
    if (write(ready, &ta.sin_port, sizeof ta.sin_port) != sizeof ta.sin_port)
        _exit(1);
    int a = accept(us, NULL, NULL), b = accept(ts, NULL, NULL);
    char c;
    (void)!read(done, &c, 1);
    close(a);
    close(b);
    _exit(0);
}

/* The socket's peer: SO_PEERCRED over a unix socket, /proc/net/tcp and /proc/PID/fd over TCP on
 * this host; and the peer (this test's child) is no QEMU. */
static void test_peer(void)
{
    int ready[2], done[2];
    REQUIRE(pipe(ready) == 0 && pipe(done) == 0);
    char name[64];
    snprintf(name, sizeof name, "qprof-test-peer-%d", (int)getpid());
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(done[1]);
        peer_child(ready[1], done[0], name);
    }
    close(ready[1]);
    close(done[0]);
    struct sockaddr_in ta = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    REQUIRE(read(ready[0], &ta.sin_port, sizeof ta.sin_port) == sizeof ta.sin_port);
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    memcpy(ua.sun_path + 1, name, strlen(name));
    socklen_t ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    int us = socket(AF_UNIX, SOCK_STREAM, 0), ts = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(connect(us, (struct sockaddr *)&ua, ulen) == 0);
    REQUIRE(connect(ts, (struct sockaddr *)&ta, sizeof ta) == 0);
    pid_t got = 0;
    struct qp_error err = {0};
    CHECK_INT(target_pmem_peer_pid(us, &got, &err), 0);
    CHECK_INT(got, pid);
    /* the child accepts in its own time: its socket has an inode once it has */
    got = 0;
    for (int i = 0; i < 1000 && got != pid; i++)
        if (target_pmem_peer_pid(ts, &got, &err) != 0 || got != pid)
            usleep(10000);
    CHECK_INT(got, pid);
    CHECK(target_pmem_may_read(pid, &err) < 0);
    CHECK_MSG(strstr(err.msg, "is not a QEMU process") != NULL, "%s", err.msg);
    close(us);
    close(ts);
    close(done[1]);
    close(ready[0]);
    waitpid(pid, NULL, 0);
}

/* Drops CAP_SYS_PTRACE from this process's effective and permitted sets (raw capset: no
 * libcap in the build). */
static int drop_ptrace(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return -1;
    d[0].effective &= ~(1u << CAP_SYS_PTRACE);
    d[0].permitted &= ~(1u << CAP_SYS_PTRACE);
    return (int)syscall(SYS_capset, &h, d);
}

/* Another user's process, and qprof without CAP_SYS_PTRACE: refused in one line that says so,
 * before the kernel's bare EPERM (root only: a child becomes nobody, another drops the
 * capability). */
static void test_another_user(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "note: another user's process is checked only as root\n");
        return;
    }
    int hold[2], ready[2];
    REQUIRE(pipe(hold) == 0 && pipe(ready) == 0);
    pid_t other = fork();
    if (other == 0) {
        close(hold[1]);
        close(ready[0]);
        char c;
        if (setgid(65534) != 0 || setuid(65534) != 0 || write(ready[1], "u", 1) != 1)
            _exit(1);
        (void)!read(hold[0], &c, 1);
        _exit(0);
    }
    close(hold[0]);
    close(ready[1]);
    char c;
    REQUIRE(read(ready[0], &c, 1) == 1); /* it is nobody's from here on */
    close(ready[0]);
    pid_t checker = fork();
    if (checker == 0) {
        struct qp_error err = {0};
        if (drop_ptrace() != 0)
            _exit(2);
        int rc = target_pmem_may_read(other, &err);
        _exit(rc == -EPERM && strstr(err.msg, "is another user's") &&
                      strstr(err.msg, "CAP_SYS_PTRACE")
                  ? 0
                  : 3);
    }
    int status = 0;
    waitpid(checker, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "another user's process was not refused in one line naming why (child status %d)",
              status);
    close(hold[1]);
    waitpid(other, NULL, 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_mtree_x86_64_above_4g();
    test_mtree_riscv64();
    test_search_and_remap();
    test_witnessed();
    test_peer();
    test_another_user();
    return harness_result();
}
