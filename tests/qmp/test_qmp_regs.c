/* `info registers` parsing against real QEMU 7.2 transcripts (tests/data/qemu-transcripts). */
#include "harness.h"
#include "qmp.h"

#include <glib.h>

static char *load(const char *name)
{
    char *path = g_strdup_printf("%s/%s", QMP_TEST_DATA, name), *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        HARNESS_FAIL("cannot read %s", path);
    g_free(path);
    return text;
}

static int parse_file(const char *name, struct qmp_regs *out, int max)
{
    char *text = load(name);
    struct qp_error err = {0};
    int n = -1;
    REQUIRE(text);
    int rc = qmp_parse_registers(text, out, max, &n, &err);
    CHECK_MSG(rc == 0, "%s: %s", name, err.msg);
    g_free(text);
    return n;
}

static void test_cpl3(void)
{
    struct qmp_regs r[2];
    CHECK_INT(parse_file("qemu-transcripts/info_registers_cpl3.txt", r, 2), 1);
    CHECK_INT(r[0].cpu_index, 0);
    CHECK_INT(r[0].cpl, 3);
    CHECK_U64(r[0].rip, 0x4010c0);
    CHECK_U64(r[0].rsp, 0x00007ffe4550a508);
    CHECK_U64(r[0].rbx, 0x00007ffe4550a6b8);
    CHECK_U64(r[0].r10, 0x4471a0);
    CHECK_U64(r[0].r12, 0x3429ab08);
    CHECK_U64(r[0].r14, 1);
    CHECK_U64(r[0].rflags, 0x246);
    CHECK_U64(r[0].cr3, 0x2b28000);
    CHECK_U64(r[0].cr0, 0x80050033);
    CHECK_U64(r[0].cr2, 0x5794a9);
    CHECK_U64(r[0].cr4, 0x6f0);
    CHECK_U64(r[0].efer, 0xd01);
    CHECK(r[0].long_mode);
    CHECK(!r[0].halted);
    CHECK_U64(r[0].fs.base, 0x342993c0);
    CHECK_INT(r[0].cs.selector, 0x33);
    CHECK_U64(r[0].cs.flags, 0x00affb00);
    CHECK_U64(r[0].cs.limit, 0xffffffff);
    CHECK_INT(r[0].cs.dpl, 3);
    CHECK_INT(r[0].ss.selector, 0x2b);
    CHECK_INT(r[0].ds.dpl, -1);
    CHECK_U64(r[0].gdt_base, 0xfffffe0000001000);
    CHECK_U64(r[0].idt_base, 0xfffffe0000000000);
}

static void test_cpl0(void)
{
    struct qmp_regs r[1];
    CHECK_INT(parse_file("qemu-transcripts/info_registers_cpl0.txt", r, 1), 1);
    CHECK_INT(r[0].cpl, 0);
    CHECK_U64(r[0].rip, 0xffffffff9f26ed4d);
    CHECK_U64(r[0].rsp, 0xffffd05fc0637f28);
    CHECK_U64(r[0].rax, 0xffffffff9f275a20);
    CHECK_U64(r[0].rdi, 0xb0);
    CHECK_U64(r[0].gs.base, 0xffff8a174f800000);
    CHECK_INT(r[0].cs.selector, 0x10);
    CHECK_INT(r[0].cs.dpl, 0);
    CHECK_U64(r[0].cr3, 0x2b28000);
}

static void test_smp2(void)
{
    struct qmp_regs r[4];
    CHECK_INT(parse_file("qemu-transcripts/info_registers_a_smp2.txt", r, 4), 2);
    CHECK_INT(r[0].cpu_index, 0);
    CHECK_INT(r[1].cpu_index, 1);
    CHECK_U64(r[0].rip, 0x530945);
    CHECK_U64(r[1].rip, 0x42a600);
    CHECK_U64(r[0].cr3, 0x289a000);
    CHECK_U64(r[1].cr3, 0x2a44000);
    CHECK_U64(r[1].fs.base, 0x79153c0);
    CHECK_U64(r[1].cr4, 0x6e0);
    CHECK_U64(r[1].gdt_base, 0xfffffe000003c000);
    /* max smaller than the number of CPUs: fills what fits */
    int n = 0;
    char *text = load("qemu-transcripts/info_registers_a_smp2.txt");
    CHECK_INT(qmp_parse_registers(text, r, 1, &n, NULL), 0);
    CHECK_INT(n, 1);
    g_free(text);
}

/* A vCPU the guest never started: 32-bit layout, HLT=1 (captured from QEMU 7.2 under SeaBIOS). */
static const char never_started[] =
    "CPU#1\r\n"
    "EAX=000f49f6 EBX=00000000 ECX=000002ff EDX=00000001\r\n"
    "ESI=00000000 EDI=00000000 EBP=00000000 ESP=00006c5c\r\n"
    "EIP=000fd09a EFL=00000002 [-------] CPL=0 II=0 A20=1 SMM=0 HLT=1\r\n"
    "ES =0010 00000000 ffffffff 00cf9300 DPL=0 DS   [-WA]\r\n"
    "CS =0008 00000000 ffffffff 00cf9b00 DPL=0 CS32 [-RA]\r\n"
    "GDT=     000f6180 00000037\r\n"
    "IDT=     000f61be 00000000\r\n"
    "CR0=00000011 CR2=00000000 CR3=00000000 CR4=00000000\r\n"
    "EFER=0000000000000000\r\n";

static const char real_mode[] = "EAX=00000000 EBX=00000000 ECX=00000000 EDX=00000663\n"
                                "ESI=00000000 EDI=00000000 EBP=00000000 ESP=00000000\n"
                                "EIP=0000fff0 EFL=00000002 [-------] CPL=0 II=0 A20=1 SMM=0 "
                                "HLT=1\n"
                                "CS =f000 ffff0000 0000ffff 00009b00\n"
                                "CR0=60000010 CR2=00000000 CR3=00000000 CR4=00000000\n";

static void test_never_started(void)
{
    struct qmp_regs r[1];
    int n = 0;
    struct qp_error err = {0};
    CHECK_INT(qmp_parse_registers(never_started, r, 1, &n, &err), 0);
    CHECK_INT(n, 1);
    CHECK_INT(r[0].cpu_index, 1);
    CHECK(r[0].halted);
    CHECK(!r[0].long_mode);
    CHECK_U64(r[0].rip, 0xfd09a);
    CHECK_U64(r[0].rsp, 0x6c5c);
    CHECK_U64(r[0].gdt_base, 0xf6180);
    CHECK_INT(qmp_parse_registers(real_mode, r, 1, &n, &err), 0);
    CHECK_U64(r[0].rip, 0xfff0);
    CHECK_U64(r[0].cs.base, 0xffff0000);
    CHECK_INT(r[0].cs.selector, 0xf000);
    CHECK_INT(r[0].cs.dpl, -1);
    CHECK(r[0].halted);
}

static void test_bad(void)
{
    struct qmp_regs r[1];
    int n = 0;
    struct qp_error err = {0};
    CHECK_INT(qmp_parse_registers("", r, 1, &n, &err), -EPROTO);
    CHECK_INT(qmp_parse_registers("unknown command: 'info'\r\n", r, 1, &n, &err), -EPROTO);
    CHECK_INT(qmp_parse_registers("RIP=zz RSP=0 CPL=0\n", r, 1, &n, &err), -EPROTO);
    CHECK(strstr(err.msg, "RIP") != NULL);
    CHECK_INT(qmp_parse_registers("CPU#0\nRIP=1 RSP=2\n", r, 1, &n, &err), -EPROTO);
}

/* Captured from the demo guest (tests/data/qmp-demo-registers-cpl*.txt, see test_qmp_qemu). */
static void test_demo_guest(void)
{
    struct qmp_regs r[1];
    CHECK_INT(parse_file("qmp-demo-registers-cpl0.txt", r, 1), 1);
    CHECK_INT(r[0].cpl, 0);
    CHECK_U64(r[0].rip, 0xffffffff801028e8);
    CHECK_U64(r[0].rsp, 0xffffffff80172ee8);
    CHECK_U64(r[0].rbp, 0xffffffff80172ef0);
    CHECK_INT(r[0].cs.selector, 0x08);
    CHECK_INT(r[0].cs.dpl, 0);
    CHECK_U64(r[0].cr3, 0x155000);
    CHECK_U64(r[0].gdt_base, 0xffffffff80118010);
    CHECK_U64(r[0].idt_base, 0xffffffff80117010);
    CHECK_U64(r[0].efer, 0x500);
    CHECK(r[0].long_mode);
    CHECK_INT(parse_file("qmp-demo-registers-cpl3.txt", r, 1), 1);
    CHECK_INT(r[0].cpl, 3);
    CHECK_U64(r[0].rip, 0x401418);
    CHECK_U64(r[0].rsp, 0x7fffffef98);
    CHECK_U64(r[0].rbp, 0x7fffffefa0);
    CHECK_INT(r[0].cs.selector, 0x23);
    CHECK_INT(r[0].cs.dpl, 3);
    CHECK_INT(r[0].ss.selector, 0x1b);
    CHECK_U64(r[0].fs.base, 0);
    CHECK(!r[0].halted);
}

/* Every transcript in the data directory parses. */
static void test_all_transcripts(void)
{
    char *dir = g_strdup_printf("%s/qemu-transcripts", QMP_TEST_DATA);
    GDir *d = g_dir_open(dir, 0, NULL);
    int files = 0;
    REQUIRE(d);
    for (const char *name; (name = g_dir_read_name(d));) {
        if (!g_str_has_suffix(name, ".txt") || !strstr(name, "info_registers"))
            continue; /* other commands' transcripts (info mtree -f) are other tests' */
        char *rel = g_strdup_printf("qemu-transcripts/%s", name);
        struct qmp_regs r[QMP_MAX_CPUS];
        if (g_str_has_prefix(name, "riscv64_") || g_str_has_prefix(name, "aarch64_")) {
            /* qmp/ parses x86_64's text only (arch/ parses the others'): another architecture's
             * text is refused, saying so */
            char *text = load(rel);
            struct qp_error err = {0};
            int n = 0;
            REQUIRE(text);
            CHECK_MSG(qmp_parse_registers(text, r, QMP_MAX_CPUS, &n, &err) < 0 &&
                          strstr(err.msg, "x86"),
                      "%s: %s", name, err.msg);
            g_free(text);
            g_free(rel);
            continue;
        }
        CHECK_MSG(parse_file(rel, r, QMP_MAX_CPUS) >= 1, "%s", name);
        g_free(rel);
        files++;
    }
    g_dir_close(d);
    g_free(dir);
    CHECK(files >= 3);
}

int main(void)
{
    test_cpl3();
    test_cpl0();
    test_smp2();
    test_never_started();
    test_bad();
    test_demo_guest();
    test_all_transcripts();
    return harness_result();
}
