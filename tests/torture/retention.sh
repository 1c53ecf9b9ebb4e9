#!/usr/bin/env bash
# Retention torture test (issue 11): real SQLite writers on several tenants
# (names that sort unusually: db, db-2, db.x, db_y, Zeta), `walship
# replicate` running, a checkpoint every second, retention every 1.5 s
# (keeping 1 to 3 checkpoints, at random), watermarks carrying their
# manifests in every other replicate run (at random),
# re-bases forced while replicate is down (TRUNCATE checkpoints, the
# writers' last connection closing and taking the WAL with it, a file
# replaced), and kill -9 of replicate, checkpoint or retention at random
# moments. Each database starts with about 200 pages that rarely change
# and replicate cuts a re-base into parts of 16 pages (batch_bytes_max
# 128 KiB), so re-bases name parts of the image before them again
# (core/snap_reuse.c) while checkpoints and retention run and are killed. Afterwards (the writers stopped, replicate shipped the rest):
#   - verify passes;
#   - every tenant's latest state restores exactly (the source's rows);
#   - every point in time sampled during the run (every 0.7 s) restores
#     exactly -- the rows a writer committed form a prefix of its insert
#     sequence and each restored row equals the source's, and a later point
#     never has fewer rows -- across re-bases -- or is refused as removed by
#     retention, and then only when it is older than every point that
#     restores (any other refusal is a stored point refused: a failure);
#   - every stored checkpoint restores each tenant it names to such a prefix;
#   - verify --orphans lists only the kinds a kill leaves; after one more
#     checkpoint and retention, no object is left that nothing names, and
#     every tenant still restores (directories a kill left empty, or holding
#     only lock files, are counted).
#
#   bash tests/torture/retention.sh WALSHIP_BIN [--seconds N | --minutes N] [--dir DIR]
#
# Default 45 s of load (CI). Prints the figures (checkpoints committed,
# retention runs, kills, restores checked) and "torture: ok", or the first
# failure; exits non-zero on any failure.
set -euo pipefail

BIN=${1:?usage: retention.sh WALSHIP_BIN [--seconds N | --minutes N] [--dir DIR]}
shift
SECONDS_RUN=45
DIR=""
while [ $# -gt 0 ]; do
	case "$1" in
	--seconds) SECONDS_RUN=$2; shift 2 ;;
	--minutes) SECONDS_RUN=$(($2 * 60)); shift 2 ;;
	--dir) DIR=$2; shift 2 ;;
	*) echo "retention.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
BIN=$(readlink -f "$BIN")
DIR=${DIR:-${TMPDIR:-/tmp}}/ws-torture.$$
rm -rf "$DIR"
mkdir -p "$DIR"
cd "$DIR"
SINK="$DIR/sink"
URL="file://$SINK"
TENANTS="db db-2 db.x db_y Zeta"
RANDOM=$$

pids=()
stop_all() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
fail() {
	echo "torture: FAILED: $*" >&2
	echo "torture: scratch kept in $DIR" >&2
	stop_all
	exit 1
}
trap 'stop_all' EXIT

sq() { sqlite3 -batch -bail -cmd ".timeout 10000" "$@"; }
for t in $TENANTS; do
	sq "$t.db" "PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL);
		CREATE TABLE ballast(id INTEGER PRIMARY KEY, v BLOB NOT NULL);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
		INSERT INTO ballast SELECT i, randomblob(3000) FROM n;
		PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
done

# ---- the load -----------------------------------------------------------------------------

# writer TENANT: sequential inserts (one transaction each, sometimes a few
# rows), a TRUNCATE checkpoint now and then (a new WAL generation, or a
# re-base when walship holds no read mark). Each transaction is a sqlite3
# process of its own: while replicate is down its close is the last one,
# which checkpoints and deletes the WAL (a re-base). Asked to (a file
# replace-TENANT), it replaces its database file with a copy of itself.
writer() {
	local t=$1 n=0 k
	while [ ! -e quiet ]; do
		if [ -e "replace-$t" ]; then
			rm -f "$t.next"
			sq "$t.db" "VACUUM INTO '$t.next';" >/dev/null 2>>"writer-$t.err" &&
				sq "$t.next" "PRAGMA journal_mode=WAL;" >/dev/null &&
				rm -f "$t.db-wal" "$t.db-shm" && mv "$t.next" "$t.db" && echo "$t" >>replaced
			rm -f "replace-$t"
		fi
		k=$((1 + RANDOM % 3))
		local sql="BEGIN;"
		for _ in $(seq $k); do
			n=$((n + 1))
			sql="$sql INSERT INTO t VALUES ($n, hex(randomblob($((50 + RANDOM % 400)))));"
		done
		sq "$t.db" "$sql COMMIT;" >/dev/null 2>>"writer-$t.err" || n=$(sq "$t.db" "SELECT coalesce(max(id),0) FROM t;")
		if [ $((RANDOM % 25)) = 0 ]; then
			sq "$t.db" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null 2>&1 || true
		fi
		sleep 0.0$((RANDOM % 5))
	done
}

args=()
for t in $TENANTS; do args+=("$t=$t.db"); done

# replicator: `replicate` until killed; sometimes stopped cleanly, the
# databases checkpointed so the WAL is gone, then started again (a re-base).
# Every other run (at random) has its watermarks carry their manifests
# (carry_in_watermark = always): merged, stored, found carried by the next
# run, cut by checkpoints, under kill -9.
printf '[engine]\ncarry_in_watermark = always\nbatch_bytes_max = 128KiB\n' >carry.ini
printf '[engine]\ncarry_in_watermark = never\nbatch_bytes_max = 128KiB\n' >nocarry.ini
replicator() {
	local cfg
	while [ ! -e stop ]; do
		cfg=nocarry.ini
		[ $((RANDOM % 2)) = 0 ] && cfg=carry.ini
		echo "$cfg" >>replicate.cfgs
		"$BIN" replicate --sink "$URL" --config "$cfg" --quiet "${args[@]}" >>replicate.out 2>>replicate.err &
		echo $! >replicate.pid
		wait $! 2>/dev/null || true
		if [ ! -e stop ] && [ $((RANDOM % 3)) = 0 ]; then
			for t in $TENANTS; do sq "$t.db" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null 2>&1 || true; done
		fi
		# While it is down: a tenant's file replaced now and then (its
		# writer does it; waited for, at most 10 s).
		if [ ! -e stop ] && [ ! -e quiet ] && [ $((RANDOM % 3)) = 0 ]; then
			set -- $TENANTS
			shift $((RANDOM % $#))
			touch "replace-$1"
			for _ in $(seq 100); do [ -e "replace-$1" ] || break; sleep 0.1; done
		fi
		# And the last connection's close while it is down: the writers'
		# own (each transaction is a process), given a moment.
		sleep 0.$((RANDOM % 5))
	done
}

checkpointer() {
	while [ ! -e quiet ]; do
		"$BIN" checkpoint --sink "$URL" >>checkpoint.out 2>>checkpoint.err &
		echo $! >checkpoint.pid
		if wait $!; then echo ok >>checkpoint.ok; fi
		# Now and then a stretch without checkpoints: two re-bases with
		# no cut between them, the second naming parts of the first (a cut
		# past a chain's base lets retention remove that image).
		if [ $((RANDOM % 3)) = 0 ]; then sleep 5; else sleep 1; fi
	done
}

retainer() {
	while [ ! -e quiet ]; do
		# 1 to 3 checkpoints kept, changing from run to run (a run for
		# the same cut with another keep, a killed one resumed by another).
		"$BIN" retention --sink "$URL" --keep-checkpoints $((RANDOM % 3 + 1)) >>retention.out 2>>retention.err &
		echo $! >retention.pid
		if wait $!; then date -u +%s%3N >>retention.ok; fi
		sleep 1.5
	done
}

# sampler: a point in time every 0.7 s (restored and checked at the end).
sampler() {
	while [ ! -e quiet ]; do
		date -u +%Y-%m-%dT%H:%M:%S.%3NZ >>samples
		sleep 0.7
	done
}

# killer: kill -9 one of the three at a random moment.
killer() {
	local who p
	while [ ! -e calm ]; do
		sleep "$((RANDOM % 3)).$((RANDOM % 10))"
		case $((RANDOM % 3)) in
		0) who=replicate ;;
		1) who=checkpoint ;;
		*) who=retention ;;
		esac
		p=$(cat "$who.pid" 2>/dev/null || true)
		if [ -n "$p" ] && kill -9 "$p" 2>/dev/null; then echo "$who" >>kills; fi
	done
}

replicator &
rpid=$!
sleep 1
for t in $TENANTS; do writer "$t" & pids+=($!); done
# Points in time are sampled from when every tenant has shipped: every one
# of them is then a stored point until retention removes it.
for _ in $(seq 300); do
	n=$("$BIN" ls --sink "$URL" --json 2>/dev/null | grep -c '"watermark":{' || true)
	[ "$n" -ge "$(echo $TENANTS | wc -w)" ] && break
	sleep 0.1
done
checkpointer & pids+=($!)
retainer & pids+=($!)
sampler & pids+=($!)
killer & pids+=($!)
sleep "$SECONDS_RUN"
# Calm: 6 s more without kills (the last points sampled are then after the
# last retention runs that a kill interrupted).
touch calm
sleep 6
# Quiet: the writers and the three stop; replicate (restarted if it was
# killed last) ships the rest, then stops on SIGTERM.
touch quiet
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=("$rpid")
sleep 3
touch stop
kill -TERM "$(cat replicate.pid)" 2>/dev/null || true
wait "$rpid" 2>/dev/null || true
pids=()

# ---- one clean checkpoint (no retention: it would move the window past
# every sampled point) ----------------------------------------------------------------------
"$BIN" checkpoint --sink "$URL" >final-ckpt.out 2>final-ckpt.err || fail "the final checkpoint failed: $(cat final-ckpt.err)"
"$BIN" verify --sink "$URL" >verify.out 2>verify.err || fail "verify: $(cat verify.out verify.err)"

# ---- checks -------------------------------------------------------------------------------
# The re-bases stored at the end of the load that name parts of an earlier
# image (a part keyed with another sequence than its manifest's;
# docs/FORMAT.md "Manifest", "Keys"): retention has removed those behind
# its cut by then.
reused=$(python3 - "$SINK" <<'EOF'
import os, re, struct, sys
def s(b, o):
    n = struct.unpack_from("<H", b, o)[0]
    return b[o + 2:o + 2 + n].decode(), o + 2 + n
rebases = named = 0
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        if not re.fullmatch(r"m[0-9a-f]{16}-[0-9a-f]{16}", f):
            continue
        b = open(os.path.join(root, f), "rb").read()
        if b[:8] != b"WSMANIF1":
            continue
        _, o = s(b, 16)
        seq = struct.unpack_from("<Q", b, o + 16)[0]
        o += 32 + 20
        kind = struct.unpack_from("<I", b, o)[0]
        o += 4 + 24 + 16 + 4
        _, o = s(b, o)
        o += 32 + 8
        snaps = struct.unpack_from("<I", b, o)[0]
        o += 8
        if kind != 2 or snaps == 0:
            continue
        rebases += 1
        again = 0
        for _ in range(snaps):
            key, o = s(b, o)
            o += 32
            m = re.search(r"/s[0-9a-f]{16}-([0-9a-f]{16})/", key)
            again += bool(m and int(m.group(1), 16) != seq)
        named += again > 0
print("%d of %d" % (named, rebases))
EOF
)
restores=0
for t in $TENANTS; do
	"$BIN" restore --sink "$URL" --tenant "$t" -o "latest-$t.db" 2>restore.err ||
		fail "tenant $t: restore of the latest state: $(cat restore.err)"
	[ "$(sq "$t.db" 'SELECT * FROM t ORDER BY id;' | sha256sum)" = \
		"$(sq "latest-$t.db" 'SELECT * FROM t ORDER BY id;' | sha256sum)" ] ||
		fail "tenant $t: the latest state differs from the source"
	restores=$((restores + 1))
done

# A restored state at a point: a committed prefix of the writer's rows,
# each equal to the source's. Prints the prefix length.
prefix_ok() { # SOURCE RESTORED
	python3 - "$1" "$2" <<'PY'
import sqlite3, sys
src = sqlite3.connect(sys.argv[1]); got = sqlite3.connect(sys.argv[2])
ok = got.execute("PRAGMA integrity_check").fetchone()[0]
if ok != "ok":
    sys.exit("integrity_check: " + ok)
rows = got.execute("SELECT id, v FROM t ORDER BY id").fetchall()
for i, (rid, v) in enumerate(rows, 1):
    if rid != i:
        sys.exit("row %d missing (not a committed prefix)" % i)
    s = src.execute("SELECT v FROM t WHERE id = ?", (rid,)).fetchone()
    if s is None or s[0] != v:
        sys.exit("row %d differs from the source" % rid)
print(len(rows))
PY
}

# Every sampled point restores, across re-bases, unless retention removed
# it: only a refusal that names retention, and only before every point
# that restores. A point refused for any other reason is a stored point
# refused: a failure.
points=0
removed=0
refused=0
chains=0
failed_after_ok=""
for t in $TENANTS; do
	prev=0
	seen_ok=0
	"$BIN" ls --sink "$URL" "$t" --json >gens.out 2>gens.err || fail "tenant $t: ls TENANT: $(cat gens.err)"
	chains=$((chains + $(python3 -c 'import json,sys
print(1 + max(json.loads(l)["chain"] for l in open(sys.argv[1]) if l.strip()))' gens.out)))
	while read -r T; do
		if "$BIN" restore --sink "$URL" --tenant "$t" --time "$T" --force -o "at-$t.db" 2>at.err; then
			k=$(prefix_ok "$t.db" "at-$t.db") || fail "tenant $t at $T: $k"
			[ "$k" -ge "$prev" ] || fail "tenant $t at $T: $k rows, fewer than at an earlier point ($prev)"
			prev=$k
			seen_ok=1
			points=$((points + 1))
		else
			grep -q "not in stored range" at.err || fail "tenant $t at $T: restore failed: $(cat at.err)"
			if ! grep -q "retention" at.err; then
				refused=$((refused + 1))
				echo "torture: tenant $t at $T: a stored point refused: $(cat at.err)" >&2
				continue
			fi
			removed=$((removed + 1))
			[ "$seen_ok" = 0 ] || failed_after_ok="tenant $t at $T: $(cat at.err)"
			[ -z "$failed_after_ok" ] || fail "a point after one that restores fails: $failed_after_ok"
		fi
	done <samples
	[ "$seen_ok" = 1 ] || fail "tenant $t: no sampled point restored"
done
echo "torture: points in time checked: $((points + removed + refused)): $points restored, $removed refused as removed by retention, $refused stored points refused (must be 0); chains listed by ls TENANT: $chains"
[ "$refused" = 0 ] || fail "$refused stored points in time were refused (above)"
# The last samples are after the last retention that finished during the
# load: they must restore (counted above; at least one per tenant).


ckpts=0
while read -r id; do
	for t in $TENANTS; do
		if "$BIN" restore --sink "$URL" --tenant "$t" --checkpoint "$id" --force -o "ck.db" 2>ck.err; then
			prefix_ok "$t.db" ck.db >/dev/null || fail "checkpoint $id tenant $t does not restore a committed prefix"
			ckpts=$((ckpts + 1))
		else
			grep -q "does not include tenant" ck.err || fail "checkpoint $id tenant $t: $(cat ck.err)"
		fi
	done
done < <("$BIN" ls --sink "$URL" --checkpoints --json | python3 -c 'import json,sys
for l in sys.stdin: print(json.loads(l)["id"])')

# ---- nothing left that nothing names ---------------------------------------------------------
# Mid-run, what verify --orphans lists is of the kinds a kill leaves (an
# upload whose tail was killed before its watermark; a chain a re-base cut
# off; an artifact of a killed checkpoint attempt), never foreign. After one
# more checkpoint and a retention run (its recovery, and retention deleting
# everything at or behind the cut that nothing kept names), none is left;
# nor a directory holding only lock files.
"$BIN" verify --sink "$URL" --orphans >orphans-before.out 2>orphans-before.err ||
	fail "verify --orphans: $(cat orphans-before.out orphans-before.err)"
grep -E '^orphan ' orphans-before.out | grep -vE '^orphan (unpublished|cut-off|artifact) ' &&
	fail "verify --orphans lists an orphan of a kind no kill leaves (above)"
"$BIN" checkpoint --sink "$URL" >>final-ckpt.out 2>>final-ckpt.err || fail "the last checkpoint failed: $(cat final-ckpt.err)"
"$BIN" retention --sink "$URL" >final-ret.out 2>final-ret.err || fail "the last retention failed: $(cat final-ret.err)"
"$BIN" verify --sink "$URL" --fail-on-orphans >orphans.out 2>orphans.err ||
	fail "after a checkpoint and retention, verify --fail-on-orphans: $(cat orphans.out orphans.err)"
# Directories holding nothing or only lock files: a process killed between
# making a directory and publishing into it, or between a delete and the
# directory's prune, leaves one (docs/CHECKPOINTS.md); counted, not failed.
lockonly=$(cd "$SINK" && find . -mindepth 1 -type d | while read -r d; do
	if [ -z "$(ls -A "$d" | grep -v '^\.lock\.')" ]; then echo "$d"; fi; done)
emptydirs=$(printf '%s' "$lockonly" | grep -c . || true)
for t in $TENANTS; do
	"$BIN" restore --sink "$URL" --tenant "$t" --force -o "last-$t.db" 2>restore.err ||
		fail "tenant $t: restore after the last retention: $(cat restore.err)"
	[ "$(sq "$t.db" 'SELECT * FROM t ORDER BY id;' | sha256sum)" = \
		"$(sq "last-$t.db" 'SELECT * FROM t ORDER BY id;' | sha256sum)" ] ||
		fail "tenant $t: the state after the last retention differs from the source"
	restores=$((restores + 1))
done
leaked=$(grep -c '^orphan ' orphans-before.out || true)

committed=$(grep -c '"committed":true' checkpoint.out 2>/dev/null || true)
rets=$(wc -l <retention.ok 2>/dev/null || echo 0)
kills=$(wc -l <kills 2>/dev/null || echo 0)
echo "torture: ${SECONDS_RUN} s, tenants: $TENANTS"
echo "torture: checkpoints committed: $committed, retention runs completed: $rets, kills: $kills ($(sort kills 2>/dev/null | uniq -c | tr -s ' ' | tr '\n' ',' ))"
echo "torture: replicate runs: $(wc -l <replicate.cfgs), of which with carried manifests: $(grep -c '^carry' replicate.cfgs || true)"
echo "torture: re-bases stored at the end of the load that name parts of the image before them: $reused"
echo "torture: orphans before the last checkpoint and retention: $leaked ($(sed -n 's/^orphan \([^ ]*\) .*/\1/p' orphans-before.out | sort | uniq -c | tr -s ' ' | tr '\n' ',')); after: 0; directories left empty or holding only lock files (by kills): $emptydirs"
echo "torture: restores checked: $restores latest, $points points in time (of $(($(wc -l <samples) * $(echo $TENANTS | wc -w))) sampled; the others before retention's cut), $ckpts by checkpoint; verify ok; files replaced: $(wc -l <replaced 2>/dev/null || echo 0)"
[ "$committed" -ge 1 ] || fail "no checkpoint committed during the load"
[ "$rets" -ge 1 ] || fail "no retention run completed during the load"
echo "torture: ok"
trap - EXIT
cd /
rm -rf "$DIR"
