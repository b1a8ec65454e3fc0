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
#                 ESTUARYD_FLAGS (none)  more estuaryd flags for every node,
#                                        e.g. "--queue-overflow reject"
#
# TLS: a throwaway CA and a server certificate for localhost/127.0.0.1 are
# made in DATA_DIR/tls (once; kept across restarts), and every node also
# listens for MQTT and AMQP over TLS (--mqtts, --amqps) on a free port of
# 127.0.0.1, named in its ready line. The TLS ports are the nodes' own (the
# balancers forward clear text only); the script prints a `mosquitto_sub
# --cafile` line that reaches node 1 over TLS. estuary-cluster signs the
# nodes' certificates for the inter-node links (mutual TLS,
# DATA_DIR/tls/node-N.pem) with the same CA, and gives the balancer pair a
# heartbeat secret (DATA_DIR/lb-pair.secret).
#
# A port that something else already listens on (a system Mosquitto on
# 1883, RabbitMQ on 5672) is named and the script exits 2 before anything
# starts: choose other ports with the variables above. Nothing running is
# stopped or changed.
set -euo pipefail
cd "$(dirname "$0")/.."

nodes=${NODES:-3}
taken=()
check_port() {  # NAME PORT: taken if something accepts on 127.0.0.1:PORT
  if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then taken+=("$2 ($1)"); fi
}
check_port MQTT_PORT "${MQTT_PORT:-1883}"
check_port AMQP_PORT "${AMQP_PORT:-5672}"
check_port MQTT_PORT2 "${MQTT_PORT2:-1884}"
check_port AMQP_PORT2 "${AMQP_PORT2:-5673}"
for ((k = 0; k < nodes; k++)); do
  check_port NODE_MQTT_PORT $((${NODE_MQTT_PORT:-11883} + k))
  check_port NODE_AMQP_PORT $((${NODE_AMQP_PORT:-15672} + k))
  check_port ADMIN_PORT $((${ADMIN_PORT:-8080} + k))
  check_port CLUSTER_PORT $((${CLUSTER_PORT:-7000} + k))
done
if ((${#taken[@]} > 0)); then
  echo "start.sh: port(s) already in use on 127.0.0.1: ${taken[*]}; set the variable named to a free port" \
       "(e.g. MQTT_PORT=2883 AMQP_PORT=6672 ./scripts/start.sh)" >&2
  exit 2
fi

./scripts/install-deps.sh
./scripts/build.sh

BIN=${BUILD_DIR:-build}/bin
data=${DATA_DIR:-./estuary-data}
tls=$data/tls
if [[ ! -f $tls/server.pem ]]; then
  mkdir -p "$tls"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/ca.key" -out "$tls/ca.pem" \
    -days 3650 -subj "/CN=Estuary throwaway CA" -addext basicConstraints=critical,CA:TRUE 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/server.key" \
    -out "$tls/server.csr" -subj "/CN=localhost" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$tls/server.ext"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 825 \
    -out "$tls/server.pem" -extfile "$tls/server.ext" 2>/dev/null
  chmod 600 "$tls/ca.key" "$tls/server.key"
fi
tls_dir=$(cd "$tls" && pwd)

# Passes estuary-cluster's output through and, once it is ready, adds the
# TLS line (node 1's port comes from its ready line). It ignores Ctrl-C and
# SIGTERM so that it reads to the end of a clean shutdown.
tls_hint() {
  trap '' INT TERM
  local line port=""
  while IFS= read -r line; do
    printf '%s\n' "$line"
    if [[ $line =~ ^estuaryd\ ready\ node=1\ .*\ mqtts=[^\ ]+:([0-9]+) ]]; then port=${BASH_REMATCH[1]}; fi
    if [[ $line == "estuary-cluster ready "* && -n $port ]]; then
      printf "  TLS (node 1 directly, CA in %s): mosquitto_sub -h localhost -p %s --cafile %s/ca.pem -t '#' -v\n" \
        "$tls_dir" "$port" "$tls_dir"
    fi
  done
}

# ESTUARYD_FLAGS is split into words on purpose: several flags in one variable.
# shellcheck disable=SC2086
exec > >(tls_hint) "$BIN"/estuary-cluster start --nodes "$nodes" --dir "${DATA_DIR:-./estuary-data}" \
  --storage bitcask --sync always --balancers \
  --mqtt-base "${NODE_MQTT_PORT:-11883}" --amqp-base "${NODE_AMQP_PORT:-15672}" \
  --admin-base "${ADMIN_PORT:-8080}" --cluster-base "${CLUSTER_PORT:-7000}" \
  --lb-mqtt "${MQTT_PORT:-1883}" --lb-amqp "${AMQP_PORT:-5672}" \
  --lb-mqtt2 "${MQTT_PORT2:-1884}" --lb-amqp2 "${AMQP_PORT2:-5673}" \
  --lb-heartbeat "${LB_HEARTBEAT_PORT:-7946}" \
  -- --log-level info --mqtts 127.0.0.1:0 --amqps 127.0.0.1:0 \
  --tls-cert "$tls_dir/server.pem" --tls-key "$tls_dir/server.key" ${ESTUARYD_FLAGS:-}
