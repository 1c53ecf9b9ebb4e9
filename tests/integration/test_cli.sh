#!/usr/bin/env bash
# Integration test of the walship command line tool against a real SQLite
# writer (the sqlite3 CLI) and a file:// sink.
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
# Prints "N passed, M failed" last; exits non-zero on any failure.
#
# The writer runs sqlite3 with no_ckpt_on_close so that closing the CLI does
# not checkpoint and delete the WAL behind walship's back, except in the one
# check that tests exactly that.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

rows() { sq "$1" "SELECT group_concat(x, ',') FROM (SELECT x FROM t ORDER BY x);"; }
newdb() { rm -f "$1" "$1-wal" "$1-shm"; sq "$1" "PRAGMA journal_mode=WAL; CREATE TABLE t(x);" >/dev/null; }
sink_files() { (cd "$1" && find . -type f -not -name '.lock*' | sort); }

cat >"$ROOT/check_json.py" <<'PY'
# check_json.py FILE TENANTS [OUTCOME]: every line of FILE is one JSON object
# with the seed's fields; the tenants named are exactly TENANTS (comma list,
# one object each); every outcome is OUTCOME when given.
import json, sys
path, want = sys.argv[1], sorted(sys.argv[2].split(","))
kind = sys.argv[3] if len(sys.argv) > 3 else None
lines = [l for l in open(path).read().splitlines() if l.strip()]
objs = [json.loads(l) for l in lines]
def fail(msg):
    print("check_json: " + msg, file=sys.stderr)
    sys.exit(1)
for o in objs:
    if not isinstance(o, dict):
        fail("not an object: %r" % (o,))
got = sorted(o.get("tenant") for o in objs)
if got != want:
    fail("tenants %r, want %r" % (got, want))
def uint(o, k):
    v = o.get(k)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        fail("%s: %r is not a non-negative integer in %r" % (k, v, o))
    return v
for o in objs:
    oc = o.get("outcome")
    if oc not in ("empty", "streamed", "restarted", "shed", "fenced"):
        fail("bad outcome %r" % (oc,))
    if kind and oc != kind:
        fail("outcome %r, want %r: %r" % (oc, kind, o))
    if oc == "streamed":
        gk = o.get("generation_key")
        if not isinstance(gk, str) or not gk.startswith(o["tenant"] + "/"):
            fail("generation_key %r" % (gk,))
        first, last = uint(o, "first_frame"), uint(o, "last_frame")
        uint(o, "checkpoint_seq")
        n = uint(o, "frame_count")
        if last and n != last - first + 1:
            fail("frame_count %d != %d - %d + 1" % (n, last, first))
        bp = o.get("backpressure")
        if not isinstance(bp, dict) or bp.get("policy") not in ("block", "throttle", "shed"):
            fail("backpressure %r" % (bp,))
        for k in ("spill_high_water", "frames_shed", "throttle_retries"):
            uint(bp, k)
        rpo = o.get("rpo")
        if not isinstance(rpo, dict):
            fail("rpo %r" % (rpo,))
        uint(rpo, "watermark_age_ms")
    if oc == "fenced":
        for k in ("current_epoch", "our_epoch", "current_pointer_generation", "our_pointer_generation"):
            uint(o, k)
        if "rpo" in o or "backpressure" in o:
            fail("fenced carries rpo/backpressure: %r" % (o,))
PY
json_ok() { python3 "$ROOT/check_json.py" "$@"; }
# jfield FILE TENANT KEY: a top-level field of that tenant's JSON line.
jfield() {
	python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.strip():
        o = json.loads(l)
        if o.get("tenant") == sys.argv[2]:
            print(o[sys.argv[3]]); break
' "$@"
}

SINK="$ROOT/sink"
URL="file://$SINK"

# ---- replicate --once --json --------------------------------------------
echo "# replicate --once --json"
newdb a.db
sq a.db "INSERT INTO t VALUES (1), (2);"
ws replicate --sink "$URL" --once --json a.db
check "first replicate exits 0" [ "$rc" = 0 ]
check "first replicate: one streamed JSON object for tenant a" json_ok out a streamed
gk=$(jfield out a generation_key)
check "generation_key names an object in the sink" [ -f "$SINK/$gk" ]
lf1=$(jfield out a last_frame)

ws replicate --sink "$URL" --once --json a.db
check "replicate with nothing new: exit 0, one object, empty" \
	eval '[ "$rc" = 0 ] && json_ok out a empty'

sq a.db "INSERT INTO t VALUES (3);"
ws replicate --sink "$URL" --once --json a.db
check "replicate after a write: streamed" eval '[ "$rc" = 0 ] && json_ok out a streamed'
check "streamed continues the frame count" \
	[ "$(jfield out a first_frame)" = $((lf1 + 1)) ]
lf2=$(jfield out a last_frame)

# ---- restore ---------------------------------------------------------------
echo "# restore"
ws restore --sink "$URL" --tenant a -o r1.db
check "restore exits 0" [ "$rc" = 0 ]
check "restored .dump equals the source" same_dump a.db r1.db
check "restored database passes integrity_check" [ "$(sq r1.db 'PRAGMA integrity_check;')" = ok ]

cp r1.db r1.before
sq a.db "INSERT INTO t VALUES (4);"
ws replicate --sink "$URL" --once a.db
ws restore --sink "$URL" --tenant a -o r1.db
check "restore onto an existing file without --force: exit 1" [ "$rc" = 1 ]
check "... with a message on stderr" [ -s err ]
check "... and the file is unchanged" cmp -s r1.db r1.before
ws restore --sink "$URL" --tenant a --force -o r1.db
check "restore --force overwrites: exit 0" [ "$rc" = 0 ]
check "restore --force gives the latest state" same_dump a.db r1.db

ws restore --sink "$URL" --tenant nosuch -o nosuch.db
check "restore of an unknown tenant: exit 1, message, no file" \
	eval '[ "$rc" = 1 ] && [ -s err ] && [ ! -e nosuch.db ]'

# --frame: the last commit at or before frame N of the newest generation.
ws restore --sink "$URL" --tenant a --frame "$lf1" -o f1.db
check "restore --frame $lf1 (first shipment) has rows 1,2" \
	eval '[ "$rc" = 0 ] && [ "$(rows f1.db)" = 1,2 ]'
ws restore --sink "$URL" --tenant a --frame "$lf2" -o f2.db
check "restore --frame $lf2 has rows 1,2,3" eval '[ "$rc" = 0 ] && [ "$(rows f2.db)" = 1,2,3 ]'
ws restore --sink "$URL" --tenant a --frame 999999 -o f3.db
check "restore --frame past the end gives the latest (or refuses)" \
	eval '{ [ "$rc" = 0 ] && [ "$(rows f3.db)" = 1,2,3,4 ]; } || { [ "$rc" = 1 ] && [ ! -e f3.db ]; }'

# --time: the last state shipped at or before the time.
echo "# restore --time"
newdb tm.db
sq tm.db "INSERT INTO t VALUES (1);"
ws replicate --sink "$URL" --once tm.db
sleep 1.2
T1=$(python3 -c 'import time; print(repr(time.time()))')
sq tm.db "INSERT INTO t VALUES (2);"
ws replicate --sink "$URL" --once tm.db
sleep 1.2
T2=$(python3 -c 'import time; print(repr(time.time()))')
sq tm.db "INSERT INTO t VALUES (3);"
ws replicate --sink "$URL" --once tm.db
# fmt T STYLE: RFC 3339 renderings of one instant (seconds are floored, so
# each is at or before T and after the previous shipment).
fmt() {
	python3 - "$1" "$2" <<'PY'
import sys, datetime as d
t, style = float(sys.argv[1]), sys.argv[2]
u = d.datetime.fromtimestamp(t, d.timezone.utc)
if style == "Z":
    print(u.strftime("%Y-%m-%dT%H:%M:%SZ"))
elif style == "plus1":
    print(u.astimezone(d.timezone(d.timedelta(hours=1))).strftime("%Y-%m-%dT%H:%M:%S+01:00"))
elif style == "minus0530":
    print(u.astimezone(d.timezone(-d.timedelta(hours=5, minutes=30))).strftime("%Y-%m-%dT%H:%M:%S-05:30"))
elif style == "frac":
    print(u.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (u.microsecond // 1000))
elif style == "frac6plus1":
    print(u.astimezone(d.timezone(d.timedelta(hours=1))).strftime("%Y-%m-%dT%H:%M:%S.%f+01:00"))
PY
}
for style in Z plus1 minus0530 frac frac6plus1; do
	t=$(fmt "$T1" $style)
	rm -f tt.db
	ws restore --sink "$URL" --tenant tm --time "$t" -o tt.db
	check "restore --time $t ($style) has row 1 only" eval '[ "$rc" = 0 ] && [ "$(rows tt.db)" = 1 ]'
	t=$(fmt "$T2" $style)
	rm -f tt.db
	ws restore --sink "$URL" --tenant tm --time "$t" -o tt.db
	check "restore --time $t ($style) has rows 1,2" eval '[ "$rc" = 0 ] && [ "$(rows tt.db)" = 1,2 ]'
done
rm -f tt.db
ws restore --sink "$URL" --tenant tm --time 2001-01-01T00:00:00Z -o tt.db
check "restore --time before the first shipment: exit 1, no file" \
	eval '[ "$rc" = 1 ] && [ -s err ] && [ ! -e tt.db ]'
ws restore --sink "$URL" --tenant tm --time 2999-01-01T00:00:00Z -o tt.db
check "restore --time in the future gives the latest" eval '[ "$rc" = 0 ] && same_dump tm.db tt.db'
rm -f tt.db
for t in 2026-01-01T-1:00:00Z 2026-01-01T00:00:-5Z 2026-01-01T00:00:00+-1:00 2026-01-01T00:+1:00Z; do
	ws restore --sink "$URL" --tenant tm --time "$t" -o tt.db
	check "restore --time $t (a signed field): exit 2, no file" eval '[ "$rc" = 2 ] && [ ! -e tt.db ]'
done
# Second 60 would be read as the next day's first second: not the moment named.
ws restore --sink "$URL" --tenant tm --time 2026-01-01T23:59:60Z -o tt.db
check "restore --time 23:59:60 (a leap second): exit 2, no file" eval '[ "$rc" = 2 ] && [ ! -e tt.db ]'

# A value given twice: the first one was silently dropped (a second
# --config's tenants, another --sink).
printf '[engine]\nsink = file://%s/twice-sink\n[tenant.tw]\npath = %s/tm.db\n' "$ROOT" "$ROOT" >twice.ini
ws replicate --once --sink "$URL" --config twice.ini --config twice.ini
check "replicate --config twice: exit 2, naming it" eval '[ "$rc" = 2 ] && grep -q -- "--config given twice" err'
ws restore --sink "$URL" --sink "$URL" --tenant tm -o tt.db
check "restore --sink twice: exit 2, naming it, no file" \
	eval '[ "$rc" = 2 ] && grep -q -- "--sink given twice" err && [ ! -e tt.db ]'
ws checkpoint --sink "$URL" --epoch 1 --epoch 2
check "checkpoint --epoch twice: exit 2, naming it" eval '[ "$rc" = 2 ] && grep -q -- "--epoch given twice" err'

# A reader of --json that goes away: replicate does not die of SIGPIPE, it
# drains and exits as usual.
newdb pipe.db
sq pipe.db "INSERT INTO t VALUES (1);"
rm -f pipe.fifo && mkfifo pipe.fifo
"$WS_BIN" replicate --sink "file://$ROOT/pipe-sink" --json pipe.db >pipe.fifo 2>pipe.err &
ppid=$!
head -c 1 <pipe.fifo >/dev/null # one byte, then the reader is gone
sq pipe.db "INSERT INTO t VALUES (2);"
sleep 1.5
kill -TERM "$ppid" 2>/dev/null || true
reap "$ppid" pipe.err "replicate whose reader left"
check "replicate --json whose reader left: not killed by SIGPIPE, exits 0 on SIGTERM" [ "$reaped" = 0 ]
ws restore --sink "file://$ROOT/pipe-sink" --tenant pipe -o pipe-r.db
check "... and shipped the commit made after the reader left" eval '[ "$rc" = 0 ] && same_dump pipe.db pipe-r.db'

# A device or a FIFO named as a database: a configuration error, nothing shipped.
ws replicate --sink "file://$ROOT/dev-sink" --once --json z=/dev/zero
check "replicate of /dev/zero as a database: exit 2, saying so" eval '[ "$rc" = 2 ] && grep -q "not a regular file" err'
rm -f not-a-db.fifo && mkfifo not-a-db.fifo
ws replicate --sink "file://$ROOT/dev-sink" --once --json f=not-a-db.fifo
check "replicate of a FIFO as a database: exit 2" [ "$rc" = 2 ]

# ---- tenant names, several tenants ------------------------------------------
echo "# tenants"
mkdir -p dir.v1
newdb dir.v1/b.sqlite3
newdb c.db
sq dir.v1/b.sqlite3 "INSERT INTO t VALUES (10);"
sq c.db "INSERT INTO t VALUES (20);"
ws replicate --sink "$URL" --once --json dir.v1/b.sqlite3 custom=c.db
check "two tenants in one run: exit 0, one object each (b from the file name, custom=PATH)" \
	eval '[ "$rc" = 0 ] && json_ok out b,custom streamed'
sq c.db "INSERT INTO t VALUES (21);"
ws replicate --sink "$URL" --once --json dir.v1/b.sqlite3 custom=c.db
check "second call: one object per tenant again (b empty, custom streamed)" \
	eval '[ "$rc" = 0 ] && json_ok out b,custom && [ "$(jfield out b outcome)" = empty ] && [ "$(jfield out custom outcome)" = streamed ]'
ws restore --sink "$URL" --tenant b -o rb.db
check "tenant b restores" eval '[ "$rc" = 0 ] && same_dump dir.v1/b.sqlite3 rb.db'
ws restore --sink "$URL" --tenant custom -o rc.db
check "tenant custom restores" eval '[ "$rc" = 0 ] && same_dump c.db rc.db'

# ---- ls ----------------------------------------------------------------------
echo "# ls"
ws ls --sink "$URL"
check "ls exits 0" [ "$rc" = 0 ]
for t in a b custom tm; do
	check "ls shows tenant $t" grep -Eq "^${t}[[:space:]]" out
done
ws ls --sink "$URL" --json
check "ls --json: one JSON object per tenant" \
	python3 -c '
import json, sys
objs = [json.loads(l) for l in open("out") if l.strip()]
names = sorted(o["tenant"] for o in objs)
assert names == ["a", "b", "custom", "tm"], names
for o in objs:
    w = o["watermark"]
    assert isinstance(w, dict) and w["last_frame"] >= 1, o
'
ws ls --sink "$URL" --tenant custom --json
check "ls --tenant custom --json shows only custom" \
	eval '[ "$rc" = 0 ] && [ "$(wc -l <out)" = 1 ] && [ "$(jfield out custom tenant)" = custom ]'

ws ls --sink "$URL" --tenant nosuch
check "ls --tenant of a name nothing was shipped under: exit 1, saying so" \
	eval '[ "$rc" = 1 ] && grep -q "nothing stored" err'

mkdir -p "$ROOT/empty-sink"
ws ls --sink "file://$ROOT/empty-sink"
check "ls on an empty sink: exit 0, nothing listed" eval '[ "$rc" = 0 ] && [ ! -s out ]'
ws ls --sink "file://$ROOT/empty-sink" --json
check "ls --json on an empty sink: exit 0, nothing listed" eval '[ "$rc" = 0 ] && [ ! -s out ]'
mkdir -p "$ROOT/empty-sink/ghost"
ws ls --sink "file://$ROOT/empty-sink"
check "ls on a sink with an empty tenant directory: exit 0" [ "$rc" = 0 ]

# ---- verify --------------------------------------------------------------------
echo "# verify"
ws verify --sink "$URL"
check "verify on a good sink: exit 0" [ "$rc" = 0 ]
cp -a "$SINK" "$ROOT/sink-bad"
obj=$(cd "$ROOT/sink-bad" && find a -path 'a/e*/g*/b*' -type f | sort | head -1)
check "the sink holds a batch object for tenant a" [ -n "$obj" ]
python3 - "$ROOT/sink-bad/$obj" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x5a
open(p, "wb").write(b)
PY
ws verify --sink "file://$ROOT/sink-bad"
check "verify after corrupting $obj: exit 1" [ "$rc" = 1 ]
check "verify's stderr names the corrupt object" grep -qF "$obj" err
ws verify --sink "file://$ROOT/sink-bad" --tenant custom
check "verify --tenant custom (untouched) still exits 0" [ "$rc" = 0 ]
ws restore --sink "file://$ROOT/sink-bad" --tenant a -o bad.db
check "restore from the corrupt sink refuses: exit 1, names the object, writes nothing" \
	eval '[ "$rc" = 1 ] && grep -qF "$obj" err && [ ! -e bad.db ]'

# ---- continuous replicate, stopped by a signal ---------------------------------
for sig in TERM INT; do
	echo "# replicate until SIG$sig"
	db=sig$sig.db
	newdb $db
	sq $db "INSERT INTO t VALUES (1), (2);"
	"$WS_BIN" replicate --sink "$URL" --interval-ms 100000 --json $db >sig.out 2>sig.err &
	pid=$!
	for _ in $(seq 100); do [ -s sig.out ] && break; sleep 0.1; done
	check "SIG$sig: the first tail happened" [ -s sig.out ]
	sq $db "INSERT INTO t VALUES (3); INSERT INTO t VALUES (4);"
	sq $db "INSERT INTO t SELECT x + 10 FROM t;"
	sleep 0.3
	check "SIG$sig: replicate is still running before the signal" kill -0 $pid
	kill -$sig $pid
	reap $pid sig.err "replicate until SIG$sig"
	check "SIG$sig: replicate exits 0" [ "$reaped" = 0 ]
	check "SIG$sig: the last tail shipped the late rows (two JSON lines)" \
		eval '[ "$(grep -c . sig.out)" = 2 ] && [ "$(tail -1 sig.out | python3 -c "import json,sys; print(json.load(sys.stdin)[\"outcome\"])")" = streamed ]'
	rm -f sigr.db
	ws restore --sink "$URL" --tenant sig$sig -o sigr.db
	check "SIG$sig: restore shows all rows" \
		eval '[ "$rc" = 0 ] && [ "$(rows sigr.db)" = 1,2,3,4,11,12,13,14 ] && same_dump $db sigr.db'
done

# ---- --json after a failed tail ----------------------------------------------------
# The first tail fails (an injected fault where it has found nothing new,
# before it reads the WAL header again; a real failure there cannot be made
# on demand); the retry finds nothing new to ship. It is printed all the same,
# as a first tail is: the JSON reader sees the tenant recover. (It used to
# stay silent: the failed tail counted as the printed first one.)
echo "# --json after a failed tail"
newdb rec.db
sq rec.db "INSERT INTO t VALUES (1);"
ws replicate --sink "$URL" --once rec.db
WS_FAULT=stream.unheld_empty:1:fail "$WS_BIN" replicate --sink "$URL" --json rec.db >rec.out 2>rec.err &
pid=$!
for _ in $(seq 100); do [ "$(grep -c . rec.out)" -ge 2 ] && break; sleep 0.1; done
kill -TERM $pid
reap $pid rec.err "replicate after a failed tail"
check "the first tail failed (stderr names the injected fault)" grep -q "injected fault after an unheld look" rec.err
# The failed tail is printed too, as an error (never as empty), with its code and message.
check "the failed tail is printed: outcome error, its code and message" \
	eval '[ "$(head -1 rec.out | python3 -c "import json,sys; o = json.load(sys.stdin); print(o[\"outcome\"], o[\"code\"] < 0, \"injected fault\" in o[\"message\"], o[\"deferred\"])")" = "error True True False" ]'
check "the retry that found nothing is printed: then one JSON line, outcome empty" \
	eval '[ "$(grep -c . rec.out)" = 2 ] && [ "$(tail -1 rec.out | python3 -c "import json,sys; print(json.load(sys.stdin)[\"outcome\"])")" = empty ]'

# ---- usage errors: exit 2 and a message ------------------------------------------
echo "# usage errors"
newdb u.db
sq u.db "INSERT INTO t VALUES (1);"
USINK="$ROOT/usink"
usage() {
	local desc=$1
	shift
	ws "$@"
	if [ "$rc" = 2 ] && [ -s err ]; then ok "usage: $desc -> exit 2"; else bad "usage: $desc -> exit 2 (got $rc)"; fi
}
usage "no command"
usage "unknown command" frobnicate --sink "file://$USINK"
usage "unknown option" replicate --sink "file://$USINK" --bogus u.db
usage "option missing its value" replicate --sink "file://$USINK" --once u.db --epoch
usage "replicate without --sink" replicate --once u.db
usage "restore without -o" restore --sink "file://$USINK" --tenant u
usage "restore without --tenant" restore --sink "file://$USINK" -o x.db
usage "restore with a stray argument" restore --sink "file://$USINK" --tenant u -o x.db extra
usage "ls without --sink" ls
usage "verify without --sink" verify
usage "--frame and --time together" restore --sink "file://$USINK" --tenant u --frame 3 --time 2026-01-01T00:00:00Z -o x.db
usage "--frame 0" restore --sink "file://$USINK" --tenant u --frame 0 -o x.db
usage "--frame abc" restore --sink "file://$USINK" --tenant u --frame abc -o x.db
usage "--epoch -1" replicate --sink "file://$USINK" --once --epoch -1 u.db
usage "--epoch abc" replicate --sink "file://$USINK" --once --epoch abc u.db
usage "--epoch 99999999999999999999999 (overflow)" replicate --sink "file://$USINK" --once --epoch 99999999999999999999999 u.db
usage "--epoch 2^63 (printed negative by --json before)" replicate --sink "file://$USINK" --once --epoch 9223372036854775808 u.db
usage "checkpoint --epoch 2^64-1" checkpoint --sink "file://$USINK" --epoch 18446744073709551615
usage "--pointer-generation x1" replicate --sink "file://$USINK" --once --pointer-generation x1 u.db
usage "--interval-ms 0" replicate --sink "file://$USINK" --interval-ms 0 u.db
for t in garbage 2026-13-01T00:00:00Z 2026-01-01T00:00:00 2026-01-01 "2026-01-01T00:00:00+1:00" 2026-01-01T25:00:00Z 2026-01-01T00:00:00.Z; do
	usage "--time '$t'" restore --sink "file://$USINK" --tenant u --time "$t" -o x.db
done
usage "relative sink file://rel" replicate --sink file://rel --once u.db
usage "sink with a host file://host/x" replicate --sink file://host/x --once u.db
usage "unknown scheme ftp://x" replicate --sink ftp://x --once u.db
usage "sink with a query string" replicate --sink "file://$USINK?region=x" --once u.db
usage "bad sink for ls" ls --sink ftp://x
usage "bad sink for restore" restore --sink file://rel --tenant u -o x.db
usage "bad sink for verify" verify --sink "file://$USINK?x=1"
usage "no databases given" replicate --sink "file://$USINK" --once
usage "NAME= with an empty path" replicate --sink "file://$USINK" --once x=
usage "invalid tenant name" replicate --sink "file://$USINK" --once 'bad name!=u.db'
usage "same tenant, two paths" replicate --sink "file://$USINK" --once u=u.db u=a.db
check "usage errors wrote nothing to the sink" eval '[ -z "$(find "$USINK" -type f 2>/dev/null)" ]'
check "usage errors left no restore output" [ ! -e x.db ]

# ---- --config --------------------------------------------------------------------
echo "# --config"
CSINK="$ROOT/csink"
cat >good.ini <<EOF
# a comment
[engine]
sink = file://$CSINK
epoch = 4
pointer_generation = 1
batch_bytes_max = 1MiB
interval_ms = 250

[tenant.x]
path = $ROOT/u.db
policy = block
EOF
ws replicate --config good.ini --once --json
check "good config: exit 0, tenant x streamed" eval '[ "$rc" = 0 ] && json_ok out x streamed'
ws ls --sink "file://$CSINK" --json
check "good config: the watermark carries the config's epoch 4 / pointer generation 1" \
	python3 -c '
import json
o = json.loads(open("out").readline())
assert o["tenant"] == "x" and o["watermark"]["epoch"] == 4 and o["watermark"]["pointer_generation"] == 1, o
'
ws restore --sink "file://$CSINK" --tenant x -o cx.db
check "good config: restore equals the source" eval '[ "$rc" = 0 ] && same_dump u.db cx.db'
ws replicate --config good.ini --sink "file://$ROOT/csink2" --once --json
check "--sink on the command line overrides the config's" \
	eval '[ "$rc" = 0 ] && [ -f "$ROOT/csink2/x/wm" ]'

# badcfg DESC LINE REASON-REGEX: content on stdin; exit 2, stderr has FILE:LINE and the reason.
# (Fed by redirection, not a pipe: a function at the end of a pipe runs in a
# subshell, and its counts would be lost.)
badcfg() {
	local desc=$1 line=$2 reason=$3
	cat >bad.ini
	ws replicate --config bad.ini --once
	if [ "$rc" = 2 ] && grep -q "bad.ini:$line" err && grep -Eqi "$reason" err; then
		ok "config: $desc -> exit 2, bad.ini:$line"
	else
		bad "config: $desc -> exit 2, bad.ini:$line, /$reason/ (got $rc)"
	fi
}
badcfg "unknown section" 3 "unknown section.*storage" < <(printf '[engine]\nsink = file://%s\n[storage]\nkey = v\n' "$CSINK")
badcfg "unknown key" 3 "unknown key.*turbo" < <(printf '[engine]\nsink = file://%s\nturbo = yes\n' "$CSINK")
badcfg "unknown tenant key" 5 "unknown key.*speed" < <(printf '[engine]\nsink = file://%s\n[tenant.x]\npath = %s/u.db\nspeed = 1\n' "$CSINK" "$ROOT")
badcfg "bad policy" 5 "policy.*fastest" < <(printf '[engine]\nsink = file://%s\n[tenant.x]\npath = %s/u.db\npolicy = fastest\n' "$CSINK" "$ROOT")
badcfg "bad integer (negative)" 3 "epoch.*-3" < <(printf '[engine]\nsink = file://%s\nepoch = -3\n' "$CSINK")
badcfg "bad integer (word)" 3 "interval_ms.*soon" < <(printf '[engine]\nsink = file://%s\ninterval_ms = soon\n' "$CSINK")
badcfg "bad size" 4 "batch_bytes_max.*4 parsecs" < <(printf '[engine]\nsink = file://%s\n\nbatch_bytes_max = 4 parsecs\n' "$CSINK")
badcfg "size out of range" 3 "batch_bytes_max" < <(printf '[engine]\nsink = file://%s\nbatch_bytes_max = 1KiB\n' "$CSINK")
badcfg "zero wal_checkpoint_bytes" 3 "wal_checkpoint_bytes" < <(printf '[engine]\nsink = file://%s\nwal_checkpoint_bytes = 0\n' "$CSINK")
badcfg "syntax error (no '=')" 3 "syntax" < <(printf '[engine]\nsink = file://%s\nthis line has no equals sign\n' "$CSINK")
badcfg "syntax error (unclosed section)" 1 "syntax" < <(printf '[engine\nsink = file://%s\n' "$CSINK")

printf '[engine]\nsink = file://%s\n[tenant.y]\npolicy = shed\n' "$CSINK" >nopath.ini
ws replicate --config nopath.ini --once
check "config: tenant without path -> exit 2 naming the file, tenant and cause" \
	eval '[ "$rc" = 2 ] && grep -q "nopath.ini" err && grep -q "tenant.y" err && grep -qi "path" err'
ws replicate --config "$ROOT/missing.ini" --once
check "config: missing file -> exit 2 naming the file" \
	eval '[ "$rc" = 2 ] && grep -q "missing.ini" err'
check "bad configs wrote nothing to the sink" eval '[ -z "$(find "$CSINK" -type f -path "*/y/*" 2>/dev/null)" ]'

# ---- bad WAL, missing database ---------------------------------------------------
echo "# bad input"
GSINK="$ROOT/gsink"
# A -wal of garbage (or shorter than a header) beside a database nobody has
# open: SQLite rebuilds its wal-index from the file, finds no valid header
# and reads the database file alone. So does replicate, saying so.
sqlite3 g.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);" >/dev/null
for size in 20000 11; do
	rm -rf "$GSINK"
	head -c $size /dev/urandom >g.db-wal
	ws replicate --sink "file://$GSINK" --once --json g.db
	check "garbage -wal of $size bytes: exit 0, a warning naming the tenant and the file" \
		eval '[ "$rc" = 0 ] && grep -q "tenant g" err && grep -q "g.db-wal" err && grep -q "empty WAL" err'
	ws restore --sink "file://$GSINK" --tenant g -o "$ROOT/g-r.db"
	check "garbage -wal of $size bytes: the restore is the database file, as SQLite reads it" \
		eval '[ "$rc" = 0 ] && [ "$(sqlite3 "$ROOT/g-r.db" "SELECT group_concat(x) FROM t;")" = 1 ]'
	rm -f "$ROOT/g-r.db"
done
rm -f g.db-wal g.db-shm
# The same header damage under an application that has the WAL open: its
# wal-index still names the frames, which SQLite goes on reading and
# writing. Read as an empty WAL, the restore would miss them: replicate
# refuses, naming the file, until the WAL is whole again.
rm -rf "$GSINK" lv.db lv.db-wal lv.db-shm lv.ready lv.done
python3 - lv.db <<'PY' &
import os, sqlite3, sys, time
db = sys.argv[1]
c = sqlite3.connect(db, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("CREATE TABLE t(x)")
for i in range(5):
    c.execute("INSERT INTO t VALUES (?)", (i,))
with open(db + "-wal", "r+b") as f:
    f.write(bytes(32))
for i in range(5, 10):
    c.execute("INSERT INTO t VALUES (?)", (i,))
open("lv.ready", "w").close()
while not os.path.exists("lv.done"):
    time.sleep(0.05)
c.close()
PY
lvpid=$!
for _ in $(seq 100); do [ -e lv.ready ] && break; sleep 0.1; done
ws replicate --sink "file://$GSINK" --once lv=lv.db
check "a damaged header under an open WAL: exit 1 naming the file, nothing acknowledged" \
	eval '[ "$rc" = 1 ] && grep -q "lv.db-wal" err && [ ! -e "$GSINK/lv/wm" ]'
touch lv.done
wait $lvpid || true
ws replicate --sink "file://$GSINK" --once lv=lv.db
ws restore --sink "file://$GSINK" --tenant lv -o "$ROOT/lv-r.db"
check "once the application closed it (SQLite checkpointed its 10 rows): shipped whole" \
	eval '[ "$rc" = 0 ] && [ "$(sqlite3 "$ROOT/lv-r.db" "SELECT count(*) FROM t;")" = 10 ]'
head -c 20000 /dev/urandom >g.db-wal
ws replicate --sink "file://$GSINK" --once --json g.db u.db
check "garbage -wal beside a good tenant: exit 0, both ship" \
	eval '[ "$rc" = 0 ] && json_ok out g,u streamed && [ -f "$GSINK/u/wm" ] && [ -f "$GSINK/g/wm" ]'

ws replicate --sink "file://$GSINK" --once "$ROOT/nonexistent.db"
check "nonexistent database: exit 1 or 2 with a message naming it" \
	eval '{ [ "$rc" = 1 ] || [ "$rc" = 2 ]; } && grep -q "nonexistent.db" err'
check "nonexistent database was not created" [ ! -e "$ROOT/nonexistent.db" ]

echo "plain" >notadb.db
ws replicate --sink "file://$GSINK" --once notadb.db
check "a file that is not a database: exit 1 or 2 with a message naming it" \
	eval '{ [ "$rc" = 1 ] || [ "$rc" = 2 ]; } && grep -q "notadb" err && [ -z "$(find "$GSINK" -type f -path "*/notadb/*")" ]'

# ---- the application checkpoints and deletes the WAL while replicate is stopped ---
# (a plain sqlite3 CLI closing as the last connection checkpoints the WAL into
# the database file and deletes it). The next replicate must still ship the
# new state: restore must not silently return an older one.
echo "# WAL checkpointed away between runs"
rm -f k.db k.db-wal k.db-shm
sqlite3 k.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);" >/dev/null
ws replicate --sink "$URL" --once k.db
check "k: first replicate exits 0" [ "$rc" = 0 ]
sqlite3 k.db "INSERT INTO t VALUES (2);"
check "k: the writer left no WAL behind" [ ! -s k.db-wal ]
ws replicate --sink "$URL" --once --json k.db
check "k: second replicate exits 0" [ "$rc" = 0 ]
rm -f rk.db
ws restore --sink "$URL" --tenant k -o rk.db
check "k: restore has the row written while replicate was stopped" \
	eval '[ "$rc" = 0 ] && [ "$(rows rk.db)" = 1,2 ]'

echo "# --force-pread: no io_uring at all, the upload thread's reads too"
newdb fp.db
sq fp.db "INSERT INTO t SELECT hex(randomblob(3000)) FROM generate_series(1,2000);"
printf '[engine]\nsink = file://%s/fpsink\n[shard.0]\nbatch_bytes_max = 1MiB\n' "$ROOT" >fp.ini
ws replicate --config fp.ini --once --force-pread fp.db
check "--force-pread: exit 0, and no reader said it uses io_uring" \
	eval '[ "$rc" = 0 ] && ! grep -q "using io_uring" err'
ws restore --sink "file://$ROOT/fpsink" --tenant fp -o fp.r.db
check "--force-pread: restore equals the source" eval '[ "$rc" = 0 ] && [ "$(sq fp.r.db "SELECT count(*) FROM t")" = 2000 ]'

echo "# restore across re-bases: ls TENANT, --time and --frame GENERATION:N in every chain"
# sq keeps the WAL on close; plain sqlite3 checkpoints and deletes it when
# it closes its (the last) connection, and a TRUNCATE checkpoint restarts
# it: with walship down, the next replicate re-bases (each replicate --once
# is a process of its own, which re-bases whenever it cannot prove the WAL
# continues the watermark's). After each replicate: the time, and the live
# chain's newest generation and last frame (ls TENANT, first line).
now_ms() { python3 -c 'import time; print(repr(time.time()))'; }
newdb rb.db
RB=()
: >rb.pos
shiprb() {
	ws replicate --sink "$URL" --once rb.db
	RB+=("$(now_ms)")
	"$WS_BIN" ls --sink "$URL" rb --json | head -1 |
		python3 -c 'import json,sys; g=json.loads(sys.stdin.read()); print(g["generation"], g["last_frame"], g["chain"])' >>rb.pos
	sleep 0.05
}
sq rb.db "INSERT INTO t VALUES (1);"; shiprb
sq rb.db "INSERT INTO t VALUES (2);"; shiprb
sqlite3 rb.db "INSERT INTO t VALUES (3);"
check "rb: the last connection closing removed the WAL" [ ! -e rb.db-wal ]
shiprb
sq rb.db "INSERT INTO t VALUES (4);"; shiprb
sq rb.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
sq rb.db "INSERT INTO t VALUES (5);"; shiprb
ws ls --sink "$URL" rb
nchains=$(awk '$1 ~ /^[0-9]+$/ { n = $1 } END { print n + 1 }' out)
check "ls TENANT: exit 0, a chain for each of the three re-bases at least ($nchains), the first one reached" \
	eval '[ "$rc" = 0 ] && [ "$nchains" -ge 3 ] && grep -q "first chain" out'
check "ls TENANT: times as RFC 3339 UTC with milliseconds" \
	grep -Eq "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z" out
ws ls --sink "$URL" rb --json
cp out rb.json
check "ls TENANT --json: one valid object per generation, newest chain first" \
	python3 -c '
import json, sys
g = [json.loads(l) for l in open("rb.json")]
assert [x["chain"] for x in g] == sorted(x["chain"] for x in g) and g[-1]["chain"] >= 2, g
for a, b in zip(g, g[1:]):
    assert b["last_time_ms"] <= a["first_time_ms"], (a, b)
for x in g:
    assert x["tenant"] == "rb" and x["first_frame"] <= x["last_frame"] and x["first_time_ms"] <= x["last_time_ms"], x
    assert x["first_time"].endswith("Z") and x["start"] in ("rebase", "wal-restart"), x
'
i=0
for t in "${RB[@]}"; do
	i=$((i + 1))
	want=$(seq -s, 1 "$i")
	rm -f rt.db
	ws restore --sink "$URL" --tenant rb --time "$(fmt "$t" frac)" -o rt.db
	check "restore --time at state $i of 5 (each one behind a re-base but the last) has rows $want" \
		eval '[ "$rc" = 0 ] && [ "$(rows rt.db)" = "$want" ]'
done
# The position each state was shipped at, by GENERATION:N.
i=0
while read -r gen last _; do
	i=$((i + 1))
	want=$(seq -s, 1 "$i")
	[ "$last" -gt 0 ] || continue
	rm -f rf.db
	ws restore --sink "$URL" --tenant rb --frame "$gen:$last" -o rf.db
	check "restore --frame $gen:$last (state $i) has rows $want" \
		eval '[ "$rc" = 0 ] && [ "$(rows rf.db)" = "$want" ]'
done <rb.pos
ws restore --sink "$URL" --tenant rb --time 2001-01-01T00:00:00Z -o rf2.db
check "restore --time before every chain: exit 1, the oldest state's time in RFC 3339, no raw ms" \
	eval '[ "$rc" = 1 ] && grep -Eq "oldest stored state is from [0-9-]{10}T[0-9:]{8}\.[0-9]{3}Z" err && ! grep -q " ms)" err && [ ! -e rf2.db ]'
ws restore --sink "$URL" --tenant rb --frame g00000000-0000000000000000:3 -o rf2.db
check "restore --frame of a generation no chain holds: exit 1, named" \
	eval '[ "$rc" = 1 ] && grep -q "g00000000-0000000000000000" err && [ ! -e rf2.db ]'
for f in zz:3 g0:3 g00000000-000000000000000:3 g00000000-0000000000000000:0 :3; do
	ws restore --sink "$URL" --tenant rb --frame "$f" -o rf2.db
	check "restore --frame $f: exit 2" eval '[ "$rc" = 2 ] && [ ! -e rf2.db ]'
done
ws ls --sink "$URL" --tenant rb rb
check "ls with --tenant and TENANT: exit 2" [ "$rc" = 2 ]
ws ls --sink "$URL" nosuch
check "ls TENANT of a tenant nothing was shipped under: exit 1" eval '[ "$rc" = 1 ] && grep -q nosuch err'
ws verify --sink "$URL" --tenant rb
check "verify of the tenant with its chains: exit 0" [ "$rc" = 0 ]

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
