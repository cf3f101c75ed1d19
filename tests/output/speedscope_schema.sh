#!/bin/sh
# Validates what the speedscope writer produces against the schema speedscope itself publishes
# (shipped in its npm package), plus what speedscope's importer needs beyond the schema.
# Usage: speedscope_schema.sh TEST_BINARY SCRATCH_DIR
# TEST_BINARY is test_out_speedscope: given a directory it leaves there every file it checked.
# node and npm come with the Debian packages nodejs and npm (xtask/xtask deps installs them);
# the npm packages go into SCRATCH_DIR, once. Exits 77 (skip) when node, npm or the registry
# is missing.
set -u
test_binary=$1
scratch=$2
here=$(cd "$(dirname "$0")" && pwd)

skip() {
    echo "SKIP: $*" >&2
    exit 77
}

command -v node >/dev/null 2>&1 || skip "node is not installed (Debian: apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || skip "npm is not installed (Debian: apt-get install npm)"

mkdir -p "$scratch/files" || exit 1
rm -f "$scratch"/files/*.speedscope.json
if ! "$test_binary" "$scratch/files" >"$scratch/writer.log" 2>&1; then
    cat "$scratch/writer.log" >&2
    echo "FAIL: $test_binary failed, nothing to validate" >&2
    exit 1
fi

# The schema and the validator are fetched once per build tree; a failed or partial install is
# retried on the next run. ajv is optional: without it the script's own checks of the schema's
# keywords run instead.
find_schema() {
    find "$scratch/node_modules/speedscope" -name file-format-schema.json 2>/dev/null | head -n 1
}
npm_install() {
    timeout 300 npm install --prefix "$scratch" --no-audit --no-fund --no-save --fetch-retries=1 \
        "$@" >>"$scratch/npm.log" 2>&1
}
if [ -z "$(find_schema)" ] || [ ! -f "$scratch/node_modules/ajv/package.json" ]; then
    : >"$scratch/npm.log"
    if ! npm_install speedscope ajv && ! npm_install speedscope; then
        tail -n 20 "$scratch/npm.log" >&2
        skip "npm install speedscope ajv into $scratch failed (no registry?); see $scratch/npm.log"
    fi
fi
schema=$(find_schema)
[ -n "$schema" ] || skip "the speedscope npm package has no file-format-schema.json"

exec node "$here/speedscope_schema.js" "$scratch/node_modules" "$schema" "$scratch"/files/*.speedscope.json
