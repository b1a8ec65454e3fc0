#!/usr/bin/env bash
# tls-bench.sh: MQTT over TLS against estuaryd and Mosquitto with one
# certificate, in one run, printed as markdown for docs/benchmarks.md "TLS".
#
#   tools/tls-bench.sh > tls.md      (progress goes to stderr)
#
# Made here: a throwaway CA and a server certificate (openssl, P-256) for
# 127.0.0.1/localhost. Brokers: estuaryd (--mqtt and --mqtts, --shards
# TLS_BENCH_SHARDS, default 2) and Mosquitto (a clear-text and a TLS
# listener, certfile/keyfile the same files), on free ports, stopped by PID.
# Figures, with estuary-bench (64-byte payloads, TLS_BENCH_SECONDS each,
# default 10):
#   - QoS 0 and QoS 1 throughput 1 -> 1, and p99 end-to-end latency, clear
#     text and TLS;
#   - full handshakes per second: TLS_BENCH_HANDSHAKES connections (default
#     2000), 64 connecting at once, CONNECT and CONNACK included; and
#     resumed ones (estuary-bench --tls-resume: each connection offers the
#     ticket its worker's previous connection got; the share that resumed
#     is printed with it);
#   - resident memory per idle connection: VmRSS of a fresh broker before
#     and after TLS_BENCH_IDLE connections (default 5000), clear text and TLS.
# Environment: BUILD_DIR (default ./build; estuaryd and estuary-bench must be built).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
SECONDS_EACH=${TLS_BENCH_SECONDS:-10}
HANDSHAKES=${TLS_BENCH_HANDSHAKES:-2000}
IDLE=${TLS_BENCH_IDLE:-5000}
SHARDS=${TLS_BENCH_SHARDS:-2}
BENCH=$BUILD_DIR/bin/estuary-bench
ESTUARYD=$BUILD_DIR/bin/estuaryd
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tls-bench.XXXXXX")
PIDS=()

log() { echo "tls-bench: $*" >&2; }
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for binary in "$BENCH" "$ESTUARYD"; do
  [[ -x $binary ]] || { log "$binary is missing: build estuaryd and estuary-bench first"; exit 1; }
done
command -v mosquitto >/dev/null || log "mosquitto is not installed: its rows are skipped"

# ---- certificates ----------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/ca.key" -out "$WORK/ca.pem" \
  -days 2 -subj "/CN=tls-bench CA" -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/server.key" -out "$WORK/server.csr" \
  -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$WORK/san.ext"
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
  -out "$WORK/server.pem" -extfile "$WORK/san.ext" 2>/dev/null

# ---- brokers ---------------------------------------------------------------
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for_port() {
  local deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

# start_estuaryd: sets PID, PLAIN, TLS.
start_estuaryd() {
  local out=$WORK/estuaryd.out line=""
  : >"$out"
  "$ESTUARYD" --shards "$SHARDS" --mqtt 127.0.0.1:0 --mqtts 127.0.0.1:0 --amqp 127.0.0.1:0 --admin 127.0.0.1:0 \
    --cluster 127.0.0.1:0 --tls-cert "$WORK/server.pem" --tls-key "$WORK/server.key" --log-level warn \
    --max-queued-messages 1000000 --sys-interval 0 >"$out" 2>"$WORK/estuaryd.log" &
  PID=$!
  PIDS+=("$PID")
  local deadline=$((SECONDS + 15))
  while ((SECONDS < deadline)) && [[ -z $line ]]; do
    line=$(grep -m1 '^estuaryd ready ' "$out" || true)
    [[ -n $line ]] || sleep 0.1
  done
  [[ $line =~ \ mqtt=([^ ]+) ]] && PLAIN=${BASH_REMATCH[1]}
  [[ $line =~ mqtts=([^ ]+) ]] && TLS=${BASH_REMATCH[1]}
}

# start_mosquitto: sets PID, PLAIN, TLS (one process, two listeners).
start_mosquitto() {
  local plain tls conf=$WORK/mosquitto.conf
  plain=$(free_port)
  tls=$(free_port)
  cat >"$conf" <<EOF
per_listener_settings false
allow_anonymous true
persistence false
max_queued_messages 1000000
log_dest stderr
log_type error
listener $plain 127.0.0.1
listener $tls 127.0.0.1
certfile $WORK/server.pem
keyfile $WORK/server.key
EOF
  if [[ $(id -u) == 0 ]]; then echo "user root" >>"$conf"; fi
  mosquitto -c "$conf" 2>"$WORK/mosquitto.log" &
  PID=$!
  PIDS+=("$PID")
  wait_for_port "$plain" && wait_for_port "$tls"
  PLAIN=127.0.0.1:$plain
  TLS=127.0.0.1:$tls
}

stop() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# ---- runs ------------------------------------------------------------------
TLS_FLAGS=(--tls-ca "$WORK/ca.pem" --tls-server-name localhost)
COMMANDS=()

# bench NAME ARGS...: estuary-bench --json, stored as NAME.json.
bench() {
  local name=$1
  shift
  COMMANDS+=("estuary-bench --json $(printf '%q ' "$@" | sed "s|$WORK/||g")")
  log "run $name"
  "$BENCH" --json "$@" >"$WORK/$name.json" 2>"$WORK/$name.err" || log "  $name failed: $(tail -n1 "$WORK/$name.err")"
}

traffic() {  # BROKER
  local transport address extra
  for transport in plain tls; do
    if [[ $transport == tls ]]; then address=$TLS; extra=("${TLS_FLAGS[@]}"); else address=$PLAIN; extra=(); fi
    bench "$1-$transport-qos0" --broker "$address" "${extra[@]}" -q 0 -P 1 -S 1 -d "$SECONDS_EACH" --drain-timeout 20
    bench "$1-$transport-qos1" --broker "$address" "${extra[@]}" -q 1 -P 1 -S 1 -d "$SECONDS_EACH"
    bench "$1-$transport-handshakes" --broker "$address" "${extra[@]}" --idle -c "$HANDSHAKES" --max-connecting 64 -d 1
    if [[ $transport == tls ]]; then
      bench "$1-$transport-resumed" --broker "$address" "${extra[@]}" --tls-resume --idle -c "$HANDSHAKES" \
        --max-connecting 64 -d 1
    fi
  done
}

idle_memory() {  # BROKER START-FUNCTION
  local transport address extra before after count
  for transport in plain tls; do
    "$2"
    if [[ $transport == tls ]]; then address=$TLS; extra=("${TLS_FLAGS[@]}"); else address=$PLAIN; extra=(); fi
    before=$(rss_kib "$PID")
    "$BENCH" --broker "$address" "${extra[@]}" --idle -c "$IDLE" --max-connecting 64 -d 8 >"$WORK/idle.out" 2>&1 &
    local bench_pid=$!
    PIDS+=("$bench_pid")
    local port=${address##*:} deadline=$((SECONDS + 60))
    count=0
    while ((SECONDS < deadline)); do
      count=$(ss -Htn state established "( sport = :$port )" | wc -l)
      ((count >= IDLE)) && break
      sleep 0.2
    done
    sleep 1  # let the last CONNACKs be written
    after=$(rss_kib "$PID")
    echo "$1 $transport $before $after $count" >>"$WORK/idle.txt"
    wait "$bench_pid" || true
    stop
  done
}

start_estuaryd
traffic estuaryd
stop
if command -v mosquitto >/dev/null; then
  start_mosquitto
  traffic mosquitto
  stop
fi
: >"$WORK/idle.txt"
idle_memory estuaryd start_estuaryd
if command -v mosquitto >/dev/null; then idle_memory mosquitto start_mosquitto; fi

# ---- report ----------------------------------------------------------------
python3 - "$WORK" "$IDLE" <<'EOF'
import json, os, sys
work, idle = sys.argv[1], int(sys.argv[2])

def load(name):
    try:
        return json.load(open(os.path.join(work, name + ".json")))
    except Exception:
        return None

print("| broker | transport | QoS 0 msg/s | QoS 0 p99 ms | QoS 1 msg/s | QoS 1 p99 ms | full handshakes/s | "
      "resumed handshakes/s (share resumed) |")
print("|---|---|---|---|---|---|---|---|")
for broker in ("estuaryd", "mosquitto"):
    for transport in ("plain", "tls"):
        cells = []
        for qos in ("qos0", "qos1"):
            r = load("%s-%s-%s" % (broker, transport, qos))
            if r is None:
                cells += ["-", "-"]
                continue
            cells.append("%d" % min(r["send_rate"], r["receive_rate"]))
            cells.append("%.2f" % (r["latency_ns"]["p99"] / 1e6))
        h = load("%s-%s-handshakes" % (broker, transport))
        cells.append("%d" % (h["connected"] / h["connect_seconds"]) if h and h["connect_seconds"] > 0 else "-")
        r = load("%s-%s-resumed" % (broker, transport))
        if r and r["connect_seconds"] > 0 and r["connected"] > 0:
            cells.append("%d (%d%%)" % (r["connected"] / r["connect_seconds"],
                                        100 * r.get("tls_resumed", 0) // r["connected"]))
        else:
            cells.append("-")
        if all(cell == "-" for cell in cells):
            continue
        print("| %s | %s | %s |" % (broker, "TLS 1.3" if transport == "tls" else "clear text", " | ".join(cells)))
print()
print("| broker | transport | idle connections | RSS before KiB | RSS after KiB | KiB per connection |")
print("|---|---|---|---|---|---|")
for line in open(os.path.join(work, "idle.txt")):
    broker, transport, before, after, count = line.split()
    count = int(count)
    per = (int(after) - int(before)) / count if count else 0
    print("| %s | %s | %d | %s | %s | %.1f |" % (broker, "TLS 1.3" if transport == "tls" else "clear text", count,
                                                before, after, per))
EOF
echo
echo "Commands (certificates and ports made by the script):"
echo
echo '```'
printf '%s\n' "${COMMANDS[@]}" | sort -u
echo '```'
