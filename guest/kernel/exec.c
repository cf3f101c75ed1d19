/* The ELF loader for the demo's static user programs (both kernels build this file); what
 * differs per architecture is the e_machine accepted, where a static PIE goes, and how a page
 * is mapped (proc_map_user_page, kcommon.h). */
#if defined(GUEST_LOWHALF)
#include "riscv64-lowhalf/lowhalf.h"
#elif defined(__riscv)
#include "riscv64/rv.h"
#elif defined(__aarch64__)
#include "aarch64/a64.h"
#else
#include "kernel.h"
#endif

struct elf64_ehdr {
    uint8_t ident[16];
    uint16_t type, machine;
    uint32_t version;
    uint64_t entry, phoff, shoff;
    uint32_t flags;
    uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
};

struct elf64_phdr {
    uint32_t type, flags;
    uint64_t offset, vaddr, paddr, filesz, memsz, align;
};

struct elf64_shdr {
    uint32_t name, type;
    uint64_t flags, addr, offset, size;
    uint32_t link, info;
    uint64_t addralign, entsize;
};

static uint64_t exec_generation;

/* Copies [src, src+filesz) to user va and zero-fills up to memsz, allocating pages as needed. */
static void load_segment(struct proc *p, const uint8_t *src, uint64_t va, uint64_t filesz,
                         uint64_t memsz, uint32_t elf_flags)
{
    uint64_t start = va & ~4095ull, end = (va + memsz + 4095) & ~4095ull;
    for (uint64_t page = start; page < end; page += 4096) {
        uint64_t pa = frame_alloc();
        proc_map_user_page(p, page, pa, elf_flags);
        uint8_t *dst = P2V(pa);
        for (uint64_t off = 0; off < 4096; off++) {
            uint64_t a = page + off;
            if (a >= va && a < va + filesz)
                dst[off] = src[a - va];
        }
    }
}

/* Fills text/eh_frame ranges from the section headers. */
static void find_sections(struct proc *p, const uint8_t *elf, size_t size)
{
    const struct elf64_ehdr *eh = (const void *)elf;
    if (!eh->shoff || eh->shstrndx >= eh->shnum ||
        eh->shoff + eh->shnum * sizeof(struct elf64_shdr) > size)
        return;
    const struct elf64_shdr *sh = (const void *)(elf + eh->shoff);
    const char *names = (const char *)elf + sh[eh->shstrndx].offset;
    for (int i = 0; i < eh->shnum; i++) {
        const char *n = names + sh[i].name;
        if (strcmp(n, ".text") == 0) {
            p->text_addr = sh[i].addr;
            p->text_size = sh[i].size;
        } else if (strcmp(n, ".eh_frame") == 0) {
            p->eh_frame_addr = sh[i].addr;
            p->eh_frame_size = sh[i].size;
        }
    }
}

/* ET_EXEC goes to its link address; ET_DYN (a static PIE, where the arch takes one) to
 * ARCH_ELF_PIE_BASE, with no relocations applied: the demo's PIE program has none (all its
 * code is pc-relative and its data holds no pointers). */
uint64_t elf_load(struct proc *p, const uint8_t *elf, size_t size)
{
    const struct elf64_ehdr *eh = (const void *)elf;
    if (size < sizeof *eh || memcmp(eh->ident, "\177ELF", 4) != 0 || eh->ident[4] != 2 ||
        (eh->type != 2 && !(eh->type == 3 && ARCH_ELF_PIE_BASE)) || eh->machine != ARCH_ELF_MACHINE)
        return 0;
    uint64_t bias = eh->type == 3 ? ARCH_ELF_PIE_BASE : 0;
    for (int i = 0; i < eh->phnum; i++) {
        const struct elf64_phdr *ph = (const void *)(elf + eh->phoff + i * eh->phentsize);
        /* A segment of .bss alone has no bytes in the file, and strip may leave its offset past
         * the end of the file it shortened (the fponly build's user programs). */
        if (ph->type != 1 /* PT_LOAD */ || (ph->filesz && ph->offset + ph->filesz > size))
            continue;
        load_segment(p, elf + ph->offset, ph->vaddr + bias, ph->filesz, ph->memsz, ph->flags);
    }
    p->load_base = bias;
    find_sections(p, elf, size);
    p->text_addr += bias;
    if (p->eh_frame_addr)
        p->eh_frame_addr += bias;
    p->generation = ++exec_generation;
    return eh->entry + bias;
}
