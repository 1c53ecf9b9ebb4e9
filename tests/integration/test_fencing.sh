#!/usr/bin/env bash
# Fencing through the CLI: two owners of one tenant on one file:// sink.
# A stale owner (lower epoch, or lower pointer generation) gets outcome
# "fenced", exits 3, and writes nothing at the sink (a fenced call is a pure
# read); a continuous stale replicator stops on its next tail after a
# takeover; restore afterwards equals the source.
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

# The sink's every file (lock files included) with its checksum.
snapshot() { (cd "$SINK" && find . -type f | sort | xargs -r sha256sum); }
# outcome FILE: the outcome of the single JSON line in FILE.
outcome() {
	python3 -c '
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(objs) == 1, objs
print(objs[0]["outcome"])
' "$1"
}
fenced_json() {
	python3 -c '
import json, sys
o = json.loads(open(sys.argv[1]).readline())
want = [int(x) for x in sys.argv[2:6]]
got = [o["current_epoch"], o["our_epoch"], o["current_pointer_generation"], o["our_pointer_generation"]]
assert o["outcome"] == "fenced" and o["tenant"] == "db", o
assert got == want, (got, want)
assert "rpo" not in o and "backpressure" not in o, o
' "$@"
}

SINK="$ROOT/sink"
URL="file://$SINK"
rm -f db.db db.db-wal db.db-shm
sq db.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null
n=0
write() { # write K: K more rows, one transaction each
	local _
	for _ in $(seq "$1"); do
		n=$((n + 1))
		sq db.db "INSERT INTO t VALUES ($n, hex(randomblob(200)));"
	done
}

# ---- a lower epoch is fenced ------------------------------------------------
echo "# lower epoch"
write 3
ws replicate --sink "$URL" --epoch 2 --once --json db.db
check "epoch 2 ships: exit 0, streamed" eval '[ "$rc" = 0 ] && [ "$(outcome out)" = streamed ]'
write 2
before=$(snapshot)
ws replicate --sink "$URL" --epoch 1 --once --json db.db
check "epoch 1 --once: exit 3" [ "$rc" = 3 ]
check "epoch 1 --once: outcome fenced with the real owner's token" fenced_json out 2 1 0 0
check "epoch 1 --once: stderr says fenced" grep -qi fenced err
after=$(snapshot)
check "epoch 1 --once: sink files and checksums unchanged" [ "$before" = "$after" ]
ws replicate --sink "$URL" --epoch 1 --once --json db.db
check "epoch 1 again: still fenced, exit 3" eval '[ "$rc" = 3 ] && [ "$after" = "$(snapshot)" ]'

ws replicate --sink "$URL" --epoch 2 --once --json db.db
check "epoch 2 continues: streamed" eval '[ "$rc" = 0 ] && [ "$(outcome out)" = streamed ]'

# ---- a lower pointer generation with an equal epoch is fenced -----------------
echo "# lower pointer generation"
write 2
ws replicate --sink "$URL" --epoch 2 --pointer-generation 7 --once --json db.db
check "epoch 2 / pg 7 ships: exit 0" eval '[ "$rc" = 0 ] && [ "$(outcome out)" != fenced ]'
write 2
before=$(snapshot)
ws replicate --sink "$URL" --epoch 2 --pointer-generation 6 --once --json db.db
check "epoch 2 / pg 6 --once: exit 3" [ "$rc" = 3 ]
check "epoch 2 / pg 6 --once: outcome fenced" fenced_json out 2 2 7 6
check "epoch 2 / pg 6 --once: sink files and checksums unchanged" [ "$before" = "$(snapshot)" ]
ws replicate --sink "$URL" --epoch 2 --once --json db.db
check "epoch 2 / pg 0 (default) is fenced too: exit 3, sink unchanged" \
	eval '[ "$rc" = 3 ] && fenced_json out 2 2 7 0 && [ "$before" = "$(snapshot)" ]'

ws replicate --sink "$URL" --epoch 2 --pointer-generation 7 --once --json db.db
check "the owner (2/7) ships the rest" eval '[ "$rc" = 0 ] && [ "$(outcome out)" = streamed ]'
ws restore --sink "$URL" --tenant db -o r1.db
check "restore equals the source" eval '[ "$rc" = 0 ] && same_dump db.db r1.db'

# ---- takeover of a running replicator -------------------------------------------
echo "# takeover"
SINK="$ROOT/sink2"
URL="file://$SINK"
write 3
# Epoch 1 ships a change a second after it sees it, so epoch 2 --once,
# started right after a write, gets there first (with 150 ms epoch 1 won
# every race on a loaded machine).
"$WS_BIN" replicate --sink "$URL" --epoch 1 --interval-ms 1000 --json db.db >old.out 2>old.err &
old=$!
for _ in $(seq 100); do grep -q streamed old.out 2>/dev/null && break; sleep 0.1; done
check "epoch 1 (continuous) ships" grep -q streamed old.out
write 2
for _ in $(seq 100); do [ "$(grep -c streamed old.out)" -ge 2 ] && break; sleep 0.1; done
check "epoch 1 (continuous) ships again" [ "$(grep -c streamed old.out)" -ge 2 ]
check "epoch 1 is running" kill -0 $old

# Take over: epoch 2 must write the watermark, so it needs frames epoch 1 has
# not shipped yet; retry if epoch 1 got there first.
took=0
for _ in $(seq 20); do
	write 1
	ws replicate --sink "$URL" --epoch 2 --once --json db.db
	# Only a tail that wrote the watermark takes over. A lost race (epoch 1
	# wrote first: epoch 2's compare-and-swap fails, its retry finds nothing
	# new) prints no outcome line at all.
	o=$(outcome out 2>/dev/null || true)
	if [ "$rc" = 0 ] && { [ "$o" = streamed ] || [ "$o" = restarted ]; }; then took=1; break; fi
done
check "epoch 2 --once takes over (ships)" [ "$took" = 1 ]
# A tail of epoch 1 that passed its fencing read just before the takeover may
# still be uploading (its watermark CAS then fails, leaving unreferenced
# objects): wait until epoch 1 has finished a tail that began after the
# takeover (one more JSON line, or it has exited) before taking the snapshot.
lines0=$(wc -l <old.out)
for _ in $(seq 200); do
	[ "$(wc -l <old.out)" -gt "$((lines0 + 1))" ] && break
	kill -0 $old 2>/dev/null || break
	sleep 0.05
done
snap_takeover=$(snapshot)
write 2 # something new for epoch 1's next tail
set +e
for _ in $(seq 100); do kill -0 $old 2>/dev/null || break; sleep 0.1; done
kill -0 $old 2>/dev/null && { kill $old; echo "epoch 1 did not stop; killed"; }
set -e
reap $old old.err "continuous epoch 1"
check "epoch 1 (continuous) exits 3 after the takeover" [ "$reaped" = 3 ]
check "epoch 1's last JSON line is fenced by epoch 2" \
	python3 -c '
import json
o = json.loads([l for l in open("old.out") if l.strip()][-1])
assert o["outcome"] == "fenced" and o["current_epoch"] == 2 and o["our_epoch"] == 1, o
'
check "epoch 1's stderr says fenced" grep -qi fenced old.err
check "epoch 1 wrote nothing after the takeover" [ "$snap_takeover" = "$(snapshot)" ]

ws replicate --sink "$URL" --epoch 2 --once --json db.db
check "epoch 2 ships the rest" eval '[ "$rc" = 0 ] && [ "$(outcome out)" = streamed ]'
ws restore --sink "$URL" --tenant db -o r2.db
check "restore after the takeover equals the source" eval '[ "$rc" = 0 ] && same_dump db.db r2.db'
ws verify --sink "$URL"
check "verify after the takeover: exit 0" [ "$rc" = 0 ]

# ---- a continuous epoch 2 replicator and a stale --once in between ---------------
echo "# stale owner while the owner runs"
"$WS_BIN" replicate --sink "$URL" --epoch 2 --interval-ms 150 --json db.db >new.out 2>new.err &
new=$!
write 3
sleep 1
ws replicate --sink "$URL" --epoch 1 --once --json db.db
check "epoch 1 --once while epoch 2 runs: exit 3, fenced" \
	eval '[ "$rc" = 3 ] && [ "$(outcome out)" = fenced ]'
write 3
sleep 1
check "epoch 2 is still running" kill -0 $new
kill -TERM $new
reap $new new.err "continuous epoch 2"
check "epoch 2 exits 0 on SIGTERM" [ "$reaped" = 0 ]
check "epoch 2 was never fenced" eval '! grep -q fenced new.out'
ws restore --sink "$URL" --tenant db -o r3.db
check "restore equals the source at the end" eval '[ "$rc" = 0 ] && same_dump db.db r3.db'

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
