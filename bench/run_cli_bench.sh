#!/usr/bin/env bash
# The CLI path benchmark, one command (docs/bench/README.md): `walship
# replicate --once` of one tenant (a ~250 MiB WAL written by SQLite, in the
# page cache, WAL checkpoints off) into a fresh file:// sink, the whole
# process as a user runs it, against a write+fdatasync+rename+dir-fsync
# baseline of the same bytes in files of the batch size, interleaved
# (bench/bench_cli.c says exactly what each side does).
#
#   bench/run_cli_bench.sh [--build DIR] [--tiny] [--out FILE] [-- bench_cli args]
#
#   --build DIR  an existing build to use (its walship and bench_cli are
#                built there if needed); default: build-bench, configured
#                here (Release, no fault sites, no tests)
#   --tiny       a smoke run: 4 MiB, 2 reps (CI: it runs and prints its
#                figures; the ratio means nothing at that size)
#   --out FILE   the JSON results (default DIR/bench_cli.json)
# Anything after -- goes to bench_cli (--mb N, --reps N, --batch-bytes N,
# --dir DIR; and after a second -- extra walship replicate arguments).
# Defaults: --mb 250 --reps 7. Runs at nice -5 when allowed (the machine is
# shared; the spread is printed either way). Exit status non-zero only when
# something failed; the ratio is reported, never enforced.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="" TINY=0 OUT=""
EXTRA=()
die() { echo "run_cli_bench.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --build) BUILD=${2:-}; [ -n "$BUILD" ] || die "--build needs a directory"; shift 2 ;;
        --tiny) TINY=1; shift ;;
        --out) OUT=${2:-}; [ -n "$OUT" ] || die "--out needs a file"; shift 2 ;;
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (bench_cli arguments go after --)" ;;
    esac
done

if [ -z "$BUILD" ]; then
    BUILD=$ROOT/build-bench
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DWS_FAULTS=OFF -DWS_BUILD_TESTS=OFF >/dev/null
fi
[ -f "$BUILD/CMakeCache.txt" ] || die "$BUILD is not a cmake build directory"
cmake --build "$BUILD" --target walship bench_cli -j"${WS_JOBS:-2}" >/dev/null
BIN=$BUILD/bench/bench_cli
WALSHIP=$BUILD/tools/walship
[ -x "$BIN" ] && [ -x "$WALSHIP" ] || die "no $BIN or $WALSHIP after the build"
[ -n "$OUT" ] || OUT=$BUILD/bench_cli.json

ARGS=(--walship "$WALSHIP" --json "$OUT")
[ "$TINY" = 1 ] && ARGS+=(--mb 4 --reps 2)
ARGS+=("${EXTRA[@]}")
NICE=()
nice -n -5 true 2>/dev/null && NICE=(nice -n -5)
echo "run_cli_bench: ${NICE[*]} $BIN ${ARGS[*]}" >&2
"${NICE[@]}" "$BIN" "${ARGS[@]}"
echo "run_cli_bench: results in $OUT" >&2
