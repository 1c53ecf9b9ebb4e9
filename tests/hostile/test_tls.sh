#!/usr/bin/env bash
# TLS failures are final at once (issue 30 item 4): against real TLS servers
# on 127.0.0.1 (python3's ssl module, the self-signed certificate kept
# beside this script), `walship ls` over an https endpoint
#   - an untrusted certificate: fails at the first attempt (the server
#     counts one connection, not more), naming the URL and the ca_file
#     setting;
#   - a trusted certificate that does not name the host: the same;
#   - a plain-HTTP server spoken to over https (a handshake that fails on
#     protocol): the same;
#   - the same certificate trusted through ca_file and named by the host:
#     succeeds (the control that the cases above fail for their reason);
#   - a refused connection and a server that closes mid-handshake: still
#     retried (more than one attempt) as transient.
# Env: WS_BIN (the walship binary), WS_TEST_TMP (scratch dir).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$HERE/../integration/lib.sh"

export AWS_ACCESS_KEY_ID="AKIATLS0000" AWS_SECRET_ACCESS_KEY="tls-secret-0000"

# A self-signed certificate for DNS:localhost only, made once with
#   openssl req -x509 -newkey rsa:2048 -nodes -keyout tls_test_key.pem \
#     -out tls_test_cert.pem -days 36500 -subj /CN=localhost \
#     -addext subjectAltName=DNS:localhost
# and kept here (a test key, trusted by nothing but this script), so the
# test needs no openssl command.
cp "$HERE/tls_test_cert.pem" cert.pem
cp "$HERE/tls_test_key.pem" key.pem

cat >srv.py <<'EOF'
# srv.py MODE [CERT KEY]: serve on 127.0.0.1 (a free port, printed first).
#   tls    HTTPS answering every GET with an empty bucket listing
#   plain  the same over plain HTTP
#   close  accept and close at once (a handshake cut short)
import http.server, socket, ssl, sys
mode = sys.argv[1]
# Every connection accepted (a failed handshake included) is one line of
# conns.MODE: the test counts attempts there, not by the clock.
def counted():
    with open("conns." + mode, "a") as f:
        f.write("x\n")
if mode == "close":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    print(s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        counted()
        c.close()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b'<?xml version="1.0"?><ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>'
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
class S(http.server.ThreadingHTTPServer):
    def get_request(self):
        try:
            return super().get_request()
        finally:
            counted()
srv = S(("127.0.0.1", 0), H)
if mode == "tls":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[2], sys.argv[3])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
EOF

# The servers are jobs of this shell (not of a command substitution's
# subshell), so that lib.sh's cleanup stops them.
for mode in tls plain close; do
	python3 srv.py "$mode" "$ROOT/cert.pem" "$ROOT/key.pem" >"port.$mode" 2>"port.$mode.err" &
done
# port MODE: the port srv.py MODE listens on, once it does.
port() {
	local _
	for _ in $(seq 100); do
		[ -s "port.$1" ] && { head -n1 "port.$1"; return 0; }
		sleep 0.05
	done
	echo "srv.py $1 did not start: $(cat "port.$1.err")" >&2
	return 1
}
TLS_PORT=$(port tls)
PLAIN_PORT=$(port plain)
CLOSE_PORT=$(port close)
# A port nothing listens on: one a server held and let go.
REFUSED_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

ms=0
# conns MODE: connections srv.py MODE has accepted so far.
conns() { if [ -f "conns.$1" ]; then wc -l <"conns.$1"; else echo 0; fi; }
# ls_sink URL: walship ls against URL, timed (ms, reported only).
ls_sink() {
	local t0
	t0=$(date +%s%N)
	set +e
	timeout -k 5 60 "$WS_BIN" ls --sink "$1" >"$ROOT/out" 2>"$ROOT/err"
	rc=$?
	set -e
	ms=$((($(date +%s%N) - t0) / 1000000))
	no_sanitizer_report "$ROOT/err" "walship ls --sink $1"
}

# final DESC MODE URL SHOWN_URL CA_RE REASON_RE: failed at the first
# attempt (srv.py MODE saw at most one connection), named. Not timed: a
# loaded sanitizer build takes a second to start; a retry would take the
# store's backoff and a second connection.
final() {
	local desc=$1 mode=$2 url=$3 shown=$4 ca_re=$5 reason_re=$6 why="" before after
	before=$(conns "$mode")
	ls_sink "$url"
	after=$(conns "$mode")
	if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then
		why="exit $rc, want a failure"
	elif [ $((after - before)) -gt 1 ]; then
		why="$((after - before)) connections in $ms ms: retried"
	elif ! grep -qF "TLS to $shown" "$ROOT/err"; then
		why="the error does not name $shown"
	elif ! grep -Eq "ca_file=$ca_re" "$ROOT/err"; then
		why="the error does not name the ca_file setting"
	elif ! grep -Eq "$reason_re" "$ROOT/err"; then
		why="the error does not say /$reason_re/"
	elif grep -q "attempts" "$ROOT/err"; then
		why="retried"
	fi
	if [ -z "$why" ]; then ok "$desc ($ms ms)"; else bad "$desc: $why"; fi
}

# retried DESC URL: failed, transient, after more than one attempt.
retried() {
	local desc=$1 url=$2
	ls_sink "$url"
	if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -Eq "failed after ([2-9]|[1-9][0-9]+) attempts" "$ROOT/err" &&
		! grep -q "TLS to" "$ROOT/err"; then
		ok "$desc ($ms ms)"
	else
		bad "$desc: exit $rc after $ms ms, want a failure after retries"
	fi
}

CA="$ROOT/cert.pem"
final "untrusted self-signed certificate: final at once, URL and ca_file named" tls \
	"s3://bkt?endpoint=https://127.0.0.1:$TLS_PORT" "https://127.0.0.1:$TLS_PORT/bkt" \
	"\(unset" "certificate"
final "trusted certificate that does not name the host: final at once" tls \
	"s3://bkt?endpoint=https://127.0.0.1:$TLS_PORT&ca_file=$CA" "https://127.0.0.1:$TLS_PORT/bkt" \
	"$CA" "does not match|no alternative certificate subject name"
final "https to a plain-HTTP server (handshake protocol): final at once" plain \
	"s3://bkt?endpoint=https://127.0.0.1:$PLAIN_PORT&ca_file=$CA" "https://127.0.0.1:$PLAIN_PORT/bkt" \
	"$CA" "SSL|TLS|version"
final "ca_file that cannot be read: final at once" tls \
	"s3://bkt?endpoint=https://localhost:$TLS_PORT&ca_file=$ROOT/absent.pem" "https://localhost:$TLS_PORT/bkt" \
	"$ROOT/absent.pem" "CA|cert|absent"

ls_sink "s3://bkt?endpoint=https://localhost:$TLS_PORT&ca_file=$CA"
if [ "$rc" = 0 ]; then ok "the same certificate, trusted through ca_file and naming the host: ls succeeds"
else bad "trusted certificate: exit $rc"; fi

retried "refused connection: still retried" \
	"s3://bkt?endpoint=https://127.0.0.1:$REFUSED_PORT&retry_deadline_ms=1500"
before=$(conns close)
retried "connection closed mid-handshake: still retried" \
	"s3://bkt?endpoint=https://127.0.0.1:$CLOSE_PORT&retry_deadline_ms=1500"

if [ $(($(conns close) - before)) -ge 2 ]; then ok "the closing server saw $(($(conns close) - before)) connections (the count can see a retry)"
else bad "the closing server saw $(($(conns close) - before)) connections, want 2 or more"; fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
