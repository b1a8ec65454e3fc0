#!/bin/bash
# The whole storage matrix of docs/benchmarks.md ("Storage engines"): three
# runs of every sync policy x size x batch on Bitcask and RocksDB, then the
# 1 GiB start-up run, each as JSON in OUT, with the load average before each
# command; then the per-cell Bitcask/RocksDB ratios (min / median / max).
#
#   tools/storage-bench/run_matrix.sh [BENCH] [OUT]
#   BENCH: default build/bin/estuary-storage-bench; OUT: default a new /tmp dir
#
# 8.5 minutes on the 2-core VM of docs/benchmarks.md at load 2.6-5.4 (8 for
# the three runs, 0.5 for start-up); RUNS=1 for one run, STARTUP=0 to skip
# start-up.
set -euo pipefail
BENCH=${1:-build/bin/estuary-storage-bench}
OUT=${2:-$(mktemp -d /tmp/estuary_storage_matrix_XXXXXX)}
RUNS=${RUNS:-3}
STARTUP=${STARTUP:-1}
mkdir -p "$OUT"
note() { echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $*" | tee -a "$OUT/log"; }
for i in $(seq 1 "$RUNS"); do
  note "run $i always"
  nice -n 19 "$BENCH" --messages 1000 --size 100,1024,16384 --batch 1,64 --sync always --json \
    > "$OUT/always-$i.json"
  note "run $i interval,none"
  nice -n 19 "$BENCH" --messages 20000 --size 100,1024,16384 --batch 1,64 --sync interval,none \
    --json > "$OUT/interval-none-$i.json"
done
if [ "$STARTUP" = 1 ]; then
  note "start-up 1 GiB"
  nice -n 19 "$BENCH" --messages 1000 --size 1024 --batch 64 --sync none --startup-gib 1 \
    --startup-size 1024 --json > "$OUT/startup.json"
fi
note "end"
python3 "$(dirname "$0")/summarize_matrix.py" "$OUT"/always-*.json "$OUT"/interval-none-*.json \
  | tee "$OUT/summary.txt"
echo "results: $OUT"
