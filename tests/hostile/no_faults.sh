#!/usr/bin/env bash
# A build without fault sites (Release, what is installed: WS_FAULTS=OFF)
# takes no faults from the environment (issue 30 item 6). Run by
# tools/test.sh's release section against build-release:
#
#   WS_BIN=build-release/tools/walship WS_LIB=build-release/core/libwalship.so \
#       bash tests/hostile/no_faults.sh
#
#   - WS_FAULT=stream.before_manifest_put:1:crash: replicate --once is not
#     killed, ships, and restore is equal to the source;
#   - WS_FAULT naming no site (fatal where sites exist): ignored;
#   - WS_PAUSE_RANDOM=1:1000:3000 (every site sleeps up to 3 s) with
#     WS_PAUSE_LOG=1: no pause is logged and the run takes seconds at most;
#   - neither the library nor the CLI holds the variables' names: nothing
#     in them can read them.
# WS_EXPECT_FAULTS=1 turns every check around, for a build with fault sites
# (the control: each check can fail).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$HERE/../integration/lib.sh"

EXPECT_FAULTS=${WS_EXPECT_FAULTS:-0}
# verdict DESC UNAFFECTED: UNAFFECTED is 1 when the process went on as if
# no fault was asked for.
verdict() {
	if [ "$2" = "$((1 - EXPECT_FAULTS))" ]; then ok "$1"; else bad "$1 (unaffected=$2, want $((1 - EXPECT_FAULTS)))"; fi
}

newdb() { rm -f "$1" "$1-wal" "$1-shm"; sq "$1" "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null; }
newdb d.db
sq d.db "INSERT INTO t(v) SELECT hex(randomblob(300)) FROM generate_series(1,50);"

# replicate_with ENV...: replicate --once of d.db into a fresh sink under ENV.
replicate_with() {
	rm -rf "$ROOT/sink"
	set +e
	env "$@" timeout -k 5 20 "$WS_BIN" replicate --sink "file://$ROOT/sink" --once --quiet d=d.db \
		>"$ROOT/out" 2>"$ROOT/err"
	rc=$?
	set -e
}

replicate_with WS_FAULT=stream.before_manifest_put:1:crash
u=0
if [ "$rc" = 0 ] && "$WS_BIN" restore --sink "file://$ROOT/sink" --tenant d -o "$ROOT/r.db" 2>>"$ROOT/err" &&
	same_dump d.db "$ROOT/r.db"; then u=1; fi
verdict "WS_FAULT=stream.before_manifest_put:1:crash: replicate ships (exit $rc), restore equal" "$u"

replicate_with WS_FAULT=no.such.site:1:crash
u=0
[ "$rc" = 0 ] && u=1
verdict "WS_FAULT naming no site: ignored (exit $rc)" "$u"

t0=$(date +%s%N)
replicate_with WS_PAUSE_RANDOM=1:1000:3000 WS_PAUSE_LOG=1
ms=$((($(date +%s%N) - t0) / 1000000))
u=0
[ "$rc" = 0 ] && ! grep -q "paused at" "$ROOT/err" && [ "$ms" -lt 3000 ] && u=1
verdict "WS_PAUSE_RANDOM=1:1000:3000: no pause (exit $rc, $ms ms)" "$u"

for f in "$WS_BIN" ${WS_LIB:+"$WS_LIB"}; do
	u=1
	grep -aq -e WS_PAUSE_RANDOM -e 'WS_FAULT=' "$f" && u=0
	verdict "$(basename "$f") holds neither WS_PAUSE_RANDOM nor WS_FAULT's parser" "$u"
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
