/* Private to sampler/: one model of what runs where, address space -> mappings -> binary, the
 * shape of perf's machine -> maps -> map -> dso.
 *
 * Each way of identifying user code fills it, and stack building (stacks.c) asks it, and only
 * it, which binary, module and unwind tables a user pc has:
 * - a .text hash (session.c's process images, for an OS that publishes its exec image, the
 *   demo ABI's table): the whole address space runs the binary whose .text matched;
 * - a build-id (sysroot.c: a --sysroot file) or the guest's own mapped .eh_frame (memimage.c),
 *   one mapping each of the exec mappings the OS adapter's VMAs gave (Linux);
 * - code pages (aspace.c, --os none): one mapping per copied page, and the .text of the binary
 *   the address space matched.
 *
 * The session owns the model and hands it to the fillers; one reset forgets every address space
 * when the guest reboots. Calls nothing else in sampler/. */
#ifndef PROF_MODEL_H
#define PROF_MODEL_H

#include "os.h"
#include "unwind.h"

#include <stdbool.h>
#include <stdint.h>

/* How a binary was identified. */
enum prof_ident {
    PROF_IDENT_NONE,       /* a mapping whose file nothing identified */
    PROF_IDENT_HASH,       /* its .text hash matched (or was new): session.c */
    PROF_IDENT_BUILD_ID,   /* a --sysroot file with the guest's build-id: sysroot.c */
    PROF_IDENT_GUEST_COPY, /* the guest's own mapped file, copied out of its memory: memimage.c */
    PROF_IDENT_CODE_PAGE,  /* a copied page of its code matched: aspace.c */
};

/* What kind of key names an address space: the fillers' keys live in different spaces. */
enum prof_space_kind {
    PROF_SPACE_PROCESS, /* a process image: pid and generation (.text hash) */
    PROF_SPACE_VMAS,    /* the OS adapter's address space: its id and generation (sysroot.c) */
    PROF_SPACE_ROOT,    /* --os none: an address space's number (aspace.c) */
};

/* A binary as a mapping runs it (perf's dso, with the load bias its map gives it). */
struct prof_binary {
    enum prof_ident how;
    uint32_t module;   /* its index in the profile's modules; OUT_NO_MODULE: none */
    unw_space *unwind; /* borrowed from its filler: its own unwind tables; NULL: none */
};

/* Mappings of one address space are ranked: where two hold a pc, the higher rank answers (a
 * copied page knows better than the .text range its address space matched). */
enum prof_map_rank { PROF_RANK_SPACE, PROF_RANK_TEXT, PROF_RANK_VMA, PROF_RANK_PAGE };

/* One range of an address space and what runs there (perf's map). */
struct prof_map {
    uint64_t start, end; /* [start, end) */
    enum prof_map_rank rank;
    bool known;   /* bin says what runs here; false: nothing identified it (a page no file has) */
    bool trusted; /* the unwinder has this range's own CFI (a VMA's; see prof_space_strict) */
    bool named;   /* bin.module names its pcs, trusted or not (a VMA's .dynsym alone) */
    struct prof_binary bin;
    struct prof_mapping vma; /* the mapped file as the OS sees it; vma.name[0] 0 when none */
};

typedef struct prof_model prof_model;
typedef struct prof_space prof_space; /* one address space */

prof_model *prof_model_new(void);
void prof_model_free(prof_model *m); /* NULL is a no-op */
/* The guest rebooted: every address space is forgotten (pointers to them must be dropped). */
void prof_model_reset(prof_model *m);
/* Forgets the address spaces of one kind (their filler dropped what they borrow from it). */
void prof_model_forget(prof_model *m, enum prof_space_kind kind);
/* How many address spaces the model holds. */
unsigned prof_model_spaces(const prof_model *m);

/* The address space (kind, id, generation), made empty when new. Borrowed until reset or a
 * forget of its kind. */
prof_space *prof_model_space(prof_model *m, enum prof_space_kind kind, uint64_t id,
                             uint64_t generation);
/* The address space when the model has it, else NULL. */
prof_space *prof_model_find(const prof_model *m, enum prof_space_kind kind, uint64_t id,
                            uint64_t generation);

/* Filling. The mappings, and the space's unwind tables, are borrowed from the filler, which
 * forgets the space (prof_model_forget) before it frees them. */
void prof_space_clear(prof_space *as); /* drops every mapping */
void prof_space_add(prof_space *as, const struct prof_map *map);
/* Unwind tables that cover the whole space (sysroot.c's, every verified file in one), NULL:
 * each binary's own. A strict space's walks trust only frames in trusted mappings. */
void prof_space_set_unwind(prof_space *as, unw_space *unwind, bool strict);

/* Asking. NULL as answers NULL. */
/* The mapping holding pc: the highest rank, the first added among equals; NULL when none. */
const struct prof_map *prof_space_find(const prof_space *as, uint64_t pc);
/* The unwind tables of the whole space, NULL when its binaries carry their own. */
unw_space *prof_space_unwind(const prof_space *as);
bool prof_space_strict(const prof_space *as);
/* How many trusted mappings were identified `how`. */
int prof_space_count(const prof_space *as, enum prof_ident how);

#endif
