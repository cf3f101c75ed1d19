/* --current's per_cpu(VAR): resolved through the DWARF of a miniature kernel (fx_percpu.c) and
 * read from a fake guest memory that holds each CPU's copy, the offset tables and the tasks.
 * No QEMU. */
#include "harness.h"
#include "os.h"
#include "symbols.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

/* The fake guest memory: address -> byte; a byte not there is unmapped. */
static GHashTable *memory;

static void put(uint64_t addr, const void *bytes, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint64_t *key = g_new(uint64_t, 1);
        *key = addr + i;
        g_hash_table_insert(memory, key, GUINT_TO_POINTER(((const uint8_t *)bytes)[i] + 1u));
    }
}

static void put_u64(uint64_t addr, uint64_t v)
{
    put(addr, &v, 8); /* the host is little-endian, as the guest */
}

static int fake_read(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf, size_t len,
                     size_t *got)
{
    (void)ctx, (void)cpu;
    for (*got = 0; *got < len; (*got)++) {
        uint64_t a = addr + *got;
        gpointer v = g_hash_table_lookup(memory, &a);
        if (!v)
            return -EFAULT;
        ((uint8_t *)buf)[*got] = (uint8_t)(GPOINTER_TO_UINT(v) - 1u);
    }
    return 0;
}

static const struct prof_os_mem mem = {.read = fake_read};

static void put_task(uint64_t at, int32_t pid, const char *comm)
{
    char name[16] = {0};
    g_strlcpy(name, comm, sizeof name);
    put(at, &pid, 4);
    put(at + 4, name, sizeof name);
}

/* Reads expr (with the table `offsets`, NULL: the default) on the vCPU with APIC ID cpu. */
static int read_current(const char *expr, const char *offsets, uint32_t cpu, uint32_t *pid,
                        char name[PROF_COMM_LEN])
{
    prof_os_current *c = NULL;
    struct qp_error err = {0};
    struct prof_current_names names = {.percpu_offsets = offsets};
    int rc = prof_os_current_open(FX_PERCPU, expr, &names, &c, &err);
    CHECK_MSG(rc == 0, "%s: %s", expr, err.msg);
    if (rc)
        return rc;
    struct prof_vcpu v = {.apic_known = true, .apic_id = cpu, .paging64 = true};
    name[0] = '\0';
    rc = prof_os_current_read(c, &v, &mem, pid, name, PROF_COMM_LEN);
    prof_os_current_free(c);
    return rc;
}

static void expect_task(const char *expr, const char *offsets, uint32_t cpu, uint32_t pid,
                        const char *comm)
{
    uint32_t got_pid = 0;
    char got_name[PROF_COMM_LEN];
    int rc = read_current(expr, offsets, cpu, &got_pid, got_name);
    CHECK_MSG(rc == 0 && got_pid == pid && strcmp(got_name, comm) == 0,
              "%s on CPU %u: rc %d, pid %u '%s'; expected %u '%s'", expr, cpu, rc, got_pid,
              got_name, pid, comm);
}

static void expect_open_error(const char *expr, const char *offsets, int code, const char *words)
{
    prof_os_current *c = NULL;
    struct qp_error err = {0};
    struct prof_current_names names = {.percpu_offsets = offsets};
    CHECK_INT(prof_os_current_open(FX_PERCPU, expr, &names, &c, &err), code);
    CHECK_MSG(strstr(err.msg, words) && !strchr(err.msg, '\n'), "%s: '%s' lacks '%s'", expr,
              err.msg, words);
    CHECK(c == NULL);
}

static uint64_t symbol(const sym_table *t, const char *name)
{
    uint64_t addr = 0;
    CHECK_MSG(sym_find_by_name(t, name, &addr) == 0, "no symbol %s in %s", name, FX_PERCPU);
    return addr;
}

static void test_parse(void)
{
    struct prof_current_path p;
    struct qp_error err = {0};
    CHECK_INT(prof_current_parse("per_cpu(current_task)", &p, &err), 0);
    CHECK(p.per_cpu && !p.per_cpu_at_index);
    CHECK_STR(p.var, "current_task");
    CHECK_INT(p.n, 0);
    CHECK_INT(prof_current_parse(" per_cpu ( runqueues , 3 ) . curr ", &p, &err), 0);
    CHECK(p.per_cpu && p.per_cpu_at_index);
    CHECK_U64(p.per_cpu_index, 3);
    CHECK_STR(p.var, "runqueues");
    CHECK_INT(p.n, 1);
    CHECK_INT(prof_current_parse("per_cpu(runqueues, $cpu).curr", &p, &err), 0);
    CHECK(p.per_cpu && !p.per_cpu_at_index);
    /* A variable that happens to be called per_cpu. */
    CHECK_INT(prof_current_parse("per_cpu[$cpu].task", &p, &err), 0);
    CHECK(!p.per_cpu);
    CHECK_STR(p.var, "per_cpu");
    const char *bad[] = {
        "per_cpu(",     "per_cpu()",  "per_cpu(a,)",    "per_cpu(a, $cpux)",   "per_cpu(a b)",
        "per_cpu(a) x", "per_cpu(1)", "per_cpu(a, -1)", "per_cpu(per_cpu(a))", NULL};
    for (const char **b = bad; *b; b++) {
        struct qp_error e = {0};
        CHECK_MSG(prof_current_parse(*b, &p, &e) == -EINVAL, "'%s' parsed", *b);
        CHECK_MSG(e.msg[0] && !strchr(e.msg, '\n'), "'%s': no one-line reason: %s", *b, e.msg);
    }
}

static void test_read(void)
{
    sym_table *t = NULL;
    struct qp_error err = {0};
    REQUIRE(sym_table_open_elf(FX_PERCPU, &t, &err) == 0);
    uint64_t current_task = symbol(t, "current_task"), runqueues = symbol(t, "runqueues");
    uint64_t table = symbol(t, "__per_cpu_offset"), bases = symbol(t, "cpu_bases");
    uint64_t small = symbol(t, "small_offsets"), shallow = symbol(t, "shallow_runqueues");
    sym_table_free(t);

    /* CPU 0's copies at +0x10000000, CPU 1's at +0x20000000; CPU 2's table entry points at
     * nothing mapped; CPU 3 runs no process (a NULL current_task). */
    const uint64_t offset[4] = {0x10000000, 0x20000000, 0x70000000, 0x30000000};
    for (int i = 0; i < 4; i++) {
        put_u64(table + 8 * i, offset[i]);
        uint32_t small_offset = (uint32_t)offset[i];
        put(small + 4 * i, &small_offset, 4);
    }
    put_u64(bases, 0x900000); /* cpu_bases: the table the kernel allocated */
    for (int i = 0; i < 4; i++)
        put_u64(0x900000 + 8 * i, offset[i]);
    put_task(0x500000, 7, "init");
    put_task(0x600000, 42, "sh");
    put_u64(current_task + offset[0], 0x500000);
    put_u64(current_task + offset[1], 0x600000);
    put_u64(current_task + offset[3], 0);
    put_u64(runqueues + offset[0] + 8, 0x500000); /* struct rq's curr */
    put_u64(runqueues + offset[1] + 8, 0x600000);
    put_u64(shallow + offset[0] + 8, 0x500000); /* curr, 3 anonymous structs down */

    expect_task("per_cpu(current_task)", NULL, 0, 7, "init");
    expect_task("per_cpu(current_task)", NULL, 1, 42, "sh");
    expect_task("per_cpu(current_task, $cpu)", NULL, 1, 42, "sh");
    expect_task("per_cpu(runqueues).curr", NULL, 0, 7, "init");
    expect_task("per_cpu(runqueues).curr", NULL, 1, 42, "sh");
    expect_task("per_cpu(shallow_runqueues).curr", NULL, 0, 7, "init");
    /* 40 anonymous levels: past the search's bound, refused in one line (issue 34) */
    expect_open_error("per_cpu(deep_runqueues).curr", NULL, -ENOENT, "16 levels deep");
    expect_task("per_cpu(current_task, 1)", NULL, 0, 42, "sh"); /* CPU 1's, read from CPU 0 */
    expect_task("per_cpu(current_task)", "cpu_bases", 1, 42, "sh");
    expect_task("per_cpu(current_task)", "small_offsets", 0, 7, "init");

    uint32_t pid = 99;
    char name[PROF_COMM_LEN];
    /* Unmapped copy: no process information, never a wrong one. */
    CHECK_INT(read_current("per_cpu(current_task)", NULL, 2, &pid, name), -EFAULT);
    CHECK_INT(read_current("per_cpu(current_task)", NULL, 3, &pid, name), -ENOENT);
    CHECK_INT(read_current("per_cpu(current_task)", NULL, 4, &pid, name), -ERANGE);
}

static void test_errors(void)
{
    expect_open_error("per_cpu(current_task)", "no_such_table", -ENOENT,
                      "no per-CPU offset table 'no_such_table'");
    expect_open_error("per_cpu(current_task)", "no_such_table", -ENOENT, "--percpu-offsets");
    expect_open_error("per_cpu(current_task)", "not_a_table", -EINVAL,
                      "'not_a_table' is no array of (or pointer to) 4- or 8-byte integers");
    expect_open_error("per_cpu(curent_task)", NULL, -ENOENT, "no variable 'curent_task'");
    /* Without per_cpu(), a per-CPU variable's address is no copy's: said before any read. */
    expect_open_error("current_task", NULL, -EINVAL,
                      "'current_task' is a per-CPU variable (.data..percpu): write "
                      "per_cpu(current_task)");
    expect_open_error("per_cpu(current_task, 9)", NULL, -ERANGE, "CPU 9 past 4");
    expect_open_error("per_cpu(runqueues).cur", NULL, -ENOENT, "struct rq has no field 'cur'");
}

/* --user-regs' argument: the expression, then ROLE=FIELD namings; what is refused says why. */
static void test_user_regs_parse(void)
{
    struct prof_user_regs_spec spec;
    struct qp_error err = {0};
    CHECK_INT(prof_user_regs_parse("cpus[$cpu].proc->trapframe", &spec, &err), 0);
    CHECK_STR(spec.expr, "cpus[$cpu].proc->trapframe");
    for (int r = 0; r < PROF_UREG_COUNT; r++)
        CHECK_STR(spec.field[r], "");
    CHECK_INT(
        prof_user_regs_parse("odd_frames[$cpu]:pc=user_pc,sp=user_stack,ra=link", &spec, &err), 0);
    CHECK_STR(spec.expr, "odd_frames[$cpu]");
    CHECK_STR(spec.field[PROF_UREG_PC], "user_pc");
    CHECK_STR(spec.field[PROF_UREG_SP], "user_stack");
    CHECK_STR(spec.field[PROF_UREG_FP], "");
    CHECK_STR(spec.field[PROF_UREG_RA], "link");
    const char *bad[] = {"",          ":pc=epc",         "x:",          "x:pc",
                         "x:pc=",     "x:pc=epc,pc=epc", "x:lr=ra",     "x:pc=epc,",
                         "x:pc=e pc", "x:sp=1sp",        "x:pc=epc;sp", NULL};
    for (const char **b = bad; *b; b++) {
        struct qp_error e = {0};
        CHECK_MSG(prof_user_regs_parse(*b, &spec, &e) == -EINVAL, "'%s' parsed", *b);
        CHECK_MSG(strstr(e.msg, "--user-regs") && !strchr(e.msg, '\n'), "'%s': reason '%s'", *b,
                  e.msg);
    }
}

/* The names a trapframe's fields are matched by, on the three architectures. */
static void test_user_regs_roles(void)
{
    const struct {
        const char *field;
        int role;
    } cases[] = {
        {"epc", PROF_UREG_PC},
        {"sepc", PROF_UREG_PC},
        {"rip", PROF_UREG_PC},
        {"elr", PROF_UREG_PC},
        {"pc", PROF_UREG_PC},
        {"sp", PROF_UREG_SP},
        {"rsp", PROF_UREG_SP},
        {"s0", PROF_UREG_FP},
        {"fp", PROF_UREG_FP},
        {"rbp", PROF_UREG_FP},
        {"x29", PROF_UREG_FP},
        {"ra", PROF_UREG_RA},
        {"x30", PROF_UREG_RA},
        {"lr", PROF_UREG_RA},
        {"kernel_sp", -1},
        {"s1", -1},
        {"SP", -1},
        {"", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(prof_user_regs_role(cases[i].field) == cases[i].role, "'%s': %d, not %d",
                  cases[i].field, prof_user_regs_role(cases[i].field), cases[i].role);
}

/* riscv64's slots: pc 32, sp 2, fp (s0) 8, ra 1. */
static const int rv_slots[PROF_UREG_COUNT] = {32, 2, 8, 1};

static int user_regs_open(const char *arg, prof_uregs **u, struct qp_error *err)
{
    struct prof_user_regs_spec spec;
    int rc = prof_user_regs_parse(arg, &spec, err);
    return rc ? rc : prof_uregs_open(FX_PERCPU, &spec, rv_slots, NULL, u, err);
}

/* Reads the frame of the vCPU with APIC ID cpu through arg; regs zeroed on failure. */
static int read_user_regs(const char *arg, uint32_t cpu, struct unw_regs *regs)
{
    prof_uregs *u = NULL;
    struct qp_error err = {0};
    int rc = user_regs_open(arg, &u, &err);
    CHECK_MSG(rc == 0, "%s: %s", arg, err.msg);
    if (rc)
        return rc;
    struct prof_vcpu v = {.apic_known = true, .apic_id = cpu, .paging64 = true};
    uint64_t at = 0;
    rc = prof_uregs_locate(u, &v, &mem, &at);
    if (rc == 0)
        rc = prof_uregs_read(u, &v, &mem, at, 0x4000000000, regs);
    prof_uregs_free(u);
    return rc;
}

static void test_user_regs_read(void)
{
    sym_table *t = NULL;
    struct qp_error err = {0};
    REQUIRE(sym_table_open_elf(FX_PERCPU, &t, &err) == 0);
    uint64_t cpus = symbol(t, "cpus"), odd = symbol(t, "odd_frames");
    sym_table_free(t);
    /* CPU 0's process trapped at user pc 0x1234 (xv6's offsets: epc 24, ra 40, sp 48, s0 96);
     * CPU 1's trapframe holds a kernel-half pc: not a user-mode frame. */
    put_u64(cpus, 0x700000);
    put_u64(0x700000 + 24, 0x710000); /* proc->trapframe */
    put_u64(0x710000 + 24, 0x1234);
    put_u64(0x710000 + 40, 0x1100);
    put_u64(0x710000 + 48, 0x3fd0);
    put_u64(0x710000 + 96, 0x3ff0);
    for (uint64_t off = 0; off < 14 * 8; off += 8)
        if (off != 24 && off != 40 && off != 48 && off != 96)
            put_u64(0x710000 + off, 0xdead);
    put_u64(cpus + 8, 0x720000);
    put_u64(0x720000 + 24, 0x730000);
    for (uint64_t off = 0; off < 14 * 8; off += 8)
        put_u64(0x730000 + off, off == 24 ? 0xffffffff80001000 : 0x4000);
    struct unw_regs r;
    CHECK_INT(read_user_regs("cpus[$cpu].proc->trapframe", 0, &r), 0);
    CHECK_U64(r.r[32], 0x1234);
    CHECK_U64(r.r[1], 0x1100);
    CHECK_U64(r.r[2], 0x3fd0);
    CHECK_U64(r.r[8], 0x3ff0);
    CHECK_U64(r.r[9], 0); /* s1 is no role: left alone */
    CHECK_INT(read_user_regs("cpus[$cpu].proc->trapframe", 1, &r), -EFAULT);
    CHECK_INT(read_user_regs("cpus[$cpu].proc->trapframe", 2, &r), -ERANGE);
    /* Named fields, fp unnamed and unmatched: left zero. */
    put_u64(odd, 0x740000);
    put_u64(0x740000, 0x2000);
    put_u64(0x740000 + 8, 0x3f00);
    put_u64(0x740000 + 16, 0x3f80);
    put_u64(0x740000 + 24, 0x2222);
    CHECK_INT(read_user_regs("odd_frames[$cpu]:pc=user_pc,sp=user_stack,ra=link", 0, &r), 0);
    CHECK_U64(r.r[32], 0x2000);
    CHECK_U64(r.r[2], 0x3f00);
    CHECK_U64(r.r[8], 0);
    CHECK_U64(r.r[1], 0x2222);
    /* A NULL pointer on the way: no process, nothing read. */
    put_u64(odd + 8, 0);
    CHECK_INT(read_user_regs("odd_frames[$cpu]:pc=user_pc,sp=user_stack", 1, &r), -ENOENT);
}

static void expect_user_regs_error(const char *arg, const char *words)
{
    prof_uregs *u = NULL;
    struct qp_error err = {0};
    CHECK_MSG(user_regs_open(arg, &u, &err) < 0, "%s opened", arg);
    CHECK_MSG(strstr(err.msg, words) && !strchr(err.msg, '\n'), "%s: '%s' lacks '%s'", arg, err.msg,
              words);
    CHECK(u == NULL);
}

static void test_user_regs_errors(void)
{
    expect_user_regs_error("odd_frames[$cpu]", "struct odd_frame has no field for the pc");
    expect_user_regs_error("odd_frames[$cpu]", "'odd_frames[$cpu]:pc=FIELD'");
    expect_user_regs_error("odd_frames[$cpu]:pc=user_pc", "no field for the sp");
    expect_user_regs_error("odd_frames[$cpu]:pc=user_pc,sp=flags", "'flags' is no 8-byte");
    expect_user_regs_error("cpus[$cpu].proc->trapframe:pc=user_pc", "no field 'user_pc'");
    expect_user_regs_error("cpus[$cpu].proc->trapframes", "--user-regs 'cpus[$cpu].proc->");
    expect_user_regs_error("cpus[$cpu].proc->pid", "not a struct");
}

int main(void)
{
    memory = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    test_parse();
    test_read();
    test_errors();
    test_user_regs_parse();
    test_user_regs_roles();
    test_user_regs_read();
    test_user_regs_errors();
    g_hash_table_destroy(memory);
    return harness_result();
}
