#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output.h"
#include "unwind.h"

void prof_options_init(struct prof_options *o)
{
    memset(o, 0, sizeof *o);
    o->qmp_socket = "./qmp-socket";
    o->interval_ms = 10;
    o->duration_s = 5;
    o->max_depth = UNW_DEFAULT_MAX_DEPTH;
    o->cpu_mask = UINT64_MAX;
    o->memory_backend = "auto";
    o->top = 10;
    o->progress = isatty(STDERR_FILENO);
}

/* qprof top's part of the help, in both qprof --help (the man page) and qprof top --help. */
static void print_top_options(FILE *out)
{
    fputs("Live view (qprof top [OPTIONS]: every option above but --one-shot, sampling until q):\n"
          "  -d, --delay S          refresh the view every S seconds [1]\n"
          "  --window S             the table covers the last S seconds [5]; w toggles it with\n"
          "                         everything since the start (or since z)\n"
          "  --batch                plain-text snapshots on stdout every -d seconds, as top -b\n"
          "                         (also when stdout is not a terminal)\n"
          "  -n, --iterations N     stop after N snapshots (refreshes)\n"
          "  keys: q quit; k/u/a kernel, user, all; p pick a process; c pick a vCPU; s sort by\n"
          "  self or total; w window or since start; Up/Down and Enter: a function's callers\n"
          "  (the hottest stacks through it; Esc back); z zero; space pause the display (not\n"
          "  the sampling). -o FILE writes the usual outputs and the record at the end; the\n"
          "  summary then goes to stderr. NO_COLOR set: no colours.\n",
          out);
}

void prof_print_top_help(FILE *out)
{
    fputs("Usage: qprof top [OPTIONS]\n"
          "A live view of a guest running under QEMU: which functions are hot now, in which\n"
          "processes and on which vCPUs, refreshed every second until q. Every target, OS and\n"
          "symbol option of qprof applies (qprof --help): --qmp-socket, --gdb, --plugin,\n"
          "--kernel, --user-dir, --os, --sysroot, --interval, --cpus, ...\n"
          "\n",
          out);
    print_top_options(out);
    fputs("\nExit status: 0 after q, Ctrl-C or -n; 1 runtime failure (no QEMU, QEMU gone);\n"
          "2 usage error.\n"
          "\nEXAMPLES\n"
          "  qprof top --gdb tcp:localhost:1234 --kernel kernel.elf --user-dir bin/\n"
          "      the live view over the gdbstub\n"
          "  qprof top --qmp-socket ./qmp-socket --interval 1 --batch -n 3 -d 2\n"
          "      three text snapshots two seconds apart, sampling at ~1 kHz\n",
          out);
}

void prof_print_help(FILE *out)
{
    fputs(
        "Usage: qprof [OPTIONS]\n"
        "       qprof record [OPTIONS] -o FILE      sample into a record file\n"
        "       qprof report -i FILE [OPTIONS]      write any output from it (report --help)\n"
        "       qprof top [OPTIONS]                 a live view of the hottest functions\n"
        "       qprof diff BASE NEW [OPTIONS]       compare two profiles (diff --help)\n"
        "       qprof annotate -i FILE [FUNCTION]   a function's instructions with their samples\n"
        "                                           (annotate --help)\n"
        "Sample a guest running under QEMU through its QMP socket: every interval the guest is\n"
        "stopped for a moment, each vCPU's kernel and user stack is unwound with DWARF CFI, and\n"
        "the stacks are counted. Output is one folded stack per line (\"frame;frame;leaf "
        "COUNT\"),\n"
        "root first: the process as \"name (pid)\", or \"kernel\", or \"idle\" for a halted vCPU.\n"
        "Open it in speedscope (https://www.speedscope.app) or flamegraph.pl.\n"
        "\n"
        "QEMU must be started with a QMP socket, e.g.\n"
        "  qemu-system-x86_64 ... -qmp unix:./qmp-socket,server,nowait\n"
        "and, for memory reads without round trips, guest RAM in a shared file:\n"
        "  -object memory-backend-file,id=ram,size=256M,mem-path=/dev/shm/ram,share=on\n"
        "  -machine memory-backend=ram\n"
        "(qemu-system-riscv64 too, which needs the shared RAM file over QMP; and\n"
        "qemu-system-aarch64, whose memory QMP reads by memsave: QEMU translates.)\n"
        "\n"
        "Connection:\n"
        "  --qmp-socket PATH|tcp:HOST:PORT  QMP socket of the QEMU to profile [./qmp-socket]\n"
        "                                   (-qmp unix:PATH,... or -qmp tcp:HOST:PORT,...)\n"
        "  --gdb unix:PATH|tcp:HOST:PORT    profile through QEMU's gdbstub (QEMU started with\n"
        "                                   -gdb, e.g. -gdb tcp::1234, or -s): the guest is\n"
        "                                   paused 3-5x less per sample than through QMP. With\n"
        "                                   --qmp-socket too, QMP finds the shared RAM file and\n"
        "                                   tells qprof's stops from anyone else's. Without it,\n"
        "                                   a pause that begins while qprof runs is left alone,\n"
        "                                   but one from before qprof attached (a monitor's\n"
        "                                   stop, -S) looks like qprof's own attach stop to the\n"
        "                                   stub and is resumed: give --qmp-socket for such a VM\n"
        "                                   (tcp::PORT, as QEMU writes it, means this machine)\n"
        "  --plugin unix:PATH               sample through qprof-plugin.so inside QEMU 10 (TCG;\n"
        "                                   QEMU started with -plugin PATH/qprof-plugin.so,\n"
        "                                   socket=PATH): the guest never stops, each vCPU is\n"
        "                                   sampled on its own thread. With --qmp-socket too,\n"
        "                                   user code is identified from the shared RAM file\n"
        "                                   and a monitor's pause is told from a halt (without,\n"
        "                                   a paused guest shows as idle)\n"
        "  --transport auto|qmp|gdb         which to sample through [auto: the gdbstub when\n"
        "                                   --gdb is given and it answers, else QMP]\n"
        "  --memory auto|direct|process|memsave|hmp\n"
        "                                   how to read guest memory [auto: direct if RAM is\n"
        "                                   a shared file, else process (out of the QEMU\n"
        "                                   process on this host, proved by content), else\n"
        "                                   memsave over QMP, `m` packets over the gdbstub;\n"
        "                                   aarch64 over QMP: memsave]\n"
        "Sampling:\n"
        "  --interval MS          mean time between samples, jittered +-50% to avoid locking\n"
        "                         onto the guest's timer; at least 0.1 (the plugin raises\n"
        "                         less to 0.1 too) [10]\n"
        "  --duration S           how long to sample; 0 = until Ctrl-C [5, or no limit\n"
        "                         when --samples is given]\n"
        "  --samples N            stop after N samples (one sample = every selected vCPU at\n"
        "                         one stop; one vCPU through --plugin); with --duration,\n"
        "                         whichever comes first\n"
        "  --period-insns N       --plugin: sample each vCPU every ~N guest instructions\n"
        "                         (jittered +-50%) instead of every --interval (the\n"
        "                         counter trigger); at least 100, the plugin's floor too\n"
        "  --plugin-trigger auto|timer|counter\n"
        "                         --plugin: how a vCPU is told to sample. timer: a host\n"
        "                         thread wakes once per interval and flags the vCPUs\n"
        "                         (its wake-ups cost the guest nothing on a CPU of their\n"
        "                         own, much on the vCPU's: ~50 us each on a VM); counter:\n"
        "                         every translated block counts its instructions and the\n"
        "                         vCPU keeps time itself (about 10-17% of the guest's work,\n"
        "                         sampling or not; no wake-ups). auto: the plugin's own\n"
        "                         default (trigger= of -plugin), else the timer where the\n"
        "                         host has a CPU to spare beside the vCPU threads, or where\n"
        "                         its wake-ups, at the cost the plugin measured on this\n"
        "                         host, take less of the vCPUs' CPUs than the counter's 17%;\n"
        "                         the counter otherwise, and always for --period-insns.\n"
        "                         The summary says which ran and why. Changing it flushes\n"
        "                         QEMU's code cache once [auto]\n"
        "  --exact                --plugin: also count every guest instruction executed\n"
        "                         (kernel and user, every vCPU, from the start of the run),\n"
        "                         per function: inline counters per translated block, no\n"
        "                         sampling. A flat profile beside the sampled stacks: each\n"
        "                         folded -o FILE.EXT gets FILE.exact.EXT with one line per\n"
        "                         function, \"BINARY;FUNCTION INSTRUCTIONS\" (BINARY: kernel,\n"
        "                         or the --user-dir binary whose code ran, all its processes\n"
        "                         summed); a pprof -o gets the sample type instructions\n"
        "                         (pprof -sample_index=instructions); the summary lists the\n"
        "                         top functions. Costs more guest time while it counts\n"
        "  --cpus LIST            vCPUs to sample, e.g. 0 or 0,2-3 [all]\n"
        "  --kernel-only          keep only samples taken in kernel mode (incl. idle)\n"
        "  --user-only            keep only samples taken in user mode\n"
        "  --max-depth N          frames per stack before it is cut as [truncated] [128]\n"
        "Symbols:\n"
        "  --kernel ELF|MAP       guest kernel ELF (symbols, CFI, the qprof_abi struct), or a\n"
        "                         System.map / kallsyms file (symbols only)\n"
        "  --kernel-slide OFFSET  add OFFSET to kernel addresses (relocated/KASLR kernels)\n"
        "  --user-dir DIR         directory of user ELF binaries, searched recursively and\n"
        "                         matched to processes by the hash of their .text; repeatable\n"
        "  --abi-addr ADDR        address of the guest's struct qprof_abi when the kernel ELF\n"
        "                         is not given (see docs/guest-abi.md)\n"
        "  --os auto|qprof-abi|linux|none what the guest kernel tells about processes [auto:\n"
        "                         the qprof_abi struct when the kernel ELF has it or --abi-addr\n"
        "                         is given; none when --kernel is neither that nor Linux; else\n"
        "                         linux when guest RAM holds a Linux kernel's vmcoreinfo];\n"
        "                         with none, each address space is a process named after\n"
        "                         the --user-dir binary its code pages match (\"spin [as 1]\")\n"
        "  --vmcoreinfo FILE      a Linux guest's vmcoreinfo text, instead of scanning its RAM\n"
        "  --current EXPR         (implies --os none) each vCPU's current process: a path over\n"
        "                         the --kernel ELF's globals and DWARF types, $cpu for the vCPU,\n"
        "                         e.g. 'cpus[$cpu].proc'; per_cpu(VAR) is a per-CPU variable,\n"
        "                         e.g. 'per_cpu(current_task)' (docs/profile-your-os.md)\n"
        "  --current-pid FIELD    its pid field [pid]\n"
        "  --current-name FIELD   its name field [name, else comm]\n"
        "  --percpu-offsets VAR   per_cpu()'s table of each CPU's per-CPU base\n"
        "                         [__per_cpu_offset]\n"
        "  --user-regs EXPR[:ROLE=FIELD,...]\n"
        "                         (implies --os none) where the kernel saved the user registers\n"
        "                         of a kernel-mode vCPU's process, a path as --current's, e.g.\n"
        "                         'cpus[$cpu].proc->trapframe'; the struct's fields are taken\n"
        "                         by name (pc: epc sepc pc rip elr; sp: sp rsp; fp: s0 fp rbp\n"
        "                         x29; ra: ra x30 lr), or as named: 'EXPR:pc=user_pc,sp=usp';\n"
        "                         the user stack is read in the process's own table, which\n"
        "                         needs guest-physical reads (not the gdbstub's alone)\n"
        "  --sysroot DIR          the guest's root filesystem, e.g. its image mounted\n"
        "                         read-only; user binaries and libraries are matched by path\n"
        "                         and verified by build-id, then user stacks are unwound with\n"
        "                         their DWARF CFI (Linux guests; without it: the leaf only)\n"
        "Output:\n"
        "  -o, --output FILE      write the profile to FILE in the format its name ends with:\n"
        "                         .speedscope.json (speedscope, with a timeline), .pb.gz\n"
        "                         (pprof), .svg (flame graph), .data (record file for qprof\n"
        "                         report), anything else folded stacks (\"-\": on stdout).\n"
        "                         Repeatable. The summary goes to stderr then; without -o\n"
        "                         only the summary is printed.\n"
        "  --format NAME          folded, speedscope, pprof or svg for every -o, whatever the\n"
        "                         names say\n"
        "  --per-cpu              root every stack at its vCPU (cpu0;...); speedscope: one\n"
        "                         profile per vCPU\n"
        "  --top N                rows in the summary's top lists [10]\n"
        "  --one-shot             print the current stack of every vCPU and exit\n"
        "  --show-addresses       with --one-shot: print each frame's address\n"
        "  --no-progress          no live progress line on stderr\n"
        "  --progress             the progress line even when stderr is not a terminal\n"
        "  -v, --verbose          explain what is loaded and why samples fail\n"
        "  -h, --help             this text;  --version  the version\n",
        out);
    print_top_options(out);
    fputs(
        "\n"
        "Exit status: 0 success (also after Ctrl-C, SIGTERM or SIGHUP, with what was sampled\n"
        "written), 1 runtime failure (no QEMU, QEMU gone mid-run, an output that cannot be\n"
        "written: what was sampled is still written where possible), 2 usage error.\n"
        "\n"
        "EXAMPLES\n"
        "  qprof --qmp-socket ./qmp-socket -o stack.folded --kernel kernel.elf --user-dir bin/\n"
        "  qprof --gdb tcp:localhost:1234 -o stack.folded --kernel kernel.elf --user-dir bin/\n"
        "      sample for 5 s at ~100 Hz, write stack.folded, print a summary\n"
        "  qprof --one-shot --show-addresses --kernel kernel.elf\n"
        "      print what every vCPU is doing right now\n"
        "  qprof --samples 5000 -o stack.folded -o profile.speedscope.json -o flame.svg\n"
        "      take 5000 samples, write folded stacks, speedscope JSON and a flame graph\n"
        "  qprof record --duration 60 -o qprof.data; qprof report -i qprof.data --pid 3 -o "
        "p.pb.gz\n"
        "      record a minute, then a pprof profile of process 3 from the record\n"
        "  qprof diff before.data after.data -o diff.svg\n"
        "      what changed between two records: a table by function, a differential flame graph\n"
        "  qprof annotate -i qprof.data hot_a --user-dir bin/\n"
        "      hot_a's instructions with the samples taken at each\n"
        "  qprof --samples 5000 --interval 1 -o stack.folded\n"
        "      take exactly 5000 samples at ~1 kHz, however long that takes\n"
        "  qprof --duration 0 --interval 1 -o - > stack.folded\n"
        "      sample at ~1 kHz until Ctrl-C, folded stacks on stdout\n"
        "  qprof --plugin unix:./qprof-plugin --qmp-socket ./qmp-socket --exact --duration 10 \\\n"
        "        --kernel kernel.elf --user-dir bin/ -o stack.folded -o p.pb.gz\n"
        "      sampled stacks in stack.folded, exact instructions per function in\n"
        "      stack.exact.folded, both in p.pb.gz\n"
        "  qprof --qmp-socket ./qmp-socket --sysroot /mnt/guest-root -o linux.folded\n"
        "      a Linux guest: kernel stacks by ORC, user stacks by its own files' CFI\n"
        "  qprof --kernel-only --kernel System.map --kernel-slide 0x1e00000 -o k.folded\n"
        "      profile a relocated kernel whose ELF you don't have\n",
        out);
}

/* Parses a number with strtod/strtoull and checks its range, naming the flag on error. */
static int parse_double(const char *flag, const char *text, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || v < lo || v > hi) {
        fprintf(stderr, "qprof: %s: '%s' is not a number from %g to %g\n", flag, text, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_int(const char *flag, const char *text, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        fprintf(stderr, "qprof: %s: '%s' is not a whole number from %ld to %ld\n", flag, text, lo,
                hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_u64(const char *flag, const char *text, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    if (text[0] == '-') {
        fprintf(stderr, "qprof: %s: '%s' must not be negative\n", flag, text);
        return -1;
    }
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || end == text || *end) {
        fprintf(stderr, "qprof: %s: '%s' is not an address (e.g. 0xffffffff80100000)\n", flag,
                text);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_i64(const char *flag, const char *text, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 0);
    if (errno || end == text || *end) {
        fprintf(stderr, "qprof: %s: '%s' is not a number (e.g. 0x1e00000 or -4096)\n", flag, text);
        return -1;
    }
    *out = v;
    return 0;
}

int prof_parse_cpu_list(const char *text, uint64_t *mask, struct qp_error *err)
{
    uint64_t m = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long lo = strtol(p, &end, 10), hi;
        if (end == p || lo < 0 || lo > 63)
            return qp_error_set(err, -EINVAL, "'%s' is not a list of vCPUs 0..63 like 0,2-3", text);
        hi = lo;
        p = end;
        if (*p == '-') {
            hi = strtol(p + 1, &end, 10);
            if (end == p + 1 || hi < lo || hi > 63)
                return qp_error_set(err, -EINVAL, "'%s': bad range in the vCPU list", text);
            p = end;
        }
        for (long c = lo; c <= hi; c++)
            m |= UINT64_C(1) << c;
        if (*p == ',')
            p++;
        else if (*p)
            return qp_error_set(err, -EINVAL, "'%s' is not a list of vCPUs like 0,2-3", text);
    }
    if (!m)
        return qp_error_set(err, -EINVAL, "the vCPU list is empty");
    *mask = m;
    return 0;
}

enum {
    OPT_QMP = 1000,
    OPT_GDB,
    OPT_TRANSPORT,
    OPT_PLUGIN,
    OPT_PERIOD_INSNS,
    OPT_EXACT,
    OPT_PLUGIN_TRIGGER,
    OPT_INTERVAL,
    OPT_DURATION,
    OPT_ONE_SHOT,
    OPT_SHOW_ADDR,
    OPT_KERNEL_ONLY,
    OPT_USER_ONLY,
    OPT_KERNEL,
    OPT_KERNEL_SLIDE,
    OPT_USER_DIR,
    OPT_MAX_DEPTH,
    OPT_CPUS,
    OPT_ABI_ADDR,
    OPT_MEMORY,
    OPT_OS,
    OPT_VMCOREINFO,
    OPT_CURRENT,
    OPT_CURRENT_PID,
    OPT_CURRENT_NAME,
    OPT_PERCPU_OFFSETS,
    OPT_USER_REGS,
    OPT_SYSROOT,
    OPT_TOP,
    OPT_NO_PROGRESS,
    OPT_PROGRESS,
    OPT_SAMPLES,
    OPT_FORMAT,
    OPT_PER_CPU,
    OPT_VERSION,
    OPT_BATCH,
    OPT_WINDOW,
};

static const struct option long_options[] = {
    {"qmp-socket", required_argument, NULL, OPT_QMP},
    {"gdb", required_argument, NULL, OPT_GDB},
    {"transport", required_argument, NULL, OPT_TRANSPORT},
    {"plugin", required_argument, NULL, OPT_PLUGIN},
    {"period-insns", required_argument, NULL, OPT_PERIOD_INSNS},
    {"exact", no_argument, NULL, OPT_EXACT},
    {"plugin-trigger", required_argument, NULL, OPT_PLUGIN_TRIGGER},
    {"output", required_argument, NULL, 'o'},
    {"interval", required_argument, NULL, OPT_INTERVAL},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"one-shot", no_argument, NULL, OPT_ONE_SHOT},
    {"show-addresses", no_argument, NULL, OPT_SHOW_ADDR},
    {"verbose", no_argument, NULL, 'v'},
    {"kernel-only", no_argument, NULL, OPT_KERNEL_ONLY},
    {"user-only", no_argument, NULL, OPT_USER_ONLY},
    {"kernel", required_argument, NULL, OPT_KERNEL},
    {"kernel-slide", required_argument, NULL, OPT_KERNEL_SLIDE},
    {"user-dir", required_argument, NULL, OPT_USER_DIR},
    {"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"abi-addr", required_argument, NULL, OPT_ABI_ADDR},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"os", required_argument, NULL, OPT_OS},
    {"vmcoreinfo", required_argument, NULL, OPT_VMCOREINFO},
    {"current", required_argument, NULL, OPT_CURRENT},
    {"current-pid", required_argument, NULL, OPT_CURRENT_PID},
    {"current-name", required_argument, NULL, OPT_CURRENT_NAME},
    {"percpu-offsets", required_argument, NULL, OPT_PERCPU_OFFSETS},
    {"user-regs", required_argument, NULL, OPT_USER_REGS},
    {"sysroot", required_argument, NULL, OPT_SYSROOT},
    {"top", required_argument, NULL, OPT_TOP},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"progress", no_argument, NULL, OPT_PROGRESS},
    {"samples", required_argument, NULL, OPT_SAMPLES},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"per-cpu", no_argument, NULL, OPT_PER_CPU},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    /* qprof top's own (top_option) */
    {"delay", required_argument, NULL, 'd'},
    {"iterations", required_argument, NULL, 'n'},
    {"batch", no_argument, NULL, OPT_BATCH},
    {"window", required_argument, NULL, OPT_WINDOW},
    {NULL, 0, NULL, 0},
};

static int usage_error(void)
{
    fprintf(stderr, "Try 'qprof --help' for more information.\n");
    return PROF_EXIT_USAGE;
}

static bool valid_backend(const char *name)
{
    static const char *const names[] = {"auto", "direct", "process", "memsave", "hmp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

/* Applies one option; returns 0, or -1 after printing what is wrong. */
static int apply_option(struct prof_options *o, int c, const char *arg, bool *duration_given)
{
    struct qp_error err = {0};
    switch (c) {
    case OPT_QMP:
        o->qmp_socket = arg;
        o->qmp_socket_given = true;
        return 0;
    case OPT_TRANSPORT:
        if (strcmp(arg, "auto") == 0)
            o->transport = PROF_TRANSPORT_AUTO;
        else if (strcmp(arg, "qmp") == 0)
            o->transport = PROF_TRANSPORT_QMP;
        else if (strcmp(arg, "gdb") == 0)
            o->transport = PROF_TRANSPORT_GDB;
        else {
            fprintf(stderr, "qprof: --transport: '%s' is not one of auto, qmp, gdb\n", arg);
            return -1;
        }
        return 0;
    case OPT_PLUGIN:
        if (strncmp(arg, "unix:", 5) != 0 || !arg[5]) {
            fprintf(stderr, "qprof: --plugin: '%s' is not unix:PATH\n", arg);
            return -1;
        }
        o->plugin_address = arg;
        o->transport = PROF_TRANSPORT_PLUGIN;
        return 0;
    case OPT_PERIOD_INSNS: {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        if (errno || !end || *end || v < 100 || v > (1ull << 40)) {
            fprintf(stderr, "qprof: --period-insns: '%s' is not a number from 100 to 2^40\n", arg);
            return -1;
        }
        o->period_insns = v;
        return 0;
    }
    case OPT_EXACT:
        o->exact = true;
        return 0;
    case OPT_PLUGIN_TRIGGER:
        if (strcmp(arg, "auto") == 0)
            o->plugin_trigger = PROF_PLUGIN_TRIGGER_AUTO;
        else if (strcmp(arg, "timer") == 0)
            o->plugin_trigger = PROF_PLUGIN_TRIGGER_TIMER;
        else if (strcmp(arg, "counter") == 0)
            o->plugin_trigger = PROF_PLUGIN_TRIGGER_COUNTER;
        else {
            fprintf(stderr, "qprof: --plugin-trigger: '%s' is not auto, timer or counter\n", arg);
            return -1;
        }
        o->plugin_trigger_given = true;
        return 0;
    case OPT_GDB:
        if ((strncmp(arg, "tcp:", 4) != 0 && strncmp(arg, "unix:", 5) != 0) ||
            !arg[strncmp(arg, "tcp:", 4) == 0 ? 4 : 5]) {
            fprintf(stderr, "qprof: --gdb: '%s' is not tcp:HOST:PORT or unix:PATH\n", arg);
            return -1;
        }
        o->gdb_address = arg;
        return 0;
    case 'o':
        if (o->n_outputs == PROF_MAX_OUTPUTS) {
            fprintf(stderr, "qprof: -o: at most %d outputs\n", PROF_MAX_OUTPUTS);
            return -1;
        }
        if (!o->output)
            o->output = arg;
        o->outputs[o->n_outputs++] = arg;
        return 0;
    case OPT_FORMAT:
        if (out_format_from_name(arg) < 0 || out_format_from_name(arg) == OUT_RECORD) {
            fprintf(stderr, "qprof: --format: '%s' is not one of folded, speedscope, pprof, svg\n",
                    arg);
            return -1;
        }
        o->format = arg;
        return 0;
    case OPT_PER_CPU:
        o->per_cpu = true;
        return 0;
    case OPT_INTERVAL:
        if (parse_double("--interval", arg, 0.1, 60000, &o->interval_ms))
            return -1;
        return 0;
    case OPT_DURATION:
        *duration_given = true;
        return parse_double("--duration", arg, 0, 86400 * 7, &o->duration_s);
    case OPT_ONE_SHOT:
        o->one_shot = true;
        return 0;
    case OPT_SHOW_ADDR:
        o->show_addresses = true;
        return 0;
    case 'v':
        o->verbose = true;
        return 0;
    case OPT_KERNEL_ONLY:
    case OPT_USER_ONLY: {
        enum prof_mode_filter want = c == OPT_KERNEL_ONLY ? PROF_KERNEL_ONLY : PROF_USER_ONLY;
        if (o->mode_filter != PROF_ALL_MODES && o->mode_filter != want) {
            fprintf(stderr, "qprof: --kernel-only and --user-only exclude each other\n");
            return -1;
        }
        o->mode_filter = want;
        return 0;
    }
    case OPT_KERNEL: {
        /* Said before anything connects: with no QEMU running either, the typo is the news. */
        struct stat st;
        if (stat(arg, &st) != 0) {
            fprintf(stderr, "qprof: --kernel: '%s': %s\n", arg, strerror(errno));
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            fprintf(stderr, "qprof: --kernel: '%s' is not a file (an ELF or a System.map)\n", arg);
            return -1;
        }
        o->kernel = arg;
        return 0;
    }
    case OPT_KERNEL_SLIDE:
        return parse_i64("--kernel-slide", arg, &o->kernel_slide);
    case OPT_USER_DIR: {
        if (o->n_user_dirs == PROF_MAX_USER_DIRS) {
            fprintf(stderr, "qprof: --user-dir: at most %d directories\n", PROF_MAX_USER_DIRS);
            return -1;
        }
        struct stat st;
        if (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "qprof: --user-dir: '%s' is not a directory\n", arg);
            return -1;
        }
        o->user_dirs[o->n_user_dirs++] = arg;
        return 0;
    }
    case OPT_MAX_DEPTH:
        return parse_int("--max-depth", arg, 1, 1024, &o->max_depth);
    case OPT_CPUS:
        if (prof_parse_cpu_list(arg, &o->cpu_mask, &err)) {
            fprintf(stderr, "qprof: --cpus: %s\n", err.msg);
            return -1;
        }
        return 0;
    case OPT_ABI_ADDR:
        return parse_u64("--abi-addr", arg, &o->abi_addr);
    case OPT_OS:
        if (strcmp(arg, "auto") == 0)
            o->os = PROF_OS_AUTO;
        else if (strcmp(arg, "qprof-abi") == 0)
            o->os = PROF_OS_QPROF_ABI;
        else if (strcmp(arg, "none") == 0)
            o->os = PROF_OS_NONE;
        else if (strcmp(arg, "linux") == 0)
            o->os = PROF_OS_LINUX;
        else {
            fprintf(stderr, "qprof: --os: '%s' is not one of auto, qprof-abi, linux, none\n", arg);
            return -1;
        }
        return 0;
    case OPT_VMCOREINFO:
        o->vmcoreinfo = arg;
        return 0;
    case OPT_CURRENT:
        o->current = arg;
        return 0;
    case OPT_CURRENT_PID:
        o->current_pid = arg;
        return 0;
    case OPT_CURRENT_NAME:
        o->current_name = arg;
        return 0;
    case OPT_PERCPU_OFFSETS:
        o->percpu_offsets = arg;
        return 0;
    case OPT_USER_REGS: {
        struct prof_user_regs_spec spec;
        struct qp_error err = {0};
        if (prof_user_regs_parse(arg, &spec, &err) != 0) {
            fprintf(stderr, "qprof: %s\n", err.msg);
            return -1;
        }
        o->user_regs = arg;
        return 0;
    }
    case OPT_SYSROOT: {
        struct stat st;
        if (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "qprof: --sysroot: '%s' is not a directory\n", arg);
            return -1;
        }
        o->sysroot = arg;
        return 0;
    }
    case OPT_MEMORY:
        if (!valid_backend(arg)) {
            fprintf(stderr,
                    "qprof: --memory: '%s' is not one of auto, direct, process, memsave, hmp\n",
                    arg);
            return -1;
        }
        o->memory_backend = arg;
        return 0;
    case OPT_TOP:
        return parse_int("--top", arg, 0, 10000, &o->top);
    case OPT_NO_PROGRESS:
        o->progress = false;
        return 0;
    case OPT_PROGRESS:
        o->progress = true;
        return 0;
    case OPT_SAMPLES: {
        int n;
        if (parse_int("--samples", arg, 1, INT_MAX, &n))
            return -1;
        o->max_samples = (uint64_t)n;
        return 0;
    }
    default:
        return -1;
    }
}

int prof_options_for_record(struct prof_options *o)
{
    /* A .data or .qprof name was taken as the record file already; any other single -o is. */
    bool named = o->record && o->n_outputs == 0;
    if (!named && (o->record || o->n_outputs != 1 || strcmp(o->outputs[0], "-") == 0)) {
        fprintf(stderr, "qprof record: name one record file with -o, e.g. -o qprof.data\n");
        return -1;
    }
    if (o->one_shot) {
        fprintf(stderr, "qprof record: --one-shot records nothing\n");
        return -1;
    }
    if (!named)
        o->record = o->outputs[0];
    o->n_outputs = 0;
    return 0;
}

/* qprof top's options; -1 (nothing printed) when c is not one of them, or when t is NULL (a
 * plain qprof run: getopt_long's table has them, the short ones are not in its string). */
static int top_option(struct prof_top_options *t, int c, const char *arg)
{
    if (!t)
        return c == OPT_BATCH || c == OPT_WINDOW || c == 'd' || c == 'n' ? -2 : -1;
    switch (c) {
    case 'd':
        return parse_double("-d", arg, 0.1, 3600, &t->delay_s) ? -3 : 0;
    case 'n':
        return parse_int("-n", arg, 1, INT_MAX, &t->count) ? -3 : 0;
    case OPT_WINDOW:
        return parse_double("--window", arg, 0.1, 86400, &t->window_s) ? -3 : 0;
    case OPT_BATCH:
        t->batch = true;
        return 0;
    default:
        return -1;
    }
}

void prof_top_options_init(struct prof_options *o, struct prof_top_options *t)
{
    prof_options_init(o);
    o->duration_s = 0; /* until q */
    o->progress = false;
    *t = (struct prof_top_options){.delay_s = 1, .window_s = 5};
}

static int parse_args(int argc, char **argv, struct prof_options *o, struct prof_top_options *t)
{
    int c;
    bool duration_given = false;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, t ? ":o:vhd:n:" : ":o:vh", long_options, NULL)) != -1) {
        if (c == 'h') {
            if (t)
                prof_print_top_help(stdout);
            else
                prof_print_help(stdout);
            return PROF_EXIT_OK;
        }
        int top_rc = top_option(t, c, optarg);
        if (top_rc == -2) {
            fprintf(stderr, "qprof: --delay (-d), --iterations (-n), --batch and --window go "
                            "with qprof top\n");
            return usage_error();
        }
        if (top_rc == -3)
            return usage_error();
        if (top_rc == 0)
            continue;
        if (c == OPT_VERSION) {
            printf("qprof %s\n", QPROF_VERSION);
            return PROF_EXIT_OK;
        }
        if (c == '?') {
            fprintf(stderr, "qprof: unknown option '%s'\n", argv[optind - 1]);
            return usage_error();
        }
        if (c == ':') {
            fprintf(stderr, "qprof: option '%s' needs a value\n", argv[optind - 1]);
            return usage_error();
        }
        if (apply_option(o, c, optarg, &duration_given))
            return usage_error();
    }
    if (optind < argc) {
        fprintf(stderr, "qprof: unexpected argument '%s'\n", argv[optind]);
        return usage_error();
    }
    /* A fixed sample count is the point of --samples: the default duration must not cut it. */
    if (o->max_samples && !duration_given)
        o->duration_s = 0;
    for (int i = 0; i < o->n_outputs; i++) {
        if (o->format || out_format_from_path(o->outputs[i]) != OUT_RECORD)
            continue;
        if (o->record) {
            fprintf(stderr, "qprof: one record file per run (-o %s and -o %s)\n", o->record,
                    o->outputs[i]);
            return usage_error();
        }
        o->record = o->outputs[i];
        memmove(&o->outputs[i], &o->outputs[i + 1], sizeof o->outputs[0] * (o->n_outputs - i - 1));
        o->n_outputs--;
        i--;
    }
    if (o->show_addresses && !o->one_shot) {
        fprintf(stderr, "qprof: --show-addresses goes with --one-shot\n");
        return usage_error();
    }
    if (o->plugin_address && o->gdb_address) {
        fprintf(stderr, "qprof: --plugin and --gdb are two targets: give one\n");
        return usage_error();
    }
    if (o->exact && !o->plugin_address) {
        fprintf(stderr, "qprof: --exact goes with --plugin (only the plugin inside QEMU can "
                        "count instructions)\n");
        return usage_error();
    }
    if (o->exact && o->one_shot) {
        fprintf(stderr, "qprof: --exact counts over a run, not --one-shot\n");
        return usage_error();
    }
    if (o->period_insns && !o->plugin_address) {
        fprintf(stderr, "qprof: --period-insns goes with --plugin\n");
        return usage_error();
    }
    if (o->plugin_trigger_given && !o->plugin_address) {
        fprintf(stderr, "qprof: --plugin-trigger goes with --plugin\n");
        return usage_error();
    }
    if (o->period_insns && o->plugin_trigger == PROF_PLUGIN_TRIGGER_TIMER) {
        fprintf(stderr, "qprof: --period-insns counts instructions: it needs the counter "
                        "trigger, not --plugin-trigger timer\n");
        return usage_error();
    }
    if (o->transport == PROF_TRANSPORT_GDB && !o->gdb_address) {
        fprintf(stderr, "qprof: --transport gdb needs --gdb ADDRESS\n");
        return usage_error();
    }
    if (t && o->one_shot) {
        fprintf(stderr, "qprof top: --one-shot is qprof's, not a live view's\n");
        return usage_error();
    }
    return -1;
}

int prof_parse_args(int argc, char **argv, struct prof_options *o)
{
    return parse_args(argc, argv, o, NULL);
}

int prof_parse_top_args(int argc, char **argv, struct prof_options *o, struct prof_top_options *t)
{
    return parse_args(argc, argv, o, t);
}
