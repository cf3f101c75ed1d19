/* Symmetric multiprocessing: the local APIC, CPU enumeration from the ACPI MADT, AP start-up
 * (INIT-SIPI-SIPI into trampoline.S), and the tick every AP gets from the boot CPU.
 *
 * Timer design: the 8254 PIT still interrupts only the boot CPU (through the 8259 PIC, on the
 * BSP's LINT0), which advances the one global tick; it then sends a fixed IPI (vector
 * IPI_TICK_VECTOR) to all other CPUs, so every CPU preempts at TIMER_HZ without calibrating the
 * APIC timer. With one CPU no APIC register is touched, as before SMP. */
#include "kernel.h"

#define LAPIC_PA         0xfee00000ull
#define LAPIC_VA         0xffffffffc0000000ull /* PML4[511] PDPT[511]: one uncached 2 MiB page */
#define LAPIC_ID         0x020
#define LAPIC_TPR        0x080
#define LAPIC_EOI        0x0b0
#define LAPIC_SVR        0x0f0
#define LAPIC_ICR_LO     0x300
#define LAPIC_ICR_HI     0x310
#define LAPIC_LINT0      0x350
#define LAPIC_LINT1      0x360
#define LVT_MASKED       0x10000u
#define ICR_PENDING      (1u << 12)
#define ICR_INIT         0x4500u /* INIT, level assert */
#define ICR_SIPI         0x4600u /* start-up, level assert; | vector */
#define ICR_ALL_BUT_SELF (3u << 18)

#define TRAMP_PA            0x8000
#define AP_START_TIMEOUT_US 5000000 /* generous: under a loaded TCG host an AP can be slow */

#define PIT_HZ      1193182
#define PIT_DIVISOR (PIT_HZ / TIMER_HZ) /* as programmed by arch.c's pit_init */

extern uint64_t boot_pdpt_low[512], boot_pdpt_high[512];
extern const char trampoline_start[], trampoline_end[];
extern uint64_t tramp_cr3, tramp_stack, tramp_entry, tramp_cpu;
extern char ap_start64[];

static uint64_t lapic_pd[512] __attribute__((aligned(4096)));
static uint64_t tramp_pml4[512] __attribute__((aligned(4096)));
static uint8_t ap_stacks[MAX_CPUS][KSTACK_SIZE] __attribute__((aligned(4096)));

int smp_cpu_limit = 1;
int smp_online = 1;
static volatile int ap_abandoned[MAX_CPUS]; /* timed out: if it runs after all, it halts */

static inline uint32_t lapic_read(uint32_t reg)
{
    return *(volatile uint32_t *)(LAPIC_VA + reg);
}

static inline void lapic_write(uint32_t reg, uint32_t v)
{
    *(volatile uint32_t *)(LAPIC_VA + reg) = v;
}

uint32_t cpuid_apic_id(void)
{
    uint32_t a = 1, b, c = 0, d;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    return b >> 24;
}

/* The xAPIC page lies above the 1 GiB direct map: map it uncached (PCD|PWT) in the kernel half,
 * in boot_pdpt_high, which every address space shares through PML4[511]. */
void lapic_map(void)
{
    lapic_pd[0] = LAPIC_PA | 0x80 /* 2 MiB */ | 0x10 /* PCD */ | 0x08 /* PWT */ | PTE_W | PTE_P;
    boot_pdpt_high[511] = V2P(lapic_pd) | PTE_W | PTE_P;
}

void lapic_eoi(void)
{
    lapic_write(LAPIC_EOI, 0);
}

static void lapic_send(uint32_t dest, uint32_t icr)
{
    while (lapic_read(LAPIC_ICR_LO) & ICR_PENDING)
        cpu_relax();
    lapic_write(LAPIC_ICR_HI, dest << 24);
    lapic_write(LAPIC_ICR_LO, icr);
}

void smp_tick_others(void)
{
    if (smp_online > 1)
        lapic_send(0, ICR_ALL_BUT_SELF | IPI_TICK_VECTOR);
}

/* Software-enables this CPU's APIC. The boot CPU keeps the 8259 on LINT0 (ExtINT) so the PIT
 * still reaches it; an AP masks LINT0/LINT1 and only takes IPIs. */
static void lapic_enable(int is_bsp)
{
    lapic_write(LAPIC_TPR, 0);
    lapic_write(LAPIC_LINT0, is_bsp ? 0x700 : LVT_MASKED);
    lapic_write(LAPIC_LINT1, is_bsp ? 0x400 : LVT_MASKED);
    lapic_write(LAPIC_SVR, 0x100 | SPURIOUS_VECTOR);
}

/* ---- time: PIT channel 0 polled (interrupts are off while the boot CPU starts APs) ---- */
static uint64_t pit_count;
static uint16_t pit_last;

static uint16_t pit_read(void)
{
    outb(0x43, 0x00); /* latch channel 0 */
    uint16_t lo = inb(0x40);
    uint16_t hi = inb(0x40);
    return (uint16_t)(lo | hi << 8);
}

void pit_clock_start(void)
{
    pit_count = 0;
    pit_last = pit_read();
}

/* The counter runs down from PIT_DIVISOR every 1/TIMER_HZ s. A gap between two polls longer
 * than that period loses time, so waits only ever get longer, never shorter. */
uint64_t pit_clock_us(void)
{
    uint16_t now = pit_read();
    pit_count +=
        now <= pit_last ? (uint64_t)(pit_last - now) : (uint64_t)pit_last + PIT_DIVISOR - now;
    pit_last = now;
    return pit_count * 1000000 / PIT_HZ;
}

static void delay_us(uint64_t us)
{
    uint64_t t0 = pit_clock_us();
    while (pit_clock_us() - t0 < us)
        cpu_relax();
}

/* ---- ACPI: RSDP -> RSDT/XSDT -> MADT ---- */
#define DIRECT_MAP_END (1ull << 30)

/* The table at pa if all len bytes lie in the direct map, else NULL. */
static const uint8_t *phys(uint64_t pa, uint64_t len)
{
    if (pa == 0 || pa >= DIRECT_MAP_END || len > DIRECT_MAP_END - pa)
        return 0;
    return P2V(pa);
}

static uint64_t find_rsdp(uint64_t hint)
{
    const uint8_t *p = phys(hint, 36);
    if (p && memcmp(p, "RSD PTR ", 8) == 0)
        return hint;
    for (uint64_t pa = 0xe0000; pa < 0x100000; pa += 16)
        if (memcmp(phys(pa, 8), "RSD PTR ", 8) == 0)
            return pa;
    return 0;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The whole table at pa with its declared length, or NULL. */
static const uint8_t *acpi_table(uint64_t pa, uint32_t *len)
{
    const uint8_t *h = phys(pa, 36);
    if (!h)
        return 0;
    *len = rd32(h + 4);
    return *len >= 36 && phys(pa, *len) ? h : 0;
}

static const uint8_t *find_madt(uint64_t rsdp_pa, uint32_t *madt_len)
{
    const uint8_t *rsdp = phys(rsdp_pa, 36);
    if (!rsdp)
        return 0;
    int wide = rsdp[15] >= 2 && rd64(rsdp + 24) != 0; /* ACPI 2+: XSDT, 64-bit entries */
    uint32_t len;
    const uint8_t *sdt = acpi_table(wide ? rd64(rsdp + 24) : rd32(rsdp + 16), &len);
    if (!sdt)
        return 0;
    uint32_t step = wide ? 8 : 4;
    for (uint32_t off = 36; off + step <= len; off += step) {
        const uint8_t *t = acpi_table(wide ? rd64(sdt + off) : rd32(sdt + off), madt_len);
        if (t && memcmp(t, "APIC", 4) == 0 && *madt_len >= 44)
            return t;
    }
    return 0;
}

/* APIC IDs of the enabled processors (local APIC and x2APIC entries); returns how many. */
static int madt_cpus(const uint8_t *madt, uint32_t len, uint32_t *ids, int max)
{
    int n = 0;
    for (uint32_t off = 44; off + 2 <= len && n < max;) {
        const uint8_t *e = madt + off;
        if (e[1] < 2 || off + e[1] > len)
            break;
        if (e[0] == 0 && e[1] >= 8 && (rd32(e + 4) & 1))
            ids[n++] = e[3];
        else if (e[0] == 9 && e[1] >= 16 && (rd32(e + 8) & 1))
            ids[n++] = rd32(e + 4);
        off += e[1];
    }
    return n;
}

/* ---- AP start-up ---- */
void ap_main(int cpu);
void ap_main(int cpu)
{
    while (ap_abandoned[cpu])
        __asm__ volatile("cli; hlt");
    write_cr3(kernel_pml4_pa());
    arch_init_ap(cpu); /* from here on cpu_id() works */
    lapic_enable(0);
    abi_publish_idle(); /* the slot is valid before the boot CPU counts this CPU */
    __atomic_store_n(&cpus[cpu].online, 1, __ATOMIC_RELEASE);
    idle_loop();
}

/* INIT-SIPI-SIPI (Intel SDM 8.4.4.1 timing) and a bounded wait for the AP to report online. */
static int start_ap(uint32_t id)
{
    uint8_t *tramp = P2V(TRAMP_PA);
#define TRAMP_PARAM(sym) (*(volatile uint64_t *)(tramp + ((const char *)&(sym)-trampoline_start)))
    TRAMP_PARAM(tramp_cr3) = V2P(tramp_pml4);
    TRAMP_PARAM(tramp_stack) = (uint64_t)ap_stacks[id] + KSTACK_SIZE;
    TRAMP_PARAM(tramp_entry) = (uint64_t)ap_start64;
    TRAMP_PARAM(tramp_cpu) = id;
#undef TRAMP_PARAM
    cpu_init_idle((int)id, (uint64_t)ap_stacks[id], (uint64_t)ap_stacks[id] + KSTACK_SIZE);
    barrier();
    lapic_send(id, ICR_INIT);
    delay_us(10000);
    for (int sipi = 0; sipi < 2 && !cpus[id].online; sipi++) {
        lapic_send(id, ICR_SIPI | (TRAMP_PA >> 12));
        delay_us(200);
    }
    uint64_t t0 = pit_clock_us();
    while (!__atomic_load_n(&cpus[id].online, __ATOMIC_ACQUIRE)) {
        if (pit_clock_us() - t0 > AP_START_TIMEOUT_US) {
            ap_abandoned[id] = 1;
            return -1;
        }
        cpu_relax();
    }
    return 0;
}

/* The trampoline page and its page tables: identity map of the first 1 GiB (boot.S's
 * boot_pdpt_low, which mm_init unhooked from the kernel PML4 but left intact) for the jump
 * into long mode, and the kernel half. */
static void trampoline_install(void)
{
    memcpy(P2V(TRAMP_PA), trampoline_start, (size_t)(trampoline_end - trampoline_start));
    tramp_pml4[0] = V2P(boot_pdpt_low) | PTE_W | PTE_P;
    tramp_pml4[511] = boot_pml4[511];
}

/* Returns the microseconds AP start-up took. */
static uint64_t start_aps(int bsp, const uint32_t *ids, int n)
{
    int halted = 0;
    lapic_enable(1);
    trampoline_install();
    pit_clock_start();
    for (int i = 0; i < n; i++) {
        if (ids[i] == (uint32_t)bsp)
            continue;
        if (ids[i] >= MAX_CPUS) {
            halted++;
            continue;
        }
        if (start_ap(ids[i]) < 0) {
            kprintf("smp: cpu %u did not start within %d s\n", ids[i],
                    AP_START_TIMEOUT_US / 1000000);
            continue;
        }
        smp_online++;
        if ((int)ids[i] + 1 > smp_cpu_limit)
            smp_cpu_limit = (int)ids[i] + 1;
    }
    if (halted)
        kprintf("smp: %d cpus with APIC ID >= %d left halted (qprof_abi has %d slots)\n", halted,
                MAX_CPUS, MAX_CPUS);
    return pit_clock_us();
}

void smp_init(uint64_t rsdp_hint)
{
    int bsp = cpu_id();
    smp_cpu_limit = bsp + 1;
    cpus[bsp].online = 1;
    uint32_t len, ids[64];
    const uint8_t *madt = find_madt(find_rsdp(rsdp_hint), &len);
    int n = madt ? madt_cpus(madt, len, ids, 64) : 0;
    if (!madt)
        kprintf("smp: no ACPI MADT in the first 1 GiB, only the boot CPU runs\n");
    if (n > 1) {
        uint64_t us = start_aps(bsp, ids, n);
        kprintf("smp: %d cpus online, APs started in %lu us\n", smp_online, us);
    } else {
        kprintf("smp: %d cpus online\n", smp_online);
    }
}
