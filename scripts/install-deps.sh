#!/usr/bin/env bash
# Installs every Debian package Estuary's build, tests and benchmarks need.
# Idempotent: packages already present are skipped, and apt-get runs only
# when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ccache git
  clang-14 libclang-rt-14-dev
  libuv1-dev
  libqpid-proton-cpp12-dev
  libpaho-mqttpp-dev libpaho-mqtt-dev
  librocksdb-dev
  googletest libgtest-dev libgmock-dev
  libbenchmark-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev
  nlohmann-json3-dev libssl-dev openssl libxxhash-dev libexpected-dev
  mosquitto mosquitto-clients python3 python3-paho-mqtt
  curl procps iproute2 iputils-arping nftables
  python3-uamqp python3-qpid-proton
  haproxy rabbitmq-server
  # The admin dashboards' charts (embedded at build time) and their browser test (issue 25).
  libjs-chart.js chromium chromium-driver
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
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
