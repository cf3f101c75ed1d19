#!/usr/bin/env bash
# QEMU 10.0 beside Debian 12's 7.2, for the TCG plugin target: unpacks bookworm-backports'
# qemu-system-x86, qemu-system-arm (aarch64) and qemu-system-riscv, with the common,
# data, gui and module packages of the same version (so that QEMU_MODULE_DIR holds only modules
# of its own build), into a cache outside the repository, and
# takes include/qemu/qemu-plugin.h from the same version's upstream source tarball. A private apt
# state: the machine's own sources and packages are not touched. Fast when cached.
#
#   xtask/qemu10.sh          fetch if needed, then print the variables below (sh syntax)
#   xtask/qemu10.sh --quiet  the same, without progress lines
#
# Prints QEMU10_PREFIX, QEMU10_BIN, QEMU10_MODULE_DIR, QEMU10_HEADER, QEMU10_VERSION; exits 1 with
# one line saying why when the archive cannot give them.
set -euo pipefail

SUITE=bookworm-backports
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/qprof-qemu10
APT=$CACHE/apt
ROOT=$CACHE/root
QUIET=${1:-}

say() { [ "$QUIET" = --quiet ] || printf 'qemu10: %s\n' "$*" >&2; }
die() { printf 'qemu10: %s\n' "$*" >&2; exit 1; }

# The archive's address, read from the machine's own sources (never written anywhere else).
archive() {
    local f=/etc/apt/sources.list.d/debian.sources uri
    if [ -r "$f" ]; then
        uri=$(awk '/^URIs:/ { print $2; exit }' "$f")
    elif [ -r /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" && $2 !~ /^\[/ { print $2; exit } $1 == "deb" { print $3; exit }' \
            /etc/apt/sources.list)
    fi
    [ -n "${uri:-}" ] || die "no Debian archive address in $f"
    printf '%s\n' "$uri"
}

# apt's options for the private state; as root, downloads into a cache that _apt cannot enter
# run unsandboxed (said once here rather than warned per file).
apt_opts() {
    printf '%s\n' -o "Dir::State::Lists=$APT/lists" -o "Dir::Etc::SourceList=$APT/sources.list" \
        -o Dir::Etc::SourceParts=/dev/null -o "Dir::Cache=$APT/cache" \
        -o Dir::State::status=/dev/null -o Debug::NoLocking=1
    [ "$(id -u)" != 0 ] || printf '%s\n' -o APT::Sandbox::User=root
}
apt_private() { local o; mapfile -t o < <(apt_opts); apt-get -q "${o[@]}" "$@"; }
apt_cache() { local o; mapfile -t o < <(apt_opts); apt-cache "${o[@]}" "$@"; }

apt_update() {
    mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
    local a
    a=$(archive)
    cat >"$APT/sources.list" <<EOF
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $a $SUITE main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $a $SUITE main
EOF
    say "updating a private apt state for $SUITE"
    apt_private update >/dev/null || die "apt-get update for $SUITE failed (is the archive reachable?)"
}

# The candidate version of qemu-system-x86 in the suite, e.g. 1:10.0.2+ds-1~bpo12+1.
candidate() {
    apt_cache policy qemu-system-x86 2>/dev/null |
        awk '/Candidate:/ { print $2; exit }'
}

unpack_binaries() {
    local ver=$1 dir=$CACHE/debs pkg mods
    mkdir -p "$dir" "$ROOT.new"
    mods=$(apt_cache showsrc qemu 2>/dev/null | awk '/^Binary:/ { sub(/^Binary: /, ""); print }' |
        tr -s ', ' '\n' | grep -E '^qemu-system-modules-' | sort -u || true)
    [ -n "$mods" ] || mods="qemu-system-modules-opengl qemu-system-modules-spice"
    (
        cd "$dir"
        for pkg in qemu-system-x86 qemu-system-arm qemu-system-riscv qemu-system-common \
            qemu-system-data qemu-system-gui $mods; do
            ls "${pkg}"_*.deb >/dev/null 2>&1 && continue
            say "downloading $pkg=$ver"
            apt_private download "$pkg=$ver" >/dev/null 2>&1 ||
                apt_private download "$pkg" >/dev/null ||
                die "cannot download $pkg from $SUITE"
        done
    )
    rm -rf "$ROOT.new"
    mkdir -p "$ROOT.new"
    for deb in "$dir"/*.deb; do dpkg-deb -x "$deb" "$ROOT.new"; done
    rm -rf "$ROOT"
    mv "$ROOT.new" "$ROOT"
}

# include/qemu/qemu-plugin.h from the upstream tarball. apt may exit non-zero when the archive
# lacks the .dsc while the tarball is there: what arrived is used.
fetch_header() {
    local dir=$CACHE/src tarball
    mkdir -p "$dir"
    tarball=$(find "$dir" -maxdepth 1 -name 'qemu_*.orig.tar.*' | head -n1)
    if [ -z "$tarball" ]; then
        say "downloading QEMU's upstream source tarball (about 40 MB)"
        (cd "$dir" && apt_private source --download-only qemu >/dev/null 2>&1) || true
        tarball=$(find "$dir" -maxdepth 1 -name 'qemu_*.orig.tar.*' | head -n1)
    fi
    [ -n "$tarball" ] || die "no QEMU source tarball in $SUITE (apt-get source --download-only qemu)"
    local member
    member=$(tar -tf "$tarball" | awk '/\/include\/qemu\/qemu-plugin\.h$/ { print }' | head -n1)
    [ -n "$member" ] || die "$tarball holds no include/qemu/qemu-plugin.h"
    mkdir -p "$CACHE/include/qemu"
    tar -xOf "$tarball" "$member" >"$CACHE/include/qemu/qemu-plugin.h.new"
    mv "$CACHE/include/qemu/qemu-plugin.h.new" "$CACHE/include/qemu/qemu-plugin.h"
}

main() {
    local bin=$ROOT/usr/bin/qemu-system-x86_64 header=$CACHE/include/qemu/qemu-plugin.h ver
    # a cache from before riscv64 and aarch64 joined lacks their binaries: unpacked again
    if [ ! -x "$bin" ] || [ ! -x "$ROOT/usr/bin/qemu-system-riscv64" ] ||
        [ ! -x "$ROOT/usr/bin/qemu-system-aarch64" ] || [ ! -s "$header" ] ||
        [ ! -s "$CACHE/version" ]; then
        command -v apt-get >/dev/null || die "apt-get is needed to fetch QEMU 10"
        apt_update
        ver=$(candidate)
        if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then die "$SUITE has no qemu-system-x86"; fi
        case "$ver" in *:1[0-9].* | 1[0-9].*) ;; *) die "$SUITE has QEMU $ver, not 10.x" ;; esac
        if [ ! -x "$bin" ] || [ ! -x "$ROOT/usr/bin/qemu-system-riscv64" ] ||
            [ ! -x "$ROOT/usr/bin/qemu-system-aarch64" ]; then
            unpack_binaries "$ver"
        fi
        [ -s "$header" ] || fetch_header
        printf '%s\n' "$ver" >"$CACHE/version"
    fi
    ver=$(cat "$CACHE/version")
    cat <<EOF
QEMU10_PREFIX=$ROOT
QEMU10_BIN=$bin
QEMU10_MODULE_DIR=$ROOT/usr/lib/x86_64-linux-gnu/qemu
QEMU10_HEADER=$header
QEMU10_VERSION=$ver
EOF
}

main
