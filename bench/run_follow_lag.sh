#!/usr/bin/env bash
# Remote follower lag: source commit to the commit's rows readable in a
# replica kept by `walship follow` from the sink alone.
#   bench/run_follow_lag.sh [--s3] [--seconds N] [--rate TX_PER_S] [--interval-ms N]
#                           [--key-write-interval-ms N] [--poll-ms N] [--count-gets]
# A writer process commits TX_PER_S transactions a second (default 100) for
# N seconds (default 20), each row stamped with its commit's wall time;
# `walship replicate --interval-ms N` (batch_age_ms_max, default 50) ships
# it to a file:// sink (key_write_interval_ms, default 1000 as walship's:
# the watermark is written at most once per this long, so the source ships
# at most that often), or with --s3 to radosgw (tests/s3/radosgw.sh start
# build/s3 first; the caller holds the s3 lock); `walship follow` (--interval-ms
# POLL, its default 100 ms unless --poll-ms) keeps a replica. A reader polls the replica every
# 2 ms and takes, for every row that appeared since its last read, now
# minus its commit time. Prints count, p50, p90, p99 and max in ms, and the
# target (batch_age_ms_max + 1 s). --count-gets (with --s3): the follower
# reaches radosgw through a counting TCP relay on 127.0.0.1, and the line
# ends with the follower's GET and HEAD requests per second over the run
# (the relay's own delay is in that run's lags: compare lags without it).
# Env: WS_BIN (default build/tools/walship).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${WS_BIN:-$ROOT/build/tools/walship}
S3=0 SECONDS_RUN=20 RATE=100 AGE=50 KEYMS=1000 POLL= COUNT=0
while [ $# -gt 0 ]; do
	case "$1" in
	--s3) S3=1 ;;
	--seconds) SECONDS_RUN=$2; shift ;;
	--rate) RATE=$2; shift ;;
	--interval-ms) AGE=$2; shift ;;
	--key-write-interval-ms) KEYMS=$2; shift ;;
	--poll-ms) POLL=$2; shift ;;
	--count-gets) COUNT=1 ;;
	*) echo "run_follow_lag.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
	shift
done
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
cd "$W"
if [ "$S3" = 1 ]; then
	set -a; . "$ROOT/build/s3/env"; set +a
	B="ws-lag-$$"
	URL="s3://$B?endpoint=$WS_S3_ENDPOINT"
	code=$(curl -sS --max-time 30 -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
		-X PUT "$WS_S3_ENDPOINT/$B")
	[ "$code" = 200 ] || { echo "run_follow_lag.sh: create bucket $B: HTTP $code" >&2; exit 1; }
else
	mkdir sink
	URL="file://$W/sink"
fi
sqlite3 src.db "PRAGMA journal_mode=wal; CREATE TABLE t(id INTEGER PRIMARY KEY, ts INTEGER, v BLOB);" >/dev/null
printf '[shard.0]\nbatch_age_ms_max = %s\nkey_write_interval_ms = %s\n' "$AGE" "$KEYMS" >ws.ini
"$BIN" replicate --quiet --config ws.ini --sink "$URL" app="$W/src.db" >/dev/null 2>rep.err &
for _ in $(seq 200); do "$BIN" ls --sink "$URL" --tenant app >/dev/null 2>&1 && break; sleep 0.05; done
FURL=$URL
if [ "$COUNT" = 1 ]; then
	[ "$S3" = 1 ] || { echo "run_follow_lag.sh: --count-gets needs --s3" >&2; exit 2; }
	# A TCP relay to radosgw that counts the request lines it passes on.
	python3 - "${WS_S3_ENDPOINT#http://}" >relay.port 2>relay.err <<'PY' &
import socket, sys, threading
host, port = sys.argv[1].rsplit(":", 1)
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0)); ls.listen(16)
print(ls.getsockname()[1], flush=True)
lock = threading.Lock()
def pipe(a, b, count):
    tail = b""
    while True:
        d = a.recv(65536)
        if not d:
            break
        if count:
            s = tail + d
            n = s.count(b"GET /") + s.count(b"HEAD /")
            if n:
                with lock:
                    open("gets", "a").write("%d\n" % n)
            tail = d[-4:]
        b.sendall(d)
    b.close()
while True:
    c, _ = ls.accept()
    u = socket.create_connection((host, int(port)))
    for s in (c, u):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pipe, args=(c, u, True), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c, False), daemon=True).start()
PY
	for _ in $(seq 100); do [ -s relay.port ] && break; sleep 0.05; done
	FURL="s3://$B?endpoint=http://127.0.0.1:$(cat relay.port)"
fi
"$BIN" follow --sink "$FURL" --tenant app -o "$W/replica.db" ${POLL:+--interval-ms "$POLL"} >/dev/null 2>fol.err &
for _ in $(seq 200); do grep -q 'rebuilt at' fol.err && break; sleep 0.05; done
python3 - "$W/replica.db" >lags <<'PY' &
import sqlite3, sys, time, os
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
last = 0
while not os.path.exists("stop"):
    try:
        rows = c.execute("SELECT id, ts FROM t WHERE id > ? ORDER BY id", (last,)).fetchall()
    except sqlite3.OperationalError:
        rows = []
    now = time.time() * 1000
    for i, ts in rows:
        print(int(now - ts))
        last = i
    sys.stdout.flush()
    time.sleep(0.002)
PY
reader=$!
: >gets
T0=$(date +%s.%N)
python3 - "$RATE" "$SECONDS_RUN" <<'PY'
import sqlite3, sys, time
rate, secs = float(sys.argv[1]), float(sys.argv[2])
c = sqlite3.connect("src.db", isolation_level=None, timeout=10)
t0 = time.time(); n = 0
while time.time() - t0 < secs:
    c.execute("INSERT INTO t(ts, v) VALUES (?, randomblob(200))", (int(time.time() * 1000),))
    n += 1
    time.sleep(max(0, t0 + n / rate - time.time()))
PY
sleep 3
touch stop
wait "$reader"
T1=$(date +%s.%N)
python3 - "$AGE" "$URL" "$KEYMS" "$POLL" "$COUNT" "$T0" "$T1" <<'PY'
import sys
l = sorted(int(x) for x in open("lags"))
q = lambda p: l[min(len(l) - 1, int(p * len(l)))]
gets = ""
if sys.argv[5] == "1":
    n = sum(int(x) for x in open("gets"))
    gets = f"; follower GETs {n / (float(sys.argv[7]) - float(sys.argv[6])):.1f}/s (through the relay)"
print(f"follow lag ({sys.argv[2].split('?')[0].split('://')[0]}://, batch_age_ms_max {sys.argv[1]} ms, "
      f"key_write_interval_ms {sys.argv[3]}, follow poll {sys.argv[4] or 100} ms): "
      f"{len(l)} commits, p50 {q(.5)} ms, p90 {q(.9)} ms, p99 {q(.99)} ms, max {l[-1]} ms; "
      f"target p99 <= {int(sys.argv[1]) + 1000} ms{gets}")
PY
