// Quiescence of idle raft groups (issue 7 point 1; docs/raft.md,
// "Quiescence"): three RaftHosts on SimLoop + SimTransport, many groups
// each, a transport wrapper that counts (and can drop) raft frames.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster-core/links/sim_transport.h"
#include "cluster-core/meta/raft_host.h"
#include "io/sim/sim_loop.h"
#include "persistence/memory_engine.h"

namespace estuary::meta {
namespace {

using cluster::NodeId;

std::string Address(NodeId id) { return "node" + std::to_string(id); }

// Counts every frame the host sends; `drop` may swallow one.
class CountingTransport final : public cluster::Transport {
 public:
  explicit CountingTransport(cluster::SimTransport& inner) : inner_(inner) {}
  NodeId self() const override { return inner_.self(); }
  void AddPeerAddress(const std::string& address) override { inner_.AddPeerAddress(address); }
  void RemovePeer(NodeId node) override { inner_.RemovePeer(node); }
  cluster::SendResult Send(NodeId to, uint8_t type, std::string_view body) override {
    if (drop && drop(to, type, body)) return cluster::SendResult::kQueued;
    ++sent;
    return inner_.Send(to, type, body);
  }
  bool connected(NodeId node) const override { return inner_.connected(node); }
  std::vector<cluster::PeerInfo> peers() const override { return inner_.peers(); }

  uint64_t sent = 0;
  std::function<bool(NodeId, uint8_t, std::string_view)> drop;

 private:
  cluster::SimTransport& inner_;
};

// What the node's membership does for the host: liveness per peer.
class Dispatch final : public cluster::LinkHandler {
 public:
  explicit Dispatch(RaftHost& host) : host_(host) {}
  void OnPeerUp(const cluster::PeerInfo& peer) override { host_.OnPeerUp(peer.node); }
  void OnPeerDown(NodeId node) override { host_.OnPeerDown(node); }
  void OnFrame(NodeId from, uint8_t type, std::string_view body) override {
    if (type >= 0x40 && type <= 0x4F) host_.OnFrame(from, type, body);
  }

 private:
  RaftHost& host_;
};

class Counter final : public StateMachine {
 public:
  void Apply(const raft::Entry&) override { ++applied; }
  std::vector<uint8_t> Snapshot() const override { return {static_cast<uint8_t>(applied)}; }
  bool Restore(const std::vector<uint8_t>& data) override {
    applied = data.empty() ? 0 : data[0];
    return true;
  }
  uint64_t applied = 0;
};

struct Node {
  std::unique_ptr<persistence::MemoryEngine> engine;
  std::unique_ptr<cluster::SimTransport> sim;
  std::unique_ptr<CountingTransport> transport;
  std::unique_ptr<RaftHost> host;
  std::unique_ptr<Dispatch> dispatch;
  std::vector<std::unique_ptr<Counter>> machines;
};

// ESTUARY_QUIESCE_SEED=N replays (or sweeps) another seed; 1 by default.
uint64_t SeedFromEnv() {
  const char* seed = std::getenv("ESTUARY_QUIESCE_SEED");
  return seed == nullptr ? 1 : std::strtoull(seed, nullptr, 10);
}

struct Setup {
  size_t groups = 20;
  raft::Mode mode = raft::Mode::kTimestamp;
  bool quiesce = true;
  uint64_t seed = SeedFromEnv();
};

class Cluster {
 public:
  explicit Cluster(Setup setup)
      : setup_(setup),
        network_(loop_, cluster::SimNetworkConfig{.delay_ms = 2, .dead_after_ms = 500,
                                                  .seed = setup.seed}) {
    for (NodeId id = 1; id <= 3; ++id) {
      Node& node = nodes_[id];
      node.engine = std::make_unique<persistence::MemoryEngine>();
      node.sim = std::make_unique<cluster::SimTransport>(network_, id, Address(id), "secret");
      node.transport = std::make_unique<CountingTransport>(*node.sim);
      node.host = std::make_unique<RaftHost>(loop_, *node.transport, 10);
      node.dispatch = std::make_unique<Dispatch>(*node.host);
      node.sim->set_handler(node.dispatch.get());
    }
    for (auto& [id, node] : nodes_) {
      for (NodeId other = 1; other <= 3; ++other) {
        if (other != id) node.sim->AddPeerAddress(Address(other));
      }
      for (GroupId g = 0; g < setup_.groups; ++g) {
        GroupConfig config;
        config.group = g;
        config.raft.mode = setup_.mode;
        config.raft.random_seed = setup_.seed * 100'000 + g * 7 + id;
        config.bootstrap = raft::Config{{1, 2, 3}, {}};
        config.quiesce = setup_.quiesce;
        // Every replica bootstraps the same config, so all logs start empty.
        config.refuse_votes_when_empty = false;
        node.machines.push_back(std::make_unique<Counter>());
        auto added = node.host->AddGroup(config, *node.engine, *node.machines.back());
        EXPECT_TRUE(added) << (added ? "" : added.error());
      }
    }
  }
  ~Cluster() {
    for (auto& [id, node] : nodes_) Crash(id);
  }

  void Crash(NodeId id) {
    Node& node = nodes_.at(id);
    node.host.reset();  // before the transport it holds
    node.dispatch.reset();
    node.transport.reset();
    node.sim.reset();  // the peers see OnPeerDown after dead_after_ms
  }
  bool up(NodeId id) const { return nodes_.at(id).host != nullptr; }

  template <typename Pred>
  bool RunUntil(Pred pred, int64_t ms) {
    const int64_t deadline = clock_.NowMs() + ms;
    while (!pred() && clock_.NowMs() < deadline) loop_.AdvanceBy(10);
    return pred();
  }
  void RunFor(int64_t ms) { loop_.AdvanceBy(ms); }
  int64_t now() const { return clock_.NowMs(); }
  cluster::SimNetwork& network() { return network_; }

  RaftHost& host(NodeId id) { return *nodes_.at(id).host; }
  CountingTransport& transport(NodeId id) { return *nodes_.at(id).transport; }
  RaftGroup& group(NodeId id, GroupId g) { return *nodes_.at(id).host->group(g); }
  const raft::Raft& raft(NodeId id, GroupId g) { return group(id, g).raft(); }

  // The live leader with the highest term, if any.
  std::optional<NodeId> Leader(GroupId g) {
    std::optional<NodeId> best;
    for (auto& [id, node] : nodes_) {
      if (!up(id) || raft(id, g).role() != raft::Role::kLeader) continue;
      if (!best || raft(id, g).term() > raft(*best, g).term()) best = id;
    }
    return best;
  }
  // Every group has a leader that committed an entry of its term and that
  // every live node follows.
  bool AllLed() {
    for (GroupId g = 0; g < setup_.groups; ++g) {
      auto leader = Leader(g);
      if (!leader || raft(*leader, g).commit() < 1) return false;
      for (auto& [id, node] : nodes_) {
        if (up(id) && raft(id, g).leader() != *leader) return false;
      }
    }
    return true;
  }
  bool AllQuiescent() {
    for (auto& [id, node] : nodes_) {
      if (up(id) && host(id).quiescent_groups() != setup_.groups) return false;
    }
    return true;
  }
  uint64_t Sent() {
    uint64_t sent = 0;
    for (auto& [id, node] : nodes_) sent += up(id) ? node.transport->sent : 0;
    return sent;
  }

  // Proposes on `on` and runs until the answer; returns it.
  ProposeResult ProposeAndWait(NodeId on, GroupId g, int64_t ms = 3000) {
    std::optional<ProposeResult> result;
    group(on, g).Propose({1, 2, 3}, {}, [&](ProposeResult r) { result = r; });
    RunUntil([&] { return result.has_value(); }, ms);
    return result.value_or(ProposeResult{ProposeStatus::kTimeout, 0});
  }

 private:
  Setup setup_;
  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  cluster::SimNetwork network_;
  std::map<NodeId, Node> nodes_;
};

// (a) After some proposals and a quiet spell, 200 groups on 3 nodes cost
// no messages at all: nothing is sent for 10 s of simulated time.
TEST(RaftHostQuiesce, IdleGroupsSendNothing) {
  Cluster cluster({.groups = 200});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllLed(); }, 10'000));
  for (GroupId g = 0; g < 200; g += 20) {
    EXPECT_EQ(cluster.ProposeAndWait(*cluster.Leader(g), g).status, ProposeStatus::kOk);
  }
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 5'000));
  const uint64_t before = cluster.Sent();
  cluster.RunFor(10'000);
  EXPECT_EQ(cluster.Sent(), before);
  for (NodeId id = 1; id <= 3; ++id) {
    EXPECT_EQ(cluster.host(id).quiescent_groups(), 200u);
    EXPECT_EQ(cluster.host(id).quiesce_counters().notices_ignored, 0u);
  }
  // One notice per follower per group, at least.
  uint64_t sent = 0, accepted = 0;
  for (NodeId id = 1; id <= 3; ++id) {
    sent += cluster.host(id).quiesce_counters().notices_sent;
    accepted += cluster.host(id).quiesce_counters().notices_accepted;
  }
  EXPECT_GE(sent, 400u);
  EXPECT_EQ(accepted, sent);
}

// Without quiescence the same idle groups heartbeat all the time (the
// baseline the counting above is measured against).
TEST(RaftHostQuiesce, WithoutQuiescenceIdleGroupsHeartbeat) {
  Cluster cluster({.groups = 20, .quiesce = false});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllLed(); }, 10'000));
  const uint64_t before = cluster.Sent();
  cluster.RunFor(1'000);
  // 20 leaders x 2 followers x 20 heartbeats a second, and the answers.
  EXPECT_GE(cluster.Sent() - before, 1'500u);
  std::printf("[ figure   ] idle group without quiescence: %.1f frames/s (3 replicas, 50 ms "
              "heartbeats); with it: 0\n",
              static_cast<double>(cluster.Sent() - before) / 20.0);
  EXPECT_EQ(cluster.host(1).quiescent_groups(), 0u);
}

// (b) A proposal to a quiescent group commits at once, without an election,
// in both modes; (e) in timestamp mode the woken leader has no lease until
// a quorum answered it after the wake, and the proposal waits for that.
TEST(RaftHostQuiesce, ProposalWakesWithoutElectionAndLeaseWaitsForQuorum) {
  for (raft::Mode mode : {raft::Mode::kPlain, raft::Mode::kTimestamp}) {
    SCOPED_TRACE(mode == raft::Mode::kPlain ? "plain" : "timestamp");
    Cluster cluster({.groups = 10, .mode = mode});
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllLed(); }, 10'000));
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 5'000));
    const GroupId g = 3;
    const NodeId leader = *cluster.Leader(g);
    const raft::Term term = cluster.raft(leader, g).term();
    const raft::Index commit = cluster.raft(leader, g).commit();
    const uint64_t wakes = cluster.host(leader).quiesce_counters().wakes;
    const auto other_wakes = [&] {
      uint64_t sum = 0;
      for (NodeId id = 1; id <= 3; ++id) {
        for (GroupId other = 0; other < 10; ++other) {
          if (other != g) sum += cluster.group(id, other).counters().wakes;
        }
      }
      return sum;
    };
    const uint64_t others_before = other_wakes();

    std::optional<ProposeResult> result;
    cluster.group(leader, g).Propose({7}, {}, [&](ProposeResult r) { result = r; });
    EXPECT_FALSE(cluster.group(leader, g).quiescent());
    EXPECT_EQ(cluster.host(leader).quiesce_counters().wakes, wakes + 1);
    // The lease from before the quiet spell no longer counts.
    EXPECT_FALSE(cluster.raft(leader, g).HasLease(static_cast<uint64_t>(cluster.now())));
    ASSERT_TRUE(cluster.RunUntil([&] { return result.has_value(); }, 1'000));
    EXPECT_EQ(result->status, ProposeStatus::kOk);
    EXPECT_EQ(result->index, commit + 1);
    EXPECT_EQ(cluster.raft(leader, g).term(), term);
    EXPECT_EQ(cluster.raft(leader, g).role(), raft::Role::kLeader);
    if (mode == raft::Mode::kTimestamp) {
      EXPECT_TRUE(cluster.raft(leader, g).HasLease(static_cast<uint64_t>(cluster.now())));
      EXPECT_EQ(cluster.group(leader, g).counters().proposals_parked, 1u);
    }
    // It goes quiet again, and the other groups never woke.
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 2'000));
    EXPECT_EQ(cluster.raft(leader, g).term(), term);
    EXPECT_EQ(other_wakes(), others_before);
  }
}

// (c) The node leading some quiescent groups crashes; once its peers hear
// it is down, the other two elect a new leader for each of those groups
// (PreVote after the election timeout), and proposals commit there and in
// the groups whose leader lost a follower.
TEST(RaftHostQuiesce, LeaderNodeDownWakesFollowersWhoElect) {
  Cluster cluster({.groups = 30});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllLed(); }, 10'000));
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 5'000));
  const NodeId dead = *cluster.Leader(0);
  std::map<GroupId, raft::Term> led;  // groups the dead node led, and their term
  std::vector<GroupId> others;
  for (GroupId g = 0; g < 30; ++g) {
    if (*cluster.Leader(g) == dead) {
      led[g] = cluster.raft(dead, g).term();
    } else {
      others.push_back(g);
    }
  }
  ASSERT_FALSE(led.empty());
  cluster.Crash(dead);
  const auto reelected = [&] {
    for (auto& [g, term] : led) {
      auto leader = cluster.Leader(g);
      if (!leader || cluster.raft(*leader, g).term() <= term) return false;
      // Timestamp mode: a new leader takes proposals once a quorum vouched.
      if (!cluster.raft(*leader, g).HasLease(static_cast<uint64_t>(cluster.now()))) return false;
    }
    return true;
  };
  // dead_after_ms (500) + election timeouts (500-1000) and a round of votes.
  ASSERT_TRUE(cluster.RunUntil(reelected, 3'000));
  for (auto& [g, term] : led) {
    EXPECT_EQ(cluster.ProposeAndWait(*cluster.Leader(g), g).status, ProposeStatus::kOk) << g;
  }
  if (!others.empty()) {
    const GroupId g = others.front();
    const raft::Term term = cluster.raft(*cluster.Leader(g), g).term();
    EXPECT_EQ(cluster.ProposeAndWait(*cluster.Leader(g), g).status, ProposeStatus::kOk);
    EXPECT_EQ(cluster.raft(*cluster.Leader(g), g).term(), term);
  }
  // With a follower's node down, every group goes quiet again on the two
  // survivors (the down follower does not hold it up).
  EXPECT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 3'000));
  const uint64_t before = cluster.Sent();
  cluster.RunFor(5'000);
  EXPECT_EQ(cluster.Sent(), before);
}

// (d) A follower that never got its Quiesce notice stays active; its
// election timer wakes the others, whose hosts vouch for the live leader,
// so the leader keeps its term, and the group still works and quiesces.
TEST(RaftHostQuiesce, MissedNoticeLeavesFollowerActiveAndGroupWorks) {
  Cluster cluster({.groups = 5});
  const GroupId g = 2;
  // The first Quiesce notice of group g, whoever sends it, is lost.
  std::optional<NodeId> leader, deaf;
  for (NodeId id = 1; id <= 3; ++id) {
    cluster.transport(id).drop = [&, id](NodeId to, uint8_t type, std::string_view body) {
      auto notice = type == kRaftQuiesce ? DecodeQuiesce(body) : std::nullopt;
      if (deaf || !notice || notice->group != g) return false;
      leader = id;
      deaf = to;
      return true;
    };
  }
  ASSERT_TRUE(cluster.RunUntil([&] { return deaf.has_value(); }, 10'000));
  const NodeId other = 6 - *leader - *deaf;
  const raft::Term term = cluster.raft(*leader, g).term();
  EXPECT_TRUE(cluster.group(*leader, g).quiescent());
  cluster.RunFor(20);
  EXPECT_TRUE(cluster.group(other, g).quiescent());
  EXPECT_FALSE(cluster.group(*deaf, g).quiescent());
  // The deaf follower's election timer fires. The other follower's answer
  // to its PreVote arrives before the leader's: only the other host's
  // vouching for the live leader keeps it from granting (and a new term
  // from following).
  cluster.network().SetDelay(*leader, *deaf, 10);
  cluster.network().SetDelay(other, *deaf, 1);
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.group(*leader, g).counters().wakes > 0; },
                               3'000));
  EXPECT_EQ(cluster.group(*deaf, g).counters().wakes, 0u);  // it never slept
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 3'000));
  EXPECT_EQ(cluster.raft(*leader, g).term(), term);
  EXPECT_EQ(cluster.raft(*deaf, g).term(), term);
  EXPECT_EQ(cluster.ProposeAndWait(*deaf, g).status, ProposeStatus::kOk);  // forwarded
  EXPECT_EQ(cluster.raft(*leader, g).term(), term);
  EXPECT_EQ(*cluster.Leader(g), *leader);
}

// A notice that does not match the follower's state (here a forged
// commit) is ignored; the follower wakes and asks the leader to wake at
// once (0x44) instead of waiting for its election timer, and the group
// settles again in the same term.
TEST(RaftHostQuiesce, IgnoredNoticeWakesLeaderInARoundTrip) {
  Cluster cluster({.groups = 4});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllLed(); }, 10'000));
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 5'000));
  const GroupId g = 1;
  const NodeId leader = *cluster.Leader(g);
  const NodeId follower = leader == 1 ? 2 : 1;
  const raft::Term term = cluster.raft(leader, g).term();
  const QuiesceNotice wrong{g, term, cluster.raft(leader, g).commit() + 5, leader};
  cluster.host(follower).OnFrame(leader, kRaftQuiesce, EncodeQuiesce(wrong));
  EXPECT_EQ(cluster.group(follower, g).counters().quiesce_notices_ignored, 1u);
  EXPECT_FALSE(cluster.group(follower, g).quiescent());
  // Well within an election timeout (500 ms): the wake request, not a PreVote.
  EXPECT_TRUE(cluster.RunUntil([&] { return !cluster.group(leader, g).quiescent(); }, 50));
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 3'000));
  EXPECT_EQ(cluster.raft(leader, g).term(), term);
  EXPECT_EQ(cluster.raft(follower, g).term(), term);
}

// Waking must not disrupt a healthy leader: the link between the leader's
// node and one follower's breaks. That follower sees the leader down, wakes
// and campaigns; its PreVotes wake the other follower, which vouches for
// the leader (refuses) and asks the quiescent leader to resume heartbeats,
// so its own timer never fires and nobody grants a new term.
TEST(RaftHostQuiesce, OneSidedLeaderLossDoesNotDeposeTheLeader) {
  Cluster cluster({.groups = 6, .mode = raft::Mode::kPlain});
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllLed(); }, 10'000));
  ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 5'000));
  const NodeId leader = *cluster.Leader(0);
  const NodeId cut = leader == 1 ? 2 : 1;
  const NodeId other = 6 - leader - cut;
  std::map<GroupId, raft::Term> led;
  for (GroupId g = 0; g < 6; ++g) {
    if (*cluster.Leader(g) == leader) led[g] = cluster.raft(leader, g).term();
  }
  // The cut follower's grants would reach `other` before the leader's answers.
  cluster.network().SetDelay(other, cut, 1);
  cluster.network().SetDelay(other, leader, 10);
  cluster.network().Partition(leader, cut);
  cluster.RunFor(5'000);
  for (auto& [g, term] : led) {
    EXPECT_EQ(cluster.raft(leader, g).role(), raft::Role::kLeader) << g;
    EXPECT_EQ(cluster.raft(leader, g).term(), term) << g;
    EXPECT_EQ(cluster.raft(other, g).term(), term) << g;
    EXPECT_EQ(cluster.raft(other, g).leader(), leader) << g;
  }
  EXPECT_GT(cluster.group(other, led.begin()->first).counters().wake_requests_sent, 0u);
  EXPECT_EQ(cluster.ProposeAndWait(leader, led.begin()->first).status, ProposeStatus::kOk);
}

// Point 6: memory per idle group replica (3 nodes x 1,000 groups, MemoryEngine),
// heap bytes in use by malloc before and after, divided by 3,000.
TEST(RaftHostQuiesce, MemoryPerIdleGroup) {
  const size_t heap_before = mallinfo2().uordblks;
  {
    Cluster cluster({.groups = 1000});
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllLed(); }, 20'000));
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.AllQuiescent(); }, 5'000));
    const size_t heap_after = mallinfo2().uordblks;
    if (heap_after <= heap_before) GTEST_SKIP() << "no malloc statistics (a sanitizer's allocator?)";
    const double per_group = static_cast<double>(heap_after - heap_before) / 3000.0;
    std::printf("[ figure   ] idle raft group replica: %.0f heap bytes (3 hosts x 1000 groups, "
                "MemoryEngine, %zu bytes total; sizeof Raft %zu, RaftGroup %zu)\n",
                per_group, heap_after - heap_before, sizeof(raft::Raft), sizeof(RaftGroup));
    EXPECT_LT(per_group, 64 * 1024);
  }
}

}  // namespace
}  // namespace estuary::meta
