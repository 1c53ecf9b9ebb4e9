#!/usr/bin/env bash
# walship's history-checking torture harness: one command, seedable.
#
#   tests/torture/run.sh [--seed N] [--minutes M | --runs K] [--scenario mixed|restart-busy]
#                        [--size smoke|full] [--restart-after S] [--run-seed N] [--keep] [-v]
#
# Env: WS_BIN (the walship binary; default build/tools/walship),
#      WS_TEST_TMP (scratch dir; default /tmp).
# Prints runs, states recorded and checked, acknowledged outcomes checked,
# pauses, kills and failures at the end; exits non-zero on any failure,
# printing the seed of the failed run and what differed. See torture.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${WS_BIN:=$here/../../build/tools/walship}"
[ -x "$WS_BIN" ] || { echo "run.sh: walship binary not found at $WS_BIN (set WS_BIN)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "run.sh: python3 not found" >&2; exit 2; }
export WS_BIN
# -B: no __pycache__ in the source tree.
exec python3 -B "$here/torture.py" "$@"
