/* Where qprof-plugin.so finds the user stack of a sample taken in kernel mode (qpr_user_sp,
 * plugin/qprof_ring.h), over ring records laid out as the demo kernel leaves its stacks at the
 * instants that matter. No QEMU: the instants a sampler meets only now and then (a timer flag
 * that lands on isr_return, say) are built here on demand.
 *
 * The record that started this: trigger=timer once printed `spin (2);sys_call;isr_return`, the
 * user part cut to one frame and not marked. At isr_return the kernel has already cleared the
 * ABI's pointer to the saved frame (abi_return_to_user) and pops the registers; the plugin then
 * captured no user stack, and qprof read it from the RAM file after the guest had run on: a later
 * stack, whose word where the return address had been was 0, which an unwinder takes for the
 * outermost frame. The plugin now finds the frame at the top of the kernel stack, and qprof's
 * plugin target never serves a stack from memory read after the instant.
 *
 * The Linux chain: the windows a Linux kernel's adapter asks for (per-CPU words, the current
 * task_struct, the top of its kernel stack) followed from either GS base, and the user stack
 * pointer found in the pt_regs they end at.
 *
 * `test_plugin_ring hostile`: the plugin's side of the shared memory (plugin/qprof_shm.c) under a
 * client that rewrites everything it can write, and more: its read positions, and (as if the
 * seals were not there) the rings' header and slots too, while vCPU threads capture and publish
 * and sessions come and go. Under ASan a capture or a copy that trusted a length or an offset
 * from shared memory fails here; afterwards the next session's samples come out whole. */
#define _GNU_SOURCE
#include "harness.h"

#include "qprof/guest_abi.h"
#include "qprof_ring.h"
#include "qprof_shm.h"
#include "qprof_wakecost.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define ABI_ADDR    UINT64_C(0xffffffff80200000)
#define KSTACK_LO   UINT64_C(0xffff800000a10000)
#define KSTACK_HI   (KSTACK_LO + 16384)
#define FRAME       (KSTACK_HI - sizeof(struct qprof_abi_regs)) /* where every user entry saves */
#define USER_RIP    UINT64_C(0x401234)                          /* in sys_call, after int $0x80 */
#define USER_RSP    UINT64_C(0x7fffffffe8c8)
#define USER_CS     0x1b
#define USER_SS     0x23
#define USER_RFLAGS 0x202
#define VCPU        1

/* The registers these records carry, where an x86_64 configuration names them (qprof's
 * target_plugin_regs.c asks for more, by the arch table; these are the ones the ring's helpers
 * read). */
enum { R_RSP, R_CS, R_GS_BASE, R_K_GS_BASE, N_REGS };
#define KERNEL_HALF UINT64_C(0xffff800000000000)

/* An x86_64 configuration's register part: the CPU pushes interrupt frames, and the kernel's
 * per-CPU base is in gs_base, else k_gs_base. */
static void x86_regs(struct qpr_config *c)
{
    static const char *const names[N_REGS] = {"rsp", "cs", "gs_base", "k_gs_base"};
    for (int i = 0; i < N_REGS; i++)
        strcpy(c->reg_names[i], names[i]);
    c->n_regs = N_REGS, c->sp_reg = R_RSP, c->mode_reg = R_CS;
    c->mode_mask = 3, c->mode_user = 3;
    c->ustack_reg = QPR_MAX_REGS;
    c->iret_frame = 1;
    c->percpu_reg[0] = R_GS_BASE, c->percpu_reg[1] = R_K_GS_BASE;
    c->kernel_start = KERNEL_HALF;
}

/* The configuration qprof's plugin target sends for the demo ABI (target_plugin.c). */
static struct qpr_config demo_config(void)
{
    struct qpr_config c = {
        .magic = QPR_MAGIC,
        .version = QPR_VERSION,
        .stack_bytes = QPR_STACK_MAX,
        .extra_addr = ABI_ADDR,
        .extra_len = sizeof(struct qprof_abi),
        .chase_off = offsetof(struct qprof_abi, cpu) + offsetof(struct qprof_abi_cpu, user_regs),
        .chase_stride = sizeof(struct qprof_abi_cpu),
        .chase_add = offsetof(struct qprof_abi_regs, rsp),
        .ustack_bytes = QPR_STACK_MAX,
        .kstack_top_off =
            offsetof(struct qprof_abi, cpu) + offsetof(struct qprof_abi_cpu, kstack_hi),
    };
    x86_regs(&c);
    return c;
}

/* A kernel-mode sample of a process that entered by int $0x80: its kernel stack from sp to the
 * top holds the saved frame (stack words elsewhere are kernel-looking noise), and the ABI slot
 * says where the frame and the stack top are (user_regs 0 when `published` is false). */
static struct qpr_sample *kernel_sample(uint64_t sp, bool published)
{
    struct qpr_sample *s = calloc(1, sizeof *s);
    s->kind = QPR_KIND_SAMPLE;
    s->vcpu = VCPU;
    s->regs[R_RSP] = sp;
    s->regs[R_CS] = 0x08;
    s->stack_addr = sp;
    s->stack_len = (uint32_t)(KSTACK_HI - sp); /* up to the top: the next page is unmapped */
    static uint8_t kstack[KSTACK_HI - KSTACK_LO];
    for (size_t off = 0; off < sizeof kstack; off += 8) {
        uint64_t noise = UINT64_C(0xffffffff80100000) + off;
        memcpy(kstack + off, &noise, 8);
    }
    struct qprof_abi_regs f = {.rax = 3,
                               .vector = 0x80,
                               .rip = USER_RIP,
                               .cs = USER_CS,
                               .rflags = USER_RFLAGS,
                               .rsp = USER_RSP,
                               .ss = USER_SS};
    memcpy(kstack + (FRAME - KSTACK_LO), &f, sizeof f);
    memcpy(s->stack, kstack + (sp - KSTACK_LO), s->stack_len);
    struct qprof_abi abi = {.magic = QPROF_ABI_MAGIC, .cpu_count = 2};
    abi.cpu[VCPU].state = QPROF_CPU_USER;
    abi.cpu[VCPU].user_regs = published ? FRAME : 0;
    abi.cpu[VCPU].kstack_lo = KSTACK_LO;
    abi.cpu[VCPU].kstack_hi = KSTACK_HI;
    s->extra_addr = ABI_ADDR;
    s->extra_len = sizeof abi;
    memcpy(s->extra, &abi, sizeof abi);
    return s;
}

static uint64_t found;

static enum qpr_usp_from user_sp(const struct qpr_sample *s, const struct qpr_config *c)
{
    found = 0;
    return qpr_user_sp(s, c, VCPU, NULL, NULL, &found);
}

/* isr_return: the registers not popped yet, the pointer already cleared. The report's case. */
static void test_isr_return(void)
{
    struct qpr_config c = demo_config();
    for (uint64_t popped = 0; popped <= 15; popped++) {
        struct qpr_sample *s = kernel_sample(FRAME + 8 * popped, false);
        /* after rbx and rax the CPU's frame is within the first words at sp: found either way */
        CHECK_INT(user_sp(s, &c), popped < 14 ? QPR_USP_KSTACK_TOP : QPR_USP_ENTRY);
        CHECK_U64(found, USER_RSP);
        free(s);
    }
    /* the same instant without the stack top in the configuration: nothing, never a guess */
    c.kstack_top_off = 0;
    struct qpr_sample *s = kernel_sample(FRAME, false);
    CHECK_INT(user_sp(s, &c), QPR_USP_NONE);
    free(s);
}

/* isr_dispatch's first blocks: the frame saved, the pointer not published yet; deeper too. */
static void test_before_publishing(void)
{
    struct qpr_config c = demo_config();
    struct qpr_sample *s = kernel_sample(FRAME - 8, false); /* the return address of the call */
    CHECK_INT(user_sp(s, &c), QPR_USP_KSTACK_TOP);
    CHECK_U64(found, USER_RSP);
    free(s);
    s = kernel_sample(FRAME - 600, true); /* inside the system call: the published frame */
    CHECK_INT(user_sp(s, &c), QPR_USP_SAVED);
    CHECK_U64(found, USER_RSP);
    free(s);
}

/* An entry stub's first block: the CPU's frame at sp, after the vector and the error code. */
static void test_entry_stub(void)
{
    struct qpr_config c = demo_config();
    uint64_t iret = KSTACK_HI - 40;
    for (uint64_t below = 0; below <= 16; below += 8) {
        struct qpr_sample *s = kernel_sample(iret - below, false);
        CHECK_INT(user_sp(s, &c), QPR_USP_ENTRY);
        CHECK_U64(found, USER_RSP);
        free(s);
    }
}

/* What must give nothing: a kernel context (its stack top is no user frame), a window that stops
 * short of the top (an unmapped page between), a pointer outside the window and nothing to read
 * it with, an ABI window too short for the slot. */
static void test_nothing_to_find(void)
{
    struct qpr_config c = demo_config();
    struct qpr_sample *s = kernel_sample(FRAME, false);
    uint64_t kernel_cs = 0x08;
    memcpy(s->stack + offsetof(struct qprof_abi_regs, cs), &kernel_cs, 8);
    CHECK_INT(user_sp(s, &c), QPR_USP_NONE);
    free(s);

    s = kernel_sample(FRAME, false);
    s->stack_len = sizeof(struct qprof_abi_regs) - 8; /* the frame's last word not captured */
    CHECK_INT(user_sp(s, &c), QPR_USP_NONE);
    free(s);

    s = kernel_sample(FRAME - 600, true);
    s->stack_len = 512; /* the published frame lies beyond the window */
    CHECK_INT(user_sp(s, &c), QPR_USP_NONE);
    free(s);

    s = kernel_sample(FRAME, false);
    s->extra_len = (uint32_t)(offsetof(struct qprof_abi, cpu) + sizeof(struct qprof_abi_cpu));
    CHECK_INT(user_sp(s, &c), QPR_USP_NONE); /* vCPU 1's slot is not in it */
    free(s);
}

static bool read_from_frame(void *ctx, uint64_t addr, uint64_t *out)
{
    (void)ctx;
    if (addr != FRAME + offsetof(struct qprof_abi_regs, rsp))
        return false;
    *out = USER_RSP;
    return true;
}

/* A published frame outside the window is read at the instant by the plugin's reader. */
static void test_saved_frame_read(void)
{
    struct qpr_config c = demo_config();
    struct qpr_sample *s = kernel_sample(FRAME - 600, true);
    s->stack_len = 512;
    found = 0;
    CHECK_INT(qpr_user_sp(s, &c, VCPU, read_from_frame, NULL, &found), QPR_USP_SAVED);
    CHECK_U64(found, USER_RSP);
    free(s);
}

/* Where the CPU pushes no interrupt frame (iret_frame 0: riscv64, aarch64), the words at sp are
 * never taken for one, however they look: the register an entry leaves the user sp in
 * (ustack_reg), then the frame the entry code saved at the stack's top (top_frame_size). */
static void test_without_iret_frame(void)
{
    struct qpr_config c = demo_config();
    c.iret_frame = 0;
    struct qpr_sample *s = kernel_sample(KSTACK_HI - 40 - 16, false); /* x86's entry stub */
    CHECK_INT(user_sp(s, &c), QPR_USP_NONE); /* no register, no frame size: nothing */
    c.ustack_reg = R_K_GS_BASE;              /* any register the configuration names */
    s->regs_valid = 1u << R_K_GS_BASE;
    s->regs[R_K_GS_BASE] = USER_RSP - 64;
    CHECK_INT(user_sp(s, &c), QPR_USP_REGISTER);
    CHECK_U64(found, USER_RSP - 64);
    s->regs[R_K_GS_BASE] = KERNEL_HALF; /* not a user address: not taken */
    CHECK_INT(user_sp(s, &c), QPR_USP_NONE);
    free(s);
    c.ustack_reg = QPR_MAX_REGS;
    c.top_frame_size = sizeof(struct qprof_abi_regs);
    s = kernel_sample(FRAME - 8, false);
    CHECK_INT(user_sp(s, &c), QPR_USP_KSTACK_TOP); /* the frame at the top, by its size */
    CHECK_U64(found, USER_RSP);
    free(s);
}

/* ---- A Linux kernel's chained windows (qpr_capture_windows) -------------------------------- */

#define LX_PERCPU   UINT64_C(0xffff88801f000000)
#define LX_TASK     UINT64_C(0xffff888003a40000)
#define LX_KSTACK   UINT64_C(0xffffc90000400000)
#define LX_CURRENT  0x1fb80 /* current_task in the per-CPU area (Debian's 6.1) */
#define LX_SELF     0x199e8 /* this_cpu_off */
#define LX_TASK_LO  32      /* task_struct.stack */
#define LX_TASK_LEN 2960    /* up to the end of comm */
#define LX_TOP      4096

/* The guest's memory as the plugin reads it: the per-CPU words, the task_struct and the top of
 * its kernel stack, whose last 40 bytes are the user iret frame; everything else unmapped. */
static uint32_t lx_guest_read(void *ctx, uint64_t addr, uint32_t len, uint8_t *out)
{
    (void)ctx;
    memset(out, 0, len);
    if (addr == LX_PERCPU + LX_SELF && len == 8) {
        uint64_t v = LX_PERCPU;
        memcpy(out, &v, 8);
    } else if (addr == LX_PERCPU + LX_CURRENT && len == 8) {
        uint64_t v = LX_TASK;
        memcpy(out, &v, 8);
    } else if (addr == LX_TASK + LX_TASK_LO) {
        uint64_t v = LX_KSTACK;
        memcpy(out, &v, 8); /* task->stack, at the span's start */
    } else if (addr == LX_KSTACK + 16384 - LX_TOP && len == LX_TOP) {
        const uint64_t frame[5] = {USER_RIP, 0x33, 0x246, USER_RSP, 0x2b};
        memcpy(out + LX_TOP - 40, frame, sizeof frame);
    } else {
        return 0;
    }
    return len;
}

/* The plan os_linux.c sends (its capture_plan: this_cpu_off, current_task, the task_struct
 * span, the top of the task's stack), as the plugin target hands it over. */
static struct qpr_config lx_config(void)
{
    struct qpr_config c = {
        .magic = QPR_MAGIC, .version = QPR_VERSION, .ustack_bytes = QPR_STACK_MAX};
    x86_regs(&c);
    c.win[0] = (struct qpr_window){.base = QPR_WIN_KERNEL_PERCPU, .add = LX_SELF, .len = 8};
    c.win[1] = (struct qpr_window){.base = QPR_WIN_KERNEL_PERCPU, .add = LX_CURRENT, .len = 8};
    c.win[2] = (struct qpr_window){
        .base = QPR_WIN_POINTER, .from = 1, .add = LX_TASK_LO, .len = LX_TASK_LEN};
    c.win[3] = (struct qpr_window){
        .base = QPR_WIN_POINTER, .from = 2, .from_off = 0, .add = 16384 - LX_TOP, .len = LX_TOP};
    c.ustack_win = 4;
    c.ustack_win_off = LX_TOP - 40;
    return c;
}

/* User mode: the kernel's GS base is in KERNEL_GS_BASE (GS_BASE is the process's); in kernel
 * mode after swapgs it is GS_BASE. Either way the chain reaches the pt_regs and the user sp. */
static void test_linux_chain(void)
{
    struct qpr_config c = lx_config();
    for (int kernel = 0; kernel < 2; kernel++) {
        struct qpr_sample *s = calloc(1, sizeof *s);
        s->regs_valid = 1u << R_GS_BASE | 1u << R_K_GS_BASE;
        s->regs[R_GS_BASE] = kernel ? LX_PERCPU : UINT64_C(0x7f1234560740);
        s->regs[R_K_GS_BASE] = kernel ? 0 : LX_PERCPU;
        qpr_capture_windows(s, &c, lx_guest_read, NULL);
        CHECK_INT(s->win_asked, 4);
        CHECK_U64(s->win_addr[2], LX_TASK + LX_TASK_LO);
        CHECK_INT(s->win_len[2], LX_TASK_LEN);
        CHECK_U64(s->win_addr[3], LX_KSTACK + 16384 - LX_TOP);
        CHECK_INT(s->win_len[3], LX_TOP);
        CHECK_INT(qpr_user_sp(s, &c, 0, NULL, NULL, &found), QPR_USP_WINDOW);
        CHECK_U64(found, USER_RSP);
        free(s);
    }
}

/* Neither GS base a kernel address (a guest not yet in its kernel): nothing is captured, nothing
 * found; a window past the byte budget is cut to it. */
static void test_linux_chain_broken(void)
{
    struct qpr_config c = lx_config();
    struct qpr_sample *s = calloc(1, sizeof *s);
    s->regs_valid = 1u << R_GS_BASE | 1u << R_K_GS_BASE;
    qpr_capture_windows(s, &c, lx_guest_read, NULL);
    for (int i = 0; i < QPR_WINDOWS; i++)
        CHECK_INT(s->win_len[i], 0);
    CHECK_INT(qpr_user_sp(s, &c, 0, NULL, NULL, &found), QPR_USP_NONE);
    c.win[3].len = QPR_WIN_BYTES; /* more than is left after the first three */
    s->regs[R_GS_BASE] = LX_PERCPU;
    qpr_capture_windows(s, &c, lx_guest_read, NULL);
    CHECK_INT(s->win_len[3],
              0); /* cut to the 5,216 bytes left: not the 4 KiB this guest maps there */
    CHECK_INT(qpr_user_sp(s, &c, 0, NULL, NULL, &found), QPR_USP_NONE);
    free(s);
}

/* The per-CPU base comes from the registers the configuration names, in its order, and only as
 * a kernel-half address: none named (a kernel that keeps its current task in a register), the
 * windows that start there are not captured. */
static void test_percpu_registers(void)
{
    struct qpr_config c = lx_config();
    struct qpr_sample *s = calloc(1, sizeof *s);
    s->regs_valid = 1u << R_GS_BASE | 1u << R_K_GS_BASE;
    s->regs[R_GS_BASE] = LX_PERCPU;
    s->regs[R_K_GS_BASE] = LX_PERCPU + 0x100000; /* not this CPU's: gs_base comes first */
    qpr_capture_windows(s, &c, lx_guest_read, NULL);
    CHECK_U64(s->win_addr[1], LX_PERCPU + LX_CURRENT);
    CHECK_INT(s->win_len[3], LX_TOP);
    c.percpu_reg[0] = R_K_GS_BASE, c.percpu_reg[1] = R_GS_BASE; /* another order */
    qpr_capture_windows(s, &c, lx_guest_read, NULL);
    CHECK_U64(s->win_addr[1], LX_PERCPU + 0x100000 + LX_CURRENT);
    c.kernel_start = LX_PERCPU + 0x200000; /* neither in that kernel half */
    qpr_capture_windows(s, &c, lx_guest_read, NULL);
    for (int i = 0; i < QPR_WINDOWS; i++)
        CHECK_INT(s->win_len[i], 0);
    c = lx_config();
    c.percpu_reg[0] = c.percpu_reg[1] = QPR_MAX_REGS; /* none named */
    qpr_capture_windows(s, &c, lx_guest_read, NULL);
    CHECK_INT(s->win_asked, 4);
    for (int i = 0; i < QPR_WINDOWS; i++)
        CHECK_INT(s->win_len[i], 0);
    free(s);
}

/* ---- A hostile client of the shared memory ---------------------------------------------- */

#define HOSTILE_VCPUS   2
#define HOSTILE_SAMPLES 3000 /* per vCPU thread, under a scribbler the whole time */

/* What a client maps: the rings read-only (the seals allow nothing else), its tails read-write. */
struct client_view {
    const void *rings;
    uint64_t rings_size;
    struct qpr_tails *tails;
};

static void client_map(qps_shared *s, int tails_fd, struct client_view *c)
{
    c->rings_size = qps_map_size(s);
    c->rings = mmap(NULL, c->rings_size, PROT_READ, MAP_SHARED, qps_ring_fd(s), 0);
    c->tails = mmap(NULL, sizeof *c->tails, PROT_READ | PROT_WRITE, MAP_SHARED, tails_fd, 0);
    close(tails_fd);
    if (c->rings == MAP_FAILED || c->tails == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
}

static void client_unmap(struct client_view *c)
{
    munmap((void *)c->rings, c->rings_size);
    munmap(c->tails, sizeof *c->tails);
}

/* The seals: no writable mapping of the rings, no mprotect to writable, no write(2), no
 * truncation (which would make the plugin's next store fault); the tails can be written, not
 * shrunk. */
static void test_client_cannot_write_rings(void)
{
    int err = 0;
    qps_shared *s = qps_shared_new(HOSTILE_VCPUS, "x86_64", &err);
    CHECK_MSG(s, "qps_shared_new: %s", strerror(-err));
    if (!s)
        return;
    int fd = qps_ring_fd(s);
    void *w = mmap(NULL, qps_map_size(s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK_MSG(w == MAP_FAILED && errno == EPERM, "a client mapped the rings writable");
    struct client_view c;
    client_map(s, qps_session_open(s), &c);
    CHECK(mprotect((void *)c.rings, 4096, PROT_READ | PROT_WRITE) != 0);
    char byte = 1;
    CHECK(pwrite(fd, &byte, 1, 0) < 0);
    CHECK(ftruncate(fd, 0) != 0);
    CHECK(ftruncate(fd, (off_t)qps_map_size(s) * 2) != 0);
    const struct qpr_header *h = c.rings;
    CHECK_U64(h->magic, QPR_MAGIC);
    CHECK_U64(h->ring_offset, qpr_ring_offset(0));
    c.tails->v[0].tail = 12345; /* the client's own memory: writable */
    CHECK_U64(c.tails->v[0].tail, 12345);
    client_unmap(&c);
    qps_shared_free(s);
}

struct hostile {
    qps_shared *s;
    _Atomic bool stop;
    pthread_mutex_t session_lock; /* the scribbler's view of the current session */
    struct qpr_tails *_Atomic client_tails;
    _Atomic uint64_t published;
};

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* Guest memory for the captures: every byte readable, each read filling a pattern. */
static uint32_t fake_guest_read(void *ctx, uint64_t addr, uint32_t len, uint8_t *out)
{
    (void)ctx;
    for (uint32_t i = 0; i < len; i++)
        out[i] = (uint8_t)(addr + i);
    return len;
}

/* A Linux-like chain: the per-CPU words from GS, a task pointer in them, the task, its stack top.
 */
static const struct qpr_window hostile_windows[QPR_WINDOWS] = {
    {.base = QPR_WIN_KERNEL_PERCPU, .len = 64},
    {.base = QPR_WIN_POINTER, .from = 0, .from_off = 8, .len = 3000},
    {.base = QPR_WIN_POINTER, .from = 1, .from_off = 16, .len = 4000},
    {.base = QPR_WIN_POINTER, .from = 2, .from_off = 0, .len = 2000},
};

/* What the plugin's take_sample does, on a vCPU thread: capture into its own buffer, copy out. */
static void *hostile_vcpu(void *arg)
{
    struct hostile *H = arg;
    static _Atomic uint32_t next_index;
    uint32_t vcpu = atomic_fetch_add(&next_index, 1);
    struct qpr_sample *scratch = calloc(1, sizeof *scratch);
    struct qpr_config cfg = demo_config();
    memcpy(cfg.win, hostile_windows, sizeof cfg.win);
    uint64_t rng = 0x9e3779b97f4a7c15u + vcpu;
    for (int done = 0, tries = 0; done < HOSTILE_SAMPLES && tries < 100 * HOSTILE_SAMPLES;
         tries++) {
        if (!qps_reserve(H->s, vcpu)) {
            sched_yield();
            continue;
        }
        done++;
        scratch->kind = QPR_KIND_SAMPLE;
        scratch->vcpu = vcpu;
        scratch->regs_valid = ~UINT64_C(0) >> (64 - N_REGS);
        scratch->regs[R_RSP] = KSTACK_LO + (xorshift(&rng) & 0x3ff8);
        scratch->regs[R_CS] = 0x08;
        scratch->regs[R_GS_BASE] = UINT64_C(0xffff888000000000) + (xorshift(&rng) & 0xff8);
        scratch->stack_addr = scratch->regs[R_RSP];
        scratch->stack_len = fake_guest_read(
            NULL, scratch->stack_addr, (uint32_t)(KSTACK_HI - scratch->stack_addr), scratch->stack);
        scratch->extra_addr = cfg.extra_addr;
        scratch->extra_len = fake_guest_read(NULL, cfg.extra_addr, cfg.extra_len, scratch->extra);
        qpr_capture_windows(scratch, &cfg, fake_guest_read, NULL);
        uint64_t usp = 0;
        if (qpr_user_sp(scratch, &cfg, vcpu, NULL, NULL, &usp)) {
            scratch->ustack_addr = usp;
            scratch->ustack_len = fake_guest_read(NULL, usp, 512, scratch->ustack);
        }
        qps_publish(H->s, vcpu, scratch, 0);
        atomic_fetch_add(&H->published, 1);
    }
    free(scratch);
    return NULL;
}

/* The client: new sessions now and then, and random bytes everywhere it can reach, plus the rings
 * themselves through the plugin's own writable view (what a missing seal would allow). */
static void *scribbler(void *arg)
{
    struct hostile *H = arg;
    uint8_t *rings = (uint8_t *)qps_header(H->s);
    uint64_t size = qps_map_size(H->s), rng = 0x2545f4914f6cdd1du;
    struct client_view c = {0};
    for (unsigned round = 0; !atomic_load(&H->stop); round++) {
        if (round % 64 == 0) {
            if (c.tails)
                client_unmap(&c);
            client_map(H->s, qps_session_open(H->s), &c);
        }
        for (int i = 0; i < 256; i++) {
            uint64_t v = xorshift(&rng);
            uint32_t vcpu = v % HOSTILE_VCPUS;
            const struct qpr_ring *r =
                (const void *)((const char *)c.rings + qpr_ring_offset(vcpu));
            /* mostly near the head (within the slots, or a little past), else anything */
            uint64_t head = atomic_load(&r->head);
            c.tails->v[vcpu].tail = i % 4 ? head - (v >> 32) % (QPR_SLOTS + 64) : v;
            uint64_t at = xorshift(&rng) % (size - 8);
            if (i % 8 == 0) /* the header (its geometry), the first slots, most often */
                at %= sizeof(struct qpr_header);
            else if (i & 2)
                at %= qpr_ring_offset(0) + 4 * sizeof(struct qpr_sample);
            memcpy(rings + at, &v, 8);
        }
        sched_yield();
    }
    client_unmap(&c);
    return NULL;
}

/* A normal session after the storm: the samples published come out as they were captured. */
static void check_next_session_whole(qps_shared *s)
{
    struct client_view c;
    client_map(s, qps_session_open(s), &c);
    const struct qpr_ring *r = (const void *)((const char *)c.rings + qpr_ring_offset(1));
    struct qpr_sample *in = calloc(1, sizeof *in);
    int whole = 0;
    for (int n = 0; n < 2 * QPR_SLOTS; n++) {
        uint64_t tail = c.tails->v[1].tail;
        memset(in, 0, offsetof(struct qpr_sample, stack));
        in->kind = QPR_KIND_SAMPLE;
        in->vcpu = 1;
        in->time_ns = (uint64_t)n;
        in->stack_len = 100 + (uint32_t)n;
        memset(in->stack, n & 0xff, in->stack_len);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        /* a capture that began 5 us ago: the slot's cost counts from then, the copy included */
        uint64_t t0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec - 5000;
        qps_publish(s, 1, in, t0);
        if (atomic_load(&r->head) != tail + 1)
            continue;
        const struct qpr_sample *out = &r->slots[tail % QPR_SLOTS];
        bool same = out->time_ns == (uint64_t)n && out->cost_ns >= 5000 &&
                    out->stack_len == in->stack_len &&
                    memcmp(out->stack, in->stack, in->stack_len) == 0;
        whole += same;
        atomic_store(&c.tails->v[1].tail, tail + 1);
    }
    CHECK_INT(whole, 2 * QPR_SLOTS);
    free(in);
    client_unmap(&c);
}

static void test_hostile_client(void)
{
    int err = 0;
    struct hostile H = {.s = qps_shared_new(HOSTILE_VCPUS, "x86_64", &err)};
    CHECK_MSG(H.s, "qps_shared_new: %s", strerror(-err));
    if (!H.s)
        return;
    pthread_t vcpus[HOSTILE_VCPUS], client;
    pthread_create(&client, NULL, scribbler, &H);
    for (int i = 0; i < HOSTILE_VCPUS; i++)
        pthread_create(&vcpus[i], NULL, hostile_vcpu, &H);
    for (int i = 0; i < HOSTILE_VCPUS; i++)
        pthread_join(vcpus[i], NULL);
    atomic_store(&H.stop, true);
    pthread_join(client, NULL);
    fprintf(stderr, "hostile: %llu samples published under the scribbler\n",
            (unsigned long long)atomic_load(&H.published));
    CHECK(atomic_load(&H.published) > 0);
    check_next_session_whole(H.s);
    qps_shared_free(H.s);
}

/* `test_plugin_ring wakecost`: the wake-up cost auto weighs (qprof_wakecost.c) is at least the
 * sleeper's own CPU time, within what the sleeps could have taken, and the probe hands the
 * calling thread back its CPUs (QEMU's timer thread keeps the affinity QEMU gave it, which
 * auto's rule reads). */
static void test_wake_cost(void)
{
    cpu_set_t before, after;
    REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
    struct qpw_cost c = qpw_measure(40, 100000);
    REQUIRE(sched_getaffinity(0, sizeof after, &after) == 0);
    CHECK(CPU_EQUAL(&before, &after));
    CHECK(c.own_ns > 0);
    CHECK(c.taken_ns >= c.own_ns);
    CHECK_MSG(c.taken_ns < 100000 * 3, "a wake-up took %llu ns from a thread beside it",
              (unsigned long long)c.taken_ns);
    fprintf(stderr, "a wake-up: %llu ns of its own, %llu ns taken from a busy thread (%s)\n",
            (unsigned long long)c.own_ns, (unsigned long long)c.taken_ns,
            c.probed ? "probed" : "not probed");
}

/* `test_plugin_ring auto`: auto's rule by what the guest loses (qpr_auto_trigger). With a host
 * CPU to spare beside the vCPU threads the timer, however dear its wake-ups: they run beside the
 * guest. Without one, the timer until its wake-ups take more of the guest's CPUs than the
 * counter's flat cost. Figures from bench/plugin.sh's hosts: wake-ups of 2-3 us (bare metal) and
 * 11-19 us (a nested VM). */
static void test_auto_rule(void)
{
    const uint64_t khz10 = 100000, khz1 = 1000000;
    /* a core beside the one vCPU, pinned or not: the timer at any rate */
    CHECK(qpr_auto_trigger(19000, khz10, 1, 2, 0) == QPR_TRIGGER_TIMER);
    CHECK(qpr_auto_trigger(60000, khz10 / 2, 1, 16, 0) == QPR_TRIGGER_TIMER);
    CHECK(qpr_auto_trigger(15000, khz10, 4, 8, 0) == QPR_TRIGGER_TIMER);
    /* without MTTCG one thread runs all four vCPUs: two CPUs leave one to spare */
    CHECK(qpr_auto_trigger(19000, khz10, 1, 2, 0) == QPR_TRIGGER_TIMER);
    /* everything on one core: 15 us per 100 us is 15% of the guest, under the counter's 17% */
    CHECK(qpr_auto_trigger(15000, khz10, 1, 1, 0) == QPR_TRIGGER_TIMER);
    CHECK(qpr_auto_trigger(19000, khz10, 1, 1, 0) == QPR_TRIGGER_COUNTER);
    CHECK(qpr_auto_trigger(19000, khz1, 1, 1, 0) == QPR_TRIGGER_TIMER);
    /* 4 vCPUs on 2 cores: the wake-ups' cost is spread over both */
    CHECK(qpr_auto_trigger(30000, khz10, 4, 2, 0) == QPR_TRIGGER_TIMER);
    CHECK(qpr_auto_trigger(40000, khz10, 4, 2, 0) == QPR_TRIGGER_COUNTER);
    CHECK(qpr_auto_trigger(40000, khz10, 2, 2, 0) == QPR_TRIGGER_COUNTER);
    /* 4 vCPU threads pinned to one CPU, the timer thread on another that none of them may use:
     * its wake-ups never take the vCPUs' CPU, however dear (two CPUs for four threads) */
    CHECK(qpr_auto_trigger(40000, khz10, 4, 2, 1) == QPR_TRIGGER_TIMER);
    CHECK(qpr_auto_trigger(90000, khz10, 1, 1, 0) == QPR_TRIGGER_COUNTER);
    /* not known: the timer, as with a CPU to spare */
    CHECK(qpr_auto_trigger(90000, khz10, 1, 0, 0) == QPR_TRIGGER_TIMER);
    CHECK(qpr_timer_guest_share(15000, khz10, 1) > 0.149 &&
          qpr_timer_guest_share(15000, khz10, 1) < 0.151);
    CHECK(qpr_timer_guest_share(15000, 0, 1) == 0);
}

/* `test_plugin_ring drain`: qprof's sleep on empty rings takes a batch of intervals per wake-up
 * (qpr_drain_wait_ns), never so long that a ring fills meanwhile or a stop waits. */
static void test_drain_wait(void)
{
    const uint64_t khz10 = 100000, khz1 = 1000000, ms = 1000000;
    /* 10 kHz: 16 samples per wake-up, against 5 at the former 0.5 ms */
    CHECK_INT(qpr_drain_wait_ns(khz10), 1600000);
    CHECK(qpr_drain_wait_ns(khz10) >= 10 * khz10);
    /* slower rates: a wake-up per ten 1 ms intervals, one per 10 ms at 100 Hz (the former 0.5 ms
     * woke twenty times per sample there) */
    CHECK_INT(qpr_drain_wait_ns(khz1), 10 * ms);
    CHECK_INT(qpr_drain_wait_ns(10 * ms), 10 * ms);
    CHECK_INT(qpr_drain_wait_ns(UINT64_C(60000000000)), 10 * ms); /* QPR_MAX_INTERVAL_NS */
    /* floors: below 0.5 ms never, and by instructions (a rate unknown) 0.5 ms */
    CHECK_INT(qpr_drain_wait_ns(1000), 500000);
    CHECK_INT(qpr_drain_wait_ns(0), 500000);
    /* no ring outgrows a wait at any rate the plugin takes */
    for (uint64_t i = QPR_MIN_INTERVAL_NS; i <= QPR_MAX_INTERVAL_NS; i *= 3)
        CHECK(qpr_drain_wait_ns(i) <= i * (QPR_SLOTS / 4));
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "drain") == 0) {
        test_drain_wait();
        return harness_result();
    }
    if (argc > 1 && strcmp(argv[1], "auto") == 0) {
        test_auto_rule();
        return harness_result();
    }
    if (argc > 1 && strcmp(argv[1], "wakecost") == 0) {
        test_wake_cost();
        return harness_result();
    }
    if (argc > 1 && strcmp(argv[1], "hostile") == 0) {
        test_client_cannot_write_rings();
        test_hostile_client();
        return harness_result();
    }
    test_linux_chain();
    test_linux_chain_broken();
    test_percpu_registers();
    test_without_iret_frame();
    test_isr_return();
    test_before_publishing();
    test_entry_stub();
    test_nothing_to_find();
    test_saved_frame_read();
    return harness_result();
}
