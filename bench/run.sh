#!/usr/bin/env bash
# xtask bench: qprof against the per-frame QMP baseline, on one demo guest, in one run; then qprof
# over QMP and over the gdbstub side by side, with each transport's raw floor, at -smp 1, 2, 4, 8.
# Usage: bench/run.sh BUILD_DIR   (a Release build; writes bench/results.md)
#
# The guest has a QMP socket and a gdbstub (-chardev socket + -gdb chardev:) at once. -smp 1 is
# the main guest; -smp 2, 4 and 8 are booted one after the other with MTTCG (-accel
# tcg,thread=multi), all vCPU threads on host CPU 1.
#
# One QEMU boots the demo guest (`run=spin,sys`, TCG, RAM in a shared file) and serves every
# row. Its vCPU thread is pinned to host CPU 1; QEMU's other threads, qprof, the baseline and
# this script to CPU 0 (an unpinned busy vCPU competes with the profiler for the same core).
# The guest prints its own work rate once per guest second ("rate pid=N iters=K ticks=T"); each
# line is stamped with the host clock as it arrives, so every stretch of the run has a work rate
# per guest second and per wall second, and profiled stretches are compared with the unprofiled
# ones of the same run.
#
# QMP also listens on TCP (a second monitor, -qmp tcp:127.0.0.1:PORT) and the gdbstub moves to TCP
# for a while (HMP `gdbserver tcp::PORT`, the same code as -gdb tcp::PORT) and back, so each
# transport's TCP row is measured beside its UNIX-socket twin on the same guest in the same run.
#
# The run is six sections (demo, offline, smp, linux, plugin, arch), each in a subshell of its own:
# one that fails is named with the step it was in and the command that failed, the others still
# run, and bench/results.md is written from whatever was measured, the failed section marked in
# it. Every failing command names itself (the ERR trap below), so the script never ends without a
# word. A section that cannot run here (arch without qemu-system-riscv64 or the riscv64 demo
# guest) is marked not run, with the reason.
#
# Section arch (bench/arch.sh): qprof's paused time per sample and samples/s per architecture,
# side by side: the x86_64, riscv64 and aarch64 demo guests (`run=spin,spin,sys`), each over the
# gdbstub (with QMP for the RAM file) and over QMP alone; a fixed sample count at
# `--interval 1` per row, each row on a freshly booted guest, two rounds with the architectures
# alternating, medians. It ends with one line per architecture:
# `bench: arch x86_64 gdbstub p50 X ms (N/s), qmp p50 Y ms (M/s), plugin p50 Z ms (K/s)`.
#
# BENCH_SCALE=0.3 shortens every stretch (for trying the script; the figures get noisier);
# BENCH_KEEP=1 keeps the raw outputs (the directory is named at the end); BENCH_NOTE="..." goes
# into the results' header (what else the machine was doing, say); BENCH_SECTIONS="smp linux"
# runs only those sections (the others are marked not run); BENCH_SECTIONS=arch the per-architecture
# table alone (about a minute).
# The Linux guest's .deb files are kept in $QPROF_LINUX_DEBS (default
# ${XDG_CACHE_HOME:-~/.cache}/qprof-linux-debs), so that a fresh build folder does not download
# them again.
set -Eeuo pipefail
BUILD=$(cd "${1:?usage: bench/run.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/bench/results.md
SCALE=${BENCH_SCALE:-1}
QPROF=$BUILD/qprof
KERNEL=$BUILD/guest/kernel.elf
USER_DIR=$BUILD/guest/user
GUEST_CMDLINE=run=spin,sys

say() { printf 'bench: %s\n' "$*" >&2; }
die() { # MESSAGE: said with where it was said (file:line, function)
    LAST_ERROR="$* (at ${BASH_SOURCE[1]#"$ROOT"/}:${BASH_LINENO[0]}${FUNCNAME[1]:+ in ${FUNCNAME[1]}})"
    say "$LAST_ERROR"
    exit 1
}

# The ERR trap (inherited by functions and subshells: set -E): the failing command, its status,
# and where, with the calls that led there. LAST_ERROR keeps it for the section's record.
on_err() { # STATUS
    local i
    LAST_ERROR="\`$BASH_COMMAND\` exited $1 at ${BASH_SOURCE[1]#"$ROOT"/}:${BASH_LINENO[0]}"
    say "failed: $LAST_ERROR${FUNCNAME[1]:+ (in ${FUNCNAME[1]})}"
    for ((i = 2; i < ${#FUNCNAME[@]}; i++)); do
        say "  called from ${FUNCNAME[i]} at ${BASH_SOURCE[i]#"$ROOT"/}:${BASH_LINENO[i - 1]}"
    done
}
trap 'on_err $?' ERR
secs() { awk -v s="$1" -v k="$SCALE" 'BEGIN { v = s * k; if (v < 2) v = 2; printf "%.1f", v }'; }

for f in "$QPROF" "$KERNEL" "$BUILD/bench/hmp_baseline" "$BUILD/bench/unwind_bench" \
         "$BUILD/bench/qmp_sample_bench" "$BUILD/bench/transport_floor"; do
    [ -e "$f" ] || die "missing $f: build first (xtask/xtask build)"
done
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not installed"

command -v python3 >/dev/null || die "python3 not installed (it picks free TCP ports and sends HMP)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/qprof-bench.XXXXXX")
SOCK=$WORK/qmp
GDB=$WORK/gdb
RAM=/dev/shm/qprof-bench-ram-$$
QEMU_PID=
: > "$WORK/sections"
: > "$WORK/facts"

# Stops the QEMU this shell started (a section's subshell, or the main shell on an interrupt: it
# finds the pid in $WORK/qemu.pid).
stop_qemu() {
    [ -n "$QEMU_PID" ] || QEMU_PID=$(cat "$WORK/qemu.pid" 2>/dev/null || true)
    if [ -n "$QEMU_PID" ]; then
        kill "$QEMU_PID" 2>/dev/null || true
        wait "$QEMU_PID" 2>/dev/null || true
    fi
    QEMU_PID=
    rm -f "$WORK/qemu.pid"
}
cleanup() {
    stop_qemu
    rm -f "$RAM"
    if [ -n "${BENCH_KEEP:-}" ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- Sections ------------------------------------------------------------------------------

# step TEXT: says what the bench does now; a failure names the last step.
STEP="starting"
step() {
    STEP=$*
    say "$*"
}

# fact NAME VALUE: a figure a section found that the report needs (sections run in subshells).
fact() { printf '%s=%q\n' "$1" "$2" >> "$WORK/facts"; }

# run_section NAME FUNCTION: runs FUNCTION in a subshell with set -e and the ERR trap; a failure
# is recorded in $WORK/sections ("NAME<TAB>failed<TAB>STATUS<TAB>STEP<TAB>ERROR") and the run
# goes on. The subshell must not sit in an `if` or `||` (bash would ignore set -e inside it),
# hence the status taken with set +e and the parent's ERR trap lifted meanwhile.
# shellcheck disable=SC2030 # SECTION and LAST_ERROR belong to the section's subshell
run_section() {
    local name=$1 fn=$2 rc
    trap - ERR
    set +e
    (
        set -e
        trap 'on_err $?' ERR
        trap 'section_end $?' EXIT
        trap 'exit 130' INT TERM
        SECTION=$name LAST_ERROR=
        "$fn"
    )
    rc=$?
    set -e
    trap 'on_err $?' ERR
    [ "$rc" -ne 130 ] || exit 130
    # shellcheck source=/dev/null # written by fact
    . "$WORK/facts"
}

# shellcheck disable=SC2031 # it runs in the section's subshell, where SECTION was set
section_end() { # STATUS: the section subshell's EXIT trap
    stop_qemu
    [ -z "${SECTION_SKIPPED:-}" ] || return 0 # skip_section has recorded it
    if [ "$1" -eq 0 ]; then
        printf '%s\tok\n' "$SECTION" >> "$WORK/sections"
        return
    fi
    printf '%s\tfailed\t%s\t%s\t%s\n' "$SECTION" "$1" "$STEP" "${LAST_ERROR:-}" >> "$WORK/sections"
    say "section '$SECTION' FAILED (status $1) during: $STEP${LAST_ERROR:+ ($LAST_ERROR)}"
}

# skip_section REASON: in a section, ends it as not run because this machine lacks what it needs
# (recorded as "NAME<TAB>skipped<TAB>REASON"); no failure.
# shellcheck disable=SC2031 # it runs in the section's subshell, where SECTION was set
skip_section() {
    printf '%s\tskipped\t%s\n' "$SECTION" "$1" >> "$WORK/sections"
    say "section '$SECTION' not run: $1"
    SECTION_SKIPPED=1
    exit 0
}

section_ok() { awk -F'\t' -v s="$1" '$1 == s && $2 == "ok" { ok = 1 } END { exit !ok }' "$WORK/sections"; }

# "failed (status N) during STEP: ERROR", "not run: REASON" (skip_section), or "not run".
section_state() {
    awk -F'\t' -v s="$1" '$1 == s { found = 1
            if ($2 == "ok") print "ok"
            else if ($2 == "skipped") printf "not run: %s\n", $3
            else printf "failed (status %s) during \"%s\"%s\n", $3, $4, ($5 != "" ? ": " $5 : "") }
        END { if (!found) print "not run" }' "$WORK/sections"
}

# needs SECTION...: in a report part, says which section it lacks and fails when one did not
# complete (`needs demo || return 0`).
needs() {
    local s
    for s in "$@"; do
        section_ok "$s" && continue
        echo "Not measured: section \`$s\` $(section_state "$s")."
        echo
        return 1
    done
}

# ---- Placement -----------------------------------------------------------------------------

NCPU=$(nproc)
if [ "$NCPU" -ge 2 ]; then
    PROFILER_CPU=0 VCPU_CPU=1
else
    PROFILER_CPU=0 VCPU_CPU=0
fi
taskset -p -c "$PROFILER_CPU" $$ >/dev/null # QEMU, qprof and the baseline inherit it

# ---- The guest -----------------------------------------------------------------------------

# Host-stamps each serial line as it arrives: "EPOCH_SECONDS line".
stamp_lines() {
    local line
    while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "${line%$'\r'}"; done
}

# A free TCP port on 127.0.0.1 (bound and released: QEMU takes it a moment later).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_qemu MEM_MB QEMU_ARGS...: QEMU with the bench's QMP socket, a second QMP monitor on TCP
# ($QMP_PORT), the gdbstub and RAM file, its console stamped into $WORK/serial.
start_qemu() {
    local mem=$1
    shift
    rm -f "$SOCK" "$GDB" "$WORK/serial" "$RAM" # a RAM file of another size would be refused
    QMP_PORT=$(free_port)
    qemu-system-x86_64 "$@" -display none -no-reboot -nodefaults -m "${mem}M" \
        -qmp "unix:$SOCK,server=on,wait=off" -qmp "tcp:127.0.0.1:$QMP_PORT,server=on,wait=off" \
        -chardev "socket,path=$GDB,server=on,wait=off,id=gdb0" -gdb chardev:gdb0 \
        -object "memory-backend-file,id=ram,size=${mem}M,mem-path=$RAM,share=on" \
        -machine memory-backend=ram -serial stdio </dev/null \
        > >(stamp_lines > "$WORK/serial") 2> "$WORK/qemu.err" &
    QEMU_PID=$!
    echo "$QEMU_PID" > "$WORK/qemu.pid"
}

wait_console() { # PATTERN SECONDS
    local waited=0
    until [ -S "$SOCK" ] && grep -q "$1" "$WORK/serial" 2>/dev/null; do
        kill -0 "$QEMU_PID" 2>/dev/null || die "QEMU exited: $(cat "$WORK/qemu.err")"
        [ $waited -lt $(($2 * 10)) ] || die "the guest did not print '$1' within $2 s"
        sleep 0.1
        waited=$((waited + 1))
    done
}

boot_guest() { # [SMP]
    local accel=tcg smp=${1:-1}
    [ "$smp" -gt 1 ] && accel=tcg,thread=multi
    [ "${QPROF_ACCEL:-}" = kvm ] && accel=kvm
    start_qemu 256 -kernel "$KERNEL" -append "$GUEST_CMDLINE" -smp "$smp" -accel "$accel" \
        -name qprof-bench,debug-threads=on
    wait_console ' ready$' 30
}

# Moves the vCPU threads to VCPU_CPU (QEMU's other threads stay on PROFILER_CPU) and describes
# where every thread may run.
pin_vcpu() {
    local t comm vcpu_tids=()
    for t in /proc/"$QEMU_PID"/task/*; do
        comm=$(cat "$t/comm" 2>/dev/null) || continue # a thread that just ended
        case $comm in "CPU "*/*) vcpu_tids+=("${t##*/}") ;; esac
    done
    [ ${#vcpu_tids[@]} -gt 0 ] || die "no 'CPU 0/...' thread in QEMU (debug-threads=on not honoured?)"
    for t in "${vcpu_tids[@]}"; do taskset -p -c "$VCPU_CPU" "$t" >/dev/null; done
    PLACEMENT=""
    for t in /proc/"$QEMU_PID"/task/*; do
        comm=$(cat "$t/comm" 2>/dev/null) || continue
        PLACEMENT+="\`$comm\` CPU $(awk '/^Cpus_allowed_list/ { print $2 }' "$t/status"), "
    done
    PLACEMENT="QEMU threads: ${PLACEMENT%, }; qprof, hmp_baseline and this script: CPU $PROFILER_CPU"
}

# hmp COMMAND: one HMP command through the QMP socket (human-monitor-command); prints its output.
hmp() {
    python3 - "$SOCK" "$1" <<'PY'
import json, socket, sys
sock = socket.socket(socket.AF_UNIX)
sock.settimeout(10)
sock.connect(sys.argv[1])
f = sock.makefile("rw")
def execute(name, **args):
    f.write(json.dumps({"execute": name, "arguments": args}) + "\n")
    f.flush()
    while True:  # events (STOP, RESUME) may come first
        reply = json.loads(f.readline())
        if "return" in reply:
            return reply["return"]
        if "error" in reply:
            sys.exit("QMP %s: %s" % (name, reply["error"]["desc"]))
json.loads(f.readline())  # the greeting
execute("qmp_capabilities")
sys.stdout.write(execute("human-monitor-command", **{"command-line": sys.argv[2]}))
PY
}

# The gdbstub moves to TCP on the running guest: HMP `gdbserver tcp::PORT` is QEMU's run-time -gdb
# (the same gdbserver_start, which gives tcp:: devices nodelay=on,server=on,wait=off).
gdbstub_to_tcp() {
    local said
    GDB_PORT=$(free_port)
    said=$(hmp "gdbserver tcp::$GDB_PORT")
    case $said in "Waiting for gdb connection"*) ;; *) die "gdbserver tcp::$GDB_PORT: $said" ;; esac
}

# And back to a UNIX socket at $GDB: through a chardev with an id of its own (QEMU 7.2 opens the
# new device before closing the old one, and two chardevs named "gdb" clash: "duplicate yank
# instance").
gdbstub_to_unix() {
    local said
    rm -f "$GDB"
    said=$(hmp "chardev-add socket,id=gdbunix,path=$GDB,server=on,wait=off")
    [ -z "$said" ] || die "chardev-add for the gdbstub's UNIX socket: $said"
    said=$(hmp "gdbserver chardev:gdbunix")
    case $said in "Waiting for gdb connection"*) ;; *) die "gdbserver chardev:gdbunix: $said" ;; esac
}

# ---- Stretches -----------------------------------------------------------------------------

# Each stretch is "LABEL START END" in $WORK/stretches: the wall-clock span whose guest work rate
# is measured (START is taken after the profiler has started sampling).
stretch() { printf '%s %s %s\n' "$1" "$2" "$3" >> "$WORK/stretches"; }

unprofiled() { # LABEL SECONDS
    local t0=$EPOCHREALTIME
    sleep "$2"
    stretch "$1" "$t0" "$EPOCHREALTIME"
}

# How qprof reaches the guest (run_qprof): QMP by default; over_gdb sets the gdbstub, with QMP
# beside it for the shared RAM file (direct) or alone (`m` packets); the _tcp forms go over TCP
# (the gdbstub's QMP stays on its UNIX socket: only the transport under test changes).
QPROF_TARGET=(--qmp-socket "$SOCK")
over_qmp() { QPROF_TARGET=(--qmp-socket "$SOCK"); }
over_qmp_tcp() { QPROF_TARGET=(--qmp-socket "tcp:127.0.0.1:$QMP_PORT"); }
over_gdb() { # direct|m|process
    QPROF_TARGET=(--gdb "unix:$GDB")
    [ "$1" = direct ] && QPROF_TARGET+=(--qmp-socket "$SOCK")
    GDB_MEMORY=auto
    [ "$1" = m ] && GDB_MEMORY=memsave # QMP's word for "not the RAM file": `m` packets here
    [ "$1" = process ] && GDB_MEMORY=process
    return 0
}
over_gdb_tcp() { QPROF_TARGET=(--gdb "tcp:127.0.0.1:$GDB_PORT" --qmp-socket "$SOCK"); }

# qprof LABEL BACKEND INTERVAL_MS SECONDS [rss]: one qprof run; summary, folded stacks, and with
# rss the resident set every second and /usr/bin/time's peak.
run_qprof() {
    local label=$1 backend=$2 interval=$3 seconds=$4 rss=${5:-} out=$WORK/$1
    local t0=$EPOCHREALTIME
    /usr/bin/time -f 'maxrss_kb=%M user_s=%U sys_s=%S' -o "$out.time" \
        "$QPROF" "${QPROF_TARGET[@]}" --kernel "$KERNEL" --user-dir "$USER_DIR" \
        --memory "$backend" --interval "$interval" --duration "$seconds" --no-progress \
        -o "$out.folded" 2> "$out.summary" &
    local time_pid=$! pid='' i=0
    if [ -n "$rss" ]; then
        while [ -z "$pid" ] && kill -0 $time_pid 2>/dev/null; do pid=$(pgrep -P $time_pid || true); done
        while kill -0 "$pid" 2>/dev/null; do
            awk -v t=$i '/^VmRSS/ { print t, $2 }' "/proc/$pid/status" >> "$out.rss" 2>/dev/null || true
            sleep 1
            i=$((i + 1))
        done
    fi
    wait $time_pid || die "qprof ($label) failed: $(cat "$out.summary")"
    stretch "$label" "$(awk -v t="$t0" 'BEGIN { printf "%.6f", t + 0.5 }')" \
        "$(awk -v t="$t0" -v d="$seconds" 'BEGIN { printf "%.6f", t + d }')"
}

run_baseline() { # LABEL SECONDS [hmp_baseline options]
    local label=$1 seconds=$2
    shift 2
    local t0=$EPOCHREALTIME
    "$BUILD/bench/hmp_baseline" -q "$SOCK" -d "$seconds" "$@" > "$WORK/$label.kv" \
        2> "$WORK/$label.err" || die "hmp_baseline ($label) failed: $(cat "$WORK/$label.err")"
    stretch "$label" "$(awk -v t="$t0" 'BEGIN { printf "%.6f", t + 0.3 }')" "$EPOCHREALTIME"
}

# ---- Reading the results -------------------------------------------------------------------

kv() { tr ' ' '\n' < "$WORK/$1.kv" | sed -n "s/^$2=//p"; } # LABEL KEY (hmp_baseline output)

# qprof's summary: samples/s, paused p50/p99 (ms), round trips per sample.
qprof_fig() { # LABEL rate|p50|p99|trips|failed (empty when that run did not happen)
    [ -f "$WORK/$1.summary" ] || { echo; return 0; }
    awk -v want="$2" '
        /samples\/s\), / { gsub(/[(,]/, " "); rate = $7; failed = $(NF-1) }
        /^guest paused per sample:/ { gsub(/,|;/, " "); p50 = $6; p99 = $9; trips = $14 }
        END { v["rate"] = rate; v["p50"] = p50; v["p99"] = p99; v["trips"] = trips
              v["failed"] = failed; print v[want] }' "$WORK/$1.summary"
}

# Mean frames of the non-idle stacks in a folded file (the root, process or "kernel", and
# "[truncated]" markers are not frames).
folded_frames() {
    awk '{ n = $NF; $NF = ""; sub(/ $/, ""); k = split($0, f, ";")
           if (f[1] == "idle") next
           d = k - 1; for (i = 2; i <= k; i++) if (f[i] == "[truncated]") d--
           s += d * n; c += n }
         END { if (c) printf "%.1f", s / c; else print "-" }' "$WORK/$1.folded"
}

# Work rate of every stretch from the stamped rate lines: for each process, the rate lines whose
# stamps both fall in the stretch; iterations per guest second (ticks at TIMER_HZ) and per wall
# second, summed over the processes (their units cost the same: 80000 loop iterations). Prints
# "LABEL GUEST_RATE WALL_RATE INTERVALS", or "LABEL - - 0" when a process has no whole interval
# in the stretch (too short: the guest reports once per guest second).
work_rates() {
    local hz
    hz=$(awk '$2 == "TIMER_HZ" { print $3 }' "$ROOT/guest/include/layout.h")
    awk -v hz="${hz:-100}" '
        FNR == NR { label[++n] = $1; t0[n] = $2; t1[n] = $3; next }
        $2 == "rate" {
            split($3, p, "="); split($4, it, "="); split($5, tk, "=")
            pid = p[2]; k = ++lines[pid]; ts[pid, k] = $1; iters[pid, k] = it[2]; ticks[pid, k] = tk[2]
        }
        END {
            for (s = 1; s <= n; s++) {
                g = 0; w = 0; m = 0; whole = 1
                for (pid in lines) {
                    first = 0; last = 0; sum_i = 0; sum_t = 0
                    for (k = 1; k <= lines[pid]; k++) {
                        if (ts[pid, k] < t0[s] || ts[pid, k] > t1[s]) continue
                        if (!first) { first = k; continue }
                        last = k; sum_i += iters[pid, k]; sum_t += ticks[pid, k]
                    }
                    if (!last) { whole = 0; continue }
                    g += sum_i / (sum_t / hz); w += sum_i / (ts[pid, last] - ts[pid, first])
                    m += last - first
                }
                if (whole) printf "%s %.1f %.1f %d\n", label[s], g, w, m
                else printf "%s - - 0\n", label[s]
            }
        }' "$WORK/stretches" "$WORK/serial" > "$WORK/rates"
}

rate_of() { awk -v l="$1" -v c="$2" '$1 == l { print $c }' "$WORK/rates"; } # LABEL 2|3

# Reference work rate: the mean over the unprofiled stretches (column 2 guest, 3 wall).
reference() { awk -v c="$1" '$1 ~ /^unprofiled/ && $c != "-" { s += $c; n++ } END { printf "%.1f", n ? s / n : 0 }' "$WORK/rates"; }

slowdown() { # LABEL COLUMN: percent of the unprofiled rate lost
    local r ref
    r=$(rate_of "$1" "$2")
    ref=$(reference "$2")
    awk -v r="$r" -v ref="$ref" 'BEGIN { if (r == "" || r == "-" || ref == 0) print "-"; else printf "%.1f%%", 100 * (1 - r / ref) }'
}

# "guest-time / wall-time", plus the achieved rate when it fell short of the asked one. When the
# stretch held no whole guest second (the guest paused most of the time), the share of wall time
# the guest spent paused stands in: achieved rate x paused p50.
slowdown_cell() { # LABEL ASKED_HZ ACHIEVED_RATE PAUSED_P50_MS
    local cell
    cell="$(slowdown "$1" 2) / $(slowdown "$1" 3)"
    awk -v a="$3" -v h="$2" -v c="$cell" -v p50="$4" 'BEGIN {
        if (c == "- / -")
            printf "not measurable: no whole guest second in the stretch; paused ~%.0f%% of the wall time (%.0f/s x p50)", a * p50 / 10, a
        else if (a < 0.9 * h) printf "%s (reached %.0f/s)", c, a
        else printf "%s", c }'
}

# A figure that is missing (a run that did not happen) prints as "-", never as 0.
ms() { awk -v v="$1" 'BEGIN { if (v == "") print "-"; else printf "%.2f ms", v }'; }
us_to_ms() { awk -v v="$1" 'BEGIN { if (v == "") print "-"; else printf "%.2f ms", v / 1000 }'; }


# ---- Section demo: the demo guest at -smp 1 --------------------------------------------------

# process: guest RAM read out of the QEMU process (process_vm_readv), found and proved by content
# without using the RAM file (qprof searches QEMU's mappings; the file's is one of them), so that
# it is measured beside the RAM file's row on the same guest in the same run.
BACKENDS=(direct process memsave hmp)
CLOSED=$(secs 5) AT100=$(secs 10) AT1000=$(secs 10) RSS_RUN=$(secs 60) GAP=$(secs 8)

# QMP over TCP, right after its UNIX-socket twin (direct-closed, direct-100).
qmp_tcp_twin() {
    over_qmp_tcp
    step "qprof over QMP on tcp:127.0.0.1:$QMP_PORT, --memory direct: closed loop, 100 Hz"
    run_qprof qmp-tcp-closed direct 0.1 "$CLOSED"
    run_qprof qmp-tcp-100 direct 10 "$AT100"
    over_qmp
}

# The gdbstub over TCP, right after its UNIX-socket twin (gdb-direct-closed, gdb-direct-100), and
# both transports' raw floors over TCP; then the gdbstub goes back to its UNIX socket.
gdb_tcp_twin() {
    step "the gdbstub moves to TCP (HMP gdbserver tcp::PORT, as -gdb tcp::PORT)"
    gdbstub_to_tcp
    over_gdb_tcp
    step "qprof over the gdbstub on tcp:127.0.0.1:$GDB_PORT, memory direct: closed loop, 100 Hz"
    run_qprof gdb-tcp-closed auto 0.1 "$CLOSED"
    run_qprof gdb-tcp-100 auto 10 "$AT100"
    step "raw floors of both transports over TCP (transport_floor)"
    "$BUILD/bench/transport_floor" -q "tcp:127.0.0.1:$QMP_PORT" -g "tcp:127.0.0.1:$GDB_PORT" \
        -n 300 qmp gdb > "$WORK/floor-tcp" 2>&1 ||
        die "transport_floor over TCP failed: $(cat "$WORK/floor-tcp")"
    step "the gdbstub moves back to its UNIX socket"
    gdbstub_to_unix
    over_gdb direct
}

# One pair of twin runs is one draw: on a shared 2-core machine a single 100 Hz run's p50 moves by
# a third from one run to the next. So the comparison also alternates UNIX and TCP runs of each
# transport, TCP_PAIRS pairs at 100 Hz, and compares the medians of their p50s (tcp_comparison).
TCP_PAIRS=3
tcp_interleaved() {
    local i
    for i in $(seq "$TCP_PAIRS"); do
        step "interleaved pair $i of $TCP_PAIRS: QMP and the gdbstub at 100 Hz, UNIX then TCP"
        over_qmp
        run_qprof "il-qmp-unix-$i" direct 10 "$(secs 4)"
        over_qmp_tcp
        run_qprof "il-qmp-tcp-$i" direct 10 "$(secs 4)"
        over_gdb direct
        run_qprof "il-gdb-unix-$i" auto 10 "$(secs 4)"
        gdbstub_to_tcp
        over_gdb_tcp
        run_qprof "il-gdb-tcp-$i" auto 10 "$(secs 4)"
        gdbstub_to_unix
    done
    over_qmp
}

# The median of the interleaved runs' p50s: PREFIX (il-qmp-unix, ...); empty when none ran.
interleaved_median() {
    local i
    for i in $(seq "$TCP_PAIRS"); do qprof_fig "$1-$i" p50; done |
        awk 'NF { v[n++] = $1 } END { if (!n) exit
                 for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
                 print (n % 2) ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}

section_demo() {
    step "booting the demo guest ($GUEST_CMDLINE) with shared RAM"
    boot_guest
    pin_vcpu
    say "$PLACEMENT"
    fact PLACEMENT "$PLACEMENT"
    sleep "$(secs 2)" # let the guest settle (TCG translation cache, first rate lines)

    step "unprofiled ${GAP} s"
    unprofiled unprofiled-1 "$GAP"
    step "baseline (stop, info registers, x/2gx per frame, cont): closed loop, 100 Hz, 1000 Hz"
    run_baseline baseline-closed "$CLOSED"
    run_baseline baseline-100 "$AT100" -i 10
    run_baseline baseline-1000 "$AT1000" -i 1
    run_baseline baseline16-closed "$CLOSED" -f 16
    run_baseline baseline16-100 "$AT100" -f 16 -i 10
    run_baseline floor "$(secs 3)" -b
    step "unprofiled ${GAP} s"
    unprofiled unprofiled-2 "$GAP"
    local b m
    for b in "${BACKENDS[@]}"; do
        step "qprof --memory $b: closed loop, 100 Hz, 1000 Hz"
        run_qprof "$b-closed" "$b" 0.1 "$CLOSED"
        run_qprof "$b-100" "$b" 10 "$AT100"
        if [ "$b" = direct ]; then
            qmp_tcp_twin
            step "qprof --memory direct at 1000 Hz for $RSS_RUN s (resident set every second)"
            run_qprof "$b-1000" "$b" 1 "$RSS_RUN" rss
        else
            run_qprof "$b-1000" "$b" 1 "$AT1000"
        fi
        step "unprofiled ${GAP} s"
        unprofiled "unprofiled-after-$b" "$GAP"
    done
    for m in direct process m; do
        over_gdb "$m"
        step "qprof over the gdbstub, memory $m: closed loop, 100 Hz, 1000 Hz"
        run_qprof "gdb-$m-closed" "$GDB_MEMORY" 0.1 "$CLOSED"
        run_qprof "gdb-$m-100" "$GDB_MEMORY" 10 "$AT100"
        if [ "$m" = direct ]; then
            gdb_tcp_twin
            tcp_interleaved
            over_gdb direct
        fi
        run_qprof "gdb-$m-1000" "$GDB_MEMORY" 1 "$AT1000"
        step "unprofiled ${GAP} s"
        unprofiled "unprofiled-after-gdb-$m" "$GAP"
    done
    over_qmp
    step "raw floors of both transports, -smp 1 (transport_floor)"
    "$BUILD/bench/transport_floor" -q "$SOCK" -g "unix:$GDB" -n 300 qmp qmp-mem gdb gdb-state gdb-mem \
        > "$WORK/floor-1" 2>&1 || die "transport_floor failed: $(cat "$WORK/floor-1")"
    step "library-level sample cost (qmp_sample_bench)"
    local abi_va
    abi_va=0x$(nm "$KERNEL" | awk '$3 == "qprof_abi" { print $1 }')
    "$BUILD/bench/qmp_sample_bench" -q "$SOCK" -a "$abi_va" -n 300 > "$WORK/qmp_sample_bench" 2>&1 ||
        die "qmp_sample_bench failed: $(cat "$WORK/qmp_sample_bench")"
    stop_qemu
    step "work rates of every stretch"
    work_rates
}

# ---- Section offline: unwinding without a guest ----------------------------------------------

section_offline() {
    step "offline unwinding (unwind_bench)"
    "$BUILD/bench/unwind_bench" > "$WORK/unwind_bench" 2>&1 || die "unwind_bench failed: $(cat "$WORK/unwind_bench")"
}

# ---- Section smp: both transports at -smp 2, 4, 8 --------------------------------------------

SMPS=(2 4 8)
SWEEP=$(secs 4)
section_smp() {
    local n k
    for n in "${SMPS[@]}"; do
        step "-smp $n (MTTCG): booting; raw floors; qprof over QMP and over the gdbstub, closed loop"
        # every vCPU busy: one process pinned to each (sys on the third of every four), as QPROF_SMP
        GUEST_CMDLINE=run=
        for ((k = 0; k < n; k++)); do
            if [ $((k % 4)) -eq 2 ]; then GUEST_CMDLINE+="sys@$k,"; else GUEST_CMDLINE+="spin@$k,"; fi
        done
        GUEST_CMDLINE=${GUEST_CMDLINE%,}
        boot_guest "$n"
        pin_vcpu
        sleep "$(secs 2)"
        "$BUILD/bench/transport_floor" -q "$SOCK" -g "unix:$GDB" -n 200 qmp gdb gdb-state \
            > "$WORK/floor-$n" 2>&1 || die "transport_floor (-smp $n) failed: $(cat "$WORK/floor-$n")"
        over_qmp
        run_qprof "smp$n-qmp" auto 0.1 "$SWEEP"
        over_gdb direct
        run_qprof "smp$n-gdb" auto 0.1 "$SWEEP"
        over_qmp
        # what qprof saw of the vCPUs: idle ones are halted in the guest's idle loop
        awk '/^vCPU stacks:/' "$WORK/smp$n-gdb.summary" > "$WORK/vcpus-$n"
        stop_qemu
    done
}

# ---- Section linux: a stock Debian Linux guest, same sampling settings ---------------------

# Debian's kernel and busybox in an initramfs (tests/linux/make-guest.sh), `dd` and a shell loop
# on 1 vCPU, KASLR on; qprof with no symbol options, at 100 Hz like the demo guest's 100 Hz rows.
LINUX_DIR=$BUILD/linux-guest
LINUX_NOTE=
boot_linux() {
    start_qemu 512 -kernel "$LINUX_DIR/vmlinuz" -initrd "$LINUX_DIR/initrd.cpio" \
        -append "console=ttyS0 quiet qprof_run=dd,shloop" -smp 1 -accel tcg \
        -name qprof-bench-linux,debug-threads=on
    wait_console 'qprof-linux: all started' 300
}
run_linux() { # LABEL
    "$QPROF" "${QPROF_TARGET[@]}" --interval 10 --duration "$AT100" --no-progress \
        -o "$WORK/$1.folded" 2> "$WORK/$1.summary" || die "qprof ($1) failed: $(cat "$WORK/$1.summary")"
}
section_linux() {
    step "the stock Linux guest (tests/linux/make-guest.sh: Debian's kernel and busybox)"
    local debs=${QPROF_LINUX_DEBS:-${XDG_CACHE_HOME:-$HOME/.cache}/qprof-linux-debs}
    mkdir -p "$debs"
    if ! QPROF_LINUX_DEBS=$debs "$ROOT/tests/linux/make-guest.sh" "$LINUX_DIR" > "$WORK/linux-guest.log" 2>&1; then
        fact LINUX_NOTE "$(tail -n1 "$WORK/linux-guest.log")"
        say "no Linux guest: $(tail -n1 "$WORK/linux-guest.log")"
        return 0
    fi
    # the .debs it used, for the next build folder (make-guest.sh copies them from there)
    find "$LINUX_DIR" -maxdepth 1 -name '*.deb' -exec cp -n -t "$debs" {} +
    step "stock Debian Linux guest (1 vCPU, TCG): booting"
    boot_linux
    pin_vcpu
    step "stock Debian Linux guest (1 vCPU, TCG): qprof over QMP and over the gdbstub at 100 Hz"
    over_qmp
    run_linux linux-qmp
    over_gdb direct
    run_linux linux-gdb
    over_qmp
    stop_qemu
}

# ---- Section plugin: the TCG plugin target against the gdbstub (bench/plugin.sh) ----------

section_plugin() {
    step "the plugin target at 1 and 10 kHz with each trigger, and with --exact, beside the gdbstub at 1 kHz, QEMU 10 (bench/plugin.sh)"
    "$ROOT/bench/plugin.sh" "$BUILD" "$(secs 4)" 5 > "$WORK/plugin.md" 2> "$WORK/plugin.err" ||
        die "bench/plugin.sh failed: $(tail -n 3 "$WORK/plugin.err" | tr '\n' ' ')"
    grep -q '^bench: plugin 10 kHz slowdown -\{0,1\}[0-9][0-9.]*%, gdbstub 1 kHz slowdown -\{0,1\}[0-9][0-9.]*%$' \
        "$WORK/plugin.md" || die "bench/plugin.sh measured no slowdown: $(tail -n 3 "$WORK/plugin.md")"
}

# ---- Section arch: each architecture's guest over both transports (bench/arch.sh) -----------

ARCH_SAMPLES=$(awk -v k="$SCALE" 'BEGIN { v = 2000 * k; if (v < 200) v = 200; printf "%d", v }')
section_arch() {
    step "qprof on the x86_64, riscv64 and aarch64 demo guests, $ARCH_SAMPLES samples per run at --interval 1, 2 rounds (bench/arch.sh)"
    local rc=0
    "$ROOT/bench/arch.sh" "$BUILD" "$ARCH_SAMPLES" 2 > "$WORK/arch.md" 2> "$WORK/arch.err" || rc=$?
    cat "$WORK/arch.err" >&2
    [ "$rc" -ne 77 ] || skip_section "$(sed -n 's/^bench: arch: skipped: //p' "$WORK/arch.err" | tail -n 1)"
    [ "$rc" -eq 0 ] || die "bench/arch.sh failed (status $rc): $(tail -n 3 "$WORK/arch.err" | tr '\n' ' ')"
    grep -q '^bench: arch x86_64 gdbstub p50 [0-9.]* ms' "$WORK/arch.md" ||
        die "bench/arch.sh measured nothing: $(tail -n 3 "$WORK/arch.md" | tr '\n' ' ')"
}

# ---- The run -------------------------------------------------------------------------------

OTHER_QEMUS=$(pgrep -c -x qemu-system-x86 || true)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
PLACEMENT="not known (the demo section did not boot its guest)"
BENCH_START=$EPOCHREALTIME
for s in demo offline smp linux plugin arch; do
    case " ${BENCH_SECTIONS:-demo offline smp linux plugin arch} " in
        *" $s "*) run_section "$s" "section_$s" ;;
        *) say "section $s: not run (BENCH_SECTIONS)" ;;
    esac
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
BENCH_MINUTES=$(awk -v a="$BENCH_START" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", (b - a) / 60 }')

# ---- The report ----------------------------------------------------------------------------

verdict() { awk -v v="$1" -v lim="$2" -v op="$3" 'BEGIN {
    if (v == "" || v == "-") print "not measured"
    else if ((op == "<=" && v + 0 <= lim + 0) || (op == ">=" && v + 0 >= lim + 0)) print "met"
    else print "**missed**" }'; }

baseline_row() { # LABEL_PREFIX TITLE
    local l=$1 at1000="not run"
    [ -e "$WORK/$l-1000.kv" ] &&
        at1000=$(slowdown_cell "$l-1000" 1000 "$(kv "$l-1000" rate)" "$(kv "$l-1000" paused_p50_us | awk '{ print $1 / 1000 }')")
    printf '| %s | %s walked | %s | %s | %s | %.0f (p50 %s) | %s | %s |\n' "$2" \
        "$(kv "$l-100" frames_mean)" "$(kv "$l-100" round_trips)" \
        "$(us_to_ms "$(kv "$l-100" paused_p50_us)")" "$(us_to_ms "$(kv "$l-100" paused_p99_us)")" \
        "$(kv "$l-closed" rate)" "$(us_to_ms "$(kv "$l-closed" paused_p50_us)")" \
        "$(slowdown_cell "$l-100" 100 "$(kv "$l-100" rate)" "$(kv "$l-100" paused_p50_us | awk '{ print $1 / 1000 }')")" \
        "$at1000"
}

qprof_row() { # BACKEND
    # shellcheck disable=SC2016 # the backquotes are markdown
    qprof_row_as "$1" "qprof, \`--memory $1\`"
}

qprof_row_as() { # LABEL_PREFIX TITLE
    local b=$1
    printf '| %s | %s unwound | %s | %s | %s | %.0f (p50 %s) | %s | %s |\n' "$2" \
        "$(folded_frames "$b-100")" "$(qprof_fig "$b-100" trips)" \
        "$(ms "$(qprof_fig "$b-100" p50)")" "$(ms "$(qprof_fig "$b-100" p99)")" \
        "$(qprof_fig "$b-closed" rate)" "$(ms "$(qprof_fig "$b-closed" p50)")" \
        "$(slowdown_cell "$b-100" 100 "$(qprof_fig "$b-100" rate)" "$(qprof_fig "$b-100" p50)")" \
        "$(slowdown_cell "$b-1000" 1000 "$(qprof_fig "$b-1000" rate)" "$(qprof_fig "$b-1000" p50)")"
}

# Figures the text and the targets need (from the demo section; UNWIND_US from offline).
demo_figures() {
BASE_P50=$(kv baseline-100 paused_p50_us)
BASE_READS=$(kv baseline-100 x_reads_mean)
X_RTT=$(kv baseline-closed x_rtt_p50_us)
BASE16=$(awk -v p="$BASE_P50" -v r="$BASE_READS" -v x="$X_RTT" 'BEGIN { printf "%.0f", p + (15 - r) * x }')
DIRECT_P50_US=$(awk -v v="$(qprof_fig direct-100 p50)" 'BEGIN { printf "%.0f", v * 1000 }')
RATIO=$(awk -v a="$BASE_P50" -v b="$DIRECT_P50_US" 'BEGIN { printf "%.1f", a / b }')
RATIO16=$(awk -v a="$(kv baseline16-100 paused_p50_us)" -v b="$DIRECT_P50_US" 'BEGIN { printf "%.1f", a / b }')
RSS_FILE=$WORK/direct-1000.rss
RSS_EARLY=$(awk '$1 >= 10 { print $2; exit }' "$RSS_FILE")
RSS_LATE=$(tail -1 "$RSS_FILE" | cut -d' ' -f2)
RSS_LATE_T=$(tail -1 "$RSS_FILE" | cut -d' ' -f1)
RSS_GROWTH=$(awk -v a="$RSS_EARLY" -v b="$RSS_LATE" 'BEGIN { printf "%d", b - a }')
PEAK_KB=$(sed -n 's/.*maxrss_kb=\([0-9]*\).*/\1/p' "$WORK/direct-1000.time")
CPU_PER_SAMPLE=$(awk -v n="$(awk '/samples in/ { print $2 }' "$WORK/direct-1000.summary")" '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    END { printf "%.0f", (v["user_s"] + v["sys_s"]) / n * 1e6 }' "$WORK/direct-1000.time")
DIRECT_SLOW_WALL=$(slowdown direct-100 3)
DIRECT_SLOW_GUEST=$(slowdown direct-100 2)
}
# unwind_bench's figure; empty (status 0) when the offline section did not run.
unwind_us() {
    [ -f "$WORK/unwind_bench" ] || return 0
    awk '/unwind \+ symbolize:/ { print $4 }' "$WORK/unwind_bench"
}

# transport_floor's figure: FILE_SUFFIX MODE KEY (floor-1, floor-2, floor-tcp, ...); empty when
# that floor was not measured.
floor_fig() {
    [ -f "$WORK/floor-$1" ] || return 0
    awk -v m="$2" -v k="$3" '$1 == m { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) print a[2] } }' \
        "$WORK/floor-$1"
}

# qprof's label for a transport at -smp N: the main guest's closed-loop runs for N = 1.
sweep_label() { # N qmp|gdb
    if [ "$1" = 1 ]; then
        [ "$2" = qmp ] && echo direct-closed || echo gdb-direct-closed
    else
        echo "smp$1-$2"
    fi
}

transport_row() { # N qmp|gdb
    local n=$1 t=$2 label floor_mode name
    label=$(sweep_label "$n" "$t")
    if [ "$t" = qmp ]; then floor_mode=qmp name=QMP; else floor_mode=gdb name=gdbstub; fi
    local fp50 qp50
    if [ ! -f "$WORK/$label.summary" ]; then
        # shellcheck disable=SC2016 # the backquotes are markdown
        printf '| %s | %s | not measured (section `smp` %s) | | | | | | |\n' "$n" "$name" \
            "$(section_state smp | sed 's/ during .*//')"
        return 0
    fi
    fp50=$(floor_fig "$n" "$floor_mode" p50_us)
    qp50=$(qprof_fig "$label" p50)
    printf '| %s | %s | %s / %s | %s | %s / %s | %s | %s | %s | %s |\n' "$n" "$name" \
        "$(us_to_ms "$fp50")" "$(us_to_ms "$(floor_fig "$n" "$floor_mode" p99_us)")" \
        "$(floor_fig "$n" "$floor_mode" rate)" \
        "$(ms "$qp50")" "$(ms "$(qprof_fig "$label" p99)")" \
        "$(awk -v q="$qp50" -v f="$fp50" 'BEGIN { if (f > 0) printf "%.2fx", q * 1000 / f; else print "-" }')" \
        "$(qprof_fig "$label" trips)" "$(qprof_fig "$label" rate)" \
        "$(awk '/^vCPU stacks:/ { gsub(/[(),]/, " "); printf "%d (%d idle)", $3, $5 }' "$WORK/$label.summary")"
}

# The ORC summary line's two figures: "kernel stacks by ORC: N, complete (...): P%".
orc_fig() { # LABEL stacks|complete
    [ -f "$WORK/$1.summary" ] || return 0
    awk -v want="$2" '/^kernel stacks by ORC:/ { n = $5; sub(/,/, "", n); p = $NF
        print (want == "stacks" ? n : p) }' "$WORK/$1.summary"
}

linux_row() { # GUEST TRANSPORT LABEL
    printf '| %s | %s | %s / %s | %s | %s | %s |\n' "$1" "$2" "$(ms "$(qprof_fig "$3" p50)")" \
        "$(ms "$(qprof_fig "$3" p99)")" "$(qprof_fig "$3" trips)" "$(qprof_fig "$3" rate)" \
        "$( [ "$4" = linux ] && printf '%s of %s' "$(orc_fig "$3" complete)" "$(orc_fig "$3" stacks)" || echo '-')"
}

linux_section() {
    echo "## A stock Linux guest beside the demo guest"
    echo
    needs linux || return 0
    if [ -n "$LINUX_NOTE" ]; then
        echo "Not measured: $LINUX_NOTE"
        echo
        return
    fi
    echo "Debian 12's own kernel ($(cat "$LINUX_DIR/kernel-release" 2>/dev/null)) and busybox in an"
    echo "initramfs (\`tests/linux/make-guest.sh\`), KASLR on, 1 vCPU, TCG, \`dd if=/dev/zero"
    echo "of=/dev/null\` and a shell loop; qprof with no symbol options (kernel found in guest RAM,"
    echo "kernel stacks by ORC, processes by BTF, user leaves by VMA), \`--interval 10\` for $AT100 s,"
    echo "beside the demo guest's 100 Hz runs of this same bench run. Kernel stacks complete: the"
    echo "share of ORC-walked kernel stacks that reach the entry from user mode or a kernel thread's"
    echo "start. The Linux runs' samples/s count the one-time search for the kernel (0.3-3 s, while"
    echo "the guest runs) in their time."
    echo
    echo "| guest | transport | paused p50 / p99 | round trips per sample | samples/s | kernel stacks complete |"
    echo "|---|---|---|---|---|---|"
    linux_row "demo guest (qprof_abi)" QMP direct-100 demo
    linux_row "Debian 12 Linux" QMP linux-qmp linux
    linux_row "demo guest (qprof_abi)" gdbstub gdb-direct-100 demo
    linux_row "Debian 12 Linux" gdbstub linux-gdb linux
    echo
    echo "Top of the Linux run over QMP (folded, by samples):"
    echo
    echo '```'
    # the top five taken by awk, which reads to the end: `head` would close the pipe early, and
    # under pipefail sort's SIGPIPE (status 141) ended the whole bench without a word (issue 28)
    awk '{ print $NF, $0 }' "$WORK/linux-qmp.folded" | sort -k1,1nr |
        awk 'NR <= 5 { sub(/^[^ ]* /, ""); print substr($0, 1, 200) }'
    echo '```'
    echo
}

transports_section() {
    echo "## Transports: QMP and the gdbstub, side by side"
    echo
    needs demo || return 0
    local gdb1 gdb8 growth m_p50 ms_p50 slow1000
    gdb1=$(qprof_fig gdb-direct-closed p50)
    gdb8=$(qprof_fig smp8-gdb p50)
    growth=$(awk -v a="$gdb1" -v b="$gdb8" 'BEGIN { if (b != "") printf "%.3f", (b - a) / 7 }')
    m_p50=$(qprof_fig gdb-m-100 p50)
    ms_p50=$(qprof_fig memsave-100 p50)
    slow1000=$(slowdown gdb-direct-1000 3)
    echo "The same guest serves both: qprof over QMP (\`--qmp-socket\`, memory from the shared RAM"
    echo "file) and over the gdbstub (\`--gdb\` + \`--qmp-socket\`: registers through the stub, memory"
    echo "from the RAM file QMP finds), closed loop (\`--interval 0.1\`, $CLOSED s at -smp 1, $SWEEP s"
    echo "at 2, 4, 8). Raw floor: the transport alone with the project's client code, no profiler work"
    echo "(\`bench/transport_floor\`, 300 or 200 samples, closed loop): QMP = \`stop\` + \`info"
    echo "registers -a\` + \`cont\` (qmp_sample); gdbstub = ^C + \`Hg\`/\`g\` of every vCPU pipelined"
    echo "in one write + \`c\`. QMP's paused time comes from QEMU's STOP/RESUME events; the gdbstub's"
    echo "from the client clock, before the ^C to after the \`c\` (a gdb client sees no events), so it"
    echo "also counts the ^C's trip. -smp 2, 4, 8 use MTTCG (\`-accel tcg,thread=multi\`), every"
    echo "vCPU thread on host CPU $VCPU_CPU. At -smp N the guest runs one process pinned to each"
    echo "vCPU (\`run=spin@0,spin@1,sys@2,...\`, as \`QPROF_SMP=N xtask demo\`), so every vCPU is"
    echo "busy apart from the duty cycle's sleeps. The last column counts the vCPU stacks of the run"
    echo "and the idle (halted) ones among them."
    echo
    echo "| vCPUs | transport | raw floor: paused p50 / p99 | raw floor: samples/s | qprof paused p50 / p99 | qprof / floor (p50) | round trips per sample | qprof closed loop: samples/s | vCPU stacks (idle) |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for n in 1 "${SMPS[@]}"; do
        transport_row "$n" qmp
        transport_row "$n" gdb
    done
    echo
    echo "- gdbstub ^C alone (stop until the stop reply), p50: $(for n in 1 "${SMPS[@]}"; do printf '%s vCPU %s; ' "$n" "$(us_to_ms "$(floor_fig "$n" gdb stop_p50_us)")"; done | sed 's/; $//')."
    echo "- qThreadExtraInfo for every vCPU in the same write (qprof asks it: it is how a halted vCPU is"
    echo "  told), raw floor p50: $(for n in 1 "${SMPS[@]}"; do printf '%s vCPU %s; ' "$n" "$(us_to_ms "$(floor_fig "$n" gdb-state p50_us)")"; done | sed 's/; $//')."
    echo "- growth of qprof's paused p50 over the gdbstub per added vCPU (1 to 8): ${growth:--} ms."
    echo
    echo "Memory without a shared RAM file (1 vCPU): QMP has \`memsave\` (a file per read),"
    echo "the gdbstub pipelined \`m\` packets."
    echo
    echo "| | QMP \`memsave\` | gdbstub \`m\` packets |"
    echo "|---|---|---|"
    echo "| qprof paused p50 / p99 at 100 Hz | $(ms "$ms_p50") / $(ms "$(qprof_fig memsave-100 p99)") | $(ms "$m_p50") / $(ms "$(qprof_fig gdb-m-100 p99)") |"
    echo "| qprof round trips per sample | $(qprof_fig memsave-100 trips) | $(qprof_fig gdb-m-100 trips) |"
    echo "| raw floor + one 8 KiB read at the stack pointer, p50 | $(us_to_ms "$(floor_fig 1 qmp-mem p50_us)") | $(us_to_ms "$(floor_fig 1 gdb-mem p50_us)") |"
    echo
    echo "Targets of the gdbstub transport (issue 14):"
    echo
    echo "| target | this run | |"
    echo "|---|---|---|"
    echo "| 1 vCPU: paused p50 <= 0.25 ms | $(ms "$(qprof_fig gdb-direct-100 p50)") at 100 Hz, $(ms "$gdb1") closed loop | $(verdict "$(qprof_fig gdb-direct-100 p50)" 0.25 '<=') |"
    echo "| 1 vCPU: <= 1.2x the raw gdbstub floor | $(awk -v q="$gdb1" -v f="$(floor_fig 1 gdb p50_us)" 'BEGIN { printf "%.2fx", q * 1000 / f }') (closed loop p50 over floor p50) | $(verdict "$(awk -v q="$gdb1" -v f="$(floor_fig 1 gdb p50_us)" 'BEGIN { printf "%.2f", q * 1000 / f }')" 1.2 '<=') |"
    echo "| 1 vCPU: closed loop >= 3000 samples/s | $(qprof_fig gdb-direct-closed rate)/s | $(verdict "$(qprof_fig gdb-direct-closed rate)" 3000 '>=') |"
    echo "| 8 vCPUs (MTTCG): paused p50 <= 0.6 ms | $(ms "$gdb8") (closed loop; ${growth:--} ms per added vCPU) | $(verdict "$gdb8" 0.6 '<=') |"
    echo "| slowdown at 1000 Hz, 1 vCPU <= 25% | $slow1000 wall time | $(verdict "${slow1000%\%}" 25 '<=') |"
    echo "| no shared RAM file: paused p50 <= 1 ms | $(ms "$m_p50") with \`m\` packets ($(ms "$ms_p50") with memsave) | $(verdict "$m_p50" 1 '<=') |"
    echo
}


# One row of the TCP table: TRANSPORT SOCKET LABEL_PREFIX FLOOR_SUFFIX FLOOR_MODE
tcp_row() {
    local p=$3
    printf '| %s | %s | %s / %s | %s | %s | %s (p50 %s) | %s / %s |\n' "$1" "$2" \
        "$(ms "$(qprof_fig "$p-100" p50)")" "$(ms "$(qprof_fig "$p-100" p99)")" \
        "$(qprof_fig "$p-100" trips)" "$(qprof_fig "$p-100" rate)" \
        "$(qprof_fig "$p-closed" rate)" "$(ms "$(qprof_fig "$p-closed" p50)")" \
        "$(us_to_ms "$(floor_fig "$4" "$5" p50_us)")" "$(us_to_ms "$(floor_fig "$4" "$5" p99_us)")"
}

# The line the bench ends with: each TCP paused p50 at 100 Hz against its UNIX-socket twin's (the
# target), and the closed-loop p50s beside them (steadier on a loaded machine).
tcp_comparison() {
    awk -v q="$(qprof_fig qmp-tcp-100 p50)" -v qu="$(qprof_fig direct-100 p50)" \
        -v qc="$(qprof_fig qmp-tcp-closed p50)" -v quc="$(qprof_fig direct-closed p50)" \
        -v g="$(qprof_fig gdb-tcp-100 p50)" -v gu="$(qprof_fig gdb-direct-100 p50)" \
        -v gc="$(qprof_fig gdb-tcp-closed p50)" -v guc="$(qprof_fig gdb-direct-closed p50)" \
        -v iq="$(interleaved_median il-qmp-tcp)" -v iqu="$(interleaved_median il-qmp-unix)" \
        -v ig="$(interleaved_median il-gdb-tcp)" -v igu="$(interleaved_median il-gdb-unix)" \
        -v pairs="$TCP_PAIRS" '
        function ratio(tcp, unix) {
            return (tcp == "" || unix == "" || unix <= 0) ? "" : tcp / unix
        }
        # The verdict is the interleaved medians when those runs happened, else the one pair.
        function one(name, tcp, unix, tcp_closed, unix_closed, il_tcp, il_unix,    r, rc, ri, v) {
            r = ratio(tcp, unix); rc = ratio(tcp_closed, unix_closed); ri = ratio(il_tcp, il_unix)
            v = ri != "" ? ri : r
            if (v == "") { unmeasured = 1; return name " not measured" }
            if (v > 1.5) missed = missed (missed ? ", " : "") name
            return sprintf("%s%s%s", name,
                           ri == "" ? "" : sprintf(" %.2f ms / %.2f ms = %.2fx (median of %d alternating pairs; one pair:", il_tcp, il_unix, ri, pairs),
                           r == "" ? "" : sprintf(" %.2f ms / %.2f ms = %.2fx%s%s", tcp, unix, r,
                                                  rc == "" ? "" : sprintf(", closed loop %.2fx", rc), ri == "" ? "" : ")"))
        }
        BEGIN {
            line = one("QMP", q, qu, qc, quc, iq, iqu) ", " one("gdbstub", g, gu, gc, guc, ig, igu)
            verdict = unmeasured ? "not measured" : missed ? "**missed** by " missed : "met"
            printf "TCP against UNIX sockets, paused p50 at 100 Hz (TCP / UNIX): %s; target within 1.5x: %s\n", line, verdict
        }'
}

tcp_section() {
    echo "## TCP beside UNIX sockets (1 vCPU, the same guest in the same run)"
    echo
    needs demo || return 0
    echo "QMP: qprof \`--qmp-socket PATH\` against \`--qmp-socket tcp:127.0.0.1:PORT\`, a second QMP"
    echo "monitor of the same QEMU (\`-qmp tcp:127.0.0.1:PORT,server=on,wait=off\`), both"
    echo "\`--memory direct\`. gdbstub: \`--gdb unix:PATH\` against \`--gdb tcp:127.0.0.1:PORT\`, both with"
    echo "\`--qmp-socket PATH\` for the RAM file; for its TCP runs the gdbstub moves to TCP with HMP"
    echo "\`gdbserver tcp::PORT\` (QEMU's \`-gdb tcp::PORT\` at run time) and then back. Each TCP run"
    echo "follows its UNIX twin directly: closed loop for $CLOSED s, then 100 Hz for $AT100 s. Raw floor:"
    echo "\`transport_floor\` over the same kind of socket (300 samples, closed loop; the UNIX floors are"
    echo "the -smp 1 floors of the table above, taken later in the same run). Then $TCP_PAIRS alternating"
    echo "UNIX/TCP pairs of each transport at 100 Hz, $(secs 4) s each: the verdict below compares the"
    echo "medians of their p50s (a single pair's ratio moves by a third on a loaded 2-core machine)."
    echo
    echo "| transport | socket | paused p50 / p99 at 100 Hz | round trips per sample | samples/s at 100 Hz | closed loop: samples/s (paused p50) | raw floor: paused p50 / p99 |"
    echo "|---|---|---|---|---|---|---|"
    tcp_row QMP UNIX direct 1 qmp
    tcp_row QMP TCP qmp-tcp tcp qmp
    tcp_row gdbstub UNIX gdb-direct 1 gdb
    tcp_row gdbstub TCP gdb-tcp tcp gdb
    echo
    tcp_comparison
    echo
}
other_load_note() {
    [ "$OTHER_QEMUS" -gt 0 ] || return 0
    echo " (another QEMU competes for the same cores: every figure is noisier and slower than on an idle machine)"
}

report_header() {
    echo "# qprof benchmark results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); the whole run took $BENCH_MINUTES min"
    echo "- QEMU: $(qemu-system-x86_64 --version | sed -n 1p), ${QPROF_ACCEL:-tcg}"
    echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $NCPU cores"
    echo "- guest: demo kernel with frame pointers, \`-append $GUEST_CMDLINE\` (one CPU-bound process," \
         "one that spends half its time in a system call), 1 vCPU, 256 MiB RAM in a shared file"
    echo "- placement: $PLACEMENT"
    echo "- other load: $OTHER_QEMUS other QEMU process(es) running at the start; load average" \
         "$LOAD_BEFORE before, $LOAD_AFTER after$(other_load_note)"
    [ -z "${BENCH_NOTE:-}" ] || echo "- note: $BENCH_NOTE"
    echo "- command: \`xtask/xtask bench\` (bench/run.sh; BENCH_SCALE=$SCALE)"
    echo "- sections: $(for s in demo offline smp linux plugin arch; do
        printf '%s %s, ' "$s" "$(section_state "$s" | sed 's/^failed.*/**failed**/')"; done | sed 's/, $//')"
    echo
}

# Each failed section with the step it was in and the command that failed.
report_failures() {
    grep -q "$(printf '\tfailed\t')" "$WORK/sections" || return 0
    echo "## Failed sections"
    echo
    echo "What these sections would have measured is missing below (the bench's own output says more)."
    echo
    awk -F'\t' '$2 == "failed" { printf "- `%s`: status %s during \"%s\"%s\n", $1, $3, $4, ($5 != "" ? "; " $5 : "") }' \
        "$WORK/sections"
    echo
}

report_sampling() {
    echo "## Sampling cost and guest slowdown"
    echo
    needs demo || return 0
    demo_figures
    echo "Guest-paused time is QEMU's own STOP..RESUME (event timestamps), at 100 Hz. Closed loop:"
    echo "the next sample starts as soon as the last one is done (qprof \`--interval 0.1\`)."
    echo "Slowdown: work the guest reports per guest second / per wall second, against the mean of"
    echo "the unprofiled stretches of this run (a negative figure is noise)."
    echo
    echo "| method | frames per sample | round trips per sample | paused p50 | paused p99 | closed loop: samples/s | slowdown at 100 Hz (guest time / wall) | slowdown at 1000 Hz (guest time / wall) |"
    echo "|---|---|---|---|---|---|---|---|"
    # shellcheck disable=SC2016 # the backquotes are markdown
    baseline_row baseline 'baseline: `stop`, `info registers`, one `x/2gx` per frame, `cont`'
    baseline_row baseline16 'the same baseline paying for 16 frames (chain padded with re-reads)'
    for b in "${BACKENDS[@]}"; do qprof_row "$b"; done
    # shellcheck disable=SC2016 # the backquotes are markdown
    qprof_row_as gdb-direct 'qprof over the gdbstub, memory from the RAM file (`--gdb` + `--qmp-socket`)'
    # shellcheck disable=SC2016
    qprof_row_as gdb-process 'qprof over the gdbstub alone, process memory (`--memory process`)'
    # shellcheck disable=SC2016
    qprof_row_as gdb-m 'qprof over the gdbstub alone, memory in pipelined `m` packets'
    echo
    echo "- Floor of any QMP sampler, \`stop\` + \`info registers -a\` + \`cont\` with no memory read" \
         "(closed loop): paused p50 $(us_to_ms "$(kv floor paused_p50_us)"), p99" \
         "$(us_to_ms "$(kv floor paused_p99_us)"), $(kv floor rate) samples/s."
    echo "- Baseline depth: measured, $(kv baseline-100 frames_mean) frames walked per sample on average" \
         "(at most $(kv baseline-closed frames_max)): the demo's frame-pointer chains are short, and a" \
         "walk that reaches an interrupt frame ends there (the entry stub leaves no frame pointer into" \
         "the interrupted code)."
    echo "- Baseline cost per frame: measured, one \`x/2gx\` round trip with the guest stopped takes" \
         "$(us_to_ms "$X_RTT") (median); least-squares fit of paused time over depth:" \
         "$(kv baseline-closed fit_fixed_us) us + $(kv baseline-closed fit_per_frame_us) us per frame."
    echo "- Baseline for a 16-frame stack: measured with padded walks (row 2: after the real chain ends," \
         "the last frame is read again until 16 frames were paid for, so every sample makes at least" \
         "15 \`x/2gx\` round trips on real stack memory). Derived as a cross-check: p50 at the measured" \
         "depth plus (15 - $(kv baseline-100 x_reads_mean)) reads at the median read cost = $(us_to_ms "$BASE16")."
    echo "  qprof's paused time does not grow with depth (it copies fixed stack windows and unwinds" \
         "after \`cont\`), so for qprof the 16-frame figure is the measured one."
    echo "- qprof frames: mean frames per non-idle stack in the folded output of the 100 Hz run."
    echo
    echo "Unprofiled work rate, iterations per guest second / per wall second (the spread between"
    echo "these stretches is the noise floor of the slowdown figures):"
    awk '$1 ~ /^unprofiled/ && $2 != "-" {
            printf "%s%s %.0f / %.0f", sep, $1, $2, $3; sep = ", "
            if (!n++ || $3 < lo) lo = $3; if ($3 > hi) hi = $3; sum += $3 }
         END { if (n) printf "; wall-rate spread %.1f%% of the mean\n", 100 * (hi - lo) / (sum / n) }' "$WORK/rates"
    echo
}

report_offline() {
    echo "## Offline cost"
    echo
    if needs offline; then
        echo "- Unwinding + symbolizing one 16-frame stack from a snapshot: $(unwind_us) us (\`unwind_bench\`):"
        echo
        echo '```'
        cat "$WORK/unwind_bench"
        echo '```'
        echo
    fi
    needs demo || return 0
    demo_figures
    echo "- qprof \`--memory direct --interval 1\` for $RSS_RUN s: $(awk '/samples in/' "$WORK/direct-1000.summary" | sed 's/^qprof: //')"
    echo "  peak RSS $((PEAK_KB / 1024)) MiB (\`/usr/bin/time\`); RSS at 10 s $RSS_EARLY KiB, at ${RSS_LATE_T} s" \
         "$RSS_LATE KiB (growth $RSS_GROWTH KiB); qprof CPU time (user + system) $CPU_PER_SAMPLE us per sample."
    echo
}

report_targets() {
    echo "## Targets"
    echo
    needs demo || return 0
    demo_figures
    local unwind
    unwind=$(unwind_us)
    echo "| target | this run | |"
    echo "|---|---|---|"
    echo "| paused p50 <= 0.5 ms, direct | $(ms "$(qprof_fig direct-100 p50)") at 100 Hz ($(ms "$(qprof_fig direct-closed p50)") closed loop) | $(verdict "$DIRECT_P50_US" 500 '<=') |"
    echo "| >= 10x under the per-frame baseline, 16 frames | ${RATIO16}x against the 16-frame baseline; ${RATIO}x at the guest's own depth ($(kv baseline-100 frames_mean) frames) | $(verdict "$RATIO16" 10 '>=') |"
    echo "| >= 1500 samples/s closed loop, direct | $(qprof_fig direct-closed rate)/s | $(verdict "$(qprof_fig direct-closed rate)" 1500 '>=') |"
    echo "| slowdown <= 5% at 100 Hz, direct | $DIRECT_SLOW_WALL wall time ($DIRECT_SLOW_GUEST guest time) | $(verdict "${DIRECT_SLOW_WALL%\%}" 5 '<=') |"
    echo "| unwind + symbolize <= 20 us | ${unwind:--} us | $(verdict "$unwind" 20 '<=') |"
    echo "| flat RSS over 60 s at 1000 Hz | +$RSS_GROWTH KiB from 10 s to ${RSS_LATE_T} s | $(verdict "$RSS_GROWTH" 512 '<=') |"
    echo
}

report_plugin() {
    echo "## The TCG plugin target (\`bench/plugin.sh\`, QEMU 10)"
    echo
    echo "The demo guest (\`run=spin\`, one vCPU, TCG) under QEMU 10. Sampling costs are taken in one"
    echo "boot, each configuration's stretch against the idle stretches either side of it; the"
    echo "plugin's flat cost (loaded, nobody sampling) across boots against QEMU 10 alone; each"
    echo "figure the median of 5 rounds, with its spread (the header of \`bench/plugin.sh\` says why)."
    echo "\`plugin 1 kHz --exact\` also counts every instruction per function (\`qprof --exact\`)."
    echo
    needs plugin || return 0
    cat "$WORK/plugin.md"
    echo
}

report_arch() {
    echo "## Per architecture: x86_64, riscv64, aarch64 (\`bench/arch.sh\`)"
    echo
    echo "qprof on each architecture's demo guest in one run: x86_64, riscv64 and aarch64, each over"
    echo "the gdbstub (\`--gdb\` + \`--qmp-socket\` for the RAM file) and over QMP alone (aarch64's memory"
    echo "then through memsave). $ARCH_SAMPLES samples per row at \`--interval 1\`, every row on a freshly booted guest, the"
    echo "rows run twice with the architectures alternating; medians of the two."
    echo
    if ! needs arch; then
        [ -s "$WORK/arch.md" ] || return 0
        echo "What it measured before it stopped:"
        echo
    fi
    cat "$WORK/arch.md"
    echo
}

report_library() {
    echo "## Library-level sample cost (\`qmp_sample_bench\`, same guest)"
    echo
    echo "The qmp library's sample transaction alone (\`qmp_sample\`): registers of all vCPUs, a 4 KiB"
    echo "stack window and the qprof_abi struct, closed loop; no unwinding, no process bookkeeping."
    echo
    needs demo || return 0
    cat "$WORK/qmp_sample_bench"
    echo
    echo "Per-stretch work rates (label, iterations per guest second, per wall second, rate intervals):"
    echo
    echo '```'
    cat "$WORK/rates"
    echo '```'
}

# report_part FUNCTION: the part's text; a part that fails (a bug here, or a figure missing in a
# way its part did not foresee) is marked where it stands, and the rest is still written.
REPORT_FAILED=()
report_part() {
    local rc
    trap - ERR
    set +e
    (
        set -e
        trap 'on_err $?' ERR
        "$1"
    ) > "$WORK/part"
    rc=$?
    set -e
    trap 'on_err $?' ERR
    cat "$WORK/part"
    if [ "$rc" -ne 0 ]; then
        # shellcheck disable=SC2016 # the backquotes are markdown
        printf '\n**This part of the report (`%s`) stopped with status %s: see the bench output.**\n\n' "$1" "$rc"
        REPORT_FAILED+=("$1")
    fi
}

report() {
    local part
    for part in report_header report_failures report_sampling transports_section tcp_section \
                linux_section report_offline report_targets report_plugin report_arch report_library; do
        report_part "$part"
    done
}

step "writing $OUT"
report > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
cat "$OUT"
say "wrote $OUT"
if section_ok demo; then say "$(tcp_comparison)"; fi
if section_ok plugin; then grep -E '^bench: (plugin 10 kHz slowdown|--exact slowdown)' "$WORK/plugin.md" >&2; fi
if section_ok arch; then grep '^bench: arch ' "$WORK/arch.md" >&2; fi
FAILED=$(awk -F'\t' '$2 == "failed" { printf "%s%s", sep, $1; sep = ", " }' "$WORK/sections")
[ ${#REPORT_FAILED[@]} -eq 0 ] || FAILED+="${FAILED:+; }report parts: ${REPORT_FAILED[*]}"
[ -z "$FAILED" ] || die "FAILED: $FAILED (each named above; $OUT has what was measured, the rest marked)"
