#!/bin/sh
# docs/options.md from qprof's own --help texts: options.sh QPROF > docs/options.md.
# `xtask/xtask docs` writes it; the docs_options test fails when the file and --help differ.
set -eu
qprof=$1
cat <<'HEAD'
# Options

Generated from `qprof --help` and each subcommand's `--help` by `xtask/xtask docs` (the test
`docs_options` fails when this file and the program disagree): do not edit it by hand. The man
pages `qprof(1)`, `qprof-record(1)`, `qprof-report(1)`, `qprof-top(1)`, `qprof-diff(1)` and
`qprof-annotate(1)` are made from the same texts at build time (help2man).
HEAD
for sub in "" record report top diff annotate; do
    printf '\n## qprof%s\n\n```text\n' "${sub:+ $sub}"
    # shellcheck disable=SC2086 # no subcommand for the main page: $sub expands to nothing
    "$qprof" $sub --help
    printf '```\n'
done
