#!/usr/bin/env bash
# walship's single test command (CI runs it through .ci/run).
#
#   bash tools/test.sh                    install packages (Debian 12, as root), then build and test
#   WS_SKIP_INSTALL=1 bash tools/test.sh  skip apt-get (packages already there)
#
# Sections, each with a header:
#   1. packages      tools/install-deps.sh: apt-get update + install of what is
#                    missing (skipped with WS_SKIP_INSTALL=1)
#   2. build-ci      -DWS_WERROR=ON -DWS_FAULTS=ON, every ctest test (test
#                    builds name WS_FAULTS=ON: fault sites are for tests only)
#   3. build-asan    ASan+UBSan (-DWS_SANITIZE=address), every cmocka test and
#                    the scripts of the CLI's own code (ASAN_EXCLUDE below; the
#                    engine's many-tenant test at 300 tenants there; 1,000 in build-ci)
#   4. build-tsan    TSan (-DWS_SANITIZE=thread -DWS_WERROR=ON), the concurrent tests
#                    (TSAN_TESTS below: the store, io, net, stream, slot writer, ring,
#                    engine, events, replica, seal and re-base reuse tests, and
#                    integ_test_restore_parallel$: the restore's fetching thread);
#                    the engine's many-tenant test at 300 tenants there)
#   5. bench smoke   bench_e2e, bench_engine, bench_checkpoint and bench_events at a tiny
#                    size, bench_wal briefly, bench/run_cli_bench.sh
#                    --tiny (replicate --once vs write+fsync+rename) and
#                    bench/run_seal_bench.sh --tiny (zstd, keys, Litestream),
#                    bench/run_peer_bench.sh --tiny (beside Litestream on a
#                    radosgw of its own, behind the counting haproxy) and
#                    bench/run_restore_bench.sh --file --mb 4 --reps 1 and
#                    bench/run_rebase_bench.sh --mb 8 --reps 1, from
#                    build-ci: fails only if a benchmark crashes or errors,
#                    prints no figures or a restore differs, never on a ratio
#   6. retention     tests/torture/retention.sh for WS_TORTURE_S seconds (default
#      torture       45; about a minute in all): writers, replicate, checkpoints,
#                    retention and kill -9, then every restore checked; it and
#                    section 9 run one after the other in the background
#                    beside sections 5, 7 and 8, their logs printed whole in
#                    their own sections
#   7. torture       tests/torture/run.sh --scenario restart-busy (issue 10's
#                    restart of walship under a busy writer) from build-ci,
#                    WS_TORTURE_RUNS runs (default 2); the mixed torture
#                    smoke is the ctest test torture_smoke of sections 2-3
#   8. fuzz smoke    the libFuzzer targets of tests/fuzz built with clang
#                    (-DWS_FUZZ=ON, build-fuzz) and each run for
#                    WS_FUZZ_SECONDS from its seed corpus (tools/fuzz.sh):
#                    fails on a crash, leak, hang or failed check
#   9. throttle bench smoke  bench/run_throttle_bench.sh --scenario all --tiny:
#                    walship-bench's scenarios (one tenant, many tenants,
#                    throttled once per policy, recovery, and scales at 4
#                    tenants: uncapped, then half with and without
#                    Retry-After) against a radosgw and the haproxy
#                    throttling proxy of their own, seconds each (3.7
#                    minutes at load 3; in the background after section 6);
#                    fails if a run errors, prints no figures or a tenant
#                    does not restore equal, never on a figure
#  10. install       cmake --install of build-ci into a scratch prefix; the
#                    embedding example (examples/host.c) built against it with
#                    find_package(walship) and with pkg-config, each run
#                    against a file:// sink and every tenant restored equal by
#                    the installed walship; nm -D of the installed library
#                    lists the public API only (tests/integration/test_install.sh)
#  11. release       Release build of the library and CLI at the defaults
#                    (fault sites off, as installed), warnings as errors;
#                    tests/hostile/no_faults.sh shows it ignores WS_FAULT=...:crash
#                    and WS_PAUSE_RANDOM
# Every section runs even when an earlier one failed (a failed build skips
# its own tests); the summary lists failures and the exit status is non-zero
# if any section failed.
#
# Env: WS_JOBS (parallel build jobs, default 2), WS_CTEST_JOBS (tests run at
#      once by ctest, default 3), WS_SKIP_INSTALL=1, WS_ASAN_EXCLUDE (ctest -E
#      regex for the ASan build),
#      WS_TSAN_TESTS (ctest -R regex for the TSan build),
#      WS_BENCH_MB (bench smoke size in MiB, default 8), WS_TORTURE_S,
#      WS_TORTURE_RUNS (runs of the restart-busy torture scenario, default 2),
#      WS_FUZZ_SECONDS (fuzz smoke time per target, default 5).
set -euo pipefail

cd "$(dirname "$(readlink -f "$0")")/.."
JOBS="${WS_JOBS:-2}"
# Tests run three at a time on two cores: a test uses about 0.7 of a core
# (the rest is waiting on SQLite writers' fsyncs, radosgw, timeouts), and
# the S3 tests serialise among themselves (RESOURCE_LOCK s3,
# tests/CMakeLists.txt). The longest cmocka binaries run as several ctest
# tests each (WS_TEST_PARTS there; test_core_engine_1of4 ..), so no one
# binary runs alone at the end; the -R regexes below match every part.
CTEST_JOBS="${WS_CTEST_JOBS:-3}"
# Under ASan every cmocka test runs, and the scripts whose own code is the
# CLI's (arguments, config, URLs, keys, JSON, metrics, the followers, old
# sinks' formats, hostile servers). Left out are the scripts that drive the
# engine's paths for minutes through the CLI, paths the cmocka tests run
# under ASan already (build-ci runs every script):
#   - the S3 throttling, refusal and checkpoint runs (store/s3*, net/ and
#     the CLI's S3 handling: test_store_s3, test_net*, the core S3 tests,
#     integ_test_s3; their response parsers under the fuzzers);
#   - checkpoint_safety, checkpoint_large, exactness, restore_paused (the
#     chain and retention: test_core_checkpoint*, test_core_ckpt_*,
#     test_core_crash*, test_core_interleave*, torture_smoke);
#   - restore_parallel(_s3) and s3_multipart (the prefetch window and
#     multipart: test_core_seal, test_core_interleave, test_core_badinput,
#     test_store_s3's multipart cases; the window also under TSan);
#   - install (cmake --install; nothing of walship's code runs differently).
# This keeps the section about 4 minutes shorter (CI-B: 840 s of ASan ctest).
ASAN_EXCLUDE="${WS_ASAN_EXCLUDE:-integ_test_s3_adapt|integ_test_s3_refusals|integ_test_checkpoint_s3|integ_test_checkpoint_safety|integ_test_checkpoint_large|integ_test_exactness|integ_test_restore_paused|integ_test_restore_parallel|integ_test_restore_parallel_s3|integ_test_s3_multipart|integ_test_install}"
TSAN_TESTS="${WS_TSAN_TESTS:-test_store|test_io|test_net|test_core_stream|test_core_slots_writer$|test_core_ring|test_core_engine|test_core_events|test_core_replica|test_core_seal|test_core_rebase_reuse$|integ_test_restore_parallel$}"
BENCH_MB="${WS_BENCH_MB:-8}"
FUZZ_SECONDS="${WS_FUZZ_SECONDS:-5}"
START=$(date +%s)


failed=()
section() {
	printf '\n==================== %s  [+%ss] ====================\n' "$*" $(($(date +%s) - START))
}
note_fail() {
	failed+=("$1")
	printf '\n!!!!! FAILED: %s\n' "$1"
}

# ---- 1. packages ------------------------------------------------------------
section "packages (tools/install-deps.sh; WS_SKIP_INSTALL=1 skips)"
bash tools/install-deps.sh

for tool in cmake ctest cc c++ pkg-config sqlite3 python3; do
	command -v "$tool" >/dev/null || { echo "missing tool: $tool"; exit 1; }
done

# The tests and benchmarks run python3 thousands of times (digests, JSON,
# damaged objects, writers): Debian's, the one install-deps.sh installs. A
# version manager's shim earlier in PATH (pyenv's is a bash script that runs
# a dozen more before it starts its own python) cost 0.5 s of CPU a call on
# a 2-core VM, against 0.05 s for /usr/bin/python3 (integ_test_format_fixture:
# 58 s of CPU with the shim, 19 s without): a directory holding only
# python3 -> /usr/bin/python3 goes first in PATH for the whole run.
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
	PY_BIN=$(mktemp -d "${TMPDIR:-/tmp}/walship-ci-python.XXXXXX")
	ln -s /usr/bin/python3 "$PY_BIN/python3"
	trap 'rm -rf "$PY_BIN"' EXIT
	echo "python3: /usr/bin/python3 (not $(command -v python3))"
	export PATH="$PY_BIN:$PATH"
fi

# build_and_test NAME DIR CTEST_ARGS -- CMAKE_ARGS...
build_and_test() {
	local name=$1 dir=$2 ctest_args=$3
	shift 3
	[ "${1:-}" = -- ] && shift
	section "$name: configure + build ($dir, $*)"
	if ! cmake -S . -B "$dir" "$@" || ! cmake --build "$dir" -j"$JOBS"; then
		note_fail "$name: build"
		return 0
	fi
	section "$name: ctest $ctest_args"
	# The tests' scratch directory is per build; start it empty.
	rm -rf "$dir/testtmp"
	mkdir -p "$dir/testtmp"
	# shellcheck disable=SC2086
	if ! (cd "$dir" && ${CTEST_WRAP:-} ctest --output-on-failure -j"$CTEST_JOBS" $ctest_args); then
		note_fail "$name: tests"
	fi
}

# ---- 2. warnings as errors ----------------------------------------------------
build_and_test build-ci build-ci "" -- -DWS_WERROR=ON -DWS_FAULTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo

# ---- 3. ASan + UBSan ------------------------------------------------------------
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:strict_string_checks=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
WS_ENGINE_TENANTS=300 build_and_test build-asan build-asan "-E $ASAN_EXCLUDE" -- -DWS_SANITIZE=address -DWS_WERROR=ON -DWS_FAULTS=ON -DCMAKE_BUILD_TYPE=Debug \
	-DWS_BUILD_BENCH=OFF

# ---- 4. TSan ------------------------------------------------------------------------
# TSan (gcc 12) cannot map its shadow with the high ASLR entropy of newer
# kernels ("unexpected memory mapping"): run it with ASLR off when possible.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
CTEST_WRAP=
if command -v setarch >/dev/null && setarch "$(uname -m)" -R true 2>/dev/null; then
	CTEST_WRAP="setarch $(uname -m) -R"
fi
WS_ENGINE_TENANTS=300 build_and_test build-tsan build-tsan "-R $TSAN_TESTS" -- -DWS_SANITIZE=thread -DWS_WERROR=ON -DWS_FAULTS=ON \
	-DCMAKE_BUILD_TYPE=Debug -DWS_BUILD_BENCH=OFF

# ---- 6 and 9 start here, in the background -------------------------------------------------
# The retention torture (section 6) and then the throttle bench smoke
# (section 9) run one after the other in the background, beside sections 5,
# 7 and 8 (which they do not touch: each keeps to a directory of its own
# under build-ci, radosgw and haproxy of its own on free ports). Both use
# build-ci only and mostly wait: on kill and restart cycles, on radosgw and
# on the proxy's capped PUT rate. Run after the others they were about 5
# of CI's 41 minutes on two cores. Each writes its own log; its section
# below waits for it and prints the log whole, so the output still reads
# section by section. Nothing either checks depends on how fast it ran.
TORTURE_S="${WS_TORTURE_S:-45}"
BG_DIR=build-ci/background
BG_PID=
BG_START=$(($(date +%s) - START))
rm -rf "$BG_DIR"
mkdir -p "$BG_DIR" build-ci/testtmp
(
	set +e
	if [ -x build-ci/tools/walship ]; then
		bash tests/torture/retention.sh build-ci/tools/walship --seconds "$TORTURE_S" \
			--dir "$PWD/build-ci/testtmp" >"$BG_DIR/retention.log" 2>&1
		echo $? >"$BG_DIR/retention.rc"
	else
		echo missing >"$BG_DIR/retention.rc"
	fi
	echo $(($(date +%s) - START)) >"$BG_DIR/retention.end"
	if [ -x build-ci/bench/walship-bench ]; then
		rm -rf build-ci/bench-smoke
		mkdir -p build-ci/bench-smoke
		timeout 600 bash bench/run_throttle_bench.sh --scenario all --tiny --build build-ci \
			--out "$PWD/build-ci/bench-smoke" >build-ci/bench-smoke.log 2>"$BG_DIR/throttle.err"
		echo $? >"$BG_DIR/throttle.rc"
	else
		echo missing >"$BG_DIR/throttle.rc"
	fi
	echo $(($(date +%s) - START)) >"$BG_DIR/throttle.end"
) </dev/null &
BG_PID=$!
# bg_wait NAME: until the background lane wrote NAME.rc (or ended without
# it: gone, or a zombie not yet waited for)
bg_wait() {
	local st
	while [ ! -e "$BG_DIR/$1.rc" ] && st=$(ps -o stat= -p "$BG_PID" 2>/dev/null) && [ "${st#Z}" = "$st" ]; do
		sleep 1
	done
	[ -e "$BG_DIR/$1.rc" ] || echo "the background lane ended before $1" >"$BG_DIR/$1.rc"
}

# ---- 5. bench smoke --------------------------------------------------------------------
section "bench smoke: bench_e2e --mb $BENCH_MB, bench_engine/bench_checkpoint/bench_events --tiny (and bench_events --tiny --shards 2 --combined), bench_wal, run_cli_bench.sh, run_seal_bench.sh and run_peer_bench.sh --tiny, run_restore_bench.sh at 4 MiB, run_rebase_bench.sh at 8 MiB (build-ci; ratios are reported, not enforced)"
if [ -x build-ci/bench/bench_e2e ]; then
	mkdir -p build-ci/testtmp
	if ! build-ci/bench/bench_e2e --mb "$BENCH_MB" --reps 1 --dir "$PWD/build-ci/testtmp"; then
		note_fail "bench smoke: bench_e2e"
	fi
else
	note_fail "bench smoke: build-ci/bench/bench_e2e was not built"
fi
for b in bench_engine bench_checkpoint; do
	if [ -x "build-ci/bench/$b" ]; then
		if ! "build-ci/bench/$b" --tiny --dir "$PWD/build-ci/testtmp"; then
			note_fail "bench smoke: $b"
		fi
	else
		note_fail "bench smoke: build-ci/bench/$b was not built"
	fi
done
# bench_events: its figures, or it failed (a crash, an error, no figure printed).
if [ -x build-ci/bench/bench_events ]; then
	if ! build-ci/bench/bench_events --tiny --dir "$PWD/build-ci/testtmp" --sink-dir "$PWD/build-ci/testtmp" \
		| tee build-ci/bench-events.log; then
		note_fail "bench smoke: bench_events"
	elif ! grep -q 'commit->Progressed p99 .*median' build-ci/bench-events.log ||
		! grep -q 'start -> Hydrated p95 .*median' build-ci/bench-events.log; then
		note_fail "bench smoke: bench_events printed no figures"
	fi
	# Combined queries across two shards, and the markers they ask.
	if ! build-ci/bench/bench_events --tiny --shards 2 --combined --dir "$PWD/build-ci/testtmp" \
		--sink-dir "$PWD/build-ci/testtmp" | tee build-ci/bench-events-combined.log; then
		note_fail "bench smoke: bench_events --shards 2 --combined"
	elif ! grep -q 'markers read/s (N combined queries) .*median' build-ci/bench-events-combined.log; then
		note_fail "bench smoke: bench_events --combined printed no marker figure"
	fi
else
	note_fail "bench smoke: build-ci/bench/bench_events was not built"
fi
if [ -x build-ci/bench/bench_wal ]; then
	if ! build-ci/bench/bench_wal --benchmark_min_time=0.01; then
		note_fail "bench smoke: bench_wal"
	fi
else
	echo "bench_wal not built (Google Benchmark absent): skipped"
fi
if [ -x build-ci/bench/bench_cli ] && [ -x build-ci/tools/walship ]; then
	mkdir -p build-ci/testtmp
	if ! WS_TEST_TMP="$PWD/build-ci/testtmp" bash bench/run_cli_bench.sh --build build-ci --tiny \
		--out "$PWD/build-ci/bench_cli.json" | tee build-ci/bench-cli.log; then
		note_fail "bench smoke: run_cli_bench.sh"
	elif ! grep -q '^ratio walship/baseline: median' build-ci/bench-cli.log || [ ! -s build-ci/bench_cli.json ]; then
		note_fail "bench smoke: run_cli_bench.sh printed no ratio or wrote no JSON"
	fi
else
	note_fail "bench smoke: build-ci/bench/bench_cli or build-ci/tools/walship was not built"
fi

# run_seal_bench.sh --tiny: file://, one repetition; Litestream when npm can
# install it (else the bench says so and runs walship alone).
if [ -x build-ci/tools/walship ]; then
	if ! bash bench/run_seal_bench.sh --build build-ci --tiny --out "$PWD/build-ci/seal-bench" \
		| tee build-ci/bench-seal.log; then
		note_fail "bench smoke: run_seal_bench.sh"
	elif ! grep -q '^ratio zstd+key/none (text): ship rate' build-ci/bench-seal.log ||
		[ ! -s build-ci/seal-bench/seal.json ]; then
		note_fail "bench smoke: run_seal_bench.sh printed no ratio or wrote no JSON"
	fi
fi

# run_peer_bench.sh --tiny: one repetition of every scenario at seconds each,
# on a radosgw and haproxy of its own; Litestream when npm can install it.
if [ -x build-ci/tools/walship ] && [ -x build-ci/bench/walship-bench ]; then
	if ! timeout 900 bash bench/run_peer_bench.sh --build build-ci --tiny --out "$PWD/build-ci/peer-bench" \
		| tee build-ci/bench-peer.log; then
		note_fail "bench smoke: run_peer_bench.sh"
	elif ! grep -q '^live-100 .*requests per GB of WAL' build-ci/bench-peer.log ||
		! grep -q '^live-1 .*RPO p99' build-ci/bench-peer.log || ! grep -q '^restore .*restore wall' build-ci/bench-peer.log ||
		[ ! -s build-ci/peer-bench/peer.json ]; then
		note_fail "bench smoke: run_peer_bench.sh printed no figures or wrote no JSON"
	fi
else
	note_fail "bench smoke: build-ci/tools/walship or build-ci/bench/walship-bench was not built"
fi

# run_restore_bench.sh at a tiny size: file://, 4 MiB of history, one
# repetition of restore --parallelism 1 and 8 (and Litestream's, when npm
# can install it).
if [ -x build-ci/tools/walship ]; then
	if ! bash bench/run_restore_bench.sh --build build-ci --file --mb 4 --reps 1 \
		--out "$PWD/build-ci/restore-bench" | tee build-ci/bench-restore.log; then
		note_fail "bench smoke: run_restore_bench.sh"
	elif ! grep -q '^ratio wall p8/p1' build-ci/bench-restore.log; then
		note_fail "bench smoke: run_restore_bench.sh printed no ratio"
	fi
fi

# run_rebase_bench.sh at a tiny size: an 8 MiB database, 64 KiB of rows
# changed, one repetition (the second run must re-base); build-ci is its
# own baseline here (the smoke asserts the bench runs, not a ratio, and
# building another revision would cost a Release build).
if [ -x build-ci/tools/walship ]; then
	if ! bash bench/run_rebase_bench.sh --build build-ci --baseline-build "$PWD/build-ci" --mb 8 --changed-kb 64 \
		--reps 1 --out "$PWD/build-ci/rebase-bench" | tee build-ci/bench-rebase.log; then
		note_fail "bench smoke: run_rebase_bench.sh"
	elif ! grep -q '^put bytes, this build / baseline (per repetition): ' build-ci/bench-rebase.log; then
		note_fail "bench smoke: run_rebase_bench.sh printed no ratio"
	fi
fi

# ---- 6. retention torture (ran in the background, see above) ------------------------------
section "retention torture: tests/torture/retention.sh --seconds $TORTURE_S (build-ci; in the background from +${BG_START}s)"
bg_wait retention
echo "(ran from +${BG_START}s to +$(cat "$BG_DIR/retention.end" 2>/dev/null || echo '?')s)"
case "$(cat "$BG_DIR/retention.rc")" in
0) cat "$BG_DIR/retention.log" ;;
missing) note_fail "retention torture: build-ci/tools/walship was not built" ;;
*)
	cat "$BG_DIR/retention.log" 2>/dev/null
	note_fail "retention torture (exit $(cat "$BG_DIR/retention.rc"))"
	;;
esac

# ---- 7. torture: restart under a busy writer -----------------------------------------------
TORTURE_RUNS="${WS_TORTURE_RUNS:-2}"
section "torture: restart-busy, $TORTURE_RUNS runs (tests/torture/run.sh, build-ci)"
if [ -x build-ci/tools/walship ]; then
	mkdir -p build-ci/testtmp
	if ! WS_BIN="$PWD/build-ci/tools/walship" WS_TEST_TMP="$PWD/build-ci/testtmp" \
		bash tests/torture/run.sh --seed 1 --scenario restart-busy --restart-after 8 --runs "$TORTURE_RUNS"; then
		note_fail "torture: restart-busy"
	fi
else
	note_fail "torture: build-ci/tools/walship was not built"
fi

# ---- 8. fuzz smoke ------------------------------------------------------------------
# The decoders of everything walship reads back (store objects, WAL, config,
# sink URLs, S3 responses) under libFuzzer + ASan + UBSan, briefly: this
# catches a target that no longer builds or a seed that now crashes; the
# long runs are tools/fuzz.sh --minutes N (tests/README.md "Fuzzing").
section "fuzz smoke: tests/fuzz, ${FUZZ_SECONDS}s per target (build-fuzz, clang, libFuzzer+ASan+UBSan)"
# Debian's clang-14 package installs clang-14; plain clang comes from another package.
FUZZ_CC=$(command -v clang-14 || command -v clang || true)
if [ -z "$FUZZ_CC" ]; then
	note_fail "fuzz smoke: clang-14 not installed (tools/install-deps.sh)"
elif ! CC=$FUZZ_CC cmake -S . -B build-fuzz -DWS_FUZZ=ON -DWS_WERROR=ON -DWS_BUILD_TESTS=OFF -DWS_FAULTS=OFF \
	-DWS_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo || ! cmake --build build-fuzz -j"$JOBS"; then
	note_fail "fuzz smoke: build"
else
	rm -rf build-fuzz/fuzz-smoke
	if ! tools/fuzz.sh --seconds "$FUZZ_SECONDS" --jobs "$JOBS" --build build-fuzz --work build-fuzz/fuzz-smoke; then
		note_fail "fuzz smoke: findings (build-fuzz/fuzz-smoke/crashes, logs)"
	fi
fi

# ---- 9. throttle bench smoke -----------------------------------------------------------------
# Every walship-bench scenario once at a tiny size: a radosgw and the haproxy
# throttling proxy of their own, seconds per run. Fails only if a run errors,
# prints no figures, or a tenant does not restore equal; never on a figure.
# It ran in the background (see above section 5): its output is printed
# here, its standard error after its standard output.
section "throttle bench smoke: bench/run_throttle_bench.sh --scenario all --tiny (build-ci; figures are reported, not enforced; in the background after the retention torture)"
bg_wait throttle
wait "$BG_PID" || true
echo "(ran from +$(cat "$BG_DIR/retention.end" 2>/dev/null || echo '?')s to +$(cat "$BG_DIR/throttle.end" 2>/dev/null || echo '?')s)"
thr_rc=$(cat "$BG_DIR/throttle.rc")
if [ "$thr_rc" != missing ]; then
	cat build-ci/bench-smoke.log 2>/dev/null
	if [ -s "$BG_DIR/throttle.err" ]; then
		echo "---- its standard error:"
		cat "$BG_DIR/throttle.err"
	fi
	if [ "$thr_rc" != 0 ]; then
		note_fail "throttle bench smoke: run_throttle_bench.sh (exit $thr_rc)"
	else
		runs=(one-tenant many-tenants throttled-unthrottled throttled-block throttled-throttle
			throttled-shed throttled-shed-ring recovery
			scales-4-r1-unthrottled scales-4-r1-retry-after scales-4-r1-no-retry-after)
		for run in "${runs[@]}"; do
			if [ ! -s "build-ci/bench-smoke/$run.json" ] || [ ! -s "build-ci/bench-smoke/$run.csv" ]; then
				note_fail "throttle bench smoke: $run wrote no JSON or CSV"
			fi
			head -n1 "build-ci/bench-smoke/$run-tenants.csv" 2>/dev/null | grep -q '^t_s,t0_age_ms' ||
				note_fail "throttle bench smoke: $run wrote no per-tenant CSV"
			[ "$(wc -l <"build-ci/bench-smoke/$run-tenants.csv" 2>/dev/null || echo 0)" -gt 2 ] ||
				note_fail "throttle bench smoke: $run's per-tenant CSV has no samples"
		done
		for figure in "WAL shipped" "RPO p50 / p99 / max" "PUTs per GB" "peak RSS" "throttle retries" \
			"commit latency p50 / p99" "baseline: raw PUT rate" "recovery"; do
			grep -q "$figure" build-ci/bench-smoke.log || note_fail "throttle bench smoke: no '$figure' printed"
		done
		[ "$(grep -c 'check: restore equal to source .* OK' build-ci/bench-smoke.log)" -eq "${#runs[@]}" ] ||
			note_fail "throttle bench smoke: not every run's tenants restored equal"
	fi
else
	note_fail "throttle bench smoke: build-ci/bench/walship-bench was not built"
fi

# ---- 10. install -------------------------------------------------------------------------------
# What `cmake --install` puts in place is what a host builds against: the
# example is built from the installed prefix only, both ways, and must run.
section "install: cmake --install build-ci into a scratch prefix; examples/host.c via find_package and pkg-config"
if [ -x build-ci/tools/walship ]; then
	mkdir -p build-ci/testtmp
	if ! WS_BUILD="$PWD/build-ci" WS_SRC="$PWD" WS_TEST_TMP="$PWD/build-ci/testtmp" \
		bash tests/integration/test_install.sh; then
		note_fail "install: tests/integration/test_install.sh"
	fi
else
	note_fail "install: build-ci was not built"
fi

# ---- 11. release build, fault sites off -------------------------------------------------------
# A production build (Release, what the install recipe makes) has no fault
# sites by default: it must build warning-free too, since nothing above
# compiles that variant, and take no fault from the environment.
section "release: library and CLI at Release's defaults (no fault sites), -DWS_WERROR=ON; WS_FAULT/WS_PAUSE_RANDOM ignored"
if ! cmake -S . -B build-release -DWS_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
	-DWS_BUILD_TESTS=OFF -DWS_BUILD_BENCH=OFF || ! cmake --build build-release -j"$JOBS"; then
	note_fail "release: build at Release's defaults"
elif ! grep -q '^WS_FAULTS:BOOL=OFF' build-release/CMakeCache.txt; then
	note_fail "release: WS_FAULTS is not OFF by default in a Release build"
else
	mkdir -p build-release/testtmp
	if ! WS_BIN="$PWD/build-release/tools/walship" WS_LIB="$(readlink -f build-release/core/libwalship.so)" \
		WS_TEST_TMP="$PWD/build-release/testtmp" bash tests/hostile/no_faults.sh; then
		note_fail "release: tests/hostile/no_faults.sh (a Release build obeyed WS_FAULT or WS_PAUSE_RANDOM)"
	fi
fi

# ---- summary ------------------------------------------------------------------------------
section "summary"
if [ ${#failed[@]} -eq 0 ]; then
	echo "ALL PASSED in $(($(date +%s) - START)) s"
	exit 0
fi
echo "FAILED sections:"
printf '  - %s\n' "${failed[@]}"
exit 1
