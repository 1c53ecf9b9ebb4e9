#!/usr/bin/env bash
# restore --frame GEN:N of a generation valid from frame 0 paused once its
# target is chosen
# (WS_FAULT=restore.after_choose:1:pause) while the sink moves under it: the
# writer commits on, its WAL restarts (a new generation), its file is
# replaced (a re-base), and a checkpoint with retention removes the history
# the chosen state lies in. Released, restore writes exactly the state the
# source committed at GEN:N (its digest recorded when that state was
# acknowledged), or refuses with an error naming what is gone and writes
# nothing; never another state.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SRC=${WS_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
DIGEST=$SRC/tests/data/fixture_digest.py
URL="file://$ROOT/sink"
mkdir -p pauses

# commit_ship N: N transactions, each shipped and its point recorded in points.txt
commit_ship() {
	local i p
	for i in $(seq "$1"); do
		sq a.db "INSERT INTO t(v) VALUES (randomblob(200 + $i));" >/dev/null
		ship
		record_point
	done
}
# paused_restore GEN:N: start restore --frame GEN:N, wait until it paused
paused_restore() {
	rm -f r.db pauses/*
	WS_FAULT=restore.after_choose:1:pause WS_PAUSE_DIR="$ROOT/pauses" \
		"$WS_BIN" restore --sink "$URL" --tenant a --frame "$1" -o r.db >paused.out 2>paused.err &
	pid=$!
	check "restore --frame $1 paused at restore.after_choose" wait_paused pauses
}
release() { rm -f pauses/*; reap "$pid" paused.err "restore (paused)"; }

sq a.db "PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);" >/dev/null
: >points.txt
commit_ship 2
# A generation whose stored run is valid from frame 0: its re-base is taken
# while the WAL holds a spilled transaction and no commit yet (a writer
# with a tiny cache; the WAL was truncated before, so the spill starts a
# new generation), the transaction then commits in the same generation.
sq a.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
python3 - <<'PY' &
import os, sqlite3, time
c = sqlite3.connect("a.db", isolation_level=None)
c.execute("PRAGMA cache_size=2")
c.execute("BEGIN")
c.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<300) "
          "INSERT INTO t(v) SELECT randomblob(1000) FROM c")
open("spilled", "w").close()
for _ in range(1500):
    if os.path.exists("go"):
        break
    time.sleep(0.02)
c.execute("COMMIT")
os._exit(0)  # no close: the last connection's checkpoint would end the generation
PY
spiller=$!
for _ in $(seq 300); do [ -e spilled ] && break; sleep 0.05; done
ship
touch go
wait "$spiller"
ship
record_point
commit_ship 3
ws ls --sink "$URL" a
check "the live generation's run is valid from frame 0" eval 'sed -n 2p out | grep -qE "^0 +g[0-9a-f-]+ +rebase +0 "'
gen0=$(sed -n 2p out | awk '{print $2}')
read -r target want < <(grep "^$gen0:" points.txt | sed -n 2p)

echo "# paused while the writer goes on, its WAL restarts and its file is replaced"
paused_restore "$target"
commit_ship 3
sq a.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
commit_ship 3
sq a.db "VACUUM INTO 'b.db';" >/dev/null
rm -f a.db-wal a.db-shm
mv b.db a.db
sq a.db "PRAGMA journal_mode=WAL; INSERT INTO t(v) VALUES (x'01');" >/dev/null
ship
ws ls --sink "$URL" a
# (--once does not see the WAL restart happen: the next tail re-bases.)
check "the sink moved on: two re-bases after the chosen state's chain" \
	eval '[ "$(grep -c " rebase " out)" -ge 3 ]'
release
check "released: exit 0" [ "$reaped" = 0 ]
check "the restore is the state committed at $target" eval '[ "$(python3 "$DIGEST" r.db)" = "$want" ]'

echo "# paused while a checkpoint and retention remove the history it chose from"
read -r target want < <(grep "^$gen0:" points.txt | sed -n 1p)
paused_restore "$target"
commit_ship 2
ws checkpoint --sink "$URL"
check "checkpoint: exit 0" [ "$rc" = 0 ]
ws retention --sink "$URL" --keep-checkpoints 1
check "retention: exit 0, objects deleted" eval '[ "$rc" = 0 ] && [ -s out ]'
release
if [ "$reaped" = 0 ]; then
	check "released after retention: the restore is the state committed at $target" \
		eval '[ "$(python3 "$DIGEST" r.db)" = "$want" ]'
else
	check "released after retention: refused naming a missing object, nothing written" \
		eval 'grep -qiE "missing|not found|removed" paused.err && [ ! -e r.db ]'
fi
# Every recorded point still in the stored history restores exactly, the
# rest are refused (never a wrong state).
while read -r p d; do
	rm -f r.db
	ws restore --sink "$URL" --tenant a --frame "$p" -o r.db
	if [ "$rc" = 0 ]; then
		check "restore --frame $p after retention: the state committed then" \
			eval '[ "$(python3 "$DIGEST" r.db)" = "$d" ]'
	else
		check "restore --frame $p after retention: refused naming why ($(head -c 160 err)), nothing written" \
			eval '[ ! -e r.db ] && grep -q "tenant a: " err'
	fi
done <points.txt

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
