/* A mapped file's pages straight from the guest's page cache (file_id: its struct file). */
#include "os_linux_internal.h"

#include <errno.h>

int os_linux_file_read(void *impl, uint64_t file_id, uint64_t offset, void *buf, size_t len,
                       size_t *got, const struct prof_os_mem *mem)
{
    struct os_linux *l = impl;
    if (!l->kernel || !l->have_offsets || !l->off.has_page_cache || !mem->read_phys)
        return -ENOTSUP;
    if (!lx_is_kernel_addr(file_id))
        return -EINVAL;
    struct charged c = {l, mem};
    struct lx_reader r = {.read = os_linux_charged_read, .ctx = &c};
    struct qp_error err = {0};
    uint64_t paddr;
    int rc = lx_file_page(&l->off, &r, file_id, offset / PAGE_SIZE, &paddr, &err);
    if (rc)
        return rc == -ENOSPC ? -ENOSPC : rc == -ENOENT ? -ENOENT : -EIO;
    size_t in_page = offset % PAGE_SIZE, n = len < PAGE_SIZE - in_page ? len : PAGE_SIZE - in_page;
    if (mem->charge && !mem->charge(mem->ctx, n))
        return -ENOSPC;
    if (mem->read_phys(mem->ctx, paddr + in_page, buf, n) != 0)
        return -EIO;
    *got = n;
    return 0;
}
