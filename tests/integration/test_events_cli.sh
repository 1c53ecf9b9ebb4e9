#!/usr/bin/env bash
# walship replicate --events: every event of the named tenants (all when
# none are named) as JSON lines on stdout, the seed's field names, logs on
# stderr; a tenant not named prints nothing; a name replicate does not
# ship is a usage error. Real SQLite writers (the sqlite3 CLI).
#
# Env: WS_BIN, WS_TEST_TMP.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

for n in a b; do
	sqlite3 "$n.db" "PRAGMA journal_mode=wal; CREATE TABLE t(x); INSERT INTO t VALUES (1);" >/dev/null
done

# run ARGS...: replicate in the background until two commits of each
# tenant were printed (or 20 s), then SIGTERM.
run() {
	local want=$1
	shift
	"$WS_BIN" replicate --sink "file://$ROOT/sink" "$@" a="$ROOT/a.db" b="$ROOT/b.db" >"$ROOT/out" 2>"$ROOT/err" &
	local pid=$! i
	for i in $(seq 100); do grep -q '"hydrated"' "$ROOT/out" 2>/dev/null && break; sleep 0.1; done
	# A writer that keeps its connection: its WAL stays, frames 1.. of one generation.
	python3 - "$ROOT" <<'EOF'
import sqlite3, sys, time
for n in ("a", "b"):
    c = sqlite3.connect(f"{sys.argv[1]}/{n}.db", isolation_level=None)
    for i in range(2):
        c.execute("INSERT INTO t VALUES (?)", (i,))
        time.sleep(0.05)
    c.close()
EOF
	for i in $(seq 200); do
		[ "$(grep -c '"progressed"' "$ROOT/out" 2>/dev/null || true)" -ge "$want" ] && break
		sleep 0.1
	done
	kill -TERM "$pid"
	reap "$pid" "$ROOT/err" "replicate --events"
}

run 4 --events
check "exit 0 after SIGTERM" [ "$reaped" = 0 ]
check "every line is a JSON object with the seed's names" python3 - "$ROOT/out" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines, "no events"
for o in lines:
    e = o["event"]
    if e == "update":
        assert {"query_id", "update"} <= o.keys() and o["update"]["kind"] in ("hydrated", "changed"), o
    elif e == "progressed":
        assert {"worker", "tx_id"} <= o.keys(), o
    elif e == "faulted":
        assert {"query_id", "reason", "cause"} <= o.keys(), o
    else:
        raise AssertionError(o)
EOF
# tx_ids per tenant never go down (docs/EVENTS.md "Ordering"): a Progressed
# at a new tx_id has a Changed of its tenant after the last one before it; at
# the last tx_id again it is a marker (docs/EVENTS.md "Markers"), with no
# Changed before it. Each tenant is a query of its own here, so no marker is
# asked: at least two commits each, and every tx_id new.
check "both tenants hydrated, then their commits progressed in order" python3 - "$ROOT/out" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for t in ("a", "b"):
    mine = [o for o in lines if o.get("tenant") == t]
    assert mine[0]["event"] == "update" and mine[0]["update"]["kind"] == "hydrated", mine[:1]
    last, changed, new, markers = mine[0]["update"]["tx_id"], 0, 0, 0
    for o in mine[1:]:
        if o["event"] == "update" and o["update"]["kind"] == "hydrated":
            last, changed = o["update"]["tx_id"], 0  # subscribed again: a new baseline
        elif o["event"] == "update":
            assert o["update"]["position"] > last, (last, o)
            changed += 1
        elif o["event"] == "progressed":
            assert o["tx_id"] >= last, ("tx_id went down", last, o)
            if o["tx_id"] == last:
                assert changed == 0, ("a marker after a Changed it does not cover", o)
                markers += 1
            else:
                assert changed > 0, ("a Progressed with no Changed before it", o)
                last, changed, new = o["tx_id"], 0, new + 1
    assert new >= 2 and markers == 0, (t, new, markers)
EOF
check "the stop ends each query with worker_lost" \
	[ "$(grep -c '"cause":"worker_lost"' out)" = 2 ]
check "logs stay on stderr" bash -c "! grep -qv '^{' '$ROOT/out' && grep -q 'walship' '$ROOT/err'"

run 2 --events=b
check "--events=b: exit 0" [ "$reaped" = 0 ]
check "--events=b prints b's events only" bash -c "grep -q '\"tenant\":\"b\"' '$ROOT/out' && ! grep -q '\"tenant\":\"a\"' '$ROOT/out'"

ws replicate --sink "file://$ROOT/sink" --once --events=nope a="$ROOT/a.db"
check "--events=nope: usage error naming it" bash -c "[ $rc = 2 ] && grep -q \"'nope' is not a tenant\" '$ROOT/err'"
ws replicate --sink "file://$ROOT/sink" --once --events=a,a a="$ROOT/a.db"
check "--events=a,a: usage error" bash -c "[ $rc = 2 ] && grep -q 'named twice' '$ROOT/err'"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
