/* What samples read through the gdbstub: every vCPU's registers (`Hg`, `g`, `p`,
 * qThreadExtraInfo) and memory (`m`), each batch pipelined in one write (see gdb.h). */
#include "gdb_internal.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gdb_regset_clear(struct gdb_regset *r)
{
    free(r->raw);
    free(r->valid);
    r->raw = r->valid = NULL;
    r->len = 0;
    r->n_extra = 0;
}

static int hexv(int ch)
{
    return g_ascii_xdigit_value((char)ch);
}

static int decode_g(gdb_client *c, const char *hex, struct gdb_regset *out, struct qp_error *err)
{
    size_t n = strlen(hex) / 2;
    out->raw = calloc(n ? n : 1, 1);
    out->valid = calloc(n ? n : 1, 1);
    out->len = n;
    for (size_t i = 0; i < n; i++) {
        int hi = hexv(hex[2 * i]), lo = hexv(hex[2 * i + 1]);
        if (hex[2 * i] == 'x' && hex[2 * i + 1] == 'x')
            continue;
        if (hi < 0 || lo < 0)
            return qp_error_set(err, -EPROTO, "g reply is not hex at byte %zu", i);
        out->raw[i] = (uint8_t)(hi << 4 | lo);
        out->valid[i] = 1;
    }
    if (n < c->tdesc.g_size) {
        /* QEMU may stop short of the description (registers it cannot read): mark them. */
        out->raw = realloc(out->raw, c->tdesc.g_size);
        out->valid = realloc(out->valid, c->tdesc.g_size);
        memset(out->raw + n, 0, c->tdesc.g_size - n);
        memset(out->valid + n, 0, c->tdesc.g_size - n);
        out->len = c->tdesc.g_size;
    }
    return 0;
}

/* The reply to qThreadExtraInfo: hex of e.g. "CPU#0 [halted ]" (QEMU 7.2; with multiprocess
 * the CPU's type and QOM name come first). Anything else leaves *halted at -1. */
static int read_thread_state(gdb_client *c, int *halted, struct qp_error *err)
{
    char *r = NULL;
    int rc = gdb__next_reply(c, false, &r, NULL, err);
    if (rc < 0)
        return rc;
    size_t n = strlen(r) / 2;
    char *text = g_malloc(n + 1);
    size_t k = gdb_hex_decode(r, n, (uint8_t *)text);
    text[k] = '\0';
    if (k == n && strstr(text, "[halted"))
        *halted = 1;
    else if (k == n && strstr(text, "[running"))
        *halted = 0;
    g_free(text);
    free(r);
    return 0;
}

static bool decode_p(const char *r, uint64_t *value);

void gdb_want_registers(gdb_client *c, const char *const *names)
{
    c->n_want = 0;
    for (int k = 0; names && names[k] && c->n_want < GDB_MAX_EXTRA_REGS; k++) {
        int i = gdb_tdesc_find(&c->tdesc, names[k]);
        if (i >= 0)
            c->want_regnum[c->n_want++] = c->tdesc.regs[i].regnum;
    }
}

/* Whether the `g` reply r holds register regnum whole (decode_g pads a short reply to the
 * description's size and marks the padding invalid). */
static bool in_g_reply(const gdb_client *c, const struct gdb_regset *r, int regnum)
{
    for (int i = 0; i < c->tdesc.n_regs; i++) {
        const struct gdb_reg *g = &c->tdesc.regs[i];
        if (g->regnum != regnum)
            continue;
        size_t w = (size_t)g->bitsize / 8;
        if (w == 0 || g->offset + w > r->len)
            return false;
        for (size_t k = 0; k < w; k++)
            if (!r->valid[g->offset + k])
                return false;
        return true;
    }
    return false;
}

/* After the first full read: the wanted registers the `g` reply held need no `p`. */
static void drop_wants_in_g(gdb_client *c, const struct gdb_regset *r)
{
    int kept = 0;
    for (int k = 0; k < c->n_want; k++)
        if (!in_g_reply(c, r, c->want_regnum[k]))
            c->want_regnum[kept++] = c->want_regnum[k];
    c->n_want = kept;
}

static void read_extra(gdb_client *c, const char *reply, struct gdb_regset *r, int k)
{
    r->extra_regnum[k] = c->want_regnum[k];
    r->extra_ok[k] = decode_p(reply, &r->extra[k]);
    r->n_extra = k + 1;
}

int gdb_read_registers_all(gdb_client *c, struct gdb_regset *out, int max, int *n,
                           struct qp_error *err)
{
    if (!c->stopped)
        return qp_error_set(err, -EBUSY, "reading registers: the guest is running");
    *n = 0;
    int rc = gdb__resync(c, err);
    if (rc < 0)
        return rc;
    int count = c->n_threads < max ? c->n_threads : max;
    GString *s = g_string_new(NULL);
    for (int i = 0; i < count; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "Hg%s", c->threads[i]);
        gdb__add_frame(s, cmd);
        gdb__add_frame(s, "g");
        for (int k = 0; k < c->n_want; k++) {
            snprintf(cmd, sizeof cmd, "p%x", c->want_regnum[k]);
            gdb__add_frame(s, cmd);
        }
        if (c->thread_state) {
            snprintf(cmd, sizeof cmd, "qThreadExtraInfo,%s", c->threads[i]);
            gdb__add_frame(s, cmd);
        }
    }
    rc = gdb__send_packets(c, s, err);
    g_string_free(s, TRUE);
    /* Every reply is read even after a failure, so the stream stays in step. */
    int first = rc;
    for (int i = 0; rc == 0 && i < count; i++) {
        char *hg = NULL, *g = NULL;
        memset(&out[i], 0, sizeof out[i]);
        out[i].thread = i;
        out[i].halted = -1;
        if ((rc = gdb__next_reply(c, false, &hg, NULL, err)) < 0)
            break;
        rc = gdb__next_reply(c, false, &g, NULL, err);
        for (int k = 0; rc == 0 && k < c->n_want; k++) {
            char *p = NULL;
            if ((rc = gdb__next_reply(c, false, &p, NULL, err)) == 0)
                read_extra(c, p, &out[i], k);
            free(p);
        }
        if (rc == 0 && c->thread_state)
            rc = read_thread_state(c, &out[i].halted, err);
        if (rc == 0 && first == 0) {
            char what[64];
            snprintf(what, sizeof what, "Hg%s", c->threads[i]);
            if ((first = gdb__remote_error(hg, what, NULL, err)) == 0 &&
                (first = gdb__remote_error(g, "g", NULL, err)) == 0) {
                first = decode_g(c, g, &out[i], err);
                if (first == 0)
                    (*n)++;
                else
                    gdb_regset_clear(&out[i]);
            }
        }
        free(hg);
        free(g);
    }
    if (rc < 0 || first < 0) {
        for (int i = 0; i < *n; i++)
            gdb_regset_clear(&out[i]);
        *n = 0;
        return rc < 0 ? rc : first;
    }
    if (*n > 0)
        drop_wants_in_g(c, &out[0]);
    return 0;
}

int gdb_reg_get(const gdb_client *c, const struct gdb_regset *r, const char *name, uint64_t *val)
{
    int i = gdb_tdesc_find(&c->tdesc, name);
    if (i < 0)
        return -ENOENT;
    const struct gdb_reg *g = &c->tdesc.regs[i];
    for (int k = 0; k < r->n_extra; k++)
        if (r->extra_regnum[k] == g->regnum && r->extra_ok[k]) {
            *val = r->extra[k];
            return 0;
        }
    size_t w = g->bitsize / 8 < 8 ? g->bitsize / 8 : 8;
    if (g->offset + w > r->len)
        return -ENODATA;
    uint64_t v = 0;
    for (size_t k = 0; k < w; k++) {
        if (!r->valid[g->offset + k])
            return -ENODATA;
        v |= (uint64_t)r->raw[g->offset + k] << (8 * k);
    }
    *val = v;
    return 0;
}

/* ---- Memory ----------------------------------------------------------------------------- */

/* The reply to `p`: the register's bytes, little-endian as x86 sends them. */
static bool decode_p(const char *r, uint64_t *value)
{
    size_t len = strlen(r);
    if (len < 2 || len % 2 || r[0] == 'E' || r[0] == 'x')
        return false;
    uint8_t b[8];
    size_t want = len / 2 < 8 ? len / 2 : 8;
    if (gdb_hex_decode(r, want, b) != want)
        return false;
    uint64_t v = 0;
    for (size_t k = 0; k < want; k++)
        v |= (uint64_t)b[k] << (8 * k);
    *value = v;
    return true;
}

static int mem_read(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n, int regnum,
                    uint64_t *reg_value, bool *reg_ok, struct qp_error *err);

int gdb_mem_read_many(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n,
                      struct qp_error *err)
{
    return mem_read(c, thread, reqs, n, -1, NULL, NULL, err);
}

int gdb_mem_read_then_reg(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n,
                          const char *reg, uint64_t *value, bool *ok, struct qp_error *err)
{
    int i = gdb_tdesc_find(&c->tdesc, reg);
    *ok = false;
    return mem_read(c, thread, reqs, n, i < 0 ? -1 : c->tdesc.regs[i].regnum, value, ok, err);
}

static int mem_read(gdb_client *c, int thread, struct gdb_mem_req *reqs, size_t n, int regnum,
                    uint64_t *reg_value, bool *reg_ok, struct qp_error *err)
{
    if (!c->stopped)
        return qp_error_set(err, -EBUSY, "reading memory: the guest is running");
    if (thread < 0 || thread >= c->n_threads)
        return qp_error_set(err, -EINVAL, "reading memory: no thread %d", thread);
    int rc = gdb__resync(c, err);
    if (rc < 0)
        return rc;
    /* A reply is 2 hex digits a byte plus the framing, within PacketSize. */
    size_t chunk = (c->packet_size - 8) / 2;
    GString *s = g_string_new(NULL);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "Hg%s", c->threads[thread]);
    gdb__add_frame(s, cmd);
    for (size_t i = 0; i < n; i++) {
        reqs[i].got = 0;
        reqs[i].rc = 0;
        reqs[i].remote_error = 0;
        for (size_t off = 0; off < reqs[i].len; off += chunk) {
            size_t len = reqs[i].len - off < chunk ? reqs[i].len - off : chunk;
            snprintf(cmd, sizeof cmd, "m%" PRIx64 ",%zx", reqs[i].vaddr + off, len);
            gdb__add_frame(s, cmd);
        }
    }
    if (regnum >= 0) {
        snprintf(cmd, sizeof cmd, "p%x", regnum);
        gdb__add_frame(s, cmd);
    }
    rc = gdb__send_packets(c, s, err);
    g_string_free(s, TRUE);
    char *r = NULL;
    if (rc == 0 && (rc = gdb__next_reply(c, false, &r, NULL, err)) == 0) {
        rc = gdb__remote_error(r, "Hg", NULL, err);
        free(r);
    }
    int first = rc;
    for (size_t i = 0; i < n && !c->dead; i++) {
        bool stopped = false; /* past the first failing chunk: the rest is not used */
        for (size_t off = 0; off < reqs[i].len; off += chunk) {
            size_t len = reqs[i].len - off < chunk ? reqs[i].len - off : chunk;
            if ((rc = gdb__next_reply(c, false, &r, NULL, err)) < 0)
                return rc;
            int code = 0;
            size_t hexlen = strlen(r);
            if (gdb__remote_error(r, "m", &code, NULL) < 0) {
                if (!stopped && off == 0) {
                    reqs[i].rc = -EIO;
                    reqs[i].remote_error = code;
                }
                stopped = true;
            } else if (!stopped && first == 0) {
                size_t k = gdb_hex_decode(r, len < hexlen / 2 ? len : hexlen / 2,
                                          (uint8_t *)reqs[i].buf + off);
                reqs[i].got += k;
                if (k < len)
                    stopped = true;
            }
            free(r);
        }
    }
    if (regnum >= 0 && !c->dead) {
        if ((rc = gdb__next_reply(c, false, &r, NULL, err)) < 0)
            return rc;
        *reg_ok = first == 0 && decode_p(r, reg_value);
        free(r);
    }
    return first;
}
