/* Test support: the demo guest's function names, for checking what qprof's stacks name. */
#ifndef QPROF_TEST_GUEST_NAMES_H
#define QPROF_TEST_GUEST_NAMES_H

#include <stdbool.h>

#include "symbols.h"

struct guest_names {
    sym_table *kernel, *spin, *sys;
};

/* Loads the kernel ELF and user_dir/spin, user_dir/sys. Returns 0, or -1 (the caller REQUIREs). */
int guest_names_load(const char *kernel, const char *user_dir, struct guest_names *n);
void guest_names_free(struct guest_names *n);

/* Whether t has a symbol called name. */
bool guest_is_function_of(const sym_table *t, const char *name);

/* Whether a folded stack ("root;a;b") has frame as one of its frames (not the root). */
bool folded_has_frame(const char *stack, const char *frame);

#endif
