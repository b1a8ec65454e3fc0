#!/usr/bin/env bash
# amqp-bench-report.sh: measures Estuary's AMQP 1.0 against RabbitMQ's
# (Debian rabbitmq-server with the rabbitmq_amqp1_0 plugin), and the cost of
# Estuary's MQTT -> AMQP bridge, with the same client (estuary-bench) in one
# run on loopback. Prints a markdown report for docs/benchmarks.md.
#
#   tools/amqp-bench-report.sh > report.md      (progress goes to stderr)
#
# Workloads, each for BENCH_SECONDS (default 10), as fast as the client's
# bounds allow (AMQP link credit, --inflight unsettled deliveries, the
# socket's queue):
#   AMQP 1 sender -> 1 receiver, pre-settled and unsettled, 64 B and 4 KiB
#   bodies, on RabbitMQ and on estuaryd;
#   on estuaryd, 64 B: MQTT -> MQTT, MQTT -> AMQP and AMQP -> MQTT, QoS 0
#   (pre-settled) and QoS 1 (unsettled).
#
# Addresses: estuaryd maps an AMQP target address to the MQTT topic of the
# same name and a source address to a topic filter, so the clients use the
# topic as it is. RabbitMQ 3.10's plugin takes "/topic/KEY" as a target
# (publish to amq.topic with routing key KEY) and as a source (a temporary
# queue bound to amq.topic with KEY); it refuses a '/' inside KEY
# (invalid_destination), so the topics used with it have none.
#
# Environment: BUILD_DIR (default ./build), BENCH_SECONDS, BENCH_THREADS
# (client threads, default 1), BENCH_DRAIN_SECONDS (wait for deliveries
# after sending, default 20), BENCH_CREDIT (receiver credit, default 1000),
# BENCH_INFLIGHT (unsettled deliveries per sender, default 64),
# BENCH_NO_BUILD=1 (use the binaries as they are; BENCH and ESTUARYD may
# name them elsewhere), BENCH_BROKERS (default
# "rabbitmq estuaryd"). A broker that cannot be started is skipped with a
# message. Brokers listen on free ports on 127.0.0.1 and are stopped by PID
# on exit; RabbitMQ's node name, database, logs and plugin list live in a
# temporary directory.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_THREADS=${BENCH_THREADS:-1}
BENCH_DRAIN_SECONDS=${BENCH_DRAIN_SECONDS:-20}
BENCH_CREDIT=${BENCH_CREDIT:-1000}
BENCH_INFLIGHT=${BENCH_INFLIGHT:-64}
BENCH_BROKERS=${BENCH_BROKERS:-rabbitmq estuaryd}
BENCH=${BENCH:-$BUILD_DIR/bin/estuary-bench}
ESTUARYD=${ESTUARYD:-$BUILD_DIR/bin/estuaryd}
RABBITMQ_SERVER=${RABBITMQ_SERVER:-/usr/lib/rabbitmq/bin/rabbitmq-server}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/amqp-bench-report.XXXXXX")
RESULTS=$WORK/results
mkdir -p "$RESULTS"
declare -A BROKER_PID=()
declare -A AMQP_ADDR=()
declare -A MQTT_ADDR=()
declare -A CPU_PID=()  # the process whose CPU time is the broker's
RABBITMQ_BEAM_PID_FILE=$WORK/rabbitmq/beam.pid
CLOCK_TICKS=$(getconf CLK_TCK)

log() { echo "amqp-bench-report: $*" >&2; }

stop_pid() {  # PID [SECONDS]: TERM, wait, then KILL
  local pid=$1 deadline=$((SECONDS + ${2:-20}))
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  wait "$pid" 2>/dev/null || true
}

stop_broker() {
  local pid=${BROKER_PID[$1]:-}
  [[ -n $pid ]] || return 0
  # RabbitMQ's start script stops the Erlang VM it started on TERM
  # (rabbitmqctl stop); if the VM outlives it, stop the VM by its own PID.
  local beam=${CPU_PID[$1]:-}
  stop_pid "$pid" 30
  if [[ $1 == rabbitmq && -n $beam ]] && kill -0 "$beam" 2>/dev/null; then
    kill -KILL "$beam" 2>/dev/null || true
  fi
  unset "BROKER_PID[$1]" "CPU_PID[$1]"
}

EPMD_PID=
cleanup() {
  local broker
  for broker in "${!BROKER_PID[@]}"; do stop_broker "$broker"; done
  if [[ -n $EPMD_PID ]]; then stop_pid "$EPMD_PID" 5; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- build -----------------------------------------------------------------

build() {
  if [[ ${BENCH_NO_BUILD:-0} == 1 ]]; then
    [[ -x $BENCH ]] || { log "BENCH_NO_BUILD=1 but $BENCH is missing"; exit 1; }
    return
  fi
  if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    log "configuring $BUILD_DIR"
    cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >&2
  fi
  log "building estuary-bench and estuaryd"
  cmake --build "$BUILD_DIR" --target estuary-bench -j "$(nproc)" >&2
  cmake --build "$BUILD_DIR" --target estuaryd -j "$(nproc)" >&2 || log "estuaryd did not build"
}

# ---- brokers ---------------------------------------------------------------

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

BROKER_COMMANDS=$WORK/broker-commands.txt
: >"$BROKER_COMMANDS"

start_rabbitmq() {
  if [[ ! -x $RABBITMQ_SERVER ]]; then
    log "RabbitMQ is not installed ($RABBITMQ_SERVER; Debian package rabbitmq-server): skipping it"
    return 1
  fi
  local dir=$WORK/rabbitmq port dist_port epmd_port
  mkdir -p "$dir"
  port=$(free_port)
  dist_port=$(free_port)
  # The Erlang VM registers with an epmd: its own, on a free port, started
  # here and stopped by its PID, never a system one on 4369 (which a
  # system RabbitMQ would share, and which would outlive this script).
  epmd_port=$(free_port)
  epmd -port "$epmd_port" >"$dir/epmd.log" 2>&1 </dev/null &
  EPMD_PID=$!
  local waited=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$epmd_port") 2>/dev/null; do
    if ! kill -0 "$EPMD_PID" 2>/dev/null || ((waited++ > 200)); then
      log "epmd did not start on port $epmd_port: $(head -c 300 "$dir/epmd.log")"
      return 1
    fi
    sleep 0.05
  done
  echo '[rabbitmq_amqp1_0].' >"$dir/enabled_plugins"
  cat >"$dir/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$port
EOF
  : >"$dir/rabbitmq-env.conf"
  local env=(RABBITMQ_NODENAME="ebench-$$@localhost" RABBITMQ_USE_LONGNAME=false
             RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$port" RABBITMQ_DIST_PORT="$dist_port"
             ERL_EPMD_PORT="$epmd_port"
             RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" RABBITMQ_LOGS=-
             RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf"
             RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" RABBITMQ_PID_FILE="$RABBITMQ_BEAM_PID_FILE")
  {
    echo "# enabled_plugins: $(cat "$dir/enabled_plugins")   rabbitmq.conf: $(cat "$dir/rabbitmq.conf")"
    printf '%s\n' "$(printf '%q ' env "${env[@]}" "$RABBITMQ_SERVER" | sed "s|$WORK/||g")"
  } >>"$BROKER_COMMANDS"
  log "starting RabbitMQ on 127.0.0.1:$port (takes a while)"
  env "${env[@]}" "$RABBITMQ_SERVER" >"$dir/out.log" 2>&1 </dev/null &
  BROKER_PID[rabbitmq]=$!
  local deadline=$((SECONDS + 120))
  while ((SECONDS < deadline)); do
    if grep -q 'Server startup complete' "$dir/out.log" 2>/dev/null; then break; fi
    kill -0 "${BROKER_PID[rabbitmq]}" 2>/dev/null || break
    sleep 0.5
  done
  if ! grep -q 'Server startup complete' "$dir/out.log" 2>/dev/null; then
    log "RabbitMQ did not start: $(tail -c 800 "$dir/out.log")"
    return 1
  fi
  if ! grep -q 'rabbitmq_amqp1_0' "$dir/out.log"; then
    log "RabbitMQ started without rabbitmq_amqp1_0: $(tail -c 800 "$dir/out.log")"
    return 1
  fi
  AMQP_ADDR[rabbitmq]=127.0.0.1:$port
  # The start script runs the Erlang VM as its child.
  CPU_PID[rabbitmq]=$(pgrep -P "${BROKER_PID[rabbitmq]}" beam.smp | head -n1 || true)
}

start_estuaryd() {
  if [[ ! -x $ESTUARYD ]]; then
    log "estuaryd not found at $ESTUARYD (not built yet?): skipping it"
    return 1
  fi
  local out=$WORK/estuaryd.out line=""
  local extra=() help
  help=$("$ESTUARYD" --help 2>/dev/null || true)
  if grep -q -- '--data-dir' <<<"$help"; then extra+=(--data-dir "$WORK/estuaryd-data"); fi
  if grep -q -- '--cluster' <<<"$help"; then extra+=(--cluster 127.0.0.1:0); fi
  # As in bench-report.sh: a queue bound no flat-out run reaches, so the
  # bridge rows compare delivery, not drops.
  if grep -q -- '--max-queued-messages' <<<"$help"; then extra+=(--max-queued-messages 1000000); fi
  local cmd=("$ESTUARYD" --mqtt 127.0.0.1:0 --admin 127.0.0.1:0 --amqp 127.0.0.1:0 --log-level warn "${extra[@]}")
  printf '%s\n' "$(printf '%q ' "${cmd[@]}" | sed "s|$(dirname "$ESTUARYD")/||; s|$WORK/||g")" >>"$BROKER_COMMANDS"
  "${cmd[@]}" >"$out" 2>"$WORK/estuaryd.log" &
  BROKER_PID[estuaryd]=$!
  local deadline=$((SECONDS + 15))
  while ((SECONDS < deadline)); do
    line=$(grep -m1 '^estuaryd ready ' "$out" 2>/dev/null || true)
    [[ -n $line ]] && break
    kill -0 "${BROKER_PID[estuaryd]}" 2>/dev/null || break
    sleep 0.1
  done
  if [[ ! $line =~ mqtt=([^ ]+) ]]; then
    log "estuaryd did not print its ready line: $(head -c 500 "$WORK/estuaryd.log")"
    return 1
  fi
  MQTT_ADDR[estuaryd]=${BASH_REMATCH[1]}
  if [[ ! $line =~ amqp=([^ ]+) ]]; then
    log "estuaryd's ready line names no AMQP listener: $line"
    return 1
  fi
  AMQP_ADDR[estuaryd]=${BASH_REMATCH[1]}
  CPU_PID[estuaryd]=${BROKER_PID[estuaryd]}
}

# ---- runs ------------------------------------------------------------------

COMMANDS=$WORK/commands.txt
: >"$COMMANDS"

cpu_ticks() {  # PID: user + system CPU time so far, in clock ticks
  awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# A flooded broker may still be working through the previous run's backlog
# (RabbitMQ goes on for many seconds after a pre-settled flood): wait until
# it uses less than a tenth of a core for a second, at most 60 s.
wait_idle() {  # BROKER
  local pid=${CPU_PID[$1]:-} deadline=$((SECONDS + 60)) before after
  [[ -n $pid ]] || return 0
  while ((SECONDS < deadline)); do
    before=$(cpu_ticks "$pid")
    sleep 1
    after=$(cpu_ticks "$pid")
    ((after - before <= CLOCK_TICKS / 10)) && return 0
  done
  log "  $1 still busy after 60 s; measuring anyway"
}

# run_bench RESULT-NAME BROKER ARGS...: one estuary-bench run, its JSON (or
# the error) stored under RESULT-NAME, and the broker's CPU seconds during
# the run (drain included) under RESULT-NAME.cpu.
run_bench() {
  local name=$1 broker=$2
  shift 2
  wait_idle "$broker"
  local cpu_pid=${CPU_PID[$broker]:-} before=0
  [[ -n $cpu_pid ]] && before=$(cpu_ticks "$cpu_pid")
  local cmd=("$BENCH" --json --threads "$BENCH_THREADS" --drain-timeout "$BENCH_DRAIN_SECONDS"
             --credit "$BENCH_CREDIT" --inflight "$BENCH_INFLIGHT" -d "$BENCH_SECONDS" -P 1 -S 1 "$@")
  printf '%s\n' "$(printf '%q ' "${cmd[@]}" | sed "s|$(dirname "$BENCH")/||")" >>"$COMMANDS"
  log "run $name"
  if ! "${cmd[@]}" >"$RESULTS/$name.json" 2>"$RESULTS/$name.err"; then
    log "  failed: $(tail -n1 "$RESULTS/$name.err")"
  fi
  if [[ -n $cpu_pid ]]; then
    python3 -c "print(($(cpu_ticks "$cpu_pid") - $before) / $CLOCK_TICKS)" >"$RESULTS/$name.cpu"
  fi
}

AMQP_WORKLOADS=(presettled-64 presettled-4k unsettled-64 unsettled-4k)
amqp_workload_args() {
  case $1 in
    presettled-64) echo "-q 0 -s 64" ;;
    presettled-4k) echo "-q 0 -s 4096" ;;
    unsettled-64) echo "-q 1 -s 64" ;;
    unsettled-4k) echo "-q 1 -s 4096" ;;
  esac
}

# Addresses for each broker (see the top of this file).
address_args() {  # BROKER WORKLOAD
  case $1 in
    rabbitmq) echo "--amqp-target-prefix /topic/ --amqp-source-prefix /topic/ -t ebench-$$-$2" ;;
    *) echo "" ;;
  esac
}

run_amqp_workloads() {  # BROKER
  local broker=$1 workload args addresses
  for workload in "${AMQP_WORKLOADS[@]}"; do
    read -r -a args <<<"$(amqp_workload_args "$workload")"
    read -r -a addresses <<<"$(address_args "$broker" "$workload")"
    run_bench "$broker-$workload" "$broker" --broker "amqp://${AMQP_ADDR[$broker]}" "${args[@]}" "${addresses[@]}"
  done
}

BRIDGE_WORKLOADS=(mqtt-mqtt-q0 mqtt-amqp-q0 amqp-mqtt-q0 mqtt-mqtt-q1 mqtt-amqp-q1 amqp-mqtt-q1)
run_bridge_workloads() {  # BROKER (estuaryd)
  local broker=$1 workload from to qos
  for workload in "${BRIDGE_WORKLOADS[@]}"; do
    IFS=- read -r from to qos <<<"$workload"
    local from_addr=${MQTT_ADDR[$broker]} to_addr=${MQTT_ADDR[$broker]}
    [[ $from == amqp ]] && from_addr=${AMQP_ADDR[$broker]}
    [[ $to == amqp ]] && to_addr=${AMQP_ADDR[$broker]}
    run_bench "$broker-bridge-$workload" "$broker" --publish-broker "$from://$from_addr" --subscribe-broker "$to://$to_addr" \
      -q "${qos#q}" -s 64
  done
}

# ---- report ----------------------------------------------------------------

report() {
  python3 - "$RESULTS" "$COMMANDS" "$BROKER_COMMANDS" "$BENCH_SECONDS" "$BENCH_THREADS" "$BENCH_CREDIT" \
    "$BENCH_INFLIGHT" "${BROKERS[*]}" "${SKIPPED[*]:-}" "$LOAD_BEFORE" <<'EOF'
import json, os, platform, subprocess, sys
results, commands, broker_commands, seconds, threads, credit, inflight, brokers, skipped, load_before = sys.argv[1:11]
brokers = brokers.split()
amqp = [("presettled-64", "pre-settled, 64 B"), ("presettled-4k", "pre-settled, 4 KiB"),
        ("unsettled-64", "unsettled, 64 B"), ("unsettled-4k", "unsettled, 4 KiB")]
bridge = [("q0", "QoS 0 / pre-settled"), ("q1", "QoS 1 / unsettled")]

def load(name):
    try:
        return json.load(open(os.path.join(results, name + ".json")))
    except Exception:
        return None

def error(name):
    try:
        lines = open(os.path.join(results, name + ".err")).read().strip().splitlines()
        return lines[-1] if lines else "no output"
    except Exception:
        return "not run"

def ms(ns):
    return f"{ns / 1e6:.3f}"

def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except Exception:
        return "unknown"

def cpu_per_message(name, r):
    try:
        seconds = float(open(os.path.join(results, name + ".cpu")).read())
    except Exception:
        return "-"
    return f"{seconds * 1e6 / r['received']:.1f}" if r["received"] else "-"

def row(title, who, name):
    r = load(name)
    if r is None:
        print(f"| {title} | {who} | failed: {error(name)} | | | | | | | |")
        return None
    l = r["latency_ns"]
    print(f"| {title} | {who} | {r['send_rate']:.0f} | {r['receive_rate']:.0f} | {r['receive_mb_s']:.2f} "
          f"| {ms(l['p50'])} | {ms(l['p99'])} | {r['lost']} | {r['duplicated']} | {cpu_per_message(name, r)} |")
    return r["receive_rate"]

HEADER = ("| sent msgs/s | received msgs/s | received MB/s | p50 ms | p99 ms | lost | dup | broker CPU µs/msg |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")

lscpu = "\n".join(run(["lscpu"]).splitlines()[:10])
print("## AMQP 1.0: Estuary vs RabbitMQ, and the MQTT/AMQP bridge\n")
print("| machine | |\n|---|---|")
print(f"| CPUs (nproc) | {run(['nproc'])} |")
print(f"| kernel | {platform.release()} |")
print(f"| RabbitMQ | {run(['dpkg-query', '-W', '-f=${Version}', 'rabbitmq-server'])} with rabbitmq_amqp1_0, "
      f"Erlang {run(['dpkg-query', '-W', '-f=${Version}', 'erlang-base'])} |")
print(f"| brokers measured | {', '.join(brokers) or 'none'} |")
print(f"| load average (1, 5, 15 min) before / after | {load_before} / {' '.join(open('/proc/loadavg').read().split()[:3])} |")
if skipped.strip():
    print(f"| skipped | {skipped} |")
print("\n`lscpu | head`:\n\n```\n" + lscpu + "\n```\n")
print(f"1 sender -> 1 receiver, {seconds} s per run as fast as the client's bounds allow, {threads} client "
      f"thread(s), clients and brokers on the same machine over 127.0.0.1. Receivers grant {credit} credit "
      f"(topped up at half); unsettled senders keep at most {inflight} deliveries unsettled, pre-settled "
      "senders are bounded by the broker's link credit and the socket's queue. Received msgs/s is from the "
      "start to the last arrival (so a broker that queues and then drains shows its delivery rate); lost "
      "counts what had not arrived when the drain ended. MB/s counts body bytes (10^6). Broker CPU µs/msg is "
      "the broker process's user + system CPU time over the run (drain included) divided by the messages "
      "received: on a shared machine it moves less than the rates do.\n")

print("### AMQP 1.0, 1 -> 1\n")
print("| workload | broker " + HEADER)
ratios = []
for key, title in amqp:
    rates = {b: row(title, b, f"{b}-{key}") for b in brokers}
    if rates.get("estuaryd") and rates.get("rabbitmq"):
        ratios.append((title, rates["estuaryd"] / rates["rabbitmq"]))
if ratios:
    print("\nEstuary / RabbitMQ received msgs/s (target >= 3x): " +
          ", ".join(f"{t}: {x:.2f}x" for t, x in ratios))

if "estuaryd" in brokers:
    print("\n### Bridge cost on Estuary, 1 -> 1, 64 B\n")
    print("| workload | path " + HEADER)
    for qos, title in bridge:
        rates = {}
        for path in ("mqtt-mqtt", "mqtt-amqp", "amqp-mqtt"):
            rates[path] = row(title, path.replace("-", " -> ").upper(), f"estuaryd-bridge-{path}-{qos}")
        if rates.get("mqtt-mqtt") and rates.get("mqtt-amqp"):
            print(f"| {title} | MQTT -> AMQP / MQTT -> MQTT (target >= 0.8) | "
                  f"{rates['mqtt-amqp'] / rates['mqtt-mqtt']:.2f} | | | | | | | |")

print("\n### Commands\n")
print("Brokers (each on free ports):\n")
print("```")
print(open(broker_commands).read().rstrip())
print("```\n")
print("Load (from build/bin):\n")
print("```")
print(open(commands).read().rstrip())
print("```")
EOF
}

# ---- main ------------------------------------------------------------------

build
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
BROKERS=()
SKIPPED=()
for broker in $BENCH_BROKERS; do
  case $broker in
    rabbitmq) started=start_rabbitmq ;;
    estuaryd) started=start_estuaryd ;;
    *) log "unknown broker $broker"; continue ;;
  esac
  if $started; then
    BROKERS+=("$broker")
    run_amqp_workloads "$broker"
    [[ $broker == estuaryd ]] && run_bridge_workloads "$broker"
  else
    SKIPPED+=("$broker")
  fi
  stop_broker "$broker"
done
((${#BROKERS[@]} > 0)) || { log "no broker could be started"; exit 1; }

report

# BENCH_CHARTS=DIR: the tables drawn as charts too (tools/bench-charts.py,
# gnuplot), linked from the report; BENCH_CHARTS_FORMAT png or svg (default).
if [[ -n ${BENCH_CHARTS:-} ]]; then
  python3 "$ROOT/tools/bench-charts.py" "$RESULTS" "$BENCH_CHARTS" --format "${BENCH_CHARTS_FORMAT:-svg}" \
    --title "Estuary vs RabbitMQ, AMQP 1.0" | while read -r image; do printf '\n![%s](%s)\n' "$(basename "$image")" "$image"; done
fi
