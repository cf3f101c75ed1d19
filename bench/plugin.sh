#!/usr/bin/env bash
# The plugin target's costs on the demo guest, QEMU 10: guest slowdown with qprof-plugin.so
# sampling at 1 kHz and 10 kHz, with each trigger (timer, counter, and auto's choice), with
# --exact, and beside it the gdbstub at 1 kHz; the capture cost on the vCPU thread (p50/p99, the
# plugin times itself) and the samples lost, as qprof's summary gives them.
# Usage: bench/plugin.sh BUILD_DIR [SECONDS [ROUNDS]]   (Markdown; about ROUNDS x 2.5 minutes)
# The last lines: `bench: plugin 10 kHz slowdown X%, gdbstub 1 kHz slowdown Y%` and the lines
# after it, which xtask bench (bench/run.sh, section plugin) repeats.
#
# What it measures first is what the user's guest loses: its work per guest second (the guest's
# own `rate pid=1 iters=N ticks=100` lines, one per guest second) with qprof sampling, against
# the plugin loaded and nobody sampling. QEMU's CPU time per unit of work (the cost to the host),
# the vCPU thread's, and the work per wall second go beside it.
#
# How: this host's load comes and goes by tens of percent within minutes (a VM's neighbours), so
# a cost is taken as the ratio of two rates measured seconds apart, and the verdict from the
# median of ROUNDS (5) such ratios, with their spread; and two ways, which must agree:
# - In one boot: the guest (`run=spin`, one vCPU, TCG) with the plugin loaded, and, in turn,
#   SECONDS (4) with no qprof and SECONDS with one sampling configuration (qprof starts half a
#   second before, so that its start and its trigger's reset fall outside the stretch, and ends
#   1.5 s after). Each configuration's rate is compared with the mean of the idle stretches
#   before and after it.
# - Across boots (the A/B rows, 10 kHz with each trigger): a boot sampled throughout, as a user
#   runs qprof, against the same round's boot with the plugin loaded and idle, each over 2 x
#   SECONDS guest seconds taken once qprof has sampled 3 s (the idle boot: the same time after
#   boot). The headline is auto's A/B row. The last lines say whether the in-boot and A/B
#   figures agree (either median within the other's spread).
# - The plugin's flat cost (its compare in every block while nobody samples), across boots: QEMU
#   10 alone against QEMU 10 with the plugin loaded, in turn, ROUNDS times; and the counter
#   trigger's flat cost the same way (loaded with trigger=counter), which auto's rule weighs.
# - The gdbstub in a boot of its own (QEMU 10 with a gdbstub, no plugin), idle and sampling in
#   turn the same way. Its pauses stop the guest's clock, so its figure is the work per wall
#   second.
#
# Each guest second is stamped as it arrives with the host clock and with the CPU time QEMU's
# threads (all of them, the plugin's timer among them) and its vCPU thread had used; a guest
# second counts for a stretch when it lies wholly inside it.
#
# Where the host CPU goes per sample (the table after the rows, for the in-boot ones): the CPU
# time over each stretch of the plugin's timer thread (it names itself qprof-timer), of QEMU's
# other threads (over what they took in the idle stretches either side), and of qprof's process,
# from /proc's schedstat, and their wake-ups (voluntary context switches), per sample; beside
# them the capture on the vCPU thread (the plugin times itself: the summary's p50). With
# everything on one host CPU (BENCH_PLUGIN_PLACEMENT=one-core) all of it is taken from the guest.
#
# Placement, as the demo and arch sections have it: on a host of two or more CPUs QEMU's vCPU
# thread runs on CPU 1, everything else (QEMU's other threads, the plugin's timer among them,
# qprof and this script) on CPU 0; so the timer's wake-ups are a core beside the guest's.
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/plugin.sh BUILD_DIR [SECONDS [ROUNDS]]}" && pwd)
SECS=${2:-4}
ROUNDS=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# A QEMU 10 given in the environment (QEMU10_BIN, QEMU10_PREFIX, QEMU10_MODULE_DIR: one carried to
# a machine without network) is used as it is; else xtask/qemu10.sh provides it.
if [ -z "${QEMU10_BIN:-}" ] || [ ! -x "$QEMU10_BIN" ]; then
    eval "$("$ROOT/xtask/qemu10.sh" --quiet)"
fi
# shellcheck disable=SC2153 # QEMU10_* come from qemu10.sh's output
export QEMU_MODULE_DIR=$QEMU10_MODULE_DIR
PLUGIN=$BUILD/qprof-plugin.so
[ -f "$PLUGIN" ] || { echo "bench: no $PLUGIN (configure after xtask/qemu10.sh)" >&2; exit 1; }
# BENCH_PLUGIN_PLACEMENT: pinned (the default, as above), one-core (everything on CPU 0, the
# vCPU too: no host CPU to spare) or free (the host's scheduler places every thread).
# BENCH_PLUGIN_SMP=N (N > 1), instead of all the rows: the demo with N vCPUs under MTTCG, one spin
# process pinned to each (run=spin@0,...: as `QPROF_SMP=N xtask/xtask demo --plugin` starts it,
# spins only), sampled at 10 kHz by auto, the timer and the counter in one boot, idle between, as
# the in-boot rows; twice: with QEMU's other threads, the plugin's timer and qprof on one host CPU
# (CPU 0), then on two (CPUs 0-1), the vCPU threads on the host's CPUs after those, or on those
# same CPUs where none remain (on a 2-core host: the N vCPUs on CPU 1, then everything on both).
# BENCH_PLUGIN_PLACEMENT does not apply then. About ROUNDS x (14 x SECONDS + 30) seconds.
SMP=${BENCH_PLUGIN_SMP:-1}
HOST_CPUS=$(nproc)
GUEST_ARGS=(-accel tcg -append run=spin)
if [ "$SMP" -gt 1 ]; then
    run=''
    for ((k = 0; k < SMP; k++)); do run+="spin@$k,"; done
    GUEST_ARGS=(-accel "tcg,thread=multi" -smp "$SMP" -append "run=${run%,}")
fi
VCPU_CPU='' OTHER_CPUS=''
[ "$SMP" -gt 1 ] || case ${BENCH_PLUGIN_PLACEMENT:-pinned} in
    pinned)
        VCPU_CPU=0
        if [ "$(nproc)" -ge 2 ]; then
            VCPU_CPU=1
            taskset -p -c 0 $$ >/dev/null # QEMU and qprof inherit it; the vCPU thread moves to CPU 1
        fi ;;
    one-core) VCPU_CPU=0; taskset -p -c 0 $$ >/dev/null ;;
    free) ;;
    *) echo "bench: BENCH_PLUGIN_PLACEMENT is pinned, one-core or free" >&2; exit 2 ;;
esac
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qprof-plugin-bench.XXXXXX")
QEMU_PID='' STAMPER='' TAIL=''
trap 'stop; [ -n "${BENCH_KEEP:-}" ] || rm -rf "$WORK"' EXIT

# CPU time (ns) of QEMU's threads together, and of its vCPU threads (QEMU names them "CPU N/TCG",
# or "ALL CPUs/TCG" without MTTCG, under -name debug-threads=on).
cpu_ns() {
    local t total=0 vcpu=0 run comm
    for t in /proc/"$QEMU_PID"/task/*; do
        read -r run _ <"$t/schedstat" 2>/dev/null || continue
        total=$((total + run))
        read -r comm <"$t/comm" 2>/dev/null || continue
        [[ $comm == *"/TCG" ]] && vcpu=$((vcpu + run))
    done
    echo "$total $vcpu"
}

# A thread's voluntary context switches (its wake-ups), from its status file; 0 when gone.
wakeups() {
    local key value
    while read -r key value; do
        [ "$key" != voluntary_ctxt_switches: ] || { echo "$value"; return; }
    done <"$1" 2>/dev/null
    echo 0
}

# Where the host CPU goes, at this instant, for the breakdown per sample: "QEMU vCPUS TIMER
# TIMER_WAKES QPROF QPROF_WAKES", CPU in ns since each thread started (/proc's schedstat) and
# wake-ups as voluntary context switches; TIMER is the plugin's timer thread (it names itself
# qprof-timer), QPROF every thread of qprof's process PID (0: none; "-" when it has ended).
cpu_parts() {
    local t run comm qemu=0 vcpu=0 timer=0 twakes=0 qprof=0 qwakes=0
    for t in /proc/"$QEMU_PID"/task/*; do
        read -r run _ <"$t/schedstat" 2>/dev/null || continue
        qemu=$((qemu + run))
        read -r comm <"$t/comm" 2>/dev/null || continue
        if [[ $comm == *"/TCG" ]]; then
            vcpu=$((vcpu + run))
        elif [[ $comm == qprof-timer ]]; then
            timer=$run twakes=$(wakeups "$t/status")
        fi
    done
    if [ "$1" != 0 ] && [ ! -d "/proc/$1/task" ]; then
        qprof=- qwakes=-
    elif [ "$1" != 0 ]; then
        for t in /proc/"$1"/task/*; do
            read -r run _ <"$t/schedstat" 2>/dev/null || continue
            qprof=$((qprof + run)) qwakes=$((qwakes + $(wakeups "$t/status")))
        done
    fi
    echo "$qemu $vcpu $timer $twakes $qprof $qwakes"
}

# One line of "$WORK/parts" for a stretch: LABEL ROUND T0 T1 "PARTS AT T0" "PARTS AT T1"
# (cpu_parts), as LABEL|ROUND|SECONDS|QEMU|vCPUs|TIMER|TIMER_WAKES|QPROF|QPROF_WAKES, the
# differences over the stretch.
note_parts() {
    local a b
    read -ra a <<<"$5"
    read -ra b <<<"$6"
    local q=- qw=- # qprof's, unless it ended within the stretch
    [ "${a[4]}" = - ] || [ "${b[4]}" = - ] || q=$((b[4] - a[4])) qw=$((b[5] - a[5]))
    printf '%s|%s|%s|%s|%s|%s|%s|%s|%s\n' "$1" "$2" "$(awk -v a="$3" -v b="$4" 'BEGIN { print b - a }')" \
        $((b[0] - a[0])) $((b[1] - a[1])) $((b[2] - a[2])) $((b[3] - a[3])) "$q" "$qw" >>"$WORK/parts"
}

boot() { # boot PLUGIN_ARGS|0 WITH_GDB
    rm -f "$WORK"/serial "$WORK"/plugin "$WORK"/gdb "$WORK"/lines
    : >"$WORK/serial"
    : >"$WORK/stamped"
    local extra=()
    [ "$1" != 0 ] && extra+=(-plugin "$PLUGIN,socket=$WORK/plugin$1")
    [ "$2" = 1 ] && extra+=(-chardev "socket,path=$WORK/gdb,server=on,wait=off,id=g" -gdb chardev:g)
    "$QEMU10_BIN" -L "$QEMU10_PREFIX/usr/share/qemu" -L /usr/share/seabios -display none \
        -nodefaults -no-reboot -m 256M -kernel "$BUILD/guest/kernel.elf" "${GUEST_ARGS[@]}" \
        -serial "file:$WORK/serial" -name bench,debug-threads=on "${extra[@]}" &
    QEMU_PID=$!
    until grep -q ready "$WORK/serial" 2>/dev/null; do sleep 0.1; done
    local t comm
    for t in /proc/"$QEMU_PID"/task/*; do
        read -r comm <"$t/comm" 2>/dev/null || continue
        [[ $comm != *"/TCG" || -z $VCPU_CPU ]] || taskset -p -c "$VCPU_CPU" "${t##*/}" >/dev/null
    done
    mkfifo "$WORK/lines"
    tail -n0 -F "$WORK/serial" 2>/dev/null >"$WORK/lines" &
    TAIL=$!
    # each guest second as it ends: host time, its iterations, QEMU's and the vCPU's CPU so far
    while IFS= read -r line; do
        case $line in
            "rate pid="*" iters="*) # one per process (spin@K: one per vCPU) and guest second
                it=${line#* iters=}
                printf '%s %s %s\n' "$EPOCHREALTIME" "${it%% *}" "$(cpu_ns)" ;;
        esac
    done <"$WORK/lines" >>"$WORK/stamped" &
    STAMPER=$!
    sleep 1.5 # past the first, partial guest second
}

stop() {
    [ -n "$QEMU_PID" ] || return 0
    kill "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
    kill "$STAMPER" "$TAIL" 2>/dev/null || true
    wait "$STAMPER" "$TAIL" 2>/dev/null || true
    QEMU_PID='' STAMPER='' TAIL=''
}

# wall|cpu|vcpu|guest rates over the guest seconds wholly inside [T0, T1] (host clock); guest:
# iterations per guest second (one `rate` line each), what the guest's own clock sees
rates() {
    awk -v t0="$1" -v t1="$2" 'NR > 1 && pt >= t0 && $1 <= t1 {
            it += $2; w += $1 - pt; c += $3 - pc; v += $4 - pv; n++ }
        { pt = $1; pc = $3; pv = $4 }
        END { if (it == 0 || w == 0 || c == 0 || v == 0) print "-|-|-|-"
              else printf "%.2f|%.2f|%.2f|%.2f", it / w, it / (c / 1e9), it / (v / 1e9), it / n }' "$WORK/stamped"
}

# A stretch with nothing sampling: LABEL ROUND
idle_stretch() {
    local t0=$EPOCHREALTIME p0 t1
    p0=$(cpu_parts 0)
    sleep "$SECS"
    t1=$EPOCHREALTIME
    note_parts "$1" "$2" "$t0" "$t1" "$p0" "$(cpu_parts 0)"
    printf '%s|%s|%s|\n' "$1" "$2" "$(rates "$t0" "$t1")"
}

# A stretch with qprof sampling: LABEL ROUND SECONDS QPROF-ARGS... (qprof from WARM seconds,
# half a second unless the caller sets it, before to 1.5 s after it, the breakdown's reads of /proc
# at either end within it; its summary's figures go with the row)
sampled_stretch() {
    local label=$1 round=$2 secs=$3 warm=${WARM:-0.5}
    shift 3
    "$BUILD/qprof" "$@" --kernel "$BUILD/guest/kernel.elf" --user-dir "$BUILD/guest/user" \
        --duration "$(awk -v s="$secs" -v w="$warm" 'BEGIN { print s + w + 1.5 }')" --no-progress \
        -o "$WORK/out.folded" 2>"$WORK/qprof.err" &
    local q=$!
    sleep "$warm"
    local t0=$EPOCHREALTIME p0
    p0=$(cpu_parts "$q")
    sleep "$secs"
    local t1=$EPOCHREALTIME
    note_parts "$label" "$round" "$t0" "$t1" "$p0" "$(cpu_parts "$q")"
    wait "$q" || true
    local summary
    summary=$(grep -E "samples in|capture cost|guest paused per sample|plugin trigger|exact instructions \(" \
        "$WORK/qprof.err" | tr '\n' ' ' || true)
    [ -n "$summary" ] || summary="qprof failed: $(tail -n1 "$WORK/qprof.err")"
    printf '%s|%s|%s|%s\n' "$label" "$round" "$(rates "$t0" "$t1")" "$summary"
}

# The rows with a boot of their own measure AB_SECS (twice SECONDS) of the guest's seconds, from
# AB_WARM seconds after the boot settles; for a sampled boot, after qprof has sampled that long.
# So its start, the trigger's choice and the guest's first seconds under the plugin's new blocks
# fall outside the measure, and the window holds enough guest seconds to beat this host's
# second-to-second noise (the issue's own alternating boots: 8 guest seconds after 3).
AB_WARM=3
AB_SECS=$(awk -v s="$SECS" 'BEGIN { print 2 * s }') # SECS may be fractional (BENCH_SCALE)

# A boot of its own per row, nothing sampling: LABEL ROUND PLUGIN_ARGS|0
boot_row() {
    boot "$3" 0
    sleep "$AB_WARM"
    local t0=$EPOCHREALTIME
    sleep "$AB_SECS"
    printf '%s|%s|%s|\n' "$1" "$2" "$(rates "$t0" "$EPOCHREALTIME")"
    stop
}

# A boot of its own with qprof sampling from before the measured stretch to after it, as a user
# runs it: LABEL ROUND QPROF-ARGS... Compared with the same round's boot with the plugin loaded
# and nobody sampling: the alternating-boot A/B that checks the in-boot stretches.
sampled_boot_row() {
    local label=$1 round=$2
    shift 2
    boot "" 0
    WARM=$AB_WARM sampled_stretch "$label" "$round" "$AB_SECS" "$@"
    stop
}

# BENCH_PLUGIN_SMP's placement with K host CPUs for everything but the vCPU threads (above).
place_smp() {
    OTHER_CPUS=0
    [ "$1" -lt 2 ] || OTHER_CPUS=0-$(($1 - 1))
    VCPU_CPU=$OTHER_CPUS
    [ "$HOST_CPUS" -le "$1" ] || VCPU_CPU=$1-$((HOST_CPUS - 1))
    [ "$HOST_CPUS" -ne $(($1 + 1)) ] || VCPU_CPU=$1
    taskset -p -c "$OTHER_CPUS" $$ >/dev/null
}

P="unix:$WORK/plugin"
TRIGGERS=("plugin 10 kHz|--interval 0.1" "plugin 10 kHz, timer|--interval 0.1 --plugin-trigger timer"
    "plugin 10 kHz, counter|--interval 0.1 --plugin-trigger counter")

# BENCH_PLUGIN_SMP's rounds; their labels name the placement.
smp_rounds() {
    local round k cfg where
    for ((round = 1; round <= ROUNDS; round++)); do
        for k in 1 2; do
            [ "$k" -le "$HOST_CPUS" ] || continue
            place_smp "$k"
            where="$SMP vCPUs on CPU $VCPU_CPU, the rest on $OTHER_CPUS"
            boot "" 0
            idle_stretch idle "$round"
            for cfg in "${TRIGGERS[@]}"; do
                # shellcheck disable=SC2086 # the configuration's options, split on purpose
                sampled_stretch "$where: ${cfg%%|*}" "$round" "$SECS" --plugin "$P" ${cfg#*|}
                idle_stretch idle "$round"
            done
            stop
        done
    done
}

default_rounds() {
    local round cfg
    for ((round = 1; round <= ROUNDS; round++)); do
        # flat costs, across boots
        boot_row "QEMU 10, no plugin" "$round" 0
        boot_row "plugin loaded, no qprof" "$round" ""
        # shellcheck disable=SC2086 # the configuration's options, split on purpose
        for cfg in "A/B: plugin 10 kHz|--interval 0.1" \
            "A/B: plugin 10 kHz, timer|--interval 0.1 --plugin-trigger timer" \
            "A/B: plugin 10 kHz, counter|--interval 0.1 --plugin-trigger counter"; do
            sampled_boot_row "${cfg%%|*}" "$round" --plugin "$P" ${cfg#*|}
        done
        boot_row "plugin loaded with trigger=counter, no qprof" "$round" ",trigger=counter"
        # sampling costs, in one boot, idle between
        boot "" 0
        idle_stretch idle "$round"
        for cfg in "plugin 1 kHz|--interval 1" \
            "plugin 10 kHz|--interval 0.1" \
            "plugin 10 kHz, timer|--interval 0.1 --plugin-trigger timer" \
            "plugin 10 kHz, counter|--interval 0.1 --plugin-trigger counter" \
            "plugin 1 kHz --exact|--interval 1 --exact"; do
            # shellcheck disable=SC2086 # the configuration's options, split on purpose
            sampled_stretch "${cfg%%|*}" "$round" "$SECS" --plugin "$P" ${cfg#*|}
            idle_stretch idle "$round"
        done
        stop
        # the gdbstub, in a boot without the plugin
        boot 0 1
        idle_stretch "gdb idle" "$round"
        # the guest runs about 40% of the time: a longer stretch holds whole guest seconds
        sampled_stretch "gdbstub 1 kHz" "$round" "$(awk -v s="$SECS" 'BEGIN { print 2.5 * s }')" \
            --gdb "unix:$WORK/gdb" --interval 1
        idle_stretch "gdb idle" "$round"
        stop
    done
}

: >"$WORK/parts"
if [ "$SMP" -gt 1 ]; then smp_rounds; else default_rounds; fi >"$WORK/all"

# Per row and round: the rate ratio to its reference (the idle stretches either side; the same
# round's QEMU 10 without the plugin for the flat rows; the same round's boot with the plugin
# loaded and idle for the A/B rows), then per row the median over rounds and the spread.
# Columns of "all": label|round|wall|cpu|vcpu|guest|summary; of "ratios" the same.
awk -F'|' '
    function ratio(x, y) { return (x == "-" || y == "-" || y == 0) ? "" : x / y }
    { label[NR] = $1; rnd[NR] = $2; w[NR] = $3; c[NR] = $4; v[NR] = $5; g[NR] = $6; sum[NR] = $7 }
    $1 == "QEMU 10, no plugin" { base[$2] = NR }
    $1 == "plugin loaded, no qprof" { loaded[$2] = NR }
    END {
        for (i = 1; i <= NR; i++) {
            l = label[i]
            if (l == "idle" || l == "gdb idle" || l == "QEMU 10, no plugin") continue
            if (l ~ /^plugin loaded/) r = base[rnd[i]]
            else if (l ~ /^A\/B: /) r = loaded[rnd[i]]
            else r = 0
            if (r) { ref_w = w[r]; ref_c = c[r]; ref_v = v[r]; ref_g = g[r] }
            else {
                # the idle stretches either side in the same boot
                ref_w = (w[i - 1] + w[i + 1]) / 2; ref_c = (c[i - 1] + c[i + 1]) / 2
                ref_v = (v[i - 1] + v[i + 1]) / 2; ref_g = (g[i - 1] + g[i + 1]) / 2
                if (w[i - 1] == "-" || w[i + 1] == "-") ref_w = ref_c = ref_v = ref_g = "-"
            }
            printf "%s|%s|%s|%s|%s|%s|%s\n", l, rnd[i], ratio(w[i], ref_w), ratio(c[i], ref_c),
                ratio(v[i], ref_v), ratio(g[i], ref_g), sum[i]
        }
    }' "$WORK/all" >"$WORK/ratios"

# median and range of column COL of LABEL's ratios, as slowdown percentages: "M|LO|HI"
stat() {
    awk -F'|' -v l="$1" -v col="$2" '$1 == l && $col != "" { x[n++] = $col }
        END { if (!n) { print "-|-|-"; exit }
              for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
              m = n % 2 ? x[(n - 1) / 2] : (x[n / 2 - 1] + x[n / 2]) / 2
              printf "%.1f|%.1f|%.1f", 100 * (1 - m), 100 * (1 - x[n - 1]), 100 * (1 - x[0]) }' "$WORK/ratios"
}
last_summary() { awk -F'|' -v l="$1" '$1 == l { s = $7 } END { print s }' "$WORK/ratios"; }
# a figure out of the last round's summary of LABEL: "capture" p50/p99, "rate", "lost", "trigger"
fig() {
    local s
    s=$(last_summary "$1")
    case $2 in
        capture) sed -nE 's/.*capture cost on the vCPU thread p50 ([0-9.]+) us, p99 ([0-9.]+) us.*/\1 \/ \2 us/p' <<<"$s" ;;
        rate) sed -nE 's/.*\(([0-9.]+) samples\/s\).*/\1/p' <<<"$s" ;;
        lost) sed -nE 's/.*lost to a full ring: ([0-9]+).*/\1/p' <<<"$s" ;;
        trigger) sed -nE 's/.*plugin trigger: ([a-z]+).*/\1/p' <<<"$s" ;;
        pause) sed -nE 's/.*paused per sample: p50 ([0-9.]+) ms.*/\1/p' <<<"$s" ;;
    esac
}

row() { # LABEL [NOTE]
    local l=$1 g glo ghi c clo chi v vlo vhi w wlo whi
    IFS='|' read -r g glo ghi <<<"$(stat "$l" 6)"
    IFS='|' read -r c clo chi <<<"$(stat "$l" 4)"
    IFS='|' read -r v vlo vhi <<<"$(stat "$l" 5)"
    IFS='|' read -r w wlo whi <<<"$(stat "$l" 3)"
    echo "| $l${2:-} | **$g%** ($glo-$ghi) | $c% ($clo-$chi) | $v% ($vlo-$vhi) | $w% ($wlo-$whi) | $(fig "$l" rate) | $(fig "$l" capture) | $(fig "$l" lost) | $(fig "$l" trigger) |"
}

# Where the host CPU went per sample, for the in-boot rows LABEL...: the plugin's timer thread and
# its wake-ups, the capture on the vCPU thread (the plugin's own timing, p50), QEMU's other
# threads (over what they took in the idle stretches either side) and qprof with its wake-ups;
# per sample, the median over the rounds; together, and as a share of one host CPU at the rate.
breakdown() {
    echo "Host CPU per sample (us; wake-ups per sample), median over the rounds; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    echo "| run | timer thread | its wake-ups | capture p50 (vCPU thread) | QEMU's other threads | qprof | its wake-ups | together | of one host CPU |"
    echo "|---|---|---|---|---|---|---|---|---|"
    local l
    for l in "$@"; do
        awk -F'|' -v l="$l" '
            function med(k,    n, i, j, t, x) {
                n = 0
                for (i = 1; i <= rounds; i++) if ((k, i) in v) x[n++] = v[k, i]
                if (!n) return "-"
                for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
                return n % 2 ? x[(n - 1) / 2] : (x[n / 2 - 1] + x[n / 2]) / 2
            }
            function f(x, d) { return x == "-" ? "-" : sprintf("%." d "f", x) }
            FNR == 1 { file++ }
            file == 1 && $1 == l {
                s = $7; rate[$2] = cap[$2] = ""
                if (match(s, /\([0-9.]+ samples\/s\)/)) rate[$2] = substr(s, RSTART + 1, RLENGTH - 12) + 0
                if (match(s, /capture cost on the vCPU thread p50 [0-9.]+/)) cap[$2] = substr(s, RSTART + 36, RLENGTH - 36) + 0
            }
            file == 2 { lab[FNR] = $1; rnd[FNR] = $2; dt[FNR] = $3; q[FNR] = $4; vc[FNR] = $5
                        tm[FNR] = $6; tw[FNR] = $7; qp[FNR] = $8; qw[FNR] = $9; n = FNR }
            END {
                for (i = 2; i < n; i++) {
                    if (lab[i] != l || lab[i - 1] !~ /idle$/ || lab[i + 1] !~ /idle$/) continue
                    r = rnd[i]; if (r > rounds) rounds = r
                    if (!rate[r] || dt[i] <= 0 || dt[i - 1] <= 0 || dt[i + 1] <= 0) continue
                    ns = rate[r] * dt[i] # samples in the stretch
                    idle = ((q[i - 1] - vc[i - 1] - tm[i - 1]) / dt[i - 1] + (q[i + 1] - vc[i + 1] - tm[i + 1]) / dt[i + 1]) / 2
                    v["t", r] = tm[i] / ns / 1e3; v["tw", r] = tw[i] / ns
                    v["c", r] = cap[r]
                    v["o", r] = ((q[i] - vc[i] - tm[i]) / dt[i] - idle) / rate[r] / 1e3
                    if (qp[i] == "-") continue # qprof ended within the stretch: no figure
                    v["q", r] = qp[i] / ns / 1e3; v["qw", r] = qw[i] / ns
                    v["all", r] = v["t", r] + v["c", r] + v["o", r] + v["q", r]
                    v["share", r] = 100 * v["all", r] * rate[r] / 1e6
                }
                printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s%% |\n", l, f(med("t"), 1), f(med("tw"), 2),
                    f(med("c"), 1), f(med("o"), 1), f(med("q"), 1), f(med("qw"), 2), f(med("all"), 1), f(med("share"), 1)
            }' "$WORK/all" "$WORK/parts"
    done
    echo
}

if [ "$SMP" -gt 1 ]; then
    echo "Each figure: the median over $ROUNDS rounds of $SECS s stretches (lowest-highest in brackets);"
    echo "$SMP vCPUs under MTTCG, one spin process pinned to each (\`BENCH_PLUGIN_SMP\`: the header of"
    echo "\`bench/plugin.sh\`). Slowdowns of the guest's work per guest second (the spins' \`rate\`"
    echo "lines) against the idle stretches either side in the same boot."
    echo
    echo "| run | guest's work per guest second | QEMU's CPU per work | vCPU threads | wall | samples/s | capture p50 / p99 | lost | trigger |"
    echo "|---|---|---|---|---|---|---|---|---|"
    SMP_LABELS=()
    while IFS= read -r l; do SMP_LABELS+=("$l"); done < <(awk -F'|' '$1 != "idle" && !seen[$1]++ { print $1 }' "$WORK/all")
    for l in "${SMP_LABELS[@]}"; do row "$l"; done
    echo
    breakdown "${SMP_LABELS[@]}"
    for l in "${SMP_LABELS[@]}"; do
        echo "bench: plugin smp$SMP $l: $(stat "$l" 6 | cut -d'|' -f1)% ($(fig "$l" trigger))"
    done
    exit 0
fi

IFS='|' read -r FLAT _ _ <<<"$(stat "plugin loaded, no qprof" 6)"
IFS='|' read -r CFLAT CFLAT_LO CFLAT_HI <<<"$(stat "plugin loaded with trigger=counter, no qprof" 6)"
echo "Each figure: the median over $ROUNDS rounds of $SECS s stretches (lowest-highest in brackets);"
echo "placement ${BENCH_PLUGIN_PLACEMENT:-pinned} (the header of \`bench/plugin.sh\` says what each is)."
echo "Slowdowns of the guest's work per guest second (its own \`rate\` lines: what the user's"
echo "workload feels) against the plugin loaded and nobody sampling; beside it QEMU's CPU time per"
echo "unit of work (the cost to the host), the vCPU thread's, and per wall second."
echo
echo "| run | guest's work per guest second | QEMU's CPU per work | vCPU thread | wall | samples/s | capture p50 / p99 | lost | trigger |"
echo "|---|---|---|---|---|---|---|---|---|"
row "plugin loaded, no qprof" " (against QEMU 10 alone)"
row "plugin loaded with trigger=counter, no qprof" " (against QEMU 10 alone)"
for l in "plugin 1 kHz" "plugin 10 kHz" "plugin 10 kHz, timer" "plugin 10 kHz, counter" \
    "plugin 1 kHz --exact" "A/B: plugin 10 kHz" "A/B: plugin 10 kHz, timer" \
    "A/B: plugin 10 kHz, counter"; do
    row "$l"
done
IFS='|' read -r GW GWLO GWHI <<<"$(stat "gdbstub 1 kHz" 3)"
GRATE=$(fig "gdbstub 1 kHz" rate)
GPAUSE=$(fig "gdbstub 1 kHz" pause)
echo "| gdbstub 1 kHz (no plugin; per wall second, as its pauses stop the guest's clock) | | | | **$GW%** ($GWLO-$GWHI) | $GRATE | paused p50 $GPAUSE ms | | |"
echo
echo "The rows without A/B take each configuration's stretch against the idle stretches either"
echo "side in one boot; the A/B rows a boot sampled throughout, as a user runs qprof ($AB_SECS guest"
echo "seconds after $AB_WARM s of sampling), against the same round's boot with the plugin loaded and"
echo "idle: the headline is the A/B row of auto. The counter trigger's flat cost, $CFLAT% of"
echo "the guest's work here ($CFLAT_LO-$CFLAT_HI), is what auto's rule weighs the timer's wake-ups"
echo "against where the host has no CPU to spare (plugin/qprof_ring.h, qpr_auto_trigger)."
echo
breakdown "plugin 1 kHz" "plugin 10 kHz" "plugin 10 kHz, timer" "plugin 10 kHz, counter"
# in-boot and A/B agree when either median lies within the other's spread
agree() {
    local m lo hi am alo ahi
    IFS='|' read -r m lo hi <<<"$(stat "$1" 6)"
    IFS='|' read -r am alo ahi <<<"$(stat "A/B: $1" 6)"
    awk -v m="$m" -v lo="$lo" -v hi="$hi" -v am="$am" -v alo="$alo" -v ahi="$ahi" -v l="$1" 'BEGIN {
        if (m == "-" || am == "-") { printf "%s: no figure\n", l; exit }
        ok = (am >= lo && am <= hi) || (m >= alo && m <= ahi)
        printf "%s: in-boot %s%% (%s-%s), across boots %s%% (%s-%s): %s\n", l, m, lo, hi, am, alo, ahi,
            ok ? "agree" : "DISAGREE" }'
}
# The headline is the A/B row: a boot sampled throughout, as the user runs qprof, measured over
# AB_SECS guest seconds, against a boot with the plugin loaded and idle. The in-boot stretches
# compare a few guest seconds with the idle ones beside them and spread too widely to lead.
P10=$(stat "A/B: plugin 10 kHz" 6 | cut -d'|' -f1)
P10_IN=$(stat "plugin 10 kHz" 6 | cut -d'|' -f1)
echo "bench: plugin 10 kHz slowdown ${P10}%, gdbstub 1 kHz slowdown ${GW}%"
echo "bench: plugin 10 kHz by trigger, in one boot (guest's work per guest second): auto ($(fig "plugin 10 kHz" trigger)) ${P10_IN}%, timer $(stat "plugin 10 kHz, timer" 6 | cut -d'|' -f1)%, counter $(stat "plugin 10 kHz, counter" 6 | cut -d'|' -f1)%; QEMU's CPU per work: auto $(stat "plugin 10 kHz" 4 | cut -d'|' -f1)%, timer $(stat "plugin 10 kHz, timer" 4 | cut -d'|' -f1)%, counter $(stat "plugin 10 kHz, counter" 4 | cut -d'|' -f1)%"
for l in "plugin 10 kHz" "plugin 10 kHz, timer" "plugin 10 kHz, counter"; do
    echo "bench: A/B $(agree "$l")"
done
echo "bench: --exact slowdown $(stat "plugin 1 kHz --exact" 6 | cut -d'|' -f1)% (plugin 1 kHz without it $(stat "plugin 1 kHz" 6 | cut -d'|' -f1)%; the guest's work per guest second)"
echo "bench: plugin loaded and idle ${FLAT}%, with trigger=counter ${CFLAT}% (against QEMU 10 alone); capture at 10 kHz p50 / p99 $(fig "plugin 10 kHz" capture), lost $(fig "plugin 10 kHz" lost)"
# a run that measured nothing says so and fails, rather than print dashes as its figures
if [ "$P10" = - ] || [ "$GW" = - ]; then
    echo "bench: plugin: no figures (the rows above; qprof's last words: $(tail -n 1 "$WORK/qprof.err" 2>/dev/null))" >&2
    exit 1
fi
