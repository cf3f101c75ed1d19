/* Fuzz target: `info registers` / `info registers -a` text, through every parser qprof has for
 * it: qmp/'s qmp_parse_registers (x86_64), x86_64's arch table (monitor_parse, then
 * monitor_cpu_state), riscv64's (monitor_parse, then monitor_complete over a small fake RAM
 * that the input's own bytes fill) and aarch64's (monitor_parse, then monitor_cpu_state).
 *
 * Input: the text (NUL-terminated here). Each parser reads it into a full table and into a
 * table of one, and the two must agree on the first CPU. */
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "fuzz.h"
#include "qmp.h"

static void fuzz_x86_64(const char *text)
{
    struct qmp_regs all[QMP_MAX_CPUS], one[1];
    struct qp_error err = {0};
    int n_all = -1, n_one = -1;
    int rc = qmp_parse_registers(text, all, QMP_MAX_CPUS, &n_all, &err);
    FUZZ_ASSERT(rc == 0 || (rc < 0 && err.msg[0] != '\0'));
    if (rc == 0) {
        FUZZ_ASSERT(n_all >= 1 && n_all <= QMP_MAX_CPUS);
        for (int i = 0; i < n_all; i++)
            FUZZ_ASSERT(all[i].long_mode == ((all[i].efer & 0x400) != 0));
    }
    int rc_one = qmp_parse_registers(text, one, 1, &n_one, NULL);
    FUZZ_ASSERT(rc_one == rc);
    if (rc == 0) {
        FUZZ_ASSERT(n_one == 1);
        FUZZ_ASSERT(one[0].rip == all[0].rip && one[0].rsp == all[0].rsp &&
                    one[0].cpl == all[0].cpl && one[0].cpu_index == all[0].cpu_index);
    }
}

/* Guest-physical RAM for the page walk of monitor_complete: 64 KiB from 0, the input repeated. */
struct fake_ram {
    const uint8_t *bytes;
    size_t len;
};

static int ram_read(void *ctx, uint64_t paddr, uint64_t *val)
{
    const struct fake_ram *r = ctx;
    if (r->len == 0 || paddr >= 65536 - 8)
        return -1;
    uint8_t w[8];
    for (int i = 0; i < 8; i++)
        w[i] = r->bytes[(paddr + (uint64_t)i) % r->len];
    memcpy(val, w, 8);
    return 0;
}

#define RV_MAX 8

/* a's monitor_parse over text: a one-line error, or blocks that hold a pc, the first alike when
 * only one is kept. The number of blocks, 0 when the text was refused. */
static int parse_monitor(const struct prof_arch *a, const char *text,
                         struct prof_arch_monitor_cpu all[RV_MAX])
{
    const char *pc = "pc"; /* the gdbstub's name for the table's pc slot */
    for (int i = 0; i < a->n_gdb_regs; i++)
        if (a->gdb_regs[i].slot == a->pc_reg)
            pc = a->gdb_regs[i].gdb_name;
    static struct prof_arch_monitor_cpu one[1];
    struct qp_error err = {0};
    int n_all = -1, n_one = -1;
    int rc = a->monitor_parse(text, all, RV_MAX, &n_all, &err);
    FUZZ_ASSERT(rc == 0 || (rc < 0 && err.msg[0] != '\0' && !strchr(err.msg, '\n')));
    int rc_one = a->monitor_parse(text, one, 1, &n_one, NULL);
    FUZZ_ASSERT(rc_one == rc);
    if (rc != 0)
        return 0;
    FUZZ_ASSERT(n_all >= 1 && n_all <= RV_MAX && n_one == 1);
    uint64_t pc_all, pc_one;
    FUZZ_ASSERT(prof_arch_monitor_reg(&all[0], pc, &pc_all) == 0);
    FUZZ_ASSERT(prof_arch_monitor_reg(&one[0], pc, &pc_one) == 0 && pc_one == pc_all);
    return n_all;
}

static void fuzz_riscv64(const char *text, size_t len)
{
    const struct prof_arch *a = &prof_arch_riscv64;
    static struct prof_arch_monitor_cpu all[RV_MAX];
    int n_all = parse_monitor(a, text, all);
    struct fake_ram ram = {(const uint8_t *)text, len};
    for (int i = 0; i < n_all; i++) {
        FUZZ_ASSERT(all[i].n_regs >= 3 && all[i].n_regs <= PROF_ARCH_MONITOR_REGS);
        struct qp_error cerr = {0};
        if (a->monitor_complete(&all[i], ram_read, &ram, &cerr) != 0)
            continue;
        struct prof_arch_cpu_state st = {0};
        if (a->cpu_state(prof_arch_monitor_reg, &all[i], &st, &cerr) == 0)
            FUZZ_ASSERT(st.privilege == 0 || st.privilege == 2 || st.privilege == 3);
        else
            FUZZ_ASSERT(cerr.msg[0] != '\0');
    }
}

/* x86_64's table: every parsed block holds rip, rsp and the CPL, a digit. */
static void fuzz_x86_64_table(const char *text)
{
    const struct prof_arch *a = &prof_arch_x86_64;
    static struct prof_arch_monitor_cpu all[RV_MAX];
    int n_all = parse_monitor(a, text, all);
    for (int i = 0; i < n_all; i++) {
        struct qp_error cerr = {0};
        struct prof_arch_cpu_state st = {0};
        uint64_t rsp;
        FUZZ_ASSERT(prof_arch_monitor_reg(&all[i], "rsp", &rsp) == 0);
        FUZZ_ASSERT(a->monitor_cpu_state(prof_arch_monitor_reg, &all[i], &st, &cerr) == 0);
        FUZZ_ASSERT(st.privilege >= 0 && st.privilege <= 9);
    }
}

/* aarch64: every parsed block holds x0..x30, sp, pc and cpsr, and its exception level comes out
 * as privilege 0..3 (EL3..EL0), with translation never assumed above EL1. */
static void fuzz_aarch64(const char *text)
{
    const struct prof_arch *a = &prof_arch_aarch64;
    static struct prof_arch_monitor_cpu all[RV_MAX];
    int n_all = parse_monitor(a, text, all);
    for (int i = 0; i < n_all; i++) {
        FUZZ_ASSERT(all[i].n_regs >= 34 && all[i].n_regs <= PROF_ARCH_MONITOR_REGS);
        struct qp_error cerr = {0};
        struct prof_arch_cpu_state st = {0};
        if (a->monitor_cpu_state(prof_arch_monitor_reg, &all[i], &st, &cerr) == 0)
            FUZZ_ASSERT(st.privilege >= 0 && st.privilege <= 3 && st.as_root == 0 &&
                        (!st.paging || st.privilege >= 2));
        else
            FUZZ_ASSERT(cerr.msg[0] != '\0' && !strchr(cerr.msg, '\n'));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    fuzz_x86_64(text);
    fuzz_x86_64_table(text);
    fuzz_riscv64(text, size);
    fuzz_aarch64(text);
    free(text);
    return 0;
}
