#!/usr/bin/env bash
# walship follow --sink URL --tenant NAME -o REPLICA_DB: a live replica from
# the sink alone. A real writer process (checkpoints of every mode, its
# connection closed and opened again) records the digest of every state it
# commits while `walship replicate` ships it; `walship follow` keeps a
# replica from the sink, stopped and started again half-way; reader
# processes (Python's sqlite3 and the sqlite3 shell) read the replica all
# along, and every digest they see must be a recorded state; at the end the
# replica is the source. --json prints one line per state applied, tx_id
# growing, with its lag. Bad input: missing options, a bad sink URL, an
# unknown tenant, a replica that is no database.
#
# Env: WS_BIN, WS_TEST_TMP.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

sqlite3 src.db "PRAGMA journal_mode=wal; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);" >/dev/null

replica_helpers

replica_digest() {
	python3 -c 'import sqlite3,sys; sys.path.insert(0,"."); from digest import digest; print(digest(sqlite3.connect("replica.db", timeout=10)))' 2>/dev/null || true
}

start_follow() {
	"$WS_BIN" follow --sink "file://$ROOT/sink" --tenant app -o "$ROOT/replica.db" --interval-ms 20 --json \
		>>"$ROOT/fout" 2>>"$ROOT/ferr" &
	fpid=$!
	local i
	for i in $(seq 200); do [ "$(grep -c 'rebuilt at' "$ROOT/ferr" 2>/dev/null || true)" -ge "$1" ] && break; sleep 0.05; done
}

"$WS_BIN" replicate --sink "file://$ROOT/sink" --interval-ms 20 app="$ROOT/src.db" >"$ROOT/out" 2>"$ROOT/err" &
rpid=$!
for i in $(seq 200); do [ -e "$ROOT/sink/app/wm" ] && break; sleep 0.05; done
start_follow 1
python3 reader.py r1 &
r1=$!
(while [ ! -e stop ]; do sqlite3 -cmd ".timeout 5000" replica.db "SELECT count(*) FROM t" >>shell.out 2>&1 || true; sleep 0.05; done) &
sh=$!
python3 writer.py 60
# Stopped and started again: it rebuilds from the sink and goes on.
kill -TERM "$fpid"
reap "$fpid" "$ROOT/ferr" "follow"
check "follow: exit 0 after SIGTERM" [ "$reaped" = 0 ]
start_follow 2
python3 writer.py 60
last=$(tail -n 1 states)
for i in $(seq 400); do [ "$(replica_digest)" = "$last" ] && break; sleep 0.05; done
touch stop
wait "$r1" "$sh"
kill -TERM "$fpid"
reap "$fpid" "$ROOT/ferr" "follow"
check "follow: exit 0 after SIGTERM, the second time" [ "$reaped" = 0 ]
kill -TERM "$rpid"
reap "$rpid" "$ROOT/err" "replicate"
check "the replica is the source's last state" [ "$(replica_digest)" = "$last" ]
check "the reader read all along" bash -c "[ \$(wc -l <r1) -gt 50 ]"
check "every read of the reader is a state the writer committed" python3 - <<'EOF2'
states = set(open("states").read().split())
seen = open("r1").read().splitlines()
errors = [l for l in seen if l.startswith("ERROR")]
assert not errors, errors[:3]
bad = [l for l in seen if l not in states]
assert not bad, f"{len(bad)} reads of states never committed, of {len(seen)}"
EOF2
check "the sqlite3 shell reads it without an error" bash -c "[ -s shell.out ] && ! grep -v '^[0-9][0-9]*$' shell.out"
check "sqlite3 finds the replica sound" bash -c "[ \"\$(sqlite3 replica.db 'PRAGMA integrity_check')\" = ok ]"
check "--json: a line per state applied, tx_id growing within each run, a lag" python3 - "$ROOT/fout" <<'EOF2'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines and lines[0]["applied"] == "image", lines[:1]
runs, cur = [], []
for o in lines:
    assert {"tenant", "applied", "tx_id", "lag_ms", "source_ms", "pages", "db_pages"} <= o.keys(), o
    assert o["tenant"] == "app" and o["lag_ms"] > -5000, o
    if o["applied"] == "image" and cur and o["tx_id"] <= cur[-1]:
        runs.append(cur); cur = []
    cur.append(o["tx_id"])
runs.append(cur)
assert len(runs) == 2, [len(r) for r in runs]
for r in runs:
    assert r == sorted(set(r)), r
assert sum(1 for o in lines if o["applied"] == "transaction") > 20
EOF2

# ---- bad input ----
ws follow --sink "file://$ROOT/sink" --tenant app
check "no -o: usage error" bash -c "[ $rc = 2 ] && grep -q 'required' err"
ws follow --sink "file://$ROOT/sink" --tenant app -o x.db --interval-ms 0
check "--interval-ms 0: usage error" bash -c "[ $rc = 2 ] && grep -q 'interval-ms' err"
ws follow --sink "nosuch://x" --tenant app -o x.db
check "a bad sink URL: usage error naming it" bash -c "[ $rc = 2 ] && grep -q 'nosuch' err"
ws follow --sink "file://$ROOT/nosink" --tenant app -o x.db
check "a sink that does not exist: refused" bash -c "[ $rc = 1 ] && grep -q 'nosink' err"
ws follow --sink "file://$ROOT/sink" --tenant nobody -o x.db
check "an unknown tenant: refused, named" bash -c "[ $rc = 1 ] && grep -q 'tenant nobody has no watermark' err"
printf 'a text file, not a database, longer than the 100 bytes of a database header..................................\n' >notes.txt
cp notes.txt notes.before
ws follow --sink "file://$ROOT/sink" --tenant app -o notes.txt
check "a replica that is no database: refused, named, left as it was" bash -c \
	"[ $rc = 1 ] && grep -q 'notes.txt' err && cmp -s notes.txt notes.before"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
