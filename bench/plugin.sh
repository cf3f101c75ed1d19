#!/usr/bin/env bash
# The plugin target's costs on the demo guest: guest slowdown with qprof-plugin.so sampling at
# 1 kHz and 10 kHz (and loaded but idle) against the same QEMU 10 without the plugin, beside the
# gdbstub at 1 kHz, and the plugin's two triggers (trigger=timer, the default, and counter);
# the capture cost on the vCPU thread (p50/p99, the plugin times itself) and the samples lost,
# as qprof's summary gives them.
# Usage: bench/plugin.sh BUILD_DIR [SECONDS [ROUNDS]]   (a Markdown table; ~15 s per row)
# The last lines: `bench: plugin 10 kHz slowdown X%, gdbstub 1 kHz slowdown Y%` (how they are
# taken is printed above it), which xtask bench (bench/run.sh, section plugin) repeats.
# The `plugin 1 kHz --exact` row samples at 1 kHz and counts every instruction per block (qprof
# --exact): its slowdown against the `plugin 1 kHz` row is what counting costs; the line
# `bench: --exact slowdown X% (Y% over plugin 1 kHz; with trigger=counter Z%)` gives both, and
# the same with the plugin's other trigger.
#
# Each row boots a fresh QEMU 10 (xtask/qemu10.sh) with `run=spin`, one vCPU, TCG, and stamps
# each "spin[1] iter=N" line of the serial log with the host clock as it arrives; the work rate
# is iterations per wall second between the first and last line of the sampled stretch, and per
# second of CPU time QEMU used meanwhile (/proc/PID/stat): on a loaded host the wall rate also
# measures the other load, the CPU rate only what QEMU itself spent (it leaves out the time a
# stopping target keeps the guest paused, so compare the gdbstub by the wall rate). QEMU's
# busiest thread is the vCPU's; the rate per second of its CPU is what the guest sees where the
# host has a core to spare for QEMU's other threads (the plugin's timer among them). The
# rows run in turn ROUNDS times (2) and their rates are averaged, so that a load that comes and
# goes on the host spreads over all of them.
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/plugin.sh BUILD_DIR [SECONDS]}" && pwd)
SECS=${2:-10}
ROUNDS=${3:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# A QEMU 10 given in the environment (QEMU10_BIN, QEMU10_PREFIX, QEMU10_MODULE_DIR: one carried to
# a machine without network) is used as it is; else xtask/qemu10.sh provides it.
if [ -z "${QEMU10_BIN:-}" ] || [ ! -x "$QEMU10_BIN" ]; then
    eval "$("$ROOT/xtask/qemu10.sh" --quiet)"
fi
# shellcheck disable=SC2153 # QEMU10_* come from qemu10.sh's output
export QEMU_MODULE_DIR=$QEMU10_MODULE_DIR
PLUGIN=$BUILD/qprof-plugin.so
[ -f "$PLUGIN" ] || { echo "bench: no $PLUGIN (configure after xtask/qemu10.sh)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qprof-plugin-bench.XXXXXX")
QEMU_PID=
trap '[ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

boot() { # boot WITH_PLUGIN WITH_GDB
    rm -f "$WORK"/serial "$WORK"/stamped "$WORK"/plugin "$WORK"/gdb "$WORK"/lines
    : >"$WORK/serial"
    local extra=()
    [ "$1" = 1 ] && extra+=(-plugin "$PLUGIN,socket=$WORK/plugin")
    [ "$1" = counter ] && extra+=(-plugin "$PLUGIN,socket=$WORK/plugin,trigger=counter")
    [ "$2" = 1 ] && extra+=(-chardev "socket,path=$WORK/gdb,server=on,wait=off,id=g" -gdb chardev:g)
    "$QEMU10_BIN" -L "$QEMU10_PREFIX/usr/share/qemu" -L /usr/share/seabios -display none \
        -nodefaults -no-reboot -m 256M -accel tcg -kernel "$BUILD/guest/kernel.elf" \
        -append run=spin -serial "file:$WORK/serial" "${extra[@]}" &
    QEMU_PID=$!
    until grep -q ready "$WORK/serial" 2>/dev/null; do sleep 0.1; done
    # stamp the work lines as they arrive
    mkfifo "$WORK/lines"
    tail -n0 -F "$WORK/serial" 2>/dev/null >"$WORK/lines" &
    TAIL=$!
    while IFS= read -r line; do
        case $line in
            *"spin[1] iter="*)
                read -r -a st <"/proc/$QEMU_PID/stat" # utime, stime: fields 14, 15 (ticks)
                printf '%s %s %s\n' "$EPOCHREALTIME" "${line##*iter=}" "$((st[13] + st[14]))" ;;
        esac
    done <"$WORK/lines" >>"$WORK/stamped" &
    STAMPER=$!
}

stop() {
    kill "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
    QEMU_PID=
    kill "$STAMPER" "$TAIL" 2>/dev/null || true
}

threads() { # TID TICKS per thread of QEMU
    for t in /proc/"$QEMU_PID"/task/*; do
        read -r -a st <"$t/stat" 2>/dev/null && echo "${t##*/} $((st[13] + st[14]))"
    done
}

# iterations per wall second, per second of QEMU's CPU time and per second of its vCPU thread's
# (the thread that ran most between the two snapshots), over the stamped lines
rate() {
    local vcpu
    vcpu=$(join <(sort "$WORK/threads0") <(sort "$WORK/threads1") |
        awk '{ d = $3 - $2; if (d > m) m = d } END { print m + 0 }')
    awk -v v="$vcpu" 'NR == 1 { t0 = $1; i0 = $2; c0 = $3 } { t = $1; i = $2; c = $3 } END {
        if (NR < 3 || t == t0 || c == c0 || v == 0) print "-|-|-"
        else printf "%.1f|%.1f|%.1f", (i - i0) / (t - t0), (i - i0) / ((c - c0) / 100),
            (i - i0) / (v / 100) }' "$WORK/stamped"
}

row() { # row LABEL WITH_PLUGIN WITH_GDB [QPROF ARGS...]
    local label=$1 plugin=$2 gdb=$3
    shift 3
    boot "$plugin" "$gdb"
    sleep 1
    : >"$WORK/stamped"
    threads >"$WORK/threads0"
    local summary=""
    if [ $# -gt 0 ]; then
        "$BUILD/qprof" "$@" --kernel "$BUILD/guest/kernel.elf" --user-dir "$BUILD/guest/user" \
            --duration "$SECS" --no-progress -o "$WORK/out.folded" 2>"$WORK/qprof.err" || true
        summary=$(grep -E "samples in|capture cost|guest paused per sample|guest running|lost|exact instructions \(" "$WORK/qprof.err" |
            tr '\n' ' ' || true)
        [ -n "$summary" ] || summary="qprof failed: $(tail -n1 "$WORK/qprof.err")"
    else
        sleep "$SECS"
    fi
    threads >"$WORK/threads1"
    local r
    r=$(rate)
    stop
    printf '%s|%s|%s\n' "$label" "$r" "$summary"
}

for ((round = 0; round < ROUNDS; round++)); do
    row "QEMU 10, no plugin" 0 0
    row "plugin loaded, no qprof" 1 0
    row "plugin 1 kHz" 1 0 --plugin "unix:$WORK/plugin" --interval 1
    row "plugin 10 kHz" 1 0 --plugin "unix:$WORK/plugin" --interval 0.1
    row "gdbstub 1 kHz" 0 1 --gdb "unix:$WORK/gdb" --interval 1
    row "plugin 1 kHz --exact" 1 0 --plugin "unix:$WORK/plugin" --interval 1 --exact
    row "plugin loaded (trigger=counter), no qprof" counter 0
    row "plugin 10 kHz (trigger=counter)" counter 0 --plugin "unix:$WORK/plugin" --interval 0.1
    row "plugin 1 kHz --exact (trigger=counter)" counter 0 --plugin "unix:$WORK/plugin" --interval 1 --exact
done >"$WORK/all"
# one line per label: the mean rates, the last round's summary
awk -F'|' '!($1 in n) { order[++k] = $1 }
    { if ($2 != "-") { w[$1] += $2; c[$1] += $3; v[$1] += $4; n[$1]++ } else n[$1] += 0
      last[$1] = $5 }
    END { for (i = 1; i <= k; i++) { l = order[i]
        if (n[l]) printf "%s|%.1f|%.1f|%.1f|%s\n", l, w[l] / n[l], c[l] / n[l], v[l] / n[l], last[l]
        else printf "%s|-|-|-|%s\n", l, last[l] } }' "$WORK/all" >"$WORK/rows"
echo "| run | spin iterations per wall s | slowdown (wall) | per CPU s of QEMU | slowdown (CPU) | per CPU s of the vCPU thread | slowdown (vCPU thread) | qprof's summary |"
echo "|---|---|---|---|---|---|---|---|"
awk -F'|' 'NR == 1 { bw = $2; bc = $3; bv = $4 } {
    sw = ($2 == "-" || bw == "-" || bw == 0) ? "-" : sprintf("%.1f%%", 100 * (1 - $2 / bw))
    sc = ($3 == "-" || bc == "-" || bc == 0) ? "-" : sprintf("%.1f%%", 100 * (1 - $3 / bc))
    sv = ($4 == "-" || bv == "-" || bv == 0) ? "-" : sprintf("%.1f%%", 100 * (1 - $4 / bv))
    printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, sw, $3, sc, $4, sv, $5 }' "$WORK/rows"
slow() { awk -F'|' -v l="$1" -v c="$2" 'NR == 1 { b = $c } $1 == l && b > 0 && $c != "-" { printf "%.1f", 100 * (1 - $c / b) }' "$WORK/rows"; }
# The gdbstub's cost is the time it keeps the guest paused, which QEMU's CPU time leaves out:
# the guest does (work per CPU second) x (the share of time it runs). That share is taken as
# 1 - (samples per second reached) x (median pause), from qprof's summary: the median, because
# on a loaded host the mean pause also holds the times the host descheduled qprof mid-sample.
gdb_est() { awk -F'|' 'NR == 1 { b = $3 } $1 == "gdbstub 1 kHz" && b > 0 && $3 != "-" &&
    match($5, /\([0-9.]+ samples\/s\)/) {
        rate = substr($5, RSTART + 1, RLENGTH - 12)
        if (!match($5, /paused per sample: p50 [0-9.]+ ms/)) exit
        p50 = substr($5, RSTART + 24, RLENGTH - 27) / 1000
        share = 1 - rate * p50; if (share < 0) share = 0
        printf "%.1f", 100 * (1 - $3 * share / b) }' "$WORK/rows"; }
PLUGIN10=$(slow "plugin 10 kHz" 3)
GDB1=$(gdb_est)
echo
echo "The headline uses QEMU's CPU time per unit of guest work (wall time on a loaded host also"
echo "measures the other load): the plugin's slowdown is that rate against QEMU 10 without the"
echo "plugin; the gdbstub's multiplies its rate by the share of time the guest ran, 1 - (samples"
echo "per second reached) x (median pause) from qprof's summary, since the time it keeps the guest"
echo "paused costs QEMU no CPU. Wall-clock slowdowns:"
echo "plugin 10 kHz $(slow "plugin 10 kHz" 2)%, gdbstub 1 kHz $(slow "gdbstub 1 kHz" 2)%."
echo
echo "bench: plugin 10 kHz slowdown ${PLUGIN10:--}%, gdbstub 1 kHz slowdown ${GDB1:--}%"
# --exact against QEMU 10 without the plugin, and against the same sampling without counting
EXACT=$(slow "plugin 1 kHz --exact" 3)
EXACT_OVER=$(awk -F'|' '$1 == "plugin 1 kHz" { b = $3 } $1 == "plugin 1 kHz --exact" { e = $3 }
    END { if (b > 0 && e != "" && e != "-") printf "%.1f", 100 * (1 - e / b) }' "$WORK/rows")
echo "bench: --exact slowdown ${EXACT:--}% (${EXACT_OVER:--}% over plugin 1 kHz; with trigger=counter $(slow "plugin 1 kHz --exact (trigger=counter)" 3)%; QEMU's CPU per iteration)"
echo "bench: plugin 1 kHz $(slow "plugin 1 kHz" 3)%, plugin loaded and idle $(slow "plugin loaded, no qprof" 3)%; trigger=counter: loaded and idle $(slow "plugin loaded (trigger=counter), no qprof" 3)%, 10 kHz $(slow "plugin 10 kHz (trigger=counter)" 3)% (QEMU's CPU per iteration)"
echo "bench: vCPU thread's CPU per iteration: plugin 10 kHz $(slow "plugin 10 kHz" 4)%, trigger=counter 10 kHz $(slow "plugin 10 kHz (trigger=counter)" 4)%"
