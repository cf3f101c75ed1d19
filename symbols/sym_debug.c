/* Separate debug files of stripped objects, found as gdb and perf find them (symbols.h). */
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glib.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>

#include "sym_internal.h"

/* The CRC-32 a .gnu_debuglink carries (gdb's gnu_debuglink_crc32: zlib's polynomial). */
static uint32_t crc32_update(uint32_t crc, const uint8_t *buf, size_t len)
{
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= buf[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (UINT32_C(0xedb88320) & (0u - (crc & 1u)));
    }
    return ~crc;
}

static bool file_crc32(const char *path, uint32_t *crc)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    uint8_t buf[65536];
    uint32_t c = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        c = crc32_update(c, buf, (size_t)n);
    close(fd);
    *crc = c;
    return n == 0;
}

/* An ELF's GNU build-id, copied into id (at most max bytes); its length, or 0 for none. */
static size_t elf_build_id(Elf *elf, uint8_t *id, size_t max)
{
    const void *bits;
    ssize_t n = dwelf_elf_gnu_build_id(elf, &bits);
    if (n <= 0 || (size_t)n > max)
        return 0;
    memcpy(id, bits, (size_t)n);
    return (size_t)n;
}

/* path is an ELF whose build-id is want (any when want_len is 0): a debug file for another
 * build would name the wrong functions. */
static bool build_id_is(const char *path, const uint8_t *want, size_t want_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    uint8_t id[64];
    size_t len = elf && elf_kind(elf) == ELF_K_ELF ? elf_build_id(elf, id, sizeof id) : 0;
    bool same = elf && elf_kind(elf) == ELF_K_ELF &&
                (!want_len || (len == want_len && memcmp(id, want, len) == 0));
    elf_end(elf);
    close(fd);
    return same;
}

static char *by_build_id(const char *root, const uint8_t *id, size_t len)
{
    if (len < 2)
        return NULL;
    GString *p = g_string_new(NULL);
    g_string_printf(p, "%s/usr/lib/debug/.build-id/%02x/", root, id[0]);
    for (size_t i = 1; i < len; i++)
        g_string_append_printf(p, "%02x", id[i]);
    g_string_append(p, ".debug");
    char *path = g_string_free(p, FALSE);
    if (build_id_is(path, id, len))
        return path;
    g_free(path);
    return NULL;
}

/* The .gnu_debuglink of the host file object_path: its file name and CRC. */
static char *read_debuglink(const char *object_path, uint32_t *crc, uint8_t *id, size_t *id_len)
{
    int fd = open(object_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    char *name = NULL;
    if (elf && elf_kind(elf) == ELF_K_ELF) {
        GElf_Word link_crc;
        const char *link = dwelf_elf_gnu_debuglink(elf, &link_crc);
        if (link && link[0] && !strchr(link, '/')) {
            name = g_strdup(link);
            *crc = link_crc;
            *id_len = elf_build_id(elf, id, 64);
        }
    }
    elf_end(elf);
    close(fd);
    return name;
}

static char *by_debuglink(const char *root, const char *guest_path, const char *object_path)
{
    uint32_t want_crc = 0;
    uint8_t id[64];
    size_t id_len = 0;
    char *name = read_debuglink(object_path, &want_crc, id, &id_len);
    if (!name)
        return NULL;
    char *dir = g_path_get_dirname(guest_path);
    /* gdb's order: beside the object, in its .debug folder, under the global debug folder. */
    char *candidates[] = {
        g_build_filename(root, dir, name, NULL),
        g_build_filename(root, dir, ".debug", name, NULL),
        g_build_filename(root, "/usr/lib/debug", dir, name, NULL),
    };
    char *found = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(candidates); i++) {
        uint32_t crc;
        if (!found && strcmp(candidates[i], object_path) != 0 && file_crc32(candidates[i], &crc) &&
            crc == want_crc && build_id_is(candidates[i], id, id_len))
            found = g_strdup(candidates[i]);
        g_free(candidates[i]);
    }
    g_free(dir);
    g_free(name);
    return found;
}

char *sym_debug_file_find(const char *root, const uint8_t *build_id, size_t build_id_len,
                          const char *guest_path, const char *object_path)
{
    if (!root)
        root = "";
    else if (strcmp(root, "/") == 0)
        root = "";
    char *found = by_build_id(root, build_id, build_id_len);
    if (!found && guest_path && guest_path[0] == '/' && object_path)
        found = by_debuglink(root, guest_path, object_path);
    return found;
}
