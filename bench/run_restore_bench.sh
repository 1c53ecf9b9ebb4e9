#!/usr/bin/env bash
# Restore from S3 (radosgw), walship --parallelism 1 and 8 beside Litestream
# v0.3.13 (docs/bench/README.md "Parallel restore"):
#
#   bench/run_restore_bench.sh [--mb N] [--reps N] [--build DIR] [--out DIR]
#                              [--s3-dir DIR] [--litestream BIN] [--file]
#
# One history, written once per replicator: a writer (seeded, the same
# frames every time) commits --mb MiB of incompressible rows (64 KiB a
# commit, 16 rows of 4 KiB) to a fresh database while `walship replicate
# --interval-ms 1000` ships it to one bucket; then the same again with
# `litestream replicate` (sync-interval 1s) to another, stopped once its
# replica has not grown for 2 s. Then --reps repetitions, the order
# rotated each one, of three restores of the latest state: walship
# --parallelism 1, walship --parallelism 8 (the default), litestream
# restore; each one's wall and user+sys CPU (/usr/bin/time), and its
# content (tests/data/fixture_digest.py, Litestream's own tables dropped)
# against the source's. Prints medians (min..max) and the ratios of each
# repetition's walls (p8/p1, p8/litestream, p1/litestream); writes
# restore.csv to --out.
#
#   --mb N        MiB of history (default 200)
#   --reps N      repetitions (default 7)
#   --build DIR   an existing build; default build-bench (Release, no faults)
#   --out DIR     results and scratch (default DIR/restore-bench)
#   --s3-dir DIR  a running radosgw's fixture dir (DIR/env, as
#                 tests/s3/radosgw.sh start DIR writes it; default
#                 build/s3). Hold /tmp/ws-s3.lock while it runs.
#   --file        file:// sinks instead (no radosgw)
#   --litestream BIN  a litestream binary; default: npm install of
#                 @flydotio/litestream-linux-x64 under --out (walship
#                 alone, said so, when that fails)
# Exit status non-zero only when a run failed or a restore differed from
# its source; figures are reported, never compared with a target.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="" OUT="" REPS=7 MB=200 S3DIR=$ROOT/build/s3 FILE=0 LS=""
die() { echo "run_restore_bench.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--mb) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--mb: a whole number >= 1"; MB=$2; shift 2 ;;
	--reps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--reps: a whole number >= 1"; REPS=$2; shift 2 ;;
	--build) BUILD=${2:-}; [ -n "$BUILD" ] || die "--build needs a directory"; shift 2 ;;
	--out) OUT=${2:-}; [ -n "$OUT" ] || die "--out needs a directory"; shift 2 ;;
	--s3-dir) S3DIR=${2:-}; [ -n "$S3DIR" ] || die "--s3-dir needs a directory"; shift 2 ;;
	--file) FILE=1; shift ;;
	--litestream) LS=${2:-}; [ -x "$LS" ] || die "--litestream: '$LS' is not an executable"; shift 2 ;;
	-h|--help) sed -n '2,35p' "$0"; exit 0 ;;
	*) die "unknown argument '$1'" ;;
	esac
done
# shellcheck source=bench/lib_peer.sh
. "$ROOT/bench/lib_peer.sh"
bench_setup restore-bench OFF walship
DIGEST=$ROOT/tests/data/fixture_digest.py
find_litestream
LSVER=""
[ -n "$LS" ] && LSVER=$("$LS" version 2>/dev/null || echo unknown)
if [ "$FILE" = 0 ]; then
	[ -f "$S3DIR/env" ] || die "no $S3DIR/env (tests/s3/radosgw.sh start $S3DIR; or --file)"
	set -a
	# shellcheck disable=SC1091
	. "$S3DIR/env"
	set +a
fi

# sink NAME: a fresh sink URL (a new bucket on radosgw).
sink() {
	if [ "$FILE" = 1 ]; then echo "file://$WORK/$1-store"; return; fi
	local b
	b=restore-$1-$(date +%s%N)
	curl -sS --fail --max-time 30 -o /dev/null --aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
		-X PUT "$WS_S3_ENDPOINT/$b" || die "create bucket $b"
	echo "s3://$b?endpoint=$WS_S3_ENDPOINT"
}

# write DB: the history (seeded: the same frames every time).
write() {
	python3 - "$1" "$MB" <<'PY'
import random, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)")
rng = random.Random(7)
for _ in range(int(sys.argv[2]) * 16):
    db.execute("BEGIN")
    for _ in range(16):
        db.execute("INSERT INTO t(v) VALUES (?)", (rng.randbytes(4000),))
    db.execute("COMMIT")
PY
}

# ship_live WHO DIR URL: WHO (walship | litestream) replicates DIR/db.sqlite
# to URL while the writer writes it; stopped once it is all stored.
ship_live() {
	local who=$1 d=$2 url=$3 tp last=-1 cur stable=0
	mkdir -p "$d"
	python3 -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute('PRAGMA journal_mode=WAL')
db.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)'); db.close()" "$d/db.sqlite"
	if [ "$who" = walship ]; then
		"$W" replicate --quiet --interval-ms 1000 --sink "$url" "db=$d/db.sqlite" >"$d/ship.log" 2>&1 &
	else
		{ echo "dbs:"; ls_db "$d/db.sqlite" "$url" db 1s; } >"$d/litestream.yml"
		"$LS" replicate -config "$d/litestream.yml" >"$d/ship.log" 2>&1 &
	fi
	tp=$!
	sleep 2
	write "$d/db.sqlite"
	[ "$who" = litestream ] || WDIG=$(python3 "$DIGEST" "$d/db.sqlite")
	# stored: the replica has not grown for 2 s
	while [ "$stable" -lt 4 ]; do
		sleep 0.5
		kill -0 "$tp" 2>/dev/null || { cat "$d/ship.log" >&2; die "$who replicate exited"; }
		cur=$(stored "$url")
		if [ "$cur" = "$last" ]; then stable=$((stable + 1)); else stable=0; last=$cur; fi
	done
	kill -TERM "$tp"
	wait "$tp" || true
	echo "$who: history stored, $(stored "$url") bytes"
}

stored() {
	case "$1" in
	file://*) du -sb "${1#file://}" | cut -f1 ;;
	*) python3 "$ROOT/bench/seal_report.py" s3-bytes "$1" ;;
	esac
}

WURL=$(sink walship)
ship_live walship "$WORK/src-walship" "$WURL"
CONFIGS=(p1 p8)
if [ -n "$LS" ]; then
	LURL=$(sink litestream)
	# (its source holds Litestream's own tables: its restores are held to
	# the walship source's digest, the same frames, once those are dropped)
	ship_live litestream "$WORK/src-litestream" "$LURL"
	CONFIGS+=(litestream)
fi

failures=0
# run REP CONFIG: one restore, one row of restore.csv.
run() {
	local rep=$1 cfg=$2 d=$WORK/r-$1-$2 t0 wall cpu ok=0
	mkdir -p "$d"
	t0=$(now)
	case "$cfg" in
	p1 | p8) /usr/bin/time -f '%U %S' -o "$d/time" "$W" restore --sink "$WURL" --tenant db \
		--parallelism "${cfg#p}" -o "$d/r.db" >"$d/log" 2>&1 ;;
	litestream)
		if [ "$FILE" = 1 ]; then /usr/bin/time -f '%U %S' -o "$d/time" "$LS" restore -o "$d/r.db" "$LURL"
		else /usr/bin/time -f '%U %S' -o "$d/time" "$LS" restore -config "$WORK/src-litestream/litestream.yml" \
			-o "$d/r.db" "$WORK/src-litestream/db.sqlite"; fi >"$d/log" 2>&1 ;;
	esac && {
		wall=$(since "$t0")
		cpu=$(cpu_of "$d/time")
		[ "$cfg" != litestream ] || python3 -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1])
db.executescript('DROP TABLE IF EXISTS _litestream_seq; DROP TABLE IF EXISTS _litestream_lock;'); db.close()" "$d/r.db"
		[ "$(python3 "$DIGEST" "$d/r.db")" = "$WDIG" ] && ok=1
	}
	if [ "$ok" = 0 ]; then
		echo "run_restore_bench.sh: rep $rep $cfg FAILED (kept $d): $(tail -2 "$d/log")" >&2
		failures=$((failures + 1))
		wall=0 cpu=0
	fi
	echo "$rep,$cfg,$wall,$cpu,$ok" >>"$OUT/restore.csv"
	printf '  rep %d %-10s wall %7.3f s  cpu %6.3f s  %s\n' "$rep" "$cfg" "$wall" "$cpu" \
		"$([ "$ok" = 1 ] && echo equal || echo FAILED)"
	[ "$ok" = 0 ] || rm -rf "$d"
}

echo "run_restore_bench: $([ "$FILE" = 1 ] && echo file:// || echo "s3:// ($WS_S3_ENDPOINT)"), $MB MiB of history, $REPS rep(s), walship $W, litestream ${LSVER:-absent}"
echo "machine: $(nproc) CPU(s); uptime at start: $(uptime)"
echo "rep,config,wall_s,cpu_s,equal" >"$OUT/restore.csv"
for rep in $(seq 1 "$REPS"); do
	n=${#CONFIGS[@]}
	for i in $(seq 0 $((n - 1))); do run "$rep" "${CONFIGS[$(((i + rep - 1) % n))]}"; done
done
echo "machine: uptime at end: $(uptime)"
python3 - "$OUT/restore.csv" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["equal"] == "1"]
by = {}
for r in rows:
    by.setdefault(r["config"], {})[int(r["rep"])] = r
def s(v):
    return "%.3f (%.3f..%.3f)" % (statistics.median(v), min(v), max(v)) if v else "-"
print("\nmedians (min..max) of %d rep(s)" % max((int(r["rep"]) for r in rows), default=0))
for c in ("p1", "p8", "litestream"):
    if c in by:
        print("  %-10s wall s %-26s cpu s %s" % (c, s([float(r["wall_s"]) for r in by[c].values()]),
                                                s([float(r["cpu_s"]) for r in by[c].values()])))
for a, b in (("p8", "p1"), ("p8", "litestream"), ("p1", "litestream")):
    if a in by and b in by:
        v = [float(by[a][k]["wall_s"]) / float(by[b][k]["wall_s"]) for k in by[a] if k in by[b]]
        print("ratio wall %s/%s (per rep): %s" % (a, b, s(v)))
PY
echo "run_restore_bench: results in $OUT/restore.csv"
[ "$failures" = 0 ] || { echo "run_restore_bench.sh: $failures run(s) failed" >&2; exit 1; }
