#!/usr/bin/env bash
# Installs every Debian package Estuary's build, tests and benchmarks need.
# Idempotent: packages already present are skipped, and apt-get runs only
# when something is missing.
# Usage: scripts/install-deps.sh [--build-only]
#   --build-only: only what configuring and building needs (the Dockerfile's
#   build stage, deploy/docker/Dockerfile); no test peers, no npm packages.
set -euo pipefail

# What `cmake -S . -B build` and the build need (every find_package and
# the embedded Chart.js; python3 for the conformance module's configure).
BUILD_PACKAGES=(
  build-essential cmake pkg-config ccache
  libuv1-dev
  libqpid-proton-cpp12-dev
  libpaho-mqttpp-dev libpaho-mqtt-dev
  librocksdb-dev
  googletest libgtest-dev libgmock-dev
  libbenchmark-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev
  nlohmann-json3-dev libssl-dev libxxhash-dev libexpected-dev
  libwslay-dev libjs-chart.js python3
)

PACKAGES=(
  "${BUILD_PACKAGES[@]}"
  git openssl
  clang-14 libclang-rt-14-dev
  mosquitto mosquitto-clients python3-paho-mqtt
  curl procps iproute2 iputils-arping nftables
  libfaketime  # tools/verify: the clock-offset fault (LD_PRELOAD, wall clock only)
  python3-uamqp python3-qpid-proton libauthen-scram-perl
  haproxy rabbitmq-server
  # Monitoring kit and plots (issue 25 points 7, 8): promtool checks the
  # metrics and alert rules, gnuplot draws estuary-bench --plot.
  prometheus gnuplot-nox
  # The admin dashboards' browser test (issue 25); Chart.js is a build package.
  chromium chromium-driver
  # The deployment check parses the Kubernetes manifests (deploy/, issue 24 point 7).
  python3-yaml
)

if [[ ${1:-} == "--build-only" ]]; then
  PACKAGES=("${BUILD_PACKAGES[@]}")
  BUILD_ONLY=1
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/install-deps.sh [--build-only]" >&2
  exit 2
fi

# npm packages of the WebSocket tests (conformance/ws/: MQTT.js, rhea, ws),
# installed from its package-lock.json; tests never fetch anything. Skipped
# with a note when node or npm is missing (ws_process is then not registered).
install_node_packages() {
  local dir
  if [[ -n ${BUILD_ONLY:-} ]]; then return 0; fi
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/conformance/ws"
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: npm not found: conformance/ws not installed (ws_process will not run)"
    return 0
  fi
  echo "install-deps: npm ci in conformance/ws"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  install_node_packages
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
# The Debian mosquitto, haproxy and rabbitmq-server packages may start
# system services (mosquitto on 1883, rabbitmq on 5672). They are left as
# they are: this script never stops or disables a program it did not
# start. Estuary's tests, scripts and benchmarks start their own peer
# brokers on free ports and stop them by PID, and estuaryd refuses a port
# that is taken with a one-line error (use --mqtt/--amqp HOST:PORT).
install_node_packages
