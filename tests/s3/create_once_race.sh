#!/usr/bin/env bash
# Does the store let exactly one of N concurrent create-once PUTs
# (If-None-Match: *) to one key win? walship's create-once writes rest on
# it (docs/DESIGN.md "Status and limits": slots).
#
#   tests/s3/create_once_race.sh DIR [ROUNDS] [WRITERS]
#
# DIR: a radosgw started by tests/s3/radosgw.sh start DIR. Each round
# WRITERS (default 8) curl processes PUT different bodies to a new key at
# once; the round passes when exactly one gets 200 and the rest 412, and
# the object then holds the winner's body. Exits 1 naming each failing round.
set -euo pipefail
D=${1:?usage: create_once_race.sh DIR [ROUNDS] [WRITERS]}
ROUNDS=${2:-100} N=${3:-8}
set -a; . "$D/env"; set +a
S="aws:amz:${AWS_REGION:-us-east-1}:s3" U="$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
B="race-$$"
put() { curl -sS --max-time 30 --aws-sigv4 "$S" --user "$U" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"; }
code=$(put -o /dev/null -w '%{http_code}' -X PUT "$WS_S3_ENDPOINT/$B")
[ "$code" = 200 ] || { echo "create_once_race.sh: create bucket $B: HTTP $code" >&2; exit 1; }
bad=0
for r in $(seq 1 "$ROUNDS"); do
	for i in $(seq 1 "$N"); do
		printf 'writer %d round %d' "$i" "$r" >"$W/body.$i"
		put -o /dev/null -w '%{http_code}' -H 'If-None-Match: *' -T "$W/body.$i" "$WS_S3_ENDPOINT/$B/k$r" >"$W/code.$i" &
	done
	wait
	wins=() other=()
	for i in $(seq 1 "$N"); do
		c=$(cat "$W/code.$i")
		case "$c" in 200) wins+=("$i") ;; 412) ;; *) other+=("$i:$c") ;; esac
	done
	got=$(put -s "$WS_S3_ENDPOINT/$B/k$r" || true)
	if [ "${#wins[@]}" != 1 ] || [ "${#other[@]}" != 0 ] || [ "$got" != "writer ${wins[0]} round $r" ]; then
		echo "round $r: winners ${wins[*]:-none}, other answers ${other[*]:-none}, object holds '$got'"
		bad=$((bad + 1))
	fi
done
echo "create_once_race: $ROUNDS rounds of $N writers, $bad without exactly one winner holding the key"
[ "$bad" = 0 ]
