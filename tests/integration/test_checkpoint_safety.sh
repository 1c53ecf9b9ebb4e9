#!/usr/bin/env bash
# Checkpoints and retention that never lose data nor report false
# corruption (issue 11 defects 1-4 and 6, issue 12 items 5 and 9), through
# the CLI with real SQLite writers on file:// sinks:
#   - a re-base of an unchanged database racing retention (WS_FAULT "stop"
#     freezes retention between its keep set and its first delete while a
#     real `replicate --once` runs);
#   - a second checkpoint keeps every still-stored point restorable;
#   - restore, verify and ls while a checkpoint holds the writers' lease;
#   - tenants whose names are prefixes of each other (db, db-2, db.x);
#   - epochs: checkpoint --epoch, replicate --epoch --checkpoint-interval-s,
#     a stale epoch an error naming the current one;
#   - one damaged bit in the latest artifact: verify reports it, restore
#     falls back, checkpoint goes on (no temporary database left), retention
#     refuses to delete what the damaged artifact would replace;
#   - verify with a tenant's watermark gone (named by a checkpoint or
#     not; or a directory or FIFO in its place), a REBASE base manifest
#     gone, checkpoints/head gone;
#   - retention removes an old chain's manifests that a re-base cut off;
#   - batch keys no two chains share (a re-base re-shipping an old chain's
#     frames while retention deletes that chain); a sink written before
#     keys carried the sequence still restores;
#   - verify --orphans / --fail-on-orphans, retention deleting uploads no
#     manifest names, no directory left holding only lock files;
#   - retention stopped before it lists a tenant for unreachable objects
#     while the tenant is removed and shipped anew;
#   - a damaged committed index, inventory or witness (issue 31 items 4, 5);
#   - a damaged or lost checkpoints/head or checkpoints/deployment: every
#     command names it and `walship repair`, which rebuilds it (item 5).
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$HERE/lib.sh"

files() { (cd "$1" && find . -type f ! -name '.lock*' | sort); }
json_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
n=0
write() { # write DB N
	local _
	for _ in $(seq "$2"); do
		n=$((n + 1))
		sq "$1" "INSERT INTO t VALUES ($n, hex(randomblob(200)));"
	done
}
newdb() { sq "$1" "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null; }
# ship DB N URL TENANT: N more rows, then one `replicate --once` of them.
ship() {
	write "$1" "$2"
	ws replicate --sink "$3" --once "$4=$1"
}
# flip one bit of FILE at byte offset OFF
flip() { python3 -c 'import sys; p,o=sys.argv[1],int(sys.argv[2]); b=bytearray(open(p,"rb").read()); b[o]^=1; open(p,"wb").write(b)' "$@"; }

echo "# 1: a re-base of an unchanged database while retention deletes"
# Checkpoint 1's cut is the base of a chain on the database file alone;
# checkpoint 2's cut is in a later chain (frames in a WAL). Retention for
# checkpoint 2 deletes checkpoint 1's chain as history. The WAL then goes
# away without being checkpointed, so the next re-base reads the very bytes
# checkpoint 1's chain holds: while retention runs (stopped after its keep
# set is built, at its second delete), a real replicate re-bases.
S1="$ROOT/s1"
U1="file://$S1"
newdb d1.db
write d1.db 10
sq d1.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
rm -f d1.db-wal d1.db-shm
ws replicate --sink "$U1" --once t1=d1.db
ws checkpoint --sink "$U1"
check "checkpoint 1 at the database-only chain: exit 0" [ "$rc" = 0 ]
cp d1.db d1.db.before
write d1.db 2
ws replicate --sink "$U1" --once t1=d1.db
write d1.db 2
ws replicate --sink "$U1" --once t1=d1.db
ws checkpoint --sink "$U1"
check "checkpoint 2 in the WAL chain: exit 0" [ "$rc" = 0 ]
# The WAL goes away unckeckpointed: the database file has its old bytes.
rm -f d1.db-wal d1.db-shm
check "the database file is as checkpoint 1 saw it" cmp -s d1.db d1.db.before
dump d1.db >d1.dump
WS_FAULT=retention.before_delete:2:stop "$WS_BIN" retention --sink "$U1" >ret1.out 2>ret1.err &
ret=$!
check "retention stops at its second delete" wait_stopped $ret
ws replicate --sink "$U1" --once t1=d1.db
check "replicate --once re-bases meanwhile: exit 0" [ "$rc" = 0 ]
kill -CONT $ret
reap $ret ret1.err "retention during a re-base"
check "retention: exit 0" [ "$reaped" = 0 ]
ws verify --sink "$U1"
check "verify after retention raced a re-base: exit 0" [ "$rc" = 0 ]
ws restore --sink "$U1" --tenant t1 -o r1.db
check "the latest state restores after retention raced a re-base" \
	eval '[ "$rc" = 0 ] && [ "$(dump r1.db)" = "$(cat d1.dump)" ]'
ws checkpoint --sink "$U1"
check "a later checkpoint: exit 0" [ "$rc" = 0 ]

echo "# 2: a new checkpoint never shrinks the restorable window"
S2="$ROOT/s2"
U2="file://$S2"
newdb d2.db
for _ in 1 2 3; do
	write d2.db 4
	ws replicate --sink "$U2" --once d2=d2.db
done
ws checkpoint --sink "$U2"
ws retention --sink "$U2"
check "retention after checkpoint 1 removes the history before its cut" \
	eval '[ "$rc" = 0 ] && grep -q "deleted [1-9]" err'
ws restore --sink "$U2" --tenant d2 --frame 1 -o gone.db
check "restore --frame 1 (before the cut): exit 1, retention removed it" \
	eval '[ "$rc" = 1 ] && grep -q "retention removed" err'
frame=$("$WS_BIN" ls --sink "$U2" --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["watermark"]["last_frame"])')
write d2.db 5
ws replicate --sink "$U2" --once d2=d2.db
dump d2.db >t.dump
sleep 0.05
T=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
sleep 0.05
write d2.db 5
ws replicate --sink "$U2" --once d2=d2.db
ws checkpoint --sink "$U2"
check "checkpoint 2 (no retention since): exit 0" [ "$rc" = 0 ]
ws restore --sink "$U2" --tenant d2 --time "$T" -o t.db
check "restore --time between the two cuts still restores exactly" \
	eval '[ "$rc" = 0 ] && [ "$(dump t.db)" = "$(cat t.dump)" ]'
ws restore --sink "$U2" --tenant d2 --frame "$frame" -o f.db
check "restore --frame at checkpoint 1's cut still restores: exit 0" [ "$rc" = 0 ]
ws verify --sink "$U2"
check "verify: exit 0" [ "$rc" = 0 ]

echo "# 3: readers while a checkpoint holds the writers' lease"
write d2.db 5
ws replicate --sink "$U2" --once d2=d2.db
WS_FAULT=checkpoint.artifact.before_put:1:stop "$WS_BIN" checkpoint --sink "$U2" >ck3.out 2>ck3.err &
ck=$!
check "checkpoint stops while it holds the lease" wait_stopped $ck
start=$(date +%s%N)
ws verify --sink "$U2"
check "verify while the lease is held: exit 0" eval '[ "$rc" = 0 ] && grep -q "verify: ok" out'
ws restore --sink "$U2" --tenant d2 -o r3.db
check "restore while the lease is held equals the source" eval '[ "$rc" = 0 ] && same_dump d2.db r3.db'
ws ls --sink "$U2" --checkpoints
check "ls --checkpoints while the lease is held: exit 0" eval '[ "$rc" = 0 ] && [ -s out ]'
elapsed=$((($(date +%s%N) - start) / 1000000))
check "no reader waited for the lease (${elapsed} ms for three)" [ "$elapsed" -lt 4000 ]
kill -CONT $ck
reap $ck ck3.err "checkpoint holding the lease"
check "the stopped checkpoint then commits: exit 0" [ "$reaped" = 0 ]

echo "# 4: tenant names that are prefixes of each other"
S4="$ROOT/s4"
U4="file://$S4"
for t in db db-2 db.x; do newdb "e-$t.db"; write "e-$t.db" 3; done
ws replicate --sink "$U4" --once db=e-db.db db-2=e-db-2.db db.x=e-db.x.db
ws checkpoint --sink "$U4"
check "checkpoint of db, db-2, db.x: exit 0" eval '[ "$rc" = 0 ] && [ "$(json_field out tenants)" = 3 ]'
ok4=0
for t in db db-2 db.x; do
	ws restore --sink "$U4" --tenant "$t" --checkpoint latest -o "r4-$t.db"
	{ [ "$rc" = 0 ] && same_dump "e-$t.db" "r4-$t.db"; } || ok4=1
done
check "each tenant restores from the checkpoint" [ "$ok4" = 0 ]
ws retention --sink "$U4"
check "retention: exit 0" [ "$rc" = 0 ]
# A stray top-level object whose first segment is 130 bytes: the tenant
# listing goes past it (it used to restart at the same key for ever).
long=$(printf 'x%.0s' $(seq 130))
mkdir -p "$S4/$long"
echo stray >"$S4/$long/obj"
set +e
timeout 30 "$WS_BIN" checkpoint --sink "$U4" >out 2>err
rc=$?
set -e
check "checkpoint with a 130-byte stray name at the root: exit 0, no hang" [ "$rc" = 0 ]
rm -rf "${S4:?}/$long"

echo "# 6: epochs"
S6="$ROOT/s6"
U6="file://$S6"
newdb d6.db
write d6.db 3
ws replicate --sink "$U6" --once d6=d6.db
ws checkpoint --sink "$U6" --epoch 2
check "checkpoint --epoch 2: exit 0" [ "$rc" = 0 ]
ws checkpoint --sink "$U6"
check "a default (epoch 0) checkpoint after epoch 2: exit 1, naming epoch 2" \
	eval '[ "$rc" = 1 ] && grep -q "epoch 2" err && ! grep -q "\"committed\":true" out'
ws checkpoint --sink "$U6" --epoch 2
check "checkpoint --epoch 2 again: exit 0" eval '[ "$rc" = 0 ] && grep -q "\"committed\":true" out'
ws checkpoint --sink "$U6" --epoch x
check "checkpoint --epoch x: exit 2" [ "$rc" = 2 ]
write d6.db 3
"$WS_BIN" replicate --sink "$U6" --epoch 2 --checkpoint-interval-s 1 --json d6=d6.db >rep6.out 2>rep6.err &
rep=$!
for _ in $(seq 100); do [ "$(grep -c '"committed":true' rep6.out 2>/dev/null || true)" -ge 2 ] && break; sleep 0.1; done
kill -TERM $rep
reap $rep rep6.err "replicate --epoch 2"
check "replicate --epoch 2 --checkpoint-interval-s commits checkpoints" \
	[ "$(grep -c '"committed":true' rep6.out)" -ge 2 ]
"$WS_BIN" replicate --sink "$U6" --epoch 3 --checkpoint-interval-s 1 --json d6=d6.db >rep6b.out 2>rep6b.err &
rep=$!
for _ in $(seq 100); do [ "$(grep -c '"committed":true' rep6b.out 2>/dev/null || true)" -ge 1 ] && break; sleep 0.1; done
kill -TERM $rep
reap $rep rep6b.err "replicate --epoch 3"
ws checkpoint --sink "$U6" --epoch 2
check "after replicate --epoch 3, checkpoint --epoch 2 is stale: exit 1 naming epoch 3" \
	eval '[ "$rc" = 1 ] && grep -q "epoch 3" err'

echo "# 12.6: counters and epochs at 2^64-1"
# head_set FIELD VALUE: rewrite checkpoints/head canonically (sorted keys,
# compact) with one field changed.
head_set() {
	python3 - "$S6/checkpoints/head" "$1" "$2" <<'PY'
import json, sys
p, k, v = sys.argv[1:]
h = json.load(open(p))
h[k] = v
open(p, "w").write(json.dumps(h, sort_keys=True, separators=(",", ":")))
PY
}
cp "$S6/checkpoints/head" head6.save
head_set decisions 18446744073709551615
before=$(files "$S6")
ws checkpoint --sink "$U6" --epoch 3
check "decisions at 2^64-1: checkpoint exit 1 with a clear error" \
	eval '[ "$rc" = 1 ] && grep -q "decisions, the most it can count" err'
ws checkpoint --sink "$U6" --epoch 3
check "and again: exit 1, nothing written" eval '[ "$rc" = 1 ] && [ "$(files "$S6")" = "$before" ]'
cp head6.save "$S6/checkpoints/head"
head_set epoch 18446744073709551615
ws checkpoint --sink "$U6" --epoch 3
check "head epoch 2^64-1: checkpoint --epoch 3 exit 1 naming it" \
	eval '[ "$rc" = 1 ] && grep -q "epoch 18446744073709551615" err'
check "nothing written (no seal left)" [ "$(files "$S6")" = "$before" ]
# Owner epochs are 0..2^63-1: such a head is damaged or hostile (walship
# never records an epoch above), and the CLI does not take that epoch.
ws checkpoint --sink "$U6" --epoch 18446744073709551615
check "checkpoint --epoch 18446744073709551615: exit 2 naming the range" \
	eval '[ "$rc" = 2 ] && grep -q "0..9223372036854775807" err'
check "nothing written" [ "$(files "$S6")" = "$before" ]
cp head6.save "$S6/checkpoints/head"

echo "# 12.5: one damaged bit in the latest artifact"
S5="$ROOT/s5"
U5="file://$S5"
newdb d5.db
write d5.db 20
ws replicate --sink "$U5" --once d5=d5.db
ws checkpoint --sink "$U5"
write d5.db 10
ws replicate --sink "$U5" --once d5=d5.db
ws checkpoint --sink "$U5"
id2=$(json_field out id)
art="$S5/checkpoints/artifacts/$(printf %016x "$id2")/d5"
flip "$art" 3000
ws verify --sink "$U5"
check "verify names the damaged artifact: exit 1" \
	eval '[ "$rc" = 1 ] && grep -q "checkpoints/artifacts/$(printf %016x "$id2")/d5" out err'
ws restore --sink "$U5" --tenant d5 -o r5.db
check "plain restore falls back to the chain: exit 0, equals the source" eval '[ "$rc" = 0 ] && same_dump d5.db r5.db'
before=$(files "$S5")
ws retention --sink "$U5"
check "retention refuses to delete what a damaged artifact replaces: exit 1, nothing deleted" \
	eval '[ "$rc" = 1 ] && [ "$(files "$S5")" = "$before" ]'
write d5.db 5
ws replicate --sink "$U5" --once d5=d5.db
mkdir -p tmp5
TMPDIR="$ROOT/tmp5" ws checkpoint --sink "$U5"
check "a checkpoint after the damage commits: exit 0" [ "$rc" = 0 ]
check "no temporary database left behind" [ -z "$(ls -A tmp5)" ]
rm -f "$S5/checkpoints/artifacts/$(printf %016x "$(json_field out id)")/d5"
ws restore --sink "$U5" --tenant d5 -o r5b.db
check "plain restore with the latest artifact gone: exit 0, equals the source" \
	eval '[ "$rc" = 0 ] && same_dump d5.db r5b.db'
ws checkpoint --sink "$U5"
check "and the next checkpoint: exit 0" [ "$rc" = 0 ]
ws retention --sink "$U5"
check "retention protecting a good checkpoint: exit 0" [ "$rc" = 0 ]
ws verify --sink "$U5"
check "verify after it: exit 0" [ "$rc" = 0 ]

echo "# 12.9: verify with named objects gone"
wm="$S4/db-2/wm"
cp "$wm" wm.save
rm "$wm"
ws verify --sink "$U4"
check "a checkpoint names db-2, its watermark is gone: verify exit 1 naming db-2/wm" \
	eval '[ "$rc" = 1 ] && grep -q "db-2/wm" out err'
mkdir "$wm"
ws verify --sink "$U4"
check "a directory in its place: verify exit 1" eval '[ "$rc" = 1 ] && grep -q "db-2" out err'
rmdir "$wm"
mkfifo "$wm"
ws verify --sink "$U4"
check "a FIFO in its place: verify exit 1" eval '[ "$rc" = 1 ] && grep -q "db-2" out err'
rm "$wm"
cp wm.save "$wm"
ws verify --sink "$U4"
check "restored: verify exit 0" [ "$rc" = 0 ]
mv "$S4/checkpoints/head" head.save
ws verify --sink "$U4"
check "checkpoints/head gone: verify exit 1 naming it" eval '[ "$rc" = 1 ] && grep -q "checkpoints/head" out err'
mv head.save "$S4/checkpoints/head"
S9="$ROOT/s9"
U9="file://$S9"
newdb d9.db
write d9.db 5
ws replicate --sink "$U9" --once d9=d9.db
write d9.db 5
ws replicate --sink "$U9" --once d9=d9.db
ws checkpoint --sink "$U9"
write d9.db 5
ws replicate --sink "$U9" --once d9=d9.db
base=$(cd "$S9" && find d9 -name 'm*' -type f | sort | head -1)
mv "$S9/$base" base.save
ws verify --sink "$U9"
check "the REBASE base manifest gone (no retention ran): verify exit 1 naming it" \
	eval '[ "$rc" = 1 ] && grep -q "$base" out err'

echo "# retention removes an old chain's manifests cut off by a re-base"
S7="$ROOT/s7"
U7="file://$S7"
newdb d7.db
write d7.db 5
sq d7.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
ws replicate --sink "$U7" --once d7=d7.db
sq d7.db "INSERT INTO t VALUES (2000, 'a');"
ws replicate --sink "$U7" --once d7=d7.db
ws checkpoint --sink "$U7"
sq d7.db "INSERT INTO t VALUES (2001, 'b');"
ws replicate --sink "$U7" --once d7=d7.db
old=$(cd "$S7" && find d7 -name 'm*' -type f | sort)
# A re-base: the WAL is checkpointed and gone; a new chain starts.
sq d7.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
rm -f d7.db-wal d7.db-shm
write d7.db 3
sq d7.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
ws replicate --sink "$U7" --once d7=d7.db
ws checkpoint --sink "$U7"
ws retention --sink "$U7"
check "retention after a re-base: exit 0" [ "$rc" = 0 ]
left=0
for k in $old; do [ -e "$S7/$k" ] && left=$((left + 1)); done
check "no manifest of the cut-off chain is left ($left left)" [ "$left" = 0 ]
ws verify --sink "$U7"
check "verify: exit 0" [ "$rc" = 0 ]
ws restore --sink "$U7" --tenant d7 -o r7.db
check "restore equals the source" eval '[ "$rc" = 0 ] && same_dump d7.db r7.db'

echo "# 12.8: retention when the protected cut's chain cannot be read"
# The live chain re-bases after the latest checkpoint, so the keep set has
# read the live chain when it reads the cut's: a damaged cut manifest fails
# retention (naming it) without deleting anything, and without a leak
# (LeakSanitizer, 32 KiB, in the ASan build).
ws checkpoint --sink "$U7"
check "checkpoint: exit 0" [ "$rc" = 0 ]
write d7.db 3
sq d7.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
rm -f d7.db-wal d7.db-shm
ws replicate --sink "$U7" --once d7=d7.db
cut=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tenants"][0]["manifest_key"])' \
	"$(ls "$S7"/checkpoints/committed/*.json | tail -1)")
cp "$S7/$cut" cut.save
flip "$S7/$cut" 10
before=$(files "$S7/d7")
ws retention --sink "$U7"
check "retention with the cut manifest damaged: exit 1 naming it, none of the tenant's objects deleted" \
	eval '[ "$rc" = 1 ] && grep -q "$cut" err && [ "$(files "$S7/d7")" = "$before" ]'
cp cut.save "$S7/$cut"

echo "# verify with the watermark of a tenant no checkpoint names gone"
# Three tails acknowledged, then the watermark goes: restore refuses the
# tenant, so verify must not pass it as "objects but no watermark yet"
# (what a crash before the first watermark leaves; its manifests are all
# written for sequence 1, test_core_crash covers that).
S13="$ROOT/s13"
U13="file://$S13"
newdb d13.db
for _ in 1 2 3; do ship d13.db 2 "$U13" d13; done
ws verify --sink "$U13"
check "verify before: exit 0" [ "$rc" = 0 ]
# verify_says SINK RC PATTERN DESC: verify's exit status and a line of its output.
verify_says() {
	local want=$2 pat=$3
	ws verify --sink "$1"
	check "$4" eval '[ "$rc" = "$want" ] && grep -q "$pat" out err'
}
mv "$S13/d13/wm" wm13.save
ws restore --sink "$U13" --tenant d13 -o r13.db
check "restore of the tenant without its watermark refuses: exit 1" [ "$rc" = 1 ]
verify_says "$U13" 1 "d13/wm is missing" "plain verify: exit 1, naming d13/wm as missing"
mv wm13.save "$S13/d13/wm"
verify_says "$U13" 0 "^verify: ok" "the watermark back: verify exit 0"

echo "# a watermark that went back"
# The store loses the watermark's last two writes (the object goes back to
# an earlier version of itself: a fault radosgw or a directory cannot be
# made to produce but by hand, as here). Its manifests after it are still
# there, written for the sequences after it and linked back to it: the
# proof that more was acknowledged than the watermark now says. Restore of
# the latest state refuses (it restored two tails less, exit 0); verify
# fails naming the watermark; a point in time restores on purpose.
S14="$ROOT/s14"
U14="file://$S14"
newdb d14.db
for _ in 1 2; do ship d14.db 2 "$U14" d14; done
cp "$S14/d14/wm" wm14.old
rows_then=$(sq d14.db "SELECT count(*) FROM t;")
for _ in 1 2; do ship d14.db 2 "$U14" d14; done
ws restore --sink "$U14" --tenant d14 -o r14.db
check "restore before: exit 0, equals the source" eval '[ "$rc" = 0 ] && same_dump d14.db r14.db'
cp "$S14/d14/wm" wm14.new
cp wm14.old "$S14/d14/wm"
rm -f r14b.db
ws restore --sink "$U14" --tenant d14 -o r14b.db
check "the watermark gone back two writes: restore of the latest refuses, exit 1, saying why" \
	eval '[ "$rc" = 1 ] && grep -q "went back" err && [ ! -e r14b.db ]'
verify_says "$U14" 1 "d14/wm.*went back" "verify: exit 1, naming d14/wm"
frame=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["watermark"]["last_frame"])' < <("$WS_BIN" ls --sink "$U14" --tenant d14 --json | tail -1))
ws restore --sink "$U14" --tenant d14 --frame "$frame" -o r14c.db
check "restore --frame of the watermark's own frame: exit 0, its $rows_then rows" \
	eval '[ "$rc" = 0 ] && [ "$(sq r14c.db "SELECT count(*) FROM t;")" = "$rows_then" ]'
cp wm14.new "$S14/d14/wm"
verify_says "$U14" 0 "^verify: ok" "the watermark back where it was: verify exit 0"

echo "# retention with a named tenant's watermark gone keeps the cut"
S8="$ROOT/s8"
U8="file://$S8"
newdb d8.db
for _ in 1 2 3 4; do ship d8.db 3 "$U8" d8; done
ws checkpoint --sink "$U8"
cut=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tenants"][0]["manifest_key"])' \
	"$(ls "$S8"/checkpoints/committed/*.json | tail -1)")
rm "$S8/d8/wm"
before=$(files "$S8/d8")
ws retention --sink "$U8"
check "retention: exit 0, the cut manifest kept (its keep set is searched sorted)" \
	eval '[ "$rc" = 0 ] && [ -f "$S8/$cut" ]'
# A tenant without a watermark may be shipped anew from sequence 1: what
# its next stream could name is not retention's to judge.
check "nothing of a tenant without a watermark is deleted" [ "$(files "$S8/d8")" = "$before" ]
ws restore --sink "$U8" --tenant d8 --checkpoint latest -o r8.db
check "the checkpoint still restores" eval '[ "$rc" = 0 ] && same_dump d8.db r8.db'

echo "# retention while a tenant is removed and shipped anew under its listing"
# Retention lists a tenant's keys for manifests no walk reaches and uploads
# no manifest names, keyed with sequences at or below the protected cut's,
# once it has seen the watermark at or past the cut. Stopped just before
# that listing (WS_FAULT "stop"), the tenant's watermark is removed and it
# is shipped anew: its new stream's sequences restart at 1, below the
# cut's, so the listing shows its snapshot parts and batches among the
# uploads no manifest names. They are its live stream, not history.
S15="$ROOT/s15"
U15="file://$S15"
newdb d15.db
for _ in 1 2 3 4; do ship d15.db 3 "$U15" d15; done
ws checkpoint --sink "$U15"
check "checkpoint at sequence 4: exit 0" [ "$rc" = 0 ]
ship d15.db 3 "$U15" d15
WS_FAULT=retention.before_unreachable_list:1:stop "$WS_BIN" retention --sink "$U15" >ret15.out 2>ret15.err &
ret=$!
check "retention stops before it lists the tenant" wait_stopped $ret
rm "$S15/d15/wm"
ship d15.db 3 "$U15" d15
check "the tenant is shipped anew meanwhile: exit 0" [ "$rc" = 0 ]
ship d15.db 3 "$U15" d15
check "and again (sequence 2): exit 0" [ "$rc" = 0 ]
kill -CONT $ret
reap $ret ret15.err "retention while a tenant is shipped anew"
check "retention: exit 0" [ "$reaped" = 0 ]
ws restore --sink "$U15" --tenant d15 -o r15.db
check "the new stream's latest state restores exactly" eval '[ "$rc" = 0 ] && same_dump d15.db r15.db'
ws verify --sink "$U15"
check "verify: exit 0" [ "$rc" = 0 ]
ws restore --sink "$U15" --tenant d15 --checkpoint latest -o r15c.db
check "the checkpoint still restores" [ "$rc" = 0 ]

echo "# a re-base re-ships frames an older chain shipped while retention deletes that chain"
# State A (a database and its WAL, frames 1..N of one generation) is
# shipped (chain X), then the WAL is reset and a new chain C is the cut of
# a checkpoint. The database and WAL of state A come back (a copy restored
# by hand), and a replicate re-bases onto them: it uploads frames 1..N
# again, as X did. It is stopped before its manifest (WS_FAULT "stop")
# while retention deletes X as history behind C's cut; then it publishes.
# With batch keys that are content keys within a generation, the re-base
# named X's batch (found present, not uploaded) which retention deleted:
# the latest state was lost. Each chain's batches now carry their
# manifest's watermark sequence, so no later chain names one of X's.
S10="$ROOT/s10"
U10="file://$S10"
newdb d10.db
write d10.db 8
cp d10.db a.db
cp d10.db-wal a.db-wal
dump d10.db >a.dump
ws replicate --sink "$U10" --once d10=d10.db
check "chain X ships state A: exit 0" [ "$rc" = 0 ]
xbatches=$(cd "$S10" && find d10 -name 'b*' -type f | sort)
sq d10.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
write d10.db 3
ws replicate --sink "$U10" --once d10=d10.db
ws checkpoint --sink "$U10"
check "checkpoint at chain C: exit 0" [ "$rc" = 0 ]
rm -f d10.db-shm
cp a.db d10.db
cp a.db-wal d10.db-wal
WS_FAULT=stream.before_manifest_put:1:stop "$WS_BIN" replicate --sink "$U10" --once d10=d10.db \
	>rep10.out 2>rep10.err &
rep=$!
check "the re-base stops before its manifest" wait_stopped $rep
ws retention --sink "$U10"
check "retention deletes chain X meanwhile: exit 0" eval '[ "$rc" = 0 ] && grep -q "deleted [1-9]" err'
gone=0
for k in $xbatches; do [ -e "$S10/$k" ] || gone=$((gone + 1)); done
check "chain X's batches are gone ($gone)" [ "$gone" -gt 0 ]
kill -CONT $rep
reap $rep rep10.err "replicate re-basing during retention"
check "the re-base publishes: exit 0" [ "$reaped" = 0 ]
ws verify --sink "$U10"
check "verify after it: exit 0" [ "$rc" = 0 ]
ws restore --sink "$U10" --tenant d10 -o r10.db
check "the latest state (state A again) restores exactly" \
	eval '[ "$rc" = 0 ] && [ "$(dump r10.db)" = "$(cat a.dump)" ]'

echo "# verify --orphans, and retention removing uploads no manifest names"
# A tail killed after its uploads, before its manifest (WS_FAULT crash),
# leaves objects nothing names; the next run ships more frames, so its
# batches are others. verify --orphans lists them by kind; retention after
# a checkpoint past them deletes them (their sequence is behind the cut);
# and deleting a directory's last object removes the directory. The killed
# tail writes its batch as an object of its own (a small tail's would
# otherwise travel inline in the manifest it never wrote).
S11="$ROOT/s11"
U11="file://$S11"
printf '[engine]\ninline_batch_bytes_max = off\n' >noinline.ini
newdb d11.db
ship d11.db 5 "$U11" d11
write d11.db 5
set +e
WS_FAULT=stream.before_manifest_put:1:crash "$WS_BIN" replicate --sink "$U11" --config noinline.ini --once d11=d11.db >/dev/null 2>&1
krc=$?
set -e
check "a replicate killed before its manifest (exit $krc)" [ "$krc" = 137 ]
write d11.db 3
sq d11.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
write d11.db 2
ws replicate --sink "$U11" --once d11=d11.db
ws verify --sink "$U11" --orphans
check "verify --orphans: exit 0 (orphans alone never fail it), lists the killed tail's uploads as unpublished" \
	eval '[ "$rc" = 0 ] && grep -q "^verify: ok" out && grep -Eq "^orphan unpublished d11/e0-p0/g[^ ]*/b[0-9a-f-]+$" out'
check "and the first chain, which the second run's re-base links to (restore --time reaches it), is named" \
	eval '! grep -Eq "^orphan [a-z-]+ d11/.*/m0000000000000001-" out'
norph=$(sed -n 's/^orphans: //p' out)
check "the count matches the lines ($norph)" [ "$norph" = "$(grep -c '^orphan ' out)" ]
ws verify --sink "$U11" --fail-on-orphans
check "verify --fail-on-orphans: exit 1, naming the count" \
	eval '[ "$rc" = 1 ] && grep -q "$norph orphans\? (--fail-on-orphans)" err && grep -q "^verify: ok" out'
ws verify --sink "$U11" --orphans --tenant nosuch
check "verify --orphans --tenant with no such tenant: exit 1, no orphan" \
	eval '[ "$rc" = 1 ] && ! grep -q "^orphan " out'
ws verify --sink "$U11" --orphans --tenant 'a/b'
check "verify --orphans --tenant a/b: exit 2 naming the name" eval '[ "$rc" = 2 ] && grep -q "a/b" err'
ws verify --sink "$U11" --fail-on-orphans=yes
check "verify --fail-on-orphans=yes: exit 2" [ "$rc" = 2 ]
mkdir -p "$S11/checkpoints/probe"
echo x >"$S11/checkpoints/probe/00000000000000000000000000000001"
echo x >"$S11/d11/stray"
echo x >"$S11/_junk"
mkdir -p "$S11/_walship"
echo x >"$S11/_walship/probe-00000000000000ab"
ws verify --sink "$U11" --orphans
check "a probe, a stray tenant file and a name no tenant has: listed as probe and foreign" \
	eval '[ "$rc" = 0 ] && grep -q "^orphan probe checkpoints/probe/0*1$" out && grep -q "^orphan foreign d11/stray$" out &&
	      grep -q "^orphan foreign _junk$" out && grep -q "^orphan probe _walship/probe-00000000000000ab$" out'
ws verify --sink "$U11" --orphans --tenant d11
check "--tenant d11: only d11's orphans" \
	eval '[ "$rc" = 0 ] && grep -q "^orphan foreign d11/stray$" out && ! grep -q "checkpoints/probe\|_junk" out'
rm -r "$S11/checkpoints/probe" "$S11/d11/stray" "$S11/_junk" "$S11/_walship"
# A checkpoint killed after writing its candidate index, before deciding:
# the next one aborts it and seals the candidate, and a seal occupies its
# path for good, so it is named (it used to be listed as checkpoint-index:
# the seal records its candidate's length, not its own).
set +e
WS_FAULT=ckpt.create.after_put:1:crash "$WS_BIN" checkpoint --sink "$U11" >/dev/null 2>&1
krc=$?
set -e
check "a checkpoint killed after its candidate index (exit $krc)" [ "$krc" = 137 ]
ws checkpoint --sink "$U11"
check "the next checkpoint: exit 0, the candidate sealed" \
	eval '[ "$rc" = 0 ] && grep -lq walship.ckpt.sealed.v1 "$S11"/checkpoints/committed/*.json'
ws verify --sink "$U11" --orphans
check "verify --orphans: the seal is no orphan" eval '[ "$rc" = 0 ] && ! grep -q "^orphan checkpoint-index" out'
ws checkpoint --sink "$U11"
ws retention --sink "$U11"
check "retention after a checkpoint: exit 0" [ "$rc" = 0 ]
ws verify --sink "$U11" --fail-on-orphans
check "then no orphan is left: exit 0, orphans: 0" eval '[ "$rc" = 0 ] && grep -q "^orphans: 0$" out'
# Directories that hold only lock files (what deleting their last object
# leaves): none, the sink's root aside.
lockonly=$(cd "$S11" && find . -mindepth 1 -type d | while read -r d; do
	if [ -z "$(ls -A "$d" | grep -v '^\.lock\.')" ]; then echo "$d"; fi; done)
check "no directory is left holding only lock files (${lockonly:-none})" [ -z "$lockonly" ]
ws restore --sink "$U11" --tenant d11 -o r11.db
check "the latest state restores" eval '[ "$rc" = 0 ] && same_dump d11.db r11.db'

echo "# a sink written before batch keys carried their manifest's sequence"
# data/sink-batch-keys-v0.tar.gz: tenant "old" shipped by walship 70f35c4
# (three manifests naming batches b<first>-<count>-<xxh>, a checkpoint);
# data/sink-batch-keys-v0.dump: its source's rows. Readers take every key
# from its manifest, so no format bump: it restores and verifies as it is,
# nothing in it is an orphan, and a new stream, checkpoint and retention on
# top of it leave it whole.
S12="$ROOT/s12"
U12="file://$S12"
mkdir -p "$S12"
tar -xzf "$HERE/data/sink-batch-keys-v0.tar.gz" -C "$S12"
ws restore --sink "$U12" --tenant old -o r12.db
check "the old-format sink restores exactly" eval '[ "$rc" = 0 ] && [ "$(dump r12.db)" = "$(cat "$HERE/data/sink-batch-keys-v0.dump")" ]'
ws verify --sink "$U12" --fail-on-orphans
check "verify --fail-on-orphans on it: exit 0, nothing unnamed" eval '[ "$rc" = 0 ] && grep -q "^orphans: 0$" out'
cp r12.db d12.db
sq d12.db "PRAGMA journal_mode=WAL;" >/dev/null
write d12.db 3
ws replicate --sink "$U12" --once old=d12.db
check "a new stream on top of it: exit 0" [ "$rc" = 0 ]
ws checkpoint --sink "$U12"
ws retention --sink "$U12"
check "checkpoint and retention: exit 0" [ "$rc" = 0 ]
ws verify --sink "$U12" --fail-on-orphans
check "then verify --fail-on-orphans: exit 0" eval '[ "$rc" = 0 ] && grep -q "^orphans: 0$" out'
ws restore --sink "$U12" --tenant old -o r12b.db
check "and the latest state restores" eval '[ "$rc" = 0 ] && same_dump d12.db r12b.db'

echo "# the sink's first checkpoint between its candidate index and its decision"
# No head yet and one committed/ key: verify took this for a lost head and
# failed a healthy sink while its first checkpoint ran (or after one was
# killed there). The open witness names that very attempt: nothing is
# wrong, and the next checkpoint aborts and seals it. A lost head after
# commits is still named (the control below).
S30="$ROOT/s30"
U30="file://$S30"
newdb f30.db
ship f30.db 4 "$U30" f30
set +e
WS_FAULT=ckpt.create.after_put:1:crash "$WS_BIN" checkpoint --sink "$U30" >/dev/null 2>&1
krc=$?
set -e
check "the first checkpoint killed after its candidate index (exit $krc)" \
	eval '[ "$krc" = 137 ] && [ ! -e "$S30/checkpoints/head" ] && [ "$(ls "$S30/checkpoints/committed" | wc -l)" = 1 ]'
ws verify --sink "$U30"
check "verify: exit 0, no lost head reported" eval '[ "$rc" = 0 ] && ! grep -q "head is missing" out err'
ws checkpoint --sink "$U30"
check "the next checkpoint: exit 0" [ "$rc" = 0 ]
ws verify --sink "$U30"
check "verify after it: exit 0" [ "$rc" = 0 ]
rm "$S30/checkpoints/head"
ws verify --sink "$U30"
check "control: the head removed after commits is named (exit 1)" \
	eval '[ "$rc" = 1 ] && grep -q "checkpoints/head is missing, but committed checkpoint indexes exist" out err'
echo "# 31.4/5: a damaged committed index, inventory or witness wedges nothing"
# Three checkpoints; one flipped bit in the latest committed index (and,
# later, in checkpoints/inventory and checkpoints/witness). Before issue 31
# every later checkpoint, retention, ls and restore --checkpoint failed
# until checkpoints/head was edited by hand, and verify said ok for a
# damaged inventory or witness.
S31="$ROOT/s13"
U31="file://$S31"
newdb x31.db
ids31=()
for i in 1 2 3; do
	ship x31.db 4 "$U31" x31
	ws checkpoint --sink "$U31"
	ids31+=("$(json_field out id)")
	dump x31.db >"x31c-$i.dump"
done
idx31=$(cd "$S31" && ls checkpoints/committed/ | grep "^$(printf '%016x' "${ids31[2]}")-")
flip "$S31/checkpoints/committed/$idx31" 40
ws verify --sink "$U31"
check "verify: exit 1 naming the damaged index" eval '[ "$rc" = 1 ] && grep -q "$idx31" out err'
ws ls --sink "$U31" --checkpoints
check "ls --checkpoints: exit 0, the damaged one marked, the older two listed" \
	eval '[ "$rc" = 0 ] && grep -q "DAMAGED index=checkpoints/committed/$idx31" out && [ "$(grep -c "tenants=" out)" = 2 ]'
ws restore --sink "$U31" --tenant x31 --checkpoint "${ids31[1]}" -o x31r.db
check "restore --checkpoint of an intact older one: exactly its rows" eval '[ "$rc" = 0 ] && [ "$(dump x31r.db)" = "$(cat x31c-2.dump)" ]'
ship x31.db 3 "$U31" x31
ws checkpoint --sink "$U31"
check "the next checkpoint commits past it: exit 0" [ "$rc" = 0 ]
ws retention --sink "$U31"
check "retention: exit 0, the damaged index gone" eval '[ "$rc" = 0 ] && [ ! -e "$S31/checkpoints/committed/$idx31" ]'
ws verify --sink "$U31"
check "verify: exit 0 again" [ "$rc" = 0 ]
flip "$S31/checkpoints/inventory" 10
ws verify --sink "$U31"
check "a damaged inventory: verify exit 1 naming it" eval '[ "$rc" = 1 ] && grep -q "checkpoints/inventory" out err'
flip "$S31/checkpoints/witness" 10
ship x31.db 2 "$U31" x31
ws checkpoint --sink "$U31"
check "the next checkpoint rebuilds inventory and witness: exit 0" [ "$rc" = 0 ]
ws verify --sink "$U31"
check "then verify: exit 0" [ "$rc" = 0 ]
ws restore --sink "$U31" --tenant x31 --checkpoint latest -o x31rb.db
check "and the new checkpoint restores exactly" eval '[ "$rc" = 0 ] && same_dump x31.db x31rb.db'

echo "# 31.5: a damaged or lost checkpoints/head or checkpoints/deployment: walship repair"
# Before `walship repair` nothing rebuilt these two and no error said how.
# Each is damaged in turn (one flipped bit, cut in half, or, the head,
# deleted while indexes exist): every command that needs it fails naming it
# and `run: walship repair --sink URL`; verify names it; a dry run writes
# nothing; repair rebuilds it; verify passes; the next checkpoint's id is
# above every earlier one; every earlier checkpoint restores to exactly the
# rows its cut had.
S32="$ROOT/s32"
U32="file://$S32"
newdb x32.db
ids32=()
for i in 1 2; do
	ship x32.db 3 "$U32" x32
	ws checkpoint --sink "$U32"
	ids32+=("$(json_field out id)")
	dump x32.db >"x32c-${#ids32[@]}.dump"
done
ckdir_sum() { (cd "$S32/checkpoints" && find . -type f ! -name '.lock*' | sort | xargs sha256sum); }
sum0=$(ckdir_sum)
ws repair
check "repair without --sink: exit 2, says so" eval '[ "$rc" = 2 ] && grep -q -- "--sink URL" err'
ws repair --sink "$U32" extra
check "repair with an extra argument: exit 2, naming it" eval '[ "$rc" = 2 ] && grep -q "unexpected argument .extra." err'
ws repair --sink "$U32" --bogus
check "repair with an unknown option: exit 2" [ "$rc" = 2 ]
ws repair --sink "file://$ROOT/no-such-sink"
check "repair of a sink that does not exist: exit non-zero, naming it" \
	eval '[ "$rc" != 0 ] && grep -q "no-such-sink" err && [ ! -e "$ROOT/no-such-sink" ]'
ws repair --sink "$U32"
check "repair of a healthy sink: exit 0, nothing to repair, nothing written" \
	eval '[ "$rc" = 0 ] && grep -q "nothing to repair" err && [ ! -s out ] && [ "$(ckdir_sum)" = "$sum0" ]'
for case in head:flip head:cut head:rm deployment:flip deployment:cut; do
	obj=${case%%:*}
	how=${case#*:}
	f="$S32/checkpoints/$obj"
	case $how in
	flip) flip "$f" 30 ;;
	cut) python3 -c 'import sys; p=sys.argv[1]; b=open(p,"rb").read(); open(p,"wb").write(b[:len(b)//2])' "$f" ;;
	rm) rm "$f" ;;
	esac
	hint="checkpoints/$obj.*run: walship repair --sink $U32"
	ws checkpoint --sink "$U32"
	check "$obj $how: checkpoint exit 1 naming it and the repair command" eval '[ "$rc" = 1 ] && grep -q "$hint" err'
	ws ls --sink "$U32" --checkpoints
	check "$obj $how: ls --checkpoints exit 1 naming them" eval '[ "$rc" = 1 ] && grep -q "$hint" err'
	ws restore --sink "$U32" --tenant x32 --checkpoint "${ids32[0]}" -o x32bad.db
	check "$obj $how: restore --checkpoint exit 1 naming them" eval '[ "$rc" = 1 ] && grep -q "$hint" err && [ ! -e x32bad.db ]'
	ws retention --sink "$U32"
	check "$obj $how: retention exit 1 naming them" eval '[ "$rc" = 1 ] && grep -q "$hint" err'
	ws verify --sink "$U32"
	check "$obj $how: verify exit 1 naming them" eval '[ "$rc" = 1 ] && grep -q "$hint" err'
	if [ "$how" = flip ]; then
		# replicate's periodic checkpoint says the same, and the run exits 1.
		"$WS_BIN" replicate --sink "$U32" --checkpoint-interval-s 1 x32=x32.db >rep32.out 2>rep32.err &
		rep=$!
		for _ in $(seq 100); do grep -q "checkpoint failed" rep32.err 2>/dev/null && break; sleep 0.1; done
		kill -TERM $rep
		reap $rep rep32.err "replicate with a damaged $obj"
		check "$obj $how: replicate's periodic checkpoint fails naming them, exit 1" \
			eval '[ "$reaped" = 1 ] && grep -q "checkpoint failed: .*$hint" rep32.err'
	fi
	sum1=$(ckdir_sum)
	ws repair --sink "$U32" --dry-run --json
	check "$obj $how: repair --dry-run: exit 0, names it, writes nothing" \
		eval '[ "$rc" = 0 ] && [ "$(ckdir_sum)" = "$sum1" ] && python3 -c "import json,sys; o=json.load(open(\"out\")); sys.exit(0 if o[\"dry_run\"] and o[\"repaired\"][0][\"key\"] == \"checkpoints/$obj\" else 1)"'
	ws repair --sink "$U32"
	check "$obj $how: repair: exit 0, rebuilt" eval '[ "$rc" = 0 ] && grep -q "^checkpoints/$obj: rebuilt" out'
	ws verify --sink "$U32"
	check "$obj $how: then verify: exit 0" [ "$rc" = 0 ]
	for i in "${!ids32[@]}"; do
		ws restore --sink "$U32" --tenant x32 --checkpoint "${ids32[$i]}" -o "x32r-$how-$obj-$i.db"
		check "$obj $how: checkpoint ${ids32[$i]} restores exactly its rows" \
			eval '[ "$rc" = 0 ] && [ "$(dump "x32r-$how-$obj-$i.db")" = "$(cat "x32c-$((i + 1)).dump")" ]'
	done
	ship x32.db 2 "$U32" x32
	ws checkpoint --sink "$U32"
	nid=$(json_field out id 2>/dev/null || echo 0)
	above=1
	for id in "${ids32[@]}"; do [ "$nid" -gt "$id" ] || above=0; done
	check "$obj $how: the next checkpoint commits, id $nid above every earlier one" eval '[ "$rc" = 0 ] && [ "$above" = 1 ]'
	ids32+=("$nid")
	dump x32.db >"x32c-${#ids32[@]}.dump"
done
sum2=$(ckdir_sum)
ws repair --sink "$U32"
check "repair after all that: nothing to repair, nothing written" \
	eval '[ "$rc" = 0 ] && grep -q "nothing to repair" err && [ "$(ckdir_sum)" = "$sum2" ]'

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
