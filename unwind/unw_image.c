/* An ELF image around .eh_frame bytes read out of guest memory, so that libdw parses them the
 * way it parses a file: section headers place .eh_frame at its guest address (pc-relative
 * pointer encodings depend on it) and .text at the code it describes; one PT_LOAD at the text
 * address makes libdwfl's module bias 0, so guest addresses are used as they are. */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "unw_internal.h"

static const char shstrtab[] = "\0.text\0.eh_frame\0.shstrtab";
enum { NAME_TEXT = 1, NAME_EH_FRAME = 7, NAME_SHSTRTAB = 17 };
enum { SEC_NULL, SEC_TEXT, SEC_EH_FRAME, SEC_SHSTRTAB, SEC_COUNT };

struct image_layout {
    size_t eh_frame_off, shstrtab_off, shdr_off, total;
};

static struct image_layout layout_for(size_t eh_frame_len)
{
    struct image_layout l;
    l.eh_frame_off = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
    l.shstrtab_off = l.eh_frame_off + eh_frame_len;
    l.shdr_off = (l.shstrtab_off + sizeof shstrtab + 7) & ~(size_t)7;
    l.total = l.shdr_off + SEC_COUNT * sizeof(Elf64_Shdr);
    return l;
}

void unw_ehdr_for(Elf64_Ehdr *eh, uint16_t elf_machine)
{
    memset(eh, 0, sizeof *eh);
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = ET_EXEC;
    eh->e_machine = elf_machine;
    eh->e_version = EV_CURRENT;
    eh->e_ehsize = sizeof *eh;
}

static void write_headers(unsigned char *img, const struct image_layout *l, uint16_t elf_machine,
                          uint64_t text_addr, uint64_t text_size)
{
    Elf64_Ehdr eh;
    unw_ehdr_for(&eh, elf_machine);
    eh.e_phoff = sizeof eh;
    eh.e_shoff = l->shdr_off;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 1;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = SEC_COUNT;
    eh.e_shstrndx = SEC_SHSTRTAB;
    memcpy(img, &eh, sizeof eh);

    Elf64_Phdr ph = {.p_type = PT_LOAD,
                     .p_flags = PF_R | PF_X,
                     .p_vaddr = text_addr,
                     .p_paddr = text_addr,
                     .p_memsz = text_size,
                     .p_align = 1};
    memcpy(img + sizeof eh, &ph, sizeof ph);
}

static void write_sections(unsigned char *img, const struct image_layout *l, uint64_t text_addr,
                           uint64_t text_size, uint64_t eh_frame_addr, size_t eh_frame_len)
{
    Elf64_Shdr sh[SEC_COUNT] = {0};
    sh[SEC_TEXT] = (Elf64_Shdr){.sh_name = NAME_TEXT,
                                .sh_type = SHT_NOBITS, /* the code itself is not needed */
                                .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
                                .sh_addr = text_addr,
                                .sh_offset = l->eh_frame_off,
                                .sh_size = text_size,
                                .sh_addralign = 1};
    sh[SEC_EH_FRAME] = (Elf64_Shdr){.sh_name = NAME_EH_FRAME,
                                    .sh_type = SHT_PROGBITS,
                                    .sh_flags = SHF_ALLOC,
                                    .sh_addr = eh_frame_addr,
                                    .sh_offset = l->eh_frame_off,
                                    .sh_size = eh_frame_len,
                                    .sh_addralign = 1};
    sh[SEC_SHSTRTAB] = (Elf64_Shdr){.sh_name = NAME_SHSTRTAB,
                                    .sh_type = SHT_STRTAB,
                                    .sh_offset = l->shstrtab_off,
                                    .sh_size = sizeof shstrtab,
                                    .sh_addralign = 1};
    memcpy(img + l->shdr_off, sh, sizeof sh);
}

int unw_build_eh_frame_image(uint16_t elf_machine, uint64_t text_addr, uint64_t text_size,
                             uint64_t eh_frame_addr, const void *eh_frame, size_t eh_frame_len,
                             void **out, size_t *out_len)
{
    if (eh_frame_len > ((size_t)1 << 31))
        return -EINVAL;
    struct image_layout l = layout_for(eh_frame_len);
    unsigned char *img = g_malloc0(l.total);
    write_headers(img, &l, elf_machine, text_addr, text_size);
    memcpy(img + l.eh_frame_off, eh_frame, eh_frame_len);
    memcpy(img + l.shstrtab_off, shstrtab, sizeof shstrtab);
    write_sections(img, &l, text_addr, text_size, eh_frame_addr, eh_frame_len);
    *out = img;
    *out_len = l.total;
    return 0;
}
