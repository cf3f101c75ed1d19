/* Loaded kernel modules: the list, their symbols (merged with vmlinux's into one table) and their
 * ORC tables, checked at a bounded rate while the guest runs. */
#include "os_linux_internal.h"
#include "qp_log.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* vmlinux's symbols and the loaded modules' ("function [module]") in one table. */
void os_linux_build_symbols(struct os_linux *l)
{
    size_t n, n_mod;
    const struct lx_symbol *s = lx_kernel_symbols(l->kernel, &n);
    const struct lx_symbol *ms = lx_modules_symbols(l->mods, &n_mod);
    struct sym_map_entry *e = g_new(struct sym_map_entry, n + n_mod + 1);
    for (size_t i = 0; i < n; i++)
        e[i] = (struct sym_map_entry){s[i].addr, s[i].type, s[i].name};
    for (size_t i = 0; i < n_mod; i++)
        e[n + i] = (struct sym_map_entry){ms[i].addr, ms[i].type, ms[i].name};
    n += n_mod;
    g_array_set_size(l->named_mods, 0);
    for (size_t i = 0; i < lx_modules_count(l->mods); i++)
        g_array_append_val(l->named_mods, *lx_modules_at(l->mods, i));
    struct qp_error err = {0};
    if (sym_table_from_entries("vmlinux", e, n, &l->syms, &err) && l->cfg.verbose)
        qp_log(QP_LOG_INFO, "kernel symbols: %s", err.msg);
    g_free(e);
}

static int find_modules_list(struct os_linux *l)
{
    lx_kernel_forget_translations(l->kernel);
    int rc = lx_kernel_find_modules_list(l->kernel, &l->mod_off, &l->modules_head);
    lx_kernel_forget_translations(l->kernel);
    if (rc)
        l->modules_head = 0;
    return rc;
}

/* struct module from BTF, the list head from kallsyms and where modules lie from the
 * architecture; without them frames in modules stay addresses (and with ORC their stacks end
 * there, marked), everything else works. */
void os_linux_load_module_offsets(struct os_linux *l, const lx_btf *btf)
{
    struct qp_error err = {0};
    int rc = lx_btf_module_offsets(btf, &l->mod_off, &err);
    if (rc == 0 && lx_kernel_module_area(l->kernel, &l->mod_off.area_start, &l->mod_off.area_end))
        rc = qp_error_set(&err, -ENOENT, "no module area (kallsyms has no _stext or _etext)");
    /* Not found while no module is loaded (a kallsyms without data symbols): looked for again
     * at each check of the list. */
    l->modules_head = 0;
    if (rc == 0 && find_modules_list(l) != 0 && l->cfg.verbose)
        qp_log(QP_LOG_INFO, "Linux modules: kallsyms has no `modules` and no loaded module "
                            "shows the list yet");
    l->have_mod_offsets = rc == 0;
    if (rc)
        qp_log(QP_LOG_WARN, "Linux modules: %s; frames in modules stay addresses", err.msg);
}

/* Reads every live module's symbols and ORC tables (the guest running), and hands the ORC to
 * the unwinder. false when the list could not be read (tried again at the next check). */
bool os_linux_read_modules(struct os_linux *l)
{
    struct lx_reader r = {.read = os_linux_kread, .ctx = l->kernel};
    struct qp_error err = {0};
    lx_modules *m = NULL;
    uint64_t t0 = qp_now_ns();
    lx_kernel_forget_translations(l->kernel);
    int rc = lx_modules_read(&l->mod_off, &r, l->modules_head, true, &m, &err);
    lx_kernel_forget_translations(l->kernel);
    l->module_reads++;
    l->module_read_ns += qp_now_ns() - t0;
    if (rc) {
        if (l->cfg.verbose)
            qp_log(QP_LOG_INFO, "Linux modules: %s", err.msg);
        return false;
    }
    if (lx_modules_warning(m))
        qp_log(QP_LOG_WARN, "Linux %s; its frames stay addresses", lx_modules_warning(m));
    size_t n_syms;
    lx_modules_symbols(m, &n_syms);
    if (l->cfg.verbose)
        qp_log(QP_LOG_INFO,
               "Linux modules: %zu text ranges, %zu symbols, %zu ORC entries, read in %.1f "
               "ms",
               lx_modules_count(m), n_syms, lx_modules_orc_entries(m), (qp_now_ns() - t0) / 1e6);
    lx_kernel_use_modules(l->kernel, m);
    lx_modules_free(l->mods);
    l->mods = m;
    return true;
}

/* Every module in m is one syms names already (same struct, name and core range). */
static bool named_already(const struct os_linux *l, const lx_modules *m)
{
    for (size_t i = 0; i < lx_modules_count(m); i++) {
        const struct lx_module *x = lx_modules_at(m, i);
        bool found = false;
        for (guint j = 0; j < l->named_mods->len && !found; j++) {
            const struct lx_module *y = &g_array_index(l->named_mods, struct lx_module, j);
            found = x->addr == y->addr && x->base == y->base && x->size == y->size &&
                    x->text_size == y->text_size && strcmp(x->name, y->name) == 0;
        }
        if (!found)
            return false;
    }
    return true;
}

/* While the guest runs, at a bounded rate: reads the list's identities only (each struct module
 * once) and, when modules came or went, everything again. The unwinder takes the new ORC tables
 * at once. A module the symbol table does not name yet makes a new table, which the session
 * takes as a new kernel module (the samples taken before keep the old names); modules that only
 * went away (or came back where they were) keep the table: no new sample can be in their text
 * unless a module took their place, and that one is new. */
void os_linux_check_modules(struct os_linux *l, const struct prof_os_mem *mem,
                            struct prof_os_refresh *out)
{
    uint64_t now = qp_now_ns();
    uint64_t every = mem->reads_are_cheap ? (l->modules_stale ? MODULES_STALE_NS : MODULES_CHECK_NS)
                     : l->modules_stale   ? MODULES_CHECK_NS
                                          : MODULES_CHECK_SLOW_NS;
    if (!l->have_mod_offsets || now - l->modules_checked_ns < every)
        return;
    l->modules_checked_ns = now;
    if (!l->modules_head && find_modules_list(l) != 0)
        return;
    l->modules_stale = false;
    struct lx_reader r = {.read = os_linux_kread, .ctx = l->kernel};
    lx_modules *list = NULL;
    lx_kernel_forget_translations(l->kernel);
    int rc = lx_modules_read(&l->mod_off, &r, l->modules_head, false, &list, NULL);
    lx_kernel_forget_translations(l->kernel);
    bool same = rc == 0 && lx_modules_same(list, l->mods);
    lx_modules_free(list);
    l->module_checks++;
    l->module_check_ns += qp_now_ns() - now;
    if (same || !os_linux_read_modules(l) || named_already(l, l->mods))
        return;
    if (l->cfg.verbose)
        qp_log(QP_LOG_INFO, "Linux modules changed: new kernel symbols");
    if (l->syms)
        g_ptr_array_add(l->old_syms, l->syms);
    l->syms = NULL;
    os_linux_build_symbols(l);
    const struct lx_vmcoreinfo *vi = lx_kernel_vmcoreinfo(l->kernel);
    out->kernel_found = true;
    out->kernel_stext = vi->stext;
    out->kernel_slide = (int64_t)vi->kernel_offset;
}
