/* riscv64: the privilege mode from QEMU's virtual `priv` register, the Sv39/Sv48/Sv57 page walk
 * from satp, the address halves, the s0-based frame chain, the gdbstub's register names.
 *
 * Register slots are the DWARF numbers x0..x31 (0..31); RISC-V's DWARF has no number for the
 * pc, so it takes slot 32. Privilege is folded onto the "0 is most privileged" scale of
 * struct prof_vcpu: M-mode 0, S-mode 2, U-mode 3. */
#include "arch.h"
#include "qprof/guest_abi.h"
#include "unwind.h"

#include <elf.h>
#include <errno.h>
#include <ctype.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define RV_SLOT_SP 2
#define RV_SLOT_FP 8
#define RV_SLOT_PC 32

/* satp: MODE in bits 63..60, ASID in 59..44, the root table's PPN in 43..0. */
#define SATP_MODE_SHIFT 60
#define SATP_PPN_MASK   UINT64_C(0x00000fffffffffff)
enum { SATP_BARE = 0, SATP_SV39 = 8, SATP_SV48 = 9, SATP_SV57 = 10 };

#define PTE_V         (UINT64_C(1) << 0)
#define PTE_R         (UINT64_C(1) << 1)
#define PTE_W         (UINT64_C(1) << 2)
#define PTE_X         (UINT64_C(1) << 3)
#define PTE_U         (UINT64_C(1) << 4)
#define PTE_PPN_SHIFT 10
#define PTE_PPN_MASK  UINT64_C(0x00000fffffffffff) /* bits 53..10, after the shift */

/* The levels of a mode's tables, 0 for Bare, -1 for a mode qprof has no walk for. */
static int mode_levels(uint64_t satp)
{
    switch (satp >> SATP_MODE_SHIFT) {
    case SATP_BARE:
        return 0;
    case SATP_SV39:
        return 3;
    case SATP_SV48:
        return 4;
    case SATP_SV57:
        return 5;
    default:
        return -1;
    }
}

/* Each level takes 9 bits of the address above the 12-bit page offset; the walk reads at most
 * `levels` entries, so a table that points back at itself ends it like any other bad entry.
 * Finds the leaf entry for vaddr and the shift of its page size. */
static int walk_leaf(uint64_t satp, int levels, uint64_t vaddr, prof_arch_phys_read_fn read_phys,
                     void *ctx, uint64_t *leaf, int *leaf_shift)
{
    int va_bits = 12 + 9 * levels;
    /* Bits above the top one must copy it (Sv39: 63..39 equal to 38). */
    if ((uint64_t)((int64_t)(vaddr << (64 - va_bits)) >> (64 - va_bits)) != vaddr)
        return -EFAULT;
    uint64_t table = (satp & SATP_PPN_MASK) << 12;
    for (int level = levels - 1; level >= 0; level--) {
        int shift = 12 + 9 * level;
        uint64_t entry, index = (vaddr >> shift) & 511;
        if (read_phys(ctx, table + index * 8, &entry) < 0 || !(entry & PTE_V))
            return -EFAULT;
        if ((entry & PTE_W) && !(entry & PTE_R))
            return -EFAULT; /* reserved encoding */
        uint64_t ppn = (entry >> PTE_PPN_SHIFT) & PTE_PPN_MASK;
        if (entry & (PTE_R | PTE_X)) { /* a leaf: a 4 KiB page, or a megapage and up */
            if ((ppn << 12) & ((UINT64_C(1) << shift) - 1))
                return -EFAULT; /* a misaligned superpage faults on hardware too */
            *leaf = entry;
            *leaf_shift = shift;
            return 0;
        }
        table = ppn << 12;
    }
    return -EFAULT; /* a pointer where the last level needs a leaf */
}

static int page_walk(uint64_t satp, uint64_t vaddr, prof_arch_phys_read_fn read_phys, void *ctx,
                     uint64_t *paddr, uint64_t *page_size)
{
    int levels = mode_levels(satp), shift;
    uint64_t leaf;
    if (levels < 0)
        return -ENOTSUP;
    if (levels == 0) { /* Bare: no translation */
        *paddr = vaddr;
        *page_size = 4096;
        return 0;
    }
    int rc = walk_leaf(satp, levels, vaddr, read_phys, ctx, &leaf, &shift);
    if (rc)
        return rc;
    uint64_t size = UINT64_C(1) << shift, ppn = (leaf >> PTE_PPN_SHIFT) & PTE_PPN_MASK;
    *paddr = (ppn << 12) | (vaddr & (size - 1));
    *page_size = size;
    return 0;
}

/* QEMU's riscv-64bit-cpu.xml names x8 "fp". */
static const struct prof_arch_reg gdb_regs[] = {
    {"ra", 1},  {"sp", 2},  {"gp", 3},  {"tp", 4},         {"t0", 5},   {"t1", 6},   {"t2", 7},
    {"fp", 8},  {"s1", 9},  {"a0", 10}, {"a1", 11},        {"a2", 12},  {"a3", 13},  {"a4", 14},
    {"a5", 15}, {"a6", 16}, {"a7", 17}, {"s2", 18},        {"s3", 19},  {"s4", 20},  {"s5", 21},
    {"s6", 22}, {"s7", 23}, {"s8", 24}, {"s9", 25},        {"s10", 26}, {"s11", 27}, {"t3", 28},
    {"t4", 29}, {"t5", 30}, {"t6", 31}, {"pc", RV_SLOT_PC}};

static const char *const gdb_state_regs[] = {"priv", "satp", "sepc", "sscratch", NULL};

enum { PRIV_U = 0, PRIV_S = 1, PRIV_M = 3 };

/* priv is QEMU's virtual register (riscv-64bit-virtual.xml): the current mode, 0 U, 1 S, 3 M.
 * satp translates in S and U mode only. */
static int cpu_state(prof_arch_reg_fn get, void *ctx, struct prof_arch_cpu_state *st,
                     struct qp_error *err)
{
    uint64_t priv, satp = 0;
    if (get(ctx, "priv", &priv) < 0)
        return qp_error_set(err, -ENOENT,
                            "the gdbstub gives no `priv` register: qprof needs it to tell "
                            "user from kernel on riscv64");
    if (priv != PRIV_U && priv != PRIV_S && priv != PRIV_M)
        return qp_error_set(err, -EINVAL, "riscv64 priv %" PRIu64 " is no privilege mode", priv);
    bool has_satp = get(ctx, "satp", &satp) == 0;
    if (has_satp && mode_levels(satp) < 0)
        return qp_error_set(err, -ENOTSUP,
                            "riscv64 satp 0x%016" PRIx64 " has mode %" PRIu64
                            ", none of Bare, Sv39, Sv48, Sv57",
                            satp, satp >> SATP_MODE_SHIFT);
    st->privilege = priv == PRIV_M ? 0 : priv == PRIV_S ? 2 : 3;
    st->paging = has_satp && priv != PRIV_M && mode_levels(satp) > 0;
    st->as_root = satp;
    /* sepc: where an S-mode trap entry's CFI finds the interrupted pc before it saved it */
    st->has_trap_pc = priv == PRIV_S && get(ctx, "sepc", &st->trap_pc) == 0;
    /* tp: user TLS in U-mode, a kernel's own thread pointer in S-mode (Linux: current) */
    st->has_kernel_thread_reg = priv == PRIV_S && get(ctx, "tp", &st->kernel_thread_reg) == 0;
    st->has_kernel_thread_alt = priv != PRIV_M && get(ctx, "sscratch", &st->kernel_thread_alt) == 0;
    st->has_exception_pc = st->has_trap_pc, st->exception_pc = st->trap_pc;
    return 0;
}

/* ---- QMP: HMP `info registers -a` --------------------------------------------------------
 *
 * QEMU's riscv_cpu_dump_state (tests/data/qemu-transcripts/riscv64_info_registers_*.txt):
 *
 *   CPU#0
 *    V      =   0
 *    pc       ffffffc000000166
 *    satp     8000000000080004
 *    x0/zero  0000000000000000 x1/ra    ffffffc000000150 x2/sp    ffffffc000009fc0 ...
 *
 * Name and value pairs, several to a line, values in hex (V's in decimal, after '='). "xN/abi"
 * and "fN/abi" are kept under the ABI name, x8 under "fp" too (the gdbstub's name for it). A
 * value longer than 64 bits (a vector register) is skipped; any other value that is not hex,
 * or a line of odd pieces, is an error. */

#define MONITOR_MAX_TOKENS 32

static bool token_is(const struct prof_arch_token *t, bool (*ok)(unsigned char))
{
    for (size_t i = 0; i < t->len; i++)
        if (!ok((unsigned char)t->s[i]))
            return false;
    return t->len > 0;
}

static bool is_hex(unsigned char c)
{
    return isxdigit(c) != 0;
}

static bool is_name_char(unsigned char c)
{
    return isalnum(c) || c == '_';
}

/* One name and its value into cpu: 1 stored, 0 skipped (wider than 64 bits), -1 malformed. */
static int store_pair(struct prof_arch_monitor_cpu *cpu, struct prof_arch_token name,
                      struct prof_arch_token val)
{
    const char *slash = memchr(name.s, '/', name.len);
    if (slash) { /* "x1/ra": the ABI name */
        name.len -= (size_t)(slash + 1 - name.s);
        name.s = slash + 1;
    }
    if (!token_is(&name, is_name_char) || name.len >= sizeof cpu->regs[0].name ||
        !token_is(&val, is_hex))
        return -1;
    if (val.len > 16)
        return 0;
    char key[sizeof cpu->regs[0].name], digits[17];
    memcpy(key, name.s, name.len);
    key[name.len] = '\0';
    memcpy(digits, val.s, val.len);
    digits[val.len] = '\0';
    uint64_t v = strtoull(digits, NULL, 16);
    if (prof_arch_monitor_set(cpu, key, v) < 0)
        return 0; /* full: the registers qprof reads come first in QEMU's order */
    if (strcmp(key, "s0") == 0)
        prof_arch_monitor_set(cpu, "fp", v);
    return 1;
}

static int parse_monitor_line(void *block, const char *line, const char *end, struct qp_error *err)
{
    struct prof_arch_monitor_cpu *cpu = block;
    struct prof_arch_token t[MONITOR_MAX_TOKENS];
    int n = prof_arch_split_tokens(line, end, t, MONITOR_MAX_TOKENS);
    for (int i = 0; n > 0 && i < n;) {
        bool eq = i + 2 < n && t[i + 1].len == 1 && t[i + 1].s[0] == '='; /* "V      =   0" */
        if (i + 1 >= n || store_pair(cpu, t[i], t[eq ? i + 2 : i + 1]) < 0) {
            n = -1;
            break;
        }
        i += eq ? 3 : 2;
    }
    if (n < 0)
        return qp_error_set(err, -EPROTO,
                            "info registers (riscv64): cannot read \"%.*s\" as register names and "
                            "hex values",
                            (int)(end - line > 80 ? 80 : end - line), line);
    return 0;
}

static int finish_monitor_block(const void *block, struct qp_error *err)
{
    const struct prof_arch_monitor_cpu *cpu = block;
    static const char *const needed[] = {"pc", "sp", "satp"};
    uint64_t v;
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (prof_arch_monitor_reg((void *)cpu, needed[i], &v) < 0)
            return qp_error_set(err, -EPROTO,
                                "info registers: CPU#%d block lacks %s (is this a riscv64 guest?)",
                                cpu->cpu_index, needed[i]);
    return 0;
}

static void start_monitor_block(void *block, int cpu_index)
{
    struct prof_arch_monitor_cpu *cpu = block;
    cpu->cpu_index = cpu_index;
    cpu->halted = false;
    cpu->n_regs = 0;
}

static const struct prof_arch_monitor_blocks monitor_blocks = {
    .block_size = sizeof(struct prof_arch_monitor_cpu),
    .start = start_monitor_block,
    .line = parse_monitor_line,
    .finish = finish_monitor_block,
};

static int monitor_parse(const char *text, struct prof_arch_monitor_cpu *out, int max, int *n_cpus,
                         struct qp_error *err)
{
    return prof_arch_monitor_parse_blocks(&monitor_blocks, text, out, max, n_cpus, err);
}

#define RV_WFI 0x10500073u

/* Whether the instruction before pc is a wfi. QEMU leaves a hart that waits in wfi with pc
 * past it (its wfi sets pc to the next instruction, then halts), and a hart woken from it with
 * interrupts enabled is at its trap vector before it runs anything: so, in S or M mode, pc just
 * past a wfi is a halted hart (QEMU's text shows no halted state; the gdbstub's
 * qThreadExtraInfo does). The low half 0x0073 cannot end a compressed instruction, so the
 * four bytes are a wfi, not pieces of others, unless a 32-bit instruction at pc-6 ends in
 * 0x0073 and a compressed 0x1050 follows it: not an encoding compilers emit. */
static bool follows_wfi(uint64_t satp, int levels, uint64_t priv, uint64_t pc,
                        prof_arch_phys_read_fn read_phys, void *ctx)
{
    uint64_t at = pc - 4, pa = at, leaf, lo, hi;
    int shift;
    if (priv != PRIV_M && levels > 0) {
        if (walk_leaf(satp, levels, at, read_phys, ctx, &leaf, &shift) != 0)
            return false;
        uint64_t size = UINT64_C(1) << shift;
        pa = (((leaf >> PTE_PPN_SHIFT) & PTE_PPN_MASK) << 12) | (at & (size - 1));
    }
    /* two aligned words: the instruction may straddle them, never its page (pc - 4 is on it) */
    if (read_phys(ctx, pa & ~UINT64_C(7), &lo) < 0 ||
        read_phys(ctx, (pa + 2) & ~UINT64_C(7), &hi) < 0)
        return false;
    uint32_t insn = (uint32_t)((lo >> (8 * (pa & 7))) & 0xffff) |
                    (uint32_t)((hi >> (8 * ((pa + 2) & 7))) & 0xffff) << 16;
    return insn == RV_WFI;
}

/* QEMU's `info registers` prints no current privilege mode (mstatus's MPP and SPP are the
 * modes before the last trap, not the current one; checked against QEMU 7.2, and upstream's
 * riscv_cpu_dump_state prints none either), so it is inferred from where the hart fetches:
 * with satp's mode not Bare, both S and U mode fetch pc through satp's tables, U mode only from
 * a page with U=1 and S mode never from one. So the leaf for pc says it: U=1 is U mode, U=0 S
 * mode, and a pc that does not translate is M mode (M mode alone fetches without satp). The
 * rule misreads an M-mode pc at an address that the current satp maps: as user when the
 * process maps it executable for U, as kernel otherwise (the demo guest runs M mode only
 * before it enables paging). With satp Bare nothing tells S from U or M: taken for S. A
 * monitor that prints a `priv` (none known yet) is believed instead. */
static int monitor_complete(struct prof_arch_monitor_cpu *cpu, prof_arch_phys_read_fn read_phys,
                            void *ctx, struct qp_error *err)
{
    uint64_t priv, satp = 0, pc = 0, leaf;
    prof_arch_monitor_reg(cpu, "satp", &satp);
    prof_arch_monitor_reg(cpu, "pc", &pc);
    int levels = mode_levels(satp), shift;
    if (prof_arch_monitor_reg(cpu, "priv", &priv) == 0) {
        cpu->halted = priv != PRIV_U && follows_wfi(satp, levels, priv, pc, read_phys, ctx);
        return 0;
    }
    priv = PRIV_S; /* Bare, or a mode cpu_state refuses in its own words */
    if (levels > 0)
        priv = walk_leaf(satp, levels, pc, read_phys, ctx, &leaf, &shift) != 0 ? PRIV_M
               : (leaf & PTE_U)                                                ? PRIV_U
                                                                               : PRIV_S;
    if (prof_arch_monitor_set(cpu, "priv", priv) < 0)
        return qp_error_set(err, -ENOSPC, "info registers: CPU#%d prints too many registers",
                            cpu->cpu_index);
    cpu->halted = priv != PRIV_U && follows_wfi(satp, levels, priv, pc, read_phys, ctx);
    return 0;
}

/* ---- riscv64: addi sp, sp, -N; sd ra, N-8(sp); sd s0, N-16(sp); addi s0, sp, N --------------
 * capstone 4 has no RISC-V: the few instructions that matter are decoded here, RV64GC's 32-bit
 * and compressed forms; every other instruction only says which register it writes. A leaf
 * saves only s0, at N-8, and keeps its return address in ra. */

enum { RV_RA = 1, RV_SP = 2, RV_S0 = 8 };

struct rv_insn {
    unsigned len;
    int rd;     /* the integer register written, -1 none */
    bool addi;  /* addi rd, rs1, imm (c.addi, c.addi16sp, c.addi4spn, c.mv as imm 0) */
    bool store; /* sd rs2, imm(rs1) */
    bool load;  /* ld rd, imm(rs1) */
    bool jump;  /* any jump or branch */
    bool ret;   /* jalr x0, 0(ra) */
    bool call;  /* jal/jalr writing ra */
    bool jal;   /* jal ra, imm (target pc + imm) */
    bool auipc; /* auipc rd, imm (imm already shifted) */
    int rs1, rs2;
    int64_t imm;
};

static int64_t sext(uint64_t v, unsigned bits)
{
    uint64_t m = UINT64_C(1) << (bits - 1);
    return (int64_t)((v ^ m) - m);
}

static void rv_decode32(uint32_t x, struct rv_insn *d)
{
    unsigned op = x & 0x7f, f3 = (x >> 12) & 7, rd = (x >> 7) & 31;
    d->rs1 = (int)((x >> 15) & 31);
    d->rs2 = (int)((x >> 20) & 31);
    switch (op) {
    case 0x23: /* STORE */
        d->store = f3 == 3;
        d->imm = sext(((x >> 25) << 5) | ((x >> 7) & 31), 12);
        return;
    case 0x63: /* BRANCH */
        d->jump = true;
        return;
    case 0x27: /* STORE-FP */
    case 0x07: /* LOAD-FP: writes an f register */
    case 0x0f: /* FENCE */
        return;
    case 0x6f: /* JAL */
        d->rd = (int)rd;
        d->jump = true;
        d->call = d->jal = rd == RV_RA;
        d->imm = sext(((x >> 31) << 20) | (((x >> 12) & 0xff) << 12) | (((x >> 20) & 1) << 11) |
                          (((x >> 21) & 0x3ff) << 1),
                      21);
        return;
    case 0x67: /* JALR */
        d->rd = (int)rd;
        d->jump = true;
        d->call = rd == RV_RA;
        d->imm = sext(x >> 20, 12);
        d->ret = rd == 0 && d->rs1 == RV_RA && d->imm == 0;
        return;
    case 0x17: /* AUIPC */
        d->rd = (int)rd;
        d->auipc = true;
        d->imm = sext(x & 0xfffff000u, 32);
        return;
    default:
        break;
    }
    d->rd = (int)rd; /* every other major opcode writes rd, or is taken to */
    d->imm = sext(x >> 20, 12);
    d->addi = op == 0x13 && f3 == 0;
    d->load = op == 0x03 && f3 == 3;
}

static void rv_decode16(uint16_t x, struct rv_insn *d)
{
    unsigned q = x & 3, f3 = (x >> 13) & 7, r = (x >> 7) & 31, rs2 = (x >> 2) & 31;
    int rdp = 8 + (int)((x >> 2) & 7), rs1p = 8 + (int)((x >> 7) & 7);
    if (q == 0) {
        if (f3 == 0) { /* c.addi4spn rd', sp, imm */
            d->rd = rdp;
            d->addi = true;
            d->rs1 = RV_SP;
            d->imm = ((x >> 7) & 0x30) | ((x >> 1) & 0x3c0) | ((x >> 4) & 0x4) | ((x >> 2) & 0x8);
        } else if (f3 <= 3) { /* c.fld, c.lw, c.ld */
            d->rd = f3 == 1 ? -1 : rdp;
        }
        (void)rs1p;
        return;
    }
    if (q == 1) {
        switch (f3) {
        case 0: /* c.addi */
        case 1: /* c.addiw */
        case 2: /* c.li */
            d->rd = (int)r;
            d->addi = f3 == 0;
            d->rs1 = (int)r;
            d->imm = sext(((x >> 7) & 0x20) | ((x >> 2) & 0x1f), 6);
            return;
        case 3:
            d->rd = (int)r;
            if (r == RV_SP) { /* c.addi16sp */
                d->addi = true;
                d->rs1 = RV_SP;
                d->imm = sext(((x >> 3) & 0x200) | ((x >> 2) & 0x10) | ((x << 1) & 0x40) |
                                  ((x << 4) & 0x180) | ((x << 3) & 0x20),
                              10);
            }
            return;
        case 4: /* arithmetic on rd' */
            d->rd = rs1p;
            return;
        default: /* c.j, c.beqz, c.bnez */
            d->jump = true;
            return;
        }
    }
    if (q == 2) {
        switch (f3) {
        case 0: /* c.slli */
        case 2: /* c.lwsp */
            d->rd = (int)r;
            return;
        case 3: /* c.ldsp */
            d->rd = (int)r;
            d->load = true;
            d->rs1 = RV_SP;
            d->imm = ((x >> 7) & 0x20) | ((x >> 2) & 0x18) | ((x << 4) & 0x1c0);
            return;
        case 4:
            if (rs2 != 0) { /* c.mv, c.add */
                d->rd = (int)r;
                d->addi = ((x >> 12) & 1) == 0; /* c.mv rd, rs2: addi rd, rs2, 0 */
                d->rs1 = (int)rs2;
                d->imm = 0;
            } else if (((x >> 12) & 1) == 0) { /* c.jr */
                d->jump = true;
                d->ret = r == RV_RA;
            } else if (r != 0) { /* c.jalr */
                d->jump = d->call = true;
                d->rd = RV_RA;
            }
            return;
        case 7: /* c.sdsp */
            d->store = true;
            d->rs1 = RV_SP;
            d->rs2 = (int)rs2;
            d->imm = ((x >> 7) & 0x38) | ((x >> 1) & 0x1c0);
            return;
        default: /* c.fldsp, c.fsdsp, c.swsp */
            return;
        }
    }
}

static bool rv_decode(const struct unw_code *f, uint64_t addr, struct rv_insn *d)
{
    uint64_t off = addr - f->start;
    *d = (struct rv_insn){.rd = -1, .rs1 = -1, .rs2 = -1};
    if (off + 2 > f->len)
        return false;
    uint16_t lo = (uint16_t)(f->code[off] | f->code[off + 1] << 8);
    if ((lo & 3) != 3) {
        d->len = 2;
        rv_decode16(lo, d);
        return lo != 0; /* all zero: not an instruction */
    }
    if (off + 4 > f->len)
        return false;
    d->len = 4;
    rv_decode32(lo | (uint32_t)(f->code[off + 2] | f->code[off + 3] << 8) << 16, d);
    return true;
}

static enum unw_fp_state riscv64_fp_state(const struct unw_code *f, uint64_t pc, uint64_t *push)
{
    enum unw_fp_state st = UNW_FP_AT_ENTRY;
    int64_t alloc = 0;
    bool ra_saved = false, ra_in_reg = true;
    int64_t s0_off = -1;
    uint64_t addr = f->start;
    *push = 0;
    while (st != UNW_FP_UNKNOWN && addr < pc) {
        struct rv_insn d;
        if (!rv_decode(f, addr, &d))
            return UNW_FP_UNKNOWN;
        addr += d.len;
        bool w_sp = d.rd == RV_SP, w_s0 = d.rd == RV_S0, w_ra = d.rd == RV_RA;
        switch (st) {
        case UNW_FP_AT_ENTRY:
            if (d.addi && w_sp && d.rs1 == RV_SP && alloc == 0 && d.imm < 0)
                alloc = -d.imm;
            else if (d.store && d.rs1 == RV_SP && d.rs2 == RV_RA && d.imm == alloc - 8)
                ra_saved = true;
            else if (d.store && d.rs1 == RV_SP && d.rs2 == RV_S0)
                s0_off = d.imm;
            else if (d.addi && w_s0 && d.rs1 == RV_SP && alloc > 0 && d.imm == alloc)
                st = ra_saved && s0_off == alloc - 16   ? UNW_FP_FRAMED
                     : !ra_saved && s0_off == alloc - 8 ? UNW_FP_FRAMED_LEAF
                                                        : UNW_FP_UNKNOWN;
            else if (w_sp || w_s0 || w_ra || d.jump)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_FRAMED:
        case UNW_FP_FRAMED_LEAF:
            if (d.load && w_s0 && d.rs1 == RV_SP)
                st = st == UNW_FP_FRAMED_LEAF || ra_in_reg ? UNW_FP_POPPED : UNW_FP_UNKNOWN;
            else if (d.load && w_ra && d.rs1 == RV_SP && st == UNW_FP_FRAMED)
                ra_in_reg = true;
            else if (w_s0 || (w_ra && st == UNW_FP_FRAMED_LEAF))
                st = UNW_FP_UNKNOWN;
            else if (w_ra)
                ra_in_reg = false; /* a call, or auipc ra for one: ra is in the record */
            break;
        case UNW_FP_POPPED:
            if (d.ret) {
                st = UNW_FP_FRAMED;
                ra_in_reg = false;
            } else if (w_s0 || w_ra || d.jump) {
                st = UNW_FP_UNKNOWN;
            }
            break;
        default:
            break;
        }
        /* after a ret, the code is reached from the body: a leaf's stays a leaf's */
        if (st == UNW_FP_FRAMED && !ra_saved)
            st = UNW_FP_FRAMED_LEAF;
    }
    if (addr != pc)
        return UNW_FP_UNKNOWN;
    return st;
}

/* The instructions before ra are auipc ra, hi; jalr ra, lo(ra) calling callee, jal ra, callee,
 * or a jalr/c.jalr with a register target. */
static bool riscv64_call_before(const struct unw_code *caller, uint64_t ra, uint64_t callee)
{
    struct rv_insn d, a;
    if (ra - caller->start >= 4 && rv_decode(caller, ra - 4, &d) && d.len == 4 && d.call) {
        if (d.jal)
            return ra - 4 + (uint64_t)d.imm == callee;
        if (ra - caller->start >= 8 && rv_decode(caller, ra - 8, &a) && a.len == 4 && a.auipc &&
            a.rd == d.rs1)
            return ra - 8 + (uint64_t)a.imm + (uint64_t)d.imm == callee;
        return true; /* jalr through a register loaded otherwise */
    }
    return ra - caller->start >= 2 && rv_decode(caller, ra - 2, &d) && d.len == 2 && d.call;
}

static const struct unw_fp_rule fp_rule = {.state_at = riscv64_fp_state,
                                           .call_before = riscv64_call_before,
                                           .fp_reg = RV_S0,
                                           .ra_reg = RV_RA,
                                           .saved_fp = -16,
                                           .saved_ra = -8,
                                           .leaf_saved_fp = -8};

/* x0..x31, the pc in slot 32 (RISC-V's DWARF has no number for it; libdwfl takes it apart from
 * the registers). Sv57 at most: Sv39's and Sv48's pcs sign-extend from bit 56 too. */
static const char *const dwarf_names[32] = {
    "zero", "ra", "sp", "gp", "tp",  "t0",  "t1", "t2", "fp", "s1", "a0",
    "a1",   "a2", "a3", "a4", "a5",  "a6",  "a7", "s2", "s3", "s4", "s5",
    "s6",   "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6",
};

static const struct unw_machine unwind_machine = {
    .elf_machine = EM_RISCV,
    .name = "riscv64",
    .nregs = 32,
    .pc_slot = RV_SLOT_PC,
    .sp_slot = RV_SLOT_SP,
    .va_bits = 57,
    .link_register = true,
    .trap_pc_column = true,
    .fp = &fp_rule,
    .reg_names = dwarf_names,
};

/* The demo ABI's riscv64 frame: the words after pc are x1..x31 in order, which are their DWARF
 * numbers; the pc takes slot 32. x0 reads as zero. */
static uint64_t abi_frame_regs(const void *frame, struct unw_regs *u)
{
    struct qprof_abi_regs_riscv64 f;
    memcpy(&f, frame, sizeof f);
    const uint64_t *words = &f.pc;
    for (int x = 1; x < 32; x++)
        u->r[x] = words[x];
    u->r[RV_SLOT_PC] = f.pc;
    return f.pc;
}

/* virt: RAM from 2 GiB. */
static const struct prof_arch_ram_layout usual_ram = {.base = 0x80000000};

/* satp holds the table's page number beside its mode and ASID; Bare names no table. */
static bool root_names_table(uint64_t satp, uint64_t table_pa)
{
    return mode_levels(satp) > 0 && (satp & SATP_PPN_MASK) << 12 == table_pa;
}

const struct prof_arch prof_arch_riscv64 = {
    .name = "riscv64",
    .elf_machine = EM_RISCV,
    /* Sv57's halves, which hold Sv39's and Sv48's: user code below 2^56, the kernel in the
     * sign-extended top (Sv39 kernels from 0xffffffc000000000, inside it). */
    .split = {.user_end = UINT64_C(0x0100000000000000),
              .kernel_start = UINT64_C(0xff00000000000000)},
    .pc_reg = RV_SLOT_PC,
    .sp_reg = RV_SLOT_SP,
    .user_privilege = 3,
    .as_root_mask = SATP_PPN_MASK,
    .root_names_table = root_names_table,
    .page_walk = page_walk,
    /* The standard prologue (addi sp,sp,-16; sd ra,8(sp); sd s0,0(sp); addi s0,sp,16): s0
     * points above the saved pair, the return address at fp-8, the caller's fp at fp-16. */
    .frame = {.fp_reg = RV_SLOT_FP, .saved_fp = -16, .saved_ra = -8},
    .gdb_reads_by_privilege = true,
    .gdb_arch = "riscv:rv64",
    .gdb_regs = gdb_regs,
    .n_gdb_regs = sizeof gdb_regs / sizeof gdb_regs[0],
    .gdb_state_regs = gdb_state_regs,
    .gdb_root_reg = "satp",
    .capture_mode_reg = "priv", /* QEMU's virtual register: 0 U, 1 S, 3 M */
    .capture_mode_mask = 3,
    .capture_mode_user = 0,
    .cpu_state = cpu_state,
    .monitor_parse = monitor_parse,
    .monitor_complete = monitor_complete,
    .usual_ram = &usual_ram,
    .unwind = &unwind_machine,
    .abi_frame = {.regs_arch = QPROF_ABI_ARCH_RISCV64,
                  .size = sizeof(struct qprof_abi_regs_riscv64),
                  .sp_off = offsetof(struct qprof_abi_regs_riscv64, sp),
                  .to_regs = abi_frame_regs},
};
