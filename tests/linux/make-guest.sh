#!/usr/bin/env bash
# make-guest.sh OUTDIR [SERIES]
# Builds the stock-Linux test guest into OUTDIR from Debian packages only:
#   OUTDIR/vmlinuz        Debian's linux-image-6.1.0-*-amd64 kernel, as shipped; with SERIES
#                         (5.10, 6.12, 7.x) the kernel of that series that fetch-kernel.sh
#                         caches, and its brd.ko; with arm64-6.1 or riscv64-7.x that
#                         architecture's kernel, brd.ko and busybox (no hotpath: the host
#                         compiler builds amd64)
#   OUTDIR/initrd.cpio    busybox-static and an /init that starts the workloads named on the
#                         kernel command line (qprof_run=dd,shloop) and, with qprof_kallsyms
#                         on it too, dumps /proc/kallsyms
#   OUTDIR/busybox        a copy of the guest's /bin/busybox (tests check user frames against it)
#   OUTDIR/sysroot        the initramfs's tree as the guest sees it: the --sysroot of the tests.
#                         With a host C compiler it holds /usr/local/bin/hotpath (hotpath.c, built
#                         here with cc -O2 -fomit-frame-pointer -rdynamic (its .dynsym names its
#                         functions, for user stacks with no --sysroot), not by CMake, whose test build
#                         adds sanitizers) and the host libraries it needs at the paths ldd names:
#                         the host is Debian 12 like the guest's packages, so they are the same
#                         builds the guest would have.
#                         hotpath-nopie is the same program linked at a fixed address (ET_EXEC).
#                         /usr/bin/xz and /usr/bin/openssl are the host's (Debian's xz-utils and
#                         openssl, unmodified) with liblzma, libssl, libcrypto and libc at the
#                         paths ldd names: distro programs' user stacks.
#   OUTDIR/sysroot-other  /usr/local/bin/hotpath of another build (another body, another
#                         build-id), for the test that such a file is not used
#   (in the initramfs: /lib/modules/brd.ko, the RAM-disk driver from the kernel package, which
#   the workload ramdd loads before the kallsyms dump so that the dump lists its symbols)
# Files already in OUTDIR are reused; .deb files are fetched with `apt-get download` (or copied
# from $QPROF_LINUX_DEBS when that folder has them). Exits 77 with a reason when the packages
# cannot be had (no network, no apt), so that ctest reports a skip, never a silent pass.
#
# The guest's /init prints, on the console (ttyS0):
#   qprof-linux: ready pid=N name=WORKLOAD     once per workload started
#   qprof-linux: kallsyms done                 after /proc/kallsyms (text symbols) went out on ttyS1
# and, asked by qprof_kallsyms, writes /proc/kallsyms between "qprof-kallsyms-begin" /
# "qprof-kallsyms-end" lines on the second serial port (ttyS1), so a test that gives QEMU
# `-serial file:K` can read it.
set -euo pipefail

out=${1:?usage: make-guest.sh OUTDIR [SERIES]}
series=${2:-6.1}
here=$(cd "$(dirname "$0")" && pwd)
kdir=""
if [ "$series" != 6.1 ]; then
    kdir=$("$here/fetch-kernel.sh" "$series") || exit $?
fi
mkdir -p "$out"
cd "$out"

skip() { echo "make-guest.sh: SKIP: $*" >&2; exit 77; }

for tool in dpkg-deb cpio; do
    command -v "$tool" >/dev/null || skip "$tool is not installed (xtask/xtask deps installs it)"
done

if [ -s vmlinuz ] && [ -s initrd.cpio ] && [ -s busybox ] && [ -d sysroot ] &&
    [ initrd.cpio -nt "$here/make-guest.sh" ] && [ initrd.cpio -nt "$here/hotpath.c" ] &&
    { [ -z "$kdir" ] || [ initrd.cpio -nt "$kdir/vmlinuz" ]; }; then
    exit 0
fi

# The kernel package linux-image-amd64 points at today (linux-image-6.1.0-N-amd64).
kernel_pkg() {
    local debs=(linux-image-6.1.0-*-amd64_*.deb)
    if [ -e "${debs[0]}" ]; then
        echo "${debs[0]%%_*}"
        return
    fi
    command -v apt-cache >/dev/null || return 1
    # the first match taken by awk, which reads to the end (`head` would close the pipe early:
    # a SIGPIPE status under pipefail)
    apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | awk 'NR == 1'
}

fetch_deb() { # fetch_deb PACKAGE
    local pkg=$1
    ls "${pkg}"_*.deb >/dev/null 2>&1 && return 0
    if [ -n "${QPROF_LINUX_DEBS:-}" ] && ls "$QPROF_LINUX_DEBS/${pkg}"_*.deb >/dev/null 2>&1; then
        cp "$QPROF_LINUX_DEBS/${pkg}"_*.deb .
        return 0
    fi
    command -v apt-get >/dev/null || skip "no apt-get to download $pkg"
    apt-get download "$pkg" >/dev/null 2>apt-download.log ||
        skip "apt-get download $pkg failed (no network?): $(tail -n1 apt-download.log)"
}

if [ -n "${QPROF_LINUX_DEBS:-}" ] && ! ls linux-image-6.1.0-*-amd64_*.deb >/dev/null 2>&1; then
    cp "$QPROF_LINUX_DEBS"/linux-image-6.1.0-*-amd64_*.deb . 2>/dev/null || true
fi
if [ -z "$kdir" ]; then
    kpkg=$(kernel_pkg) || true
    [ -n "$kpkg" ] || skip "cannot resolve linux-image-amd64's kernel package (apt-cache has no lists?)"
    fetch_deb "$kpkg"
fi
# Another architecture's series brings its own busybox (fetch-kernel.sh).
foreign=""
[ -n "$kdir" ] && [ -s "$kdir/busybox" ] && foreign=1
[ -n "$foreign" ] || fetch_deb busybox-static

rm -rf x-kernel x-busybox root sysroot sysroot-other
mkdir -p root/bin root/proc root/sys root/dev root/tmp root/lib/modules
if [ -z "$kdir" ]; then
    dpkg-deb -x "${kpkg}"_*.deb x-kernel
    cp x-kernel/boot/vmlinuz-* vmlinuz.tmp && mv vmlinuz.tmp vmlinuz
    echo "${kpkg#linux-image-}" > kernel-release
    cp x-kernel/lib/modules/*/kernel/drivers/block/brd.ko root/lib/modules/brd.ko
else
    cp "$kdir/vmlinuz" vmlinuz.tmp && mv vmlinuz.tmp vmlinuz
    cp "$kdir/kernel-release" kernel-release
    cp "$kdir/brd.ko" root/lib/modules/brd.ko
fi
if [ -n "$foreign" ]; then
    mkdir -p x-busybox/bin
    cp "$kdir/busybox" x-busybox/bin/busybox
else
    dpkg-deb -x busybox-static_*.deb x-busybox
fi
cp x-busybox/bin/busybox root/bin/busybox
cp x-busybox/bin/busybox busybox.tmp && mv busybox.tmp busybox
cat > root/init <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
echo "qprof-linux: init up"
# Modules a workload needs go in before the kallsyms dump, so that the dump lists their symbols.
case ",$(sed -n 's/.*qprof_run=\([^ ]*\).*/\1/p' /proc/cmdline)," in
*,ramdd,*) insmod /lib/modules/brd.ko rd_nr=1 rd_size=1048576 && echo "qprof-linux: brd loaded" ;;
esac
# kallsyms first: the workloads would slow the dump down under TCG. Only when the kernel command
# line asks (qprof_kallsyms): the dump costs every boot seconds under TCG.
if grep -qw qprof_kallsyms /proc/cmdline && [ -c /dev/ttyS1 ]; then
    stty -F /dev/ttyS1 raw 2>/dev/null
    # text symbols only (what the tests check frames against): half the lines
    { echo qprof-kallsyms-begin; grep -i ' [tw] ' /proc/kallsyms; echo qprof-kallsyms-end; } > /dev/ttyS1
    echo "qprof-linux: kallsyms done"
fi
for w in $(sed -n 's/.*qprof_run=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' '); do
    case $w in
    dd) dd if=/dev/zero of=/dev/null bs=1M 2>/dev/null & ;;
    shloop) sh -c 'i=0; while :; do i=$((i+1)); done' & ;;
    hotpath) /usr/local/bin/hotpath & ;;
    hotpath-nopie) /usr/local/bin/hotpath-nopie & ;;
    # Debian's own xz and liblzma, unmodified: one long compression (single-threaded, so that
    # every stack starts in __libc_start_main) of an endless input
    xz) /usr/bin/xz -T1 -6 -c < /dev/zero > /dev/null & ;;
    # Debian's openssl hashing with libcrypto: a large program whose own .eh_frame is mostly in
    # pages it never touches (read from the page cache)
    openssl) /usr/bin/openssl speed -seconds 1000000 -bytes 1024 sha256 > /dev/null 2>&1 & ;;
    # reads of a 1 GiB RAM disk never written (brd hands out zeroes), bypassing the page cache
    ramdd) sh -c 'while :; do dd if=/dev/ram0 of=/dev/null bs=64k iflag=direct 2>/dev/null; done' & ;;
    # brd loaded, read for a while and unloaded, over and over: the module list changes under qprof
    modcycle) sh -c 'while :; do insmod /lib/modules/brd.ko rd_nr=1 rd_size=131072; dd if=/dev/ram0 of=/dev/null bs=64k iflag=direct 2>/dev/null; rmmod brd; done' & ;;
    *) echo "qprof-linux: unknown workload $w"; continue ;;
    esac
    echo "qprof-linux: ready pid=$! name=$w"
done
echo "qprof-linux: all started"
while :; do sleep 3600; done
INIT
chmod 755 root/init

# hotpath (the --sysroot workload) and the libraries it loads, at the paths the guest maps.
if [ -z "$foreign" ] && command -v cc >/dev/null && command -v ldd >/dev/null; then
    mkdir -p root/usr/local/bin sysroot-other/usr/local/bin
    cc -O2 -fomit-frame-pointer -g0 -rdynamic -o root/usr/local/bin/hotpath "$here/hotpath.c"
    # The same, linked at a fixed address (ET_EXEC, not PIE): the other way a binary is mapped.
    cc -O2 -fomit-frame-pointer -g0 -rdynamic -fno-pie -no-pie -o root/usr/local/bin/hotpath-nopie \
        "$here/hotpath.c"
    cc -O2 -fomit-frame-pointer -g0 -rdynamic -DHOTPATH_VARIANT -o sysroot-other/usr/local/bin/hotpath \
        "$here/hotpath.c"
    for lib in $(ldd root/usr/local/bin/hotpath | grep -o '/[^ ]*'); do
        mkdir -p "root$(dirname "$lib")"
        cp -L "$lib" "root$lib"
    done
elif [ -z "$foreign" ]; then
    echo "make-guest.sh: no host cc: the guest has no hotpath workload" >&2
fi
# Distro programs as Debian ships them: the host's /usr/bin/xz (xz-utils) and /usr/bin/openssl
# (Debian 12 like the guest) and the libraries ldd lists, at their own paths, unmodified
# (stripped, with their build-ids and .gnu_debuglink): the xz and openssl workloads, whose tests
# give qprof the host's / as --sysroot.
for prog in /usr/bin/xz /usr/bin/openssl; do
    [ -z "$foreign" ] || break
    if [ ! -x "$prog" ] || ! command -v ldd >/dev/null; then
        echo "make-guest.sh: no host $prog: the guest has no ${prog##*/} workload" >&2
        continue
    fi
    mkdir -p root/usr/bin
    cp "$prog" "root$prog"
    for lib in $(ldd "$prog" | grep -o '/[^ ]*'); do
        mkdir -p "root$(dirname "$lib")"
        cp -L "$lib" "root$lib"
    done
done
(cd root && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) > initrd.tmp
mv initrd.tmp initrd.cpio
rm -rf x-kernel x-busybox
mv root sysroot
