#include "server/tests/fault_check.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

namespace estuary::server::testing {

bool FullMatrixRequested() {
  const char* value = std::getenv("ESTUARY_FAULT_MATRIX");
  return value != nullptr && std::string(value) == "full";
}

void RunAndCheckFaultCase(const FaultCase& fault_case, Workload& workload, const FaultChecks& checks) {
  const bool in_ci = checks.in_ci ? checks.in_ci(fault_case) : fault_case.in_ci;
  if (!in_ci && !FullMatrixRequested()) {
    GTEST_SKIP() << "full matrix only: ESTUARY_FAULT_MATRIX=full (tools/fault-suite.sh)";
  }
  FaultCase effective = fault_case;
  if (effective.expected_fail.empty() && checks.expected_fail) effective.expected_fail = checks.expected_fail(fault_case);
  CaseResult result = RunFaultCase(effective, workload);
  result.no_duplicates = checks.no_duplicates;
  std::cout << result.FiguresLine() << std::flush;
  if (const char* table = std::getenv("ESTUARY_FAULT_TABLE")) std::ofstream(table, std::ios::app) << result.MarkdownRow();
  if (!effective.expected_fail.empty()) {
    std::cout << "[ expected ] " << (result.passed() ? "passed although marked expected-fail: " : "failed as expected: ")
              << effective.expected_fail << "\n";
    return;
  }
  EXPECT_EQ(result.error, "");
  if (!checks.losses_measured_only) {
    EXPECT_EQ(result.counters.lost, 0) << (result.counters.losses.empty() ? "" : result.counters.losses.front());
  }
  if (checks.no_duplicates) {
    EXPECT_EQ(result.counters.duplicated, 0);
  }
  EXPECT_GT(result.counters.acknowledged, 0);
}

}  // namespace estuary::server::testing
