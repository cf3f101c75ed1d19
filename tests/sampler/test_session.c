/* The session (sampler/session.c) over a fake target and a fake OS adapter: no QEMU, no guest.
 * The target serves a few regions of guest memory and stops one x86_64 vCPU in user mode; the
 * adapter names its process and the .text of its binary. Each case checks one piece of the
 * session's logic: someone else's pause, the per-sample budget, identifying a binary by its
 * .text and loading it as a module, and forgetting processes on a reset or a reboot. */
#include "harness.h"
#include "sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glib.h>
#include <string.h>
#include <unistd.h>

/* ---- The fake guest: memory regions, one vCPU --------------------------------------------- */

#define STACK_TOP  UINT64_C(0x7ffffff000)
#define STACK_SIZE (16u << 10)
#define BIG_TEXT   UINT64_C(0x10000000)
#define BIG_SIZE   ((size_t)3 << 20) /* more than one sample's budget (PROF_BUDGET_BYTES) */

struct region {
    uint64_t addr;
    const uint8_t *bytes;
    size_t len;
};

struct fake_guest {
    struct region regions[4];
    int n_regions;
    uint64_t pc;              /* where the vCPU stopped, in user mode */
    bool kernel_mode;         /* ... or in kernel mode (privilege 0) */
    bool halted;              /* idle */
    int vcpu;                 /* its index: a stop hands over this one vCPU, as the plugin does */
    uint64_t sp;              /* its sp; 0: the stack region's base */
    uint64_t as_root;         /* its address-space root */
    uint64_t fp;              /* its frame pointer (rbp) */
    bool running;             /* false: someone else has the guest paused */
    bool was_paused;          /* the next stop finds it paused by someone else */
    uint64_t resets;          /* machine resets the target saw */
    bool reset_while_stopped; /* the next stop sees a reset between its requests */
    unsigned repeats;         /* the next sample calls repeat the last sample (no capture) */
    unsigned stops;           /* sample calls */
    uint64_t round_trips;
    size_t text_bytes_read;  /* bytes read of the image's .text, all samples */
    size_t bytes_this_stop;  /* bytes read during the current stop */
    size_t max_bytes_a_stop; /* the most any stop read */
    uint64_t text_addr;
    size_t text_size;
};

static struct fake_guest guest;

static const struct region *region_at(uint64_t addr)
{
    for (int i = 0; i < guest.n_regions; i++)
        if (addr >= guest.regions[i].addr && addr - guest.regions[i].addr < guest.regions[i].len)
            return &guest.regions[i];
    return NULL;
}

static int fake_open(const struct prof_target_open_opts *o, void **impl, struct qp_error *err)
{
    (void)o, (void)err;
    *impl = &guest;
    return 0;
}

static int fake_sample(void *impl, prof_target *t, prof_target_stopped_fn fn, void *ctx,
                       struct prof_target_stats *stats, struct qp_error *err)
{
    (void)impl;
    guest.stops++;
    if (guest.repeats) { /* as the plugin's vCPU thread that the host did not run */
        guest.repeats--;
        stats->repeated = true;
        return 0;
    }
    if (guest.was_paused) {
        stats->was_paused = true;
        return 0;
    }
    struct prof_vcpu cpu = {.index = guest.vcpu,
                            .user = !guest.kernel_mode,
                            .privilege = guest.kernel_mode ? 0 : 3,
                            .paging64 = true,
                            .halted = guest.halted,
                            .as_root = guest.as_root};
    cpu.pc = guest.pc;
    cpu.sp = guest.sp ? guest.sp : STACK_TOP - STACK_SIZE;
    cpu.regs.r[prof_arch_x86_64.pc_reg] = cpu.pc;
    cpu.regs.r[prof_arch_x86_64.sp_reg] = cpu.sp;
    cpu.regs.r[UNW_RBP] = guest.fp;
    guest.bytes_this_stop = 0;
    int rc = fn(t, &cpu, 1, ctx, err);
    if (guest.bytes_this_stop > guest.max_bytes_a_stop)
        guest.max_bytes_a_stop = guest.bytes_this_stop;
    if (guest.reset_while_stopped) {
        guest.reset_while_stopped = false;
        guest.resets++;
    }
    stats->paused_ns = 1000;
    stats->round_trips = 1;
    return rc;
}

static int fake_read(void *impl, const struct prof_vcpu *cpu, struct prof_mem_req *reqs, size_t n,
                     struct qp_error *err)
{
    (void)impl, (void)cpu, (void)err;
    for (size_t i = 0; i < n; i++) {
        struct prof_mem_req *r = &reqs[i];
        const struct region *g = region_at(r->vaddr);
        guest.round_trips++;
        r->got = 0;
        r->rc = -EFAULT;
        if (!g)
            continue;
        size_t off = r->vaddr - g->addr, avail = g->len - off;
        r->got = r->len < avail ? r->len : avail;
        memcpy(r->buf, g->bytes + off, r->got);
        r->rc = 0;
        guest.bytes_this_stop += r->got;
        if (r->vaddr >= guest.text_addr && r->vaddr < guest.text_addr + guest.text_size)
            guest.text_bytes_read += r->got;
    }
    return 0;
}

static bool fake_running(void *impl)
{
    (void)impl;
    return guest.running;
}

static uint64_t fake_round_trips(const void *impl)
{
    (void)impl;
    return guest.round_trips;
}

static uint64_t fake_resets(const void *impl)
{
    (void)impl;
    return guest.resets;
}

static bool fake_reads_cost_round_trips(const void *impl)
{
    (void)impl;
    return false; /* the byte budget alone, as QMP's direct backend */
}

static const char *fake_text(const void *impl)
{
    (void)impl;
    return "fake";
}

static void fake_free(void *impl)
{
    (void)impl;
}

static const struct prof_target_ops fake_target_ops = {
    .name = "fake",
    .arch = &prof_arch_x86_64,
    .open = fake_open,
    .sample = fake_sample,
    .read = fake_read,
    .running = fake_running,
    .round_trips = fake_round_trips,
    .resets = fake_resets,
    .reads_cost_round_trips = fake_reads_cost_round_trips,
    .version = fake_text,
    .describe = fake_text,
    .free = fake_free,
};

/* ---- The fake OS adapter: one process running the image at text_addr ---------------------- */

struct fake_os {
    bool reboot;             /* the next refresh reports a new boot */
    bool unknown;            /* tells nothing (as --os none) */
    unsigned machine_resets; /* machine_reset calls */
    uint32_t pid;
    const char *comm;
};

static struct fake_os fos;

static int fos_open(const struct prof_os_config *cfg, void **impl, struct qp_error *err)
{
    (void)err; /* nothing here can fail */
    (void)cfg;
    *impl = &fos;
    return 0;
}

static void fos_free(void *impl)
{
    (void)impl;
}

static void fos_refresh(void *impl, const struct prof_vcpu *cpus, int n_cpus,
                        const struct prof_os_mem *mem, struct prof_os_refresh *out)
{
    (void)impl, (void)cpus, (void)n_cpus, (void)mem;
    *out = (struct prof_os_refresh){.published = true, .reset = fos.reboot};
    fos.reboot = false;
}

static void fos_task(void *impl, const struct prof_vcpu *cpu, int i, struct prof_task *out)
{
    (void)impl, (void)cpu, (void)i;
    if (fos.unknown) {
        *out = (struct prof_task){.known = false};
        return;
    }
    *out = (struct prof_task){
        .known = true,
        .state = PROF_TASK_USER,
        .pid = fos.pid,
        .has_image = true,
        .image = {.text_addr = guest.text_addr, .text_size = guest.text_size, .generation = 1}};
    g_strlcpy(out->comm, fos.comm, sizeof out->comm);
}

static size_t fos_kernel_stack_len(void *impl, const struct prof_vcpu *cpu,
                                   const struct prof_task *t, size_t max)
{
    (void)impl, (void)cpu, (void)t;
    return max;
}

static int fos_user_regs(void *impl, const struct prof_vcpu *cpu, const struct prof_task *t,
                         const struct prof_os_mem *mem, struct unw_regs *out)
{
    (void)impl, (void)cpu, (void)t, (void)mem, (void)out;
    return -ENOENT;
}

static void fos_machine_reset(void *impl)
{
    (void)impl;
    fos.machine_resets++;
}

static const struct prof_os_ops fake_os_ops = {
    .name = "fake",
    .open = fos_open,
    .free = fos_free,
    .refresh = fos_refresh,
    .task = fos_task,
    .kernel_stack_len = fos_kernel_stack_len,
    .user_regs = fos_user_regs,
    .machine_reset = fos_machine_reset,
};

/* ---- Setting up a session over them ------------------------------------------------------ */

static uint8_t stack_bytes[STACK_SIZE];
static uint8_t *big_text;

struct fixture {
    prof_target *target;
    prof_os *os;
    prof_session *session;
};

/* The guest runs the image [text, text + len) at text_addr, stopped at its first byte + 16. */
static void guest_runs(uint64_t text_addr, const uint8_t *text, size_t len, const char *comm)
{
    guest = (struct fake_guest){.running = true, .text_addr = text_addr, .text_size = len};
    guest.regions[guest.n_regions++] = (struct region){text_addr, text, len};
    guest.regions[guest.n_regions++] =
        (struct region){STACK_TOP - STACK_SIZE, stack_bytes, STACK_SIZE};
    guest.pc = text_addr + 16;
    fos = (struct fake_os){.pid = 42, .comm = comm};
}

/* kernel: a --kernel ELF and its symbols (consumed), or NULL. */
static void fixture_open_kernel(struct fixture *f, const char *user_dir, const char *kernel,
                                sym_table *kernel_syms, bool by_content)
{
    struct qp_error err = {0};
    const char *dirs[1] = {user_dir};
    *f = (struct fixture){0};
    REQUIRE(prof_target_open(&fake_target_ops, &(struct prof_target_open_opts){0}, &f->target,
                             &err) == 0);
    REQUIRE(prof_os_open(&fake_os_ops, &(struct prof_os_config){.arch = &prof_arch_x86_64}, &f->os,
                         &err) == 0);
    struct prof_session_config cfg = {.user_dirs = dirs,
                                      .n_user_dirs = user_dir ? 1 : 0,
                                      .max_depth = 128,
                                      .cpu_mask = ~UINT64_C(0),
                                      .kernel = kernel,
                                      .kernel_syms = kernel_syms,
                                      .kernel_is_elf = kernel != NULL,
                                      .by_content = by_content};
    int rc = prof_session_new(f->target, f->os, &prof_arch_x86_64, &cfg, &f->session, &err);
    CHECK_MSG(rc == 0, "prof_session_new: %s", err.msg);
    REQUIRE(rc == 0);
}

static void fixture_open(struct fixture *f, const char *user_dir)
{
    fixture_open_kernel(f, user_dir, NULL, NULL, false);
}

static void fixture_close(struct fixture *f)
{
    prof_session_free(f->session);
    prof_os_free(f->os);
    prof_target_free(f->target);
}

static bool sample(struct fixture *f)
{
    struct qp_error err = {0};
    bool taken = false;
    int rc = prof_session_sample(f->session, 0, 1000, &taken, &err);
    CHECK_MSG(rc == 0, "prof_session_sample: %s", err.msg);
    return taken;
}

/* The module of the newest sample's leaf frame, NULL when it has none. */
static const struct out_module *leaf_module(struct fixture *f)
{
    out_profile *p = prof_session_profile(f->session);
    size_t n = out_profile_sample_count(p);
    if (!n)
        return NULL;
    const struct out_stack *st = out_profile_stack(p, out_profile_samples(p)[n - 1].stack);
    if (!st->n_frames)
        return NULL;
    const struct out_frame *leaf = &st->frames[st->n_frames - 1];
    return leaf->module == OUT_NO_MODULE ? NULL : out_profile_module(p, leaf->module);
}

/* A module of that name, NULL when none. */
static const struct out_module *module_named(struct fixture *f, const char *name)
{
    out_profile *p = prof_session_profile(f->session);
    for (size_t i = 0; i < out_profile_module_count(p); i++)
        if (strcmp(out_profile_module(p, (uint32_t)i)->name, name) == 0)
            return out_profile_module(p, (uint32_t)i);
    return NULL;
}

/* ---- The user binary the guest runs: fx_user.elf's .text, at its link address --------------- */

static uint8_t *fx_text;
static uint64_t fx_text_addr;
static size_t fx_text_size;

static void load_fx_text(void)
{
    elf_version(EV_CURRENT);
    int fd = open(FX_USER, O_RDONLY);
    REQUIRE(fd >= 0);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    REQUIRE(e);
    size_t shstrndx;
    REQUIRE(elf_getshdrstrndx(e, &shstrndx) == 0);
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        gelf_getshdr(scn, &sh);
        if (strcmp(elf_strptr(e, shstrndx, sh.sh_name), ".text") != 0)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        REQUIRE(d && d->d_size == sh.sh_size);
        fx_text = g_memdup2(d->d_buf, d->d_size);
        fx_text_addr = sh.sh_addr;
        fx_text_size = sh.sh_size;
    }
    elf_end(e);
    close(fd);
    REQUIRE(fx_text && fx_text_size > 16);
}

/* ---- The cases --------------------------------------------------------------------------- */

/* Someone else paused the guest: nothing is stopped, nothing sampled, the guest left as it is;
 * and a stop that finds it paused (between the check and the stop) samples nothing either. */
static void test_foreign_pause(void)
{
    struct fixture f;
    guest_runs(fx_text_addr, fx_text, fx_text_size, "fx");
    fixture_open(&f, NULL);
    guest.running = false;
    CHECK(!sample(&f));
    CHECK_INT((int)guest.stops, 0);
    guest.running = true;
    guest.was_paused = true;
    CHECK(!sample(&f));
    CHECK_INT((int)guest.stops, 1);
    CHECK_INT((int)out_profile_sample_count(prof_session_profile(f.session)), 0);
    CHECK_U64(prof_session_capture_counters(f.session)->vcpu_samples, 0);
    guest.was_paused = false;
    CHECK(sample(&f));
    CHECK_INT((int)out_profile_sample_count(prof_session_profile(f.session)), 1);
    CHECK_U64(prof_session_capture_counters(f.session)->vcpu_samples, 1);
    fixture_close(&f);
}

/* --user-dir has the binary the guest runs: its .text, copied out of the guest and hashed,
 * names the file, which becomes the module of the process's frames. */
static void test_identify_and_load(void)
{
    struct fixture f;
    guest_runs(fx_text_addr, fx_text, fx_text_size, "fx");
    fixture_open(&f, FX_USER_DIR);
    CHECK(sample(&f));
    const struct out_module *m = leaf_module(&f);
    CHECK(m != NULL);
    if (m) {
        CHECK_STR(m->name, "fx_user.elf");
        CHECK(strstr(m->path, "fx_user.elf") != NULL);
        CHECK_U64(m->text_hash, sym_text_hash(fx_text, fx_text_size));
        CHECK(!m->kernel);
    }
    CHECK_U64(guest.text_bytes_read, fx_text_size);
    /* The same process again: known, its .text not read again. */
    CHECK(sample(&f));
    CHECK_U64(guest.text_bytes_read, fx_text_size);
    CHECK(leaf_module(&f) == m);
    fixture_close(&f);
}

/* A .text that matches no file is still a module, named by the process, without a path. */
static void test_identify_unknown(void)
{
    struct fixture f;
    static uint8_t other[4096];
    memset(other, 0x90, sizeof other);
    guest_runs(UINT64_C(0x500000), other, sizeof other, "stranger");
    fixture_open(&f, FX_USER_DIR);
    CHECK(sample(&f));
    const struct out_module *m = leaf_module(&f);
    CHECK(m != NULL);
    if (m) {
        CHECK_STR(m->name, "stranger");
        CHECK_STR(m->path, "");
        CHECK_U64(m->text_hash, sym_text_hash(other, sizeof other));
    }
    fixture_close(&f);
}

/* A .text larger than one sample's budget is copied over several samples, each within the
 * budget, and identified once the copy is whole; the samples that ran out count as budget
 * hits. */
static void test_budget(void)
{
    struct fixture f;
    if (!big_text) {
        big_text = g_malloc(BIG_SIZE);
        for (size_t i = 0; i < BIG_SIZE; i++)
            big_text[i] = (uint8_t)(i * 7 + (i >> 12));
    }
    guest_runs(BIG_TEXT, big_text, BIG_SIZE, "big");
    fixture_open(&f, NULL);
    CHECK(sample(&f));
    CHECK_U64(prof_session_capture_counters(f.session)->budget_hits, 1);
    CHECK(guest.text_bytes_read < BIG_SIZE);
    CHECK(module_named(&f, "big") == NULL); /* not whole yet */
    CHECK(sample(&f));
    CHECK_U64(guest.text_bytes_read, BIG_SIZE);
    const struct out_module *m = module_named(&f, "big");
    CHECK(m != NULL);
    if (m)
        CHECK_U64(m->text_hash, sym_text_hash(big_text, BIG_SIZE));
    CHECK_MSG(guest.max_bytes_a_stop <= PROF_BUDGET_BYTES, "a stop read %zu bytes",
              guest.max_bytes_a_stop);
    CHECK_U64(prof_session_capture_counters(f.session)->budget_hits, 1); /* the rest fitted */
    CHECK(sample(&f));
    CHECK_U64(prof_session_capture_counters(f.session)->budget_hits, 1);
    fixture_close(&f);
}

/* The machine reset (the target saw it) or the guest rebooted (the adapter saw a new boot):
 * what processes ran before is forgotten, so the image is copied again; the adapter hears of a
 * machine reset before it reads anything. A reset during a stop's requests drops that sample. */
static void test_resets(void)
{
    struct fixture f;
    guest_runs(fx_text_addr, fx_text, fx_text_size, "fx");
    fixture_open(&f, FX_USER_DIR);
    CHECK(sample(&f));
    CHECK_U64(guest.text_bytes_read, fx_text_size);

    guest.resets++;
    CHECK(sample(&f));
    const struct prof_capture_counters *c = prof_session_capture_counters(f.session);
    CHECK_U64(c->machine_resets, 1);
    CHECK_INT((int)fos.machine_resets, 1);
    CHECK_U64(guest.text_bytes_read, 2 * fx_text_size);

    fos.reboot = true;
    CHECK(sample(&f));
    CHECK_U64(c->resets, 1);
    CHECK_U64(c->machine_resets, 1);
    CHECK_U64(guest.text_bytes_read, 3 * fx_text_size);

    size_t before = out_profile_sample_count(prof_session_profile(f.session));
    guest.reset_while_stopped = true;
    CHECK(!sample(&f));
    CHECK_U64(c->reset_straddles, 1);
    CHECK_INT((int)out_profile_sample_count(prof_session_profile(f.session)), (int)before);
    /* The next stop starts afresh: the reset is taken as such, and the sample counts. */
    CHECK(sample(&f));
    CHECK_U64(c->machine_resets, 2);
    CHECK_INT((int)fos.machine_resets, 2);
    /* The binary stays known by its hash across boots: one module for it. */
    const struct out_module *m = leaf_module(&f);
    CHECK(m && strcmp(m->name, "fx_user.elf") == 0);
    fixture_close(&f);
}

/* fx_lowkernel.elf's symbols and the three functions of its call chain kentry -> kmid -> kleaf. */
struct low_kernel {
    sym_table *syms;
    uint64_t kentry, kmid, kleaf;
};

static struct low_kernel open_low_kernel(void)
{
    struct qp_error err = {0};
    struct low_kernel lk = {0};
    REQUIRE(sym_table_open_elf(FX_LOWKERNEL, &lk.syms, &err) == 0);
    REQUIRE(sym_find_by_name(lk.syms, "kentry", &lk.kentry) == 0);
    REQUIRE(sym_find_by_name(lk.syms, "kmid", &lk.kmid) == 0);
    REQUIRE(sym_find_by_name(lk.syms, "kleaf", &lk.kleaf) == 0);
    return lk;
}

/* A capturing target's repeat (prof_target_stats.repeated: the last sample stands for one more
 * interval, its vCPU's thread not run) adds the last stack again and counts it like the first,
 * without capturing anything; a repeat of a sample that was dropped (a reset while
 * it was read) is dropped too. */
static void test_repeats(void)
{
    struct fixture f;
    guest_runs(fx_text_addr, fx_text, fx_text_size, "fx");
    fixture_open(&f, FX_USER_DIR);
    CHECK(sample(&f));
    out_profile *p = prof_session_profile(f.session);
    REQUIRE(out_profile_sample_count(p) == 1);
    uint32_t first = out_profile_samples(p)[0].stack;
    guest.pc += 4; /* a capture now would be another stack */
    guest.repeats = 2;
    CHECK(sample(&f));
    CHECK(sample(&f));
    CHECK_INT((int)out_profile_sample_count(p), 3);
    for (size_t i = 0; i < out_profile_sample_count(p); i++)
        CHECK_U64(out_profile_samples(p)[i].stack, first);
    const struct prof_capture_counters *c = prof_session_capture_counters(f.session);
    CHECK_U64(c->vcpu_samples, 3);
    CHECK_U64(c->repeated, 2);
    CHECK_U64(c->cpu[0].user, 3);
    guest.reset_while_stopped = true;
    CHECK(!sample(&f));
    guest.repeats = 1;
    CHECK(!sample(&f));
    CHECK_INT((int)out_profile_sample_count(p), 3);
    CHECK_U64(c->repeated, 2);
    CHECK(sample(&f)); /* a capture again: a new stack */
    CHECK_INT((int)out_profile_sample_count(p), 4);
    CHECK(out_profile_samples(p)[3].stack != first);
    fixture_close(&f);
}

/* A kernel linked in the low half (fx_lowkernel.elf at 1 MiB, as a teaching OS runs at its
 * physical load address), sampled in kernel mode in kleaf, called from kmid, called from kentry
 * (the outermost frame): privilege says kernel, and the kernel's unwind space is where the ELF's
 * program headers put it, so the whole stack unwinds by its CFI. With the space on the kernel
 * half alone, the leaf "left the space" and the stack had no frame. */
static void test_low_half_kernel(void)
{
    struct low_kernel lk = open_low_kernel();
    sym_table *ksyms = lk.syms;
    uint64_t kentry = lk.kentry, kmid = lk.kmid, kleaf = lk.kleaf;
    CHECK(kentry < UINT64_C(0x200000)); /* the low half indeed */
    struct fixture f;
    guest_runs(fx_text_addr, fx_text, fx_text_size, "fx");
    guest.kernel_mode = true;
    guest.pc = kleaf;
    const uint64_t returns[2] = {kmid + 5, kentry + 5}; /* past each 5-byte call */
    memcpy(stack_bytes, returns, sizeof returns);
    fixture_open_kernel(&f, NULL, FX_LOWKERNEL, ksyms, false);
    CHECK(sample(&f));
    out_profile *p = prof_session_profile(f.session);
    REQUIRE(out_profile_sample_count(p) == 1);
    const struct out_stack *st = out_profile_stack(p, out_profile_samples(p)[0].stack);
    CHECK_INT(st->mode, OUT_MODE_KERNEL);
    CHECK_INT(st->n_frames - st->n_user, 3);
    CHECK_INT(st->kernel_stop, UNW_STOP_OUTERMOST);
    if (st->n_frames == 3) {
        CHECK_U64(st->frames[0].pc, kentry + 5); /* outermost first */
        CHECK_U64(st->frames[1].pc, kmid + 5);
        CHECK_U64(st->frames[2].pc, kleaf);
        CHECK(st->frames[0].kernel && st->frames[2].kernel);
    }
    fixture_close(&f);
    memset(stack_bytes, 0, sizeof returns);
    guest.kernel_mode = false;
}

/* The newest sample's stack. */
static const struct out_stack *newest(struct fixture *f)
{
    out_profile *p = prof_session_profile(f->session);
    size_t n = out_profile_sample_count(p);
    REQUIRE(n > 0);
    return out_profile_stack(p, out_profile_samples(p)[n - 1].stack);
}

/* --os none with a kernel in the low half on a table of its own: a kernel-mode sample in the
 * kernel's table goes to the process whose table the vCPU last ran user code in, its user side
 * marked unknown; not on a stack inside the kernel image (a per-CPU boot stack: scheduler,
 * idle loop), and not after the vCPU was seen idle. */
static void test_kernel_table_process(void)
{
    struct low_kernel lk = open_low_kernel();
    sym_table *ksyms = lk.syms;
    uint64_t kentry = lk.kentry, kmid = lk.kmid, kleaf = lk.kleaf;
    struct fixture f;
    guest_runs(fx_text_addr, fx_text, fx_text_size, "fx");
    fos.unknown = true;
    guest.as_root = 0x111000; /* the process's table */
    fixture_open_kernel(&f, FX_USER_DIR, FX_LOWKERNEL, ksyms, true);
    CHECK(sample(&f));
    char process[OUT_COMM_LEN];
    g_strlcpy(process, newest(&f)->comm, sizeof process);
    CHECK_MSG(strstr(process, "[as 1]") != NULL, "user sample's process: '%s'", process);

    guest.kernel_mode = true; /* a trap: the kernel's own table, its stack mapped high */
    guest.as_root = 0x222000;
    guest.pc = kleaf;
    const uint64_t returns[2] = {kmid + 5, kentry + 5};
    memcpy(stack_bytes, returns, sizeof returns);
    CHECK(sample(&f));
    const struct out_stack *st = newest(&f);
    CHECK_STR(st->comm, process);
    CHECK_INT(st->mode, OUT_MODE_KERNEL);
    CHECK_INT(st->n_frames, 3);
    CHECK_INT(st->n_user, 0);
    CHECK_INT(st->user_stop, UNW_STOP_MEMORY); /* the user side: not known, marked */

    guest.sp = kentry; /* a stack inside the kernel image: no process's */
    CHECK(sample(&f));
    CHECK_STR(newest(&f)->comm, "");
    guest.sp = 0;

    /* the record is the vCPU's, not the stop list's first slot: a capturing target hands over
     * one vCPU per sample, and vCPU 1 never ran this process */
    guest.vcpu = 1;
    CHECK(sample(&f));
    CHECK_STR(newest(&f)->comm, "");
    guest.vcpu = 0;
    CHECK(sample(&f));
    CHECK_STR(newest(&f)->comm, process);

    guest.halted = true; /* idle: what runs next on it was not seen */
    CHECK(sample(&f));
    guest.halted = false;
    CHECK(sample(&f));
    CHECK_STR(newest(&f)->comm, "");
    fixture_close(&f);
    memset(stack_bytes, 0, sizeof returns);
    guest.kernel_mode = false;
    fos.unknown = false;
}

/* The page of fx_userfp.elf's code as a loader leaves it: the executable segment's file bytes,
 * zeros after them; *vaddr is its address. */
static uint8_t *userfp_page(uint64_t *vaddr)
{
    static uint8_t page[4096];
    int fd = open(FX_USERFP, O_RDONLY);
    REQUIRE(fd >= 0);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t n = 0;
    REQUIRE(e && elf_getphdrnum(e, &n) == 0);
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
            continue;
        REQUIRE(ph.p_vaddr % sizeof page == 0 && ph.p_filesz <= sizeof page);
        REQUIRE(pread(fd, page, ph.p_filesz, (off_t)ph.p_offset) == (ssize_t)ph.p_filesz);
        *vaddr = ph.p_vaddr;
    }
    elf_end(e);
    close(fd);
    return page;
}

/* --os none, a program with frame pointers and no unwind tables (fx_userfp.elf): its first
 * frame saved whatever rbp and return address the loader left, and the chain through them led
 * to a made-up caller (a teaching OS showed 0x100000000000 under every user stack). A caller
 * the frame-pointer chain gives whose pc is no code of the address space's binaries ends the
 * walk, marked, instead of becoming a frame. */
static void test_made_up_caller(void)
{
    struct qp_error err = {0};
    sym_table *t = NULL;
    REQUIRE(sym_table_open_elf(FX_USERFP, &t, &err) == 0);
    uint64_t spin = 0, start = 0, page_addr = 0;
    REQUIRE(sym_find_by_name(t, "spin", &spin) == 0);
    REQUIRE(sym_find_by_name(t, "_start", &start) == 0);
    sym_table_free(t);
    const uint8_t *page = userfp_page(&page_addr);
    uint64_t ret = 0; /* past _start's call to spin */
    for (uint64_t a = start; a < page_addr + 4096 - 5 && !ret; a++)
        if (page[a - page_addr] == 0xe8)
            ret = a + 5;
    REQUIRE(ret);
    struct fixture f;
    guest_runs(page_addr, page, 4096, "fp");
    fos.unknown = true;
    guest.as_root = 0x333000;
    guest.pc = spin + 4; /* in its loop, its frame record made: rbp == sp */
    const uint64_t base = STACK_TOP - STACK_SIZE, made_up = UINT64_C(0x100000000000);
    const uint64_t words[6] = {base + 16, ret, base + 32, made_up, 0, 0};
    memcpy(stack_bytes, words, sizeof words);
    guest.fp = base;
    fixture_open_kernel(&f, FX_USERFP_DIR, NULL, NULL, true);
    CHECK(sample(&f));
    CHECK(sample(&f)); /* the first copied the page; this one knows the binary */
    const struct out_stack *st = newest(&f);
    CHECK_INT(st->mode, OUT_MODE_USER);
    CHECK_MSG(strstr(st->comm, "fx_userf") != NULL, "process '%s'", st->comm);
    CHECK_INT(st->n_frames, 2);
    for (int i = 0; i < st->n_frames; i++)
        CHECK(st->frames[i].pc != made_up);
    if (st->n_frames == 2) {
        CHECK_U64(st->frames[0].pc, ret);
        CHECK_U64(st->frames[1].pc, spin + 4);
    }
    CHECK_INT(st->user_stop, UNW_STOP_NO_CFI);
    fixture_close(&f);
    memset(stack_bytes, 0, sizeof words);
    guest.fp = 0;
    fos.unknown = false;
}

int main(void)
{
    load_fx_text();
    test_foreign_pause();
    test_identify_and_load();
    test_identify_unknown();
    test_budget();
    test_resets();
    test_repeats();
    test_low_half_kernel();
    test_kernel_table_process();
    test_made_up_caller();
    g_free(fx_text);
    g_free(big_text);
    return harness_result();
}
