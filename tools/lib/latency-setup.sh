# Shared by tools/connect-latency.sh and tools/retained-latency.sh: a work
# folder removed at exit, one estuaryd alone and a 3-node estuary-cluster
# on loopback, stopped by PID at exit. Source it after setting NAME (used in
# messages and the work folder's name), BIN, STORAGE and SYNC.

WORK=$(mktemp -d "${TMPDIR:-/tmp}/$NAME.XXXXXX")
PIDS=()
latency_cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2> /dev/null || true; done
  rm -rf "$WORK"
}
trap latency_cleanup EXIT
trap 'exit 130' INT TERM

# ready_port FILE: waits for "estuaryd ready" in FILE and prints its MQTT port.
ready_port() {
  for _ in $(seq 300); do
    if grep -q "estuaryd ready" "$1" 2> /dev/null; then
      grep -o "mqtt=127.0.0.1:[0-9]*" "$1" | head -1 | cut -d: -f2
      return
    fi
    sleep 0.1
  done
  echo "$NAME: no ready line in $1" >&2
  exit 1
}

# start_single [FLAG...]: one estuaryd alone with the storage flags; sets SINGLE
# to its MQTT port.
start_single() {
  echo "$NAME: one node alone" >&2
  local store_flags=(--storage "$STORAGE")
  [[ $STORAGE != memory ]] && store_flags+=(--data-dir "$WORK/single" --sync "$SYNC")
  "$BIN/estuaryd" --mqtt 127.0.0.1:0 --amqp 127.0.0.1:0 --admin 127.0.0.1:0 "$@" --shards 1 \
    --log-level warn "${store_flags[@]}" > "$WORK/single.out" 2> "$WORK/single.err" &
  PIDS+=($!)
  SINGLE=$(ready_port "$WORK/single.out")
}

# start_cluster: a 3-node estuary-cluster; sets NODE1 and NODE2 to the MQTT
# ports of nodes 1 and 2 (from the launcher's endpoint table).
start_cluster() {
  echo "$NAME: 3-node cluster" >&2
  "$BIN/estuary-cluster" start --nodes 3 --dir "$WORK/cluster" --storage "$STORAGE" \
    $([[ $STORAGE != memory ]] && echo --sync "$SYNC") -- --shards 1 --log-level warn > "$WORK/cluster.out" 2>&1 &
  PIDS+=($!)
  NODE1= NODE2=
  for _ in $(seq 600); do
    if [[ -f $WORK/cluster.out ]]; then
      NODE1=$(awk '$1 == "1" && $3 ~ /^127\.0\.0\.1:/ { split($3, a, ":"); print a[2]; exit }' "$WORK/cluster.out")
      NODE2=$(awk '$1 == "2" && $3 ~ /^127\.0\.0\.1:/ { split($3, a, ":"); print a[2]; exit }' "$WORK/cluster.out")
    fi
    [[ -n $NODE1 && -n $NODE2 ]] && break
    sleep 0.1
  done
  [[ -n $NODE1 && -n $NODE2 ]] || { echo "$NAME: the cluster did not start:" >&2; cat "$WORK/cluster.out" >&2; exit 1; }
}
