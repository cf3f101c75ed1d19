/* The qmp module against a real QEMU running the demo guest (tests/support/vm.h). */
#define _GNU_SOURCE
#include "harness.h"
#include "qmp.h"
#include "qprof/guest_abi.h"
#include "vm.h"

#include <glib.h>
#include <json-c/json.h>

#define USER_BASE 0x400000ull
#define STACK_TOP 0x7ffffff000ull

static const enum qmp_mem_backend backends[] = {QMP_MEM_DIRECT, QMP_MEM_MEMSAVE, QMP_MEM_HMP};
#define N_BACKENDS 3

/* The kernel's qprof_abi, from its serial line "qprof_abi at VA" (main). */
static uint64_t abi_va;

struct reads {
    uint8_t abi[N_BACKENDS][sizeof(struct qprof_abi)];
    uint8_t user[N_BACKENDS][4096];
    uint8_t stack[N_BACKENDS][8192]; /* the last user stack page and the unmapped one above */
    uint8_t tail[N_BACKENDS][64];    /* the last 40 bytes of the stack, from an 8-mod-16 address */
    size_t abi_got[N_BACKENDS], user_got[N_BACKENDS], stack_got[N_BACKENDS], tail_got[N_BACKENDS];
    int unmapped_rc[N_BACKENDS];
    int cpl;
    bool done;
};

/* With the guest stopped: read the same addresses through every backend. */
static int read_everything(qmp_client *c, const struct qmp_regs *cpus, int n_cpus, void *ctx,
                           struct qp_error *err)
{
    struct reads *r = ctx;
    r->cpl = cpus[0].cpl;
    if (cpus[0].cpl != 3)
        return 0; /* user addresses need a user CR3: try again */
    for (int b = 0; b < N_BACKENDS; b++) {
        int rc = qmp_mem_set_backend(c, backends[b], err);
        if (rc < 0)
            return rc;
        struct qmp_mem_req reqs[] = {
            {.vaddr = abi_va, .len = sizeof r->abi[b], .buf = r->abi[b]},
            {.vaddr = USER_BASE, .len = sizeof r->user[b], .buf = r->user[b]},
            {.vaddr = STACK_TOP - 4096, .len = sizeof r->stack[b], .buf = r->stack[b]},
            {.vaddr = USER_BASE - 4096, .len = 16, .buf = r->stack[b]},
            {.vaddr = STACK_TOP - 40, .len = sizeof r->tail[b], .buf = r->tail[b]},
        };
        if ((rc = qmp_mem_read_many(c, &cpus[0], reqs, 5, err)) < 0)
            return rc;
        r->abi_got[b] = reqs[0].got;
        r->user_got[b] = reqs[1].got;
        r->stack_got[b] = reqs[2].got;
        r->unmapped_rc[b] = reqs[3].rc;
        r->tail_got[b] = reqs[4].got;
        /* the unmapped read wrote nothing: the stack page is intact */
    }
    r->done = true;
    return 0;
}

static void check_backends_agree(qmp_client *c)
{
    struct reads *r = g_new0(struct reads, 1);
    struct qp_error err = {0};
    for (int i = 0; i < 200 && !r->done; i++) {
        int rc = qmp_sample(c, read_everything, r, NULL, &err);
        CHECK_MSG(rc == 0, "sample: %s", err.msg);
        if (rc < 0)
            break;
    }
    REQUIRE(r->done);
    for (int b = 0; b < N_BACKENDS; b++) {
        const char *name = qmp_mem_backend_name(backends[b]);
        CHECK_MSG(r->abi_got[b] == sizeof r->abi[b], "%s: abi got %zu", name, r->abi_got[b]);
        CHECK_MSG(r->user_got[b] == 4096, "%s: user got %zu", name, r->user_got[b]);
        CHECK_MSG(r->stack_got[b] == 4096, "%s: stack got %zu", name, r->stack_got[b]);
        /* HMP's x prints 16 bytes a line; a line that straddles the end of the mapping is lost
         * whole unless the dump starts 16-byte aligned. */
        CHECK_MSG(r->tail_got[b] == 40, "%s: stack tail got %zu", name, r->tail_got[b]);
        CHECK_MSG(memcmp(r->tail[b], r->tail[0], 40) == 0, "%s: stack tail differs", name);
        CHECK_MSG(r->unmapped_rc[b] == -EFAULT, "%s: unmapped rc %d", name, r->unmapped_rc[b]);
        CHECK_MSG(memcmp(r->abi[b], r->abi[0], sizeof r->abi[b]) == 0, "%s: abi differs", name);
        CHECK_MSG(memcmp(r->user[b], r->user[0], 4096) == 0, "%s: user differs", name);
        CHECK_MSG(memcmp(r->stack[b], r->stack[0], 4096) == 0, "%s: stack differs", name);
    }
    uint64_t magic;
    memcpy(&magic, r->abi[0], 8);
    CHECK_U64(magic, QPROF_ABI_MAGIC);
    CHECK(memcmp(r->user[0],
                 "\x7f"
                 "ELF",
                 4) == 0 ||
          r->user[0][0] != 0);
    g_free(r);
}

static void check_registers(qmp_client *c)
{
    struct qmp_regs regs[QMP_MAX_CPUS];
    int n = 0;
    struct qp_error err = {0};
    CHECK_MSG(qmp_read_registers(c, regs, QMP_MAX_CPUS, &n, &err) == 0, "%s", err.msg);
    CHECK_INT(n, 2);
    CHECK_INT(regs[0].cpu_index, 0);
    CHECK(regs[0].long_mode);
    CHECK_INT(regs[1].cpu_index, 1);
    CHECK(regs[1].long_mode); /* the demo guest starts its second vCPU (SMP) */
}

static int fail_on_purpose(qmp_client *c, const struct qmp_regs *cpus, int n_cpus, void *ctx,
                           struct qp_error *err)
{
    return qp_error_set(err, -EIO, "injected failure");
}

static void check_failure_resumes(qmp_client *c)
{
    struct qp_error err = {0};
    struct qmp_sample_stats st = {0};
    CHECK_INT(qmp_sample(c, fail_on_purpose, NULL, &st, &err), -EIO);
    bool running = false;
    CHECK_INT(qmp_query_running(c, &running, NULL), 0);
    CHECK(running);
    CHECK(st.paused_ns > 0);
}

static void check_paused_time(qmp_client *c)
{
    struct qmp_sample_stats st = {0};
    struct qp_error err = {0};
    uint64_t before = qmp_round_trips(c);
    CHECK_MSG(qmp_sample(c, NULL, NULL, &st, &err) == 0, "%s", err.msg);
    CHECK(st.paused_ns > 1000 && st.paused_ns < 2000000000ull);
    CHECK_INT(st.round_trips, 3); /* stop + info registers -a, cont */
    CHECK_INT(qmp_round_trips(c) - before, 3);
    CHECK(!st.was_paused);
    fprintf(stderr, "paused %.0f us\n", st.paused_ns / 1000.0);
}

static void check_already_paused(qmp_client *c)
{
    CHECK_INT(qmp_execute(c, "stop", NULL, NULL, NULL), 0);
    struct qmp_sample_stats st = {0};
    CHECK_INT(qmp_sample(c, NULL, NULL, &st, NULL), 0);
    CHECK(st.was_paused);
    bool running = true;
    CHECK_INT(qmp_query_running(c, &running, NULL), 0);
    CHECK(!running); /* left as it was */
    CHECK_INT(qmp_execute(c, "cont", NULL, NULL, NULL), 0);
}

static void check_second_client(const char *path)
{
    qmp_client *c2 = NULL;
    struct qp_error err = {0};
    struct qmp_open_opts opts = {.timeout_s = 1};
    CHECK_INT(qmp_open(path, &opts, &c2, &err), -ETIMEDOUT);
    CHECK_MSG(strstr(err.msg, "another client") != NULL, "%s", err.msg);
}

/* QMP_CAPTURE_DIR=dir saves `info registers` at CPL 0 and CPL 3 (tests/data/qmp-demo-*). */
static void capture(qmp_client *c, const char *dir)
{
    bool have[4] = {false};
    for (int i = 0; i < 2000 && !(have[0] && have[3]); i++) {
        CHECK_INT(qmp_execute(c, "stop", NULL, NULL, NULL), 0);
        char *text = NULL;
        struct qmp_regs r;
        int n;
        if (qmp_hmp(c, "info registers", -1, &text, NULL) == 0 &&
            qmp_parse_registers(text, &r, 1, &n, NULL) == 0 && !have[r.cpl]) {
            char *path = g_strdup_printf("%s/qmp-demo-registers-cpl%d.txt", dir, r.cpl);
            g_file_set_contents(path, text, -1, NULL);
            g_free(path);
            have[r.cpl] = true;
        }
        free(text);
        qmp_execute(c, "cont", NULL, NULL, NULL);
    }
}

int main(void)
{
    struct vm_opts opts = {.smp = 2, .shared_ram = true};
    test_vm *vm = NULL;
    int rc = vm_start(&opts, &vm);
    if (rc == VM_SKIP)
        return VM_SKIP;
    REQUIRE(rc == 0);
    REQUIRE(vm_wait_serial(vm, "ready", 120) == 0);
    char *serial = vm_serial_text(vm);
    const char *abi_line = strstr(serial, "qprof_abi at 0xffffffff8");
    abi_va = abi_line ? strtoull(abi_line + strlen("qprof_abi at "), NULL, 16) : 0;
    CHECK_MSG(abi_va != 0, "no 'qprof_abi at VA' line: %s", serial);
    free(serial);

    qmp_client *c = NULL;
    struct qp_error err = {0};
    rc = qmp_open(vm_qmp_path(vm), NULL, &c, &err);
    CHECK_MSG(rc == 0, "qmp_open: %s", err.msg);
    if (c) {
        CHECK_INT(qmp_mem_backend_in_use(c), QMP_MEM_DIRECT);
        CHECK(qmp_qemu_version(c)[0] != '\0');
        if (getenv("QMP_CAPTURE_DIR"))
            capture(c, getenv("QMP_CAPTURE_DIR"));
        check_registers(c);
        check_backends_agree(c);
        check_failure_resumes(c);
        check_paused_time(c);
        check_already_paused(c);
        check_second_client(vm_qmp_path(vm));
        qmp_free(c);
    }
    vm_stop(vm);
    return harness_result();
}
