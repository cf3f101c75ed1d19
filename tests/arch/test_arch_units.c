/* The architecture tables without QEMU: riscv64's Sv39/Sv48/Sv57 walks on synthetic page
 * tables (superpages, holes, reserved and misaligned entries, a table that points at itself, a
 * satp mode it does not know), its privilege decoding, and the choice of an architecture from a
 * kernel ELF's e_machine with the one-line errors for one qprof does not know or a mismatch. */
#define _GNU_SOURCE
#include "arch.h"
#include "harness.h"

#include <elf.h>
#include <errno.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RAM_SIZE (4u << 20) /* guest-physical 0 .. 4 MiB; tables and 4 KiB pages in it */
static uint8_t *ram;
static unsigned reads;

static int read_phys(void *ctx, uint64_t paddr, uint64_t *val)
{
    (void)ctx;
    reads++;
    if (paddr > RAM_SIZE - 8)
        return -EFAULT;
    memcpy(val, ram + paddr, 8);
    return 0;
}

/* PTE bits */
#define V 0x1ull
#define R 0x2ull
#define W 0x4ull
#define X 0x8ull
#define U 0x10ull

static uint64_t pte(uint64_t paddr, uint64_t flags)
{
    return (paddr >> 12) << 10 | flags;
}

static void set(uint64_t table, unsigned index, uint64_t entry)
{
    memcpy(ram + table + index * 8, &entry, 8);
}

static unsigned vpn(uint64_t va, int level)
{
    return (va >> (12 + 9 * level)) & 511;
}

static uint64_t satp(unsigned mode, uint64_t root)
{
    return (uint64_t)mode << 60 | (uint64_t)0x1234 << 44 /* an ASID */ | root >> 12;
}

static int walk(uint64_t s, uint64_t va, uint64_t *pa, uint64_t *size)
{
    reads = 0;
    return prof_arch_riscv64.page_walk(s, va, read_phys, NULL, pa, size);
}

/* Sv39: a user 4 KiB page, a kernel 1 GiB gigapage, a 2 MiB megapage, and every way to fail. */
static void test_sv39(void)
{
    memset(ram, 0, RAM_SIZE);
    const uint64_t root = 0x1000, l1 = 0x2000, l0 = 0x3000, l1_mega = 0x4000;
    const uint64_t user = 0x10000, kern = 0xffffffc000000000ull, mega = 0x40000000ull;
    set(root, vpn(user, 2), pte(l1, V));
    set(l1, vpn(user, 1), pte(l0, V));
    set(l0, vpn(user, 0), pte(0x200000, V | R | X | U));
    set(root, vpn(kern, 2), pte(0x80000000ull, V | R | W | X)); /* gigapage at 2 GiB */
    set(root, vpn(mega, 2), pte(l1_mega, V));
    set(l1_mega, vpn(mega, 1), pte(0x400000, V | R | W)); /* megapage at 4 MiB */
    const uint64_t s = satp(8, root);
    uint64_t pa = 0, size = 0;
    CHECK_INT(walk(s, user + 0x123, &pa, &size), 0);
    CHECK_U64(pa, 0x200123);
    CHECK_U64(size, 4096);
    CHECK_INT(reads, 3);
    CHECK_INT(walk(s, kern + 0x1234567, &pa, &size), 0);
    CHECK_U64(pa, 0x81234567);
    CHECK_U64(size, 1u << 30);
    CHECK_INT(walk(s, mega + 0x54321, &pa, &size), 0);
    CHECK_U64(pa, 0x454321);
    CHECK_U64(size, 2u << 20);
    CHECK_INT(walk(s, user + 0x1000, &pa, &size), -EFAULT);         /* hole in l0 */
    CHECK_INT(walk(s, 0x0000004000000000ull, &pa, &size), -EFAULT); /* bit 38 not copied up */
    CHECK_INT(walk(s, 0xffff800000000000ull, &pa, &size), -EFAULT); /* an Sv48 address */
    set(l0, vpn(user, 0) + 1, pte(0x201000, V | W));                /* W without R */
    CHECK_INT(walk(s, user + 0x1000, &pa, &size), -EFAULT);
    set(l1_mega, vpn(mega, 1) + 1, pte(0x401000, V | R)); /* misaligned megapage */
    CHECK_INT(walk(s, mega + (2u << 20), &pa, &size), -EFAULT);
    set(l1_mega, vpn(mega, 1) + 2, pte(0x7ff0000000ull, V)); /* table outside RAM */
    CHECK_INT(walk(s, mega + (4u << 20), &pa, &size), -EFAULT);
}

/* Sv48 and Sv57 use the same entries one and two levels deeper. */
static void test_sv48_sv57(void)
{
    memset(ram, 0, RAM_SIZE);
    const uint64_t l4 = 0x1000, l3 = 0x2000, l2 = 0x3000, l1 = 0x4000, l0 = 0x5000;
    const uint64_t va48 = 0x00007f0000001000ull, va57 = 0x00ff000000002000ull;
    set(l3, vpn(va48, 3), pte(l2, V));
    set(l2, vpn(va48, 2), pte(l1, V));
    set(l1, vpn(va48, 1), pte(l0, V));
    set(l0, vpn(va48, 0), pte(0x300000, V | R | U));
    uint64_t pa = 0, size = 0;
    CHECK_INT(walk(satp(9, l3), va48 + 8, &pa, &size), 0);
    CHECK_U64(pa, 0x300008);
    CHECK_INT(reads, 4);
    CHECK_INT(walk(satp(9, l3), 0x0000800000000000ull, &pa, &size), -EFAULT); /* not canonical */
    /* Sv57: a fifth level above the same l2..l0 chain (the low 48 bits index them alike). */
    memset(ram, 0, RAM_SIZE);
    set(l4, vpn(va57, 4), pte(l3, V));
    set(l3, vpn(va57, 3), pte(l2, V));
    set(l2, vpn(va57, 2), pte(l1, V));
    set(l1, vpn(va57, 1), pte(l0, V));
    set(l0, vpn(va57, 0), pte(0x301000, V | R | U));
    CHECK_INT(walk(satp(10, l4), va57 + 16, &pa, &size), 0);
    CHECK_U64(pa, 0x301010);
    CHECK_INT(reads, 5);
    CHECK_INT(walk(satp(10, l4), 0x0100000000000000ull, &pa, &size), -EFAULT);
    /* Bare: no translation. */
    CHECK_INT(walk(0, 0x80001234, &pa, &size), 0);
    CHECK_U64(pa, 0x80001234);
}

/* Tables that point back at themselves: the walk ends after one entry per level. */
static void test_loop_and_unknown_mode(void)
{
    memset(ram, 0, RAM_SIZE);
    const uint64_t t = 0x1000;
    for (unsigned i = 0; i < 512; i++)
        set(t, i, pte(t, V)); /* every entry: "next level is this table" */
    uint64_t pa = 0, size = 0;
    for (unsigned mode = 8; mode <= 10; mode++) {
        CHECK_INT(walk(satp(mode, t), 0x1000, &pa, &size), -EFAULT);
        CHECK_INT(reads, (int)mode - 5); /* 3, 4, 5 levels */
    }
    for (unsigned mode = 1; mode < 16; mode++)
        if (mode < 8 || mode > 10) {
            CHECK_INT(walk(satp(mode, t), 0x1000, &pa, &size), -ENOTSUP);
            CHECK_INT(reads, 0);
        }
}

struct fake_regs {
    uint64_t priv, satp;
    bool has_priv, has_satp;
};

static int get_reg(void *ctx, const char *name, uint64_t *val)
{
    const struct fake_regs *f = ctx;
    if (strcmp(name, "priv") == 0 && f->has_priv)
        return *val = f->priv, 0;
    if (strcmp(name, "satp") == 0 && f->has_satp)
        return *val = f->satp, 0;
    return -ENOENT;
}

static void test_cpu_state(void)
{
    const struct prof_arch *a = &prof_arch_riscv64;
    struct prof_arch_cpu_state st;
    struct qp_error err = {0};
    struct fake_regs u = {.priv = 0, .satp = satp(8, 0x1000), .has_priv = true, .has_satp = true};
    CHECK_INT(a->cpu_state(get_reg, &u, &st, &err), 0);
    CHECK_INT(st.privilege, a->user_privilege);
    CHECK(st.paging);
    CHECK_U64(st.as_root, u.satp);
    struct fake_regs s = u;
    s.priv = 1;
    CHECK_INT(a->cpu_state(get_reg, &s, &st, &err), 0);
    CHECK(st.privilege != a->user_privilege && st.privilege > 0);
    struct fake_regs m = u;
    m.priv = 3; /* M-mode: satp does not translate */
    CHECK_INT(a->cpu_state(get_reg, &m, &st, &err), 0);
    CHECK_INT(st.privilege, 0);
    CHECK(!st.paging);
    struct fake_regs bad = u;
    bad.satp = satp(5, 0x1000);
    CHECK_INT(a->cpu_state(get_reg, &bad, &st, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "mode 5") && !strchr(err.msg, '\n'), "%s", err.msg);
    struct fake_regs nopriv = u;
    nopriv.has_priv = false;
    CHECK(a->cpu_state(get_reg, &nopriv, &st, &err) < 0);
    CHECK_MSG(strstr(err.msg, "priv"), "%s", err.msg);
    struct fake_regs badpriv = u;
    badpriv.priv = 2;
    CHECK(a->cpu_state(get_reg, &badpriv, &st, &err) < 0);
}

/* A file holding only an ELF header of the given machine. */
static char *elf_file(const char *dir, const char *name, uint16_t machine)
{
    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_EXEC;
    eh.e_machine = machine;
    eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof eh;
    char *path = g_strdup_printf("%s/%s", dir, name);
    g_file_set_contents(path, (const char *)&eh, sizeof eh, NULL);
    return path;
}

static void test_choice(void)
{
    char dir[] = "/tmp/qparchXXXXXX";
    REQUIRE(mkdtemp(dir));
    char *rv = elf_file(dir, "rv.elf", EM_RISCV), *x86 = elf_file(dir, "x86.elf", EM_X86_64);
    char *arm = elf_file(dir, "arm.elf", EM_AARCH64);
    char *map = g_strdup_printf("%s/System.map", dir);
    g_file_set_contents(map, "ffffffff80000000 T _start\n", -1, NULL);
    const struct prof_arch *a = NULL;
    struct qp_error err = {0};
    CHECK_INT(prof_arch_of_elf_file(rv, &a, &err), 0);
    CHECK(a == &prof_arch_riscv64);
    CHECK_INT(prof_arch_of_elf_file(x86, &a, &err), 0);
    CHECK(a == &prof_arch_x86_64);
    CHECK_INT(prof_arch_of_elf_file(map, &a, &err), 0); /* no ELF: nothing to check */
    CHECK(a == NULL);
    /* An aarch64 kernel given for a riscv64 guest: qprof knows no aarch64 yet. */
    CHECK_INT(prof_arch_of_elf_file(arm, &a, &err), -ENOTSUP);
    CHECK_MSG(strstr(err.msg, "aarch64") && strstr(err.msg, "183") && !strchr(err.msg, '\n'), "%s",
              err.msg);
    /* A riscv64 kernel for an x86_64 guest, and the other way round. */
    CHECK_INT(prof_arch_check_match(&prof_arch_riscv64, rv, &prof_arch_x86_64, "gdbstub", &err),
              -EINVAL);
    CHECK_MSG(strstr(err.msg, "riscv64") && strstr(err.msg, "x86_64") && strstr(err.msg, "gdbstub"),
              "%s", err.msg);
    CHECK(prof_arch_check_match(&prof_arch_x86_64, x86, &prof_arch_riscv64, "gdbstub", &err) < 0);
    CHECK_INT(prof_arch_check_match(&prof_arch_riscv64, rv, &prof_arch_riscv64, "gdbstub", &err),
              0);
    CHECK_INT(prof_arch_check_match(NULL, map, &prof_arch_riscv64, "gdbstub", &err), 0);
    /* target.xml's names */
    CHECK(prof_arch_for_gdb("riscv:rv64") == &prof_arch_riscv64);
    CHECK(prof_arch_for_gdb("i386:x86-64") == &prof_arch_x86_64);
    CHECK(prof_arch_for_gdb("aarch64") == NULL);
    for (char **p = (char *[]){rv, x86, arm, map, NULL}; *p; p++) {
        unlink(*p);
        g_free(*p);
    }
    rmdir(dir);
}

int main(void)
{
    ram = calloc(1, RAM_SIZE);
    REQUIRE(ram);
    test_sv39();
    test_sv48_sv57();
    test_loop_and_unknown_mode();
    test_cpu_state();
    test_choice();
    free(ram);
    return harness_result();
}
