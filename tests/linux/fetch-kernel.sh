#!/usr/bin/env bash
# fetch-kernel.sh SERIES: downloads one stock Debian amd64 kernel of SERIES (5.10, 6.12, 7.x)
# and prints the folder that holds it, ${XDG_CACHE_HOME:-$HOME/.cache}/qprof-kernels/SERIES:
#   vmlinuz          the kernel as Debian ships it
#   kernel-release   its `uname -r` (e.g. 6.12.48+deb12-amd64)
#   package          the .deb it came from (name_version)
#   brd.ko           the RAM-disk driver of the same build, uncompressed (busybox's insmod
#                    takes a plain .ko; Debian compresses modules from 6.12 on)
# The series arm64-6.1 (bookworm) and riscv64-7.x (sid; bookworm has no riscv64 port) are the
# kernel of another architecture: brd.ko too, and that architecture's busybox (busybox-static),
# since the machine's own is amd64:
#   busybox          /bin/busybox of busybox-static for that architecture
# Series 6.1 is the machine's own suite: tests/linux/make-guest.sh fetches it the usual way.
#
# Other suites' packages are only downloaded and unpacked, never installed: apt runs with a
# private state (lists, cache, sources.list) under the same cache folder, so the machine's own
# sources stay untouched. The archive's address is read from the machine's sources list
# (/etc/apt/sources.list.d/debian.sources, or /etc/apt/sources.list).
#
# Quick when cached (nothing is asked of the network); QPROF_KERNELS_REFRESH=1 asks again for
# the newest package of the series. Exits 77 with a one-line reason on stderr when the kernel
# cannot be had (no network, no apt, no such package), so that a test calling it skips.
set -euo pipefail

series=${1:?usage: fetch-kernel.sh SERIES (5.10, 6.12, 7.x)}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/qprof-kernels
dir=$cache/$series

skip() {
    echo "fetch-kernel.sh: SKIP: $*" >&2
    exit 77
}

# Which suites carry the series and how its package that holds vmlinuz is named. From 7.x on,
# linux-image-* is a small meta package and vmlinuz is in linux-binary-* under /usr/lib/modules.
case $series in
5.10) suites="bullseye" prefix=linux-image-5.10 re='^linux-image-5\.10\.[0-9]+-[0-9]+-amd64-unsigned$' ;;
6.12) suites="bookworm-backports trixie" prefix=linux-image-6.12 re='^linux-image-6\.12\.[^ ]*-amd64-unsigned$' ;;
7.x) suites="trixie-backports sid" prefix=linux-binary-7 re='^linux-binary-7\.[^ ]*-amd64$' ;;
arm64-6.1) suites="bookworm" prefix=linux-image-6.1 re='^linux-image-6\.1\.0-[0-9]+-arm64-unsigned$' arch=arm64 ;;
riscv64-7.x) suites="sid" prefix=linux-binary-7 re='^linux-binary-7\.[^ ]*-riscv64$' arch=riscv64 ;;
6.1) skip "6.1 is the machine's own kernel series: tests/linux/make-guest.sh fetches it" ;;
*) echo "fetch-kernel.sh: unknown series '$series' (known: 5.10, 6.12, 7.x, arm64-6.1, riscv64-7.x)" >&2; exit 2 ;;
esac
arch=${arch:-amd64}
# What the series' folder holds once complete: the other architectures have their busybox too.
extra=brd.ko
[ "$arch" = amd64 ] || extra=busybox

if [ -s "$dir/vmlinuz" ] && [ -s "$dir/kernel-release" ] && [ -s "$dir/$extra" ] && [ -s "$dir/brd.ko" ] &&
    [ -z "${QPROF_KERNELS_REFRESH:-}" ]; then
    echo "$dir"
    exit 0
fi

for tool in apt-get apt-cache dpkg-deb; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
done

# The main archive's address: the first non-security URI of the machine's sources.
archive_uri() {
    local f=/etc/apt/sources.list.d/debian.sources uri=""
    if [ -r "$f" ]; then
        uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f")
    fi
    if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { if ($i !~ /security/) { print $i; exit } break } }' \
            /etc/apt/sources.list)
    fi
    echo "$uri"
}

uri=$(archive_uri)
[ -n "$uri" ] || skip "no Debian archive address in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$keyring" ] || skip "$keyring is missing (package debian-archive-keyring)"

# apt with a private state for one suite: its own lists, cache and sources, no system parts.
# Another architecture's packages get a state of their own (apt-SUITE-ARCH).
state_of() { if [ "$arch" = amd64 ]; then echo "$cache/apt-$1"; else echo "$cache/apt-$1-$arch"; fi; }
apt_private() { # apt_private SUITE apt-get|apt-cache ARGS...
    local suite=$1 tool=$2 state
    state=$(state_of "$1")
    shift 2
    local archopts=()
    [ "$arch" = amd64 ] || archopts=(-o APT::Architectures::="$arch" -o APT::Architecture="$arch")
    "$tool" -q -o Dir::State::Lists="$state/lists" -o Dir::Etc::SourceList="$state/sources.list" \
        -o Dir::Etc::SourceParts=/dev/null -o Dir::Cache="$state/cache" \
        -o Dir::State::status=/dev/null -o Debug::NoLocking=1 "${archopts[@]}" "$@"
}

prepare_suite() { # prepare_suite SUITE: lists downloaded (again when older than a day)
    local suite=$1 state archtag=""
    state=$(state_of "$1")
    [ "$arch" = amd64 ] || archtag=" arch=$arch"
    mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
    echo "deb [signed-by=$keyring$archtag] $uri $suite main" > "$state/sources.list"
    if [ -z "$(find "$state/lists" -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null)" ]; then
        apt_private "$suite" apt-get update >"$state/update.log" 2>&1 ||
            return 1
    fi
    ls "$state/lists/"*_Packages* >/dev/null 2>&1
}

newest_package() { # newest_package SUITE: the newest package of the series in SUITE
    apt_private "$1" apt-cache pkgnames "$prefix" 2>/dev/null | grep -E "$re" | grep -v -e '-rt-' -e '-cloud-' |
        sort -V | tail -n 1
}

mkdir -p "$cache"
exec 9>"$cache/.lock-$series"
flock 9 2>/dev/null || true

pkg="" suite=""
for s in $suites; do
    if ! prepare_suite "$s"; then
        echo "fetch-kernel.sh: apt-get update of $s failed: $(tail -n 1 "$(state_of "$s")/update.log")" >&2
        continue
    fi
    pkg=$(newest_package "$s")
    if [ -n "$pkg" ]; then
        suite=$s
        break
    fi
done
if [ -z "$pkg" ]; then
    # Keep what was fetched before when a refresh cannot reach the archive.
    if [ -s "$dir/vmlinuz" ] && [ -s "$dir/$extra" ] && [ -s "$dir/brd.ko" ]; then
        echo "$dir"
        exit 0
    fi
    skip "no $series kernel package reachable in $suites (archive unreachable?)"
fi

if [ -s "$dir/package" ] && [ "$(cut -d_ -f1 "$dir/package")" = "$pkg" ] && [ -s "$dir/vmlinuz" ] &&
    [ -s "$dir/$extra" ] && [ -s "$dir/brd.ko" ]; then
    echo "$dir"
    exit 0
fi

work=$(mktemp -d "$cache/.fetch-$series.XXXXXX")
trap 'rm -rf "$work"' EXIT
unpack() { # unpack PACKAGE: downloaded into $work and unpacked into $work/root
    (cd "$work" && apt_private "$suite" apt-get download "$1" >download.log 2>&1) ||
        skip "apt-get download $1 ($suite) failed: $(tail -n 1 "$work/download.log")"
    dpkg-deb -x "$(ls "$work/$1"_*.deb)" "$work/root"
}
unpack "$pkg"
deb=$(ls "$work/$pkg"_*.deb)
vmlinuz=$(find "$work/root" \( -path "*/boot/vmlinuz-*" -o -path "*/usr/lib/modules/*/vmlinuz" \) -type f | head -n 1)
[ -n "$vmlinuz" ] || skip "$pkg holds no vmlinuz"
release=$(find "$work/root" -regex '.*/lib/modules/[^/]*' -type d -printf '%f\n' | head -n 1)
mkdir -p "$work/out"
cp "$vmlinuz" "$work/out/vmlinuz"
if [ "$arch" != amd64 ]; then
    unpack busybox-static
    # /bin/busybox up to 1.36, /usr/bin/busybox in sid's 1.38
    bb=$(find "$work/root" -path '*bin/busybox' -type f | head -n 1)
    [ -n "$bb" ] || skip "busybox-static ($arch, $suite) holds no bin/busybox"
    cp "$bb" "$work/out/busybox"
fi
# From 7.x on the modules are a package of their own (about 100 MB, fetched once).
if [ -z "$(find "$work/root" -path '*/drivers/block/brd.ko*')" ] && [ "${pkg#linux-binary-}" != "$pkg" ]; then
    unpack "linux-modules-${pkg#linux-binary-}"
fi
brd=$(find "$work/root" -path '*/drivers/block/brd.ko*' | head -n 1)
[ -n "$brd" ] || skip "$pkg and its modules hold no brd module"
case $brd in
*.xz) xz -dc "$brd" > "$work/out/brd.ko" ;;
*.zst) zstd -qdc "$brd" > "$work/out/brd.ko" ;;
*.gz) gzip -dc "$brd" > "$work/out/brd.ko" ;;
*) cp "$brd" "$work/out/brd.ko" ;;
esac
echo "$release" > "$work/out/kernel-release"
basename "$deb" .deb | sed "s/_${arch}\$//" > "$work/out/package"
rm -rf "$dir"
mv "$work/out" "$dir"
echo "fetch-kernel.sh: $series: $(cat "$dir/package") from $suite" >&2
echo "$dir"
