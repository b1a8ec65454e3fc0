#!/usr/bin/env bash
# Installs what is missing, builds, and starts one Estuary node on loopback
# in the foreground (Ctrl-C or SIGTERM stops it cleanly).
# env: MQTT_PORT (1883) AMQP_PORT (5672) ADMIN_PORT (8080) CLUSTER_PORT (7000)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
MQTT=127.0.0.1:${MQTT_PORT:-1883}
AMQP=127.0.0.1:${AMQP_PORT:-5672}
ADMIN=127.0.0.1:${ADMIN_PORT:-8080}
CLUSTER=127.0.0.1:${CLUSTER_PORT:-7000}
echo "Starting estuaryd; endpoints:"
echo "  MQTT     mqtt://$MQTT      (try: mosquitto_sub -h 127.0.0.1 -p ${MQTT_PORT:-1883} -t '#' -v)"
echo "  AMQP     amqp://$AMQP      (port reserved; the AMQP front end is not built yet)"
echo "  admin    http://$ADMIN/healthz  http://$ADMIN/metrics  http://$ADMIN/api/load"
echo "  cluster  $CLUSTER          (port reserved; clustering is not built yet)"
exec ./build/bin/estuaryd --node-id 1 --mqtt "$MQTT" --amqp "$AMQP" --admin "$ADMIN" \
  --cluster "$CLUSTER" --data-dir ./estuary-data --log-level info
