#!/usr/bin/env bash
# connect-latency.sh: what the cluster's client-id registry costs a CONNECT
# (docs/cluster.md "One client id per cluster"). Starts one estuaryd alone
# (no registry) and a 3-node estuary-cluster (every CONNECT waits for its
# claim to commit in the id's partition), then times CONNECT -> CONNACK for
# COUNT sequential MQTT 3.1.1 connections with new client ids (the first
# ones open new partitions), then COUNT more with ids already claimed once
# (their partitions are open). Prints markdown for docs/benchmarks.md.
#
#   tools/connect-latency.sh > connect-report.md
#
# Environment: BUILD_DIR (default ./build), COUNT (default 500), STORAGE
# (default memory; bitcask adds an fdatasync per claim on each replica,
# with SYNC, default always).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
BIN=$BUILD_DIR/bin
COUNT=${COUNT:-500}
STORAGE=${STORAGE:-memory}
SYNC=${SYNC:-always}
for program in estuaryd estuary-cluster; do
  [[ -x $BIN/$program ]] || { echo "connect-latency: $BIN/$program is missing; build it first" >&2; exit 1; }
done
/usr/bin/python3 -c "import paho.mqtt.client" 2> /dev/null || { echo "connect-latency: needs python3-paho-mqtt" >&2; exit 1; }

NAME=connect-latency
# shellcheck source=tools/lib/latency-setup.sh
source "$ROOT/tools/lib/latency-setup.sh"

# measure PORT LABEL ID_PREFIX: prints one table row.
measure() {
  /usr/bin/python3 - "$1" "$2" "$3" "$COUNT" << 'PY'
import socket, struct, sys, time
port, label, prefix, count = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])

def connect_packet(client_id):
    cid = client_id.encode()
    variable = b"\x00\x04MQTT\x04\x02\x00\x3c"  # 3.1.1, clean session, keep-alive 60
    payload = struct.pack("!H", len(cid)) + cid
    body = variable + payload
    return b"\x10" + bytes([len(body)]) + body

def once(client_id):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    start = time.perf_counter()
    s.sendall(connect_packet(client_id))
    reply = b""
    while len(reply) < 4:
        chunk = s.recv(4 - len(reply))
        if not chunk:
            break
        reply += chunk
    elapsed = (time.perf_counter() - start) * 1000
    s.sendall(b"\xe0\x00")  # DISCONNECT
    s.close()
    if reply[:2] != b"\x20\x02" or reply[3] != 0:
        raise SystemExit(f"connect-latency: CONNACK {reply.hex()} for {client_id}")
    return elapsed

def row(what, samples):
    samples.sort()
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]
    print(f"| {label} | {what} | {len(samples)} | {pick(0.5):.2f} | {pick(0.99):.2f} | {samples[-1]:.2f} |")

new = [once(f"{prefix}-{i}") for i in range(count)]
row("new client ids", new)
again = [once(f"{prefix}-{i}") for i in range(count)]
row("ids seen before", again)
PY
}

start_single --cluster 127.0.0.1:0
start_cluster

echo "Machine: $(nproc) CPUs, $(uname -r); storage $STORAGE$([[ $STORAGE != memory ]] && echo ", sync $SYNC"); $COUNT connections each"
echo
echo "| broker | client ids | connects | p50 ms | p99 ms | max ms |"
echo "|---|---|---|---|---|---|"
measure "$SINGLE" "one node (no registry)" "single"
measure "$NODE1" "3-node cluster, node 1" "cluster"
