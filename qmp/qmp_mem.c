/* Guest memory: direct (mapped RAM + our own page walk), memsave and hmp backends. */
#define _GNU_SOURCE
#include "qmp_internal.h"

#include "arch_x86_64.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE_SIZE    4096ull
#define PIPELINE     8   /* QEMU queues at most 8 requests per monitor without oob */
#define MEMSAVE_PATH 300 /* a memsave file's path: memsave_dir and "/phys" */
/* HMP prints 8 bytes as ~19 characters: 64 KiB per x command keeps each reply near 160 KB,
 * far below the parser's message cap, whatever length the caller asks for. */
#define HMP_CHUNK (64u << 10)
/* A memsave range that crosses a hole is redone page by page; at most this many pages, so one
 * unmapped page cannot turn a large read into thousands of requests. */
#define MEMSAVE_SPLIT_MAX_PAGES 16

/* ---- Direct backend --------------------------------------------------------------------- */

/* Where guest-physical paddr lives in the mapping, and how many bytes follow contiguously. */
static const uint8_t *direct_ptr(const struct qmp_direct *d, uint64_t paddr, uint64_t *avail)
{
    for (int i = 0; i < d->n_ranges; i++) {
        const struct ram_range *r = &d->ranges[i];
        if (paddr < r->start || paddr > r->end)
            continue;
        uint64_t off = r->offset + (paddr - r->start);
        if (off < r->offset || off >= d->map_len)
            return NULL;
        /* end - paddr + 1 would wrap to 0 for a range ending at 2^64 - 1; the file bounds it
         * anyway. */
        uint64_t in_range = r->end - paddr;
        *avail = d->map_len - off;
        if (in_range < *avail)
            *avail = in_range + 1;
        return d->map + off;
    }
    return NULL;
}

static int direct_phys_read(void *ctx, uint64_t paddr, uint64_t *val)
{
    uint64_t avail;
    const uint8_t *p = direct_ptr(ctx, paddr, &avail);
    if (!p || avail < 8)
        return -EFAULT;
    memcpy(val, p, 8); /* x86 hosts only: guest and host are both little-endian */
    return 0;
}

/* Translates one virtual address for cpu; real mode and paging-off guests map 1:1. */
static int direct_translate(const struct qmp_direct *d, const struct qmp_regs *cpu, uint64_t vaddr,
                            uint64_t *paddr, uint64_t *page_size)
{
    if (!(cpu->cr0 & X86_CR0_PG)) {
        *paddr = vaddr;
        *page_size = PAGE_SIZE;
        return 0;
    }
    if (!cpu->long_mode || (cpu->cr4 & X86_CR4_LA57)) /* 32-bit paging or LA57: not handled */
        return -ENOTSUP;
    return prof_arch_x86_64.page_walk(cpu->cr3, vaddr, direct_phys_read, (void *)d, paddr,
                                      page_size);
}

void qmp__direct_read(const struct qmp_direct *d, const struct qmp_regs *cpu, struct qmp_mem_req *r)
{
    r->got = 0;
    while (r->got < r->len) {
        uint64_t va = r->vaddr + r->got, pa, size, avail;
        if (direct_translate(d, cpu, va, &pa, &size) < 0)
            break;
        const uint8_t *p = direct_ptr(d, pa, &avail);
        if (!p)
            break; /* MMIO or beyond RAM */
        uint64_t n = size - (pa & (size - 1));
        n = n < avail ? n : avail;
        n = n < r->len - r->got ? n : r->len - r->got;
        if (n == 0)
            break; /* cannot happen with sane ranges; never loop without progress */
        memcpy((uint8_t *)r->buf + r->got, p, n);
        r->got += n;
    }
    r->rc = r->got > 0 || r->len == 0 ? 0 : -EFAULT;
}

/* "  0000000000100000-000000000fffffff (prio 0, ram): ram @0000000000100000" */
static void parse_mtree_line(struct qmp_direct *d, const char *line, const char *backend)
{
    unsigned long long start, end, off = 0;
    char kind[16], name[64];
    int n =
        sscanf(line, " %llx-%llx (prio %*d, %15[^)]): %63s @%llx", &start, &end, kind, name, &off);
    if (n < 4 || strcmp(name, backend) != 0 || d->n_ranges >= 16)
        return;
    if (strcmp(kind, "ram") != 0 && strcmp(kind, "rom") != 0)
        return;
    if (end < start || off + (end - start) < off)
        return; /* reversed, or its file offsets would wrap: not a range we can serve */
    d->ranges[d->n_ranges++] = (struct ram_range){start, end, off};
}

/* Takes the flat view of the "memory" address space, else the first that shows the backend. */
void qmp__parse_mtree(struct qmp_direct *d, const char *text, const char *backend)
{
    gchar **views = g_strsplit(text, "FlatView #", -1);
    gchar **chosen = NULL;
    for (gchar **v = views; *v && !chosen; v++)
        if (strstr(*v, "AS \"memory\","))
            chosen = v;
    for (gchar **v = views; *v && !chosen; v++)
        if (strstr(*v, "): ") && strstr(*v, backend))
            chosen = v;
    if (chosen) {
        gchar **lines = g_strsplit(*chosen, "\n", -1);
        for (gchar **l = lines; *l; l++)
            parse_mtree_line(d, *l, backend);
        g_strfreev(lines);
    }
    g_strfreev(views);
}

static json_object *qom_args(const char *path, const char *property)
{
    json_object *args = json_object_new_object();
    json_object_object_add(args, "path", json_object_new_string(path));
    if (property)
        json_object_object_add(args, "property", json_object_new_string(property));
    return args;
}

static int qom_get(qmp_client *c, const char *path, const char *prop, json_object **ret,
                   struct qp_error *err)
{
    json_object *args = qom_args(path, prop);
    int rc = qmp_execute(c, "qom-get", args, ret, err);
    json_object_put(args);
    return rc;
}

/* Finds a shared memory-backend-file object; fills its id and mem-path. */
static int find_backend(qmp_client *c, char *id, size_t id_len, char *path, size_t path_len,
                        struct qp_error *err)
{
    json_object *list = NULL, *args = qom_args("/objects", NULL);
    int rc = qmp_execute(c, "qom-list", args, &list, err);
    json_object_put(args);
    if (rc == 0 && !json_object_is_type(list, json_type_array))
        rc = qp_error_set(err, -EPROTO, "qom-list /objects did not return a list");
    for (size_t i = 0; rc == 0 && i < json_object_array_length(list); i++) {
        json_object *o = json_object_array_get_idx(list, i), *name, *type, *v = NULL;
        if (!json_object_object_get_ex(o, "name", &name) ||
            !json_object_object_get_ex(o, "type", &type) ||
            strcmp(json_object_get_string(type), "child<memory-backend-file>") != 0)
            continue;
        char obj[128];
        snprintf(obj, sizeof obj, "/objects/%s", json_object_get_string(name));
        if (qom_get(c, obj, "share", &v, NULL) < 0 || !json_object_get_boolean(v)) {
            json_object_put(v);
            continue; /* share=off: the file does not see the guest's writes */
        }
        json_object_put(v);
        if ((rc = qom_get(c, obj, "mem-path", &v, err)) == 0) {
            g_strlcpy(id, json_object_get_string(name), id_len);
            g_strlcpy(path, json_object_get_string(v), path_len);
            json_object_put(v);
            json_object_put(list);
            return 0;
        }
    }
    json_object_put(list);
    return rc < 0 ? rc
                  : qp_error_set(err, -ENOTSUP,
                                 "guest RAM is not a shared file: start QEMU with -object "
                                 "memory-backend-file,id=ram,size=SIZE,mem-path=/dev/shm/NAME,"
                                 "share=on -machine memory-backend=ram");
}

static int map_backend(struct qmp_direct *d, const char *path, struct qp_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return qp_error_set(err, -errno, "opening guest RAM file %s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0 || st.st_size == 0)
        rc = qp_error_set(err, -EIO, "guest RAM file %s is empty or unreadable", path);
    void *m = rc ? MAP_FAILED : mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (rc == 0 && m == MAP_FAILED)
        rc = qp_error_set(err, -errno, "mapping guest RAM file %s: %s", path, strerror(errno));
    close(fd);
    if (rc == 0) {
        d->map = m;
        d->map_len = st.st_size;
    }
    return rc;
}

int qmp__direct_setup(qmp_client *c, struct qp_error *err)
{
    char id[64], path[512], *mtree = NULL;
    int rc = find_backend(c, id, sizeof id, path, sizeof path, err);
    if (rc == 0)
        rc = qmp_hmp(c, "info mtree -f", -1, &mtree, err);
    if (rc == 0) {
        qmp__parse_mtree(&c->direct, mtree, id);
        if (c->direct.n_ranges == 0)
            rc = qp_error_set(err, -EPROTO, "info mtree -f shows no RAM range of backend %s", id);
    }
    free(mtree);
    if (rc == 0)
        rc = map_backend(&c->direct, path, err);
    if (rc < 0)
        c->direct.n_ranges = 0;
    return rc;
}

void qmp__direct_close(qmp_client *c)
{
    if (c->direct.map)
        munmap((void *)c->direct.map, c->direct.map_len);
    c->direct.map = NULL;
}

/* ---- Pipelined QMP reads (memsave and hmp) ---------------------------------------------- */

struct mem_job {
    uint64_t vaddr;
    size_t len;
    uint8_t *dst;
    size_t got;
    int rc;
    unsigned id;
    bool phys; /* HMP: vaddr is guest-physical (xp) */
};

/* The files QEMU writes in the memsave directory: one per pipeline slot, and pmemsave's. */
#define MEMSAVE_FILES (PIPELINE + 1)

static void memsave_file(const char *dir, int slot, char *out, size_t size)
{
    if (slot < PIPELINE)
        snprintf(out, size, "%s/%d", dir, slot);
    else
        snprintf(out, size, "%s/phys", dir);
}

/* The sweeper: a child that holds only the read end of a pipe whose write end qprof keeps.
 * When qprof closes it or dies in any way (SIGKILL and the OOM killer included: no handler
 * runs then), the read returns and the sweeper removes the directory. Unlinking each file
 * after reading would still leave the directory and the files of requests in flight. The paths
 * are made before the fork; the child only reads, unlinks and exits. */
static void sweep_when_orphaned(int lifeline, char (*files)[MEMSAVE_PATH], const char *dir)
{
    for (int fd = 0; fd < 1024; fd++) /* nothing of qprof's kept open: not QMP, not stdout */
        if (fd != lifeline)
            close(fd);
    signal(SIGINT, SIG_IGN); /* Ctrl-C reaches the whole process group: qprof cleans up first */
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    char byte;
    while (read(lifeline, &byte, 1) < 0 && errno == EINTR)
        ;
    for (int i = 0; i < MEMSAVE_FILES; i++)
        unlink(files[i]);
    rmdir(dir);
    _exit(0);
}

static int start_sweeper(qmp_client *c, struct qp_error *err)
{
    char files[MEMSAVE_FILES][MEMSAVE_PATH];
    for (int i = 0; i < MEMSAVE_FILES; i++)
        memsave_file(c->memsave_dir, i, files[i], sizeof files[i]);
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
        return qp_error_set(err, -errno, "pipe for the memsave sweeper: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0)
        sweep_when_orphaned(pipe_fds[0], files, c->memsave_dir);
    int saved = errno;
    close(pipe_fds[0]);
    if (pid < 0) {
        close(pipe_fds[1]);
        return qp_error_set(err, -saved, "fork for the memsave sweeper: %s", strerror(saved));
    }
    c->memsave_sweeper = pid;
    c->memsave_lifeline = pipe_fds[1];
    return 0;
}

int qmp__memsave_setup(qmp_client *c, struct qp_error *err)
{
    /* Short names: every request byte costs QEMU ~2.5 us. In $TMPDIR when set (read now, not
     * cached), else /tmp. */
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    int n = snprintf(c->memsave_dir, sizeof c->memsave_dir, "%s/qpXXXXXX", tmp);
    if (n < 0 || (size_t)n + 8 >= sizeof c->memsave_dir) {
        c->memsave_dir[0] = '\0';
        return qp_error_set(err, -ENAMETOOLONG, "$TMPDIR is too long for memsave files: %s", tmp);
    }
    if (!mkdtemp(c->memsave_dir)) {
        int saved = errno;
        c->memsave_dir[0] = '\0';
        return qp_error_set(err, -saved, "mkdtemp in %s for memsave files: %s", tmp,
                            strerror(saved));
    }
    int rc = start_sweeper(c, err);
    if (rc) {
        rmdir(c->memsave_dir);
        c->memsave_dir[0] = '\0';
    }
    return rc;
}

void qmp__memsave_close(qmp_client *c)
{
    if (!c->memsave_dir[0])
        return;
    for (int i = 0; i < MEMSAVE_FILES; i++) {
        char f[MEMSAVE_PATH];
        memsave_file(c->memsave_dir, i, f, sizeof f);
        unlink(f);
    }
    rmdir(c->memsave_dir);
    c->memsave_dir[0] = '\0';
    if (c->memsave_sweeper > 0) {
        close(c->memsave_lifeline); /* the sweeper finds nothing left and exits */
        waitpid(c->memsave_sweeper, NULL, 0);
        c->memsave_sweeper = 0;
    }
}

static void job_send_memsave(qmp_client *c, const struct qmp_regs *cpu, struct mem_job *j, int slot,
                             GString *out)
{
    char file[MEMSAVE_PATH];
    memsave_file(c->memsave_dir, slot, file, sizeof file);
    json_object *args = json_object_new_object();
    /* QEMU 7.2 takes val as a signed int: higher-half addresses go as negative numbers. */
    json_object_object_add(args, "val", json_object_new_int64((int64_t)j->vaddr));
    json_object_object_add(args, "size", json_object_new_int64((int64_t)j->len));
    json_object_object_add(args, "filename", json_object_new_string(file));
    if (cpu->cpu_index > 0)
        json_object_object_add(args, "cpu-index", json_object_new_int(cpu->cpu_index));
    j->id = qmp__request(c, out, "memsave", args);
    json_object_put(args);
}

/* HMP's x reads and prints 16 bytes a line and drops a line it cannot read whole, so the dump
 * starts 16-byte aligned: then no line straddles a page boundary, and a read that ends where the
 * mapping does (the top of a stack) keeps its last word. */
static uint64_t hmp_dump_start(const struct mem_job *j)
{
    return j->vaddr & ~UINT64_C(15);
}

static uint64_t hmp_dump_words(const struct mem_job *j)
{
    return (j->vaddr - hmp_dump_start(j) + j->len + 7) / 8;
}

static void job_send_hmp(qmp_client *c, const struct qmp_regs *cpu, struct mem_job *j, GString *out)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "%s/%llugx 0x%llx", j->phys ? "xp" : "x",
             (unsigned long long)hmp_dump_words(j), (unsigned long long)hmp_dump_start(j));
    json_object *args = qmp__hmp_args(cmd, cpu->cpu_index > 0 ? cpu->cpu_index : -1);
    j->id = qmp__request(c, out, "human-monitor-command", args);
    json_object_put(args);
}

static int read_memsave_file(qmp_client *c, int slot, struct mem_job *j, struct qp_error *err)
{
    char file[MEMSAVE_PATH];
    memsave_file(c->memsave_dir, slot, file, sizeof file);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : pread(fd, j->dst, j->len, 0);
    if (fd >= 0)
        close(fd);
    if (n != (ssize_t)j->len)
        return qp_error_set(err, -EIO, "reading memsave file %s: %s", file,
                            n < 0 ? strerror(errno) : "short file");
    j->got = j->len;
    return 0;
}

/* Stores dump word w (at start + 8w) into the part of the job's buffer it overlaps. */
static void store_dump_word(struct mem_job *j, uint64_t start, size_t w, uint64_t v)
{
    for (int b = 0; b < 8; b++) {
        uint64_t at = start + w * 8 + (uint64_t)b;
        if (at >= j->vaddr && at - j->vaddr < j->len)
            j->dst[at - j->vaddr] = (uint8_t)(v >> (8 * b));
    }
}

/* "ffffffff80001000: 0x0000000000000001 0x0000000000000002" lines until "Cannot access". */
static void parse_hmp_dump(const char *text, struct mem_job *j)
{
    uint64_t start = hmp_dump_start(j);
    uint64_t words = hmp_dump_words(j), w = 0;
    for (const char *line = text; *line && w < words;) {
        const char *colon = strchr(line, ':'), *nl = strchr(line, '\n');
        if (!colon || (nl && colon > nl) || strstr(line, "Cannot access") == line)
            break;
        unsigned long long addr = strtoull(line, NULL, 16);
        if (addr != start + w * 8)
            break; /* stopped early: whatever follows is not ours */
        for (const char *p = colon + 1; w < words && (p = strstr(p, "0x")) && (!nl || p < nl);) {
            char *e;
            store_dump_word(j, start, w, strtoull(p, &e, 16));
            w++;
            p = e;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    uint64_t end = start + w * 8;
    j->got = end <= j->vaddr ? 0 : end - j->vaddr < j->len ? end - j->vaddr : j->len;
}

/* Collects one reply; an error reply is this job's failure, not the batch's. */
static int job_collect(qmp_client *c, enum qmp_mem_backend b, struct mem_job *j, int slot,
                       struct qp_error *err)
{
    json_object *ret = NULL;
    struct qp_error e = {0};
    int rc = qmp__wait(c, j->id, &ret, &e);
    if (rc == -EREMOTEIO) {
        j->rc = -EFAULT;
        return 0;
    }
    if (rc < 0)
        return qp_error_set(err, rc, "%s", e.msg);
    if (b == QMP_MEM_MEMSAVE) {
        json_object_put(ret);
        rc = read_memsave_file(c, slot, j, err);
    } else {
        if (json_object_is_type(ret, json_type_string))
            parse_hmp_dump(json_object_get_string(ret), j);
        json_object_put(ret);
    }
    j->rc = j->got > 0 || j->len == 0 ? 0 : -EFAULT;
    return rc;
}

/* Runs jobs with up to PIPELINE requests in flight; memsave's file slot is the job's index
 * modulo PIPELINE, free again once the job at that slot was collected. */
static int run_jobs(qmp_client *c, enum qmp_mem_backend b, const struct qmp_regs *cpu,
                    struct mem_job *jobs, size_t n, struct qp_error *err)
{
    GString *out = g_string_new(NULL);
    int rc = 0;
    size_t sent = 0, done = 0;
    for (; done < n && rc == 0; done++) {
        g_string_truncate(out, 0);
        for (; sent < n && sent < done + PIPELINE; sent++) {
            if (b == QMP_MEM_MEMSAVE)
                job_send_memsave(c, cpu, &jobs[sent], (int)(sent % PIPELINE), out);
            else
                job_send_hmp(c, cpu, &jobs[sent], out);
        }
        if (out->len && (rc = qmp__send(c, out->str, out->len, err)) < 0)
            break;
        rc = job_collect(c, b, &jobs[done], (int)(done % PIPELINE), err);
    }
    /* Replies to requests still in flight must not be mistaken for later ones: drain them,
     * all within one time-out (not one each: the guest may be paused meanwhile). */
    int64_t drain_deadline = qmp__now_us() + (int64_t)c->timeout_ms * 1000;
    for (size_t i = done; rc < 0 && i < sent && !c->dead; i++)
        if (qmp__wait_until(c, jobs[i].id, drain_deadline, NULL, NULL) == -ETIMEDOUT)
            break;
    g_string_free(out, TRUE);
    return rc;
}

/* Splits [vaddr, vaddr + len) into jobs at `step`-aligned boundaries, at most max_jobs; returns
 * the number made. Offsets, not end addresses, so that a range ending at the top of the address
 * space does not wrap. */
static size_t split_jobs(uint64_t vaddr, size_t len, uint8_t *dst, uint64_t step,
                         struct mem_job *jobs, size_t max_jobs)
{
    size_t n = 0;
    for (uint64_t off = 0; off < len && n < max_jobs;) {
        uint64_t in_step = step - ((vaddr + off) & (step - 1));
        uint64_t piece = in_step < len - off ? in_step : len - off;
        jobs[n++] = (struct mem_job){.vaddr = vaddr + off, .len = piece, .dst = dst + off};
        off += piece;
    }
    return n;
}

/* Bytes read from the start: the full jobs in order, up to and including the first short one. */
static size_t jobs_prefix(const struct mem_job *jobs, size_t n)
{
    size_t got = 0;
    for (size_t i = 0; i < n && jobs[i].rc == 0; i++) {
        got += jobs[i].got;
        if (jobs[i].got < jobs[i].len)
            break;
    }
    return got;
}

/* A memsave range crossing an unmapped page fails whole: redo it page by page (its first
 * MEMSAVE_SPLIT_MAX_PAGES pages) and keep the pages before the first hole. */
static int memsave_split(qmp_client *c, const struct qmp_regs *cpu, struct qmp_mem_req *r,
                         struct qp_error *err)
{
    struct mem_job jobs[MEMSAVE_SPLIT_MAX_PAGES];
    size_t n = split_jobs(r->vaddr, r->len, r->buf, PAGE_SIZE, jobs, MEMSAVE_SPLIT_MAX_PAGES);
    int rc = run_jobs(c, QMP_MEM_MEMSAVE, cpu, jobs, n, err);
    r->got = rc == 0 ? jobs_prefix(jobs, n) : 0;
    r->rc = r->got > 0 || r->len == 0 ? 0 : -EFAULT;
    return rc;
}

/* HMP requests go out in HMP_CHUNK pieces; the request's result is the prefix they read. */
static int hmp_read(qmp_client *c, const struct qmp_regs *cpu, struct qmp_mem_req *reqs, size_t n,
                    struct qp_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (reqs[i].len + HMP_CHUNK - 1) / HMP_CHUNK + 1;
    struct mem_job *jobs = g_new0(struct mem_job, total);
    size_t *first = g_new0(size_t, n + 1), n_jobs = 0;
    for (size_t i = 0; i < n; i++) {
        first[i] = n_jobs;
        n_jobs += split_jobs(reqs[i].vaddr, reqs[i].len, reqs[i].buf, HMP_CHUNK, jobs + n_jobs,
                             total - n_jobs);
    }
    first[n] = n_jobs;
    int rc = run_jobs(c, QMP_MEM_HMP, cpu, jobs, n_jobs, err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        reqs[i].got = jobs_prefix(jobs + first[i], first[i + 1] - first[i]);
        reqs[i].rc = reqs[i].got > 0 || reqs[i].len == 0 ? 0 : -EFAULT;
    }
    g_free(first);
    g_free(jobs);
    return rc;
}

static int memsave_read(qmp_client *c, const struct qmp_regs *cpu, struct qmp_mem_req *reqs,
                        size_t n, struct qp_error *err)
{
    struct mem_job *jobs = g_new0(struct mem_job, n);
    size_t *req_of = g_new0(size_t, n), n_jobs = 0;
    for (size_t i = 0; i < n; i++) {
        if (reqs[i].len == 0)
            continue; /* nothing to ask QEMU */
        req_of[n_jobs] = i;
        jobs[n_jobs++] =
            (struct mem_job){.vaddr = reqs[i].vaddr, .len = reqs[i].len, .dst = reqs[i].buf};
    }
    int rc = run_jobs(c, QMP_MEM_MEMSAVE, cpu, jobs, n_jobs, err);
    for (size_t k = 0; rc == 0 && k < n_jobs; k++) {
        struct qmp_mem_req *r = &reqs[req_of[k]];
        r->got = jobs[k].got;
        r->rc = jobs[k].rc;
        if (jobs[k].rc < 0)
            rc = memsave_split(c, cpu, r, err);
    }
    g_free(req_of);
    g_free(jobs);
    return rc;
}

int qmp_mem_read_many(qmp_client *c, const struct qmp_regs *cpu, struct qmp_mem_req *reqs, size_t n,
                      struct qp_error *err)
{
    for (size_t i = 0; i < n; i++) {
        reqs[i].got = 0;
        reqs[i].rc = reqs[i].len ? -EFAULT : 0;
        /* Nothing lies past the top of the address space: the read ends there. */
        if (reqs[i].vaddr && reqs[i].len > 0 - reqs[i].vaddr)
            reqs[i].len = 0 - reqs[i].vaddr;
    }
    if (c->backend == QMP_MEM_DIRECT) {
        for (size_t i = 0; i < n; i++)
            qmp__direct_read(&c->direct, cpu, &reqs[i]);
        return 0;
    }
    if (c->backend == QMP_MEM_HMP)
        return hmp_read(c, cpu, reqs, n, err);
    return memsave_read(c, cpu, reqs, n, err);
}

int qmp_mem_read(qmp_client *c, const struct qmp_regs *cpu, uint64_t vaddr, void *buf, size_t len,
                 size_t *got, struct qp_error *err)
{
    struct qmp_mem_req r = {.vaddr = vaddr, .len = len, .buf = buf};
    int rc = qmp_mem_read_many(c, cpu, &r, 1, err);
    if (got)
        *got = r.got;
    if (rc < 0)
        return qp_error_prefix(err, "reading %zu bytes at 0x%llx", len, (unsigned long long)vaddr);
    if (r.rc < 0)
        return qp_error_set(err, r.rc, "reading %zu bytes at 0x%llx (%s): address not mapped", len,
                            (unsigned long long)vaddr, qmp_mem_backend_name(c->backend));
    return 0;
}

/* ---- Guest-physical reads --------------------------------------------------------------- */

static int direct_phys(const struct qmp_direct *d, uint64_t paddr, uint8_t *buf, size_t len,
                       struct qp_error *err)
{
    size_t done = 0;
    while (done < len) {
        uint64_t avail;
        const uint8_t *p = direct_ptr(d, paddr + done, &avail);
        if (!p || avail == 0)
            return qp_error_set(err, -EFAULT, "guest-physical 0x%llx is not RAM",
                                (unsigned long long)(paddr + done));
        size_t n = len - done < avail ? len - done : (size_t)avail;
        memcpy(buf + done, p, n);
        done += n;
    }
    return 0;
}

/* QMP's pmemsave: memsave's physical twin, one round trip. */
static int pmemsave_phys(qmp_client *c, uint64_t paddr, uint8_t *buf, size_t len,
                         struct qp_error *err)
{
    if (!c->memsave_dir[0] && qmp__memsave_setup(c, err) < 0)
        return -EIO;
    char file[MEMSAVE_PATH];
    memsave_file(c->memsave_dir, PIPELINE, file, sizeof file);
    json_object *args = json_object_new_object();
    json_object_object_add(args, "val", json_object_new_int64((int64_t)paddr));
    json_object_object_add(args, "size", json_object_new_int64((int64_t)len));
    json_object_object_add(args, "filename", json_object_new_string(file));
    int rc = qmp_execute(c, "pmemsave", args, NULL, err);
    json_object_put(args);
    if (rc < 0)
        return rc;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : pread(fd, buf, len, 0);
    if (fd >= 0)
        close(fd);
    unlink(file);
    if (n != (ssize_t)len)
        return qp_error_set(err, -EIO, "reading pmemsave file %s: short", file);
    return 0;
}

int qmp_phys_read(qmp_client *c, uint64_t paddr, void *buf, size_t len, struct qp_error *err)
{
    if (len == 0)
        return 0;
    if (c->backend == QMP_MEM_DIRECT)
        return direct_phys(&c->direct, paddr, buf, len, err);
    return pmemsave_phys(c, paddr, buf, len, err);
}

int qmp_phys_read_hmp(qmp_client *c, uint64_t paddr, void *buf, size_t len, struct qp_error *err)
{
    size_t max = len / HMP_CHUNK + 2;
    struct mem_job *jobs = g_new0(struct mem_job, max);
    size_t n = split_jobs(paddr, len, buf, HMP_CHUNK, jobs, max);
    for (size_t i = 0; i < n; i++)
        jobs[i].phys = true;
    struct qmp_regs any_cpu = {0};
    int rc = run_jobs(c, QMP_MEM_HMP, &any_cpu, jobs, n, err);
    if (rc == 0 && jobs_prefix(jobs, n) != len)
        rc = qp_error_set(err, -EFAULT, "xp 0x%llx: %zu bytes are not all RAM",
                          (unsigned long long)paddr, len);
    g_free(jobs);
    return rc;
}

int qmp_ram_ranges(qmp_client *c, struct qmp_ram_range *out, int max, int *n, struct qp_error *err)
{
    *n = 0;
    if (c->backend == QMP_MEM_DIRECT) {
        for (int i = 0; i < c->direct.n_ranges && *n < max; i++)
            out[(*n)++] =
                (struct qmp_ram_range){c->direct.ranges[i].start, c->direct.ranges[i].end + 1};
        return 0;
    }
    json_object *ret = NULL, *base = NULL;
    int rc = qmp_execute(c, "query-memory-size-summary", NULL, &ret, err);
    if (rc < 0)
        return rc;
    uint64_t size = json_object_object_get_ex(ret, "base-memory", &base)
                        ? (uint64_t)json_object_get_int64(base)
                        : 0;
    json_object_put(ret);
    /* QEMU's PC machines put RAM above 3 GiB past 4 GiB; reading the hole would touch devices,
     * so only the part certain to be RAM below it is named. */
    const uint64_t low_max = UINT64_C(0xc0000000), high = UINT64_C(1) << 32;
    if (max > 0 && size)
        out[(*n)++] = (struct qmp_ram_range){0, size < low_max ? size : low_max};
    if (max > 1 && size > low_max)
        out[(*n)++] = (struct qmp_ram_range){high, high + size - low_max};
    return 0;
}

/* ---- Choosing a backend ------------------------------------------------------------------ */

int qmp__pick_backend(qmp_client *c, enum qmp_mem_backend want, struct qp_error *err)
{
    struct qp_error direct_err = {0};
    if (c->direct.map && (want == QMP_MEM_DIRECT || want == QMP_MEM_AUTO)) {
        c->backend = QMP_MEM_DIRECT; /* already mapped */
        return 0;
    }
    if (want == QMP_MEM_MEMSAVE && c->memsave_dir[0]) {
        c->backend = QMP_MEM_MEMSAVE;
        return 0;
    }
    if (want == QMP_MEM_DIRECT || want == QMP_MEM_AUTO) {
        int rc = qmp__direct_setup(c, want == QMP_MEM_DIRECT ? err : &direct_err);
        if (rc == 0 || want == QMP_MEM_DIRECT || c->dead)
            return rc == 0 ? (c->backend = QMP_MEM_DIRECT, 0) : rc;
    }
    if (want == QMP_MEM_HMP) {
        c->backend = QMP_MEM_HMP;
        return 0;
    }
    c->backend = QMP_MEM_MEMSAVE;
    return c->memsave_dir[0] ? 0 : qmp__memsave_setup(c, err);
}

int qmp_mem_set_backend(qmp_client *c, enum qmp_mem_backend b, struct qp_error *err)
{
    enum qmp_mem_backend before = c->backend;
    int rc = qmp__pick_backend(c, b, err);
    if (rc < 0)
        c->backend = before;
    return rc;
}

enum qmp_mem_backend qmp_mem_backend_in_use(const qmp_client *c)
{
    return c->backend;
}

const char *qmp_mem_backend_name(enum qmp_mem_backend b)
{
    static const char *const names[] = {
        [QMP_MEM_AUTO] = "auto",
        [QMP_MEM_DIRECT] = "direct",
        [QMP_MEM_MEMSAVE] = "memsave",
        [QMP_MEM_HMP] = "hmp",
    };
    return (unsigned)b < sizeof names / sizeof names[0] ? names[b] : "?";
}
