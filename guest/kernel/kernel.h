/* qprof demo guest kernel: shared declarations. Freestanding; only the boot CPU runs. */
#ifndef GUEST_KERNEL_H
#define GUEST_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "qprof/guest_abi.h"
#include "../include/layout.h"

#define NOINLINE __attribute__((noinline, noclone))
#define barrier() __asm__ volatile("" ::: "memory")

/* Physical memory is mapped at KERNEL_VMA + pa for the first 1 GiB. */
#define P2V(pa) ((void *)((uint64_t)(pa) + KERNEL_VMA))
#define V2P(va) ((uint64_t)(va) - KERNEL_VMA)

/* ---- lib.c ---- */
void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
void kprintf(const char *fmt, ...);
void kputs_n(const char *s, size_t n);
__attribute__((noreturn)) void panic(const char *fmt, ...);

/* ---- arch.c ---- */
static inline void outb(uint16_t port, uint8_t v) { __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port)); }
static inline uint8_t inb(uint16_t port)
{
    uint8_t v;
    __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}
static inline uint64_t read_cr3(void)
{
    uint64_t v;
    __asm__ volatile("mov %%cr3, %0" : "=r"(v));
    return v;
}
static inline void write_cr3(uint64_t v) { __asm__ volatile("mov %0, %%cr3" ::"r"(v) : "memory"); }
static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}
void serial_init(void);
void serial_putc(char c);
void arch_init(void); /* GDT+TSS, IDT, PIC, PIT */
void tss_set_rsp0(uint64_t rsp0);
union clock_page {
    volatile uint64_t ticks;
    uint8_t page[4096];
};
extern union clock_page clock_page; /* clock_page.ticks: timer ticks since boot */

/* ---- mm.c ---- */
void mm_init(uint64_t free_start_pa, uint64_t free_end_pa);
uint64_t frame_alloc(void); /* zeroed 4 KiB frame, physical address */
uint64_t kernel_pml4_pa(void);
uint64_t pml4_new(void); /* a fresh address space sharing the kernel half */
void map_page(uint64_t pml4_pa, uint64_t va, uint64_t pa, uint64_t flags);
#define PTE_P 1ull
#define PTE_W 2ull
#define PTE_U 4ull

/* ---- proc.c ---- */
extern struct qprof_abi qprof_abi;
#define MAX_PROCS 8
#define KSTACK_SIZE 16384
enum proc_state { P_FREE, P_RUNNABLE, P_SLEEPING, P_DEAD };

struct proc {
    int pid;
    enum proc_state state;
    char name[QPROF_ABI_NAME_LEN];
    uint64_t ksp;        /* saved kernel stack pointer (swtch) */
    uint64_t kstack_lo, kstack_hi;
    uint64_t cr3;
    uint64_t user_regs;  /* kernel VA of the frame saved by the innermost entry from user mode */
    uint64_t wake_tick;
    uint64_t text_addr, text_size, eh_frame_addr, eh_frame_size, load_base, generation;
};

extern struct proc *current;
void proc_init(void);
int proc_spawn(const char *name, const uint8_t *elf, size_t elf_size);
void schedule(void);       /* interrupts off */
void timer_tick(void);     /* interrupts off */
void proc_sleep_until(uint64_t tick);
__attribute__((noreturn)) void proc_exit(int code);
__attribute__((noreturn)) void idle_loop(void);
void abi_init(void);
void abi_enter_from_user(struct qprof_abi_regs *regs);
void abi_return_to_user(void);

/* Test aid (command line abi_fault=VARIANT, guest/README.md): from now on publish a hostile
 * qprof_abi, so that tests can prove the profiler checks what it reads. */
enum abi_fault {
    ABI_FAULT_NONE,
    ABI_FAULT_SIZE,   /* size smaller than the struct the kernel built */
    ABI_FAULT_STRIDE, /* cpu_slot_size larger than the slots really are */
    ABI_FAULT_TEXT,   /* text_size 0x7fffffffffff in every slot */
    ABI_FAULT_NAME,   /* a name with no NUL, a ';' and a newline */
    ABI_FAULT_COUNT,  /* cpu_count 0xffffffff */
};
void abi_set_fault(enum abi_fault fault);

/* ---- syscall.c ---- */
void syscall_dispatch(struct qprof_abi_regs *regs);

/* ---- entry.S ---- */
void swtch(uint64_t *old_ksp, uint64_t new_ksp);
void proc_first_entry(void);
extern uint64_t isr_table[48];

/* ---- linker symbols ---- */
extern char __text_start[], __text_end[], __kernel_end[];
extern char boot_stack_lo[], boot_stack_hi[];

#endif
