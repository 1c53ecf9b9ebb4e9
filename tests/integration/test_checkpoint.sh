#!/usr/bin/env bash
# Checkpoints and retention through the CLI, on a file:// sink with a real
# SQLite writer: checkpoint, ls --checkpoints, restore --checkpoint ID|latest,
# retention (--dry-run first; verify and restore --frame after it),
# replicate --checkpoint-interval-s, a tenant missing from a cut and
# walship forget, and bad arguments (exit 2).
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

SINK="$ROOT/sink"
URL="file://$SINK"
sq db.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null
n=0
write() {
	local _
	for _ in $(seq "$1"); do
		n=$((n + 1))
		sq db.db "INSERT INTO t VALUES ($n, hex(randomblob(300)));"
	done
}
json_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }

echo "# take and restore"
write 20
ws replicate --sink "$URL" --once db.db
check "replicate --once: exit 0" [ "$rc" = 0 ]
ws checkpoint --sink "$URL"
check "checkpoint: exit 0" [ "$rc" = 0 ]
id1=$(json_field out id)
check "checkpoint prints an id and a reference" eval '[ -n "$id1" ] && grep -q "\"reference\"" out'
sq db.db .dump >at1.dump
write 20
ws replicate --sink "$URL" --once db.db
ws checkpoint --sink "$URL"
id2=$(json_field out id)
sq db.db .dump >at2.dump
check "a second checkpoint has a larger id" [ "$id2" -gt "$id1" ]
ws ls --sink "$URL" --checkpoints --json
check "ls --checkpoints lists both" eval '[ "$rc" = 0 ] && grep -q "$id1" out && grep -q "$id2" out'
check "ls --checkpoints --json: decided and cut_time in RFC 3339" \
	eval '[ "$(grep -cE "\"decided\":\"20[0-9-]+T[0-9:.]+Z\",\"cut_time\":\"20[0-9-]+T[0-9:.]+Z\"" out)" = 2 ]'
ws ls --sink "$URL" --checkpoints
check "ls --checkpoints: the cut's commit time beside the decision's" \
	eval '[ "$(grep -cE "decided=20[0-9-]+T[0-9:.]+Z cut_time=20[0-9-]+T[0-9:.]+Z" out)" = 2 ]'
ws restore --sink "$URL" --tenant db --checkpoint "$id1" -o c1.db
check "restore --checkpoint ID: the state at that cut" eval '[ "$rc" = 0 ] && [ "$(sq c1.db .dump)" = "$(cat at1.dump)" ]'
ws restore --sink "$URL" --tenant db --checkpoint latest -o c2.db
check "restore --checkpoint latest equals the source" eval '[ "$rc" = 0 ] && same_dump db.db c2.db'

echo "# retention"
write 10
ws replicate --sink "$URL" --once db.db
ws checkpoint --sink "$URL"
id3=$(json_field out id)
ws retention --sink "$URL" --keep-checkpoints 2 --json
check "retention --keep-checkpoints 2: exit 0, kept from the second checkpoint" \
	eval '[ "$rc" = 0 ] && [ "$(json_field out kept_from)" = "$id2" ] && [ "$(json_field out protected)" = "$id3" ]'
ws ls --sink "$URL" --checkpoints --json
check "... the first checkpoint is gone, the two kept are listed" \
	eval '[ "$rc" = 0 ] && ! grep -q "^{\"id\":$id1," out && grep -q "^{\"id\":$id2," out && grep -q "^{\"id\":$id3," out'
ws restore --sink "$URL" --tenant db --checkpoint "$id2" -o k2.db
check "... and the older one kept still restores its cut" eval '[ "$rc" = 0 ] && [ "$(sq k2.db .dump)" = "$(cat at2.dump)" ]'
ws verify --sink "$URL"
check "... verify: exit 0" [ "$rc" = 0 ]
for bad in 0 -1 abc 1000001; do
	ws retention --sink "$URL" --keep-checkpoints "$bad"
	check "retention --keep-checkpoints $bad: exit 2, naming the option" eval '[ "$rc" = 2 ] && grep -q "keep-checkpoints" err'
done
before=$(cd "$SINK" && find . -type f | sort)
ws retention --sink "$URL" --dry-run
check "retention --dry-run: exit 0, names what it would delete" eval '[ "$rc" = 0 ] && [ -s out ]'
check "retention --dry-run deletes nothing" [ "$before" = "$(cd "$SINK" && find . -type f | sort)" ]
cp out dry.txt
ws retention --sink "$URL"
check "retention: exit 0, deletes what the dry run named" eval '[ "$rc" = 0 ] && diff -q <(sort out) <(sort dry.txt) >/dev/null'
gone=0
while read -r key; do [ -e "$SINK/$key" ] && gone=1; done <out
check "every key retention printed is gone" [ "$gone" = 0 ]
ws verify --sink "$URL"
check "verify after retention: exit 0 (the chain down to the cut, plus its artifact)" eval '[ "$rc" = 0 ] && grep -q "verify: ok" out'
ws restore --sink "$URL" --tenant db --frame 1 -o before-cut.db
check "restore --frame before the protected cut: exit 1, history removed" eval '[ "$rc" = 1 ] && grep -q "retention removed" err'
ws restore --sink "$URL" --tenant db --checkpoint "$id1" -o old.db
check "an older checkpoint is gone after retention: exit 1" [ "$rc" = 1 ]
ws restore --sink "$URL" --tenant db --checkpoint "$id3" -o c3.db
check "the latest Commit still restores" eval '[ "$rc" = 0 ] && same_dump db.db c3.db'
write 5
ws replicate --sink "$URL" --once db.db
ws restore --sink "$URL" --tenant db -o live.db
check "the live stream still restores (checkpoint + frames after it)" eval '[ "$rc" = 0 ] && same_dump db.db live.db'
ws verify --sink "$URL" --tenant db
check "verify --tenant after retention and more frames: exit 0" [ "$rc" = 0 ]

echo "# periodic checkpoints while replicating"
"$WS_BIN" replicate --sink "$URL" --checkpoint-interval-s 1 --json db.db >rep.out 2>rep.err &
rep=$!
write 5
for _ in $(seq 100); do [ "$(grep -c '"checkpoint"' rep.out 2>/dev/null || true)" -ge 2 ] && break; sleep 0.1; done
check "replicate --checkpoint-interval-s takes checkpoints" [ "$(grep -c '"checkpoint"' rep.out)" -ge 2 ]
kill -TERM $rep
reap $rep rep.err "replicate with checkpoints"
check "replicate with checkpoints exits 0 on SIGTERM" [ "$reaped" = 0 ]
ws restore --sink "$URL" --tenant db --checkpoint latest -o c4.db
check "the latest periodic checkpoint equals the source" eval '[ "$rc" = 0 ] && same_dump db.db c4.db'

echo "# periodic checkpoints at a stale epoch"
ws checkpoint --sink "$URL" --epoch 50
check "checkpoint --epoch 50: committed" [ "$rc" = 0 ]
"$WS_BIN" replicate --sink "$URL" --checkpoint-interval-s 1 db.db >rep2.out 2>rep2.err &
rep=$!
for _ in $(seq 100); do grep -q "checkpoint failed" rep2.err 2>/dev/null && break; sleep 0.1; done
kill -TERM $rep
reap $rep rep2.err "replicate with stale checkpoints"
check "replicate whose checkpoints are refused (stale epoch) says so and exits 1" \
	eval '[ "$reaped" = 1 ] && grep -q "stale" rep2.err && grep -q "last periodic checkpoint was not taken" rep2.err'
"$WS_BIN" replicate --sink "$URL" --checkpoint-interval-s 1 --epoch 50 db.db >rep3.out 2>rep3.err &
rep=$!
for _ in $(seq 100); do grep -q "checkpoint [0-9]* committed" rep3.err 2>/dev/null && break; sleep 0.1; done
kill -TERM $rep
reap $rep rep3.err "replicate at the epoch checkpoints were decided at"
check "replicate at the checkpoints' epoch takes them and exits 0" [ "$reaped" = 0 ]

echo "# checkpoint and retention with a replicate host's config"
# Only the sink and the epoch are theirs: a core this host lacks is the
# replicate host's business, not a usage error here.
printf '[engine]\nsink = %s\n\n[shard.0]\ncore = 1000\n' "$URL" >host.ini
ws retention --config host.ini --dry-run
check "retention --config naming a core this host lacks: exit 0" [ "$rc" = 0 ]
ws checkpoint --config host.ini --epoch 50
check "checkpoint --config naming a core this host lacks: exit 0" [ "$rc" = 0 ]
ws replicate --config host.ini --once db.db
check "... while replicate with it is refused (exit 2, naming core)" eval '[ "$rc" = 2 ] && grep -q core err'
# A metrics address only the replicate host resolves.
printf '[engine]\nsink = %s\nmetrics_addr = no-such-host.invalid:9464\n' "$URL" >host2.ini
ws checkpoint --config host2.ini --epoch 50
check "checkpoint --config whose metrics_addr does not resolve here: exit 0" [ "$rc" = 0 ]
ws retention --config host2.ini --dry-run
check "retention --config whose metrics_addr does not resolve here: exit 0" [ "$rc" = 0 ]
ws replicate --config host2.ini --once db.db
check "... while replicate with it is refused at its line (exit 2)" \
	eval '[ "$rc" = 2 ] && grep -q "host2.ini:3: .*does not resolve" err'

echo "# bad arguments"
ws restore --sink "$URL" --tenant db --checkpoint banana -o x.db
check "restore --checkpoint banana: exit 2" [ "$rc" = 2 ]
ws restore --sink "$URL" --tenant db --checkpoint 1 --frame 3 -o x.db
check "restore --checkpoint with --frame: exit 2" [ "$rc" = 2 ]
ws checkpoint
check "checkpoint without --sink: exit 2" [ "$rc" = 2 ]
ws retention --sink "gopher://x"
check "retention with a bad URL: exit 2" [ "$rc" = 2 ]
ws replicate --sink "$URL" --checkpoint-interval-s 0 db.db
check "--checkpoint-interval-s 0: exit 2" [ "$rc" = 2 ]
ws replicate --sink "$URL" --checkpoint-interval-s 5 --once db.db
check "--checkpoint-interval-s with --once: exit 2, saying why" eval '[ "$rc" = 2 ] && grep -q "once" err'
ws ls --sink "$URL" --checkpoints --tenant db
check "ls --checkpoints with --tenant: exit 2" [ "$rc" = 2 ]

echo "# an index naming another tenant's image (hash-consistent: the index and head re-hashed)"
FS="$ROOT/forged"
sq big.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null
sq small.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null
sq big.db "INSERT INTO t(v) SELECT hex(randomblob(500)) FROM generate_series(1,200);"
sq small.db "INSERT INTO t(v) SELECT hex(randomblob(500)) FROM generate_series(1,5);"
ws replicate --sink "file://$FS" --once big.db small.db
ws checkpoint --sink "file://$FS"
check "forged: setup checkpoint" [ "$rc" = 0 ]
python3 - "$FS" small big <<'PY'
import hashlib, json, os, sys
sink, victim, donor = sys.argv[1:4]
def canon(o): return json.dumps(o, separators=(',', ':'), sort_keys=True, ensure_ascii=False).encode()
head = json.load(open(f'{sink}/checkpoints/head'))
ref = head['latest_commit']['committed']
idx = json.load(open(f"{sink}/{ref['key']}"))
cid = int(idx['checkpoint_id'])
vk, dk = (f"checkpoints/artifacts/{cid:016x}/{t}" for t in (victim, donor))
data = open(f'{sink}/{dk}', 'rb').read()
os.unlink(f'{sink}/{vk}')
open(f'{sink}/{vk}', 'wb').write(data)
for a in idx['artifacts']:
    if a['key'] == vk:
        a['length'], a['sha256'] = str(len(data)), hashlib.sha256(data).hexdigest()
body = canon(idx)
sha = hashlib.sha256(body).hexdigest()
nkey = f"checkpoints/committed/{cid:016x}-{sha}.json"
open(f'{sink}/{nkey}', 'wb').write(body)
os.unlink(f"{sink}/{ref['key']}")
nref = {'id': ref['id'], 'key': nkey, 'length': str(len(body)), 'sha256': sha}
head['latest_commit']['committed'] = nref
if (head['latest_terminal'].get('committed') or {}).get('id') == ref['id']:
    head['latest_terminal']['committed'] = nref
os.unlink(f'{sink}/checkpoints/head')
open(f'{sink}/checkpoints/head', 'wb').write(canon(head))
PY
ws verify --sink "file://$FS"
check "forged: verify fails, naming the artifact" eval '[ "$rc" = 1 ] && grep -q "artifacts/.*/small" err'
ws restore --sink "file://$FS" --tenant small --checkpoint latest -o forged-ckpt.db
check "forged: restore --checkpoint refuses it, writing nothing" eval '[ "$rc" = 1 ] && [ ! -e forged-ckpt.db ] && grep -q "cut manifest" err'
ws restore --sink "file://$FS" --tenant small -o forged-latest.db
check "forged: restore of the latest state is small's own" \
	eval '[ "$rc" = 0 ] && [ "$(sq forged-latest.db "SELECT count(*) FROM t")" = 5 ]'

echo "# a tenant missing from a cut; walship forget"
FG="$ROOT/forget-sink"
for t in keep gone; do
	sq "$t.db" "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null
	sq "$t.db" "INSERT INTO t VALUES (1, 'a'), (2, 'b');"
done
ws replicate --sink "file://$FG" --once keep.db gone.db
ws checkpoint --sink "file://$FG"
check "forget: two tenants, a checkpoint" eval '[ "$rc" = 0 ] && [ "$(json_field out tenants)" = 2 ]'
mv "$FG/gone" "$ROOT/gone-hidden"
ws checkpoint --sink "file://$FG"
check "a cut missing a tenant the last checkpoint named: exit 1, naming it and walship forget" \
	eval '[ "$rc" = 1 ] && grep -q "gone" err && grep -q "walship forget" err'
mv "$ROOT/gone-hidden" "$FG/gone"
ws forget --sink "file://$FG" --tenant nobody
check "forget of a name nothing was shipped under: exit 1, naming it" eval '[ "$rc" = 1 ] && grep -q "nobody" err'
ws forget --sink "file://$FG" --tenant "bad/name"
check "forget of a name no tenant may have: exit 2" [ "$rc" = 2 ]
ws forget --sink "file://$FG"
check "forget without --tenant: exit 2" [ "$rc" = 2 ]
ws forget --sink "file://$FG" --tenant gone --json
check "forget --tenant gone: exit 0, JSON with its watermark deleted" \
	eval '[ "$rc" = 0 ] && [ "$(json_field out watermark_deleted)" = True ] && [ "$(json_field out tenant)" = gone ]'
ws checkpoint --sink "file://$FG"
check "the next checkpoint commits without it" eval '[ "$rc" = 0 ] && [ "$(json_field out tenants)" = 1 ]'
ws retention --sink "file://$FG"
check "retention proceeds and deletes its objects" eval '[ "$rc" = 0 ] && grep -q "^gone/" out && [ ! -e "$FG/gone" ]'
ws verify --sink "file://$FG" --fail-on-orphans
check "verify --fail-on-orphans after it: exit 0" [ "$rc" = 0 ]
ws replicate --sink "file://$FG" --once keep.db gone.db
ws checkpoint --sink "file://$FG"
check "shipped again: a new tenant the next checkpoint names" eval '[ "$rc" = 0 ] && [ "$(json_field out tenants)" = 2 ]'
ws restore --sink "file://$FG" --tenant gone -o gone-again.db
check "... and it restores" eval '[ "$rc" = 0 ] && same_dump gone.db gone-again.db'

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
