#!/usr/bin/env bash
# Installs what is missing, builds everything (including the libFuzzer
# targets with clang), and runs the whole test suite: unit, conformance,
# smoke tests with other clients, and bounded fuzzing. Ends with ctest's
# summary. env: JOBS (2), FUZZ_SECONDS (15 per fuzzer: 24 fuzzers, a smoke
# run that keeps CI under 30 minutes on 2 cores; longer campaigns:
# scripts/run-fuzzers.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

echo "== building the fuzz targets (clang 14, libFuzzer)"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DESTUARY_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DESTUARY_MODULES="model;security;io;persistence;frontends/mqtt;cluster-core;frontends/amqp;balancer;server" >/dev/null
mapfile -t fuzzers < <(awk 'NF {print $1}' build-fuzz/fuzzers.txt)
cmake --build build-fuzz -j "${JOBS:-2}" --target "${fuzzers[@]}"

echo "== building"
./scripts/build.sh -DESTUARY_FUZZ_BUILD_DIR="$PWD/build-fuzz" \
  -DESTUARY_FUZZ_SECONDS="${FUZZ_SECONDS:-15}"

echo "== testing"
cd build
ctest -j "${JOBS:-2}" --output-on-failure --timeout 900
