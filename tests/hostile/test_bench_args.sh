#!/usr/bin/env bash
# walship-bench against hostile arguments and outputs (issue 30 item 7):
#   - --rate nan, '', 0x10, inf, -1: refused before the run (no --dir made);
#   - --json '': refused before the run;
#   - --json /dev/full: the run's write error is reported, exit non-zero;
#   - a label and a sink URL with quotes, backslashes and a newline: the
#     JSON output parses and holds them as given;
#   - an engine that cannot be created (a relative file:// URL): exit 2,
#     nothing leaked (valgrind where there is no sanitizer, which checks
#     leaks itself).
# Env: WS_BUILD (the build directory), WS_TEST_TMP (scratch dir), WS_BIN.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$HERE/../integration/lib.sh"

B="${WS_BUILD:-$(dirname "$WS_BIN")/..}/bench/walship-bench"
if [ ! -x "$B" ]; then
	echo "skipped: $B not built (WS_BUILD_BENCH=OFF)"
	exit 0
fi

# bench ARGS...: walship-bench under a time bound; out, err, $rc.
bench() {
	set +e
	timeout -k 5 120 "$B" "$@" >"$ROOT/out" 2>"$ROOT/err"
	rc=$?
	set -e
	no_sanitizer_report "$ROOT/err" "walship-bench $*"
}
QUICK=(--tenants 1 --seconds 1 --no-baselines --no-restore-check)

# refused FLAG VALUE: walship-bench refuses FLAG VALUE, naming FLAG, before
# the run (its --dir is never made).
refused() {
	rm -rf "$ROOT/d"
	bench --sink "file://$ROOT/s" --dir "$ROOT/d" "$1" "$2" "${QUICK[@]}"
	if [ "$rc" != 0 ] && grep -q -- "$1" "$ROOT/err" && [ ! -e "$ROOT/d" ]; then
		ok "$1 '$2': refused before the run"
	else
		bad "$1 '$2': exit $rc, want a refusal naming $1 before --dir is made"
	fi
}
for r in nan '' 0x10 inf -1 '1 0'; do
	refused --rate "$r"
done
refused --json ''

if [ -w /dev/full ]; then
	bench --sink "file://$ROOT/s1" --dir "$ROOT/d1" --json /dev/full "${QUICK[@]}"
	if [ "$rc" = 1 ] && grep -q "writing /dev/full: No space left on device" "$ROOT/err"; then
		ok "--json /dev/full: the write error is reported, exit 1"
	else
		bad "--json /dev/full: exit $rc, want 1 and the write error"
	fi
else
	echo "skipped: /dev/full not writable"
fi

LABEL=$'q"uote\\back\nline\ttab'
SINK_DIR="$ROOT/s\"2\\x"
bench --sink "file://$SINK_DIR" --dir "$ROOT/d2" --label "$LABEL" --json "$ROOT/o.json" "${QUICK[@]}"
if [ "$rc" = 0 ] && python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(not (d["label"] == sys.argv[2] and d["sink"] == "file://" + sys.argv[3]))' "$ROOT/o.json" "$LABEL" "$SINK_DIR"; then
	ok "a label and a sink URL with quotes, backslashes and control bytes: the JSON parses and holds them"
else
	bad "escaped JSON: exit $rc, or $ROOT/o.json does not parse to the label and sink given"
fi

# Without a sanitizer (which finds leaks at exit itself), valgrind does.
VG=()
if [ -z "${WS_SANITIZE:-}" ] && command -v valgrind >/dev/null; then
	VG=(valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
		--error-exitcode=99)
fi
set +e
timeout -k 5 300 "${VG[@]}" "$B" --sink "file://relative" --dir "$ROOT/d3" --tenants 2 --no-baselines \
	>"$ROOT/out" 2>"$ROOT/err"
rc=$?
set -e
no_sanitizer_report "$ROOT/err" "walship-bench (engine refused)"
if [ "$rc" = 2 ] && grep -q "walship-bench: engine:" "$ROOT/err"; then
	ok "an engine that cannot be created: exit 2, nothing leaked${VG:+ (valgrind)}"
else
	bad "an engine that cannot be created: exit $rc, want 2 (99: valgrind found a leak)"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
