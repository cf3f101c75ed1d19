/* The model of what runs where (sampler/model.c): address space -> mappings -> binary, asked by
 * pc, forgotten on reboot; and --sysroot's address spaces (sampler/sysroot.c) filling it from
 * the OS adapter's exec mappings, one verified by build-id and one nothing identifies. The code
 * pages' filler is tested in tests/profiler/test_aspace.c, the .text hash's through the session
 * in test_session.c. No QEMU. */
#include "harness.h"
#include "model.h"
#include "modules.h"
#include "sysroot.h"

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <glib.h>
#include <string.h>
#include <unistd.h>

/* ---- The model alone --------------------------------------------------------------------- */

static struct prof_map map(uint64_t start, uint64_t end, enum prof_map_rank rank,
                           enum prof_ident how, uint32_t module)
{
    return (struct prof_map){.start = start,
                             .end = end,
                             .rank = rank,
                             .known = how != PROF_IDENT_NONE,
                             .trusted = how != PROF_IDENT_NONE,
                             .bin = {.how = how, .module = module}};
}

/* A process image named by its .text hash runs one binary in the whole space. */
static void test_whole_space(void)
{
    prof_model *m = prof_model_new();
    prof_space *as = prof_model_space(m, PROF_SPACE_PROCESS, 42, 1);
    CHECK(prof_model_space(m, PROF_SPACE_PROCESS, 42, 1) == as);
    CHECK(prof_space_find(as, 0x401000) == NULL); /* empty until filled */
    struct prof_map whole = map(0, UINT64_MAX, PROF_RANK_SPACE, PROF_IDENT_HASH, 3);
    prof_space_add(as, &whole);
    const struct prof_map *got = prof_space_find(as, 0x401000);
    CHECK(got && got->bin.module == 3 && got->bin.how == PROF_IDENT_HASH);
    CHECK(prof_space_find(as, 0x7ffffffff000) == got);
    CHECK(!prof_space_strict(as) && prof_space_unwind(as) == NULL);
    /* Another generation of the same pid is another address space (an exec). */
    CHECK(prof_model_find(m, PROF_SPACE_PROCESS, 42, 2) == NULL);
    CHECK(prof_model_find(m, PROF_SPACE_ROOT, 42, 1) == NULL); /* other kinds are other keys */
    CHECK(prof_space_find(NULL, 0x401000) == NULL);
    prof_model_free(m);
}

/* Code pages: a copied page answers before the .text range its address space matched, also when
 * the page is no binary's; pcs outside both have nothing. */
static void test_ranks(void)
{
    prof_model *m = prof_model_new();
    prof_space *as = prof_model_space(m, PROF_SPACE_ROOT, 1, 0);
    struct prof_map text = map(0x401000, 0x404000, PROF_RANK_TEXT, PROF_IDENT_CODE_PAGE, 5);
    struct prof_map page = map(0x402000, 0x403000, PROF_RANK_PAGE, PROF_IDENT_CODE_PAGE, 6);
    struct prof_map unknown = map(0x403000, 0x404000, PROF_RANK_PAGE, PROF_IDENT_NONE, 0);
    prof_space_add(as, &page);
    prof_space_add(as, &text);
    prof_space_add(as, &unknown);
    CHECK_INT((int)prof_space_find(as, 0x401ff8)->bin.module, 5); /* not copied: the .text's */
    CHECK_INT((int)prof_space_find(as, 0x402000)->bin.module, 6);
    CHECK(!prof_space_find(as, 0x403010)->known); /* copied, matched nothing */
    CHECK(prof_space_find(as, 0x404000) == NULL);
    CHECK(prof_space_find(as, 0x400fff) == NULL);
    prof_model_free(m);
}

/* The OS's mappings: the first of equal rank holding a pc answers; a strict space counts its
 * trusted mappings by how they were identified; clearing refills it. */
static void test_vmas_and_reset(void)
{
    prof_model *m = prof_model_new();
    prof_space *as = prof_model_space(m, PROF_SPACE_VMAS, 0xffff888001234000, 7);
    struct prof_map a = map(0x1000, 0x3000, PROF_RANK_VMA, PROF_IDENT_BUILD_ID, 1);
    struct prof_map b = map(0x2000, 0x4000, PROF_RANK_VMA, PROF_IDENT_GUEST_COPY, 2);
    struct prof_map c = map(0x5000, 0x6000, PROF_RANK_VMA, PROF_IDENT_NONE, 0);
    prof_space_add(as, &a);
    prof_space_add(as, &b);
    prof_space_add(as, &c);
    prof_space_set_unwind(as, NULL, true);
    CHECK(prof_space_strict(as));
    CHECK_INT((int)prof_space_find(as, 0x2800)->bin.module, 1);
    CHECK_INT((int)prof_space_find(as, 0x3800)->bin.module, 2);
    CHECK_INT(prof_space_count(as, PROF_IDENT_BUILD_ID), 1);
    CHECK_INT(prof_space_count(as, PROF_IDENT_GUEST_COPY), 1);
    CHECK_INT(prof_space_count(as, PROF_IDENT_CODE_PAGE), 0);
    CHECK_INT(prof_space_count(as, PROF_IDENT_NONE), 0); /* untrusted mappings do not count */
    prof_space_clear(as);
    CHECK(prof_space_find(as, 0x2800) == NULL && !prof_space_strict(as));

    /* Forgetting one kind keeps the others; a reboot forgets all. */
    prof_model_space(m, PROF_SPACE_PROCESS, 1, 1);
    prof_model_space(m, PROF_SPACE_ROOT, 1, 0);
    CHECK_INT((int)prof_model_spaces(m), 3);
    prof_model_forget(m, PROF_SPACE_VMAS);
    CHECK_INT((int)prof_model_spaces(m), 2);
    CHECK(prof_model_find(m, PROF_SPACE_VMAS, 0xffff888001234000, 7) == NULL);
    prof_model_reset(m);
    CHECK_INT((int)prof_model_spaces(m), 0);
    CHECK(prof_model_find(m, PROF_SPACE_PROCESS, 1, 1) == NULL);
    prof_model_free(m);
}

/* ---- --sysroot filling it from the adapter's exec mappings ------------------------------- */

static struct prof_exec_mapping vmas[2];

/* fx_user.elf's executable segment where it links, with its build-id, and a library nothing
 * identifies. */
static void load_fx_mappings(void)
{
    elf_version(EV_CURRENT);
    int fd = open(FX_USER, O_RDONLY);
    REQUIRE(fd >= 0);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    REQUIRE(elf);
    size_t n = 0;
    REQUIRE(elf_getphdrnum(elf, &n) == 0);
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
            vmas[0].start = ph.p_vaddr & ~UINT64_C(0xfff);
            vmas[0].end = (ph.p_vaddr + ph.p_memsz + 0xfff) & ~UINT64_C(0xfff);
            vmas[0].pgoff = ph.p_offset >> 12;
        }
    }
    const void *id = NULL;
    ssize_t len = dwelf_elf_gnu_build_id(elf, &id);
    REQUIRE(len > 0 && (size_t)len <= sizeof vmas[0].build_id && vmas[0].end);
    memcpy(vmas[0].build_id, id, (size_t)len);
    vmas[0].build_id_len = (uint8_t)len;
    g_strlcpy(vmas[0].path, "/fx_user.elf", sizeof vmas[0].path);
    elf_end(elf);
    close(fd);
    vmas[1] =
        (struct prof_exec_mapping){.start = 0x7f0000001000, .end = 0x7f0000005000, .pgoff = 1};
    g_strlcpy(vmas[1].path, "/lib/libother.so", sizeof vmas[1].path);
}

static int fos_open(const struct prof_os_config *cfg, void **impl, struct qp_error *err)
{
    (void)cfg, (void)err;
    *impl = NULL;
    return 0;
}

static void fos_free(void *impl)
{
    (void)impl;
}

static int fos_address_space(void *impl, int i, const struct prof_os_mem *mem,
                             struct prof_address_space *out)
{
    (void)impl, (void)i, (void)mem;
    *out = (struct prof_address_space){.id = 0x1000, .generation = 1, .n = 2, .maps = vmas};
    return 0;
}

static const struct prof_os_ops fake_os_ops = {
    .name = "fake",
    .open = fos_open,
    .free = fos_free,
    .address_space = fos_address_space,
};

static void test_sysroot_fills(void)
{
    load_fx_mappings();
    struct qp_error err = {0};
    prof_os *os = NULL;
    struct prof_os_config os_cfg = {.arch = &prof_arch_x86_64};
    REQUIRE(prof_os_open(&fake_os_ops, &os_cfg, &os, &err) == 0);
    out_profile *profile = out_profile_new();
    prof_modules *modules = prof_modules_new(profile);
    prof_model *model = prof_model_new();
    struct prof_sysroot_config cfg = {
        .dir = FX_USER_DIR, .arch = &prof_arch_x86_64, .model = model};
    prof_sysroot *sr = prof_sysroot_new(&cfg, modules);
    struct prof_task task = {.known = true, .state = PROF_TASK_USER, .pid = 7};
    struct prof_os_mem mem = {0};

    prof_sysroot_begin_stop(sr);
    struct user_space *u = prof_sysroot_capture(sr, os, 0, &task, &mem);
    REQUIRE(u != NULL);
    const prof_space *as = prof_sysroot_build(sr, u);
    REQUIRE(as != NULL);
    CHECK(prof_model_find(model, PROF_SPACE_VMAS, 0x1000, 1) == as);
    CHECK(prof_space_strict(as) && prof_space_unwind(as) != NULL);
    const struct prof_map *fx = prof_space_find(as, vmas[0].start + 0x10);
    CHECK(fx && fx->trusted && fx->named && fx->bin.how == PROF_IDENT_BUILD_ID);
    if (fx) {
        const struct out_module *mod = out_profile_module(profile, fx->bin.module);
        CHECK(mod && strstr(mod->path, "fx_user.elf") != NULL);
    }
    CHECK_INT(prof_space_count(as, PROF_IDENT_BUILD_ID), 1);
    const struct prof_map *other = prof_space_find(as, 0x7f0000002000);
    CHECK(other && !other->trusted && !other->known && other->bin.how == PROF_IDENT_NONE);
    if (other) {
        CHECK_STR(other->vma.name, "libother.so");
        CHECK_U64(other->vma.base, 0x7f0000000000);
    }
    CHECK(prof_space_find(as, 0x7f0000005000) == NULL);

    /* The guest rebooted: the sysroot's address spaces leave the model. */
    prof_sysroot_reset(sr);
    CHECK(prof_model_find(model, PROF_SPACE_VMAS, 0x1000, 1) == NULL);
    CHECK_INT((int)prof_model_spaces(model), 0);

    prof_sysroot_free(sr);
    prof_model_free(model);
    prof_modules_free(modules);
    out_profile_free(profile);
    prof_os_free(os);
}

int main(void)
{
    test_whole_space();
    test_ranks();
    test_vmas_and_reset();
    test_sysroot_fills();
    return harness_result();
}
