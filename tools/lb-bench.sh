#!/usr/bin/env bash
# lb-bench.sh: what estuary-lb costs, and how fast the pair fails over.
# Prints a markdown report for docs/benchmarks.md (progress on stderr).
#
#   tools/lb-bench.sh > lb-report.md
#
# 1. MQTT QoS 0 and QoS 1 (1 -> 1, 64-byte payloads) with estuary-bench
#    against one estuaryd node three ways, same run: straight to the node,
#    through estuary-lb, through HAProxy (Debian haproxy, TCP mode, config
#    written here). First as fast as possible (throughput), then at a fixed
#    offered rate (LB_BENCH_RATE, default 5000 msgs/s) for latency p50/p99.
#    No PROXY header on either proxy (--proxy-protocol none, no send-proxy):
#    both copy bytes only. estuary-lb runs with LB_BENCH_THREADS data-plane
#    threads (default 0: one per CPU) and, unless that is 1, a second
#    estuary-lb with --threads 1 is measured beside it. Each flat-out run is
#    repeated LB_BENCH_ROUNDS times (default 3), the paths interleaved within
#    every round (direct, estuary-lb, ..., HAProxy, then again), and the
#    report gives the median, min and max per path, so a burst of load from
#    elsewhere on a shared machine hits every path alike.
# 2. Takeover of the pair over LB_BENCH_KILLS (default 20) kills: a fresh
#    active + standby, kill -9 of the active, time until the standby prints
#    role=active and until an MQTT CONNECT through it succeeds.
#
# Environment: BUILD_DIR (default ./build), LB_BENCH_SECONDS (default 10),
# LB_BENCH_RATE, LB_BENCH_KILLS (0 skips the takeover part), LB_BENCH_SHARDS
# (node shards, default 1), LB_BENCH_THREADS, LB_BENCH_ROUNDS,
# LB_BENCH_HAPROXY_THREADS (HAProxy's nbthread, default: its own, one per CPU).
# Processes are started on free loopback ports and stopped by PID on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
SECONDS_PER_RUN=${LB_BENCH_SECONDS:-10}
RATE=${LB_BENCH_RATE:-5000}
KILLS=${LB_BENCH_KILLS:-20}
SHARDS=${LB_BENCH_SHARDS:-1}
THREADS=${LB_BENCH_THREADS:-0}
ROUNDS=${LB_BENCH_ROUNDS:-3}
HAPROXY_THREADS=${LB_BENCH_HAPROXY_THREADS:-}
BIN=$BUILD_DIR/bin
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lb-bench.XXXXXX")
PIDS=()

log() { echo "lb-bench: $*" >&2; }
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for program in estuaryd estuary-lb estuary-bench; do
  [[ -x $BIN/$program ]] || { log "$BIN/$program is missing: build it first"; exit 1; }
done

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_line() {  # FILE PATTERN SECONDS
  local deadline=$((SECONDS + $3))
  until grep -q "$2" "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}
field() { grep -o "$2=[^ ]*" "$1" | head -n1 | cut -d= -f2; }

# ---- the node and the two proxies -------------------------------------------

"$BIN/estuaryd" --node-id 1 --shards "$SHARDS" --mqtt 127.0.0.1:0 --amqp 127.0.0.1:0 --admin 127.0.0.1:0 \
  --cluster 127.0.0.1:0 --sys-interval 0 --log-level warn >"$WORK/node.out" 2>"$WORK/node.err" &
PIDS+=($!)
wait_line "$WORK/node.out" "estuaryd ready" 10 || { log "estuaryd did not start"; exit 1; }
NODE_MQTT=$(field "$WORK/node.out" mqtt)
NODE_ADMIN=$(field "$WORK/node.out" admin)

start_lb() {  # NAME THREADS: prints the MQTT address
  "$BIN/estuary-lb" --mqtt 127.0.0.1:0 --amqp 127.0.0.1:0 --heartbeat 127.0.0.1:0 --nodes "$NODE_ADMIN" \
    --proxy-protocol none --threads "$2" --log-level warn >"$WORK/$1.out" 2>"$WORK/$1.err" &
  PIDS+=($!)
  wait_line "$WORK/$1.out" "estuary-lb ready" 10 || { log "$1 did not start"; exit 1; }
  field "$WORK/$1.out" mqtt
}
start_lb lb "$THREADS" >"$WORK/lb.address"
LB_MQTT=$(cat "$WORK/lb.address")
LB1_MQTT=""
if [[ $THREADS != 1 ]]; then
  start_lb lb1 1 >"$WORK/lb1.address"
  LB1_MQTT=$(cat "$WORK/lb1.address")
fi
sleep 0.5  # one probe period, so the node is eligible

HAPROXY_MQTT=""
if command -v haproxy >/dev/null; then
  HAPROXY_PORT=$(free_port)
  cat >"$WORK/haproxy.cfg" <<CFG
global
  maxconn 4000
${HAPROXY_THREADS:+  nbthread $HAPROXY_THREADS}
defaults
  mode tcp
  timeout connect 5s
  timeout client 1h
  timeout server 1h
frontend mqtt
  bind 127.0.0.1:$HAPROXY_PORT
  default_backend nodes
backend nodes
  server node1 $NODE_MQTT
CFG
  haproxy -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 &
  PIDS+=($!)
  HAPROXY_MQTT=127.0.0.1:$HAPROXY_PORT
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$HAPROXY_PORT") 2>/dev/null && break; sleep 0.05; done
else
  log "haproxy is not installed: skipping it"
fi

declare -A TARGET=([direct]=$NODE_MQTT [estuary-lb]=$LB_MQTT)
PATHS=(direct estuary-lb)
if [[ -n $LB1_MQTT ]]; then TARGET[estuary-lb-1thread]=$LB1_MQTT; PATHS+=(estuary-lb-1thread); fi
if [[ -n $HAPROXY_MQTT ]]; then TARGET[haproxy]=$HAPROXY_MQTT; PATHS+=(haproxy); fi

COMMANDS=$WORK/commands
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
run() {  # NAME ARGS...
  local name=$1
  shift
  local cmd=("$BIN/estuary-bench" --json -s 64 -P 1 -S 1 "$@")
  printf '%s\n' "$(printf '%q ' "${cmd[@]}" | sed "s|$BIN/||")" >>"$COMMANDS"
  log "run $name"
  "${cmd[@]}" >"$WORK/$name.json" 2>"$WORK/$name.err" || log "  $name failed: $(tail -n1 "$WORK/$name.err")"
}
for qos in 0 1; do
  for round in $(seq "$ROUNDS"); do
    for path in "${PATHS[@]}"; do
      run "max-q$qos-$path-r$round" --broker "${TARGET[$path]}" -q "$qos" -d "$SECONDS_PER_RUN"
    done
  done
  for path in "${PATHS[@]}"; do
    run "rate-q$qos-$path" --broker "${TARGET[$path]}" -q "$qos" -d "$SECONDS_PER_RUN" -r "$RATE"
  done
done
LOAD_AVERAGE=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- takeover ---------------------------------------------------------------

python3 - "$BIN" "$NODE_ADMIN" "$NODE_MQTT" "$KILLS" "$WORK/takeover.json" <<'PY'
import json, os, select, signal, socket, subprocess, sys, time
bin_dir, node_admin, node_mqtt, kills, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]

def start(args):
    p = subprocess.Popen([os.path.join(bin_dir, "estuary-lb")] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, bufsize=1)
    return p

def read_line(p, timeout):
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    return p.stdout.readline() if ready else ""

def field(line, key):
    for word in line.split():
        if word.startswith(key + "="):
            return word.split("=", 1)[1]

def mqtt_connect(port):
    # MQTT 3.1.1 CONNECT, clean session, client id "t"; True on CONNACK 0.
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
        s.sendall(bytes([0x10, 13, 0, 4]) + b"MQTT" + bytes([4, 2, 0, 60, 0, 1]) + b"t")
        data = s.recv(4)
        s.close()
        return len(data) == 4 and data[0] == 0x20 and data[3] == 0
    except OSError:
        return False

active_ms, serving_ms = [], []
common = ["--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0", "--nodes", node_admin, "--proxy-protocol", "none",
          "--log-level", "warn"]
for i in range(kills):
    a = start(common + ["--heartbeat", "127.0.0.1:0", "--role", "active"])
    ready_a = read_line(a, 10)
    hb_a = field(ready_a, "heartbeat")
    b = start(common + ["--heartbeat", "127.0.0.1:0", "--role", "standby", "--peer", hb_a])
    ready_b = read_line(b, 10)
    port_b = int(field(ready_b, "mqtt").rsplit(":", 1)[1])
    time.sleep(0.5)  # heartbeats flowing, the node probed
    a.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    line = read_line(b, 5)
    became = time.monotonic()
    while not mqtt_connect(port_b) and time.monotonic() - killed < 10:
        time.sleep(0.005)
    serving = time.monotonic()
    if "role=active" in line:
        active_ms.append((became - killed) * 1000)
        serving_ms.append((serving - killed) * 1000)
    a.wait()
    b.send_signal(signal.SIGTERM)
    b.wait(timeout=10)
    print(f"lb-bench: kill {i + 1}/{kills}: active after {active_ms[-1]:.0f} ms" if active_ms else "", file=sys.stderr)
json.dump({"active_ms": active_ms, "serving_ms": serving_ms, "kills": kills}, open(out, "w"))
PY

# ---- report -----------------------------------------------------------------

python3 - "$WORK" "$COMMANDS" "$SECONDS_PER_RUN" "$RATE" "$SHARDS" "$ROUNDS" "$THREADS" "$LOAD_START" "$LOAD_AVERAGE" \
  "${PATHS[@]}" <<'PY'
import json, os, platform, statistics, subprocess, sys
work, commands, seconds, rate, shards, rounds, threads, load_start, load_end = sys.argv[1:10]
paths = sys.argv[10:]
rounds = int(rounds)
def load(name):
    try:
        return json.load(open(os.path.join(work, name + ".json")))
    except Exception:
        return None
def ms(ns):
    return f"{ns / 1e6:.3f}"
def haproxy_version():
    try:
        return subprocess.run(["haproxy", "-v"], capture_output=True, text=True).stdout.splitlines()[0]
    except Exception:
        return "not installed"
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
lb_threads = threads if threads != "0" else f"0 = {os.cpu_count()}"
print("## estuary-lb: proxy cost and pair takeover\n")
print(f"{os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}, {haproxy_version()}; one estuaryd node "
      f"(--shards {shards}), estuary-bench, estuary-lb (--threads {lb_threads}) and HAProxy on the same machine "
      f"over 127.0.0.1. 64-byte payloads, 1 publisher -> 1 subscriber, {seconds} s per run, MQTT 3.1.1. "
      f"Load average (1, 5, 15 min) at the start: {load_start}; after the throughput runs: {load_end}.\n")
print(f"### As fast as possible: median of {rounds} interleaved rounds\n")
print("| QoS | path | received msgs/s, median | min | max | vs direct (medians) | lost (all rounds) |")
print("|---|---|---:|---:|---:|---:|---:|")
for qos in ("0", "1"):
    medians = {}
    for path in paths:
        runs = [r for r in (load(f"max-q{qos}-{path}-r{i}") for i in range(1, rounds + 1)) if r]
        if not runs:
            print(f"| {qos} | {path} | failed | | | | |")
            continue
        rates = [r["receive_rate"] for r in runs]
        medians[path] = statistics.median(rates)
        rel = ""
        if path != "direct" and medians.get("direct"):
            rel = f"{100.0 * medians[path] / medians['direct']:.1f} %"
        lost = sum(r["lost"] for r in runs)
        print(f"| {qos} | {path} | {medians[path]:.0f} | {min(rates):.0f} | {max(rates):.0f} | {rel} | {lost} |")
print("\nEvery round (received msgs/s, in run order):\n")
for qos in ("0", "1"):
    for path in paths:
        rates = [f"{r['receive_rate']:.0f}" if r else "failed"
                 for r in (load(f"max-q{qos}-{path}-r{i}") for i in range(1, rounds + 1))]
        print(f"- QoS {qos} {path}: {', '.join(rates)}")
print()
print(f"### At {rate} msgs/s offered (latency)\n")
print("| QoS | path | sent msgs/s | received msgs/s | p50 ms | p99 ms | lost | p50 added |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for qos in ("0", "1"):
    direct = load(f"rate-q{qos}-direct")
    for path in paths:
        r = load(f"rate-q{qos}-{path}")
        if r is None:
            print(f"| {qos} | {path} | failed | | | | | |")
            continue
        l = r["latency_ns"]
        added = ""
        if direct and path != "direct":
            added = f"{(l['p50'] - direct['latency_ns']['p50']) / 1000:.0f} µs"
        print(f"| {qos} | {path} | {r['send_rate']:.0f} | {r['receive_rate']:.0f} | {ms(l['p50'])} | "
              f"{ms(l['p99'])} | {r['lost']} | {added} |")
print()
t = json.load(open(os.path.join(work, "takeover.json")))
if not t["kills"]:
    t["active_ms"] = t["serving_ms"] = []
def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")
if t["kills"]:
    print("### Pair takeover (kill -9 of the active)\n")
    print(f"{len(t['active_ms'])} of {t['kills']} kills measured; heartbeat 100 ms, takeover timeout 1000 ms.\n")
    print("| from kill -9 to | median ms | p99 ms | max ms |\n|---|---:|---:|---:|")
    for key, title in (("active_ms", "standby prints role=active"), ("serving_ms", "first CONNACK through the standby")):
        v = t[key]
        if v:
            print(f"| {title} | {statistics.median(v):.0f} | {pct(v, 99):.0f} | {max(v):.0f} |")
    print("\nFor comparison, keepalived (VRRP) declares its master down after 3 missed advertisements plus a skew "
          "(3 x 1 s + (256 - priority)/256 s, about 3.6 s at the default advert_int 1; about 0.36 s at advert_int 0.1 "
          "where the kernel and the network allow it), then sends gratuitous ARPs; not measured here.\n")
print("Commands:\n\n```")
print("\n".join(dict.fromkeys(open(commands).read().strip().splitlines())))  # each once, in run order
print("```")
PY
