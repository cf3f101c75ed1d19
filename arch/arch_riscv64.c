/* riscv64: the privilege mode from QEMU's virtual `priv` register, the Sv39/Sv48/Sv57 page walk
 * from satp, the address halves, the s0-based frame chain, the gdbstub's register names.
 *
 * Register slots are the DWARF numbers x0..x31 (0..31); RISC-V's DWARF has no number for the
 * pc, so it takes slot 32. Privilege is folded onto the "0 is most privileged" scale of
 * struct prof_vcpu: M-mode 0, S-mode 2, U-mode 3. */
#include "arch.h"
#include "unwind.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>

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
 * `levels` entries, so a table that points back at itself ends it like any other bad entry. */
static int page_walk(uint64_t satp, uint64_t vaddr, prof_arch_phys_read_fn read_phys, void *ctx,
                     uint64_t *paddr, uint64_t *page_size)
{
    int levels = mode_levels(satp);
    if (levels < 0)
        return -ENOTSUP;
    if (levels == 0) { /* Bare: no translation */
        *paddr = vaddr;
        *page_size = 4096;
        return 0;
    }
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
            uint64_t size = UINT64_C(1) << shift;
            if ((ppn << 12) & (size - 1))
                return -EFAULT; /* a misaligned superpage faults on hardware too */
            *paddr = (ppn << 12) | (vaddr & (size - 1));
            *page_size = size;
            return 0;
        }
        table = ppn << 12;
    }
    return -EFAULT; /* a pointer where the last level needs a leaf */
}

/* QEMU's riscv-64bit-cpu.xml names x8 "fp". */
static const struct prof_arch_reg gdb_regs[] = {
    {"ra", 1},  {"sp", 2},  {"gp", 3},  {"tp", 4},         {"t0", 5},   {"t1", 6},   {"t2", 7},
    {"fp", 8},  {"s1", 9},  {"a0", 10}, {"a1", 11},        {"a2", 12},  {"a3", 13},  {"a4", 14},
    {"a5", 15}, {"a6", 16}, {"a7", 17}, {"s2", 18},        {"s3", 19},  {"s4", 20},  {"s5", 21},
    {"s6", 22}, {"s7", 23}, {"s8", 24}, {"s9", 25},        {"s10", 26}, {"s11", 27}, {"t3", 28},
    {"t4", 29}, {"t5", 30}, {"t6", 31}, {"pc", RV_SLOT_PC}};

static const char *const gdb_state_regs[] = {"priv", "satp", "sepc", NULL};

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
    return 0;
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
    .cpu_state = cpu_state,
};
