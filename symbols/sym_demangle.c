/* Demangling of C++ (Itanium) and Rust (legacy and v0) names with libiberty. */
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "sym_internal.h"

#ifdef QPROF_HAVE_LIBIBERTY
#include <libiberty/demangle.h>

/* Only names with a mangling prefix are handed over: libiberty's auto mode would otherwise
 * try other schemes on plain C names. Its auto mode recognises Rust legacy names inside the
 * Itanium scheme and drops their "::h<16 hex>" hash (as rustc-demangle's default display
 * does), and v0 "_R" names. */
static bool looks_mangled(const char *name)
{
    return strncmp(name, "_Z", 2) == 0 || strncmp(name, "_R", 2) == 0;
}

char *sym_demangle(const char *name)
{
    if (!looks_mangled(name))
        return NULL;
    char *plain = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
    if (!plain)
        return NULL;
    /* Hand out GLib memory so that callers have one allocator to think about. */
    char *copy = g_strdup(plain);
    free(plain);
    return copy;
}
#else
char *sym_demangle(const char *name)
{
    (void)name;
    return NULL;
}
#endif
