/* The architecture-neutral kernel sources (abi.c, exec.c, sched.c, run.c) that both demo kernels
 * build, and the hooks each architecture provides for them. Included at the end of kernel.h
 * (x86_64) and riscv64/rv.h, after struct proc, struct cpu and trap_frame_t; each of those
 * headers defines ARCH_ELF_MACHINE (the e_machine it runs, also the qprof_abi regs_arch),
 * ARCH_ELF_PIE_BASE (where a static PIE goes; 0: ET_DYN is refused), abi_wmb() (orders the
 * header's fields before magic for another CPU) and proc_page_root() (what the slot's cr3
 * field holds). */
#ifndef GUEST_KCOMMON_H
#define GUEST_KCOMMON_H

/* ---- abi.c: the qprof ABI slots ---- */
#ifdef GUEST_NO_QPROF_ABI
/* A kernel that publishes nothing for qprof (riscv64-lowhalf): the shared code's calls go. */
#define abi_publish(slot, p, idle) ((void)(p))
#else
/* Every CPU writes only its own slot, so the seqlock needs no atomics. */
static inline void abi_write_begin(struct qprof_abi_cpu *slot)
{
    slot->seq++;
    barrier();
}

static inline void abi_write_end(struct qprof_abi_cpu *slot)
{
    barrier();
    slot->seq++;
}

/* Publishes p (or the idle context when idle) as current in this CPU's slot. */
void abi_publish(struct qprof_abi_cpu *slot, struct proc *p, int idle);
void abi_publish_header(int cpu_count); /* cpu_count, then magic: after every CPU is up */
void abi_publish_idle(void);            /* this CPU's slot: IDLE, before idle_loop */
void abi_enter_from_user(trap_frame_t *regs);
void abi_return_to_user(void);

/* Test aid (x86_64 command line abi_fault=VARIANT, guest/README.md): from now on publish a
 * hostile qprof_abi, so that tests can prove the profiler checks what it reads. */
enum abi_fault {
    ABI_FAULT_NONE,
    ABI_FAULT_SIZE,   /* size smaller than the struct the kernel built */
    ABI_FAULT_STRIDE, /* cpu_slot_size larger than the slots really are */
    ABI_FAULT_TEXT,   /* text_size 0x7fffffffffff in every slot */
    ABI_FAULT_NAME,   /* a name with no NUL, a ';' and a newline */
    ABI_FAULT_COUNT,  /* cpu_count 0xffffffff */
};
void abi_set_fault(enum abi_fault fault);
#endif

/* ---- exec.c: the ELF loader ---- */
#define ELF_PF_X 1u
#define ELF_PF_W 2u
#define ELF_PF_R 4u
/* Loads a static image into p's address space (set up by the caller); fills p's text,
 * eh_frame, load_base and generation; returns the entry point or 0. */
uint64_t elf_load(struct proc *p, const uint8_t *elf, size_t size);

/* ---- sched.c: processes and the scheduler ---- */
void sched_unlock(void); /* proc_first_entry: releases the lock the first switch took */
/* Marks DEAD and returns a process that no CPU runs (RUNNABLE or SLEEPING), or NULL. */
struct proc *sched_take_waiting(void);

/* ---- run.c: the command line and the run= list ---- */
struct program {
    const char *name;
    const uint8_t *start, *end;
};
extern const struct program programs[]; /* each arch's main.c: the embedded user programs */
extern const size_t programs_count;
const struct program *find_program(const char *name, size_t len);
/* Returns the value of option `key` ("run=") in cmdline, up to the next space, or NULL. */
const char *cmdline_value(const char *cmdline, const char *key, size_t *len);
void start_programs(const char *list, size_t len);

/* ---- fdt.c (riscv64, aarch64): QEMU's device tree ---- */
/* Copies /chosen/bootargs into cmdline (cap bytes, NUL-terminated; empty when none) and returns
 * the number of /cpus/cpu@N nodes (1 when there are none or fdt is no device tree). */
int fdt_scan(const uint8_t *fdt, char *cmdline, size_t cap);

/* ---- arch hooks, each arch's proc.c ---- */
void proc_space_new(struct proc *p); /* p's own page tables, sharing the kernel half */
/* Maps the zeroed frame pa at user va in p's address space, with the permissions that ELF
 * p_flags (ELF_PF_*) ask for. */
void proc_map_user_page(struct proc *p, uint64_t va, uint64_t pa, uint32_t elf_flags);
/* Builds, at the top of p's kernel stack, the user frame that starts p at entry and under it
 * the frame swtch pops into proc_first_entry; sets p->user_regs and p->ksp. */
void proc_init_frames(struct proc *p, uint64_t entry);
/* And static inline in each arch's header: arch_switch_space(next) (kernel stack for traps
 * from user mode and page tables, before swtch), arch_wait_for_interrupt() (interrupts off on
 * entry and on return), arch_after_tick(now) (the boot CPU's tick, sched_lock not held). */

#endif
