/* Unit tests of the profiler's pieces that need no QEMU: options, names, aggregation, the
 * folded file, the paused-time histogram, the OS adapters over a fake target. */
#define _GNU_SOURCE
#include "harness.h"
#include "cli.h"
#include "qprof_ring.h"

#include <glib.h>
#include <math.h>
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int parse(struct prof_options *o, const char *const *args)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "qprof";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    prof_options_init(o);
    /* usage errors print to stderr; keep the test log readable */
    return prof_parse_args(argc, argv, o);
}

static void test_defaults_and_values(void)
{
    struct prof_options o;
    /* --kernel and --user-dir name paths that exist (checked while parsing): make them. */
    char dir[] = "/tmp/qprof-units-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char *cwd = g_get_current_dir();
    REQUIRE(chdir(dir) == 0);
    REQUIRE(g_file_set_contents("k.elf", "", 0, NULL));
    REQUIRE(mkdir("a", 0700) == 0 && mkdir("b", 0700) == 0);
    CHECK_INT(parse(&o, (const char *[]){NULL}), -1);
    CHECK_STR(o.qmp_socket, "./qmp-socket");
    CHECK(o.interval_ms == 10);
    CHECK(o.duration_s == 5);
    CHECK_INT(o.max_depth, 128);
    CHECK(o.output == NULL);

    CHECK_INT(parse(&o, (const char *[]){"--qmp-socket", "tcp:127.0.0.1:4444",
                                         "-o",           "x.folded",
                                         "--interval",   "2.5",
                                         "--duration",   "0",
                                         "--kernel",     "k.elf",
                                         "--user-dir",   "a",
                                         "--user-dir",   "b",
                                         "--max-depth",  "64",
                                         "--cpus",       "0,2-3",
                                         "--user-only",  NULL}),
              -1);
    CHECK_STR(o.qmp_socket, "tcp:127.0.0.1:4444");
    CHECK_STR(o.output, "x.folded");
    CHECK(o.interval_ms == 2.5);
    CHECK(o.duration_s == 0);
    CHECK_INT(o.n_user_dirs, 2);
    CHECK_STR(o.user_dirs[1], "b");
    CHECK_INT(o.max_depth, 64);
    CHECK_U64(o.cpu_mask, 0xd);
    CHECK_INT(o.mode_filter, PROF_USER_ONLY);
    CHECK_INT(parse(&o, (const char *[]){"--kernel", "a", NULL}), 2);
    CHECK_INT(parse(&o, (const char *[]){"--user-dir", "k.elf", NULL}), 2);
    CHECK_INT(parse(&o, (const char *[]){"--user-dir", "missing", NULL}), 2);
    unlink("k.elf");
    rmdir("a");
    rmdir("b");
    REQUIRE(chdir(cwd) == 0);
    rmdir(dir);
    g_free(cwd);
}

/* --user-regs is checked while parsing, kept as given for setup to resolve. */
static void test_user_regs_option(void)
{
    struct prof_options o;
    CHECK(parse(&o, (const char *[]){NULL}) == -1 && o.user_regs == NULL);
    const char *arg = "cpus[$cpu].proc->trapframe:pc=epc,sp=sp,fp=s0,ra=ra";
    CHECK_INT(parse(&o, (const char *[]){"--user-regs", arg, NULL}), -1);
    CHECK_STR(o.user_regs, arg);
}

static void test_gdb_option(void)
{
    struct prof_options o;
    CHECK_INT(parse(&o, (const char *[]){"-o", "x.folded", NULL}), -1);
    CHECK(o.gdb_address == NULL);
    CHECK_INT(parse(&o, (const char *[]){"--gdb", "unix:/tmp/g.sock", "-o", "x.folded", NULL}), -1);
    CHECK_STR(o.gdb_address, "unix:/tmp/g.sock");
    CHECK_INT(parse(&o, (const char *[]){"--gdb", "tcp:localhost:1234", "-o", "x.folded", NULL}),
              -1);
    CHECK_STR(o.gdb_address, "tcp:localhost:1234");
    CHECK_INT(parse(&o, (const char *[]){"--gdb", "/tmp/g.sock", NULL}), PROF_EXIT_USAGE);
    CHECK_INT(parse(&o, (const char *[]){"--gdb", "tcp:", NULL}), PROF_EXIT_USAGE);
    CHECK_INT(parse(&o, (const char *[]){"--gdb", NULL}), PROF_EXIT_USAGE);
}

static void test_usage_errors(void)
{
    struct prof_options o;
    const char *const *bad[] = {
        (const char *[]){"--interval", "0", NULL},
        (const char *[]){"--interval", "abc", NULL},
        /* below the plugin's floors (qprof_ring.h: QPR_MIN_INTERVAL_NS, QPR_MIN_PERIOD_INSNS) */
        (const char *[]){"--interval", "0.09", NULL},
        (const char *[]){"--plugin", "unix:p", "--period-insns", "99", NULL},
        (const char *[]){"--duration", "-1", NULL},
        (const char *[]){"--max-depth", "0", NULL},
        (const char *[]){"--cpus", "1-0", NULL},
        (const char *[]){"--cpus", "x", NULL},
        (const char *[]){"--memory", "fast", NULL},
        (const char *[]){"--no-such-flag", NULL},
        (const char *[]){"--kernel-only", "--user-only", NULL},
        (const char *[]){"--show-addresses", NULL},
        (const char *[]){"--interval", NULL},
        (const char *[]){"stray", NULL},
        /* --user-regs: no expression, an unknown role, a field that is no name */
        (const char *[]){"--user-regs", ":pc=epc", NULL},
        (const char *[]){"--user-regs", "cpus[$cpu].proc->trapframe:lr=ra", NULL},
        (const char *[]){"--user-regs", "cpus[$cpu].proc->trapframe:pc=", NULL},
        (const char *[]){"--user-regs", "cpus[$cpu]..proc", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(parse(&o, bad[i]) == PROF_EXIT_USAGE, "case %zu (%s) not a usage error", i,
                  bad[i][0]);
}

/* qprof's floors and ceilings are the plugin's: what qprof lets through, the plugin keeps. */
static void test_rate_floors(void)
{
    struct prof_options o;
    char interval[32], period[32];
    snprintf(interval, sizeof interval, "%g", QPR_MIN_INTERVAL_NS / 1e6);
    snprintf(period, sizeof period, "%" PRIu64, QPR_MIN_PERIOD_INSNS);
    CHECK_INT(parse(&o, (const char *[]){"--plugin", "unix:p", "--interval", interval, NULL}), -1);
    CHECK(o.interval_ms * 1e6 >= (double)QPR_MIN_INTERVAL_NS);
    CHECK_INT(parse(&o, (const char *[]){"--plugin", "unix:p", "--period-insns", period, NULL}),
              -1);
    CHECK_U64(o.period_insns, QPR_MIN_PERIOD_INSNS);
    /* and the ceilings: the largest qprof takes, the plugin keeps; one more is refused */
    snprintf(interval, sizeof interval, "%g", QPR_MAX_INTERVAL_NS / 1e6);
    snprintf(period, sizeof period, "%" PRIu64, QPR_MAX_PERIOD_INSNS);
    CHECK_INT(parse(&o, (const char *[]){"--plugin", "unix:p", "--interval", interval, NULL}), -1);
    CHECK(o.interval_ms * 1e6 <= (double)QPR_MAX_INTERVAL_NS);
    CHECK_INT(parse(&o, (const char *[]){"--plugin", "unix:p", "--period-insns", period, NULL}),
              -1);
    snprintf(interval, sizeof interval, "%g", QPR_MAX_INTERVAL_NS / 1e6 + 1);
    snprintf(period, sizeof period, "%" PRIu64, QPR_MAX_PERIOD_INSNS + 1);
    CHECK_INT(parse(&o, (const char *[]){"--plugin", "unix:p", "--interval", interval, NULL}),
              PROF_EXIT_USAGE);
    CHECK_INT(parse(&o, (const char *[]){"--plugin", "unix:p", "--period-insns", period, NULL}),
              PROF_EXIT_USAGE);
}

static void test_cpu_list(void)
{
    uint64_t m = 0;
    CHECK_INT(prof_parse_cpu_list("0", &m, NULL), 0);
    CHECK_U64(m, 1);
    CHECK_INT(prof_parse_cpu_list("1,3-5,63", &m, NULL), 0);
    CHECK_U64(m, 0x3aULL | (1ULL << 63));
    CHECK(prof_parse_cpu_list("64", &m, NULL) < 0);
    CHECK(prof_parse_cpu_list("", &m, NULL) < 0);
    CHECK(prof_parse_cpu_list("2-", &m, NULL) < 0);
}

static void test_sanitize(void)
{
    char out[32];
    prof_sanitize_name("a;b\nc\td", out, sizeof out);
    CHECK_STR(out, "a_b_c_d");
    prof_sanitize_name("operator<<(int, long)", out, sizeof out);
    CHECK_STR(out, "operator<<(int, long)");
    CHECK_INT(prof_sanitize_name("abcdefgh", out, 4), 3);
    CHECK_STR(out, "abc");
}

static void test_agg_roundtrip(void)
{
    prof_agg *a = prof_agg_new();
    prof_agg_add(a, "spin (3);_start;main;compute;hot_b", 1);
    prof_agg_add(a, "spin (3);_start;main;compute;hot_a", 2);
    prof_agg_add(a, "spin (3);_start;main;compute;hot_a", 1);
    prof_agg_add(a, "idle", 4);
    CHECK_U64(prof_agg_total(a), 8);
    CHECK_INT(prof_agg_unique(a), 3);
    CHECK_U64(prof_agg_count(a, "spin (3);_start;main;compute;hot_a"), 3);

    char path[] = "/tmp/qprof-agg-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    CHECK_INT(prof_agg_write(a, f, NULL), 0);
    fclose(f);
    f = fopen(path, "r");
    REQUIRE(f);
    char text[512] = {0};
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    /* sorted by stack text, integer counts */
    CHECK_STR(text, "idle 4\n"
                    "spin (3);_start;main;compute;hot_a 3\n"
                    "spin (3);_start;main;compute;hot_b 1\n");
    prof_agg *b = prof_agg_new();
    CHECK_INT(prof_agg_read_file(b, path, NULL), 0);
    CHECK_U64(prof_agg_total(b), 8);
    CHECK_U64(prof_agg_count(b, "idle"), 4);
    unlink(path);
    prof_agg_free(a);
    prof_agg_free(b);
}

static void test_report(void)
{
    prof_agg *a = prof_agg_new();
    prof_agg_add(a, "p (1);main;f;g", 6);
    prof_agg_add(a, "p (1);main;f", 2);
    prof_agg_add(a, "idle", 2);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    prof_agg_print_report(a, f, 5);
    fclose(f);
    /* g: self 60%, total 60%; f: self 20%, total 80%; main: total 80% */
    CHECK_MSG(strstr(buf, "  60.0%  60.0%  g\n") != NULL, "report:\n%s", buf);
    CHECK_MSG(strstr(buf, "  20.0%  80.0%  f\n") != NULL, "report:\n%s", buf);
    CHECK_MSG(strstr(buf, "   0.0%  80.0%  main\n") != NULL, "report:\n%s", buf);
    CHECK_MSG(strstr(buf, "  80.0%        8  p (1)\n") != NULL, "report:\n%s", buf);
    free(buf);
    prof_agg_free(a);
}

static void test_hist(void)
{
    static struct prof_hist h;
    CHECK_U64(prof_hist_percentile(&h, 50), 0);
    for (int i = 1; i <= 100; i++)
        prof_hist_add(&h, (uint64_t)i * 10000); /* 10 us .. 1 ms */
    uint64_t p50 = prof_hist_percentile(&h, 50), p99 = prof_hist_percentile(&h, 99);
    CHECK_MSG(p50 >= 499000 && p50 <= 501000, "p50 %lu", (unsigned long)p50);
    CHECK_MSG(p99 >= 989000 && p99 <= 991000, "p99 %lu", (unsigned long)p99);
    prof_hist_add(&h, 50000000); /* 50 ms: the log buckets keep 1% precision */
    uint64_t max = prof_hist_percentile(&h, 100);
    CHECK_MSG(max <= 50000000 && max >= 49000000, "max %lu", (unsigned long)max);
}

/* Deadlines stay within +-50% of the interval while on time; once behind, the next sample is
 * still a random time away, never at once and never a burst to catch up. */
static void test_next_deadline(void)
{
    CHECK(prof_next_deadline(10.0, 10.2, 1.0, 0.0, 0.5) == 10.5);
    CHECK(prof_next_deadline(10.0, 10.2, 1.0, 1.0, 0.5) == 11.5);
    double behind_lo = prof_next_deadline(10.0, 12.0, 1.0, 0.5, 0.0);
    double behind_hi = prof_next_deadline(10.0, 12.0, 1.0, 0.5, 1.0);
    CHECK_MSG(behind_lo == 12.0 && behind_hi == 12.5, "behind: %f %f", behind_lo, behind_hi);
    double mid = prof_next_deadline(10.0, 12.0, 1.0, 0.5, 0.3);
    CHECK_MSG(mid > 12.0 && mid < 12.5, "behind, random gap: %f", mid);
}

/* --samples alone has no time limit (the default 5 s would cut a fixed count short); with
 * --duration, whichever comes first. */
static void test_samples_option(void)
{
    struct prof_options o;
    CHECK_INT(parse(&o, (const char *[]){"--samples", "4000", NULL}), -1);
    CHECK_U64(o.max_samples, 4000);
    CHECK(o.duration_s == 0);
    CHECK_INT(parse(&o, (const char *[]){"--duration", "3", "--samples", "50", NULL}), -1);
    CHECK_U64(o.max_samples, 50);
    CHECK(o.duration_s == 3);
    CHECK_INT(parse(&o, (const char *[]){"--samples", "0", NULL}), PROF_EXIT_USAGE);
    CHECK_INT(parse(&o, (const char *[]){"--samples", "-3", NULL}), PROF_EXIT_USAGE);
    CHECK_INT(parse(&o, (const char *[]){"--progress", NULL}), -1);
    CHECK(o.progress);
    CHECK(o.os == PROF_OS_AUTO);
    CHECK_INT(parse(&o, (const char *[]){"--os", "none", NULL}), -1);
    CHECK(o.os == PROF_OS_NONE);
    CHECK_INT(parse(&o, (const char *[]){"--os", "qprof-abi", NULL}), -1);
    CHECK(o.os == PROF_OS_QPROF_ABI);
    CHECK_INT(parse(&o, (const char *[]){"--os", "linux", NULL}), -1);
    CHECK(o.os == PROF_OS_LINUX);
    CHECK_INT(parse(&o, (const char *[]){"--os", "windows", NULL}), PROF_EXIT_USAGE);
    CHECK_INT(parse(&o, (const char *[]){"--vmcoreinfo", "vmci.txt", NULL}), -1);
    CHECK_STR(o.vmcoreinfo, "vmci.txt");
}

/* A well-formed ABI as the demo kernel lays it out, with cpu_count slots of `stride` bytes. */
static size_t make_abi(uint8_t *buf, size_t cap, uint32_t count, uint32_t stride)
{
    memset(buf, 0, cap);
    struct qprof_abi h = {.magic = QPROF_ABI_MAGIC,
                          .version = QPROF_ABI_VERSION,
                          .size = (uint32_t)(48 + count * stride),
                          .cpu_count = count,
                          .cpu_slot_size = stride};
    if (h.size < sizeof(struct qprof_abi))
        h.size = sizeof(struct qprof_abi);
    memcpy(buf, &h, 48);
    for (uint32_t i = 0; i < count; i++) {
        struct qprof_abi_cpu slot = {.state = QPROF_CPU_USER, .pid = 100 + i};
        memcpy(slot.name, "0123456789abcdef", 16); /* no terminator */
        memcpy(buf + 48 + (size_t)i * stride, &slot, sizeof slot);
    }
    return 48 + (size_t)count * stride;
}

static void test_abi_checks(void)
{
    static uint8_t buf[PROF_ABI_MAX_BYTES];
    struct qprof_abi h;
    struct qprof_abi_cpu slot;
    size_t need = 0;
    struct qp_error err = {0};

    size_t len = make_abi(buf, sizeof buf, 2, sizeof(struct qprof_abi_cpu));
    CHECK_INT(prof_abi_check(buf, sizeof(struct qprof_abi), &h, &need, &err), 0);
    CHECK_INT(prof_abi_slot(buf, sizeof(struct qprof_abi), &h, 1, &slot), 0);
    CHECK_INT(slot.pid, 101);
    CHECK_STR(slot.name, "0123456789abcde"); /* the guest forgot the NUL: cut, not overrun */
    CHECK_INT(prof_abi_slot(buf, len, &h, 2, &slot), -ENOENT);

    /* a newer guest with bigger slots: its stride, not ours, and more bytes to copy */
    len = make_abi(buf, sizeof buf, 3, sizeof(struct qprof_abi_cpu) + 64);
    CHECK_INT(prof_abi_check(buf, sizeof(struct qprof_abi), &h, &need, &err), 0);
    CHECK_INT(prof_abi_check(buf, 200, &h, &need, &err), -ENODATA);
    CHECK_U64(need, len);
    CHECK_INT(prof_abi_slot(buf, len, &h, 2, &slot), 0);
    CHECK_INT(slot.pid, 102);

    /* a first-revision guest (112-byte slots, no regs_arch): read, the new fields as 0 */
    len = make_abi(buf, sizeof buf, 2, QPROF_ABI_CPU_V1_SIZE);
    ((struct qprof_abi *)buf)->size = QPROF_ABI_V1_SIZE;
    CHECK_INT(prof_abi_check(buf, QPROF_ABI_V1_SIZE, &h, &need, &err), 0);
    CHECK_INT(prof_abi_slot(buf, QPROF_ABI_V1_SIZE, &h, 1, &slot), 0);
    CHECK_INT(slot.pid, 101);
    CHECK_INT(slot.regs_arch, 0);
    CHECK_U64(prof_abi_frame_size(slot.regs_arch, EM_X86_64), sizeof(struct qprof_abi_regs));
    CHECK_U64(prof_abi_frame_size(slot.regs_arch, EM_RISCV), 0); /* not riscv64's frame */
    make_abi(buf, sizeof buf, 1, QPROF_ABI_CPU_V1_SIZE - 8);     /* shorter than the first */
    CHECK_INT(prof_abi_check(buf, sizeof(struct qprof_abi), &h, &need, &err), -EPROTO);

    /* hostile or broken headers are refused with a reason */
    make_abi(buf, sizeof buf, 1, sizeof(struct qprof_abi_cpu));
    ((struct qprof_abi *)buf)->size = 16;
    CHECK_INT(prof_abi_check(buf, sizeof(struct qprof_abi), &h, &need, &err), -EPROTO);
    CHECK(strstr(err.msg, "size 16") != NULL);
    make_abi(buf, sizeof buf, 1, sizeof(struct qprof_abi_cpu));
    ((struct qprof_abi *)buf)->cpu_count = 0xffffffff;
    CHECK_INT(prof_abi_check(buf, sizeof(struct qprof_abi), &h, &need, &err), -EPROTO);
    CHECK(strstr(err.msg, "cpu_count") != NULL);
    make_abi(buf, sizeof buf, 1, sizeof(struct qprof_abi_cpu));
    ((struct qprof_abi *)buf)->cpu_slot_size = 0x7fffffff;
    CHECK_INT(prof_abi_check(buf, sizeof(struct qprof_abi), &h, &need, &err), -EPROTO);
    make_abi(buf, sizeof buf, 1, sizeof(struct qprof_abi_cpu));
    ((struct qprof_abi *)buf)->cpu_slot_size = 8; /* smaller than the fields we read */
    CHECK_INT(prof_abi_check(buf, sizeof(struct qprof_abi), &h, &need, &err), -EPROTO);
    make_abi(buf, sizeof buf, 1, sizeof(struct qprof_abi_cpu));
    ((struct qprof_abi *)buf)->version = 2;
    CHECK_INT(prof_abi_check(buf, sizeof(struct qprof_abi), &h, &need, &err), -EPROTO);
    ((struct qprof_abi *)buf)->magic = 0;
    CHECK_INT(prof_abi_check(buf, sizeof(struct qprof_abi), &h, &need, &err), -EAGAIN);
    CHECK_INT(prof_abi_check(buf, 10, &h, &need, &err), -EPROTO);
}

/* The user frames a slot's regs_arch names: riscv64's x1..x31 go to DWARF slots 1..31, the pc
 * to slot 32 (aarch64's likewise, with x0 and sp); a frame of the wrong size or architecture, or
 * one not from user mode, is refused. */
static void test_abi_frames(void)
{
    struct qprof_abi_regs_riscv64 rv = {.pc = 0x400120,
                                        .ra = 0x400200,
                                        .sp = 0x3fffffef00,
                                        .s0 = 0x3fffffef40,
                                        .a7 = 3,
                                        .t6 = 0x66};
    struct unw_regs u;
    const uint64_t user_end = UINT64_C(0x0100000000000000);
    CHECK_INT(prof_abi_frame_regs(&rv, sizeof rv, QPROF_ABI_ARCH_RISCV64, EM_RISCV, user_end, &u),
              0);
    CHECK_U64(u.r[0], 0);
    CHECK_U64(u.r[1], 0x400200);
    CHECK_U64(u.r[2], 0x3fffffef00);
    CHECK_U64(u.r[8], 0x3fffffef40);
    CHECK_U64(u.r[17], 3);
    CHECK_U64(u.r[31], 0x66);
    CHECK_U64(u.r[32], 0x400120);
    CHECK_INT(prof_abi_frame_regs(&rv, sizeof rv, QPROF_ABI_ARCH_X86_64, EM_RISCV, user_end, &u),
              -EPROTO);
    CHECK_INT(
        prof_abi_frame_regs(&rv, sizeof rv - 8, QPROF_ABI_ARCH_RISCV64, EM_RISCV, user_end, &u),
        -EPROTO);
    CHECK_INT(prof_abi_frame_regs(&rv, sizeof rv, QPROF_ABI_ARCH_RISCV64, EM_X86_64, user_end, &u),
              -EPROTO);
    rv.pc = UINT64_C(0xffffffff80001000); /* a frame from kernel mode */
    CHECK_INT(prof_abi_frame_regs(&rv, sizeof rv, QPROF_ABI_ARCH_RISCV64, EM_RISCV, user_end, &u),
              -EFAULT);
    /* aarch64's x0..x30 and sp go to DWARF slots 0..31, the pc to slot 32 */
    struct qprof_abi_regs_aarch64 a64 = {.sp = 0x7ffffffe00, .pc = 0x400140, .esr = 0x56000000};
    a64.x[0] = 7, a64.x[8] = 3, a64.x[29] = 0x7ffffffe40, a64.x[30] = 0x400210;
    CHECK_INT(
        prof_abi_frame_regs(&a64, sizeof a64, QPROF_ABI_ARCH_AARCH64, EM_AARCH64, user_end, &u), 0);
    CHECK_U64(u.r[0], 7);
    CHECK_U64(u.r[8], 3);
    CHECK_U64(u.r[29], 0x7ffffffe40);
    CHECK_U64(u.r[30], 0x400210);
    CHECK_U64(u.r[31], 0x7ffffffe00);
    CHECK_U64(u.r[32], 0x400140);
    CHECK_INT(
        prof_abi_frame_regs(&a64, sizeof a64, QPROF_ABI_ARCH_RISCV64, EM_AARCH64, user_end, &u),
        -EPROTO); /* riscv64's frame on an aarch64 guest */
    CHECK_INT(prof_abi_frame_regs(&a64, sizeof a64, QPROF_ABI_ARCH_AARCH64, EM_RISCV, user_end, &u),
              -EPROTO);
    a64.pc = UINT64_C(0xffffffff80201000); /* a frame from EL1 */
    CHECK_INT(
        prof_abi_frame_regs(&a64, sizeof a64, QPROF_ABI_ARCH_AARCH64, EM_AARCH64, user_end, &u),
        -EFAULT);
    struct qprof_abi_regs x = {.rip = 0x401000, .rsp = 0x7ffffff000, .rbp = 0x7fffffeff0};
    CHECK_INT(prof_abi_frame_regs(&x, sizeof x, QPROF_ABI_ARCH_UNSET, EM_X86_64, user_end, &u), 0);
    CHECK_U64(u.r[UNW_RIP], 0x401000);
    CHECK_U64(u.r[UNW_RSP], 0x7ffffff000);
    CHECK_U64(u.r[UNW_RBP], 0x7fffffeff0);
}

/* Several -o; a .data name is the record file in any run; `qprof record` takes one -o. */
static void test_outputs_and_record(void)
{
    struct prof_options o;
    CHECK_INT(parse(&o, (const char *[]){"-o", "a.folded", "-o", "b.svg", "-o", "r.data", NULL}),
              -1);
    CHECK_INT(o.n_outputs, 2);
    CHECK_STR(o.outputs[1], "b.svg");
    CHECK_STR(o.record, "r.data");
    CHECK_INT(parse(&o, (const char *[]){"-o", "r.data", NULL}), -1);
    CHECK_INT(prof_options_for_record(&o), 0);
    CHECK_STR(o.record, "r.data");
    CHECK_INT(parse(&o, (const char *[]){"-o", "trace.bin", NULL}), -1);
    CHECK_INT(prof_options_for_record(&o), 0);
    CHECK_STR(o.record, "trace.bin");
    CHECK_INT(o.n_outputs, 0);
    CHECK_INT(parse(&o, (const char *[]){"-o", "a.folded", "-o", "b.folded", NULL}), -1);
    CHECK_INT(prof_options_for_record(&o), -1);
    CHECK_INT(parse(&o, (const char *[]){"-o", "a.data", "-o", "b.data", NULL}), PROF_EXIT_USAGE);
    CHECK_INT(parse(&o, (const char *[]){"--format", "svg", "-o", "x", NULL}), -1);
    CHECK_STR(o.format, "svg");
    CHECK_INT(parse(&o, (const char *[]){"--format", "record", NULL}), PROF_EXIT_USAGE);
}

/* ---- The seams: a fake target serving a buffer, and the two OS adapters --------------------- */

/* Guest memory: one window of bytes at `base`; reads outside it fail like an unmapped page. */
struct fake_guest {
    uint64_t base;
    const uint8_t *bytes;
    size_t len;
    unsigned reads;
};

static int fake_open(const struct prof_target_open_opts *o, void **impl, struct qp_error *err)
{
    (void)err;
    *impl = (void *)o->address; /* the test passes its struct fake_guest here */
    return 0;
}

static int fake_read(void *impl, const struct prof_vcpu *cpu, struct prof_mem_req *reqs, size_t n,
                     struct qp_error *err)
{
    (void)cpu, (void)err;
    struct fake_guest *g = impl;
    for (size_t i = 0; i < n; i++) {
        struct prof_mem_req *r = &reqs[i];
        g->reads++;
        r->got = 0;
        r->rc = -EFAULT;
        if (r->vaddr < g->base || r->vaddr - g->base >= g->len)
            continue;
        size_t off = r->vaddr - g->base, avail = g->len - off;
        r->got = r->len < avail ? r->len : avail;
        memcpy(r->buf, g->bytes + off, r->got);
        r->rc = 0;
    }
    return 0;
}

static void fake_free(void *impl)
{
    (void)impl;
}

static const struct prof_target_ops fake_target_ops = {
    .name = "fake",
    .arch = &prof_arch_x86_64,
    .open = fake_open,
    .read = fake_read,
    .free = fake_free,
};

/* The adapter's reader, as the session's but without a budget. */
static int read_through_target(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                               size_t len, size_t *got)
{
    struct prof_mem_req req = {.vaddr = addr, .len = len, .buf = buf};
    int rc = prof_target_read(ctx, cpu, &req, 1, NULL);
    *got = req.got;
    return rc ? rc : req.rc;
}

static void test_os_none(void)
{
    prof_os *os = NULL;
    struct prof_os_config cfg = {0};
    struct prof_os_mem mem = {0};
    struct prof_os_refresh r;
    struct prof_task t;
    struct prof_vcpu cpus[3] = {{.user = true, .privilege = 3, .paging64 = true},
                                {.privilege = 0, .paging64 = true},
                                {.halted = true, .paging64 = true}};
    CHECK_INT(prof_os_open(&prof_os_none_ops, &cfg, &os, NULL), 0);
    CHECK_STR(prof_os_name(os), "none");
    prof_os_refresh(os, cpus, 3, &mem, &r);
    CHECK(!r.published && !r.rejected && !r.reset);
    prof_os_task(os, &cpus[0], 0, &t);
    CHECK(!t.known && t.state == PROF_TASK_USER && !t.has_image && t.pid == 0);
    prof_os_task(os, &cpus[1], 1, &t);
    CHECK(!t.known && t.state == PROF_TASK_KERNEL);
    CHECK_INT((int)prof_os_kernel_stack_len(os, &cpus[1], &t, 4096), 4096);
    prof_os_task(os, &cpus[2], 2, &t);
    CHECK(!t.known && t.state == PROF_TASK_IDLE);
    prof_os_free(os);
}

/* --current expressions: what parses into which steps, and what is refused with a reason. */
static void test_current_parse(void)
{
    struct prof_current_path p;
    struct qp_error err = {0};
    CHECK_INT(prof_current_parse("cpus[$cpu].proc", &p, &err), 0);
    CHECK_STR(p.var, "cpus");
    CHECK_INT(p.n, 2);
    CHECK(p.step[0].kind == PROF_STEP_INDEX_CPU);
    CHECK(p.step[1].kind == PROF_STEP_FIELD);
    CHECK_STR(p.step[1].name, "proc");
    CHECK_INT(prof_current_parse(" percpu [ 0x10 ] -> running . task ", &p, &err), 0);
    CHECK_STR(p.var, "percpu");
    CHECK_INT(p.n, 3);
    CHECK(p.step[0].kind == PROF_STEP_INDEX);
    CHECK_U64(p.step[0].index, 16);
    CHECK(p.step[1].kind == PROF_STEP_ARROW);
    CHECK_STR(p.step[1].name, "running");
    CHECK_STR(p.step[2].name, "task");
    CHECK_INT(prof_current_parse("current", &p, &err), 0);
    CHECK_INT(p.n, 0);
    const char *bad[] = {
        "",        "1cpus",    "cpus[", "cpus[$cpux]",       "cpus[-1]", "cpus.", "cpus->",
        "cpus..a", "cpus[1]x", "a b",   "cpus[99999999999]", "*current", NULL};
    for (const char **b = bad; *b; b++) {
        struct qp_error e = {0};
        CHECK_MSG(prof_current_parse(*b, &p, &e) == -EINVAL, "'%s' parsed", *b);
        CHECK_MSG(e.msg[0] && !strchr(e.msg, '\n'), "'%s': no one-line reason: %s", *b, e.msg);
    }
    char longname[100];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_INT(prof_current_parse(longname, &p, &err), -EINVAL);
    GString *deep = g_string_new("a");
    for (int i = 0; i <= PROF_CURRENT_MAX_STEPS; i++)
        g_string_append(deep, ".b");
    CHECK_INT(prof_current_parse(deep->str, &p, &err), -EINVAL);
    g_string_free(deep, TRUE);
    /* No kernel, no DWARF: refused before anything else, with the reason. */
    prof_os_current *c = NULL;
    struct qp_error e = {0};
    CHECK_INT(prof_os_current_open(NULL, "cpus[$cpu].proc", NULL, &c, &e), -EINVAL);
    CHECK(strstr(e.msg, "--kernel") != NULL);
}

/* The qprof_abi adapter over a fake target serving g, whose table is at g->base. */
static prof_os *abi_over_fake(struct fake_guest *g, prof_target **target)
{
    struct prof_target_open_opts to = {.address = (const char *)g};
    CHECK_INT(prof_target_open(&fake_target_ops, &to, target, NULL), 0);
    prof_os *os = NULL;
    struct prof_os_config cfg = {.abi_addr = g->base,
                                 .split = *prof_target_split(*target),
                                 .arch = prof_target_arch(*target)};
    CHECK_INT(prof_os_open(&prof_os_qprof_abi_ops, &cfg, &os, NULL), 0);
    return os;
}

static void test_os_qprof_abi(void)
{
    static uint8_t guest[PROF_ABI_MAX_BYTES + 4096];
    const uint64_t abi_at = UINT64_C(0xffff800000100000), regs_at = abi_at + PROF_ABI_MAX_BYTES;
    size_t len = make_abi(guest, PROF_ABI_MAX_BYTES, 3, sizeof(struct qprof_abi_cpu));
    struct qprof_abi *h = (struct qprof_abi *)guest;
    h->boot_id = 7;
    h->kernel_text_addr = UINT64_C(0xffff800000000000);
    struct qprof_abi_cpu *slot = (struct qprof_abi_cpu *)(guest + 48);
    /* 0: a process whose CR3 (flags and PCID bits aside) is the vCPU's, inside a system call */
    slot[0].cr3 = 0x5000 | 0x18 | 0x3;
    slot[0].text_addr = 0x401000, slot[0].text_size = 0x2000, slot[0].generation = 2;
    slot[0].kstack_lo = 0xffff800000200000, slot[0].kstack_hi = 0xffff800000204000;
    slot[0].user_regs = regs_at;
    /* 1: published for the next process, but the vCPU still runs on the old page tables */
    slot[1].cr3 = 0x9000;
    /* 2: the kernel is rewriting it */
    slot[2].seq = 3;
    struct qprof_abi_regs frame = {.rip = 0x401234, .rsp = 0x7ffffff000, .rbp = 0x7ffffff100};
    memcpy(guest + PROF_ABI_MAX_BYTES, &frame, sizeof frame);
    (void)len;

    struct fake_guest g = {.base = abi_at, .bytes = guest, .len = sizeof guest};
    prof_target *target = NULL;
    prof_os *os = abi_over_fake(&g, &target);
    struct prof_os_mem mem = {.read = read_through_target, .ctx = target};
    struct prof_vcpu cpus[5] = {
        {.index = 0, .paging64 = true, .as_root = 0x5000, .sp = 0xffff800000203f00},
        {.index = 1, .paging64 = true, .as_root = 0x5000},
        {.index = 2, .paging64 = true, .as_root = 0x5000},
        /* QEMU's vCPU 3 whose APIC ID is 0: the guest's slot 0 is its */
        {.index = 3,
         .apic_known = true,
         .apic_id = 0,
         .paging64 = true,
         .as_root = 0x5000,
         .sp = 0xffff800000203000},
        /* slot 0 in kernel mode on another kernel stack: a switch between publishing the next
         * process and moving to its stack */
        {.index = 4,
         .apic_known = true,
         .apic_id = 0,
         .paging64 = true,
         .as_root = 0x5000,
         .sp = 0xffff800000303f00}};
    struct prof_os_refresh r;
    prof_os_refresh(os, cpus, 3, &mem, &r);
    CHECK(r.published && !r.rejected && !r.reset);
    CHECK_INT(g.reads, 1); /* the whole ABI in one read */
    CHECK(r.kernel_text_addr == UINT64_C(0xffff800000000000));

    struct prof_task t;
    prof_os_task(os, &cpus[0], 0, &t);
    CHECK(t.known && t.state == PROF_TASK_USER && t.has_image);
    CHECK_INT((int)t.pid, 100);
    CHECK_STR(t.comm, "0123456789abcde");
    CHECK(t.image.text_addr == 0x401000 && t.image.text_size == 0x2000);
    CHECK(t.image.generation == 2);
    CHECK_INT((int)prof_os_kernel_stack_len(os, &cpus[0], &t, 16384), 0x100);
    struct unw_regs u;
    CHECK_INT(prof_os_user_regs(os, &cpus[0], &t, &mem, &u), 0);
    CHECK(u.r[UNW_RIP] == 0x401234 && u.r[UNW_RSP] == 0x7ffffff000 && u.r[UNW_RBP] == 0x7ffffff100);
    prof_os_task(os, &cpus[1], 1, &t);
    CHECK(!t.known); /* CR3 and slot disagree */
    prof_os_task(os, &cpus[2], 2, &t);
    CHECK(!t.known);                   /* odd seq */
    prof_os_task(os, &cpus[3], 3, &t); /* slots go by APIC ID, not by position */
    CHECK(t.known && t.pid == 100);
    prof_os_task(os, &cpus[4], 4, &t);
    CHECK(!t.known);     /* the slot is not this stack's */
    cpus[4].user = true; /* in user mode the kernel stack says nothing */
    prof_os_task(os, &cpus[4], 4, &t);
    CHECK(t.known && t.pid == 100);

    /* a new boot_id is a reset; a broken header is a rejection with its reason */
    h->boot_id = 8;
    prof_os_refresh(os, cpus, 3, &mem, &r);
    CHECK(r.published && r.reset);
    h->version = 99;
    prof_os_refresh(os, cpus, 3, &mem, &r);
    CHECK(!r.published && r.rejected && strstr(r.reject_reason, "version 99"));
    prof_os_task(os, &cpus[0], 0, &t);
    CHECK(!t.known);
    prof_os_free(os);
    prof_target_free(target);
}

/* A capturing target whose vCPU could not read the kernel's table at the instant (riscv64's U
 * mode reading through its own privilege): a later copy names a user-mode sample only when the
 * slot names a process in the very address space the sample was taken in. */
static int read_fails(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf, size_t len,
                      size_t *got)
{
    (void)ctx, (void)cpu, (void)addr, (void)buf, (void)len;
    *got = 0;
    return -EFAULT;
}

static void test_os_qprof_abi_late(void)
{
    static uint8_t guest[PROF_ABI_MAX_BYTES];
    const uint64_t abi_at = UINT64_C(0xffff800000100000);
    make_abi(guest, sizeof guest, 2, sizeof(struct qprof_abi_cpu));
    struct qprof_abi_cpu *slot = (struct qprof_abi_cpu *)(guest + 48);
    slot[0].cr3 = 0x5000;
    slot[1].cr3 = 0x7000;
    slot[1].state = QPROF_CPU_KERNEL;
    struct fake_guest g = {.base = abi_at, .bytes = guest, .len = sizeof guest};
    prof_target *target = NULL;
    prof_os *os = abi_over_fake(&g, &target);
    struct prof_os_mem mem = {.read = read_fails,
                              .read_unchanging = read_through_target,
                              .ctx = target,
                              .captured = true};
    struct prof_vcpu user = {.index = 0, .paging64 = true, .user = true, .as_root = 0x5000};
    struct prof_os_refresh r;
    struct prof_task t;
    prof_os_refresh(os, &user, 1, &mem, &r);
    CHECK(r.published);
    prof_os_task(os, &user, 0, &t);
    CHECK(t.known && t.state == PROF_TASK_USER && t.pid == 100); /* its address space */
    user.as_root = 0x6000; /* the slot moved on to another process since */
    prof_os_refresh(os, &user, 1, &mem, &r);
    prof_os_task(os, &user, 0, &t);
    CHECK(!t.known);
    struct prof_vcpu other = {.index = 1, .paging64 = true, .user = true, .as_root = 0x7000};
    prof_os_refresh(os, &other, 1, &mem, &r);
    prof_os_task(os, &other, 1, &t);
    CHECK(!t.known); /* a later copy of a slot in the kernel proves nothing */
    struct prof_vcpu kernel = {.index = 0, .paging64 = true, .as_root = 0x5000};
    prof_os_refresh(os, &kernel, 1, &mem, &r);
    CHECK(!r.published); /* the kernel reads it at the instant, or not at all */
    struct prof_os_mem stopped = mem;
    stopped.captured = false; /* a stopping target's failed read is not retried later */
    prof_os_refresh(os, &user, 1, &stopped, &r);
    CHECK(!r.published);
    prof_os_free(os);
    prof_target_free(target);
}

/* The run-health checks: a guest paused 88 ms of every 90 is frozen, one paused 0.7 ms of every
 * 2 is not; 44 ms for 3 QMP round trips is far above their usual cost, 3 ms on a loaded host
 * is not, and neither is anything under 5 ms. */
static void test_run_health(void)
{
    CHECK(fabs(prof_guest_running_share(88000000ull * 10, 0.9) - (1 - 0.88 / 0.9)) < 1e-9);
    CHECK(prof_guest_running_share(88000000ull * 10, 0.9) < PROF_FROZEN_SHARE);
    CHECK(prof_guest_running_share(700000ull * 500, 1.0) > 0.6);
    CHECK(prof_guest_running_share(5000000000ull, 1.0) == 0.0); /* clock skew: clamped */
    CHECK(prof_guest_running_share(1000, 0.0) == 1.0);
    CHECK(prof_paused_far_above_usual(44.0, 3.0, 0.3));
    CHECK(prof_paused_far_above_usual(88.0, 3.0, 0.05));
    CHECK(!prof_paused_far_above_usual(3.0, 3.0, 0.3));
    CHECK(!prof_paused_far_above_usual(4.9, 1.0, 0.01));
    CHECK(!prof_paused_far_above_usual(15.0, 40.0, 0.3)); /* memsave reads: 40 round trips */
}

int main(void)
{
    test_outputs_and_record();
    test_samples_option();
    test_abi_checks();
    test_abi_frames();
    test_os_none();
    test_current_parse();
    test_os_qprof_abi();
    test_os_qprof_abi_late();
    test_defaults_and_values();
    test_gdb_option();
    test_user_regs_option();
    test_usage_errors();
    test_rate_floors();
    test_cpu_list();
    test_sanitize();
    test_agg_roundtrip();
    test_report();
    test_hist();
    test_next_deadline();
    test_run_health();
    return harness_result();
}
