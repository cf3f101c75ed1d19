/* The record file (docs/record-format.md): a header, then typed chunks, each with its length and
 * a CRC32, appended as sampling goes. A run killed mid-write leaves a torn last chunk; the
 * reader stops before it and keeps everything whole before it. */
#include "output.h"
#include "qp_file.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define RECORD_MAGIC       "QPROFREC"
#define RECORD_MAGIC_LEN   8
#define RECORD_VERSION     1
#define RECORD_META_MAX    (1u << 20)
#define RECORD_CHUNK_MAX   (64u << 20) /* a longer length field is corruption, not data */
#define RECORD_CHUNK_EXTRA 12          /* type, length, CRC32 */
#define SAMPLES_PER_CHUNK  8192        /* 192 KiB: a torn batch loses little */
#define SAMPLE_BYTES       24
#define FRAME_BYTES        13
#define WRITE_AT_BYTES     (1u << 20) /* sync writes (without fsync) past this much buffered */

enum chunk_type {
    CHUNK_MODULE = 1,
    CHUNK_STACK = 2,
    CHUNK_SAMPLES = 3,
    CHUNK_NOTES = 4, /* key=value lines about the run; the last one counts */
    CHUNK_EXACT = 5, /* --exact's counts per block */
    CHUNK_CODE = 6,  /* a sampled function's machine code */
};

#define EXACT_BYTES 20 /* u32 module, u64 pc, u64 instructions */

enum { MODULE_KERNEL = 1 };
enum { FRAME_EXACT = 1, FRAME_KERNEL = 2 };

/* ---- Little-endian encoding ---------------------------------------------------------------- */

static void put_u8(GByteArray *b, uint8_t v)
{
    g_byte_array_append(b, &v, 1);
}

static void put_u16(GByteArray *b, uint16_t v)
{
    uint8_t bytes[2] = {v & 0xff, v >> 8};
    g_byte_array_append(b, bytes, 2);
}

static void put_u32(GByteArray *b, uint32_t v)
{
    uint8_t bytes[4];
    for (int i = 0; i < 4; i++)
        bytes[i] = (uint8_t)(v >> (8 * i));
    g_byte_array_append(b, bytes, 4);
}

static void put_u64(GByteArray *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void patch_u32(GByteArray *b, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b->data[at + i] = (uint8_t)(v >> (8 * i));
}

/* A bounds-checked reader over one chunk's payload: any short read marks it bad. */
struct cursor {
    const uint8_t *p;
    size_t left;
    bool bad;
};

static const uint8_t *take(struct cursor *c, size_t n)
{
    if (c->bad || c->left < n) {
        c->bad = true;
        return NULL;
    }
    const uint8_t *at = c->p;
    c->p += n;
    c->left -= n;
    return at;
}

static uint64_t get_le(struct cursor *c, int bytes)
{
    const uint8_t *p = take(c, bytes);
    uint64_t v = 0;
    for (int i = bytes - 1; p && i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A length-prefixed string into out[cap]; too long for out is corruption. */
static void get_string(struct cursor *c, int len_bytes, char *out, size_t cap)
{
    size_t len = get_le(c, len_bytes);
    const uint8_t *p = len < cap ? take(c, len) : NULL;
    if (!p) {
        c->bad = true;
        return;
    }
    memcpy(out, p, len);
    out[len] = '\0';
}

/* ---- Writing -------------------------------------------------------------------------------- */

struct out_recorder {
    int fd;
    char *path;
    GByteArray *buf; /* encoded, not yet written */
    size_t modules_done, stacks_done, samples_done, exact_done, code_done;
    bool write_failed; /* after a failed write nothing more is written: the file has a hole */
    int first_rc;      /* the first error of the recording, for close */
    struct qp_error first_err;
};

/* Fills err and keeps the first error of the recording for close. */
static int record_fail(out_recorder *r, struct qp_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int record_fail(out_recorder *r, struct qp_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    struct qp_error e = {0};
    qp_error_set(&e, code, "%s: %s", r->path, msg);
    g_free(msg);
    if (!r->first_rc) {
        r->first_rc = code;
        r->first_err = e;
    }
    if (err)
        *err = e;
    return code;
}

static int first_error(const out_recorder *r, struct qp_error *err)
{
    if (r->first_rc && err)
        *err = r->first_err;
    return r->first_rc;
}

static size_t chunk_begin(GByteArray *b, enum chunk_type type)
{
    size_t start = b->len;
    put_u32(b, type);
    put_u32(b, 0); /* the length, once known */
    return start;
}

static void chunk_end(GByteArray *b, size_t start)
{
    patch_u32(b, start + 4, (uint32_t)(b->len - start - 8));
    put_u32(b, (uint32_t)crc32(0, b->data + start, (uInt)(b->len - start)));
}

static void encode_module(GByteArray *b, uint32_t index, const struct out_module *m)
{
    size_t start = chunk_begin(b, CHUNK_MODULE);
    put_u32(b, index);
    put_u64(b, m->text_hash);
    put_u64(b, m->base);
    put_u8(b, m->kernel ? MODULE_KERNEL : 0);
    size_t name_len = strnlen(m->name, sizeof m->name - 1);
    size_t path_len = strnlen(m->path, sizeof m->path - 1);
    put_u16(b, (uint16_t)name_len);
    g_byte_array_append(b, (const guint8 *)m->name, (guint)name_len);
    put_u16(b, (uint16_t)path_len);
    g_byte_array_append(b, (const guint8 *)m->path, (guint)path_len);
    chunk_end(b, start);
}

static void encode_stack(GByteArray *b, uint32_t id, const struct out_stack *s)
{
    size_t start = chunk_begin(b, CHUNK_STACK);
    put_u32(b, id);
    put_u32(b, s->pid);
    put_u8(b, s->mode);
    put_u8(b, s->user_stop);
    put_u8(b, s->kernel_stop);
    put_u16(b, s->n_frames);
    put_u16(b, s->n_user);
    size_t comm_len = strnlen(s->comm, sizeof s->comm - 1);
    put_u8(b, (uint8_t)comm_len);
    g_byte_array_append(b, (const guint8 *)s->comm, (guint)comm_len);
    for (int i = 0; i < s->n_frames; i++) {
        const struct out_frame *f = &s->frames[i];
        put_u64(b, f->pc);
        put_u32(b, f->module);
        put_u8(b, (f->exact ? FRAME_EXACT : 0) | (f->kernel ? FRAME_KERNEL : 0));
    }
    chunk_end(b, start);
}

static void encode_samples(GByteArray *b, uint64_t first, const struct out_record *r, size_t n)
{
    size_t start = chunk_begin(b, CHUNK_SAMPLES);
    put_u64(b, first);
    put_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        put_u64(b, r[i].time_ns);
        put_u64(b, r[i].weight_ns);
        put_u32(b, r[i].cpu);
        put_u32(b, r[i].stack);
    }
    chunk_end(b, start);
}

static void encode_exact(GByteArray *b, const struct out_exact *e, size_t n)
{
    size_t start = chunk_begin(b, CHUNK_EXACT);
    put_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        put_u32(b, e[i].module);
        put_u64(b, e[i].pc);
        put_u64(b, e[i].insns);
    }
    chunk_end(b, start);
}

static void encode_code(GByteArray *b, const struct out_code *c)
{
    size_t start = chunk_begin(b, CHUNK_CODE);
    size_t name_len = strnlen(c->name, 255);
    put_u32(b, c->module);
    put_u16(b, c->machine);
    put_u64(b, c->addr);
    put_u8(b, (uint8_t)name_len);
    g_byte_array_append(b, (const guint8 *)c->name, (guint)name_len);
    put_u32(b, c->len);
    g_byte_array_append(b, c->bytes, c->len);
    chunk_end(b, start);
}

static int write_all(int fd, const uint8_t *data, size_t len)
{
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int write_buffer(out_recorder *r, struct qp_error *err)
{
    if (r->write_failed)
        return first_error(r, err);
    int rc = write_all(r->fd, r->buf->data, r->buf->len);
    if (rc) {
        /* a file with a hole in it reads back only up to the hole: stop writing */
        r->write_failed = true;
        return record_fail(r, err, rc, "writing %u bytes: %s", r->buf->len, strerror(-rc));
    }
    g_byte_array_set_size(r->buf, 0);
    return 0;
}

int out_recorder_open(const char *path, const char *meta, out_recorder **out, struct qp_error *err)
{
    size_t meta_len = meta ? strlen(meta) : 0;
    if (meta_len > RECORD_META_MAX)
        return qp_error_set(err, -EINVAL, "%s: record meta text of %zu bytes (at most %u)", path,
                            meta_len, RECORD_META_MAX);
    /* O_NOFOLLOW: a symlink planted at the path (to someone's file) is not written through */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno == ELOOP)
        return qp_error_set(err, -ELOOP, "cannot write %s: it is a symbolic link (refused)", path);
    if (fd < 0)
        return qp_error_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
    out_recorder *r = g_new0(out_recorder, 1);
    r->fd = fd;
    r->path = g_strdup(path);
    r->buf = g_byte_array_new();
    g_byte_array_append(r->buf, (const guint8 *)RECORD_MAGIC, RECORD_MAGIC_LEN);
    put_u32(r->buf, RECORD_VERSION);
    put_u32(r->buf, (uint32_t)meta_len);
    g_byte_array_append(r->buf, (const guint8 *)(meta ? meta : ""), (guint)meta_len);
    put_u32(r->buf, (uint32_t)crc32(0, r->buf->data, r->buf->len));
    int rc = out_recorder_flush(r, err);
    if (rc) {
        out_recorder_close(r, NULL, NULL);
        unlink(path);
        return rc;
    }
    *out = r;
    return 0;
}

/* --exact's counts and kept code, both added once, at the end of a run: what came since the
 * last sync. */
static void sync_extras(out_recorder *r, const out_profile *p)
{
    const struct out_exact *e = out_profile_exact(p);
    while (r->exact_done < out_profile_exact_count(p)) {
        size_t n = MIN(out_profile_exact_count(p) - r->exact_done, SAMPLES_PER_CHUNK);
        encode_exact(r->buf, e + r->exact_done, n);
        r->exact_done += n;
    }
    for (; r->code_done < out_profile_code_count(p); r->code_done++)
        encode_code(r->buf, out_profile_code(p, r->code_done));
}

int out_recorder_sync(out_recorder *r, const out_profile *p, struct qp_error *err)
{
    if (r->write_failed)
        return first_error(r, err);
    size_t n_modules = out_profile_module_count(p), n_stacks = out_profile_stack_count(p);
    size_t n_samples = out_profile_sample_count(p);
    if (n_modules < r->modules_done || n_stacks < r->stacks_done || n_samples < r->samples_done)
        return record_fail(r, err, -EINVAL,
                           "the profile has fewer samples than already recorded (%zu < %zu): "
                           "a recorded profile must only grow",
                           n_samples, r->samples_done);
    for (; r->modules_done < n_modules; r->modules_done++)
        encode_module(r->buf, (uint32_t)r->modules_done,
                      out_profile_module(p, (uint32_t)r->modules_done));
    for (; r->stacks_done < n_stacks; r->stacks_done++)
        encode_stack(r->buf, (uint32_t)r->stacks_done,
                     out_profile_stack(p, (uint32_t)r->stacks_done));
    const struct out_record *records = out_profile_samples(p);
    while (r->samples_done < n_samples) {
        size_t n = MIN(n_samples - r->samples_done, SAMPLES_PER_CHUNK);
        encode_samples(r->buf, r->samples_done, records + r->samples_done, n);
        r->samples_done += n;
    }
    sync_extras(r, p);
    return r->buf->len >= WRITE_AT_BYTES ? write_buffer(r, err) : 0;
}

void out_recorder_notes(out_recorder *r, const char *notes)
{
    size_t len = strnlen(notes, RECORD_META_MAX);
    size_t start = chunk_begin(r->buf, CHUNK_NOTES);
    g_byte_array_append(r->buf, (const guint8 *)notes, (guint)len);
    chunk_end(r->buf, start);
}

int out_recorder_flush(out_recorder *r, struct qp_error *err)
{
    int rc = write_buffer(r, err);
    if (rc)
        return rc;
    /* EINVAL: a pipe or a device (/dev/null) has nothing to sync, and that is fine */
    if (fdatasync(r->fd) != 0 && errno != EINVAL && errno != EROFS) {
        r->write_failed = true; /* what was written may be lost: later data would follow a hole */
        return record_fail(r, err, -errno, "syncing to disk: %s", strerror(errno));
    }
    return 0;
}

int out_recorder_close(out_recorder *r, const out_profile *p, struct qp_error *err)
{
    if (!r)
        return 0;
    if (p)
        out_recorder_sync(r, p, NULL);
    out_recorder_flush(r, NULL);
    if (close(r->fd) != 0)
        record_fail(r, NULL, -errno, "closing: %s", strerror(errno));
    int rc = first_error(r, err);
    g_byte_array_free(r->buf, TRUE);
    g_free(r->path);
    g_free(r);
    return rc;
}

/* ---- Reading -------------------------------------------------------------------------------- */

static bool load_module(struct cursor *c, out_profile *p)
{
    uint32_t index = (uint32_t)get_le(c, 4);
    struct out_module m = {0};
    m.text_hash = get_le(c, 8);
    m.base = get_le(c, 8);
    m.kernel = get_le(c, 1) & MODULE_KERNEL;
    get_string(c, 2, m.name, sizeof m.name);
    get_string(c, 2, m.path, sizeof m.path);
    if (c->bad || c->left != 0 || index != out_profile_module_count(p))
        return false;
    out_profile_add_module(p, &m);
    return true;
}

static bool frame_valid(const struct out_frame *f, size_t n_modules)
{
    return f->module == OUT_NO_MODULE || f->module < n_modules;
}

static bool load_stack(struct cursor *c, out_profile *p)
{
    uint32_t id = (uint32_t)get_le(c, 4);
    struct out_stack s = {0};
    s.pid = (uint32_t)get_le(c, 4);
    s.mode = (uint8_t)get_le(c, 1);
    s.user_stop = (uint8_t)get_le(c, 1);
    s.kernel_stop = (uint8_t)get_le(c, 1);
    s.n_frames = (uint16_t)get_le(c, 2);
    s.n_user = (uint16_t)get_le(c, 2);
    get_string(c, 1, s.comm, sizeof s.comm);
    for (char *ch = s.comm; *ch; ch++) /* as out_profile_add cleans what a guest chose */
        if (*ch == ';' || (unsigned char)*ch < 0x20 || *ch == 0x7f)
            *ch = '_';
    if (c->bad || c->left != (size_t)s.n_frames * FRAME_BYTES || s.n_user > s.n_frames ||
        s.mode >= OUT_MODE_COUNT || s.user_stop >= UNW_STOP_COUNT ||
        s.kernel_stop >= UNW_STOP_COUNT || id != out_profile_stack_count(p))
        return false;
    struct out_frame *frames = g_new0(struct out_frame, s.n_frames ? s.n_frames : 1);
    bool ok = true;
    for (int i = 0; i < s.n_frames; i++) {
        frames[i].pc = get_le(c, 8);
        frames[i].module = (uint32_t)get_le(c, 4);
        uint8_t flags = (uint8_t)get_le(c, 1);
        frames[i].exact = flags & FRAME_EXACT;
        frames[i].kernel = flags & FRAME_KERNEL;
        ok = ok && frame_valid(&frames[i], out_profile_module_count(p));
    }
    s.frames = frames;
    /* a stack the profile already holds would shift every later id */
    ok = ok && out_profile_intern(p, &s) == id;
    g_free(frames);
    return ok;
}

/* A batch is checked whole before any of it is added: a bad one adds nothing. */
static bool load_samples(struct cursor *c, out_profile *p)
{
    uint64_t first = get_le(c, 8);
    uint32_t n = (uint32_t)get_le(c, 4);
    if (c->bad || first != out_profile_sample_count(p) || c->left != (size_t)n * SAMPLE_BYTES)
        return false;
    struct cursor check = *c;
    size_t n_stacks = out_profile_stack_count(p);
    for (uint32_t i = 0; i < n; i++) {
        take(&check, 16);
        /* the writers key samples by (vCPU << 32 | stack): a vCPU past OUT_MAX_CPU is refused */
        if (get_le(&check, 4) > OUT_MAX_CPU || get_le(&check, 4) >= n_stacks)
            return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct out_record r;
        r.time_ns = get_le(c, 8);
        r.weight_ns = get_le(c, 8);
        r.cpu = (uint32_t)get_le(c, 4);
        r.stack = (uint32_t)get_le(c, 4);
        out_profile_add_record(p, &r);
    }
    return true;
}

static bool module_valid(uint32_t module, const out_profile *p)
{
    return module == OUT_NO_MODULE || module < out_profile_module_count(p);
}

/* Checked whole before any of it is added, as a batch of samples is. */
static bool load_exact(struct cursor *c, out_profile *p)
{
    uint32_t n = (uint32_t)get_le(c, 4);
    if (c->bad || c->left != (size_t)n * EXACT_BYTES)
        return false;
    struct cursor check = *c;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t module = (uint32_t)get_le(&check, 4);
        take(&check, 16);
        if (!module_valid(module, p))
            return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t module = (uint32_t)get_le(c, 4);
        uint64_t pc = get_le(c, 8);
        out_profile_add_exact(p, module, pc, get_le(c, 8));
    }
    return true;
}

static bool load_code(struct cursor *c, out_profile *p)
{
    struct out_code code = {.module = (uint32_t)get_le(c, 4), .machine = (uint16_t)get_le(c, 2)};
    code.addr = get_le(c, 8);
    char name[256];
    get_string(c, 1, name, sizeof name);
    code.name = name;
    code.len = (uint32_t)get_le(c, 4);
    code.bytes = code.len == c->left ? take(c, code.len) : NULL;
    if (c->bad || !code.bytes || code.module == OUT_NO_MODULE || !module_valid(code.module, p))
        return false;
    out_profile_add_code(p, &code); /* a repeat, or one too many: left out */
    return true;
}

/* The last NOTES chunk's text, kept whole: it is free-form, so there is nothing to check. A NUL
 * in it ends it (the text is for people and `key=value` parsers). */
static bool load_notes(const uint8_t *payload, size_t len, char **notes)
{
    if (!notes)
        return true;
    g_free(*notes);
    *notes = g_strndup((const char *)payload, len);
    return true;
}

/* false: this chunk cannot be used, and nothing after it can be trusted. A type this reader does
 * not know is skipped: such chunks may be added without a new format version. */
static bool load_chunk(uint32_t type, const uint8_t *payload, size_t len, out_profile *p,
                       char **notes)
{
    struct cursor c = {payload, len, false};
    switch (type) {
    case CHUNK_NOTES:
        return load_notes(payload, len, notes);
    case CHUNK_MODULE:
        return load_module(&c, p);
    case CHUNK_STACK:
        return load_stack(&c, p);
    case CHUNK_SAMPLES:
        return load_samples(&c, p);
    case CHUNK_EXACT:
        return load_exact(&c, p);
    case CHUNK_CODE:
        return load_code(&c, p);
    default:
        return true;
    }
}

/* Loads chunks from pos up to the first torn, corrupt or inconsistent one. */
static void load_chunks(const uint8_t *data, size_t len, size_t pos, out_profile *p, char **notes)
{
    while (len - pos >= RECORD_CHUNK_EXTRA) {
        uint32_t type = le32(data + pos), size = le32(data + pos + 4);
        if (size > RECORD_CHUNK_MAX || size > len - pos - RECORD_CHUNK_EXTRA)
            return; /* a torn tail, or a length a flipped bit made too large */
        if (crc32(0, data + pos, 8 + size) != le32(data + pos + 8 + size))
            return;
        if (!load_chunk(type, data + pos + 8, size, p, notes))
            return;
        pos += RECORD_CHUNK_EXTRA + size;
    }
}

/* The header's end (where chunks start), or a negative code with err filled. */
static int check_header(const char *path, const uint8_t *data, size_t len, char **meta,
                        struct qp_error *err)
{
    if (len < RECORD_MAGIC_LEN || memcmp(data, RECORD_MAGIC, RECORD_MAGIC_LEN) != 0)
        return qp_error_set(err, -EPROTO, "%s: not a qprof record file (no %s magic)", path,
                            RECORD_MAGIC);
    if (len < RECORD_MAGIC_LEN + 8)
        return qp_error_set(err, -EPROTO, "%s: corrupt record file: the header is cut short", path);
    uint32_t version = le32(data + 8), meta_len = le32(data + 12);
    /* the version is read before the checksum: a newer format may lay its header out otherwise */
    if (version > RECORD_VERSION)
        return qp_error_set(err, -EPROTO,
                            "%s: written by a newer qprof (format %" PRIu32
                            ", this qprof reads up to %d)",
                            path, version, RECORD_VERSION);
    if (version == 0)
        return qp_error_set(err, -EPROTO, "%s: corrupt record file: format version 0", path);
    size_t end = RECORD_MAGIC_LEN + 8 + (size_t)meta_len;
    if (meta_len > RECORD_META_MAX || end + 4 > len)
        return qp_error_set(err, -EPROTO,
                            "%s: corrupt record file: the header is cut short or its meta length "
                            "(%" PRIu32 " bytes) is wrong",
                            path, meta_len);
    if (crc32(0, data, (uInt)end) != le32(data + end))
        return qp_error_set(err, -EPROTO, "%s: corrupt record file: header checksum mismatch",
                            path);
    if (meta)
        *meta = g_strndup((const char *)data + RECORD_MAGIC_LEN + 8, meta_len);
    return (int)(end + 4);
}

/* A regular file of at most QP_FILE_MAX_RECORD bytes, also when it grows while read. */
static int read_whole(const char *path, GByteArray *out, struct qp_error *err)
{
    int rc = 0;
    int fd = qp_file_open_read(path, QP_FILE_MAX_RECORD, NULL, err);
    if (fd < 0)
        return fd;
    uint8_t chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = qp_error_set(err, -errno, "reading %s: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        if (out->len + (uint64_t)n > QP_FILE_MAX_RECORD) {
            rc = qp_error_set(err, -EFBIG, "%s grew past %llu bytes while read", path,
                              (unsigned long long)QP_FILE_MAX_RECORD);
            goto out;
        }
        g_byte_array_append(out, chunk, (guint)n);
    }
out:
    close(fd);
    return rc;
}

int out_record_read(const char *path, out_profile **out, char **meta, struct qp_error *err)
{
    GByteArray *data = g_byte_array_new();
    char *meta_text = NULL;
    int rc = read_whole(path, data, err);
    if (rc)
        goto out;
    rc = check_header(path, data->data, data->len, meta ? &meta_text : NULL, err);
    if (rc < 0)
        goto out;
    out_profile *p = out_profile_new();
    char *notes = NULL;
    load_chunks(data->data, data->len, (size_t)rc, p, meta ? &notes : NULL);
    *out = p;
    if (meta && notes) {
        *meta = g_strconcat(
            meta_text, meta_text[0] && !g_str_has_suffix(meta_text, "\n") ? "\n" : "", notes, NULL);
        g_free(notes);
    } else if (meta) {
        *meta = g_steal_pointer(&meta_text);
    }
    rc = 0;
out:
    g_free(meta_text);
    g_byte_array_free(data, TRUE);
    return rc;
}
