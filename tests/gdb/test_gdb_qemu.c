/* The gdb module against a real QEMU running the demo guest (tests/support/vm.h), its gdbstub on
 * a UNIX chardev in a private directory (no port to race for). */
#define _GNU_SOURCE
#include "gdb.h"
#include "x86_regs.h"
#include "harness.h"
#include "vm.h"

#include <glib.h>
#include <time.h>
#include <unistd.h>

#define KERNEL_LO 0xffffffff80000000ull /* the demo kernel's link range */
#define USER_LO   0x400000ull           /* user programs' base .. their stack top */
#define USER_HI   0x8000000000ull

static size_t serial_len(test_vm *vm)
{
    char *t = vm_serial_text(vm);
    size_t n = t ? strlen(t) : 0;
    free(t);
    return n;
}

/* The guest keeps printing while it runs: wait (generously) for the log to grow. */
static bool serial_grows(test_vm *vm, double timeout_s)
{
    size_t before = serial_len(vm);
    for (int i = 0; i < (int)(timeout_s * 20); i++) {
        if (serial_len(vm) > before)
            return true;
        usleep(50000);
    }
    return false;
}

static void print_tdesc(const gdb_client *c)
{
    const struct gdb_tdesc *d = gdb_target(c);
    fprintf(stderr, "architecture %s, %d registers, g is %zu bytes:\n", d->arch, d->n_regs,
            d->g_size);
    for (int i = 0; i < d->n_regs; i++)
        fprintf(stderr, " %s/%d", d->regs[i].name, d->regs[i].bitsize);
    fprintf(stderr, "\nthreads:");
    for (int i = 0; i < gdb_thread_count(c); i++)
        fprintf(stderr, " %s", gdb_thread_id(c, i));
    fprintf(stderr, " (multiprocess %d, PacketSize %zu)\n", gdb_multiprocess(c),
            gdb_packet_size(c));
}

int main(void)
{
    char dir[] = "/tmp/qpgdbXXXXXX";
    REQUIRE(mkdtemp(dir));
    char chardev[256], sock[128], addr[140];
    snprintf(sock, sizeof sock, "%s/gdb", dir);
    snprintf(addr, sizeof addr, "unix:%s", sock);
    snprintf(chardev, sizeof chardev, "socket,path=%s,server=on,wait=off,id=g", sock);
    const char *extra[] = {"-chardev", chardev, "-gdb", "chardev:g", NULL};
    struct vm_opts opts = {.smp = 2, .extra_args = extra};
    test_vm *vm = NULL;
    int rc = vm_start(&opts, &vm);
    if (rc == VM_SKIP) {
        rmdir(dir);
        return VM_SKIP;
    }
    REQUIRE(rc == 0);
    REQUIRE(vm_wait_serial(vm, "ready", 120) == 0);

    gdb_client *c = NULL;
    struct qp_error err = {0};
    struct gdb_open_opts go = {.timeout_s = 10};
    rc = gdb_open(addr, &go, &c, &err);
    REQUIRE(rc == 0 || (fprintf(stderr, "%s\n", err.msg), 0));
    print_tdesc(c);
    CHECK_INT(gdb_thread_count(c), 2);
    CHECK(!gdb_stopped(c));
    REQUIRE(gdb_tdesc_find(gdb_target(c), "rip") >= 0);
    CHECK(serial_grows(vm, 30));

    struct gdb_stop st;
    CHECK_MSG(gdb_interrupt(c, &st, &err) == 0, "%s", err.msg);
    CHECK(gdb_stopped(c));
    fprintf(stderr, "stopped: signal %d thread %s\n", st.signal, st.thread);

    struct gdb_regset rs[GDB_MAX_THREADS];
    int n = 0;
    CHECK_MSG(gdb_read_registers_all(c, rs, GDB_MAX_THREADS, &n, &err) == 0, "%s", err.msg);
    CHECK_INT(n, 2);
    struct gdb_x86_regs x = {0};
    if (n > 0) {
        CHECK_MSG(gdb_x86_regs_from(c, &rs[0], &x, &err) == 0, "%s", err.msg);
        fprintf(stderr,
                "vCPU0 rip %#" PRIx64 " rsp %#" PRIx64 " rbp %#" PRIx64 " cs %#x eflags %#" PRIx64
                " cr0 %#" PRIx64 " cr3 %#" PRIx64 " efer %#" PRIx64 " fs_base %d gs_base %d\n",
                x.rip, x.rsp, x.rbp, x.cs, x.eflags, x.cr0, x.cr3, x.efer, x.has_fs_base,
                x.has_gs_base);
        CHECK_MSG(x.rip >= KERNEL_LO || (x.rip >= USER_LO && x.rip < USER_HI),
                  "rip %#" PRIx64 " outside kernel and user ranges", x.rip);
        CHECK((x.cs & 3) == 0 || (x.cs & 3) == 3);
        /* Offsets from the XML are right only if the control registers read as a 64-bit
         * guest's: CR0.PG and PE, EFER.LMA and LME, a page-aligned CR3. */
        CHECK(x.has_cr0 && x.has_cr3 && x.has_efer && x.has_fs_base && x.has_gs_base);
        CHECK_U64(x.cr0 & 0x80000001u, 0x80000001u);
        CHECK_U64(x.efer & 0x500, 0x500);
        CHECK(x.cr3 != 0 && (x.cr3 & 0xfff) == 0);
        CHECK_INT(gdb_target(c)->g_size, rs[0].len);
        CHECK(rs[0].valid[rs[0].len - 1]);
        uint8_t stack[64];
        struct gdb_mem_req req = {.vaddr = x.rsp, .len = sizeof stack, .buf = stack};
        CHECK_MSG(gdb_mem_read_many(c, 0, &req, 1, &err) == 0, "%s", err.msg);
        CHECK_INT(req.rc, 0);
        CHECK_INT(req.got, 64);
        /* An unmapped address answers an E reply, not a failure of the whole call. */
        uint8_t none[16];
        struct gdb_mem_req bad = {.vaddr = 0x10, .len = sizeof none, .buf = none};
        CHECK_MSG(gdb_mem_read_many(c, 0, &bad, 1, &err) == 0, "%s", err.msg);
        CHECK_INT(bad.rc, -EIO);
        CHECK_INT(bad.got, 0);
        fprintf(stderr, "unmapped read: E%02x\n", bad.remote_error);
    }
    for (int i = 0; i < n; i++)
        gdb_regset_clear(&rs[i]);

    /* Stopped means stopped: nothing printed. Then it runs again. */
    CHECK_MSG(gdb_continue(c, &err) == 0, "%s", err.msg);
    CHECK(serial_grows(vm, 30));
    gdb_free(c); /* detaches: the guest goes on */
    CHECK(serial_grows(vm, 30));
    CHECK(vm_alive(vm));
    vm_stop(vm);
    unlink(sock);
    rmdir(dir);
    return harness_result();
}
