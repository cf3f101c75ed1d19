/* The plugin's exact instruction counts (qprof --exact), private to qprof-plugin.so: what
 * qprof_plugin.c calls. The protocol is in qprof_ring.h (struct qpr_exact_request). */
#ifndef QPROF_EXACT_H
#define QPROF_EXACT_H

#include "qpr_qemu_api.h"

#include "qprof_ring.h"

#include <stdbool.h>

/* At install. */
void exact_init(void);

/* From the translation callback: gives the block its counter while counting. */
void exact_on_tb_trans(struct qemu_plugin_tb *tb);

/* Whether the connected qprof asked to start or stop counting since the last exact_on_reset:
 * the plugin then resets itself (qemu_plugin_reset, from a vCPU thread: its callbacks, and
 * QEMU's code cache, so that blocks translated before get a counter too, or lose it). */
bool exact_reset_wanted(void);
/* From the plugin's reset callback, while no vCPU runs: puts a fresh table in place (counting
 * from zero, from now) or removes it, as last asked. */
void exact_on_reset(void);

/* From the listener: whether msg is an exact-count request. */
bool exact_is_request(const void *msg);
/* Answers one request on fd; 0, or -1 when the socket failed. */
int exact_serve(int fd, const void *msg);
/* The qprof that asked went away: stop counting (at the next reset). */
void exact_disconnected(void);

#endif
