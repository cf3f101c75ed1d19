/* arm64 for the kernel handle: the TTBR1 walk from swapper_pg_dir (4 KiB granule, 3 or 4 levels
 * by the half's size; 1 GiB and 2 MiB blocks), the image at kimage_voffset; kernel stacks by the
 * x29 frame chain (Debian's arm64 kernels keep frame pointers), across the exception entry into
 * the registers of user mode that struct pt_regs holds. */
#include "lx_internal.h"

#include <errno.h>
#include <string.h>

#define DESC_VALID UINT64_C(1)
#define DESC_TABLE UINT64_C(2) /* with VALID: a table (levels 0..2) or a page (level 3) */
#define DESC_OA    UINT64_C(0x0000fffffffff000)
/* struct pt_regs opens with user_pt_regs: regs[31], sp, pc, pstate. */
#define PT_SP     (31 * 8)
#define PT_PC     (32 * 8)
#define PT_PSTATE (33 * 8)
#define PSTATE_M  UINT64_C(0x1f) /* M[4]: AArch32; M[3:0]: 0 is EL0t */

static bool fits(const struct lx_vmcoreinfo *vi)
{
    return vi->swapper_pg_dir && vi->have_kimage_voffset;
}

static uint64_t image_paddr(const struct lx_vmcoreinfo *vi, uint64_t kva)
{
    return kva - vi->kimage_voffset;
}

static int setup(lx_kernel *k, struct qp_error *err)
{
    const struct lx_vmcoreinfo *vi = &k->vi;
    int va_bits = vi->tcr_t1sz ? 64 - (int)vi->tcr_t1sz : (int)vi->va_bits;
    if (vi->page_size != 4096)
        return qp_error_set(err, -ENOTSUP,
                            "arm64 kernel with %llu-byte pages: qprof walks 4 KiB granules only",
                            (unsigned long long)vi->page_size);
    if (va_bits < 31 || va_bits > 48)
        return qp_error_set(err, -ENOTSUP,
                            "arm64 kernel with a %d-bit kernel half: qprof walks "
                            "31 to 48 bits",
                            va_bits);
    k->va_bits = va_bits;
    k->levels = (va_bits - 12 + 8) / 9; /* 9 bits a level above the 12-bit page offset */
    k->pgd_paddr = image_paddr(vi, vi->swapper_pg_dir);
    return 0;
}

static int walk(lx_kernel *k, uint64_t va, uint64_t *pa, uint64_t *size)
{
    /* The TTBR1 half: every bit from va_bits up set. */
    if ((va >> k->va_bits) != (UINT64_MAX >> k->va_bits))
        return -EFAULT;
    uint64_t table = k->pgd_paddr;
    for (int level = 4 - k->levels; level <= 3; level++) {
        int shift = 12 + 9 * (3 - level);
        uint64_t entry;
        if (lx__cached_read(k, table + ((va >> shift) & 511) * 8, &entry, 8) != 0 ||
            !(entry & DESC_VALID))
            return -EFAULT;
        bool table_or_page = entry & DESC_TABLE;
        if (level == 3 && !table_or_page)
            return -EFAULT; /* reserved at level 3 */
        if (level == 3 || !table_or_page) {
            if (level == 0) /* no level-0 blocks with 4 KiB granules */
                return -EFAULT;
            *size = UINT64_C(1) << shift;
            *pa = (entry & DESC_OA & ~(*size - 1)) | (va & (*size - 1));
            return 0;
        }
        table = entry & DESC_OA;
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
    if (len < PT_PSTATE + 8)
        return false;
    for (int i = 0; i < 31; i++)
        regs[i] = load64(pt + 8 * i);
    regs[31] = load64(pt + PT_SP);
    regs[32] = load64(pt + PT_PC);
    return (load64(pt + PT_PSTATE) & PSTATE_M) == 0; /* AArch64 EL0 */
}

static const struct lx_fp_arch fp = {
    .pc_reg = 32,
    .sp_reg = 31,
    .fp_reg = 29,
    .lr_reg = 30,
    .saved_fp = 0,
    .saved_ra = 8,
    .user_regs = user_regs,
    .pt_regs_min = PT_PSTATE + 8,
    /* 6.1: regs[31], sp, pc, pstate, orig_x0, syscallno, unused2, sdei_ttbr1, pmr_save,
     * stackframe[2] */
    .regs_at = -304,
    .regs_pc_off = PT_PC,
    .record_is_interrupted = true,
    .pt_regs_align = 1,
    .entry_start = "__entry_text_start",
    .entry_end = "__entry_text_end",
    .vectors = "vectors",
    .vector_slots = 16,
    .vector_stride = 0x80,
};

/* MODULES_VADDR..MODULES_END (vmcoreinfo) without KASLR; with it (RANDOMIZE_MODULE_REGION_FULL,
 * module PLTs) module_alloc takes any place within 2 GiB of the image: both. */
static int module_area(const lx_kernel *k, uint64_t *start, uint64_t *end)
{
    uint64_t text, etext;
    if (lx__image_text(k, &text, &etext))
        return -ENOENT;
    *start = text - LX_SZ_2G, *end = etext + LX_SZ_2G;
    if (k->vi.modules_end > k->vi.modules_vaddr) {
        *start = MIN(*start, k->vi.modules_vaddr);
        *end = MAX(*end, k->vi.modules_end);
    }
    return 0;
}

/* ADRP xd, page then ADD xd', xd, #imm: page + imm. */
size_t lx__arm64_pc_rel_addrs(const uint8_t *code, size_t len, uint64_t pc, uint64_t *out,
                              size_t max)
{
    uint64_t page[32];
    uint32_t have = 0; /* registers holding an ADRP page */
    size_t n = 0;
    for (size_t i = 0; i + 4 <= len && n < max; i += 4) {
        uint32_t insn;
        memcpy(&insn, code + i, 4);
        uint32_t rd = insn & 0x1f, rn = (insn >> 5) & 0x1f;
        if ((insn & 0x9f000000) == 0x90000000) { /* ADRP */
            uint64_t imm = ((insn >> 5) & 0x7ffff) << 2 | ((insn >> 29) & 3);
            int64_t off = (int64_t)(imm << 43) >> 31; /* sign-extend 21 bits, times 4096 */
            page[rd] = ((pc + i) & ~UINT64_C(0xfff)) + (uint64_t)off;
            have |= 1u << rd;
        } else if ((insn & 0xff800000) == 0x91000000 && (have >> rn & 1)) { /* ADD x, imm */
            uint64_t imm = (insn >> 10) & 0xfff;
            out[n++] = page[rn] + (insn & (1u << 22) ? imm << 12 : imm);
        }
    }
    return n;
}

const struct lx_arch lx_arch_arm64 = {
    .name = "arm64",
    .fits = fits,
    .setup = setup,
    .walk = walk,
    .image_paddr = image_paddr,
    .fp = &fp,
    .module_area = module_area,
    .pc_rel_addrs = lx__arm64_pc_rel_addrs,
};
