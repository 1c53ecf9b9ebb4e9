#!/usr/bin/env bash
# walship beside Litestream v0.3.13, on the same databases and the same
# store, in one run (issue 34's targets; docs/bench/README.md "Side by side
# with Litestream"):
#
#   bench/run_peer_bench.sh [--tiny] [--reps N] [--s3] [--out DIR] [--build DIR]
#                           [--litestream BIN] [--seconds S] [--throttle-tenants "1 4 20 100"]
#                           [--alone-reps N] [--scenarios "live-1 live-100 restore start"]
#                           [--breakdown] [--baseline DIR] [--walship-slots]
#
# The store is a radosgw (tests/s3/radosgw.sh) behind the haproxy of
# tests/s3/throttle.sh: each tool writes through the proxy, and the
# requests (all methods) and request bytes it sent are the proxy
# frontend's req_tot (less ereq: a connection closed before it sent a
# request counts in both, and Litestream's client closes idle ones) and
# bin counters (its admin socket) read before and after its run: one way
# of counting for both tools. Everything the bench
# itself reads (its polls, restores) goes to radosgw directly.
#
# Each repetition, each scenario runs both tools one after the other (the
# order swapped every repetition), each on fresh copies of the same
# starting database and its own bucket, with the same writer
# (bench/seal_writer.py write-many: the same commits, logging each commit's
# time and the WAL's size after it):
#   live-1     1 tenant, the peer workload (small commits), 100 ms settings:
#              walship replicate --shards 1 --interval-ms 100; Litestream
#              monitor-interval 100ms, sync-interval 100ms
#   live-100   100 tenants (--tiny: 5) on one walship shard, the same
#   restore    (repetition 1 first writes the history: one tenant, the text
#              workload, ~200 MB of WAL (--tiny: ~2 MB) as fast as the writer
#              goes, shipped live by each tool, with the live figures as
#              live-hist) then each repetition restores it with each tool:
#              wall time
#   start      walship alone: bench/bench_engine --idle 10000 (--tiny: 200),
#              that many idle tenants registered over their stored
#              streams (a restart) and tailed to their first Empty
#   throttled-N  walship alone: bench/run_throttle_bench.sh --scenario
#              throttled --policies block --tenants N: the load unthrottled
#              through the proxy, then the store capped at half the write
#              requests it demanded: RPO p99 (the shard's watermark age)
# Live figures: requests per GB of WAL (WAL: the writer's WAL bytes), bytes
# uploaded / WAL bytes, CPU seconds (user+sys of the tool's process,
# /usr/bin/time) per MB of WAL, and RPO: a poller (bench/peer_report.py poll)
# asks the store every 100 ms how far each tenant's replica reaches in the
# WAL (walship: its watermark's last frame; Litestream: its WAL segments'
# offsets plus their decompressed lengths) and a commit's RPO is the time
# from the commit to the first poll that saw its WAL size shipped: an upper
# bound, late by up to one poll round (100 ms, longer when a round over
# many tenants takes longer). Neither tool checkpoints the WAL in these runs
# (walship wal_checkpoint_bytes = off; Litestream's checkpoints set out of
# reach) so that a WAL position names one commit; everything else is each
# tool's default, unless WS_PEER_WALSHIP_CONF holds more [engine] lines for
# walship (e.g. 'carry_in_watermark = always'; '\n' between lines).
# Every restore (each tenant of live-1, the first WS_PEER_RESTORE_MAX
# (default 10) tenants of live-100, every restore run) is checked equal to
# its source (tests/data/fixture_digest.py; Litestream's own tables
# dropped). Prints medians (min..max) and the ratios walship/Litestream of
# the same repetition; writes peer.csv (every run) and peer.json (medians)
# to --out.
#
#   --tiny        one repetition, small sizes (the smoke: it runs and prints
#                 figures; nothing is compared with a target)
#   --reps N      repetitions (default 7)
#   --s3          use the radosgw of build/s3/env (tests/s3/radosgw.sh start
#                 build/s3, under /tmp/ws-s3.lock); default: start one (and
#                 the proxy) under --out and stop it at the end
#   --out DIR     results and scratch (default BUILD/peer-bench)
#   --build DIR   an existing build; default build-bench (Release, no faults)
#   --litestream BIN  a litestream binary (none: walship alone); default: npm install of
#                 @flydotio/litestream-linux-x64 under --out; if neither
#                 works the bench says so and runs walship alone
#   --seconds S   seconds of writing per live run (default 15; --tiny 3)
#   --throttle-tenants LIST  the throttled scenarios (default "1 4 20 100";
#                 --tiny "4"; "" skips them)
#   --alone-reps N  the walship-alone scenarios (start, throttled-N) run in
#                 the first N repetitions only (default: every one)
#   --scenarios LIST  which of live-1, live-100, restore (with the history
#                 it restores) and start run (default: all four; the
#                 throttled ones follow --throttle-tenants; start and
#                 throttled, --alone-reps)
#   --breakdown   the proxy logs every request (tests/s3/throttle.sh --log,
#                 bench/req_breakdown.py), and each live run prints what
#                 the tool sent by method, kind of key and phase (start-up:
#                 before the writer began; tails: from then on), header
#                 and body bytes apart; kept as OUT/breakdown-REP-SCENARIO-TOOL.{txt,csv}.
#                 Not with --s3 over a proxy already running
#   --baseline DIR  a second walship build (e.g. the main branch's), run as
#                 a third tool, walship-base, in every live run (the order
#                 of the tools rotated every repetition): the figures of
#                 a change and of its baseline from the same repetitions
#   --walship-slots  walship also runs with manifest slots (`slots = on` in
#                 [engine], docs/SLOTS.md stage 1) as a further tool,
#                 walship-slots (the same binary), in every live run (the
#                 order of the tools rotated every repetition); the poller
#                 finds its head by probing slots forward from the
#                 watermark's hint (bench/peer_report.py). The walship rows
#                 stay the default (slots off)
# Exit status non-zero only when a run failed or a restore differed from
# its source; figures are reported, never compared with a target.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="" OUT="" TINY=0 REPS=7 S3=0 LS="" SECONDS_LIVE="" THR_TENANTS="1 4 20 100" THR_SET=0 ALONE_REPS=0
SCENARIOS="live-1 live-100 restore start" BREAKDOWN=0 BASELINE="" SLOTS=0
die() { echo "run_peer_bench.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--tiny) TINY=1; REPS=1; shift ;;
	--reps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--reps: a whole number >= 1"; REPS=$2; shift 2 ;;
	--build) BUILD=${2:-}; [ -n "$BUILD" ] || die "--build needs a directory"; shift 2 ;;
	--out) OUT=${2:-}; [ -n "$OUT" ] || die "--out needs a directory"; shift 2 ;;
	--s3) S3=1; shift ;;
	--litestream) LS=${2:-}; [ "$LS" = none ] || [ -x "$LS" ] || die "--litestream: '$LS' is not an executable (or none)"; shift 2 ;;
	--seconds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--seconds: a whole number >= 1"; SECONDS_LIVE=$2; shift 2 ;;
	--throttle-tenants) [ $# -ge 2 ] || die "--throttle-tenants needs a list"
		[[ "$2" =~ ^[0-9\ ]*$ ]] || die "--throttle-tenants: whole numbers, not '$2'"
		THR_TENANTS=$2; THR_SET=1; shift 2 ;;
	--alone-reps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--alone-reps: a whole number >= 1"; ALONE_REPS=$2; shift 2 ;;
	--scenarios) [ $# -ge 2 ] || die "--scenarios needs a list"
		for sc in $2; do case "$sc" in live-1|live-100|restore|start) ;; *) die "--scenarios: live-1, live-100, restore or start, not '$sc'" ;; esac; done
		SCENARIOS=$2; shift 2 ;;
	--breakdown) BREAKDOWN=1; shift ;;
	--baseline) BASELINE=${2:-}; [ -x "$BASELINE/tools/walship" ] || die "--baseline: no $BASELINE/tools/walship"; shift 2 ;;
	--walship-slots) SLOTS=1; shift ;;
	-h|--help) sed -n '2,97p' "$0"; exit 0 ;;
	*) die "unknown argument '$1'" ;;
	esac
done
# shellcheck source=bench/lib_peer.sh
. "$ROOT/bench/lib_peer.sh"
bench_setup peer-bench ON walship walship-bench bench_engine
WRITER=$ROOT/bench/seal_writer.py
DIGEST=$ROOT/tests/data/fixture_digest.py
REPORT=$ROOT/bench/peer_report.py
find_litestream
[ "$LS" != none ] || LS=""
LSVER=""
[ -n "$LS" ] && LSVER=$("$LS" version 2>/dev/null || echo unknown)
TOOLS=(walship)
[ -z "$BASELINE" ] || TOOLS+=(walship-base)
[ "$SLOTS" = 0 ] || TOOLS+=(walship-slots)
[ -n "$LS" ] && TOOLS+=(litestream)
# bin TOOL: the walship binary TOOL runs.
bin() { if [ "$1" = walship-base ]; then echo "$BASELINE/tools/walship"; else echo "$W"; fi; }
# kind TOOL: walship or litestream (what the poller and the restores speak).
kind() { if [ "$1" = litestream ]; then echo litestream; else echo walship; fi; }

# Sizes: commits per tenant and commits a second per tenant.
[ -n "$SECONDS_LIVE" ] || { [ "$TINY" = 1 ] && SECONDS_LIVE=3 || SECONDS_LIVE=15; }
MANY=100 RATE1=20 RATEMANY=2 HIST_COMMITS=4000 IDLE=10000
[ "$TINY" = 1 ] && { MANY=5; HIST_COMMITS=40; IDLE=200; [ "$THR_SET" = 1 ] || THR_TENANTS=4; }
# A replica that has not caught up this long after the writer ended fails its run.
export WS_PEER_DRAIN_S=${WS_PEER_DRAIN_S:-$([ "$TINY" = 1 ] && echo 30 || echo 120)}
RESTORE_MAX=${WS_PEER_RESTORE_MAX:-10}

# ---- the store: radosgw and the counting (throttling) proxy -------------------------------
RGW="" started_rgw=0 started_proxy=0 listener=""
cleanup() {
	if [ -n "$listener" ]; then kill -TERM "$listener" 2>/dev/null || true; fi
	if [ "$started_proxy" = 1 ]; then bash "$ROOT/tests/s3/throttle.sh" stop "$RGW" >/dev/null 2>&1 || true; fi
	if [ "$started_rgw" = 1 ]; then bash "$ROOT/tests/s3/radosgw.sh" stop "$RGW" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
if [ "$S3" = 1 ]; then
	RGW=$ROOT/build/s3
	[ -f "$RGW/env" ] || die "--s3: no build/s3/env (tests/s3/radosgw.sh start build/s3)"
else
	RGW=$OUT/rgw
	rm -rf "$RGW"
	mkdir -p "$RGW"
	started_rgw=1
	WS_RGW_MEM_BYTES=${WS_RGW_MEM_BYTES:-$((8 << 30))} bash "$ROOT/tests/s3/radosgw.sh" start "$RGW" >"$OUT/rgw.log" 2>&1 ||
		{ cat "$OUT/rgw.log" >&2; die "radosgw did not start"; }
fi
PROXY_LOG=$OUT/proxy-requests.log log_opt=()
if [ "$BREAKDOWN" = 1 ]; then
	[ ! -f "$RGW/env-throttled" ] || die "--breakdown: a proxy is already running on $RGW (it logs nothing); run without --s3"
	rm -f "$PROXY_LOG"
	coproc LISTEN { exec python3 "$ROOT/bench/req_breakdown.py" listen "$PROXY_LOG"; }
	listener=$LISTEN_PID
	read -r log_port <&"${LISTEN[0]}" || die "--breakdown: the log listener did not start"
	log_opt=(--log "127.0.0.1:$log_port")
fi
if [ ! -f "$RGW/env-throttled" ]; then
	bash "$ROOT/tests/s3/throttle.sh" start "$RGW" "${log_opt[@]}" >>"$OUT/rgw.log" 2>&1 || { cat "$OUT/rgw.log" >&2; die "haproxy did not start"; }
	started_proxy=1
fi
set -a
# shellcheck disable=SC1091
. "$RGW/env"
set +a
DIRECT=$WS_S3_ENDPOINT
PROXIED=$(sed -n 's/^WS_S3_ENDPOINT=//p' "$RGW/env-throttled")
ADMIN=$(sed -n 's/^WS_THROTTLE_ADMIN=//p' "$RGW/env-throttled")
bash "$ROOT/tests/s3/throttle.sh" rate "$RGW" 0 >/dev/null

declare -A BASE
for wl in peer text; do
	BASE[$wl]=$WORK/base-$wl.db
	python3 "$WRITER" prepare "$wl" "${BASE[$wl]}"
done

# ---- one live run ---------------------------------------------------------------------------
failures=0
CSV=$OUT/peer.csv
echo "rep,scenario,tool,tenants,wal_bytes,requests,up_bytes,rpo_p50,rpo_p99,cpu_s,restore_s,seconds,ok,poll_ms" >"$CSV"
row() { echo "$*" | tr ' ' ',' >>"$CSV"; }
fail() {
	echo "run_peer_bench.sh: $*" >&2
	failures=$((failures + 1))
}

# source_digest DB: the content of DB (a copy, Litestream's tables dropped).
source_digest() {
	local c=$1.copy
	cp "$1" "$c"
	[ ! -f "$1-wal" ] || cp "$1-wal" "$c-wal"
	drop_litestream_tables "$c"
	python3 "$DIGEST" "$c"
	rm -f "$c" "$c-wal" "$c-shm"
}

# restore_one TOOL DIR TENANT OUT: a restore from the bucket of DIR, direct to radosgw.
restore_one() {
	local tool=$1 d=$2 t=$3 o=$4
	rm -f "$o"
	if [ "$tool" != litestream ]; then
		"$(bin "$tool")" restore --sink "$(cat "$d/url-direct")" --tenant "$t" -o "$o"
	else
		"$LS" restore -config "$d/ls-direct.yml" -o "$o" "$d/$t.db"
	fi >"$d/restore-$t.log" 2>&1 || { cat "$d/restore-$t.log" >&2; return 1; }
	[ "$tool" != litestream ] || drop_litestream_tables "$o"
}

# check_restore TOOL DIR TENANT: restores TENANT and compares it with its source.
check_restore() {
	[ "$(source_digest "$2/$3.db")" = "$(restore_one "$1" "$2" "$3" "$2/r-$3.db" && python3 "$DIGEST" "$2/r-$3.db")" ]
}

# live REP SCENARIO TOOL WORKLOAD TENANTS COMMITS RATE: one live run, one row.
live() {
	local rep=$1 sc=$2 tool=$3 wl=$4 n=$5 commits=$6 rate=$7 d b i t names=() pairs=() tp pp s0 s1 ok=1 t0 t1 t2
	d=$WORK/$rep-$sc-$tool
	mkdir -p "$d"
	b=$(make_bucket "peer-$sc-$tool" "$DIRECT") || { fail "$sc $tool: no bucket"; return 0; }
	echo "s3://$b?endpoint=$PROXIED" >"$d/url"
	echo "s3://$b?endpoint=$DIRECT" >"$d/url-direct"
	for i in $(seq 0 $((n - 1))); do
		t=$(printf 't%03d' "$i")
		names+=("$t")
		cp "${BASE[$wl]}" "$d/$t.db"
		pairs+=("$t=$d/$t.db")
	done
	s0=$(python3 "$REPORT" haproxy-stat "$ADMIN")
	t0=$(now)
	if [ "$tool" != litestream ]; then
		printf '[engine]\nwal_checkpoint_bytes = off\n%b%b' "$([ "$tool" != walship-slots ] || printf '%s' 'slots = on\n')" \
			"${WS_PEER_WALSHIP_CONF:+$WS_PEER_WALSHIP_CONF\n}" >"$d/walship.conf"
		/usr/bin/time -f '%U %S' -o "$d/time" "$(bin "$tool")" replicate --quiet --config "$d/walship.conf" --shards 1 \
			--interval-ms 100 --sink "$(cat "$d/url")" "${pairs[@]}" >"$d/ship.log" 2>&1 &
	else
		local settings=("monitor-interval: 100ms" "checkpoint-interval: 24h" "min-checkpoint-page-count: 1000000000"
			"max-checkpoint-page-count: 1000000000")
		{ echo "dbs:"; for t in "${names[@]}"; do ls_db "$d/$t.db" "$(cat "$d/url")" "$t" 100ms "${settings[@]}"; done; } \
			>"$d/ls.yml"
		{ echo "dbs:"; for t in "${names[@]}"; do ls_db "$d/$t.db" "$(cat "$d/url-direct")" "$t" 100ms "${settings[@]}"; done; } \
			>"$d/ls-direct.yml"
		/usr/bin/time -f '%U %S' -o "$d/time" "$LS" replicate -config "$d/ls.yml" >"$d/ship.log" 2>&1 &
	fi
	tp=$!
	# The writer starts once every tenant has its first object in the store
	# (walship's watermark, Litestream's snapshot), so neither ships the
	# workload in its first copy.
	if ! python3 "$REPORT" ready "$(kind "$tool")" "$(cat "$d/url-direct")" "${names[@]}" ||
		! kill -0 "$tp" 2>/dev/null; then
		cat "$d/ship.log" >&2
		stop_child "$tp" || true
		fail "$rep $sc $tool: the replicator stored nothing (kept $d)"
		row "$rep $sc $tool $n - - - - - - - - 0"
		return 0
	fi
	t1=$(now)
	python3 "$REPORT" poll "$(kind "$tool")" "$(cat "$d/url-direct")" "$d/done" "$d/obs" "${names[@]}" >"$d/poll.log" &
	pp=$!
	python3 "$WRITER" write-many "$wl" "$commits" "$rate" "$d/commits" "$d/done" "${pairs[@]}" || ok=0
	wait "$pp" || ok=0
	stop_child "$tp" || { cat "$d/ship.log" >&2; ok=0; }
	s1=$(python3 "$REPORT" haproxy-stat "$ADMIN")
	t2=$(now)
	local req up walb rpo=("-" "-") cpu pollms
	pollms=$(sed -n 's/^poll round ms: median \([0-9]*\) .*/\1/p' "$d/poll.log")
	req=$(($(echo "$s1" | cut -d' ' -f1) - $(echo "$s0" | cut -d' ' -f1)))
	up=$(($(echo "$s1" | cut -d' ' -f2) - $(echo "$s0" | cut -d' ' -f2)))
	walb=$(awk '{s += $3} END {print s + 0}' "$d/done" 2>/dev/null || echo 0)
	cpu=$(cpu_of "$d/time")
	if [ "$ok" = 1 ]; then
		read -ra rpo <<<"$(python3 "$REPORT" rpo "$d/commits" "$d/obs")" || ok=0
	fi
	if [ "$ok" = 1 ]; then
		for t in "${names[@]:0:$RESTORE_MAX}"; do
			check_restore "$tool" "$d" "$t" || { ok=0; echo "  $tool $t: restore differs from its source" >&2; }
		done
	fi
	[ "$ok" = 1 ] || fail "rep $rep $sc $tool FAILED (writer, ship, poll or restore; kept $d)"
	row "$rep $sc $tool $n $walb $req $up ${rpo[0]:--} ${rpo[1]:--} $cpu - - $ok ${pollms:--}"
	printf '  rep %d %-9s %-10s %3d tenant(s)  WAL %10d B  requests %6d  up %10d B  RPO p50 %6s p99 %6s s (poll %s ms)  cpu %6.2f s  %s\n' \
		"$rep" "$sc" "$tool" "$n" "$walb" "$req" "$up" "${rpo[0]:--}" "${rpo[1]:--}" "${pollms:--}" "$cpu" \
		"$([ "$ok" = 1 ] && echo "restores equal" || echo FAILED)"
	[ "$BREAKDOWN" = 0 ] || breakdown "$rep" "$sc" "$tool" "$t0" "$t1" "$t2" "$req" "$up" $((n * commits))
	if [ "$sc" != live-hist ] && [ "$ok" = 1 ]; then rm -rf "$d"; fi
}

# breakdown REP SCENARIO TOOL T0 T1 T2 REQUESTS BYTES COMMITS: what the proxy
# logged of the run, by method, key and phase (bench/req_breakdown.py), and
# whether the log holds every request the proxy's counters saw.
breakdown() {
	local f=$OUT/breakdown-$1-$2-$3 got
	sleep 0.5 # the last lines' datagrams
	python3 "$ROOT/bench/req_breakdown.py" table "$PROXY_LOG" "$4" "$5" "$6" --commits "$9" --out "$f.csv" >"$f.txt"
	got=$(awk -F, 'NR > 1 {r += $4; b += $5 + $6} END {print r + 0, b + 0}' "$f.csv")
	[ "$got" = "$7 $8" ] || echo "(the log holds $got requests and bytes, the proxy's counters $7 $8)" >>"$f.txt"
	echo "  breakdown of rep $1 $2 $3 ($f.txt):"
	sed 's/^/    /' "$f.txt"
}

# restore_run REP TOOL: the history's restore, timed, checked.
restore_run() {
	local rep=$1 tool=$2 d=$WORK/1-live-hist-$2 t0 s ok=1
	if [ ! -f "$d/done" ]; then
		row "$rep restore $tool 1 - - - - - - - - 0"
		fail "rep $rep restore $tool: no history"
		return 0
	fi
	t0=$(now)
	restore_one "$tool" "$d" t000 "$d/r-t000.db" || ok=0
	s=$(since "$t0")
	[ "$ok" = 1 ] && [ "$(python3 "$DIGEST" "$d/r-t000.db")" = "$(cat "$d/digest")" ] || ok=0
	[ "$ok" = 1 ] || fail "rep $rep restore $tool: failed or differs from its source (kept $d)"
	row "$rep restore $tool 1 $(awk '{print $3}' "$d/done") - - - - - $s - $ok"
	printf '  rep %d restore   %-10s %s of WAL: %7.3f s  %s\n' "$rep" "$tool" "$(awk '{print $3}' "$d/done") B" "$s" \
		"$([ "$ok" = 1 ] && echo equal || echo FAILED)"
}

start_run() {
	local rep=$1 log=$WORK/start-$1.log s
	if ! "$BUILD/bench/bench_engine" --mb 1 --tenants 2 --reps 1 --idle "$IDLE" --idle-s 1 --start-reps 1 --dir "$WORK" >"$log" 2>&1; then
		cat "$log" >&2
		fail "rep $rep start: bench_engine failed"
		row "$rep start walship $IDLE - - - - - - - - 0"
		return 0
	fi
	# A restart over the stored streams: every tenant registered and tailed
	# to its first Empty (bench_engine's start-up section).
	s=$(sed -n 's/.*restart over the stored streams.*: \([0-9.]*\) s (.*/\1/p' "$log")
	row "$rep start walship $IDLE - - - - - - - $s 1"
	printf '  rep %d start     walship    %d idle tenants restarted over their streams, to first Empty: %s s\n' \
		"$rep" "$IDLE" "$s"
}

throttled_run() {
	local rep=$1 n=$2 o=$WORK/thr-$1-$2 p99 secs=$SECONDS_LIVE tiny=()
	[ "$secs" -ge 2 ] || secs=2
	[ "$TINY" = 0 ] || tiny=(--tiny)
	if ! bash "$ROOT/bench/run_throttle_bench.sh" --scenario throttled --policies block --tenants "$n" \
		--seconds "$secs" --build "$BUILD" --out "$o" --rgw "$RGW" "${tiny[@]}" >"$o.log" 2>&1; then
		tail -20 "$o.log" >&2
		fail "rep $rep throttled-$n: run_throttle_bench.sh failed (log $o.log)"
		row "$rep throttled-$n walship $n - - - - - - - - 0"
		return 0
	fi
	p99=$(python3 -c "import json,sys; print('%.3f' % (json.load(open(sys.argv[1]))['rpo_ms']['p99'] / 1000))" "$o/throttled-block.json")
	row "$rep throttled-$n walship $n - - - - $p99 - - - 1"
	printf '  rep %d throttled %-10s %3d tenant(s), store capped at half the demanded write rate: RPO p99 %s s\n' \
		"$rep" walship "$n" "$p99"
	bash "$ROOT/tests/s3/throttle.sh" rate "$RGW" 0 >/dev/null
}

echo "run_peer_bench: s3:// (radosgw $DIRECT, counted through haproxy $PROXIED), $REPS rep(s)$([ "$TINY" = 1 ] && echo ', tiny'), walship $W, litestream ${LSVER:-absent}"
echo "machine: $(nproc) CPU(s), load $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "sizes: live-1 1 tenant x $((RATE1 * SECONDS_LIVE)) commits at $RATE1/s; live-100 $MANY tenants x $((RATEMANY * SECONDS_LIVE)) commits at $RATEMANY/s each; history $HIST_COMMITS text commits; start $IDLE idle tenants; throttled: ${THR_TENANTS:-none}"
[ -n "$LS" ] || echo "litestream absent: every row is walship alone"
echo "not measured beside Litestream (walship alone): start (bench_engine drives walship's engine), throttled (walship-bench drives walship's engine; the bench has no Litestream driver at a cap)"
# The history first: repetition 1 of live-hist, then its digest.
has() { [[ " $SCENARIOS " == *" $1 "* ]]; }
for tool in "${TOOLS[@]}"; do
	has restore || break
	live 1 live-hist "$tool" text 1 "$HIST_COMMITS" 0
	[ ! -f "$WORK/1-live-hist-$tool/done" ] || source_digest "$WORK/1-live-hist-$tool/t000.db" >"$WORK/1-live-hist-$tool/digest"
done
for rep in $(seq 1 "$REPS"); do
	# The order rotated every repetition (two tools: swapped).
	order=()
	for i in "${!TOOLS[@]}"; do order+=("${TOOLS[$(((i + rep - 1) % ${#TOOLS[@]}))]}"); done
	! has live-1 || for tool in "${order[@]}"; do live "$rep" live-1 "$tool" peer 1 $((RATE1 * SECONDS_LIVE)) "$RATE1"; done
	! has live-100 || for tool in "${order[@]}"; do live "$rep" live-100 "$tool" peer "$MANY" $((RATEMANY * SECONDS_LIVE)) "$RATEMANY"; done
	! has restore || for tool in "${order[@]}"; do restore_run "$rep" "$tool"; done
	[ "$ALONE_REPS" = 0 ] || [ "$rep" -le "$ALONE_REPS" ] || continue
	! has start || start_run "$rep"
	for n in $THR_TENANTS; do throttled_run "$rep" "$n"; done
done
echo "machine: load $(cut -d' ' -f1-3 /proc/loadavg) at end"
python3 "$REPORT" summary "$CSV" "$OUT/peer.json"
echo "run_peer_bench: results in $CSV, $OUT/peer.json"
[ "$failures" = 0 ] || { echo "run_peer_bench.sh: $failures run(s) failed" >&2; exit 1; }
