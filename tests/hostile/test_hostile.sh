#!/usr/bin/env bash
# Hostile sinks (issue 12): every CLI command (ls, verify, restore,
# retention, checkpoint, replicate --once) against a file:// sink holding
# symbolic links out of it, FIFOs, device nodes, names of 128 and 255 bytes,
# directories where objects belong, and hash-consistent forged objects; and
# restore -o aimed at what it must never replace.
#
# Per case it asserts: the exit status; the object (or path) named in the
# error; no hang (every command runs under `timeout`, and 124 fails); that
# nothing outside the sink and the output path was created, changed or
# deleted (a snapshot of a sentinel directory, find + sha256sum, before and
# after: the links point into it); and that no secret (AWS credentials in
# the environment and in a config's [s3] section) appears in any output.
#
# Needs root for mknod (device nodes); the device cases are skipped
# otherwise. Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$HERE/../integration/lib.sh"

T=${WS_HOSTILE_TIMEOUT_S:-30} # seconds any one command may take; a hang is a failure
SECRET_KEY="hostile-SECRET-9f3e1c7a"
SECRET_TOKEN="hostile-TOKEN-51b0d2e8"
export AWS_ACCESS_KEY_ID="AKIAHOSTILE0000"
export AWS_SECRET_ACCESS_KEY="$SECRET_KEY"
export AWS_SESSION_TOKEN="$SECRET_TOKEN"
IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1

SENT="$ROOT/sentinel" # the world outside the sink: links lead here
OUT="$ROOT/out.d"     # restore outputs go here
mkdir -p "$SENT/dir" "$OUT"
echo "precious" >"$SENT/victim"
echo "also precious" >"$SENT/dir/victim2"
mkfifo "$SENT/fifo"
if [ "$IS_ROOT" = 1 ]; then mknod "$SENT/null" c 1 3; fi

snap() {
	(cd "$SENT" && find . -printf '%y %m %s %p -> %l\n' | sort &&
		find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}

# run ARGS...: walship under a time bound; stdout -> out, stderr -> err, status -> $rc.
run() {
	set +e
	timeout -k 5 "$T" "$WS_BIN" "$@" >"$ROOT/out" 2>"$ROOT/err"
	rc=$?
	set -e
	# A command that loops may print without end; keep what a reader needs.
	truncate -s '<1M' "$ROOT/out" "$ROOT/err"
	no_sanitizer_report "$ROOT/err" "walship $*"
}

# expect DESC WANT_RC [REGEX]: the last run exited WANT_RC (a list "1|2"
# allowed), without a hang; stderr matches REGEX (extended, when given); the
# sentinel is as it was; no secret in stdout or stderr.
expect() {
	local desc=$1 want=$2 re=${3:-}
	local why=""
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		why="hung (killed after ${T}s)"
	elif ! [[ "|$want|" == *"|$rc|"* ]]; then
		why="exit $rc, want $want"
	elif [ -n "$re" ] && ! grep -Eq -- "$re" "$ROOT/err"; then
		why="stderr does not match /$re/"
	elif [ "$(snap)" != "$SNAP0" ]; then
		why="the sentinel directory changed: $(diff <(echo "$SNAP0") <(snap) | head -5 | tr '\n' ' ')"
	elif grep -qF -e "$SECRET_KEY" -e "$SECRET_TOKEN" "$ROOT/out" "$ROOT/err"; then
		why="a secret was printed"
	elif [ "$rc" = 1 ] && grep -Eq '\((invalid configuration|configured limit exceeded)\)' "$ROOT/err"; then
		# Exit 1 is a failure of the sink's contents, not of the command
		# line (2): bad data is reported as bad data.
		why="bad data reported as a configuration error or a configured limit"
	fi
	if [ -z "$why" ]; then ok "$desc"; else bad "$desc: $why"; fi
}

# ---- a real sink: two tenants, two checkpoints, history to retire ----------------------
# Its tails write batches as objects of their own (not inline in their
# manifests, the default for small tails), which the batch cases replace.
NOINL="$ROOT/noinline.ini"
printf '[engine]\ninline_batch_bytes_max = off\n' >"$NOINL"
newdb() { rm -f "$1" "$1-wal" "$1-shm"; sq "$1" "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null; }
grow() { sq "$1" "INSERT INTO t(v) SELECT hex(randomblob(500)) FROM generate_series(1,$2);"; }
P="$ROOT/pristine"
newdb a.db
newdb b.db
for round in 1 2 3; do
	grow a.db 20
	grow b.db 20
	"$WS_BIN" replicate --sink "file://$P" --config "$NOINL" --once --quiet a.db b.db 2>/dev/null
	if [ "$round" -lt 3 ]; then "$WS_BIN" checkpoint --sink "file://$P" >/dev/null 2>&1; fi
done
check "setup: the pristine sink verifies" "$WS_BIN" verify --sink "file://$P"
GEN_A=$(cd "$P" && ls -d a/e0-p0/g*)
names() { find "$1" -mindepth 1 -maxdepth 1 -name "$2" -printf '%f\n' | sort; }
M_OLD_A=$(names "$P/$GEN_A" 'm*' | head -1) # before the latest cut: retired by retention
M_NEW_A=$(names "$P/$GEN_A" 'm*' | tail -1) # the watermark's
ART1=$(names "$P/checkpoints/artifacts" '*' | head -1)
if [ -z "$GEN_A" ] || [ -z "$M_OLD_A" ] || [ "$M_OLD_A" = "$M_NEW_A" ] || [ -z "$ART1" ]; then
	echo "setup: unexpected sink layout"
	exit 1
fi

S="$ROOT/sink"
U="file://$S"
fresh() { rm -rf "$S"; cp -a "$P" "$S"; rm -f "$OUT"/*; rm -f "$OUT"/.walship-restore.* 2>/dev/null || true; }
CFG="$ROOT/hostile.ini"
cat >"$CFG" <<EOF
[engine]
sink = $U
[s3]
access_key_id = AKIAHOSTILE0000
secret_access_key = $SECRET_KEY
session_token = $SECRET_TOKEN
EOF
SNAP0=$(snap)

# every_command DESC WANT_LS WANT_VERIFY WANT_RESTORE WANT_RETENTION WANT_CKPT REGEX:
# the five sink commands against the current sink (each from a fresh
# copy of its mutation, so one command's effect cannot hide another's).
# REGEX must name the object in every command that fails.
every_command() {
	local desc=$1 w_ls=$2 w_verify=$3 w_restore=$4 w_ret=$5 w_ckpt=$6 re=$7 mutate=$8
	local r
	fresh; $mutate
	run ls --sink "$U"
	r=$re; [ "$w_ls" = 0 ] && r=""
	expect "$desc: ls" "$w_ls" "$r"
	fresh; $mutate
	run verify --sink "$U"
	r=$re; [ "$w_verify" = 0 ] && r=""
	expect "$desc: verify" "$w_verify" "$r"
	fresh; $mutate
	run restore --sink "$U" --tenant a -o "$OUT/r.db"
	r=$re; [ "$w_restore" = 0 ] && r=""
	expect "$desc: restore" "$w_restore" "$r"
	if [ "$w_restore" != 0 ]; then
		check "$desc: restore left nothing in the output directory" [ -z "$(ls -A "$OUT")" ]
	fi
	fresh; $mutate
	run retention --sink "$U"
	r=$re; [ "$w_ret" = 0 ] && r=""
	expect "$desc: retention" "$w_ret" "$r"
	fresh; $mutate
	run checkpoint --sink "$U" --config "$CFG"
	r=$re; [ "$w_ckpt" = 0 ] && r=""
	expect "$desc: checkpoint" "$w_ckpt" "$r"
	fresh; $mutate
	run replicate --config "$CFG" --once a=a.db b=b.db
	# Shipping may go on past what it never reads; if it fails, it says why.
	r=""; [ "$rc" = 1 ] && r=$re
	expect "$desc: replicate --once" "0|1" "$r"
	echo "     (replicate --once: exit $rc)"
}

echo "# long top-level names: each is stepped over, none is listed for ever"
long_names() {
	local n128 n255
	n128=$(printf 'x%.0s' $(seq 128))
	n255=$(printf 'y%.0s' $(seq 255))
	mkdir "$S/$n128" && echo junk >"$S/$n128/f"
	mkdir -p "$S/$n255/sub" && echo junk >"$S/$n255/sub/f"
	echo junk >"$S/$(printf 'z%.0s' $(seq 255))"
}
every_command "names of 128 and 255 bytes at the root" 0 0 0 0 0 "" long_names

echo "# links out of the sink: refused, never followed, nothing outside touched"
# The linked-to copies live in the sentinel, so a command that followed a
# link would read (or delete) there and change the snapshot.
link_tenant_dir() { cp -a "$S/a" "$SENT/tenant_a"; rm -rf "$S/a"; ln -s "$SENT/tenant_a" "$S/a"; SNAP0=$(snap); }
link_gen_dir() { cp -a "$S/$GEN_A" "$SENT/gen_a"; rm -rf "${S:?}/$GEN_A"; ln -s "$SENT/gen_a" "$S/$GEN_A"; SNAP0=$(snap); }
link_art_dir() {
	cp -a "$S/checkpoints/artifacts/$ART1" "$SENT/art1"
	rm -rf "$S/checkpoints/artifacts/$ART1"
	ln -s "$SENT/art1" "$S/checkpoints/artifacts/$ART1"
	SNAP0=$(snap)
}
link_old_manifest() {
	cp "$S/$GEN_A/$M_OLD_A" "$SENT/manifest_a"
	rm "$S/$GEN_A/$M_OLD_A"
	ln -s "$SENT/manifest_a" "$S/$GEN_A/$M_OLD_A"
	SNAP0=$(snap)
}
link_new_manifest() {
	cp "$S/$GEN_A/$M_NEW_A" "$SENT/manifest_a"
	rm "$S/$GEN_A/$M_NEW_A"
	ln -s "$SENT/manifest_a" "$S/$GEN_A/$M_NEW_A"
	SNAP0=$(snap)
}
link_wm() { cp "$S/a/wm" "$SENT/wm_a"; rm "$S/a/wm"; ln -s "$SENT/wm_a" "$S/a/wm"; SNAP0=$(snap); }
# A tenant directory that is a link: listings skip it with a warning (ls
# and verify see tenant b only); restore and retention, which read a's
# watermark by name, refuse the link.
# verify fails: a checkpoint names tenant a, whose data the sink no longer holds.
# checkpoint refuses a cut without a, which the last checkpoint named
# (a tenant removed for good is forgotten first: walship forget).
every_command "tenant directory a -> outside" 0 1 1 1 1 "a is a symbolic link|skipping a" link_tenant_dir
every_command "generation directory -> outside" 0 1 1 1 1 "$GEN_A is a symbolic link" link_gen_dir
# An older checkpoint's artifact directory a link: restore --checkpoint of
# it refuses, so verify (which checks every stored checkpoint) fails too.
every_command "artifact directory -> outside" 0 1 0 1 0 "checkpoints/artifacts/$ART1 is a symbolic link" link_art_dir
# Before the latest cut: restore and checkpoint start from the artifact and
# never read it; verify reads the whole chain; retention would delete it.
every_command "retired manifest file -> outside" 0 1 0 1 0 "$M_OLD_A.*symbolic link" link_old_manifest
every_command "latest manifest file -> outside" 0 1 1 1 1 "$M_NEW_A.*symbolic link" link_new_manifest
every_command "watermark file -> outside" 1 1 1 1 1 "a/wm.*symbolic link" link_wm
# ls reports a tenant it cannot read and goes on to the others.
fresh; link_wm
run ls --sink "$U"
expect "ls with a's watermark a link: exit 1 naming a/wm" 1 "tenant a: .*a/wm.*symbolic link"
check "... and still lists b" grep -q '^b  *epoch=' "$ROOT/out"
check "... and says how many it could not read" grep -q "ls: 1 tenant could not be read" "$ROOT/err"
fresh; cp "$S/b/wm" "$S/a/wm"
run ls --sink "$U" --json
expect "ls --json with b's watermark as a's: exit 1 naming a/wm" 1 "a/wm belongs to tenant 'b'"
check "... a's line carries the error, b's line follows" \
	python3 -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1])]; sys.exit(not (l[0]["tenant"]=="a" and "a/wm" in l[0]["error"] and l[1]["tenant"]=="b" and l[1]["watermark"]))' "$ROOT/out"
rm -rf "$SENT/tenant_a" "$SENT/gen_a" "$SENT/art1" "$SENT/manifest_a" "$SENT/wm_a"
SNAP0=$(snap)

echo "# FIFOs, devices and directories where objects belong: named, no hang"
fifo_wm() { rm "$S/a/wm"; mkfifo "$S/a/wm"; }
dir_wm() { rm "$S/a/wm"; mkdir "$S/a/wm"; }
fifo_manifest() { rm "$S/$GEN_A/$M_NEW_A"; mkfifo "$S/$GEN_A/$M_NEW_A"; }
fifo_root() { mkfifo "$S/zz-fifo"; mkfifo "$S/a/fifo"; }
every_command "FIFO as a watermark" 1 1 1 1 1 "a/wm.*FIFO" fifo_wm
every_command "FIFO as the latest manifest" 0 1 1 1 1 "$M_NEW_A.*FIFO" fifo_manifest
every_command "FIFOs at the root and in a tenant" 0 0 0 0 0 "" fifo_root
# A directory under an object's name is no object (as on S3, where a
# prefix is not a key): a has no watermark.
# verify fails: a checkpoint names tenant a, whose watermark is gone;
# checkpoint refuses a cut without a, naming a/wm.
every_command "directory as a watermark" 0 1 1 0 1 "tenant a has no watermark|a/wm" dir_wm
if [ "$IS_ROOT" = 1 ]; then
	dev_wm() { rm "$S/a/wm"; mknod "$S/a/wm" c 1 3; }
	dev_batch() {
		local b
		b=$(names "$S/$GEN_A" 'b*' | tail -1)
		rm "$S/$GEN_A/$b"
		mknod "$S/$GEN_A/$b" c 1 5 # /dev/zero: an open would read zeros for ever
	}
	every_command "character device as a watermark" 1 1 1 1 1 "a/wm.*device" dev_wm
	every_command "character device (zero) as a batch" 0 1 1 0 1 "$GEN_A/b.*device" dev_batch
else
	echo "skip - device nodes need root"
fi

echo "# restore -o: only a regular file, never inside the sink"
fresh
if [ "$IS_ROOT" = 1 ]; then
	run restore --sink "$U" --tenant a --force -o "$SENT/null"
	expect "-o a device node with --force: refused" 1 "$SENT/null is a device"
	check "... the device node is still one" [ -c "$SENT/null" ]
fi
run restore --sink "$U" --tenant a --force -o "$SENT/dir"
expect "-o a directory with --force: refused" 1 "$SENT/dir is a directory"
run restore --sink "$U" --tenant a --force -o "$SENT/fifo"
expect "-o a FIFO with --force: refused, no hang" 1 "$SENT/fifo is a FIFO"
ln -s "$SENT/victim" "$OUT/link.db"
run restore --sink "$U" --tenant a --force -o "$OUT/link.db"
expect "-o a link to a file outside with --force: refused" 1 "link.db is a symbolic link"
check "... the link is still a link" [ -L "$OUT/link.db" ]
rm -f "$OUT/link.db"
cp "$S/a/wm" "$ROOT/wm.before"
run restore --sink "$U" --tenant a --force -o "$S/a/wm"
expect "-o SINK/a/wm with --force: refused" 1 "$S/a/wm is inside the sink"
check "... the watermark is unchanged" cmp -s "$S/a/wm" "$ROOT/wm.before"
run restore --sink "$U" --tenant a -o "$S/a/new.db"
expect "-o a new file inside the sink: refused" 1 "inside the sink"
check "... nothing was created in the sink" [ -z "$(cd "$S" && find . -name 'new.db*' -o -name '.walship-restore*')" ]
ln -s "$S/a" "$OUT/into-sink"
run restore --sink "$U" --tenant a -o "$OUT/into-sink/new.db"
expect "-o through a link into the sink: refused" 1 "inside the sink"
rm -f "$OUT/into-sink"
run restore --sink "$U" --tenant a -o ""
expect "-o '': a usage error" 2 "output path is empty"
run restore --sink "$U" --tenant a -o "$OUT/$(printf 'n%.0s' $(seq 256))"
expect "-o a 256-byte file name: a usage error" 2 "256 bytes; at most 255"
run restore --sink "$U" --tenant a -o "$OUT/$(printf 'n%.0s' $(seq 255))"
expect "-o a 255-byte file name: restored" 0 ""
rm -f "$OUT"/*
run restore --sink "$U" --tenant a -o "$OUT/r.db" --time 2026-02-30T00:00:00Z
expect "--time 2026-02-30: a usage error" 2 "2026-02-30"
run restore --sink "$U" --tenant a -o "$OUT/r.db"
expect "restore to a new file: ok" 0 ""
sq "$OUT/r.db" "PRAGMA journal_mode=WAL; INSERT INTO t(v) VALUES ('after');" >/dev/null
run restore --sink "$U" --tenant a --force -o "$OUT/r.db"
expect "--force over a database with a -wal beside it: refused" 1 "r.db-wal"
rm -f "$OUT/r.db-wal" "$OUT/r.db-shm"
run restore --sink "$U" --tenant a --force -o "$OUT/r.db"
expect "--force over a regular database: ok" 0 ""
check "... equal to the source" same_dump a.db "$OUT/r.db"
check "... no temporary file left" [ -z "$(find "$OUT" -name '*walship-restore*')" ]
# Without --force too: a -wal or hot -journal left where a database was
# is applied to whatever database next takes its name, the restored one
# (its rows replaced by the old ones, for good once SQLite checkpoints).
cp "$OUT/r.db" "$ROOT/keep.db"
sq "$OUT/r.db" "PRAGMA journal_mode=WAL; INSERT INTO t(v) VALUES ('old life');" >/dev/null
cp "$OUT/r.db-wal" "$ROOT/old.wal"
rm -f "$OUT/r.db" "$OUT/r.db-wal" "$OUT/r.db-shm"
for side in wal journal; do
	cp "$ROOT/old.wal" "$OUT/r.db-$side"
	run restore --sink "$U" --tenant a -o "$OUT/r.db"
	expect "a new file with a -$side left beside it: refused" 1 "r.db-$side"
	check "... nothing published" [ ! -e "$OUT/r.db" ]
	run restore --sink "$U" --tenant a --checkpoint latest -o "$OUT/r.db"
	expect "--checkpoint latest likewise" 1 "r.db-$side"
	rm -f "$OUT/r.db-$side"
done
run restore --sink "$U" --tenant a -o "$OUT/r.db"
expect "with it gone: ok" 0 ""
check "... equal to the source" same_dump a.db "$OUT/r.db"
rm -f "$OUT"/* "$ROOT/keep.db" "$ROOT/old.wal"

echo "# a hash-consistent forged commit size (0xFFFFFFFF pages, a larger one, a smaller one)"
# A commit size above page 1's valid in-header size is a file with slack
# past the database's end, as SQLITE_FCNTL_CHUNK_SIZE leaves it: SQLite
# reads the header's pages, so the image is the same database, published
# without the slack (never a sparse file as large as the forged size). Past
# SQLite's ceiling: refused by restore and verify alike. Below the header's
# size SQLite itself calls the database malformed: nothing is shipped.
for pages in 0xFFFFFFFF 100000 1; do
	rm -rf "$ROOT/fsink"
	newdb f.db
	grow f.db 3
	"$WS_BIN" replicate --sink "file://$ROOT/fsink" --once --quiet f.db 2>/dev/null
	grow f.db 1
	python3 "$HERE/forge_wal.py" f.db-wal "$pages" >/dev/null
	run replicate --sink "file://$ROOT/fsink" --config "$NOINL" --once --quiet f.db # a batch object
	rm -f "$OUT"/*
	if [ "$pages" = 1 ]; then
		expect "forged $pages: replicate refuses what SQLite calls malformed" 1 "f.db: database disk image is malformed"
		run restore --sink "file://$ROOT/fsink" --tenant f -o "$OUT/f.db"
		expect "forged $pages: restore gives the state shipped before it" 0 ""
		check "forged $pages: ... its 3 rows" [ "$(sq "$OUT/f.db" "SELECT count(*) FROM t;")" = 3 ]
		run verify --sink "file://$ROOT/fsink"
		expect "forged $pages: verify passes" 0 ""
		continue
	fi
	expect "forged $pages: replicate ships it (the frames' checksums hold)" 0 ""
	run restore --sink "file://$ROOT/fsink" --tenant f -o "$OUT/f.db"
	if [ "$pages" = 100000 ]; then
		expect "forged $pages: restore publishes the database page 1 names" 0 ""
		check "forged $pages: ... equal to the source" same_dump f.db "$OUT/f.db"
		check "forged $pages: ... without the slack ($(stat -c %s "$OUT/f.db") bytes)" \
			[ "$(stat -c %s "$OUT/f.db")" -lt 1048576 ]
		run verify --sink "file://$ROOT/fsink"
		expect "forged $pages: verify passes, as restore does" 0 ""
		continue
	fi
	expect "forged $pages: restore refused naming the batch" 1 "batch f/.*/b[0-9a-f-]+: commit frame [0-9]+ says the database has"
	check "forged $pages: ... and published nothing" [ -z "$(ls -A "$OUT")" ]
	run verify --sink "file://$ROOT/fsink"
	expect "forged $pages: verify fails naming the batch, as restore does" 1 \
		"batch f/.*: commit frame [0-9]+ says the database has $((pages)) pages"
done

echo "# a hash-consistent forged b-tree page: integrity_check's report, with the tenant"
rm -rf "$ROOT/fsink"
newdb f.db
grow f.db 3
"$WS_BIN" replicate --sink "file://$ROOT/fsink" --once --quiet f.db 2>/dev/null
grow f.db 1
python3 "$HERE/forge_wal.py" f.db-wal cells >/dev/null
run replicate --sink "file://$ROOT/fsink" --once --quiet f.db
expect "forged cells: replicate ships it" 0 ""
rm -f "$OUT"/*
run restore --sink "file://$ROOT/fsink" --tenant f -o "$OUT/f.db"
expect "forged cells: restore refused with SQLite's own report and the tenant" 1 \
	"tenant f: restored image fails PRAGMA integrity_check: .*(On tree page|Page [0-9])"
check "forged cells: ... on one line" [ "$(grep -c . "$ROOT/err")" = 1 ]
check "forged cells: ... and published nothing" [ -z "$(ls -A "$OUT")" ]
run verify --sink "file://$ROOT/fsink"
expect "forged cells: verify fails with the same report, as restore does" 1 \
	"tenant f: restored image fails PRAGMA integrity_check: .*(On tree page|Page [0-9])"

echo "# inline batches (the default for a small tail): damaged or forged inside their manifest"
# A tail after the first whose frames fit one batch carries the batch in
# its manifest (version 2), after the refs. A byte flipped in it (its
# header or its frames) is the manifest's damage: restore and verify both
# refuse, naming the manifest, and nothing is published. A hash-consistent
# forged commit size in it is named as the manifest's inline batch.
IS="$ROOT/isink"
# small_sink CONFIG [FORGE]: f's first tail, then a small one (its WAL
# forged first, if asked), each replicate run with CONFIG (may be /dev/null
# for none); $m is the last stored manifest.
small_sink() {
	rm -rf "$IS"
	newdb f.db
	grow f.db 3
	"$WS_BIN" replicate --sink "file://$IS" --config "$1" --once --quiet f.db 2>/dev/null
	grow f.db 1
	if [ -n "${2:-}" ]; then python3 "$HERE/forge_wal.py" f.db-wal "$2" >/dev/null; fi
	run replicate --sink "file://$IS" --config "$1" --once --quiet f.db
	m=$(cd "$IS" && find f -name 'm*' -type f | sort | tail -1)
	rm -f "$OUT"/*
}
NOCFG="$ROOT/empty.ini"
: >"$NOCFG"
inline_sink() { small_sink "$NOCFG" "${1:-}"; }
for where in header frames; do
	inline_sink
	expect "inline ($where): replicate ships" 0 ""
	check "inline ($where): the second tail's manifest is version 2 and carries a batch" python3 -c 'import struct,sys
b=open(sys.argv[1],"rb").read(); sys.exit(not (struct.unpack_from("<I",b,8)[0]==2 and b.find(b"WSBATCH1")>0))' "$IS/$m"
	check "inline ($where): ... and no batch object of its own (only the first tail's)" \
		[ "$(cd "$IS" && find f -name 'b*' -type f | wc -l)" = 1 ]
	python3 -c 'import sys; p,w=sys.argv[1],sys.argv[2]; b=bytearray(open(p,"rb").read()); i=b.find(b"WSBATCH1")
b[i + 20 if w == "header" else (i + 96 + len(b) - 8) // 2] ^= 1; open(p,"wb").write(b)' "$IS/$m" "$where"
	run restore --sink "file://$IS" --tenant f -o "$OUT/f.db"
	expect "inline ($where): a flipped byte: restore refused naming the manifest" 1 \
		"manifest $m does not match the SHA-256"
	check "inline ($where): ... and published nothing" [ -z "$(ls -A "$OUT")" ]
	run verify --sink "file://$IS"
	expect "inline ($where): verify fails naming the manifest, as restore does" 1 \
		"manifest $m does not match the SHA-256"
done
# forged_refused WHAT MANIFEST_RE: after small_sink ... 0xFFFFFFFF, the
# forged commit size is refused by restore and verify alike, naming the
# inline batch of the manifest MANIFEST_RE matches.
forged_refused() {
	expect "$1 forged 0xFFFFFFFF: replicate ships it (the frames' checksums hold)" 0 ""
	run restore --sink "file://$IS" --tenant f -o "$OUT/f.db"
	expect "$1 forged 0xFFFFFFFF: restore refused naming the manifest's inline batch" 1 \
		"batch $2 \(inline batch 0\): commit frame [0-9]+ says the database has 4294967295 pages"
	check "$1 forged 0xFFFFFFFF: ... and published nothing" [ -z "$(ls -A "$OUT")" ]
	run verify --sink "file://$IS"
	expect "$1 forged 0xFFFFFFFF: verify fails naming it, as restore does" 1 \
		"batch $2 \(inline batch 0\): commit frame [0-9]+ says the database has 4294967295 pages"
}
inline_sink 0xFFFFFFFF
forged_refused inline "$m"

echo "# a watermark carrying its manifest (carry_in_watermark = always): damaged or forged"
# The second tail's manifest, its inline batch with it, travels inside the
# watermark (version 3) and is stored nowhere else. A byte flipped in it
# (the watermark's own hash fails), or a hash-consistent forged commit size
# in its frames: restore and verify both refuse, naming the watermark or
# the carried manifest's inline batch, and nothing is published. (A flip
# re-hashed, so that only the carried manifest's SHA-256 fails, and a forged
# predecessor are in test_core_badinput.)
CARRY="$ROOT/carry.ini"
printf '[engine]\ncarry_in_watermark = always\n' >"$CARRY"
carried_sink() { small_sink "$CARRY" "${1:-}"; }
carried_sink
expect "carried: replicate ships" 0 ""
check "carried: the watermark is version 3 and carries a manifest with its batch" python3 -c 'import struct,sys
b=open(sys.argv[1],"rb").read(); sys.exit(not (struct.unpack_from("<I",b,8)[0]==3 and b.find(b"WSMANIF1")>0 and b.find(b"WSBATCH1")>0))' "$IS/f/wm"
check "carried: ... and no manifest object of the second tail (only the first tail's)" \
	[ "$(cd "$IS" && find f -name 'm*' -type f | wc -l)" = 1 ]
python3 -c 'import sys
p=sys.argv[1]; b=bytearray(open(p,"rb").read()); i=b.find(b"WSBATCH1"); b[(i + len(b)) // 2] ^= 1
open(p,"wb").write(b)' "$IS/f/wm"
run restore --sink "file://$IS" --tenant f -o "$OUT/f.db"
expect "carried: a flipped byte: restore refused naming the watermark" 1 "watermark f/wm: watermark hash mismatch"
check "carried: ... and published nothing" [ -z "$(ls -A "$OUT")" ]
run verify --sink "file://$IS"
expect "carried: verify fails naming the watermark, as restore does" 1 "f/wm"
carried_sink 0xFFFFFFFF
forged_refused carried "f/e0-p0/[^ ]*/m0*2-[0-9a-f]+"

echo "# replicate --config: only a regular file, bounded"
for f in /dev/zero "$SENT/fifo" "$SENT/dir"; do
	run replicate --config "$f" --once
	expect "replicate --config $f: refused" 2 "not a regular file"
done

echo "# bad data is reported as bad data, not as configuration or a configured limit"
# (expect fails any exit 1 that says "(invalid configuration)" or
# "(configured limit exceeded)".)
fresh
truncate -s 70000000 "$S/a/wm"
SNAP0=$(snap)
for c in ls verify restore; do
	case $c in
	restore) run restore --sink "$U" --tenant a -o "$OUT/r.db" ;;
	*) run "$c" --sink "$U" ;;
	esac
	expect "a watermark larger than any walship writes: $c says malformed, naming it" 1 \
		"a/wm is larger than .*\(malformed or foreign data\)"
done
fresh
rm "$S/checkpoints/head"
for id in latest "$(cd "$S/checkpoints/committed" && ls | head -1 | sed 's/^0*//; s/-.*//')"; do
	run restore --sink "$U" --tenant a --checkpoint "$id" -o "$OUT/r.db"
	expect "restore --checkpoint $id, the head missing but committed indexes present: says so" 1 \
		"checkpoints/head is missing, but committed checkpoint indexes exist"
done
rm -f "$OUT"/*

echo "# a damaged object under a key an earlier attempt wrote: never taken as this write"
# A tail stopped before its manifest leaves its snapshot parts and batches
# behind; the next tail uploads the same bytes under the same keys (each
# names its content) and takes "already there" for its own earlier write.
# One of them cut short, or with bytes flipped in its middle at the same
# length (a damaged store), must not be named by the next manifest: replicate fails
# naming it, and once the damaged object is gone, ships, and restore is
# equal.
# The tail is stopped at a fault site: builds without them (WS_FAULTS=0,
# tests/CMakeLists.txt) skip this part.
DS="$ROOT/dmg"
DMG_KINDS=('s*/*' 'b*' 'flip s*/*' 'flip b*')
if [ "${WS_FAULTS:-1}" != 1 ]; then
	echo "skipped: no fault sites in this build (WS_FAULTS=${WS_FAULTS:-})"
	DMG_KINDS=()
fi
for kind in "${DMG_KINDS[@]}"; do
	damage=cut
	case $kind in flip*) damage=flipped; kind=${kind#flip } ;; esac
	rm -rf "$DS"
	newdb d.db
	grow d.db 30
	# "crash" is SIGKILL, which the time bound of run would take for a hang.
	set +e
	WS_FAULT=stream.before_manifest_put:1:crash timeout -k 5 "$T" "$WS_BIN" replicate --sink "file://$DS" \
		--once --quiet d=d.db 2>/dev/null
	rc=$?
	set -e
	check "replicate killed before its manifest ($kind)" [ "$rc" = 137 ]
	obj=$(cd "$DS" && find d -path "*/$kind" -type f | sort | head -1)
	if [ -z "$obj" ]; then
		bad "no object $kind left behind by the stopped tail"
		continue
	fi
	if [ "$damage" = cut ]; then
		truncate -s -7 "$DS/$obj"
	else
		python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); m=len(b)//2
for i in range(m, m + 64): b[i] ^= 0xFF
open(p,"wb").write(b)' "$DS/$obj"
	fi
	run replicate --sink "file://$DS" --once --quiet d=d.db
	expect "the next replicate refuses the $damage $kind object, naming it" 1 "$(basename "$obj").*(other bytes|damaged)"
	run restore --sink "file://$DS" --tenant d -o "$OUT/dmg.db"
	expect "nothing was acknowledged on top of it (restore finds no watermark)" 1 "watermark|no such tenant|not found"
	rm "$DS/$obj"
	run replicate --sink "file://$DS" --once --quiet d=d.db
	expect "with the damaged object removed, replicate ships" 0
	run restore --sink "file://$DS" --tenant d -o "$OUT/dmg.db"
	expect "and restore is equal to the source" 0
	check "restored rows equal the source ($kind)" same_dump d.db "$OUT/dmg.db"
	rm -f "$OUT/dmg.db"
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
