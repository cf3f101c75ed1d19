/* aarch64: the exception level from PSTATE (the gdbstub's cpsr), the VMSAv8-64 stage-1 walk of
 * the EL1&0 regime (TTBR0_EL1 for the low half, TTBR1_EL1 for the high half, both shaped by
 * TCR_EL1: 4K, 16K or 64K granules, 1 to 4 levels by TnSZ, table, block and page descriptors),
 * the address halves, the x29 frame chain, the gdbstub's register names; QMP's `info registers`
 * text, which gives the exception level but no translation registers.
 *
 * Register slots are the DWARF numbers: x0..x30 (0..30), sp (31); the pc has no column libdwfl
 * reads (its aarch64 backend takes it apart), so it takes slot 32, as on riscv64. The exception
 * level is folded onto the "0 is most privileged" scale of struct prof_vcpu: EL3 0, EL2 1,
 * EL1 2, EL0 3. */
#include "arch.h"
#include "qprof/guest_abi.h"
#include "unwind.h"

#include <capstone/capstone.h>

#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define A64_SLOT_FP 29
#define A64_SLOT_SP 31
#define A64_SLOT_PC 32

/* TCR_EL1 fields (Arm ARM D17.2.131). */
#define TCR_T0SZ(t)  ((int)((t)&0x3f))
#define TCR_EPD0     (UINT64_C(1) << 7)
#define TCR_TG0(t)   ((unsigned)((t) >> 14) & 3)
#define TCR_T1SZ(t)  ((int)(((t) >> 16) & 0x3f))
#define TCR_EPD1     (UINT64_C(1) << 23)
#define TCR_TG1(t)   ((unsigned)((t) >> 30) & 3)
#define TCR_TBI0     (UINT64_C(1) << 37)
#define TCR_TBI1     (UINT64_C(1) << 38)
#define TNSZ_MIN     16                 /* 48-bit halves: no FEAT_LVA/LPA2 */
#define TNSZ_MAX     39                 /* 25-bit halves: no FEAT_TTST */
#define PSTATE_NRW   (UINT64_C(1) << 4) /* AArch32 state */
#define PSTATE_EL(p) ((int)((p) >> 2) & 3)
#define SCTLR_M      UINT64_C(1)                  /* stage 1 translation of EL1&0 on */
#define ADDR_MASK    UINT64_C(0x0000fffffffffffe) /* TTBR BADDR, descriptor OA: bits 47..1 */
#define DESC_VALID   UINT64_C(1)
#define DESC_TABLE   UINT64_C(2) /* with VALID: a table (levels 0..2) or a page (level 3) */

/* The granule as a page shift: 12 (4K), 14 (16K), 16 (64K); TG0 and TG1 encode them
 * differently. -1 for a reserved encoding. */
static int granule_shift(uint64_t tcr, bool high)
{
    static const int tg0[4] = {12, 16, 14, -1}, tg1[4] = {-1, 14, 12, 16};
    return high ? tg1[TCR_TG1(tcr)] : tg0[TCR_TG0(tcr)];
}

/* One half of the address space as TCR_EL1 shapes it. */
struct half {
    uint64_t root;
    int va_bits;   /* 64 - TnSZ */
    int granule;   /* page shift, -1 when reserved */
    bool disabled; /* EPDn: a miss in the TLB faults, no walk */
    bool tbi;      /* top byte ignored: bits 63..56 are a tag */
};

static struct half half_for(const struct prof_arch_mmu *mmu, uint64_t ttbr0, bool high)
{
    uint64_t tcr = mmu ? mmu->control : 0;
    if (high)
        return (struct half){.root = mmu ? mmu->root_hi : 0,
                             .va_bits = 64 - TCR_T1SZ(tcr),
                             .granule = granule_shift(tcr, true),
                             .disabled = tcr & TCR_EPD1,
                             .tbi = tcr & TCR_TBI1};
    return (struct half){.root = ttbr0,
                         .va_bits = 64 - TCR_T0SZ(tcr),
                         .granule = granule_shift(tcr, false),
                         .disabled = tcr & TCR_EPD0,
                         .tbi = tcr & TCR_TBI0};
}

/* Whether the bits of vaddr above the half's size (up to bit 55 with a tag, else 63) all equal
 * the half's selector bit 55. */
static bool in_half(const struct half *h, uint64_t vaddr, bool high)
{
    int top = h->tbi ? 55 : 63;
    uint64_t above = (vaddr >> h->va_bits) & ((UINT64_C(2) << (top - h->va_bits)) - 1);
    uint64_t all = (UINT64_C(2) << (top - h->va_bits)) - 1;
    return above == (high ? all : 0);
}

/* Blocks end the walk early at level 1 (1G) and 2 (2M) with 4K granules, at level 2 only (32M,
 * 512M) with 16K and 64K; elsewhere the encoding is reserved (without FEAT_LPA2/LPA). */
static bool block_allowed(int granule, int level)
{
    return level == 2 || (granule == 12 && level == 1);
}

/* Each level takes granule-3 bits above the page offset; the first level what is left of
 * va_bits. At most one entry per level is read (4 at most): a table that points back at itself
 * is read as the next level's table, and at the last level as a page (what the MMU does too),
 * never looped. */
static int walk_half(const struct half *h, uint64_t vaddr, prof_arch_phys_read_fn read_phys,
                     void *ctx, uint64_t *paddr, uint64_t *page_size)
{
    int g = h->granule, stride = g - 3;
    int levels = (h->va_bits - g + stride - 1) / stride;
    int first_bits = h->va_bits - g - stride * (levels - 1);
    /* The first table is aligned to its own size (BADDR's low bits are RES0 up to it). */
    uint64_t table = h->root & ADDR_MASK & ~((UINT64_C(8) << first_bits) - 1);
    for (int i = 0; i < levels; i++) {
        int level = 4 - levels + i, shift = g + stride * (levels - 1 - i);
        int bits = i == 0 ? first_bits : stride;
        uint64_t entry, index = (vaddr >> shift) & ((UINT64_C(1) << bits) - 1);
        if (read_phys(ctx, table + index * 8, &entry) < 0 || !(entry & DESC_VALID))
            return -EFAULT;
        bool last = i == levels - 1;
        if ((entry & DESC_TABLE) && !last) {
            table = entry & ADDR_MASK & ~((UINT64_C(1) << g) - 1);
            continue;
        }
        if (!(entry & DESC_TABLE) && (last || !block_allowed(g, level)))
            return -EFAULT; /* reserved: a block at level 3, or where blocks do not exist */
        uint64_t size = UINT64_C(1) << shift;
        *paddr = (entry & ADDR_MASK & ~(size - 1)) | (vaddr & (size - 1));
        *page_size = size;
        return 0;
    }
    return -EFAULT;
}

/* -ENOTSUP for a shape the walk does not know: a reserved granule or a TnSZ outside 16..39. */
static int half_supported(const struct half *h)
{
    return h->granule > 0 && h->va_bits >= 64 - TNSZ_MAX && h->va_bits <= 64 - TNSZ_MIN ? 0
                                                                                        : -ENOTSUP;
}

static int page_walk_mmu(uint64_t ttbr0, const struct prof_arch_mmu *mmu, uint64_t vaddr,
                         prof_arch_phys_read_fn read_phys, void *ctx, uint64_t *paddr,
                         uint64_t *page_size)
{
    bool high = (vaddr >> 55) & 1;
    struct half h = half_for(mmu, ttbr0, high);
    int rc = half_supported(&h);
    if (rc)
        return rc;
    if (h.disabled || !in_half(&h, vaddr, high))
        return -EFAULT;
    return walk_half(&h, vaddr, read_phys, ctx, paddr, page_size);
}

/* TTBR0_EL1 alone cannot be walked: without TCR_EL1 the granule and the halves are unknown. */
static int page_walk(uint64_t ttbr0, uint64_t vaddr, prof_arch_phys_read_fn read_phys, void *ctx,
                     uint64_t *paddr, uint64_t *page_size)
{
    return page_walk_mmu(ttbr0, NULL, vaddr, read_phys, ctx, paddr, page_size);
}

/* QEMU's aarch64-core.xml: x0..x30, sp, pc, cpsr. */
static const struct prof_arch_reg gdb_regs[] = {
    {"x0", 0},   {"x1", 1},           {"x2", 2},          {"x3", 3},   {"x4", 4},   {"x5", 5},
    {"x6", 6},   {"x7", 7},           {"x8", 8},          {"x9", 9},   {"x10", 10}, {"x11", 11},
    {"x12", 12}, {"x13", 13},         {"x14", 14},        {"x15", 15}, {"x16", 16}, {"x17", 17},
    {"x18", 18}, {"x19", 19},         {"x20", 20},        {"x21", 21}, {"x22", 22}, {"x23", 23},
    {"x24", 24}, {"x25", 25},         {"x26", 26},        {"x27", 27}, {"x28", 28}, {"x29", 29},
    {"x30", 30}, {"sp", A64_SLOT_SP}, {"pc", A64_SLOT_PC}};

/* QEMU 7.2's system-registers feature (org.qemu.gdb.arm.sys.regs) names SCTLR_EL1 "SCTLR" (its
 * AArch32 and AArch64 views are one register); a stub that spells it out is asked too. */
static const char *const gdb_state_regs[] = {
    "cpsr", "SCTLR", "SCTLR_EL1", "TTBR0_EL1", "TTBR1_EL1", "TCR_EL1", "ELR_EL1", "SP_EL0", NULL};

static int need_reg(prof_arch_reg_fn get, void *ctx, const char *name, uint64_t *val,
                    struct qp_error *err)
{
    if (get(ctx, name, val) == 0)
        return 0;
    return qp_error_set(err, -ENOENT,
                        "the gdbstub gives no `%s` register: qprof needs it on aarch64 (QEMU's "
                        "system-registers feature has it)",
                        name);
}

/* A granule the walk does not know, in a half translation uses: refused in one line. */
static int check_granules(uint64_t tcr, struct qp_error *err)
{
    for (int high = 0; high <= 1; high++) {
        if (tcr & (high ? TCR_EPD1 : TCR_EPD0))
            continue;
        if (granule_shift(tcr, high) < 0)
            return qp_error_set(err, -ENOTSUP,
                                "aarch64 TCR_EL1 0x%016" PRIx64 " has a reserved TG%d encoding "
                                "(%u): no 4K, 16K or 64K granule to walk",
                                tcr, high, high ? TCR_TG1(tcr) : TCR_TG0(tcr));
        int tnsz = high ? TCR_T1SZ(tcr) : TCR_T0SZ(tcr);
        if (tnsz < TNSZ_MIN || tnsz > TNSZ_MAX)
            return qp_error_set(err, -ENOTSUP,
                                "aarch64 TCR_EL1 0x%016" PRIx64 " has T%dSZ %d: qprof walks "
                                "%d..%d (25- to 48-bit halves)",
                                tcr, high, tnsz, TNSZ_MIN, TNSZ_MAX);
    }
    return 0;
}

/* PSTATE.EL from cpsr; stage 1 of the EL1&0 regime translates at EL0 and EL1 when SCTLR_EL1.M
 * is set. */
/* The exception level cpsr names, or -ENOTSUP (with the message) for AArch32 state. */
static int aarch64_el(uint64_t cpsr, struct qp_error *err)
{
    if (cpsr & PSTATE_NRW)
        return qp_error_set(err, -ENOTSUP,
                            "the aarch64 vCPU runs AArch32 code (cpsr 0x%08" PRIx64
                            "): qprof samples AArch64 state only",
                            cpsr);
    return (int)PSTATE_EL(cpsr);
}

/* At an exception vector's first instruction the interrupted pc is only in ELR_EL1 and an
 * interrupted EL0 sp only in SP_EL0 (guest/kernel/aarch64/entry.S names them there as DWARF
 * columns 64 and 65). A transport without ELR_EL1 (QMP: `info registers` does not print it)
 * gets a pc in neither half there, so that such a stop ends its stack marked (a bad pc), never
 * taken for an outermost frame (an unknown return address, or 0, is one to libdwfl). */
#define TRAP_PC_UNKNOWN UINT64_C(0x8000000000000000)
static void trap_registers(prof_arch_reg_fn get, void *ctx, int el, struct prof_arch_cpu_state *st)
{
    st->has_trap_pc = el == 1;
    if (st->has_trap_pc && get(ctx, "ELR_EL1", &st->trap_pc) < 0)
        st->trap_pc = TRAP_PC_UNKNOWN;
    st->has_trap_sp = el == 1 && get(ctx, "SP_EL0", &st->trap_sp) == 0;
}

static int cpu_state(prof_arch_reg_fn get, void *ctx, struct prof_arch_cpu_state *st,
                     struct qp_error *err)
{
    uint64_t cpsr, sctlr, ttbr0, ttbr1, tcr;
    int rc = need_reg(get, ctx, "cpsr", &cpsr, err);
    if (!rc && get(ctx, "SCTLR_EL1", &sctlr) < 0)
        rc = need_reg(get, ctx, "SCTLR", &sctlr, err);
    if (!rc)
        rc = need_reg(get, ctx, "TTBR0_EL1", &ttbr0, err);
    if (!rc)
        rc = need_reg(get, ctx, "TTBR1_EL1", &ttbr1, err);
    if (!rc)
        rc = need_reg(get, ctx, "TCR_EL1", &tcr, err);
    if (rc)
        return rc;
    int el = aarch64_el(cpsr, err);
    if (el < 0)
        return el;
    bool paging = el <= 1 && (sctlr & SCTLR_M);
    if (paging && (rc = check_granules(tcr, err)) < 0)
        return rc;
    st->privilege = 3 - el;
    st->paging = paging;
    st->as_root = ttbr0;
    st->mmu = (struct prof_arch_mmu){.root_hi = ttbr1, .control = tcr};
    /* Optional: SP_EL0, the stack pointer of EL0 while EL0 runs, a kernel's own at EL1. */
    st->has_kernel_thread_reg = el == 1 && get(ctx, "SP_EL0", &st->kernel_thread_reg) == 0;
    st->has_exception_pc = el == 1 && get(ctx, "ELR_EL1", &st->exception_pc) == 0;
    trap_registers(get, ctx, el, st);
    return 0;
}

/* ---- QMP: HMP `info registers -a` --------------------------------------------------------
 *
 * QEMU's aarch64_cpu_dump_state (tests/data/qemu-transcripts/aarch64_info_registers_*.txt):
 *
 *   CPU#0
 *    PC=ffffff8040080fc8 X00=00000000000003c0 X01=ffffff8000000000
 *   ...
 *   X29=ffffff80400a9fb0 X30=ffffff8040080fb4  SP=ffffff80400a9fb0
 *   PSTATE=200003c5 --C- EL1h    FPU disabled
 *
 * NAME=hex tokens; PC, X00..X30, SP and PSTATE are kept under the gdbstub's names (pc, x0..x30,
 * sp, cpsr), and the exception level PSTATE's text names ("EL1h", "EL0t") must agree with the
 * EL bits of its value. Everything else (the flags, SVCR, BTYPE, FPCR, the Q, Z and P
 * registers) is skipped. SCTLR_EL1, TTBR0/1_EL1 and TCR_EL1 are not printed at all, and no
 * QMP or HMP command of QEMU 7.2 gives them: the QMP target leaves translation to QEMU. */

#define MONITOR_MAX_TOKENS 32

static bool token_eq(const struct prof_arch_token *t, const char *s)
{
    return t->len == strlen(s) && memcmp(t->s, s, t->len) == 0;
}

/* "X07" -> "x7", "PC" -> "pc", "SP" -> "sp", "PSTATE" -> "cpsr": the gdbstub's name for a
 * register qprof keeps, false for any other. */
static bool kept_name(const struct prof_arch_token *name, char out[12])
{
    if (token_eq(name, "PC") || token_eq(name, "SP")) {
        out[0] = (char)tolower((unsigned char)name->s[0]);
        out[1] = (char)tolower((unsigned char)name->s[1]);
        out[2] = '\0';
        return true;
    }
    if (token_eq(name, "PSTATE")) {
        strcpy(out, "cpsr");
        return true;
    }
    if (name->len != 3 || name->s[0] != 'X' || !isdigit((unsigned char)name->s[1]) ||
        !isdigit((unsigned char)name->s[2]))
        return false;
    int x = (name->s[1] - '0') * 10 + (name->s[2] - '0');
    if (x > 30)
        return false;
    snprintf(out, 12, "x%d", x);
    return true;
}

/* "EL1h": the exception level, -1 for any other token. */
static int el_token(const struct prof_arch_token *t)
{
    if (t->len != 4 || memcmp(t->s, "EL", 2) != 0 || t->s[2] < '0' || t->s[2] > '3' ||
        (t->s[3] != 'h' && t->s[3] != 't'))
        return -1;
    return t->s[2] - '0';
}

struct a64_block {
    struct prof_arch_monitor_cpu cpu; /* first: prof_arch_monitor_parse_blocks keeps it */
    int el;                           /* from PSTATE's text, -1 until seen */
};

static int monitor_line_error(const char *line, const char *end, struct qp_error *err)
{
    return qp_error_set(err, -EPROTO,
                        "info registers (aarch64): cannot read \"%.*s\" as register names and "
                        "hex values",
                        (int)(end - line > 80 ? 80 : end - line), line);
}

static int parse_monitor_line(void *block, const char *line, const char *end, struct qp_error *err)
{
    struct a64_block *b = block;
    struct prof_arch_token t[MONITOR_MAX_TOKENS];
    int n = prof_arch_split_tokens(line, end, t, MONITOR_MAX_TOKENS);
    if (n < 0)
        return monitor_line_error(line, end, err);
    bool pstate_line = false;
    for (int i = 0; i < n; i++) {
        const char *eq = memchr(t[i].s, '=', t[i].len);
        if (!eq) {
            int el = pstate_line ? el_token(&t[i]) : -1;
            if (el >= 0)
                b->el = el;
            continue;
        }
        struct prof_arch_token name = {t[i].s, (size_t)(eq - t[i].s)};
        struct prof_arch_token val = {eq + 1, t[i].len - name.len - 1};
        char key[12];
        if (!kept_name(&name, key))
            continue;
        if (val.len == 0 || val.len > 16)
            return monitor_line_error(line, end, err);
        char digits[17];
        for (size_t k = 0; k < val.len; k++)
            if (!isxdigit((unsigned char)val.s[k]))
                return monitor_line_error(line, end, err);
        memcpy(digits, val.s, val.len);
        digits[val.len] = '\0';
        prof_arch_monitor_set(&b->cpu, key, strtoull(digits, NULL, 16));
        pstate_line |= strcmp(key, "cpsr") == 0;
    }
    return 0;
}

static int finish_monitor_block(const void *block, struct qp_error *err)
{
    const struct a64_block *b = block;
    uint64_t v, cpsr;
    const struct prof_arch_monitor_cpu *cpu = &b->cpu;
    size_t n_regs = sizeof gdb_regs / sizeof gdb_regs[0];
    for (size_t i = 0; i <= n_regs; i++) { /* x0..x30, sp, pc, then cpsr */
        const char *name = i < n_regs ? gdb_regs[i].gdb_name : "cpsr";
        if (prof_arch_monitor_reg((void *)cpu, name, &v) < 0)
            return qp_error_set(err, -EPROTO,
                                "info registers: CPU#%d block lacks %s (is this an aarch64 guest "
                                "in AArch64 state?)",
                                cpu->cpu_index, name);
    }
    prof_arch_monitor_reg((void *)cpu, "cpsr", &cpsr);
    if (b->el < 0 || b->el != PSTATE_EL(cpsr))
        return qp_error_set(err, -EPROTO,
                            "info registers: CPU#%d PSTATE %08" PRIx64 " names %s exception "
                            "level than its EL bits (EL%d)",
                            cpu->cpu_index, cpsr, b->el < 0 ? "no" : "another", PSTATE_EL(cpsr));
    return 0;
}

static void start_monitor_block(void *block, int cpu_index)
{
    struct a64_block *b = block;
    b->cpu.cpu_index = cpu_index;
    b->cpu.halted = false;
    b->cpu.n_regs = 0;
    b->el = -1;
}

static const struct prof_arch_monitor_blocks monitor_blocks = {
    .block_size = sizeof(struct a64_block),
    .start = start_monitor_block,
    .line = parse_monitor_line,
    .finish = finish_monitor_block,
};

static int monitor_parse(const char *text, struct prof_arch_monitor_cpu *out, int max, int *n_cpus,
                         struct qp_error *err)
{
    return prof_arch_monitor_parse_blocks(&monitor_blocks, text, out, max, n_cpus, err);
}

/* The exception level from PSTATE, as cpu_state reads it. Without SCTLR_EL1 whether stage 1
 * translates is inferred: at EL0 it is taken as on; at EL1 on when the pc lies in the TTBR1
 * half (no physical address does), off otherwise, so a kernel that runs at EL1 from low
 * addresses (boot code before its MMU is on, or an identity-mapped one) is sampled as boot
 * code: counted, without a stack, never unwound through the wrong addresses. No address-space
 * root: the QMP target reads memory through QEMU's translation by the vCPU. */
static int monitor_cpu_state(prof_arch_reg_fn get, void *ctx, struct prof_arch_cpu_state *st,
                             struct qp_error *err)
{
    uint64_t cpsr, pc;
    int rc = need_reg(get, ctx, "cpsr", &cpsr, err);
    if (!rc)
        rc = need_reg(get, ctx, "pc", &pc, err);
    if (rc)
        return rc;
    int el = aarch64_el(cpsr, err);
    if (el < 0)
        return el;
    st->privilege = 3 - el;
    st->paging = el == 0 || (el == 1 && pc >= prof_arch_aarch64.split.kernel_start);
    st->as_root = 0;
    st->mmu = (struct prof_arch_mmu){0};
    trap_registers(get, ctx, el, st);
    return 0;
}

/* ---- aarch64: stp x29, x30, [sp, #-N]!; mov x29, sp --------------------------------------- */

static bool a64_is(const cs_arm64 *x, int i, arm64_reg reg)
{
    return x->op_count > i && x->operands[i].type == ARM64_OP_REG && x->operands[i].reg == reg;
}

static bool a64_special(arm64_reg r)
{
    return r == ARM64_REG_SP || r == ARM64_REG_WSP || r == ARM64_REG_X29 || r == ARM64_REG_W29 ||
           r == ARM64_REG_X30 || r == ARM64_REG_W30;
}

/* Whether the instruction may write sp, x29 or x30: a destination register (the first operand,
 * both of a load pair), a base register written back, or a call's link. Stores count too (their
 * first operand is a source): erring this way only ends more walks. */
static bool a64_writes_special(csh h, const cs_insn *insn)
{
    const cs_arm64 *x = &insn->detail->arm64;
    if (cs_insn_group(h, insn, CS_GRP_CALL))
        return true;
    for (int i = 0; i < x->op_count && i < 2; i++) {
        const cs_arm64_op *op = &x->operands[i];
        bool dest = i == 0 || insn->id == ARM64_INS_LDP || insn->id == ARM64_INS_LDNP;
        if (op->type == ARM64_OP_REG && dest && a64_special(op->reg))
            return true;
    }
    for (int i = 0; i < x->op_count; i++)
        if (x->operands[i].type == ARM64_OP_MEM && x->writeback &&
            a64_special(x->operands[i].mem.base))
            return true;
    return false;
}

static int64_t a64_mem_disp(const cs_arm64 *x)
{
    for (int i = 0; i < x->op_count; i++)
        if (x->operands[i].type == ARM64_OP_MEM)
            return x->operands[i].mem.disp;
    return 0;
}

static bool a64_jumps_out(const cs_insn *insn, const struct unw_code *f)
{
    const cs_arm64 *x = &insn->detail->arm64;
    if (x->op_count != 1 || x->operands[0].type != ARM64_OP_IMM)
        return true;
    return (uint64_t)x->operands[0].imm - f->start >= f->len;
}

static enum unw_fp_state a64_state_at(csh h, const struct unw_code *f, uint64_t pc, uint64_t *push)
{
    enum unw_fp_state st = UNW_FP_AT_ENTRY;
    const uint8_t *code = f->code;
    size_t len = f->len;
    uint64_t addr = f->start;
    cs_insn *insn = cs_malloc(h);
    if (insn == NULL)
        return UNW_FP_UNKNOWN;
    while (st != UNW_FP_UNKNOWN && addr < pc) {
        if (!cs_disasm_iter(h, &code, &len, &addr, insn)) {
            st = UNW_FP_UNKNOWN;
            break;
        }
        const cs_arm64 *x = &insn->detail->arm64;
        bool special = a64_writes_special(h, insn);
        bool jump = cs_insn_group(h, insn, CS_GRP_JUMP) || insn->id == ARM64_INS_RET;
        switch (st) {
        case UNW_FP_AT_ENTRY:
            /* the record pushed at sp - N, sp moved there: the caller's x29 and x30 at [sp] */
            if (insn->id == ARM64_INS_STP && a64_is(x, 0, ARM64_REG_X29) &&
                a64_is(x, 1, ARM64_REG_X30) && x->writeback && x->op_count == 3 &&
                x->operands[2].type == ARM64_OP_MEM && x->operands[2].mem.base == ARM64_REG_SP &&
                a64_mem_disp(x) < 0) {
                st = UNW_FP_PUSHED;
                *push = (uint64_t)-a64_mem_disp(x);
            } else if (special || jump) {
                st = UNW_FP_UNKNOWN;
            }
            break;
        case UNW_FP_PUSHED:
            if (insn->id == ARM64_INS_MOV && a64_is(x, 0, ARM64_REG_X29) &&
                a64_is(x, 1, ARM64_REG_SP))
                st = UNW_FP_FRAMED;
            else if (special || jump)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_FRAMED:
            /* ldp x29, x30, [sp], #N: x29, x30 and sp are the caller's again */
            if (insn->id == ARM64_INS_LDP && a64_is(x, 0, ARM64_REG_X29) &&
                a64_is(x, 1, ARM64_REG_X30) && x->writeback && x->op_count >= 3 &&
                x->operands[2].type == ARM64_OP_MEM && x->operands[2].mem.base == ARM64_REG_SP &&
                a64_mem_disp(x) == 0)
                st = UNW_FP_POPPED;
            else if (special && !cs_insn_group(h, insn, CS_GRP_CALL) &&
                     !(x->op_count > 0 && x->operands[0].type == ARM64_OP_REG &&
                       (x->operands[0].reg == ARM64_REG_SP)))
                st = UNW_FP_UNKNOWN; /* x29 or x30 rewritten in the body */
            break;
        case UNW_FP_POPPED:
            if (insn->id == ARM64_INS_RET ||
                (insn->id == ARM64_INS_B && x->cc == ARM64_CC_INVALID && a64_jumps_out(insn, f)))
                st = UNW_FP_FRAMED;
            else if (special || jump)
                st = UNW_FP_UNKNOWN;
            break;
        default:
            break;
        }
    }
    if (addr != pc)
        st = UNW_FP_UNKNOWN;
    cs_free(insn, 1);
    return st;
}

/* A leaf that never writes sp, x29 or x30: its return address stays in x30. */
static bool a64_is_plain_leaf(csh h, const struct unw_code *f)
{
    const uint8_t *code = f->code;
    size_t len = f->len;
    uint64_t addr = f->start;
    cs_insn *insn = cs_malloc(h);
    bool plain = insn != NULL;
    while (plain && len > 0)
        plain = cs_disasm_iter(h, &code, &len, &addr, insn) && !a64_writes_special(h, insn);
    cs_free(insn, 1);
    return plain;
}

static enum unw_fp_state aarch64_fp_state(const struct unw_code *f, uint64_t pc, uint64_t *push)
{
    csh h;
    *push = 16;
    if (cs_open(CS_ARCH_ARM64, CS_MODE_LITTLE_ENDIAN, &h) != CS_ERR_OK)
        return UNW_FP_UNKNOWN;
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    enum unw_fp_state st = a64_state_at(h, f, pc, push);
    if (st == UNW_FP_UNKNOWN && a64_is_plain_leaf(h, f))
        st = UNW_FP_AT_ENTRY;
    cs_close(&h);
    return st;
}

/* The instruction before ra is bl callee, or blr. */
static bool aarch64_call_before(const struct unw_code *caller, uint64_t ra, uint64_t callee)
{
    if (ra - caller->start < 4)
        return false;
    csh h;
    if (cs_open(CS_ARCH_ARM64, CS_MODE_LITTLE_ENDIAN, &h) != CS_ERR_OK)
        return false;
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    cs_insn *insn = cs_malloc(h);
    const uint8_t *code = caller->code + (ra - 4 - caller->start);
    size_t len = 4;
    uint64_t addr = ra - 4;
    bool found = insn && cs_disasm_iter(h, &code, &len, &addr, insn) &&
                 (insn->id == ARM64_INS_BLR ||
                  (insn->id == ARM64_INS_BL && insn->detail->arm64.op_count == 1 &&
                   insn->detail->arm64.operands[0].type == ARM64_OP_IMM &&
                   (uint64_t)insn->detail->arm64.operands[0].imm == callee));
    cs_free(insn, 1);
    cs_close(&h);
    return found;
}

static const struct unw_fp_rule fp_rule = {.state_at = aarch64_fp_state,
                                           .call_before = aarch64_call_before,
                                           .fp_reg = 29,
                                           .ra_reg = 30,
                                           .saved_fp = 0,
                                           .saved_ra = 8};

/* x0..x30 and sp (31), the pc in slot 32 (libdwfl's aarch64 backend takes it apart; x30 is the
 * link register). 52-bit virtual addresses at most (VMSAv8-64 with FEAT_LVA/LPA2): a 48-bit
 * guest's pcs sign-extend from bit 51 too. */
static const char *const dwarf_names[32] = {
    "x0",  "x1",  "x2",  "x3",  "x4",  "x5",  "x6",  "x7",  "x8",  "x9",  "x10",
    "x11", "x12", "x13", "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21",
    "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", "x30", "sp",
};

static const struct unw_machine unwind_machine = {
    .elf_machine = EM_AARCH64,
    .name = "aarch64",
    .nregs = 32,
    .pc_slot = A64_SLOT_PC,
    .sp_slot = A64_SLOT_SP,
    .va_bits = 52,
    .link_register = true,
    /* libdwfl's aarch64 backend takes [x29], [x29+8] as the caller wherever there is no CFI */
    .fp_guess_untrusted = true,
    .trap_pc_column = true,
    .trap_sp_column = true,
    .fp = &fp_rule,
    .reg_names = dwarf_names,
};

/* The demo ABI's aarch64 frame: x0..x30 then sp are its first 32 words, in their DWARF order
 * (slots 0..31), and the pc follows in slot 32. */
static uint64_t abi_frame_regs(const void *frame, struct unw_regs *u)
{
    struct qprof_abi_regs_aarch64 f;
    memcpy(&f, frame, sizeof f);
    for (int x = 0; x < 31; x++)
        u->r[x] = f.x[x];
    u->r[A64_SLOT_SP] = f.sp;
    u->r[A64_SLOT_PC] = f.pc;
    return f.pc;
}

static bool capstone_open(size_t *handle)
{
    return cs_open(CS_ARCH_ARM64, CS_MODE_LITTLE_ENDIAN, handle) == CS_ERR_OK;
}

/* virt: RAM from 1 GiB. */
static const struct prof_arch_ram_layout usual_ram = {.base = 0x40000000};

/* TTBR0_EL1: the ASID (63..48) and CnP (0) beside the table's address. A kernel with software
 * TTBR0 PAN holds a reserved table there at EL1, which names no mm's table: right, as user
 * memory is not mapped then. */
static bool root_names_table(uint64_t ttbr0, uint64_t table_pa)
{
    return (ttbr0 & ADDR_MASK) == table_pa;
}

const struct prof_arch prof_arch_aarch64 = {
    .name = "aarch64",
    .elf_machine = EM_AARCH64,
    /* TTBR0 below 2^48, TTBR1 from 0xffff000000000000 (the widest halves, 48-bit; smaller
     * TnSZ halves lie inside them). */
    .split = {.user_end = UINT64_C(0x0001000000000000),
              .kernel_start = UINT64_C(0xffff000000000000)},
    .pc_reg = A64_SLOT_PC,
    .sp_reg = A64_SLOT_SP,
    .user_privilege = 3,
    /* TTBR0's table address; the ASID (63..48) and CnP (0) say nothing of the address space. */
    .as_root_mask = ADDR_MASK,
    .root_names_table = root_names_table,
    .page_walk = page_walk,
    .page_walk_mmu = page_walk_mmu,
    /* stp x29, x30, [sp, #-16]!; mov x29, sp: the caller's x29 at [x29], the return address
     * at [x29+8]. */
    .frame = {.fp_reg = A64_SLOT_FP, .saved_fp = 0, .saved_ra = 8},
    /* QEMU translates a debugger's access with the vCPU's own regime and permissions: at EL0, the
     * kernel's EL1-only pages fault */
    .gdb_reads_by_privilege = true,
    .gdb_arch = "aarch64",
    .gdb_regs = gdb_regs,
    .n_gdb_regs = sizeof gdb_regs / sizeof gdb_regs[0],
    .gdb_state_regs = gdb_state_regs,
    .gdb_root_reg = "TTBR0_EL1",
    .capture_mode_reg = "cpsr", /* PSTATE.EL, bits 3:2: EL0 is user */
    .capture_mode_mask = 0xc,
    .capture_mode_user = 0,
    .cpu_state = cpu_state,
    .monitor_parse = monitor_parse,
    .monitor_cpu_state = monitor_cpu_state,
    .monitor_translated = true,
    .usual_ram = &usual_ram,
    .capstone_open = capstone_open,
    .unwind = &unwind_machine,
    .capture_user_sp_reg = "SP_EL0",
    .abi_frame = {.regs_arch = QPROF_ABI_ARCH_AARCH64,
                  .size = sizeof(struct qprof_abi_regs_aarch64),
                  .sp_off = offsetof(struct qprof_abi_regs_aarch64, sp),
                  .to_regs = abi_frame_regs},
};
