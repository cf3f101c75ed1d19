/* Fuzz target: the page-cache walk (lx_file_page): file->f_mapping->i_pages, an xarray of
 * struct page pointers, read from guest kernel memory.
 *
 * Input: 8 bytes of the page index to look up, then kernel memory from MEM_BASE (the struct
 * file at MEM_BASE). Reads outside it fail. A find must name a page frame inside the bounds
 * lx_file_page promises. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "lx_task.h"

#define MEM_BASE UINT64_C(0xffff888000000000)

struct memory {
    const uint8_t *bytes;
    size_t len;
    unsigned reads;
};

static int kread(void *ctx, uint64_t kva, void *buf, size_t len)
{
    struct memory *m = ctx;
    if (++m->reads > 4096)
        return -EIO; /* the walk must be bounded well below this */
    if (kva < MEM_BASE || kva - MEM_BASE > m->len || len > m->len - (kva - MEM_BASE))
        return -EFAULT;
    memcpy(buf, m->bytes + (kva - MEM_BASE), len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    struct lx_offsets o;
    lx_offsets_debian12_6_1(&o);
    o.has_page_cache = true;
    o.file_mapping = 8, o.mapping_i_pages = 16, o.xa_head = 8;
    o.xa_node_shift = 0, o.xa_node_slots = 40, o.page_struct_size = 64;
    o.vmemmap_base = UINT64_C(0xffffea0000000000);
    struct memory m = {.bytes = data + 8, .len = size - 8};
    struct lx_reader r = {.read = kread, .ctx = &m};
    uint64_t index = fuzz_le(data, size, 0, 8), pa = 0;
    struct qp_error err = {0};
    int rc = lx_file_page(&o, &r, MEM_BASE, index, &pa, &err);
    FUZZ_ASSERT(m.reads <= 2 + 2 * LX_XA_MAX_DEPTH + 2);
    if (rc == 0)
        FUZZ_ASSERT((pa & 0xfff) == 0 && pa >> 12 < (UINT64_C(1) << 40));
    return 0;
}
