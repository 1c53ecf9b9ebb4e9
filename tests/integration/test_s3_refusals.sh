#!/usr/bin/env bash
# A store that refuses every write for a while (503 SlowDown from
# tests/s3/faultproxy.py in front of the fixture's radosgw), with and
# without Retry-After, under each policy, as a user of `walship replicate
# --json` sees it:
#   - an outcome for the refused tails: "shed" with its throttle_retries
#     under shed, "error" with "deferred":true and its code and message
#     under block and throttle;
#   - one warning naming the tenant, the store's answer and the RPO once
#     the tenant has not shipped for stall_warn_ms, and one line when it
#     ships again;
#   - the per-tenant deferral count in the metrics endpoint;
#   - once the store accepts again, everything ships: after SIGTERM
#     (exit 0) the tenant restores equal to its source.
# Then drain_ms_max: a stop under a store that takes one write a second
# (tests/s3/throttle.sh) ends by the deadline, non-zero, naming the tenant
# it left; the next start ships it all and restore equals the source.
#
# Env: WS_BIN, WS_TEST_TMP, WS_S3_DIR, WS_FAULTPROXY, WS_SRC.
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

need_radosgw
SRC=${WS_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
THROTTLE="$SRC/tests/s3/throttle.sh"
mkdir -p rgw
cp "$WS_S3_DIR/env" rgw/env
stop_proxy() { bash "$THROTTLE" stop "$ROOT/rgw" >/dev/null 2>&1 || true; }
trap 'stop_proxy; cleanup' EXIT
load_s3_env "$WS_S3_DIR/env"
export AWS_REGION="${AWS_REGION:-us-east-1}"
DIRECT=$WS_S3_ENDPOINT
B="walship-refusals-$(date +%s)-$$"
make_bucket "$DIRECT" "$B"
start_faultproxy "$DIRECT"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rows() { for _ in $(seq "$2"); do sq "$1" "INSERT INTO t(v) VALUES (randomblob(2000));" >/dev/null; done; }
# wait_for FILE PATTERN SECONDS: true once FILE has a line matching PATTERN.
wait_for() {
	local _
	for _ in $(seq $(($3 * 10))); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}

# phase POLICY RETRY_AFTER
phase() {
	local pol=$1 ra=$2 name="p-$1-$2" port rep t0 waited
	mkdir -p "$name"
	sq "$name/db.db" "PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);" >/dev/null
	port=$(free_port)
	printf '[engine]\nsink = s3://%s/%s?endpoint=%s\nshards = 1\nmetrics_addr = 127.0.0.1:%s\npolicy = %s\nstall_warn_ms = 1500\n[tenant.%s]\npath = %s\n' \
		"$B" "$name" "$PROXY" "$port" "$pol" "$name" "$ROOT/$name/db.db" >"$name.ini"
	"$WS_BIN" replicate --json --config "$name.ini" >"$name.out" 2>"$name.err" &
	rep=$!
	rows "$name/db.db" 3
	wait_for "$name.out" '"outcome":"streamed"\|"outcome":"restarted"' 10 || true
	set_fault "{\"mode\": \"slowdown\", \"count\": 1000000, \"methods\": [\"PUT\"], \"retry_after\": $ra}"
	t0=$(date +%s%N)
	rows "$name/db.db" 5
	if wait_for "$name.err" "tenant $name: nothing shipped for" 10; then
		waited=$(( ($(date +%s%N) - t0) / 1000000 ))
		ok "$name: warned after ${waited} ms"
	else
		bad "$name: no warning in 10 s ($(tail -3 "$name.err"))"
	fi
	check "$name: the warning names the store's answer and the RPO" \
		grep -q "tenant $name: nothing shipped for .*the store answers: .*503.*; RPO [0-9]" "$name.err"
	check "$name: one warning while it lasts (repeats at most every 30 s)" \
		[ "$(grep -c "tenant $name: nothing shipped for" "$name.err")" = 1 ]
	curl -s -m 5 -o "$name.metrics" "http://127.0.0.1:$port/metrics" || true
	local defr
	defr=$(sed -n "s/^walship_tenant_deferrals_total{tenant=\"$name\"[^}]*} //p" "$name.metrics")
	check "$name: deferrals counted per tenant (${defr:-no metric})" [ -n "$defr" ] && [ "$defr" -ge 1 ]
	check "$name: time since the last acknowledged tail in the metrics" \
		grep -q "^walship_tenant_last_ack_age_seconds{tenant=\"$name\"" "$name.metrics"
	if [ "$pol" = shed ]; then
		check "$name: --json shows the refused tails as shed, with their throttle_retries" \
			grep -q "\"outcome\":\"shed\".*\"throttle_retries\":[1-9]" "$name.out"
	else
		grep '"outcome":"error"' "$name.out" >"$name.errors" || true
		check "$name: --json shows the refused tails as deferred errors, with code and message" \
			[ -s "$name.errors" ] && ! grep -v '"deferred":true' "$name.errors" | grep -q . &&
			! grep -v '"code":-[0-9]' "$name.errors" | grep -q . && ! grep -v '"message":"[^"]*503' "$name.errors" | grep -q .
	fi
	set_fault '{"mode": "pass"}'
	check "$name: one line when it ships again" wait_for "$name.err" "tenant $name: shipping again after" 30
	if [ "$pol" != shed ]; then
		check "$name: the landing outcome counts the refusals" \
			grep -q "\"outcome\":\"streamed\".*\"throttle_retries\":[1-9]" "$name.out"
	fi
	kill -TERM "$rep"
	reap "$rep" "$name.err" "replicate ($name)"
	check "$name: replicate exits 0 on SIGTERM (got $reaped)" [ "$reaped" = 0 ]
	rm -f "$name/r.db"
	ws restore --sink "s3://$B/$name?endpoint=$DIRECT" --tenant "$name" -o "$name/r.db"
	check "$name: restores equal to its source" same_dump "$name/db.db" "$name/r.db"
}

for pol in block throttle shed; do
	phase "$pol" 1
	phase "$pol" 0
done

# drain_ms_max under a store that takes one write a second.
bash "$THROTTLE" start "$ROOT/rgw" --put-rate 1 >throttle.out 2>&1 || { cat throttle.out; bad "throttle.sh start"; }
SLOW=$(sed -n 's/^WS_S3_ENDPOINT=//p' rgw/env-throttled)
mkdir -p drain
sq drain/db.db "PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);" >/dev/null
printf '[engine]\nsink = s3://%s/drain?endpoint=%s\nshards = 1\ndrain_ms_max = 4000\nbatch_bytes_max = 128KiB\ninline_batch_bytes_max = 4096\n[tenant.dr]\npath = %s\n' \
	"$B" "$SLOW" "$ROOT/drain/db.db" >drain.ini
"$WS_BIN" replicate --config drain.ini >drain.out 2>drain.err &
rep=$!
# The deadline bounds the drain, which begins once the engine runs: the
# store's probes at start go through the same 1 PUT/s proxy (seconds under
# ASan), so the signal waits for the tenant to be registered.
wait_for drain.err "tenant dr: .* -> s3://" 60 || bad "replicate (drain) did not register its tenant"
rows drain/db.db 300
kill -TERM "$rep"
t0=$(date +%s%N)
reap "$rep" drain.err "replicate (drain)"
took=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "# drain: exit $reaped after $took ms"
check "drain: ends by drain_ms_max (${took} ms, 4000 + 1000 of slack)" [ "$took" -le 5000 ]
check "drain: exits non-zero at the deadline (got $reaped)" [ "$reaped" != 0 ]
check "drain: names the tenant it left unshipped" grep -q "tenant dr: left unshipped past frame" drain.err
stop_proxy
sed "s|endpoint=$SLOW|endpoint=$DIRECT|" drain.ini >drain2.ini
set +e
"$WS_BIN" replicate --once --config drain2.ini >drain2.out 2>drain2.err
rc=$?
set -e
check "drain: the next start ships the rest (exit $rc)" [ "$rc" = 0 ]
rm -f drain/r.db
ws restore --sink "s3://$B/drain?endpoint=$DIRECT" --tenant dr -o drain/r.db
check "drain: restores equal to its source" same_dump drain/db.db drain/r.db
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
