#!/bin/sh
# The project's shell scripts through shellcheck: xtask/xtask and xtask/*.sh, bench/*.sh and every
# tests/**/*.sh.
# A finding is fixed, or silenced where it stands with its reason
# (`# shellcheck disable=SCnnnn # why`). Exits 77 (ctest's skip) when shellcheck is missing:
# Debian's package shellcheck, which `xtask/xtask deps` installs.
# Usage: shellcheck.sh SOURCE_DIR
set -eu
cd "$1"
if ! command -v shellcheck >/dev/null 2>&1; then
    echo "SKIP: shellcheck is not installed (Debian: apt-get install shellcheck; xtask/xtask deps)" >&2
    exit 77
fi
shellcheck --version | sed -n 2p
# xtask/xtask, xtask/*.sh, bench/*.sh (not below bench/) and tests/**/*.sh
scripts() {
    find xtask bench tests -type f \( -path xtask/xtask -o -path 'xtask/*.sh' -o -path 'bench/*.sh' ! -path 'bench/*/*' \
        -o -path 'tests/*.sh' \) "$@"
}
# find's status is shellcheck's: non-zero when any file has a finding
scripts -exec shellcheck --format=gcc {} +
echo "shellcheck: no findings in $(scripts | wc -l) scripts"
