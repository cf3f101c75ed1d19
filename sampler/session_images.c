/* Process images of one session: an exec image an OS adapter names (the demo ABI's table) is
 * copied while the guest is paused, within the sample's budget and across samples if need be,
 * and identified by its .text hash after the guest resumed; the model (model.h) then says which
 * binary runs in its address space. */
#include "session_internal.h"

#include "qp_log.h"

#include <inttypes.h>

struct proc_image *session_image_for(prof_session *s, const struct prof_task *t)
{
    const struct prof_image_id *id = &t->image;
    struct image_key key = {t->pid,        id->generation,    id->text_addr,
                            id->text_size, id->eh_frame_addr, id->eh_frame_size};
    struct proc_image *img = g_hash_table_lookup(s->images, &key);
    if (img)
        return img;
    if (g_hash_table_size(s->images) >= MAX_IMAGES) {
        g_hash_table_remove_all(s->images);
        prof_model_forget(s->model, PROF_SPACE_PROCESS);
    }
    img = g_new0(struct proc_image, 1);
    img->key = key;
    img->load_base = id->load_base ? id->load_base : id->text_addr;
    g_strlcpy(img->name, t->comm, sizeof img->name);
    bool readable =
        id->text_size && id->text_size <= MAX_TEXT_TO_HASH && id->eh_frame_size <= MAX_EH_FRAME;
    if (readable)
        img->copy = g_try_malloc(id->text_size + id->eh_frame_size);
    img->state = img->copy ? IMAGE_COPYING : IMAGE_DONE;
    if (!img->copy && s->opts.verbose)
        qp_log(QP_LOG_INFO, "pid %u (%s): .text of %" PRIu64 " bytes not identified", t->pid,
               img->name, id->text_size);
    g_hash_table_insert(s->images, &img->key, img);
    return img;
}

/* Copies the next part of an image's .text and .eh_frame; the copy completes over several
 * samples when it is larger than what one sample may read. */
void session_image_copy_some(prof_session *s, const struct prof_vcpu *cpu, struct proc_image *img)
{
    const struct image_key *k = &img->key;
    while (img->state == IMAGE_COPYING) {
        bool in_text = img->copied < k->text_size;
        uint64_t addr =
            in_text ? k->text_addr + img->copied : k->eh_frame_addr + (img->copied - k->text_size);
        size_t want =
            in_text ? k->text_size - img->copied : k->text_size + k->eh_frame_size - img->copied;
        size_t allowed = session_budget_allow(s, want), got = 0;
        if (!allowed)
            return; /* the rest in a later sample */
        int rc = session_target_read(s, cpu, addr, img->copy + img->copied, allowed, false, &got);
        s->budget.bytes_left -= allowed;
        got = got < allowed ? got : allowed; /* the copy holds no more than it asked for */
        img->copied += got;
        if (rc < 0 || got < allowed) {
            if (s->opts.verbose)
                qp_log(QP_LOG_INFO, "pid %" PRIu64 " (%s): .text or .eh_frame unreadable", k->pid,
                       img->name);
            g_free(img->copy);
            img->copy = NULL;
            img->state = IMAGE_DONE;
            return;
        }
        if (img->copied == k->text_size + k->eh_frame_size)
            img->state = IMAGE_COPIED;
    }
}

/* Unwind tables for a binary: the host ELF when we have it, else the .eh_frame the guest
 * published (checked by the unwinder before use). */
static void binary_load_unwind(prof_session *s, struct user_binary *b, const struct proc_image *img)
{
    struct qp_error err = {0};
    const struct image_key *k = &img->key;
    if (unw_space_new(s->arch->unwind, b->name, 0, s->split.user_end, &b->space, &err))
        goto fail;
    if (b->syms) {
        if (unw_space_add_elf(b->space, sym_table_path(b->syms), b->bias, &err) == 0)
            return;
        goto fail;
    }
    if (!k->eh_frame_addr || !k->eh_frame_size)
        return; /* frame pointers only */
    if (unw_space_add_eh_frame(b->space, b->name, k->text_addr, k->text_size, k->eh_frame_addr,
                               img->copy + k->text_size, k->eh_frame_size, &err) == 0)
        return;
fail:
    if (s->opts.verbose)
        qp_log(QP_LOG_INFO, "no unwind tables for %s: %s", b->name, err.msg);
}

/* Hashes a copied .text and finds (or makes) its binary. */
static void image_identify(prof_session *s, struct proc_image *img)
{
    const struct image_key *k = &img->key;
    uint64_t hash = sym_text_hash(img->copy, k->text_size);
    struct user_binary *b = g_hash_table_lookup(s->binaries, &hash);
    if (!b) {
        b = g_new0(struct user_binary, 1);
        b->hash = hash;
        b->syms = sym_store_find(s->store, hash);
        b->text_addr = k->text_addr;
        b->load_base = img->load_base;
        g_strlcpy(b->name, b->syms ? sym_table_name(b->syms) : img->name, sizeof b->name);
        struct out_module m = {.text_hash = hash, .base = b->load_base};
        g_strlcpy(m.name, b->name, sizeof m.name);
        if (b->syms)
            g_strlcpy(m.path, sym_table_path(b->syms), sizeof m.path);
        /* A relocated (PIE) binary's .text runs away from its link address. */
        int64_t bias = b->syms ? (int64_t)(k->text_addr - sym_table_text_addr(b->syms)) : 0;
        b->module = prof_modules_add(s->modules, &m, b->syms, bias);
        b->bias = bias;
        if (s->opts.verbose)
            qp_log(QP_LOG_INFO, "pid %" PRIu64 " (%s): .text hash %016" PRIx64 " %s%s", k->pid,
                   img->name, hash, b->syms ? "is " : "matches no file under --user-dir",
                   b->syms ? sym_table_path(b->syms) : "");
        binary_load_unwind(s, b, img);
        g_hash_table_insert(s->binaries, &b->hash, b);
    }
    img->bin = b;
    img->state = IMAGE_DONE;
    g_free(img->copy);
    img->copy = NULL;
}

/* The process's address space in the model once its image's .text hash named a binary: the OS
 * published one exec image, the whole space runs it. */
static const prof_space *image_space(prof_session *s, const struct proc_image *img)
{
    const struct user_binary *b = img->bin;
    prof_space *as =
        prof_model_space(s->model, PROF_SPACE_PROCESS, img->key.pid, img->key.generation);
    struct prof_map m = {.start = 0, .end = UINT64_MAX, .rank = PROF_RANK_SPACE, .known = true};
    m.bin = (struct prof_binary){.how = PROF_IDENT_HASH, .module = b->module, .unwind = b->space};
    prof_space_clear(as);
    prof_space_add(as, &m);
    return as;
}

/* --os none: the copied code page names its binary; the address space names the process. */
static void identify_aspace(prof_session *s, struct cpu_capture *c)
{
    if (c->page_state != PAGE_NONE)
        prof_aspace_add_page(s->aspaces, c->as, c->page_addr,
                             c->page_state == PAGE_COPIED ? c->page : NULL);
    if (!prof_aspace_is_process(c->as))
        return;
    c->as_label = prof_aspace_label(c->as);
    const struct unw_regs *user = c->vcpu.user         ? &c->vcpu.regs
                                  : c->have_trap       ? &c->trap
                                  : c->have_entry_regs ? &c->entry_regs
                                                       : NULL;
    if (!user)
        return;
    c->space = prof_aspace_space(c->as);
    const struct prof_map *m = prof_space_find(c->space, user->r[s->arch->pc_reg]);
    /* The entry's user pc is no code of this address space: the kernel stack belongs to another
     * (a switch in progress), so its user frames would be read from the wrong memory. */
    if (!c->vcpu.user && !(m && m->known))
        c->have_entry_regs = c->have_trap = false;
}

/* After the guest resumed: identify what was copied, fill the model, and give each vCPU its
 * address space there. Where several strategies know the task, --sysroot's mappings win, then
 * the code pages, then the image's hash. */
void session_identify_captured(prof_session *s)
{
    for (int i = 0; i < s->n_cpus; i++) {
        struct cpu_capture *c = &s->cap[i];
        if (c->img && c->img->state == IMAGE_COPIED)
            image_identify(s, c->img);
        c->space =
            c->img && c->img->state == IMAGE_DONE && c->img->bin ? image_space(s, c->img) : NULL;
        const prof_space *vmas = prof_sysroot_build(s->sysroot, c->uspace);
        if (c->as)
            identify_aspace(s, c);
        if (vmas && !c->task.user_leaf_only)
            c->space = vmas;
    }
}
