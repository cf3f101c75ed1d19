#ifndef QPR_QEMU_API7_H
#define QPR_QEMU_API7_H
/* QEMU's plugin API 7 (QEMU 11.1 and later 11.x), as far as qprof-plugin.so uses it, declared by
 * qprof itself for the QEMUs whose qemu-plugin.h cannot be had: Debian ships none in any binary
 * package, and the archive may lack the upstream source tarball that holds it (trixie-backports'
 * 11.1.3). plugin/CMakeLists.txt uses this file only then; the real header, when there is one,
 * always wins. Written from QEMU's documented API 7 (include/plugins/qemu-plugin.h upstream),
 * one declaration at a time, and checked against Debian's 11.1.3 binary: how its registration
 * entry points pass their arguments on, and how it calls translation, vCPU, reset and exit
 * callbacks. Each declaration must match QEMU's exactly (a wrong one is an ABI bug that no
 * compiler catches): add to it only from QEMU's own header.
 *
 * What API 7 changed from 6, for the plugin: every callback carries the userdata given when it
 * was registered and none gets the plugin id any more; so the registrations of init, idle,
 * resume and translation callbacks, and qemu_plugin_reset, take a userdata argument. The rest
 * (types, scoreboards, inline operations, memory and register reads) is API 6's. */

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QEMU_PLUGIN_VERSION 7
#define QEMU_PLUGIN_EXPORT  __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;

extern QEMU_PLUGIN_EXPORT int qemu_plugin_version;

typedef struct qemu_info_t {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv);

struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_plugin_scoreboard;
struct qemu_plugin_register;

typedef struct {
    struct qemu_plugin_scoreboard *score;
    size_t offset;
} qemu_plugin_u64;

#define qemu_plugin_scoreboard_u64(score) ((qemu_plugin_u64){(score), 0})

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS,
    QEMU_PLUGIN_CB_R_REGS,
    QEMU_PLUGIN_CB_RW_REGS,
    QEMU_PLUGIN_CB_RW_REGS_PC,
};

enum qemu_plugin_cond {
    QEMU_PLUGIN_COND_NEVER,
    QEMU_PLUGIN_COND_ALWAYS,
    QEMU_PLUGIN_COND_EQ,
    QEMU_PLUGIN_COND_NE,
    QEMU_PLUGIN_COND_LT,
    QEMU_PLUGIN_COND_LE,
    QEMU_PLUGIN_COND_GT,
    QEMU_PLUGIN_COND_GE,
};

enum qemu_plugin_op {
    QEMU_PLUGIN_INLINE_ADD_U64,
    QEMU_PLUGIN_INLINE_STORE_U64,
};

typedef struct {
    struct qemu_plugin_register *handle;
    const char *name;
    const char *feature;
    bool is_readonly;
} qemu_plugin_reg_descriptor;

/* Callbacks: the registration's userdata last, never the plugin id. */
typedef void (*qemu_plugin_udata_cb_t)(void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(struct qemu_plugin_tb *tb, void *userdata);

void qemu_plugin_reset(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_udata_cb_t cb,
                                       void *userdata);
void qemu_plugin_register_vcpu_idle_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_udata_cb_t cb,
                                       void *userdata);
void qemu_plugin_register_vcpu_resume_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_udata_cb_t cb,
                                         void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb,
                                           void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

void qemu_plugin_register_vcpu_tb_exec_cond_cb(struct qemu_plugin_tb *tb,
                                               qemu_plugin_vcpu_udata_cb_t cb,
                                               enum qemu_plugin_cb_flags flags,
                                               enum qemu_plugin_cond cond, qemu_plugin_u64 entry,
                                               uint64_t imm, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(struct qemu_plugin_tb *tb,
                                                       enum qemu_plugin_op op,
                                                       qemu_plugin_u64 entry, uint64_t imm);

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest, size_t len);

int qemu_plugin_num_vcpus(void);
void qemu_plugin_outs(const char *string);

GArray *qemu_plugin_get_registers(void);
bool qemu_plugin_read_register(struct qemu_plugin_register *handle, GByteArray *buf);
bool qemu_plugin_read_memory_vaddr(uint64_t addr, GByteArray *data, size_t len);

struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size);
void qemu_plugin_scoreboard_free(struct qemu_plugin_scoreboard *score);
uint64_t qemu_plugin_u64_get(qemu_plugin_u64 entry, unsigned int vcpu_index);
void qemu_plugin_u64_set(qemu_plugin_u64 entry, unsigned int vcpu_index, uint64_t val);

#endif
