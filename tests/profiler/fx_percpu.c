/* A kernel in miniature for --current's per_cpu() (test_current_percpu.c): per-CPU variables
 * the way Linux lays them out (their addresses are offsets added to each CPU's base, which a
 * table holds), built with -g and linked with no libc. Never run: only its DWARF is read. */
struct task {
    int pid;
    char comm[16];
};

struct rq {
    long nr_running;
    struct task *curr;
};

__attribute__((section(".data..percpu"), used)) struct task *current_task;
__attribute__((section(".data..percpu"), used)) struct rq runqueues;

unsigned long __per_cpu_offset[4]; /* Linux's table: one base per CPU */
unsigned long *cpu_bases;          /* a kernel that allocates its table */
unsigned int small_offsets[4];     /* 4-byte entries */
struct task not_a_table[2];

void _start(void);
void _start(void)
{
    for (;;)
        __asm__ volatile("");
}
