#!/usr/bin/env bash
# What a re-base uploads after a small change (docs/bench/README.md
# "Re-base cost"), on a file:// sink:
#
#   bench/run_rebase_bench.sh [--mb N] [--changed-kb N] [--reps N] [--build DIR] [--out DIR]
#
# Each repetition (seeded by its number): a fresh database of --mb MiB
# (4 KiB pages, rows of 3900 random bytes: one row a leaf page) written and
# closed (its WAL checkpointed and removed); `walship replicate --once`
# ships it (its first re-base); a copy of the file is kept; --changed-kb
# KiB worth of rows (one row a page), picked at random over the whole
# table, get new random bytes of the same length in one transaction, and
# the writer closes (its WAL checkpointed and removed while walship is
# down: the next run cannot prove continuity and re-bases); `walship
# replicate --once` again. Reported for that second run:
#   - put_bytes: the bytes of every object it wrote (new objects and the
#     rewritten watermark: files newer than a mark taken before it), and
#     put_bytes / the database's size;
#   - changed pages: the pages that differ between the kept copy and the
#     file after the change;
#   - for part sizes G = 1024 (what a re-base uses today: batch_bytes_max
#     4 MiB / 4 KiB pages), 256, 64, 32, 16 and 8 pages: the share of the
#     database a re-base would upload if it uploaded only the parts (of a
#     grid of G-page parts) that hold a changed page and named the rest by
#     the earlier image's keys: dirty parts x G pages, plus a manifest
#     naming every part (2 + key length + 32 bytes each, the key length
#     taken from a snapshot part key in the sink). A projection from the
#     measured change, not a run of such a re-base (none exists yet).
# Prints each repetition, then medians (min..max); writes rebase.csv to --out.
#
#   --mb N          database size in MiB (default 1024)
#   --changed-kb N  KiB of rows changed (default 1024: 256 pages)
#   --reps N        repetitions (default 7)
#   --build DIR     an existing build; default build-bench (Release, no faults)
#   --out DIR       results and scratch (default DIR/rebase-bench)
# Exit status non-zero only when a run failed or the second run was not a
# re-base; figures are reported, never compared with a target.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="" OUT="" REPS=7 MB=1024 CHKB=1024
die() { echo "run_rebase_bench.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--mb) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--mb: a whole number >= 1"; MB=$2; shift 2 ;;
	--changed-kb) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--changed-kb: a whole number >= 1"; CHKB=$2; shift 2 ;;
	--reps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--reps: a whole number >= 1"; REPS=$2; shift 2 ;;
	--build) BUILD=${2:-}; [ -n "$BUILD" ] || die "--build needs a directory"; shift 2 ;;
	--out) OUT=${2:-}; [ -n "$OUT" ] || die "--out needs a directory"; shift 2 ;;
	-h|--help) sed -n '2,38p' "$0"; exit 0 ;;
	*) die "unknown argument '$1'" ;;
	esac
done
# shellcheck source=bench/lib_peer.sh
. "$ROOT/bench/lib_peer.sh"
bench_setup rebase-bench OFF walship
CSV=$OUT/rebase.csv
GRID="1024 256 64 32 16 8"

echo "rebase bench: --mb $MB --changed-kb $CHKB --reps $REPS, file:// sink; load: $(uptime | sed 's/.*load average/load average/')"
echo "rep,db_bytes,changed_pages,put_bytes,put_ratio$(for g in $GRID; do printf ',grid%s_ratio' "$g"; done)" >"$CSV"

for rep in $(seq 1 "$REPS"); do
	d=$WORK/rep
	rm -rf "$d"
	mkdir -p "$d"
	python3 - "$d/db" "$MB" "$rep" <<'EOF'
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
	"$W" replicate --once --sink "file://$d/sink" "t=$d/db" >"$d/first.log" 2>&1 || die "first replicate failed: $(tail -3 "$d/first.log")"
	cp "$d/db" "$d/before.db"
	python3 - "$d/db" "$CHKB" "$rep" <<'EOF'
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
	[ ! -e "$d/db-wal" ] || die "the writer left a WAL behind: the second run would not re-base"
	touch "$d/mark"
	sleep 1
	"$W" replicate --once --json --sink "file://$d/sink" "t=$d/db" >"$d/second.log" 2>"$d/second.err" ||
		die "second replicate failed: $(tail -3 "$d/second.err")"
	grep -Eq '"outcome": ?"restarted"' "$d/second.log" || die "the second run did not re-base: $(head -c 400 "$d/second.log")"
	put=$(find "$d/sink" -type f -newer "$d/mark" -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	keylen=$(cd "$d/sink" && find . -path '*/s*/*' -type f -print -quit | sed 's|^\./||' | awk '{print length($0)}')
	line=$(python3 - "$d/before.db" "$d/db" "$put" "$keylen" "$GRID" <<'EOF'
import os, sys
a, b, put, keylen, grid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split()
ps = 4096
size = os.path.getsize(b)
pages = size // ps
changed = []
with open(a, "rb") as fa, open(b, "rb") as fb:
    for p in range(pages):
        if fa.read(ps) != fb.read(ps):
            changed.append(p)
out = [str(size), str(len(changed)), str(put), "%.4f" % (put / size)]
for g in map(int, grid):
    cells = (pages + g - 1) // g
    dirty = len({p // g for p in changed})
    est = dirty * g * ps + cells * (2 + keylen + 32)
    out.append("%.4f" % (est / size))
print(",".join(out))
EOF
)
	echo "$rep,$line" >>"$CSV"
	echo "rep $rep: db_bytes,changed_pages,put_bytes,put_ratio,grid($GRID) = $line"
	rm -rf "$d"
done

python3 - "$CSV" "$GRID" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(col, fmt):
    v = [float(r[col]) for r in rows]
    return (fmt % statistics.median(v)) + " (" + (fmt % min(v)) + ".." + (fmt % max(v)) + ")"
print("reps: %d" % len(rows))
print("database bytes: " + med("db_bytes", "%.0f"))
print("changed pages: " + med("changed_pages", "%.0f"))
print("re-base put bytes: " + med("put_bytes", "%.0f"))
print("re-base put bytes / database: " + med("put_ratio", "%.4f"))
for g in sys.argv[2].split():
    print("projected, parts of %s pages (%d KiB), unchanged ones referenced: %s" % (g, int(g) * 4, med("grid%s_ratio" % g, "%.4f")))
EOF
echo "load after: $(uptime | sed 's/.*load average/load average/')"
