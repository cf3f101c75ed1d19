/* A guest workload for live-guest.sh: maps 600 small anonymous regions with alternating
 * protections (so that none merge) and unmaps every seventh (gaps), which makes its maple tree
 * several levels deep, then reads /dev/zero a byte at a time forever so that it is often the
 * current task in kernel mode. Built static on the host and put in the initramfs; creates
 * /many_vmas.ready once its mappings are final. */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void)
{
    for (int i = 0; i < 600; i++) {
        size_t len = 4096 * (1 + i % 3);
        int prot = i % 2 ? PROT_READ : PROT_READ | PROT_WRITE;
        void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        if (i % 7 == 3)
            munmap(p, len);
    }
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0)
        return 1;
    int ready = creat("/many_vmas.ready", 0644); /* init waits for it before reading our maps */
    if (ready >= 0)
        close(ready);
    char byte;
    for (;;)
        if (read(fd, &byte, 1) != 1)
            return 1;
}
