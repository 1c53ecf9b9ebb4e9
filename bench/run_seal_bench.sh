#!/usr/bin/env bash
# What compression and encryption cost and save, beside Litestream v0.3.13
# (docs/bench/README.md "Compression and encryption"):
#
#   bench/run_seal_bench.sh [--tiny] [--reps N] [--build DIR] [--out DIR] [--s3]
#                           [--litestream BIN]
#
# Two workloads (bench/seal_writer.py): text (text rows with an index, 8
# rows a commit) and peer (small commits rewriting mostly the same pages).
# Each is prepared once (the starting database) and written once (the
# reference: its WAL bytes and content digest). In every repetition, in an
# order rotated each repetition, each configuration gets a fresh copy:
#   none, zstd, zstd+key   `walship replicate --once` of a copy of the written
#                          database and WAL (the same frames every time): ship
#                          wall, the process's user+sys CPU (/usr/bin/time)
#   live                   zstd+key, `walship replicate --interval-ms 1000`
#                          running while the writer writes a copy of the
#                          starting database (text: 250 commits/s, peer:
#                          1,000/s, once the replicator has stored its first
#                          object), stopped (SIGTERM) after it
#   litestream             `litestream replicate -config` (sync-interval 1s,
#                          LZ4, no encryption) the same way, stopped once its
#                          replica has not grown for 2 s
# then the sink's bytes (du -b / the bucket's listing), a restore (walship
# restore / litestream restore), its wall, and its content digest
# (tests/data/fixture_digest.py) against the reference. Prints medians
# (min..max) and, per repetition, ratios against none of the same
# repetition; writes seal.csv (every run) and seal.json (medians) to --out.
#
#   --tiny        one repetition, small workloads, file:// only (the smoke)
#   --reps N      repetitions (default 7)
#   --build DIR   an existing build (walship is built there if needed);
#                 default build-bench, configured here (Release, no faults)
#   --out DIR     results and scratch (default DIR/seal-bench)
#   --s3          each run to its own bucket on the radosgw of build/s3/env
#                 (tests/s3/radosgw.sh start build/s3; hold /tmp/ws-s3.lock)
#   --litestream BIN  a litestream binary; default: npm install of
#                 @flydotio/litestream-linux-x64 under --out; if neither
#                 works the bench says so and runs walship alone
# WS_SEAL_CONFIGS="none zstd" runs only those walship configurations.
# Exit status non-zero only when a run failed or a restore differed from
# its source; figures are reported, never compared with a target.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="" OUT="" TINY=0 REPS=7 S3=0 LS=""
die() { echo "run_seal_bench.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--tiny) TINY=1; REPS=1; shift ;;
	--reps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--reps: a whole number >= 1"; REPS=$2; shift 2 ;;
	--build) BUILD=${2:-}; [ -n "$BUILD" ] || die "--build needs a directory"; shift 2 ;;
	--out) OUT=${2:-}; [ -n "$OUT" ] || die "--out needs a directory"; shift 2 ;;
	--s3) S3=1; shift ;;
	--litestream) LS=${2:-}; [ -x "$LS" ] || die "--litestream: '$LS' is not an executable"; shift 2 ;;
	-h|--help) sed -n '2,42p' "$0"; exit 0 ;;
	*) die "unknown argument '$1'" ;;
	esac
done
[ "$TINY" = 1 ] && [ "$S3" = 1 ] && die "--tiny is file:// only"
# shellcheck source=bench/lib_peer.sh
. "$ROOT/bench/lib_peer.sh"
bench_setup seal-bench OFF walship
WRITER=$ROOT/bench/seal_writer.py
DIGEST=$ROOT/tests/data/fixture_digest.py
KEY=$WORK/key
openssl rand -hex 32 >"$KEY"

find_litestream
LSVER=""
[ -n "$LS" ] && LSVER=$("$LS" version 2>/dev/null || echo unknown)

if [ "$S3" = 1 ]; then
	[ -f "$ROOT/build/s3/env" ] || die "--s3: no build/s3/env (tests/s3/radosgw.sh start build/s3)"
	set -a
	# shellcheck disable=SC1091
	. "$ROOT/build/s3/env"
	set +a
fi

# Commits per workload: ~50 MiB (text) and ~30 MiB (peer) of WAL; tiny: ~1 MiB.
declare -A COMMITS=([text]=1000 [peer]=4000)
[ "$TINY" = 1 ] && COMMITS=([text]=40 [peer]=300)
# The live runs' writer: at most this many commits a second (4 s of writing).
declare -A RATE=([text]=250 [peer]=1000)
[ "$TINY" = 1 ] && RATE=([text]=80 [peer]=600)
WORKLOADS=(text peer)
read -ra CONFIGS <<<"${WS_SEAL_CONFIGS:-none zstd zstd+key live}"
[ -n "$LS" ] && CONFIGS+=(litestream)

declare -A WALB DIG
prepare() {
	local wl=$1
	local d=$WORK/ref-$wl
	mkdir -p "$d"
	python3 "$WRITER" prepare "$wl" "$d/base.db"
	cp "$d/base.db" "$d/db.sqlite"
	python3 "$WRITER" write "$wl" "$d/db.sqlite" "${COMMITS[$wl]}"
	rm -f "$d/db.sqlite-shm"
	WALB[$wl]=$(stat -c %s "$d/db.sqlite-wal")
	cp "$d/db.sqlite" "$d/db.sqlite-wal" "$WORK/"
	DIG[$wl]=$(python3 "$DIGEST" "$WORK/db.sqlite")
	rm -f "$WORK"/db.sqlite*
}

# store_url RUNDIR NAME: the sink of one run (and makes its bucket).
store_url() {
	if [ "$S3" = 0 ]; then echo "file://$1/store"; return; fi
	local b
	b=$(make_bucket "seal-$2" "$WS_S3_ENDPOINT") || die "create bucket for $2"
	echo "s3://$b?endpoint=$WS_S3_ENDPOINT"
}

# stored_bytes URL: the bytes the sink holds.
stored_bytes() {
	case "$1" in
	file://*) du -sb "${1#file://}" | cut -f1 ;;
	*) python3 "$ROOT/bench/seal_report.py" s3-bytes "$1" ;;
	esac
}

seal_args() {
	case "$1" in
	none) echo "--compression none" ;;
	zstd) echo "--compression zstd" ;;
	zstd+key | live) echo "--compression zstd --key-file $KEY" ;;
	esac
}

# One walship `replicate --once` of the written WAL; sets SHIP CPU.
ship_once() {
	local cfg=$1 wl=$2 d=$3 url=$4 t0
	cp "$WORK/ref-$wl/db.sqlite" "$WORK/ref-$wl/db.sqlite-wal" "$d/"
	t0=$(now)
	# shellcheck disable=SC2046
	/usr/bin/time -f '%U %S' -o "$d/time" "$W" replicate --once --quiet --sink "$url" $(seal_args "$cfg") \
		"db=$d/db.sqlite" >"$d/ship.log" 2>&1 || { cat "$d/ship.log" >&2; return 1; }
	SHIP=$(since "$t0")
	CPU=$(cpu_of "$d/time")
}

# A replicator running while the writer writes; sets SHIP (writer end to
# the replicator's exit) and CPU.
ship_live() {
	local cfg=$1 wl=$2 d=$3 url=$4 tp t0 last=-1 cur stable=0
	cp "$WORK/ref-$wl/base.db" "$d/db.sqlite"
	if [ "$cfg" = live ]; then
		# shellcheck disable=SC2046
		/usr/bin/time -f '%U %S' -o "$d/time" "$W" replicate --quiet --interval-ms 1000 --sink "$url" \
			$(seal_args live) "db=$d/db.sqlite" >"$d/ship.log" 2>&1 &
	else
		{ echo "dbs:"; ls_db "$d/db.sqlite" "$url" db 1s; } >"$d/litestream.yml"
		/usr/bin/time -f '%U %S' -o "$d/time" "$LS" replicate -config "$d/litestream.yml" >"$d/ship.log" 2>&1 &
	fi
	tp=$!
	# The writer starts once the replicator has stored something (its first
	# snapshot), so neither takes the whole workload in its first copy.
	until [ "$(stored_bytes "$url" 2>/dev/null || echo 0)" -gt 0 ]; do
		kill -0 "$tp" 2>/dev/null || { cat "$d/ship.log" >&2; return 1; }
		sleep 0.1
	done
	python3 "$WRITER" write "$wl" "$d/db.sqlite" "${COMMITS[$wl]}" "${RATE[$wl]}"
	t0=$(now)
	if [ "$cfg" = litestream ]; then
		# synced: the replica has not grown for 2 s (and 2 s have passed)
		while [ "$stable" -lt 4 ]; do
			sleep 0.5
			cur=$(stored_bytes "$url")
			if [ "$cur" = "$last" ]; then stable=$((stable + 1)); else stable=0; last=$cur; fi
		done
	fi
	stop_child "$tp" || { cat "$d/ship.log" >&2; return 1; }
	SHIP=$(since "$t0")
	CPU=$(cpu_of "$d/time")
}

restore_run() {
	local cfg=$1 d=$2 url=$3 t0
	t0=$(now)
	if [ "$cfg" = litestream ]; then
		if [ "$S3" = 1 ]; then "$LS" restore -config "$d/litestream.yml" -o "$d/r.db" "$d/db.sqlite"
		else "$LS" restore -o "$d/r.db" "$url"; fi
	else
		# shellcheck disable=SC2046
		"$W" restore --sink "$url" --tenant db $( [ "$cfg" = zstd+key ] || [ "$cfg" = live ] && echo "--key-file $KEY") \
			-o "$d/r.db"
	fi >"$d/restore.log" 2>&1 || { cat "$d/restore.log" >&2; return 1; }
	RESTORE=$(since "$t0")
	[ "$cfg" != litestream ] || drop_litestream_tables "$d/r.db"
}

failures=0
# run REP WORKLOAD CONFIG: one run, one row of seal.csv.
run() {
	local rep=$1 wl=$2 cfg=$3 d url ok stored
	d=$WORK/$rep-$wl-$cfg
	mkdir -p "$d"
	url=$(store_url "$d" "$wl-$cfg")
	SHIP=0 CPU=0 RESTORE=0 stored=0 ok=0
	case "$cfg" in
	live | litestream) ship_live "$cfg" "$wl" "$d" "$url" ;;
	*) ship_once "$cfg" "$wl" "$d" "$url" ;;
	esac && stored=$(stored_bytes "$url") && restore_run "$cfg" "$d" "$url" &&
		[ "$(python3 "$DIGEST" "$d/r.db")" = "${DIG[$wl]}" ] && ok=1
	if [ "$ok" = 0 ]; then
		echo "run_seal_bench.sh: rep $rep $wl $cfg FAILED (ship, restore or digest; kept $d)" >&2
		failures=$((failures + 1))
	fi
	echo "$rep,$wl,$cfg,${WALB[$wl]},$stored,$SHIP,$CPU,$RESTORE,$ok" >>"$OUT/seal.csv"
	printf '  rep %d %-5s %-10s stored %10d B  ship %7.3f s  cpu %6.3f s  restore %6.3f s  %s\n' \
		"$rep" "$wl" "$cfg" "$stored" "$SHIP" "$CPU" "$RESTORE" "$([ "$ok" = 1 ] && echo equal || echo FAILED)"
	[ "$ok" = 0 ] || rm -rf "$d"
}

echo "run_seal_bench: $([ "$S3" = 1 ] && echo "s3:// ($WS_S3_ENDPOINT)" || echo file://), $REPS rep(s)$([ "$TINY" = 1 ] && echo ', tiny'), walship $W, litestream ${LSVER:-absent}"
echo "machine: $(nproc) CPU(s), load $(cut -d' ' -f1-3 /proc/loadavg) at start"
for wl in "${WORKLOADS[@]}"; do prepare "$wl"; echo "workload $wl: ${COMMITS[$wl]} commits, WAL ${WALB[$wl]} bytes"; done
echo "rep,workload,config,wal_bytes,stored_bytes,ship_s,cpu_s,restore_s,restore_equal" >"$OUT/seal.csv"
for rep in $(seq 1 "$REPS"); do
	n=${#CONFIGS[@]}
	for wl in "${WORKLOADS[@]}"; do
		for i in $(seq 0 $((n - 1))); do
			run "$rep" "$wl" "${CONFIGS[$(((i + rep - 1) % n))]}"
		done
	done
done
echo "machine: load $(cut -d' ' -f1-3 /proc/loadavg) at end"
python3 "$ROOT/bench/seal_report.py" summary "$OUT/seal.csv" "$OUT/seal.json"
echo "run_seal_bench: results in $OUT/seal.csv, $OUT/seal.json"
[ "$failures" = 0 ] || { echo "run_seal_bench.sh: $failures run(s) failed" >&2; exit 1; }
