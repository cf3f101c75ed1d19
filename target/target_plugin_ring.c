/* The plugin target, the socket, the rings and their records: connecting, the plugin's hello
 * and its memfds, mapping the rings read-only, and taking the next record (a sample or an idle
 * tick) in vCPU order. */
#include "target_plugin_internal.h"

#include <glib.h>
#include <poll.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int tp_connect_socket(const char *address, struct qp_error *err)
{
    const char *path = g_str_has_prefix(address, "unix:") ? address + 5 : address;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return qp_error_set(err, -ENAMETOOLONG, "--plugin %s: path too long", address);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return qp_error_set(err, -errno, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        return qp_error_set(err, -ECONNREFUSED, "no qprof plugin answers at %s (%s): " INSTALL_HINT,
                            path, strerror(e));
    }
    return fd;
}

/* The plugin's hello and the two memfds beside it (fds[0] the rings', fds[1] the tails'), -1
 * for one not sent. */
int tp_receive_hello(struct target_plugin *t, const char *address, int fds[2], struct qpr_hello *h,
                     double timeout_s, struct qp_error *err)
{
    struct pollfd p = {.fd = t->fd, .events = POLLIN};
    if (poll(&p, 1, (int)(timeout_s * 1000)) <= 0)
        return qp_error_set(err, -ETIMEDOUT,
                            "%s said nothing in %.0f s: not a qprof plugin socket? " INSTALL_HINT,
                            address, timeout_s);
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = h, .iov_len = sizeof *h};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(t->fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
    fds[0] = fds[1] = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n > 0 && c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(2 * sizeof(int)) && fds[0] < 0)
            memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
    if (n != (ssize_t)sizeof *h || h->magic != QPR_MAGIC)
        return qp_error_set(err, -EPROTO,
                            "%s is not a qprof plugin socket (QMP's or the "
                            "gdbstub's?): " INSTALL_HINT,
                            address);
    if (h->version != QPR_VERSION)
        return qp_error_set(err, -EPROTO,
                            "the plugin at %s speaks version %u, this qprof %u: load the "
                            "qprof-plugin.so built with this qprof",
                            address, h->version, QPR_VERSION);
    if (h->status == QPR_BUSY)
        return qp_error_set(err, -EBUSY, "another qprof is sampling through the plugin at %s",
                            address);
    if (h->status == QPR_DENIED)
        return qp_error_set(err, -EACCES,
                            "the plugin at %s serves QEMU's own user only (this qprof runs as uid "
                            "%u; -plugin ...,allow-uid=%u lets it in)",
                            address, (unsigned)geteuid(), (unsigned)geteuid());
    if (t->exact && !(h->flags & QPR_HELLO_EXACT))
        return qp_error_set(err, -ENOTSUP,
                            "the plugin at %s cannot count instructions (--exact): load the "
                            "qprof-plugin.so built with this qprof",
                            address);
    if (fds[0] < 0 || fds[1] < 0 || h->n_vcpus == 0 || h->n_vcpus > QPR_MAX_VCPUS ||
        h->map_size != qpr_map_size(h->n_vcpus))
        return qp_error_set(err, -EPROTO, "the plugin at %s sent an unusable ring", address);
    return 0;
}

/* Maps the rings read-only and the tails read-write (closing both fds), checks the rings'
 * layout and takes their pointers once. */
int tp_map_rings(struct target_plugin *t, const int fds[2], const struct qpr_hello *h,
                 struct qp_error *err)
{
    t->map_size = h->map_size;
    void *map = mmap(NULL, t->map_size, PROT_READ, MAP_SHARED, fds[0], 0);
    int map_errno = errno;
    void *tails = mmap(NULL, sizeof *t->tails, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
    int tails_errno = errno;
    close(fds[0]);
    close(fds[1]);
    t->map = map == MAP_FAILED ? NULL : map;
    t->tails = tails == MAP_FAILED ? NULL : tails;
    if (!t->map || !t->tails)
        return qp_error_set(err, -(t->map ? tails_errno : map_errno),
                            "mapping the plugin's ring: %s",
                            strerror(t->map ? tails_errno : map_errno));
    const struct qpr_header *hd = t->map;
    if (hd->magic != QPR_MAGIC || hd->n_vcpus != h->n_vcpus || hd->slots != QPR_SLOTS ||
        hd->sample_size != sizeof(struct qpr_sample) || hd->ring_size != sizeof(struct qpr_ring) ||
        hd->ring_offset != qpr_map_size(0))
        return qp_error_set(err, -EPROTO,
                            "the plugin's ring has another layout: load the "
                            "qprof-plugin.so built with this qprof");
    t->n_vcpus = h->n_vcpus;
    char target[sizeof hd->target + 1] = {0};
    memcpy(target, hd->target, sizeof hd->target);
    t->arch = prof_arch_by_name(target);
    if (!t->arch)
        return qp_error_set(err, -ENOTSUP, "the plugin runs in a QEMU for %s; qprof knows %s",
                            target, prof_arch_known_names());
    snprintf(t->version, sizeof t->version, "QEMU 9.2+ (plugin API %u)", hd->api_version);
    t->status = hd;
    /* Start from where the plugin set this session's tails: what an earlier qprof left unread
     * is not this run's. */
    for (uint32_t i = 0; i < t->n_vcpus; i++) {
        const struct qpr_ring *r = (const void *)((const char *)t->map + qpr_ring_offset(i));
        t->ring[i] = r;
        t->tail[i] = atomic_load_explicit(&t->tails->v[i].tail, memory_order_relaxed);
        t->lost_at_open[i] = atomic_load_explicit(&r->lost, memory_order_relaxed);
        t->idle_ticks_seen[i] = atomic_load_explicit(&r->idle_ticks, memory_order_relaxed);
    }
    return 0;
}

/* A vCPU that waited in hlt: an idle sample per interval it waited. */
void tp_idle_vcpu(struct target_plugin *t, int index)
{
    struct prof_vcpu *v = &t->vcpu;
    memset(v, 0, sizeof *v);
    v->index = index;
    v->halted = true;
    v->paging64 = true;
    t->cpu.s = NULL;
    v->target_cpu = &t->cpu;
}

/* trigger=timer: idle ticks the timer thread counted since last seen, as pending idle samples. */
bool tp_take_idle_ticks(struct target_plugin *t)
{
    for (uint32_t i = 0; i < t->n_vcpus; i++) {
        uint64_t n = atomic_load_explicit(&t->ring[i]->idle_ticks, memory_order_relaxed);
        if (n != t->idle_ticks_seen[i]) {
            uint64_t ticks = n - t->idle_ticks_seen[i];
            t->idle_ticks_seen[i] = n;
            tp_take_pause_events(t);
            if (t->paused_since_us)
                continue; /* frozen by someone else's `stop`, not idle: no samples */
            t->idle_pending = ticks;
            t->idle_vcpu = (int)i;
            return true;
        }
    }
    return false;
}

/* Takes the next record off the rings (round robin over vCPUs); false when all are empty. */
bool tp_next_record(struct target_plugin *t)
{
    for (uint32_t k = 0; k < t->n_vcpus; k++) {
        uint32_t i = (t->next_ring + k) % t->n_vcpus;
        const struct qpr_ring *r = t->ring[i];
        if (atomic_load_explicit(&r->head, memory_order_acquire) == t->tail[i])
            continue;
        const struct qpr_sample *slot = &r->slots[t->tail[i] % QPR_SLOTS];
        /* the fixed part and the windows' used bytes, not 36 KiB per sample */
        memcpy(&t->cur, slot, offsetof(struct qpr_sample, stack));
        if (t->cur.stack_len > QPR_STACK_MAX)
            t->cur.stack_len = 0;
        if (t->cur.extra_len > QPR_EXTRA_MAX)
            t->cur.extra_len = 0;
        if (t->cur.ustack_len > QPR_STACK_MAX)
            t->cur.ustack_len = 0;
        memcpy(t->cur.stack, slot->stack, t->cur.stack_len);
        memcpy(t->cur.extra, slot->extra, t->cur.extra_len);
        memcpy(t->cur.ustack, slot->ustack, t->cur.ustack_len);
        for (int w = 0; w < QPR_WINDOWS; w++) {
            uint32_t off = t->cur.win_off[w], len = t->cur.win_len[w];
            if (off > QPR_WIN_BYTES || len > QPR_WIN_BYTES - off)
                t->cur.win_len[w] = len = 0;
            if (len)
                memcpy(t->cur.win_bytes + off, slot->win_bytes + off, len);
        }
        t->cur.vcpu = i; /* the ring says which vCPU, not the slot */
        atomic_store_explicit(&t->tails->v[i].tail, ++t->tail[i], memory_order_release);
        t->next_ring = i + 1;
        return true;
    }
    return false;
}

/* The plugin's socket says EOF or an error: QEMU is gone. */
bool tp_peer_gone(struct target_plugin *t)
{
    struct pollfd p = {.fd = t->fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return false;
    char c;
    return (p.revents & (POLLHUP | POLLERR)) || recv(t->fd, &c, 1, MSG_DONTWAIT) <= 0;
}
