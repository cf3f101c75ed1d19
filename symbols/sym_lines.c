/* Source lines from an ELF's DWARF (.debug_line), through libdw. Opened on the first lookup:
 * a store indexes every ELF under --user-dir, and most of them are never asked for a line. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

#include "sym_internal.h"
#include "qp_file.h"

struct sym_lines {
    int fd;
    Dwarf *dw; /* NULL when the file has no usable DWARF */
};

sym_lines *sym_lines_open(const char *path)
{
    sym_lines *l = g_new0(sym_lines, 1);
    l->fd = qp_file_open_read(path, QP_FILE_MAX_ELF, NULL, NULL);
    if (l->fd >= 0)
        l->dw = dwarf_begin(l->fd, DWARF_C_READ);
    return l;
}

void sym_lines_free(sym_lines *l)
{
    if (!l)
        return;
    if (l->dw)
        dwarf_end(l->dw);
    if (l->fd >= 0)
        close(l->fd);
    g_free(l);
}

int sym_lines_find(sym_lines *l, uint64_t addr, const char **file, int *line)
{
    Dwarf_Die cu;
    if (!l->dw || !dwarf_addrdie(l->dw, addr, &cu))
        return -ENOENT;
    Dwarf_Line *dl = dwarf_getsrc_die(&cu, addr);
    int lineno = 0;
    const char *src = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
    if (!src || dwarf_lineno(dl, &lineno) != 0 || lineno <= 0)
        return -ENOENT;
    *file = src;
    *line = lineno;
    return 0;
}

int sym_lines_inlined(sym_lines *l, uint64_t addr, const char **name)
{
    Dwarf_Die cu, *scopes = NULL;
    if (!l->dw || !dwarf_addrdie(l->dw, addr, &cu))
        return -ENOENT;
    int n = dwarf_getscopes(&cu, addr, &scopes);
    int rc = -ENOENT;
    /* innermost first: the first inlined subroutine is the one whose code addr is */
    for (int i = 0; i < n && rc != 0; i++) {
        Dwarf_Attribute attr;
        const char *s = dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine
                            ? dwarf_formstring(dwarf_attr_integrate(&scopes[i], DW_AT_name, &attr))
                            : NULL;
        if (s) {
            *name = s;
            rc = 0;
        }
    }
    free(scopes);
    return rc;
}
