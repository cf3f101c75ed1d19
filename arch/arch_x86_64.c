/* x86_64: canonical halves, CPL 3, CR3, the 4-level page walk, the gdbstub's register names,
 * QEMU's monitor text, the PC's RAM layout. */
#include "arch_x86_64.h"
#include "qprof/guest_abi.h"
#include "unwind.h"

#include <capstone/capstone.h>

#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
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

/* ---- QEMU's monitor: `info registers -a` ------------------------------------------------ */

/* What qprof keeps of the text, under the gdbstub's names. 64-bit guests print Rxx names;
 * real and protected mode (a vCPU never started) print Exx. Besides: "cpl" (CPL=, which in real
 * mode is not CS's low bits) and "gs_base" (the GS line's base: the kernel's per-CPU area, which
 * only the monitor's vCPUs give; over the gdbstub Linux's __per_cpu_offset serves). */
enum mon_kind { MON_HEX, MON_DEC, MON_SEG_BASE };
enum { SEEN_PC = 1, SEEN_SP = 2, SEEN_CPL = 4 };

struct mon_key {
    const char *key, *name; /* name NULL: HLT, kept as the block's halted */
    enum mon_kind kind;
    unsigned seen;
};

static const struct mon_key mon_keys[] = {
    {"RAX", "rax", MON_HEX, 0},        {"RBX", "rbx", MON_HEX, 0},
    {"RCX", "rcx", MON_HEX, 0},        {"RDX", "rdx", MON_HEX, 0},
    {"RSI", "rsi", MON_HEX, 0},        {"RDI", "rdi", MON_HEX, 0},
    {"RBP", "rbp", MON_HEX, 0},        {"RSP", "rsp", MON_HEX, SEEN_SP},
    {"R8", "r8", MON_HEX, 0},          {"R9", "r9", MON_HEX, 0},
    {"R10", "r10", MON_HEX, 0},        {"R11", "r11", MON_HEX, 0},
    {"R12", "r12", MON_HEX, 0},        {"R13", "r13", MON_HEX, 0},
    {"R14", "r14", MON_HEX, 0},        {"R15", "r15", MON_HEX, 0},
    {"RIP", "rip", MON_HEX, SEEN_PC},  {"EAX", "rax", MON_HEX, 0},
    {"EBX", "rbx", MON_HEX, 0},        {"ECX", "rcx", MON_HEX, 0},
    {"EDX", "rdx", MON_HEX, 0},        {"ESI", "rsi", MON_HEX, 0},
    {"EDI", "rdi", MON_HEX, 0},        {"EBP", "rbp", MON_HEX, 0},
    {"ESP", "rsp", MON_HEX, SEEN_SP},  {"EIP", "rip", MON_HEX, SEEN_PC},
    {"CPL", "cpl", MON_DEC, SEEN_CPL}, {"HLT", NULL, MON_DEC, 0},
    {"CR0", "cr0", MON_HEX, 0},        {"CR3", "cr3", MON_HEX, 0},
    {"CR4", "cr4", MON_HEX, 0},        {"EFER", "efer", MON_HEX, 0},
    {"CS", "cs", MON_HEX, 0},          {"GS", "gs_base", MON_SEG_BASE, 0},
};

struct x86_block {
    struct prof_arch_monitor_cpu cpu; /* first: prof_arch_monitor_parse_blocks keeps it */
    unsigned seen;
};

static const struct mon_key *mon_key(const char *key, size_t len)
{
    for (size_t i = 0; len > 0 && i < sizeof mon_keys / sizeof mon_keys[0]; i++)
        if (mon_keys[i].key[0] == key[0] && strlen(mon_keys[i].key) == len &&
            memcmp(mon_keys[i].key, key, len) == 0)
            return &mon_keys[i];
    return NULL;
}

/* One hex number after optional blanks, within [s, end); *next is left after it. */
static bool mon_hex(const char *s, const char *end, uint64_t *v, const char **next)
{
    while (s < end && *s == ' ')
        s++;
    size_t n = 0;
    char digits[17];
    while (s + n < end && isxdigit((unsigned char)s[n]) && n < 16)
        digits[n] = s[n], n++;
    if (n == 0)
        return false;
    digits[n] = '\0';
    *v = strtoull(digits, NULL, 16);
    *next = s + n;
    return true;
}

/* The value after `=`: a hex number; CPL and HLT a decimal digit; GS the base after the
 * selector ("GS =0000 ffff888007a00000 ffffffff 00c09300 DPL=0 DS [-WA]"). */
static bool mon_value(const struct mon_key *k, const char *val, const char *end, uint64_t *v)
{
    const char *next;
    if (k->kind == MON_DEC) {
        if (val >= end || !isdigit((unsigned char)*val))
            return false;
        *v = (uint64_t)(*val - '0');
        return true;
    }
    if (!mon_hex(val, end, v, &next))
        return false;
    return k->kind != MON_SEG_BASE || mon_hex(next, end, v, &next);
}

/* Every KEY=VALUE of a line ("R8 =..." and "ES =..." have a blank before '='). */
static int mon_line(void *block, const char *line, const char *end, struct qp_error *err)
{
    struct x86_block *b = block;
    for (const char *eq = line; (eq = memchr(eq, '=', (size_t)(end - eq))); eq++) {
        const char *k = eq;
        while (k > line && k[-1] == ' ')
            k--;
        const char *key_end = k;
        while (k > line && isalnum((unsigned char)k[-1]))
            k--;
        const struct mon_key *f = mon_key(k, (size_t)(key_end - k));
        if (!f || (k > line && k[-1] != ' ' && k[-1] != '\t'))
            continue;
        uint64_t v;
        if (!mon_value(f, eq + 1, end, &v))
            return qp_error_set(err, -EPROTO, "info registers: cannot parse %s in \"%.*s\"", f->key,
                                (int)(end - line > 80 ? 80 : end - line), line);
        if (f->name)
            prof_arch_monitor_set(&b->cpu, f->name, v);
        else
            b->cpu.halted = v != 0;
        b->seen |= f->seen;
    }
    return 0;
}

static int mon_finish(const void *block, struct qp_error *err)
{
    const struct x86_block *b = block;
    if ((b->seen & (SEEN_PC | SEEN_SP | SEEN_CPL)) != (SEEN_PC | SEEN_SP | SEEN_CPL))
        return qp_error_set(err, -EPROTO,
                            "info registers: CPU#%d block lacks RIP, RSP or CPL "
                            "(is this an x86 guest?)",
                            b->cpu.cpu_index);
    return 0;
}

/* Every general register starts at 0: outside long mode QEMU prints no R8..R15. */
static void mon_start(void *block, int cpu_index)
{
    struct x86_block *b = block;
    b->cpu.cpu_index = cpu_index;
    b->cpu.halted = false;
    b->cpu.n_regs = 0;
    for (size_t i = 0; i < sizeof gdb_regs / sizeof gdb_regs[0]; i++)
        prof_arch_monitor_set(&b->cpu, gdb_regs[i].gdb_name, 0);
    b->seen = 0;
}

static const struct prof_arch_monitor_blocks monitor_blocks = {
    .block_size = sizeof(struct x86_block),
    .start = mon_start,
    .line = mon_line,
    .finish = mon_finish,
};

static int monitor_parse(const char *text, struct prof_arch_monitor_cpu *out, int max, int *n_cpus,
                         struct qp_error *err)
{
    return prof_arch_monitor_parse_blocks(&monitor_blocks, text, out, max, n_cpus, err);
}

/* The monitor prints the CPL itself, and EFER.LMA says long mode, whose 4-level tables the walk
 * knows (LMA implies CR0.PG); the registers it lacks read as 0. */
static int monitor_cpu_state(prof_arch_reg_fn get, void *ctx, struct prof_arch_cpu_state *st,
                             struct qp_error *err)
{
    uint64_t cpl, cr0 = 0, cr3 = 0, cr4 = 0, efer = 0, gs_base = 0;
    if (get(ctx, "cpl", &cpl) < 0)
        return qp_error_set(err, -ENOENT, "info registers: no CPL");
    get(ctx, "cr0", &cr0);
    get(ctx, "cr3", &cr3);
    get(ctx, "cr4", &cr4);
    get(ctx, "efer", &efer);
    get(ctx, "gs_base", &gs_base);
    st->privilege = (int)cpl;
    st->paging = (efer & X86_EFER_LMA) != 0;
    st->as_root = cr3 & X86_CR3_ADDR_MASK;
    st->unwalkable = unwalkable(cr0, cr4, efer);
    st->percpu_base = gs_base;
    return 0;
}

static bool capstone_open(size_t *handle)
{
    return cs_open(CS_ARCH_X86, CS_MODE_64, handle) == CS_ERR_OK;
}

/* pc and q35: RAM from 0 with the legacy VGA and ROM hole at 640 KiB-1 MiB; q35 splits a block
 * of 2.75 GiB or more around the 4 GiB hole (pc from 3.5 GiB) at a place only QEMU says. */
static const struct prof_arch_ram_layout usual_ram = {
    .base = 0,
    .hole_start = 0xa0000,
    .hole_end = 0x100000,
    .split_from = 0xb0000000,
};

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

static const char *const dwarf_names[UNW_X86_64_NREGS] = {
    "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8",
    "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "rip",
};

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
    .reg_names = dwarf_names,
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

/* Under PTI an mm owns an 8 KiB pair of top-level tables, the kernel's even page and the user's
 * odd one (CR3 bit 12): both name the mm's pgd. */
static bool root_names_table(uint64_t root, uint64_t table_pa)
{
    return ((root ^ table_pa) & X86_CR3_ADDR_MASK & ~UINT64_C(0x1000)) == 0;
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
    .root_names_table = root_names_table,
    .page_walk = page_walk,
    /* push rbp; mov rsp, rbp: the caller's rbp at [rbp], the return address above it. */
    .frame = {.fp_reg = UNW_RBP, .saved_fp = 0, .saved_ra = 8},
    .gdb_arch = "i386:x86-64",
    .gdb_regs = gdb_regs,
    .n_gdb_regs = sizeof gdb_regs / sizeof gdb_regs[0],
    .gdb_state_regs = gdb_state_regs,
    .gdb_root_reg = "cr3",
    .gdb_unnamed_reg = "rip",
    .capture_mode_reg = "cs",
    .capture_mode_mask = 3,
    .capture_mode_user = 3,
    .capture_percpu_regs = capture_percpu_regs,
    .capture_iret_frame = true,
    .cpu_state = cpu_state,
    .monitor_parse = monitor_parse,
    .monitor_cpu_state = monitor_cpu_state,
    .qom_cpu_id = "apic-id",
    .usual_ram = &usual_ram,
    .capstone_open = capstone_open,
    .unwind = &unwind_machine,
    .abi_frame = {.regs_arch = QPROF_ABI_ARCH_X86_64,
                  .unset_is_mine = true, /* the ABI's first revision was x86_64's alone */
                  .size = sizeof(struct qprof_abi_regs),
                  .sp_off = offsetof(struct qprof_abi_regs, rsp),
                  .to_regs = abi_frame_regs},
};
