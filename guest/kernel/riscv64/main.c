/* riscv64 kernel entry (S-mode, from boot.S): read the command line and the hart count from the
 * device tree, start the other harts, start the programs named by run= (default spin,spin,sys),
 * then become hart 0's idle loop. The serial milestones are the x86_64 kernel's. */
#include "rv.h"

extern const uint8_t prog_spin_start[], prog_spin_end[];
extern const uint8_t prog_sys_start[], prog_sys_end[];

const struct program programs[] = {
    {"spin", prog_spin_start, prog_spin_end},
    {"sys", prog_sys_start, prog_sys_end},
};

const size_t programs_count = sizeof programs / sizeof programs[0];

#define DEFAULT_RUN "spin,spin,sys"

/* ---- the device tree: /chosen/bootargs and the number of /cpus/cpu@N nodes ---- */
static char cmdline_buf[1024];

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The structure block is walked token by token; QEMU's tree is trusted to be well formed but
 * the walk still stays inside totalsize. */
static int fdt_scan(uint64_t dtb_pa)
{
    const uint8_t *fdt = P2V(dtb_pa);
    int harts = 0;
    if (!dtb_pa || be32(fdt) != 0xd00dfeed)
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
                harts++;
            off += (uint32_t)((n + 4) & ~3u);
        } else if (token == 2) { /* FDT_END_NODE */
            depth--;
            in_chosen = 0;
        } else if (token == 3) { /* FDT_PROP */
            uint32_t len = be32(fdt + off), nameoff = be32(fdt + off + 4);
            const char *value = (const char *)fdt + off + 8;
            if (in_chosen && strcmp((const char *)fdt + strings + nameoff, "bootargs") == 0) {
                size_t k = 0;
                while (k < len && k < sizeof cmdline_buf - 1 && value[k]) {
                    cmdline_buf[k] = value[k];
                    k++;
                }
                cmdline_buf[k] = 0;
            }
            off += 8 + ((len + 3) & ~3u);
        } else if (token == 4) { /* FDT_NOP */
        } else {
            break; /* FDT_END */
        }
    }
    return harts ? harts : 1;
}

/* run= or the default */
static const char *run_list(const char *cmdline, size_t *len)
{
    const char *list = cmdline_value(cmdline, "run=", len);
    if (list)
        return list;
    *len = strlen(DEFAULT_RUN);
    return DEFAULT_RUN;
}

static volatile int harts_online = 1;

static uint64_t boot_stack_lo(int hart)
{
    return (uint64_t)boot_stacks + (uint64_t)hart * BOOT_STACK_SIZE;
}

/* Another hart, in S-mode on its boot stack once hart 0 set ap_go. */
void ap_main(uint64_t hartid);
void ap_main(uint64_t hartid)
{
    int hart = (int)hartid; /* < MAX_CPUS: boot.S parks the others in M-mode */
    cpu_init(hart, boot_stack_lo(hart), boot_stack_lo(hart) + BOOT_STACK_SIZE);
    trap_init_hart();
    abi_publish_idle();
    cpus[hart].online = 1;
    __atomic_fetch_add(&harts_online, 1, __ATOMIC_SEQ_CST);
    idle_loop();
}

/* Starts the other harts (parked in boot.S) and waits up to 5 s for them. */
static int smp_start(int harts)
{
    int usable = harts < MAX_CPUS ? harts : MAX_CPUS;
    if (harts > MAX_CPUS)
        kprintf("smp: %d cpus with hart ID >= %d left halted (qprof_abi has %d slots)\n",
                harts - MAX_CPUS, MAX_CPUS, MAX_CPUS);
    __atomic_store_n(&ap_go, 1, __ATOMIC_RELEASE);
    uint64_t deadline = csr_read(time) + 5ull * TIMEBASE_HZ;
    while (harts_online < usable && csr_read(time) < deadline)
        ;
    if (harts_online < usable)
        kprintf("smp: %d of %d cpus started within 5 s\n", harts_online, usable);
    kprintf("smp: %d cpus online\n", harts_online);
    return usable;
}

void kmain(uint64_t hartid, uint64_t dtb_pa);
void kmain(uint64_t hartid, uint64_t dtb_pa)
{
    (void)hartid; /* 0: boot.S sends only hart 0 here */
    kprintf("qprof-guest: boot\n");
    cpu_init(0, boot_stack_lo(0), boot_stack_lo(0) + BOOT_STACK_SIZE);
    cpus[0].online = 1;
    abi_init();
    mm_init();
    int harts = fdt_scan(dtb_pa);
    kprintf("cmdline: %s\n", cmdline_buf);
    kprintf("qprof_abi at %p, kernel text %p-%p\n", &qprof_abi, __text_start, __text_end);
    int count = harts > 1 ? smp_start(harts) : 1;
    abi_publish_header(count);
    trap_init_hart();
    size_t run_len;
    const char *run = run_list(cmdline_buf, &run_len);
    start_programs(run, run_len);
    kprintf("ready\n");
    abi_publish_idle();
    idle_loop();
}
