#!/usr/bin/env bash
# xtask bench: runs the benchmarks that exist and writes bench/results.md.
# Usage: bench/run.sh BUILD_DIR   (a Release build)
set -euo pipefail
BUILD=${1:?usage: bench/run.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/bench/results.md
{
    echo "# qprof benchmark results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- QEMU: $(qemu-system-x86_64 --version | head -1)"
    echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
    echo "- threads: not pinned (QEMU and the client share the machine's cores)"
    echo
    echo "## Guest-paused time of one sample, per memory backend"
    echo
    echo "Command: \`$BUILD/bench/qmp_sample_bench -n 500\` (boots the demo guest, TCG, shared RAM)"
    echo
    "$BUILD/bench/qmp_sample_bench" -n 500
    echo
    echo "## Unwinding and symbolizing one 16-frame stack from a snapshot"
    echo
    echo "Command: \`$BUILD/bench/unwind_bench\`"
    echo
    echo '```'
    "$BUILD/bench/unwind_bench"
    echo '```'
} | tee "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "bench: wrote $OUT" >&2
