// Issue 7 point 7, the fault suite with real processes (docs/reliability.md):
// every case of FullMatrix() (3 and 5 nodes, bitcask and rocksdb, kill -9 of
// a leader, of a follower, of two of five, a restart with the data folder
// wiped, a leader cut off by the transport fault switch) under the
// retained-message workload. ctest runs the cases marked in_ci; the rest
// run with ESTUARY_FAULT_MATRIX=full (tools/fault-suite.sh, which also sets
// ESTUARY_FAULT_TABLE=FILE to collect the markdown rows). What each case
// asserts: fault_check.h.
#include <gtest/gtest.h>

#include "server/tests/fault_check.h"
#include "server/tests/fault_retained_workload.h"

namespace estuary::server::testing {
namespace {

constexpr int kTopics = 32;

class RetainedFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(RetainedFaultTest, AcknowledgedValuesSurvive) {
  RetainedWorkload workload(kTopics);
  FaultChecks checks;
  checks.no_duplicates = false;  // a retained topic holds one value
  RunAndCheckFaultCase(GetParam(), workload, checks);
}

INSTANTIATE_TEST_SUITE_P(Matrix, RetainedFaultTest, ::testing::ValuesIn(FullMatrix()),
                         [](const ::testing::TestParamInfo<FaultCase>& param) { return param.param.Name(); });

}  // namespace
}  // namespace estuary::server::testing
