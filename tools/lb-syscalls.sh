#!/usr/bin/env bash
# lb-syscalls.sh: what each proxy asks of the kernel per forwarded message,
# figures that depend far less on machine load than msgs/s do.
# Prints a markdown report (progress on stderr).
#
#   tools/lb-syscalls.sh > lb-syscalls.md
#
# One estuaryd node; straight to it ("direct"), estuary-lb (--threads
# LB_SYSCALLS_THREADS, default 0 = one per CPU), estuary-lb --threads 1, and
# HAProxy (Debian haproxy, TCP mode, the config tools/lb-bench.sh writes) in
# front of it, no PROXY header on either. For every path, QoS 0 and 1,
# estuary-bench (1 -> 1, 64-byte payloads) sends LB_SYSCALLS_COUNT messages
# (default 20000) at LB_SYSCALLS_RATE msgs/s (default 5000: a few messages per
# wake-up, the latency case) and then LB_SYSCALLS_MAX_COUNT (default 200000)
# as fast as possible (the batching case). Meanwhile `perf stat -p PROXY`
# counts syscall tracepoints in the kernel (no ptrace, little overhead; it
# starts disabled and is enabled once attached): reads (read, readv,
# recvfrom, recvmsg: with data, EAGAIN, EOF), writes (write, writev, sendto,
# sendmsg: all, EAGAIN), the epoll_wait family, epoll_ctl, splice, futex,
# every syscall, and context switches; a `perf record` of the read exits
# gives the bytes per read. Counts are divided by the messages the
# subscriber received. Everything the process did in the window counts
# (estuary-lb's node probes and heartbeats: about 0.01 syscalls per message
# at 5000 msgs/s). A second table gives CPU time per message of the bench,
# the node and the proxy (schedstat, perf task-clock) for every path.
#
# Environment: BUILD_DIR (default ./build), LB_SYSCALLS_COUNT,
# LB_SYSCALLS_MAX_COUNT, LB_SYSCALLS_RATE, LB_SYSCALLS_THREADS,
# LB_SYSCALLS_QOS (default "0 1"), LB_SYSCALLS_MODES (default "rate max"),
# LB_SYSCALLS_PATHS (default "direct estuary-lb estuary-lb-1thread
# haproxy"). Needs perf (Debian linux-perf) with syscall tracepoints (root,
# or perf_event_paranoid <= 1 and tracefs readable). Processes are started
# on free loopback ports and stopped by PID on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
COUNT=${LB_SYSCALLS_COUNT:-20000}
MAX_COUNT=${LB_SYSCALLS_MAX_COUNT:-200000}
RATE=${LB_SYSCALLS_RATE:-5000}
THREADS=${LB_SYSCALLS_THREADS:-0}
QOS_LIST=${LB_SYSCALLS_QOS:-0 1}
MODES=${LB_SYSCALLS_MODES:-rate max}
WANTED=${LB_SYSCALLS_PATHS:-direct estuary-lb estuary-lb-1thread haproxy}
BIN=$BUILD_DIR/bin
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lb-syscalls.XXXXXX")
PIDS=()

log() { echo "lb-syscalls: $*" >&2; }
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
command -v perf >/dev/null || { log "perf is missing (Debian: linux-perf)"; exit 1; }
perf stat -e syscalls:sys_enter_read true >/dev/null 2>&1 ||
  { log "perf cannot count syscall tracepoints here (run as root)"; exit 1; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_line() {  # FILE PATTERN SECONDS
  local deadline=$((SECONDS + $3))
  until grep -q "$2" "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}
field() { grep -o "$2=[^ ]*" "$1" | head -n1 | cut -d= -f2; }
# Nanoseconds on a CPU so far, all threads of PID (schedstat's first field).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ t += $1 } END { printf "%.0f\n", t }'; }

"$BIN/estuaryd" --node-id 1 --shards 1 --mqtt 127.0.0.1:0 --amqp 127.0.0.1:0 --admin 127.0.0.1:0 \
  --cluster 127.0.0.1:0 --sys-interval 0 --log-level warn >"$WORK/node.out" 2>"$WORK/node.err" &
PIDS+=($!)
wait_line "$WORK/node.out" "estuaryd ready" 10 || { log "estuaryd did not start"; exit 1; }
NODE_MQTT=$(field "$WORK/node.out" mqtt)
NODE_ADMIN=$(field "$WORK/node.out" admin)

declare -A TARGET PROXY_PID
PATHS=()
start_lb() {  # NAME THREADS
  "$BIN/estuary-lb" --mqtt 127.0.0.1:0 --amqp 127.0.0.1:0 --heartbeat 127.0.0.1:0 --nodes "$NODE_ADMIN" \
    --proxy-protocol none --threads "$2" --log-level warn >"$WORK/$1.out" 2>"$WORK/$1.err" &
  PIDS+=($!)
  PROXY_PID[$1]=$!
  wait_line "$WORK/$1.out" "estuary-lb ready" 10 || { log "$1 did not start"; exit 1; }
  TARGET[$1]=$(field "$WORK/$1.out" mqtt)
  PATHS+=("$1")
}
for path in $WANTED; do
  case $path in
    direct) TARGET[direct]=$NODE_MQTT; PATHS+=(direct) ;;
    estuary-lb) start_lb estuary-lb "$THREADS" ;;
    estuary-lb-1thread) start_lb estuary-lb-1thread 1 ;;
    haproxy)
      command -v haproxy >/dev/null || { log "haproxy is not installed: skipping it"; continue; }
      port=$(free_port)
      cat >"$WORK/haproxy.cfg" <<CFG
global
  maxconn 4000
defaults
  mode tcp
  timeout connect 5s
  timeout client 1h
  timeout server 1h
frontend mqtt
  bind 127.0.0.1:$port
  default_backend nodes
backend nodes
  server node1 $NODE_MQTT
CFG
      haproxy -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 &
      PIDS+=($!)
      PROXY_PID[haproxy]=$!
      TARGET[haproxy]=127.0.0.1:$port
      for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
      PATHS+=(haproxy)
      ;;
    *) log "unknown path $path" ;;
  esac
done
sleep 0.5  # one probe period, so the node is eligible

READS="read readv recvfrom recvmsg"
WRITES="write writev sendto sendmsg"
EVENTS=(-e raw_syscalls:sys_enter -e context-switches)
for s in $READS; do
  EVENTS+=(-e "syscalls:sys_exit_$s" --filter 'ret > 0' -e "syscalls:sys_exit_$s" --filter 'ret == -11')
  EVENTS+=(-e "syscalls:sys_exit_$s" --filter 'ret == 0')
done
for s in $WRITES; do
  EVENTS+=(-e "syscalls:sys_enter_$s" -e "syscalls:sys_exit_$s" --filter 'ret == -11')
done
for s in epoll_wait epoll_pwait epoll_pwait2 epoll_ctl splice futex; do EVENTS+=(-e "syscalls:sys_enter_$s"); done
RECORD=()
for s in $READS; do RECORD+=(-e "syscalls:sys_exit_$s"); done

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
COMMANDS=$WORK/commands
NODE_PID=${PIDS[0]}
for qos in $QOS_LIST; do
  for mode in $MODES; do
    for path in "${PATHS[@]}"; do
      name=q$qos-$mode-$path
      pid=${PROXY_PID[$path]:-}
      mode_args=(-n "$MAX_COUNT")
      [[ $mode == rate ]] && mode_args=(-n "$COUNT" -r "$RATE")
      cmd=("$BIN/estuary-bench" --json -s 64 -P 1 -S 1 --broker "${TARGET[$path]}" -q "$qos" "${mode_args[@]}")
      printf '%s\n' "$(printf '%q ' "${cmd[@]}" | sed "s|$BIN/||")" >>"$COMMANDS"
      log "run $name"
      if [[ -n $pid ]]; then
        # Both start disabled and are enabled once attached (acknowledged).
        rm -f "$WORK"/ctl-* && mkfifo "$WORK"/ctl-stat "$WORK"/ctl-stat-ack "$WORK"/ctl-rec "$WORK"/ctl-rec-ack
        perf stat -x, -o "$WORK/$name.stat" -D -1 --control "fifo:$WORK/ctl-stat,$WORK/ctl-stat-ack" \
          "${EVENTS[@]}" -p "$pid" 2>/dev/null &
        stat_pid=$!
        perf record -q -o "$WORK/$name.data" -D -1 --control "fifo:$WORK/ctl-rec,$WORK/ctl-rec-ack" \
          "${RECORD[@]}" -p "$pid" >/dev/null 2>&1 &
        record_pid=$!
        for ctl in stat rec; do
          echo enable >"$WORK/ctl-$ctl"
          timeout 30 head -n1 "$WORK/ctl-$ctl-ack" >/dev/null || { log "perf did not start"; exit 1; }
        done
        cpu_ns "$pid" >"$WORK/$name.cpu"
      fi
      cpu_ns "$NODE_PID" >"$WORK/$name.nodecpu"
      perf stat -x, -o "$WORK/$name.benchcpu" -e task-clock -- "${cmd[@]}" >"$WORK/$name.json" 2>"$WORK/$name.err" ||
        log "  $name failed: $(tail -n1 "$WORK/$name.err")"
      cpu_ns "$NODE_PID" >>"$WORK/$name.nodecpu"
      if [[ -n $pid ]]; then
        cpu_ns "$pid" >>"$WORK/$name.cpu"
        kill -INT "$stat_pid" "$record_pid"
        wait "$stat_pid" "$record_pid" 2>/dev/null || true
        perf script -i "$WORK/$name.data" -F event,trace 2>/dev/null |
          python3 -c '
import sys
n = b = 0
for line in sys.stdin:
    v = int(line.split()[-1], 16)
    if 0 < v < 1 << 63:
        n, b = n + 1, b + v
print(n, b)' >"$WORK/$name.bytes"
        rm -f "$WORK/$name.data"
      fi
    done
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$WORK" "$COMMANDS" "$COUNT" "$MAX_COUNT" "$RATE" "$THREADS" "$LOAD_START" "$LOAD_END" "$QOS_LIST" \
  "$MODES" "${PATHS[@]}" <<'PY'
import csv, json, os, platform, subprocess, sys
work, commands, count, max_count, rate, threads, load_start, load_end, qos_list, modes = sys.argv[1:11]
paths = sys.argv[11:]
READS = ["read", "readv", "recvfrom", "recvmsg"]
WRITES = ["write", "writev", "sendto", "sendmsg"]

def path_of(name):
    return os.path.join(work, name)

def stat(name):
    # perf -x, rows: value,unit,event,...; the same event appears once per
    # filter, in the order given on the command line.
    values = []
    for row in csv.reader(open(path_of(name + ".stat"))):
        if len(row) < 3 or not row[0] or row[0].startswith("#"):
            continue
        try:
            values.append(float(row[0]))
        except ValueError:  # "<not counted>"
            values.append(0.0)
    it = iter(values)
    out = {"all": next(it), "cs": next(it), "reads": 0, "again": 0, "eof": 0, "writes": 0, "wagain": 0}
    for _ in READS:
        out["reads"] += next(it)
        out["again"] += next(it)
        out["eof"] += next(it)
    for _ in WRITES:
        out["writes"] += next(it)
        out["wagain"] += next(it)
    out["epoll"] = next(it) + next(it) + next(it)
    out["epoll_ctl"] = next(it)
    out["splice"] = next(it)
    out["futex"] = next(it)
    return out

def cpu_delta_us(name):
    try:
        before, after = map(int, open(path_of(name)).read().split())
        return (after - before) / 1000
    except Exception:
        return None

def bench_cpu_us(name):
    for row in csv.reader(open(path_of(name + ".benchcpu"))):
        if len(row) > 2 and row[2].startswith("task-clock"):
            return float(row[0]) * 1000  # msec
    return None

def haproxy_version():
    try:
        return subprocess.run(["haproxy", "-v"], capture_output=True, text=True).stdout.splitlines()[0]
    except Exception:
        return "not installed"

def offered(mode):
    return f"{rate}/s" if mode == "rate" else "max"

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print("## Syscalls and CPU per forwarded message\n")
print(f"{os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}, {haproxy_version()}; estuary-lb "
      f"--threads {threads if threads != '0' else f'0 = {os.cpu_count()}'}. {count} messages per run at {rate}/s, "
      f"{max_count} as fast as possible (64-byte payloads, 1 -> 1, MQTT 3.1.1). Load average at the start: "
      f"{load_start}; at the end: {load_end}.\n")
print("### The proxy's syscalls per message received\n")
print("Counted in the kernel by `perf stat -p PROXY` on syscall tracepoints (all threads); bytes/read from "
      "`perf record` of the read exits. Reads: read, readv, recvfrom, recvmsg; writes: write, writev, sendto, "
      "sendmsg; epoll waits: epoll_wait, epoll_pwait, epoll_pwait2.\n")
print("The last two columns divide by the reads that returned data instead (one per chunk copied): how many "
      "syscalls and epoll waits each chunk costs, which depends less on how the bench and the node batched "
      "messages in that run.\n")
print("| QoS | offered | proxy | msgs/s | syscalls | reads with data | bytes/read | EAGAIN reads | writes "
      "| EAGAIN writes | epoll waits | epoll_ctl | splice | futex | context switches | syscalls/read "
      "| epoll waits/read |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for qos in qos_list.split():
    for mode in modes.split():
        for path in paths:
            if path == "direct":
                continue
            name = f"q{qos}-{mode}-{path}"
            try:
                r = json.load(open(path_of(name + ".json")))
                s = stat(name)
                reads_n, read_bytes = map(int, open(path_of(name + ".bytes")).read().split())
            except Exception as e:
                print(f"| {qos} | {offered(mode)} | {path} | failed ({e}) |" + " |" * 13)
                continue
            m = max(1, r["received"])
            per = lambda v: f"{v / m:.3f}"
            bpr = f"{read_bytes / reads_n:.0f}" if reads_n else "-"
            print(f"| {qos} | {offered(mode)} | {path} | {r['receive_rate']:.0f} | {per(s['all'])} | "
                  f"{per(s['reads'])} | {bpr} | {per(s['again'])} | {per(s['writes'])} | {per(s['wagain'])} | "
                  f"{per(s['epoll'])} | {per(s['epoll_ctl'])} | {per(s['splice'])} | {per(s['futex'])} | "
                  f"{per(s['cs'])} | {s['all'] / max(1, s['reads']):.2f} | {s['epoll'] / max(1, s['reads']):.2f} |")
print("\n### CPU time per message received, each process\n")
print("Time on a CPU (all threads): the proxy and the node from /proc/PID/task/*/schedstat, estuary-bench "
      "(publisher and subscriber) from `perf stat -e task-clock`. Grows with contention from other processes; "
      "compare paths within one run.\n")
print("| QoS | offered | path | msgs/s | bench µs | node µs | proxy µs | total µs |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for qos in qos_list.split():
    for mode in modes.split():
        for path in paths:
            name = f"q{qos}-{mode}-{path}"
            try:
                r = json.load(open(path_of(name + ".json")))
                m = max(1, r["received"])
                bench = bench_cpu_us(name) / m
                node = cpu_delta_us(name + ".nodecpu") / m
                proxy = cpu_delta_us(name + ".cpu")
                proxy = proxy / m if proxy is not None else 0.0
            except Exception as e:
                print(f"| {qos} | {offered(mode)} | {path} | failed ({e}) | | | | |")
                continue
            shown = f"{proxy:.2f}" if path != "direct" else ""
            print(f"| {qos} | {offered(mode)} | {path} | {r['receive_rate']:.0f} | {bench:.2f} | {node:.2f} | "
                  f"{shown} | {bench + node + proxy:.2f} |")
print("\nCommands (the address differs per path):\n\n```")
print("\n".join(dict.fromkeys(open(commands).read().strip().splitlines())))
print("```")
PY
