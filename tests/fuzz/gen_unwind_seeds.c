/* Maintenance tool, not a test: writes unwind_stack seeds from real stacks. The unwinding
 * fixture stops at the bottom of its call chain (plainly, and inside a signal handler) and is
 * captured the way the profiler captures a guest; the registers and the top of the stack (enough
 * for the whole chain) go into the fuzz_unwind_stack input format. make_seeds.py runs it.
 *
 *   gen_unwind_seeds OUTDIR */
#include <stdio.h>
#include <string.h>

#include "capture.h"

static int write_seed(const char *dir, const char *mode, const struct capture *c, uint8_t flags,
                      size_t stack_bytes)
{
    uint8_t header[152] = {flags};
    for (int i = 0; i < 16; i++)
        memcpy(header + 8 + 8 * i, &c->regs.r[i], 8);
    memcpy(header + 136, &c->regs.r[UNW_RIP], 8);
    memcpy(header + 144, &c->stack_addr, 8);
    char path[4096];
    snprintf(path, sizeof path, "%s/capture-%s-%02x", dir, mode, flags);
    FILE *fp = fopen(path, "wb");
    size_t n = c->stack_len < stack_bytes ? c->stack_len : stack_bytes;
    int ok = fp && fwrite(header, 1, sizeof header, fp) == sizeof header &&
             fwrite(c->stack, 1, n, fp) == n;
    if (fp)
        ok = fclose(fp) == 0 && ok;
    if (!ok)
        perror(path);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    /* Flags 0x03: raw rip and stack bounds; 0x17 also fetches half the stack and dumps CFI. A
     * signal frame holds the whole signal context, so that chain needs more of the stack. */
    static const struct {
        const char *mode;
        uint8_t flags;
        size_t stack_bytes;
    } seeds[] = {{"chain", 0x03, 2048}, {"signal", 0x17, 4096}};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        struct capture c;
        if (capture_fixture(FUZZ_FIXTURE, seeds[i].mode, 0, &c) < 0)
            return 1;
        int rc = write_seed(argv[1], seeds[i].mode, &c, seeds[i].flags, seeds[i].stack_bytes);
        capture_release(&c);
        if (rc)
            return 1;
    }
    return 0;
}
