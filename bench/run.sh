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
# BENCH_SCALE=0.3 shortens every stretch (for trying the script; the figures get noisier);
# BENCH_KEEP=1 keeps the raw outputs (the directory is named at the end).
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/run.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/bench/results.md
SCALE=${BENCH_SCALE:-1}
QPROF=$BUILD/qprof
KERNEL=$BUILD/guest/kernel.elf
USER_DIR=$BUILD/guest/user
GUEST_CMDLINE=run=spin,sys

say() { printf 'bench: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
secs() { awk -v s="$1" -v k="$SCALE" 'BEGIN { v = s * k; if (v < 2) v = 2; printf "%.1f", v }'; }

for f in "$QPROF" "$KERNEL" "$BUILD/bench/hmp_baseline" "$BUILD/bench/unwind_bench" \
         "$BUILD/bench/qmp_sample_bench" "$BUILD/bench/transport_floor"; do
    [ -e "$f" ] || die "missing $f: build first (xtask/xtask build)"
done
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not installed"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/qprof-bench.XXXXXX")
SOCK=$WORK/qmp
GDB=$WORK/gdb
RAM=/dev/shm/qprof-bench-ram-$$
QEMU_PID=
cleanup() {
    if [ -n "$QEMU_PID" ]; then
        kill "$QEMU_PID" 2>/dev/null || true
        wait "$QEMU_PID" 2>/dev/null || true
    fi
    rm -f "$RAM"
    if [ -n "${BENCH_KEEP:-}" ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

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

# start_qemu MEM_MB QEMU_ARGS...: QEMU with the bench's QMP socket, gdbstub and RAM file, its
# console stamped into $WORK/serial.
start_qemu() {
    local mem=$1
    shift
    rm -f "$SOCK" "$GDB" "$WORK/serial" "$RAM" # a RAM file of another size would be refused
    qemu-system-x86_64 "$@" -display none -no-reboot -nodefaults -m "${mem}M" \
        -qmp "unix:$SOCK,server=on,wait=off" \
        -chardev "socket,path=$GDB,server=on,wait=off,id=gdb0" -gdb chardev:gdb0 \
        -object "memory-backend-file,id=ram,size=${mem}M,mem-path=$RAM,share=on" \
        -machine memory-backend=ram -serial stdio </dev/null \
        > >(stamp_lines > "$WORK/serial") 2> "$WORK/qemu.err" &
    QEMU_PID=$!
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
    local t vcpu_tids=()
    for t in /proc/"$QEMU_PID"/task/*; do
        case $(cat "$t/comm") in "CPU "*/*) vcpu_tids+=("${t##*/}") ;; esac
    done
    [ ${#vcpu_tids[@]} -gt 0 ] || die "no 'CPU 0/...' thread in QEMU (debug-threads=on not honoured?)"
    for t in "${vcpu_tids[@]}"; do taskset -p -c "$VCPU_CPU" "$t" >/dev/null; done
    PLACEMENT=""
    for t in /proc/"$QEMU_PID"/task/*; do
        PLACEMENT+="\`$(cat "$t/comm")\` CPU $(awk '/^Cpus_allowed_list/ { print $2 }' "$t/status"), "
    done
    PLACEMENT="QEMU threads: ${PLACEMENT%, }; qprof, hmp_baseline and this script: CPU $PROFILER_CPU"
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
# beside it for the shared RAM file (direct) or alone (`m` packets).
QPROF_TARGET=(--qmp-socket "$SOCK")
over_qmp() { QPROF_TARGET=(--qmp-socket "$SOCK"); }
over_gdb() { # direct|m
    QPROF_TARGET=(--gdb "unix:$GDB")
    [ "$1" = direct ] && QPROF_TARGET+=(--qmp-socket "$SOCK")
    return 0
}

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
qprof_fig() { # LABEL rate|p50|p99|trips|failed
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

ms() { awk -v v="$1" 'BEGIN { printf "%.2f ms", v }'; }
us_to_ms() { awk -v v="$1" 'BEGIN { printf "%.2f ms", v / 1000 }'; }

# ---- The run -------------------------------------------------------------------------------

say "booting the demo guest ($GUEST_CMDLINE) with shared RAM"
OTHER_QEMUS=$(pgrep -c -x qemu-system-x86 || true)
boot_guest
pin_vcpu
say "$PLACEMENT"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
sleep "$(secs 2)" # let the guest settle (TCG translation cache, first rate lines)

BACKENDS=(direct memsave hmp)
CLOSED=$(secs 5) AT100=$(secs 10) AT1000=$(secs 10) RSS_RUN=$(secs 60) GAP=$(secs 8)

say "unprofiled ${GAP} s"
unprofiled unprofiled-1 "$GAP"
say "baseline (stop, info registers, x/2gx per frame, cont): closed loop, 100 Hz, 1000 Hz"
run_baseline baseline-closed "$CLOSED"
run_baseline baseline-100 "$AT100" -i 10
run_baseline baseline-1000 "$AT1000" -i 1
run_baseline baseline16-closed "$CLOSED" -f 16
run_baseline baseline16-100 "$AT100" -f 16 -i 10
run_baseline floor "$(secs 3)" -b
say "unprofiled ${GAP} s"
unprofiled unprofiled-2 "$GAP"
for b in "${BACKENDS[@]}"; do
    say "qprof --memory $b: closed loop, 100 Hz, 1000 Hz"
    run_qprof "$b-closed" "$b" 0.1 "$CLOSED"
    run_qprof "$b-100" "$b" 10 "$AT100"
    if [ "$b" = direct ]; then
        say "qprof --memory direct at 1000 Hz for $RSS_RUN s (resident set every second)"
        run_qprof "$b-1000" "$b" 1 "$RSS_RUN" rss
    else
        run_qprof "$b-1000" "$b" 1 "$AT1000"
    fi
    say "unprofiled ${GAP} s"
    unprofiled "unprofiled-after-$b" "$GAP"
done
for m in direct m; do
    over_gdb "$m"
    say "qprof over the gdbstub, memory $m: closed loop, 100 Hz, 1000 Hz"
    run_qprof "gdb-$m-closed" auto 0.1 "$CLOSED"
    run_qprof "gdb-$m-100" auto 10 "$AT100"
    run_qprof "gdb-$m-1000" auto 1 "$AT1000"
    say "unprofiled ${GAP} s"
    unprofiled "unprofiled-after-gdb-$m" "$GAP"
done
over_qmp
say "raw floors of both transports, -smp 1 (transport_floor)"
"$BUILD/bench/transport_floor" -q "$SOCK" -g "unix:$GDB" -n 300 qmp qmp-mem gdb gdb-state gdb-mem \
    > "$WORK/floor-1" 2>&1 || die "transport_floor failed: $(cat "$WORK/floor-1")"
say "library-level sample cost (qmp_sample_bench) and offline unwinding (unwind_bench)"
ABI_VA=0x$(nm "$KERNEL" | awk '$3 == "qprof_abi" { print $1 }')
"$BUILD/bench/qmp_sample_bench" -q "$SOCK" -a "$ABI_VA" -n 300 > "$WORK/qmp_sample_bench" 2>&1 ||
    die "qmp_sample_bench failed: $(cat "$WORK/qmp_sample_bench")"
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
kill "$QEMU_PID"
wait "$QEMU_PID" 2>/dev/null || true
QEMU_PID=
"$BUILD/bench/unwind_bench" > "$WORK/unwind_bench" 2>&1 || die "unwind_bench failed: $(cat "$WORK/unwind_bench")"
work_rates

# ---- Both transports at -smp 2, 4, 8 ---------------------------------------------------------

SMPS=(2 4 8)
SWEEP=$(secs 4)
for n in "${SMPS[@]}"; do
    say "-smp $n (MTTCG): booting; raw floors; qprof over QMP and over the gdbstub, closed loop"
    # every vCPU busy: one process pinned to each (sys on the third of every four), as QPROF_SMP
    GUEST_CMDLINE=run=$(for ((k = 0; k < n; k++)); do
        [ $((k % 4)) -eq 2 ] && printf 'sys@%d,' $k || printf 'spin@%d,' $k; done)
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
    kill "$QEMU_PID"
    wait "$QEMU_PID" 2>/dev/null || true
    QEMU_PID=
done

# ---- A stock Debian Linux guest, same sampling settings ------------------------------------

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
if "$ROOT/tests/linux/make-guest.sh" "$LINUX_DIR" > "$WORK/linux-guest.log" 2>&1; then
    say "stock Debian Linux guest (1 vCPU, TCG): qprof over QMP and over the gdbstub at 100 Hz"
    boot_linux
    pin_vcpu
    over_qmp
    run_linux linux-qmp
    over_gdb direct
    run_linux linux-gdb
    over_qmp
    kill "$QEMU_PID"
    wait "$QEMU_PID" 2>/dev/null || true
    QEMU_PID=
else
    LINUX_NOTE=$(tail -n1 "$WORK/linux-guest.log")
    say "no Linux guest: $LINUX_NOTE"
fi

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

# Figures the text and the targets need.
BASE_P50=$(kv baseline-100 paused_p50_us)
BASE_READS=$(kv baseline-100 x_reads_mean)
X_RTT=$(kv baseline-closed x_rtt_p50_us)
BASE16=$(awk -v p="$BASE_P50" -v r="$BASE_READS" -v x="$X_RTT" 'BEGIN { printf "%.0f", p + (15 - r) * x }')
DIRECT_P50_US=$(awk -v v="$(qprof_fig direct-100 p50)" 'BEGIN { printf "%.0f", v * 1000 }')
RATIO=$(awk -v a="$BASE_P50" -v b="$DIRECT_P50_US" 'BEGIN { printf "%.1f", a / b }')
RATIO16=$(awk -v a="$(kv baseline16-100 paused_p50_us)" -v b="$DIRECT_P50_US" 'BEGIN { printf "%.1f", a / b }')
UNWIND_US=$(awk '/unwind \+ symbolize:/ { print $4 }' "$WORK/unwind_bench")
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

# transport_floor's figure: FILE_SUFFIX MODE KEY (floor-1, floor-2, ...)
floor_fig() {
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
    awk '{ print $NF, $0 }' "$WORK/linux-qmp.folded" 2>/dev/null | sort -nr | head -5 | cut -d' ' -f2- | cut -c1-200
    echo '```'
    echo
}

transports_section() {
    local gdb1 gdb8 growth m_p50 ms_p50 slow1000
    gdb1=$(qprof_fig gdb-direct-closed p50)
    gdb8=$(qprof_fig smp8-gdb p50)
    growth=$(awk -v a="$gdb1" -v b="$gdb8" 'BEGIN { printf "%.3f", (b - a) / 7 }')
    m_p50=$(qprof_fig gdb-m-100 p50)
    ms_p50=$(qprof_fig memsave-100 p50)
    slow1000=$(slowdown gdb-direct-1000 3)
    echo "## Transports: QMP and the gdbstub, side by side"
    echo
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
    echo "- growth of qprof's paused p50 over the gdbstub per added vCPU (1 to 8): $growth ms."
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
    echo "| 8 vCPUs (MTTCG): paused p50 <= 0.6 ms | $(ms "$gdb8") (closed loop; $growth ms per added vCPU) | $(verdict "$gdb8" 0.6 '<=') |"
    echo "| slowdown at 1000 Hz, 1 vCPU <= 25% | $slow1000 wall time | $(verdict "${slow1000%\%}" 25 '<=') |"
    echo "| no shared RAM file: paused p50 <= 1 ms | $(ms "$m_p50") with \`m\` packets ($(ms "$ms_p50") with memsave) | $(verdict "$m_p50" 1 '<=') |"
    echo
}

other_load_note() {
    [ "$OTHER_QEMUS" -gt 0 ] || return 0
    echo " (another QEMU competes for the same cores: every figure is noisier and slower than on an idle machine)"
}

report() {
    echo "# qprof benchmark results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- QEMU: $(qemu-system-x86_64 --version | head -1), ${QPROF_ACCEL:-tcg}"
    echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $NCPU cores"
    echo "- guest: demo kernel with frame pointers, \`-append $GUEST_CMDLINE\` (one CPU-bound process," \
         "one that spends half its time in a system call), 1 vCPU, 256 MiB RAM in a shared file"
    echo "- placement: $PLACEMENT"
    echo "- other load: $OTHER_QEMUS other QEMU process(es) running at the start; load average" \
         "$LOAD_BEFORE before, $LOAD_AFTER after$(other_load_note)"
    echo "- command: \`xtask/xtask bench\` (bench/run.sh; BENCH_SCALE=$SCALE)"
    echo
    echo "## Sampling cost and guest slowdown"
    echo
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
    transports_section
    linux_section
    echo "## Offline cost"
    echo
    echo "- Unwinding + symbolizing one 16-frame stack from a snapshot: $UNWIND_US us (\`unwind_bench\`):"
    echo
    echo '```'
    cat "$WORK/unwind_bench"
    echo '```'
    echo
    echo "- qprof \`--memory direct --interval 1\` for $RSS_RUN s: $(awk '/samples in/' "$WORK/direct-1000.summary" | sed 's/^qprof: //')"
    echo "  peak RSS $((PEAK_KB / 1024)) MiB (\`/usr/bin/time\`); RSS at 10 s $RSS_EARLY KiB, at ${RSS_LATE_T} s" \
         "$RSS_LATE KiB (growth $RSS_GROWTH KiB); qprof CPU time (user + system) $CPU_PER_SAMPLE us per sample."
    echo
    echo "## Targets"
    echo
    echo "| target | this run | |"
    echo "|---|---|---|"
    echo "| paused p50 <= 0.5 ms, direct | $(ms "$(qprof_fig direct-100 p50)") at 100 Hz ($(ms "$(qprof_fig direct-closed p50)") closed loop) | $(verdict "$DIRECT_P50_US" 500 '<=') |"
    echo "| >= 10x under the per-frame baseline, 16 frames | ${RATIO16}x against the 16-frame baseline; ${RATIO}x at the guest's own depth ($(kv baseline-100 frames_mean) frames) | $(verdict "$RATIO16" 10 '>=') |"
    echo "| >= 1500 samples/s closed loop, direct | $(qprof_fig direct-closed rate)/s | $(verdict "$(qprof_fig direct-closed rate)" 1500 '>=') |"
    echo "| slowdown <= 5% at 100 Hz, direct | $DIRECT_SLOW_WALL wall time ($DIRECT_SLOW_GUEST guest time) | $(verdict "${DIRECT_SLOW_WALL%\%}" 5 '<=') |"
    echo "| unwind + symbolize <= 20 us | $UNWIND_US us | $(verdict "$UNWIND_US" 20 '<=') |"
    echo "| flat RSS over 60 s at 1000 Hz | +$RSS_GROWTH KiB from 10 s to ${RSS_LATE_T} s | $(verdict "$RSS_GROWTH" 512 '<=') |"
    echo
    echo "## Library-level sample cost (\`qmp_sample_bench\`, same guest)"
    echo
    echo "The qmp library's sample transaction alone (\`qmp_sample\`): registers of all vCPUs, a 4 KiB"
    echo "stack window and the qprof_abi struct, closed loop; no unwinding, no process bookkeeping."
    echo
    cat "$WORK/qmp_sample_bench"
    echo
    echo "Per-stretch work rates (label, iterations per guest second, per wall second, rate intervals):"
    echo
    echo '```'
    cat "$WORK/rates"
    echo '```'
}

report > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
cat "$OUT"
say "wrote $OUT"
