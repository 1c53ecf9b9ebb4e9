# shellcheck shell=bash
# Pieces the side-by-side benches share (run_seal_bench.sh,
# run_restore_bench.sh), sourced after OUT and LS are set:
#   find_litestream     LS := a litestream v0.3.13 binary: LS as given, else
#                       an npm install of @flydotio/litestream-linux-x64
#                       under $OUT; empty (said why) when neither works
#   ls_config DIR URL   a litestream.yml replicating DIR/db.sqlite to URL
#                       (file:// or the radosgw of $WS_S3_ENDPOINT)
#   now / since T0      wall-clock seconds
#   cpu_of FILE         user+sys of a /usr/bin/time -f '%U %S' file

find_litestream() {
	[ -n "$LS" ] && return 0
	local dir=$OUT/litestream-npm
	if [ ! -x "$dir/node_modules/@flydotio/litestream-linux-x64/litestream" ]; then
		if ! command -v npm >/dev/null; then
			echo "litestream: not installed (no npm): walship only"; return 0
		fi
		if ! timeout 180 npm install --no-audit --no-fund --prefix "$dir" @flydotio/litestream-linux-x64 \
			>"$OUT/npm.log" 2>&1; then
			echo "litestream: npm install @flydotio/litestream-linux-x64 failed ($(tail -1 "$OUT/npm.log")): walship only"
			return 0
		fi
	fi
	LS=$(find "$dir/node_modules" -type f -name litestream -perm -u+x | head -1)
	[ -n "$LS" ] || echo "litestream: no binary in $dir/node_modules: walship only"
}

now() { date +%s.%N; }
since() { python3 -c "import sys; print('%.4f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$(now)"; }
cpu_of() { awk '{printf "%.3f", $1 + $2}' "$1"; }

ls_config() {
	echo "dbs:"
	echo "  - path: $1/db.sqlite"
	echo "    replicas:"
	case "$2" in
	file://*) echo "      - type: file"; echo "        path: ${2#file://}" ;;
	*) local b=${2#s3://}
		echo "      - type: s3"; echo "        bucket: ${b%%\?*}"; echo "        path: db"
		echo "        endpoint: $WS_S3_ENDPOINT"; echo "        region: ${AWS_REGION:-us-east-1}"
		echo "        force-path-style: true"
		echo "        access-key-id: $AWS_ACCESS_KEY_ID"; echo "        secret-access-key: $AWS_SECRET_ACCESS_KEY" ;;
	esac
	echo "        sync-interval: 1s"
}
