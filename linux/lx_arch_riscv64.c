/* riscv64 for the kernel handle: the Sv39/Sv48/Sv57 walk from swapper_pg_dir (VA_BITS gives the
 * levels), the image at va_kernel_pa_offset; kernel stacks by the s0 frame chain (fp-16 the
 * caller's fp, fp-8 the return address: Debian's riscv64 kernels keep frame pointers), across
 * the exception entry into the registers of user mode that struct pt_regs holds. */
#include "lx_internal.h"

#include <errno.h>
#include <string.h>

#define PTE_V     UINT64_C(1)
#define PTE_RWX   UINT64_C(0xe) /* any of R, W, X: a leaf */
#define PTE_PPN   UINT64_C(0x003ffffffffffc00)
#define PT_STATUS (32 * 8)           /* epc, x1..x31, status */
#define SPP       (UINT64_C(1) << 8) /* sstatus.SPP: the trap came from S-mode */

static bool fits(const struct lx_vmcoreinfo *vi)
{
    return vi->swapper_pg_dir && vi->have_va_kernel_pa_offset;
}

static uint64_t image_paddr(const struct lx_vmcoreinfo *vi, uint64_t kva)
{
    return kva - vi->va_kernel_pa_offset;
}

static int setup(lx_kernel *k, struct qp_error *err)
{
    const struct lx_vmcoreinfo *vi = &k->vi;
    if (vi->va_bits != 39 && vi->va_bits != 48 && vi->va_bits != 57)
        return qp_error_set(err, -ENOTSUP,
                            "riscv64 kernel with VA_BITS %llu: qprof walks Sv39, Sv48 and Sv57",
                            (unsigned long long)vi->va_bits);
    k->va_bits = (int)vi->va_bits;
    k->levels = (k->va_bits - 12) / 9;
    k->pgd_paddr = image_paddr(vi, vi->swapper_pg_dir);
    return 0;
}

static int walk(lx_kernel *k, uint64_t va, uint64_t *pa, uint64_t *size)
{
    int64_t sext = (int64_t)(va << (64 - k->va_bits)) >> (64 - k->va_bits);
    if ((uint64_t)sext != va)
        return -EFAULT;
    uint64_t table = k->pgd_paddr;
    for (int level = k->levels - 1; level >= 0; level--) {
        int shift = 12 + 9 * level;
        uint64_t pte;
        if (lx__cached_read(k, table + ((va >> shift) & 511) * 8, &pte, 8) != 0 || !(pte & PTE_V))
            return -EFAULT;
        uint64_t next = ((pte & PTE_PPN) >> 10) << 12;
        if (pte & PTE_RWX) {
            *size = UINT64_C(1) << shift;
            if (next & (*size - 1))
                return -EFAULT; /* a misaligned superpage */
            *pa = next | (va & (*size - 1));
            return 0;
        }
        table = next;
    }
    return -EFAULT;
}

static uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static bool user_regs(const uint8_t *pt, size_t len, uint64_t regs[LX_GREGS])
{
    if (len < PT_STATUS + 8)
        return false;
    regs[0] = 0;
    for (int i = 1; i < 32; i++)
        regs[i] = load64(pt + 8 * i);
    regs[32] = load64(pt); /* epc */
    return !(load64(pt + PT_STATUS) & SPP);
}

static const struct lx_fp_arch fp = {
    .pc_reg = 32,
    .sp_reg = 2,
    .fp_reg = 8,
    .lr_reg = 1,
    .saved_fp = -16,
    .saved_ra = -8,
    .user_regs = user_regs,
    .pt_regs_min = PT_STATUS + 8,
    .regs_at = 0,
    .regs_pc_off = 0,
    .record_is_interrupted = false,
    .pt_regs_align = 16, /* task_pt_regs: ALIGN(sizeof(struct pt_regs), STACK_ALIGN) */
    .entry_start = "__irqentry_text_start",
    .entry_end = "__irqentry_text_end",
    .vectors = "handle_exception",
    .vector_slots = 1,
    .vector_stride = 4,
};

/* MODULES_VADDR..MODULES_END (vmcoreinfo): the 2 GiB below the image's end, up to its start;
 * the same from kallsyms when vmcoreinfo lacks them. */
static int module_area(const lx_kernel *k, uint64_t *start, uint64_t *end)
{
    uint64_t text, etext;
    if (k->vi.modules_end > k->vi.modules_vaddr) {
        *start = k->vi.modules_vaddr, *end = k->vi.modules_end;
        return 0;
    }
    if (lx__image_text(k, &text, &etext))
        return -ENOENT;
    *start = etext - LX_SZ_2G, *end = text;
    return 0;
}

/* AUIPC rd, hi then ADDI rd', rd, lo: pc + hi + lo. Compressed (16-bit) instructions are
 * stepped over. */
size_t lx__riscv64_pc_rel_addrs(const uint8_t *code, size_t len, uint64_t pc, uint64_t *out,
                                size_t max)
{
    uint64_t base[32];
    uint32_t have = 0;
    size_t n = 0;
    for (size_t i = 0; i + 2 <= len && n < max;) {
        uint16_t lo16;
        memcpy(&lo16, code + i, 2);
        if ((lo16 & 3) != 3) {
            i += 2;
            continue;
        }
        if (i + 4 > len)
            break;
        uint32_t insn;
        memcpy(&insn, code + i, 4);
        uint32_t rd = (insn >> 7) & 0x1f, rs1 = (insn >> 15) & 0x1f;
        if ((insn & 0x7f) == 0x17) { /* AUIPC */
            base[rd] = pc + i + (uint64_t)(int64_t)(int32_t)(insn & 0xfffff000);
            have |= 1u << rd;
        } else if ((insn & 0x707f) == 0x13 && rs1 && (have >> rs1 & 1)) { /* ADDI */
            out[n++] = base[rs1] + (uint64_t)(int64_t)((int32_t)insn >> 20);
        }
        i += 4;
    }
    return n;
}

const struct lx_arch lx_arch_riscv64 = {
    .name = "riscv64",
    .fits = fits,
    .setup = setup,
    .walk = walk,
    .image_paddr = image_paddr,
    .fp = &fp,
    .module_area = module_area,
    .pc_rel_addrs = lx__riscv64_pc_rel_addrs,
};
