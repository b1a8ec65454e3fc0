#!/bin/bash
# Measures how long a drain takes to move every leadership off a node
# (docs/partitions.md "Planned leadership moves"): 3 local estuaryd with
# memory storage, 300 MQTT client ids claimed (which opens their
# partitions), then `estuaryctl drain` on node 1, then undrain.
# ESTUARY_BIN=build/bin tools/ctl/measure_drain.sh
B=${ESTUARY_BIN:-build/bin}
D=$(mktemp -d /tmp/estuary-drain-XXXXXX); echo secret-$$ > $D/secret; trap 'kill ${pids[@]} 2>/dev/null; rm -rf $D' EXIT
pids=()
start() { # id seeds
  $B/estuaryd --node-id $1 --mqtt 127.0.0.1:0 --amqp 127.0.0.1:0 --admin 127.0.0.1:0 --cluster 127.0.0.1:0 \
    --storage memory --cluster-secret-file $D/secret ${2:+--seeds $2} > $D/node$1.out 2> $D/node$1.log &
  pids+=($!)
  for i in $(seq 100); do grep -q "estuaryd ready" $D/node$1.out && break; sleep 0.1; done
}
word() { grep "estuaryd ready" $D/node$1.out | tr ' ' '\n' | grep "^$2=" | cut -d= -f2; }
start 1; C1=$(word 1 cluster); start 2 $C1; start 3 $C1
A1=$(word 1 admin); M1=$(word 1 mqtt)
for i in $(seq 100); do [ "$($B/estuaryctl --admin $A1 --json members | python3 -c 'import json,sys; print(sum(m["state"]=="up" for m in json.load(sys.stdin)["members"]))')" = 3 ] && break; sleep 0.1; done
/usr/bin/python3 - "$M1" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(':', 1)
ok = 0
for i in range(300):
    cid = f"drain-{i}".encode()
    var = b"\0\4MQTT\4\2\0\x3c" + len(cid).to_bytes(2, "big") + cid
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(bytes([0x10, len(var)]) + var)
    ack = s.recv(4)
    ok += ack == b"\x20\x02\x00\x00"
    s.close()
print("connacks ok:", ok)
PY
sleep 3  # let the partition groups settle on their preferred leaders
$B/estuaryctl --admin $A1 --json partitions | python3 -c 'import json,sys; b=json.load(sys.stdin); print("open", len(b["open"]), "node1 leads", b["leading"])'
$B/estuaryctl --admin $A1 --timeout-ms 20000 drain
$B/estuaryctl --admin $A1 --json partitions | python3 -c 'import json,sys; b=json.load(sys.stdin); print("after drain: node1 leads", b["leading"], "draining", b["draining"])'
$B/estuaryctl --admin $A1 undrain
for i in $(seq 50); do L=$($B/estuaryctl --admin $A1 --json partitions | python3 -c 'import json,sys; print(json.load(sys.stdin)["leading"])'); [ "$L" -gt 0 ] && break; sleep 0.1; done
sleep 2; echo "after undrain: node1 leads $($B/estuaryctl --admin $A1 --json partitions | python3 -c 'import json,sys; print(json.load(sys.stdin)["leading"])')"
kill "${pids[@]}"; wait; pids=()
