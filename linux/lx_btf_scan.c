/* The kernel's BTF found by its header in the kernel image, for kernels whose kallsyms name no
 * data symbols (no CONFIG_KALLSYMS_ALL): struct btf_header is magic 0xeb9f, version 1, a 24-byte
 * header, the type section first and the strings right after it. The caller parses what it
 * finds with libbpf, which checks the rest. */
#include "lx_internal.h"

#include <errno.h>
#include <string.h>

#define CHUNK   (1u << 20)
#define HDR_LEN 24u

static uint32_t le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* A BTF header at p whose sections fit in `room` bytes: the blob's length, else 0. */
static uint64_t header_len(const uint8_t *p, uint64_t room)
{
    if (p[0] != 0x9f || p[1] != 0xeb || p[2] != 1 || le32(p + 4) != HDR_LEN)
        return 0;
    uint32_t type_off = le32(p + 8), type_len = le32(p + 12), str_off = le32(p + 16),
             str_len = le32(p + 20);
    uint64_t total = HDR_LEN + (uint64_t)str_off + str_len;
    if (type_off != 0 || str_off != type_len || type_len == 0 || str_len == 0 || total > room)
        return 0;
    return total;
}

int lx_kernel_find_btf(lx_kernel *k, uint64_t *start, uint64_t *stop)
{
    uint64_t base = k->vi.stext & ~UINT64_C(0xfff), pa = k->arch->image_paddr(&k->vi, base);
    uint8_t *buf = g_malloc(CHUNK + HDR_LEN);
    int rc = -ENOENT;
    for (uint64_t off = 0; off < LX_BTF_SCAN && rc; off += CHUNK) {
        if (k->phys->read(k->phys->ctx, pa + off, buf, CHUNK + HDR_LEN) != 0)
            break; /* the image's end (or RAM's) */
        for (uint32_t i = 0; i < CHUNK && rc; i += 4) {
            uint64_t len = header_len(buf + i, LX_BTF_SCAN);
            if (len) {
                *start = base + off + i;
                *stop = *start + len;
                rc = 0;
            }
        }
    }
    g_free(buf);
    return rc;
}
