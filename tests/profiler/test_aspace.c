/* Address spaces as processes (sampler/aspace.c) over a fake memory: the demo's spin and sys,
 * both linked at 0x401000, loaded in turn under one address-space root, as a kernel that frees
 * a process's page table and gives it to the next process would. No QEMU. */
#include "harness.h"
#include "arch.h"
#include "aspace.h"

#include <fcntl.h>
#include <gelf.h>
#include <glib.h>
#include <string.h>
#include <unistd.h>

/* The executable page of path at vaddr as a loader that copies segments leaves it: the
 * segment's file bytes, zeros after them. */
static void loaded_page(const char *path, uint64_t vaddr, uint8_t page[SYM_PAGE_SIZE])
{
    memset(page, 0, SYM_PAGE_SIZE);
    elf_version(EV_CURRENT);
    int fd = open(path, O_RDONLY);
    REQUIRE(fd >= 0);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    REQUIRE(e);
    size_t n = 0;
    REQUIRE(elf_getphdrnum(e, &n) == 0);
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
            vaddr < ph.p_vaddr || vaddr >= ph.p_vaddr + ph.p_filesz)
            continue;
        size_t len = ph.p_vaddr + ph.p_filesz - vaddr;
        len = len < SYM_PAGE_SIZE ? len : SYM_PAGE_SIZE;
        REQUIRE(pread(fd, page, len, (off_t)(ph.p_offset + vaddr - ph.p_vaddr)) == (ssize_t)len);
        found = true;
    }
    CHECK_MSG(found, "%s has no code at 0x%lx", path, (unsigned long)vaddr);
    elf_end(e);
    close(fd);
}

/* Feeds as the user pc until its page is due for a check; returns the check's address. */
static uint64_t until_check(struct prof_aspace *as, uint64_t pc, size_t *len)
{
    uint64_t addr = 0;
    for (int i = 0; i < 100; i++)
        if (prof_aspace_check_due(as, pc, &addr, len))
            return addr;
    CHECK_MSG(false, "no check due in 100 samples");
    return 0;
}

static void test_root_reuse(void)
{
    /* pc lies in main, which differs between the two; shared_pc in ulib's line_str, which both
     * link at the same address with the same bytes. */
    const uint64_t root = 0x148000, code = 0x401000, pc = code + 0x10, shared_pc = code + 0x160;
    uint8_t spin[SYM_PAGE_SIZE], sys[SYM_PAGE_SIZE];
    loaded_page(QPROF_GUEST_USER_DIR "/spin", code, spin);
    loaded_page(QPROF_GUEST_USER_DIR "/sys", code, sys);
    REQUIRE(memcmp(spin, sys, SYM_PAGE_SIZE) != 0);

    struct qp_error err = {0};
    sym_store *store = sym_store_new();
    REQUIRE(sym_store_add_dir(store, QPROF_GUEST_USER_DIR, &err) >= 0);
    sym_store_index_pages(store);
    out_profile *profile = out_profile_new();
    prof_modules *modules = prof_modules_new(profile);
    prof_model *model = prof_model_new();
    struct prof_aspaces_config cfg = {.store = store,
                                      .user_end = UINT64_C(0x800000000000),
                                      .machine = prof_arch_x86_64.unwind,
                                      .model = model};
    prof_aspaces *a = prof_aspaces_new(&cfg, modules);

    /* spin runs under the root: its page is copied and names the address space. */
    struct prof_aspace *first = prof_aspace_for(a, root);
    uint64_t page = 0;
    CHECK(prof_aspace_page_to_copy(first, pc, &page));
    CHECK_U64(page, code);
    prof_aspace_saw_user(first);
    prof_aspace_add_page(a, first, page, spin);
    CHECK_STR(prof_aspace_label(first), "spin [as 1]");

    /* Still spin: the check reads the same bytes, nothing changes. */
    size_t len = 0;
    uint64_t addr = until_check(first, pc, &len);
    CHECK(addr <= pc && pc < addr + len && addr >= code && addr + len <= code + SYM_PAGE_SIZE);
    CHECK(prof_aspace_verify(a, first, addr, spin + (addr - code), len) == first);
    CHECK_U64(prof_aspaces_counters(a)->aspace_roots_reused, 0);

    /* The root now maps sys's code at the same address. A check in code both binaries share
     * cannot tell (the bytes are the same): the address space stays spin's for now. */
    addr = until_check(first, shared_pc, &len);
    CHECK(prof_aspace_verify(a, first, addr, sys + (addr - code), len) == first);
    CHECK_U64(prof_aspaces_counters(a)->aspace_roots_reused, 0);
    /* The next check in code of sys's own tells: a new address space, named anew. */
    addr = until_check(first, pc, &len);
    struct prof_aspace *second = prof_aspace_verify(a, first, addr, sys + (addr - code), len);
    CHECK(second != first);
    CHECK_U64(prof_aspaces_counters(a)->aspace_roots_reused, 1);
    CHECK(prof_aspace_for(a, root) == second);
    CHECK(prof_aspace_page_to_copy(second, pc, &page));
    prof_aspace_saw_user(second);
    prof_aspace_add_page(a, second, page, sys);
    CHECK_STR(prof_aspace_label(second), "sys [as 2]");
    CHECK_STR(prof_aspace_label(first), "spin [as 1]"); /* retired, still readable */
    const struct prof_map *m = prof_space_find(prof_aspace_space(second), pc);
    CHECK(m && m->known && m->bin.how == PROF_IDENT_CODE_PAGE);
    CHECK_STR(out_profile_module(profile, m->bin.module)->name, "sys");

    /* Both are in the record's notes, with the one root. */
    GString *notes = g_string_new(NULL);
    prof_aspaces_describe(a, notes);
    CHECK_MSG(strstr(notes->str, "address_space=spin [as 1] root=0x148000\n") &&
                  strstr(notes->str, "address_space=sys [as 2] root=0x148000\n"),
              "notes: %s", notes->str);
    /* A check against bytes the wrong length or outside the copied pages changes nothing. */
    CHECK(prof_aspace_verify(a, second, code + SYM_PAGE_SIZE, spin, 64) == second);
    CHECK(prof_aspace_verify(a, second, code + SYM_PAGE_SIZE - 32, spin, 64) == second);
    CHECK_U64(prof_aspaces_counters(a)->aspace_roots_reused, 1);

    g_string_free(notes, TRUE);
    prof_aspaces_free(a);
    prof_model_free(model);
    prof_modules_free(modules);
    out_profile_free(profile);
    sym_store_free(store);
}

/* An unreadable page is never checked (nothing to compare with). */
static void test_unreadable_page_not_checked(void)
{
    out_profile *profile = out_profile_new();
    prof_modules *modules = prof_modules_new(profile);
    prof_model *model = prof_model_new();
    struct prof_aspaces_config cfg = {
        .user_end = UINT64_C(0x800000000000), .machine = prof_arch_x86_64.unwind, .model = model};
    prof_aspaces *a = prof_aspaces_new(&cfg, modules);
    struct prof_aspace *as = prof_aspace_for(a, 0x5000);
    prof_aspace_add_page(a, as, 0x401000, NULL);
    uint64_t addr;
    size_t len;
    for (int i = 0; i < 100; i++)
        CHECK(!prof_aspace_check_due(as, 0x401010, &addr, &len));
    prof_aspaces_free(a);
    prof_model_free(model);
    prof_modules_free(modules);
    out_profile_free(profile);
}

int main(void)
{
    test_root_reuse();
    test_unreadable_page_not_checked();
    return harness_result();
}
