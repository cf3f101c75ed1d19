/* x86_64: canonical halves, CPL 3, CR3, the 4-level page walk, the gdbstub's register names. */
#include "arch_x86_64.h"
#include "qprof/guest_abi.h"
#include "unwind.h"

#include <capstone/capstone.h>

#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#define PTE_PRESENT 0x1ull
#define PTE_HUGE    0x80ull
#define PTE_ADDR    0x000ffffffffff000ull /* bits 51..12; NX and flag bits masked off */

/* 4 KiB, 2 MiB and 1 GiB pages. */
static int page_walk(uint64_t cr3, uint64_t vaddr, prof_arch_phys_read_fn read_phys, void *ctx,
                     uint64_t *paddr, uint64_t *page_size)
{
    static const int shifts[] = {39, 30, 21, 12};
    if ((uint64_t)((int64_t)(vaddr << 16) >> 16) != vaddr)
        return -EFAULT; /* non-canonical */
    uint64_t table = cr3 & PTE_ADDR;
    for (int level = 0; level < 4; level++) {
        uint64_t entry, size = 1ull << shifts[level];
        uint64_t index = (vaddr >> shifts[level]) & 511;
        if (read_phys(ctx, table + index * 8, &entry) < 0 || !(entry & PTE_PRESENT))
            return -EFAULT;
        table = entry & PTE_ADDR;
        /* PS in a PDPTE (1 GiB) or PDE (2 MiB) ends the walk; level 3 is always a 4 KiB page. */
        if (level == 3 || ((level == 1 || level == 2) && (entry & PTE_HUGE))) {
            *paddr = (table & ~(size - 1)) | (vaddr & (size - 1));
            *page_size = size;
            return 0;
        }
    }
    return -EFAULT;
}

static const struct prof_arch_reg gdb_regs[] = {
    {"rax", UNW_RAX}, {"rdx", UNW_RDX}, {"rcx", UNW_RCX}, {"rbx", UNW_RBX}, {"rsi", UNW_RSI},
    {"rdi", UNW_RDI}, {"rbp", UNW_RBP}, {"rsp", UNW_RSP}, {"r8", UNW_R8},   {"r9", UNW_R9},
    {"r10", UNW_R10}, {"r11", UNW_R11}, {"r12", UNW_R12}, {"r13", UNW_R13}, {"r14", UNW_R14},
    {"r15", UNW_R15}, {"rip", UNW_RIP}};

static const char *const gdb_state_regs[] = {"cs", "cr0", "cr3", "efer", "cr4", NULL};

/* Translation on in a mode the 4-level walk does not serve: 32-bit paging (CR0.PG without
 * EFER.LMA) or 5-level paging (CR4.LA57). */
static bool unwalkable(uint64_t cr0, uint64_t cr4, uint64_t efer)
{
    return ((cr0 & X86_CR0_PG) && !(efer & X86_EFER_LMA)) || (cr4 & X86_CR4_LA57);
}

/* CPL from CS; paging from CR0.PG and EFER.LMA, assumed on when the XML lacks them (QEMU's
 * i386-64bit.xml has both, and CR4 in its `g` reply). */
static int cpu_state(prof_arch_reg_fn get, void *ctx, struct prof_arch_cpu_state *st,
                     struct qp_error *err)
{
    uint64_t cs, cr0 = X86_CR0_PG, efer = X86_EFER_LMA, cr3 = 0, cr4 = 0;
    if (get(ctx, "cs", &cs) < 0)
        return qp_error_set(err, -ENOENT, "the target has no readable register cs");
    get(ctx, "cr0", &cr0);
    get(ctx, "efer", &efer);
    get(ctx, "cr3", &cr3);
    get(ctx, "cr4", &cr4);
    st->privilege = (int)(cs & 3);
    st->paging = (cr0 & X86_CR0_PG) && (efer & X86_EFER_LMA);
    st->as_root = cr3 & X86_CR3_ADDR_MASK;
    st->unwalkable = unwalkable(cr0, cr4, efer);
    return 0;
}

/* ---- x86_64: push %rbp; mov %rsp,%rbp ---------------------------------------------------- */

static bool is_reg_op(const cs_x86 *x, int i, x86_reg reg)
{
    return x->op_count > i && x->operands[i].type == X86_OP_REG && x->operands[i].reg == reg;
}

static void writes_sp_fp(csh h, const cs_insn *insn, bool *sp, bool *fp)
{
    cs_regs rd, wr;
    uint8_t nrd, nwr;
    *sp = *fp = true; /* what capstone cannot tell us counts as written */
    if (cs_regs_access(h, insn, rd, &nrd, wr, &nwr) != CS_ERR_OK)
        return;
    *sp = *fp = false;
    for (unsigned i = 0; i < nwr; i++) {
        *sp = *sp || wr[i] == X86_REG_RSP || wr[i] == X86_REG_ESP || wr[i] == X86_REG_SP;
        *fp = *fp || wr[i] == X86_REG_RBP || wr[i] == X86_REG_EBP || wr[i] == X86_REG_BP;
    }
}

/* A jump whose target is outside the function (a tail call) or that has no fixed target. */
static bool jumps_out(const cs_insn *insn, const struct unw_code *f)
{
    const cs_x86 *x = &insn->detail->x86;
    if (x->op_count != 1 || x->operands[0].type != X86_OP_IMM)
        return true;
    return (uint64_t)x->operands[0].imm - f->start >= f->len;
}

/* A function that never moves sp nor writes rbp (a leaf without a record): its return address
 * is at [sp] and rbp is its caller's at every instruction. */
static bool x86_is_plain_leaf(csh h, const struct unw_code *f)
{
    const uint8_t *code = f->code;
    size_t len = f->len;
    uint64_t addr = f->start;
    cs_insn *insn = cs_malloc(h);
    bool plain = insn != NULL;
    while (plain && len > 0) {
        if (!cs_disasm_iter(h, &code, &len, &addr, insn)) {
            plain = false;
            break;
        }
        bool sp, fp;
        writes_sp_fp(h, insn, &sp, &fp);
        plain = !fp && (!sp || insn->id == X86_INS_RET);
    }
    cs_free(insn, 1);
    return plain;
}

/* The state of a function that starts with its frame record (after at most instructions that
 * touch neither sp nor rbp, endbr64 say), walked in address order up to pc. Code after an
 * epilogue's ret or tail jump is reached from the framed body (GCC keeps epilogues last on their
 * path); anything this does not follow (rbp written otherwise, a jump inside the function after
 * the record is popped, sp moved then) makes the rest unknown. */
static enum unw_fp_state x86_state_at(csh h, const struct unw_code *f, uint64_t pc)
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
        const cs_x86 *x = &insn->detail->x86;
        bool sp, fp;
        writes_sp_fp(h, insn, &sp, &fp);
        bool jump = insn->id == X86_INS_JMP || cs_insn_group(h, insn, CS_GRP_JUMP);
        switch (st) {
        case UNW_FP_AT_ENTRY:
            if (insn->id == X86_INS_PUSH && is_reg_op(x, 0, X86_REG_RBP))
                st = UNW_FP_PUSHED;
            else if (sp || fp || jump || insn->id == X86_INS_RET)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_PUSHED: /* GCC may schedule argument moves between push and mov */
            if (insn->id == X86_INS_MOV && is_reg_op(x, 0, X86_REG_RBP) &&
                is_reg_op(x, 1, X86_REG_RSP))
                st = UNW_FP_FRAMED;
            else if (sp || fp || jump || insn->id == X86_INS_RET)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_FRAMED:
            if (insn->id == X86_INS_LEAVE ||
                (insn->id == X86_INS_POP && is_reg_op(x, 0, X86_REG_RBP)))
                st = UNW_FP_POPPED;
            else if (fp)
                st = UNW_FP_UNKNOWN;
            break;
        case UNW_FP_POPPED:
            if (insn->id == X86_INS_RET || (insn->id == X86_INS_JMP && jumps_out(insn, f)))
                st = UNW_FP_FRAMED;
            else if (sp || fp || jump || cs_insn_group(h, insn, CS_GRP_CALL))
                st = UNW_FP_UNKNOWN;
            break;
        default:
            break;
        }
    }
    if (addr != pc)
        st = UNW_FP_UNKNOWN; /* pc is not at an instruction boundary */
    cs_free(insn, 1);
    return st;
}

static enum unw_fp_state x86_64_fp_state(const struct unw_code *f, uint64_t pc, uint64_t *push)
{
    *push = 16; /* rbp above the return address */
    csh h;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
        return UNW_FP_UNKNOWN;
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    enum unw_fp_state st = x86_state_at(h, f, pc);
    /* No record at the start: a leaf whose every instruction leaves sp and rbp alone. */
    if (st == UNW_FP_UNKNOWN && x86_is_plain_leaf(h, f))
        st = UNW_FP_AT_ENTRY;
    cs_close(&h);
    return st;
}

/* Whether the instruction that ends at ra is a call, and one to callee when it names its
 * target: a return address at [sp] is only one if it is. The CPU enters a trap stub with the
 * interrupted pc where a called function has its return address, and that pc follows no call
 * to the stub. */
static bool x86_64_call_before(const struct unw_code *caller, uint64_t ra, uint64_t callee)
{
    csh h;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
        return false;
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    cs_insn *insn = cs_malloc(h);
    bool found = false;
    for (uint64_t n = 2; insn && !found && n <= 7 && n <= ra - caller->start; n++) {
        const uint8_t *code = caller->code + (ra - n - caller->start);
        size_t len = n;
        uint64_t addr = ra - n;
        if (!cs_disasm_iter(h, &code, &len, &addr, insn) || len != 0 || insn->id != X86_INS_CALL)
            continue;
        const cs_x86 *x = &insn->detail->x86;
        found = x->op_count == 1 &&
                (x->operands[0].type != X86_OP_IMM || (uint64_t)x->operands[0].imm == callee);
    }
    cs_free(insn, 1);
    cs_close(&h);
    return found;
}

static const struct unw_fp_rule fp_rule = {.state_at = x86_64_fp_state,
                                           .call_before = x86_64_call_before,
                                           .fp_reg = UNW_RBP,
                                           .ra_reg = -1,
                                           .saved_fp = 0,
                                           .saved_ra = 8};

/* rax..r15 and rip: what libdwfl's x86_64 backend takes. 48-bit virtual addresses (4-level
 * paging, what qprof's x86_64 walks and Linux use unless the CPU and kernel enable LA57). */
static const struct unw_machine unwind_machine = {
    .elf_machine = EM_X86_64,
    .name = "x86_64",
    .nregs = UNW_X86_64_NREGS,
    .pc_slot = UNW_RIP,
    .sp_slot = UNW_RSP,
    .va_bits = 48,
    .fp = &fp_rule,
};

/* Where a capture inside QEMU finds the kernel's per-CPU area: GS_BASE after the entry's swapgs,
 * KERNEL_GS_BASE before it and in user mode. */
static const char *const capture_percpu_regs[] = {"gs_base", "k_gs_base", NULL};

/* The demo ABI's x86_64 frame: the general registers by name. */
static uint64_t abi_frame_regs(const void *frame, struct unw_regs *u)
{
    struct qprof_abi_regs f;
    memcpy(&f, frame, sizeof f);
    u->r[UNW_RAX] = f.rax, u->r[UNW_RDX] = f.rdx, u->r[UNW_RCX] = f.rcx;
    u->r[UNW_RBX] = f.rbx, u->r[UNW_RSI] = f.rsi, u->r[UNW_RDI] = f.rdi;
    u->r[UNW_RBP] = f.rbp, u->r[UNW_RSP] = f.rsp, u->r[UNW_R8] = f.r8;
    u->r[UNW_R9] = f.r9, u->r[UNW_R10] = f.r10, u->r[UNW_R11] = f.r11;
    u->r[UNW_R12] = f.r12, u->r[UNW_R13] = f.r13, u->r[UNW_R14] = f.r14;
    u->r[UNW_R15] = f.r15, u->r[UNW_RIP] = f.rip;
    return f.rip;
}

const struct prof_arch prof_arch_x86_64 = {
    .name = "x86_64",
    .elf_machine = EM_X86_64,
    /* User code below 0x0000800000000000, the kernel from 0xffff800000000000 up. */
    .split = {.user_end = UINT64_C(0x0000800000000000),
              .kernel_start = UINT64_C(0xffff800000000000)},
    .pc_reg = UNW_RIP,
    .sp_reg = UNW_RSP,
    .user_privilege = 3,
    .as_root_mask = X86_CR3_ADDR_MASK,
    .page_walk = page_walk,
    /* push rbp; mov rsp, rbp: the caller's rbp at [rbp], the return address above it. */
    .frame = {.fp_reg = UNW_RBP, .saved_fp = 0, .saved_ra = 8},
    .gdb_arch = "i386:x86-64",
    .gdb_regs = gdb_regs,
    .n_gdb_regs = sizeof gdb_regs / sizeof gdb_regs[0],
    .gdb_state_regs = gdb_state_regs,
    .gdb_root_reg = "cr3",
    .capture_mode_reg = "cs",
    .capture_mode_mask = 3,
    .capture_mode_user = 3,
    .capture_percpu_regs = capture_percpu_regs,
    .capture_iret_frame = true,
    .cpu_state = cpu_state,
    .unwind = &unwind_machine,
    .abi_frame = {.regs_arch = QPROF_ABI_ARCH_X86_64,
                  .unset_is_mine = true, /* the ABI's first revision was x86_64's alone */
                  .size = sizeof(struct qprof_abi_regs),
                  .sp_off = offsetof(struct qprof_abi_regs, rsp),
                  .to_regs = abi_frame_regs},
};
