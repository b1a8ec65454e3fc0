#!/usr/bin/env bash
# Builds the unit and server tests with AddressSanitizer + UBSan (or
# ThreadSanitizer with SANITIZER=thread) in ./build-asan (./build-tsan) and
# runs them. Not part of .ci/run: the instrumented build alone takes about
# 18 minutes on 2 cores, which with the main build would pass CI's budget.
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=(model_test io_test mqtt_codec_test mqtt_session_test core_test raft_test ring_test
       persistence_test server_test)
if [[ "${SANITIZER:-address}" == thread ]]; then
  DIR=build-tsan; FLAG=-DESTUARY_TSAN=ON
else
  DIR=build-asan; FLAG=-DESTUARY_SANITIZE=ON
fi
cmake -S . -B "$DIR" "$FLAG" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DESTUARY_MODULES="model;io;persistence;frontends/mqtt;cluster-core;server;conformance" >/dev/null
cmake --build "$DIR" -j "${JOBS:-2}" --target "${TESTS[@]}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
failed=0
for test in "${TESTS[@]}"; do
  if "$DIR/tests/$test" >"$DIR/$test.log" 2>&1; then echo "pass  $test"; else echo "FAIL  $test ($DIR/$test.log)"; failed=1; fi
done
exit $failed
