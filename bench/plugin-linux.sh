#!/usr/bin/env bash
# The plugin target on a stock Linux guest (Debian's 6.1 kernel and busybox, the guest the
# linux_* tests boot, running dd): qprof --plugin at --interval 10, 1 and 0.1 ms for SECONDS each,
# and what its summary says of each: samples per second, the capture cost on the vCPU thread
# (p50/p99: the registers, the kernel stack, the Linux adapter's windows and, in kernel mode, the
# user stack), samples lost to a full ring, and the kernel stacks ORC unwound completely.
# Usage: bench/plugin-linux.sh BUILD_DIR [SECONDS [VCPUS]]
# The guest comes from BUILD_DIR/linux-guest (tests/linux/make-guest.sh builds it there, as the
# linux_* tests do), or the folder QPROF_LINUX_GUEST names; QEMU 10 from xtask/qemu10.sh.
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/plugin-linux.sh BUILD_DIR [SECONDS [VCPUS]]}" && pwd)
SECS=${2:-10}
SMP=${3:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GUEST=${QPROF_LINUX_GUEST:-$BUILD/linux-guest}
"$ROOT/tests/linux/make-guest.sh" "$GUEST" 6.1 >/dev/null
[ -f "$BUILD/qprof-plugin.so" ] || { echo "no $BUILD/qprof-plugin.so (configure after xtask/qemu10.sh)" >&2; exit 1; }
eval "$("$ROOT/xtask/qemu10.sh" --quiet)"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/qprof-plinux-XXXXXX")
QEMU_MODULE_DIR=$QEMU10_MODULE_DIR "$QEMU10_BIN" -L "$QEMU10_PREFIX/usr/share/qemu" \
    -L /usr/share/seabios -display none -nodefaults -accel tcg -no-reboot -smp "$SMP" -m 512M \
    -kernel "$GUEST/vmlinuz" -initrd "$GUEST/initrd.cpio" -serial "file:$DIR/serial.log" \
    -serial "file:$DIR/kallsyms.txt" -qmp "unix:$DIR/qmp,server=on,wait=off" \
    -plugin "$BUILD/qprof-plugin.so,socket=$DIR/plugin" \
    -object "memory-backend-file,id=ram,size=512M,mem-path=$DIR/ram,share=on" \
    -machine memory-backend=ram \
    -append "console=ttyS0 quiet no_timer_check panic=-1 qprof_run=dd" &
QEMU=$!
trap 'kill "$QEMU" 2>/dev/null; wait "$QEMU" 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 300); do
    grep -q "qprof-linux: all started" "$DIR/serial.log" 2>/dev/null && break
    sleep 1
done
grep -q "qprof-linux: all started" "$DIR/serial.log" || { echo "the guest did not come up" >&2; exit 1; }
echo "| --interval | samples/s | capture p50 / p99 | lost | kernel stacks complete |"
echo "|---|---|---|---|---|"
for iv in 10 1 0.1; do
    out=$("$BUILD/qprof" --plugin "unix:$DIR/plugin" --qmp-socket "$DIR/qmp" --interval "$iv" \
        --duration "$SECS" -o "$DIR/out.folded" --no-progress 2>&1)
    rate=$(grep -o '([0-9.]* samples/s)' <<<"$out" | tr -d '()' | cut -d' ' -f1)
    p50=$(grep -o 'p50 [0-9.]* us' <<<"$out" | head -1 | cut -d' ' -f2)
    p99=$(grep -o 'p99 [0-9.]* us' <<<"$out" | head -1 | cut -d' ' -f2)
    lost=$(grep -o 'samples lost to a full ring: [0-9]*' <<<"$out" | grep -o '[0-9]*$')
    complete=$(grep -o 'complete (reach a user entry or a task.s start): [0-9.]*%' <<<"$out" |
        grep -o '[0-9.]*%$')
    echo "| $iv ms | $rate | $p50 / $p99 us | $lost | $complete |"
done
