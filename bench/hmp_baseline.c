/* hmp_baseline: read guest stacks the way the existing QMP profilers do, for comparison.
 *
 * Per-frame mode (the default), one sample is: `stop`; HMP `info registers`; a frame-pointer
 * walk from RBP with one HMP `x/2gx ADDR` per frame (saved RBP and return address), each
 * request waiting for its reply before the next is sent; `cont`. The walk stops at a zero,
 * misaligned or non-canonical frame pointer, an unreadable frame, a zero return address, a frame
 * pointer that does not grow (one step from the kernel half down into the user half is allowed:
 * that is where a system call's kernel stack continues into the user stack), or 32 frames.
 *
 * With -f FRAMES every sample pays for at least FRAMES frames: when the real chain ends sooner,
 * the last frame read (or RSP) is read again until it has. The demo guest's chains are short
 * (3-5 frames); this measures what a deeper stack costs this method, on real stack memory.
 *
 * Bare mode (-b) is qprof's own transaction with no memory read at all (qmp_sample: `stop` and
 * `info registers -a` written together, then `cont`): the floor of any QMP sampler.
 *
 * Both go through the qmp library (same socket handling as qprof). Guest-paused time comes from
 * QEMU's STOP and RESUME event timestamps. Nothing sleeps inside a sample; with -i the loop waits
 * between samples (fixed interval), without it the loop is closed (next sample at once).
 *
 * Usage: hmp_baseline -q QMP_SOCKET [-d SECONDS] [-i INTERVAL_MS] [-f FRAMES] [-b] [-v]
 * Prints one line of key=value figures on stdout (see print_result); -v prints every walk on
 * stderr. */
#define _GNU_SOURCE
#include "qmp.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_FRAMES 32

struct baseline_opts {
    const char *qmp_path;
    double duration_s;
    double interval_ms; /* 0: closed loop */
    bool bare;
    bool verbose; /* print every walk on stderr */
    int pad_to;   /* -f: frames paid for per sample, at least (0: the real depth only) */
};

/* One sample's figures. */
struct sample {
    uint64_t paused_ns;
    unsigned round_trips;
    int frames;        /* pc plus every return address read */
    int x_reads;       /* `x/2gx` requests */
    uint64_t x_rtt_ns; /* client-side time of all the `x/2gx` round trips */
};

struct results {
    struct sample *samples;
    size_t n, cap;
    unsigned failed;
    double elapsed_s;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool canonical(uint64_t va)
{
    return va < 0x0000800000000000ull || va >= 0xffff800000000000ull;
}

static bool kernel_half(uint64_t va)
{
    return va >= 0xffff800000000000ull;
}

/* Reads the two words at fp with one HMP `x/2gx`. Returns 0, -EFAULT when QEMU could not read
 * them (HMP says so inside its text), another negative code when QEMU could not be asked. */
static int read_frame(qmp_client *c, uint64_t fp, uint64_t words[2], struct qp_error *err)
{
    char cmd[48], *text = NULL;
    snprintf(cmd, sizeof cmd, "x/2gx 0x%" PRIx64, fp);
    int rc = qmp_hmp(c, cmd, -1, &text, err);
    if (rc < 0)
        return rc;
    /* "ffffffff80105f58: 0xffffffff80105f78 0xffffffff80101234" */
    char *colon = strchr(text, ':'), *end = NULL;
    rc = -EFAULT;
    if (colon && strtoull(text, NULL, 16) == fp) {
        words[0] = strtoull(colon + 1, &end, 16);
        if (end != colon + 1) {
            char *second = end;
            words[1] = strtoull(second, &end, 16);
            rc = end != second ? 0 : -EFAULT;
        }
    }
    free(text);
    return rc;
}

/* Whether the walk may go on from frame pointer fp to next. */
static bool next_frame_ok(uint64_t fp, uint64_t next, bool *crossed)
{
    if (next == 0 || (next & 7) || !canonical(next))
        return false;
    if (next > fp)
        return true;
    if (!*crossed && kernel_half(fp) && !kernel_half(next)) {
        *crossed = true; /* the system call's kernel stack continues on the user stack */
        return true;
    }
    return false;
}

/* One timed `x/2gx` of the walk. */
static int timed_read(qmp_client *c, uint64_t fp, uint64_t words[2], struct sample *s,
                      struct qp_error *err)
{
    uint64_t t0 = now_ns();
    int rc = read_frame(c, fp, words, err);
    s->x_rtt_ns += now_ns() - t0;
    s->x_reads++;
    return rc;
}

/* The frame-pointer walk, one `x/2gx` per frame, while the guest is stopped. Returns 0 when the
 * walk ended (see the stop rules above); *last_read is the last frame address that was read. */
static int walk_chain(qmp_client *c, const struct qmp_regs *cpu, struct sample *s, bool verbose,
                      uint64_t *last_read, struct qp_error *err)
{
    uint64_t fp = cpu->rbp;
    bool crossed = false;
    if (fp == 0 || (fp & 7) || !canonical(fp))
        return 0;
    while (s->frames < MAX_FRAMES) {
        uint64_t words[2] = {0};
        int rc = timed_read(c, fp, words, s, err);
        if (rc == -EFAULT)
            return 0; /* unreadable frame: the walk ends here, as a real walker's would */
        if (rc < 0)
            return rc;
        *last_read = fp;
        if (words[1] == 0)
            return 0;
        s->frames++;
        if (verbose)
            fprintf(stderr, " %#" PRIx64 "(fp %#" PRIx64 ")", words[1], words[0]);
        if (!next_frame_ok(fp, words[0], &crossed))
            return 0;
        fp = words[0];
    }
    return 0;
}

/* The walk, then with pad_to > 0 more reads of the last frame read (or of RSP) until pad_to
 * frames were paid for: the cost of a deeper stack than the guest has, on real stack memory. */
static int walk_stack(qmp_client *c, const struct qmp_regs *cpu, struct sample *s, int pad_to,
                      bool verbose, struct qp_error *err)
{
    s->frames = 1; /* the pc */
    if (verbose)
        fprintf(stderr, "CPL%d pc %#" PRIx64 " rbp %#" PRIx64 ":", cpu->cpl, cpu->rip, cpu->rbp);
    uint64_t last_read = cpu->rsp & ~7ull;
    int rc = walk_chain(c, cpu, s, verbose, &last_read, err);
    while (rc == 0 && s->frames < pad_to) {
        uint64_t words[2];
        rc = timed_read(c, last_read, words, s, err);
        rc = rc == -EFAULT ? 0 : rc;
        s->frames++;
    }
    return rc;
}

/* Takes this sample's STOP and RESUME timestamps off the event queue. */
static int paused_from_events(qmp_client *c, uint64_t *paused_ns, struct qp_error *err)
{
    struct qmp_event ev;
    int64_t stop_us = -1, resume_us = -1;
    while (qmp_pop_event(c, &ev) == 1) {
        int64_t us = ev.ts_sec * 1000000 + ev.ts_usec;
        if (strcmp(ev.name, "STOP") == 0)
            stop_us = us;
        else if (strcmp(ev.name, "RESUME") == 0)
            resume_us = us;
        json_object_put(ev.data);
    }
    if (stop_us < 0 || resume_us < stop_us)
        return qp_error_set(err, -EPROTO, "no STOP/RESUME event pair for this sample");
    *paused_ns = (uint64_t)(resume_us - stop_us) * 1000;
    return 0;
}

/* stop; info registers; one x/2gx per frame; cont (cont also after a failure). */
static int sample_per_frame(qmp_client *c, struct sample *s, const struct baseline_opts *o,
                            struct qp_error *err)
{
    uint64_t rt0 = qmp_round_trips(c);
    char *text = NULL;
    struct qmp_regs cpu;
    int n_cpus = 0;
    int rc = qmp_execute(c, "stop", NULL, NULL, err);
    if (rc == 0)
        rc = qmp_hmp(c, "info registers", -1, &text, err);
    if (rc == 0)
        rc = qmp_parse_registers(text, &cpu, 1, &n_cpus, err);
    free(text);
    if (rc == 0)
        rc = walk_stack(c, &cpu, s, o->pad_to, o->verbose, err);
    if (rc == 0 && o->verbose)
        fprintf(stderr, " (%d frames)\n", s->frames);
    int cont_rc = qmp_execute(c, "cont", NULL, NULL, rc < 0 ? NULL : err);
    if (rc == 0)
        rc = cont_rc;
    if (rc == 0)
        rc = paused_from_events(c, &s->paused_ns, err);
    s->round_trips = (unsigned)(qmp_round_trips(c) - rt0);
    return rc;
}

static int sample_bare(qmp_client *c, struct sample *s, struct qp_error *err)
{
    struct qmp_sample_stats st;
    int rc = qmp_sample(c, NULL, NULL, &st, err);
    s->paused_ns = st.paused_ns;
    s->round_trips = st.round_trips;
    return rc;
}

static void sleep_until_ns(uint64_t deadline)
{
    uint64_t now = now_ns();
    if (deadline <= now)
        return;
    uint64_t left = deadline - now;
    struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
    nanosleep(&ts, NULL);
}

static void results_add(struct results *r, const struct sample *s)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 1024;
        r->samples = realloc(r->samples, r->cap * sizeof *r->samples);
        if (!r->samples) {
            perror("realloc");
            exit(1);
        }
    }
    r->samples[r->n++] = *s;
}

static int run(qmp_client *c, const struct baseline_opts *o, struct results *r)
{
    uint64_t interval = (uint64_t)(o->interval_ms * 1e6);
    uint64_t start = now_ns(), end = start + (uint64_t)(o->duration_s * 1e9), next = start;
    int consecutive_failures = 0;
    while (now_ns() < end) {
        struct sample s = {0};
        struct qp_error err = {0};
        int rc = o->bare ? sample_bare(c, &s, &err) : sample_per_frame(c, &s, o, &err);
        if (rc == 0) {
            results_add(r, &s);
            consecutive_failures = 0;
        } else {
            r->failed++;
            fprintf(stderr, "hmp_baseline: sample failed: %s\n", err.msg);
            if (rc == -EPIPE || ++consecutive_failures >= 10)
                return rc;
        }
        next += interval;
        uint64_t now = now_ns();
        if (next < now)
            next = now; /* behind: no burst to catch up */
        sleep_until_ns(next < end ? next : end);
    }
    r->elapsed_s = (now_ns() - start) / 1e9;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static uint64_t percentile(const uint64_t *sorted, size_t n, double p)
{
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    return sorted[rank > 0 ? rank - 1 : 0];
}

/* Least-squares fit paused = fixed + per_frame * frames over all samples: how the paused time
 * grows with depth, from which a deeper stack's cost can be derived. */
static void fit_per_frame(const struct results *r, double *fixed_us, double *per_frame_us)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = (double)r->n;
    for (size_t i = 0; i < r->n; i++) {
        double x = r->samples[i].frames, y = r->samples[i].paused_ns / 1e3;
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    double den = n * sxx - sx * sx;
    *per_frame_us = den > 0 ? (n * sxy - sx * sy) / den : NAN;
    *fixed_us = den > 0 ? (sy - *per_frame_us * sx) / n : NAN;
}

static void print_result(const struct results *r, bool bare)
{
    size_t n = r->n, n_x = 0;
    uint64_t *paused = malloc(n * sizeof *paused), *x_rtt = malloc(n * sizeof *x_rtt);
    double trips = 0, frames = 0, x_reads = 0, paused_sum = 0;
    int max_frames = 0;
    for (size_t i = 0; i < n; i++) {
        const struct sample *s = &r->samples[i];
        paused[i] = s->paused_ns;
        paused_sum += s->paused_ns;
        trips += s->round_trips;
        frames += s->frames;
        x_reads += s->x_reads;
        max_frames = s->frames > max_frames ? s->frames : max_frames;
        if (s->x_reads)
            x_rtt[n_x++] = s->x_rtt_ns / (uint64_t)s->x_reads;
    }
    qsort(paused, n, sizeof *paused, cmp_u64);
    qsort(x_rtt, n_x, sizeof *x_rtt, cmp_u64);
    printf("samples=%zu failed=%u elapsed_s=%.3f rate=%.1f paused_p50_us=%.0f paused_p99_us=%.0f "
           "paused_mean_us=%.0f round_trips=%.2f",
           n, r->failed, r->elapsed_s, n / r->elapsed_s, percentile(paused, n, 50) / 1e3,
           percentile(paused, n, 99) / 1e3, paused_sum / n / 1e3, trips / n);
    if (!bare) {
        double fixed_us, per_frame_us;
        fit_per_frame(r, &fixed_us, &per_frame_us);
        printf(" frames_mean=%.2f frames_max=%d x_reads_mean=%.2f x_rtt_p50_us=%.0f "
               "fit_fixed_us=%.0f fit_per_frame_us=%.0f",
               frames / n, max_frames, x_reads / n, n_x ? percentile(x_rtt, n_x, 50) / 1e3 : NAN,
               fixed_us, per_frame_us);
    }
    printf("\n");
    free(paused);
    free(x_rtt);
}

static int parse_args(int argc, char **argv, struct baseline_opts *o)
{
    int opt;
    char *end;
    while ((opt = getopt(argc, argv, "q:d:i:f:bvh")) != -1) {
        switch (opt) {
        case 'q':
            o->qmp_path = optarg;
            break;
        case 'd':
            o->duration_s = strtod(optarg, &end);
            if (*end || o->duration_s <= 0 || o->duration_s > 3600) {
                fprintf(stderr, "-d: need seconds in (0, 3600], got '%s'\n", optarg);
                return -1;
            }
            break;
        case 'i':
            o->interval_ms = strtod(optarg, &end);
            if (*end || o->interval_ms < 0 || o->interval_ms > 60000) {
                fprintf(stderr, "-i: need milliseconds in [0, 60000], got '%s'\n", optarg);
                return -1;
            }
            break;
        case 'f':
            o->pad_to = (int)strtol(optarg, &end, 10);
            if (*end || o->pad_to < 1 || o->pad_to > MAX_FRAMES) {
                fprintf(stderr, "-f: need frames in [1, %d], got '%s'\n", MAX_FRAMES, optarg);
                return -1;
            }
            break;
        case 'b':
            o->bare = true;
            break;
        case 'v':
            o->verbose = true;
            break;
        default:
            fprintf(stderr,
                    "usage: %s -q QMP_SOCKET [-d SECONDS] [-i INTERVAL_MS] [-f FRAMES] [-b] [-v]\n",
                    argv[0]);
            return -1;
        }
    }
    if (!o->qmp_path) {
        fprintf(stderr, "%s: -q QMP_SOCKET is required\n", argv[0]);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct baseline_opts o = {.duration_s = 5};
    if (parse_args(argc, argv, &o) < 0)
        return 2;
    qmp_client *c = NULL;
    struct qp_error err = {0};
    struct results r = {0};
    int rc = qmp_open(o.qmp_path, NULL, &c, &err);
    if (rc < 0)
        fprintf(stderr, "hmp_baseline: %s\n", err.msg);
    else
        rc = run(c, &o, &r);
    if (rc == 0 && r.n == 0) {
        fprintf(stderr, "hmp_baseline: no sample succeeded\n");
        rc = -EIO;
    }
    if (rc == 0)
        print_result(&r, o.bare);
    qmp_free(c);
    free(r.samples);
    return rc < 0 ? 1 : 0;
}
