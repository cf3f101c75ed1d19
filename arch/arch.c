/* The architectures qprof knows: one line per table. */
#include "arch.h"

#include <stddef.h>

static const struct prof_arch *const arches[] = {&prof_arch_x86_64};

const struct prof_arch *prof_arch_for_elf(uint16_t elf_machine)
{
    for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++)
        if (arches[i]->elf_machine == elf_machine)
            return arches[i];
    return NULL;
}
