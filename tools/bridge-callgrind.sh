#!/usr/bin/env bash
# bridge-callgrind.sh: broker instructions per message on one path, under
# callgrind (stable on a busy machine, unlike wall-clock rates). Runs
# estuaryd --shards 1 under valgrind twice, with N_SMALL and N_LARGE
# messages from estuary-bench (1 publisher -> 1 subscriber), and prints
# (Ir(N_LARGE) - Ir(N_SMALL)) / (N_LARGE - N_SMALL), which cancels
# start-up, connection set-up and shutdown.
#
#   tools/bridge-callgrind.sh PUB SUB QOS [SIZE]     PUB, SUB: mqtt | amqp
#   e.g. tools/bridge-callgrind.sh mqtt amqp 1       (MQTT -> AMQP, QoS 1, 64 B)
#
# Environment: BUILD_DIR (default ./build; its bin/estuaryd and
# bin/estuary-bench), N_SMALL (2000), N_LARGE (12000), KEEP_DIR (keep the
# callgrind.out files there, for callgrind_annotate --tree=calling),
# ESTUARYD_FLAGS (more estuaryd flags, e.g. "--acl-file FILE": the ACL's
# cost per message, docs/security.md).
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n '2,14p' "$0" >&2; exit 2; }
pub=$1 sub=$2 qos=$3 size=${4:-64}
build=${BUILD_DIR:-./build}
small=${N_SMALL:-2000} large=${N_LARGE:-12000}
work=$(mktemp -d)
out_dir=${KEEP_DIR:-$work}
trap 'rm -rf "$work"' EXIT

run() {  # run N: prints the Ir total of estuaryd for N messages
  local n=$1 data="$work/data-$1" profile="$out_dir/callgrind.$pub-$sub-q$qos-s$size-$1.out"
  mkdir -p "$data"
  valgrind --tool=callgrind --callgrind-out-file="$profile" "$build/bin/estuaryd" --shards 1 \
    --mqtt 127.0.0.1:0 --amqp 127.0.0.1:0 --admin 127.0.0.1:0 --cluster 127.0.0.1:0 --log-level warn \
    --max-queued-messages 1000000 --data-dir "$data" ${ESTUARYD_FLAGS:-} >"$work/ready-$n" 2>"$work/valgrind-$n" &
  local pid=$! line=""
  for _ in $(seq 1 600); do
    line=$(grep -m1 "estuaryd ready" "$work/ready-$n" || true)
    [[ -n $line ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  [[ -n $line ]] || { echo "estuaryd did not start" >&2; cat "$work/valgrind-$n" >&2; exit 1; }
  local mqtt amqp
  mqtt=$(sed -E 's/.* mqtt=([^ ]+).*/\1/' <<<"$line")
  amqp=$(sed -E 's/.* amqp=([^ ]+).*/\1/' <<<"$line")
  url() { if [[ $1 == mqtt ]]; then echo "mqtt://$mqtt"; else echo "amqp://$amqp"; fi; }
  "$build/bin/estuary-bench" --json --drain-timeout 120 --connect-timeout 60 -P 1 -S 1 -n "$n" -q "$qos" \
    -s "$size" --publish-broker "$(url "$pub")" --subscribe-broker "$(url "$sub")" >"$work/bench-$n.json"
  kill -TERM "$pid"
  wait "$pid" || true
  grep -o '"received": *[0-9]*' "$work/bench-$n.json" >&2 || true
  awk '/^totals:/ {print $2}' "$profile"
}

ir_small=$(run "$small")
ir_large=$(run "$large")
echo "$pub -> $sub QoS $qos, $size B: Ir $ir_small ($small msgs), $ir_large ($large msgs):" \
  "$(( (ir_large - ir_small) / (large - small) )) instructions per message"
