#!/bin/sh
# The container command of the estuary StatefulSet (statefulset.yaml): every
# pod runs the same thing, and this turns the pod's stable name into what
# differs per node, then execs estuaryd (so estuaryd gets SIGTERM itself).
#
#   pod estuary-N      -> --node-id N+1 (node ids start at 1)
#   its DNS name       -> estuary-N.SERVICE.NAMESPACE.svc.DOMAIN, advertised
#                         for the cluster, MQTT and AMQP listeners
#   pods 0..SEEDS-1    -> --seeds, the same list in every pod, and
#                         --bootstrap-expect SEEDS: one bootstrap once they
#                         are all reachable
#
# Environment (the StatefulSet sets the first three from the downward API):
#   POD_NAME        the pod's name, estuary-N (default: $HOSTNAME)
#   POD_NAMESPACE   its namespace (default: default)
#   ESTUARY_SERVICE the headless Service, the StatefulSet's serviceName (default: estuary-nodes)
#   ESTUARY_DOMAIN  the cluster's DNS domain (default: cluster.local)
#   ESTUARY_SEEDS   how many pods are seeds (default: 3)
#   ESTUARY_CONFIG  the configuration file (default: /etc/estuary/estuaryd.toml)
#   ESTUARY_CLUSTER_PORT, ESTUARY_MQTT_PORT, ESTUARY_AMQP_PORT (7000, 1883, 5672)
#   ESTUARYD        the binary (default: /usr/bin/estuaryd)
# Arguments are passed on to estuaryd after these flags (a later flag wins).
set -eu

# HOSTNAME comes from the container's environment (Docker and Kubernetes set
# it to the pod's name), not from the shell.
# shellcheck disable=SC3028
pod=${POD_NAME:-${HOSTNAME:-}}
ordinal=${pod##*-}
case $ordinal in
  '' | *[!0-9]*)
    echo "estuaryd-pod: cannot read a StatefulSet ordinal from the pod name '$pod' (want NAME-N)" >&2
    exit 2
    ;;
esac
set_name=${pod%-*}
service=${ESTUARY_SERVICE:-estuary-nodes}
suffix="$service.${POD_NAMESPACE:-default}.svc.${ESTUARY_DOMAIN:-cluster.local}"
seed_count=${ESTUARY_SEEDS:-3}
cluster_port=${ESTUARY_CLUSTER_PORT:-7000}

seeds=""
i=0
while [ "$i" -lt "$seed_count" ]; do
  seeds="$seeds${seeds:+,}$set_name-$i.$suffix:$cluster_port"
  i=$((i + 1))
done

self="$pod.$suffix"
exec "${ESTUARYD:-/usr/bin/estuaryd}" \
  --config "${ESTUARY_CONFIG:-/etc/estuary/estuaryd.toml}" \
  --node-id "$((ordinal + 1))" \
  --seeds "$seeds" \
  --bootstrap-expect "$seed_count" \
  --advertise-cluster "$self:$cluster_port" \
  --advertise-mqtt "$self:${ESTUARY_MQTT_PORT:-1883}" \
  --advertise-amqp "$self:${ESTUARY_AMQP_PORT:-5672}" \
  "$@"
