/* Table-driven parsing of HMP `info registers` text (see qmp.h). */
#include "qmp.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum reg_kind { REG_U64, REG_INT, REG_BOOL, REG_SEG, REG_TABLE };

/* Bits recording which required fields a block had. */
enum { SEEN_RIP = 1, SEEN_RSP = 2, SEEN_CPL = 4 };

struct reg_field {
    const char *key;
    enum reg_kind kind;
    size_t offset;
    unsigned seen;
};

#define F(key, kind, field, seen)                                                                  \
    {                                                                                              \
        key, kind, offsetof(struct qmp_regs, field), seen                                          \
    }

/* 64-bit guests print Rxx names; real/protected mode (e.g. a vCPU never started) prints Exx. */
static const struct reg_field reg_fields[] = {
    F("RAX", REG_U64, rax, 0),        F("RBX", REG_U64, rbx, 0),
    F("RCX", REG_U64, rcx, 0),        F("RDX", REG_U64, rdx, 0),
    F("RSI", REG_U64, rsi, 0),        F("RDI", REG_U64, rdi, 0),
    F("RBP", REG_U64, rbp, 0),        F("RSP", REG_U64, rsp, SEEN_RSP),
    F("R8", REG_U64, r8, 0),          F("R9", REG_U64, r9, 0),
    F("R10", REG_U64, r10, 0),        F("R11", REG_U64, r11, 0),
    F("R12", REG_U64, r12, 0),        F("R13", REG_U64, r13, 0),
    F("R14", REG_U64, r14, 0),        F("R15", REG_U64, r15, 0),
    F("RIP", REG_U64, rip, SEEN_RIP), F("RFL", REG_U64, rflags, 0),
    F("EAX", REG_U64, rax, 0),        F("EBX", REG_U64, rbx, 0),
    F("ECX", REG_U64, rcx, 0),        F("EDX", REG_U64, rdx, 0),
    F("ESI", REG_U64, rsi, 0),        F("EDI", REG_U64, rdi, 0),
    F("EBP", REG_U64, rbp, 0),        F("ESP", REG_U64, rsp, SEEN_RSP),
    F("EIP", REG_U64, rip, SEEN_RIP), F("EFL", REG_U64, rflags, 0),
    F("CPL", REG_INT, cpl, SEEN_CPL), F("HLT", REG_BOOL, halted, 0),
    F("CR0", REG_U64, cr0, 0),        F("CR2", REG_U64, cr2, 0),
    F("CR3", REG_U64, cr3, 0),        F("CR4", REG_U64, cr4, 0),
    F("EFER", REG_U64, efer, 0),      F("ES", REG_SEG, es, 0),
    F("CS", REG_SEG, cs, 0),          F("SS", REG_SEG, ss, 0),
    F("DS", REG_SEG, ds, 0),          F("FS", REG_SEG, fs, 0),
    F("GS", REG_SEG, gs, 0),          F("GDT", REG_TABLE, gdt_base, 0),
    F("IDT", REG_TABLE, idt_base, 0),
};

#undef F

static const struct reg_field *find_field(const char *key, size_t len)
{
    for (size_t i = 0; i < sizeof reg_fields / sizeof reg_fields[0]; i++)
        if (strlen(reg_fields[i].key) == len && memcmp(reg_fields[i].key, key, len) == 0)
            return &reg_fields[i];
    return NULL;
}

/* Parses one hex number after optional blanks; *end is left after it. */
static int parse_hex(const char *s, uint64_t *v, const char **end)
{
    while (*s == ' ')
        s++;
    if (!isxdigit((unsigned char)*s))
        return -1;
    char *e;
    *v = strtoull(s, &e, 16);
    *end = e;
    return 0;
}

/* "0033 0000000000000000 ffffffff 00affb00 DPL=3 CS64 [-RA]" */
static int parse_segment(const char *s, const char *line_end, struct qmp_segment *seg)
{
    uint64_t sel, base, limit, flags;
    if (parse_hex(s, &sel, &s) || parse_hex(s, &base, &s) || parse_hex(s, &limit, &s) ||
        parse_hex(s, &flags, &s))
        return -1;
    seg->selector = (uint16_t)sel;
    seg->base = base;
    seg->limit = (uint32_t)limit;
    seg->flags = (uint32_t)flags;
    seg->dpl = -1;
    const char *dpl = strstr(s, "DPL=");
    if (dpl && dpl < line_end)
        seg->dpl = dpl[4] - '0';
    return 0;
}

static int store_field(const struct reg_field *f, const char *val, const char *line_end,
                       struct qmp_regs *r)
{
    char *base = (char *)r + f->offset;
    uint64_t v;
    const char *end;
    switch (f->kind) {
    case REG_SEG:
        return parse_segment(val, line_end, (struct qmp_segment *)base);
    case REG_U64:
    case REG_TABLE:
        if (parse_hex(val, &v, &end))
            return -1;
        *(uint64_t *)base = v;
        return 0;
    case REG_INT:
    case REG_BOOL:
        if (!isdigit((unsigned char)*val))
            return -1;
        if (f->kind == REG_INT)
            *(int *)base = (int)strtol(val, NULL, 10);
        else
            *(bool *)base = *val != '0';
        return 0;
    }
    return -1;
}

/* Finds every KEY=VALUE on a line ("R8 =..." and "ES =..." have a blank before '='). */
static int parse_line(const char *line, const char *line_end, struct qmp_regs *r, unsigned *seen,
                      struct qp_error *err)
{
    for (const char *eq = line; (eq = memchr(eq, '=', line_end - eq)); eq++) {
        const char *k = eq;
        while (k > line && k[-1] == ' ')
            k--;
        const char *key_end = k;
        while (k > line && isalnum((unsigned char)k[-1]))
            k--;
        const struct reg_field *f = find_field(k, key_end - k);
        if (!f || (k > line && k[-1] != ' ' && k[-1] != '\t'))
            continue;
        if (store_field(f, eq + 1, line_end, r) < 0)
            return qp_error_set(err, -EPROTO, "info registers: cannot parse %s in \"%.*s\"", f->key,
                                (int)(line_end - line), line);
        *seen |= f->seen;
    }
    return 0;
}

static int finish_block(struct qmp_regs *r, unsigned seen, struct qp_error *err)
{
    if ((seen & (SEEN_RIP | SEEN_RSP | SEEN_CPL)) != (SEEN_RIP | SEEN_RSP | SEEN_CPL))
        return qp_error_set(err, -EPROTO,
                            "info registers: CPU#%d block lacks RIP, RSP or CPL "
                            "(is this an x86 guest?)",
                            r->cpu_index);
    r->long_mode = (r->efer & 0x400) != 0; /* EFER.LMA */
    return 0;
}

static void start_block(struct qmp_regs *r, int cpu_index)
{
    memset(r, 0, sizeof *r);
    r->cpu_index = cpu_index;
}

int qmp_parse_registers(const char *text, struct qmp_regs *out, int max, int *n_cpus,
                        struct qp_error *err)
{
    struct qmp_regs cur;
    unsigned seen = 0;
    bool in_block = false;
    int n = 0, rc = 0;
    start_block(&cur, 0);
    for (const char *line = text; *line && rc == 0;) {
        const char *line_end = line + strcspn(line, "\r\n");
        if (strncmp(line, "CPU#", 4) == 0) {
            if (in_block && (rc = finish_block(&cur, seen, err)) == 0 && n++ < max)
                out[n - 1] = cur;
            start_block(&cur, atoi(line + 4));
            seen = 0;
            in_block = true;
        } else if (line_end > line) {
            rc = parse_line(line, line_end, &cur, &seen, err);
            in_block = true;
        }
        line = line_end + strspn(line_end, "\r\n");
    }
    if (rc == 0 && in_block && (rc = finish_block(&cur, seen, err)) == 0 && n++ < max)
        out[n - 1] = cur;
    if (rc == 0 && n == 0)
        rc = qp_error_set(err, -EPROTO, "info registers: no register block in the reply");
    if (rc == 0 && n_cpus)
        *n_cpus = n < max ? n : max;
    return rc;
}
