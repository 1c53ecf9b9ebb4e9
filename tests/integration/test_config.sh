#!/usr/bin/env bash
# `walship replicate --config FILE`: the per-shard INI file (docs/CLI.md
# "Configuration file"). Every kind of bad file exits 2 with
# "config FILE:LINE: reason" and writes nothing; good files with two shards,
# tenants placed by config and by hash, and policy overrides replicate --once
# and restore equal to their sources.
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

newdb() { rm -f "$1" "$1-wal" "$1-shm"; sq "$1" "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v TEXT);" >/dev/null; }
# jget FILE TENANT KEY[.KEY]: a field of that tenant's JSON line ("-" if none).
jget() {
	python3 - "$@" <<'PY'
import json, sys
path, tenant, keys = sys.argv[1], sys.argv[2], sys.argv[3].split(".")
for line in filter(str.strip, open(path)):
    v = json.loads(line)
    if v.get("tenant") != tenant:
        continue
    for k in keys:
        v = v.get(k, {}) if isinstance(v, dict) else {}
    print(v if v != {} else "-")
    break
else:
    print("-")
PY
}

BSINK="$ROOT/bsink"
newdb u.db
sq u.db "INSERT INTO t(v) VALUES ('u');"
# A CPU this process may run on, and one it may not (for core = ...).
CPU_OK=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
CPU_BAD=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)) + 1)')

# badcfg DESC LINE REGEX [ARGS...]: the file on stdin; replicate --once
# --config bad.ini exits 2, stderr has "config bad.ini:LINE: " and matches
# REGEX (case-insensitive). ARGS go before the config.
badcfg() {
	local desc=$1 line=$2 reason=$3
	shift 3
	cat >bad.ini
	ws replicate "$@" --config bad.ini --once
	if [ "$rc" = 2 ] && grep -qF "config bad.ini:$line: " err && grep -Eqi -- "$reason" err; then
		ok "bad config: $desc -> exit 2, bad.ini:$line"
	else
		bad "bad config: $desc -> exit 2, bad.ini:$line, /$reason/ (got $rc)"
	fi
}
E="[engine]
sink = file://$BSINK"

echo "# sections"
badcfg "unknown section" 3 'unknown section \[storage\]' <<EOF
$E
[storage]
key = v
EOF
badcfg "unknown section without keys" 3 'unknown section \[tenants\]' <<EOF
$E
[tenants]
EOF
badcfg "duplicate [engine]" 4 'duplicate section \[engine\].*line 1' <<EOF
$E
shards = 2
[engine]
epoch = 1
EOF
badcfg "duplicate [shard.0]" 6 'duplicate section \[shard\.0\].*line 4' <<EOF
$E
shards = 2
[shard.0]
policy = shed
[shard.0]
policy = block
EOF
badcfg "duplicate [tenant.x]" 6 'duplicate section \[tenant\.x\].*line 3' <<EOF
$E
[tenant.x]
path = $ROOT/u.db
[tenant.y]
[tenant.x]
path = $ROOT/u.db
EOF
badcfg "text after a section header" 3 "unexpected 'x'" <<EOF
$E
[shard.0]x
EOF
badcfg "key before any section" 1 'outside any section' <<EOF
epoch = 1
$E
EOF
badcfg "[shard.] without an index" 3 'shard index' <<EOF
$E
[shard.]
EOF
badcfg "[shard.x]" 3 'shard index' <<EOF
$E
[shard.x]
EOF
badcfg "[shard.01] (not canonical)" 4 'shard index' <<EOF
$E
shards = 2
[shard.01]
EOF
badcfg "[shard.-1]" 3 'shard index' <<EOF
$E
[shard.-1]
EOF
badcfg "[shard.256] (past the maximum)" 3 'maximum of 256' <<EOF
$E
[shard.256]
EOF
badcfg "[shard.1] without shards in [engine] (default 1)" 3 'beyond the engine.s 1 shard .the default' <<EOF
$E
[shard.1]
policy = shed
EOF
badcfg "[shard.2] with shards = 2" 6 'beyond the engine.s 2 shards' <<EOF
$E
shards = 2
[shard.0]
[shard.1]
[shard.2]
EOF
badcfg "[shard.1] with --shards 1 overriding shards = 2" 5 '\[shard\.1\].*--shards' --shards 1 <<EOF
$E
shards = 2
[shard.0]
[shard.1]
EOF
badcfg "[tenant.] without a name" 3 'tenant name' <<EOF
$E
[tenant.]
path = $ROOT/u.db
EOF
badcfg "tenant name with a '/'" 3 'tenant name' <<EOF
$E
[tenant.a/b]
path = $ROOT/u.db
EOF
badcfg "tenant name with a space" 3 'tenant name' <<EOF
$E
[tenant.a b]
path = $ROOT/u.db
EOF
long=$(printf 'n%.0s' $(seq 128))
badcfg "tenant name of 128 bytes" 3 'tenant name' <<EOF
$E
[tenant.$long]
path = $ROOT/u.db
EOF
badcfg "tenant without a path" 3 '\[tenant\.nopath\] has no path' <<EOF
$E
[tenant.nopath]
policy = shed
EOF

echo "# keys and values"
badcfg "unknown [engine] key" 3 "unknown key 'turbo'" <<EOF
$E
turbo = yes
EOF
badcfg "unknown [shard.0] key" 4 "\[shard\.0\]: unknown key 'speed'" <<EOF
$E
[shard.0]
speed = 11
EOF
badcfg "unknown [tenant.x] key" 5 "unknown key 'speed'" <<EOF
$E
[tenant.x]
path = $ROOT/u.db
speed = 1
EOF
badcfg "unknown [s3] key" 4 "unknown key 'access_key'" <<EOF
$E
[s3]
access_key = x
EOF
badcfg "core in [engine]" 3 'core is per shard' <<EOF
$E
core = 0
EOF
badcfg "duplicate [engine] key" 4 'shards: set twice .first at line 3' <<EOF
$E
shards = 2
shards = 2
EOF
badcfg "duplicate [shard.0] key" 5 'ring_bytes: set twice .first at line 4' <<EOF
$E
[shard.0]
ring_bytes = 64MiB
ring_bytes = 32MiB
EOF
badcfg "duplicate [tenant.x] key" 5 'path: set twice .first at line 4' <<EOF
$E
[tenant.x]
path = $ROOT/u.db
path = $ROOT/u.db
EOF
badcfg "interval_ms and batch_age_ms_max together" 4 'batch_age_ms_max set twice.*older name' <<EOF
$E
batch_age_ms_max = 500
interval_ms = 250
EOF
badcfg "empty value" 2 'sink: empty value' <<EOF
[engine]
sink =
EOF
badcfg "empty key" 3 'key is missing' <<EOF
$E
= 3
EOF
badcfg "syntax error (no '=')" 3 'syntax error' <<EOF
$E
this line has no equals sign
EOF
badcfg "key: value (inih's other separator, not walship's format)" 2 "syntax error.*':' does not separate" <<EOF
[engine]
sink: file://$BSINK
EOF
badcfg "syntax error (unclosed section)" 1 'syntax error' <<EOF
[engine
sink = file://$BSINK
EOF
longpath=$(printf 'p%.0s' $(seq 200))
badcfg "line longer than inih's buffer" 4 'line longer than' <<EOF
$E
[tenant.x]
path = /$longpath
EOF
printf '[engine]\nsink = file://%s\nepoch = 1\0\n' "$BSINK" >nul.ini
ws replicate --config nul.ini --once
check "bad config: a NUL byte -> exit 2, nul.ini:3" eval '[ "$rc" = 2 ] && grep -qF "config nul.ini:3: " err'

# Numbers: words, signs, fractions, trailing garbage, overflow, range.
while IFS='|' read -r key value regex; do
	badcfg "[engine] $key = $value" 3 "$regex" <<EOF
$E
$key = $value
EOF
done <<'EOF'
shards|0|shards: '0' must be an integer 1..256
shards|257|shards: '257'
shards|-1|shards: '-1'
shards|2x|shards: '2x'
shards| 2 2|shards: '2 2'
epoch|-3|epoch: '-3'
epoch|1.5|epoch: '1.5'
epoch|+1|epoch: '\+1'
epoch|0x10|epoch: '0x10'
epoch|18446744073709551616|epoch: '18446744073709551616'
epoch|9223372036854775808|epoch: '9223372036854775808' is not an integer 0..9223372036854775807
pointer_generation|x1|pointer_generation: 'x1'
interval_ms|soon|interval_ms: 'soon'
interval_ms|0|interval_ms: '0'
interval_ms|86400001|interval_ms: '86400001'
wal_checkpoint_bytes|0|wal_checkpoint_bytes: '0'
wal_checkpoint_bytes|sometimes|wal_checkpoint_bytes: 'sometimes'
wal_checkpoint_bytes|99999999999GiB|wal_checkpoint_bytes: '99999999999GiB'
metrics_addr|9464|metrics_addr: '9464'
metrics_addr|:9464|metrics_addr: ':9464'
metrics_addr|127.0.0.1:65536|metrics_addr: '127.0.0.1:65536'
metrics_addr|127.0.0.1:http|metrics_addr: '127.0.0.1:http'
metrics_addr|::1:9464|brackets
policy|fastest|policy: 'fastest'
batch_bytes_max|4 parsecs|batch_bytes_max: '4 parsecs'
batch_bytes_max|1KiB|batch_bytes_max: '1KiB'
EOF
while IFS='|' read -r key value regex; do
	badcfg "[shard.0] $key = $value" 4 "$regex" <<EOF
$E
[shard.0]
$key = $value
EOF
done <<EOF
core|-2|core: '-2'
core|abc|core: 'abc'
core|1.0|core: '1.0'
core|99999|core: '99999'
core|$CPU_BAD|CPU $CPU_BAD is not one this process may run on
ring_bytes|64MiBs|ring_bytes: '64MiBs'
ring_bytes|64 MiB|ring_bytes: '64 MiB'
ring_bytes|99999999999999GiB|ring_bytes: '99999999999999GiB'
ring_bytes|65GiB|ring_bytes: '65GiB'
ring_bytes|-64MiB|ring_bytes: '-64MiB'
batch_bytes_max|65655|batch_bytes_max: '65655' must be a size from 65656
batch_bytes_max|2GiB|batch_bytes_max: '2GiB'
batch_frames_max|0|batch_frames_max: '0'
batch_frames_max|4294967296|batch_frames_max: '4294967296'
batch_frames_max|12 frames|batch_frames_max: '12 frames'
batch_age_ms_max|86400001|batch_age_ms_max: '86400001'
batch_age_ms_max|1s|batch_age_ms_max: '1s'
policy|fastest|policy: 'fastest' is not block, throttle or shed
policy|Block|policy: 'Block'
uploads_in_flight|0|uploads_in_flight: '0'
uploads_in_flight|65|uploads_in_flight: '65'
tails_in_flight|0|tails_in_flight: '0' must be an integer 1..64
tails_in_flight|65|tails_in_flight: '65'
tails_in_flight|four|tails_in_flight: 'four'
retry_attempts_max|0|retry_attempts_max: '0'
retry_deadline_ms|0|retry_deadline_ms: '0'
sqpoll|maybe|sqpoll: 'maybe'
adaptive|maybe|adaptive: 'maybe' is not on, off
adaptive|2|adaptive: '2'
throttle_age_ms_max|86400001|throttle_age_ms_max: '86400001' must be an integer 0..86400000
throttle_age_ms_max|1.5s|throttle_age_ms_max: '1.5s'
key_write_interval_ms|-1|key_write_interval_ms: '-1'
key_write_interval_ms|1000ms|key_write_interval_ms: '1000ms'
tail_ms_max|99999999999999999999|tail_ms_max: '99999999999999999999'
tail_ms_max|half|tail_ms_max: 'half'
inline_batch_bytes_max|4095|inline_batch_bytes_max: '4095' must be a size from 4096 bytes to 16 MiB .* or off
inline_batch_bytes_max|17MiB|inline_batch_bytes_max: '17MiB' must be a size from 4096 bytes to 16 MiB
inline_batch_bytes_max|never|inline_batch_bytes_max: 'never'
inline_batch_bytes_max|2GiB|inline_batch_bytes_max: '2GiB'
carry_in_watermark|yes|carry_in_watermark: 'yes' is not pressed, always or never
carry_in_watermark|Always|carry_in_watermark: 'Always'
carry_in_watermark|throttled|carry_in_watermark: 'throttled'
slots|auto|slots: 'auto' is not on, off
slots|2|slots: '2'
hint_slots|0|hint_slots: '0' must be an integer 1..1024
hint_slots|1025|hint_slots: '1025' must be an integer 1..1024
hint_slots|thirty|hint_slots: 'thirty'
sqpoll|2|sqpoll: '2'
EOF
while IFS='|' read -r key value regex; do
	badcfg "[tenant.x] $key = $value" 5 "$regex" <<EOF
$E
[tenant.x]
path = $ROOT/u.db
$key = $value
EOF
done <<'EOF'
shard|abc|shard: 'abc'
shard|-1|shard: '-1'
shard|1x|shard: '1x'
shard|256|shard: '256'
policy|fastest|policy: 'fastest'
EOF

echo "# what spans sections"
badcfg "ring_bytes below two batches ([shard.0])" 5 'ring_bytes 4194304 must hold at least two batches' <<EOF
$E
[shard.0]
batch_bytes_max = 4MiB
ring_bytes = 4MiB
EOF
badcfg "ring_bytes below two batches (batch_bytes_max in [engine])" 3 'shard\.0.*at least two batches' <<EOF
$E
batch_bytes_max = 1GiB
EOF
badcfg "ring_bytes below two batches (only batch_bytes_max in the shard)" 5 'shard\.1.*at least two batches' <<EOF
$E
shards = 2
[shard.1]
batch_bytes_max = 40MiB
EOF
badcfg "tenant on a shard past the count" 6 '\[tenant\.x\] shard: 2 is beyond the engine.s 2 shards' <<EOF
$E
shards = 2
[tenant.x]
path = $ROOT/u.db
shard = 2
EOF
badcfg "tenant on shard 1 with --shards 1" 5 'shard: 1 is beyond' --shards 1 <<EOF
$E
[tenant.x]
path = $ROOT/u.db
shard = 1
EOF
badcfg "two shards pinned to one core" 8 "CPU $CPU_OK is already shard 0's" <<EOF
$E
shards = 2
[shard.0]
core = $CPU_OK
[shard.1]
policy = shed
core = $CPU_OK
EOF
badcfg "rings larger than half the machine's memory" 4 'more than half of this machine.s memory' <<EOF
$E
shards = 100
ring_bytes = 64GiB
EOF
# A shard that compresses holds a seal buffer per slot (about its ring
# again): one ring of 30% of memory fits alone, not with its seal buffers.
RING30=$(( $(getconf _PHYS_PAGES) * $(getconf PAGESIZE) * 3 / 10 / 1048576 ))MiB
badcfg "a compressing shard's ring and seal buffers over half the memory" 3 'seal buffers.*more than half of this machine.s memory' <<EOF
$E
ring_bytes = $RING30
compression = zstd
EOF

ws replicate --config "$ROOT/missing.ini" --once
check "missing config file -> exit 2 naming it" eval '[ "$rc" = 2 ] && grep -q "config $ROOT/missing.ini: cannot open" err'
cat >dup.ini <<EOF
$E
[tenant.u]
path = $ROOT/other.db
EOF
ws replicate --config dup.ini --once u=u.db
check "tenant in the file and on the command line with different paths -> exit 2" \
	eval '[ "$rc" = 2 ] && grep -q "given twice" err'
check "bad configs wrote nothing to the sink" eval '[ -z "$(find "$BSINK" -type f 2>/dev/null)" ]'

# ---- good configs ----------------------------------------------------------------
echo "# good configs"
SINK="$ROOT/sink"
newdb orders.db
newdb users.db
newdb audit.db
newdb cli.db
for db in orders users audit cli; do
	for i in 1 2 3; do sq $db.db "INSERT INTO t(v) VALUES ('$db $i');"; done
done
# The issue's example, with a live sink and paths, comments as written there.
cat >good.ini <<EOF
# walship per-shard configuration
[engine]
sink = file://$SINK
shards = 2
metrics_addr = 127.0.0.1:0
epoch = 3
pointer_generation = 2
wal_checkpoint_bytes = off

[shard.0]
core = $CPU_OK
ring_bytes = 64MiB
batch_bytes_max = 4MiB
batch_frames_max = 4096
batch_age_ms_max = 1000
policy = block            # block | throttle | shed
uploads_in_flight = 8
tails_in_flight = 4
retry_attempts_max = 10
retry_deadline_ms = 30000
sqpoll = off

[shard.1]   ; only what differs from the defaults
ring_bytes = 128MiB
tails_in_flight = 1
batch_bytes_max = 65656
policy = throttle
sqpoll = no

[tenant.orders]
path = $ROOT/orders.db
shard = 1
policy = shed

[tenant.users]
path = $ROOT/users.db
shard = 1

[tenant.audit]
path = $ROOT/audit.db
EOF
ws replicate --config good.ini --once --json cli=cli.db
check "good config: exit 0" [ "$rc" = 0 ]
for tn in orders users audit cli; do
	check "good config: $tn streamed once" eval '[ "$(jget out $tn outcome)" = streamed ] && [ "$(grep -c "\"tenant\":\"$tn\"" out)" = 1 ]'
done
check "good config: orders is on shard 1 (config)" grep -q "tenant orders: .*(shard 1," err
check "good config: users is on shard 1 (config)" grep -q "tenant users: .*(shard 1," err
check "good config: audit and cli are placed by hash on shard 0 or 1" \
	eval 'grep -Eq "tenant audit: .*\(shard [01]," err && grep -Eq "tenant cli: .*\(shard [01]," err'
check "good config: orders uses its own policy (shed)" [ "$(jget out orders backpressure.policy)" = shed ]
check "good config: users uses shard 1's policy (throttle)" [ "$(jget out users backpressure.policy)" = throttle ]
for tn in audit cli; do
	sh=$(sed -n "s/.*tenant $tn: .*(shard \([01]\),.*/\1/p" err)
	want=block
	[ "$sh" = 1 ] && want=throttle
	check "good config: $tn on shard $sh has that shard's policy ($want)" \
		[ "$(jget out $tn backpressure.policy)" = $want ]
done
ws ls --sink "file://$SINK" --json
check "good config: watermarks carry epoch 3 / pointer generation 2" \
	python3 -c '
import json
objs = [json.loads(l) for l in open("out") if l.strip()]
assert sorted(o["tenant"] for o in objs) == ["audit", "cli", "orders", "users"], objs
for o in objs:
    assert o["watermark"]["epoch"] == 3 and o["watermark"]["pointer_generation"] == 2, o
'
for tn in orders users audit cli; do
	rm -f r.$tn.db
	ws restore --sink "file://$SINK" --tenant $tn -o r.$tn.db
	check "good config: $tn restores equal to its source" eval '[ "$rc" = 0 ] && same_dump $tn.db r.$tn.db'
done

# More writes, then the command line overriding the file: --shards 2 is the
# same count, --policy shed is the default only where a shard sets none.
for db in orders users audit cli; do sq $db.db "INSERT INTO t(v) VALUES ('$db again');"; done
cat >good2.ini <<EOF
[engine]
sink = file://$ROOT/elsewhere
shards = 1
policy = throttle
interval_ms = 250
batch_bytes_max = 64KiB   # 65536: below one 64 KiB frame and a batch header
EOF
ws replicate --config good2.ini --once --json --shards 2 orders=orders.db users=users.db audit.db cli.db
check "bad config: [engine] batch_bytes_max = 64KiB -> exit 2 naming line 6" \
	eval '[ "$rc" = 2 ] && grep -qF "config good2.ini:6: " err'
sed -i 's/^batch_bytes_max = .*/batch_bytes_max = 128KiB/' good2.ini
cat >>good2.ini <<EOF
[shard.1]
policy = block
ring_bytes = 262144
EOF
ws replicate --config good2.ini --sink "file://$SINK" --epoch 3 --pointer-generation 2 --shards 2 --policy shed \
	--once --json orders=orders.db users=users.db audit.db cli.db
check "command line over the file (--sink, --shards, --policy): exit 0" [ "$rc" = 0 ]
cp out rep.out
cp err rep.err
for tn in orders users audit cli; do
	sh=$(sed -n "s/.*tenant $tn: .*(shard \([01]\),.*/\1/p" rep.err)
	want=shed
	[ "$sh" = 1 ] && want=block
	check "... $tn streamed on shard $sh with policy $want (--policy where the shard sets none)" \
		eval '[ "$(jget rep.out $tn outcome)" = streamed ] && [ "$(jget rep.out $tn backpressure.policy)" = $want ]'
	rm -f r.$tn.db
	ws restore --sink "file://$SINK" --tenant $tn -o r.$tn.db
	check "... $tn restores equal to its source" eval '[ "$rc" = 0 ] && same_dump $tn.db r.$tn.db'
done
check "... nothing went to the file's own sink" [ ! -e "$ROOT/elsewhere" ]

# carry_in_watermark = always: the second run's small tail writes one
# object, its watermark carrying the manifest (ls says so), which restores
# and verifies; never: the next run stores it and links to it.
CSINK="$ROOT/carrysink"
newdb carry.db
sq carry.db "INSERT INTO t(v) VALUES ('c 1');"
printf '[engine]\nsink = file://%s\ncarry_in_watermark = always\n' "$CSINK" >carry.ini
ws replicate --config carry.ini --once carry=carry.db
check "carry_in_watermark = always: first run exits 0" [ "$rc" = 0 ]
sq carry.db "INSERT INTO t(v) VALUES ('c 2');"
nobj=$(find "$CSINK/carry" -type f ! -name '.*' | wc -l)
ws replicate --config carry.ini --once --json carry=carry.db
nobj2=$(find "$CSINK/carry" -type f ! -name '.*' | wc -l)
check "carry_in_watermark = always: second run streamed and wrote no object but its watermark" \
	eval '[ "$rc" = 0 ] && [ "$(jget out carry outcome)" = streamed ] && [ "$nobj2" = "$nobj" ]'
ws ls --sink "file://$CSINK" --json
check "... ls --json: the watermark carries its manifest" \
	python3 -c 'import json; o = json.loads(open("out").readline()); assert o["watermark"]["carried"] is True, o'
ws ls --sink "file://$CSINK"
check "... ls: manifest=carried" grep -q "^carry .* manifest=carried$" out
ws verify --sink "file://$CSINK"
check "... verify passes" [ "$rc" = 0 ]
rm -f r.carry.db
ws restore --sink "file://$CSINK" --tenant carry -o r.carry.db
check "... restores equal to its source" eval '[ "$rc" = 0 ] && same_dump carry.db r.carry.db'
sq carry.db "INSERT INTO t(v) VALUES ('c 3');"
sed -i 's/^carry_in_watermark = .*/carry_in_watermark = never/' carry.ini
ws replicate --config carry.ini --once carry=carry.db
ws ls --sink "file://$CSINK" --json
check "carry_in_watermark = never: the next run stores it (not carried)" \
	eval '[ "$rc" = 0 ] && python3 -c "import json; o = json.loads(open(\"out\").readline()); assert o[\"watermark\"][\"carried\"] is False, o"'
rm -f r.carry.db
ws restore --sink "file://$CSINK" --tenant carry -o r.carry.db
check "... restores equal to its source" eval '[ "$rc" = 0 ] && same_dump carry.db r.carry.db'
ws verify --sink "file://$CSINK"
check "... verify passes" [ "$rc" = 0 ]

# slots = on (stage 1): two runs ship in slots (the second adopting the
# lane the first opened), restore and verify read them, ls refuses the
# tenant, and a run with slots = off refuses it too.
SSINK="$ROOT/slotsink"
newdb slot.db
sq slot.db "INSERT INTO t(v) VALUES ('s 1');"
printf '[engine]\nsink = file://%s\nslots = on\nhint_slots = 2\n' "$SSINK" >slots.ini
ws replicate --config slots.ini --once slot=slot.db
check "slots = on: first run exits 0" [ "$rc" = 0 ]
sq slot.db "INSERT INTO t(v) VALUES ('s 2');"
ws replicate --config slots.ini --once --json slot=slot.db
check "slots = on: second run streamed" eval '[ "$rc" = 0 ] && [ "$(jget out slot outcome)" = streamed ]'
nlanes=$(find "$SSINK/slot" -type d -name 'l*' | wc -l)
check "... one lane, adopted by the second run (no close, no second lane)" [ "$nlanes" = 1 ]
rm -f r.slot.db
ws restore --sink "file://$SSINK" --tenant slot -o r.slot.db
check "... restores equal to its source" eval '[ "$rc" = 0 ] && same_dump slot.db r.slot.db'
ws verify --sink "file://$SSINK"
check "... verify passes" [ "$rc" = 0 ]
ws ls --sink "file://$SSINK"
check "... ls refuses the tenant (stage 1)" eval '[ "$rc" != 0 ] && grep -q "uses manifest slots" err'
sq slot.db "INSERT INTO t(v) VALUES ('s 3');"
sed -i 's/^slots = .*/slots = off/' slots.ini
ws replicate --config slots.ini --once slot=slot.db
check "slots = off over a slot tenant: refused" eval '[ "$rc" != 0 ] && grep -q "uses manifest slots" err'

# A config holding only [s3] and shard tuning, tenants and sink from the
# command line; sizes in every accepted form.
cat >tuning.ini <<EOF
; tuning only
[engine]
shards = 2
wal_checkpoint_bytes = 1GiB
batch_frames_max = 64
[shard.0]
ring_bytes = 131312
batch_bytes_max = 65656
[shard.1]
ring_bytes = 1M
batch_bytes_max = 512K
sqpoll = false
EOF
sq users.db "INSERT INTO t(v) SELECT hex(randomblob(3000)) FROM (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3);"
ws replicate --config tuning.ini --sink "file://$ROOT/tsink" --once --json users.db
check "tuning-only config with tenants on the command line: exit 0, streamed" \
	eval '[ "$rc" = 0 ] && [ "$(jget out users outcome)" = streamed ]'
ws restore --sink "file://$ROOT/tsink" --tenant users -o r.tuning.db
check "... restores equal to its source" eval '[ "$rc" = 0 ] && same_dump users.db r.tuning.db'

echo "# hostile config files and values (issue 12)"
# What is not a regular file is refused at once, never read: /dev/zero grew
# a line buffer without bound, a FIFO blocked the open.
mkfifo cfg.fifo
for f in /dev/zero cfg.fifo "$ROOT"; do
	set +e
	timeout 10 "$WS_BIN" replicate --config "$f" --once >out 2>err
	rc=$?
	set -e
	check "--config $f: exit 2, 'not a regular file', no hang" \
		eval '[ "$rc" = 2 ] && grep -q "config $f: not a regular file" err'
done
head -c 100000 /dev/zero | tr '\0' 'x' >long.ini
set +e
timeout 10 "$WS_BIN" replicate --config long.ini --once >out 2>err
rc=$?
set -e
check "a 100000-byte line: exit 2 at long.ini:1, cut off while read" \
	eval '[ "$rc" = 2 ] && grep -q "config long.ini:1: line longer than 4096 bytes" err'
for tn in .x checkpoints .. _x; do
	badcfg "reserved or invalid tenant name [tenant.$tn]" 3 "not starting with '.' or '_' and not 'checkpoints'" <<EOF
$E
[tenant.$tn]
path = $ROOT/u.db
EOF
done
ws replicate --sink "file://$BSINK" --once "checkpoints=$ROOT/u.db"
check "tenant 'checkpoints' on the command line: exit 2" eval '[ "$rc" = 2 ] && grep -q "checkpoints" err'
badcfg "metrics_addr that does not resolve" 3 "metrics_addr: 'no-such-host.invalid:9000': the host no-such-host.invalid does not resolve" <<EOF
$E
metrics_addr = no-such-host.invalid:9000
EOF
badcfg "two tenants on one database" 7 'tenant y: database .*u.db is also tenant x' <<EOF
$E
[tenant.x]
path = $ROOT/u.db
[tenant.y]
# the same file by another name
path = $ROOT/./u.db
EOF
ws replicate --sink "file://$BSINK" --once "a=$ROOT/u.db" "b=u.db"
check "two command-line tenants on one database: exit 2" eval '[ "$rc" = 2 ] && grep -q "is also tenant a" err'
# 10,000 tenants on one path: refused at parse time.
python3 -c '
import sys
print("[engine]\nsink = file://" + sys.argv[1])
for i in range(10000):
    print("[tenant.t%d]\npath = %s" % (i, sys.argv[2]))' "$BSINK.many" "$ROOT/u.db" >many.ini
set +e
timeout 60 "$WS_BIN" replicate --config many.ini --once >out 2>err
rc=$?
set -e
check "10,000 tenants on one database: exit 2 at a path line" \
	eval '[ "$rc" = 2 ] && grep -q "config many.ini:[0-9]*: tenant t.*is also tenant t" err'
check "... and nothing was written to the sink" [ ! -e "$BSINK.many" ]
# shards: each holds one inotify instance; past the kernel's per-user limit
# a shard failed to start mid-way. (256, the documented maximum, exceeds the
# default limit of 128.)
lim=$(cat /proc/sys/fs/inotify/max_user_instances)
if [ "$lim" -lt 256 ]; then
	badcfg "shards = 256 beyond fs.inotify.max_user_instances ($lim)" 3 "256 shards need 256 inotify instances.*max_user_instances of $lim" <<EOF
$E
shards = 256
EOF
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
