#!/usr/bin/env bash
# Debian 13 (trixie) in the suite, the last step of `xtask/xtask test`: builds and tests this
# checkout inside a Debian 13 root made with debootstrap from the archive in the machine's own
# sources (read at run time), never touching the machine's packages or sources. Inside it:
# - the build with -Werror (gcc 14, GLib 2.84, capstone 5);
# - `xtask/xtask demo` and `xtask/xtask demo --plugin` under trixie's QEMU 10.0, each checked for
#   the demo's designed shares (spin: hot_a 3:1 against hot_b);
# - the plugin's e2e cases under that QEMU, and one case per target and per architecture;
# - then trixie-backports' QEMU (11.1), installed the way a user does (apt-get -t
#   trixie-backports), and the same demos and plugin cases under it, with one case per stopping
#   target (QMP, gdbstub): plugin API 7, built against qprof's
#   own declarations of it (plugin/qpr_qemu_api7.h), the archive having no source tarball for
#   its header. Where no plugin can be built for a QEMU, xtask's one line about it is printed as
#   a skip, the demo runs over the gdbstub instead and the plugin's cases skip, saying why.
# The prepared root (build dependencies, both QEMUs' packages, the plugin header of trixie's
# QEMU) is cached as a tarball in ~/.cache/qprof-trixie, so that a second run skips debootstrap
# and apt. Needs root (debootstrap, chroot, mounts); exits 0 with one "trixie: SKIP" line when
# that, debootstrap or the archive is missing, or QPROF_TRIXIE=0.
#
#   xtask/trixie.sh            prepare (or unpack) the root, then build and test in it
#   xtask/trixie.sh --prepare  only (re)build the cached root
set -Eeuo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/qprof-trixie
# the cache's recipe: a root prepared by another recipe is prepared again
RECIPE=1
TARBALL=$CACHE/root-$RECIPE.tar.zst
WORK=""
R=""

FAILED=()
say() { printf 'trixie: [%3d s] %s\n' "$SECONDS" "$*" >&2; }
skip() { printf 'trixie: SKIP: %s\n' "$*" >&2; exit 0; }
die() { say "$*"; exit 1; }

# The archive's address, from the machine's own sources (never written anywhere else).
archive() {
    local f=/etc/apt/sources.list.d/debian.sources uri=""
    if [ -r "$f" ]; then
        uri=$(awk '/^URIs:/ { print $2; exit }' "$f")
    elif [ -r /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" && $2 !~ /^\[/ { print $2; exit } $1 == "deb" { print $3; exit }' \
            /etc/apt/sources.list)
    fi
    printf '%s\n' "$uri"
}

# Inside the root, with a clean environment: HOME=/root, its own PATH.
in_root() {
    chroot "$R" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb \
        DEBIAN_FRONTEND=noninteractive bash -c "$1"
}

mount_root() {
    mount -t proc proc "$R/proc"
    mount --bind /sys "$R/sys"
    mount --bind /dev "$R/dev"
    mount --bind /dev/pts "$R/dev/pts"
    mount -t tmpfs tmpfs "$R/dev/shm"
}

# Every process whose root is the chroot (a QEMU a failed test left), then the mounts, innermost
# first, then the scratch copy. Runs on every exit.
cleanup() {
    local p pids=()
    [ -n "$R" ] || return 0
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2>/dev/null)" = "$R" ] && pids+=("${p#/proc/}")
    done
    [ ${#pids[@]} -eq 0 ] || kill -9 "${pids[@]}" 2>/dev/null || true
    for m in dev/shm dev/pts dev sys proc; do
        mountpoint -q "$R/$m" 2>/dev/null && umount -l "$R/$m"
    done
    # only once nothing is mounted below it
    if ! grep -q " $R/" /proc/mounts; then rm -rf "$WORK"; fi
}

# This checkout as it is (tracked and untracked files git does not ignore) into the root.
copy_checkout() {
    rm -rf "$R/root/qprof"
    mkdir -p "$R/root/qprof"
    (cd "$REPO" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) |
        tar -C "$R/root/qprof" -xf -
}

# debootstrap, then the project's packages (xtask deps), trixie-backports' QEMU downloaded (not
# installed: the tests install it after the 10.0 runs) and trixie's plugin header, as a tarball.
prepare() {
    local a=$1 started=$SECONDS
    say "debootstrap trixie (no cached root at $TARBALL)"
    if ! debootstrap --variant=minbase --include=ca-certificates,git trixie "$R" "$a" \
        >"$WORK/debootstrap.log" 2>&1; then
        tail -n 5 "$WORK/debootstrap.log" >&2
        skip "debootstrap trixie failed (the archive unreachable or without trixie?)"
    fi
    printf 'deb %s trixie-backports main\n' "$a" >"$R/etc/apt/sources.list.d/backports.list"
    mount_root
    copy_checkout
    say "installing the project's packages in the root (xtask deps)"
    in_root 'cd /root/qprof && xtask/xtask deps && apt-get clean'
    say "downloading trixie-backports' QEMU into the root's apt cache"
    in_root 'apt-get install -y -qq --no-install-recommends -d -t trixie-backports qemu-system-x86 qemu-system-arm \
        qemu-system-misc >/dev/null'
    say "fetching trixie's QEMU plugin header (xtask/qemu10.sh)"
    in_root 'cd /root/qprof && xtask/qemu10.sh --quiet >/dev/null'
    rm -rf "$R/root/qprof"
    cleanup_mounts_only
    mkdir -p "$CACHE"
    say "caching the root as $TARBALL"
    tar -C "$R" --zstd -cf "$TARBALL.new" .
    mv "$TARBALL.new" "$TARBALL"
    rm -f "$CACHE"/root-*.tar.zst.new
    for old in "$CACHE"/root-*.tar.zst; do [ "$old" = "$TARBALL" ] || rm -f "$old"; done
    say "root prepared in $((SECONDS - started)) s"
}

cleanup_mounts_only() {
    for m in dev/shm dev/pts dev sys proc; do
        mountpoint -q "$R/$m" 2>/dev/null && umount -l "$R/$m"
    done
    return 0
}

# The demo's spin: hot_a against hot_b, designed 3:1, within 4.4 binomial standard deviations
# (at least 0.03), as test_e2e's spin check.
check_shares() { # check_shares LABEL
    local folded=$R/root/qprof/out/stack.folded
    [ -s "$folded" ] || die "$1: no out/stack.folded"
    awk -v label="$1" '
        { n = $NF; sub(/ [0-9]+$/, ""); k = split($0, f, ";"); leaf = f[k]
          if (leaf == "hot_a") a += n; else if (leaf == "hot_b") b += n }
        END {
            if (a + b < 50) { printf "trixie: %s: only %d samples in hot_a and hot_b\n", label, a + b; exit 1 }
            p = 0.75; s = a / (a + b); tol = 4.4 * sqrt(p * (1 - p) / (a + b)); if (tol < 0.03) tol = 0.03
            ok = (s > p - tol && s < p + tol)
            printf "trixie: %s: hot_a share %.3f over %d samples, designed 0.75 +- %.3f: %s\n",
                label, s, a + b, tol, ok ? "ok" : "FAILED"
            exit !ok
        }' "$folded" >&2
}

# One QEMU's runs: `xtask/xtask demo --plugin` with its shares, then the ctest cases REGEX. When
# xtask says no plugin can be built for this QEMU (its one line), that is reported as a skip of
# the plugin's runs and the demo runs over the gdbstub instead; the plugin's ctest cases then
# skip themselves, saying why.
run_suite() { # run_suite LABEL CTEST_REGEX EXCLUDE_REGEX
    local label=$1 regex=$2 exclude=$3 qemu no_plugin='^xtask: no \S*qprof-plugin.so'
    qemu=$(in_root 'qemu-system-x86_64 --version | head -n1')
    say "$label: $qemu"
    if in_root 'cd /root/qprof && xtask/xtask demo --plugin >/root/demo-plugin.log 2>&1'; then
        grep -E 'paused|capture' "$R/root/qprof/out/summary.txt" | head -n 3 |
            sed "s/^/trixie: $label: /" >&2 || true
        check_shares "$label demo --plugin"
    elif grep -qE "$no_plugin" "$R/root/demo-plugin.log"; then
        say "$label: SKIP the plugin: $(grep -E "$no_plugin" "$R/root/demo-plugin.log" | head -n 1)"
        in_root 'cd /root/qprof && xtask/xtask demo >/root/demo.log 2>&1' || {
            tail -n 20 "$R/root/demo.log" >&2
            die "$label: xtask/xtask demo failed"
        }
        check_shares "$label demo"
    else
        tail -n 20 "$R/root/demo-plugin.log" >&2
        die "$label: xtask/xtask demo --plugin failed"
    fi
    # configured again for this QEMU (a plugin built for another one goes), as xtask test does
    in_root 'cmake /root/qprof/build >/dev/null && cmake --build /root/qprof/build >/dev/null'
    # a failure is noted and the next QEMU still runs; the step fails at the end
    in_root "cd /root/qprof/build && ctest --output-on-failure --timeout 400 -R '$regex' -E '$exclude'" >&2 ||
        FAILED+=("$label: ctest -R '$regex' -E '$exclude'")
}

main() {
    [ "${QPROF_TRIXIE:-1}" != 0 ] || skip "QPROF_TRIXIE=0"
    [ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot, mounts)"
    command -v debootstrap >/dev/null || skip "no debootstrap (apt-get install debootstrap)"
    command -v zstd >/dev/null || skip "no zstd (apt-get install zstd) for the cached root"
    local a started=$SECONDS
    a=$(archive)
    [ -n "$a" ] || skip "no Debian archive address in the machine's apt sources"
    WORK=$(mktemp -d /var/tmp/qprof-trixie.XXXXXX)
    R=$WORK/root
    mkdir -p "$R"
    trap cleanup EXIT
    if [ ! -s "$TARBALL" ] || [ "${1:-}" = --prepare ]; then
        prepare "$a" # leaves the root as the tarball holds it
        [ "${1:-}" != --prepare ] || return 0
    else
        say "unpacking the cached root"
        tar -C "$R" --zstd -xf "$TARBALL"
    fi
    mount_root
    copy_checkout
    # Packages the project has come to need since the root was cached (xtask deps installs only
    # what is missing: about a second when nothing is)
    in_root 'cd /root/qprof && xtask/xtask deps >/root/deps.log 2>&1' || {
        tail -n 20 "$R/root/deps.log" >&2
        die "xtask/xtask deps failed in the Debian 13 root"
    }
    # The last run's build tree, as CI caches one: the copy keeps the files' times, so ninja
    # rebuilds only what changed since (all of it the first time, about 10 minutes on 2 cores).
    if [ -s "$CACHE/build.tar.zst" ]; then
        tar -C "$R/root/qprof" --zstd -xf "$CACHE/build.tar.zst"
    fi
    say "building with -Werror (gcc 14, GLib 2.84, capstone 5)"
    # shellcheck disable=SC2016 # expanded inside the root
    in_root 'cd /root/qprof && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DQPROF_WERROR=ON >/dev/null && cmake --build build -j"$(nproc)" >/root/build.log 2>&1' || {
        tail -n 30 "$R/root/build.log" >&2
        die "the build failed on Debian 13"
    }
    tar -C "$R/root/qprof" --zstd -cf "$CACHE/build.tar.zst.new" build
    mv "$CACHE/build.tar.zst.new" "$CACHE/build.tar.zst"
    in_root 'cd /root/qprof && xtask/xtask demo >/root/demo.log 2>&1' || {
        tail -n 20 "$R/root/demo.log" >&2
        die "xtask/xtask demo failed on Debian 13"
    }
    check_shares "QEMU 10.0 demo"
    # the plugin's cases (--exact's among them), and one case per target (QMP, gdbstub, plugin)
    # and per architecture
    local each='e2e_spin|e2e_gdb_spin|e2e_(riscv64|aarch64)_(spin|plugin_spin)'
    run_suite "QEMU 10.0" "^(e2e_plugin_.*|$each)\$" '^$'

    local t=$SECONDS
    say "installing trixie-backports' QEMU"
    in_root 'apt-get install -y -qq --no-install-recommends -t trixie-backports qemu-system-x86 \
        qemu-system-arm qemu-system-misc >/dev/null'
    in_root 'cd /root/qprof && xtask/xtask demo >/root/demo.log 2>&1' || {
        tail -n 20 "$R/root/demo.log" >&2
        die "xtask/xtask demo failed under trixie-backports' QEMU"
    }
    check_shares "trixie-backports QEMU demo"
    # the plugin's cases again, for every architecture, and one case per stopping target
    run_suite "trixie-backports QEMU" \
        '^(e2e_plugin_.*|e2e_(riscv64|aarch64)_plugin_spin|e2e_spin|e2e_gdb_spin)$' '^$'
    say "trixie-backports QEMU: $((SECONDS - t)) s"

    [ ${#FAILED[@]} -eq 0 ] || die "Debian 13: failed after $((SECONDS - started)) s: ${FAILED[*]}"
    say "Debian 13: passed in $((SECONDS - started)) s"
}

main "$@"
