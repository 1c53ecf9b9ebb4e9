# shellcheck shell=bash
# shellcheck disable=SC2034  # rc and reaped are read by the scripts that source this file
# Harness shared by the integration tests, sourced by each test_*.sh after
# `set -euo pipefail`:
#   . "$(dirname "$0")/lib.sh"
# Checks the tools, makes a fresh scratch dir $ROOT (named after the script,
# kept on failure) and cd's into it, and defines the pass/fail counters and
# the helpers below. A script ends with:
#   echo "$pass passed, $fail failed"
#   [ "$fail" = 0 ]
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).

: "${WS_BIN:?WS_BIN must name the walship binary}"
command -v sqlite3 >/dev/null || { echo "sqlite3 CLI not found"; exit 1; }
command -v python3 >/dev/null || { echo "python3 not found"; exit 1; }

# The source tree (before the cd below: this file's path may be relative).
WS_SRC=${WS_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
ROOT="${WS_TEST_TMP:-/tmp}/$(basename "$0" .sh).$$"
rm -rf "$ROOT"
mkdir -p "$ROOT"
cd "$ROOT"
cleanup() {
	local p
	for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
	if [ "${fail:-1}" = 0 ]; then rm -rf "$ROOT"; fi
}
trap cleanup EXIT

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   - $1"; }
bad() {
	fail=$((fail + 1))
	echo "FAIL - $1"
	# head first: `sed | head` dies of SIGPIPE under pipefail on a large
	# output, ending the script before its summary.
	if [ -s "$ROOT/out" ]; then head -n 20 "$ROOT/out" | cut -c1-300 | sed 's/^/    stdout: /'; fi
	if [ -s "$ROOT/err" ]; then head -n 20 "$ROOT/err" | cut -c1-300 | sed 's/^/    stderr: /'; fi
}
# check DESC CMD...: CMD's exit status decides.
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else bad "$desc"; fi
}

# ws ARGS...: run walship, stdout -> out, stderr -> err, status -> $rc.
rc=0
ws() {
	set +e
	"$WS_BIN" "$@" >"$ROOT/out" 2>"$ROOT/err"
	rc=$?
	set -e
	no_sanitizer_report "$ROOT/err" "walship $*"
}
# wait_stopped PID: the process stopped itself (a WS_FAULT "stop" site
# fired) within 30 s.
wait_stopped() {
	local _
	for _ in $(seq 600); do
		[ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" = T ] && return 0
		sleep 0.05
	done
	return 1
}
# wait_paused DIR: a WS_FAULT "pause" site fired (its file is in DIR) within 10 s.
wait_paused() {
	local _
	for _ in $(seq 200); do
		[ -n "$(ls "$1")" ] && return 0
		sleep 0.05
	done
	return 1
}
# reap PID ERRFILE WHAT: wait for the background walship PID; its exit status
# -> $reaped. A sanitizer report in ERRFILE fails, as WHAT.
reaped=0
reap() {
	set +e
	wait "$1"
	reaped=$?
	set -e
	no_sanitizer_report "$2" "$3"
}
# A sanitizer build may exit 1 on a report, which some checks expect anyway.
no_sanitizer_report() {
	if grep -qE 'ERROR: (Address|Leak|Thread|Memory)Sanitizer|WARNING: ThreadSanitizer|runtime error:' "$1"; then
		bad "sanitizer report from: $2"
		sed 's/^/    /' "$1" | head -40
	fi
}

# sq DB SQL...: the writer. Waits for locks like an application must (walship
# holds the write lock while it ships before its own WAL checkpoint); never
# checkpoints on close.
sq() {
	sqlite3 -batch -bail -cmd ".timeout 5000" -cmd ".dbconfig no_ckpt_on_close on" "$@" | sed '/^ *no_ckpt_on_close on$/d'
}
dump() { sq "$1" .dump; }
# same_rows DB1 DB2: table t holds the same rows in both (a hash of every
# row: .dump of a few hundred MiB of blobs takes longer than a test should).
same_rows() {
	local a b
	a=$(sq "$1" "SELECT hex(sha3_query('SELECT * FROM t ORDER BY 1'))")
	b=$(sq "$2" "SELECT hex(sha3_query('SELECT * FROM t ORDER BY 1'))")
	[ -n "$a" ] && [ "$a" = "$b" ]
}
same_dump() { [ "$(dump "$1")" = "$(dump "$2")" ] && [ -n "$(dump "$1")" ]; }

# need_radosgw: the S3 tests' precondition, the radosgw fixture that ctest
# starts (WS_S3_DIR with its env file) and the curl CLI; exits the test
# with a failure naming what is missing.
need_radosgw() {
	if [ -z "${WS_S3_DIR:-}" ] || [ ! -f "$WS_S3_DIR/env" ]; then
		bad "WS_S3_DIR is unset or has no env file (got '${WS_S3_DIR:-}'): this test needs the radosgw fixture (ctest -R 's3_server|<test>' starts it)"
		echo "$pass passed, $fail failed"
		exit 1
	fi
	command -v curl >/dev/null || { bad "curl CLI not found"; echo "$pass passed, $fail failed"; exit 1; }
}

# make_bucket ENDPOINT NAME: creates the bucket (SigV4 with the fixture's
# credentials, load_s3_env first); on failure the test ends, failed, naming
# the HTTP status and body.
make_bucket() {
	local code
	code=$(curl -sS --max-time 30 -o "$ROOT/mkbucket.body" -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
		-X PUT "$1/$2" || true)
	if [ "$code" != 200 ]; then
		bad "create bucket $2 at $1: HTTP $code $(cat "$ROOT/mkbucket.body" 2>/dev/null)"
		echo "$pass passed, $fail failed"
		exit 1
	fi
}

# start_faultproxy ENDPOINT: tests/s3/faultproxy.py ($WS_FAULTPROXY) in
# front of ENDPOINT, passing everything, its control file $ROOT/control.json
# (set_fault JSON changes it), its counts in $ROOT/proxy.stats; sets PROXY
# (its URL) and PROXY_PID (killed on exit with the script's other jobs).
start_faultproxy() {
	: "${WS_FAULTPROXY:?WS_FAULTPROXY must name tests/s3/faultproxy.py}"
	echo '{"mode": "pass"}' >"$ROOT/control.json"
	rm -f "$ROOT/proxy.port"
	python3 "$WS_FAULTPROXY" --upstream "${1#http://}" --port-file "$ROOT/proxy.port" \
		--control "$ROOT/control.json" --stats "$ROOT/proxy.stats" >"$ROOT/proxy.log" 2>&1 &
	PROXY_PID=$!
	local _
	for _ in $(seq 200); do [ -s "$ROOT/proxy.port" ] && break; sleep 0.05; done
	if [ ! -s "$ROOT/proxy.port" ]; then
		bad "the fault proxy did not start ($(cat "$ROOT/proxy.log"))"
		echo "$pass passed, $fail failed"
		exit 1
	fi
	PROXY="http://127.0.0.1:$(cat "$ROOT/proxy.port")"
}
# set_fault JSON: the fault proxy's control (re-read when it changes).
set_fault() {
	echo "$1" >"$ROOT/control.json.tmp"
	mv "$ROOT/control.json.tmp" "$ROOT/control.json"
}

# load_s3_env FILE: exports the endpoint and credentials a fixture's env file holds.
load_s3_env() {
	set -a
	# shellcheck disable=SC1090
	. "$1"
	set +a
	: "${WS_S3_ENDPOINT:?$1 has no WS_S3_ENDPOINT}"
	export AWS_REGION="${AWS_REGION:-us-east-1}"
}

# replica_helpers: the live-replica tests' Python helpers, in the current
# directory. digest.py: the digest of table t's rows. writer.py N: N
# transactions into src.db, each state's digest appended to ./states and,
# with the WAL position of its commit, to ./commits, checkpoints of every
# mode (given up soon while a reader holds its read mark), the connection
# closed and opened again. reader.py OUT: reads replica.db until ./stop
# exists, one digest per read transaction. holder.py PAUSE_DIR OUT: for each
# pause of a follower at replica.applied (WS_FAULT=replica.applied:1+:pause),
# the replica's digest then, until ./holder.stop exists.
# check_points.py JSON_OUT POINTS: the follower's state after each one it
# applied (holder.py's record, one per --json line) against ./commits.
replica_helpers() {
	cat >digest.py <<'PY'
import hashlib
def digest(c):
    h = hashlib.sha256()
    for row in c.execute("SELECT id, v FROM t ORDER BY id"):
        h.update(repr(row).encode())
    return h.hexdigest()
PY

	# writer N: N transactions, a checkpoint of each mode in turn, restarts.
	cat >writer.py <<'PY'
import os, random, sqlite3, struct, sys, time
sys.path.insert(0, os.getcwd())
from digest import digest
n = int(sys.argv[1])
modes = ["PASSIVE", "FULL", "RESTART", "TRUNCATE"]
rec = open("states", "a")
com = open("commits", "a")
shm = None

def record(c):
    # Under the write lock (nothing can commit or restart the WAL): the
    # state, and the wal-index header's mxFrame (-shm bytes 16..19, native
    # order) and salts (32..39), the commit's frame and WAL generation.
    # Not known ("-"): a frame of 0 (walship's own WAL checkpoint restarted
    # the WAL between the commit and this lock), or no whole header (its
    # two copies differ, or the -shm was being rebuilt).
    # The -shm stays open: closing a descriptor of it would drop this
    # process's POSIX locks on it, SQLite's among them (another process could
    # then truncate it under SQLite's mapping). Opened again only once SQLite
    # deleted it (the inode changed), whose locks are gone with it.
    global shm
    c.execute("BEGIN IMMEDIATE")
    d = digest(c)
    ino = os.stat("src.db-shm").st_ino
    if shm is None or os.fstat(shm).st_ino != ino:
        if shm is not None:
            os.close(shm)
        shm = os.open("src.db-shm", os.O_RDONLY)
    h = os.pread(shm, 96, 0)
    c.execute("ROLLBACK")
    mx = struct.unpack("=I", h[16:20])[0] if len(h) == 96 and h[:48] == h[48:] else 0
    rec.write(d + "\n"); rec.flush()
    com.write("%s %s %s\n" % (d, h[32:40].hex() if mx else "-", mx if mx else "-")); com.flush()

c = sqlite3.connect("src.db", isolation_level=None, timeout=10)
record(c)
for i in range(n):
    c.execute("BEGIN")
    for _ in range(1 + (i % 5) * (10 if i % 7 == 0 else 1)):
        c.execute("INSERT INTO t(v) VALUES (randomblob(?))", (300 + random.randrange(900),))
    if i % 6 == 5:
        c.execute("DELETE FROM t WHERE id % 4 = 0")
    c.execute("COMMIT")
    record(c)
    if i % 8 == 7:
        # Modes that wait for readers give up soon while replicate holds its read mark.
        c.execute("PRAGMA busy_timeout=50")
        c.execute(f"PRAGMA wal_checkpoint({modes[(i // 8) % 4]})").fetchall()
        c.execute("PRAGMA busy_timeout=10000")
    if i % 20 == 19 and i + 1 < n:
        c.close()
        c = sqlite3.connect("src.db", isolation_level=None, timeout=10)
    time.sleep(0.005)
c.close()
PY

	# reader OUT: read the replica until ./stop exists, one digest per read transaction.
	cat >reader.py <<'PY'
import os, sqlite3, sys, time
sys.path.insert(0, os.getcwd())
from digest import digest
out = open(sys.argv[1], "w")
c = sqlite3.connect("replica.db", isolation_level=None, timeout=10)
while not os.path.exists("stop"):
    try:
        c.execute("BEGIN")
        d = digest(c)
        c.execute("COMMIT")
        out.write(d + "\n")
    except sqlite3.OperationalError as e:
        c.execute("ROLLBACK") if c.in_transaction else None
        if "no such table" not in str(e):
            out.write("ERROR " + str(e) + "\n")
    time.sleep(0.002)
PY

	# holder PAUSE_DIR OUT: while a follower is paused right after a state
	# it applied, the replica's digest in one read transaction, then let it go.
	cat >holder.py <<'PY'
import os, sqlite3, sys, time
sys.path.insert(0, os.getcwd())
from digest import digest
pdir, out = sys.argv[1], open(sys.argv[2], "w")
c = None  # opened at the first pause: the follower creates the replica
while not os.path.exists("holder.stop"):
    held = os.listdir(pdir)
    assert len(held) <= 1, held
    for name in held:
        c = c or sqlite3.connect("replica.db", isolation_level=None, timeout=10)
        c.execute("BEGIN")
        out.write(digest(c) + "\n"); out.flush()
        c.execute("COMMIT")
        os.unlink(os.path.join(pdir, name))
    time.sleep(0.001)
PY

	# check_points JSON_OUT POINTS: state k the holder read is the one the
	# follower's k-th --json line names: a committed state of the source
	# (./commits), a transaction exactly the commit after the state before
	# it, at the source's commit frame for it (tx_id's low 32 bits), its
	# chain (high 32 bits) the previous transaction's exactly when their
	# WAL generations (salts) are the same, tx_id growing; the last the
	# source's last.
	cat >check_points.py <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if '"applied"' in l]
points = open(sys.argv[2]).read().split()
order, pos, pos_of = [], {}, {}
for l in open("commits"):
    d, salt, frame = l.split()
    if order and order[-1][0] == d:
        continue  # a writer started again records the state it found
    assert d not in pos_of, "two commits of one state: the digests do not tell them apart"
    pos_of[d] = len(order)
    order.append((d, salt, None if frame == "-" else int(frame)))
assert len(lines) == len(points), f"{len(lines)} --json lines, {len(points)} pauses"
prev = None  # (n, line)
checked = txns = 0
for k, (o, d) in enumerate(zip(lines, points)):
    assert d in pos_of, f"state {k} ({o}) is no state the source committed"
    n = pos_of[d]
    tx = o["tx_id"]
    chain, frame = tx >> 32, tx & 0xFFFFFFFF
    if prev:  # a Hydrated again may be at the tx_id already applied
        assert tx > prev[1]["tx_id"] or (o["applied"] == "image" and tx == prev[1]["tx_id"]), \
            f"tx_id went back: {prev[1]} then {o}"
    if o["applied"] == "image":
        assert not prev or n >= prev[0], f"image {o} is commit {n}, before commit {prev[0]} it held"
    else:
        txns += 1
        assert prev, f"a transaction before any image: {o}"
        assert n == prev[0] + 1, f"{o}: the replica is commit {n}, not the one after commit {prev[0]}"
        if order[n][2] is not None:
            checked += 1
            assert frame == order[n][2], f"{o}: tx_id frame {frame}, the source committed it at frame {order[n][2]}"
        p = prev[1]
        pn = prev[0]
        if p["applied"] == "transaction" and order[n][1] != "-" and order[pn][1] != "-":
            same = order[n][1] == order[pn][1]
            assert (chain == p["tx_id"] >> 32) == same, f"{p} then {o}: chain vs WAL generation ({order[pn][1]} -> {order[n][1]})"
    prev = (n, o)
assert prev and prev[0] == len(order) - 1, f"ends at commit {prev and prev[0]} of {len(order) - 1}"
assert txns >= 20 and checked >= 0.9 * txns, f"{txns} transactions, {checked} with a known frame"
print(f"{len(lines)} states applied ({txns} transactions, {checked} at their frame) each the source's")
PY
}

# busy_writer_start: a writer process holds busy.db's (a WAL database with
# table x) write lock, one row inserted and not committed, until
# busy_writer_end (which commits it and waits for the process).
busy_writer_start() {
	sqlite3 busy.db "PRAGMA journal_mode=wal; CREATE TABLE IF NOT EXISTS x(y);" >/dev/null
	rm -f busy.held busy.done
	python3 - <<'PY' &
import sqlite3, time, os
c = sqlite3.connect("busy.db", isolation_level=None)
c.execute("BEGIN IMMEDIATE"); c.execute("INSERT INTO x VALUES (1)")
open("busy.held", "w").close()
while not os.path.exists("busy.done"):
    time.sleep(0.05)
c.execute("COMMIT")
PY
	busy_pid=$!
	local _
	for _ in $(seq 100); do [ -e busy.held ] && break; sleep 0.05; done
}
busy_writer_end() {
	touch busy.done
	wait "$busy_pid"
}

# Recorded points of tenant a (a.db) shipped to $URL: ship (replicate --once,
# the test ends on failure), point ("GEN:FRAME" of the state the watermark
# names now, as restore --frame takes it) and record_point (that point and
# a.db's digest, tests/data/fixture_digest.py, appended to points.txt).
ship() { ws replicate --sink "$URL" --once a=a.db; [ "$rc" = 0 ] || { bad "replicate --once: exit $rc"; exit 1; }; }
point() {
	ws ls --sink "$URL" --tenant a --json
	python3 - "$ROOT/out" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))["watermark"]
g = w["generation"]
print("g%08x-%08x%08x:%d" % (g["checkpoint_seq"], g["salt"][0], g["salt"][1], w["last_frame"]))
PY
}
record_point() { echo "$(point) $(python3 "$WS_SRC/tests/data/fixture_digest.py" a.db)" >>points.txt; }
