#!/usr/bin/env bash
# bench-report.sh: measures Mosquitto and estuaryd side by side with
# estuary-bench and prints a markdown report for docs/benchmarks.md.
#
#   tools/bench-report.sh > report.md      (progress goes to stderr)
#
# Workloads, 64-byte payloads, each for BENCH_SECONDS (default 10):
#   QoS 0 1->1, QoS 1 1->1, fan-in 8->1 (QoS 0, wildcard), fan-out 1->8 (QoS 0)
# each as fast as possible (throughput), then at one offered rate for every
# broker (latency): BENCH_RATE_FRACTION (default 0.5) of the slower
# broker's maximum. Then resident memory per idle connection: VmRSS of a
# fresh broker before and after BENCH_IDLE_CONNECTIONS (default 10000).
#
# Environment: BUILD_DIR (default ./build), BENCH_SECONDS, BENCH_IDLE_CONNECTIONS,
# BENCH_RATE_FRACTION, BENCH_THREADS (client threads, default 1),
# BENCH_DRAIN_SECONDS (wait for deliveries after publishing, default 20),
# BENCH_CHARTS=DIR (also draw the tables as charts there, tools/bench-charts.py),
# BENCH_NO_BUILD=1 (use the binaries as they are), BENCH_BROKERS (default
# "mosquitto estuaryd"). A broker that is not installed or not built is
# skipped with a message. Brokers are started on free ports on 127.0.0.1
# and stopped by PID on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_IDLE_CONNECTIONS=${BENCH_IDLE_CONNECTIONS:-10000}
BENCH_RATE_FRACTION=${BENCH_RATE_FRACTION:-0.5}
BENCH_THREADS=${BENCH_THREADS:-1}
BENCH_BROKERS=${BENCH_BROKERS:-mosquitto estuaryd}
BENCH_DRAIN_SECONDS=${BENCH_DRAIN_SECONDS:-20}
BENCH=$BUILD_DIR/bin/estuary-bench
ESTUARYD=$BUILD_DIR/bin/estuaryd
PAYLOAD=64
# One estuary-bench process holds at most this many idle connections (the
# fd limit is 20000 per process); more are spread over processes, each
# with its own source address so none runs out of ephemeral ports.
IDLE_PER_PROCESS=15000

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-report.XXXXXX")
RESULTS=$WORK/results
mkdir -p "$RESULTS"
declare -A BROKER_PID=()
declare -A BROKER_ADDR=()
BENCH_PIDS=()

log() { echo "bench-report: $*" >&2; }

cleanup() {
  local pid
  for pid in "${BENCH_PIDS[@]}" "${BROKER_PID[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; fi
  done
  for pid in "${BENCH_PIDS[@]}" "${BROKER_PID[@]}"; do wait "$pid" 2>/dev/null || true; done
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
  log "building estuary-bench"
  cmake --build "$BUILD_DIR" --target estuary-bench -j "$(nproc)" >&2
  if [[ -f $ROOT/server/CMakeLists.txt ]]; then
    log "building estuaryd"
    cmake --build "$BUILD_DIR" --target estuaryd -j "$(nproc)" >&2 || log "estuaryd did not build"
  fi
}

# ---- brokers ---------------------------------------------------------------

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for_port PORT SECONDS
wait_for_port() {
  local deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

start_mosquitto() {
  if ! command -v mosquitto >/dev/null; then
    log "mosquitto is not installed (Debian package mosquitto): skipping it"
    return 1
  fi
  local port conf=$WORK/mosquitto-$1.conf
  port=$(free_port)
  cat >"$conf" <<EOF
listener $port 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 1000000
log_dest stderr
log_type error
EOF
  if [[ $1 == traffic ]]; then
    { echo "mosquitto -c mosquitto.conf   # $(tr '\n' ';' <"$conf" | sed 's/;/; /g')"; } >>"$BROKER_COMMANDS"
  fi
  mosquitto -c "$conf" 2>"$WORK/mosquitto-$1.log" &
  BROKER_PID[mosquitto]=$!
  BROKER_ADDR[mosquitto]=127.0.0.1:$port
  if ! wait_for_port "$port" 10; then
    log "mosquitto did not start: $(head -c 500 "$WORK/mosquitto-$1.log")"
    return 1
  fi
}

start_estuaryd() {
  if [[ ! -x $ESTUARYD ]]; then
    log "estuaryd not found at $ESTUARYD (not built yet?): skipping it"
    return 1
  fi
  local out=$WORK/estuaryd-$1.out line=""
  local extra=()
  local help
  help=$("$ESTUARYD" --help 2>/dev/null || true)
  if grep -q -- '--data-dir' <<<"$help"; then extra+=(--data-dir "$WORK/estuaryd-data-$1"); fi
  # The same queue bound as Mosquitto's max_queued_messages.
  if grep -q -- '--max-queued-messages' <<<"$help"; then extra+=(--max-queued-messages 1000000); fi
  local cmd=("$ESTUARYD" --mqtt 127.0.0.1:0 --admin 127.0.0.1:0 --amqp 127.0.0.1:0 --log-level warn "${extra[@]}")
  if [[ $1 == traffic ]]; then
    printf '%s\n' "$(printf '%q ' "${cmd[@]}" | sed "s|$BUILD_DIR/bin/||; s|$WORK/||g")" >>"$BROKER_COMMANDS"
  fi
  "${cmd[@]}" >"$out" 2>"$WORK/estuaryd-$1.log" &
  BROKER_PID[estuaryd]=$!
  local deadline=$((SECONDS + 15))
  while ((SECONDS < deadline)); do
    line=$(grep -m1 '^estuaryd ready ' "$out" 2>/dev/null || true)
    [[ -n $line ]] && break
    kill -0 "${BROKER_PID[estuaryd]}" 2>/dev/null || break
    sleep 0.1
  done
  if [[ ! $line =~ mqtt=([^ ]+) ]]; then
    log "estuaryd did not print its ready line: $(head -c 500 "$WORK/estuaryd-$1.log")"
    return 1
  fi
  BROKER_ADDR[estuaryd]=${BASH_REMATCH[1]}
}

start_broker() {  # NAME TAG
  case $1 in
    mosquitto) start_mosquitto "$2" ;;
    estuaryd) start_estuaryd "$2" ;;
    *) log "unknown broker $1"; return 1 ;;
  esac
}

stop_broker() {
  local pid=${BROKER_PID[$1]:-}
  [[ -n $pid ]] || return 0
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "BROKER_PID[$1]"
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# ---- runs ------------------------------------------------------------------

COMMANDS=$WORK/commands.txt
BROKER_COMMANDS=$WORK/broker-commands.txt
: >"$COMMANDS"
: >"$BROKER_COMMANDS"

# run_bench RESULT-NAME ARGS...: one estuary-bench run, its JSON (or the
# error) stored under RESULT-NAME.
run_bench() {
  local name=$1
  shift
  # A broker flooded with QoS 0 may need a while to deliver its backlog; lost
  # counts what had not arrived by the end of the drain.
  local cmd=("$BENCH" --json --threads "$BENCH_THREADS" --drain-timeout "$BENCH_DRAIN_SECONDS" "$@")
  printf '%s\n' "$(printf '%q ' "${cmd[@]}" | sed "s|$BUILD_DIR/bin/||")" >>"$COMMANDS"
  log "run $name"
  if ! "${cmd[@]}" >"$RESULTS/$name.json" 2>"$RESULTS/$name.err"; then
    log "  failed: $(tail -n1 "$RESULTS/$name.err")"
  fi
}

WORKLOADS=(qos0-1to1 qos1-1to1 fanin-8to1 fanout-1to8)
workload_args() {
  case $1 in
    qos0-1to1) echo "-q 0 -P 1 -S 1" ;;
    qos1-1to1) echo "-q 1 -P 1 -S 1" ;;
    fanin-8to1) echo "-q 0 -P 8 -S 1 --pattern fan-in" ;;
    fanout-1to8) echo "-q 0 -P 1 -S 8 --pattern fan-out" ;;
  esac
}

# The publish rate a broker sustained: deliveries per second divided by the
# subscribers each message goes to.
sustained_rate() {  # RESULT-NAME
  python3 - "$RESULTS/$1.json" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    print(0); sys.exit()
c = r["config"]
per_message = c["subscribers"] if c["pattern"] == "one-topic" else 1
print(int(min(r["send_rate"], r["receive_rate"] / max(per_message, 1))))
EOF
}

# idle_memory BROKER: RSS of a fresh broker before and after
# BENCH_IDLE_CONNECTIONS idle connections.
idle_memory() {
  local broker=$1 total=$BENCH_IDLE_CONNECTIONS
  start_broker "$broker" idle || return 0
  local pid=${BROKER_PID[$broker]} before after
  before=$(rss_kib "$pid")
  local processes=$(((total + IDLE_PER_PROCESS - 1) / IDLE_PER_PROCESS))
  # Each process holds its connections this long once all are connected;
  # RSS is read as soon as every process is there.
  local hold=10
  local i count pids=() errs=()
  for ((i = 0; i < processes; i++)); do
    count=$((total / processes + (i < total % processes ? 1 : 0)))
    local cmd=("$BENCH" --json --idle --connections "$count" --duration "$hold" --threads 2
               --broker "${BROKER_ADDR[$broker]}")
    ((processes > 1)) && cmd+=(--local-addresses "127.0.0.$((2 + i))")
    printf '%s\n' "$(printf '%q ' "${cmd[@]}" | sed "s|$BUILD_DIR/bin/||")" >>"$COMMANDS"
    "${cmd[@]}" >"$RESULTS/idle-$broker-$i.json" 2>"$RESULTS/idle-$broker-$i.err" &
    pids+=($!)
    BENCH_PIDS+=($!)
    errs+=("$RESULTS/idle-$broker-$i.err")
  done
  log "idle: $total connections to $broker in $processes process(es)"
  local deadline=$((SECONDS + 120)) ready=0
  while ((SECONDS < deadline)); do
    ready=$(cat "${errs[@]}" | grep -c '^estuary-bench idle ready' || true)
    ((ready == processes)) && break
    sleep 0.2
  done
  after=$(rss_kib "$pid")
  local connected
  connected=$(cat "${errs[@]}" | sed -n 's/^estuary-bench idle ready connected=\([0-9]*\).*/\1/p' |
              awk '{ s += $1 } END { print s + 0 }')
  for i in "${pids[@]}"; do wait "$i" 2>/dev/null || true; done
  echo "$broker $total $connected $before $after" >>"$RESULTS/idle-memory.txt"
  stop_broker "$broker"
}

# ---- report ----------------------------------------------------------------

report() {
  local rates_file=$WORK/rates.txt
  python3 - "$RESULTS" "$rates_file" "$COMMANDS" "$BROKER_COMMANDS" "$BENCH_SECONDS" "$PAYLOAD" "$BENCH_RATE_FRACTION" \
    "$BENCH_THREADS" "${BROKERS[*]}" "${SKIPPED[*]:-}" <<'EOF'
import json, os, platform, subprocess, sys
results, rates_file, commands, broker_commands, seconds, payload, fraction, threads, brokers, skipped = sys.argv[1:11]
brokers = brokers.split()
workloads = [("qos0-1to1", "QoS 0, 1 -> 1"), ("qos1-1to1", "QoS 1, 1 -> 1"),
             ("fanin-8to1", "fan-in 8 -> 1 (QoS 0, PREFIX/+)"), ("fanout-1to8", "fan-out 1 -> 8 (QoS 0)")]

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

def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"

def mosquitto_version():
    try:
        out = subprocess.run(["mosquitto", "-h"], capture_output=True, text=True).stdout
        return out.splitlines()[0].strip()
    except Exception:
        return "not installed"

rates = dict(line.split() for line in open(rates_file)) if os.path.exists(rates_file) else {}
print("## Estuary vs Mosquitto: estuary-bench report\n")
print("| machine | |\n|---|---|")
print(f"| CPUs (nproc) | {os.cpu_count()} |")
print(f"| CPU model | {cpu_model()} |")
print(f"| kernel | {platform.release()} |")
print(f"| Mosquitto | {mosquitto_version()} |")
print(f"| brokers measured | {', '.join(brokers) or 'none'} |")
if "estuaryd" in brokers:
    print("| estuaryd threads | default --shards: one event loop per core |")
if "mosquitto" in brokers:
    print("| Mosquitto threads | one (its design) |")
if skipped.strip():
    print(f"| skipped | {skipped} |")
print(f"\nPayload {payload} bytes, {seconds} s per run, {threads} client thread(s), MQTT 3.1.1, "
      "clients and brokers on the same machine over 127.0.0.1. MB/s counts payload bytes (10^6). "
      "Sent msgs/s is over the publishing time, received msgs/s from the start to the last arrival. "
      "As fast as possible with QoS 0 lets a broker queue without bound: its latency is mostly queueing, "
      "and lost counts messages the broker dropped or had not delivered when the drain ended.\n")

print("### Throughput (as fast as possible)\n")
print("| workload | broker | sent msgs/s | received msgs/s | received MB/s | p50 ms | p99 ms | lost | dup |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for key, title in workloads:
    for b in brokers:
        r = load(f"{b}-{key}-max")
        if r is None:
            print(f"| {title} | {b} | failed: {error(f'{b}-{key}-max')} | | | | | | |")
            continue
        l = r["latency_ns"]
        print(f"| {title} | {b} | {r['send_rate']:.0f} | {r['receive_rate']:.0f} | {r['receive_mb_s']:.2f} "
              f"| {ms(l['p50'])} | {ms(l['p99'])} | {r['lost']} | {r['duplicated']} |")

print(f"\n### Latency at an equal offered rate ({float(fraction):.0%} of the slower broker's maximum)\n")
print("| workload | offered msgs/s | broker | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | received msgs/s | lost |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for key, title in workloads:
    for b in brokers:
        name = f"{b}-{key}-rate"
        r = load(name)
        if r is None:
            print(f"| {title} | {rates.get(key, '-')} | {b} | failed: {error(name)} | | | | | | |")
            continue
        l = r["latency_ns"]
        print(f"| {title} | {r['config']['rate']:.0f} | {b} | {ms(l['p50'])} | {ms(l['p90'])} | {ms(l['p99'])} "
              f"| {ms(l['p99_9'])} | {ms(l['max'])} | {r['receive_rate']:.0f} | {r['lost']} |")

print("\n### Resident memory per idle connection\n")
print("| broker | connections | connected | VmRSS before | VmRSS after | bytes per connection |")
print("|---|---:|---:|---:|---:|---:|")
path = os.path.join(results, "idle-memory.txt")
if os.path.exists(path):
    for line in open(path):
        b, total, connected, before, after = line.split()
        per = (int(after) - int(before)) * 1024 / int(connected) if int(connected) else 0
        print(f"| {b} | {total} | {connected} | {int(before)} KiB | {int(after)} KiB | {per:.0f} |")

print("\nVmRSS from /proc/PID/status of a freshly started broker, before connecting and once every "
      "connection had its CONNACK; (after - before) / connected.\n")
print("### Commands\n")
print("Brokers (each on a free port; the idle-memory runs use a separate fresh instance):\n")
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
BROKERS=()
SKIPPED=()
for broker in $BENCH_BROKERS; do
  if start_broker "$broker" probe; then
    BROKERS+=("$broker")
    stop_broker "$broker"
  else
    SKIPPED+=("$broker")
    stop_broker "$broker"
  fi
done
((${#BROKERS[@]} > 0)) || { log "no broker could be started"; exit 1; }

for broker in "${BROKERS[@]}"; do idle_memory "$broker"; done

for broker in "${BROKERS[@]}"; do start_broker "$broker" traffic; done
for workload in "${WORKLOADS[@]}"; do
  read -r -a args <<<"$(workload_args "$workload")"
  slowest=""
  for broker in "${BROKERS[@]}"; do
    run_bench "$broker-$workload-max" --broker "${BROKER_ADDR[$broker]}" -s "$PAYLOAD" \
      -d "$BENCH_SECONDS" "${args[@]}"
    rate=$(sustained_rate "$broker-$workload-max")
    if ((rate > 0)) && [[ -z $slowest || $rate -lt $slowest ]]; then slowest=$rate; fi
  done
  if [[ -z $slowest ]]; then
    log "no broker completed $workload as fast as possible: no rate run"
    continue
  fi
  rate=$(python3 -c "print(max(1, int($slowest * $BENCH_RATE_FRACTION)))")
  echo "$workload $rate" >>"$WORK/rates.txt"
  for broker in "${BROKERS[@]}"; do
    run_bench "$broker-$workload-rate" --broker "${BROKER_ADDR[$broker]}" -s "$PAYLOAD" \
      -d "$BENCH_SECONDS" -r "$rate" "${args[@]}"
  done
done
for broker in "${BROKERS[@]}"; do stop_broker "$broker"; done

report

# BENCH_CHARTS=DIR: the tables drawn as charts too (tools/bench-charts.py,
# gnuplot), linked from the report; BENCH_CHARTS_FORMAT png or svg (default).
if [[ -n ${BENCH_CHARTS:-} ]]; then
  python3 "$ROOT/tools/bench-charts.py" "$RESULTS" "$BENCH_CHARTS" --format "${BENCH_CHARTS_FORMAT:-svg}" \
    --title "Estuary vs Mosquitto" | while read -r image; do printf '\n![%s](%s)\n' "$(basename "$image")" "$image"; done
fi
