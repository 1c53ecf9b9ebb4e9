#!/usr/bin/env bash
# Exactness through the CLI, with `walship replicate` running continuously
# (the engine, inotify wake-ups, default configuration) next to sqlite3
# writers:
#  - a database replaced at its path while replicate runs (rm -wal/-shm, mv
#    another database into place, write to it) is shipped as a new life:
#    the restore is the new database exactly, never a splice of the two;
#  - the same while replicate is stopped, and replicate started again;
#  - a database whose file runs past its end (SQLITE_FCNTL_CHUNK_SIZE):
#    every state as shipped, a checkpoint, verify;
#  - an empty file and databases in rollback-journal mode, which replicate
#    never keeps locked;
#  - a WAL file SQLite reads as empty (zeroed, short, bad header checksum);
#  - a re-base shipped by a clock that is behind, and restore --time.
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

SINK="$ROOT/sink"
URL="file://$SINK"

mkdb() { # mkdb PATH ROWS TAG: a WAL-mode database with ROWS rows tagged TAG
	rm -f "$1" "$1-wal" "$1-shm"
	sq "$1" "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT, v BLOB);" >/dev/null
	sq "$1" "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $2)
	         INSERT INTO t(tag, v) SELECT '$3', randomblob(300) FROM c;" >/dev/null
}
# wait_restores_to DB TENANT SECONDS: poll restore until it equals DB's dump.
wait_restores_to() {
	local i
	for i in $(seq $(($3 * 5))); do
		rm -f r.db
		if "$WS_BIN" restore --sink "$URL" --tenant "$2" -o r.db >/dev/null 2>&1 && same_dump "$1" r.db; then
			return 0
		fi
		sleep 0.2
	done
	return 1
}
restore_r() { # restore_r SINK TENANT [ARGS...]: restore into a fresh r.db (rc as ws)
	rm -f r.db
	ws restore --sink "$1" --tenant "$2" "${@:3}" -o r.db
}
tags() { sq "$1" "SELECT group_concat(DISTINCT tag) FROM t;"; }

# ---- replaced while replicate runs ------------------------------------------------
echo "# replaced while replicate runs"
mkdb a.db 164 old
"$WS_BIN" replicate --sink "$URL" a=a.db >rep.out 2>rep.err &
rep=$!
check "the first state ships" wait_restores_to a.db a 20
sq a.db "INSERT INTO t(tag, v) VALUES ('old', randomblob(300));" >/dev/null
check "a later commit ships" wait_restores_to a.db a 20

mkdb b.db 34 new
sq b.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
rm -f a.db-wal a.db-shm
mv b.db a.db
rm -f b.db-wal b.db-shm
sq a.db "INSERT INTO t(tag, v) VALUES ('new', randomblob(300)); INSERT INTO t(tag, v) VALUES ('new', randomblob(300));" >/dev/null
check "the replaced database ships as itself" wait_restores_to a.db a 20
rm -f r.db
"$WS_BIN" restore --sink "$URL" --tenant a -o r.db >/dev/null 2>&1 || true
check "no row of the old database in the restore" [ "$(tags r.db)" = "new" ]
check "restored row count is the new database's" [ "$(sq r.db 'SELECT count(*) FROM t;')" = 36 ]
kill -TERM "$rep" 2>/dev/null || true
reap "$rep" rep.err "replicate (replaced while running)"
check "replicate exits 0 after SIGTERM" [ "$reaped" = 0 ]
ws verify --sink "$URL" --tenant a
check "verify passes" [ "$rc" = 0 ]

# ---- replaced while replicate is stopped ---------------------------------------------
echo "# replaced while replicate is stopped"
mkdb c.db 20 third
sq c.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
rm -f a.db-wal a.db-shm
mv c.db a.db
rm -f c.db-wal c.db-shm
ws replicate --sink "$URL" --once a=a.db
check "replicate --once after the swap: exit 0" [ "$rc" = 0 ]
restore_r "$URL" a
check "restore is the third database" eval 'same_dump a.db r.db && [ "$(tags r.db)" = third ]'
ws verify --sink "$URL" --tenant a
check "verify passes" [ "$rc" = 0 ]

# ---- replaced while a tail is paused at its scan (WS_FAULT pause) ---------------------
echo "# replaced while a tail is paused (WS_FAULT=stream.after_scan:1:pause)"
mkdir -p pauses
sq a.db "INSERT INTO t(tag, v) VALUES ('third', randomblob(300));" >/dev/null
WS_FAULT=stream.after_scan:1:pause WS_PAUSE_DIR="$ROOT/pauses" \
	"$WS_BIN" replicate --sink "$URL" --once a=a.db >paused.out 2>paused.err &
pid=$!
check "the tail paused at stream.after_scan" wait_paused pauses
mkdb d.db 7 fourth
sq d.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
rm -f a.db-wal a.db-shm
mv d.db a.db
rm -f d.db-wal d.db-shm
rm -f pauses/*
reap "$pid" paused.err "replicate --once (paused)"
# The paused call acknowledges nothing; the engine's retry re-bases onto the
# new file, so --once still ends with it shipped.
check "the paused call names the replacement, the retry ships: exit 0" \
	eval '[ "$reaped" = 0 ] && grep -q "replaced at its path during the call; nothing acknowledged" paused.err'
restore_r "$URL" a
check "restore is the fourth database" eval 'same_dump a.db r.db && [ "$(tags r.db)" = fourth ]'

echo "# a database file that runs past the database's end (SQLITE_FCNTL_CHUNK_SIZE)"
# SQLite grows such a file a chunk at a time, and a commit on an empty WAL
# takes its size from the file: commit frames then say more pages than
# page 1's in-header size, which is what SQLite reads. Every acknowledged
# state restores equal to the source (each checked as it is shipped), a
# checkpoint of it builds and restores, and verify passes.
CS="$ROOT/chunk"
CU="file://$CS"
chunked() { sq "$1" ".filectrl chunk_size 1048576" "${@:2}" >/dev/null; }
# commit_past_header DB: the WAL's last commit frame says more pages than page 1's header
commit_past_header() {
	python3 - "$1" <<'PY'
import struct, sys
db = sys.argv[1]
h = open(db, "rb").read(100)
w = open(db + "-wal", "rb").read()
ps = struct.unpack(">I", w[8:12])[0]
last = 0
off = 32
while off + 24 + ps <= len(w):
    n = struct.unpack(">I", w[off + 4:off + 8])[0]
    last = n or last
    off += 24 + ps
sys.exit(0 if last > struct.unpack(">I", h[28:32])[0] else 1)
PY
}
rm -f c.db c.db-wal c.db-shm
chunked c.db "PRAGMA journal_mode=WAL;" "CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT, v BLOB);" \
	"INSERT INTO t(tag, v) VALUES('c', randomblob(300));" "PRAGMA wal_checkpoint(TRUNCATE);"
for round in 1 2 3 4; do
	chunked c.db "INSERT INTO t(tag, v) SELECT 'c', randomblob(300) FROM generate_series(1, $((round * round * 300)));"
	[ "$round" = 1 ] && check "round 1: the WAL's commit says more pages than page 1 (the case under test)" \
		commit_past_header c.db
	ws replicate --sink "$CU" --once c=c.db
	check "round $round: replicate: exit 0" [ "$rc" = 0 ]
	restore_r "$CU" c
	check "round $round: the acknowledged state restores equal to the source" \
		eval '[ "$rc" = 0 ] && same_dump c.db r.db && [ "$(sq r.db "PRAGMA integrity_check;")" = ok ]'
	if [ "$round" = 2 ]; then
		ws checkpoint --sink "$CU"
		check "round 2: checkpoint: exit 0" [ "$rc" = 0 ]
		restore_r "$CU" c --checkpoint latest
		check "round 2: the checkpoint restores equal to the source" eval '[ "$rc" = 0 ] && same_dump c.db r.db'
		chunked c.db "PRAGMA wal_checkpoint(TRUNCATE);"
	fi
done
ws verify --sink "$CU"
check "verify: exit 0" [ "$rc" = 0 ]

echo "# databases not in WAL mode, or empty, next to a running replicate: no lock held on them"
# A read transaction on a database in rollback-journal mode (an empty file
# is one) is a SHARED lock on its file. Held from one call to the next, it
# kept the application from writing, and from switching the database to
# WAL mode, for good: an empty file replicate was started on, a database in
# DELETE mode, and docs/CLI.md's recovery flow (a restored file, which
# restore leaves in rollback-journal mode, moved into place).
NS="$ROOT/nowal"
URL="file://$NS"
rm -f e.db e.db-wal e.db-shm k.db k.db-wal k.db-shm
: >e.db
sq k.db "PRAGMA journal_mode=DELETE; CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT, v BLOB);
         INSERT INTO t(tag, v) VALUES ('k', randomblob(300));" >/dev/null
"$WS_BIN" replicate --sink "$URL" e=e.db k=k.db >nowal.out 2>nowal.err &
rep=$!
looked() { [ -f "$NS/e/wm" ] && grep -q "k.db is not in WAL mode" nowal.err; }
for _ in $(seq 100); do looked && break; sleep 0.1; done
check "replicate ships the empty file and names the one not in WAL mode" looked
sleep 0.5 # a retry of k or two
check "the application writes the database in DELETE mode meanwhile" \
	sq k.db "INSERT INTO t(tag, v) VALUES ('k', randomblob(300));"
check "and switches it to WAL mode" sq k.db "PRAGMA journal_mode=WAL;"
check "the application makes the empty file a WAL database" \
	sq e.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT, v BLOB);
	         INSERT INTO t(tag, v) VALUES ('e', randomblob(300));"
sq k.db "INSERT INTO t(tag, v) VALUES ('k', randomblob(300));" >/dev/null
check "both ship once in WAL mode: e" wait_restores_to e.db e 20
check "both ship once in WAL mode: k" wait_restores_to k.db k 20
# The recovery flow: the application stops, the restored file replaces e.
rm -f x.db
"$WS_BIN" restore --sink "$URL" --tenant e -o x.db >/dev/null 2>&1
rm -f e.db-wal e.db-shm
mv x.db e.db
sleep 1 # replicate sees the new file (rollback-journal mode) and retries on it
check "the application writes the restored file moved into place" \
	sq e.db "INSERT INTO t(tag, v) VALUES ('e', randomblob(300));"
check "and switches it back to WAL mode" sq e.db "PRAGMA journal_mode=WAL;"
sq e.db "INSERT INTO t(tag, v) VALUES ('e', randomblob(300));" >/dev/null
check "which then ships" wait_restores_to e.db e 20
kill -TERM "$rep" 2>/dev/null || true
reap "$rep" nowal.err "replicate (databases not in WAL mode)"
check "replicate exits 0 after SIGTERM" [ "$reaped" = 0 ]

echo "# a WAL file SQLite reads as empty (zeroed, shorter than a header, a bad header checksum)"
# A crash before the header was synced, or a file zeroed: SQLite reads the
# database file alone and restarts the WAL at its next write. replicate
# read the same file as an error, every call, for good: no backup at all
# until the application wrote again. It now ships the database file, and
# then the commits made on top of it.
ZS="$ROOT/zwal"
for how in zeroed short badsum; do
	rm -f z.db z.db-wal z.db-shm
	sq z.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT, v BLOB);
	         INSERT INTO t(tag, v) VALUES ('z', randomblob(300)); PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
	case $how in
	zeroed) head -c 4096 /dev/zero >z.db-wal ;;
	short) printf '\067\177\006\202abc' >z.db-wal ;;
	badsum) python3 -c 'import struct,sys; sys.stdout.buffer.write(struct.pack(">8I", 0x377f0682, 3007000, 4096, 0, 1, 2, 3, 4) + bytes(4096 + 24))' >z.db-wal ;;
	esac
	dump z.db >z.dump
	ws replicate --sink "file://$ZS-$how" --once z=z.db
	check "$how WAL: replicate ships the database file: exit 0" [ "$rc" = 0 ]
	restore_r "file://$ZS-$how" z
	check "$how WAL: the restore is the database" eval '[ "$rc" = 0 ] && [ "$(dump r.db)" = "$(cat z.dump)" ]'
	sq z.db "INSERT INTO t(tag, v) VALUES ('z', randomblob(300));" >/dev/null
	ws replicate --sink "file://$ZS-$how" --once z=z.db
	restore_r "file://$ZS-$how" z
	check "$how WAL: the next commit ships on top" eval '[ "$rc" = 0 ] && same_dump z.db r.db'
done

# Stopped right after it read the zeroed header as an empty WAL (WS_FAULT
# stop), replicate holds its read transaction while the application
# commits, which restarts the WAL: what it ships is a state the source
# committed (the database file its read transaction saw, or, when the call
# starts over on the new WAL, the commit); the next call ships the commit.
rm -f z.db z.db-wal z.db-shm
sq z.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT, v BLOB);
         INSERT INTO t(tag, v) VALUES ('z', randomblob(300)); PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
head -c 4096 /dev/zero >z.db-wal
dump z.db >z.dump
WS_FAULT=stream.after_wal_header:1:stop "$WS_BIN" replicate --sink "file://$ZS-paused" --once z=z.db \
	>zp.out 2>zp.err &
zp=$!
check "replicate stops after reading the zeroed header" wait_stopped "$zp"
check "the application commits meanwhile (restarting the WAL)" \
	sq z.db "INSERT INTO t(tag, v) VALUES ('z2', randomblob(300));"
dump z.db >z2.dump
kill -CONT "$zp"
reap "$zp" zp.err "replicate --once (stopped at a zeroed WAL header)"
check "the stopped call ships: exit 0" [ "$reaped" = 0 ]
restore_r "file://$ZS-paused" z
zr=none
[ "$(dump r.db)" = "$(cat z.dump)" ] && zr=before
[ "$(dump r.db)" = "$(cat z2.dump)" ] && zr=after
echo "# the stopped call shipped the state $zr the commit"
check "what it shipped is a state the source committed ($zr the commit)" eval '[ "$rc" = 0 ] && [ "$zr" != none ]'
ws replicate --sink "file://$ZS-paused" --once z=z.db
restore_r "file://$ZS-paused" z
check "the next call ships the commit" eval '[ "$rc" = 0 ] && same_dump z.db r.db'

echo "# a re-base shipped by a clock 60 s behind (faketime): restore --time never yields a later commit"
# Two tails shipped by the real clock; then the WAL is reset and a third
# tail, a re-base, is shipped by a clock 60 s behind (NTP stepping back, a
# takeover by a host whose clock is behind). restore --time reads the run
# of manifests from its base that are stamped at or before the time, and
# the base is the re-base: stamped 60 s early, a time before every commit
# restored them all. Stamps no longer go back along a tenant's history.
FS="$ROOT/fake"
rm -f f.db f.db-wal f.db-shm
sq f.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT, v BLOB);
         INSERT INTO t(tag, v) VALUES ('f', randomblob(300));" >/dev/null
ws replicate --sink "file://$FS" --once f=f.db
sq f.db "INSERT INTO t(tag, v) VALUES ('f', randomblob(300));" >/dev/null
ws replicate --sink "file://$FS" --once f=f.db
sq f.db "PRAGMA wal_checkpoint(TRUNCATE); INSERT INTO t(tag, v) VALUES ('f', randomblob(300));" >/dev/null
# libfaketime is an LD_PRELOAD: an ASan build must be told to accept a
# library loaded ahead of its runtime.
set +e
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
	faketime -f -60s "$WS_BIN" replicate --sink "file://$FS" --once f=f.db >"$ROOT/out" 2>"$ROOT/err"
rc=$?
set -e
no_sanitizer_report "$ROOT/err" "faketime walship replicate"
check "the re-base by a clock 60 s behind ships: exit 0" [ "$rc" = 0 ]
T=$(date -u -d '-50 seconds' +%Y-%m-%dT%H:%M:%S.%3NZ) # before every commit above, after the early stamp
restore_r "file://$FS" f --time "$T"
check "restore --time before every commit: refused, nothing restored" eval '[ "$rc" = 1 ] && [ ! -e r.db ]'
ws restore --sink "file://$FS" --tenant f -o r.db
check "the latest state still restores" eval '[ "$rc" = 0 ] && same_dump f.db r.db'

echo "# a commit written past the wal-index's mxFrame (a writer that failed or died after writing it)"
# SQLite's readers and writers see the frames the wal-index names
# (mxFrame); a commit frame written after it, by a writer whose sync failed
# or that was killed before it updated the wal-index, is not committed: the
# next writer writes over it. The phantom commit here is a real SQLite
# commit, made in a copy of the database and its WAL and appended to the
# WAL by hand (a fake: a writer dying in that window cannot be produced on
# demand). The application keeps the database open throughout, so its
# wal-index stays in use.
PS="$ROOT/phantom"
rm -rf ph.db ph.db-wal ph.db-shm ph.ready ph.go ph.ready2 ph.go2 ph.ready3 ph.done phcopy-*
python3 - ph.db <<'PY' &
import os, shutil, sqlite3, sys, time
db = sys.argv[1]
def wait(name):
    while not os.path.exists(name):
        time.sleep(0.05)
def phantom(tag):
    # The copy recovers the same committed frames and writes its commit
    # after them; its WAL, written over ours, adds that commit past mxFrame.
    d = "phcopy-" + tag
    os.mkdir(d)
    shutil.copy(db, d + "/p.db")
    shutil.copy(db + "-wal", d + "/p.db-wal")
    p = sqlite3.connect(d + "/p.db", isolation_level=None)
    p.execute("INSERT INTO t(tag) VALUES (?)", (tag,))
    with open(d + "/p.db-wal", "rb") as f:
        wal = f.read()
    p.close()
    with open(db + "-wal", "rb") as f:
        ours = f.read()
    assert len(wal) > len(ours) or wal != ours[:len(wal)], "the copy wrote no frame"
    with open(db + "-wal", "r+b") as f:
        f.write(wal)
c = sqlite3.connect(db, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT)")
c.execute("INSERT INTO t(tag) VALUES ('a')")
c.execute("INSERT INTO t(tag) VALUES ('b')")
phantom("phantom")
open("ph.ready", "w").close()
wait("ph.go")
c.execute("INSERT INTO t(tag) VALUES ('c')")
phantom("phantom2")
open("ph.ready2", "w").close()
wait("ph.go2")
c.execute("INSERT INTO t(tag) VALUES ('d')")
open("ph.ready3", "w").close()
wait("ph.done")
c.close()
PY
phpid=$!
for _ in $(seq 100); do [ -e ph.ready ] && break; sleep 0.1; done
check "the phantom commit is in the WAL, the application does not see it" \
	eval '[ -e ph.ready ] && [ "$(sq ph.db "SELECT group_concat(tag) FROM t")" = a,b ]'
ws replicate --sink "file://$PS" --once ph=ph.db
check "replicate beside the phantom commit: exit 0" [ "$rc" = 0 ]
restore_r "file://$PS" ph
check "the restore is what the application committed, without the phantom" \
	eval '[ "$rc" = 0 ] && [ "$(sq r.db "SELECT group_concat(tag) FROM t")" = a,b ] && same_dump ph.db r.db'
touch ph.go
for _ in $(seq 100); do [ -e ph.ready2 ] && break; sleep 0.1; done
check "the next commit, written over the phantom, is there with another phantom after it" \
	eval '[ -e ph.ready2 ] && [ "$(sq ph.db "SELECT group_concat(tag) FROM t")" = a,b,c ]'
ws replicate --sink "file://$PS" --once ph=ph.db
check "the next commit ships: exit 0" [ "$rc" = 0 ]
restore_r "file://$PS" ph
check "the restore is the next commit, without the second phantom" \
	eval '[ "$rc" = 0 ] && [ "$(sq r.db "SELECT group_concat(tag) FROM t")" = a,b,c ] && same_dump ph.db r.db'
# The same bound, with a commit written over the phantom while the tail
# is stopped right after it read the WAL header and the wal-index.
WS_FAULT=stream.after_wal_header:1:stop "$WS_BIN" replicate --sink "file://$PS" --once ph=ph.db \
	>php.out 2>php.err &
php=$!
check "replicate stops after reading the WAL header beside the phantom" wait_stopped "$php"
touch ph.go2
for _ in $(seq 100); do [ -e ph.ready3 ] && break; sleep 0.1; done
check "the application commits over the phantom meanwhile" \
	eval '[ -e ph.ready3 ] && [ "$(sq ph.db "SELECT group_concat(tag) FROM t")" = a,b,c,d ]'
kill -CONT "$php"
reap "$php" php.err "replicate --once (stopped beside a phantom commit)"
restore_r "file://$PS" ph
got=$(sq r.db "SELECT group_concat(tag) FROM t")
check "the stopped call ships a state the application committed ($got)" \
	eval '[ "$reaped" = 0 ] && [ "$rc" = 0 ] && { [ "$got" = a,b,c ] || [ "$got" = a,b,c,d ]; }'
ws replicate --sink "file://$PS" --once ph=ph.db
restore_r "file://$PS" ph
check "the next call ships the commit" \
	eval '[ "$rc" = 0 ] && [ "$(sq r.db "SELECT group_concat(tag) FROM t")" = a,b,c,d ] && same_dump ph.db r.db'
touch ph.done
wait $phpid || true

echo "# a commit whose writer syncs the WAL slowly ships with no later write to wake replicate"
# The frames of the commit wake replicate; the wal-index, written after the
# sync, wakes nobody. A tail that runs during the sync leaves the frames (not
# committed yet) and must look again: the application writes nothing more.
# The slow disk is a shim (slowsync.c): fsync of the -wal sleeps 3 s.
cc -shared -fPIC -O1 -o slowsync.so "$(dirname "$0")/slowsync.c" -ldl
rm -f sl.db sl.db-wal sl.db-shm
sq sl.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT);
          INSERT INTO t(tag) VALUES ('a');" >/dev/null
SLS="$ROOT/slowsync-sink"
"$WS_BIN" replicate --sink "file://$SLS" sl=sl.db >sl.out 2>sl.err &
slrep=$!
check "the first state ships" eval 'URL="file://$SLS" wait_restores_to sl.db sl 20'
WS_SLOW_SYNC_MS=3000 LD_PRELOAD="$ROOT/slowsync.so" python3 - sl.db <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA synchronous=FULL")
c.execute("INSERT INTO t(tag) VALUES ('slow')")
c.close()
PY
check "the application's commit (3 s in its WAL sync) is there" [ "$(sq sl.db "SELECT group_concat(tag) FROM t")" = a,slow ]
check "it ships with nothing more written" eval 'URL="file://$SLS" wait_restores_to sl.db sl 10'

kill -TERM "$slrep" 2>/dev/null || true
reap "$slrep" sl.err "replicate (a writer with a slow WAL sync)"
check "replicate exits 0 after SIGTERM" [ "$reaped" = 0 ]

echo "# a writer killed in its WAL sync, the first commit of a new WAL generation"
# The application truncates the WAL (a restart: the wal-index gets the next
# salts, mxFrame 0), then another connection, which did not make the
# restart, begins the next generation with salts of its own, writes its
# commit and is killed in the commit's sync, before the wal-index names it:
# a commit SQLite never made (the next writer writes over it). A third
# connection keeps the database open throughout, so the wal-index stays in
# use. replicate --once runs while the writer syncs: nothing of it ships.
rm -f kw.db kw.db-wal kw.db-shm kw.hold.done
sq kw.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, tag TEXT);
          INSERT INTO t(tag) VALUES ('a');" >/dev/null
KS="$ROOT/killed-sink"
ws replicate --sink "file://$KS" --once kw=kw.db
check "the first state ships" [ "$rc" = 0 ]
python3 - kw.db <<'PY' &
import os, sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("SELECT count(*) FROM t").fetchall()
open("kw.hold", "w").close()
while not os.path.exists("kw.hold.done"):
    time.sleep(0.05)
PY
kwh=$!
for _ in $(seq 100); do [ -e kw.hold ] && break; sleep 0.1; done
check "the application truncates the WAL" eval '[ "$(sq kw.db "PRAGMA wal_checkpoint(TRUNCATE);")" = "0|0|0" ] && [ ! -s kw.db-wal ]'
dump kw.db >kw.before
WS_SLOW_SYNC_MS=30000 WS_SLOW_SYNC_SKIP=1 LD_PRELOAD="$ROOT/slowsync.so" python3 - kw.db <<'PY' &
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA synchronous=FULL")
c.execute("INSERT INTO t(tag) VALUES ('never')")
PY
kww=$!
for _ in $(seq 100); do [ "$(stat -c %s kw.db-wal)" -gt 4096 ] && break; sleep 0.1; done
check "the writer's commit is in the WAL, in its sync" eval '[ "$(stat -c %s kw.db-wal)" -gt 4096 ] && kill -0 "$kww"'
ws replicate --sink "file://$KS" --once kw=kw.db
check "replicate --once meanwhile: exit 0" [ "$rc" = 0 ]
kill -KILL "$kww" 2>/dev/null || true
wait "$kww" 2>/dev/null || true
check "the killed writer's commit is not the database's" [ "$(dump kw.db)" = "$(cat kw.before)" ]
restore_r "file://$KS" kw
check "the restore holds nothing of it" eval '[ "$rc" = 0 ] && [ "$(dump r.db)" = "$(cat kw.before)" ]'
sq kw.db "INSERT INTO t(tag) VALUES ('next');" >/dev/null
ws replicate --sink "file://$KS" --once kw=kw.db
restore_r "file://$KS" kw
check "the next writer's commit ships" eval '[ "$rc" = 0 ] && same_dump kw.db r.db'
touch kw.hold.done
wait "$kwh" || true

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
