#!/usr/bin/env bash
# A checkpoint artifact larger than the store takes in one PUT, on the
# radosgw the ctest fixture starts:
#   1. radosgw's largest single PUT lowered to 32 MiB (rgw_max_put_size,
#      through the monitor's config database, for this test only): a 40 MiB
#      database's artifact as one PUT (the default multipart_threshold_bytes,
#      64 MiB) is refused by the store, the checkpoint fails, saying so;
#   2. with multipart_threshold_bytes=16MiB&multipart_part_bytes=8MiB the
#      same artifact goes up in parts: checkpoint, restore --checkpoint
#      byte-identical to the source, verify passes; through
#      tests/s3/faultproxy.py delaying each GET, the proxy sees the
#      artifact's ranges read several at once;
#   3. a part failing mid-way (WS_FAULT s3.multipart.part on the second
#      window of parts): the checkpoint fails cleanly (exit 1, no new
#      checkpoint listed), ListMultipartUploads shows no upload left, and
#      the next checkpoint succeeds.
# (Multi-GiB databases are the same code at a larger part count; the store
# unit tests, test_store_s3 test_multipart_*, cover the replies radosgw cannot
# be made to send.)
#
# Env: WS_BIN, WS_TEST_TMP, WS_S3_DIR, WS_FAULTS. Without WS_S3_DIR the test
# fails: it never passes without a server.
set -euo pipefail

# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"

need_radosgw
load_s3_env "$WS_S3_DIR/env"
E=$WS_S3_ENDPOINT
CEPH=(ceph -c "$WS_S3_DIR/ceph.conf")

B="walship-mp-$(date +%s)-$$"
make_bucket "$E" "$B"
U1="s3://$B/one?endpoint=$E"
U="s3://$B/mp?endpoint=$E&multipart_threshold_bytes=16MiB&multipart_part_bytes=8MiB"

# Multipart uploads still open in the bucket (curl 7.88 signs "uploads"
# only when it is spelt "uploads=").
uploads_left() {
	curl -sS --max-time 30 --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
		"$E/$B?uploads=" >uploads.xml
	grep -q ListMultipartUploadsResult uploads.xml || { cat uploads.xml >&2; echo -1; return; }
	grep -o '<UploadId>' uploads.xml | wc -l
}
# same_image A B: byte for byte, but for the header's read and write
# versions (offsets 18, 19): restore writes a rollback-journal database
# (docs/CLI.md, restore), the source is in WAL mode.
same_image() {
	[ "$(stat -c %s "$1")" = "$(stat -c %s "$2")" ] && cmp -s -n 18 "$1" "$2" && cmp -s -i 20 "$1" "$2"
}
ncheckpoints() { "$WS_BIN" ls --sink "$U" --checkpoints --json | grep -c . || true; }

restore_put_size() { timeout 30 "${CEPH[@]}" config rm client.rgw.a rgw_max_put_size >/dev/null 2>&1 || true; }
trap 'restore_put_size; cleanup' EXIT
timeout 30 "${CEPH[@]}" config set client.rgw.a rgw_max_put_size $((32 << 20))
sleep 2 # (radosgw takes the monitor's config as it comes)

sq big.db "PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER PRIMARY KEY, v BLOB);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 10000)
INSERT INTO t SELECT i, randomblob(4000) FROM s;" >/dev/null
size=$(stat -c %s big.db)
echo "  database: $size bytes"

echo "# 1. one PUT of more than the store takes"
ws replicate --sink "$U1" --once big=big.db
check "replicate --once: exit 0" [ "$rc" = 0 ]
ws checkpoint --sink "$U1"
check "a checkpoint whose artifact is one PUT over rgw_max_put_size fails: exit 1 ($rc)" \
	eval '[ "$rc" = 1 ] && grep -q "EntityTooLarge" err'

echo "# 2. the same artifact in parts"
ws replicate --sink "$U" --once big=big.db
check "replicate --once: exit 0" [ "$rc" = 0 ]
ws checkpoint --sink "$U"
check "checkpoint: exit 0 ($rc)" eval '[ "$rc" = 0 ] && grep -q "\"committed\":true" out'
check "no multipart upload left open" [ "$(uploads_left)" = 0 ]
sq big.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
ws restore --sink "$U" --tenant big --checkpoint latest -o r.db
check "restore --checkpoint latest is byte-identical to the source (but for bytes 18, 19)" eval '[ "$rc" = 0 ] && same_image big.db r.db'
ws verify --sink "$U" --tenant big
check "verify: exit 0" [ "$rc" = 0 ]
# The artifact's ranges are read several at once: through the proxy, each
# request delayed 300 ms, more than one waits there at the same time.
start_faultproxy "$E"
set_fault '{"mode": "latency", "latency_ms": 300, "methods": ["GET"]}'
ws restore --sink "s3://$B/mp?endpoint=$PROXY" --tenant big --checkpoint latest -o r3.db
overlap=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["delayed_max"])' proxy.stats)
check "restore through a 300 ms proxy: byte-identical, its ranges read $overlap at once (>= 2)" \
	eval '[ "$rc" = 0 ] && same_image big.db r3.db && [ "$overlap" -ge 2 ]'
kill "$PROXY_PID" 2>/dev/null || true
wait "$PROXY_PID" 2>/dev/null || true

echo "# 3. a part failing mid-way"
if [ "${WS_FAULTS:-0}" = 1 ]; then
	sq big.db "UPDATE t SET v = randomblob(4000) WHERE x % 7 = 0;"
	ws replicate --sink "$U" --once big=big.db
	n0=$(ncheckpoints)
	set +e
	WS_FAULT=s3.multipart.part:2 "$WS_BIN" checkpoint --sink "$U" >out 2>err
	rc=$?
	set -e
	check "checkpoint with its second window of parts failing: exit 1 ($rc), naming the fault" \
		eval '[ "$rc" = 1 ] && grep -q "s3.multipart.part" err'
	check "... no multipart upload left open" [ "$(uploads_left)" = 0 ]
	check "... no checkpoint added" [ "$(ncheckpoints)" = "$n0" ]
	ws checkpoint --sink "$U"
	check "the next checkpoint: exit 0 ($rc)" eval '[ "$rc" = 0 ] && grep -q "\"committed\":true" out'
	sq big.db "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
	ws restore --sink "$U" --tenant big --checkpoint latest -o r2.db
	check "restore --checkpoint latest is byte-identical to the source (but for bytes 18, 19)" eval '[ "$rc" = 0 ] && same_image big.db r2.db'
	ws verify --sink "$U" --fail-on-orphans
	check "verify --fail-on-orphans: exit 0" [ "$rc" = 0 ]
else
	echo "  (fault sites not built: WS_FAULTS is off)"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
