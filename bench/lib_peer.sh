# shellcheck shell=bash
# Shell pieces of the benches that run walship beside Litestream
# (bench/run_seal_bench.sh, bench/run_peer_bench.sh,
# bench/run_restore_bench.sh); sourced, under `set -euo pipefail`, after
# ROOT, BUILD and OUT (may be empty) are set and die is defined.

# bench_setup NAME TESTS TARGET...: BUILD (default ROOT/build-bench, a
# Release build without fault sites; TESTS: ON or OFF, whether it builds
# the tests) with TARGET... built; W the walship binary; OUT (default
# BUILD/NAME) made absolute; WORK a fresh OUT/work.
bench_setup() {
	local name=$1 tests=$2
	shift 2
	if [ -z "$BUILD" ]; then
		BUILD=$ROOT/build-bench
		cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DWS_FAULTS=OFF -DWS_BUILD_TESTS="$tests" >/dev/null
	fi
	[ -f "$BUILD/CMakeCache.txt" ] || die "$BUILD is not a cmake build directory"
	cmake --build "$BUILD" --target "$@" -j"${WS_JOBS:-2}" >/dev/null
	W=$BUILD/tools/walship
	[ -x "$W" ] || die "no $W after the build"
	[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time) is needed for the CPU figures"
	[ -n "$OUT" ] || OUT=$BUILD/$name
	mkdir -p "$OUT"
	OUT=$(cd "$OUT" && pwd)
	WORK=$OUT/work
	rm -rf "$WORK"
	mkdir -p "$WORK"
}

now() { date +%s.%N; }
since() { python3 -c "import sys; print('%.4f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$(now)"; }
# cpu_of FILE: user + system seconds from `/usr/bin/time -f '%U %S' -o FILE`.
cpu_of() { awk '{printf "%.3f", $1 + $2}' "$1"; }

# stop_child TIMEPID: SIGTERM to the process /usr/bin/time runs, then wait.
stop_child() {
	local child
	child=$(pgrep -P "$1" | head -1)
	[ -n "$child" ] && kill -TERM "$child"
	wait "$1"
}

# find_litestream: sets LS (unless set already) to Litestream v0.3.13 from
# the npm package @flydotio/litestream-linux-x64, installed under $OUT;
# when that fails it says why and leaves LS empty (walship alone).
find_litestream() {
	[ -n "$LS" ] && return 0
	local dir=$OUT/litestream-npm
	if [ ! -x "$dir/node_modules/@flydotio/litestream-linux-x64/litestream" ]; then
		if ! command -v npm >/dev/null; then
			echo "litestream: not installed (no npm): walship only"; return 0
		fi
		if ! timeout 180 npm install --no-audit --no-fund --prefix "$dir" @flydotio/litestream-linux-x64 \
			>"$OUT/npm.log" 2>&1; then
			echo "litestream: npm install @flydotio/litestream-linux-x64 failed ($(tail -1 "$OUT/npm.log")): walship only"
			return 0
		fi
	fi
	LS=$(find "$dir/node_modules" -type f -name litestream -perm -u+x | head -1)
	[ -n "$LS" ] || echo "litestream: no binary in $dir/node_modules: walship only"
}

# make_bucket NAME ENDPOINT: creates a bucket named after NAME on the S3
# store at ENDPOINT (AWS_* credentials) and prints its name.
make_bucket() {
	local b
	b=$(echo "$1" | tr -c 'a-z0-9\n' '-')-$(date +%s%N)
	curl -sS --fail --max-time 30 -o /dev/null --aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
		-X PUT "$2/$b" || { echo "create bucket $b at $2 failed" >&2; return 1; }
	echo "$b"
}

# ls_db DB URL PATH SYNC [SETTING...]: one entry of a Litestream config's
# `dbs:` list: DB replicated to URL (file://DIR, or s3://BUCKET?endpoint=E
# under PATH) every SYNC (sync-interval); each SETTING ("key: value") is
# a line of the database's own settings.
ls_db() {
	local db=$1 url=$2 path=$3 sync=$4 s
	shift 4
	echo "  - path: $db"
	for s in "$@"; do echo "    $s"; done
	echo "    replicas:"
	case "$url" in
	file://*) echo "      - type: file"; echo "        path: ${url#file://}" ;;
	*) local b=${url#s3://}
		echo "      - type: s3"; echo "        bucket: ${b%%\?*}"; echo "        path: $path"
		echo "        endpoint: ${url#*endpoint=}"; echo "        region: ${AWS_REGION:-us-east-1}"
		echo "        force-path-style: true"
		echo "        access-key-id: $AWS_ACCESS_KEY_ID"; echo "        secret-access-key: $AWS_SECRET_ACCESS_KEY" ;;
	esac
	echo "        sync-interval: $sync"
}

# drop_litestream_tables DB: Litestream adds its own tables to the database
# it replicates; the content compared is the writer's.
drop_litestream_tables() {
	python3 -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1])
db.executescript('DROP TABLE IF EXISTS _litestream_seq; DROP TABLE IF EXISTS _litestream_lock;'); db.close()" "$1"
}
