#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, -DESTUARY_FUZZ=ON) and runs each
# for a bounded time on its seed corpus. Exits non-zero when any fuzzer finds
# a crash, a leak or a timeout; the reproducer is left in
# $BUILD_DIR/fuzz-artifacts/ (replay: <fuzzer binary> <artifact file>).
#
# Usage: scripts/run-fuzzers.sh [fuzzer names...]   (default: all)
# env: FUZZ_SECONDS (60 per fuzzer), FUZZ_SEED (random; libFuzzer prints the
#      seed it used as "INFO: Seed: N"), BUILD_DIR (build-fuzz), JOBS (1),
#      ESTUARY_MODULES ("model;frontends/mqtt"), SKIP_BUILD (set to skip).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-$ROOT/build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
MODULES=${ESTUARY_MODULES:-"model;frontends/mqtt"}

if [[ -z "${SKIP_BUILD:-}" ]]; then
  CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$BUILD_DIR" -DESTUARY_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DESTUARY_MODULES="$MODULES" >/dev/null
fi
LIST="$BUILD_DIR/fuzzers.txt"
if [[ ! -s "$LIST" ]]; then
  echo "run-fuzzers: no fuzzers registered in $LIST" >&2
  exit 1
fi

declare -a names=()
while read -r name binary corpus; do
  [[ -z "$name" ]] && continue
  if (($# > 0)) && [[ ! " $* " == *" $name "* ]]; then continue; fi
  names+=("$name")
done <"$LIST"
if ((${#names[@]} == 0)); then
  echo "run-fuzzers: none of '$*' is registered" >&2
  exit 1
fi
if [[ -z "${SKIP_BUILD:-}" ]]; then
  cmake --build "$BUILD_DIR" -j "${JOBS:-1}" --target "${names[@]}"
fi

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
mkdir -p "$BUILD_DIR/fuzz-artifacts"
failed=()
while read -r name binary corpus; do
  [[ " ${names[*]} " == *" $name "* ]] || continue
  # New inputs go to a scratch corpus; the committed seeds stay as they are.
  work="$BUILD_DIR/fuzz-work/$name"
  mkdir -p "$work"
  seed_args=()
  [[ -n "${FUZZ_SEED:-}" ]] && seed_args=(-seed="$FUZZ_SEED")
  echo "== $name: ${FUZZ_SECONDS}s, seeds from ${corpus:-none}"
  if "$binary" "${seed_args[@]}" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$BUILD_DIR/fuzz-artifacts/$name-" \
      "$work" ${corpus:+"$corpus"} 2>"$BUILD_DIR/fuzz-work/$name.log"; then
    grep -E "^(INFO: Seed|stat::number_of_executed_units|stat::new_units_added)" \
      "$BUILD_DIR/fuzz-work/$name.log" || true
  else
    echo "run-fuzzers: $name FAILED; last lines of its log:" >&2
    tail -n 40 "$BUILD_DIR/fuzz-work/$name.log" >&2
    failed+=("$name")
  fi
done <"$LIST"

if ((${#failed[@]} > 0)); then
  echo "run-fuzzers: failed: ${failed[*]} (artifacts in $BUILD_DIR/fuzz-artifacts)" >&2
  exit 1
fi
echo "run-fuzzers: ${#names[@]} fuzzer(s) passed"
