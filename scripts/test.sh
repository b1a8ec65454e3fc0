#!/usr/bin/env bash
# Installs what is missing, builds everything (including the libFuzzer
# targets with clang), and runs the whole test suite: unit, conformance,
# smoke tests with other clients, and bounded fuzzing. Ends with ctest's
# summary. env: JOBS (2), FUZZ_SECONDS (60 per fuzzer)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

echo "== building the fuzz targets (clang, libFuzzer)"
CC=clang-14 CXX=clang++-14 BUILD_DIR=build-fuzz BUILD_TYPE=RelWithDebInfo \
  ./scripts/build.sh -DESTUARY_FUZZ=ON -DESTUARY_MODULES="model;io;frontends/mqtt" >/dev/null

echo "== building"
./scripts/build.sh -DESTUARY_FUZZ_BIN_DIR="$PWD/build-fuzz/fuzz" \
  -DESTUARY_FUZZ_SECONDS="${FUZZ_SECONDS:-60}"

echo "== testing"
cd build
ctest -j "${JOBS:-2}" --output-on-failure --timeout 900
