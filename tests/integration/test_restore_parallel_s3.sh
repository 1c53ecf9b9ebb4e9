#!/usr/bin/env bash
# restore and verify --parallelism N on an s3:// sink, radosgw (the ctest
# fixture: see tests/s3/radosgw.sh); restore_parallel.sh says what is
# checked. Objects are listed, damaged and removed with the curl CLI.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

need_radosgw
load_s3_env "$WS_S3_DIR/env"
E=$WS_S3_ENDPOINT
B=par-$$-$RANDOM
make_bucket "$E" "$B"
URL="s3://$B?endpoint=$E"
s3() {
	curl -sS --max-time 30 -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}
# (at most 1000 keys: one page is enough here)
obj_keys() {
	local code
	code=$(s3 -o "$ROOT/list.xml" "$E/$B?list-type=2&prefix=a%2F") || true
	[ "$code" = 200 ] || { echo "list: HTTP $code" >&2; return 1; }
	grep -o '<Key>[^<]*</Key>' "$ROOT/list.xml" | sed 's/<Key>\(.*\)<\/Key>/\1/'
}
obj_corrupt() {
	local code
	code=$(s3 -o "$ROOT/obj.bin" "$E/$B/$1") || true
	[ "$code" = 200 ] || { bad "GET $1: HTTP $code"; return 0; }
	flip_middle "$ROOT/obj.bin"
	code=$(s3 -o /dev/null -X PUT --data-binary "@$ROOT/obj.bin" "$E/$B/$1") || true
	[ "$code" = 200 ] || bad "PUT $1: HTTP $code"
}
obj_delete() {
	local code
	code=$(s3 -o /dev/null -X DELETE "$E/$B/$1") || true
	[ "$code" = 204 ] || [ "$code" = 200 ] || bad "DELETE $1: HTTP $code"
}

. "$HERE/restore_parallel.sh"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
