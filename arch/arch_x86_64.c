/* x86_64: canonical halves, CPL 3, CR3, the 4-level page walk, the gdbstub's register names. */
#include "arch_x86_64.h"
#include "unwind.h"

#include <elf.h>
#include <errno.h>
#include <stddef.h>

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

static const char *const gdb_state_regs[] = {"cs", "cr0", "cr3", "efer", NULL};

/* CPL from CS; paging from CR0.PG and EFER.LMA, assumed on when the XML lacks them (QEMU's
 * i386-64bit.xml has both). */
static int cpu_state(prof_arch_reg_fn get, void *ctx, struct prof_arch_cpu_state *st,
                     struct qp_error *err)
{
    uint64_t cs, cr0 = X86_CR0_PG, efer = X86_EFER_LMA, cr3 = 0;
    if (get(ctx, "cs", &cs) < 0)
        return qp_error_set(err, -ENOENT, "the target has no readable register cs");
    get(ctx, "cr0", &cr0);
    get(ctx, "efer", &efer);
    get(ctx, "cr3", &cr3);
    st->privilege = (int)(cs & 3);
    st->paging = (cr0 & X86_CR0_PG) && (efer & X86_EFER_LMA);
    st->as_root = cr3 & X86_CR3_ADDR_MASK;
    return 0;
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
    .cpu_state = cpu_state,
};
