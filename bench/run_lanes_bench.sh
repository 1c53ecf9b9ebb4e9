#!/usr/bin/env bash
# Tails in flight against one tail at a time, interleaved in one run
# (docs/bench/README.md "Tails in flight"): each repetition runs the
# baseline (tails_in_flight B, default 1) and then tails_in_flight K, and
# the medians (min..max) of each are printed side by side with their ratio.
#
#   bench/run_lanes_bench.sh --what events|rpo [--reps N] [--k K] [--base B] [--s3]
#                            [--tenants N] [--seconds S] [--build DIR] [--tiny]
#
# events: build/bench/bench_events --latency-only (phase L), one repetition a
#         run, app followed and written at 1,000 tx/s, --tenants more tenants
#         on its shard (default 20: bg1..bg19 at 50 tx/s between them), sink
#         on the disk (build/testtmp): commit -> Progressed p50 and p99.
# rpo:    walship-bench, --tenants (default 100) on one shard at 100 ms
#         settings (batch_age_ms_max and key_write_interval_ms 100), 10 tx/s
#         of 1 KiB each, --seconds (default 20) of load, every tenant
#         restored and compared: RPO (watermark age) p50 and p99. file://
#         on the disk, or with --s3 radosgw started here (tests/s3/radosgw.sh;
#         run it under `flock /tmp/ws-s3.lock`).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
what="" reps=7 k=4 base=1 s3=0 tenants="" seconds=20 build="$here/build" tiny=0
die() { echo "run_lanes_bench: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --what) what=${2:-}; shift 2 ;;
        --reps) reps=${2:-}; shift 2 ;;
        --k) k=${2:-}; shift 2 ;;
        --base) base=${2:-}; shift 2 ;;
        --s3) s3=1; shift ;;
        --tenants) tenants=${2:-}; shift 2 ;;
        --seconds) seconds=${2:-}; shift 2 ;;
        --build) build=${2:-}; shift 2 ;;
        --tiny) tiny=1; shift ;;
        *) die "unknown argument '$1'" ;;
    esac
done
case "$what" in events|rpo) ;; *) die "--what events|rpo is required" ;; esac
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || die "--reps: a count from 1, not '$reps'"
[[ "$k" =~ ^[1-9][0-9]*$ ]] && [ "$k" -le 64 ] || die "--k: tails in flight 1..64, not '$k'"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "--seconds: whole seconds from 1, not '$seconds'"
[ -z "$tenants" ] || [[ "$tenants" =~ ^[1-9][0-9]*$ ]] || die "--tenants: a count from 1, not '$tenants'"
[ "$s3" = 0 ] || [ "$what" = rpo ] || die "--s3 goes with --what rpo"
if [ "$tiny" = 1 ]; then reps=1 seconds=2; [ -n "$tenants" ] || tenants=5; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ws-lanes.XXXXXX")
rgw=""
cleanup() {
    [ -z "$rgw" ] || bash "$here/tests/s3/radosgw.sh" stop "$rgw" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

sink_url() {
    if [ "$s3" = 1 ]; then echo "s3://walship-lanes/$1-$(date +%s%N)?endpoint=$WS_S3_ENDPOINT"
    else echo "file://$work/sink-$1"; fi
}

# One run with tails_in_flight $1; appends "p50 p99" to $work/fig-$1.
run_events() {
    local out="$work/events.out"
    mkdir -p "$build/testtmp"
    "$build/bench/bench_events" --latency-only --reps 1 --secs "$seconds" --tenants "${tenants:-20}" \
        --tails-in-flight "$1" --sink-dir "$build/testtmp" --dir "$build/testtmp" > "$out" 2>"$work/events.err" ||
        { cat "$work/events.err" "$out" >&2; die "bench_events failed"; }
    awk '/commit->Progressed p50 /{a=$4} /commit->Progressed p99 /{b=$4} END{print a, b}' "$out" >> "$work/fig-$1"
}

run_rpo() {
    local n=$1 dir="$work/dbs-$1"
    rm -rf "$dir"
    "$build/bench/walship-bench" --sink "$(sink_url "$n")" --dir "$dir" --tenants "${tenants:-100}" --shards 1 \
        --rate 10 --txn-bytes 1024 --seconds "$seconds" --batch-age-ms 100 --key-write-interval-ms 100 \
        --tails-in-flight "$n" --no-baselines --json "$work/run.json" > "$work/rpo.out" 2>"$work/rpo.err" ||
        { tail -20 "$work/rpo.err" "$work/rpo.out" >&2; die "walship-bench failed (tails_in_flight $n)"; }
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); r=j["rpo_ms"]
assert j["restore_equal"] == j["tenants"], "restore differs"
print(r["p50"], r["p99"])' "$work/run.json" >> "$work/fig-$n"
}

if [ "$s3" = 1 ]; then
    rgw="$work/rgw"
    mkdir -p "$rgw"
    bash "$here/tests/s3/radosgw.sh" start "$rgw" >/dev/null
    set -a
    # shellcheck disable=SC1091
    . "$rgw/env"
    set +a
fi
[ "$base" != "$k" ] || die "--base and --k must differ"
echo "run_lanes_bench: $what, $reps repetitions, tails_in_flight $base then $k each; load: $(uptime | sed 's/.*load/load/')"
for ((i = 1; i <= reps; i++)); do
    for n in "$base" "$k"; do
        "run_$what" "$n"
    done
done
echo "load after: $(uptime | sed 's/.*load/load/')"
python3 - "$work/fig-$base" "$work/fig-$k" "$k" "$what" "$base" <<'EOF'
import statistics, sys
a = [list(map(float, l.split())) for l in open(sys.argv[1])]
b = [list(map(float, l.split())) for l in open(sys.argv[2])]
k, what, base = sys.argv[3], sys.argv[4], sys.argv[5]
name = ["commit->Progressed p50 ms", "commit->Progressed p99 ms"] if what == "events" else ["RPO p50 ms", "RPO p99 ms"]
def fig(v): return "%.1f (%.1f..%.1f)" % (statistics.median(v), min(v), max(v))
print("| figure | tails_in_flight %s | tails_in_flight %s | ratio of medians |" % (base, k))
print("|---|---|---|---|")
for i, n in enumerate(name):
    x = [r[i] for r in a]; y = [r[i] for r in b]
    print("| %s | %s | %s | %.2f |" % (n, fig(x), fig(y), statistics.median(y) / statistics.median(x)))
print("(%d repetitions each)" % len(a))
EOF
