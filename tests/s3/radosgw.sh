#!/usr/bin/env bash
# Throwaway single-node Ceph (1 mon, 1 memstore OSD, no mgr) + radosgw on
# 127.0.0.1, for walship's S3 tests.  Everything lives under DIR; no systemd,
# nothing under /etc or /var is touched after `install`.
#
#   tests/s3/radosgw.sh install        apt-get the Debian packages (idempotent)
#   tests/s3/radosgw.sh start DIR      create + start cluster, write DIR/env
#   tests/s3/radosgw.sh smoke DIR      curl-based self check of the S3 endpoint
#   tests/s3/radosgw.sh stop DIR       kill daemons by PID (TERM, then KILL)
#
# DIR/env (source it, or read KEY=VALUE lines):
#   WS_S3_ENDPOINT=http://127.0.0.1:PORT   (path-style; any bucket name)
#   AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY  fixed (see below), user "walship"
#   AWS_REGION=us-east-1                   (radosgw accepts any region string)
#
# Tunables (environment):  WS_RGW_PORT (default: a free port), WS_RGW_MEM_BYTES
# (memstore capacity, default 4 GiB; RAM is only used as data is written),
# WS_RGW_WAIT (seconds to wait for HTTP, default 90).
#
# Ceph here is Debian 12's 16.2.x (pacific).  Settings that matter:
#  - auth_{cluster,service,client}_required = none: no keyrings at all.
#  - ms_mon_client_mode = crc: otherwise radosgw loops on auth with the mon.
#  - pool size 1 needs mon_allow_pool_size_one; small pg counts because
#    radosgw creates ~7 pools and mon_max_pg_per_osd (250) caps 1 OSD.
#  - beast with tcp_nodelay=1: otherwise ~20-40 ms per GET on a reused
#    connection (measured 22 ms vs 1-2 ms average in `smoke`).
#  - paxos_propose_interval = 0.1 (default 1 s): start in ~4 s instead of ~14 s.
#  - public/cluster addr = 127.0.0.1: otherwise OSD heartbeats bind 0.0.0.0.
# radosgw verifies SigV4 (signature, access key, x-amz-content-sha256 against
# the body) but not the region in the credential scope.  If-Match must carry
# the etag unquoted (a quoted etag gets 412; walship's etag_quotes=auto probes
# for that, and every test uses the default URL).  See cmd_smoke for curl quirks.
set -euo pipefail

ACCESS_KEY=WALSHIPTESTACCESSKEY1
SECRET_KEY=walshipTestSecretKey0123456789abcdefABCD
REGION=us-east-1
PKGS=(ceph-mon ceph-osd radosgw)   # ceph-common, ceph-base come as dependencies

die() { echo "radosgw.sh: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

port_free() { [ -z "$(ss -Htln "sport = :$1" 2>/dev/null)" ]; }
free_port() {
    local p _
    for _ in $(seq 1 200); do
        p=$(( 10000 + (RANDOM * 32768 + RANDOM) % 22000 ))   # below ephemeral range
        if port_free "$p"; then echo "$p"; return 0; fi
    done
    die "no free port found"
}

cmd_install() {
    local t0 missing=() p
    t0=$(now)
    for p in "${PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "radosgw.sh: packages already installed ($(ceph --version 2>/dev/null | awk '{print $3}'))"
        return 0
    fi
    [ "$(id -u)" = 0 ] || die "install needs root"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    echo "radosgw.sh: installed ${missing[*]} in $(elapsed "$t0") s"
}

# Bounded wait: wait_for SECONDS COMMAND...
wait_for() {
    local secs=$1; shift
    local end=$(( $(date +%s) + secs ))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.2
    done
}

show_logs() {
    local d=$1 f
    for f in "$d"/log/*.log "$d"/log/*.out; do
        [ -s "$f" ] || continue
        echo "---- tail $f" >&2
        tail -n 25 "$f" >&2
    done
}

fail_start() {
    echo "radosgw.sh: start failed: $*" >&2
    show_logs "$DIR"
    cmd_stop "$DIR" >/dev/null 2>&1 || true
    exit 1
}

# spawn NAME CMD...: run a daemon in the foreground (-f) as a detached
# background process; record its PID in DIR/run/NAME.pid.
spawn() {
    local name=$1; shift
    setsid "$@" </dev/null >"$DIR/log/$name.out" 2>&1 &
    echo $! >"$DIR/run/$name.pid"
}

# running PID: alive and not a zombie (a zombie is dead for our purposes; here
# PID 1 may take seconds to reap the daemons we leave behind).  The main
# thread of a daemon may be a zombie while other threads still run, so a
# zombie counts as dead only once it has a single thread left.
running() {
    local st th
    st=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    th=$(awk '/^Threads:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$st" ] || return 1
    [ "$st" != Z ] && [ "$st" != X ] && return 0
    [ "${th:-1}" -gt 1 ]
}
alive() { local p; p=$(cat "$DIR/run/$1.pid" 2>/dev/null) && running "$p"; }

cmd_start() {
    local t0 fsid monport rgwport osduuid conf
    t0=$(now)
    [ -n "${1:-}" ] || die "usage: start DIR"
    mkdir -p "$1"
    DIR=$(cd "$1" && pwd)
    command -v radosgw >/dev/null || die "radosgw not installed (run: $0 install)"
    if ls "$DIR"/run/*.pid >/dev/null 2>&1; then
        cmd_stop "$DIR" >/dev/null 2>&1 || true
    fi
    rm -rf "$DIR/mon" "$DIR/osd" "$DIR/run" "$DIR/log" "$DIR/env" "$DIR/ceph.conf" "$DIR/monmap"
    mkdir -p "$DIR/mon/a" "$DIR/osd/0" "$DIR/run" "$DIR/log"

    fsid=$(uuidgen)
    monport=$(free_port)
    rgwport=${WS_RGW_PORT:-$(free_port)}
    [ "$rgwport" != "$monport" ] || rgwport=$(free_port)
    port_free "$rgwport" || die "port $rgwport is in use"
    conf=$DIR/ceph.conf
    cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$monport]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
keyring = /dev/null
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
pid file = $DIR/run/\$name.daemon.pid
log file = $DIR/log/\$name.log
log to stderr = false
err to stderr = false
log to syslog = false
crash dir = $DIR/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
mon osd full ratio = 0.99
mon osd backfillfull ratio = 0.98
mon osd nearfull ratio = 0.97
mon warn on insecure global id reclaim = false
mon warn on insecure global id reclaim allowed = false
# Default 1 s; each osdmap change (osd boot, every pool radosgw creates)
# waits for it: start takes ~14 s with the default, ~3.5 s with 0.1.
paxos propose interval = 0.1

[mon]
mon data = $DIR/mon/\$id
mon initial members = a

[osd]
osd data = $DIR/osd/\$id
osd objectstore = memstore
memstore device bytes = ${WS_RGW_MEM_BYTES:-4294967296}
osd crush update on start = true

[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$rgwport tcp_nodelay=1
rgw data = $DIR/run/rgw
rgw init timeout = 120
EOF

    # mon
    monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$monport]" "$DIR/monmap" >/dev/null \
        || fail_start "monmaptool"
    ceph-mon -c "$conf" -i a --mkfs --monmap "$DIR/monmap" >"$DIR/log/mon.a.mkfs.out" 2>&1 \
        || fail_start "ceph-mon --mkfs"
    spawn mon.a ceph-mon -c "$conf" -i a -f
    wait_for 30 timeout 5 ceph -c "$conf" mon stat || fail_start "mon did not answer"

    # osd (memstore)
    osduuid=$(uuidgen)
    local id
    id=$(timeout 20 ceph -c "$conf" osd new "$osduuid" 2>>"$DIR/log/osd.0.mkfs.out") || fail_start "ceph osd new"
    [ "$id" = 0 ] || fail_start "unexpected osd id '$id'"
    ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osduuid" >>"$DIR/log/osd.0.mkfs.out" 2>&1 \
        || fail_start "ceph-osd --mkfs"
    spawn osd.0 ceph-osd -c "$conf" -i 0 -f
    # radosgw needs the OSD up to create its pools.
    wait_for 30 bash -c "timeout 5 ceph -c '$conf' osd dump 2>/dev/null | grep -q '^osd.0 up'" \
        || fail_start "osd.0 did not come up"

    # radosgw
    mkdir -p "$DIR/run/rgw"
    spawn rgw radosgw -c "$conf" -n client.rgw.a -f
    local url=http://127.0.0.1:$rgwport
    local end=$(( $(date +%s) + ${WS_RGW_WAIT:-90} ))
    until curl -s -o /dev/null --max-time 2 "$url/"; do
        alive rgw || fail_start "radosgw exited"
        [ "$(date +%s)" -lt "$end" ] || fail_start "radosgw did not answer HTTP on $url within ${WS_RGW_WAIT:-90} s"
        sleep 0.2
    done

    radosgw-admin -c "$conf" user create --uid=walship --display-name=walship \
        --access-key="$ACCESS_KEY" --secret="$SECRET_KEY" >"$DIR/log/user-create.out" 2>&1 \
        || fail_start "radosgw-admin user create"

    cat >"$DIR/env" <<EOF
WS_S3_ENDPOINT=$url
AWS_ACCESS_KEY_ID=$ACCESS_KEY
AWS_SECRET_ACCESS_KEY=$SECRET_KEY
AWS_REGION=$REGION
EOF
    echo "radosgw.sh: started $url (dir $DIR) in $(elapsed "$t0") s"
}

cmd_stop() {
    [ -n "${1:-}" ] || die "usage: stop DIR"
    [ -d "$1" ] || return 0
    DIR=$(cd "$1" && pwd)
    local f pid pids=() end t0
    t0=$(now)
    # TERM all at once; after a short grace KILL whatever is left.  On TERM
    # radosgw and ceph-osd take ~5 s (the osd also dumps memstore to disk),
    # and the data is throwaway, so the grace is short (WS_RGW_STOP_WAIT, 1 s).
    for f in rgw osd.0 mon.a; do
        pid=$(cat "$DIR/run/$f.pid" 2>/dev/null) || continue
        # Guard against a recycled PID: it must still be one of our daemons.
        grep -qE 'ceph-mon|ceph-osd|radosgw' "/proc/$pid/cmdline" 2>/dev/null || continue
        if running "$pid"; then kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); fi
    done
    local ticks=$(( ${WS_RGW_STOP_WAIT:-1} * 10 ))
    for pid in "${pids[@]}"; do
        while running "$pid" && [ "$ticks" -gt 0 ]; do sleep 0.1; ticks=$((ticks - 1)); done
        if running "$pid"; then
            kill -KILL "$pid" 2>/dev/null || true
            while running "$pid"; do sleep 0.05; done
        fi
    done
    # Dead daemons were reparented to PID 1; give it a moment to reap them so
    # that a following pgrep does not see <defunct> entries (bounded, 5 s).
    end=$(( $(date +%s) + 5 ))
    for pid in "${pids[@]}"; do
        while [ -e "/proc/$pid" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done
    done
    rm -f "$DIR"/run/*.pid
    echo "radosgw.sh: stopped (dir $DIR) in $(elapsed "$t0") s"
}

# Smoke test with the curl CLI.  Debian 12's curl 7.88 --aws-sigv4 quirks:
#  - it sends no x-amz-content-sha256 header and radosgw then answers 403
#    SignatureDoesNotMatch; passing -H 'x-amz-content-sha256: VALUE' makes curl
#    both sign that header and use VALUE as the payload hash of the canonical
#    request.  VALUE may be UNSIGNED-PAYLOAD or the real hex SHA-256 of the
#    body (radosgw checks a real hash: 400 XAmzContentSHA256Mismatch).
#  - it does not sort the query string: put parameters in sorted order
#    yourself (?list-type=2&prefix=x works, ?prefix=x&list-type=2 gets 403).
#  - -H headers (If-Match, If-None-Match) are signed too.
cmd_smoke() {
    [ -n "${1:-}" ] || die "usage: smoke DIR"
    local env=$1/env
    [ -f "$env" ] || die "no $env (run start first)"
    local WS_S3_ENDPOINT AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
    # shellcheck disable=SC1090
    . "$env"
    local E=$WS_S3_ENDPOINT B tmp fails=0 code etag hash
    B="smoke-$(date +%s%N)"
    local U='x-amz-content-sha256: UNSIGNED-PAYLOAD'
    tmp=$(mktemp -d)
    # s3 [curl args...]: signed request; prints the HTTP status, body in $tmp/body
    s3() {
        curl -sS -o "$tmp/body" -w '%{http_code}' \
            --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@"
    }
    check() {   # check NAME EXPECTED ACTUAL
        if [ "$2" = "$3" ]; then printf 'ok   %-44s %s\n' "$1" "$3"
        else printf 'FAIL %-44s got %s want %s\n' "$1" "$3" "$2"; sed 's/^/     /' "$tmp/body"; echo; fails=$((fails + 1)); fi
    }
    printf 'walship smoke %s\n' "$(date -u +%FT%TZ)" >"$tmp/obj"
    hash=$(sha256sum "$tmp/obj" | cut -d' ' -f1)

    check "PUT /bucket"                         200 "$(s3 -X PUT -H "$U" "$E/$B")"
    check "PUT object (real payload hash)"      200 "$(s3 -T "$tmp/obj" -H "x-amz-content-sha256: $hash" "$E/$B/k1")"
    check "PUT object (wrong payload hash)"     400 "$(s3 -T "$tmp/obj" -H "x-amz-content-sha256: $(echo x | sha256sum | cut -d' ' -f1)" "$E/$B/k1")"
    check "PUT object (no x-amz-content-sha256)" 403 "$(s3 -T "$tmp/obj" "$E/$B/k1")"
    code=$(s3 -H "$U" "$E/$B/k1")
    cmp -s "$tmp/body" "$tmp/obj" || code="$code(body differs)"
    check "GET object"                          200 "$code"
    check "PUT If-None-Match: * (existing key)" 412 "$(s3 -T "$tmp/obj" -H "$U" -H 'If-None-Match: *' "$E/$B/k1")"
    check "PUT If-None-Match: * (new key)"      200 "$(s3 -T "$tmp/obj" -H "$U" -H 'If-None-Match: *' "$E/$B/k2")"
    code=$(s3 -I -H "$U" "$E/$B/k1" -D "$tmp/hdr")
    etag=$(tr -d '\r' <"$tmp/hdr" | sed -n 's/^[Ee][Tt][Aa][Gg]: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p')
    check "HEAD object (etag $etag)"            200 "$code"
    check "PUT If-Match: <etag> (unquoted)"     200 "$(s3 -T "$tmp/obj" -H "$U" -H "If-Match: $etag" "$E/$B/k1")"
    check "PUT If-Match: \"<etag>\" (quoted)"   412 "$(s3 -T "$tmp/obj" -H "$U" -H "If-Match: \"$etag\"" "$E/$B/k1")"
    check "PUT If-Match: <wrong etag>"          412 "$(s3 -T "$tmp/obj" -H "$U" -H 'If-Match: 0123456789abcdef0123456789abcdef' "$E/$B/k1")"
    check "PUT If-Match: <etag> (missing key)"  412 "$(s3 -T "$tmp/obj" -H "$U" -H "If-Match: $etag" "$E/$B/nokey")"
    check "GET with wrong secret"               403 "$(curl -sS -o "$tmp/body" -w '%{http_code}' -H "$U" \
        --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:wrong$AWS_SECRET_ACCESS_KEY" "$E/$B/k1")"
    check "GET with unknown access key"         403 "$(curl -sS -o "$tmp/body" -w '%{http_code}' -H "$U" \
        --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "NOSUCHKEY:$AWS_SECRET_ACCESS_KEY" "$E/$B/k1")"
    check "GET anonymous"                       403 "$(curl -sS -o "$tmp/body" -w '%{http_code}' "$E/$B/k1")"
    check "ListObjectsV2 query in wrong order"  403 "$(s3 -H "$U" "$E/$B?prefix=k&list-type=2")"
    code=$(s3 -H "$U" "$E/$B?list-type=2&prefix=k")
    grep -q '<ListBucketResult.*<Key>k1</Key>.*<Key>k2</Key>.*<KeyCount>2</KeyCount>' "$tmp/body" || code="$code(bad XML)"
    check "ListObjectsV2 (?list-type=2&prefix=k)" 200 "$code"
    check "DELETE object"                       204 "$(s3 -X DELETE -H "$U" "$E/$B/k2")"
    # 20 GETs on one connection: ~40 ms each without tcp_nodelay=1.
    local urls=() _ t
    for _ in $(seq 20); do urls+=("$E/$B/k1"); done
    t=$(curl -sS -o /dev/null -w '%{time_total}\n' -H "$U" --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
        --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "${urls[@]}" | awk '{s+=$1} END {printf "%.1f", s*1000/NR}')
    printf 'info GET on a reused connection: %s ms average over 20\n' "$t"
    rm -rf "$tmp"
    if [ "$fails" -ne 0 ]; then echo "radosgw.sh: smoke: $fails check(s) failed" >&2; return 1; fi
    echo "radosgw.sh: smoke passed"
}

case "${1:-}" in
    install) cmd_install ;;
    start)   shift; cmd_start "$@" ;;
    stop)    shift; cmd_stop "$@" ;;
    smoke)   shift; cmd_smoke "$@" ;;
    *) echo "usage: $0 install | start DIR | stop DIR | smoke DIR" >&2; exit 2 ;;
esac
