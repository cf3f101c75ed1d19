/* Fuzz target lx_btf: a guest's BTF turned into offsets (lx_btf_offsets, lx_btf_module_offsets),
 * then the task, VMA and module readers run with those offsets over fake kernel memory.
 *
 * Input: a BTF blob, as the guest's kernel would hold it. Seeds: `test_lx_btf seed DIR` writes
 * the synthetic BTF and the three shapes of issue 34 (comm at byte 0xfffffff8 through nested
 * anonymous structs, struct module's state past its end, a 16-wide, 8-deep fan-out of anonymous
 * members).
 *
 * Invariants: no crash, no sanitizer report, every call returns within the per-input timeout
 * (xtask fuzz's -timeout; the member search is bounded); every offset accepted lies, with the
 * bytes the readers read there, inside its struct (computed here in 64 bits, independently of
 * the code under test); what the readers return is NUL-terminated. */
#include "fake_mem.h"
#include "fuzz.h"
#include "lx_module.h"

#define MEM_SIZE (128u << 10) /* the fake kernel memory: a task, a VMA, a module */

static bool fits(uint32_t off, uint32_t width, uint32_t size)
{
    return (uint64_t)off + width <= size;
}

static void check_task_offsets(const struct lx_offsets *o)
{
    FUZZ_ASSERT(fits(o->task_pid, 4, o->task_size) && fits(o->task_tgid, 4, o->task_size));
    FUZZ_ASSERT(fits(o->task_comm, 16, o->task_size) && fits(o->task_mm, 8, o->task_size));
    FUZZ_ASSERT(fits(o->task_stack, 8, o->task_size) && fits(o->task_flags, 4, o->task_size));
    if (!o->has_rb) {
        FUZZ_ASSERT(fits(o->mt_r64_pivot, 8 * o->mt_r64_pivots, 256));
        FUZZ_ASSERT(fits(o->mt_r64_slot, 8 * (o->mt_r64_pivots + 1), 256));
        FUZZ_ASSERT(fits(o->mt_a64_pivot, 8 * o->mt_a64_pivots, 256));
        FUZZ_ASSERT(fits(o->mt_a64_slot, 8 * (o->mt_a64_pivots + 1), 256));
        FUZZ_ASSERT(o->mt_r64_meta < 256 && o->mt_a64_meta < 256);
    }
}

static void check_module_offsets(const struct lx_module_offsets *o)
{
    uint32_t size = o->module_size;
    FUZZ_ASSERT(o->name_len >= 8 && o->name_len <= 256 && fits(o->name, o->name_len, size));
    FUZZ_ASSERT(fits(o->state, 4, size) && fits(o->list, 16, size) && fits(o->kallsyms, 8, size));
    FUZZ_ASSERT(fits(o->core_base, 8, size) && fits(o->core_size, 4, size) &&
                fits(o->core_text_size, 4, size));
    if (o->has_orc)
        FUZZ_ASSERT(fits(o->num_orcs, 4, size) && fits(o->orc_unwind_ip, 8, size) &&
                    fits(o->orc_unwind, 8, size));
    if (o->has_init)
        FUZZ_ASSERT(fits(o->init_base, 8, size) && fits(o->init_size, 4, size) &&
                    fits(o->init_text_size, 4, size));
    FUZZ_ASSERT(fits(o->ks_symtab, 8, 256) && fits(o->ks_strtab, 8, 256) &&
                fits(o->ks_num_symtab, 4, 256));
    if (o->has_typetab)
        FUZZ_ASSERT(fits(o->ks_typetab, 8, 256));
}

/* Fills the fake memory with a byte pattern that makes pointers into it: every 8-byte word is
 * FAKE_BASE plus a small offset, so that readers follow pointers instead of stopping at zero. */
static void fill(struct fake_mem *m)
{
    for (size_t at = 0; at + 8 <= m->size; at += 8) {
        uint64_t v = FAKE_BASE + ((at * 40503u) % (m->size - 256) & ~(uint64_t)7);
        memcpy(m->bytes + at, &v, 8);
    }
}

static int count_vma(void *ctx, const struct lx_vma *v)
{
    FUZZ_ASSERT(memchr(v->name, '\0', sizeof v->name) != NULL);
    ++*(unsigned *)ctx;
    return 0;
}

static void run_task_readers(const struct lx_offsets *o, struct fake_mem *m)
{
    struct lx_reader r = fake_reader(m);
    struct lx_task_info t;
    if (lx_task_read(o, &r, FAKE_BASE + 64, &t, NULL) == 0)
        FUZZ_ASSERT(t.comm[15] == '\0');
    uint64_t task;
    lx_current_task(o, &r, FAKE_BASE, &task, NULL);
    struct lx_vma v;
    if (lx_vma_find(o, &r, FAKE_BASE + 128, FAKE_BASE + 4096, &v, NULL) == 0)
        FUZZ_ASSERT(memchr(v.name, '\0', sizeof v.name) != NULL);
    unsigned n = 0;
    lx_vma_for_each(o, &r, FAKE_BASE + 128, count_vma, &n, NULL);
}

/* One module linked into a list whose head is at the start of memory, its struct at 4 KiB. */
static void run_module_reader(struct lx_module_offsets *o, struct fake_mem *m)
{
    memset(m->bytes, 0, m->size);
    uint64_t head = FAKE_BASE, mod = FAKE_BASE + 4096;
    fake_put_u64(m, head, mod + o->list);
    fake_put_u64(m, head + 8, mod + o->list);
    fake_put_u64(m, mod + o->list, head);
    fake_put_u64(m, mod + o->list + 8, head);
    fake_put_u64(m, mod + o->core_base, FAKE_BASE + 0x10000);
    fake_put_u32(m, mod + o->core_size, 0x1000);
    fake_put_u32(m, mod + o->core_text_size, 0x800);
    fake_put_bytes(m, mod + o->name, "fuzz", 5);
    fake_put_u64(m, mod + o->kallsyms, FAKE_BASE + 0x100);
    o->area_start = FAKE_BASE;
    o->area_end = FAKE_BASE + m->size;
    struct lx_reader r = fake_reader(m);
    lx_modules *mods = NULL;
    if (lx_modules_read(o, &r, head, true, &mods, NULL) == 0) {
        for (size_t i = 0; i < lx_modules_count(mods); i++)
            FUZZ_ASSERT(memchr(lx_modules_at(mods, i)->name, '\0', 64) != NULL);
        lx_modules_free(mods);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    lx_btf *b = NULL;
    if (lx_btf_new(data, size, &b, NULL))
        return 0;
    struct fake_mem m;
    fake_init(&m, MEM_SIZE);
    struct lx_offsets o;
    if (lx_btf_offsets(b, &o, NULL) == 0) {
        check_task_offsets(&o);
        fill(&m);
        run_task_readers(&o, &m);
    }
    struct lx_module_offsets mo;
    if (lx_btf_module_offsets(b, &mo, NULL) == 0) {
        check_module_offsets(&mo);
        run_module_reader(&mo, &m);
    }
    bool signal_bit;
    lx_btf_orc_signal_bit(b, &signal_bit);
    fake_fini(&m);
    lx_btf_free(b);
    return 0;
}
