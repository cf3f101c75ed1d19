#!/bin/sh
# real-btf.sh TEST_BIN WORKDIR [DEB_DIRS]: runs `TEST_BIN real` on the .BTF of Debian's current
# linux-image-amd64 kernel. fetch-debs.sh finds the .deb ($QPROF_LINUX_DEBS, DEB_DIRS, a copy
# in WORKDIR/debs, or `apt-get download`), and exits 77 (ctest: skipped) with the reason when
# none can be had.
set -u
test_bin=$1
work=$2
deb_dir=${3:-}
here=$(cd "$(dirname "$0")" && pwd)

debs=$("$here/fetch-debs.sh" "$work/debs" "$deb_dir")
rc=$?
[ $rc -eq 0 ] || exit $rc
deb=$(printf '%s\n' "$debs" | head -n 1)

btf="$work/$(basename "$deb" .deb).btf"
# shellcheck disable=SC3013 # -nt: dash's test, which /bin/sh is on Debian, has it
if [ ! -s "$btf" ] || [ "$deb" -nt "$btf" ]; then
    echo "extracting .BTF from $deb" >&2
    "$here/vmlinux-btf.sh" "$deb" "$btf.tmp" || exit 1
    mv "$btf.tmp.release" "$btf.release" && mv "$btf.tmp" "$btf" || exit 1
fi
exec "$test_bin" real "$btf"
