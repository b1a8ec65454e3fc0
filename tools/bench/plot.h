#pragma once
// estuary-bench --plot FILE.png|FILE.svg: a run's end-to-end latency
// percentiles per second (p50, p90, p99, p99.9, max; log scale) above its
// messages received per second, drawn by gnuplot (Debian gnuplot-nox,
// scripts/install-deps.sh) from the run's Summary::timeline.
#include <string>

#include "base/expected.h"
#include "tools/bench/stats.h"

namespace estuary::bench {

// The gnuplot data: one line per second "at_s received p50_ms p90_ms
// p99_ms p999_ms max_ms" (for tests).
std::string PlotData(const Summary& summary);

// The gnuplot script drawing `data_file` into `image` (.png or .svg).
std::string PlotScript(const std::string& image, const std::string& data_file, const std::string& title);

// Writes the data beside the image (IMAGE.dat, kept for other tools) and
// runs gnuplot. Errors: no timeline, gnuplot missing or failing.
Expected<void, std::string> WritePlot(const std::string& image, const Summary& summary, const std::string& title);

}  // namespace estuary::bench
