#!/usr/bin/env bash
# replication-bench.sh: QoS 1 to a persistent session on a 3-node loopback
# cluster, with every partition replicated 3 times against once, on Bitcask
# and on RocksDB, side by side (issue 7 point 8). The subscriber keeps a
# persistent session (estuary-bench --session-expiry), so every delivery is
# written to its node's store and to its client id's partition before the
# publisher gets its PUBACK (docs/partitions.md "Sessions on partitions").
# Prints markdown for docs/benchmarks.md (progress goes to stderr).
#
#   tools/replication-bench.sh > replication-report.md
#
# Environment: BUILD_DIR (default ./build), BENCH_SECONDS (default 10) per
# run, BENCH_RATE_FRACTION (default 0.5): the latency run offers this
# fraction of the lowest flat-out throughput of the four set-ups to all of
# them; SYNC (default interval) the nodes' --sync; STORAGES (default
# "bitcask rocksdb"), REPLICAS (default "1 3"), NODE_FLAGS (more estuaryd
# flags, e.g. "--replication-ack leader").
# Nodes run with --shards 1; one publisher and one persistent subscriber on
# node 1, 64-byte payloads. The client id's partition has its leader on any
# node, so most runs replicate across nodes even with the clients on one.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
BIN=$BUILD_DIR/bin
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_RATE_FRACTION=${BENCH_RATE_FRACTION:-0.5}
SYNC=${SYNC:-interval}
STORAGES=${STORAGES:-bitcask rocksdb}
REPLICAS=${REPLICAS:-1 3}
NODE_FLAGS=${NODE_FLAGS:-}  # more estuaryd flags, e.g. "--replication-ack leader"
PAYLOAD=64

for program in estuaryd estuary-cluster estuary-bench; do
  [[ -x $BIN/$program ]] || { echo "replication-bench: $BIN/$program is missing; build it first" >&2; exit 1; }
done
command -v jq > /dev/null || { echo "replication-bench: needs jq" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/replication-bench.XXXXXX")
LAUNCHER_PID=
log() { echo "replication-bench: $*" >&2; }
stop_cluster() {
  if [[ -n $LAUNCHER_PID ]] && kill -0 "$LAUNCHER_PID" 2>/dev/null; then
    kill -TERM "$LAUNCHER_PID"
    wait "$LAUNCHER_PID" 2>/dev/null || true
  fi
  LAUNCHER_PID=
}
trap 'stop_cluster; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# start STORAGE REPLICAS: a fresh 3-node cluster; sets MQTT1 to node 1's address.
MQTT1=
start() {
  local dir=$WORK/$1-$2
  mkdir -p "$dir"
  "$BIN"/estuary-cluster start --nodes 3 --storage "$1" --dir "$dir" --estuaryd "$BIN/estuaryd" \
    --ready-timeout 120000 -- --shards 1 --log-level warn --sync "$SYNC" --cluster-replicas "$2" \
    --max-queued-messages 1000000 $NODE_FLAGS > "$dir/launcher.out" 2> "$dir/launcher.err" &
  LAUNCHER_PID=$!
  local waited=0
  until grep -q '^estuary-cluster ready ' "$dir/launcher.out" 2>/dev/null; do
    kill -0 "$LAUNCHER_PID" 2>/dev/null || { cat "$dir/launcher.err" >&2; log "estuary-cluster exited"; exit 1; }
    (( waited++ < 2400 )) || { log "no ready line in 120 s"; exit 1; }
    sleep 0.05
  done
  MQTT1=$(grep '^estuaryd ready ' "$dir/launcher.out" | grep -E '( |^)node=1( |$)' | sed -n 's/.* mqtt=\([^ ]*\).*/\1/p')
  [[ -n $MQTT1 ]] || { log "no ready line for node 1"; exit 1; }
}

# run OUT [estuary-bench flags...]
RUN=0
# A node may refuse CONNECTs for a moment after its ready line (the
# client-id registry's first partitions are being opened): tried 5 times.
run() {
  local out=$1 attempt
  shift
  for attempt in 1 2 3 4 5; do
    RUN=$(( RUN + 1 ))
    if "$BIN"/estuary-bench --json -P 1 -S 1 -q 1 -s "$PAYLOAD" -t "replication-bench/$$/$RUN" \
        --session-expiry 3600 --drain-timeout 60 --connect-timeout 60 -b "mqtt://$MQTT1" -d "$BENCH_SECONDS" "$@" \
        > "$out" 2> "$WORK/bench.err"; then
      return 0
    fi
    log "attempt $attempt: $(tail -1 "$WORK/bench.err")"
    sleep 1
  done
  log "estuary-bench failed 5 times"
  exit 1
}

ms() { awk -v ns="$1" 'BEGIN { printf "%.2f", ns / 1e6 }'; }

declare -A rate=()
for storage in $STORAGES; do
  for replicas in $REPLICAS; do
    log "$storage, $replicas replica(s): flat out"
    start "$storage" "$replicas"
    run "$WORK/max-$storage-$replicas.json"
    rate[$storage-$replicas]=$(jq -r '.receive_rate | floor' "$WORK/max-$storage-$replicas.json")
    stop_cluster
  done
done
lowest=$(printf '%s\n' "${rate[@]}" | sort -n | head -1)
offered=$(awk -v m="$lowest" -v f="$BENCH_RATE_FRACTION" 'BEGIN { printf "%d", m * f }')
(( offered > 0 )) || offered=100

echo "### Cluster: QoS 1 to a persistent session, replication 3 against 1 (3 nodes, loopback)"
echo
echo "1 publisher -> 1 persistent subscriber (estuary-bench --session-expiry 3600), both on node 1,"
echo "${PAYLOAD}-byte payloads, estuaryd --shards 1 --sync $SYNC. Throughput: flat out for ${BENCH_SECONDS} s;"
echo "latency (publish to delivery) at $offered msg/s offered to every set-up (${BENCH_RATE_FRACTION} of the lowest"
echo "flat-out figure). Lost: flat-out run + latency run."
echo
echo "| storage | replicas | throughput msg/s | lost | latency p50 ms | p99 ms |"
echo "|---|---:|---:|---:|---:|---:|"
for storage in $STORAGES; do
  for replicas in $REPLICAS; do
    log "$storage, $replicas replica(s): latency at $offered msg/s"
    start "$storage" "$replicas"
    run "$WORK/lat-$storage-$replicas.json" -r "$offered"
    stop_cluster
    echo "| $storage | $replicas | ${rate[$storage-$replicas]} | $(jq -r '.lost' "$WORK/max-$storage-$replicas.json") + $(jq -r '.lost' "$WORK/lat-$storage-$replicas.json") | $(ms "$(jq -r '.latency_ns.p50' "$WORK/lat-$storage-$replicas.json")") | $(ms "$(jq -r '.latency_ns.p99' "$WORK/lat-$storage-$replicas.json")") |"
  done
done
echo
