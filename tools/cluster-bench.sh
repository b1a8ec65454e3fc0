#!/usr/bin/env bash
# cluster-bench.sh: a 3-node loopback cluster (estuary-cluster) measured
# with estuary-bench, publisher and subscriber on the same node against on
# different nodes, QoS 0 and 1; then the broker instructions per message of
# a local and of a forwarded delivery under callgrind. Prints markdown for
# docs/benchmarks.md (progress goes to stderr).
#
#   tools/cluster-bench.sh > cluster-report.md
#
# Environment: BUILD_DIR (default ./build), BENCH_SECONDS (default 10) per
# throughput run, BENCH_RATE_FRACTION (default 0.5): latency runs offer
# this fraction of the same-node throughput of that QoS to both placements,
# CALLGRIND_SMALL / CALLGRIND_LARGE (default 2000 / 12000 messages):
# instructions per message = (Ir(large) - Ir(small)) / (large - small),
# which cancels start-up, connection set-up and shutdown (as in
# docs/benchmarks.md); SKIP_CALLGRIND=1, SKIP_THROUGHPUT=1 to run one part;
# KEEP_CALLGRIND=DIR keeps every node's callgrind output there
# (DIR/cg-NAME/node-N.out) for callgrind_annotate; CALLGRIND_QOS (default
# "0 1") the QoS levels measured. CLUSTER_TLS (default 1): the nodes' links
# over mutual TLS as estuary-cluster sets it up; 0 passes --no-cluster-tls.
# Nodes run with --shards 1 and in-memory storage; clients use 64-byte
# payloads, 1 publisher and 1 subscriber.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
BIN=$BUILD_DIR/bin
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_RATE_FRACTION=${BENCH_RATE_FRACTION:-0.5}
CALLGRIND_SMALL=${CALLGRIND_SMALL:-2000}
CALLGRIND_LARGE=${CALLGRIND_LARGE:-12000}
PAYLOAD=64
NODE_FLAGS=(--shards 1 --log-level warn --max-queued-messages 1000000)

for program in estuaryd estuary-cluster estuary-bench; do
  [[ -x $BIN/$program ]] || { echo "cluster-bench: $BIN/$program is missing; build it first" >&2; exit 1; }
done
for tool in jq curl mosquitto_sub; do
  command -v $tool > /dev/null || { echo "cluster-bench: needs $tool" >&2; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cluster-bench.XXXXXX")
LAUNCHER_PID=
log() { echo "cluster-bench: $*" >&2; }

stop_cluster() {
  if [[ -n $LAUNCHER_PID ]] && kill -0 "$LAUNCHER_PID" 2>/dev/null; then
    kill -TERM "$LAUNCHER_PID"
    wait "$LAUNCHER_PID" 2>/dev/null || true
  fi
  LAUNCHER_PID=
}
cleanup() {
  stop_cluster
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_cluster NAME NODES ESTUARYD: starts estuary-cluster in the
# background and waits for its ready line; fills MQTT[1..N] with the nodes'
# MQTT addresses.
declare -A MQTT=() ADMIN=()
start_cluster() {
  local name=$1 nodes=$2 estuaryd=$3 dir=$WORK/$1
  mkdir -p "$dir"
  local tls_flag=()
  [[ ${CLUSTER_TLS:-1} == 0 ]] && tls_flag=(--no-cluster-tls)
  "$BIN"/estuary-cluster start --nodes "$nodes" --storage memory --dir "$dir" --estuaryd "$estuaryd" "${tls_flag[@]}" \
    --ready-timeout 180000 --grace 120000 -- "${NODE_FLAGS[@]}" > "$dir/launcher.out" 2> "$dir/launcher.err" &
  LAUNCHER_PID=$!
  local waited=0
  until grep -q '^estuary-cluster ready ' "$dir/launcher.out" 2>/dev/null; do
    if ! kill -0 "$LAUNCHER_PID" 2>/dev/null; then
      cat "$dir/launcher.err" >&2
      log "estuary-cluster exited before its ready line"
      exit 1
    fi
    (( waited++ < 3600 )) || { log "no ready line in 180 s"; exit 1; }
    sleep 0.05
  done
  MQTT=()
  ADMIN=()
  while read -r line; do
    local node
    node=$(sed -n 's/.* node=\([0-9]*\).*/\1/p' <<< "$line")
    MQTT[$node]=$(sed -n 's/.* mqtt=\([^ ]*\).*/\1/p' <<< "$line")
    ADMIN[$node]=$(sed -n 's/.* admin=\([^ ]*\).*/\1/p' <<< "$line")
  done < <(grep '^estuaryd ready ' "$dir/launcher.out")
}

# hold_route TOPIC SUB_NODE: a persistent session on SUB_NODE subscribed to
# TOPIC at QoS 0 and then disconnected, so that the route exists before a
# run starts (estuary-bench publishes as soon as its own subscriber has its
# SUBACK, before the route has reached node 1; under callgrind that race
# loses whole runs). A QoS 0 message for an offline session is dropped
# (no --queue-qos0-offline), so the session costs one extra match per
# message; local and forwarded runs both have one. Then waits until node 1
# routes TOPIC to SUB_NODE.
HOLD=0
hold_route() {
  local topic=$1 sub=$2 waited=0
  HOLD=$(( HOLD + 1 ))
  # A node may refuse connections for a while after its ready line (the
  # client-id registry waits for the metadata group's quorum, slow under
  # callgrind): retried for up to 60 s.
  local deadline=$(( SECONDS + 60 ))
  until mosquitto_sub -h "${MQTT[$sub]%:*}" -p "${MQTT[$sub]##*:}" -i "cluster-bench-hold-$HOLD" -c -q 0 -t "$topic" -E \
      2> "$WORK/hold.err"; do
    (( SECONDS < deadline )) || { cat "$WORK/hold.err" >&2; log "node $sub refused the route holder for 60 s"; exit 1; }
    sleep 0.1
  done
  [[ $sub == 1 ]] && return 0
  until curl -sf "http://${ADMIN[1]}/api/cluster/routes" |
      jq -e --arg t "$topic" --argjson n "$sub" '[.peers[] | select(.node == $n) | .routes[].filter] | index($t)' \
      > /dev/null; do
    (( waited++ < 1200 )) || { log "node 1 never routed $topic to node $sub"; exit 1; }
    sleep 0.05
  done
}

# bench OUT PUB_NODE SUB_NODE QOS [estuary-bench flags...]: one run on a
# topic of its own whose route is held on SUB_NODE first.
RUN=0
bench() {
  local out=$1 pub=$2 sub=$3 qos=$4 topic
  shift 4
  RUN=$(( RUN + 1 ))
  topic=cluster-bench/$$/$RUN
  hold_route "$topic" "$sub"
  "$BIN"/estuary-bench --json -P 1 -S 1 -q "$qos" -s "$PAYLOAD" -t "$topic" --drain-timeout 60 --connect-timeout 60 \
    --publish-broker "mqtt://${MQTT[$pub]}" --subscribe-broker "mqtt://${MQTT[$sub]}" "$@" > "$out"
}

ms() { awk -v ns="$1" 'BEGIN { printf "%.2f", ns / 1e6 }'; }

throughput_part() {
  start_cluster wall 3 "$BIN/estuaryd"
  log "cluster up: ${MQTT[*]}"
  echo "### Cluster: same node against different nodes (3 nodes, loopback)"
  echo
  echo "1 publisher -> 1 subscriber, ${PAYLOAD}-byte payloads, estuaryd --shards 1, in memory."
  echo "Throughput: flat out for ${BENCH_SECONDS} s (messages received per second); latency"
  echo "(publish to delivery): at ${BENCH_RATE_FRACTION} of the lower of the two placements'"
  echo "throughput of that QoS, the same offered rate for both. Lost: flat-out run + latency run."
  echo
  echo "| QoS | placement | throughput msg/s | lost | latency p50 ms | p99 ms | offered msg/s |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  local qos placement sub rate
  for qos in 0 1; do
    declare -A received_rate=() lost=()
    for placement in same different; do
      sub=1
      [[ $placement == different ]] && sub=2
      log "QoS $qos, $placement node: throughput"
      bench "$WORK/max-$qos-$placement.json" 1 "$sub" "$qos" -d "$BENCH_SECONDS"
      received_rate[$placement]=$(jq -r '.receive_rate | floor' "$WORK/max-$qos-$placement.json")
      lost[$placement]=$(jq -r '.lost' "$WORK/max-$qos-$placement.json")
    done
    # Latency at one offered rate for both placements, below both maxima.
    rate=$(awk -v a="${received_rate[same]}" -v b="${received_rate[different]}" -v f="$BENCH_RATE_FRACTION" \
      'BEGIN { m = a < b ? a : b; printf "%d", m * f }')
    (( rate > 0 )) || rate=1000
    for placement in same different; do
      sub=1
      [[ $placement == different ]] && sub=2
      log "QoS $qos, $placement node: latency at $rate msg/s"
      bench "$WORK/lat-$qos-$placement.json" 1 "$sub" "$qos" -d "$BENCH_SECONDS" -r "$rate"
      local p50 p99 late_lost
      p50=$(ms "$(jq -r '.latency_ns.p50' "$WORK/lat-$qos-$placement.json")")
      p99=$(ms "$(jq -r '.latency_ns.p99' "$WORK/lat-$qos-$placement.json")")
      late_lost=$(jq -r '.lost' "$WORK/lat-$qos-$placement.json")
      echo "| $qos | $placement node | ${received_rate[$placement]} | ${lost[$placement]} + $late_lost | $p50 | $p99 | $rate |"
    done
  done
  echo
  stop_cluster
}

# ---- callgrind: instructions per message, local against forwarded --------

# The estuaryd the launcher starts, under callgrind (one output per node).
make_callgrind_wrapper() {
  local wrapper=$WORK/estuaryd-callgrind
  cat > "$wrapper" <<EOF
#!/usr/bin/env bash
node=0
args=("\$@")
for (( i = 0; i < \${#args[@]}; i++ )); do
  [[ \${args[i]} == --node-id ]] && node=\${args[i+1]}
done
[[ \${args[0]:-} == --help ]] && exec "$BIN/estuaryd" --help
exec valgrind --tool=callgrind --callgrind-out-file="\$CALLGRIND_DIR/node-\$node.out" "$BIN/estuaryd" "\$@"
EOF
  chmod +x "$wrapper"
  echo "$wrapper"
}

# Total Ir of every node's callgrind output in directory $1.
total_ir() {
  local total=0 file ir
  for file in "$1"/node-*.out; do
    ir=$(sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$file" | head -1)
    total=$(( total + ir ))
  done
  echo "$total"
}

callgrind_run() {  # NAME SUB_NODE COUNT QOS -> prints total Ir of both nodes
  local name=$1 sub=$2 count=$3 qos=$4 wrapper=$5
  # This runs in a $(...) subshell, which does not inherit the EXIT trap:
  # a failed run must still stop its cluster.
  trap stop_cluster EXIT
  export CALLGRIND_DIR=$WORK/cg-$name
  mkdir -p "$CALLGRIND_DIR"
  start_cluster "cluster-$name" 2 "$wrapper"
  bench "$WORK/cg-$name.json" 1 "$sub" "$qos" -n "$count" --drain-timeout 120 > /dev/null
  local lost received
  lost=$(jq -r '.lost' "$WORK/cg-$name.json")
  received=$(jq -r '.received' "$WORK/cg-$name.json")
  [[ $lost == 0 && $received == "$count" ]] || log "warning: $name: received $received of $count, lost $lost"
  stop_cluster
  if [[ -n ${KEEP_CALLGRIND:-} ]]; then
    mkdir -p "$KEEP_CALLGRIND"
    rm -rf "${KEEP_CALLGRIND:?}/cg-$name"
    cp -r "$CALLGRIND_DIR" "$KEEP_CALLGRIND/"
  fi
  total_ir "$CALLGRIND_DIR"
}

callgrind_part() {
  command -v valgrind > /dev/null || { log "valgrind not installed: no instruction counts"; return; }
  local wrapper
  wrapper=$(make_callgrind_wrapper)
  echo "### Cluster: broker instructions per message, local against forwarded (callgrind)"
  echo
  echo "Two estuaryd nodes (--shards 1) under callgrind; Ir summed over both nodes;"
  echo "(Ir of $CALLGRIND_LARGE messages - Ir of $CALLGRIND_SMALL) / $(( CALLGRIND_LARGE - CALLGRIND_SMALL ))."
  echo "Local: publisher and subscriber on node 1. Forwarded: publisher on node 1,"
  echo "subscriber on node 2 (publish, forward frame, delivery, and for QoS 1 the"
  echo "safe frame back). Both include the idle node's background (heartbeats, gossip)."
  echo
  echo "| QoS | local instr/msg | forwarded instr/msg | forwarded / local |"
  echo "|---|---:|---:|---:|"
  local qos
  for qos in ${CALLGRIND_QOS:-0 1}; do
    local local_small local_large forward_small forward_large
    log "callgrind QoS $qos: local $CALLGRIND_SMALL"
    local_small=$(callgrind_run "local-$qos-small" 1 "$CALLGRIND_SMALL" "$qos" "$wrapper")
    log "callgrind QoS $qos: local $CALLGRIND_LARGE"
    local_large=$(callgrind_run "local-$qos-large" 1 "$CALLGRIND_LARGE" "$qos" "$wrapper")
    log "callgrind QoS $qos: forwarded $CALLGRIND_SMALL"
    forward_small=$(callgrind_run "forward-$qos-small" 2 "$CALLGRIND_SMALL" "$qos" "$wrapper")
    log "callgrind QoS $qos: forwarded $CALLGRIND_LARGE"
    forward_large=$(callgrind_run "forward-$qos-large" 2 "$CALLGRIND_LARGE" "$qos" "$wrapper")
    awk -v q="$qos" -v ls="$local_small" -v ll="$local_large" -v fs="$forward_small" -v fl="$forward_large" \
        -v n="$(( CALLGRIND_LARGE - CALLGRIND_SMALL ))" \
      'BEGIN { l = (ll - ls) / n; f = (fl - fs) / n;
               printf "| %d | %d | %d | %.2fx |\n", q, l, f, (l > 0 ? f / l : 0) }'
  done
  echo
}

[[ ${SKIP_THROUGHPUT:-0} == 1 ]] || throughput_part
[[ ${SKIP_CALLGRIND:-0} == 1 ]] || callgrind_part
