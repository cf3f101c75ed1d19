/* The device tree QEMU's virt machine passes (riscv64 and aarch64 kernels build this file):
 * /chosen/bootargs and the number of /cpus/cpu@N nodes. */
#if defined(GUEST_LOWHALF)
#include "riscv64-lowhalf/lowhalf.h"
#elif defined(__riscv)
#include "riscv64/rv.h"
#elif defined(__aarch64__)
#include "aarch64/a64.h"
#endif

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The structure block is walked token by token; QEMU's tree is trusted to be well formed but
 * the walk still stays inside totalsize. */
int fdt_scan(const uint8_t *fdt, char *cmdline, size_t cap)
{
    int cpus = 0;
    cmdline[0] = 0;
    if (!fdt || be32(fdt) != 0xd00dfeed)
        return 1;
    uint32_t total = be32(fdt + 4), off = be32(fdt + 8), strings = be32(fdt + 12);
    int depth = 0, in_chosen = 0;
    while (off + 4 <= total) {
        uint32_t token = be32(fdt + off);
        off += 4;
        if (token == 1) { /* FDT_BEGIN_NODE */
            const char *name = (const char *)fdt + off;
            size_t n = strlen(name);
            depth++;
            in_chosen = depth == 2 && strcmp(name, "chosen") == 0;
            if (depth == 3 && strncmp(name, "cpu@", 4) == 0)
                cpus++;
            off += (uint32_t)((n + 4) & ~3u);
        } else if (token == 2) { /* FDT_END_NODE */
            depth--;
            in_chosen = 0;
        } else if (token == 3) { /* FDT_PROP */
            uint32_t len = be32(fdt + off), nameoff = be32(fdt + off + 4);
            const char *value = (const char *)fdt + off + 8;
            if (in_chosen && strcmp((const char *)fdt + strings + nameoff, "bootargs") == 0) {
                size_t k = 0;
                while (k < len && k < cap - 1 && value[k]) {
                    cmdline[k] = value[k];
                    k++;
                }
                cmdline[k] = 0;
            }
            off += 8 + ((len + 3) & ~3u);
        } else if (token == 4) { /* FDT_NOP */
        } else {
            break; /* FDT_END */
        }
    }
    return cpus ? cpus : 1;
}
