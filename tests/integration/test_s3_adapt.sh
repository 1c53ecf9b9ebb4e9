#!/usr/bin/env bash
# The shipper adapts to a throttling store (docs/DESIGN.md "Under throttling"):
# the same load (real SQLite writers at a fixed transaction rate) is
# replicated by `walship replicate` through tests/s3/throttle.sh (Debian's
# haproxy in front of the fixture's radosgw) twice: uncapped, then with
# writes capped well below what the load sends. Counted from the engine's
# own metrics (never timed):
#   - capped, the store throttled (throttle retries > 0) and the shard
#     halved its uploads in flight (window decreases > 0) and gathered
#     longer (tails coalesced > 0) where a tail's watermark did not carry
#     its manifest;
#   - capped, each PUT carried more bytes and fewer PUTs went out per MB
#     shipped than uncapped (the request rate per unit of work fell);
#   - capped, tails wrote their manifest inside their watermark (carry,
#     one write a tail: tails carried > 0);
#   - uncapped, none of that happened;
#   - in both, every tenant restores equal to its source after SIGTERM;
#   - a write refused once on a shard's thread (tests/s3/faultproxy.py)
#     defers that tenant's tail, with no error, and all restore equal.
#
# Env: WS_BIN, WS_TEST_TMP, WS_S3_DIR (the radosgw fixture; $WS_S3_DIR/env),
# WS_SRC (the source tree, for tests/s3/throttle.sh), WS_FAULTPROXY.
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

need_radosgw
command -v haproxy >/dev/null || { bad "haproxy not found (tools/install-deps.sh)"; echo "$pass passed, $fail failed"; exit 1; }
SRC=${WS_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
THROTTLE="$SRC/tests/s3/throttle.sh"

# The proxy gets a directory of its own: a copy of the fixture's env.
mkdir -p rgw
cp "$WS_S3_DIR/env" rgw/env
stop_proxy() { bash "$THROTTLE" stop "$ROOT/rgw" >/dev/null 2>&1 || true; }
trap 'stop_proxy; cleanup' EXIT
bash "$THROTTLE" start "$ROOT/rgw" >proxy.out 2>&1 || { cat proxy.out; bad "throttle.sh start"; echo "$pass passed, $fail failed"; exit 1; }
set -a
# shellcheck disable=SC1091
. "$WS_S3_DIR/env"
set +a
export AWS_REGION="${AWS_REGION:-us-east-1}"
DIRECT=$WS_S3_ENDPOINT
PROXY=$(sed -n 's/^WS_S3_ENDPOINT=//p' rgw/env-throttled)

B="walship-adapt-$(date +%s)-$$"
make_bucket "$DIRECT" "$B"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
TENANTS=6 RATE=20 TXN_BYTES=1500 LOAD_S=12

# writers DIR: TENANTS databases, each written by its own thread at RATE
# transactions per second of TXN_BYTES for LOAD_S seconds (Python's sqlite3
# module: the system's libsqlite3).
writers() {
	python3 - "$1" "$TENANTS" "$RATE" "$TXN_BYTES" "$LOAD_S" <<'PY'
import os, sqlite3, sys, threading, time
d, n, rate, size, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
def w(i):
    c = sqlite3.connect(os.path.join(d, "t%d.db" % i), isolation_level=None, timeout=30)
    t0 = time.monotonic(); k = 0
    while True:
        due = t0 + k / rate
        now = time.monotonic()
        if now - t0 >= secs:
            break
        if due > now:
            time.sleep(due - now)
        c.execute("INSERT INTO t(v) VALUES (randomblob(?))", (size,))
        k += 1
    c.close()
ts = [threading.Thread(target=w, args=(i,)) for i in range(n)]
[t.start() for t in ts]; [t.join() for t in ts]
PY
}

# shard_metric FILE NAME: the shard-0 sample of NAME.
shard_metric() { sed -n "s/^$2{shard=\"0\"[^}]*} //p" "$1" | head -n1; }

# phase NAME CAP: one replicate of the load through the proxy with writes
# capped at CAP/s (0: uncapped); metrics scraped once the writers are done
# (a moment later); then SIGTERM and a restore of every tenant.
phase() {
	local name=$1 cap=$2 port i
	mkdir -p "$name"
	for i in $(seq 0 $((TENANTS - 1))); do
		sq "$name/t$i.db" "PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);" >/dev/null
	done
	bash "$THROTTLE" rate "$ROOT/rgw" "$cap" >/dev/null
	port=$(free_port)
	{
		printf '[engine]\nsink = s3://%s/%s?endpoint=%s\nshards = 1\nmetrics_addr = 127.0.0.1:%s\n' \
			"$B" "$name" "$PROXY" "$port"
		printf 'batch_age_ms_max = 1000\n'
		for i in $(seq 0 $((TENANTS - 1))); do printf '[tenant.t%s]\npath = %s\n' "$i" "$ROOT/$name/t$i.db"; done
	} >"$name.ini"
	"$WS_BIN" replicate --config "$name.ini" >"$name.rep.out" 2>"$name.rep.err" &
	local rep=$!
	writers "$ROOT/$name"
	# Scraped a moment after the writers stop (the load's own figures; the
	# final drain on SIGTERM ships whatever is left).
	local m="http://127.0.0.1:$port/metrics"
	sleep 3
	curl -s -m 5 -o "$name.metrics" "$m" || true
	kill -TERM "$rep"
	reap "$rep" "$name.rep.err" "replicate ($name)"
	check "$name: replicate exits 0 on SIGTERM (got $reaped)" [ "$reaped" = 0 ]
	for i in $(seq 0 $((TENANTS - 1))); do
		rm -f "$name/r$i.db"
		ws restore --sink "s3://$B/$name?endpoint=$DIRECT" --tenant "t$i" -o "$name/r$i.db"
		check "$name: t$i restores equal to its source" same_dump "$name/t$i.db" "$name/r$i.db"
	done
}

phase open 0
phase capped 6

for n in open capped; do
	eval "${n}_puts=\$(shard_metric $n.metrics walship_shard_puts_total)"
	eval "${n}_bytes=\$(shard_metric $n.metrics walship_shard_bytes_shipped_total)"
	eval "${n}_thr=\$(shard_metric $n.metrics walship_shard_throttle_retries_total)"
	eval "${n}_dec=\$(shard_metric $n.metrics walship_shard_window_decreases_total)"
	eval "${n}_coal=\$(shard_metric $n.metrics walship_shard_tails_coalesced_total)"
	eval "${n}_carr=\$(shard_metric $n.metrics walship_shard_tails_carried_total)"
	eval "${n}_defr=\$(shard_metric $n.metrics walship_shard_tails_deferred_total)"
done
echo "# uncapped: puts $open_puts bytes $open_bytes throttle retries $open_thr window decreases $open_dec coalesced $open_coal carried $open_carr deferred $open_defr"
echo "# capped:   puts $capped_puts bytes $capped_bytes throttle retries $capped_thr window decreases $capped_dec coalesced $capped_coal carried $capped_carr deferred $capped_defr"
check "metrics were scraped in both runs" [ -n "$open_puts" ] && [ -n "$capped_puts" ] && [ "$open_puts" -gt 0 ] && [ "$capped_puts" -gt 0 ]
check "uncapped: no throttling, no window decrease, no coalescing, nothing carried or deferred" \
	[ "$open_thr" = 0 ] && [ "$open_dec" = 0 ] && [ "$open_coal" = 0 ] && [ "$open_carr" = 0 ] && [ "$open_defr" = 0 ]
check "capped: the store throttled ($capped_thr retries)" [ "$capped_thr" -gt 0 ]
check "capped: uploads in flight were cut ($capped_dec window decreases)" [ "$capped_dec" -gt 0 ]
# A throttled tail gathers longer unless its watermark carried its manifest
# (one write whatever it gathers): either is the shard adapting.
check "capped: throttled tails gathered longer or were carried ($capped_coal coalesced)" \
	[ $((capped_coal + capped_carr)) -gt 0 ]
check "capped: watermarks carried their manifests ($capped_carr tails)" [ "$capped_carr" -gt 0 ]
# Bytes per PUT grew: fewer requests for the same work.
check "capped: each PUT carried more bytes ($((capped_bytes / capped_puts)) vs $((open_bytes / open_puts)) uncapped)" \
	python3 -c "import sys; sys.exit(not ($capped_bytes / $capped_puts > 1.15 * $open_bytes / $open_puts))"

# A write the store refuses (503 SlowDown, Retry-After: 2, once; the fault
# proxy in front of the fixture's radosgw) on the shard's own thread, where
# every tenant's manifest and watermark writes go one at a time: the tail
# is deferred (nothing acknowledged, no error), the tenant tailed again
# after the Retry-After while the others go on, and every tenant restores
# equal. LOAD_S is shortened for this phase.
start_faultproxy "$DIRECT"
LOAD_S=6
mkdir -p refused
for i in $(seq 0 $((TENANTS - 1))); do
	sq "refused/t$i.db" "PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);" >/dev/null
done
port=$(free_port)
{
	printf '[engine]\nsink = s3://%s/refused?endpoint=%s\nshards = 1\nmetrics_addr = 127.0.0.1:%s\n' "$B" "$PROXY" "$port"
	for i in $(seq 0 $((TENANTS - 1))); do printf '[tenant.t%s]\npath = %s\n' "$i" "$ROOT/refused/t$i.db"; done
} >refused.ini
"$WS_BIN" replicate --config refused.ini >refused.rep.out 2>refused.rep.err &
rep=$!
sleep 2
set_fault '{"mode": "slowdown", "count": 1, "methods": ["PUT"], "retry_after": 2}'
writers "$ROOT/refused"
sleep 3
curl -s -m 5 -o refused.metrics "http://127.0.0.1:$port/metrics" || true
kill -TERM "$rep"
reap "$rep" refused.rep.err "replicate (refused)"
check "refused: replicate exits 0 on SIGTERM (got $reaped)" [ "$reaped" = 0 ]
defr=$(shard_metric refused.metrics walship_shard_tails_deferred_total)
errs=$(shard_metric refused.metrics walship_shard_errors_total)
echo "# refused: deferred ${defr:-?} errors ${errs:-?}"
check "refused: the refused tail was deferred (${defr:-no metric})" [ -n "$defr" ] && [ "$defr" -ge 1 ]
check "refused: no tail failed (${errs:-no metric} errors)" [ "$errs" = 0 ]
# (A tenant the shard did not get to for stall_warn_ms is warned about, the
# store's answer quoted: that warning is not a failed tail's.)
check "refused: no tail warned of a failure" eval '! grep -v "nothing shipped for" refused.rep.err | grep -q "retry in"'
for i in $(seq 0 $((TENANTS - 1))); do
	rm -f "refused/r$i.db"
	ws restore --sink "s3://$B/refused?endpoint=$DIRECT" --tenant "t$i" -o "refused/r$i.db"
	check "refused: t$i restores equal to its source" same_dump "refused/t$i.db" "refused/r$i.db"
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
