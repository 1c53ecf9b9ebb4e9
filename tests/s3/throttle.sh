#!/usr/bin/env bash
# A throttling S3 store: Debian's haproxy in front of a radosgw started by
# tests/s3/radosgw.sh, answering writes above a rate with 503 SlowDown, the
# way S3 does while a prefix rescales (or 429, as GCS and R2 do).
#
#   tests/s3/throttle.sh start DIR [--put-rate N] [--get-rate N] [--key-rate N] [--status 503|429]
#                                  [--no-retry-after] [--log HOST:PORT]
#   tests/s3/throttle.sh rate DIR N        change the write cap of a running proxy (0 = no cap)
#   tests/s3/throttle.sh retry-after DIR on|off   send Retry-After: 1 with a refusal, or no header
#   tests/s3/throttle.sh stop DIR
#
# DIR is the radosgw directory (DIR/env holds WS_S3_ENDPOINT). start writes
# DIR/env-throttled: the same credentials with WS_S3_ENDPOINT pointing at the
# proxy, and WS_THROTTLE_PID / WS_THROTTLE_ADMIN (its runtime socket).
#
# --put-rate N: PUT, POST and DELETE requests accepted per second, over a
#   sliding one-second window, by all clients together (0 = no cap; default).
#   Only accepted requests count against the cap, so a client that sends
#   twice the cap gets the cap through, as a store does.
# --get-rate N: the same for GET and HEAD (default 0: reads never throttled).
# --key-rate N: writes accepted per second to any one key (R2 and GCS allow
#   one); 0 = no cap (default). haproxy's rate is a sliding estimate over
#   the last second, so with 1 the next write to a key is accepted one to
#   two seconds after the last.
# --status: 503 (default; body: S3 XML error Code SlowDown) or 429.
# --no-retry-after: refusals carry no Retry-After header (S3 sends none
#   with SlowDown; the default sends `Retry-After: 1`, as GCS and R2 may).
# --log HOST:PORT: one line per request, sent as a raw syslog datagram
#   (UDP) to HOST:PORT when the request ends: `TIME METHOD URI STATUS
#   BYTES CONTENT_LENGTH`, TIME in seconds since the epoch (ms), BYTES what
#   the client sent (request line, headers and body: haproxy's %U, the
#   same bytes its frontend's `bin` counter adds up), CONTENT_LENGTH the
#   request's Content-Length header (`-` without one). For counting what
#   a client sends by kind of request (bench/req_breakdown.py listens).
#
# radosgw cannot be made to throttle on demand, so this proxy is the one
# fake in the S3 tests: it stands for a store's rate limit, nothing else
# (every accepted request is radosgw's own answer).
#
# The write cap lives in a haproxy map changed through the admin socket
# (`rate`), so the store can be throttled and released without dropping
# the client's connections.
set -euo pipefail

die() { echo "throttle.sh: $*" >&2; exit 2; }
port_free() { [ -z "$(ss -Htln "sport = :$1" 2>/dev/null)" ]; }
free_port() {
    local p _
    for _ in $(seq 1 200); do
        p=$(( 10000 + (RANDOM * 32768 + RANDOM) % 22000 ))
        if port_free "$p"; then echo "$p"; return 0; fi
    done
    die "no free port found"
}
num() { [[ "$2" =~ ^[0-9]+$ ]] || die "$1: not a number: '$2'"; echo "$2"; }

# Send one command to haproxy's admin socket (a TCP socket on 127.0.0.1).
admin() {
    local port=$1 cmd=$2 reply
    exec 9<>"/dev/tcp/127.0.0.1/$port" || die "admin socket 127.0.0.1:$port: cannot connect"
    printf '%s\n' "$cmd" >&9
    reply=$(timeout 5 cat <&9 || true)
    exec 9>&-
    printf '%s' "$reply"
}

cmd_start() {
    local dir=$1; shift
    local put_rate=0 get_rate=0 key_rate=0 status=503 retry_after=1 log_to=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --put-rate) put_rate=$(num "$1" "${2:-}"); shift 2 ;;
            --get-rate) get_rate=$(num "$1" "${2:-}"); shift 2 ;;
            --key-rate) key_rate=$(num "$1" "${2:-}"); shift 2 ;;
            --status) status=${2:-}; shift 2
                      [ "$status" = 503 ] || [ "$status" = 429 ] || die "--status: 503 or 429, not '$status'" ;;
            --no-retry-after) retry_after=0; shift ;;
            --log) log_to=${2:-}; shift 2
                   [[ "$log_to" =~ ^[0-9.]+:[0-9]+$ ]] || die "--log: HOST:PORT (an IPv4 address), not '$log_to'" ;;
            *) die "start: unknown option '$1'" ;;
        esac
    done
    command -v haproxy >/dev/null || die "haproxy is not installed (tools/install-deps.sh)"
    [ -f "$dir/env" ] || die "$dir/env: missing (start radosgw first: tests/s3/radosgw.sh start $dir)"
    if [ -f "$dir/throttle.pid" ] && kill -0 "$(cat "$dir/throttle.pid")" 2>/dev/null; then
        die "already running (pid $(cat "$dir/throttle.pid")); stop it first"
    fi
    local upstream
    upstream=$(sed -n 's/^WS_S3_ENDPOINT=http:\/\///p' "$dir/env")
    [ -n "$upstream" ] || die "$dir/env: no WS_S3_ENDPOINT=http://HOST:PORT"
    local port admin_port
    port=$(free_port); admin_port=$(free_port)
    [ "$port" != "$admin_port" ] || admin_port=$(free_port)
    local body code
    code=SlowDown; [ "$status" = 429 ] && code=TooManyRequests
    body="<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>$code</Code><Message>Please reduce your request rate.</Message><Resource>throttle.sh</Resource></Error>"
    # 0 = no cap: a cap no client reaches.
    local big=1000000000
    local log_lines=""
    if [ -n "$log_to" ]; then
        # The Content-Length is kept when the request is read: at its end
        # the request's headers may be gone.
        log_lines="    log $log_to len 4096 format raw local0 info
    log-format \"%Ts.%ms %HM %HU %ST %U %[var(txn.clen)]\"
    http-request set-var(txn.clen) req.hdr(content-length)"
    fi
    [ "$put_rate" = 0 ] && put_rate=$big
    [ "$get_rate" = 0 ] && get_rate=$big
    [ "$key_rate" = 0 ] && key_rate=$big
    printf 'write %s\nread %s\nkey %s\nretry_after %s\n' "$put_rate" "$get_rate" "$key_rate" "$retry_after" \
        > "$dir/throttle.map"
    cat > "$dir/throttle.cfg" <<EOF
# Written by tests/s3/throttle.sh start; limits in throttle.map.
global
    maxconn 4096
    stats socket ipv4@127.0.0.1:$admin_port level admin
    log stdout format raw local0 err
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    timeout http-keep-alive 60s
    option http-keep-alive
backend st_writes
    stick-table type string len 8 size 4 expire 10s store http_req_rate(1s)
backend st_reads
    stick-table type string len 8 size 4 expire 10s store http_req_rate(1s)
backend st_keys
    stick-table type string len 512 size 1m expire 10s store http_req_rate(1s)
frontend s3
    bind 127.0.0.1:$port
$log_lines
    acl is_write method PUT POST DELETE
    acl is_read method GET HEAD
    http-request set-var(txn.wlim) str(write),map_str_int($dir/throttle.map,$big)
    http-request set-var(txn.rlim) str(read),map_str_int($dir/throttle.map,$big)
    http-request set-var(txn.klim) str(key),map_str_int($dir/throttle.map,$big)
    http-request set-var(txn.ra) str(retry_after),map_str_int($dir/throttle.map,1)
    acl ra_on var(txn.ra) -m int 1
    # Peek at the rates before counting: a refused request is not counted.
    acl w_over str(w),table_http_req_rate(st_writes),sub(txn.wlim) ge 0
    acl r_over str(r),table_http_req_rate(st_reads),sub(txn.rlim) ge 0
    acl k_over path,table_http_req_rate(st_keys),sub(txn.klim) ge 0
    http-request return status $status content-type application/xml string '$body' hdr Retry-After 1 if is_write w_over ra_on or is_write k_over ra_on or is_read r_over ra_on
    http-request return status $status content-type application/xml string '$body' if is_write w_over !ra_on or is_write k_over !ra_on or is_read r_over !ra_on
    http-request track-sc0 str(w) table st_writes if is_write
    http-request track-sc1 path table st_keys if is_write
    http-request track-sc0 str(r) table st_reads if is_read
    default_backend rgw
backend rgw
    server rgw $upstream
EOF
    haproxy -c -q -f "$dir/throttle.cfg" || die "haproxy rejected $dir/throttle.cfg"
    haproxy -D -p "$dir/throttle.pid" -f "$dir/throttle.cfg" >>"$dir/throttle.log" 2>&1 \
        || die "haproxy did not start (see $dir/throttle.log)"
    local _
    for _ in $(seq 1 50); do
        port_free "$port" || break
        sleep 0.1
    done
    port_free "$port" && die "haproxy is not listening on 127.0.0.1:$port (see $dir/throttle.log)"
    sed "s|^WS_S3_ENDPOINT=.*|WS_S3_ENDPOINT=http://127.0.0.1:$port|" "$dir/env" > "$dir/env-throttled.tmp"
    printf 'WS_THROTTLE_PID=%s\nWS_THROTTLE_ADMIN=127.0.0.1:%s\n' "$(cat "$dir/throttle.pid")" "$admin_port" \
        >> "$dir/env-throttled.tmp"
    mv "$dir/env-throttled.tmp" "$dir/env-throttled"
    echo "throttle.sh: haproxy on http://127.0.0.1:$port -> $upstream (writes/s $( [ "$put_rate" = $big ] && echo uncapped || echo "$put_rate"), reads/s $( [ "$get_rate" = $big ] && echo uncapped || echo "$get_rate"), per key $( [ "$key_rate" = $big ] && echo uncapped || echo "$key_rate"), status $status, Retry-After $( [ "$retry_after" = 1 ] && echo 1 || echo none)); $dir/env-throttled"
}

admin_port() {
    [ -f "$1/env-throttled" ] || die "$1/env-throttled: missing (start first)"
    sed -n 's/^WS_THROTTLE_ADMIN=127.0.0.1://p' "$1/env-throttled"
}

cmd_retry_after() {
    local dir=$1 v reply
    case "${2:-}" in on) v=1 ;; off) v=0 ;; *) die "retry-after: on or off, not '${2:-}'" ;; esac
    reply=$(admin "$(admin_port "$dir")" "set map $dir/throttle.map retry_after $v")
    [ -z "$reply" ] || die "set map: $reply"
    sed -i "s/^retry_after .*/retry_after $v/" "$dir/throttle.map"
    echo "throttle.sh: refusals now $( [ "$v" = 1 ] && echo 'with Retry-After: 1' || echo 'without Retry-After')"
}

cmd_rate() {
    local dir=$1 n
    n=$(num rate "${2:-}")
    local ap
    ap=$(admin_port "$dir")
    [ "$n" = 0 ] && n=1000000000
    local reply
    reply=$(admin "$ap" "set map $dir/throttle.map write $n")
    [ -z "$reply" ] || die "set map: $reply"
    # Keep the file in step, so a restart keeps the cap.
    sed -i "s/^write .*/write $n/" "$dir/throttle.map"
    echo "throttle.sh: write cap now $( [ "$n" = 1000000000 ] && echo uncapped || echo "$n/s")"
}

cmd_stop() {
    local dir=$1 pid
    [ -f "$dir/throttle.pid" ] || { echo "throttle.sh: not running"; return 0; }
    pid=$(cat "$dir/throttle.pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$dir/throttle.pid" "$dir/env-throttled"
    echo "throttle.sh: stopped"
}

[ $# -ge 2 ] || die "usage: throttle.sh start|rate|retry-after|stop DIR [...]"
cmd=$1; dir=$2; shift 2
[ -d "$dir" ] || die "$dir: no such directory"
dir=$(cd "$dir" && pwd)
case "$cmd" in
    start) cmd_start "$dir" "$@" ;;
    rate) cmd_rate "$dir" "$@" ;;
    retry-after) cmd_retry_after "$dir" "$@" ;;
    stop) cmd_stop "$dir" ;;
    *) die "unknown command '$cmd' (start, rate, retry-after, stop)" ;;
esac
