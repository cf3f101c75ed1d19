/* The architectures qprof knows: one line per table, and how one is chosen and checked. */
#include "arch.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct prof_arch *const arches[] = {&prof_arch_x86_64, &prof_arch_riscv64,
                                                 &prof_arch_aarch64};
#define N_ARCHES (sizeof arches / sizeof arches[0])

const struct prof_arch *prof_arch_for_elf(uint16_t elf_machine)
{
    for (size_t i = 0; i < N_ARCHES; i++)
        if (arches[i]->elf_machine == elf_machine)
            return arches[i];
    return NULL;
}

const struct prof_arch *prof_arch_for_gdb(const char *xml_arch)
{
    for (size_t i = 0; xml_arch && i < N_ARCHES; i++)
        if (strcmp(arches[i]->gdb_arch, xml_arch) == 0)
            return arches[i];
    return NULL;
}

const struct prof_arch *prof_arch_by_name(const char *name)
{
    for (size_t i = 0; name && i < N_ARCHES; i++)
        if (strcmp(arches[i]->name, name) == 0)
            return arches[i];
    return NULL;
}

const struct prof_arch *prof_arch_unnamed(void)
{
    return &prof_arch_x86_64;
}

const struct prof_arch *prof_arch_for_gdb_regs(bool (*has)(const void *ctx, const char *name),
                                               const void *ctx)
{
    for (size_t i = 0; i < N_ARCHES; i++)
        if (arches[i]->gdb_unnamed_reg && has(ctx, arches[i]->gdb_unnamed_reg))
            return arches[i];
    return NULL;
}

int prof_arch_usual_ram(const struct prof_arch *a, uint64_t len, struct prof_arch_ram_piece *out,
                        int max)
{
    const struct prof_arch_ram_layout *l = a->usual_ram;
    if (!l || len == 0 || max < (l->hole_end ? 2 : 1) || (l->split_from && len >= l->split_from))
        return 0;
    if (!l->hole_end) {
        out[0] = (struct prof_arch_ram_piece){l->base, l->base + len, 0};
        return 1;
    }
    if (len <= l->hole_end)
        return 0;
    out[0] = (struct prof_arch_ram_piece){l->base, l->base + l->hole_start, 0};
    out[1] = (struct prof_arch_ram_piece){l->base + l->hole_end, l->base + len, l->hole_end};
    return 2;
}

int prof_arch_monitor_reg(void *ctx, const char *name, uint64_t *val)
{
    const struct prof_arch_monitor_cpu *cpu = ctx;
    for (int i = 0; i < cpu->n_regs; i++)
        if (strcmp(cpu->regs[i].name, name) == 0) {
            *val = cpu->regs[i].value;
            return 0;
        }
    return -ENOENT;
}

int prof_arch_monitor_set(struct prof_arch_monitor_cpu *cpu, const char *name, uint64_t val)
{
    if (strlen(name) >= sizeof cpu->regs[0].name)
        return -EINVAL;
    for (int i = 0; i < cpu->n_regs; i++)
        if (strcmp(cpu->regs[i].name, name) == 0) {
            cpu->regs[i].value = val;
            return 0;
        }
    if (cpu->n_regs >= PROF_ARCH_MONITOR_REGS)
        return -ENOSPC;
    struct prof_arch_monitor_reg *r = &cpu->regs[cpu->n_regs++];
    strcpy(r->name, name);
    r->value = val;
    return 0;
}

int prof_arch_split_tokens(const char *line, const char *end, struct prof_arch_token *t, int max)
{
    int n = 0;
    for (const char *p = line; p < end;) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == end)
            break;
        if (n == max)
            return -1;
        t[n].s = p;
        while (p < end && *p != ' ' && *p != '\t')
            p++;
        t[n].len = (size_t)(p - t[n].s);
        n++;
    }
    return n;
}

/* The block just ended: checked, and kept while fewer than max were. */
static int end_block(const struct prof_arch_monitor_blocks *b, const void *block,
                     struct prof_arch_monitor_cpu *out, int max, int *n, struct qp_error *err)
{
    int rc = b->finish(block, err);
    if (rc == 0 && (*n)++ < max)
        out[*n - 1] = *(const struct prof_arch_monitor_cpu *)block;
    return rc;
}

int prof_arch_monitor_parse_blocks(const struct prof_arch_monitor_blocks *b, const char *text,
                                   struct prof_arch_monitor_cpu *out, int max, int *n_cpus,
                                   struct qp_error *err)
{
    void *cur = calloc(1, b->block_size); /* a block holds ~2 KiB of registers */
    if (!cur)
        return qp_error_set(err, -ENOMEM, "info registers: out of memory");
    b->start(cur, 0);
    bool in_block = false;
    int n = 0, rc = 0;
    for (const char *line = text; *line && rc == 0;) {
        const char *end = line + strcspn(line, "\r\n");
        if (strncmp(line, "CPU#", 4) == 0) {
            if (in_block)
                rc = end_block(b, cur, out, max, &n, err);
            b->start(cur, atoi(line + 4));
            in_block = true;
        } else if (end > line) {
            rc = b->line(cur, line, end, err);
            in_block = true;
        }
        line = end + strspn(end, "\r\n");
    }
    if (rc == 0 && in_block)
        rc = end_block(b, cur, out, max, &n, err);
    if (rc == 0 && n == 0)
        rc = qp_error_set(err, -EPROTO, "info registers: no register block in the reply");
    if (rc == 0 && n_cpus)
        *n_cpus = n < max ? n : max;
    free(cur);
    return rc;
}

const char *prof_arch_known_names(void)
{
    return "x86_64, riscv64, aarch64";
}

int prof_arch_page_walk(const struct prof_arch *a, uint64_t root, const struct prof_arch_mmu *mmu,
                        uint64_t vaddr, prof_arch_phys_read_fn read_phys, void *ctx,
                        uint64_t *paddr, uint64_t *page_size)
{
    if (a->page_walk_mmu)
        return a->page_walk_mmu(root, mmu, vaddr, read_phys, ctx, paddr, page_size);
    return a->page_walk(root, vaddr, read_phys, ctx, paddr, page_size);
}

/* Names for the e_machine values people meet, so that a message says "aarch64", not 183. */
static const char *machine_name(unsigned m)
{
    switch (m) {
    case EM_386:
        return "i386";
    case EM_ARM:
        return "arm";
    case EM_X86_64:
        return "x86_64";
    case EM_AARCH64:
        return "aarch64";
    case EM_RISCV:
        return "riscv";
    case EM_PPC64:
        return "ppc64";
    case EM_S390:
        return "s390";
    default:
        return "unknown";
    }
}

int prof_arch_of_elf_file(const char *path, const struct prof_arch **arch, struct qp_error *err)
{
    *arch = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* the symbol loader says why, in its own words */
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    GElf_Ehdr eh;
    int rc = 0;
    if (elf && elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, &eh)) {
        *arch = gelf_getclass(elf) == ELFCLASS64 ? prof_arch_for_elf(eh.e_machine) : NULL;
        if (!*arch)
            rc = qp_error_set(err, -ENOTSUP, "%s: a %d-bit %s ELF (e_machine %u): qprof knows %s",
                              path, gelf_getclass(elf) == ELFCLASS64 ? 64 : 32,
                              machine_name(eh.e_machine), eh.e_machine, prof_arch_known_names());
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return rc;
}

int prof_arch_check_match(const struct prof_arch *kernel, const char *kernel_path,
                          const struct prof_arch *guest, const char *transport,
                          struct qp_error *err)
{
    if (!kernel || !guest || kernel == guest)
        return 0;
    return qp_error_set(err, -EINVAL,
                        "--kernel %s is an ELF for %s, but the guest behind the %s is %s",
                        kernel_path, kernel->name, transport, guest->name);
}

void prof_arch_kernel_space(const struct prof_arch *a, uint64_t elf_lo, uint64_t elf_hi,
                            uint64_t *lo, uint64_t *hi)
{
    *lo = a->split.kernel_start;
    *hi = UINT64_MAX;
    if (elf_lo < elf_hi && elf_lo < a->split.kernel_start) {
        *lo = elf_lo;
        *hi = elf_hi;
    }
}
