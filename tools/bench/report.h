#pragma once
// Turning a run's figures into text for people and JSON for scripts.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/bench/options.h"
#include "tools/bench/stats.h"

namespace estuary::bench {

std::string FormatText(const Options& options, const Summary& summary);
nlohmann::json ToJson(const Options& options, const Summary& summary);

std::string FormatIdleText(const Options& options, const IdleSummary& summary);
nlohmann::json IdleToJson(const Options& options, const IdleSummary& summary);

// p50, p90, p99, p99.9, max, min, mean and count, in integer nanoseconds.
nlohmann::json LatencyJson(const LatencyHistogram& histogram);

// Totals so far, sampled once per second for the progress line.
struct Progress {
  double elapsed_s = 0;
  uint64_t sent = 0;
  uint64_t received = 0;
};
std::string FormatProgress(const Progress& now, const Progress& before);

}  // namespace estuary::bench
