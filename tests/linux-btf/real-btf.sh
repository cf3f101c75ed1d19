#!/bin/sh
# real-btf.sh TEST_BIN WORKDIR [DEB_DIR]: runs `TEST_BIN real` on the .BTF of Debian's current
# linux-image-amd64 kernel. The .deb comes from DEB_DIR (or $QPROF_LINUX_DEB_DIR) when it holds
# one, else from WORKDIR/debs (a copy downloaded by an earlier run), else `apt-get download`
# into WORKDIR/debs. Exits 77 (ctest: skipped) with the reason when no .deb can be had.
set -u
test_bin=$1
work=$2
deb_dir=${3:-${QPROF_LINUX_DEB_DIR:-}}
here=$(cd "$(dirname "$0")" && pwd)

skip() {
    echo "SKIP: $*" >&2
    exit 77
}

# The newest versioned kernel package in a folder (not the linux-image-amd64 meta package).
newest_deb() {
    ls "$1"/linux-image-[0-9]*-amd64_*_amd64.deb 2>/dev/null | grep -v -- '-dbg_' | sort -V | tail -n 1
}

deb=""
if [ -n "$deb_dir" ]; then
    deb=$(newest_deb "$deb_dir")
fi
mkdir -p "$work/debs" || exit 1
if [ -z "$deb" ]; then
    deb=$(newest_deb "$work/debs")
fi
if [ -z "$deb" ]; then
    command -v apt-get >/dev/null 2>&1 || skip "no linux-image .deb and no apt-get to download one"
    command -v dpkg-deb >/dev/null 2>&1 || skip "dpkg-deb not found"
    # The meta package names the versioned one in its Depends ("linux-image-6.1.0-56-amd64 (= ...)").
    (cd "$work/debs" && apt-get download linux-image-amd64 >apt.log 2>&1) ||
        skip "apt-get download linux-image-amd64 failed (offline?): $(tail -n 1 "$work/debs/apt.log")"
    meta=$(ls "$work"/debs/linux-image-amd64_*.deb | tail -n 1)
    name=$(dpkg-deb -f "$meta" Depends | tr ',' '\n' | sed -n 's/^ *\(linux-image-[0-9][^ ]*\).*/\1/p' | head -n 1)
    [ -n "$name" ] || skip "cannot tell the kernel package from $meta"
    (cd "$work/debs" && apt-get download "$name" >>apt.log 2>&1) ||
        skip "apt-get download $name failed: $(tail -n 1 "$work/debs/apt.log")"
    deb=$(newest_deb "$work/debs")
    [ -n "$deb" ] || skip "apt-get download $name left no .deb"
fi

btf="$work/$(basename "$deb" .deb).btf"
if [ ! -s "$btf" ] || [ "$deb" -nt "$btf" ]; then
    echo "extracting .BTF from $deb" >&2
    "$here/vmlinux-btf.sh" "$deb" "$btf.tmp" || exit 1
    mv "$btf.tmp.release" "$btf.release" && mv "$btf.tmp" "$btf" || exit 1
fi
exec "$test_bin" real "$btf"
