/* The plugin's exact instruction counts (qprof --exact), private to qprof-plugin.so: what
 * qprof_plugin.c calls. The protocol is in qprof_ring.h (struct qpr_exact_request). */
#ifndef QPROF_EXACT_H
#define QPROF_EXACT_H

#include <qemu/qemu-plugin.h>

#include "qprof_ring.h"

#include <stdbool.h>

/* At install. reregister puts back every callback the plugin needs while vCPUs run (a reset,
 * which is how the code cache is flushed, removes them all); vCPU init is not among them. */
void exact_init(qemu_plugin_id_t id, void (*reregister)(qemu_plugin_id_t id));

/* From the translation callback: gives the block its counter while counting. */
void exact_on_tb_trans(struct qemu_plugin_tb *tb);

/* From a vCPU callback (a vCPU thread, which a reset needs): starts or stops counting as the
 * connected qprof asked, by a reset of the plugin (its callbacks, and QEMU's code cache). */
void exact_apply(void);

/* From the listener: whether msg is an exact-count request. */
bool exact_is_request(const void *msg);
/* Answers one request on fd; 0, or -1 when the socket failed. */
int exact_serve(int fd, const void *msg);
/* The qprof that asked went away: stop counting (at the next exact_apply). */
void exact_disconnected(void);

#endif
