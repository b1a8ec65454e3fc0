#pragma once
// The side-by-side tables and the --json document.
#include <string>
#include <vector>

#include "tools/storage-bench/workload.h"

namespace estuary::storage_bench {

// The machine the figures came from (CPU model, cores, kernel, directory).
std::string DescribeMachine(const std::string& dir);

std::string FormatTables(const std::vector<RunResult>& runs,
                         const std::vector<StartupResult>& startups);
std::string FormatJson(const std::vector<RunResult>& runs,
                       const std::vector<StartupResult>& startups, const std::string& machine);

}  // namespace estuary::storage_bench
