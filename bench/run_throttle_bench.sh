#!/usr/bin/env bash
# walship-bench scenarios, each one command (docs/bench/README.md):
#
#   bench/run_throttle_bench.sh --scenario NAME [--minutes N | --seconds N] [--tiny]
#                               [--build DIR] [--out DIR] [--rgw DIR] [--policies LIST]
#                               [--bench-args "ARGS"] [--tenants N]
#                               [--scale-tenants "LIST"] [--reps N] [--min-cap N]
#                               [--timeline]
#
#   one-tenant    one tenant writing as fast as SQLite can, file:// sink
#   many-tenants  1,000 tenants at a low rate each (--tiny: 50), s3:// on radosgw
#   throttled     the same load first unthrottled through the proxy (its PUT
#                 rate measured), then with the store capped at half that
#                 rate, once per policy: block, throttle, shed (and, but for
#                 --tiny, block once more with adaptive = off, to compare),
#                 and shed once more with 128 KiB batches in a 256 KiB ring
#                 (shed-ring: one tail outgrows it, so frames are shed);
#                 --policies "block shed" runs only those (fixed: the
#                 adaptive = off run)
#   recovery      capped at half the measured rate, the cap lifted halfway:
#                 seconds until the worst tenant's RPO is under batch_age_ms_max
#   scales        the throttled target at every scale (issue 34): for each
#                 of --scale-tenants (default "1 4 20 100"; --tiny "4"),
#                 --reps times, interleaved: the load unthrottled through
#                 the proxy (its PUT rate measured), then capped at half
#                 that rate, to the nearest whole number (at least --min-cap, default 2/s: the lowest
#                 cap the target names) with refusals
#                 answered `503 SlowDown` and `Retry-After: 1`, then the
#                 same cap with no Retry-After header; --policies picks
#                 the policy (default block). Each run's row goes to
#                 summary.md; scales.md has, per tenant count and variant,
#                 the median (min..max) over the repetitions of RPO
#                 p50/p99/max and of the cap
#   all           every scenario above, in that order (scales: --tiny "4")
#
# radosgw (tests/s3/radosgw.sh) and the throttling proxy (tests/s3/throttle.sh)
# are started in --rgw DIR (default: a fresh directory under --out) and stopped
# at the end, unless DIR/env already exists (then they are reused and left).
# Each run writes NAME.json, NAME.csv, NAME-tenants.csv (every tenant's
# watermark age per sample) and NAME.png (gnuplot) to --out
# (default build/bench-results) and a row of --out/summary.md. Exit status:
# non-zero when a run failed or a tenant did not restore equal to its source;
# figures are reported, never compared with a target. --bench-args adds
# ARGS (split on spaces) to every walship-bench run: the same scenario with
# another shard setting, e.g. "--inline-batch-bytes off". --tenants N: the
# throttled and recovery load's tenants (default 20; --tiny 4), each
# writing 20 transactions of 2 KiB a second. --timeline: every run with
# walship-bench --debug, its log in NAME.log and, from it and the tenants'
# ages, NAME-timeline.txt (bench/throttle_timeline.py: each tenant's
# writes, turns, refusals and deferrals, and what made each stretch of a
# watermark age over 2 s).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
scenario="" seconds="" tiny=0 build="$here/build" out="" rgw="" policies="" bench_args="" tenants=""
scale_tenants="" reps=1 min_cap=2 timeline=0
die() { echo "run_throttle_bench.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --scenario) scenario=${2:-}; shift 2 ;;
        --minutes) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--minutes: a whole number"; seconds=$(( $2 * 60 )); shift 2 ;;
        --seconds) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--seconds: a whole number"; seconds=$2; shift 2 ;;
        --tiny) tiny=1; shift ;;
        --build) build=${2:-}; shift 2 ;;
        --out) out=${2:-}; shift 2 ;;
        --rgw) rgw=${2:-}; shift 2 ;;
        --bench-args) bench_args=${2:-}; shift 2 ;;
        --tenants) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--tenants: a whole number >= 1"; tenants=$2; shift 2 ;;
        --policies) policies=${2:-}; shift 2
            for p in $policies; do
                case "$p" in block|throttle|shed|shed-ring|fixed) ;;
                    *) die "--policies: block, throttle, shed, shed-ring or fixed, not '$p'" ;; esac
            done
            [ -n "$policies" ] || die "--policies: at least one of block, throttle, shed, shed-ring, fixed" ;;
        --scale-tenants) scale_tenants=${2:-}; shift 2
            [[ "$scale_tenants" =~ ^[0-9\ ]*[1-9][0-9\ ]*$ ]] || die "--scale-tenants: whole numbers >= 1, not '$scale_tenants'"
            for n in $scale_tenants; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "--scale-tenants: '$n' is not a whole number >= 1"; done ;;
        --min-cap) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--min-cap: a whole number >= 1"; min_cap=$2; shift 2 ;;
        --reps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--reps: a whole number >= 1"; reps=$2; shift 2 ;;
        --timeline) timeline=1; shift ;;
        -h|--help) sed -n '2,54p' "$0"; exit 0 ;;
        *) die "unknown argument '$1'" ;;
    esac
done
case "$scenario" in
    one-tenant|many-tenants|throttled|recovery|scales|all) ;;
    "") die "--scenario one-tenant|many-tenants|throttled|recovery|scales|all is required" ;;
    *) die "--scenario: unknown scenario '$scenario'" ;;
esac
bench="$build/bench/walship-bench"
[ -x "$bench" ] || die "$bench: not built (cmake --build $build --target walship-bench)"
[ -n "$out" ] || out="$build/bench-results"
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -n "$seconds" ] || { [ "$tiny" = 1 ] && seconds=5 || seconds=60; }
[ "$seconds" -ge 2 ] || die "--seconds: at least 2"
baseline_arg=()
[ "$tiny" = 1 ] && baseline_arg=(--baseline-ms 300)

failures=0
half=1
half_near=1
half_measured=0
started_rgw=0
started_proxy=0

cleanup() {
    if [ "$started_proxy" = 1 ]; then bash "$here/tests/s3/throttle.sh" stop "$rgw" >/dev/null 2>&1 || true; fi
    if [ "$started_rgw" = 1 ]; then bash "$here/tests/s3/radosgw.sh" stop "$rgw" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

need_s3() {
    [ -n "$rgw" ] || rgw="$out/rgw"
    mkdir -p "$rgw"
    rgw=$(cd "$rgw" && pwd)
    if [ ! -f "$rgw/env" ]; then
        bash "$here/tests/s3/radosgw.sh" start "$rgw"
        started_rgw=1
    fi
    if [ ! -f "$rgw/env-throttled" ]; then
        bash "$here/tests/s3/throttle.sh" start "$rgw"
        started_proxy=1
    fi
    set -a
    # shellcheck disable=SC1091
    . "$rgw/env"
    set +a
    direct="$WS_S3_ENDPOINT"
    proxied=$(sed -n 's/^WS_S3_ENDPOINT=//p' "$rgw/env-throttled")
}
s3_url() { echo "s3://walship-bench/$1-$(date +%s%N)?endpoint=$2"; }

plot() {
    local name=$1
    command -v gnuplot >/dev/null || { echo "gnuplot not installed: $name.png skipped"; return 0; }
    gnuplot 2>"$out/$name.gnuplot.log" <<EOF || { cat "$out/$name.gnuplot.log"; echo "gnuplot failed for $name.png"; }
set terminal pngcairo size 900,720 noenhanced
set output '$out/$name.png'
set datafile separator ','
set multiplot layout 3,1 title '$name'
set key top left
set grid
set xlabel 'seconds'
set ylabel 'RPO (ms)'
plot '$out/$name.csv' every ::1 using 1:3 with lines title 'watermark age p50', '' every ::1 using 1:4 with lines title 'p99', '' every ::1 using 1:5 with lines title 'max', '' every ::1 using 1:13 with lines title 'unshipped age max'
set ylabel 'spill ring (MiB)'
plot '$out/$name.csv' every ::1 using 1:(\$6/1048576) with lines title 'ring used'
set ylabel 'accepted PUT/s'
plot '$out/$name.csv' every ::1 using 1:8 with lines title 'PUT/s'
unset multiplot
EOF
    rm -f "$out/$name.gnuplot.log"
}

summary_header() {
    [ -f "$out/summary.md" ] && return 0
    cat > "$out/summary.md" <<'EOF'
| run | tenants | txn/s each | policy | write cap/s | produced MB/s | shipped MB/s | RPO (watermark age) p50/p99/max ms | unshipped age p50/p99/max ms | PUTs/GB (full: x) | engine CPU s/GB | peak RSS MiB | shed frames | throttle retries | commit p50/p99 ms | recovery s | baselines: read MB/s, write+fsync MB/s, raw PUT/s | restore | adaptive: window cuts / coalesced tails / bounded tails / KiB per PUT |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
EOF
}

summary_row() {
    python3 - "$out/$1.json" "$2" >> "$out/summary.md" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); cap = sys.argv[2]
r, u, b = j["rpo_ms"], j["unshipped_age_ms"], j["baseline"]
rec = "-" if j["recovery_s"] < 0 else "%.1f" % j["recovery_s"]
ad = "%s: %d / %d / %d / %.0f" % ("on" if j["adaptive"] else "off", j["window_decreases"], j["tails_coalesced"],
    j["tails_ended_early"], j["bytes_per_put"] / 1024)
print("| %s | %d | %s | %s | %s | %.2f | %.2f | %d/%d/%d | %d/%d/%d | %.0f (%.0f) | %.2f | %.1f | %d | %d | %.3f/%.3f | %s | %.0f, %.0f, %.0f | %d/%d | %s |" % (
    j["label"], j["tenants"], "max" if j["rate_txn_s"] == 0 else "%g" % j["rate_txn_s"], j["policy"], cap,
    j["wal_produced_mb_s"], j["wal_shipped_mb_s"], r["p50"], r["p99"], r["max"], u["p50"], u["p99"], u["max"], j["puts_per_gb"],
    j["puts_per_gb_full_batches"], j["cpu_s_per_gb"], j["peak_rss_bytes"] / 1048576, j["frames_shed"],
    j["throttle_retries"], j["commit_latency_ms"]["p50"], j["commit_latency_ms"]["p99"], rec,
    b["cached_read_mb_s"], b["write_fsync_rename_mb_s"], b["raw_put_per_s"], j["restore_equal"], j["tenants"], ad))
EOF
}

# run NAME CAP ARGS...: one walship-bench run, its plot and its summary row.
run() {
    local name=$1 cap=$2; shift 2
    echo "== $name: walship-bench $*"
    rm -rf "${out:?}/work-$name"
    local debug=() log=/dev/stderr
    [ "$timeline" = 0 ] || { debug=(--debug); log="$out/$name.log"; }
    if ! nice -n 5 "$bench" --label "$name" --dir "$out/work-$name" --json "$out/$name.json" \
            --csv "$out/$name.csv" --tenant-csv "$out/$name-tenants.csv" --seconds "$seconds" \
            "${baseline_arg[@]}" "${debug[@]}" "$@" $bench_args 2>>"$log"; then
        echo "run_throttle_bench.sh: $name FAILED" >&2
        [ "$timeline" = 0 ] || tail -n 20 "$log" >&2
        failures=$((failures + 1))
    fi
    if [ "$timeline" = 1 ] && [ -f "$out/$name-tenants.csv" ]; then
        python3 "$here/bench/throttle_timeline.py" "$log" "$out/$name-tenants.csv" > "$out/$name-timeline.txt" ||
            echo "run_throttle_bench.sh: $name: the timeline failed" >&2
    fi
    [ -f "$out/$name.json" ] || return 0
    plot "$name"
    summary_header
    summary_row "$name" "$cap"
    rm -rf "${out:?}/work-$name"
}

json_get() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }

# The throttled load: enough tenants and PUTs that the cap binds.
thr_tenants=20 thr_rate=20 thr_bytes=2048
[ "$tiny" = 1 ] && { thr_tenants=4; thr_rate=20; }
[ -z "$tenants" ] || thr_tenants=$tenants

# Measure the load's PUT rate unthrottled (through the proxy, uncapped);
# sets half to half of it, at least 1.
measure_half() {
    local name=$1
    bash "$here/tests/s3/throttle.sh" rate "$rgw" 0 >/dev/null
    run "$name" none --sink "$(s3_url "$name" "$proxied")" --tenants "$thr_tenants" --rate "$thr_rate" \
        --txn-bytes "$thr_bytes" --policy block
    half=1
    half_measured=1
    [ -f "$out/$name.json" ] || return 0
    half=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(max(1, int(j['puts'] / (j['load_s'] + j['drain_s']) / 2)))" "$out/$name.json")
    # scales: the nearest whole cap (3.98 is 4, not 3: a quarter lower)
    half_near=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(max(1, round(j['puts'] / (j['load_s'] + j['drain_s']) / 2)))" "$out/$name.json")
}

sc_one_tenant() {
    local sink="$out/sink-one-tenant"
    rm -rf "$sink"
    # --tiny: smaller transactions, so the smoke does not write (and drain,
    # and restore) gigabytes.
    local txn=65536
    [ "$tiny" = 1 ] && txn=8192
    run one-tenant none --sink "file://$sink" --tenants 1 --rate 0 --txn-bytes "$txn"
    rm -rf "$sink"
}

sc_many_tenants() {
    need_s3
    local n=1000 rate=0.2
    [ "$tiny" = 1 ] && n=50
    run many-tenants none --sink "$(s3_url many "$direct")" --tenants "$n" --rate "$rate" --txn-bytes 1024 \
        --shards 2 --sample-ms 1000
}

# want POLICY: --policies names it (or was not given).
want() { [ -z "$policies" ] || [[ " $policies " == *" $1 "* ]]; }

sc_throttled() {
    need_s3
    local p
    measure_half throttled-unthrottled
    echo "== store capped at $half write requests/s (half the unthrottled rate)"
    for p in block throttle shed; do
        want "$p" || continue
        bash "$here/tests/s3/throttle.sh" rate "$rgw" "$half"
        run "throttled-$p" "$half" --sink "$(s3_url "thr-$p" "$proxied")" --tenants "$thr_tenants" \
            --rate "$thr_rate" --txn-bytes "$thr_bytes" --policy "$p"
    done
    # shed with a ring that one tail outgrows (two 128 KiB batches): under
    # the cap the backlog waits in the WAL, not the ring, so at the default
    # sizes shed never has anything to shed.
    if want shed-ring; then
        bash "$here/tests/s3/throttle.sh" rate "$rgw" "$half"
        run throttled-shed-ring "$half" --sink "$(s3_url thr-shed-ring "$proxied")" --tenants "$thr_tenants" \
            --rate "$thr_rate" --txn-bytes "$thr_bytes" --policy shed --batch-bytes 131072 --ring-bytes 262144
    fi
    # The same cap and load with the shard not adapting (adaptive = off),
    # for comparison (not in the CI smoke: it only has to run).
    if { [ -z "$policies" ] && [ "$tiny" = 0 ]; } || { [ -n "$policies" ] && want fixed; }; then
        bash "$here/tests/s3/throttle.sh" rate "$rgw" "$half"
        run throttled-block-fixed "$half" --sink "$(s3_url thr-fixed "$proxied")" --tenants "$thr_tenants" \
            --rate "$thr_rate" --txn-bytes "$thr_bytes" --policy block --no-adaptive
    fi
    bash "$here/tests/s3/throttle.sh" rate "$rgw" 0
}

sc_recovery() {
    need_s3
    local lift
    # `all` measured it in `throttled` already, with the same load.
    [ "$half_measured" = 1 ] || measure_half recovery-unthrottled
    lift=$(( seconds / 2 ))
    bash "$here/tests/s3/throttle.sh" rate "$rgw" "$half"
    run recovery "$half, lifted at ${lift}s" --sink "$(s3_url recovery "$proxied")" --tenants "$thr_tenants" \
        --rate "$thr_rate" --txn-bytes "$thr_bytes" --policy block \
        --at "$lift:bash $here/tests/s3/throttle.sh rate $rgw 0" --recovery-from "$lift"
    bash "$here/tests/s3/throttle.sh" rate "$rgw" 0
}

# The throttled target at every scale: per tenant count, per repetition,
# unthrottled, then half its PUT rate (at least 2/s) with and without
# Retry-After. `throttled` names the policy through --policies (default
# block; one policy only).
sc_scales() {
    need_s3
    local list=$scale_tenants pol=block n r cap
    [ -n "$list" ] || { [ "$tiny" = 1 ] && list="4" || list="1 4 20 100"; }
    if [ -n "$policies" ]; then
        set -- $policies
        if [ $# = 1 ] && [[ "$1" =~ ^(block|throttle|shed)$ ]]; then
            pol=$1
        elif [ "$scenario" = scales ]; then
            die "scales: --policies names one of block, throttle, shed"
        fi
    fi
    for r in $(seq 1 "$reps"); do
        for n in $list; do
            thr_tenants=$n
            bash "$here/tests/s3/throttle.sh" retry-after "$rgw" on >/dev/null
            measure_half "scales-$n-r$r-unthrottled"
            cap=$(( half_near < min_cap ? min_cap : half_near ))
            echo "== $n tenant(s), rep $r: store capped at $cap write requests/s (half the unthrottled rate: $half_near)"
            bash "$here/tests/s3/throttle.sh" rate "$rgw" "$cap"
            run "scales-$n-r$r-retry-after" "$cap" --sink "$(s3_url "sc-$n-ra" "$proxied")" --tenants "$n" \
                --rate "$thr_rate" --txn-bytes "$thr_bytes" --policy "$pol"
            bash "$here/tests/s3/throttle.sh" retry-after "$rgw" off
            run "scales-$n-r$r-no-retry-after" "$cap" --sink "$(s3_url "sc-$n-nora" "$proxied")" --tenants "$n" \
                --rate "$thr_rate" --txn-bytes "$thr_bytes" --policy "$pol"
            bash "$here/tests/s3/throttle.sh" retry-after "$rgw" on
            bash "$here/tests/s3/throttle.sh" rate "$rgw" 0
        done
    done
    python3 - "$out" "$reps" "$min_cap" $list > "$out/scales.md" <<'EOF2'
import json, os, statistics, sys
out, reps, min_cap, ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(x) for x in sys.argv[4:]]
def spread(xs, f):
    return "%s (%s..%s)" % (f(statistics.median(xs)), f(min(xs)), f(max(xs))) if xs else "-"
s = lambda v: "%.2f" % (v / 1000.0)
# p99 of every tenant's watermark age sampled from 5 s into the load to its
# end (NAME-tenants.csv, nearest rank): the steady state, the first ship of
# every tenant left out.
def p99_after(name, load_s, skip=5.0):
    ages = []
    with open(os.path.join(out, name + "-tenants.csv")) as f:
        next(f)
        for line in f:
            v = line.strip().split(",")
            if skip <= float(v[0]) <= load_s:
                ages += [int(x) for x in v[1:]]
    ages.sort()
    return ages[min(len(ages) - 1, int(0.99 * len(ages)))] if ages else 0
print("| tenants | store | half the unthrottled PUT/s | cap/s | reps | RPO p50 s | RPO p99 s | RPO max s | p99 <= 2 s | RPO p99 from 5 s on | throttle retries | restore |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in ns:
    for v, what in (("unthrottled", "uncapped"), ("retry-after", "half, Retry-After: 1"), ("no-retry-after", "half, no Retry-After")):
        js, steady = [], []
        for r in range(1, reps + 1):
            p = os.path.join(out, "scales-%d-r%d-%s.json" % (n, r, v))
            if os.path.exists(p):
                js.append(json.load(open(p)))
                steady.append(p99_after("scales-%d-r%d-%s" % (n, r, v), js[-1]["load_s"]))
        caps, halves = [], []
        for r in range(1, reps + 1):
            p = os.path.join(out, "scales-%d-r%d-unthrottled.json" % (n, r))
            if v != "unthrottled" and os.path.exists(p):
                j = json.load(open(p))
                halves.append(j["puts"] / (j["load_s"] + j["drain_s"]) / 2)
                caps.append(max(min_cap, max(1, round(halves[-1]))))
        p99 = [j["rpo_ms"]["p99"] for j in js]
        met = "-" if not p99 else "%d of %d" % (sum(1 for x in p99 if x <= 2000), len(p99))
        eq = "%d/%d" % (sum(j["restore_equal"] for j in js), sum(j["tenants"] for j in js))
        print("| %d | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (n, what,
            spread(halves, lambda c: "%.2f" % c) if halves else "-", spread(caps, lambda c: "%d" % c) if caps else "-", len(js),
            spread([j["rpo_ms"]["p50"] for j in js], s), spread(p99, s), spread([j["rpo_ms"]["max"] for j in js], s),
            met, spread(steady, s), spread([j["throttle_retries"] for j in js], lambda c: "%d" % c), eq))
EOF2
    bash "$here/tests/s3/throttle.sh" retry-after "$rgw" on >/dev/null
}

rm -f "$out/summary.md" "$out/scales.md"
echo "walship-bench scenarios: $scenario, $seconds s per run$( [ "$tiny" = 1 ] && echo ', tiny'), results in $out"
echo "machine: $(nproc) CPU(s), load $(cut -d' ' -f1-3 /proc/loadavg); runs under nice -n 5"
case "$scenario" in
    one-tenant) sc_one_tenant ;;
    many-tenants) sc_many_tenants ;;
    throttled) sc_throttled ;;
    recovery) sc_recovery ;;
    scales) sc_scales ;;
    all) sc_one_tenant; sc_many_tenants; sc_throttled; sc_recovery; sc_scales ;;
esac
echo
cat "$out/summary.md"
if [ -f "$out/scales.md" ]; then echo; cat "$out/scales.md"; fi
[ "$failures" = 0 ] || { echo "run_throttle_bench.sh: $failures run(s) failed" >&2; exit 1; }
