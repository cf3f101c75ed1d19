#!/bin/sh
# `qprof diff` of two folded files, whole output against what the counts say: shares of each
# file's own total (100 and 200 samples), the largest change first, user_work vanished, hot_c
# new; difffolded's columns with BASE scaled to NEW's total; --comm on the roots; a line that is
# not "STACK COUNT" refused with exit 1.
# Usage: diff_folded.sh QPROF
set -eu
qprof=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
printf 'spin;_start;main;hot_a 60\nspin;_start;main;hot_b 20\nsys;_start;main;user_work 20\n' >base.folded
printf 'spin;_start;main;hot_a 150\nspin;_start;main;hot_b 40\nspin;_start;main;hot_c 10\n' >new.folded
fail() {
    echo "FAIL: $1"
    exit 1
}
"$qprof" diff base.folded new.folded -o d.folded >table.txt 2>err.txt || fail "qprof diff exited $?: $(cat err.txt)"
cat >want.txt <<'WANT'
# BASE base.folded: 100 samples
# NEW  new.folded: 200 samples
# shares are percent of each profile's samples; changes in points (NEW - BASE)
base self  base tot  new self   new tot   d self  d total  status   function
   20.00%    20.00%     0.00%     0.00%   -20.00   -20.00  vanished user_work
   60.00%    60.00%    75.00%    75.00%   +15.00   +15.00           hot_a
    0.00%     0.00%     5.00%     5.00%    +5.00    +5.00  new      hot_c
    0.00%   100.00%     0.00%   100.00%    +0.00    +0.00           _start
   20.00%    20.00%    20.00%    20.00%    +0.00    +0.00           hot_b
    0.00%   100.00%     0.00%   100.00%    +0.00    +0.00           main
WANT
diff -u want.txt table.txt || fail "the table differs"
cat >want.folded <<'WANT'
spin;_start;main;hot_a 120 150
spin;_start;main;hot_b 40 40
spin;_start;main;hot_c 0 10
sys;_start;main;user_work 40 0
WANT
diff -u want.folded d.folded || fail "difffolded's lines differ"
"$qprof" diff --comm spin base.folded new.folded >spin.txt || fail "--comm spin exited $?"
grep -q '^# BASE base.folded: 80 samples$' spin.txt || fail "--comm spin kept other than spin's 80 samples"
grep -q '^   75.00%    75.00%    75.00%    75.00%    +0.00    +0.00           hot_a$' spin.txt ||
    fail "hot_a's share of spin alone is not 75% in both"
printf 'spin;main 5\nno count here\n' >bad.folded
if "$qprof" diff base.folded bad.folded >/dev/null 2>err.txt; then
    fail "a malformed folded line was taken"
fi
grep -q 'bad.folded:2: not a folded line' err.txt || fail "no message naming the line: $(cat err.txt)"
echo "ok"
