/* unw_dump_cfi: the CFI row covering a pc, as text, through libdw's CFI interface. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "unw_internal.h"

/* Register regno by the machine's name for it, else "regN". */
static void print_reg_name(FILE *out, const struct unw_machine *m, uint64_t regno)
{
    if (m->reg_names && regno < m->nregs)
        fputs(m->reg_names[regno], out);
    else
        fprintf(out, "reg%" PRIu64, regno);
}

static void print_reg(FILE *out, const struct unw_machine *m, uint64_t regno, int64_t offset)
{
    print_reg_name(out, m, regno);
    if (offset != 0)
        fprintf(out, "%+" PRId64, offset);
}

/* Prints one DWARF operation in a short form: "CFA", "rsp+8", "+16", "deref". */
static void print_op(FILE *out, const struct unw_machine *m, const Dwarf_Op *op)
{
    unsigned atom = op->atom;
    if (atom == DW_OP_call_frame_cfa)
        fputs("CFA", out);
    else if (atom == DW_OP_plus_uconst)
        fprintf(out, "%+" PRId64, (int64_t)op->number);
    else if (atom >= DW_OP_breg0 && atom <= DW_OP_breg31)
        print_reg(out, m, atom - DW_OP_breg0, (int64_t)op->number);
    else if (atom == DW_OP_bregx)
        print_reg(out, m, op->number, (int64_t)op->number2);
    else if (atom >= DW_OP_reg0 && atom <= DW_OP_reg31)
        print_reg(out, m, atom - DW_OP_reg0, 0);
    else if (atom >= DW_OP_lit0 && atom <= DW_OP_lit31)
        fprintf(out, "%u", atom - DW_OP_lit0);
    else if (atom == DW_OP_consts)
        fprintf(out, "%" PRId64, (int64_t)op->number);
    else if (atom == DW_OP_constu)
        fprintf(out, "%" PRIu64, op->number);
    else if (atom == DW_OP_plus)
        fputs("plus", out);
    else if (atom == DW_OP_minus)
        fputs("minus", out);
    else if (atom == DW_OP_deref)
        fputs("deref", out);
    else
        fprintf(out, "op0x%x(%" PRIu64 ")", atom, op->number);
}

/* A rule without DW_OP_stack_value locates the saved value in memory: shown as [expr]. */
static void print_rule(FILE *out, const struct unw_machine *m, const Dwarf_Op *ops, size_t nops,
                       bool is_cfa)
{
    bool value = is_cfa || (nops > 0 && ops[nops - 1].atom == DW_OP_stack_value);
    size_t n = nops > 0 && ops[nops - 1].atom == DW_OP_stack_value ? nops - 1 : nops;
    fputs(value ? "" : "[", out);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && ops[i].atom != DW_OP_plus_uconst)
            fputs("; ", out); /* a stack machine: "CFA; rsp+144" leaves rsp+144 on top */
        print_op(out, m, &ops[i]);
    }
    fputs(value ? "" : "]", out);
}

/* ra: the row's return-address column. */
static void print_registers(FILE *out, const struct unw_machine *m, Dwarf_Frame *frame, int ra)
{
    for (int regno = 0; regno < (int)m->nregs; regno++) {
        Dwarf_Op ops_mem[3], *ops;
        size_t nops;
        if (dwarf_frame_register(frame, regno, ops_mem, &ops, &nops) != 0)
            continue;
        if (nops == 0 && ops == NULL)
            continue; /* same value: the usual case for callee-saved registers */
        fputs("  ", out);
        print_reg_name(out, m, (uint64_t)regno);
        fprintf(out, "%s = ", regno == ra ? " (return address)" : "");
        if (nops == 0)
            fputs("undefined", out);
        else
            print_rule(out, m, ops, nops, false);
        fputc('\n', out);
    }
}

static void print_frame(FILE *out, const struct unw_machine *m, Dwarf_Frame *frame, Dwarf_Addr bias)
{
    Dwarf_Addr start, end;
    bool signal_frame = false;
    int ra = dwarf_frame_info(frame, &start, &end, &signal_frame);
    if (ra >= 0)
        fprintf(out, "  row [0x%" PRIx64 ", 0x%" PRIx64 ")%s\n", (uint64_t)(start + bias),
                (uint64_t)(end + bias), signal_frame ? " signal frame" : "");
    Dwarf_Op *ops;
    size_t nops;
    fputs("  CFA = ", out);
    if (dwarf_frame_cfa(frame, &ops, &nops) == 0)
        print_rule(out, m, ops, nops, true);
    else
        fputs("unknown", out);
    fputc('\n', out);
    print_registers(out, m, frame, ra);
}

static int dump_from(const struct unw_machine *m, Dwfl_Module *mod, Dwarf_CFI *cfi, Dwarf_Addr bias,
                     const char *what, uint64_t pc, FILE *out)
{
    Dwarf_Frame *frame = NULL;
    if (cfi == NULL || dwarf_cfi_addrframe(cfi, pc - bias, &frame) != 0)
        return -ENOENT;
    const char *modname = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    fprintf(out, "pc 0x%" PRIx64 " in %s (%s, bias 0x%" PRIx64 ")\n", pc, modname ? modname : "?",
            what, (uint64_t)bias);
    print_frame(out, m, frame, bias);
    free(frame);
    return 0;
}

int unw_dump_cfi(unw_space *s, uint64_t pc, void *out_file, struct qp_error *err)
{
    if (s == NULL || out_file == NULL)
        return qp_error_set(err, -EINVAL, "unw_dump_cfi: bad arguments");
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
    if (mod == NULL)
        return qp_error_set(err, -ENOENT, "unwind space %s: no module covers pc 0x%" PRIx64,
                            s->name, pc);
    Dwarf_Addr bias;
    Dwarf_CFI *cfi = dwfl_module_eh_cfi(mod, &bias);
    if (dump_from(s->machine, mod, cfi, bias, ".eh_frame", pc, out_file) == 0)
        return 0;
    cfi = dwfl_module_dwarf_cfi(mod, &bias);
    if (dump_from(s->machine, mod, cfi, bias, ".debug_frame", pc, out_file) == 0)
        return 0;
    return qp_error_set(err, -ENOENT, "unwind space %s: no CFI covers pc 0x%" PRIx64, s->name, pc);
}
