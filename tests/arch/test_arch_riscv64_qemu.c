/* riscv64 through a real qemu-system-riscv64's gdbstub, with the gdbstub target (target/): the
 * architecture comes from target.xml, the registers by its names, priv and satp by `p` packets;
 * the guest (rv64_mini.S) runs in S and U mode under Sv39. At each stop the vCPU must be in a
 * mode the guest uses, with its pc in the right half for it, and qprof's own Sv39 walk of the
 * pc, reading the page tables from the guest's RAM file, must find the same bytes that QEMU's
 * MMU gives for that pc through `m` packets. */
#define _GNU_SOURCE
#include "arch.h"
#include "child.h"
#include "harness.h"
#include "target.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RAM_BASE  0x80000000ull
#define RAM_SIZE  (64ull << 20)
#define USER_CODE 0x10000ull
#define SAMPLES   200

struct ram {
    const uint8_t *map;
};

static int read_phys(void *ctx, uint64_t paddr, uint64_t *val)
{
    const struct ram *r = ctx;
    if (paddr < RAM_BASE || paddr - RAM_BASE > RAM_SIZE - 8)
        return -EFAULT;
    memcpy(val, r->map + (paddr - RAM_BASE), 8);
    return 0;
}

#define MAX_HARTS 4

struct seen {
    const struct ram *ram;
    int harts;
    int user, supervisor, machine, walked;
    int user_of[MAX_HARTS], supervisor_of[MAX_HARTS];
};

/* One vCPU at a stop: a mode the machine uses, its pc in the half for that mode, and the pc's
 * bytes the same through qprof's walk and through QEMU's MMU. */
static void check_vcpu(prof_target *t, const struct prof_arch *a, const struct prof_vcpu *v,
                       struct seen *s)
{
    CHECK(v->index >= 0 && v->index < s->harts);
    if (v->index < 0 || v->index >= s->harts)
        return;
    if (v->privilege == 0) { /* M-mode: the boot code, before the first mret */
        if (s->machine++ < 3)
            fprintf(stderr, "M-mode at pc %#" PRIx64 " ra %#" PRIx64 "\n", v->pc, v->regs.r[1]);
        CHECK(!v->paging64);
        return;
    }
    CHECK(v->paging64);
    CHECK_U64(v->as_root >> 60, 8); /* Sv39 */
    CHECK_U64(v->pc, v->regs.r[a->pc_reg]);
    CHECK_U64(v->sp, v->regs.r[a->sp_reg]);
    if (v->user) {
        s->user++;
        s->user_of[v->index]++;
        CHECK_MSG(v->pc >= USER_CODE && v->pc < USER_CODE + 4096, "user pc %#" PRIx64, v->pc);
    } else {
        s->supervisor++;
        s->supervisor_of[v->index]++;
        CHECK_INT(v->privilege, 2);
        CHECK_MSG(v->pc >= a->split.kernel_start, "S-mode pc %#" PRIx64, v->pc);
    }
    uint64_t paddr = 0, page = 0;
    int rc = a->page_walk(v->as_root, v->pc, read_phys, (void *)s->ram, &paddr, &page);
    CHECK_MSG(rc == 0, "walking pc %#" PRIx64 ": %d", v->pc, rc);
    CHECK_U64(page, v->user ? 4096 : 1u << 30);
    uint8_t via_qemu[32] = {0};
    struct prof_mem_req req = {.vaddr = v->pc, .len = sizeof via_qemu, .buf = via_qemu};
    CHECK_INT(prof_target_read(t, v, &req, 1, NULL), 0);
    CHECK_INT(req.rc, 0);
    if (rc == 0 && req.got == sizeof via_qemu && paddr - RAM_BASE < RAM_SIZE - sizeof via_qemu) {
        CHECK(memcmp(via_qemu, s->ram->map + (paddr - RAM_BASE), sizeof via_qemu) == 0);
        s->walked++;
    }
}

static int on_stop(prof_target *t, const struct prof_vcpu *cpus, int n, void *ctx,
                   struct qp_error *err)
{
    (void)err;
    struct seen *s = ctx;
    const struct prof_arch *a = prof_target_arch(t);
    CHECK_INT(n, s->harts);
    for (int i = 0; i < n && i < MAX_HARTS; i++)
        check_vcpu(t, a, &cpus[i], s);
    return 0;
}

static char *slurp(const char *path)
{
    char *text = NULL;
    g_file_get_contents(path, &text, NULL, NULL);
    return text ? text : g_strdup("");
}

/* The qprof binary against the same machine: an x86_64 or an aarch64 kernel ELF is refused in
 * one line, and so is QMP alone; with the riscv64 one, kernel stacks unwind by its CFI
 * (libdwfl's riscv backend) from kwork through ksyscall to the trap entry s_trap, where they
 * end; what cannot be unwound (user code, for which --os none knows no binary) is marked
 * truncated, never invented. */
static void run_qprof(const char *dir, const char *gdb, const char *qmp, int harts)
{
    char *bin = g_strdup_printf("%s/qprof", QPROF_BUILD_DIR);
    char *out = g_strdup_printf("%s/q.out", dir), *err = g_strdup_printf("%s/q.err", dir);
    char *folded = g_strdup_printf("%s/q.folded", dir);
    const char *wrong[] = {
        "--gdb",     gdb,  "--os",          "none", "--kernel", QPROF_GUEST_KERNEL,
        "--samples", "10", "--no-progress", NULL};
    bool timed_out = false;
    int status = child_wait(child_start(bin, wrong, dir, out, err, NULL), 120, &timed_out);
    char *text = slurp(err);
    CHECK_INT(status, 1);
    CHECK_MSG(strstr(text, "is an ELF for x86_64, but the guest behind the gdbstub is riscv64") &&
                  strchr(text, '\n') == text + strlen(text) - 1,
              "%s", text);
    g_free(text);
    /* An aarch64 kernel ELF (its header is all qprof reads before refusing it) */
    Elf64_Ehdr eh = {
        .e_type = ET_EXEC, .e_machine = EM_AARCH64, .e_version = EV_CURRENT, .e_ehsize = sizeof eh};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    char *arm = g_strdup_printf("%s/vmlinux-arm64", dir);
    g_file_set_contents(arm, (const char *)&eh, sizeof eh, NULL);
    const char *aarch64[] = {"--gdb",     gdb,  "--kernel",      arm,
                             "--samples", "10", "--no-progress", NULL};
    status = child_wait(child_start(bin, aarch64, dir, out, err, NULL), 120, &timed_out);
    text = slurp(err);
    CHECK_INT(status, 1);
    CHECK_MSG(strstr(text, "is an ELF for aarch64, but the guest behind the gdbstub is riscv64") &&
                  strchr(text, '\n') == text + strlen(text) - 1,
              "%s", text);
    g_free(text);
    unlink(arm);
    g_free(arm);
    /* QMP alone: refused in one line, not sampled as an x86_64 guest */
    const char *over_qmp[] = {"--qmp-socket", qmp, "--samples", "10", "--no-progress", NULL};
    status = child_wait(child_start(bin, over_qmp, dir, out, err, NULL), 120, &timed_out);
    text = slurp(err);
    CHECK_INT(status, 1);
    CHECK_MSG(strstr(text, "qemu-system-riscv64") && strstr(text, "--gdb") &&
                  strchr(text, '\n') == text + strlen(text) - 1,
              "%s", text);
    g_free(text);
    const char *right[] = {"--gdb",          gdb,
                           "--os",           "none",
                           "--kernel",       QPROF_RV64_MINI,
                           "--kernel-slide", "-0x4080000000",
                           "--samples",      "100",
                           "--no-progress",  "-o",
                           folded,           NULL};
    status = child_wait(child_start(bin, right, dir, out, err, NULL), 120, &timed_out);
    CHECK_INT(status, 0);
    char *stacks = slurp(folded);
    unsigned long total = 0, kernel = 0, to_entry = 0;
    char **lines = g_strsplit(stacks, "\n", -1);
    for (char **p = lines; *p; p++) {
        const char *count = strrchr(*p, ' ');
        if (!**p || !count)
            continue;
        unsigned long n = strtoul(count + 1, NULL, 10);
        total += n;
        /* --os none: a kernel stack taken in a process's address space is rooted at that
         * process ("user [as 1]"), one in no process's at "kernel" */
        const char *semi = strchr(*p, ';');
        const char *frames = semi ? semi + 1 : "";
        bool in_process = g_str_has_prefix(*p, "user [as ") && g_str_has_prefix(frames, "s_trap");
        if (g_str_has_prefix(*p, "kernel;") || in_process) {
            kernel += n;
            to_entry += g_str_has_prefix(frames, "s_trap") ? n : 0;
            /* rooted at the trap entry, or marked */
            CHECK_MSG(g_str_has_prefix(frames, "s_trap") ||
                          g_str_has_prefix(frames, "[truncated];"),
                      "%s", *p);
        } else {
            CHECK_MSG(strstr(*p, ";[truncated];"), "%s", *p);
        }
    }
    g_strfreev(lines);
    fprintf(stderr, "qprof: %lu vCPU stacks, %lu in the kernel, %lu of them to s_trap\n", total,
            kernel, to_entry);
    CHECK_INT(total, 100 * harts); /* a stack per vCPU per sample */
    CHECK_MSG(strstr(stacks, ";s_trap;ksyscall;kwork "), "%s", stacks);
    CHECK(kernel > 10);
    CHECK(to_entry * 10 >= kernel * 8); /* the few misses: stops inside the trap entry's first
                                           instructions, before its frame exists */
    g_free(stacks);
    for (char **p = (char *[]){out, err, folded, NULL}; *p; p++) {
        unlink(*p);
        g_free(*p);
    }
    g_free(bin);
}

/* argv[1]: "smp2" (up to smp4) for that many harts, else one. */
int main(int argc, char **argv)
{
    int harts = argc > 1 && g_str_has_prefix(argv[1], "smp") ? atoi(argv[1] + 3) : 1;
    REQUIRE(harts >= 1 && harts <= MAX_HARTS);
    char smp[16];
    snprintf(smp, sizeof smp, "%d", harts);
    const char *qemu = "qemu-system-riscv64";
    char *found = g_find_program_in_path(qemu);
    if (!found || access(QPROF_RV64_MINI, R_OK) != 0) {
        fprintf(stderr, "SKIP: needs %s and %s (xtask deps)\n", qemu, QPROF_RV64_MINI);
        g_free(found);
        return 77;
    }
    char dir[] = "/tmp/qprv64XXXXXX";
    REQUIRE(mkdtemp(dir));
    char *sock = g_strdup_printf("%s/gdb", dir), *ram_path = g_strdup_printf("%s/ram", dir);
    char *addr = g_strdup_printf("unix:%s", sock), *qmp = g_strdup_printf("%s/qmp", dir);
    char *qmp_arg = g_strdup_printf("unix:%s,server=on,wait=off", qmp);
    char *chardev = g_strdup_printf("socket,path=%s,server=on,wait=off,id=g", sock);
    char *mem =
        g_strdup_printf("memory-backend-file,id=mem,size=64M,mem-path=%s,share=on", ram_path);
    char *out = g_strdup_printf("%s/out", dir), *errp = g_strdup_printf("%s/err", dir);
    const char *args[] = {"-machine", "virt,memory-backend=mem",
                          "-m",       "64M",
                          "-object",  mem,
                          "-bios",    "none",
                          "-kernel",  QPROF_RV64_MINI,
                          "-display", "none",
                          "-serial",  "none",
                          "-monitor", "none",
                          "-chardev", chardev,
                          "-gdb",     "chardev:g",
                          "-qmp",     qmp_arg,
                          "-smp",     smp,
                          NULL};
    pid_t pid = child_start(found, args, dir, out, errp, NULL);
    REQUIRE(pid > 0);

    prof_target *t = NULL;
    struct qp_error err = {0};
    struct prof_target_open_opts o = {.address = addr, .timeout_s = 10};
    for (int i = 0; i < 600 && !t; i++) { /* the socket appears once QEMU has started */
        if (prof_target_open(&prof_target_gdb_ops, &o, &t, &err) != 0)
            usleep(50000);
    }
    REQUIRE(t || (fprintf(stderr, "%s\n", err.msg), 0));
    CHECK(prof_target_arch(t) == &prof_arch_riscv64);
    CHECK_STR(prof_target_arch(t)->name, "riscv64");

    int fd = open(ram_path, O_RDONLY);
    REQUIRE(fd >= 0);
    struct ram ram = {mmap(NULL, RAM_SIZE, PROT_READ, MAP_SHARED, fd, 0)};
    REQUIRE(ram.map != MAP_FAILED);
    struct seen s = {.ram = &ram, .harts = harts};
    /* Boot: until a stop finds it past the M-mode code (generous deadline). */
    for (int i = 0; i < 3000 && s.user + s.supervisor == 0; i++) {
        CHECK_MSG(prof_target_sample(t, on_stop, &s, NULL, &err) == 0, "%s", err.msg);
        usleep(10000);
    }
    REQUIRE(s.user + s.supervisor > 0);
    /* Then a fixed count of samples a few ms apart, as qprof takes them (back to back, TCG
     * would hardly run the guest between two stops). The guest spends about half its time in
     * U mode and the rest in S, and never traps to M. */
    s = (struct seen){.ram = &ram, .harts = harts};
    for (int i = 0; i < SAMPLES; i++) {
        int rc = prof_target_sample(t, on_stop, &s, NULL, &err);
        CHECK_MSG(rc == 0, "sample %d: %s", i, err.msg);
        if (rc)
            break;
        usleep(2000 + (unsigned)g_random_int_range(0, 4000));
    }
    fprintf(stderr, "%d samples: %d user, %d supervisor, %d machine; %d pcs walked\n", SAMPLES,
            s.user, s.supervisor, s.machine, s.walked);
    CHECK_INT(s.machine, 0);
    for (int h = 0; h < harts; h++) { /* every hart in both modes, about half and half */
        fprintf(stderr, "hart %d: %d user, %d supervisor\n", h, s.user_of[h], s.supervisor_of[h]);
        CHECK(s.user_of[h] > SAMPLES / 10);
        CHECK(s.supervisor_of[h] > SAMPLES / 10);
    }
    CHECK(s.walked >= s.user + s.supervisor - 2);
    prof_target_free(t);
    run_qprof(dir, addr, qmp, harts);
    munmap((void *)ram.map, RAM_SIZE);
    close(fd);
    kill(pid, SIGKILL);
    bool timed_out = false;
    child_wait(pid, 30, &timed_out);
    for (char **p = (char *[]){sock, qmp, ram_path, out, errp, NULL}; *p; p++) {
        unlink(*p);
        g_free(*p);
    }
    rmdir(dir);
    g_free(found);
    g_free(addr);
    g_free(qmp_arg);
    g_free(chardev);
    g_free(mem);
    return harness_result();
}
