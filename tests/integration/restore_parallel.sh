# shellcheck shell=bash
# Parallel restore (restore/verify --parallelism N), sourced by
# test_restore_parallel.sh (file://) and test_restore_parallel_s3.sh
# (radosgw) after lib.sh, with URL set and three helpers defined:
#   obj_keys            every object key of tenant a, one a line
#   obj_corrupt KEY     flip a byte in the middle of the stored object
#   obj_delete KEY      remove it
# Checks, over a history of small (inline) and large (stored) batches, WAL
# restarts and re-bases:
#   1. every recorded point (--frame GEN:N), two --time points and the
#      latest state restore byte for byte the same with --parallelism 1, 3
#      and 8, and each is the state the source committed there (its digest);
#      verify passes at 1 and 8;
#   2. a batch object corrupted, then one missing, in the middle of the
#      window: restore --parallelism 8 refuses naming that object and
#      writes nothing; verify names it;
#   3. bad --parallelism values exit 2 naming the option;
#   4. restore paused in the fetching thread (WS_FAULT=replay.prefetch pause)
#      while the source writes, restarts its WAL and is replaced (re-base):
#      released, it writes exactly the state chosen before; a failure
#      injected there refuses naming it, nothing written.

SRC=${WS_SRC:-$(cd "$HERE/../.." && pwd)}
DIGEST=$SRC/tests/data/fixture_digest.py
mkdir -p pauses

# commit_ship N BYTES: N transactions of a BYTES-byte row, each shipped and recorded
commit_ship() {
	local i
	for i in $(seq "$1"); do
		sq a.db "INSERT INTO t(v) VALUES (randomblob($2 + $i));" >/dev/null
		ship
		record_point
	done
}
# restore_all NAME ARGS...: restore with --parallelism 1, 3 and 8 into NAME.1/.3/.8; 0 when all exit 0
restore_all() {
	local name=$1 p
	shift
	for p in 1 3 8; do
		rm -f "$name.$p"
		ws restore --sink "$URL" --tenant a "$@" --parallelism "$p" -o "$name.$p"
		[ "$rc" = 0 ] || { echo "restore $* --parallelism $p: exit $rc: $(head -c 300 err)" >&2; return 1; }
	done
}
# flip_middle FILE: invert the byte in the middle of FILE
flip_middle() {
	python3 - "$1" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0xFF
open(p, "wb").write(bytes(b))
PY
}
same3() { cmp -s "$1.1" "$1.3" && cmp -s "$1.1" "$1.8"; }

sq a.db "PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);" >/dev/null
: >points.txt
commit_ship 3 300               # inline batches
commit_ship 3 1500000           # stored batch objects (over inline_batch_bytes_max)
t1=$(date -u +%Y-%m-%dT%H:%M:%SZ)
sleep 1.1
sq a.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
commit_ship 2 1200000           # a new WAL generation
sq a.db "VACUUM INTO 'b.db';" >/dev/null
rm -f a.db-wal a.db-shm
mv b.db a.db
sq a.db "PRAGMA journal_mode=WAL; INSERT INTO t(v) VALUES (x'01');" >/dev/null
ship                            # a replaced file: a re-base (snapshot parts)
record_point
commit_ship 3 1100000
t2=$(date -u +%Y-%m-%dT%H:%M:%SZ)
sleep 1.1
commit_ship 2 200
ws ls --sink "$URL" a
check "the history holds a re-base" eval '[ "$(grep -c " rebase " out)" -ge 2 ]'

echo "# 1. the same bytes at every point with --parallelism 1, 3 and 8"
n=0
while read -r p d; do
	n=$((n + 1))
	if restore_all "f$n" --frame "$p"; then
		check "--frame $p: identical at 1, 3 and 8, the state committed there" \
			eval 'same3 f$n && [ "$(python3 "$DIGEST" f$n.8)" = "$d" ]'
	else
		bad "--frame $p: a restore failed"
	fi
done <points.txt
for t in "$t1" "$t2"; do
	if restore_all "t$t" --time "$t"; then
		check "--time $t: identical at 1, 3 and 8" same3 "t$t"
	else
		bad "--time $t: a restore failed"
	fi
done
latest=$(tail -1 points.txt | cut -d' ' -f2)
if restore_all latest; then
	check "latest: identical at 1, 3 and 8, the source's state" \
		eval 'same3 latest && [ "$(python3 "$DIGEST" latest.8)" = "$latest" ]'
else
	bad "latest: a restore failed"
fi
ws restore --sink "$URL" --tenant a -o latest.default
check "latest with the default parallelism: the same bytes" eval '[ "$rc" = 0 ] && cmp -s latest.1 latest.default'
for p in 1 8; do
	ws verify --sink "$URL" --tenant a --parallelism "$p"
	check "verify --parallelism $p: ok" eval '[ "$rc" = 0 ] && grep -q "verify: ok" out'
done

echo "# 3. bad --parallelism values"
for v in 0 -1 abc 257 99999999999999999999 "" 8x; do
	ws restore --sink "$URL" --tenant a --parallelism "$v" -o bad.db
	check "restore --parallelism '$v': exit 2 naming the option, nothing written" \
		eval '[ "$rc" = 2 ] && grep -q -- "--parallelism" err && [ ! -e bad.db ]'
	ws verify --sink "$URL" --tenant a --parallelism "$v"
	check "verify --parallelism '$v': exit 2 naming the option" eval '[ "$rc" = 2 ] && grep -q -- "--parallelism" err'
done

echo "# 4. paused in the fetching thread while the source moves on"
read -r live before < <(tail -1 points.txt)
rm -f r.db pauses/*
WS_FAULT=replay.prefetch:2:pause WS_PAUSE_DIR="$ROOT/pauses" \
	"$WS_BIN" restore --sink "$URL" --tenant a --parallelism 4 -o r.db >paused.out 2>paused.err &
pid=$!
check "restore paused at replay.prefetch" wait_paused pauses
commit_ship 2 1300000
sq a.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
commit_ship 2 900
sq a.db "VACUUM INTO 'b.db';" >/dev/null
rm -f a.db-wal a.db-shm
mv b.db a.db
sq a.db "PRAGMA journal_mode=WAL; INSERT INTO t(v) VALUES (x'02');" >/dev/null
ship
check "no output while paused" eval '[ ! -e r.db ]'
rm -f pauses/*
reap "$pid" paused.err "restore (paused at replay.prefetch)"
check "released: exit 0, exactly the state chosen before the source moved on" \
	eval '[ "$reaped" = 0 ] && [ "$(python3 "$DIGEST" r.db)" = "$before" ]'
rm -f r.db
# (the chain of $live: the latest one now is a re-base of one object, no window)
WS_FAULT=replay.prefetch:1:fail ws restore --sink "$URL" --tenant a --frame "$live" --parallelism 4 -o r.db
check "a read failing in the fetching thread: exit 1 naming it, nothing written" \
	eval '[ "$rc" = 1 ] && grep -q "injected failure at replay.prefetch" err && [ ! -e r.db ]'

echo "# 2. a bad object in the middle of the window"
# A stored batch object of the chain that holds $live (the re-based one of
# part 1), with objects before and after it in its window.
gen=${live%%:*}
obj_keys | grep -F "/$gen/b" | sort >batches.txt || true
check "stored batch objects of $gen to damage" eval '[ "$(wc -l <batches.txt)" -ge 3 ]'
victim=$(sed -n "$((($(wc -l <batches.txt) + 1) / 2))p" batches.txt)
obj_corrupt "$victim"
rm -f r.db
ws restore --sink "$URL" --tenant a --frame "$live" --parallelism 8 -o r.db
check "a corrupted object: exit 1 naming $victim, nothing written" \
	eval '[ "$rc" = 1 ] && grep -qF "$victim" err && [ ! -e r.db ]'
ws restore --sink "$URL" --tenant a --frame "$live" --parallelism 1 -o r.db
check "the same refusal one at a time" eval '[ "$rc" = 1 ] && grep -qF "$victim" err && [ ! -e r.db ]'
ws verify --sink "$URL" --tenant a --parallelism 8
check "verify --parallelism 8 names the corrupted object" eval '[ "$rc" = 1 ] && grep -qF "$victim" err'
obj_delete "$victim"
rm -f r.db
ws restore --sink "$URL" --tenant a --frame "$live" --parallelism 8 -o r.db
check "a missing object: exit 1 naming $victim as missing, nothing written" \
	eval '[ "$rc" = 1 ] && grep -F "$victim" err | grep -q missing && [ ! -e r.db ]'
