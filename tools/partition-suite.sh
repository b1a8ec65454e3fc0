#!/usr/bin/env bash
# The silent-partition suite (issue 29, docs/reliability.md "Silent
# partitions"): every case of partition_fault_test, RUNS times each (4 by
# default: 48 runs), then one summary row per case. Root only (network
# namespaces). env: BUILD_DIR (build), RUNS (4), SEED (a fixed base seed,
# default random), LOG (where the raw output goes).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
LOG=${LOG:-$(mktemp /tmp/estuary-partition-suite-XXXXXX.log)}
export ESTUARY_PARTITION_MATRIX=full ESTUARY_PARTITION_RUNS=${RUNS:-4}
if [[ -n "${SEED:-}" ]]; then export ESTUARY_PARTITION_SEED=$SEED; fi
status=0
"$BUILD_DIR/tests/partition_fault_test" >"$LOG" 2>&1 || status=$?
python3 tools/partition-summary.py "$LOG"
echo "raw output: $LOG"
exit $status
