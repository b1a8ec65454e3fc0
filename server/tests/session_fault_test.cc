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

// Found by this suite (2026-11-30): when the cut healed, the nodes that
// stayed together took the healed node's stale 'down' verdicts about each
// other, and on 5 nodes took over a live node's sessions (a delivery it had
// accepted was lost). Fixed in membership (a 'down' verdict about a member
// this node is linked to is refused,
// MembershipTest.AHealedNodesStaleDownVerdictsAboutLinkedMembersAreRefused).

std::string CaseName(const ::testing::TestParamInfo<FaultCase>& param) { return param.param.Name(); }

class SessionFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(SessionFaultTest, AcknowledgedMessagesReachTheirSessionsOnce) {
  SessionWorkload workload({.sessions = kSessions, .qos = 1, .on_victims = false});
  FaultChecks checks;
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
  RunAndCheckFaultCase(GetParam(), workload, checks);
}

INSTANTIATE_TEST_SUITE_P(Matrix, SessionQos2FaultTest, ::testing::ValuesIn(FullMatrix()), CaseName);

// The sessions live on the victims: task transfer under a stream. Until
// 2026-11-30 every case lost thousands of messages acknowledged in the
// ~3 s before the takeover (the takeover gap, docs/partitions.md); the
// forwards a dead node never confirmed are now replayed to the sessions
// taken from it. ctest runs one case.
class VictimSessionFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(VictimSessionFaultTest, AcknowledgedMessagesReachTakenOverSessions) {
  SessionWorkload workload({.sessions = kSessions, .qos = 1, .on_victims = true});
  FaultChecks checks;
  // QoS 1 is at least once: a message an online session's client received
  // and acknowledged just before its node died, the acknowledgement not yet
  // replicated, comes again from the survivor (counted, not failed; 0-1 a
  // case since the members really read during the stream). QoS 2 below
  // must have none.
  checks.no_duplicates = false;
  checks.in_ci = [](const FaultCase& c) {
    return c.nodes == 3 && c.storage == "bitcask" && c.fault == FaultKind::kKillLeader;
  };
  RunAndCheckFaultCase(GetParam(), workload, checks);
}

INSTANTIATE_TEST_SUITE_P(Matrix, VictimSessionFaultTest, ::testing::ValuesIn(FullMatrix()), CaseName);

// The same at QoS 2: a replayed message a taken-over session held already
// (the dead node had replicated it) must not come twice. Full matrix only.
class VictimSessionQos2FaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(VictimSessionQos2FaultTest, AcknowledgedMessagesReachTakenOverSessionsExactlyOnce) {
  SessionWorkload workload({.sessions = kSessions, .qos = 2, .on_victims = true});
  FaultChecks checks;
  checks.in_ci = [](const FaultCase&) { return false; };
  RunAndCheckFaultCase(GetParam(), workload, checks);
}

INSTANTIATE_TEST_SUITE_P(Matrix, VictimSessionQos2FaultTest, ::testing::ValuesIn(FullMatrix()), CaseName);

// replication.ack = "leader" (docs/partitions.md): a publish is acknowledged
// on the node's own store, so a node killed before its session writes
// committed loses them. This counts what it loses with the sessions on the
// victims (figures in docs/reliability.md); losses are not asserted, the
// rest is. Full matrix only.
class LeaderAckVictimSessionFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(LeaderAckVictimSessionFaultTest, CountsWhatLeaderAcknowledgementsLose) {
  SessionWorkload workload({.sessions = kSessions, .qos = 1, .on_victims = true});
  FaultChecks checks;
  checks.no_duplicates = false;
  checks.losses_measured_only = true;
  checks.in_ci = [](const FaultCase&) { return false; };
  FaultCase fault_case = GetParam();
  fault_case.node_flags = {"--replication-ack", "leader"};
  RunAndCheckFaultCase(fault_case, workload, checks);
}

INSTANTIATE_TEST_SUITE_P(Matrix, LeaderAckVictimSessionFaultTest, ::testing::ValuesIn(FullMatrix()), CaseName);

}  // namespace
}  // namespace estuary::server::testing
