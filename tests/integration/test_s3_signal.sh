#!/usr/bin/env bash
# SIGTERM stops `replicate --checkpoint-interval-s` while its periodic
# checkpoint waits on a store that refuses every write: under the block
# policy the checkpoint's flush waits out the refusals for as long as they
# last, and the signal was read only once it returned (never: only SIGKILL
# ended the process). The store is the fixture's radosgw behind
# tests/s3/faultproxy.py answering every PUT 503 SlowDown (a fault radosgw
# cannot be made to produce on demand); reads pass.
#
# Env: WS_BIN, WS_TEST_TMP, WS_S3_DIR (the radosgw fixture; $WS_S3_DIR/env),
# WS_FAULTPROXY (tests/s3/faultproxy.py).
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

need_radosgw
load_s3_env "$WS_S3_DIR/env"
: "${WS_FAULTPROXY:?WS_FAULTPROXY must name tests/s3/faultproxy.py}"
E=$WS_S3_ENDPOINT

B="walship-sig-$(date +%s)-$$"
make_bucket "$E" "$B"

start_faultproxy "$E"
U="s3://$B/sig?endpoint=$PROXY&retry_deadline_ms=1000"

sq a.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null
sq a.db "INSERT INTO t(v) VALUES ('one'), ('two');"
ws replicate --sink "$U" --once a=a.db
check "replicate --once through the proxy: exit 0" [ "$rc" = 0 ]

# replicate starts against the store as it is (its conditional-write probe
# and first tail go through); then every PUT is refused and a new commit
# waits to be shipped.
sq a.db "INSERT INTO t(v) VALUES ('three');"
"$WS_BIN" replicate --sink "$U" --checkpoint-interval-s 1 --json a=a.db >rep.out 2>rep.err &
rep=$!
for _ in $(seq 300); do grep -q '"checkpoint"' rep.out 2>/dev/null && break; sleep 0.1; done
check "replicate is running and took a periodic checkpoint" grep -q '"checkpoint"' rep.out
set_fault '{"mode": "slowdown", "count": 100000000, "methods": ["PUT"]}'
sq a.db "INSERT INTO t(v) VALUES ('four');"
sleep 4 # the next periodic checkpoint's flush waits out the refusals
if ! kill -TERM $rep 2>/dev/null; then
	bad "replicate ended before the signal"
	sed 's/^/    rep.err: /' rep.err | head -20
fi
t0=$(date +%s)
for _ in $(seq 300); do kill -0 $rep 2>/dev/null || break; sleep 0.1; done
if kill -0 $rep 2>/dev/null; then
	bad "replicate still running 30 s after SIGTERM (its checkpoint waits on the refusing store)"
	kill -KILL $rep
fi
reap $rep rep.err "replicate"
t1=$(date +%s)
check "SIGTERM during the periodic checkpoint: replicate exits in $((t1 - t0)) s (exit $reaped: 1, a tail failed)" \
	eval '[ "$reaped" = 1 ]'
check "it says the checkpoint in progress gave up" grep -q "the checkpoint in progress gives up" rep.err
check "and that the checkpoint was skipped" grep -q "checkpoint skipped: a tail failed" rep.err

# The store accepts writes again: nothing acknowledged was lost, and the
# commit the stopped run could not ship is shipped now.
set_fault '{"mode": "pass"}'
ws replicate --sink "$U" --once a=a.db
check "replicate --once after the store recovers: exit 0" [ "$rc" = 0 ]
ws restore --sink "$U" --tenant a -o r.db
check "restore equals the source" eval '[ "$rc" = 0 ] && same_dump a.db r.db'

# replicate started while the store throttles every write: the
# conditional-write probe runs out of retries. It waits and tries again
# (it used to exit 1 at once), ships once the store accepts, and a signal
# while it waits stops it.
set_fault '{"mode": "slowdown", "count": 100000000, "methods": ["PUT"]}'
sq a.db "INSERT INTO t(v) VALUES ('five');"
"$WS_BIN" replicate --sink "$U" --json a=a.db >rep2.out 2>rep2.err &
rep=$!
for _ in $(seq 300); do grep -q "the store is throttling: trying again" rep2.err 2>/dev/null && break; sleep 0.1; done
check "started against a throttling store, replicate says it tries again" \
	grep -q "conditional-write probe.*the store is throttling: trying again in 1 s" rep2.err
for _ in $(seq 100); do [ "$(grep -c "trying again" rep2.err)" -ge 2 ] && break; sleep 0.1; done
check "and tries again, waiting longer (2 s)" grep -q "trying again in 2 s" rep2.err
check "it is still running" kill -0 $rep
sq a.db "INSERT INTO t(v) VALUES ('six');"
set_fault '{"mode": "pass"}'
for _ in $(seq 300); do grep -q "walship: tenant a:" rep2.err 2>/dev/null && break; sleep 0.1; done
check "the store accepts again: replicate starts its tenant" grep -q "walship: tenant a:" rep2.err
sq a.db "INSERT INTO t(v) VALUES ('seven');"
sleep 2
kill -TERM $rep 2>/dev/null || true
reap $rep rep2.err "replicate"
check "SIGTERM then: exit 0 (exit $reaped)" eval '[ "$reaped" = 0 ]'
ws restore --sink "$U" --tenant a -o r2.db
check "restore equals the source, every commit made while it waited included" \
	eval '[ "$rc" = 0 ] && same_dump a.db r2.db'

set_fault '{"mode": "slowdown", "count": 100000000, "methods": ["PUT"]}'
"$WS_BIN" replicate --sink "$U" a=a.db >/dev/null 2>rep3.err &
rep=$!
for _ in $(seq 300); do grep -q "trying again" rep3.err 2>/dev/null && break; sleep 0.1; done
kill -TERM $rep 2>/dev/null || true
t0=$(date +%s)
reap $rep rep3.err "replicate"
t1=$(date +%s)
check "SIGTERM while it waits for the store: exit 1 in $((t1 - t0)) s (exit $reaped)" \
	eval '[ "$reaped" = 1 ] && [ $((t1 - t0)) -le 3 ]'
check "it says why" grep -q "a signal came before the store accepted the start" rep3.err
set_fault '{"mode": "pass"}'

# --once does not wait: a one-shot run reports the throttling store.
set_fault '{"mode": "slowdown", "count": 100000000, "methods": ["PUT"]}'
ws replicate --sink "$U" --once a=a.db
check "replicate --once against a throttling store: exit 1 (exit $rc)" [ "$rc" = 1 ]
check "naming the throttling" grep -qi "throttled" "$ROOT/err"
set_fault '{"mode": "pass"}'

kill "$PROXY_PID" 2>/dev/null || true
wait "$PROXY_PID" 2>/dev/null || true
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
