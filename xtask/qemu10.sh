#!/usr/bin/env bash
# The QEMU that runs the TCG plugin target, and its plugin header. qprof-plugin.so loads into
# QEMU 9.2 and later (plugin API 4 to 7; plugin/qpr_qemu_api.h):
# - the system's qemu-system-x86_64 when it is one of those (Debian 13: 10.0): only its
#   include/qemu/qemu-plugin.h (include/plugins/ in later QEMUs) is fetched, from the upstream
#   source tarball of the same version (a deb-src line for the system's suite and its
#   backports), into ${CACHE}-headers/VERSION/qemu-plugin.h; where the archive lacks that tarball
#   and the QEMU is 11.1 to 11.x (trixie-backports' 11.1.3), QEMU10_HEADER is empty and the build
#   uses qprof's own API 7 declarations (plugin/qpr_qemu_api7.h), tried again only once
#   ${CACHE}-headers/VERSION/no-source is removed;
# - otherwise (Debian 12's 7.2) QEMU 10.0 beside it: unpacks bookworm-backports'
#   qemu-system-x86, qemu-system-arm (aarch64) and qemu-system-riscv, with the common, data, gui
#   and module packages of the same version (so that QEMU_MODULE_DIR holds only modules of its own
#   build), into a cache outside the repository, and takes its header the same way.
# A private apt state: the machine's own sources and packages are not touched. Fast when cached.
#
#   xtask/qemu10.sh          fetch if needed, then print the variables below (sh syntax)
#   xtask/qemu10.sh --quiet  the same, without progress lines
#
# Prints QEMU10_PREFIX (empty for the system's QEMU), QEMU10_BIN, QEMU10_MODULE_DIR,
# QEMU10_HEADER, QEMU10_VERSION; exits 1 with one line saying why when the archive cannot give
# them.
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
    mkdir -p "$CACHE/include/qemu"
    extract_header "$dir" "$CACHE/include/qemu/qemu-plugin.h" || die "$tarball holds no qemu-plugin.h"
}

# The plugin header from the upstream tarball in DIR into OUT: include/qemu/qemu-plugin.h up to
# QEMU 10.0, include/plugins/qemu-plugin.h after. 1 when there is none.
extract_header() {
    local tarball member
    tarball=$(find "$1" -maxdepth 1 -name 'qemu_*.orig.tar.*' | head -n1)
    [ -n "$tarball" ] || return 1
    member=$(tar -tf "$tarball" | awk '/\/include\/(qemu|plugins)\/qemu-plugin\.h$/ { print }' | head -n1)
    [ -n "$member" ] || return 1
    tar -xOf "$tarball" "$member" >"$2.new"
    mv "$2.new" "$2"
}

# The system's qemu-system-x86_64 when it can load the plugin (9.2 or later): its upstream
# version (e.g. 10.0.13), else nothing.
system_qemu_version() {
    local v major minor
    command -v qemu-system-x86_64 >/dev/null || return 0
    v=$(qemu-system-x86_64 --version 2>/dev/null |
        sed -n 's/^QEMU emulator version \([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p')
    [ -n "$v" ] || return 0
    IFS=. read -r major minor _ <<<"$v"
    if [ "$major" -gt 9 ] || { [ "$major" -eq 9 ] && [ "$minor" -ge 2 ]; }; then
        printf '%s\n' "$v"
    fi
}

# qemu-plugin.h of the system's QEMU (upstream version $1) from the source package of the
# installed qemu-system-x86's Debian version, in the system's suite or its backports.
system_header() {
    local ver=$1 deb codename a dir=${CACHE}-headers/$1
    [ -s "$dir/qemu-plugin.h" ] && return 0
    own_api7 "$ver" && [ -e "$dir/no-source" ] && return 1
    command -v apt-get >/dev/null || die "apt-get is needed to fetch QEMU $ver's plugin header"
    deb=$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null || true)
    [ -n "$deb" ] || die "QEMU $ver is not Debian's qemu-system-x86: configure with -DQPROF_QEMU_PLUGIN_HEADER=PATH"
    codename=$(awk -F= '$1 == "VERSION_CODENAME" { print $2 }' /etc/os-release 2>/dev/null)
    [ -n "$codename" ] || die "no VERSION_CODENAME in /etc/os-release"
    APT=${CACHE}-headers/apt-$codename
    mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$dir/src"
    a=$(archive)
    printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
        "$a" "$codename" "$a" "$codename-backports" >"$APT/sources.list"
    say "updating a private apt state for $codename's QEMU sources"
    apt_private update >/dev/null || die "apt-get update for $codename failed (is the archive reachable?)"
    say "downloading QEMU $deb's upstream source tarball (about 40 MB)"
    (cd "$dir/src" && apt_private source --download-only "qemu=$deb" >/dev/null 2>&1) || true
    if ! extract_header "$dir/src" "$dir/qemu-plugin.h"; then
        rm -rf "$dir/src"
        if own_api7 "$ver"; then
            say "the archive lacks qemu_$ver+ds.orig.tar.*: the plugin takes qprof's own API 7 declarations"
            : >"$dir/no-source"
            return 1
        fi
        die "no plugin header for QEMU $ver: the archive lacks qemu_$ver+ds.orig.tar.* (apt-get source --download-only qemu=$deb), so qprof-plugin.so (plugin API 4 to 7, QEMU 9.2 to 11.x) cannot be built for it"
    fi
    rm -rf "$dir/src"
}

# Whether QEMU $1 (upstream version) runs plugin API 7 (11.1 to 11.x), which qprof declares
# itself where no header can be had.
own_api7() {
    local major minor
    IFS=. read -r major minor _ <<<"$1"
    [ "$major" -eq 11 ] && [ "$minor" -ge 1 ]
}

main() {
    local sys
    sys=$(system_qemu_version)
    if [ -n "$sys" ]; then
        local header=${CACHE}-headers/$sys/qemu-plugin.h
        system_header "$sys" || header="" # 11.1 to 11.x: qprof's own API 7 declarations
        printf '%s\n' "QEMU10_PREFIX=" "QEMU10_BIN=$(command -v qemu-system-x86_64)" \
            "QEMU10_MODULE_DIR=/usr/lib/x86_64-linux-gnu/qemu" \
            "QEMU10_HEADER=$header" "QEMU10_VERSION=$sys"
        return 0
    fi
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
    ver=${ver#*:}
    ver=${ver%%+*} # upstream: 1:10.0.2+ds-2+deb13u1~bpo12+1 is 10.0.2
    cat <<EOF
QEMU10_PREFIX=$ROOT
QEMU10_BIN=$bin
QEMU10_MODULE_DIR=$ROOT/usr/lib/x86_64-linux-gnu/qemu
QEMU10_HEADER=$header
QEMU10_VERSION=$ver
EOF
}

main
