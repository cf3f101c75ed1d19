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

/* A run queue whose curr sits in anonymous structs: 3 levels deep (found), and 40 (past
 * os_current.c's bound of 16: refused, where the search used to recurse without a limit). */
#define ANON(member)                                                                               \
    struct {                                                                                       \
        member                                                                                     \
    };
#define ANON2(member)  ANON(ANON(member))
#define ANON4(member)  ANON2(ANON2(member))
#define ANON8(member)  ANON4(ANON4(member))
#define ANON32(member) ANON8(ANON8(ANON8(ANON8(member))))
struct shallow_rq {
    long nr_running;
    ANON2(ANON(struct task *curr;))
};
struct deep_rq {
    long nr_running;
    ANON32(ANON8(struct task *curr;))
};
__attribute__((section(".data..percpu"), used)) struct shallow_rq shallow_runqueues;
__attribute__((section(".data..percpu"), used)) struct deep_rq deep_runqueues;

__attribute__((section(".data..percpu"), used)) struct task *current_task;
__attribute__((section(".data..percpu"), used)) struct rq runqueues;

unsigned long __per_cpu_offset[4]; /* Linux's table: one base per CPU */
unsigned long *cpu_bases;          /* a kernel that allocates its table */
unsigned int small_offsets[4];     /* 4-byte entries */
struct task not_a_table[2];

/* --user-regs: xv6's layout (struct cpu cpus[] -> struct proc -> struct trapframe), and a
 * frame whose fields no usual name matches, named on the command line. */
struct trapframe {
    unsigned long kernel_satp, kernel_sp, kernel_trap, epc, kernel_hartid, ra, sp, gp, tp, t0, t1,
        t2, s0, s1;
};
struct proc {
    int pid;
    char name[16];
    struct trapframe *trapframe;
};
struct cpu {
    struct proc *proc;
};
struct cpu cpus[2];
struct odd_frame {
    unsigned long user_pc, user_stack, frame_ptr, link;
    int flags; /* no 8-byte register */
};
struct odd_frame *odd_frames[2];

void _start(void);
void _start(void)
{
    for (;;)
        __asm__ volatile("");
}
