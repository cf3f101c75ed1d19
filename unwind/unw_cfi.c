/* Which pcs the space's CFI covers, and which of them are signal frames: asked by the walk's
 * frame callback and by the frame-pointer walk, which hands back to libdwfl where CFI starts. */
#include <elfutils/libdw.h>
#include <stdlib.h>

#include "unw_internal.h"

static bool cfi_covers(Dwarf_CFI *cfi, Dwarf_Addr addr)
{
    Dwarf_Frame *frame = NULL;
    if (cfi == NULL || dwarf_cfi_addrframe(cfi, addr, &frame) != 0)
        return false;
    free(frame);
    return true;
}

static bool lookup_cfi(unw_space *s, uint64_t pc)
{
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
    if (mod == NULL)
        return false;
    Dwarf_Addr bias;
    Dwarf_CFI *cfi = dwfl_module_eh_cfi(mod, &bias);
    if (cfi_covers(cfi, pc - bias))
        return true;
    cfi = dwfl_module_dwarf_cfi(mod, &bias);
    return cfi_covers(cfi, pc - bias);
}

bool unw_pc_is_signal_frame(unw_space *s, uint64_t pc)
{
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
    Dwarf_Addr bias;
    Dwarf_CFI *cfis[2] = {NULL, NULL};
    if (mod == NULL)
        return false;
    cfis[0] = dwfl_module_eh_cfi(mod, &bias);
    Dwarf_Addr bias2;
    cfis[1] = dwfl_module_dwarf_cfi(mod, &bias2);
    Dwarf_Addr biases[2] = {bias, bias2};
    for (int k = 0; k < 2; k++) {
        Dwarf_Frame *frame = NULL;
        if (cfis[k] == NULL || dwarf_cfi_addrframe(cfis[k], pc - biases[k], &frame) != 0)
            continue;
        bool signal = false;
        dwarf_frame_info(frame, NULL, NULL, &signal);
        free(frame);
        return signal;
    }
    return false;
}

bool unw_pc_has_cfi(unw_space *s, uint64_t pc)
{
    struct unw_cfi_cache_entry *e = &s->cfi_cache[(pc ^ (pc >> 9)) % UNW_CFI_CACHE_SIZE];
    if (e->pc != pc + 1) {
        e->pc = pc + 1;
        e->has_cfi = lookup_cfi(s, pc);
    }
    return e->has_cfi;
}

bool unw_pc_is_canonical(const struct unw_machine *m, uint64_t pc)
{
    /* bits 63 down to va_bits - 1 are all copies of bit va_bits - 1 */
    uint64_t top = pc >> (m->va_bits - 1);
    return top == 0 || top == (UINT64_MAX >> (m->va_bits - 1));
}
