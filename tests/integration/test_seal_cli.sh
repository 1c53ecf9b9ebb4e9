#!/usr/bin/env bash
# Compression and encryption from the command line and the config file:
# [engine] / [tenant.NAME] compression, compression_level, key_file,
# replicate --compression / --key-file, $WALSHIP_KEY_FILE, and the readers'
# --key-file (restore, restore --checkpoint, verify, follow's option).
# Every acknowledged state restores exactly (its digest recorded when it was
# shipped) with the key, from the key file or the environment; without it,
# restore refuses naming the key id and writes nothing, and verify checks
# what it can and exits 4. The sink holds none of the rows' text, and no
# output ever shows a key. Rotation: a key appended to the file encrypts
# what follows; the older objects still open with the file. Bad values in
# the config file and on the command line are named.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SRC=${WS_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
DIGEST=$SRC/tests/data/fixture_digest.py
URL="file://$ROOT/sink"
MARK=plaintext-marker-that-must-never-reach-the-sink

newkey() { python3 -c 'import secrets; print(secrets.token_hex(32))'; }
K1=$(newkey)
K2=$(newkey)
printf '# walship keys\n%s\n' "$K1" >keys
chmod 600 keys
# no_secret FILE...: no key's hex in any of them
no_secret() { ! grep -qiE "$K1|$K2" "$@"; }

cat >ws.ini <<EOF
[engine]
sink = $URL
compression = zstd
compression_level = 5
key_file = $ROOT/keys

[tenant.a]
path = $ROOT/a.db

[tenant.b]
path = $ROOT/b.db
compression = none
EOF

for t in a b; do
	sq "$t.db" "PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);" >/dev/null
done
: >points.txt
# commit_ship N: N transactions in each tenant, each shipped, its state recorded
commit_ship() {
	local i t
	for i in $(seq "$1"); do
		for t in a b; do
			sq "$t.db" "INSERT INTO t(v) SELECT '$MARK ' || hex(randomblob(20)) FROM (SELECT 1 UNION SELECT 2 UNION SELECT 3);" >/dev/null
		done
		ws replicate --config ws.ini --once
		[ "$rc" = 0 ] || { bad "replicate --once --config: exit $rc"; return 0; }
		no_secret out err || bad "replicate printed a key"
		for t in a b; do
			ws ls --sink "$URL" --tenant "$t" --json
			echo "$t $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["watermark"]["last_frame"])' out) $(python3 "$DIGEST" "$t.db")" >>points.txt
		done
	done
}
commit_ship 3

check "the sink holds none of the rows' text" eval '! grep -rqa "$MARK" sink'
# the version of every batch object: 2 (sealed), never 1
check "every batch is a version 2 (sealed) object" python3 - "$ROOT/sink" <<'PY'
import os, struct, sys
n = 0
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        if f.startswith("b"):
            h = open(os.path.join(d, f), "rb").read(12)
            assert h[:8] == b"WSBATCH1" and struct.unpack("<I", h[8:12])[0] == 2, f
            n += 1
assert n > 0
PY

echo "# without the key"
ws restore --sink "$URL" --tenant a -o r.db
check "restore without the key: exit 1, names the key id, nothing written" \
	eval '[ "$rc" = 1 ] && grep -qi "key [0-9a-f]\{16\} not available" err && [ ! -e r.db ]'
ws verify --sink "$URL"
check "verify without the key: exit 4, INCOMPLETE, says what it did not check" \
	eval '[ "$rc" = 4 ] && grep -q "INCOMPLETE" out && grep -q "not checked" err'

# restore_points WHAT: every recorded state restores, with the key file, to its digest
restore_points() {
	local t frame want
	while read -r t frame want; do
		rm -f r.db
		ws restore --sink "$URL" --tenant "$t" --frame "$frame" --key-file keys -o r.db
		check "$1restore $t --frame $frame --key-file: the state committed then" \
			eval '[ "$rc" = 0 ] && [ "$(python3 "$DIGEST" r.db)" = "$want" ]'
	done <points.txt
}
echo "# with the key: every recorded state"
restore_points ""
rm -f r.db
set +e
WALSHIP_KEY_FILE=$ROOT/keys "$WS_BIN" restore --sink "$URL" --tenant b -o r.db >out 2>err
rc=$?
set -e
check "restore with WALSHIP_KEY_FILE: the latest state" \
	eval '[ "$rc" = 0 ] && [ "$(python3 "$DIGEST" r.db)" = "$(tail -n1 points.txt | cut -d" " -f3)" ]'
ws verify --sink "$URL" --key-file keys
check "verify --key-file: exit 0" [ "$rc" = 0 ]

echo "# rotation: a second key appended"
echo "$K2" >>keys
commit_ship 2
tail -n2 points.txt >latest.txt
printf '%s\n' "$K2" >only-k2
restore_points "after rotation: "
rm -f r.db
ws restore --sink "$URL" --tenant a --key-file only-k2 -o r.db
check "with only the new key: the old objects are refused by key id, nothing written" \
	eval '[ "$rc" = 1 ] && grep -qi "key [0-9a-f]\{16\} not available" err && [ ! -e r.db ]'

echo "# checkpoint and restore --checkpoint"
ws checkpoint --config ws.ini
check "checkpoint --config (its key files join the sink's keys): exit 0" [ "$rc" = 0 ]
for t in a b; do
	rm -f r.db
	ws restore --sink "$URL" --tenant "$t" --checkpoint latest --key-file keys -o r.db
	want=$(grep "^$t " latest.txt | cut -d" " -f3)
	check "restore $t --checkpoint latest --key-file: the latest state" \
		eval '[ "$rc" = 0 ] && [ "$(python3 "$DIGEST" r.db)" = "$want" ]'
done

check "after the checkpoint, the sink still holds none of the rows' text" eval '! grep -rqa "$MARK" sink'
check "the checkpoint's artifacts are sealed (version 2)" eval \
	'[ "$(grep -rla "^WSARTIF1" sink/checkpoints 2>/dev/null | wc -l)" -ge 2 ]'
echo "# retention of a sealed sink"
ws retention --sink "$URL"
check "retention without the key: refused (it cannot check the checkpoint it keeps), nothing deleted" \
	eval '[ "$rc" = 1 ] && grep -q "cannot be checked without its key" err && grep -qi "key [0-9a-f]\{16\}" err && [ ! -s out ]'
ws retention --config ws.ini
check "retention --config (its key files): exit 0, objects deleted" eval '[ "$rc" = 0 ] && [ -s out ]'
for t in a b; do
	rm -f r.db
	ws restore --sink "$URL" --tenant "$t" --key-file keys -o r.db
	want=$(grep "^$t " latest.txt | cut -d" " -f3)
	check "after retention, restore $t: the latest state" eval '[ "$rc" = 0 ] && [ "$(python3 "$DIGEST" r.db)" = "$want" ]'
done
ws verify --sink "$URL" --key-file keys
check "after retention, verify --key-file: exit 0" [ "$rc" = 0 ]
echo "# replicate's own periodic checkpoints seal too"
sq a.db "INSERT INTO t(v) VALUES ('$MARK periodic');" >/dev/null
set +e
timeout -s TERM 6 "$WS_BIN" replicate --config ws.ini --checkpoint-interval-s 1 >periodic.out 2>periodic.err
set -e
ws ls --sink "$URL" --checkpoints
check "replicate --checkpoint-interval-s took a checkpoint" eval '[ "$(grep -c "^checkpoint " out)" -ge 2 ]'
check "and the sink holds none of the rows' text" eval '! grep -rqa "$MARK" sink'
echo "# replicate --compression on the command line, no key"
sq c.db "PRAGMA journal_mode=WAL; CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('$MARK');" >/dev/null
ws replicate --sink "file://$ROOT/plain" --compression zstd --once c=c.db
check "replicate --compression zstd: exit 0" [ "$rc" = 0 ]
check "compressed, not encrypted: restore needs no key" eval \
	'rm -f r.db; "$WS_BIN" restore --sink "file://$ROOT/plain" --tenant c -o r.db 2>/dev/null && [ "$(sq r.db "SELECT v FROM t")" = "$MARK" ]'

echo "# bad input"
bad_ini() { # bad_ini DESC LINE PATTERN: a config with LINE in [engine] is refused naming PATTERN
	local want=$3
	printf '[engine]\nsink = %s\n%s\n' "file://$ROOT/bad" "$2" >bad.ini
	ws replicate --config bad.ini --once a=a.db
	check "config $1: exit 2 naming it" eval '[ "$rc" = 2 ] && grep -qF "$want" err'
}
bad_ini "compression = lz4" "compression = lz4" "compression: 'lz4' is not zstd or none"
bad_ini "compression_level = 0" "compression_level = 0" "compression_level: '0' must be an integer 1..19"
bad_ini "compression_level = 20" "compression_level = 20" "compression_level: '20' must be an integer 1..19"
bad_ini "key_file twice" "key_file = $ROOT/keys
key_file = $ROOT/keys" "key_file: set twice"
printf '[engine]\nsink = %s\n[tenant.a]\npath = %s\ncompression_level = high\n' "file://$ROOT/bad" "$ROOT/a.db" >bad.ini
ws replicate --config bad.ini --once
check "[tenant.a] compression_level = high: exit 2 naming it" \
	eval '[ "$rc" = 2 ] && grep -q "\[tenant.a\] compression_level" err'
ws replicate --sink "file://$ROOT/bad" --compression brotli --once a=a.db
check "--compression brotli: exit 2 naming it" eval '[ "$rc" = 2 ] && grep -q "compression: .brotli" err'
ws replicate --sink "file://$ROOT/bad" --key-file "$ROOT/missing-keys" --once a=a.db
check "replicate --key-file of a missing file: exit 2 naming the file, nothing shipped" \
	eval '[ "$rc" = 2 ] && grep -q "missing-keys" err && [ ! -e bad/a/wm ]'
printf '[engine]\nsink = %s\n[tenant.a]\npath = %s\nkey_file = %s\n' "file://$ROOT/bad" "$ROOT/a.db" "$ROOT/nokeys" >bad.ini
ws replicate --config bad.ini --once
check "[tenant.a] key_file of a missing file: exit 2 naming section and file" \
	eval '[ "$rc" = 2 ] && grep -q "\[tenant.a\] key_file: cannot read .*nokeys" err'
printf '%s\nnot-a-key\n' "$K1" >badkeys
ws replicate --sink "file://$ROOT/bad" --key-file "$ROOT/badkeys" --once a=a.db
check "a key file with a bad line: fails naming file and line, never a key" \
	eval '[ "$rc" != 0 ] && grep -q "badkeys.*2" err && no_secret out err'
printf '%s\n' "${K1:0:40}" >shortkey
ws restore --sink "$URL" --tenant a --key-file shortkey -o r2.db
check "restore --key-file with a short key: exit != 0 naming the file, nothing written" \
	eval '[ "$rc" != 0 ] && grep -q "shortkey" err && [ ! -e r2.db ] && no_secret out err'
ws verify --sink "$URL" --key-file "$ROOT/missing-keys"
check "verify --key-file of a missing file: exit 1 naming it" eval '[ "$rc" = 1 ] && grep -q "missing-keys" err'
check "no output of this test showed a key" no_secret out err

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
