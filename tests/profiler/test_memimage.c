/* The guest's own files copied out of its memory (sampler/memimage.c) over a fake guest: a
 * process whose pages stop part-way through a 64 KiB round of .eh_frame, and a page cache that
 * serves the rest. Issue 44: the page-cache fallback once recomputed its read length after the
 * process's partial read and wrote past the buffer the round had grown (ASan: heap overflow).
 * No QEMU. */
#include "harness.h"
#include "memimage.h"

#include <elf.h>
#include <errno.h>
#include <glib.h>
#include <string.h>

#define BASE     UINT64_C(0x7f1234560000) /* where the file's offset 0 is mapped */
#define HDR_AT   0x1000                   /* .eh_frame_hdr */
#define DYN_AT   0x1100                   /* .dynamic */
#define HASH_AT  0x1200                   /* DT_HASH */
#define SYM_AT   0x1300                   /* .dynsym: null, hot, cold */
#define STR_AT   0x1400                   /* .dynstr */
#define EH_AT    0x4000                   /* .eh_frame */
#define EH_LEN   (200u << 10)             /* whole entries, then the 4-byte terminator */
#define ENTRY    0x100                    /* bytes of each entry, its length word included */
#define IMG_SIZE (EH_AT + EH_LEN + 4 + 0x1000)

static const char dynstr[] = "\0hot\0cold";

/* A file linked at 0 whose one PT_LOAD maps it all (file offset = link-time address). */
static uint8_t *make_image(void)
{
    uint8_t *img = g_malloc0(IMG_SIZE);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_type = ET_DYN;
    eh->e_machine = EM_X86_64;
    eh->e_phoff = sizeof *eh;
    eh->e_phentsize = sizeof(Elf64_Phdr);
    eh->e_phnum = 3;
    Elf64_Phdr *ph = (Elf64_Phdr *)(img + sizeof *eh);
    ph[0] = (Elf64_Phdr){.p_type = PT_LOAD, .p_filesz = IMG_SIZE, .p_memsz = IMG_SIZE};
    ph[1] = (Elf64_Phdr){.p_type = PT_GNU_EH_FRAME, .p_vaddr = HDR_AT, .p_offset = HDR_AT};
    ph[2] = (Elf64_Phdr){
        .p_type = PT_DYNAMIC, .p_vaddr = DYN_AT, .p_filesz = 6 * 16, .p_memsz = 6 * 16};
    /* version 1, eh_frame_ptr pcrel|sdata4, no search table */
    img[HDR_AT] = 1;
    img[HDR_AT + 1] = 0x1b;
    img[HDR_AT + 2] = img[HDR_AT + 3] = 0xff;
    int32_t rel = EH_AT - (HDR_AT + 4);
    memcpy(img + HDR_AT + 4, &rel, 4);
    Elf64_Dyn dyn[] = {{DT_SYMTAB, {SYM_AT}},       {DT_STRTAB, {STR_AT}},
                       {DT_STRSZ, {sizeof dynstr}}, {DT_SYMENT, {sizeof(Elf64_Sym)}},
                       {DT_HASH, {HASH_AT}},        {DT_NULL, {0}}};
    memcpy(img + DYN_AT, dyn, sizeof dyn);
    uint32_t hash[] = {1, 3}; /* nbucket, nchain: 3 symbols */
    memcpy(img + HASH_AT, hash, sizeof hash);
    Elf64_Sym syms[3] = {{0},
                         {.st_name = 1,
                          .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
                          .st_shndx = 1,
                          .st_value = 0x2000,
                          .st_size = 0x10},
                         {.st_name = 5,
                          .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
                          .st_shndx = 1,
                          .st_value = 0x2010,
                          .st_size = 0x10}};
    memcpy(img + SYM_AT, syms, sizeof syms);
    memcpy(img + STR_AT, dynstr, sizeof dynstr);
    /* Entries of ENTRY bytes, each with its own filler so a misplaced page shows. */
    for (uint32_t at = 0; at < EH_LEN; at += ENTRY) {
        uint32_t len = ENTRY - 4;
        memcpy(img + EH_AT + at, &len, 4);
        memset(img + EH_AT + at + 4, (int)(1 + at / ENTRY % 251), len);
    }
    return img; /* the terminator and what follows it are zero */
}

/* The process's pages below present_end (bytes from BASE) are present; the budget, when not 0,
 * is what one stop may read. */
struct fake_guest {
    const uint8_t *img;
    uint64_t present_end;
    size_t budget, budget_left;
    size_t from_cache; /* bytes file_read served */
};

static int proc_read(void *ctx, const struct prof_vcpu *cpu, uint64_t addr, void *buf, size_t len,
                     size_t *got)
{
    struct fake_guest *g = ctx;
    (void)cpu;
    *got = 0;
    /* A target may fill the buffer past what it reports (a page read before the next failed):
     * writing all of it makes a caller that passed a short buffer fail under ASan. */
    memset(buf, 0xa5, len);
    if (g->budget && g->budget_left == 0)
        return -ENOSPC;
    size_t allowed = g->budget && len > g->budget_left ? g->budget_left : len;
    if (addr < BASE || addr - BASE >= g->present_end)
        return -EFAULT;
    uint64_t off = addr - BASE, room = g->present_end - off;
    size_t n = allowed < room ? allowed : (size_t)room;
    memcpy(buf, g->img + off, n);
    *got = n;
    if (g->budget)
        g->budget_left -= allowed;
    return allowed < len && n == allowed ? -ENOSPC : 0;
}

/* The page cache: every page of the file, at most to the end of the page asked for. */
static int cache_read(void *impl, uint64_t file_id, uint64_t offset, void *buf, size_t len,
                      size_t *got, const struct prof_os_mem *mem)
{
    struct fake_guest *g = mem->ctx;
    (void)impl;
    (void)file_id;
    if (offset >= IMG_SIZE)
        return -ENOENT;
    size_t n = 4096 - (offset & 0xfff);
    n = n < len ? n : len;
    n = n < IMG_SIZE - offset ? n : IMG_SIZE - offset;
    memcpy(buf, g->img + offset, n);
    *got = n;
    g->from_cache += n;
    return 0;
}

static int fake_open(const struct prof_os_config *cfg, void **impl, struct qp_error *err)
{
    (void)err; /* nothing here can fail */
    (void)cfg;
    *impl = NULL;
    return 0;
}

static void fake_free(void *impl)
{
    (void)impl;
}

static const struct prof_os_ops fake_os_ops = {
    .name = "fake",
    .open = fake_open,
    .free = fake_free,
    .file_read = cache_read,
};

/* Copies the image until done, one stop at a time; returns the copy (NULL when never done). */
static struct prof_memimg *copy_image(prof_memimgs *t, struct fake_guest *g, prof_os *os)
{
    struct prof_exec_mapping m = {.path = "/usr/bin/prog",
                                  .start = BASE + 0x1000,
                                  .end = BASE + IMG_SIZE,
                                  .head_start = BASE,
                                  .head_end = BASE + 0x1000,
                                  .file_id = 0xffff888001234500};
    struct prof_vcpu cpu = {0};
    struct prof_os_mem mem = {.read = proc_read, .ctx = g};
    for (int stop = 0; stop < 60; stop++) {
        g->budget_left = g->budget;
        struct prof_memimg *img = prof_memimg_progress(t, 1, &m, os, &cpu, &mem);
        if (!img)
            return NULL;
        if (prof_memimg_done(img))
            return img;
    }
    return NULL;
}

static void check_copy(struct prof_memimg *img, const uint8_t *file)
{
    REQUIRE(img);
    size_t len = 0;
    const uint8_t *eh = prof_memimg_eh_frame(img, &len);
    CHECK_INT(len, EH_LEN + 4);
    CHECK(eh && memcmp(eh, file + EH_AT, EH_LEN + 4) == 0);
    const sym_table *syms = prof_memimg_symbols(img);
    REQUIRE(syms);
    struct sym_info si;
    CHECK_INT(sym_lookup(syms, 0x2014, &si), 0);
    CHECK_STR(si.name, "cold");
}

static prof_os *fake_os(void)
{
    prof_os *os = NULL;
    struct prof_os_config cfg = {0};
    REQUIRE(prof_os_open(&fake_os_ops, &cfg, &os, NULL) == 0);
    return os;
}

/* The process's pages end 20 KiB into .eh_frame's second 64 KiB round: the round's first read
 * stops there, and the page cache must fill only the 44 KiB the round's buffer has left. */
static void test_cache_after_partial_round(void)
{
    uint8_t *file = make_image();
    struct fake_guest g = {.img = file, .present_end = EH_AT + (64u << 10) + (20u << 10)};
    prof_os *os = fake_os();
    prof_memimgs *t = prof_memimgs_new(EM_X86_64, false);
    check_copy(copy_image(t, &g, os), file);
    /* The rest of the segment from where the process's pages end (rounds read to their end). */
    CHECK_INT(g.from_cache, IMG_SIZE - g.present_end);
    prof_memimgs_free(t);
    prof_os_free(os);
    g_free(file);
}

/* The same with a budget that cuts reads inside pages, over many stops. */
static void test_cache_after_partial_round_budget(void)
{
    uint8_t *file = make_image();
    struct fake_guest g = {
        .img = file, .present_end = EH_AT + (64u << 10) + (20u << 10), .budget = (24u << 10) + 100};
    prof_os *os = fake_os();
    prof_memimgs *t = prof_memimgs_new(EM_X86_64, false);
    check_copy(copy_image(t, &g, os), file);
    prof_memimgs_free(t);
    prof_os_free(os);
    g_free(file);
}

int main(void)
{
    test_cache_after_partial_round();
    test_cache_after_partial_round_budget();
    return harness_result();
}
