/* The current task of each vCPU: from the per-CPU area, from the register the kernel keeps it
 * in, or in user mode from the owner of the page table; and what the sampler is told of it. */
#include "os_linux_internal.h"
#include "qp_log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static bool on_task_stack(const struct lx_task_info *t, uint64_t sp)
{
    return t->stack && sp >= t->stack && sp < t->stack + THREAD_SIZE;
}

/* In a context switch, from the move of the stack pointer to the incoming task's stack until
 * __switch_to writes current_task, current_task names the outgoing task while the stack (and the
 * user registers at its top) are the incoming one's: its name, address space and stack bounds
 * must go with the sample. rq->curr names the incoming task then; it is taken only when the stack
 * pointer lies on its stack and not on current_task's (an interrupt stack keeps current_task). */
static void take_incoming_task(struct os_linux *l, const struct lx_reader *r,
                               const struct prof_vcpu *cpu, uint64_t base, int i, bool captured)
{
    uint64_t sp = cpu->sp, next;
    struct lx_task_info t;
    struct qp_error ignored = {0};
    if (on_task_stack(&l->tasks[i], sp) || lx_rq_curr(&l->off, r, base, &next, &ignored) ||
        next == l->tasks[i].task)
        return;
    if (lx_task_read(&l->off, r, next, &t, &ignored)) {
        /* A switch under way whose incoming task the capture lacks: which of the two the stack
         * is cannot be told, so neither is named. */
        if (captured) {
            l->task_ok[i] = false;
            l->task_unnamed++;
        }
        return;
    }
    if (!on_task_stack(&t, sp))
        return;
    l->tasks[i] = t;
    l->switching_samples++;
}

/* The physical address of the page table of user task t (mm->pgd). */
static int pgd_paddr(struct os_linux *l, const struct lx_task_info *t, uint64_t *pa)
{
    uint64_t pgd;
    if (!t->mm || t->kthread || lx_kernel_read(l->kernel, t->mm + l->off.mm_pgd, &pgd, 8) ||
        !lx_is_kernel_addr(pgd))
        return -ENOENT;
    return lx_kernel_virt_to_phys(l->kernel, pgd, pa);
}

static void remember_owner(struct os_linux *l, const struct lx_task_info *t)
{
    uint64_t pa;
    if (pgd_paddr(l, t, &pa))
        return;
    for (int i = 0; i < OWNERS; i++)
        if (l->owners[i].pgd_pa == pa) {
            l->owners[i].task = *t;
            return;
        }
    l->owners[l->next_owner++ % OWNERS] = (struct owner){pa, *t};
}

/* Every process of the kernel's list (from a task read lately) as an owner of its page table:
 * for a process not seen in kernel mode yet. At most every OWNERS_WALK_EVERY stops, at most
 * OWNERS_WALK_MAX processes; garbage ends it. */
static void walk_owners(struct os_linux *l, const struct lx_reader *r)
{
    if (!l->known_task || (l->owners_walked && l->stops < l->owners_walked + OWNERS_WALK_EVERY))
        return;
    l->owners_walked = l->stops + 1;
    struct qp_error ignored = {0};
    uint64_t t = l->known_task;
    for (int n = 0; n < OWNERS_WALK_MAX; n++) {
        struct lx_task_info info;
        if (lx_task_next(&l->off, r, t, &t, &ignored) || t == l->known_task)
            return;
        if (lx_task_read(&l->off, r, t, &info, &ignored) == 0 && info.mm && !info.kthread)
            remember_owner(l, &info);
    }
}

static bool find_owner(struct os_linux *l, const struct lx_reader *r, uint64_t root,
                       struct lx_task_info *out)
{
    bool (*names)(uint64_t, uint64_t) = l->cfg.arch->root_names_table;
    struct qp_error ignored = {0};
    uint64_t pa;
    for (int i = 0; i < OWNERS; i++)
        if (l->owners[i].pgd_pa && names(root, l->owners[i].pgd_pa) &&
            lx_task_read(&l->off, r, l->owners[i].task.task, out, &ignored) == 0 &&
            pgd_paddr(l, out, &pa) == 0 && names(root, pa))
            return true;
    return false;
}

/* A vCPU in user mode: the process whose page table its root register names, seen in kernel
 * mode or in the process list, checked again (it may have exited and its page table gone to
 * another). */
static bool owner_task(struct os_linux *l, const struct lx_reader *r, const struct prof_vcpu *cpu,
                       struct lx_task_info *out)
{
    uint64_t root = cpu->as_root;
    if (find_owner(l, r, root, out))
        return true;
    walk_owners(l, r);
    return find_owner(l, r, root, out);
}

/* Whether cpu's page tables are those of task t's mm (by the architecture's rule: PTI's user
 * and kernel halves of one pair alike, an ASID aside). An mm whose pgd cannot be read counts as
 * the vCPU's: nothing says it is not, and the sample keeps the task the kernel named current. */
static bool runs_on_own_mm(struct os_linux *l, const struct prof_vcpu *cpu,
                           const struct lx_task_info *t)
{
    uint64_t pgd, pa;
    if (!t->mm || t->kthread || !lx_is_kernel_addr(t->mm) ||
        lx_kernel_read(l->kernel, t->mm + l->off.mm_pgd, &pgd, 8) ||
        lx_kernel_virt_to_phys(l->kernel, pgd, &pa))
        return true;
    return l->cfg.arch->root_names_table(cpu->as_root, pa);
}

/* The current task from the register the kernel keeps it in (aarch64's SP_EL0 at EL1, riscv64's
 * tp in S-mode, or sscratch where tp holds user data), or in user mode from the page table's
 * owner (aarch64: TTBR0; riscv64's sscratch names the task there). Whether the vCPU runs on
 * that task's mm: the owner's by construction; a task the register names is compared (a switch
 * between switch_mm and the register's update, a kernel that parks TTBR0 on a reserved table). */
static void read_task_by_regs(struct os_linux *l, const struct prof_vcpu *cpu, int i)
{
    struct lx_reader r = {.read = os_linux_kread, .ctx = l->kernel};
    struct qp_error err = {0};
    /* The register, or where it waits (riscv64's sscratch) while it holds user data. */
    uint64_t task = cpu->has_kernel_thread_reg && !cpu->user ? cpu->kernel_thread_reg : 0;
    if (!lx_is_kernel_addr(task) && cpu->has_kernel_thread_alt)
        task = cpu->kernel_thread_alt;
    if (!lx_is_kernel_addr(task)) {
        /* User mode, or kernel mode before the entry code loaded the register (an exception
         * vector's first instruction, the user's page table still in place). */
        l->task_ok[i] = owner_task(l, &r, cpu, &l->tasks[i]);
        l->own_mm[i] = l->task_ok[i];
        return;
    }
    if (lx_task_read(&l->off, &r, task, &l->tasks[i], &err) == 0) {
        l->task_ok[i] = true;
        l->known_task = task;
        remember_owner(l, &l->tasks[i]);
        l->own_mm[i] = runs_on_own_mm(l, cpu, &l->tasks[i]);
        l->foreign_mm_samples += !l->own_mm[i];
    } else if (l->cfg.verbose && !l->said_task_error) {
        qp_log(QP_LOG_INFO, "Linux: vCPU %d's current task: %s (said once)", cpu->index, err.msg);
        l->said_task_error = true;
    }
}

/* A capturing target's sample: the current task's reads are served only from what the target
 * captured at the sample's instant (capture_plan). A live read instead would name whatever runs
 * by the time it reads (an interrupt of one process named after the next one scheduled). */
struct instant_reader {
    struct os_linux *l;
    const struct prof_vcpu *cpu;
};

static int instant_read(void *ctx, uint64_t kva, void *buf, size_t len)
{
    struct instant_reader *u = ctx;
    const struct prof_os_mem *mem = u->l->mem;
    size_t got = 0;
    if (mem->read(mem->ctx, u->cpu, kva, buf, len, &got) == 0 && got == len) {
        u->l->task_reads_instant++;
        return 0;
    }
    return -EAGAIN;
}

/* The per-CPU area: GS base in kernel mode, else __per_cpu_offset[cpu] (QEMU numbers vCPUs as
 * Linux numbers CPUs when nothing was hot-plugged); lx_current_task checks it either way. */
void os_linux_read_task(struct os_linux *l, const struct prof_vcpu *cpu, int i)
{
    struct instant_reader ir = {l, cpu};
    struct lx_reader r = {.read = os_linux_kread, .ctx = l->kernel};
    bool captured = l->mem && l->mem->captured && l->mem->read;
    if (captured)
        r = (struct lx_reader){.read = instant_read, .ctx = &ir};
    uint64_t base = 0, task;
    struct qp_error err = {0};
    l->task_ok[i] = false;
    /* Kernel mode outside the kernel half is not the kernel we found (a new boot's early code
     * before QMP's RESET event reached us): its per-CPU data would be the old boot's. */
    if (!cpu->user && !lx_is_kernel_addr(cpu->pc))
        return;
    if (!l->have_percpu) {
        read_task_by_regs(l, cpu, i);
        return;
    }
    if (!cpu->user && cpu->gs_base >= l->cfg.split.kernel_start)
        base = cpu->gs_base;
    else if (lx_kernel_read(l->kernel,
                            l->per_cpu_offset + 8 * (uint64_t)(cpu->index > 0 ? cpu->index : 0),
                            &base, 8))
        return;
    if (lx_current_task(&l->off, &r, base, &task, &err) == 0 &&
        lx_task_read(&l->off, &r, task, &l->tasks[i], &err) == 0) {
        l->task_ok[i] = true;
        if (!cpu->user)
            take_incoming_task(l, &r, cpu, base, i, captured);
        l->own_mm[i] = !l->task_ok[i] || runs_on_own_mm(l, cpu, &l->tasks[i]);
        l->foreign_mm_samples += !l->own_mm[i];
    } else if (captured) {
        l->task_unnamed++; /* before the target had the plan: not this instant's to read */
    } else if (l->cfg.verbose && !l->said_task_error) {
        qp_log(QP_LOG_INFO, "Linux: vCPU %d's current task: %s (said once)", cpu->index, err.msg);
        l->said_task_error = true;
    }
}

void os_linux_task(void *impl, const struct prof_vcpu *cpu, int i, struct prof_task *out)
{
    struct os_linux *l = impl;
    out->state = cpu->halted ? PROF_TASK_IDLE : cpu->user ? PROF_TASK_USER : PROF_TASK_KERNEL;
    out->user_leaf_only = l->kernel != NULL; /* user unwinding tables: not yet */
    if (!l->kernel || i < 0 || i >= PROF_MAX_VCPUS || !l->task_ok[i])
        return;
    const struct lx_task_info *t = &l->tasks[i];
    out->known = true;
    out->pid = (uint32_t)t->tgid;
    if (t->pid == 0) {
        /* The idle task's comm is already "swapper/N", N Linux's own CPU number. */
        g_strlcpy(out->comm, t->comm[0] ? t->comm : "swapper", sizeof out->comm);
        out->state = PROF_TASK_KERNEL; /* in the idle task, but not halted: real work */
        return;
    }
    /* A kernel thread in brackets, as ps shows it: "[kworker/0:1] (7)" beside "dd (94)". */
    snprintf(out->comm, sizeof out->comm, t->kthread ? "[%s]" : "%s", t->comm);
    out->state = t->kthread ? PROF_TASK_KERNEL : PROF_TASK_USER;
    if (t->stack)
        out->kstack_lo = t->stack, out->kstack_hi = t->stack + THREAD_SIZE;
    if (!t->kthread && t->stack)
        out->user_regs_at = t->stack + THREAD_SIZE - l->off.pt_regs_size;
}
