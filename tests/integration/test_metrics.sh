#!/usr/bin/env bash
# `walship replicate --metrics-addr HOST:PORT`: GET /metrics in Prometheus
# text format (libmicrohttpd) while replicate runs against a live SQLite
# writer. Checks the metric families, that a tenant's shipped-frame counter
# grows as the writer writes, 404/405 elsewhere, that it listens on the given
# address only, a busy port, [engine] metrics_addr in --config, and that
# SIGTERM still exits 0 and restores equal.
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl not found"; exit 1; }

newdb() { rm -f "$1" "$1-wal" "$1-shm"; sq "$1" "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v BLOB);" >/dev/null; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# scrape URL FILE: GET URL into FILE; prints the HTTP status (000: no connection).
scrape() { curl -s -m 5 -o "$2" -w '%{http_code}' "$1" || true; }
# sample FILE FAMILY-SUBSTRING TENANT: the value of the first sample whose
# name contains FAMILY-SUBSTRING and whose labels have tenant="TENANT".
sample() {
	python3 - "$@" <<'PY'
import re, sys
path, fam, tenant = sys.argv[1:4]
for l in open(path):
    m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)', l)
    if m and fam in m.group(1) and re.search(r'(^|,)tenant="%s"' % re.escape(tenant), m.group(2)):
        print(int(float(m.group(3))))
        sys.exit(0)
print(-1)
PY
}
# wait_metrics URL FILE [TENANT...]: until a scrape answers 200 and has a
# sample for each TENANT (<= 10 s). replicate serves metrics from the
# start and adds its tenants one by one meanwhile: on a loaded machine
# the first scrape can come before the last tenant is in.
wait_metrics() {
	local _ url=$1 file=$2 t ok
	shift 2
	for _ in $(seq 100); do
		if [ "$(scrape "$url" "$file")" = 200 ]; then
			ok=1
			for t in "$@"; do
				grep -q "tenant=\"$t\"" "$file" || ok=0
			done
			[ "$ok" = 1 ] && return 0
		fi
		sleep 0.1
	done
	return 1
}

SINK="$ROOT/sink"
URL="file://$SINK"
PORT=$(free_port)
M="http://127.0.0.1:$PORT/metrics"
newdb live.db
newdb idle.db
sq live.db "INSERT INTO t(v) VALUES (randomblob(500));"
sq idle.db "INSERT INTO t(v) VALUES ('idle');"

# A live writer: a transaction every 50 ms until stopped.
touch writer.run
(
	i=0
	while [ -e writer.run ]; do
		i=$((i + 1))
		sq live.db "INSERT INTO t(v) VALUES (randomblob(700));" >/dev/null 2>&1 || true
		sleep 0.05
	done
) &
writer=$!

echo "# replicate --metrics-addr 127.0.0.1:$PORT"
"$WS_BIN" replicate --sink "$URL" --shards 2 --metrics-addr "127.0.0.1:$PORT" --interval-ms 100 --json \
	live.db idle.db >rep.out 2>rep.err &
rep=$!
check "the endpoint answers 200 at $M, with both tenants" wait_metrics "$M" m1.txt live idle
check "stderr says where the metrics are" grep -qF "metrics at $M" rep.err
ctype=$(curl -s -m 5 -o /dev/null -w '%{content_type}' "$M" || true)
check "Content-Type is Prometheus text 0.0.4 ($ctype)" eval '[[ "$ctype" == "text/plain; version=0.0.4"* ]]'

# The exposition parses: every sample is NAME[{labels}] VALUE, and every
# sample's family has a TYPE line.
check "the body is valid Prometheus text" python3 - m1.txt <<'PY'
import re, sys
types = {}
samples = 0
for n, l in enumerate(open(sys.argv[1]), 1):
    l = l.rstrip("\n")
    if not l:
        continue
    if l.startswith("# TYPE "):
        _, _, name, kind = l.split(" ", 3)
        assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), l
        types[name] = kind
        continue
    if l.startswith("#"):
        continue
    m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)( -?\d+)?$', l)
    assert m, "line %d: %r" % (n, l)
    float(m.group(3))
    name = m.group(1)
    base = re.sub(r'(_bucket|_sum|_count|_total)$', '', name)
    assert name in types or base in types or base + "_total" in types, "line %d: no TYPE for %s" % (n, name)
    samples += 1
assert samples > 0, "no samples"
PY

# The families docs/CLI.md lists, per tenant and per shard.
for fam in frames_shipped bytes_shipped puts throttle_retries frames_shed watermark_age; do
	check "family *${fam}* has a sample for tenant live" [ "$(sample m1.txt "$fam" live)" -ge 0 ]
	check "family *${fam}* has a sample for tenant idle" [ "$(sample m1.txt "$fam" idle)" -ge 0 ]
done
for fam in ring_bytes ring_used ring_high_water; do
	check "family *${fam}* has samples for shards 0 and 1" \
		eval 'grep -Eq "^walship_[a-z_]*${fam}[a-z_]*\{([^}]*,)?shard=\"0\"" m1.txt && grep -Eq "^walship_[a-z_]*${fam}[a-z_]*\{([^}]*,)?shard=\"1\"" m1.txt'
done

# The idle tenant's baseline is taken after its first tail (registration
# ships its first contact; under a sanitizer that can outlast the first scrape).
for _ in $(seq 100); do
	scrape "$M" m1b.txt >/dev/null
	[ "$(sample m1b.txt tails idle)" -ge 1 ] && break
	sleep 0.1
done
f1=$(sample m1.txt frames_shipped live)
i1=$(sample m1b.txt frames_shipped idle)
grown=0
for _ in $(seq 50); do
	sleep 0.2
	scrape "$M" m2.txt >/dev/null
	f2=$(sample m2.txt frames_shipped live)
	if [ "$f2" -gt "$f1" ]; then grown=1; break; fi
done
check "tenant live's frames shipped grows under the writer ($f1 -> $f2)" [ "$grown" = 1 ]
check "tenant idle's frames shipped stays put ($i1 -> $(sample m2.txt frames_shipped idle))" \
	[ "$(sample m2.txt frames_shipped idle)" = "$i1" ]

check "GET /nope -> 404" [ "$(scrape "http://127.0.0.1:$PORT/nope" nope.txt)" = 404 ]
check "GET / -> 404" [ "$(scrape "http://127.0.0.1:$PORT/" nope.txt)" = 404 ]
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST --data x "$M" || true)
check "POST /metrics -> 405 ($code)" [ "$code" = 405 ]
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -I "$M" || true)
check "HEAD /metrics -> 200 ($code)" [ "$code" = 200 ]
# Bound to 127.0.0.1 only: the rest of 127/8 reaches the loopback device too,
# but nothing listens there.
check "nothing answers on 127.0.0.2:$PORT" [ "$(scrape "http://127.0.0.2:$PORT/metrics" other.txt)" = 000 ]

ws replicate --sink "file://$ROOT/sink-busy" --metrics-addr "127.0.0.1:$PORT" --once idle.db
check "a second replicate on the same port: exit 1 naming the address" \
	eval '[ "$rc" = 1 ] && grep -qF "127.0.0.1:$PORT" err && grep -qi "in use" err'
ws replicate --sink "file://$ROOT/sink-busy" --metrics-addr "127.0.0.1:99999" --once idle.db
check "--metrics-addr with port 99999: exit 2" eval '[ "$rc" = 2 ] && grep -q "metrics-addr" err'
ws replicate --sink "file://$ROOT/sink-busy" --metrics-addr "localhost" --once idle.db
check "--metrics-addr without a port: exit 2" [ "$rc" = 2 ]

rm -f writer.run
wait "$writer" || true
# A slow client from another address (127.0.0.2) holding 20 connections,
# each sending a header line now and then: the scrape still answers, and
# SIGTERM still ends replicate at once (one client held every slot, and
# with every slot held the server's stop waited out its poll timeout).
python3 - "$PORT" >slow.out 2>&1 <<'PY' &
import socket, sys, time
port = int(sys.argv[1]); socks = []
for _ in range(20):
    try:
        s = socket.socket(); s.bind(("127.0.0.2", 0)); s.connect(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"); socks.append(s)
    except OSError:
        pass
end = time.time() + 8
while time.time() < end:
    for s in socks:
        try: s.sendall(b"X-Slow: 1\r\n")
        except OSError: pass
    time.sleep(1)
PY
slow=$!
sleep 1
check "a scrape answers 200 while a slow client holds connections" eval '[ "$(scrape "$M" slow.txt)" = 200 ]'
# The same from the scraper's own address (loopback): 4 connections (the
# per-address limit) each sending a header line every 2 s, never idle for
# the 10 s timeout, held the scraper out for as long as they went on. Each
# request head must arrive within 10 s: by 13 s they are cut and the
# scrape answers.
python3 - "$PORT" >trickle.out 2>&1 <<'PY' &
import socket, sys, time
port = int(sys.argv[1]); socks = []
for _ in range(4):
    s = socket.socket(); s.connect(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"); socks.append(s)
print("ready", flush=True)
end = time.time() + 20
while time.time() < end:
    for s in socks:
        try: s.sendall(b"X-Slow: 1\r\n")
        except OSError: pass
    time.sleep(2)
PY
trickle=$!
# Scrape once all 4 are connected (python's start can take a second or
# more on a loaded machine), not after a fixed sleep.
for _ in $(seq 100); do grep -q ready trickle.out 2>/dev/null && break; sleep 0.1; done
sleep 0.5
check "while 4 loopback connections trickle, a loopback scrape is refused at first" \
	eval '[ "$(scrape "$M" trickle1.txt)" != 200 ]'
sleep 12
check "13 s later (their request heads overdue, cut) a loopback scrape answers 200" \
	eval '[ "$(scrape "$M" trickle2.txt)" = 200 ]'
kill $trickle 2>/dev/null || true
wait $trickle 2>/dev/null || true
sq live.db "INSERT INTO t(v) VALUES ('last before SIGTERM');"
check "replicate is still running before SIGTERM" kill -0 $rep
t0=$(date +%s%N)
kill -TERM $rep
reap $rep rep.err "replicate --metrics-addr"
t1=$(date +%s%N)
check "replicate exits 0 on SIGTERM" [ "$reaped" = 0 ]
check "... within 5 s with the slow client connected ($(( (t1 - t0) / 1000000 )) ms)" [ $(( (t1 - t0) / 1000000 )) -lt 5000 ]
# The 16 connections refused (4 per address) made libmicrohttpd write a
# line each to stderr, unprefixed: its messages are walship's now, one a
# second at most.
check "every stderr line is walship's own (prefixed): $(grep -vc '^walship' rep.err || true) not" \
	eval '! grep -v "^walship" rep.err | grep -q .'
check "libmicrohttpd's messages: one a second at most ($(grep -c '^walship: metrics: ' rep.err || true))" \
	eval '[ "$(grep -c "^walship: metrics: " rep.err || true)" -le 10 ]'
kill $slow 2>/dev/null || true
wait $slow 2>/dev/null || true
check "after exit the port is closed" [ "$(scrape "$M" gone.txt)" = 000 ]
ws restore --sink "$URL" --tenant live -o live.r.db
check "restore of the live tenant equals the source" eval '[ "$rc" = 0 ] && same_dump live.db live.r.db'
ws restore --sink "$URL" --tenant idle -o idle.r.db
check "restore of the idle tenant equals the source" eval '[ "$rc" = 0 ] && same_dump idle.db idle.r.db'

# [engine] metrics_addr from --config, port 0: stderr names the port bound.
echo "# [engine] metrics_addr = 127.0.0.1:0"
cat >m.ini <<EOF
[engine]
sink = $URL
metrics_addr = 127.0.0.1:0
EOF
"$WS_BIN" replicate --config m.ini --quiet --interval-ms 100 idle.db >cfg.out 2>cfg.err &
rep2=$!
for _ in $(seq 100); do grep -q "metrics at" cfg.err && break; sleep 0.1; done
M2=$(sed -n 's/.*metrics at \(http:[^ ]*\).*/\1/p' cfg.err | head -1)
check "config metrics_addr with port 0, --quiet: stderr still names the URL ($M2)" eval '[[ "$M2" =~ ^http://127\.0\.0\.1:[1-9][0-9]*/metrics$ ]]'
check "config metrics_addr: GET answers 200 with tenant idle" \
	eval '[ "$(scrape "$M2" m3.txt)" = 200 ] && [ "$(sample m3.txt frames_shipped idle)" -ge 0 ]'
kill -INT $rep2
reap $rep2 cfg.err "replicate --config m.ini"
check "replicate with config metrics exits 0 on SIGINT" [ "$reaped" = 0 ]

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
