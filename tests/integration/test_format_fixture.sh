#!/usr/bin/env bash
# A sink written by walship's object format version 1 (tests/data/format_v1,
# made by tests/data/make_fixture_v1.py) must keep restoring with this and
# every later walship: verify passes, ls lists it, and restore at every
# recorded point (each generation's frames, --frame N of the watermark's
# generation, --time, each checkpoint, the head) writes a database that passes
# PRAGMA integrity_check and holds exactly what the source held then
# (tests/data/fixture_digest.py). Points retention removed are refused. A
# copy with one batch, manifest, snapshot part or checkpoint artifact damaged
# (a byte flipped; cut in half) is named by verify and refused by restore,
# nothing written at the output. The fixture is only ever read from a copy.
# Last, tests/data/rebase_frame0 (below): GEN:N of a generation valid from
# frame 0.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SRC=${WS_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
FIX=$SRC/tests/data/format_v1
DIGEST=$SRC/tests/data/fixture_digest.py
[ -f "$FIX/expected.txt" ] && [ -d "$FIX/sink" ] || { bad "no fixture at $FIX"; echo "$pass passed, $fail failed"; exit 1; }

fresh_copy() {
	rm -rf "$ROOT/sink"
	cp -R "$FIX/sink" "$ROOT/sink"
	chmod -R u+w "$ROOT/sink"
}
fresh_copy
URL="file://$ROOT/sink"

ws verify --sink "$URL"
check "verify: the fixture verifies (exit 0)" [ "$rc" = 0 ]
ws ls --sink "$URL"
check "ls: exit 0, both tenants listed" eval '[ "$rc" = 0 ] && grep -q "^a " out && grep -q "^b " out'
ws ls --sink "$URL" a
check "ls a: the live chain, the re-base's link and where retention cut the history" \
	eval '[ "$rc" = 0 ] && grep -q " rebase " out && grep -q " wal-restart " out && grep -q " checkpoint " out && grep -q "removed by retention" out'
ws ls --sink "$URL" b
check "ls b: two chains of g-none, back to the first" \
	eval '[ "$rc" = 0 ] && [ "$(grep -c " g-none " out)" = 2 ] && grep -q "first chain" out'
ws ls --sink "$URL" --checkpoints
check "ls --checkpoints: both checkpoints" eval '[ "$rc" = 0 ] && [ "$(grep -c "^checkpoint " out)" = 2 ]'
ws ls --sink "$URL" --tenant a --json
check "ls --tenant a: the watermark carries its manifest (version 3)" grep -q '"carried":true' out
ws ls --sink "$URL" --tenant b --json
check "ls --tenant b: a watermark naming a stored manifest (version 2)" grep -q '"carried":false' out

# restore_args KIND TENANT WHERE: the restore options for one line of expected.txt
restore_args() {
	case $1 in
	frame) echo "--frame $3" ;;
	liveframe) echo "--frame $3" ;;
	time) echo "--time $3" ;;
	checkpoint) echo "--checkpoint $3" ;;
	head) echo "" ;;
	removed) case $3 in *Z) echo "--time $3" ;; *) echo "--frame $3" ;; esac ;;
	*) return 1 ;;
	esac
}
points=0
while read -r kind tenant where want; do
	case $kind in '#'* | '') continue ;; esac
	points=$((points + 1))
	args=$(restore_args "$kind" "$tenant" "$where") || { bad "expected.txt: unknown kind '$kind'"; continue; }
	rm -f r.db
	# shellcheck disable=SC2086  # args is a list of options
	ws restore --sink "$URL" --tenant "$tenant" $args -o r.db
	if [ "$kind" = removed ]; then
		check "restore $tenant $args: refused as removed by retention, nothing written" \
			eval '[ "$rc" = 1 ] && grep -q "retention" err && [ ! -e r.db ]'
		continue
	fi
	got=$( [ "$rc" = 0 ] && [ "$(sqlite3 r.db 'PRAGMA integrity_check')" = ok ] && python3 "$DIGEST" r.db || echo none)
	check "restore $tenant ${args:-(head)}: integrity ok, the source's state (${want:0:12})" [ "$got" = "$want" ]
done <"$FIX/expected.txt"
check "expected.txt holds the points ($points)" [ "$points" -ge 30 ]

# The live chain's re-base: its manifest, a batch and a snapshot part, read
# by a restore at its first frame (the latest state is built from the latest
# checkpoint's cut, which is past it); the latest checkpoint's artifact of
# tenant a, read by restore --checkpoint latest.
read -r gen first < <("$WS_BIN" ls --sink "$URL" a --json | python3 -c '
import json, sys
for line in sys.stdin:
    g = json.loads(line)
    if g["chain"] == 0 and g["start"] == "rebase":
        print(g["generation"], g["first_frame"])')
dir=a/e0-p0/$gen
manifest=$(cd "$ROOT/sink" && ls -d "$dir"/m* | head -1)
batch=$(cd "$ROOT/sink" && ls -d "$dir"/b* | head -1)
snap=$(cd "$ROOT/sink" && ls -d "$dir"/s*/* | head -1)
artifact=$(cd "$ROOT/sink" && ls -d checkpoints/artifacts/*/a | sort | tail -1)
check "the objects to damage exist (generation '$gen')" \
	eval '[ -n "$gen" ] && [ -f "sink/$manifest" ] && [ -f "sink/$batch" ] && [ -f "sink/$snap" ] && [ -f "sink/$artifact" ]'

flip() { python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x20; open(p, "wb").write(b)' "$1"; }
halve() { truncate -s $(($(stat -c %s "$1") / 2)) "$1"; }
for obj in "$manifest" "$batch" "$snap" "$artifact"; do
	for damage in flip halve; do
		fresh_copy
		$damage "sink/$obj"
		ws verify --sink "$URL"
		check "verify, $obj ($damage): exit 1, the object named" eval '[ "$rc" = 1 ] && grep -qF "$obj" out err'
		opt="--frame $gen:$first"
		case $obj in checkpoints/*) opt="--checkpoint latest" ;; esac
		rm -rf outdir && mkdir outdir
		# shellcheck disable=SC2086
		ws restore --sink "$URL" --tenant a $opt -o outdir/r.db
		check "restore $opt, $obj ($damage): exit 1, nothing written at the output" \
			eval '[ "$rc" = 1 ] && [ -z "$(ls -A outdir)" ]'
	done
done

# tests/data/rebase_frame0: another sink of the same format whose live
# generation begins with a re-base of a WAL that held no committed frame yet
# (valid from frame 0). Each of its frames restores by GEN:N exactly as by
# plain N (the newest generation's frames), and verify passes: restore once
# refused GEN:N there, taking "valid from frame 0" for "not in this chain".
rm -rf "$ROOT/sink"
cp -R "$SRC/tests/data/rebase_frame0/sink" "$ROOT/sink"
chmod -R u+w "$ROOT/sink"
ws verify --sink "$URL"
check "rebase_frame0: verify passes" [ "$rc" = 0 ]
gen0=$("$WS_BIN" ls --sink "$URL" a | awk '$1 == 0 && $3 == "rebase" && $4 == 0 { print $2 }')
last0=$("$WS_BIN" ls --sink "$URL" a | awk '$1 == 0 { print $5 }')
check "rebase_frame0: the live generation is a re-base from frame 0 ('$gen0', to frame $last0)" \
	eval '[ -n "$gen0" ] && [ "${last0:-0}" -gt 1 ]'
for n in $(seq 1 "${last0:-0}"); do
	rm -f g.db p.db
	ws restore --sink "$URL" --tenant a --frame "$gen0:$n" -o g.db
	grc=$rc
	ws restore --sink "$URL" --tenant a --frame "$n" -o p.db
	check "rebase_frame0: --frame $gen0:$n restores as --frame $n" eval \
		'[ "$grc" = 0 ] && [ "$rc" = 0 ] && [ "$(python3 "$DIGEST" g.db)" = "$(python3 "$DIGEST" p.db)" ]'
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
