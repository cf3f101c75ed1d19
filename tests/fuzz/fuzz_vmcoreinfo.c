/* Fuzz target: a Linux guest's RAM as the vmcoreinfo scanner and the kernel handle see it.
 *
 * Input: the guest-physical memory, from address 0 (a page holding vmcoreinfo text or its ELF
 * note, the init_uts_ns it names, page tables). The text is parsed on its own as well, and a
 * found kernel is opened, its kallsyms and ORC loaded and a stack unwound from a pc and sp the
 * input gives (an arm64 kernel's by frame records from the registers and task stack the input
 * gives), and its BTF looked for by its header: everything the guest decides must be refused or
 * bounded, never trusted. */
#include <string.h>

#include "fuzz.h"
#include "linux.h"

static const uint8_t *ram;
static size_t ram_len;

static int ram_read(void *ctx, uint64_t pa, void *buf, size_t len)
{
    (void)ctx;
    if (pa >= ram_len || len > ram_len - pa)
        return -14;
    memcpy(buf, ram + pa, len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct lx_vmcoreinfo vi;
    struct qp_error err = {0};
    if (lx_vmcoreinfo_parse((const char *)data, size, &vi, &err) == 0)
        FUZZ_ASSERT(vi.osrelease[0] && (vi.init_top_pgt || vi.swapper_pg_dir));
    ram = data, ram_len = size;
    struct lx_phys p = {.read = ram_read};
    struct lx_ram_range r = {0, size};
    uint64_t where = 0;
    if (lx_vmcoreinfo_find(&p, &r, 1, &vi, &where, &err) != 0)
        return 0;
    FUZZ_ASSERT(where < size && where % 4096 == 0);
    lx_kernel *k = NULL;
    if (lx_kernel_open(&vi, &p, &k, &err) != 0)
        return 0;
    if (lx_kernel_unwinds_by_fp(k)) {
        lx_kernel_load_kallsyms(k, &err);
        uint64_t live[LX_GREGS] = {0};
        /* the frame pointer and link register of arm64 (x29, x30) and riscv64 (s0, ra) */
        live[29] = live[8] = fuzz_le(data, size, 0, 8);
        live[30] = live[1] = fuzz_le(data, size, 8, 8);
        live[32] = fuzz_le(data, size, 16, 8);
        struct lx_fp_task task = {.stack_lo = fuzz_le(data, size, 24, 8),
                                  .stack_hi = fuzz_le(data, size, 32, 8),
                                  .pt_regs_size = (uint32_t)fuzz_le(data, size, 40, 2)};
        struct lx_frame f[16];
        struct lx_fp_result res;
        lx_unwind_fp(k, live, &task, f, 16, &res);
        FUZZ_ASSERT(res.n_frames >= 1 && res.n_frames <= 16);
        uint64_t start, stop;
        if (lx_kernel_find_btf(k, &start, &stop) == 0)
            FUZZ_ASSERT(stop > start);
    } else if (lx_kernel_load_orc(k, &err) == 0) {
        struct lx_pt_regs live = {.ip = fuzz_le(data, size, 0, 8), .sp = fuzz_le(data, size, 8, 8)};
        struct lx_frame f[16];
        struct lx_unwind_result res;
        lx_unwind(k, &live, f, 16, &res);
        FUZZ_ASSERT(res.n_frames >= 1 && res.n_frames <= 16);
    }
    size_t n = 0;
    const struct lx_symbol *s = lx_kernel_symbols(k, &n);
    for (size_t i = 1; s && i < n; i++)
        FUZZ_ASSERT(s[i - 1].addr <= s[i].addr);
    lx_kernel_free(k);
    return 0;
}
