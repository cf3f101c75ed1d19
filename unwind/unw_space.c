/* unw_space: one long-lived libdwfl context per address space, and the modules in it. */
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unw_internal.h"

static const char *const stop_texts[UNW_STOP_COUNT] = {
#define UNW_STOP_TEXT(name, text) [name] = text,
    UNW_STOP_REASONS(UNW_STOP_TEXT)
#undef UNW_STOP_TEXT
};

const char *unw_stop_str(enum unw_stop s)
{
    if ((unsigned)s >= UNW_STOP_COUNT)
        return "unknown stop reason";
    return stop_texts[s];
}

static void source_free(gpointer p)
{
    struct unw_source *src = p;
    g_free(src->path);
    g_free(src->image);
    g_free(src);
}

/* Every module is reported with dwfl_report_module and its ELF handed over here, so that a
 * file reported at any address gets bias = reported start - its first PT_LOAD (libdwfl's own
 * dwfl_report_elf ignores the base of ET_EXEC files, which relocated kernels need). */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                    char **file_name, Elf **elfp)
{
    struct unw_source *src = *userdata;
    if (src == NULL)
        return -1;
    if (src->image != NULL) {
        *elfp = elf_memory(src->image, src->image_len);
        return -1;
    }
    int fd = open(src->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    *elfp = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    *file_name = strdup(src->path);
    return fd;
}

/* No separate debug files: a guest kernel or binary brings its CFI in the file we were given,
 * and searching the host's debug directories would find the host's files, not the guest's. */
static int find_no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                             Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                             GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    return -1;
}

static const Dwfl_Callbacks dwfl_callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = find_no_debuginfo,
    .section_address = dwfl_offline_section_address,
};

static void fill_arch_ehdr(unsigned char *buf, uint16_t elf_machine)
{
    Elf64_Ehdr eh;
    unw_ehdr_for(&eh, elf_machine);
    memcpy(buf, &eh, sizeof eh);
}

static int attach(unw_space *s, struct qp_error *err)
{
    fill_arch_ehdr(s->arch_ehdr, s->machine->elf_machine);
    s->arch_elf = elf_memory((char *)s->arch_ehdr, sizeof s->arch_ehdr);
    if (s->arch_elf == NULL)
        return qp_error_set(err, -EIO, "unwind space %s: elf_memory: %s", s->name, elf_errmsg(-1));
    if (!dwfl_attach_state(s->dwfl, s->arch_elf, 1, &unw_thread_callbacks, s))
        return qp_error_set(err, -EIO, "unwind space %s: dwfl_attach_state: %s", s->name,
                            dwfl_errmsg(-1));
    return 0;
}

int unw_space_new(const struct unw_machine *m, const char *name, uint64_t lo, uint64_t hi,
                  unw_space **out, struct qp_error *err)
{
    if (m == NULL || name == NULL || out == NULL || lo >= hi)
        return qp_error_set(err, -EINVAL, "unw_space_new: bad arguments (lo 0x%llx, hi 0x%llx)",
                            (unsigned long long)lo, (unsigned long long)hi);
    elf_version(EV_CURRENT);
    unw_space *s = g_new0(unw_space, 1);
    s->machine = m;
    s->name = g_strdup(name);
    s->lo = lo;
    s->hi = hi;
    s->sources = g_ptr_array_new_with_free_func(source_free);
    s->dwfl = dwfl_begin(&dwfl_callbacks);
    int rc =
        s->dwfl ? attach(s, err) : qp_error_set(err, -ENOMEM, "dwfl_begin: %s", dwfl_errmsg(-1));
    if (rc < 0) {
        unw_space_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void unw_space_free(unw_space *s)
{
    if (s == NULL)
        return;
    /* dwfl_end releases the modules' Elf handles, which may point into our images. */
    if (s->dwfl)
        dwfl_end(s->dwfl);
    if (s->arch_elf)
        elf_end(s->arch_elf);
    g_ptr_array_free(s->sources, TRUE);
    g_free(s->name);
    g_free(s);
}

/* Reports [start, end) as a module backed by src; the space takes src. Loading the ELF and its
 * CFI now surfaces errors here instead of on the first sample. */
static int report_module(unw_space *s, const char *name, uint64_t start, uint64_t end,
                         struct unw_source *src, struct qp_error *err)
{
    g_ptr_array_add(s->sources, src);
    dwfl_report_begin_add(s->dwfl);
    Dwfl_Module *mod = dwfl_report_module(s->dwfl, name, start, end);
    if (mod != NULL) {
        void **userdata;
        dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
        *userdata = src;
    }
    dwfl_report_end(s->dwfl, NULL, NULL);
    if (mod == NULL)
        return qp_error_set(err, -EINVAL, "unwind space %s: reporting %s at 0x%llx: %s", s->name,
                            name, (unsigned long long)start, dwfl_errmsg(-1));
    Dwarf_Addr bias;
    if (dwfl_module_getelf(mod, &bias) == NULL)
        return qp_error_set(err, -EIO, "unwind space %s: opening %s: %s", s->name, name,
                            dwfl_errmsg(-1));
    memset(s->cfi_cache, 0, sizeof s->cfi_cache);
    return 0;
}

/* The module range libdwfl will expect: it takes the first PT_LOAD's aligned p_vaddr as the
 * file's base, so start must be exactly that plus the bias. */
static int elf_load_range(Elf *elf, uint64_t *lo, uint64_t *hi)
{
    size_t phnum;
    if (elf_getphdrnum(elf, &phnum) != 0)
        return -EINVAL;
    bool first = true;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD)
            continue;
        if (first)
            *lo = ph.p_vaddr & -ph.p_align;
        if (first || ph.p_vaddr + ph.p_memsz > *hi)
            *hi = ph.p_vaddr + ph.p_memsz;
        first = false;
    }
    return first ? -ENOENT : 0;
}

static int file_load_range(const unw_space *s, const char *path, uint64_t *lo, uint64_t *hi,
                           struct qp_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return qp_error_set(err, -errno, "opening %s: %s", path, strerror(errno));
    int rc = 0;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    GElf_Ehdr eh;
    if (elf == NULL || elf_kind(elf) != ELF_K_ELF || gelf_getehdr(elf, &eh) == NULL)
        rc = qp_error_set(err, -EINVAL, "%s: not an ELF file", path);
    else if (eh.e_machine != s->machine->elf_machine)
        rc = qp_error_set(err, -ENOTSUP, "%s: not an %s ELF (e_machine %u)", path, s->machine->name,
                          eh.e_machine);
    else if (elf_load_range(elf, lo, hi) < 0)
        rc = qp_error_set(err, -EINVAL, "%s: no PT_LOAD segment", path);
    elf_end(elf);
    close(fd);
    return rc;
}

int unw_space_add_elf(unw_space *s, const char *path, int64_t bias, struct qp_error *err)
{
    if (s == NULL || path == NULL)
        return qp_error_set(err, -EINVAL, "unw_space_add_elf: bad arguments");
    uint64_t lo = 0, hi = 0;
    int rc = file_load_range(s, path, &lo, &hi, err);
    if (rc < 0)
        return qp_error_prefix(err, "unwind space %s", s->name);
    struct unw_source *src = g_new0(struct unw_source, 1);
    src->path = g_strdup(path);
    const char *base = strrchr(path, '/');
    return report_module(s, base ? base + 1 : path, lo + (uint64_t)bias, hi + (uint64_t)bias, src,
                         err);
}

int unw_space_add_eh_frame(unw_space *s, const char *name, uint64_t text_addr, uint64_t text_size,
                           uint64_t eh_frame_addr, const void *eh_frame, size_t eh_frame_len,
                           struct qp_error *err)
{
    if (s == NULL || name == NULL || eh_frame == NULL || eh_frame_len == 0 || text_size == 0 ||
        text_addr + text_size < text_addr)
        return qp_error_set(err, -EINVAL, "unw_space_add_eh_frame: bad arguments");
    /* The bytes come from the guest: libdw must never see a table it would choke on. */
    int rc = unw_cfi_check_eh_frame(eh_frame, eh_frame_len, err);
    if (rc < 0)
        return qp_error_prefix(err, "unwind space %s: %s", s->name, name);
    struct unw_source *src = g_new0(struct unw_source, 1);
    rc = unw_build_eh_frame_image(s->machine->elf_machine, text_addr, text_size, eh_frame_addr,
                                  eh_frame, eh_frame_len, &src->image, &src->image_len);
    if (rc < 0) {
        source_free(src);
        return qp_error_set(err, rc, "unwind space %s: building ELF image for %s", s->name, name);
    }
    return report_module(s, name, text_addr, text_addr + text_size, src, err);
}
