/* unw_dump_cfi: the CFI row covering a pc, as text, through libdw's CFI interface. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "unw_internal.h"

static const char *const reg_names[UNW_X86_64_NREGS] = {
    "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8",
    "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "rip",
};

static void print_reg(FILE *out, uint64_t regno, int64_t offset)
{
    if (regno < UNW_X86_64_NREGS)
        fputs(reg_names[regno], out);
    else
        fprintf(out, "reg%" PRIu64, regno);
    if (offset != 0)
        fprintf(out, "%+" PRId64, offset);
}

/* Prints one DWARF operation in a short form: "CFA", "rsp+8", "+16", "deref". */
static void print_op(FILE *out, const Dwarf_Op *op)
{
    unsigned atom = op->atom;
    if (atom == DW_OP_call_frame_cfa)
        fputs("CFA", out);
    else if (atom == DW_OP_plus_uconst)
        fprintf(out, "%+" PRId64, (int64_t)op->number);
    else if (atom >= DW_OP_breg0 && atom <= DW_OP_breg31)
        print_reg(out, atom - DW_OP_breg0, (int64_t)op->number);
    else if (atom == DW_OP_bregx)
        print_reg(out, op->number, (int64_t)op->number2);
    else if (atom >= DW_OP_reg0 && atom <= DW_OP_reg31)
        print_reg(out, atom - DW_OP_reg0, 0);
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
static void print_rule(FILE *out, const Dwarf_Op *ops, size_t nops, bool is_cfa)
{
    bool value = is_cfa || (nops > 0 && ops[nops - 1].atom == DW_OP_stack_value);
    size_t n = nops > 0 && ops[nops - 1].atom == DW_OP_stack_value ? nops - 1 : nops;
    fputs(value ? "" : "[", out);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && ops[i].atom != DW_OP_plus_uconst)
            fputs("; ", out); /* a stack machine: "CFA; rsp+144" leaves rsp+144 on top */
        print_op(out, &ops[i]);
    }
    fputs(value ? "" : "]", out);
}

static void print_registers(FILE *out, Dwarf_Frame *frame)
{
    for (int regno = 0; regno < UNW_X86_64_NREGS; regno++) {
        Dwarf_Op ops_mem[3], *ops;
        size_t nops;
        if (dwarf_frame_register(frame, regno, ops_mem, &ops, &nops) != 0)
            continue;
        if (nops == 0 && ops == NULL)
            continue; /* same value: the usual case for callee-saved registers */
        fprintf(out, "  %s%s = ", reg_names[regno], regno == UNW_RIP ? " (return address)" : "");
        if (nops == 0)
            fputs("undefined", out);
        else
            print_rule(out, ops, nops, false);
        fputc('\n', out);
    }
}

static void print_frame(FILE *out, Dwarf_Frame *frame, Dwarf_Addr bias)
{
    Dwarf_Addr start, end;
    bool signal_frame = false;
    if (dwarf_frame_info(frame, &start, &end, &signal_frame) >= 0)
        fprintf(out, "  row [0x%" PRIx64 ", 0x%" PRIx64 ")%s\n", (uint64_t)(start + bias),
                (uint64_t)(end + bias), signal_frame ? " signal frame" : "");
    Dwarf_Op *ops;
    size_t nops;
    fputs("  CFA = ", out);
    if (dwarf_frame_cfa(frame, &ops, &nops) == 0)
        print_rule(out, ops, nops, true);
    else
        fputs("unknown", out);
    fputc('\n', out);
    print_registers(out, frame);
}

static int dump_from(Dwfl_Module *mod, Dwarf_CFI *cfi, Dwarf_Addr bias, const char *what,
                     uint64_t pc, FILE *out)
{
    Dwarf_Frame *frame = NULL;
    if (cfi == NULL || dwarf_cfi_addrframe(cfi, pc - bias, &frame) != 0)
        return -ENOENT;
    const char *modname = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    fprintf(out, "pc 0x%" PRIx64 " in %s (%s, bias 0x%" PRIx64 ")\n", pc, modname ? modname : "?",
            what, (uint64_t)bias);
    print_frame(out, frame, bias);
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
    if (dump_from(mod, cfi, bias, ".eh_frame", pc, out_file) == 0)
        return 0;
    cfi = dwfl_module_dwarf_cfi(mod, &bias);
    if (dump_from(mod, cfi, bias, ".debug_frame", pc, out_file) == 0)
        return 0;
    return qp_error_set(err, -ENOENT, "unwind space %s: no CFI covers pc 0x%" PRIx64, s->name, pc);
}
