/* Test support: the demo guest's function names (guest_names.h). */
#include "guest_names.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int guest_names_load(const char *kernel, const char *user_dir, struct guest_names *n)
{
    char path[512];
    *n = (struct guest_names){0};
    if (sym_table_open_elf(kernel, &n->kernel, NULL) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/spin", user_dir);
    if (sym_table_open_elf(path, &n->spin, NULL) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/sys", user_dir);
    return sym_table_open_elf(path, &n->sys, NULL) == 0 ? 0 : -1;
}

void guest_names_free(struct guest_names *n)
{
    sym_table_free(n->kernel);
    sym_table_free(n->spin);
    sym_table_free(n->sys);
}

bool guest_is_function_of(const sym_table *t, const char *name)
{
    uint64_t addr;
    return sym_find_by_name(t, name, &addr) == 0;
}

bool folded_has_frame(const char *stack, const char *frame)
{
    size_t n = strlen(frame);
    for (const char *p = strstr(stack, frame); p; p = strstr(p + 1, frame))
        if (p > stack && p[-1] == ';' && (p[n] == ';' || p[n] == '\0'))
            return true;
    return false;
}
