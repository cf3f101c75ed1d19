#!/bin/sh
# fetch-debs.sh CACHE_DIR [DIRS] [busybox]: prints the path of Debian's current
# linux-image-<version>-amd64 .deb (and, with "busybox", of busybox-static's on a second line).
# Looks in $QPROF_LINUX_DEBS (the development cache tests/linux uses too), then in DIRS (a
# colon-separated list, e.g. tests/linux's guest folder, which keeps the .debs it downloaded),
# then in CACHE_DIR, else runs `apt-get download` into CACHE_DIR. Exits 77 with the reason on
# stderr when a package cannot be had (offline, no apt), so that a test calling it can skip.
set -u
cache=$1
dirs="${QPROF_LINUX_DEBS:-}:${2:-}"
want_busybox=${3:-}

skip() {
    echo "SKIP: $*" >&2
    exit 77
}

# The newest versioned kernel package in a folder (not the linux-image-amd64 meta package).
# shellcheck disable=SC2012 # ls to feed sort -V: Debian's .deb names have no odd characters
newest_kernel() {
    ls "$1"/linux-image-[0-9]*-amd64_*_amd64.deb 2>/dev/null | sort -V | tail -n 1
}
# shellcheck disable=SC2012 # as above
newest_busybox() {
    ls "$1"/busybox-static_*_amd64.deb 2>/dev/null | sort -V | tail -n 1
}

download() { # download PACKAGE
    command -v apt-get >/dev/null 2>&1 || skip "no $1 .deb at hand and no apt-get to download it"
    (cd "$cache" && apt-get download "$1" >>apt.log 2>&1) ||
        skip "apt-get download $1 failed (offline?): $(tail -n 1 "$cache/apt.log")"
}

mkdir -p "$cache" || exit 1
kernel=""
busybox=""
old_ifs=$IFS
IFS=:
for dir in $dirs; do
    [ -n "$dir" ] || continue
    [ -n "$kernel" ] || kernel=$(newest_kernel "$dir")
    [ -n "$busybox" ] || busybox=$(newest_busybox "$dir")
done
IFS=$old_ifs
[ -n "$kernel" ] || kernel=$(newest_kernel "$cache")
if [ -z "$kernel" ]; then
    command -v dpkg-deb >/dev/null 2>&1 || skip "dpkg-deb not found"
    # The meta package names the versioned one: Depends: linux-image-6.1.0-56-amd64 (= ...).
    download linux-image-amd64
    # shellcheck disable=SC2012 # as above
    meta=$(ls "$cache"/linux-image-amd64_*.deb | sort -V | tail -n 1)
    name=$(dpkg-deb -f "$meta" Depends | tr ',' '\n' |
        sed -n 's/^ *\(linux-image-[0-9][^ ]*\).*/\1/p' | head -n 1)
    [ -n "$name" ] || skip "cannot tell the kernel package from $meta"
    download "$name"
    kernel=$(newest_kernel "$cache")
    [ -n "$kernel" ] || skip "apt-get download $name left no .deb"
fi
echo "$kernel"
if [ "$want_busybox" = busybox ]; then
    [ -n "$busybox" ] || busybox=$(newest_busybox "$cache")
    if [ -z "$busybox" ]; then
        download busybox-static
        busybox=$(newest_busybox "$cache")
        [ -n "$busybox" ] || skip "apt-get download busybox-static left no .deb"
    fi
    echo "$busybox"
fi
