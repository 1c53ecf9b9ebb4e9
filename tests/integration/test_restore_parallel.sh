#!/usr/bin/env bash
# restore and verify --parallelism N on a file:// sink (restore_parallel.sh
# says what is checked).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

URL="file://$ROOT/sink"
obj_keys() { (cd "$ROOT/sink" && find a -type f | grep -v '/\.'); }
obj_corrupt() { flip_middle "$ROOT/sink/$1"; }
obj_delete() { rm -f "$ROOT/sink/$1"; }

. "$HERE/restore_parallel.sh"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
