/* The qprof ABI as a profiler sees it: through a real QMP connection, read struct qprof_abi at
 * the kernel's `qprof_abi` symbol while `spin` (pid 1) and `sys` (pid 2) run, and check it
 * against the ELF files. `sys` is there because it spends half its time in a system call, where
 * user_regs is published; `spin` alone is rarely caught there. */
#include <unistd.h>

#include "elfinfo.h"
#include "harness.h"
#include "layout.h"
#include "qmp.h"
#include "qprof/guest_abi.h"
#include "vm.h"

#define USER_SPIN QPROF_GUEST_USER_DIR "/spin"
#define USER_SYS QPROF_GUEST_USER_DIR "/sys"

struct ctx {
    uint64_t abi_addr, ktext_addr, ktext_size;
    unsigned char *spin_file;
    uint64_t text_addr, text_size, text_off, eh_addr, eh_size;
    uint64_t sys_text_addr, sys_text_size;
    int seen_user3, seen_user0_regs, seen_idle, torn;
};

/* The user registers saved at kernel entry point into the process's code and stack. */
static void check_saved_regs(qmp_client *c, const struct qmp_regs *cpu, struct ctx *x,
                             const struct qprof_abi_cpu *s)
{
    CHECK(s->user_regs >= s->kstack_lo &&
          s->user_regs + sizeof(struct qprof_abi_regs) <= s->kstack_hi);
    struct qprof_abi_regs r;
    size_t got = 0;
    int rc = qmp_mem_read(c, cpu, s->user_regs, &r, sizeof r, &got, NULL);
    CHECK(rc == 0 && got == sizeof r);
    CHECK_U64(r.cs, SEL_UCODE);
    CHECK_U64(r.ss, SEL_UDATA);
    CHECK_MSG(r.rip >= s->text_addr && r.rip < s->text_addr + s->text_size,
              "saved user rip 0x%llx outside .text", (unsigned long long)r.rip);
    CHECK(r.rsp <= USER_STACK_TOP && r.rsp > USER_STACK_TOP - USER_STACK_SIZE);
    x->seen_user0_regs++;
}

static void check_sys_sample(qmp_client *c, const struct qmp_regs *cpu, struct ctx *x,
                             const struct qprof_abi_cpu *s)
{
    CHECK_STR(s->name, "sys");
    CHECK_U64(s->text_addr, x->sys_text_addr);
    CHECK_U64(s->text_size, x->sys_text_size);
    CHECK_U64(s->cr3, cpu->cr3 & ~0xfffull);
    if (cpu->cpl == 3)
        CHECK_U64(s->user_regs, 0);
    else if (s->user_regs)
        check_saved_regs(c, cpu, x, s);
}

static void check_user_sample(qmp_client *c, const struct qmp_regs *cpu, struct ctx *x,
                              const struct qprof_abi_cpu *s)
{
    if (s->pid == 2) {
        check_sys_sample(c, cpu, x, s);
        return;
    }
    CHECK_INT(s->pid, 1);
    CHECK_STR(s->name, "spin");
    CHECK_U64(s->text_addr, x->text_addr);
    CHECK_U64(s->text_size, x->text_size);
    CHECK_U64(s->eh_frame_addr, x->eh_addr);
    CHECK_U64(s->eh_frame_size, x->eh_size);
    CHECK_U64(s->load_base, 0);
    CHECK(s->generation != 0);
    CHECK_U64(s->cr3, cpu->cr3 & ~0xfffull);
    CHECK(s->kstack_lo < s->kstack_hi && s->kstack_lo >= 0xffffffff80000000ull);
    if (cpu->cpl == 3) {
        CHECK_U64(s->user_regs, 0);
        if (x->seen_user3++ == 0) {
            unsigned char *text = malloc(s->text_size);
            size_t got = 0;
            struct qp_error err = {0};
            int rc = qmp_mem_read(c, cpu, s->text_addr, text, s->text_size, &got, &err);
            CHECK_MSG(rc == 0 && got == s->text_size, "reading .text: %s", err.msg);
            CHECK_MSG(memcmp(text, x->spin_file + x->text_off, s->text_size) == 0,
                      ".text in guest memory differs from user/spin");
            free(text);
        }
    } else if (s->user_regs) {
        check_saved_regs(c, cpu, x, s);
    }
}

static int on_sample(qmp_client *c, const struct qmp_regs *cpus, int n_cpus, void *opaque,
                     struct qp_error *err)
{
    struct ctx *x = opaque;
    struct qprof_abi abi;
    size_t got = 0;
    int rc = qmp_mem_read(c, &cpus[0], x->abi_addr, &abi, sizeof abi, &got, err);
    if (rc < 0 || got != sizeof abi)
        return rc < 0 ? rc : -EIO;
    CHECK_U64(abi.magic, QPROF_ABI_MAGIC);
    CHECK_INT(abi.version, QPROF_ABI_VERSION);
    CHECK_INT(abi.size, sizeof(struct qprof_abi));
    CHECK_INT(abi.cpu_slot_size, sizeof(struct qprof_abi_cpu));
    CHECK_INT(abi.cpu_count, 1);
    CHECK(abi.boot_id != 0);
    CHECK_U64(abi.kernel_text_addr, x->ktext_addr);
    CHECK_U64(abi.kernel_text_size, x->ktext_size);
    const struct qprof_abi_cpu *s = &abi.cpu[0];
    if (s->seq & 1) {
        x->torn++;
        return 0;
    }
    /* A context switch loads CR3 and republishes the slot a few kernel instructions apart;
     * in between the slot describes the other process. A reader must not trust it then
     * (docs/guest-abi.md); in user mode the two always agree. */
    bool mid_switch = s->state == QPROF_CPU_USER && cpus[0].cpl == 0 &&
                      s->cr3 != (cpus[0].cr3 & ~0xfffull);
    if (mid_switch)
        x->torn++;
    else if (s->state == QPROF_CPU_USER)
        check_user_sample(c, &cpus[0], x, s);
    else if (s->state == QPROF_CPU_IDLE) {
        CHECK_INT(s->pid, 0);
        CHECK_U64(s->user_regs, 0);
        CHECK_INT(cpus[0].cpl, 0);
        x->seen_idle += cpus[0].halted;
    } else
        CHECK_MSG(0, "unexpected state %u", s->state);
    for (int i = 1; i < QPROF_ABI_MAX_CPUS; i++)
        CHECK_INT(abi.cpu[i].state, QPROF_CPU_OFFLINE);
    return 0;
}

int main(void)
{
    struct ctx x = {0};
    uint64_t sym_size, ktext_off;
    REQUIRE(elf_symbol(QPROF_GUEST_KERNEL, QPROF_ABI_SYMBOL, &x.abi_addr, &sym_size) == 0);
    CHECK_INT(sym_size, sizeof(struct qprof_abi));
    CHECK(x.abi_addr >= 0xffffffff80000000ull && (x.abi_addr & 4095) == 0);
    REQUIRE(elf_section(QPROF_GUEST_KERNEL, ".text", &x.ktext_addr, &x.ktext_size, &ktext_off) == 0);
    REQUIRE(elf_section(USER_SPIN, ".text", &x.text_addr, &x.text_size, &x.text_off) == 0);
    uint64_t sys_off;
    REQUIRE(elf_section(USER_SYS, ".text", &x.sys_text_addr, &x.sys_text_size, &sys_off) == 0);
    uint64_t eh_off;
    REQUIRE(elf_section(USER_SPIN, ".eh_frame", &x.eh_addr, &x.eh_size, &eh_off) == 0);
    size_t file_size;
    REQUIRE((x.spin_file = read_whole_file(USER_SPIN, &file_size)) != NULL);

    struct vm_opts opts = {.cmdline = "run=spin,sys"};
    test_vm *vm = NULL;
    int rc = vm_start(&opts, &vm);
    if (rc == VM_SKIP)
        return VM_SKIP;
    REQUIRE(rc == 0);
    REQUIRE(vm_wait_serial(vm, "spin[1] iter=", 30) == 0);

    qmp_client *c = NULL;
    struct qp_error err = {0};
    struct qmp_open_opts qo = {.backend = QMP_MEM_MEMSAVE};
    rc = qmp_open(vm_qmp_path(vm), &qo, &c, &err);
    CHECK_MSG(rc == 0, "qmp_open: %s", err.msg);
    for (int i = 0; rc == 0 && i < 3000 && !(x.seen_user3 && x.seen_user0_regs > 0 && x.seen_idle);
         i++) {
        rc = qmp_sample(c, on_sample, &x, NULL, &err);
        CHECK_MSG(rc == 0, "sample %d: %s", i, err.msg);
        usleep(3000);
    }
    fprintf(stderr, "abi at 0x%llx; samples: user cpl3 %d, kernel with user_regs %d, idle %d, torn %d\n",
            (unsigned long long)x.abi_addr, x.seen_user3, x.seen_user0_regs, x.seen_idle, x.torn);
    CHECK(x.seen_user3 > 0);
    CHECK(x.seen_user0_regs > 0);
    CHECK(x.seen_idle > 0);
    qmp_free(c);
    vm_stop(vm);
    free(x.spin_file);
    CHECK(x.ktext_size > 0);
    return harness_result();
}
