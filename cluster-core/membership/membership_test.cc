// Membership scenarios on simulated time over in-memory transports.
#include "cluster-core/membership/membership.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>

#include "cluster-core/membership/memory_transport.h"
#include "io/sim/sim_loop.h"

namespace estuary::cluster {
namespace {

using S = MemberState;

std::string Address(NodeId id) { return "10.0.0." + std::to_string(id) + ":7000"; }

using Forwarder = testing::MembershipForwarder;

struct Node {
  std::unique_ptr<testing::MemoryTransport> transport;
  std::unique_ptr<Membership> membership;
  std::unique_ptr<Forwarder> forwarder;
  std::vector<Member> changes;
};

class MembershipTest : public ::testing::Test {
 protected:
  Node& Start(NodeId id, std::vector<std::string> seeds, std::string address = "",
              std::optional<uint64_t> incarnation = std::nullopt) {
    if (address.empty()) address = Address(id);
    auto node = std::make_unique<Node>();
    node->transport = std::make_unique<testing::MemoryTransport>(network_, id, address);
    MembershipConfig config{.self = id, .cluster_address = address, .admin_address = "admin-" + address};
    config.incarnation = incarnation;
    config.down_on_refused = down_on_refused_;
    node->membership = std::make_unique<Membership>(loop_, *node->transport, config);
    node->forwarder = std::make_unique<Forwarder>(*node->membership);
    node->transport->set_handler(node->forwarder.get());
    node->membership->set_on_change([raw = node.get()](const Member& m) { raw->changes.push_back(m); });
    node->transport->set_on_refused([membership = node->membership.get()](const std::string& at,
                                                                          const std::string& reason) {
      membership->OnLinkRefused(at, reason);
    });
    // As estuaryd wires it (server/node.cc): refused dials reach membership.
    node->transport->set_dial_observer(
        [membership = node->membership.get()](const DialFailure& failure) { membership->OnDialFailed(failure); });
    node->membership->Start(seeds);
    Node& ref = *node;
    nodes_[address] = std::move(node);
    return ref;
  }
  Membership& M(NodeId id) { return *nodes_.at(Address(id))->membership; }
  void Crash(NodeId id) {
    auto it = nodes_.find(Address(id));
    it->second->membership.reset();
    nodes_.erase(it);  // the transport's destructor breaks its links
  }
  void Run(int64_t ms) { loop_.AdvanceBy(ms); }
  S StateAt(NodeId observer, NodeId member) {
    const Member* found = M(observer).Find(member);
    return found ? found->state : S::kJoining;
  }
  // Every running node's view of `member`.
  bool AllSee(NodeId member, S state) {
    for (auto& [address, node] : nodes_) {
      const Member* found = node->membership->Find(member);
      if (!found || found->state != state) return false;
    }
    return true;
  }
  void StartThree() {
    Start(1, {});
    Start(2, {Address(1)});
    Start(3, {Address(1)});
    Run(1000);
  }

  // When `observer` saw `member` turn `state` (its latest such change), or -1.
  // Node 3 lost at `lost_at`: nodes 1 and 2 suspect it and declare it down
  // only once down_after_ms (3000) has passed, not sooner.
  void ExpectNode3DownOnlyAtDownAfter(int64_t lost_at) {
    Run(2900);
    EXPECT_EQ(StateAt(1, 3), S::kSuspect);
    EXPECT_EQ(StateAt(2, 3), S::kSuspect);
    Run(300);
    for (NodeId observer : {1, 2}) {
      EXPECT_EQ(StateAt(observer, 3), S::kDown) << observer;
      EXPECT_GE(WhenSeen(observer, 3, S::kDown) - lost_at, 3000) << observer;
    }
  }
  int64_t WhenSeen(NodeId observer, NodeId member, S state) {
    int64_t when = -1;
    for (const Member& change : nodes_.at(Address(observer))->changes) {
      if (change.node == member && change.state == state) when = change.since_ms;
    }
    return when;
  }

  bool down_on_refused_ = true;  // MembershipConfig::down_on_refused of nodes started from now on
  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  testing::MemoryNetwork network_{loop_};
  std::map<std::string, std::unique_ptr<Node>> nodes_;
};

TEST_F(MembershipTest, ThreeNodesJoinThroughOneSeedAndFormAFullMesh) {
  StartThree();
  for (NodeId id : {1, 2, 3}) EXPECT_TRUE(AllSee(id, S::kUp)) << id;
  EXPECT_TRUE(nodes_.at(Address(2))->transport->connected(3));  // learnt from the table, not a seed
  const Member* two = M(3).Find(2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->cluster_address, Address(2));
  EXPECT_EQ(two->admin_address, "admin-" + Address(2));
  ASSERT_EQ(M(1).members().size(), 3u);
  EXPECT_EQ(M(1).members()[0].node, 1);
  EXPECT_TRUE(M(1).IsLive(3));
}

// Issue 24 point 1: with every node seeded with all three (one config),
// membership forms the mesh, and BootstrapAsk is answered with the
// answering node's own "formed" hook; a node without hooks says no.
TEST_F(MembershipTest, Issue24IdenticalSeedsFormAMeshAndBootstrapAsksAreAnswered) {
  const std::vector<std::string> all = {Address(1), Address(2), Address(3)};
  for (NodeId id : {3, 1, 2}) Start(id, all);
  Run(1000);
  for (NodeId id : {1, 2, 3}) EXPECT_TRUE(AllSee(id, S::kUp)) << id;
  std::map<NodeId, bool> heard;
  M(1).set_bootstrap_hooks([] { return false; }, [&heard](NodeId from, bool formed) { heard[from] = formed; });
  M(2).set_bootstrap_hooks([] { return true; }, nullptr);
  M(1).AskBootstrapState(2);
  M(1).AskBootstrapState(3);
  Run(100);
  EXPECT_EQ(heard, (std::map<NodeId, bool>{{2, true}, {3, false}}));
}

// The slow path: without the refusal fast path (down_on_refused off) a
// crash is told from a cut only by time.
TEST_F(MembershipTest, CrashedNodeIsSuspectThenDownEverywhereThenUpWhenBack) {
  down_on_refused_ = false;
  StartThree();
  Crash(3);
  Run(600);  // past suspect_after_ms (500)
  EXPECT_EQ(StateAt(1, 3), S::kSuspect);
  EXPECT_EQ(StateAt(2, 3), S::kSuspect);
  Run(2600);  // past down_after_ms (3000) since the loss
  EXPECT_TRUE(AllSee(3, S::kDown));
  EXPECT_FALSE(M(1).IsLive(3));
  const uint64_t down_incarnation = M(1).Find(3)->incarnation;

  Start(3, {Address(1)});  // a fresh process: a new incarnation, joining
  Run(1000);
  EXPECT_TRUE(AllSee(3, S::kUp));
  EXPECT_GT(M(1).Find(3)->incarnation, down_incarnation);  // it refuted "down"
  EXPECT_TRUE(nodes_.at(Address(3))->transport->connected(2));
}

// A crashed process's address refuses the redials, and the probes find
// nobody who still reaches it: down at suspect time plus the probe round,
// not at down_after_ms.
TEST_F(MembershipTest, CrashedNodeWhoseAddressRefusesIsDownAtSuspectTime) {
  StartThree();
  const int64_t crashed_at = loop_.NowMs();
  Crash(3);
  Run(450);
  EXPECT_EQ(StateAt(1, 3), S::kUp);  // refused already, but not yet suspect
  EXPECT_EQ(StateAt(2, 3), S::kUp);
  Run(350);  // 800 ms after the crash
  for (NodeId observer : {1, 2}) {
    EXPECT_EQ(StateAt(observer, 3), S::kDown) << observer;
    const int64_t down_after = WhenSeen(observer, 3, S::kDown) - crashed_at;
    EXPECT_GE(down_after, 500) << observer;  // suspect_after_ms
    EXPECT_LE(down_after, 650) << observer;  // + a probe round trip and a tick or two
  }
}

// A refusal alone is not enough: a member that another member still
// reaches (a firewall rejecting our dials, a route gone on our side only)
// stays up, however long.
TEST_F(MembershipTest, RefusedButReachedByAnotherMemberIsNotDown) {
  StartThree();
  network_.Cut(Address(1), Address(3));  // silent; 2 still reaches both
  Run(100);
  for (int i = 0; i < 100; ++i) {  // 10 s of refused redials, as if spurious
    M(1).OnDialFailed({.address = Address(3), .node = 3, .error = DialError::kRefused, .detail = "spurious"});
    Run(100);
  }
  EXPECT_EQ(WhenSeen(1, 3, S::kDown), -1);
  EXPECT_GE(WhenSeen(1, 3, S::kSuspect), 0);  // suspected, then refuted
  for (NodeId id : {1, 2, 3}) EXPECT_TRUE(AllSee(id, S::kUp)) << id;
}

// A cut is silent (dials time out, nobody refuses): down only at
// down_after_ms, as before.
TEST_F(MembershipTest, SilentlyCutNodeIsDownOnlyAtDownAfter) {
  StartThree();
  const int64_t cut_at = loop_.NowMs();
  network_.Cut(Address(3), Address(1));
  network_.Cut(Address(3), Address(2));
  ExpectNode3DownOnlyAtDownAfter(cut_at);
}

// A refusal from before the link was lost (a dial at start-up, before the
// member listened) is no evidence about the process behind the link lost
// later, and other failures (timeouts) are none at all.
TEST_F(MembershipTest, OnlyARefusalSinceTheLossCounts) {
  StartThree();
  M(1).OnDialFailed({.address = Address(3), .node = 3, .error = DialError::kRefused, .detail = "old"});
  network_.Cut(Address(3), Address(1));
  network_.Cut(Address(3), Address(2));
  Run(100);
  M(1).OnDialFailed({.address = Address(3), .node = 3, .error = DialError::kOther, .detail = "timed out"});
  Run(2800);
  EXPECT_EQ(StateAt(1, 3), S::kSuspect);
}

// Operators can turn the fast path off: a crash is then down at
// down_after_ms, refusals or not.
TEST_F(MembershipTest, RefusalFastPathOffKeepsDownAfter) {
  down_on_refused_ = false;
  StartThree();
  const int64_t crashed_at = loop_.NowMs();
  Crash(3);
  ExpectNode3DownOnlyAtDownAfter(crashed_at);
}

TEST_F(MembershipTest, GracefulLeaveIsFinalAndGossipDoesNotBringItBack) {
  StartThree();
  bool done = false;
  M(3).Leave([&] { done = true; });
  EXPECT_EQ(StateAt(3, 3), S::kLeaving);
  Run(200);
  EXPECT_TRUE(done);
  EXPECT_TRUE(AllSee(3, S::kLeft));
  Run(10'000);  // many gossip rounds
  EXPECT_TRUE(AllSee(3, S::kLeft));
  EXPECT_FALSE(nodes_.at(Address(1))->transport->connected(3));
  EXPECT_EQ(nodes_.at(Address(1))->transport->wanted().count(Address(3)), 0u);

  // Starting it again is a deliberate act: the new process rejoins.
  Crash(3);
  Start(3, {Address(1)});
  Run(1000);
  EXPECT_TRUE(AllSee(3, S::kUp));
  EXPECT_EQ(M(1).Find(3)->epoch, 1u);
  EXPECT_TRUE(nodes_.at(Address(3))->transport->connected(2));
}

TEST_F(MembershipTest, OperatorRemoveIsClusterWideAndAnInviteReadmits) {
  StartThree();
  EXPECT_FALSE(M(1).Remove(1));  // self
  EXPECT_FALSE(M(1).Remove(42));  // unknown
  ASSERT_TRUE(M(1).Remove(3));
  Run(500);
  EXPECT_TRUE(AllSee(3, S::kLeft));
  EXPECT_TRUE(M(3).removed());
  Run(10'000);
  EXPECT_TRUE(AllSee(3, S::kLeft));
  EXPECT_FALSE(nodes_.at(Address(2))->transport->connected(3));

  M(2).Join(Address(3));  // an operator asks a member to readmit it
  Run(1000);
  EXPECT_TRUE(AllSee(3, S::kUp));
  EXPECT_FALSE(M(3).removed());
  EXPECT_EQ(M(1).Find(3)->epoch, 1u);

  // Removed again, then restarted with its seeds: it learns it is out and
  // stays out...
  ASSERT_TRUE(M(1).Remove(3));
  Run(500);
  Crash(3);
  Node& again = Start(3, {Address(1)});
  Run(2000);
  EXPECT_TRUE(again.membership->removed());
  EXPECT_EQ(StateAt(1, 3), S::kLeft);
  EXPECT_TRUE(M(1).Find(3)->removed);
  EXPECT_EQ(StateAt(2, 3), S::kLeft);
  // ...until the operator joins it, from its own side this time.
  again.membership->Join(Address(2));
  Run(1000);
  EXPECT_TRUE(AllSee(3, S::kUp));
  EXPECT_EQ(M(1).Find(3)->epoch, 2u);
  EXPECT_TRUE(again.transport->connected(1));
}

// A Membership destroyed while its own work is still queued on the loop (the
// gossip push a removal posts, the removed member's lingering link, its
// timers): none of it runs (io::Scope), so the removal never leaves node 1,
// whose transport stays up and would carry it.
TEST_F(MembershipTest, WorkQueuedByADestroyedMembershipDoesNothing) {
  StartThree();
  Node& one = *nodes_.at(Address(1));
  ASSERT_TRUE(one.membership->Remove(3));
  one.transport->set_handler(nullptr);
  one.transport->set_on_refused({});
  one.transport->set_dial_observer({});
  one.membership.reset();
  Run(10'000);
  EXPECT_EQ(StateAt(2, 3), S::kUp);
  EXPECT_EQ(StateAt(3, 3), S::kUp);
  EXPECT_FALSE(M(3).removed());
  EXPECT_TRUE(one.transport->connected(3));  // the linger timer did not drop the link
  EXPECT_EQ(StateAt(2, 1), S::kUp);          // node 1's links are still up
}

// The new process first joins through a member that never heard of the
// leave, and meets its tombstone only afterwards, while already up.
TEST_F(MembershipTest, ANewProcessRejoinsAfterALeaveEvenWhenItMeetsTheTombstoneLate) {
  StartThree();
  network_.Cut(Address(1), Address(2));
  network_.Cut(Address(2), Address(3));
  M(3).Leave(nullptr);
  Run(4000);
  ASSERT_EQ(StateAt(1, 3), S::kLeft);
  ASSERT_EQ(StateAt(2, 3), S::kDown);  // it never heard of the leave
  Crash(3);
  network_.Heal(Address(2), Address(3));
  Node& again = Start(3, {Address(2)});
  Run(2000);
  EXPECT_EQ(StateAt(3, 3), S::kUp);
  EXPECT_FALSE(again.membership->removed());
  network_.Heal(Address(1), Address(2));
  Run(2000);
  for (NodeId id : {1, 2, 3}) EXPECT_TRUE(AllSee(id, S::kUp)) << id;
  EXPECT_FALSE(again.membership->removed());
  EXPECT_EQ(M(1).Find(3)->epoch, 1u);
}

TEST_F(MembershipTest, RemovingANodeThatLeftKeepsItOutAfterARestart) {
  StartThree();
  M(3).Leave(nullptr);
  Run(500);
  ASSERT_TRUE(AllSee(3, S::kLeft));
  ASSERT_TRUE(M(1).Remove(3));  // turns the leave into a removal
  Run(500);
  Crash(3);
  Node& again = Start(3, {Address(2)});
  Run(2000);
  EXPECT_TRUE(again.membership->removed());
  EXPECT_EQ(StateAt(1, 3), S::kLeft);
  EXPECT_EQ(StateAt(2, 3), S::kLeft);
}

TEST_F(MembershipTest, NodeIdConflictRefusesTheNewcomer) {
  Start(1, {});
  Start(2, {Address(1)});
  Run(1000);
  Crash(2);
  Run(100);  // node 2 is still a live member (not yet suspect)
  Node& impostor = Start(2, {Address(1)}, "10.0.0.99:7000");
  Run(1000);
  EXPECT_FALSE(impostor.membership->refused_reason().empty());
  EXPECT_NE(impostor.membership->refused_reason().find("10.0.0.2:7000"), std::string::npos);
  EXPECT_EQ(M(1).Find(2)->cluster_address, Address(2));
  EXPECT_EQ(impostor.membership->Find(1), nullptr);  // it never got the table
  EXPECT_FALSE(impostor.transport->connected(1));
}

TEST_F(MembershipTest, ANodeRestartedOnANewAddressIsAdmittedOnceItsOldSelfIsDown) {
  Start(1, {});
  Start(2, {Address(1)});
  Run(1000);
  Crash(2);
  Run(100);  // the old node 2 still counts as live: the restart is refused
  Node& restarted = Start(2, {Address(1)}, "10.0.0.99:7000");
  Run(1000);
  ASSERT_FALSE(restarted.membership->refused_reason().empty());
  // The old incarnation goes down (3 s after its link dropped); the refused
  // node retries through its seeds and is admitted at its new address.
  Run(4000);
  EXPECT_TRUE(restarted.membership->refused_reason().empty());
  EXPECT_EQ(StateAt(1, 2), S::kUp);
  EXPECT_EQ(M(1).Find(2)->cluster_address, "10.0.0.99:7000");
  EXPECT_TRUE(restarted.transport->connected(1));
}

TEST_F(MembershipTest, ALiveHoldersIdStaysRefusedAcrossRetries) {
  Start(1, {});
  Start(2, {Address(1)});
  Run(1000);
  Node& impostor = Start(2, {Address(1)}, "10.0.0.99:7000");
  Run(10'000);  // several retry periods while the rightful node 2 is alive
  EXPECT_EQ(impostor.membership->Find(1), nullptr);  // never admitted
  EXPECT_EQ(M(1).Find(2)->cluster_address, Address(2));
  EXPECT_EQ(StateAt(1, 2), S::kUp);
}

// The links refuse an id already linked from elsewhere before membership
// hears of it; the newcomer still knows it was refused, and why.
TEST_F(MembershipTest, ALiveHoldersIdIsRefusedByTheLinksAndTheNewcomerKnowsWhy) {
  Start(1, {});
  Start(2, {Address(1)});
  Run(1000);
  Node& impostor = Start(2, {Address(1)}, "10.0.0.99:7000");
  Run(3000);
  EXPECT_EQ(impostor.membership->last_refusal(), "10.0.0.1:7000 refused this node: node id 2 already used by " +
                                                     Address(2));
  EXPECT_EQ(impostor.membership->Find(2)->state, S::kJoining);
  EXPECT_EQ(StateAt(1, 2), S::kUp);
  // The rightful holder dies: once it is down the newcomer is admitted and
  // the refusal is forgotten.
  Crash(2);
  Run(10'000);
  EXPECT_EQ(StateAt(1, 2), S::kUp);
  EXPECT_EQ(M(1).Find(2)->cluster_address, "10.0.0.99:7000");
  EXPECT_TRUE(impostor.membership->last_refusal().empty());
}

TEST_F(MembershipTest, WronglySuspectedNodeRefutesAndIsNeverDown) {
  StartThree();
  network_.Cut(Address(1), Address(3));  // 2 still reaches both
  Run(10'000);
  for (NodeId id : {1, 2, 3}) EXPECT_TRUE(AllSee(id, S::kUp)) << id;
  EXPECT_GT(M(2).Find(3)->incarnation, 0u);  // 3 refuted 1's suspicion
  for (const Member& change : nodes_.at(Address(1))->changes) {
    EXPECT_FALSE(change.node == 3 && change.state == S::kDown);
  }
  bool suspected = false;
  for (const Member& change : nodes_.at(Address(1))->changes) {
    suspected |= change.node == 3 && change.state == S::kSuspect;
  }
  EXPECT_TRUE(suspected);
}

TEST_F(MembershipTest, PartitionOfOneFromTwoThenHeal) {
  StartThree();
  network_.Cut(Address(3), Address(1));
  network_.Cut(Address(3), Address(2));
  Run(3500);
  EXPECT_EQ(StateAt(1, 3), S::kDown);
  EXPECT_EQ(StateAt(2, 3), S::kDown);
  EXPECT_EQ(StateAt(1, 2), S::kUp);
  EXPECT_EQ(StateAt(3, 1), S::kDown);  // the lone node's view of the majority
  EXPECT_EQ(StateAt(3, 2), S::kDown);

  network_.Heal(Address(3), Address(1));
  network_.Heal(Address(3), Address(2));
  Run(2000);
  for (NodeId id : {1, 2, 3}) EXPECT_TRUE(AllSee(id, S::kUp)) << id;
}

// The cut-off node declared the other two down; when the cut heals its
// stale verdicts reach them, and neither takes the other (to which it is
// linked all along) for down, not even for a moment.
TEST_F(MembershipTest, AHealedNodesStaleDownVerdictsAboutLinkedMembersAreRefused) {
  StartThree();
  network_.Cut(Address(3), Address(1));
  network_.Cut(Address(3), Address(2));
  Run(3500);
  ASSERT_EQ(StateAt(3, 1), S::kDown);
  ASSERT_EQ(StateAt(3, 2), S::kDown);
  nodes_.at(Address(1))->changes.clear();
  nodes_.at(Address(2))->changes.clear();
  network_.Heal(Address(3), Address(1));
  network_.Heal(Address(3), Address(2));
  Run(2000);
  for (NodeId id : {1, 2, 3}) EXPECT_TRUE(AllSee(id, S::kUp)) << id;
  for (const Member& change : nodes_.at(Address(1))->changes) {
    EXPECT_FALSE(change.node == 2 && change.state == S::kDown) << "node 1 took node 3's stale verdict on node 2";
  }
  for (const Member& change : nodes_.at(Address(2))->changes) {
    EXPECT_FALSE(change.node == 1 && change.state == S::kDown) << "node 2 took node 3's stale verdict on node 1";
  }
}

TEST_F(MembershipTest, ANodeThatDiesWhileLeavingIsLeftEverywhere) {
  StartThree();
  bool done = false;
  M(3).Leave([&] { done = true; });
  Run(1);  // the Leave frames are on the wire, the acks are not back
  Crash(3);
  Run(1000);
  EXPECT_FALSE(done);
  EXPECT_TRUE(AllSee(3, S::kLeft));
  EXPECT_FALSE(M(1).Find(3)->removed);
  for (NodeId id : {1, 2}) EXPECT_TRUE(AllSee(id, S::kUp));
}

TEST_F(MembershipTest, LeaveWithNoReachablePeerFinishesAtOnce) {
  Start(1, {});
  bool done = false;
  M(1).Leave([&] { done = true; });
  loop_.RunUntilIdle();
  EXPECT_TRUE(done);
  EXPECT_EQ(StateAt(1, 1), S::kLeft);
}

// Issue 6 leftovers: the incarnation was 0 for every member; restarts were
// told apart only by the metadata group's boot id.
TEST_F(MembershipTest, BootIncarnationIsAboveTheStoredOneAndTheWallClock) {
  io::ManualClock clock(1'000, 1'700'000'000'000);
  EXPECT_EQ(BootIncarnation(std::nullopt, clock), 1'700'000'001'000u);
  EXPECT_EQ(BootIncarnation(5, clock), 1'700'000'001'000u);                  // the clock is ahead
  EXPECT_EQ(BootIncarnation(1'800'000'000'000, clock), 1'800'000'000'001u);  // the clock went back
}

TEST_F(MembershipTest, ARestartedNodeComesBackWithAHigherIncarnationEverywhere) {
  StartThree();
  const uint64_t first = M(3).incarnation();
  EXPECT_EQ(first, static_cast<uint64_t>(clock_.WallMs() - 1000));  // its start time
  for (NodeId observer : {1, 2}) EXPECT_EQ(M(observer).Find(3)->incarnation, first);

  Crash(3);
  Run(50);  // restarted before anybody suspected it
  Start(3, {Address(1)});
  const uint64_t second = M(3).incarnation();
  EXPECT_GT(second, first);
  Run(1000);
  EXPECT_TRUE(AllSee(3, S::kUp));
  for (NodeId observer : {1, 2}) EXPECT_EQ(M(observer).Find(3)->incarnation, second) << observer;
  // Nobody held anything newer about it: no refutation was needed.
  EXPECT_EQ(M(3).incarnation(), second);
  // Observers were told (the metadata group learns incarnations this way).
  bool told = false;
  for (const Member& change : nodes_.at(Address(1))->changes) told |= change.node == 3 && change.incarnation == second;
  EXPECT_TRUE(told);
}

TEST_F(MembershipTest, AnIncarnationRaisedByARefutationIsReportedForPersisting) {
  StartThree();
  const uint64_t held = M(1).Find(3)->incarnation;
  Crash(3);
  Run(3500);
  ASSERT_TRUE(AllSee(3, S::kDown));
  // No data dir and a wall clock stepped far back: it starts below the
  // cluster's view, is told so and refutes; the owner hears of the raise.
  Node& restarted = Start(3, {Address(1)}, "", 7);
  std::vector<uint64_t> persisted;
  restarted.membership->set_on_incarnation([&](uint64_t value) { persisted.push_back(value); });
  Run(1000);
  EXPECT_TRUE(AllSee(3, S::kUp));
  EXPECT_GT(M(3).incarnation(), held);
  ASSERT_FALSE(persisted.empty());
  EXPECT_EQ(persisted.back(), M(3).incarnation());
  EXPECT_EQ(M(1).Find(3)->incarnation, M(3).incarnation());
}

TEST_F(MembershipTest, ARefusalIsKeptForHealthUntilAdmitted) {
  Start(1, {});
  Start(2, {Address(1)});
  Run(1000);
  Crash(2);
  Run(100);
  Node& restarted = Start(2, {Address(1)}, "10.0.0.99:7000");
  Run(1000);
  EXPECT_NE(restarted.membership->last_refusal().find("node id 2"), std::string::npos)
      << restarted.membership->last_refusal();
  // Through the retry (refused_reason() is cleared while it is in flight)
  // the refusal is kept, then forgotten once admitted.
  bool kept = true;
  for (int i = 0; i < 30 && StateAt(1, 2) != S::kUp; ++i) {
    Run(100);
    if (restarted.membership->Find(2)->state != S::kUp) kept &= !restarted.membership->last_refusal().empty();
  }
  EXPECT_TRUE(kept);
  Run(4000);
  EXPECT_EQ(StateAt(1, 2), S::kUp);
  EXPECT_TRUE(restarted.membership->last_refusal().empty());
}

}  // namespace
}  // namespace estuary::cluster
