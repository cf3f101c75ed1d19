/* Exact instruction counts for qprof --exact, inside qprof-plugin.so.
 *
 * While a qprof asks for them, every translation block gets one inline operation: add the
 * block's instruction count to its own per-vCPU counter (no callback per block, no lock). The
 * counters are the u64 slots of one scoreboard whose per-vCPU entry holds EXACT_SLOTS of them;
 * a block's slot is chosen when it is translated, by (virtual address, instruction count, hash
 * of its code bytes), so the same code translated again (another vCPU, after a flush) counts in
 * the same slot, and different code at one address (two processes' binaries linked at the same
 * address) in different ones. Blocks translated once the table is full all count in slot 0,
 * which qprof reports as unplaced instructions: the total stays exact.
 *
 * Blocks already translated have no counter, and QEMU gives a plugin no way to add one to them:
 * starting (and stopping) therefore resets the plugin (qemu_plugin_reset, which the plugin
 * itself asks for from a vCPU thread: exact_reset_wanted), which flushes QEMU's code cache in an
 * exclusive section and removes every callback; exact_on_reset then puts a fresh table in place
 * (so counting starts at zero, from that moment) before the plugin registers its callbacks
 * again.
 *
 * The listener reads the counters while the vCPUs run: an aligned 64-bit load per slot and
 * vCPU, a count that is at most one block behind. The table's lock keeps it from reading a
 * table a reset frees, and serialises translations on several vCPUs (translation is rare next
 * to execution). */
#include "qprof_exact.h"

#include <errno.h>
#include <glib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define EXACT_SLOTS   (1u << 16) /* 512 KiB of counters per vCPU */
#define OVERFLOW_SLOT 0u

struct block_key {
    uint64_t vaddr, code_hash;
    uint32_t n_insns, n_bytes;
};

/* --exact's counters and the blocks they count, for the whole QEMU process. */
static struct {
    GMutex lock;                          /* the fields below up to want_gen */
    struct qemu_plugin_scoreboard *score; /* NULL: not counting; replaced only by a reset */
    GHashTable *slots;                    /* struct block_key * -> slot */
    struct block_key *keys;               /* by slot */
    uint32_t used;                        /* slots handed out, the overflow slot included */
    uint64_t full;                        /* translations that found no free slot */
    uint64_t since_ns;
    bool want_on;                 /* what the connected qprof asked for */
    _Atomic uint64_t want_gen;    /* bumped by every change of want_on or a new START */
    _Atomic uint64_t applied_gen; /* the want_gen the last reset put in place */
} exact;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static guint key_hash(gconstpointer p)
{
    const struct block_key *k = p;
    return (guint)(k->vaddr ^ k->vaddr >> 32 ^ k->code_hash ^ k->n_insns);
}

static gboolean key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(struct block_key)) == 0;
}

void exact_init(void)
{
    g_mutex_init(&exact.lock);
}

/* Under the lock, in the reset's exclusive section: no block refers to the old table. */
static void table_free(void)
{
    if (exact.score)
        qemu_plugin_scoreboard_free(exact.score);
    if (exact.slots)
        g_hash_table_destroy(exact.slots);
    g_free(exact.keys);
    exact.score = NULL;
    exact.slots = NULL;
    exact.keys = NULL;
    exact.used = 0;
    exact.full = 0;
    exact.since_ns = 0;
}

static void table_new(void)
{
    exact.score = qemu_plugin_scoreboard_new(EXACT_SLOTS * sizeof(uint64_t));
    exact.slots = g_hash_table_new(key_hash, key_equal); /* keys point into exact.keys */
    exact.keys = g_new0(struct block_key, EXACT_SLOTS);
    exact.used = 1; /* the overflow slot */
    exact.since_ns = mono_ns();
}

void exact_on_reset(void)
{
    g_mutex_lock(&exact.lock);
    uint64_t gen = atomic_load(&exact.want_gen);
    table_free();
    if (exact.want_on)
        table_new();
    atomic_store(&exact.applied_gen, gen);
    g_mutex_unlock(&exact.lock);
}

bool exact_reset_wanted(void)
{
    return atomic_load_explicit(&exact.want_gen, memory_order_relaxed) !=
           atomic_load_explicit(&exact.applied_gen, memory_order_relaxed);
}

/* The block's identity: where it was translated, how long, and what code. */
static struct block_key block_key_of(struct qemu_plugin_tb *tb)
{
    struct block_key k = {.vaddr = qemu_plugin_tb_vaddr(tb), .code_hash = QPR_CODE_HASH_INIT};
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint8_t bytes[32]; /* an x86 instruction is at most 15 bytes */
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t got = qemu_plugin_insn_data(insn, bytes, sizeof bytes);
        k.code_hash = qpr_code_hash(k.code_hash, bytes, got);
        k.n_bytes += (uint32_t)got;
    }
    k.n_insns = (uint32_t)n;
    return k;
}

void exact_on_tb_trans(struct qemu_plugin_tb *tb)
{
    if (!exact.score) /* changes only in a reset, while no vCPU translates */
        return;
    struct block_key k = block_key_of(tb);
    g_mutex_lock(&exact.lock);
    uint32_t slot = GPOINTER_TO_UINT(g_hash_table_lookup(exact.slots, &k));
    if (!slot && exact.used < EXACT_SLOTS) {
        slot = exact.used++;
        exact.keys[slot] = k;
        g_hash_table_insert(exact.slots, &exact.keys[slot], GUINT_TO_POINTER(slot));
    } else if (!slot) {
        exact.full++;
    }
    qemu_plugin_u64 counter = {exact.score, (size_t)slot * sizeof(uint64_t)};
    g_mutex_unlock(&exact.lock);
    qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, QEMU_PLUGIN_INLINE_ADD_U64, counter,
                                                      k.n_insns);
}

bool exact_is_request(const void *msg)
{
    const struct qpr_exact_request *r = msg;
    return r->magic == QPR_EXACT_MAGIC;
}

void exact_disconnected(void)
{
    g_mutex_lock(&exact.lock);
    if (exact.want_on) {
        exact.want_on = false;
        atomic_fetch_add(&exact.want_gen, 1);
    }
    g_mutex_unlock(&exact.lock);
}

static uint64_t slot_sum(uint32_t slot)
{
    qemu_plugin_u64 counter = {exact.score, (size_t)slot * sizeof(uint64_t)};
    uint64_t sum = 0;
    for (int i = 0, n = qemu_plugin_num_vcpus(); i < n; i++)
        sum += qemu_plugin_u64_get(counter, (unsigned)i);
    return sum;
}

static int send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Under the lock: the reply's header, and with blocks the counted ones (g_free). */
static struct qpr_exact_reply reply_locked(bool with_blocks, struct qpr_exact_block **blocks)
{
    struct qpr_exact_reply r = {.magic = QPR_EXACT_MAGIC, .version = QPR_VERSION};
    r.counting = exact.want_on && exact.score &&
                 atomic_load(&exact.applied_gen) == atomic_load(&exact.want_gen);
    r.since_ns = exact.score ? exact.since_ns : 0;
    r.table_full_blocks = exact.full;
    *blocks = NULL;
    if (!with_blocks || !exact.score)
        return r;
    r.overflow_insns = slot_sum(OVERFLOW_SLOT);
    *blocks = g_new(struct qpr_exact_block, exact.used);
    for (uint32_t slot = 1; slot < exact.used; slot++) {
        uint64_t insns = slot_sum(slot);
        const struct block_key *k = &exact.keys[slot];
        if (insns)
            (*blocks)[r.n_blocks++] = (struct qpr_exact_block){.vaddr = k->vaddr,
                                                               .code_hash = k->code_hash,
                                                               .insns = insns,
                                                               .n_insns = k->n_insns,
                                                               .n_bytes = k->n_bytes};
    }
    return r;
}

int exact_serve(int fd, const void *msg)
{
    const struct qpr_exact_request *req = msg;
    if (req->version != QPR_VERSION || (req->op != QPR_EXACT_START && req->op != QPR_EXACT_DUMP))
        return -1;
    g_mutex_lock(&exact.lock);
    if (req->op == QPR_EXACT_START) {
        exact.want_on = true;
        atomic_fetch_add(&exact.want_gen, 1);
    }
    struct qpr_exact_block *blocks;
    struct qpr_exact_reply r = reply_locked(req->op == QPR_EXACT_DUMP, &blocks);
    g_mutex_unlock(&exact.lock);
    int rc = send_all(fd, &r, sizeof r);
    if (rc == 0 && r.n_blocks)
        rc = send_all(fd, blocks, r.n_blocks * sizeof *blocks);
    g_free(blocks);
    return rc;
}
