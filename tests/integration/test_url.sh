#!/usr/bin/env bash
# Hostile and malformed s3:// sink URLs through the real walship CLI, with no
# S3 server: every one is refused when the sink is opened (exit 2, before any
# request), the message names the parameter at fault, no password from the
# URL and no credential from the environment appears in stdout or stderr, no
# parameter the user did not write is echoed, and nothing connects to a
# listener the URL tries to smuggle a request to.
#
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
# Prints "N passed, M failed" last; exits non-zero on any failure.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

export AWS_ACCESS_KEY_ID=AKIDURLTEST0000000001
export AWS_SECRET_ACCESS_KEY=urlTestSecretKey0123456789abcdefABCDwxyz
export AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_DEFAULT_REGION
PW=pw0SECRET0pw

sq u.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);" >/dev/null

# A listener that records any connection: requests must never reach it.
python3 - "$ROOT/lport" "$ROOT/connected" <<'PY' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("connection\n")
    c.close()
PY
for _ in $(seq 100); do [ -s "$ROOT/lport" ] && break; sleep 0.05; done
LP=$(cat "$ROOT/lport")
E="http://127.0.0.1:$LP"

# refused DESC NAME URL: every command refuses URL with exit 2, naming NAME,
# with no secret anywhere in its output, well before any network timeout.
refused() {
	local desc=$1 name=$2 url=$3 cmd args t0 dt
	for cmd in replicate ls verify restore checkpoint; do
		case $cmd in
		replicate) args=(replicate --once --sink "$url" u.db) ;;
		ls) args=(ls --sink "$url") ;;
		verify) args=(verify --sink "$url") ;;
		restore) args=(restore --sink "$url" --tenant u -o r.db) ;;
		checkpoint) args=(checkpoint --sink "$url") ;;
		esac
		t0=$(date +%s%N)
		ws "${args[@]}"
		dt=$((($(date +%s%N) - t0) / 1000000))
		if [ "$rc" = 2 ] && grep -qF -- "$name" err && ! grep -qF "$PW" out err &&
			! grep -qF "$AWS_SECRET_ACCESS_KEY" out err && [ "$dt" -lt 3000 ]; then
			ok "$desc ($cmd): exit 2 naming $name, no secret, ${dt} ms"
		else
			bad "$desc ($cmd): want exit 2 naming '$name' with no secret within 3 s (got $rc, ${dt} ms)"
		fi
	done
	check "$desc: the error has no control character" eval '! LC_ALL=C grep -q "[[:cntrl:]]" err'
}

echo "# region"
refused "region with CR LF and a header" region "s3://bkt?endpoint=$E&region=us%0d%0aX-Injected:%20yes"
refused "region smuggling a host, no endpoint" region "s3://bkt?region=x@127.0.0.1:$LP%23"
refused "region smuggling a path" region "s3://bkt?region=x.evil.example%2F"
refused "empty region" region "s3://bkt?region="
set +e
AWS_REGION=$'us\r\nX-Injected: yes' "$WS_BIN" ls --sink "s3://bkt?endpoint=$E" >"$ROOT/out" 2>"$ROOT/err"
rc=$?
set -e
check "AWS_REGION with CR LF: exit 2 naming AWS_REGION" eval '[ "$rc" = 2 ] && grep -q AWS_REGION err'

echo "# endpoint"
for ep in "http://127.0.0.1:0" "http://127.0.0.1:-1" "http://127.0.0.1:65536" "http://127.0.0.1:99999999" \
	"http://::1:9000" "http://[::1" "http://127.0.0.1:$LP%0d%0aX-Injected:%20yes" \
	"http://127.0.0.1:$LP/path" "ftp://127.0.0.1:$LP" "127.0.0.1:$LP" "http://127.0.0.1:0080"; do
	refused "endpoint $ep" endpoint "s3://bkt?endpoint=$ep"
done

echo "# credentials in the endpoint are refused and never echoed"
refused "endpoint with user:password@" "user name or password" "s3://bkt?endpoint=http://user:$PW@127.0.0.1:$LP"
refused "endpoint with user:password@, percent-encoded" "user name or password" \
	"s3://bkt?endpoint=http%3A%2F%2Fuser%3A$PW%40127.0.0.1%3A$LP"
refused "user:password@ before the bucket" bucket "s3://user:$PW@bkt?endpoint=$E"
refused "user:password@ in an endpoint, another parameter wrong" bogus \
	"s3://bkt?bogus=1&endpoint=http://user:$PW@127.0.0.1:$LP"
refused "user:password@ under a parameter name spelled %65ndpoint" "%65ndpoint" \
	"s3://bkt?%65ndpoint=http://user:$PW@127.0.0.1:$LP"
refused "an https:// sink with user:password@" "unknown scheme" "https://user:$PW@s3.amazonaws.com/bkt"
refused "s3:/ (one slash) with user:password@" "unknown scheme" "s3:/user:$PW@bkt"

echo "# a parameter twice, or out of its range"
refused "conditional_writes twice" "conditional_writes given twice" "s3://bkt?conditional_writes=off&conditional_writes=on&endpoint=$E"
refused "insecure twice" "insecure given twice" "s3://bkt?insecure=0&insecure=1&endpoint=$E"
refused "max_in_flight=100000" max_in_flight "s3://bkt?max_in_flight=100000&endpoint=$E"
refused "retry_attempts_max=5000" retry_attempts_max "s3://bkt?retry_attempts_max=5000&endpoint=$E"

echo "# bucket names (S3's rules)"
for b in b..b -bb bb- .bb b.-b ab Abc b_b 192.168.1.10; do
	refused "bucket $b" bucket "s3://$b?endpoint=$E"
done

echo "# parameters the user never wrote are not echoed"
cat >bad.ini <<EOF
[engine]
sink = s3://bkt?endpoint=$E&region=bad!

[shard.0]
retry_attempts_max = 7
EOF
ws replicate --config bad.ini --once u.db
check "config sink with a bad region: exit 2 naming region" eval '[ "$rc" = 2 ] && grep -q region err'
check "... the message holds the URL as written, no engine defaults" \
	eval '! grep -qE "retry_attempts_max|retry_deadline_ms|max_in_flight" err && grep -qF "s3://bkt?endpoint=$E&region=bad!:" err'
ws replicate --once --sink "s3://bkt?endpoint=$E&region=bad!" u.db
check "command-line sink with a bad region: no engine defaults in the message" \
	eval '[ "$rc" = 2 ] && ! grep -qE "retry_attempts_max|retry_deadline_ms|max_in_flight" err'

sleep 0.2
check "no request reached the listener" [ ! -e "$ROOT/connected" ]
check "no restore output was written" [ ! -e r.db ]

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
