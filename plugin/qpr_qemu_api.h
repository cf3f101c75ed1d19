#ifndef QPR_QEMU_API_H
#define QPR_QEMU_API_H
/* QEMU's plugin API as qprof-plugin.so uses it, whichever QEMU's qemu-plugin.h it is built
 * against. The build (plugin/CMakeLists.txt) puts that header's own directory on the include
 * path, because it moved: include/qemu/ up to QEMU 10.0, include/plugins/ after. QEMU loads a
 * plugin whose qemu_plugin_version (the header's QEMU_PLUGIN_VERSION) lies between its minimum
 * and current API versions, so the plugin is built against the header of the QEMU that runs it
 * and this file absorbs the differences, the way QEMU's contrib/plugins follow the header of
 * their own tree:
 *   4 (QEMU 9.2, 10.0)  qemu_plugin_read_memory_vaddr, which the plugin needs: the oldest it takes
 *   5                   write and translate calls the plugin does not use
 *   6                   qemu_plugin_read_register returns bool; the size is the buffer's length
 * Anything newer is refused at configure time (plugin/CMakeLists.txt) and here. */

#include <glib.h>
#include <qemu-plugin.h>

#if QEMU_PLUGIN_VERSION < 4
#error "qprof-plugin.so needs plugin API 4 or later (QEMU 9.2 or later): it reads guest memory"
#endif
#if QEMU_PLUGIN_VERSION > 6
#error "qprof-plugin.so knows plugin API 4 to 6 (QEMU 9.2 to 10.x); this qemu-plugin.h is newer"
#endif

/* The current vCPU's register reg into buf (emptied first): its size in bytes, or -1. */
static inline int qpr_read_register(struct qemu_plugin_register *reg, GByteArray *buf)
{
    g_byte_array_set_size(buf, 0);
#if QEMU_PLUGIN_VERSION >= 6
    return qemu_plugin_read_register(reg, buf) ? (int)buf->len : -1;
#else
    return qemu_plugin_read_register(reg, buf);
#endif
}

#endif
