#!/usr/bin/env bash
# What a re-base uploads after a small change (docs/bench/README.md
# "Re-base cost"), on a file:// sink, with this build and with a baseline
# build (by default main: the walship whose every re-base uploads the whole
# file), in the same run:
#
#   bench/run_rebase_bench.sh [--mb N] [--changed-kb N] [--reps N] [--build DIR]
#                             [--baseline-build DIR | --baseline-rev REV] [--out DIR]
#
# Each repetition (seeded by its number): a fresh database of --mb MiB
# (4 KiB pages, rows of 3900 random bytes: one row a leaf page) written and
# closed (its WAL checkpointed and removed). Then, for each build in turn
# (which goes first alternates between repetitions), on a copy of that
# database and a sink of its own: `walship replicate --once` ships it (its
# first re-base); a copy of the file is kept; --changed-kb KiB worth of rows
# (one row a page), picked at random over the whole table, get new random
# bytes of the same length in one transaction (the same rows and bytes for
# both builds), and the writer closes (its WAL checkpointed and removed
# while walship is down: the next run cannot prove continuity and
# re-bases); `walship replicate --once` again. Reported for that second
# run, per build:
#   - put_bytes: the bytes of every object it wrote (new objects and the
#     rewritten watermark: files newer than a mark taken before it), and
#     put_bytes / the database's size;
#   - puts: how many objects it wrote (requests);
#   - wall_s: its wall time;
#   - restore_s: the wall time of `walship restore` of the latest state
#     (the re-base's) by the same build, whose rows are then compared with
#     the source's (a digest of every row);
# with the pages that differ between the kept copy and the changed file,
# and first_puts: the objects of the first run (a re-base with nothing to
# name again). Prints each repetition, then medians (min..max) and the
# per-repetition ratio of this build's put bytes to the baseline's; writes
# rebase.csv to --out.
#
#   --mb N                database size in MiB (default 1024)
#   --changed-kb N        KiB of rows changed (default 1024: 256 pages)
#   --reps N              repetitions (default 7)
#   --build DIR           an existing build; default build-bench (Release, no faults)
#   --baseline-build DIR  a build of the baseline walship (its tools/walship)
#   --baseline-rev REV    else: this revision (default main), exported with
#                         git archive and built (Release) under --out
#   --out DIR             results and scratch (default DIR/rebase-bench)
# Exit status non-zero only when a run failed or a second run was not a
# re-base; figures are reported, never compared with a target.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="" OUT="" REPS=7 MB=1024 CHKB=1024 BASE_BUILD="" BASE_REV=main
die() { echo "run_rebase_bench.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--mb) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--mb: a whole number >= 1"; MB=$2; shift 2 ;;
	--changed-kb) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--changed-kb: a whole number >= 1"; CHKB=$2; shift 2 ;;
	--reps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--reps: a whole number >= 1"; REPS=$2; shift 2 ;;
	--build) BUILD=${2:-}; [ -n "$BUILD" ] || die "--build needs a directory"; shift 2 ;;
	--baseline-build) BASE_BUILD=${2:-}; [ -n "$BASE_BUILD" ] || die "--baseline-build needs a directory"; shift 2 ;;
	--baseline-rev) BASE_REV=${2:-}; [ -n "$BASE_REV" ] || die "--baseline-rev needs a revision"; shift 2 ;;
	--out) OUT=${2:-}; [ -n "$OUT" ] || die "--out needs a directory"; shift 2 ;;
	-h|--help) sed -n '2,42p' "$0"; exit 0 ;;
	*) die "unknown argument '$1'" ;;
	esac
done
# shellcheck source=bench/lib_peer.sh
. "$ROOT/bench/lib_peer.sh"
bench_setup rebase-bench OFF walship
CSV=$OUT/rebase.csv
if [ -z "$BASE_BUILD" ]; then
	BASE_BUILD=$OUT/baseline-build
	rm -rf "$OUT/baseline-src"
	mkdir -p "$OUT/baseline-src"
	git -C "$ROOT" archive "$BASE_REV" | tar -x -C "$OUT/baseline-src" || die "git archive $BASE_REV failed"
	cmake -S "$OUT/baseline-src" -B "$BASE_BUILD" -DCMAKE_BUILD_TYPE=Release -DWS_FAULTS=OFF \
		-DWS_BUILD_TESTS=OFF >/dev/null
	cmake --build "$BASE_BUILD" --target walship -j"${WS_JOBS:-2}" >/dev/null
fi
WB=$BASE_BUILD/tools/walship
[ -x "$WB" ] || die "no $WB"

echo "rebase bench: --mb $MB --changed-kb $CHKB --reps $REPS, file:// sink; this build: $W; baseline: $WB"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
echo "rep,build,db_bytes,changed_pages,first_puts,put_bytes,puts,put_ratio,wall_s,restore_s" >"$CSV"

# sink_since DIR MARK: "bytes objects" of the files written after MARK
# (lock files left out).
sink_since() {
	find "$1" -type f -newer "$2" ! -name '.*' -printf '%s\n' | awk '{s += $1; n++} END {printf "%d %d", s, n}'
}

# one REP NAME BIN: both runs of one build on a copy of the repetition's database.
one() {
	local rep=$1 name=$2 bin=$3 d=$WORK/rep/$2 t0 first second pb pn changed size line rs
	rm -rf "$d"
	mkdir -p "$d"
	cp "$WORK/rep/orig.db" "$d/db"
	"$bin" replicate --once --sink "file://$d/sink" "t=$d/db" >"$d/first.log" 2>&1 ||
		die "$name: first replicate failed: $(tail -3 "$d/first.log")"
	first=$(find "$d/sink" -type f ! -name '.*' | wc -l)
	cp "$d/db" "$d/before.db"
	python3 "$WORK/change.py" "$d/db" "$CHKB" "$rep"
	[ ! -e "$d/db-wal" ] || die "the writer left a WAL behind: the second run would not re-base"
	touch "$d/mark"
	sleep 1
	t0=$(now)
	"$bin" replicate --once --json --sink "file://$d/sink" "t=$d/db" >"$d/second.log" 2>"$d/second.err" ||
		die "$name: second replicate failed: $(tail -3 "$d/second.err")"
	second=$(since "$t0")
	grep -Eq '"outcome": ?"restarted"' "$d/second.log" ||
		die "$name: the second run did not re-base: $(head -c 400 "$d/second.log")"
	read -r pb pn <<<"$(sink_since "$d/sink" "$d/mark")"
	t0=$(now)
	"$bin" restore --sink "file://$d/sink" --tenant t -o "$d/restored.db" >"$d/restore.log" 2>&1 ||
		die "$name: restore failed: $(tail -3 "$d/restore.log")"
	rs=$(since "$t0")
	[ "$(python3 "$WORK/rows.py" "$d/restored.db")" = "$(python3 "$WORK/rows.py" "$d/db")" ] ||
		die "$name: the restored rows differ from the source's"
	changed=$(python3 "$WORK/diff.py" "$d/before.db" "$d/db")
	size=$(stat -c %s "$d/db")
	line="$rep,$name,$size,$changed,$first,$pb,$pn,$(python3 -c "print('%.4f' % ($pb / $size))"),$second,$rs"
	echo "$line" >>"$CSV"
	echo "rep $rep $name: db_bytes,changed_pages,first_puts,put_bytes,puts,put_ratio,wall_s,restore_s = ${line#*,*,}"
	rm -rf "$d"
}

cat >"$WORK/make.py" <<'EOF'
import random, sqlite3, sys
path, mb, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
con = sqlite3.connect(path)
con.execute("PRAGMA page_size=4096")
con.execute("PRAGMA journal_mode=WAL")
con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
rows = mb * 1024 * 1024 // 4096
with con:
    con.executemany("INSERT INTO t VALUES(?, ?)", ((i, rnd.randbytes(3900)) for i in range(1, rows + 1)))
con.close()
EOF
cat >"$WORK/change.py" <<'EOF'
import random, sqlite3, sys
path, kb, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed * 7919 + 1)
con = sqlite3.connect(path)
rows = con.execute("SELECT max(id) FROM t").fetchone()[0]
ids = rnd.sample(range(1, rows + 1), kb // 4)
with con:
    con.executemany("UPDATE t SET v = ? WHERE id = ?", ((rnd.randbytes(3900), i) for i in ids))
con.close()
EOF
cat >"$WORK/rows.py" <<'EOF'
import hashlib, sqlite3, sys
con = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
h = hashlib.sha256()
for i, v in con.execute("SELECT id, v FROM t ORDER BY id"):
    h.update(str(i).encode())
    h.update(v)
print(h.hexdigest())
EOF
cat >"$WORK/diff.py" <<'EOF'
import sys
ps, n = 4096, 0
with open(sys.argv[1], "rb") as fa, open(sys.argv[2], "rb") as fb:
    while True:
        a, b = fa.read(ps), fb.read(ps)
        if not a and not b:
            break
        n += a != b
print(n)
EOF

for rep in $(seq 1 "$REPS"); do
	rm -rf "$WORK/rep"
	mkdir -p "$WORK/rep"
	python3 "$WORK/make.py" "$WORK/rep/orig.db" "$MB" "$rep"
	if [ $((rep % 2)) = 1 ]; then
		one "$rep" reuse "$W"
		one "$rep" baseline "$WB"
	else
		one "$rep" baseline "$WB"
		one "$rep" reuse "$W"
	fi
	rm -rf "$WORK/rep"
done

python3 - "$CSV" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(v, fmt):
    return (fmt % statistics.median(v)) + " (" + (fmt % min(v)) + ".." + (fmt % max(v)) + ")"
print("reps: %d" % (len(rows) // 2))
print("database bytes: " + med([float(x["db_bytes"]) for x in rows], "%.0f"))
print("changed pages: " + med([float(x["changed_pages"]) for x in rows], "%.0f"))
for b in ("reuse", "baseline"):
    r = [x for x in rows if x["build"] == b]
    print("%s: re-base put bytes / database %s; objects written %s; wall s %s; first run's objects %s; "
          "restore s %s" % (
        b, med([float(x["put_ratio"]) for x in r], "%.4f"), med([float(x["puts"]) for x in r], "%.0f"),
        med([float(x["wall_s"]) for x in r], "%.2f"), med([float(x["first_puts"]) for x in r], "%.0f"),
        med([float(x["restore_s"]) for x in r], "%.2f")))
pairs = {}
for x in rows:
    pairs.setdefault(x["rep"], {})[x["build"]] = x
ratio = [float(p["reuse"]["put_bytes"]) / float(p["baseline"]["put_bytes"]) for p in pairs.values() if len(p) == 2]
print("put bytes, this build / baseline (per repetition): " + med(ratio, "%.4f"))
EOF
echo "load after: $(uptime | sed 's/.*load average/load average/')"
