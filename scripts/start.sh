#!/usr/bin/env bash
# Installs what is missing, builds, and starts Estuary on loopback in the
# foreground: a 3-node cluster behind the estuary-lb pair (active and
# standby), through estuary-cluster. Clients use the balancers' addresses;
# the nodes accept only connections the balancers forward (PROXY protocol
# v2). Ctrl-C or SIGTERM (or `build/bin/estuary-cluster stop --dir DATA_DIR`
# from another shell) stops everything cleanly.
#
# env (defaults): MQTT_PORT (1883) AMQP_PORT (5672)    the active balancer
#                 MQTT_PORT2 (1884) AMQP_PORT2 (5673)  the standby balancer
#                 NODES (3)
#                 NODE_MQTT_PORT (11883) NODE_AMQP_PORT (15672) ADMIN_PORT (8080)
#                 CLUSTER_PORT (7000)   node 1's ports; node k uses port + k - 1
#                 LB_HEARTBEAT_PORT (7946, and +1)
#                 DATA_DIR (./estuary-data: the secret, logs, node-N data folders)
#                 BUILD_DIR (build)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh

BIN=${BUILD_DIR:-build}/bin
exec "$BIN"/estuary-cluster start --nodes "${NODES:-3}" --dir "${DATA_DIR:-./estuary-data}" \
  --storage bitcask --sync always --balancers \
  --mqtt-base "${NODE_MQTT_PORT:-11883}" --amqp-base "${NODE_AMQP_PORT:-15672}" \
  --admin-base "${ADMIN_PORT:-8080}" --cluster-base "${CLUSTER_PORT:-7000}" \
  --lb-mqtt "${MQTT_PORT:-1883}" --lb-amqp "${AMQP_PORT:-5672}" \
  --lb-mqtt2 "${MQTT_PORT2:-1884}" --lb-amqp2 "${AMQP_PORT2:-5673}" \
  --lb-heartbeat "${LB_HEARTBEAT_PORT:-7946}" \
  -- --log-level info
