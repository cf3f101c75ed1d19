/* arch: the facts of one CPU architecture, one table per architecture (arch_<name>.c), chosen
 * once (by the target backend today; later from a kernel's e_machine or the gdbstub's
 * target.xml) and passed down. The core names no architecture: it asks the table.
 *
 * Modelled on drgn's struct drgn_architecture_info: what differs between architectures is data
 * or a function in the table, so that riscv64 or aarch64 is one new file that fills another
 * struct prof_arch and one line in arch.c. What the table does not hold yet, and where it is:
 * the frame-pointer and CFI rules come from libdwfl's backend for elf_machine (unwind/); the
 * mapping from a transport's register set to struct unw_regs is the backend's (target/); the
 * Linux kernel's saved-register frame is the adapter's (os/os_linux.c, linux/).
 *
 * The tables are static and live for the whole process. */
#ifndef PROF_ARCH_H
#define PROF_ARCH_H

#include <stdbool.h>
#include <stdint.h>

/* Where user and kernel code live in a virtual address space of this architecture. */
struct prof_addr_split {
    uint64_t user_end;     /* user addresses are below this */
    uint64_t kernel_start; /* kernel addresses are at or above this */
};

/* Reads the 8-byte little-endian word at guest-physical paddr: 0, or negative when paddr is not
 * RAM. */
typedef int (*prof_arch_phys_read_fn)(void *ctx, uint64_t paddr, uint64_t *val);

struct prof_arch {
    const char *name;             /* "x86_64": as people and ELF tools call it */
    uint16_t elf_machine;         /* EM_X86_64: which ELF files (--sysroot) belong to it */
    struct prof_addr_split split; /* canonical user and kernel halves */
    int pc_reg, sp_reg;           /* DWARF numbers of the pc and the stack pointer in unw_regs */
    int user_privilege;           /* the privilege level user code runs at (0: most privileged) */
    uint64_t as_root_mask;        /* the address bits of the address-space root register */
    /* Translates vaddr through the page tables rooted at root (the root register's value, flag
     * bits allowed). Returns 0 with *paddr and *page_size (the size of the page holding vaddr),
     * or -EFAULT when vaddr is not canonical, an entry is not present or a table is not in RAM. */
    int (*page_walk)(uint64_t root, uint64_t vaddr, prof_arch_phys_read_fn read_phys, void *ctx,
                     uint64_t *paddr, uint64_t *page_size);
};

extern const struct prof_arch prof_arch_x86_64;

/* The table for an ELF e_machine, NULL when qprof knows no such architecture. */
const struct prof_arch *prof_arch_for_elf(uint16_t elf_machine);

#endif
