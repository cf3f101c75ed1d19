#include "elfinfo.h"

#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static Elf *open_elf(const char *path, int *fd)
{
    elf_version(EV_CURRENT);
    *fd = open(path, O_RDONLY);
    if (*fd < 0)
        return NULL;
    Elf *e = elf_begin(*fd, ELF_C_READ, NULL);
    if (!e)
        close(*fd);
    return e;
}

int elf_symbol(const char *path, const char *name, uint64_t *addr, uint64_t *size)
{
    int fd, rc = -1;
    Elf *e = open_elf(path, &fd);
    if (!e)
        return -1;
    Elf_Scn *scn = NULL;
    while (rc != 0 && (scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym))
                continue;
            const char *n = elf_strptr(e, sh.sh_link, sym.st_name);
            if (n && strcmp(n, name) == 0) {
                *addr = sym.st_value;
                *size = sym.st_size;
                rc = 0;
                break;
            }
        }
    }
    elf_end(e);
    close(fd);
    return rc;
}

int elf_section(const char *path, const char *name, uint64_t *addr, uint64_t *size,
                uint64_t *offset)
{
    int fd, rc = -1;
    Elf *e = open_elf(path, &fd);
    if (!e)
        return -1;
    size_t shstrndx;
    elf_getshdrstrndx(e, &shstrndx);
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        const char *n;
        if (gelf_getshdr(scn, &sh) && (n = elf_strptr(e, shstrndx, sh.sh_name)) &&
            strcmp(n, name) == 0) {
            *addr = sh.sh_addr;
            *size = sh.sh_size;
            *offset = sh.sh_offset;
            rc = 0;
            break;
        }
    }
    elf_end(e);
    close(fd);
    return rc;
}

unsigned char *read_whole_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}
