/* The Linux OS adapter (os/os_linux*.c) over a synthetic x86_64 guest in host memory, no QEMU:
 * 8 MiB of "physical RAM" holding a kernel page table (the image at 0xffffffff80000000 and the
 * direct map at 0xffff888000000000, both over the same RAM), a vmcoreinfo note, init_uts_ns and
 * kallsyms, and, laid out in the direct map with tests/linux-btf/fake_mem.h and the Debian 12
 * 6.1 offsets, per-CPU areas, tasks and a maple tree of VMAs.
 *
 *   reboot   the adapter finds the kernel, accepts it once a vCPU maps its _stext, notices
 *            vmcoreinfo's bytes changing (a reboot QMP did not report) and resets, finds the
 *            new boot's kernel, and after a reset passes over the old boot's vmcoreinfo
 *   current  each vCPU's current task read from its own per-CPU area (GS base in kernel mode,
 *            __per_cpu_offset[cpu] in user mode)
 *   mmcache  a task's VMAs cached by mm: read once per stop, walked again when map_count
 *            changes or the mm passes to another process
 *   regs     with no per-CPU path (riscv64, aarch64): the task from the register the kernel
 *            keeps it in or from the page table's owner, and its address space offered only
 *            while the vCPU's root register names the task's table (each architecture's rule)
 *
 * BTF offsets are set through os_linux_internal.h (the fake kernel has no BTF). */
#include "../linux-btf/fake_mem.h"
#include "harness.h"
#include "os_linux_internal.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

#define RAM_SIZE   (8u << 20)
#define KBASE      UINT64_C(0xffffffff80000000)
#define PGD        0x1000u
#define PUD        0x2000u
#define PMD        0x3000u
#define PUD_DIRECT 0x4000u
#define NOTE       0x5000u
#define UTS        0x6000u
#define KALLSYMS   0x10000u
#define TEXT       0x200000u
#define HEAP       0x400000u /* fake_mem's allocations: the direct map's FAKE_BASE + paddr */
#define PERCPU_SZ  0x20000u

static uint8_t *ram;
static struct fake_mem fm; /* over ram: kva FAKE_BASE + pa */
static struct lx_offsets O;
static unsigned charged_bytes;

static int ram_read(void *ctx, uint64_t pa, void *buf, size_t len)
{
    (void)ctx;
    if (pa >= RAM_SIZE || len > RAM_SIZE - pa)
        return -EFAULT;
    memcpy(buf, ram + pa, len);
    return 0;
}

static int ram_ranges(void *ctx, struct prof_ram_range *out, int max, int *n, struct qp_error *err)
{
    (void)ctx, (void)max, (void)err;
    out[0] = (struct prof_ram_range){0, RAM_SIZE};
    *n = 1;
    return 0;
}

static bool charge(void *ctx, size_t len)
{
    (void)ctx;
    charged_bytes += (unsigned)len;
    return true;
}

static const struct prof_os_mem mem = {
    .read_phys = ram_read, .ram_ranges = ram_ranges, .reads_are_cheap = true, .charge = charge};

static void put64(uint64_t pa, uint64_t v)
{
    memcpy(ram + pa, &v, 8);
}

static void put32(uint64_t pa, uint32_t v)
{
    memcpy(ram + pa, &v, 4);
}

/* 2 MiB pages over all of RAM, reached from the image's PGD 511 / PUD 510 and the direct map's
 * PGD 273 / PUD 0 alike. */
static void map_kernel(void)
{
    put64(PGD + 511 * 8, PUD | 3);
    put64(PUD + 510 * 8, PMD | 3);
    put64(PGD + ((FAKE_BASE >> 39) & 511) * 8, PUD_DIRECT | 3);
    put64(PUD_DIRECT, PMD | 3);
    for (uint64_t i = 0; i < RAM_SIZE >> 21; i++)
        put64(PMD + i * 8, (i << 21) | 0x83);
}

static void put_note(const char *release)
{
    char text[1024];
    int len = snprintf(
        text, sizeof text,
        "OSRELEASE=%s\nPAGESIZE=4096\nSYMBOL(init_uts_ns)=%llx\nSYMBOL(_stext)=%llx\n"
        "SYMBOL(kallsyms_names)=%llx\nSYMBOL(kallsyms_num_syms)=%llx\n"
        "SYMBOL(kallsyms_token_table)=%llx\nSYMBOL(kallsyms_token_index)=%llx\n"
        "SYMBOL(kallsyms_offsets)=%llx\nSYMBOL(kallsyms_relative_base)=%llx\n"
        "NUMBER(phys_base)=0\nSYMBOL(init_top_pgt)=%llx\nKERNELOFFSET=0\n",
        release, (unsigned long long)(KBASE + UTS), (unsigned long long)(KBASE + TEXT),
        (unsigned long long)(KBASE + KALLSYMS), (unsigned long long)(KBASE + KALLSYMS + 0x8000),
        (unsigned long long)(KBASE + KALLSYMS + 0x9000),
        (unsigned long long)(KBASE + KALLSYMS + 0xa000),
        (unsigned long long)(KBASE + KALLSYMS + 0xb000),
        (unsigned long long)(KBASE + KALLSYMS + 0xc000), (unsigned long long)(KBASE + PGD));
    memset(ram + NOTE, 0, 4096);
    put32(NOTE, 11);
    put32(NOTE + 4, (uint32_t)len);
    memcpy(ram + NOTE + 12, "VMCOREINFO", 11);
    memcpy(ram + NOTE + 24, text, (size_t)len + 1);
    memset(ram + UTS, 0, 512);
    memcpy(ram + UTS, "Linux", 6);
    memcpy(ram + UTS + 130, release, strlen(release) + 1);
}

/* kallsyms with every byte its own token: _text, _stext, one function, _etext. */
static void put_kallsyms(void)
{
    static const struct {
        const char *name;
        uint32_t off;
    } syms[] = {{"_text", 0}, {"_stext", 0}, {"do_work", 0x100}, {"_etext", 0x1000}};
    uint64_t p = KALLSYMS, tokens = KALLSYMS + 0x9000, index = KALLSYMS + 0xa000;
    for (int c = 0; c < 256; c++) {
        ram[tokens + 2 * c] = (uint8_t)c;
        uint16_t at = (uint16_t)(2 * c);
        memcpy(ram + index + 2 * c, &at, 2);
    }
    for (int i = 0; i < 4; i++) {
        size_t len = strlen(syms[i].name) + 1;
        ram[p++] = (uint8_t)len;
        ram[p++] = 'T';
        memcpy(ram + p, syms[i].name, len - 1);
        p += len - 1;
        int32_t off = -(int32_t)syms[i].off - 1; /* absolute-percpu encoding */
        memcpy(ram + KALLSYMS + 0xb000 + 4 * i, &off, 4);
    }
    put32(KALLSYMS + 0x8000, 4);
    put64(KALLSYMS + 0xc000, KBASE + TEXT);
}

static void build_guest(void)
{
    memset(ram, 0, RAM_SIZE);
    map_kernel();
    put_note("6.1.0-test");
    put_kallsyms();
    fm = (struct fake_mem){.bytes = ram, .size = RAM_SIZE, .used = HEAP};
}

/* A vCPU in kernel mode (a pc in the image) on the kernel's page table. */
static struct prof_vcpu kernel_cpu(int index)
{
    return (struct prof_vcpu){
        .index = index, .pc = KBASE + TEXT + 0x100, .paging64 = true, .as_root = PGD};
}

static struct os_linux *open_adapter(void)
{
    struct prof_os_config cfg = {.split = {.user_end = UINT64_C(0x800000000000),
                                           .kernel_start = UINT64_C(0xffff800000000000)},
                                 .arch = &prof_arch_x86_64,
                                 .chosen = true};
    void *impl = NULL;
    struct qp_error err = {0};
    REQUIRE(prof_os_linux_ops.open(&cfg, &impl, &err) == 0);
    return impl;
}

static struct prof_os_refresh refresh(struct os_linux *l, const struct prof_vcpu *cpus, int n)
{
    struct prof_os_refresh out = {0};
    prof_os_linux_ops.refresh(l, cpus, n, &mem, &out);
    return out;
}

/* Finds the kernel while "running", then accepts it at a stop. */
static void find_and_accept(struct os_linux *l, const struct prof_vcpu *cpu)
{
    struct prof_os_refresh out = {0};
    prof_os_linux_ops.while_running(l, &mem, &out);
    REQUIRE(l->candidate != NULL);
    out = refresh(l, cpu, 1);
    CHECK(out.kernel_found);
    CHECK_U64(out.kernel_stext, KBASE + TEXT);
    CHECK(out.published);
    REQUIRE(l->kernel != NULL);
}

static void test_reboot(void)
{
    build_guest();
    struct os_linux *l = open_adapter();
    struct prof_vcpu cpu = kernel_cpu(0);
    struct prof_os_refresh out = refresh(l, &cpu, 1);
    CHECK(!out.published && !out.kernel_found); /* not found yet */
    find_and_accept(l, &cpu);
    CHECK(prof_os_linux_ops.kernel_symbols(l) != NULL);
    /* A stop of the same boot: nothing changes. */
    l->task_ok[0] = true;
    struct mm_vmas *cached = g_new0(struct mm_vmas, 1);
    cached->vmas = g_array_new(FALSE, FALSE, sizeof(struct lx_vma));
    g_hash_table_insert(l->mm_cache, g_memdup2(&(uint64_t){FAKE_BASE + HEAP}, 8), cached);
    out = refresh(l, &cpu, 1);
    CHECK(!out.reset && out.published);
    CHECK_INT(g_hash_table_size(l->mm_cache), 1);

    /* The guest rebooted with no word from QEMU: the new boot wrote its vmcoreinfo where the
     * old one was. The adapter drops the kernel and everything tied to it. */
    put_note("6.1.0-next");
    out = refresh(l, &cpu, 1);
    CHECK(out.reset);
    CHECK(!out.published);
    CHECK(l->kernel == NULL && l->candidate == NULL);
    CHECK(prof_os_linux_ops.kernel_symbols(l) == NULL);
    CHECK(!l->task_ok[0]);
    CHECK_INT(g_hash_table_size(l->mm_cache), 0);
    /* ... and finds the new boot's kernel. */
    find_and_accept(l, &cpu);
    out = refresh(l, &cpu, 1);
    CHECK(!out.reset && out.published);

    /* A reset QEMU reported: the old boot's vmcoreinfo is still in RAM, unchanged, and must
     * not be taken for the new boot's. */
    prof_os_linux_ops.machine_reset(l);
    CHECK(l->kernel == NULL);
    prof_os_linux_ops.while_running(l, &mem, &out);
    CHECK(l->candidate == NULL && l->kernel == NULL);
    /* Once the new boot writes its own, it is found (the retry's wait cut short). */
    put_note("6.1.0-third");
    l->next_try_ns = 0;
    find_and_accept(l, &cpu);
    prof_os_linux_ops.free(l);
}

/* ---- tasks and address spaces in the direct map ---- */

static uint64_t make_task(int32_t pid, const char *comm, uint64_t mm, uint64_t stack)
{
    uint64_t t = fake_alloc(&fm, O.task_size, 64);
    fake_put_u32(&fm, t + O.task_pid, (uint32_t)pid);
    fake_put_u32(&fm, t + O.task_tgid, (uint32_t)pid);
    fake_put_bytes(&fm, t + O.task_comm, comm, strlen(comm));
    fake_put_u64(&fm, t + O.task_mm, mm);
    fake_put_u64(&fm, t + O.task_stack, stack);
    return t;
}

/* A per-CPU area whose current task is task. */
static uint64_t make_percpu(uint64_t task)
{
    uint64_t base = fake_alloc(&fm, PERCPU_SZ, 4096);
    fake_put_u64(&fm, base + O.percpu_this_cpu_off, base);
    fake_put_u64(&fm, base + O.percpu_current_task, task);
    return base;
}

/* The offsets BTF would give, a __per_cpu_offset[] of n entries, and an mm on the kernel's
 * page table. */
static void use_offsets(struct os_linux *l, const uint64_t *bases, int n)
{
    l->off = O;
    l->have_offsets = true;
    l->have_percpu = true;
    l->per_cpu_offset = fake_alloc(&fm, 8 * (size_t)n, 8);
    for (int i = 0; i < n; i++)
        fake_put_u64(&fm, l->per_cpu_offset + 8 * (uint64_t)i, bases[i]);
}

static uint64_t make_mm(uint64_t root, int32_t map_count)
{
    uint64_t mm = fake_alloc(&fm, 1096, 64);
    fake_put_u64(&fm, mm + O.mm_mt + O.mt_root, root);
    fake_put_u64(&fm, mm + O.mm_pgd, FAKE_BASE + PGD);
    fake_put_u32(&fm, mm + O.mm_map_count, (uint32_t)map_count);
    return mm;
}

static void expect_task(struct os_linux *l, const struct prof_vcpu *cpu, int i, uint32_t pid,
                        const char *comm)
{
    struct prof_task t = {0};
    prof_os_linux_ops.task(l, cpu, i, &t);
    CHECK(t.known);
    CHECK_INT(t.pid, pid);
    CHECK_STR(t.comm, comm);
}

static void test_current(void)
{
    build_guest();
    struct os_linux *l = open_adapter();
    struct prof_vcpu cpus[3] = {kernel_cpu(0), kernel_cpu(1), kernel_cpu(2)};
    find_and_accept(l, &cpus[0]);
    uint64_t stack[3], task[3], base[3];
    const char *names[3] = {"alpha", "beta", "gamma"};
    for (int i = 0; i < 3; i++) {
        stack[i] = fake_alloc(&fm, 16 << 10, 16 << 10);
        task[i] = make_task(100 * (i + 1), names[i], make_mm(0, 0), stack[i]);
        base[i] = make_percpu(task[i]);
    }
    use_offsets(l, base, 3);
    /* vCPU 0 in kernel mode: its GS base; 1 and 2 in user mode: __per_cpu_offset[index]. */
    cpus[0].gs_base = base[0];
    cpus[0].sp = stack[0] + 0x3f00;
    for (int i = 1; i < 3; i++) {
        cpus[i].user = true;
        cpus[i].pc = 0x401000;
        cpus[i].gs_base = 0x7f0000000000; /* the user's: never the per-CPU area */
    }
    struct prof_os_refresh out = refresh(l, cpus, 3);
    REQUIRE(out.published);
    expect_task(l, &cpus[0], 0, 100, "alpha");
    expect_task(l, &cpus[1], 1, 200, "beta");
    expect_task(l, &cpus[2], 2, 300, "gamma");
    /* The scheduler moves the tasks around: each vCPU follows its own area. */
    fake_put_u64(&fm, base[1] + O.percpu_current_task, task[2]);
    fake_put_u64(&fm, base[2] + O.percpu_current_task, task[0]);
    fake_put_u64(&fm, base[0] + O.percpu_current_task, task[1]);
    cpus[0].sp = stack[1] + 0x3f00;
    refresh(l, cpus, 3);
    expect_task(l, &cpus[0], 0, 200, "beta");
    expect_task(l, &cpus[1], 1, 300, "gamma");
    expect_task(l, &cpus[2], 2, 100, "alpha");
    /* vCPU 2 enters the kernel: its GS base now names its area. */
    cpus[2].user = false;
    cpus[2].pc = KBASE + TEXT + 0x100;
    cpus[2].gs_base = base[2];
    cpus[2].sp = stack[0] + 0x3f00;
    refresh(l, cpus, 3);
    expect_task(l, &cpus[2], 2, 100, "alpha");
    prof_os_linux_ops.free(l);
}

/* ---- the mm cache ---- */

#define ENC_NULL  0x4ull
#define ROOT_NODE 0x2ull
#define T_LEAF    1u

static uint64_t make_vma(uint64_t start, uint64_t end, const char *file)
{
    uint64_t v = fake_alloc(&fm, 152, 8);
    fake_put_u64(&fm, v + O.vma_start, start);
    fake_put_u64(&fm, v + O.vma_end, end);
    fake_put_u64(&fm, v + O.vma_pgoff, 0);
    fake_put_u64(&fm, v + O.vma_flags, 0x875);
    uint64_t f = fake_alloc(&fm, 256, 64), d = fake_alloc(&fm, 192, 64);
    uint64_t name = fake_alloc(&fm, strlen(file) + 1, 8);
    fake_put_bytes(&fm, name, file, strlen(file) + 1);
    fake_put_u64(&fm, f + O.file_path + O.path_dentry, d);
    fake_put_u32(&fm, d + O.dentry_name + O.qstr_len, (uint32_t)strlen(file));
    fake_put_u64(&fm, d + O.dentry_name + O.qstr_name, name);
    fake_put_u64(&fm, v + O.vma_file, f);
    return v;
}

/* A root leaf: a gap, prog at [0x400000, 0x401000), a gap, lib at [0x10000000, 0x10001000), a
 * gap to the top. */
static uint64_t make_tree(uint64_t prog, uint64_t lib)
{
    uint64_t node = fake_alloc(&fm, 256, 256);
    uint64_t piv[] = {0x3fffff, 0x400fff, 0xfffffff, 0x10000fff};
    uint64_t slot[] = {0, prog, 0, lib, 0};
    fake_put_u64(&fm, node, 0xffff888000ff0006ull);
    for (unsigned i = 0; i < 4; i++)
        fake_put_u64(&fm, node + O.mt_r64_pivot + 8 * i, piv[i]);
    for (unsigned i = 0; i < 5; i++)
        fake_put_u64(&fm, node + O.mt_r64_slot + 8 * i, slot[i]);
    fake_at(&fm, node + O.mt_r64_meta, 1)[0] = 4;
    return node | ((uint64_t)T_LEAF << 3) | ENC_NULL | ROOT_NODE;
}

/* The mapping of pc on vCPU 0 and the bytes it read from the guest. */
static unsigned lookup(struct os_linux *l, uint64_t pc, const char *want)
{
    struct prof_mapping m = {0};
    charged_bytes = 0;
    int rc = prof_os_linux_ops.user_mapping(l, 0, pc, &mem, &m);
    if (want) {
        CHECK_INT(rc, 0);
        CHECK_STR(m.name, want);
    } else {
        CHECK_INT(rc, -ENOENT);
    }
    return charged_bytes;
}

static void test_mmcache(void)
{
    build_guest();
    struct os_linux *l = open_adapter();
    struct prof_vcpu cpu = kernel_cpu(0);
    find_and_accept(l, &cpu);
    uint64_t prog = make_vma(0x400000, 0x401000, "prog");
    uint64_t lib = make_vma(0x10000000, 0x10001000, "libc.so.6");
    uint64_t mm = make_mm(make_tree(prog, lib), 2);
    uint64_t stack = fake_alloc(&fm, 16 << 10, 16 << 10);
    uint64_t task = make_task(500, "app", mm, stack);
    uint64_t base = make_percpu(task);
    use_offsets(l, &base, 1);
    cpu.user = true;
    cpu.pc = 0x400100;
    REQUIRE(refresh(l, &cpu, 1).published);

    /* The first lookup walks the tree; the next ones read map_count alone. */
    unsigned walk = lookup(l, 0x400100, "prog");
    CHECK(walk > 4);
    CHECK_INT(lookup(l, 0x10000800, "libc.so.6"), 4);
    CHECK_INT(g_hash_table_size(l->mm_cache), 1);
    /* A pc in no VMA: walked again, but once per stop only. */
    CHECK_INT(lookup(l, 0x20000000, NULL), 4);
    refresh(l, &cpu, 1);
    CHECK(lookup(l, 0x20000000, NULL) > 4);
    CHECK_INT(lookup(l, 0x20000000, NULL), 4);
    /* The next stop, a changed mm (lib replaced by another file at the same place, map_count
     * moved): the cached VMA still covers the pc, but the cache no longer holds and the walk
     * sees the new one. */
    fake_put_u64(&fm, mm + O.mm_mt + O.mt_root,
                 make_tree(prog, make_vma(0x10000000, 0x10001000, "libm.so.6")));
    fake_put_u32(&fm, mm + O.mm_map_count, 3);
    refresh(l, &cpu, 1);
    CHECK(lookup(l, 0x10000800, "libm.so.6") > 4);
    CHECK_INT(lookup(l, 0x10000800, "libm.so.6"), 4);
    /* The mm freed and reused by another process (same address, same map_count): walked again
     * for the new owner. */
    fake_put_u64(&fm, mm + O.mm_mt + O.mt_root,
                 make_tree(make_vma(0x400000, 0x401000, "other"), lib));
    uint64_t task2 = make_task(600, "other", mm, stack);
    fake_put_u64(&fm, base + O.percpu_current_task, task2);
    refresh(l, &cpu, 1);
    CHECK(lookup(l, 0x400100, "other") > 4);
    CHECK_INT(g_hash_table_size(l->mm_cache), 1);
    /* A reboot empties the cache. */
    prof_os_linux_ops.machine_reset(l);
    CHECK_INT(g_hash_table_size(l->mm_cache), 0);
    prof_os_linux_ops.free(l);
}

/* ---- the current task from a register (no per-CPU path) ---- */

#define OTHER_PGD    0x7000u /* another process's top-level table */
#define RESERVED_PGD 0x8000u /* aarch64's reserved table (no user mappings) */

static int no_user_read(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                        size_t len, size_t *got)
{
    (void)ctx, (void)cpu, (void)addr, (void)buf, (void)len;
    *got = 0;
    return -EFAULT;
}

/* Whether the address space of vCPU 0's task is offered: 0, or -EAGAIN when the vCPU's page
 * tables are not its mm's. */
static int space_of(struct os_linux *l, uint64_t want_mm)
{
    struct prof_os_mem umem = mem;
    umem.read = no_user_read;
    struct prof_address_space as = {0};
    int rc = prof_os_linux_ops.address_space(l, 0, &umem, &as);
    if (rc == 0)
        CHECK_U64(as.id, want_mm);
    return rc;
}

/* Guests whose kernel keeps the current task in a register (riscv64's tp, or sscratch while
 * user code runs; aarch64's SP_EL0 at EL1) instead of a per-CPU word: the task comes from that
 * register or, in user mode, from the owner of the page table the root register names; the
 * task's address space (--sysroot, build-ids) is offered only while the vCPU runs on the task's
 * mm, which the architecture's rule decides (satp's PPN, TTBR0's address without its ASID).
 * The synthetic guest is x86_64's: its kernel is found by x86_64's walk, then the adapter is
 * told the guest is riscv64, then aarch64, which changes only how a root names a table. */
static void test_regs(void)
{
    build_guest();
    struct os_linux *l = open_adapter();
    struct prof_vcpu cpu = kernel_cpu(0);
    find_and_accept(l, &cpu);
    l->off = O;
    l->have_offsets = true;
    l->have_percpu = false;
    uint64_t stack = fake_alloc(&fm, 16 << 10, 16 << 10);
    uint64_t prog = make_vma(0x400000, 0x401000, "prog");
    uint64_t lib = make_vma(0x10000000, 0x10001000, "libc.so.6");
    uint64_t mm = make_mm(make_tree(prog, lib), 2); /* its pgd: PGD */
    uint64_t task = make_task(700, "busy", mm, stack);

    l->cfg.arch = &prof_arch_riscv64;
    uint64_t sv39 = UINT64_C(8) << 60, asid = UINT64_C(3) << 44;
    /* S-mode, tp names the task, satp its table: the address space is offered. */
    cpu.has_kernel_thread_reg = true;
    cpu.kernel_thread_reg = task;
    cpu.sp = stack + 0x3f00;
    cpu.as_root = sv39 | asid | PGD >> 12;
    refresh(l, &cpu, 1);
    expect_task(l, &cpu, 0, 700, "busy");
    CHECK(l->own_mm[0]);
    CHECK_INT(space_of(l, mm), 0);
    /* satp names another process's table (a switch between switch_mm and tp's update): the
     * task stays, its memory is not what the vCPU maps. */
    cpu.as_root = sv39 | asid | OTHER_PGD >> 12;
    refresh(l, &cpu, 1);
    expect_task(l, &cpu, 0, 700, "busy");
    CHECK(!l->own_mm[0]);
    CHECK_INT(space_of(l, mm), -EAGAIN);
    CHECK_U64(l->foreign_mm_samples, 1);
    /* U-mode: tp is the user's, sscratch names the task. */
    cpu.user = true;
    cpu.pc = 0x400100;
    cpu.kernel_thread_reg = 0x12345678;
    cpu.has_kernel_thread_alt = true;
    cpu.kernel_thread_alt = task;
    cpu.as_root = sv39 | asid | PGD >> 12;
    refresh(l, &cpu, 1);
    expect_task(l, &cpu, 0, 700, "busy");
    CHECK_INT(space_of(l, mm), 0);
    /* ... and without sscratch, the owner of the table satp names (seen in S-mode above). */
    cpu.has_kernel_thread_alt = false;
    refresh(l, &cpu, 1);
    expect_task(l, &cpu, 0, 700, "busy");
    CHECK_INT(space_of(l, mm), 0);

    /* aarch64: another process, whose table is OTHER_PGD. */
    l->cfg.arch = &prof_arch_aarch64;
    uint64_t mm2 = make_mm(make_tree(prog, lib), 2);
    fake_put_u64(&fm, mm2 + O.mm_pgd, FAKE_BASE + OTHER_PGD);
    uint64_t task2 = make_task(800, "loop", mm2, stack);
    uint64_t ttbr0 = UINT64_C(0x2a) << 48 | OTHER_PGD;
    cpu = kernel_cpu(0);
    cpu.has_kernel_thread_reg = true;
    cpu.kernel_thread_reg = task2; /* SP_EL0 at EL1 */
    cpu.sp = stack + 0x3f00;
    cpu.as_root = ttbr0;
    refresh(l, &cpu, 1);
    expect_task(l, &cpu, 0, 800, "loop");
    CHECK_INT(space_of(l, mm2), 0);
    /* TTBR0 on a reserved table at EL1 (software PAN): user memory is not mapped. */
    cpu.as_root = RESERVED_PGD;
    refresh(l, &cpu, 1);
    expect_task(l, &cpu, 0, 800, "loop");
    CHECK_INT(space_of(l, mm2), -EAGAIN);
    /* EL0: SP_EL0 is the user's sp; the owner of TTBR0's table is the task. */
    cpu.user = true;
    cpu.pc = 0x400100;
    cpu.has_kernel_thread_reg = false;
    cpu.as_root = ttbr0 | 1; /* CnP */
    refresh(l, &cpu, 1);
    expect_task(l, &cpu, 0, 800, "loop");
    CHECK_INT(space_of(l, mm2), 0);
    prof_os_linux_ops.free(l);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    ram = g_malloc0(RAM_SIZE);
    lx_offsets_debian12_6_1(&O);
    if (strcmp(which, "reboot") == 0) {
        test_reboot();
    } else if (strcmp(which, "current") == 0) {
        test_current();
    } else if (strcmp(which, "mmcache") == 0) {
        test_mmcache();
    } else if (strcmp(which, "regs") == 0) {
        test_regs();
    } else {
        fprintf(stderr, "usage: %s reboot|current|mmcache|regs\n", argv[0]);
        return 2;
    }
    g_free(ram);
    return harness_result();
}
