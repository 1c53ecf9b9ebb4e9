#!/usr/bin/env bash
# Checkpoints of an s3:// sink (the shared authority: no lease, attempts
# race through conditional writes) through the CLI, with real processes
# stopped or killed at WS_FAULT sites (base/ws_fault.h), against the
# radosgw the ctest fixture starts:
#   1. a checkpoint whose attempt another writer's decides first (that
#      writer's attempt was open when this one began, and decides while this
#      one waits for it) takes nothing: exit 1, "checkpoint not taken",
#      naming the winner, and the winner's exit is 0;
#   2. a checkpoint killed right after its decision (its witness still open,
#      its clean-up not done): the next checkpoint finishes that clean-up and
#      takes its own (exit 0, a new ID), and every later one too;
#   3. then restore --checkpoint of both, verify --fail-on-orphans after
#      retention;
#   4. a database of 20 MiB: its artifact is sent from the mapped image and
#      read back in ranges (8 MiB each), restore --checkpoint equals the
#      source and verify passes; and through tests/s3/faultproxy.py
#      answering every range with the whole object (a fault radosgw cannot
#      be made to produce);
#   5. a checkpoint killed with its witness open: the next one waits 30 s
#      for it by a monotonic deadline, a few GETs a second, waiting out the
#      503s the proxy answers to its first GETs, then aborts it and commits.
#   6. one flipped byte in the latest committed index, in
#      checkpoints/inventory and in checkpoints/witness (issue 31 items 4, 5);
#   7. a damaged checkpoints/head and checkpoints/deployment, a deleted
#      head: `walship repair`, one repair racing another and a checkpoint.
#
# Env: WS_BIN, WS_TEST_TMP, WS_S3_DIR (the fixture's dir; $WS_S3_DIR/env has
# WS_S3_ENDPOINT and the AWS_* variables), WS_FAULTPROXY. Without WS_S3_DIR the test
# fails: it never passes without a server.
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

need_radosgw
load_s3_env "$WS_S3_DIR/env"
E=$WS_S3_ENDPOINT

B="walship-ck-$(date +%s)-$$"
make_bucket "$E" "$B"
U="s3://$B/ck?endpoint=$E"

json_id() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["id"])' "$1"; }

sq a.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null
sq a.db "INSERT INTO t(v) VALUES ('one'), ('two');"
ws replicate --sink "$U" --once a=a.db
check "replicate --once to s3: exit 0" [ "$rc" = 0 ]

echo "# 1. another writer's attempt decides while this one waits for it"
# A stops with its witness open, before its first artifact. B stops once
# it has its ID; continued, it reads the cut (a few requests), finds A's
# witness open and waits for A's decision (up to 30 s: the peer wait); A is
# continued 3 s later and decides.
WS_FAULT=checkpoint.artifact.before_put:1:stop "$WS_BIN" checkpoint --sink "$U" >a.out 2>a.err &
a=$!
check "checkpoint A stops with its attempt open" wait_stopped $a
WS_FAULT=ckpt.alloc.after_cas:1:stop "$WS_BIN" checkpoint --sink "$U" >b.out 2>b.err &
b=$!
check "checkpoint B stops with its ID allocated" wait_stopped $b
kill -CONT $b
sleep 3
kill -CONT $a
reap $a a.err "checkpoint A"
arc=$reaped
reap $b b.err "checkpoint B"
brc=$reaped
check "A commits: exit 0 ($arc)" eval '[ "$arc" = 0 ] && grep -q "\"committed\":true" a.out'
aid=$(json_id a.out)
check "B took nothing: exit 1 ($brc), \"checkpoint not taken\" naming A's checkpoint $aid" \
	eval '[ "$brc" = 1 ] && grep -q "checkpoint not taken: another writer.s checkpoint $aid was decided first (commit)" b.err'
ws ls --sink "$U" --checkpoints --json
check "one checkpoint stored: A's" eval '[ "$rc" = 0 ] && [ "$(grep -c . out)" = 1 ] && grep -q "\"id\":$aid," out'

echo "# 2. a checkpoint killed right after its decision"
sq a.db "INSERT INTO t(v) VALUES ('three');"
ws replicate --sink "$U" --once a=a.db
set +e
WS_FAULT=ckpt.record.after_cas:1:crash "$WS_BIN" checkpoint --sink "$U" >c.out 2>c.err
crc=$?
set -e
check "checkpoint C killed after its decision (exit $crc)" [ "$crc" = 137 ]
ws checkpoint --sink "$U"
check "the next checkpoint finishes C's clean-up and takes its own: exit 0" \
	eval '[ "$rc" = 0 ] && grep -q "\"committed\":true" out'
did=$(json_id out)
ws checkpoint --sink "$U"
check "and the one after: exit 0, a later ID" \
	eval '[ "$rc" = 0 ] && [ "$(json_id out)" -gt "$did" ] && [ "$did" -gt "$aid" ]'

echo "# 3. what the checkpoints hold"
ws restore --sink "$U" --tenant a --checkpoint "$aid" -o ra.db
check "restore --checkpoint A: the rows at A's cut" eval '[ "$rc" = 0 ] && [ "$(sq ra.db "SELECT count(*) FROM t;")" = 2 ]'
ws restore --sink "$U" --tenant a --checkpoint latest -o rl.db
check "restore --checkpoint latest equals the source" eval '[ "$rc" = 0 ] && same_dump a.db rl.db'
ws retention --sink "$U"
check "retention: exit 0" [ "$rc" = 0 ]
ws verify --sink "$U" --fail-on-orphans
check "verify --fail-on-orphans after retention: exit 0, no orphan" \
	eval '[ "$rc" = 0 ] && grep -q "^orphans: 0$" out'

echo "# 4. an artifact of several ranges"
sq big.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v BLOB);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 5000)
INSERT INTO t SELECT i, randomblob(4000) FROM s;" >/dev/null
ws replicate --sink "$U" --once big=big.db
check "replicate --once of a 20 MiB database: exit 0" [ "$rc" = 0 ]
ws checkpoint --sink "$U"
check "checkpoint: exit 0" [ "$rc" = 0 ]
ws restore --sink "$U" --tenant big --checkpoint latest -o rbig.db
check "restore --checkpoint latest of the 20 MiB database equals the source" \
	eval '[ "$rc" = 0 ] && same_rows big.db rbig.db'
ws verify --sink "$U" --tenant big
check "verify: exit 0" [ "$rc" = 0 ]
# Through a store that answers every range with the whole object (HTTP
# allows it): the ranged read failed ("too large"), and restore --checkpoint
# of every artifact over one range with it.
start_faultproxy "$E"
set_fault '{"mode": "ignore_range", "count": 1000000, "methods": ["GET"]}'
ws restore --sink "s3://$B/ck?endpoint=$PROXY" --tenant big --checkpoint latest -o rbig2.db
check "restore --checkpoint through a store that ignores Range equals the source" \
	eval '[ "$rc" = 0 ] && same_rows big.db rbig2.db'

echo "# 5. the wait for a crashed attempt, its reads throttled"
# A checkpoint killed with its witness open leaves an attempt nobody will
# decide: the next one waits 30 s for it (a monotonic deadline), reading
# checkpoints/head a few times a second at most, then aborts it and takes
# its own. Through the proxy, its first GETs answered 503 SlowDown (with
# Retry-After) and delayed: waited out within the same deadline. Before,
# the wait counted only its 20 ms sleeps: 103-106 s and ~1,600 GETs.
set +e
WS_FAULT=checkpoint.artifact.after_put:1:crash "$WS_BIN" checkpoint --sink "$U" >k.out 2>k.err
krc=$?
set -e
check "a checkpoint killed with its witness open (exit $krc)" [ "$krc" = 137 ]
pstat() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$ROOT/proxy.stats" "$1"; }
preqs() { pstat requests; }
set_fault '{"mode": "latency", "latency_ms": 50}'
req0=$(preqs)
t0=$(date +%s%N)
"$WS_BIN" checkpoint --sink "s3://$B/ck?endpoint=$PROXY" >w.out 2>w.err &
w=$!
# Waiting by now: its next GETs of the head are refused (503, Retry-After 1 s).
sleep 6
# The latency fault counts each request it delays: passed through from
# here, so that only the six refusals count (a loaded machine sent a GET or
# two between reading the count and setting the refusals).
set_fault '{"mode": "pass"}'
sleep 0.3
f0=$(pstat faulted)
set_fault '{"mode": "slowdown", "count": 6, "methods": ["GET"], "latency_ms": 50, "retry_after": 1}'
reap $w w.err "checkpoint past the crashed attempt"
el=$((($(date +%s%N) - t0) / 1000000))
reqs=$(($(preqs) - req0))
echo "  wait past the crashed attempt: ${el} ms, $reqs requests"
check "the next checkpoint aborts it after the 30 s wait and commits its own: exit 0 ($reaped)" \
	eval '[ "$reaped" = 0 ] && grep -q "\"committed\":true" w.out'
refused=$(($(pstat faulted) - f0))
check "... the proxy refused 6 of its GETs while it waited ($refused)" [ "$refused" = 6 ]
check "... in 30..45 s (${el} ms), not past the deadline" [ "$el" -ge 30000 ] && [ "$el" -le 45000 ]
check "... with a few requests a second at most ($reqs in ${el} ms)" [ "$reqs" -le 200 ]
kill "$PROXY_PID" 2>/dev/null || true
wait "$PROXY_PID" 2>/dev/null || true
ws verify --sink "$U" --fail-on-orphans
check "verify --fail-on-orphans after it: exit 0" eval '[ "$rc" = 0 ] && grep -q "^orphans: 0$" out'

echo "# 6. a damaged latest committed index, inventory and witness (issue 31 items 4, 5)"
# One flipped byte in the latest committed index, rewritten through the
# S3 API: verify names it, ls marks it, the intact older checkpoint restores
# exactly, the next checkpoint commits past it and retention removes it.
U5="s3://$B/ck31?endpoint=$E"
s3obj() { # s3obj METHOD KEY [FILE]: one signed request on the bucket
	local extra=()
	[ -n "${3:-}" ] && extra=(--data-binary "@$3")
	curl -sS --max-time 30 -o "$ROOT/s3obj.body" -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
		-X "$1" "${extra[@]}" "$E/$B/$2"
}
sq e.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null
for i in 1 2; do
	for _ in 1 2 3 4 5; do sq e.db "INSERT INTO t VALUES (NULL, hex(randomblob(100)));"; done
	ws replicate --sink "$U5" --once e=e.db
	ws checkpoint --sink "$U5"
	cp out "ck5-$i.json"
	sq e.db .dump >"e-$i.dump"
done
id51=$(json_id ck5-1.json)
key52=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["reference"]["key"])' ck5-2.json)
code=$(s3obj GET "ck31/$key52")
cp "$ROOT/s3obj.body" idx52
python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=0xff; open(p,"wb").write(b)' idx52
code2=$(s3obj PUT "ck31/$key52" idx52)
check "the index read and rewritten damaged through S3: HTTP 200" eval '[ "$code" = 200 ] && [ "$code2" = 200 ]'
ws verify --sink "$U5"
check "verify: exit 1 naming the damaged index" eval '[ "$rc" = 1 ] && grep -q "$key52" out err'
ws ls --sink "$U5" --checkpoints
check "ls --checkpoints: the damaged one marked, the older listed" \
	eval '[ "$rc" = 0 ] && grep -q "DAMAGED" out && grep -q "tenants=1" out'
ws restore --sink "$U5" --tenant e --checkpoint "$id51" -o re51.db
check "restore --checkpoint of the intact older one: exactly its rows" \
	eval '[ "$rc" = 0 ] && [ "$(sq re51.db .dump)" = "$(cat e-1.dump)" ]'
for k in inventory witness; do
	s3obj GET "ck31/checkpoints/$k" >/dev/null
	cp "$ROOT/s3obj.body" "ctl-$k"
	python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[3]^=0xff; open(p,"wb").write(b)' "ctl-$k"
	s3obj PUT "ck31/checkpoints/$k" "ctl-$k" >/dev/null
done
ws verify --sink "$U5"
check "a damaged inventory and witness: verify names both" \
	eval '[ "$rc" = 1 ] && grep -q "checkpoints/inventory" out err && grep -q "checkpoints/witness" out err'
for _ in 1 2 3; do sq e.db "INSERT INTO t VALUES (NULL, hex(randomblob(100)));"; done
ws replicate --sink "$U5" --once e=e.db
ws checkpoint --sink "$U5"
check "the next checkpoint commits past the damaged index, rebuilding inventory and witness: exit 0" [ "$rc" = 0 ]
ws retention --sink "$U5"
check "retention: exit 0" [ "$rc" = 0 ]
code=$(s3obj GET "ck31/$key52")
check "the damaged index is gone" [ "$code" = 404 ]
ws verify --sink "$U5"
check "verify: exit 0 again" [ "$rc" = 0 ]
ws restore --sink "$U5" --tenant e --checkpoint latest -o re53.db
check "the new checkpoint restores exactly" eval '[ "$rc" = 0 ] && same_rows e.db re53.db'

echo "# 7. a damaged checkpoints/head and checkpoints/deployment: walship repair, racing real writers"
# The head gets a flipped byte: checkpoint, verify and restore --checkpoint
# name it and `walship repair`. Repair R1 is stopped before its write
# (WS_FAULT stop at ckpt.repair.before_put); meanwhile a second repair
# rebuilds the head and a checkpoint commits past it (on s3:// nothing
# excludes them: no lease). R1, continued, loses its compare-and-swap and
# fails saying to run again: the new decision stands.
ckget() { s3obj GET "ck31/checkpoints/$1" >/dev/null; cp "$ROOT/s3obj.body" "$2"; }
ckflip() { # ckflip OBJ: one inverted byte in the middle of checkpoints/OBJ
	ckget "$1" "ctl7-$1"
	python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=0xff; open(p,"wb").write(b)' "ctl7-$1"
	s3obj PUT "ck31/checkpoints/$1" "ctl7-$1" >/dev/null
}
ws ls --sink "$U5" --checkpoints --json
id70=$(json_id out)
sq e.db .dump >e-70.dump
ckflip head
ws checkpoint --sink "$U5"
check "a damaged head: checkpoint exit 1 naming it and walship repair" \
	eval '[ "$rc" = 1 ] && grep -q "checkpoints/head.*run: walship repair --sink s3://" err'
ws restore --sink "$U5" --tenant e --checkpoint "$id70" -o re7bad.db
check "restore --checkpoint names them too" eval '[ "$rc" = 1 ] && grep -q "run: walship repair" err'
ws verify --sink "$U5"
check "verify names them" eval '[ "$rc" = 1 ] && grep -q "checkpoints/head.*run: walship repair" err'
WS_FAULT=ckpt.repair.before_put:1:stop "$WS_BIN" repair --sink "$U5" >r1.out 2>r1.err &
r1=$!
check "repair R1 stops before its write" wait_stopped $r1
ws repair --sink "$U5"
check "repair R2 meanwhile: exit 0, head rebuilt" eval '[ "$rc" = 0 ] && grep -q "^checkpoints/head: rebuilt" out'
sq e.db "INSERT INTO t VALUES (NULL, 'seven');"
ws replicate --sink "$U5" --once e=e.db
ws checkpoint --sink "$U5"
check "a checkpoint commits meanwhile: exit 0" eval '[ "$rc" = 0 ] && grep -q "\"committed\":true" out'
id7=$(json_id out)
ckget head head7
kill -CONT $r1
reap $r1 r1.err "repair R1"
check "R1 loses its compare-and-swap: exit 1, run again ($reaped)" \
	eval '[ "$reaped" = 1 ] && grep -q "changed while it was repaired.*run again" r1.err'
ckget head head7b
check "the head still names the checkpoint committed meanwhile" cmp -s head7 head7b
ws verify --sink "$U5"
check "verify: exit 0" [ "$rc" = 0 ]
ws restore --sink "$U5" --tenant e --checkpoint "$id7" -o re7.db
check "the checkpoint decided during the race restores exactly" eval '[ "$rc" = 0 ] && same_rows e.db re7.db'
ws restore --sink "$U5" --tenant e --checkpoint "$id70" -o re71.db
check "and the one before the damage too" eval '[ "$rc" = 0 ] && [ "$(sq re71.db .dump)" = "$(cat e-70.dump)" ]'
# The deployment record damaged, then the head deleted.
ckflip deployment
ws checkpoint --sink "$U5"
check "a damaged deployment: checkpoint exit 1 naming it and walship repair" \
	eval '[ "$rc" = 1 ] && grep -q "checkpoints/deployment.*run: walship repair --sink s3://" err'
ws repair --sink "$U5" --json
check "repair rebuilds it (shared authority)" \
	eval '[ "$rc" = 0 ] && grep -q "\"key\":\"checkpoints/deployment\"" out && grep -q "\"authority\":\"shared\"" out'
code=$(s3obj DELETE "ck31/checkpoints/head")
ws ls --sink "$U5" --checkpoints
check "the head deleted ($code): ls --checkpoints names it and walship repair" \
	eval '[ "$rc" = 1 ] && grep -q "checkpoints/head is missing.*run: walship repair" err'
ws repair --sink "$U5"
check "repair recreates it" eval '[ "$rc" = 0 ] && grep -q "^checkpoints/head: rebuilt: latest Commit $id7," out'
sq e.db "INSERT INTO t VALUES (NULL, 'eight');"
ws replicate --sink "$U5" --once e=e.db
ws checkpoint --sink "$U5"
id8=$(json_id out 2>/dev/null || echo 0)
check "the next checkpoint commits above every earlier id ($id8 > $id7)" eval '[ "$rc" = 0 ] && [ "$id8" -gt "$id7" ]'
ws verify --sink "$U5"
check "verify: exit 0" [ "$rc" = 0 ]
ws repair --sink "$U5"
check "repair on the healthy sink: nothing to repair" eval '[ "$rc" = 0 ] && grep -q "nothing to repair" err'

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
