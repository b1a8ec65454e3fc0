#!/usr/bin/env bash
# Installs what is missing, builds, and starts Estuary on loopback in the
# foreground: one estuaryd node behind the estuary-lb pair (active and
# standby). Clients use the balancers' addresses; the node accepts only
# connections the balancers forward (PROXY protocol v2). Ctrl-C or SIGTERM
# stops all three cleanly.
#
# env (defaults): MQTT_PORT (1883) AMQP_PORT (5672)    the active balancer
#                 MQTT_PORT2 (1884) AMQP_PORT2 (5673)  the standby balancer
#                 NODE_MQTT_PORT (11883) NODE_AMQP_PORT (15672) ADMIN_PORT (8080)
#                 CLUSTER_PORT (7000) LB_HEARTBEAT_PORT (7946, and +1)
#                 DATA_DIR (./estuary-data) BUILD_DIR (build)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh

H=127.0.0.1
BIN=${BUILD_DIR:-build}/bin
ADMIN=$H:${ADMIN_PORT:-8080}
HB1=$H:${LB_HEARTBEAT_PORT:-7946}
HB2=$H:$(( ${LB_HEARTBEAT_PORT:-7946} + 1 ))
RUN_DIR=$(mktemp -d)
pids=()

stop_all() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$RUN_DIR"
}
trap 'stop_all; exit 0' INT TERM
trap stop_all EXIT

# Starts a program in the background with its stdout in RUN_DIR/NAME.out
# and waits for its ready line.
start() {
  local name=$1; shift
  "$@" > "$RUN_DIR/$name.out" &
  pids+=($!)
  for _ in $(seq 1 200); do
    if grep -q " ready " "$RUN_DIR/$name.out" 2>/dev/null; then
      grep -m1 " ready " "$RUN_DIR/$name.out"
      return 0
    fi
    kill -0 "${pids[-1]}" 2>/dev/null || { echo "start.sh: $name exited" >&2; exit 1; }
    sleep 0.05
  done
  echo "start.sh: $name did not report ready" >&2
  exit 1
}

start node "$BIN"/estuaryd --node-id 1 --mqtt "$H:${NODE_MQTT_PORT:-11883}" \
  --amqp "$H:${NODE_AMQP_PORT:-15672}" --admin "$ADMIN" --cluster "$H:${CLUSTER_PORT:-7000}" \
  --data-dir "${DATA_DIR:-./estuary-data}" --storage bitcask --sync always \
  --proxy-from "$H" --log-level info
start lb-active "$BIN"/estuary-lb --role active --mqtt "$H:${MQTT_PORT:-1883}" \
  --amqp "$H:${AMQP_PORT:-5672}" --nodes "$ADMIN" --heartbeat "$HB1" --peer "$HB2"
start lb-standby "$BIN"/estuary-lb --role standby --mqtt "$H:${MQTT_PORT2:-1884}" \
  --amqp "$H:${AMQP_PORT2:-5673}" --nodes "$ADMIN" --heartbeat "$HB2" --peer "$HB1"

cat <<TEXT
Estuary is up: one node behind the balancer pair. Endpoints:
  MQTT   mqtt://$H:${MQTT_PORT:-1883} (active balancer), mqtt://$H:${MQTT_PORT2:-1884} (standby)
         try: mosquitto_sub -h $H -p ${MQTT_PORT:-1883} -t '#' -v
  AMQP   amqp://$H:${AMQP_PORT:-5672} (active balancer), amqp://$H:${AMQP_PORT2:-5673} (standby)
  admin  http://$ADMIN/healthz  http://$ADMIN/metrics  http://$ADMIN/api/load
  Clients list both balancer addresses (docs/balancer.md); the standby
  accepts once it has taken over. Ctrl-C stops everything.
TEXT
wait -n "${pids[@]}" || true
echo "start.sh: a process exited; stopping the others" >&2
