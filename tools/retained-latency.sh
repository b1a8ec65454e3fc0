#!/usr/bin/env bash
# retained-latency.sh: what keeping retained messages on partitions costs
# (docs/partitions.md "Retained messages on partitions"). Starts one
# estuaryd alone (retained messages in memory, no partitions) and a 3-node
# estuary-cluster (a retained PUBLISH commits in its topic's partition
# before the PUBACK; a SUBSCRIBE reads retained messages from the
# partitions' leaders), then times with raw MQTT 3.1.1 clients:
#   - retained QoS 1 PUBLISH -> PUBACK for COUNT new topics (the first ones
#     open partitions and add them to the retained index), then COUNT
#     updates of the same topics;
#   - SUBSCRIBE (exact topic) -> its retained PUBLISH, COUNT times, with the
#     subscriber on another node than the publisher;
#   - SUBSCRIBE (a wildcard over all COUNT topics) -> the last of the COUNT
#     retained PUBLISHes, WILD times.
# Prints markdown for docs/benchmarks.md.
#
#   tools/retained-latency.sh > retained-report.md
#
# Environment: BUILD_DIR (default ./build), COUNT (default 200), WILD
# (default 20), STORAGE (default memory; bitcask adds fdatasyncs, with SYNC,
# default always).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
BIN=$BUILD_DIR/bin
COUNT=${COUNT:-200}
WILD=${WILD:-20}
STORAGE=${STORAGE:-memory}
SYNC=${SYNC:-always}
for program in estuaryd estuary-cluster; do
  [[ -x $BIN/$program ]] || { echo "retained-latency: $BIN/$program is missing; build it first" >&2; exit 1; }
done

NAME=retained-latency
# shellcheck source=tools/lib/latency-setup.sh
source "$ROOT/tools/lib/latency-setup.sh"

# measure PUB_PORT SUB_PORT LABEL: prints table rows.
measure() {
  /usr/bin/python3 - "$1" "$2" "$3" "$COUNT" "$WILD" << 'PY'
import socket, struct, sys, time
pub_port, sub_port, label, count, wild = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

def varint(n):
    out = b""
    while True:
        byte, n = n % 128, n // 128
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out

def packet(first, body):
    return bytes([first]) + varint(len(body)) + body

def utf8(s):
    b = s.encode()
    return struct.pack("!H", len(b)) + b

class Client:
    def __init__(self, port, client_id):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.s.sendall(packet(0x10, b"\x00\x04MQTT\x04\x02\x00\x3c" + utf8(client_id)))
        kind, body = self.read()
        if kind != 0x20 or body[1] != 0:
            raise SystemExit(f"retained-latency: CONNACK {body.hex()} for {client_id}")
    def read(self):
        while True:
            if len(self.buf) >= 2:
                length, shift, i = 0, 0, 1
                while i < len(self.buf):
                    byte = self.buf[i]
                    length += (byte & 0x7F) << shift
                    shift += 7
                    i += 1
                    if not byte & 0x80:
                        break
                else:
                    i = None
                if i is not None and len(self.buf) >= i + length and not (self.buf[i - 1] & 0x80):
                    first, body = self.buf[0], self.buf[i:i + length]
                    self.buf = self.buf[i + length:]
                    return first & 0xF0, body
            chunk = self.s.recv(65536)
            if not chunk:
                raise SystemExit("retained-latency: connection closed")
            self.buf += chunk
    def wait(self, kind):
        while True:
            got, body = self.read()
            if got == kind:
                return body

pid = 0
def next_id():
    global pid
    pid = pid % 65535 + 1
    return pid

def publish(client, topic, payload):
    i = next_id()
    start = time.perf_counter()
    client.s.sendall(packet(0x33, utf8(topic) + struct.pack("!H", i) + payload))  # QoS 1, retain
    client.wait(0x40)
    return (time.perf_counter() - start) * 1000

def subscribe(client, filter_, expect):
    i = next_id()
    start = time.perf_counter()
    client.s.sendall(packet(0x82, struct.pack("!H", i) + utf8(filter_) + b"\x00"))
    got = 0
    while got < expect:
        kind, body = client.read()
        if kind == 0x30:
            got += 1
    elapsed = (time.perf_counter() - start) * 1000
    u = next_id()
    client.s.sendall(packet(0xA2, struct.pack("!H", u) + utf8(filter_)))
    client.wait(0xB0)
    return elapsed

def row(what, samples):
    samples.sort()
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]
    print(f"| {label} | {what} | {len(samples)} | {pick(0.5):.2f} | {pick(0.99):.2f} | {samples[-1]:.2f} |")

stamp = str(int(time.time() * 1000))
base = f"rl/{stamp}"
publisher = Client(pub_port, f"rl-pub-{stamp}")
subscriber = Client(sub_port, f"rl-sub-{stamp}")
row("PUBLISH retained, new topic -> PUBACK", [publish(publisher, f"{base}/{i}", b"first") for i in range(count)])
row("PUBLISH retained, update -> PUBACK", [publish(publisher, f"{base}/{i}", b"second") for i in range(count)])
row("SUBSCRIBE topic -> its retained message", [subscribe(subscriber, f"{base}/{i}", 1) for i in range(count)])
row(f"SUBSCRIBE {base}/# -> all {count}", [subscribe(subscriber, f"{base}/#", count) for _ in range(wild)])
PY
}

start_single
start_cluster

echo "Machine: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); storage $STORAGE$([[ $STORAGE != memory ]] && echo ", sync $SYNC"); $COUNT topics, $WILD wildcard subscribes"
echo
echo "| broker | operation | samples | p50 ms | p99 ms | max ms |"
echo "|---|---|---|---|---|---|"
measure "$SINGLE" "$SINGLE" "one node (no partitions)"
measure "$NODE1" "$NODE2" "3-node cluster, publish on node 1, subscribe on node 2"
