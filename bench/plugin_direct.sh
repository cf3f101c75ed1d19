#!/usr/bin/env bash
# The plugin's cost to the guest measured by hand, the way issue 46 measured it, beside
# bench/plugin.sh's A/B rows: one boot per configuration, as a user starts it
# (`xtask/xtask run --profile --plugin -- -append run=spin`), qprof sampling the whole boot at
# 10 kHz (`--interval 0.1 --duration 0`), and the mean of 8 of the guest's `rate` lines taken once
# qprof has sampled 3 s (the idle boot: as long after `ready`); idle, auto, timer and counter in
# turn, ROUNDS times, each against the same round's idle boot.
# Usage: bench/plugin_direct.sh PLACEMENT ROUNDS [CHECKOUT...]
#   PLACEMENT: free (the host's scheduler), pinned (QEMU and qprof on CPU 0, the vCPU thread moved
#   to CPU 1, as bench/plugin.sh's default) or one-core (everything on CPU 0).
#   CHECKOUT: built checkouts of qprof to compare, alternated within each round (default: this
#   one); each needs its build/ (xtask/xtask build).
# Prints a line per boot (placement, checkout, round, configuration, the trigger qprof's summary
# names, the mean, the 8 values, the load average), then per checkout and configuration the
# median slowdown over the rounds with its range.
set -uo pipefail
PLACE=${1:?usage: bench/plugin_direct.sh free|pinned|one-core ROUNDS [CHECKOUT...]}
ROUNDS=${2:?usage: bench/plugin_direct.sh free|pinned|one-core ROUNDS [CHECKOUT...]}
shift 2
CHECKOUTS=("$@")
[ ${#CHECKOUTS[@]} -gt 0 ] || CHECKOUTS=("$(cd "$(dirname "$0")/.." && pwd)")
case $PLACE in free) PRE=() ;; pinned | one-core) PRE=(taskset -c 0) ;;
    *) echo "plugin_direct: PLACEMENT is free, pinned or one-core" >&2; exit 2 ;; esac
[ "$PLACE" != pinned ] || [ "$(nproc)" -ge 2 ] || { echo "plugin_direct: pinned needs 2 CPUs" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qprof-plugin-direct.XXXXXX")
trap 'pkill -f "qprof-direct-$$,debug-threads" 2>/dev/null; rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
CFGS=("idle|" "auto|--interval 0.1" "timer|--interval 0.1 --plugin-trigger timer"
    "counter|--interval 0.1 --plugin-trigger counter")

rates() { grep -c '^rate pid=' serial; }

# One boot: NAME QPROF-ARGS ROUND CHECKOUT
one_boot() {
    local name=$1 args=$2 round=$3 co=$4 q=0 skip trig=- deadline
    rm -f serial qmp-socket qprof-plugin gdb-socket qprof.err
    : >serial
    setsid "${PRE[@]}" "$co/xtask/xtask" run --profile --plugin -- -append run=spin \
        -name "qprof-direct-$$,debug-threads=on" >serial 2>qemu.err </dev/null &
    local x=$!
    deadline=$((SECONDS + 120))
    until grep -q ready serial; do
        sleep 0.1
        [ $SECONDS -lt $deadline ] || { echo "plugin_direct: no ready (qemu.err: $(tail -n1 qemu.err))" >&2; break; }
    done
    if [ "$PLACE" = pinned ]; then # the vCPU thread to CPU 1 (QEMU names it under debug-threads)
        local qemu t
        qemu=$(pgrep -f -n "qemu-system-x86_64.*qprof-direct-$$,debug-threads")
        for t in /proc/"$qemu"/task/*; do
            [[ $(cat "$t/comm" 2>/dev/null) != *"/TCG" ]] || taskset -p -c 1 "${t##*/}" >/dev/null
        done
    fi
    if [ -n "$args" ]; then
        # shellcheck disable=SC2086 # the configuration's options, split on purpose
        "${PRE[@]}" "$co/build/qprof" --qmp-socket ./qmp-socket --plugin unix:./qprof-plugin $args \
            --kernel "$co/build/guest/kernel.elf" --user-dir "$co/build/guest/user" \
            --duration 0 --no-progress -o out.folded 2>qprof.err &
        q=$!
    fi
    sleep 3
    skip=$(rates)
    deadline=$((SECONDS + 60))
    while [ "$(rates)" -lt $((skip + 8)) ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    local iters
    iters=$(grep '^rate pid=' serial | sed -n "$((skip + 1)),$((skip + 8))p" |
        sed -E 's/.*iters=([0-9]+).*/\1/' | tr '\n' ' ')
    if [ "$q" != 0 ]; then
        kill -INT "$q" 2>/dev/null || echo "plugin_direct: qprof ended early: $(tail -n1 qprof.err)" >&2
        wait "$q"
        trig=$(sed -nE 's/.*plugin trigger: ([a-z]+).*/\1/p' qprof.err | head -n1)
    fi
    kill -- -"$x" 2>/dev/null
    wait "$x" 2>/dev/null
    echo "$PLACE $(basename "$co") $round $name ${trig:--} $(awk '{ for (i = 1; i <= NF; i++) s += $i; print NF == 8 ? s / NF : 0 }' <<<"$iters") [$iters] load $(cut -d' ' -f1 /proc/loadavg)"
}

for ((r = 1; r <= ROUNDS; r++)); do
    for co in "${CHECKOUTS[@]}"; do
        for c in "${CFGS[@]}"; do one_boot "${c%%|*}" "${c#*|}" "$r" "$co"; done
    done
done | tee boots
# per checkout and configuration: 1 - mean / that round's idle mean, median and range
awk '$6 > 0 { m[$2, $3, $4] = $6; trig[$2, $4] = $5; seen[$2, $4] = 1 }
    END {
        for (k in seen) {
            split(k, p, SUBSEP); co = p[1]; cfg = p[2]
            if (cfg == "idle") continue
            n = 0
            for (r = 1; (co, r, "idle") in m || r == 1; r++)
                if ((co, r, cfg) in m && m[co, r, "idle"] > 0) x[n++] = 100 * (1 - m[co, r, cfg] / m[co, r, "idle"])
            if (!n) continue
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
            med = n % 2 ? x[(n - 1) / 2] : (x[n / 2 - 1] + x[n / 2]) / 2
            printf "plugin_direct: %s %s (%s): %.1f%% (%.1f to %.1f) over %d rounds\n", co, cfg, trig[co, cfg], med, x[0], x[n - 1], n
        }
    }' boots | sort
