/* Test helper: symbols and section headers of an ELF file through libelf. */
#ifndef GUEST_TEST_ELFINFO_H
#define GUEST_TEST_ELFINFO_H

#include <stddef.h>
#include <stdint.h>

/* Address and size of symbol `name`. Returns 0, or -1 if absent. */
int elf_symbol(const char *path, const char *name, uint64_t *addr, uint64_t *size);

/* Address, size and file offset of section `name`. Returns 0, or -1 if absent. */
int elf_section(const char *path, const char *name, uint64_t *addr, uint64_t *size,
                uint64_t *offset);

/* The whole file (malloc'd) and its size, or NULL. */
unsigned char *read_whole_file(const char *path, size_t *size);

#endif
