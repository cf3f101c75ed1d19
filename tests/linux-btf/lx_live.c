/* lx_live: a manual check of lx_btf/lx_task against a live Linux guest (live-guest.sh boots one).
 *
 *   lx_live QMP_SOCKET BTF_FILE SAMPLES [PID MAPS_FILE]
 *
 * Stops the guest SAMPLES times through QMP; for each vCPU in kernel mode takes its GS base as
 * the per-CPU base, reads the current task through the kernel's page tables (CR3 with the PTI
 * user bit and PCID cleared) and counts "comm (pid)". When PID's task is seen with an mm, looks
 * up every VMA listed in MAPS_FILE (the guest's /proc/PID/maps) at its start, its end - 1 and
 * its end, and compares bounds and file names. Exit 0 when every comparison matched. */
#include "lx_task.h"
#include "qmp.h"

#include <inttypes.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seen {
    char name[40];
    unsigned count;
};

struct live {
    struct lx_offsets o;
    qmp_client *c;
    struct qmp_regs kcpu; /* the vCPU being read, its CR3 turned into the kernel PGD */
    struct target {
        int pid;
        const char *maps_path;
        bool compared;
        unsigned seen;
    } targets[4], *target; /* target: the one being compared */
    int n_targets;
    unsigned mismatches, checks;
    struct seen seen[64];
    unsigned n_seen, user_mode, bad_base, errors, swapper_seen, vmas_listed;
    int n_cpus;
};

static int live_read(void *ctx, uint64_t kva, void *buf, size_t len)
{
    struct live *l = ctx;
    size_t got = 0;
    int rc = qmp_mem_read(l->c, &l->kcpu, kva, buf, len, &got, NULL);
    if (rc)
        return rc;
    return got == len ? 0 : -EFAULT;
}

static void count(struct live *l, const char *name)
{
    for (unsigned i = 0; i < l->n_seen; i++)
        if (strcmp(l->seen[i].name, name) == 0) {
            l->seen[i].count++;
            return;
        }
    if (l->n_seen < 64) {
        snprintf(l->seen[l->n_seen].name, sizeof(l->seen[0].name), "%s", name);
        l->seen[l->n_seen++].count = 1;
    }
}

static const char *basename_of(const char *path)
{
    if (path[0] == '[' || path[0] == '\0')
        return ""; /* [heap], [stack], [vdso]...: anonymous to the kernel (no vm_file) */
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void expect(struct live *l, uint64_t mm, uint64_t addr, int want_rc, uint64_t start,
                   uint64_t end, const char *name)
{
    struct lx_reader r = {.read = live_read, .ctx = l};
    struct lx_vma v;
    struct qp_error err = {0};
    int rc = lx_vma_find(&l->o, &r, mm, addr, &v, &err);
    bool ok = rc == want_rc;
    if (ok && rc == 0)
        ok = v.start == start && v.end == end && strcmp(v.name, name) == 0;
    l->checks++;
    if (!ok) {
        l->mismatches++;
        printf("  MISMATCH at 0x%" PRIx64 ": rc %d (%s) got [%" PRIx64 ", %" PRIx64
               ") \"%s\", want rc %d [%" PRIx64 ", %" PRIx64 ") \"%s\"\n",
               addr, rc, err.msg, rc ? 0 : v.start, rc ? 0 : v.end, rc ? "" : v.name, want_rc,
               start, end, name);
    } else if (rc == 0 && addr == start && l->vmas_listed++ < 12) {
        printf("  %012" PRIx64 "-%012" PRIx64 " pgoff %-6" PRIx64 " flags %-6" PRIx64 " %s\n",
               v.start, v.end, v.pgoff, v.flags, v.name[0] ? v.name : "(anon)");
    }
}

struct walked {
    struct lx_vma v[256];
    unsigned n;
};

static int walked_add(void *ctx, const struct lx_vma *v)
{
    struct walked *w = ctx;
    if (w->n < 256)
        w->v[w->n] = *v;
    w->n++;
    return 0;
}

/* The whole-tree walk must give the maps file's VMAs, in order, and nothing else. */
static void compare_walk(struct live *l, uint64_t mm, unsigned n_maps)
{
    static struct walked w;
    struct lx_reader r = {.read = live_read, .ctx = l};
    struct qp_error err = {0};
    w.n = 0;
    int rc = lx_vma_for_each(&l->o, &r, mm, walked_add, &w, &err);
    FILE *f = fopen(l->target->maps_path, "r");
    char line[512];
    unsigned i = 0, bad = rc != 0 || w.n != n_maps;
    while (f && fgets(line, sizeof(line), f) && i < w.n && i < 256) {
        uint64_t start, end;
        char path[256] = "";
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %*s %255[^\n]", &start, &end, path) <
                2 ||
            start >= 0x800000000000ull)
            continue;
        bad += w.v[i].start != start || w.v[i].end != end || strcmp(w.v[i].name, basename_of(path));
        i++;
    }
    if (f)
        fclose(f);
    printf("whole-tree walk: rc %d%s%s, %u VMAs (maps: %u), %u differ\n", rc, rc ? ": " : "",
           rc ? err.msg : "", w.n, n_maps, bad);
    l->checks++;
    l->mismatches += bad != 0;
}

/* Compares the maps file, line by line, with lookups in mm. */
static void compare_maps(struct live *l, uint64_t mm)
{
    FILE *f = fopen(l->target->maps_path, "r");
    if (!f) {
        printf("cannot open %s\n", l->target->maps_path);
        l->mismatches++;
        return;
    }
    char line[512];
    uint64_t prev_end = 0;
    unsigned checks0 = l->checks, mismatches0 = l->mismatches;
    l->vmas_listed = 0;
    unsigned n = 0;
    printf("VMAs of pid %d read from the guest's maple tree (checked against /proc/%d/maps):\n",
           l->target->pid, l->target->pid);
    while (fgets(line, sizeof(line), f)) {
        uint64_t start, end;
        char path[256] = "";
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %*s %255[^\n]", &start, &end, path) <
            2)
            continue;
        if (start >= 0x800000000000ull)
            continue; /* [vsyscall] is not a VMA of the mm */
        const char *name = basename_of(path);
        if (start > prev_end)
            expect(l, mm, start - 1, -ENOENT, 0, 0, "");
        expect(l, mm, start, 0, start, end, name);
        expect(l, mm, end - 1, 0, start, end, name);
        prev_end = end;
        n++;
    }
    fclose(f);
    printf("%s%u VMAs, %u lookups, %u mismatches\n", n > 12 ? "  ...\n" : "", n,
           l->checks - checks0, l->mismatches - mismatches0);
    l->target->compared = true;
    compare_walk(l, mm, n);
}

static int on_sample(qmp_client *c, const struct qmp_regs *cpus, int n_cpus, void *ctx,
                     struct qp_error *err)
{
    struct live *l = ctx;
    struct lx_reader r = {.read = live_read, .ctx = l};
    for (int i = 0; i < n_cpus; i++) {
        if (!cpus[i].long_mode || cpus[i].cpl != 0) {
            l->user_mode++;
            continue;
        }
        l->kcpu = cpus[i];
        l->kcpu.cr3 &= ~0x1fffull; /* the kernel PGD: PTI's user PGD is the next page */
        uint64_t task;
        struct lx_task_info t;
        struct qp_error e = {0};
        if (lx_current_task(&l->o, &r, cpus[i].gs.base, &task, &e) != 0) {
            l->bad_base++;
            continue;
        }
        if (lx_task_read(&l->o, &r, task, &t, &e) != 0) {
            printf("task 0x%" PRIx64 ": %s\n", task, e.msg);
            l->errors++;
            continue;
        }
        char name[40];
        snprintf(name, sizeof(name), "%s (%d)%s", t.comm, t.tgid, t.kthread ? " [k]" : "");
        count(l, name);
        l->n_cpus = n_cpus;
        for (int k = 0; k < l->n_targets; k++) {
            struct target *tg = &l->targets[k];
            if (t.pid != tg->pid)
                continue;
            tg->seen++;
            l->target = tg;
            if (t.mm && !tg->compared)
                compare_maps(l, t.mm);
        }
        l->swapper_seen += t.pid == 0 && t.kthread && strncmp(t.comm, "swapper/", 8) == 0;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc % 2 != 0 || argc > 4 + 2 * 4) {
        fprintf(stderr, "usage: %s QMP_SOCKET BTF_FILE SAMPLES [PID MAPS_FILE]...\n", argv[0]);
        return 2;
    }
    static struct live l;
    struct qp_error err = {0};
    gsize len = 0;
    gchar *raw = NULL;
    g_file_get_contents(argv[2], &raw, &len, NULL);
    lx_btf *b = NULL;
    if (!raw || lx_btf_new(raw, len, &b, &err) || lx_btf_offsets(b, &l.o, &err)) {
        fprintf(stderr, "%s: %s\n", argv[2], raw ? err.msg : "cannot read");
        return 1;
    }
    lx_btf_free(b);
    g_free(raw);
    int samples = atoi(argv[3]);
    for (int a = 4; a + 1 < argc; a += 2, l.n_targets++) {
        l.targets[l.n_targets].pid = atoi(argv[a]);
        l.targets[l.n_targets].maps_path = argv[a + 1];
    }
    if (qmp_open(argv[1], NULL, &l.c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("memory backend: %s\n", qmp_mem_backend_name(qmp_mem_backend_in_use(l.c)));
    for (int i = 0; i < samples; i++)
        if (qmp_sample(l.c, on_sample, &l, NULL, &err)) {
            fprintf(stderr, "sample %d: %s\n", i, err.msg);
            break;
        }
    qmp_free(l.c);
    printf("current tasks seen on kernel-mode vCPUs:\n");
    for (unsigned i = 0; i < l.n_seen; i++)
        printf("  %5u  %s\n", l.seen[i].count, l.seen[i].name);
    printf("vCPU samples in user mode: %u, GS base not a per-CPU base: %u, task errors: %u\n",
           l.user_mode, l.bad_base, l.errors);
    for (int k = 0; k < l.n_targets; k++)
        if (!l.targets[k].compared) {
            printf("FAIL: pid %d was never seen current in kernel mode with an mm\n",
                   l.targets[k].pid);
            return 1;
        }
    /* what a user checks by eye: dd by its pid, and the idle vCPU as swapper/N */

    if (l.n_cpus > 1 && !l.swapper_seen) {
        printf("FAIL: %d vCPUs, dd busy on one, yet no sample showed swapper/N\n", l.n_cpus);
        return 1;
    }
    return l.mismatches || l.errors ? 1 : 0;
}
