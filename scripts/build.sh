#!/usr/bin/env bash
# Configures and builds Estuary into ./build (2 parallel jobs by default).
# Usage: scripts/build.sh [extra cmake -D options...]   env: JOBS, BUILD_DIR, BUILD_TYPE
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-2}"
