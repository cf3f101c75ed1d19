#!/bin/sh
# Runs a writer test, then a node script over the files it wrote, with npm packages installed
# into a scratch directory of the build tree (once; a failed or partial install is retried on
# the next run). Exits 77 (ctest's skip) when node, npm or the registry is missing.
# Usage: node_test.sh SCRATCH TEST_BINARY NODE_SCRIPT PACKAGE [OPTIONAL_PACKAGE...]
# TEST_BINARY, given a directory, leaves there every file it checked; NODE_SCRIPT is run as
# `node NODE_SCRIPT SCRATCH/node_modules SCRATCH/files`. The first package is needed, the others
# only wished for (the script must cope without them). node and npm come with the Debian
# packages nodejs and npm, which `xtask/xtask deps` installs.
set -u
scratch=$1
test_binary=$2
script=$3
shift 3

skip() {
    echo "SKIP: $*" >&2
    exit 77
}

command -v node >/dev/null 2>&1 || skip "node is not installed (Debian: apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || skip "npm is not installed (Debian: apt-get install npm)"

mkdir -p "$scratch/files" || exit 1
rm -f "$scratch"/files/*
if ! "$test_binary" "$scratch/files" >"$scratch/writer.log" 2>&1; then
    cat "$scratch/writer.log" >&2
    echo "FAIL: $test_binary failed, nothing to check" >&2
    exit 1
fi

installed() {
    for spec in "$@"; do
        name=${spec%@*} # jsdom@24 -> jsdom
        [ -f "$scratch/node_modules/$name/package.json" ] || return 1
    done
}
npm_install() {
    timeout 300 npm install --prefix "$scratch" --no-audit --no-fund --no-save --fetch-retries=1 \
        "$@" >>"$scratch/npm.log" 2>&1
}
if ! installed "$@"; then
    : >"$scratch/npm.log"
    if ! npm_install "$@" && ! npm_install "$1"; then
        tail -n 20 "$scratch/npm.log" >&2
        skip "npm install $* into $scratch failed (no registry?); see $scratch/npm.log"
    fi
fi

exec node "$script" "$scratch/node_modules" "$scratch/files"
