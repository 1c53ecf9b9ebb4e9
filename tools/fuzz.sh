#!/usr/bin/env bash
# Run walship's libFuzzer targets (tests/fuzz), each for a fixed time, and
# print per target: executions, coverage (cov: edges, ft: features), corpus
# size, and crashes (with the reproducer's path).
#
#   tools/fuzz.sh [--seconds N | --minutes N] [--jobs J] [--build DIR] [--work DIR] [TARGET...]
#
#   --seconds N / --minutes N   time per target (default 60 s)
#   --jobs J                    targets run at once (default 1)
#   --build DIR                 a WS_FUZZ=ON build (default build-fuzz; configured if missing
#                               with CC=clang-14 cmake -S . -B DIR -DWS_FUZZ=ON ..., built each run)
#   --work DIR                  where new inputs, crashes and logs go (default DIR/fuzz-work);
#                               each target starts from tests/fuzz/corpus/TARGET plus what an
#                               earlier run left in DIR/fuzz-work/corpus/TARGET
#   TARGET...                   some of: batch snap manifest watermark close ckpt_json wal config
#                               sink_url s3_xml http_headers (default all)
#
# Exit status: 0 when no target crashed, leaked, hung or failed a check; 1 otherwise.
# A crash leaves WORK/crashes/TARGET/crash-* (leak-*, timeout-*): reproduce it with
#   BUILD/tests/fuzz/fuzz_TARGET WORK/crashes/TARGET/crash-...
# and keep it as tests/fuzz/corpus/TARGET/regress-NAME once the decoder is fixed.
set -euo pipefail

cd "$(dirname "$(readlink -f "$0")")/.."
ALL=(batch snap manifest watermark close ckpt_json wal config sink_url s3_xml http_headers)
secs=60 jobs=1 build=build-fuzz work=
targets=()
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) secs=$2; shift 2 ;;
	--minutes) secs=$(($2 * 60)); shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--work) work=$2; shift 2 ;;
	-h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	-*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
	*) targets+=("$1"); shift ;;
	esac
done
[ ${#targets[@]} -eq 0 ] && targets=("${ALL[@]}")
work=${work:-$build/fuzz-work}
case $secs in ''|*[!0-9]*|0) echo "fuzz.sh: --seconds/--minutes must be a positive integer" >&2; exit 2 ;; esac

# Configure once; build every time (a no-op when up to date), so a run never
# fuzzes yesterday's decoder.
if [ ! -f "$build/CMakeCache.txt" ]; then
	CC=$(command -v clang-14 || command -v clang) cmake -S . -B "$build" -DWS_FUZZ=ON -DWS_WERROR=ON -DWS_BUILD_TESTS=OFF -DWS_BUILD_BENCH=OFF \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build" -j"${WS_JOBS:-2}" >/dev/null

# One target: fuzz for $secs, then a summary line in $work/TARGET.summary.
run_one() {
	local t=$1 bin="$build/tests/fuzz/fuzz_$1" log="$work/logs/$1.log" rc=0 dict=()
	# A target's dictionary (tokens mutations cannot guess: escapes, markup).
	[ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
	mkdir -p "$work/corpus/$t" "$work/crashes/$t" "$work/logs"
	# -timeout: an input that takes 10 s is a hang. -rss_limit_mb: a decoder
	# that allocates what the input claims instead of what it holds is a finding.
	ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}" \
	UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
		"$bin" "${dict[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/crashes/$t/" "$work/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
	local execs cov ft corp crashes
	# (|| true: a target that crashed on a seed has no status lines.)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
	# The last status line ("#N ... cov: C ft: F corp: U/...") has the final coverage.
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
	ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
	corp=$(grep -oE 'corp: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
	crashes=$(find "$work/crashes/$t" -type f | wc -l)
	[ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes="exit $rc"
	printf '%-13s %12s %7s %7s %7s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$crashes" \
		>"$work/$t.summary"
}

mkdir -p "$work"
rm -f "$work"/*.summary
echo "fuzzing ${#targets[@]} target(s) for ${secs}s each, $jobs at a time; logs in $work/logs"
running=0
for t in "${targets[@]}"; do
	[ -x "$build/tests/fuzz/fuzz_$t" ] || { echo "fuzz.sh: no target $t in $build" >&2; exit 2; }
	run_one "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
	fi
done
wait || true

printf '%-13s %12s %7s %7s %7s  %s\n' target executions cov ft corpus crashes
status=0
for t in "${targets[@]}"; do
	line=$(cat "$work/$t.summary" 2>/dev/null || echo "$t ? ? ? ? no-summary")
	echo "$line"
	[ "$(echo "$line" | awk '{print $6}')" = 0 ] || status=1
done
if [ $status -ne 0 ]; then
	echo "FINDINGS: see $work/crashes/ and $work/logs/"
	for log in $(grep -l -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fuzz check failed|deadly signal' \
		"$work"/logs/*.log 2>/dev/null); do
		echo "---- $log (last 40 lines)"
		tail -n 40 "$log"
	done
fi
exit $status
