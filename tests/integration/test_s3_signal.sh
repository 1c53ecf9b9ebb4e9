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

kill "$PROXY_PID" 2>/dev/null || true
wait "$PROXY_PID" 2>/dev/null || true
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
