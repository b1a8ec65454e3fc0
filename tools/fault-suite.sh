#!/usr/bin/env bash
# fault-suite.sh: the whole fault matrix of issue 7 point 7 with real
# estuaryd processes on loopback (server/tests/*_fault_test.cc: 3 and 5
# nodes, bitcask and rocksdb, kill -9 of a partition leader, of a follower,
# of two of five, node 1 restarted with its data folder wiped, a leader cut
# off by the transport fault switch) under each workload: retained QoS 1,
# persistent sessions QoS 1 and QoS 2, sessions on the victims, a shared
# group. ctest runs a few of these cases; this runs all of them, one after
# the other, and prints a markdown section for docs/reliability.md (the
# command, date, machine and load, then one table row per case). Progress
# goes to stderr.
#
#   BUILD_DIR=build tools/fault-suite.sh > fault-report.md
#
# Environment: BUILD_DIR (default ./build; needs bin/estuaryd and
# tests/fault_suite_test: cmake --build build --target estuaryd
# fault_suite_test), FILTER (a gtest filter, default all cases, e.g.
# FILTER='*n5_*', FILTER='Matrix/Session*'), LOG (default $BUILD_DIR/fault-suite.log: the test's whole
# output), ESTUARY_ESTUARYD (another estuaryd to test, e.g. an older build). Exit status: the test binary's (0 when every case that must
# pass passed).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
FILTER=${FILTER:-*}
LOG=${LOG:-$BUILD_DIR/fault-suite.log}
BINARY=$BUILD_DIR/tests/fault_suite_test
if [[ ! -x $BINARY || ! -x $BUILD_DIR/bin/estuaryd ]]; then
  echo "fault-suite: build first: cmake --build $BUILD_DIR --target estuaryd fault_suite_test" >&2
  exit 2
fi

table=$(mktemp)
trap 'rm -f "$table"' EXIT
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
seconds_before=$(date +%s)
set +e
ESTUARY_FAULT_MATRIX=full ESTUARY_FAULT_TABLE=$table "$BINARY" --gtest_filter="$FILTER" >"$LOG" 2>&1 &
pid=$!
tail -n +1 -f "$LOG" --pid=$pid | grep --line-buffered -E '^\[ (RUN|figures|expected|  FAILED|       OK) ' >&2
wait $pid
status=$?
set -e
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(($(date +%s) - seconds_before))

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
fs=$(df -T /tmp | awk 'NR == 2 { print $2 }')
cat <<EOF
Fault matrix: \`BUILD_DIR=$BUILD_DIR tools/fault-suite.sh\`${FILTER:+ (filter \`$FILTER\`)}${ESTUARY_ESTUARYD:+ (estuaryd: $ESTUARY_ESTUARYD)}, $started,
$(nproc) vCPUs ($cpu), $(free -g | awk '/^Mem:/ { print $2 }') GiB, Linux $(uname -r), /tmp on $fs;
load average $load_before before, $load_after after; $elapsed s in all; exit status $status.
Workloads (server/tests/fault_*_workload.h): one publish in flight from a
node that survives; \`--sync always\`, \`--shards 1\`. Read back on the
survivors before the recovery and on every node after it.

| workload | cluster | fault | victims | acknowledged | not acknowledged | read back | lost | duplicated | longest window without an acknowledgement | result |
|---|---|---|---|---|---|---|---|---|---|---|
EOF
cat "$table"
exit $status
