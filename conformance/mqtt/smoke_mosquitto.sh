#!/usr/bin/env bash
# Smoke test: the Debian-packaged mosquitto_pub and mosquitto_sub work
# against estuaryd unchanged, in MQTT 3.1.1 and 5.0: QoS 0, 1 and 2 and a
# retained message. Starts its own estuaryd on free ports; waits only on
# output with deadlines (read -t), never sleeps.
#
# usage: smoke_mosquitto.sh path/to/estuaryd
set -u -o pipefail

ESTUARYD=${1:?usage: smoke_mosquitto.sh path/to/estuaryd}
WORK=$(mktemp -d)
BROKER_PID=""
FAILURES=0

cleanup() {
  [[ -n "$BROKER_PID" ]] && kill -KILL "$BROKER_PID" 2>/dev/null
  # Children we started and may have left (mosquitto_sub on a failure path).
  local jobs_left
  jobs_left=$(jobs -p)
  [[ -n "$jobs_left" ]] && kill $jobs_left 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }

# --- the broker -------------------------------------------------------------
exec {BROKER_OUT}< <(exec "$ESTUARYD" --mqtt 127.0.0.1:0 --amqp 127.0.0.1:0 --admin 127.0.0.1:0 \
  --cluster 127.0.0.1:0 --shards 2 --log-level warn --sys-interval 0 --shutdown-grace 500)
BROKER_PID=$!
if ! read -r -t 10 -u "$BROKER_OUT" READY || [[ "$READY" != "estuaryd ready "* ]]; then
  echo "FAIL: no ready line from $ESTUARYD"
  exit 1
fi
PORT=$(sed -E 's/.* mqtt=[^ ]*:([0-9]+).*/\1/' <<<"$READY")
echo "broker: $READY"

# --- one version ------------------------------------------------------------
# Subscribes to BASE/# (QoS 2), publishes QoS 0, 1 and 2 and checks that each
# arrives once, in order; then a retained message for a later subscriber.
check_version() {
  local version=$1
  local base="smoke/$version/$$"
  local fifo="$WORK/sub-$version"
  mkfifo "$fifo"

  # A retained marker first: when the subscriber prints it, it is subscribed.
  mosquitto_pub -p "$PORT" -V "$version" -q 1 -r -t "$base/ready" -m ready || fail "$version: publish ready"
  mosquitto_sub -p "$PORT" -V "$version" -q 2 -v -W 20 -C 4 -t "$base/#" >"$fifo" &
  local sub_pid=$!
  exec {sub_out}<"$fifo"

  local line
  if read -r -t 10 -u "$sub_out" line && [[ "$line" == "$base/ready ready" ]]; then
    pass "$version: subscribed, retained message on subscribe"
  else
    fail "$version: expected the retained marker, got '${line:-nothing}'"
  fi
  for qos in 0 1 2; do
    mosquitto_pub -p "$PORT" -V "$version" -q "$qos" -t "$base/q$qos" -m "payload at qos $qos" \
      || fail "$version: mosquitto_pub QoS $qos"
    if read -r -t 10 -u "$sub_out" line && [[ "$line" == "$base/q$qos payload at qos $qos" ]]; then
      pass "$version: QoS $qos delivered"
    else
      fail "$version: QoS $qos: got '${line:-nothing}'"
    fi
  done
  wait "$sub_pid" || fail "$version: mosquitto_sub exited with an error"
  exec {sub_out}<&-

  # Retained, for a subscriber that comes later.
  mosquitto_pub -p "$PORT" -V "$version" -q 1 -r -t "$base/retained" -m "kept for later" \
    || fail "$version: publish retained"
  local retained
  retained=$(mosquitto_sub -p "$PORT" -V "$version" -q 1 -W 10 -C 1 -t "$base/retained") \
    || fail "$version: no retained message for a later subscriber"
  if [[ "$retained" == "kept for later" ]]; then
    pass "$version: retained message kept"
  else
    fail "$version: retained: got '$retained'"
  fi
  # Clearing it: an empty retained message.
  mosquitto_pub -p "$PORT" -V "$version" -q 1 -r -t "$base/retained" -n || fail "$version: clear retained"
  mosquitto_pub -p "$PORT" -V "$version" -q 1 -r -t "$base/ready" -n || fail "$version: clear marker"
}

check_version mqttv311
check_version mqttv5

# --- clean shutdown ---------------------------------------------------------
kill -TERM "$BROKER_PID"
wait "$BROKER_PID"
STATUS=$?
BROKER_PID=""
if [[ $STATUS -eq 0 ]]; then pass "estuaryd exited 0 on SIGTERM"; else fail "estuaryd exit status $STATUS"; fi

if [[ $FAILURES -ne 0 ]]; then
  echo "$FAILURES failure(s)"
  exit 1
fi
echo "all mosquitto smoke checks passed"
