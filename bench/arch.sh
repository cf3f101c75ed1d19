#!/usr/bin/env bash
# qprof's cost per sample on each architecture, side by side in one run (issue 24, item 6): the
# x86_64, riscv64 and aarch64 demo guests (`run=spin,spin,sys`, one vCPU, TCG, RAM in a shared
# file), each profiled over the gdbstub (`--gdb` + `--qmp-socket` for the RAM file, which riscv64
# and aarch64 need) and over QMP alone (`--qmp-socket`; aarch64's memory then comes through
# QEMU's HMP reads (`--memory auto` there), QMP giving no TTBRs to walk the RAM file with), and
# through qprof-plugin.so in QEMU 10 (`--plugin` + `--qmp-socket`; xtask/qemu10.sh's QEMU for each
# architecture), where the column of paused time holds the capture time on the vCPU thread instead
# (the guest is not paused) and there are no round trips.
# Usage: bench/arch.sh BUILD_DIR [SAMPLES [ROUNDS]]   (a Markdown table on stdout)
# Every row boots its guest afresh and takes a fixed SAMPLES (2000) samples at `--interval 1`
# (qprof goes as fast as it can when a sample takes longer than 1 ms: the samples/s column is
# what it reached). The rows run in turn ROUNDS times (2), the architectures alternating, so that
# load that comes and goes on the host spreads over all of them; each cell is the median over the
# rounds, the summary excerpt the last round's. The figures are qprof's own summary lines
# ("samples in ... (N samples/s)", "guest paused per sample: p50 ... ms, p99 ... ms; T ... round
# trips per sample"). QEMU's vCPU thread runs on host CPU 1, QEMU's other threads, qprof and this
# script on CPU 0 (as bench/run.sh's demo section places them).
# The last lines, one per architecture, which xtask bench (bench/run.sh, section arch) repeats:
#   bench: arch x86_64 gdbstub p50 X ms (N/s), qmp p50 Y ms (M/s), plugin p50 Z ms (K/s)
# Exit status 77 (with the reason on stderr) when qemu-system-riscv64 or the riscv64 demo guest is
# missing (a missing aarch64 QEMU or guest leaves its rows saying so); 1 when a run failed (its row says how, the table is still printed).
set -Eeuo pipefail
BUILD=$(cd "${1:?usage: bench/arch.sh BUILD_DIR [SAMPLES [ROUNDS]]}" && pwd)
SAMPLES=${2:-2000}
ROUNDS=${3:-2}
QPROF=$BUILD/qprof
X86_KERNEL=$BUILD/guest/kernel.elf
RV_KERNEL=$BUILD/guest/riscv64/kernel.elf
A64_KERNEL=$BUILD/guest/aarch64/kernel.elf
CMDLINE=run=spin,spin,sys

say() { printf 'bench: arch: %s\n' "$*" >&2; }
skip() { say "skipped: $*"; exit 77; }
trap 'say "\`$BASH_COMMAND\` exited $? at line $LINENO"' ERR

[ -x "$QPROF" ] || { say "no $QPROF: build first (xtask/xtask build)"; exit 1; }
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed"
[ -f "$X86_KERNEL" ] || skip "no x86_64 demo guest at $X86_KERNEL (xtask/xtask build)"
command -v qemu-system-riscv64 >/dev/null ||
    skip "qemu-system-riscv64 is not installed (Debian: qemu-system-misc; xtask/xtask deps)"
[ -f "$RV_KERNEL" ] ||
    skip "no riscv64 demo guest at $RV_KERNEL (built when riscv64-linux-gnu-gcc is installed: xtask/xtask deps, then xtask/xtask build)"
# aarch64: the demo guest when it and its QEMU are there; else its rows say why not.
A64_MISSING=
command -v qemu-system-aarch64 >/dev/null || A64_MISSING="qemu-system-aarch64 is not installed"
[ -n "$A64_MISSING" ] || [ -f "$A64_KERNEL" ] ||
    A64_MISSING="no $A64_KERNEL (built when aarch64-linux-gnu-gcc is installed)"

# QEMU 10 and the plugin: the plugin rows, when both are there (else they say why not).
PLUGIN_MISSING=
if [ -z "${QEMU10_BIN:-}" ] || [ ! -x "$QEMU10_BIN" ]; then
    eval "$("$(dirname "$0")/../xtask/qemu10.sh" --quiet 2>/dev/null)" || true
fi
if [ -z "${QEMU10_BIN:-}" ] || [ ! -x "${QEMU10_BIN:-}" ]; then
    PLUGIN_MISSING="no QEMU 10 (xtask/qemu10.sh)"
elif [ ! -f "$BUILD/qprof-plugin.so" ]; then
    PLUGIN_MISSING="no $BUILD/qprof-plugin.so (configure after xtask/qemu10.sh)"
else
    # shellcheck disable=SC2153 # QEMU10_* come from qemu10.sh's output
    export QEMU_MODULE_DIR=$QEMU10_MODULE_DIR
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/qprof-arch-bench.XXXXXX")
RAM=/dev/shm/qprof-arch-bench-ram-$$
QEMU_PID=
stop_qemu() {
    if [ -n "$QEMU_PID" ]; then
        kill "$QEMU_PID" 2>/dev/null || true
        wait "$QEMU_PID" 2>/dev/null || true
    fi
    QEMU_PID=
    rm -f "$RAM"
}
trap 'stop_qemu; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

VCPU_CPU=0
if [ "$(nproc)" -ge 2 ]; then
    VCPU_CPU=1
    taskset -p -c 0 $$ >/dev/null # QEMU and qprof inherit it; the vCPU thread moves to CPU 1
fi

# boot ARCH: QEMU with the guest of ARCH, its RAM in $RAM, QMP on $WORK/qmp, the gdbstub on
# $WORK/gdb; returns once the guest has started its programs (the demo guests print "ready").
# Then the vCPU thread goes to VCPU_CPU.
boot() { # boot ARCH [plugin]
    local arch=$1 mem=256 qemu args=() ready=ready waited=0
    case $arch in
        x86_64) qemu=qemu-system-x86_64 args=(-machine memory-backend=ram -kernel "$X86_KERNEL" -append "$CMDLINE") ;;
        riscv64) qemu=qemu-system-riscv64 args=(-machine "virt,memory-backend=ram" -bios none -kernel "$RV_KERNEL" -append "$CMDLINE") ;;
        aarch64) qemu=qemu-system-aarch64 args=(-machine "virt,memory-backend=ram" -cpu cortex-a57 -kernel "$A64_KERNEL" -append "$CMDLINE") ;;
    esac
    if [ "${2:-}" = plugin ]; then # QEMU 10 of the same architecture, with the plugin
        qemu=${QEMU10_BIN%/*}/$qemu
        args+=(-L "$QEMU10_PREFIX/usr/share/qemu" -L /usr/share/seabios
               -plugin "$BUILD/qprof-plugin.so,socket=$WORK/plugin")
        rm -f "$WORK/plugin"
    fi
    rm -f "$WORK/qmp" "$WORK/gdb" "$WORK/serial" "$RAM"
    : > "$WORK/serial"
    "$qemu" "${args[@]}" -accel tcg -m "${mem}M" -display none -no-reboot -nodefaults \
        -object "memory-backend-file,id=ram,size=${mem}M,mem-path=$RAM,share=on" \
        -qmp "unix:$WORK/qmp,server=on,wait=off" \
        -chardev "socket,path=$WORK/gdb,server=on,wait=off,id=gdb0" -gdb chardev:gdb0 \
        -serial "file:$WORK/serial" -name qprof-bench-arch,debug-threads=on \
        </dev/null 2> "$WORK/qemu.err" &
    QEMU_PID=$!
    until [ -S "$WORK/qmp" ] && [ -S "$WORK/gdb" ] && { [ -z "$ready" ] || grep -q "$ready" "$WORK/serial"; }; do
        kill -0 "$QEMU_PID" 2>/dev/null || { say "$qemu exited: $(cat "$WORK/qemu.err")"; return 1; }
        [ $waited -lt 1200 ] || { say "the $arch guest did not start within 120 s"; return 1; }
        sleep 0.1
        waited=$((waited + 1))
    done
    local t
    for t in /proc/"$QEMU_PID"/task/*; do
        case $(cat "$t/comm" 2>/dev/null) in "CPU "*/*) taskset -p -c "$VCPU_CPU" "${t##*/}" >/dev/null ;; esac
    done
    sleep 1 # let the guest settle (TCG's translation cache, the programs' first loops)
}

# row ARCH TRANSPORT ROUND: one qprof run of SAMPLES samples on a freshly booted guest; its
# summary (stderr) in $WORK/ARCH-TRANSPORT-ROUND.summary.
row() {
    local arch=$1 transport=$2 out=$WORK/$1-$2-$3 target=() guest=()
    case $transport in
        gdbstub) target=(--gdb "unix:$WORK/gdb" --qmp-socket "$WORK/qmp") ;;
        qmp) target=(--qmp-socket "$WORK/qmp") ;;
        plugin) target=(--plugin "unix:$WORK/plugin" --qmp-socket "$WORK/qmp") ;;
    esac
    case $arch in
        x86_64) guest=(--kernel "$X86_KERNEL" --user-dir "$BUILD/guest/user") ;;
        riscv64) guest=(--kernel "$RV_KERNEL" --user-dir "$BUILD/guest/riscv64/user") ;;
        aarch64) guest=(--kernel "$A64_KERNEL" --user-dir "$BUILD/guest/aarch64/user") ;;
    esac
    say "round $3: $arch over $transport, $SAMPLES samples at --interval 1"
    if ! boot "$arch" "$transport"; then
        echo "qprof: not run: the $arch guest did not boot" > "$out.summary"
        stop_qemu
        return 0
    fi
    local rc=0
    "$QPROF" "${target[@]}" "${guest[@]}" --samples "$SAMPLES" --interval 1 --no-progress \
        -o "$out.folded" 2> "$out.summary" || rc=$?
    if [ "$rc" -ne 0 ]; then # its own last word, for the row
        echo "qprof failed (status $rc): $(grep -v '^$' "$out.summary" | tail -n 1)" >> "$out.summary"
        say "$arch over $transport: $(tail -n 1 "$out.summary")"
    fi
    stop_qemu
}

# fig FILE rate|p50|p99|trips|excerpt: one figure of a qprof summary, empty when it has none.
fig() {
    [ -f "$1" ] || return 0
    case $2 in
        rate) sed -n 's/^qprof: [0-9]* samples in .* s (\([0-9.]*\) samples\/s).*/\1/p' "$1" ;;
        p50) sed -n 's/^guest paused per sample: p50 \([0-9.]*\) ms.*/\1/p' "$1"
             # the plugin's: capture time on the vCPU thread, in ms like the pauses
             sed -n 's/^captured inside QEMU.* p50 \([0-9.]*\) us,.*/\1/p' "$1" | awk '{ print $1 / 1000 }' ;;
        p99) sed -n 's/^guest paused per sample: .*, p99 \([0-9.]*\) ms.*/\1/p' "$1"
             sed -n 's/^captured inside QEMU.* p99 \([0-9.]*\) us,.*/\1/p' "$1" | awk '{ print $1 / 1000 }' ;;
        trips) sed -n 's/^guest paused per sample: .*; \([0-9.]*\) [A-Za-z]* round trips per sample.*/\1/p' "$1" ;;
        excerpt) grep -E '^qprof: [0-9]+ samples in|^guest paused per sample:|^captured inside QEMU|^guest running:|^vCPU stacks:|^truncated stacks:|failed|^qprof: not run' "$1" |
            sed 's/^qprof: //; s/|/\\|/g' | awk '{ printf "%s%s", (NR > 1 ? "<br>" : ""), $0 }' || true ;;
    esac
}

# median ARCH TRANSPORT FIGURE: over the rounds that have it; empty when none has.
median() {
    local r
    for ((r = 1; r <= ROUNDS; r++)); do fig "$WORK/$1-$2-$r.summary" "$3"; done |
        sort -g | awk '{ v[n++] = $1 } END { if (n) print (n % 2) ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}

# A figure that was not measured prints as "-", never as 0.
num() { awk -v v="$1" -v f="$2" 'BEGIN { if (v == "") print "-"; else printf f, v }'; }

FAILED=0
print_row() { # ARCH TRANSPORT LABEL
    local p50 excerpt
    p50=$(median "$1" "$2" p50)
    excerpt=$(fig "$WORK/$1-$2-$ROUNDS.summary" excerpt)
    [ -n "$p50" ] || FAILED=1
    printf '| %s | %s | %s / %s | %s | %s | %s |\n' "$3" "$2" "$(num "$p50" %.3f)" \
        "$(num "$(median "$1" "$2" p99)" %.3f)" "$(num "$(median "$1" "$2" rate)" %.0f)" \
        "$(num "$(median "$1" "$2" trips)" %.1f)" "${excerpt:-no summary}"
}

# The line per architecture: "gdbstub p50 X ms (N/s)" for each transport measured.
arch_line() { # ARCH TRANSPORT...
    local arch=$1 t line=
    shift
    for t in "$@"; do
        line+="${line:+, }$t p50 $(num "$(median "$arch" "$t" p50)" %.3f) ms ($(num "$(median "$arch" "$t" rate)" %.0f)/s)"
    done
    echo "bench: arch $arch $line"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for ((round = 1; round <= ROUNDS; round++)); do
    row x86_64 gdbstub "$round"
    row riscv64 gdbstub "$round"
    [ -n "$A64_MISSING" ] || row aarch64 gdbstub "$round"
    row x86_64 qmp "$round"
    row riscv64 qmp "$round"
    [ -n "$A64_MISSING" ] || row aarch64 qmp "$round"
    if [ -z "$PLUGIN_MISSING" ]; then
        row x86_64 plugin "$round"
        row riscv64 plugin "$round"
        [ -n "$A64_MISSING" ] || row aarch64 plugin "$round"
    fi
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

echo "| arch | transport | paused p50 / p99 per sample (ms) | samples/s reached at --interval 1 | round trips per sample | qprof's summary excerpt (round $ROUNDS) |"
echo "|---|---|---|---|---|---|"
print_row x86_64 gdbstub "x86_64 (demo guest)"
print_row x86_64 qmp "x86_64 (demo guest)"
print_row riscv64 gdbstub "riscv64 (demo guest)"
print_row riscv64 qmp "riscv64 (demo guest)"
if [ -n "$A64_MISSING" ]; then
    echo "| aarch64 (demo guest) | - | - | - | - | not measured: $A64_MISSING |"
else
    print_row aarch64 gdbstub "aarch64 (demo guest)"
    print_row aarch64 qmp "aarch64 (demo guest)"
fi
if [ -n "$PLUGIN_MISSING" ]; then
    echo "| every arch | plugin | - | - | - | not measured: $PLUGIN_MISSING |"
else
    print_row x86_64 plugin "x86_64 (demo guest, QEMU 10)"
    print_row riscv64 plugin "riscv64 (demo guest, QEMU 10)"
    [ -n "$A64_MISSING" ] || print_row aarch64 plugin "aarch64 (demo guest, QEMU 10)"
fi
echo
echo "$SAMPLES samples per run at \`--interval 1\`, each row on a freshly booted guest (one vCPU, TCG,"
echo "\`-append $CMDLINE\`, RAM in a shared file, memory read from it but by aarch64's QMP rows, which"
echo "read through QEMU's HMP reads: QMP gives no TTBRs to walk the file with), medians of"
echo "$ROUNDS rounds in which the architectures alternate; load average $LOAD_BEFORE before, $LOAD_AFTER after."
qemu_version() { command -v "$1" >/dev/null && "$1" --version | sed -n '1s/^QEMU emulator version //p'; }
echo "QEMU: $(for a in x86_64 riscv64 aarch64; do printf '%s%s %s' "${sep:-}" "$a" "$(qemu_version "qemu-system-$a" || echo -)"; sep=", "; done). At \`--interval 1\` qprof"
echo "asks for 1000 samples/s on a jittered schedule: a row below that fell behind it where samples"
echo "(the pause plus qprof's own work after \`cont\`; the p99 pause alone reaches several ms) took"
echo "longer than the interval. The plugin rows' first column is the capture time on the vCPU"
echo "thread (the guest is never paused) and they have no round trips."
echo
PLUGIN_ROW=()
[ -n "$PLUGIN_MISSING" ] || PLUGIN_ROW=(plugin)
arch_line x86_64 gdbstub qmp "${PLUGIN_ROW[@]}"
arch_line riscv64 gdbstub qmp "${PLUGIN_ROW[@]}"
if [ -n "$A64_MISSING" ]; then
    echo "bench: arch aarch64: not measured: $A64_MISSING"
else
    arch_line aarch64 gdbstub qmp "${PLUGIN_ROW[@]}"
fi
[ "$FAILED" -eq 0 ] || { say "a run gave no figures (its row says why)"; exit 1; }
