#!/bin/sh
# live-guest.sh LX_LIVE CACHE_DIR [DEB_DIRS] [SMP] [SAMPLES]: an end-to-end check of lx_btf and
# lx_task on a stock Debian kernel (the ctest lx_live_debian). Boots the linux-image .deb's
# kernel (KASLR on, TCG) with a busybox initramfs whose /init starts
# `dd if=/dev/zero of=/dev/null bs=1` and, when a static C build works here, many_vmas.c (~440
# VMAs), and prints their pids and /proc/PID/maps on the serial console; then runs LX_LIVE
# (lx_live.c) against QEMU's QMP socket: it names the current task of every kernel-mode vCPU per
# sample and checks the VMAs it finds in each maple tree against the guest's maps.
# fetch-debs.sh finds or downloads the .debs; exit 77 when they or QEMU cannot be had.
set -u
lx_live=$1
cache=$2
deb_dir=${3:-}
smp=${4:-1}
samples=${5:-300}
here=$(cd "$(dirname "$0")" && pwd)

command -v qemu-system-x86_64 >/dev/null 2>&1 || { echo "SKIP: no qemu-system-x86_64" >&2; exit 77; }
debs=$("$here/fetch-debs.sh" "$cache" "$deb_dir" busybox)
rc=$?
[ $rc -eq 0 ] || exit $rc
kdeb=$(printf '%s\n' "$debs" | sed -n 1p)
bdeb=$(printf '%s\n' "$debs" | sed -n 2p)

work=$(mktemp -d "${TMPDIR:-/tmp}/lx-live.XXXXXX")
qemu_pid=""
cleanup() {
    [ -n "$qemu_pid" ] && kill "$qemu_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

dpkg-deb --fsys-tarfile "$kdeb" | tar -x -C "$work" --wildcards './boot/vmlinuz-*' || exit 1
dpkg-deb -x "$bdeb" "$work/bb" || exit 1
"$here/vmlinux-btf.sh" "$kdeb" "$work/vmlinux.btf" || exit 1

root="$work/initramfs"
mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys"
cp "$work/bb/bin/busybox" "$root/bin/busybox"
mknod "$root/dev/console" c 5 1 2>/dev/null || true
cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
[ -c /dev/console ] || exec >/dev/ttyS0 2>&1
dd if=/dev/zero of=/dev/null bs=1 &
pid=$!
n=0
while [ "$(cat /proc/$pid/comm)" != dd ] && [ $n -lt 300 ]; do sleep 1; n=$((n + 1)); done
echo "LIVE dd pid $pid"
echo "LIVE uname $(uname -r)"
echo "LIVE maps begin"
cat /proc/$pid/maps
echo "LIVE maps end"
if [ -x /bin/many_vmas ]; then
    /bin/many_vmas >/dev/null &
    pid2=$!
    n=0
    while [ ! -e /many_vmas.ready ] && [ $n -lt 300 ]; do sleep 1; n=$((n + 1)); done
    echo "LIVE many pid $pid2"
    echo "LIVE maps2 begin"
    cat /proc/$pid2/maps
    echo "LIVE maps2 end"
fi
echo "LIVE ready"
while :; do sleep 1000; done
EOF
chmod +x "$root/init"
# A process with hundreds of VMAs (a maple tree several levels deep), when a static C build works.
if cc -static -O1 -o "$root/bin/many_vmas" "$here/many_vmas.c" 2>"$work/cc.log"; then
    smp_min=3 # dd, many_vmas, and an idle vCPU for swapper/N
else
    echo "note: no static C build ($(tail -n 1 "$work/cc.log")): checking dd only"
    smp_min=1
fi
[ "$smp" -ge "$smp_min" ] || smp=$smp_min
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz" || exit 1

qemu-system-x86_64 -display none -nodefaults -no-reboot -accel tcg -cpu qemu64 -smp "$smp" -m 512 \
    -object "memory-backend-file,id=ram,size=512M,mem-path=$work/ram,share=on" \
    -machine memory-backend=ram \
    -kernel "$work"/boot/vmlinuz-* -initrd "$work/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet" \
    -serial "file:$work/serial.log" -qmp "unix:$work/qmp.sock,server=on,wait=off" &
qemu_pid=$!

# Boot under TCG takes seconds to minutes: wait for the marker, with a generous deadline.
deadline=$(($(date +%s) + 300))
until grep -q '^LIVE ready' "$work/serial.log" 2>/dev/null; do
    if [ "$(date +%s)" -gt "$deadline" ] || ! kill -0 "$qemu_pid" 2>/dev/null; then
        echo "guest did not come up; serial log:" >&2
        tail -n 30 "$work/serial.log" >&2
        exit 1
    fi
    sleep 1
done
tr -d '\r' <"$work/serial.log" >"$work/serial.txt"
pid=$(sed -n 's/^LIVE dd pid \([0-9]*\).*/\1/p' "$work/serial.txt")
sed -n '/^LIVE maps begin/,/^LIVE maps end/p' "$work/serial.txt" | sed '1d;$d' >"$work/maps.txt"
echo "guest kernel: $(sed -n 's/^LIVE uname //p' "$work/serial.txt") (KASLR on), $smp vCPU(s)"
echo "guest /proc/$pid/maps:"
cat "$work/maps.txt"
set -- "$pid" "$work/maps.txt"
pid2=$(sed -n 's/^LIVE many pid \([0-9]*\).*/\1/p' "$work/serial.txt")
if [ -n "$pid2" ]; then
    sed -n '/^LIVE maps2 begin/,/^LIVE maps2 end/p' "$work/serial.txt" | sed '1d;$d' >"$work/maps2.txt"
    echo "guest /proc/$pid2/maps: $(wc -l <"$work/maps2.txt") lines"
    set -- "$@" "$pid2" "$work/maps2.txt"
fi
"$lx_live" "$work/qmp.sock" "$work/vmlinux.btf" "$samples" "$@"
