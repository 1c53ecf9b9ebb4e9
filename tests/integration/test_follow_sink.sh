#!/usr/bin/env bash
# walship follow --sink URL --tenant NAME -o REPLICA_DB: a live replica from
# the sink alone. A real writer process (checkpoints of every mode, its
# connection closed and opened again, the process itself started again for
# each round) records the digest and WAL position of every state it commits
# while `walship replicate` ships it; `walship follow` keeps a replica from
# the sink. It is killed with -9 while the writer commits and started again
# on the same replica, then stopped with SIGTERM and started again; reader
# processes (Python's sqlite3 and the sqlite3 shell) read the replica all
# along, and every digest they see must be a recorded state; at the end the
# replica is the source. --json prints one line per state applied, tx_id
# growing, with its lag.
#
# With fault sites:
# - Equal to the source at every progress point. WS_FAULT=
#   replica.applied:1+:pause holds the follower right after each state it
#   applies (published to readers, its --json line not yet printed);
#   holder.py reads the replica then and lets it go, so the k-th digest read
#   is the state of the k-th --json line. check_points.py maps each to the
#   writer's record: a state the source committed, each transaction exactly
#   the commit after the state before it, its tx_id's frame the source's
#   commit frame for it, its chain changing exactly with the WAL generation.
# - Killed inside an apply: paused at replica.before_publish (a
#   transaction's frames in the replica's WAL, the header that commits it
#   not written) and killed with -9 there: the replica reads as a committed
#   state before and after the kill (the one before the transaction, or
#   after it if a new connection recovers the WAL), never a torn one; started
#   again it rebuilds and ends equal to the source.
# Bad input: missing options, a bad sink URL, an unknown tenant, a replica
# that is no database (a text file, a directory), one in use by a writer.
#
# Env: WS_BIN, WS_TEST_TMP, WS_FAULTS.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

sqlite3 src.db "PRAGMA journal_mode=wal; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);" >/dev/null

replica_helpers

replica_digest() {
	python3 -c 'import sqlite3,sys; sys.path.insert(0,"."); from digest import digest; print(digest(sqlite3.connect("replica.db", timeout=10)))' 2>/dev/null || true
}
# committed DIGEST: a state the writer recorded.
committed() { [ -n "$1" ] && grep -qx "$1" states; }

# start_follow N [ENV...]: walship follow in the background (fpid), until
# stderr shows N rebuilds in all.
start_follow() {
	local n=$1 i
	shift
	echo '{"run": '"$n"'}' >>"$ROOT/fout" # where each process's lines start
	env "$@" "$WS_BIN" follow --sink "file://$ROOT/sink" --tenant app -o "$ROOT/replica.db" --interval-ms 20 --json \
		>>"$ROOT/fout" 2>>"$ROOT/ferr" &
	fpid=$!
	for i in $(seq 400); do [ "$(grep -c 'rebuilt at' "$ROOT/ferr" 2>/dev/null || true)" -ge "$n" ] && break; sleep 0.05; done
}
# wait_applied N: until fout shows N transactions applied in all.
wait_applied() {
	local i
	for i in $(seq 400); do [ "$(grep -c '"transaction"' "$ROOT/fout" 2>/dev/null || true)" -ge "$1" ] && break; sleep 0.05; done
}
# wait_source: until the replica is the writer's last state.
wait_source() {
	local i last
	last=$(tail -n 1 states)
	for i in $(seq 400); do [ "$(replica_digest)" = "$last" ] && break; sleep 0.05; done
}

"$WS_BIN" replicate --sink "file://$ROOT/sink" --interval-ms 20 app="$ROOT/src.db" >"$ROOT/out" 2>"$ROOT/err" &
rpid=$!
for i in $(seq 200); do [ -e "$ROOT/sink/app/wm" ] && break; sleep 0.05; done
start_follow 1
python3 reader.py r1 &
r1=$!
(while [ ! -e stop ]; do sqlite3 -cmd ".timeout 5000" replica.db "SELECT count(*) FROM t" >>shell.out 2>&1 || true; sleep 0.05; done) &
sh=$!
# Killed with -9 while the writer commits (no chance to finish what it
# writes), then started again on the same replica: it rebuilds and goes on.
python3 writer.py 100 &
w=$!
wait_applied 15
kill -KILL "$fpid"
reap "$fpid" "$ROOT/ferr" "follow"
check "follow: killed with -9 mid-run (after $(grep -c '"transaction"' fout) transactions)" [ "$reaped" = 137 ]
# The writer commits on while it is down: started again, it has those to catch up.
down_at=$(wc -l <states)
for i in $(seq 200); do [ "$(wc -l <states)" -ge $((down_at + 5)) ] && break; sleep 0.05; done
check "follow: the writer committed while it was down" [ "$(wc -l <states)" -ge $((down_at + 5)) ]
start_follow 2
wait "$w"
wait_source
check "follow: killed and started again, it reached the source" [ "$(replica_digest)" = "$(tail -n 1 states)" ]
check "follow: killed and started again, every read so far is a state the writer committed" python3 -c "
states = set(open('states').read().split())
seen = open('r1').read().splitlines()
assert seen and all(l in states for l in seen), [l for l in seen if l not in states][:3]"
# Stopped and started again (a new writer process): it rebuilds and goes on.
kill -TERM "$fpid"
reap "$fpid" "$ROOT/ferr" "follow"
check "follow: exit 0 after SIGTERM" [ "$reaped" = 0 ]
start_follow 3
python3 writer.py 60
wait_source
last=$(tail -n 1 states)
kill -TERM "$fpid"
reap "$fpid" "$ROOT/ferr" "follow"
check "follow: exit 0 after SIGTERM, the second time" [ "$reaped" = 0 ]
check "the replica is the source's last state" [ "$(replica_digest)" = "$last" ]
check "--json: each of the 3 runs starts with an image, then a line per state applied, tx_id growing, a lag" \
	python3 - "$ROOT/fout" <<'EOF2'
import json, sys
runs = []
for l in open(sys.argv[1]):
    o = json.loads(l)
    if "run" in o:
        runs.append([])
        continue
    assert {"tenant", "applied", "tx_id", "lag_ms", "source_ms", "pages", "db_pages"} <= o.keys(), o
    assert o["tenant"] == "app" and o["lag_ms"] > -5000, o
    runs[-1].append(o)
assert len(runs) == 3, [len(r) for r in runs]
for r in runs:
    assert r and r[0]["applied"] == "image", r[:1]
    tx = [o["tx_id"] for o in r]
    assert tx == sorted(set(tx)), tx
assert sum(1 for r in runs for o in r if o["applied"] == "transaction") > 40
EOF2

if [ "${WS_FAULTS:-0}" = 1 ]; then
	# Equal to the source at every state it applies (the head comment).
	mkdir -p pauses
	rm -f points holder.stop
	: >fout
	python3 holder.py pauses points &
	holder=$!
	start_follow 4 WS_FAULT=replica.applied:1+:pause WS_PAUSE_DIR="$ROOT/pauses"
	python3 writer.py 80
	wait_source
	kill -TERM "$fpid"
	reap "$fpid" "$ROOT/ferr" "follow (paused after each state)"
	touch holder.stop
	wait "$holder"
	check "paused after each state: exit 0 after SIGTERM" [ "$reaped" = 0 ]
	check "paused after each state: the replica, right after each, is the source's state at its tx_id" \
		python3 check_points.py fout points

	# Killed inside an apply (the head comment).
	rm -rf pauses && mkdir pauses
	start_follow 5 WS_FAULT=replica.before_publish:6:pause WS_PAUSE_DIR="$ROOT/pauses"
	python3 writer.py 40 &
	w=$!
	check "paused inside an apply" wait_paused pauses
	before=$(replica_digest)
	check "paused inside an apply: the replica reads as a committed state" committed "$before"
	kill -KILL "$fpid"
	reap "$fpid" "$ROOT/ferr" "follow (killed inside an apply)"
	rm -f pauses/*
	after=$(replica_digest)
	check "killed inside an apply: the replica is a committed state, the one before the transaction or after it" \
		python3 -c "
s = []
for d in open('states').read().split():
    s += [d] if not s or s[-1] != d else []  # a writer started again records the state it found
assert '$after' in s and s.index('$after') - s.index('$before') in (0, 1)"
	check "killed inside an apply: sqlite3 finds the replica sound" bash -c "[ \"\$(sqlite3 replica.db 'PRAGMA integrity_check')\" = ok ]"
	start_follow 6
	wait "$w"
	wait_source
	kill -TERM "$fpid"
	reap "$fpid" "$ROOT/ferr" "follow (after the kill inside an apply)"
	check "killed inside an apply, started again: exit 0 after SIGTERM" [ "$reaped" = 0 ]
	check "killed inside an apply, started again: the replica is the source's last state" \
		[ "$(replica_digest)" = "$(tail -n 1 states)" ]
fi

touch stop
wait "$r1" "$sh"
kill -TERM "$rpid"
reap "$rpid" "$ROOT/err" "replicate"
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
	"[ $rc = 1 ] && grep -q '^walship: follow: replica notes.txt: not a SQLite database' err && cmp -s notes.txt notes.before"
mkdir adir
ws follow --sink "file://$ROOT/sink" --tenant app -o adir
check "a replica that is a directory: refused, named" bash -c "[ $rc = 1 ] && grep -q '^walship: follow: replica adir: cannot open it: Is a directory' err"
busy_writer_start
ws follow --sink "file://$ROOT/sink" --tenant app -o busy.db
busy_writer_end
check "a replica in use by another writer: refused, named" bash -c \
	"[ $rc = 1 ] && grep -q '^walship: follow: replica busy.db: in use by another writer' err"
check "a replica in use by another writer: its writer's transaction is intact" \
	[ "$(sqlite3 busy.db 'SELECT count(*) FROM x')" = 1 ]

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
