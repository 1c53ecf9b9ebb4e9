#!/usr/bin/env bash
# Interleaved runs of bench/run_follow_lag.sh (base, new, base, ...), REPS
# pairs (default 7), each run's printed line appended to OUT/base.txt or
# OUT/new.txt and, with its start time and load average, to OUT/runs.txt.
#   BASE_BIN=... NEW_BIN=... bash docs/bench/follow-lag/pairs.sh OUT [run_follow_lag.sh args]
set -u
REPS=${REPS:-7}; OUT=$1; shift
mkdir -p "$OUT"
cd "$(dirname "$0")/../../.."
for i in $(seq "$REPS"); do
	for which in base new; do
		if [ $which = base ]; then bin=$BASE_BIN; else bin=$NEW_BIN; fi
		echo "$(date -u +%T) $which rep $i load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/runs.txt"
		WS_BIN=$bin bash bench/run_follow_lag.sh "$@" 2>&1 | tee -a "$OUT/$which.txt" "$OUT/runs.txt"
	done
done
