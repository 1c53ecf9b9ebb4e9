#!/usr/bin/env bash
# S3 and HTTP throughput benchmark (bench/bench_s3.c), end to end:
#   - installs what is missing (build deps, radosgw, nginx-light, curl),
#   - builds bench_s3 (cmake Release, no fault sites) in build-bench/,
#   - starts a throwaway radosgw (tests/s3/radosgw.sh) and a minimal nginx
#     answering 200 to any PUT on 127.0.0.1, both under a temp dir,
#   - creates the bucket, runs bench_s3, stops everything (trap), and
#     prints the results (also saved to build-bench/bench_s3-last.txt),
#     then the ratios again on their own. walship runs both signed
#     (payload_signing=signed: the real SHA-256, verified by radosgw) and
#     unsigned (UNSIGNED-PAYLOAD, as curl: the same work on both sides).
#
#   bench/run_s3_bench.sh [--tiny] [--no-install] [-- bench_s3 args...]
#     --tiny        a quick smoke: a few objects, one rep
#     --no-install  do not apt-get anything (fail if something is missing)
# Anything after -- goes to bench_s3 (e.g. -- --reps 5 --inflight 8).
# Environment: WS_BENCH_BUILD (default build-bench), WS_TEST_TMP (temp dirs),
# WS_RGW_MEM_BYTES (radosgw's memstore; default 8 GiB, only used as written:
# each S3 rep writes about 0.6 GB of distinct objects, and a full store makes
# radosgw stop answering rather than fail).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${WS_BENCH_BUILD:-$ROOT/build-bench}
TINY=0
INSTALL=1
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --tiny) TINY=1 ;;
        --no-install) INSTALL=0 ;;
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "run_s3_bench.sh: unknown argument '$1' (bench_s3 arguments go after --)" >&2; exit 2 ;;
    esac
    shift
done

say() { echo "run_s3_bench: $*" >&2; }
die() { say "$*"; exit 1; }

# ---- install -----------------------------------------------------------------
if [ "$INSTALL" = 1 ]; then
    "$ROOT/tools/install-deps.sh"          # build deps, curl, ceph-mon/osd, radosgw
    if ! command -v nginx >/dev/null; then
        [ "$(id -u)" = 0 ] || die "nginx is missing and installing it needs root"
        say "installing nginx-light"
        # Keep the package's postinst from starting a system nginx on port 80.
        policy_added=0
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
            chmod 755 /usr/sbin/policy-rc.d
            policy_added=1
        fi
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light >/dev/null \
            || { [ "$policy_added" = 1 ] && rm -f /usr/sbin/policy-rc.d; die "apt-get install nginx-light failed"; }
        [ "$policy_added" = 1 ] && rm -f /usr/sbin/policy-rc.d
    fi
fi
for c in cmake curl nginx radosgw ss; do
    command -v "$c" >/dev/null || die "$c not found (run without --no-install)"
done

# ---- build ---------------------------------------------------------------------
say "building bench_s3 in $BUILD (Release, WS_FAULTS=OFF)"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DWS_FAULTS=OFF -DWS_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target bench_s3 -j"$(nproc)" >/dev/null
BENCH=$BUILD/bench/bench_s3
[ -x "$BENCH" ] || die "no $BENCH after the build"

# ---- servers ---------------------------------------------------------------------
T=$(mktemp -d "${WS_TEST_TMP:-/tmp}/ws-s3-bench.XXXXXX")
NGINX_PID=
cleanup() {
    local rc=$?
    set +e
    if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
        kill -TERM "$NGINX_PID" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$NGINX_PID" 2>/dev/null
        wait "$NGINX_PID" 2>/dev/null
    fi
    [ -d "$T/rgw" ] && "$ROOT/tests/s3/radosgw.sh" stop "$T/rgw" >&2
    rm -rf "$T"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    local p _
    for _ in $(seq 200); do
        p=$(( 10000 + (RANDOM * 32768 + RANDOM) % 22000 ))
        [ -z "$(ss -Htln "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return 0; }
    done
    die "no free port"
}

export WS_RGW_MEM_BYTES=${WS_RGW_MEM_BYTES:-8589934592}
"$ROOT/tests/s3/radosgw.sh" start "$T/rgw" >&2
set -a
# shellcheck disable=SC1091
. "$T/rgw/env"
set +a

# nginx: one process in the foreground on 127.0.0.1, answering 200 to any
# PUT only after it has read the whole body (as S3 does), keep-alive without
# a request limit, no access log. `return 200` alone would answer at once and
# then drop the body 4 KiB at a time; instead the mirror module reads the body
# into memory (client_body_buffer_size > 1 MiB: no temp file), the static
# handler refuses PUT with 405, and error_page turns that into an empty 200
# (the mirror subrequest is internal: no network).
# malloc: nginx allocates each 1 MiB body buffer afresh; glibc's default
# dynamic thresholds hand the heap back and fault it in again when several
# bodies are in flight (measured: 4 parallel uploads 2-3x slower than 1, the
# time in nginx's brk and recvfrom). Fixed thresholds keep the server's cost
# flat, so that the client is what is measured.
NPORT=$(free_port)
mkdir -p "$T/nginx/tmp"
cat >"$T/nginx/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $T/nginx/tmp/body;
    proxy_temp_path $T/nginx/tmp/proxy;
    fastcgi_temp_path $T/nginx/tmp/fastcgi;
    uwsgi_temp_path $T/nginx/tmp/uwsgi;
    scgi_temp_path $T/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$NPORT;
        keepalive_requests 100000000;
        keepalive_timeout 300s;
        client_max_body_size 0;
        client_body_buffer_size 2m;
        location / {
            mirror /mirror;
            mirror_request_body on;
            error_page 405 =200 @ok;
        }
        location = /mirror { internal; return 204; }
        location @ok { return 200; }
    }
}
EOF
MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=67108864 \
    nginx -e "$T/nginx/error.log" -p "$T/nginx" -c "$T/nginx/nginx.conf" </dev/null >"$T/nginx/out.log" 2>&1 &
NGINX_PID=$!
for _ in $(seq 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary x "http://127.0.0.1:$NPORT/probe" || true)
    [ "$code" = 200 ] && break
    kill -0 "$NGINX_PID" 2>/dev/null || { cat "$T/nginx/out.log" "$T/nginx/error.log" >&2 || true; die "nginx exited"; }
    sleep 0.1
done
[ "$code" = 200 ] || die "nginx on 127.0.0.1:$NPORT does not answer PUT with 200 (got $code)"
say "nginx $(nginx -v 2>&1 | sed 's/.*\///') on http://127.0.0.1:$NPORT (pid $NGINX_PID)"

BUCKET=walship-bench
code=$(curl -sS -o "$T/mkbucket.out" -w '%{http_code}' -X PUT -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    "$WS_S3_ENDPOINT/$BUCKET")
[ "$code" = 200 ] || { cat "$T/mkbucket.out" >&2; die "create bucket $BUCKET: HTTP $code"; }

# ---- run -----------------------------------------------------------------------------
ARGS=(--s3 "s3://$BUCKET/run?endpoint=$WS_S3_ENDPOINT" --http "http://127.0.0.1:$NPORT" --dir "$T")
if [ "$TINY" = 1 ]; then
    ARGS+=(--n64 5 --n1m 2 --http-n64 20 --http-n1m 5 --reps 1 --http-reps 1)
fi
ARGS+=("${EXTRA[@]}")
say "$BENCH ${ARGS[*]}"
"$BENCH" "${ARGS[@]}" | tee "$BUILD/bench_s3-last.txt"
echo
echo "== ratios (> 1: walship faster; walship-unsigned vs curl is the like-for-like pair) =="
grep -E '^(64KiB|1MiB) +ratio' "$BUILD/bench_s3-last.txt" || true
