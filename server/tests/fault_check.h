#pragma once
// The fault suite's one test body (docs/reliability.md): runs a case of the
// matrix under a workload, prints its figures, appends its table row to
// $ESTUARY_FAULT_TABLE, and asserts what must hold while a majority of
// every partition survives: no error, nothing acknowledged lost, something
// acknowledged, and (where the workload counts them and asks) no
// duplicates. A case not run in CI is skipped unless ESTUARY_FAULT_MATRIX
// is "full"; an expected-fail case records its figures and passes. The
// longest window without an acknowledgement is printed and tabled, not
// asserted (a shared CI machine stretches it); the target is 2 s.
#include <functional>
#include <string>

#include "server/tests/fault_scenario.h"

namespace estuary::server::testing {

struct FaultChecks {
  bool no_duplicates = true;  // assert 0 duplicated
  // Losses are measured and printed, not asserted: a mode documented as
  // able to lose messages (replication.ack = "leader").
  bool losses_measured_only = false;
  // Why a case cannot pass today with this workload ("" if it must); asked
  // only when the matrix does not already mark the case expected-fail.
  std::function<std::string(const FaultCase&)> expected_fail;
  // Whether ctest runs the case; unset: the matrix's in_ci.
  std::function<bool(const FaultCase&)> in_ci;
};

bool FullMatrixRequested();

// Runs `fault_case` under `workload` with GoogleTest assertions (call it
// from a TEST_P body).
void RunAndCheckFaultCase(const FaultCase& fault_case, Workload& workload, const FaultChecks& checks);

}  // namespace estuary::server::testing
