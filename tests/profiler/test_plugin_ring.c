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
 * pointer found in the pt_regs they end at. */
#include "harness.h"

#include "qprof/guest_abi.h"
#include "qprof_ring.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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

/* The configuration qprof's plugin target sends for the demo ABI (target_plugin.c). */
static struct qpr_config demo_config(void)
{
    return (struct qpr_config){
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
}

/* A kernel-mode sample of a process that entered by int $0x80: its kernel stack from sp to the
 * top holds the saved frame (stack words elsewhere are kernel-looking noise), and the ABI slot
 * says where the frame and the stack top are (user_regs 0 when `published` is false). */
static struct qpr_sample *kernel_sample(uint64_t sp, bool published)
{
    struct qpr_sample *s = calloc(1, sizeof *s);
    s->kind = QPR_KIND_SAMPLE;
    s->vcpu = VCPU;
    s->regs[QPR_RSP] = sp;
    s->regs[QPR_CS] = 0x08;
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
    c.win[0] = (struct qpr_window){.base = QPR_WIN_KERNEL_GS, .add = LX_SELF, .len = 8};
    c.win[1] = (struct qpr_window){.base = QPR_WIN_KERNEL_GS, .add = LX_CURRENT, .len = 8};
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
        s->regs_valid = 1u << QPR_GS_BASE | 1u << QPR_K_GS_BASE;
        s->regs[QPR_GS_BASE] = kernel ? LX_PERCPU : UINT64_C(0x7f1234560740);
        s->regs[QPR_K_GS_BASE] = kernel ? 0 : LX_PERCPU;
        qpr_capture_windows(s, c.win, lx_guest_read, NULL);
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
    s->regs_valid = 1u << QPR_GS_BASE | 1u << QPR_K_GS_BASE;
    qpr_capture_windows(s, c.win, lx_guest_read, NULL);
    for (int i = 0; i < QPR_WINDOWS; i++)
        CHECK_INT(s->win_len[i], 0);
    CHECK_INT(qpr_user_sp(s, &c, 0, NULL, NULL, &found), QPR_USP_NONE);
    c.win[3].len = QPR_WIN_BYTES; /* more than is left after the first three */
    s->regs[QPR_GS_BASE] = LX_PERCPU;
    qpr_capture_windows(s, c.win, lx_guest_read, NULL);
    CHECK_INT(s->win_len[3],
              0); /* cut to the 5,216 bytes left: not the 4 KiB this guest maps there */
    CHECK_INT(qpr_user_sp(s, &c, 0, NULL, NULL, &found), QPR_USP_NONE);
    free(s);
}

int main(void)
{
    test_linux_chain();
    test_linux_chain_broken();
    test_isr_return();
    test_before_publishing();
    test_entry_stub();
    test_nothing_to_find();
    test_saved_frame_read();
    return harness_result();
}
