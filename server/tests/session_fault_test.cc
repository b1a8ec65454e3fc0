// Issue 7 point 7 for persistent sessions (docs/reliability.md): the fault
// matrix of retained_fault_test.cc under streams into persistent sessions
// (fault_session_workload.h): QoS 1 and QoS 2 with the sessions on the
// publisher's node (offline), and QoS 1 with the sessions on the victims
// (half of them online at the fault), which a survivor must take over.
// Every acknowledged message must reach its session when it resumes, once.
// What each case asserts: fault_check.h.
#include <gtest/gtest.h>

#include "server/tests/fault_check.h"
#include "server/tests/fault_session_workload.h"

namespace estuary::server::testing {
namespace {

constexpr int kSessions = 16;

// Found by this suite (2026-11-30): when the cut heals, the nodes that
// stayed together take the healed node's stale 'down' verdicts about them
// ("node 1 gone; its routes are forgotten" on live nodes, then refuted),
// and on 5 nodes they take over sessions of a live node: a delivery that
// node accepted meanwhile is refused by the partition and lost.
std::string IsolationHealGap(const FaultCase& c) {
  if (c.fault != FaultKind::kIsolateLeader || c.nodes < 5) return "";
  return "on heal, live nodes accept the isolated node's 'down' verdicts about each other and take over a live "
         "node's sessions; a delivery it accepted meanwhile is lost";
}

std::string CaseName(const ::testing::TestParamInfo<FaultCase>& param) { return param.param.Name(); }

class SessionFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(SessionFaultTest, AcknowledgedMessagesReachTheirSessionsOnce) {
  SessionWorkload workload({.sessions = kSessions, .qos = 1, .on_victims = false});
  FaultChecks checks;
  checks.expected_fail = IsolationHealGap;
  RunAndCheckFaultCase(GetParam(), workload, checks);
}

INSTANTIATE_TEST_SUITE_P(Matrix, SessionFaultTest, ::testing::ValuesIn(FullMatrix()), CaseName);

// QoS 2: 0 duplicates is the target. ctest runs one case.
class SessionQos2FaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(SessionQos2FaultTest, AcknowledgedMessagesReachTheirSessionsExactlyOnce) {
  SessionWorkload workload({.sessions = kSessions, .qos = 2, .on_victims = false});
  FaultChecks checks;
  checks.in_ci = [](const FaultCase& c) {
    return c.nodes == 3 && c.storage == "bitcask" && c.fault == FaultKind::kKillLeader;
  };
  checks.expected_fail = IsolationHealGap;
  RunAndCheckFaultCase(GetParam(), workload, checks);
}

INSTANTIATE_TEST_SUITE_P(Matrix, SessionQos2FaultTest, ::testing::ValuesIn(FullMatrix()), CaseName);

// The sessions live on the victims: task transfer under a stream.
class VictimSessionFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(VictimSessionFaultTest, AcknowledgedMessagesReachTakenOverSessions) {
  SessionWorkload workload({.sessions = kSessions, .qos = 1, .on_victims = true});
  FaultChecks checks;
  checks.in_ci = [](const FaultCase&) { return false; };
  checks.expected_fail = [](const FaultCase&) -> std::string {
    return "the takeover gap (docs/partitions.md): publishes for sessions on the victim are acknowledged once it is "
           "suspect and lost until a survivor takes the sessions over (about 3 s)";
  };
  RunAndCheckFaultCase(GetParam(), workload, checks);
}

INSTANTIATE_TEST_SUITE_P(Matrix, VictimSessionFaultTest, ::testing::ValuesIn(FullMatrix()), CaseName);

}  // namespace
}  // namespace estuary::server::testing
