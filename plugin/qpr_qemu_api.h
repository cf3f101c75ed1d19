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
 *   7 (QEMU 11.1)       callbacks get the registration's userdata and no plugin id; the
 *                       registrations (and qemu_plugin_reset) take that userdata. Where no
 *                       header for such a QEMU can be had, the build defines QPR_OWN_API7 and
 *                       qprof's own declarations (qpr_qemu_api7.h) stand in for it.
 * Anything newer is refused at configure time (plugin/CMakeLists.txt) and here. */

#include <glib.h>
#ifdef QPR_OWN_API7
#include "qpr_qemu_api7.h"
#else
#include <qemu-plugin.h>
#endif

#if QEMU_PLUGIN_VERSION < 4
#error "qprof-plugin.so needs plugin API 4 or later (QEMU 9.2 or later): it reads guest memory"
#endif
#if QEMU_PLUGIN_VERSION > 7
#error "qprof-plugin.so knows plugin API 4 to 7 (QEMU 9.2 to 11.x); this qemu-plugin.h is newer"
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

/* The parameters QEMU passes to the plugin's callbacks, named as the plugin uses them: a vCPU
 * callback (init, idle, resume) its idx, a translation callback its tb, the end of a reset and
 * exit nothing the plugin needs. The plugin keeps its state in globals and registers no userdata;
 * the plugin id it needs is the one qemu_plugin_install got. */
#if QEMU_PLUGIN_VERSION >= 7
#define QPR_VCPU_CB_PARAMS(idx)    unsigned int idx, G_GNUC_UNUSED void *qpr_userdata
#define QPR_TB_TRANS_CB_PARAMS(tb) struct qemu_plugin_tb *tb, G_GNUC_UNUSED void *qpr_userdata
#define QPR_DONE_CB_PARAMS         G_GNUC_UNUSED void *qpr_userdata
#define QPR_EXIT_CB_PARAMS         G_GNUC_UNUSED void *qpr_userdata
#else
#define QPR_VCPU_CB_PARAMS(idx)    G_GNUC_UNUSED qemu_plugin_id_t qpr_id, unsigned int idx
#define QPR_TB_TRANS_CB_PARAMS(tb) G_GNUC_UNUSED qemu_plugin_id_t qpr_id, struct qemu_plugin_tb *tb
#define QPR_DONE_CB_PARAMS         G_GNUC_UNUSED qemu_plugin_id_t qpr_id
#define QPR_EXIT_CB_PARAMS         G_GNUC_UNUSED qemu_plugin_id_t qpr_id, G_GNUC_UNUSED void *qpr_userdata
#endif

typedef void (*qpr_vcpu_cb)(QPR_VCPU_CB_PARAMS(idx));
typedef void (*qpr_tb_trans_cb)(QPR_TB_TRANS_CB_PARAMS(tb));
typedef void (*qpr_done_cb)(QPR_DONE_CB_PARAMS);
typedef void (*qpr_exit_cb)(QPR_EXIT_CB_PARAMS);

#if QEMU_PLUGIN_VERSION >= 7
#define QPR_NO_USERDATA , NULL
#else
#define QPR_NO_USERDATA
#endif

static inline void qpr_register_vcpu_init_cb(qemu_plugin_id_t id, qpr_vcpu_cb cb)
{
    qemu_plugin_register_vcpu_init_cb(id, cb QPR_NO_USERDATA);
}

static inline void qpr_register_vcpu_idle_cb(qemu_plugin_id_t id, qpr_vcpu_cb cb)
{
    qemu_plugin_register_vcpu_idle_cb(id, cb QPR_NO_USERDATA);
}

static inline void qpr_register_vcpu_resume_cb(qemu_plugin_id_t id, qpr_vcpu_cb cb)
{
    qemu_plugin_register_vcpu_resume_cb(id, cb QPR_NO_USERDATA);
}

static inline void qpr_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qpr_tb_trans_cb cb)
{
    qemu_plugin_register_vcpu_tb_trans_cb(id, cb QPR_NO_USERDATA);
}

/* atexit took a userdata in every API; its callback lost the id in 7 */
static inline void qpr_register_atexit_cb(qemu_plugin_id_t id, qpr_exit_cb cb)
{
    qemu_plugin_register_atexit_cb(id, cb, NULL);
}

static inline void qpr_reset(qemu_plugin_id_t id, qpr_done_cb cb)
{
    qemu_plugin_reset(id, cb QPR_NO_USERDATA);
}

#endif
