/* Reading guest memory for one session while the guest is paused: every read is charged to the
 * sample's budget (PROF_BUDGET_*), and the OS adapter reads through the same budget
 * (session_os_mem). */
#include "session_internal.h"

#include "qp_log.h"

#include <inttypes.h>

void session_budget_start(prof_session *s)
{
    s->budget = (struct pause_budget){PROF_BUDGET_BYTES, prof_target_round_trips(s->target), false};
}

/* How much of a len-byte read the budget allows now: all of it, less, or 0. */
size_t session_budget_allow(prof_session *s, size_t len)
{
    bool out_of_requests =
        prof_target_reads_cost_round_trips(s->target) &&
        prof_target_round_trips(s->target) - s->budget.round_trips_at_start >= PROF_BUDGET_REQUESTS;
    size_t allowed = out_of_requests ? 0 : len < s->budget.bytes_left ? len : s->budget.bytes_left;
    if (allowed < len)
        s->budget.hit = true;
    return allowed;
}

/* Reads up to len bytes at addr through cpu's page tables, as the budget allows; *got is what
 * was read from the start. Returns 0 when anything was read. */
int session_target_read(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                        size_t len, bool instant, size_t *got)
{
    struct prof_mem_req req = {.vaddr = addr, .len = len, .buf = buf, .instant = instant};
    int rc = prof_target_read(s->target, cpu, &req, 1, NULL);
    *got = req.got;
    return rc ? rc : req.rc;
}

/* instant: a stack window (struct prof_mem_req). */
int session_paused_read(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                        size_t len, bool instant, size_t *got)
{
    *got = 0;
    size_t allowed = session_budget_allow(s, len);
    if (!allowed)
        return -ENOSPC;
    int rc = session_target_read(s, cpu, addr, buf, allowed, instant, got);
    s->budget.bytes_left -= allowed;
    return rc;
}

/* The OS adapter reads through here, so its reads count against the sample's budget too. What
 * it reads (which process runs, the user registers a kernel entry saved) is the sample's instant,
 * as a stack is. */
static int os_read(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf, size_t len,
                   size_t *got)
{
    return session_paused_read(ctx, cpu, addr, buf, len, true, got);
}

/* What the adapter copies of a process's mapped files: not the instant's, the guest does not
 * write it (a capturing target reads it from live memory). */
static int os_read_unchanging(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf,
                              size_t len, size_t *got)
{
    return session_paused_read(ctx, cpu, addr, buf, len, false, got);
}

/* Physical reads (the Linux adapter's page walks, its one-time table copies) are not counted
 * against the budget: with the direct backend they cost no round trip. */
static int os_read_phys(void *ctx, uint64_t paddr, void *buf, size_t len)
{
    prof_session *s = ctx;
    return prof_target_read_phys(s->target, paddr, buf, len, NULL);
}

static int os_ram_ranges(void *ctx, struct prof_ram_range *out, int max, int *n,
                         struct qp_error *err)
{
    prof_session *s = ctx;
    return prof_target_ram_ranges(s->target, out, max, n, err);
}

/* The adapter's own reads that cost what a read does (its VMA walks) come out of the budget. */
static bool os_charge(void *ctx, size_t len)
{
    prof_session *s = ctx;
    if (session_budget_allow(s, len) < len)
        return false;
    s->budget.bytes_left -= len;
    return true;
}

struct prof_os_mem session_os_mem(prof_session *s)
{
    return (struct prof_os_mem){.read = os_read,
                                .read_unchanging = os_read_unchanging,
                                .read_phys = os_read_phys,
                                .ram_ranges = os_ram_ranges,
                                .charge = os_charge,
                                .reads_are_cheap = !prof_target_reads_cost_round_trips(s->target),
                                .captured = prof_target_captures(s->target),
                                .ctx = s};
}

void session_read_window(prof_session *s, const struct prof_vcpu *cpu, uint64_t addr, uint8_t *buf,
                         size_t cap, uint64_t *win_addr, size_t *win_len)
{
    *win_addr = addr;
    session_paused_read(s, cpu, addr, buf, cap, true, win_len);
}

/* A page walk's reader: one table entry, guest-physical. */
int session_phys_word(void *ctx, uint64_t paddr, uint64_t *val)
{
    prof_session *s = ctx;
    return prof_target_read_phys(s->target, paddr, val, sizeof *val, NULL);
}

static int walk_word(void *ctx, uint64_t paddr, uint64_t *val)
{
    struct walk_reader *w = ctx;
    return prof_target_read_phys(w->s->target, paddr, val, sizeof *val, w->err);
}

/* The user stack of a process whose table the vCPU is not in: each page of the window found by
 * walking the process's own table over guest-physical reads, up to the first page that is not
 * mapped or not readable. 0 when sp's page was read; the target's code (-ENOTSUP: it reads no
 * physical memory, as the gdbstub's `m` packets do not) with the reason in err when not. */
int session_read_window_in(prof_session *s, struct cpu_capture *c, uint64_t root, uint64_t sp,
                           struct qp_error *err)
{
    struct walk_reader w = {s, err};
    c->ustack_addr = sp;
    c->ustack_len = 0;
    while (c->ustack_len < USTACK_WINDOW) {
        uint64_t va = sp + c->ustack_len, pa, page;
        int rc = prof_arch_page_walk(s->arch, root, &c->vcpu.mmu, va, walk_word, &w, &pa, &page);
        if (rc && !err->msg[0])
            qp_error_set(err, rc, "0x%" PRIx64 " is not mapped in the process's table", va);
        if (rc)
            return c->ustack_len ? 0 : rc;
        size_t len = page - va % page;
        len = len < USTACK_WINDOW - c->ustack_len ? len : USTACK_WINDOW - c->ustack_len;
        rc = prof_target_read_phys(s->target, pa, c->ustack + c->ustack_len, len, err);
        if (rc)
            return c->ustack_len ? 0 : rc;
        c->ustack_len += len;
    }
    return 0;
}
