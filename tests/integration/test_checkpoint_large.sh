#!/usr/bin/env bash
# A checkpoint artifact is a whole database image, as large as the
# database. checkpoint, restore --checkpoint, an incremental checkpoint (built
# from the previous artifact) and verify of a database larger than the
# memory they are given must work: here each runs under an RLIMIT_DATA
# (prlimit --data: heap and other private writable memory) well below the
# database's size, on a file:// sink, and every restore equals the source.
#
# The sanitizer builds reserve shadow memory that RLIMIT_DATA counts: there
# the same steps run without the limit, on a smaller database that still
# spans several of the ranges an artifact is read in.
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir), WS_SANITIZE
# (the build's sanitizer: address, thread, or '' / OFF for none).
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

command -v prlimit >/dev/null || { echo "prlimit (util-linux) not found"; exit 1; }

SINK="$ROOT/sink"
URL="file://$SINK"
case "${WS_SANITIZE:-}" in "" | OFF) sanitized= ;; *) sanitized=1 ;; esac
if [ -n "$sanitized" ]; then
	DB_MIB=40
	LIMIT=()
else
	DB_MIB=160
	# 64 MiB of heap: enough for walship itself, far short of the image.
	LIMIT=(prlimit --data=$((64 << 20)))
fi
# wsl ARGS...: walship under the memory limit (out, err, $rc as ws).
wsl() {
	set +e
	"${LIMIT[@]}" "$WS_BIN" "$@" >"$ROOT/out" 2>"$ROOT/err"
	rc=$?
	set -e
	no_sanitizer_report "$ROOT/err" "walship $*"
}

rows=$((DB_MIB * 256)) # 4,000-byte rows, about one a page
sq db.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v BLOB);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $rows)
INSERT INTO t SELECT i, randomblob(4000) FROM s;" >/dev/null
size=$(stat -c %s db.db)
echo "# database: $size bytes (+ WAL $(stat -c %s db.db-wal 2>/dev/null || echo 0)); limit: ${LIMIT[*]:-none}"

ws replicate --sink "$URL" --once db.db
check "replicate --once: exit 0" [ "$rc" = 0 ]
# The first checkpoint without the limit, so that restore's own reading of
# an artifact is tested on its own below.
ws checkpoint --sink "$URL"
check "checkpoint: exit 0" [ "$rc" = 0 ]
art=$(find "$SINK" -path '*checkpoint*' -type f -size +$((DB_MIB / 2))M | head -1)
check "the artifact is the database's size ($size bytes; found ${art:-none})" \
	eval '[ -n "$art" ] && [ "$(stat -c %s "$art")" -ge "$size" ]'
wsl restore --sink "$URL" --tenant db --checkpoint latest -o c1.db
check "restore --checkpoint latest under the limit equals the source" eval '[ "$rc" = 0 ] && same_rows db.db c1.db'

# More writes, then a checkpoint under the limit, built from the first
# one's artifact (read back as restore reads it).
sq db.db "UPDATE t SET v = randomblob(4000) WHERE x % 97 = 0;" >/dev/null
ws replicate --sink "$URL" --once db.db
check "replicate --once after updates: exit 0" [ "$rc" = 0 ]
wsl checkpoint --sink "$URL"
check "incremental checkpoint under the limit: exit 0, built from the previous artifact" \
	eval '[ "$rc" = 0 ] && grep -q "\"incremental\":1" out'
wsl restore --sink "$URL" --tenant db --checkpoint latest -o c2.db
check "restore of the incremental checkpoint equals the source" eval '[ "$rc" = 0 ] && same_rows db.db c2.db'
wsl restore --sink "$URL" --tenant db -o c3.db
check "restore of the latest state under the limit equals the source" eval '[ "$rc" = 0 ] && same_rows db.db c3.db'
wsl verify --sink "$URL"
check "verify under the limit: exit 0" [ "$rc" = 0 ]

# A damaged byte deep inside the artifact (past the first range read) is
# found by its SHA-256: restore refuses and names it, verify fails. Before
# it, an artifact one byte longer or shorter than its index records.
art=$(find "$SINK" -path '*checkpoint*' -type f -size +$((DB_MIB / 2))M -newer c1.db | head -1)
if [ -n "$art" ]; then
	cp "$art" art.bak
	printf 'x' >>"$art"
	wsl restore --sink "$URL" --tenant db --checkpoint latest -o c5.db
	check "an artifact one byte longer: restore --checkpoint refuses, saying so" \
		eval '[ "$rc" != 0 ] && grep -q "is longer than the" err && [ ! -e c5.db ]'
	wsl verify --sink "$URL"
	check "an artifact one byte longer: verify fails" [ "$rc" != 0 ]
	truncate -s -2 "$art"
	wsl restore --sink "$URL" --tenant db --checkpoint latest -o c5.db
	check "an artifact one byte shorter: restore --checkpoint refuses, saying so" \
		eval '[ "$rc" != 0 ] && grep -q "is not the [0-9]* bytes its index records" err && [ ! -e c5.db ]'
	cp art.bak "$art"
	rm -f art.bak
	# The byte inverted, not set: a set value equals the random one there
	# once in 256 runs, and then nothing is damaged.
	python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1)
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xFF]))' "$art" $((size - 5000))
	wsl restore --sink "$URL" --tenant db --checkpoint latest -o c4.db
	check "a damaged artifact: restore --checkpoint refuses, names it, writes no file" \
		eval '[ "$rc" != 0 ] && grep -q "SHA-256" err && grep -qF "$(basename "$art")" err && [ ! -e c4.db ]'
	wsl verify --sink "$URL"
	check "a damaged artifact: verify fails" [ "$rc" != 0 ]
else
	bad "the second artifact was not found"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
