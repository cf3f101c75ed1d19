#!/usr/bin/env bash
# xtask soak: qprof at ~100 Hz against the demo guest for a long run (30 minutes by default),
# checking that nothing grows with run length: qprof's resident memory, its open file
# descriptors, and its CPU time per sample, first minute against last minute.
# Usage: bench/soak.sh BUILD_DIR [MINUTES]   (writes bench/soak.md)
set -Eeuo pipefail
BUILD=$(cd "${1:?usage: bench/soak.sh BUILD_DIR [MINUTES]}" && pwd)
MINUTES=${2:-30}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/bench/soak.md
QPROF=$BUILD/qprof
KERNEL=$BUILD/guest/kernel.elf

say() { printf 'soak: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
# No silent exits: a failing command names itself, its status and its line.
trap 'say "failed: \`$BASH_COMMAND\` exited $? at bench/soak.sh:$LINENO"' ERR
{ [ -x "$QPROF" ] && [ -f "$KERNEL" ]; } || die "build first (xtask/xtask build)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/qprof-soak.XXXXXX")
RAM=/dev/shm/qprof-soak-ram-$$
QEMU_PID='' QPROF_PID=''
cleanup() {
    if [ -n "$QPROF_PID" ]; then kill "$QPROF_PID" 2>/dev/null || true; fi
    if [ -n "$QEMU_PID" ]; then kill "$QEMU_PID" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    rm -f "$RAM"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

qemu-system-x86_64 -kernel "$KERNEL" -append run=spin,spin,sys -display none -no-reboot \
    -nodefaults -m 256M -accel tcg -serial "file:$WORK/serial" \
    -qmp "unix:$WORK/qmp,server=on,wait=off" \
    -object "memory-backend-file,id=ram,size=256M,mem-path=$RAM,share=on" \
    -machine memory-backend=ram &
QEMU_PID=$!
for _ in $(seq 600); do
    [ -S "$WORK/qmp" ] && grep -q ready "$WORK/serial" 2>/dev/null && break
    sleep 0.1
done
grep -q ready "$WORK/serial" || die "the guest did not become ready"

say "qprof at ~100 Hz for $MINUTES min (run=spin,spin,sys)"
"$QPROF" --qmp-socket "$WORK/qmp" --kernel "$KERNEL" --user-dir "$BUILD/guest/user" \
    --duration "$((MINUTES * 60))" --interval 10 --progress -o "$WORK/out.folded" \
    2>"$WORK/qprof.err" &
QPROF_PID=$!

# One line every 10 s: seconds, samples (from the progress line), RSS KiB, fds, CPU ticks.
CLK=$(getconf CLK_TCK)
: >"$WORK/trace"
start=$(date +%s)
while kill -0 "$QPROF_PID" 2>/dev/null; do
    sleep 10
    [ -r "/proc/$QPROF_PID/status" ] || break
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$QPROF_PID/status" 2>/dev/null) || break
    fd_list=("/proc/$QPROF_PID/fd"/*)
    fds=${#fd_list[@]}
    ticks=$(awk '{print $14 + $15}' "/proc/$QPROF_PID/stat" 2>/dev/null) || break
    samples=$(tr '\r' '\n' <"$WORK/qprof.err" | awk '/ samples / {n = $4} END {print n + 0}')
    echo "$(($(date +%s) - start)) $samples $rss $fds $ticks" >>"$WORK/trace"
done
wait "$QPROF_PID" || die "qprof failed: $(tail -3 "$WORK/qprof.err")"
QPROF_PID=

# First minute: the first line at >= 60 s against the start; last minute: the last line against
# the one 60 s before it.
report=$(awk -v clk="$CLK" '
    { t[NR] = $1; s[NR] = $2; r[NR] = $3; f[NR] = $4; c[NR] = $5 }
    END {
        a = 1; while (a < NR && t[a] < 60) a++
        z = NR; y = z; while (y > 1 && t[z] - t[y] < 60) y--
        printf "| first minute (0-%d s) | %d | %.0f | %d | %d |\n", t[a], r[a], \
            1e6 * c[a] / clk / (s[a] ? s[a] : 1), f[a], s[a]
        printf "| last minute (%d-%d s) | %d | %.0f | %d | %d |\n", t[y], t[z], r[z], \
            1e6 * (c[z] - c[y]) / clk / (s[z] - s[y] ? s[z] - s[y] : 1), f[z], s[z] - s[y]
    }' "$WORK/trace")
summary=$(grep -E "^qprof: [0-9]+ samples|guest paused per sample" "$WORK/qprof.err" || true)
{
    echo "# xtask soak: $MINUTES minutes at ~100 Hz"
    echo
    echo "$(date -u +%Y-%m-%d), $(nproc) cores, $(qemu-system-x86_64 --version | sed -n 1p), TCG, guest run=spin,spin,sys"
    echo
    echo "| stretch | RSS KiB (end) | qprof CPU per sample (us) | open fds | samples |"
    echo "|---|---|---|---|---|"
    echo "$report"
    echo
    echo '```'
    echo "$summary"
    echo '```'
} >"$OUT"
cat "$OUT"
