#!/bin/sh
# The man pages were built, and each holds every long option its --help lists:
# check_man.sh QPROF PAGE.1... (qprof-SUB.1 is `qprof SUB --help`'s page).
set -eu
qprof=$1
shift
[ $# -gt 0 ] || { echo "no man pages configured (help2man missing?)"; exit 77; }
fail=0
for page in "$@"; do
    name=$(basename "$page" .1)
    sub=${name#qprof}
    sub=${sub#-}
    if [ ! -s "$page" ]; then
        echo "$page: missing or empty"
        fail=1
        continue
    fi
    upper=$(echo "$name" | tr '[:lower:]' '[:upper:]')
    grep -q "^\.TH \"\?$upper\"\? \"\?1" "$page" || { echo "$page: no .TH $upper 1 line"; fail=1; }
    # shellcheck disable=SC2086 # no subcommand for the main page
    opts=$("$qprof" $sub --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
    [ -n "$opts" ] || { echo "$name: its --help lists no option"; fail=1; }
    for opt in $opts; do
        # help2man writes each - as \- (but in section titles, which it copies as they are)
        esc=$(printf '%s' "$opt" | sed 's/-/\\\\-/g')
        grep -q -e "$esc" -e "$opt" "$page" || { echo "$page: $opt of \`qprof $sub --help\` missing"; fail=1; }
    done
    echo "$page: $(echo "$opts" | wc -l) options"
done
exit $fail
