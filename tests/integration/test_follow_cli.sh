#!/usr/bin/env bash
# walship replicate --follow NAME=REPLICA_DB: a live SQLite replica. A real
# writer process (checkpoints of every mode, its connection closed and
# opened again) records the digest of every state it commits; reader
# processes (Python's sqlite3, and the sqlite3 shell) read the replica all
# along, each read one transaction, and every digest they see must be a
# recorded state; at the end the replica is the source. Killed with -9
# mid-stream and started again, it rebuilds and follows on, the readers
# reading all along. With fault sites,
# an injected derive fault ends the query and --follow subscribes again,
# and the replica is checked equal to the source at every Progressed:
# WS_FAULT=replica.applied:1+:pause holds the follower's thread right after
# each state it applies (published to readers, its --json line not yet
# printed); holder.py reads the replica then and lets it go, so the k-th
# digest read is the state of the k-th --json line. check_points.py maps
# each to the writer's record (digest and WAL position of every commit): a
# state the source committed, each transaction exactly the commit after the
# state before it, its tx_id's frame the source's commit frame for it, its
# chain changing exactly with the WAL generation.
# Bad input: a malformed argument, an unknown tenant, the source as its own
# replica, a tenant followed twice, a replica that is no database, one in
# use by another writer.
#
# Env: WS_BIN, WS_TEST_TMP, WS_FAULTS.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

sqlite3 src.db "PRAGMA journal_mode=wal; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);" >/dev/null

replica_helpers

# wait_rebuilt N: until err shows N rebuilds (a Hydrated applied).
wait_rebuilt() {
	local i
	for i in $(seq 200); do
		[ "$(grep -c 'rebuilt at' "$ROOT/err" 2>/dev/null)" -ge "$1" ] && return 0
		sleep 0.05
	done
}

# follow_run TXNS [ENV...] (FOLLOW_KILL=1: kill -9 and restart it mid-stream;
# FOLLOW_JSON=1: --json, a line per state applied on stdout): replicate
# --follow with readers and the writer; the replica must reach the last state.
follow_run() {
	local txns=$1 i json=()
	shift
	[ "${FOLLOW_JSON:-0}" = 1 ] && json=(--json)
	rm -f states commits stop replica.db replica.db-wal replica.db-shm r1 r2 shell.out
	env "$@" "$WS_BIN" replicate --sink "file://$ROOT/sink" "${json[@]}" --follow app="$ROOT/replica.db" app="$ROOT/src.db" \
		>"$ROOT/out" 2>"$ROOT/err" &
	local pid=$!
	wait_rebuilt 1
	python3 reader.py r1 &
	local r1=$!
	python3 reader.py r2 &
	local r2=$!
	(while [ ! -e stop ]; do sqlite3 -cmd ".timeout 5000" replica.db "SELECT count(*) FROM t" >>shell.out 2>&1 || true; sleep 0.05; done) &
	local sh=$!
	if [ "${FOLLOW_KILL:-0}" = 1 ]; then
		# Killed mid-stream (kill -9: no chance to finish a write) while
		# the writer and the readers go on, then started again on the
		# same replica: it rebuilds from a new Hydrated and follows on.
		python3 writer.py "$txns" &
		local w=$!
		sleep 1
		kill -KILL "$pid"
		wait "$pid" || true
		env "$@" "$WS_BIN" replicate --sink "file://$ROOT/sink" --follow app="$ROOT/replica.db" app="$ROOT/src.db" \
			>>"$ROOT/out" 2>>"$ROOT/err" &
		pid=$!
		wait_rebuilt 2
		wait "$w"
	else
		python3 writer.py "$txns"
	fi
	local last
	last=$(tail -n 1 states)
	for i in $(seq 400); do
		[ "$(python3 -c 'import sqlite3,sys; sys.path.insert(0,"."); from digest import digest; print(digest(sqlite3.connect("replica.db", timeout=10)))' 2>/dev/null)" = "$last" ] && break
		sleep 0.05
	done
	touch stop
	wait "$r1" "$r2" "$sh"
	kill -TERM "$pid"
	reap "$pid" "$ROOT/err" "replicate --follow"
}

follow_run 120
check "exit 0 after SIGTERM" [ "$reaped" = 0 ]
check "the replica is the source's last state" bash -c \
	"[ \"\$(python3 -c 'import sqlite3,sys; sys.path.insert(0,\".\"); from digest import digest; print(digest(sqlite3.connect(\"replica.db\")))')\" = \"\$(tail -n 1 states)\" ]"
check "readers read all along" bash -c "[ \$(cat r1 r2 | wc -l) -gt 100 ]"
check "every read of the readers is a state the writer committed" python3 - <<'EOF'
states = set(open("states").read().split())
seen = open("r1").read().splitlines() + open("r2").read().splitlines()
errors = [l for l in seen if l.startswith("ERROR")]
assert not errors, errors[:3]
bad = [l for l in seen if l not in states]
assert not bad, f"{len(bad)} reads of states never committed, of {len(seen)}"
EOF
check "the sqlite3 shell reads it without an error" bash -c "[ -s shell.out ] && ! grep -v '^[0-9][0-9]*$' shell.out"
check "sqlite3 finds the replica sound" bash -c "[ \"\$(sqlite3 replica.db 'PRAGMA integrity_check')\" = ok ]"
check "the replica is in WAL mode" bash -c "[ \"\$(sqlite3 replica.db 'PRAGMA journal_mode')\" = wal ]"

FOLLOW_KILL=1 follow_run 200
check "killed: exit 0 after SIGTERM of the restarted one" [ "$reaped" = 0 ]
check "killed: it rebuilt again after its restart" bash -c "[ \$(grep -c 'rebuilt at' err) -ge 2 ]"
check "killed: the replica is the source's last state" bash -c \
	"[ \"\$(python3 -c 'import sqlite3,sys; sys.path.insert(0,\".\"); from digest import digest; print(digest(sqlite3.connect(\"replica.db\")))')\" = \"\$(tail -n 1 states)\" ]"
check "killed: every read across the kill is a committed state" python3 -c "
states = set(open('states').read().split())
seen = open('r1').read().splitlines() + open('r2').read().splitlines()
errors = [l for l in seen if l.startswith('ERROR')]
assert not errors, errors[:3]
assert seen and all(l in states for l in seen)"
check "killed: sqlite3 finds the replica sound" bash -c "[ \"\$(sqlite3 replica.db 'PRAGMA integrity_check')\" = ok ]"

if [ "${WS_FAULTS:-0}" = 1 ]; then
	# Equal to the source at every Progressed (the head comment).
	rm -rf pauses points holder.stop && mkdir pauses
	python3 holder.py pauses points &
	holder=$!
	FOLLOW_JSON=1 follow_run 80 WS_FAULT=replica.applied:1+:pause WS_PAUSE_DIR="$ROOT/pauses"
	touch holder.stop
	wait "$holder"
	check "paused after each state: exit 0 after SIGTERM" [ "$reaped" = 0 ]
	check "paused after each state: the replica, right after each, is the source's state at its tx_id" \
		python3 check_points.py out points
	check "paused after each state: every read is a committed state" python3 -c "
states = set(open('states').read().split())
seen = open('r1').read().splitlines() + open('r2').read().splitlines()
assert seen and all(l in states for l in seen)"

	follow_run 40 WS_FAULT=events.derive:3:fail
	check "fault: exit 0 after SIGTERM" [ "$reaped" = 0 ]
	check "fault: the cause logged, the query subscribed again" bash -c \
		"grep -q 'faulted (derive).*subscribing again' err && [ \$(grep -c 'rebuilt at' err) -ge 2 ]"
	check "fault: the replica is the source's last state" bash -c \
		"[ \"\$(python3 -c 'import sqlite3,sys; sys.path.insert(0,\".\"); from digest import digest; print(digest(sqlite3.connect(\"replica.db\")))')\" = \"\$(tail -n 1 states)\" ]"
	check "fault: every read is a committed state" python3 -c "
states = set(open('states').read().split())
seen = open('r1').read().splitlines() + open('r2').read().splitlines()
assert seen and all(l in states for l in seen)"
fi

# ---- bad input ----
S=(replicate --sink "file://$ROOT/sink" --once)
for arg in app "=x.db" "app=" ""; do
	ws "${S[@]}" --follow "$arg" app="$ROOT/src.db"
	check "--follow '$arg': usage error" bash -c "[ $rc = 2 ] && grep -q 'is not NAME=REPLICA_DB' err"
done
ws "${S[@]}" --follow nope=r.db app="$ROOT/src.db"
check "--follow nope=: usage error naming it" bash -c "[ $rc = 2 ] && grep -q \"'nope' is not a tenant\" err"
ws "${S[@]}" --follow app="$ROOT/src.db" app="$ROOT/src.db"
check "the source as its own replica: usage error" bash -c "[ $rc = 2 ] && grep -q \"tenant app's own database\" err"
ws "${S[@]}" --follow app=r1.db --follow app=r2.db app="$ROOT/src.db"
check "a tenant followed twice: usage error" bash -c "[ $rc = 2 ] && grep -q 'followed twice' err"
sqlite3 src2.db "PRAGMA journal_mode=wal; CREATE TABLE t(x);" >/dev/null
ws "${S[@]}" --follow app=r.db --follow b=./r.db app="$ROOT/src.db" b="$ROOT/src2.db"
check "one file the replica of two tenants: usage error" bash -c "[ $rc = 2 ] && grep -q 'is the replica of two tenants' err"
printf 'a text file, not a database, longer than the 100 bytes of a database header..................................\n' >notes.txt
cp notes.txt notes.before
ws "${S[@]}" --follow app="$ROOT/notes.txt" app="$ROOT/src.db"
check "a replica that is no database: refused, named, left as it was" bash -c \
	"[ $rc = 1 ] && grep -q 'notes.txt: not a SQLite database' err && cmp -s notes.txt notes.before"
busy_writer_start
ws "${S[@]}" --follow app="$ROOT/busy.db" app="$ROOT/src.db"
busy_writer_end
check "a replica in use by another writer: refused, named" bash -c \
	"[ $rc = 1 ] && grep -q 'busy.db: in use by another writer' err"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
