// Issue 7 point 7 for persistent sessions (docs/reliability.md): the same
// fault matrix as retained_fault_test.cc under a QoS 1 stream into
// persistent sessions (fault_session_workload.h). Every acknowledged
// message must reach its session when it resumes, once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "server/tests/fault_scenario.h"
#include "server/tests/fault_session_workload.h"

namespace estuary::server::testing {
namespace {

constexpr int kSessions = 16;

bool FullMatrixRequested() {
  const char* value = std::getenv("ESTUARY_FAULT_MATRIX");
  return value != nullptr && std::string(value) == "full";
}

class SessionFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(SessionFaultTest, AcknowledgedMessagesReachTheirSessionsOnce) {
  const FaultCase& fault_case = GetParam();
  if (!fault_case.in_ci && !FullMatrixRequested()) {
    GTEST_SKIP() << "full matrix only: ESTUARY_FAULT_MATRIX=full (tools/fault-suite.sh)";
  }
  SessionWorkload workload(kSessions);
  const CaseResult result = RunFaultCase(fault_case, workload);
  std::cout << result.FiguresLine() << std::flush;
  if (const char* table = std::getenv("ESTUARY_FAULT_TABLE")) std::ofstream(table, std::ios::app) << result.MarkdownRow();
  if (!fault_case.expected_fail.empty()) {
    std::cout << "[ expected ] " << (result.passed() ? "passed although marked expected-fail: " : "failed as expected: ")
              << fault_case.expected_fail << "\n";
    return;
  }
  EXPECT_EQ(result.error, "");
  EXPECT_EQ(result.counters.lost, 0) << (result.counters.losses.empty() ? "" : result.counters.losses.front());
  EXPECT_EQ(result.counters.duplicated, 0);
  EXPECT_GT(result.counters.acknowledged, 0);
}

INSTANTIATE_TEST_SUITE_P(Matrix, SessionFaultTest, ::testing::ValuesIn(FullMatrix()),
                         [](const ::testing::TestParamInfo<FaultCase>& param) { return param.param.Name(); });

}  // namespace
}  // namespace estuary::server::testing
