#!/bin/sh
# End to end with Go's pprof: `go tool pprof -top` reads the profile test_out_pprof writes and
# shows hot_a, which that hand-built profile makes hottest, first by flat time.
# Usage: pprof_top.sh TEST_OUT_PPROF. Exit 77 (skipped) when Go is absent (Debian: golang-go).
set -eu
writer=$1
if ! command -v go >/dev/null 2>&1; then
    echo "SKIP: no 'go' on PATH: install Debian's golang-go (xtask/xtask deps does) to check pprof output with go tool pprof"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# go wants a home and a build cache; pprof looks for binaries to symbolize under these too, and
# must find none: the profile carries its own names.
export HOME="$tmp" GOCACHE="$tmp/gocache" GOPATH="$tmp/go" GOFLAGS='' GOTOOLCHAIN=local GOPROXY=off
export PPROF_TMPDIR="$tmp" PPROF_BINARY_PATH="$tmp/binaries"
"$writer" --write "$tmp/p.pb.gz"
cd "$tmp"
if ! go tool pprof -top p.pb.gz >top.txt 2>err.txt; then
    cat err.txt top.txt
    echo "FAIL: go tool pprof -top failed"
    exit 1
fi
cat top.txt
# rows: flat flat% sum% cum cum% NAME (a name may hold spaces: "spin (1)")
hottest=$(awk '/flat%/ { getline; name = $6; for (i = 7; i <= NF; i++) name = name " " $i; print name; exit }' top.txt)
if [ "$hottest" != hot_a ]; then
    echo "FAIL: the hottest function by flat is '$hottest', expected hot_a"
    exit 1
fi
grep -q ' spin (1)$' top.txt || { echo "FAIL: the root 'spin (1)' is not among the functions"; exit 1; }
# Both vCPUs show as cpu label values: a cpu label of 0 must not vanish.
go tool pprof -tags p.pb.gz >tags.txt 2>/dev/null
cpus=$(awk '/^ *cpu:/ { on = 1; next } on && NF == 0 { exit } on { print $NF }' tags.txt | sort | tr '\n' ' ')
if [ "$cpus" != "0 1 " ]; then
    cat tags.txt
    echo "FAIL: pprof -tags shows cpu values '$cpus', expected '0 1 '"
    exit 1
fi
echo "ok: hot_a is hottest"
