// SimTransport on simulated time: delays and order, partitions, crashes,
// the secret, bounded queues and replayable backoff.
#include "cluster-core/links/sim_transport.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace estuary::cluster {
namespace {

struct Recorder final : LinkHandler {
  explicit Recorder(io::SimLoop& loop_in) : loop(loop_in) {}
  void OnPeerUp(const PeerInfo& peer) override {
    ups.push_back(peer);
    events.push_back(std::to_string(loop.NowMs()) + " up " + std::to_string(peer.node));
  }
  void OnPeerDown(NodeId node) override {
    downs.push_back({node, loop.NowMs()});
    events.push_back(std::to_string(loop.NowMs()) + " down " + std::to_string(node));
  }
  void OnFrame(NodeId from, uint8_t, std::string_view body) override {
    frames.push_back({from, std::string(body), loop.NowMs()});
  }
  void OnWritable(NodeId) override { ++writable; }
  struct Frame {
    NodeId from;
    std::string body;
    int64_t at;
  };
  io::SimLoop& loop;
  std::vector<PeerInfo> ups;
  std::vector<std::pair<NodeId, int64_t>> downs;
  std::vector<Frame> frames;
  std::vector<std::string> events;
  int writable = 0;
};

class SimTransportTest : public ::testing::Test {
 protected:
  SimTransport& AddNode(NodeId id, std::string secret = "s") {
    recorders_.push_back(std::make_unique<Recorder>(loop_));
    nodes_.push_back(std::make_unique<SimTransport>(*network_, id, "node" + std::to_string(id) + ":7000",
                                                    std::move(secret)));
    nodes_.back()->set_handler(recorders_.back().get());
    return *nodes_.back();
  }
  Recorder& rec(size_t index) { return *recorders_[index]; }
  SimTransport& node(size_t index) { return *nodes_[index]; }
  void Connect(size_t a, size_t b) {
    node(a).AddPeerAddress(node(b).address());
    loop_.AdvanceBy(100);
    ASSERT_TRUE(node(a).connected(node(b).self()));
    ASSERT_TRUE(node(b).connected(node(a).self()));
  }

  SimNetworkConfig Config() {
    SimNetworkConfig config;
    config.delay_ms = 5;
    config.dead_after_ms = 300;
    config.backoff_min_ms = 20;
    config.backoff_max_ms = 200;
    config.queue_low_bytes = 200;
    config.queue_high_bytes = 1000;
    return config;
  }

  io::ManualClock clock_{0};
  io::SimLoop loop_{clock_};
  std::unique_ptr<SimNetwork> network_ = std::make_unique<SimNetwork>(loop_, Config());
  std::vector<std::unique_ptr<Recorder>> recorders_;
  std::vector<std::unique_ptr<SimTransport>> nodes_;  // destroyed before the network

  void TearDown() override { nodes_.clear(); }
};

TEST_F(SimTransportTest, DialTakesARoundTripAndFramesKeepOrderAcrossDelayChanges) {
  AddNode(1);
  AddNode(2);
  AddNode(3);
  network_->SetDelay(1, 3, 20);
  node(0).AddPeerAddress(node(1).address());
  node(0).AddPeerAddress(node(2).address());
  loop_.AdvanceBy(9);
  EXPECT_FALSE(node(0).connected(2));
  loop_.AdvanceBy(1);  // one round trip of 2 x 5 ms
  EXPECT_TRUE(node(0).connected(2));
  EXPECT_FALSE(node(0).connected(3));
  loop_.AdvanceBy(30);  // 2 x 20 ms
  EXPECT_TRUE(node(0).connected(3));
  EXPECT_EQ(rec(1).ups.at(0).cluster_address, "node1:7000");

  const int64_t t0 = loop_.NowMs();
  ASSERT_EQ(node(0).Send(2, 0x20, "a"), SendResult::kQueued);
  network_->SetDelay(1, 2, 1);  // a later, faster frame must not overtake
  ASSERT_EQ(node(0).Send(2, 0x20, "b"), SendResult::kQueued);
  ASSERT_EQ(node(0).Send(3, 0x20, "far"), SendResult::kQueued);
  loop_.AdvanceBy(100);
  ASSERT_EQ(rec(1).frames.size(), 2u);
  EXPECT_EQ(rec(1).frames[0].body, "a");
  EXPECT_EQ(rec(1).frames[0].at, t0 + 5);
  EXPECT_EQ(rec(1).frames[1].body, "b");
  EXPECT_EQ(rec(1).frames[1].at, t0 + 5);
  ASSERT_EQ(rec(2).frames.size(), 1u);
  EXPECT_EQ(rec(2).frames[0].at, t0 + 20);
  EXPECT_EQ(node(0).Send(9, 0x20, "nobody"), SendResult::kNoLink);
}

TEST_F(SimTransportTest, OneLinkPerPairWhenBothDial) {
  AddNode(1);
  AddNode(2);
  node(0).AddPeerAddress(node(1).address());
  node(1).AddPeerAddress(node(0).address());
  loop_.AdvanceBy(1000);
  EXPECT_EQ(rec(0).ups.size(), 1u);
  EXPECT_EQ(rec(1).ups.size(), 1u);
  EXPECT_TRUE(network_->linked(1, 2));
}

TEST_F(SimTransportTest, ShortPartitionDelaysFramesLongOneTakesTheLinkDown) {
  AddNode(1);
  AddNode(2);
  Connect(0, 1);
  network_->Partition(1, 2);
  ASSERT_EQ(node(0).Send(2, 0x20, "held-1"), SendResult::kQueued);
  ASSERT_EQ(node(0).Send(2, 0x20, "held-2"), SendResult::kQueued);
  loop_.AdvanceBy(200);
  EXPECT_TRUE(rec(1).frames.empty());
  const int64_t healed_at = loop_.NowMs();
  network_->Heal(1, 2);
  loop_.AdvanceBy(50);
  ASSERT_EQ(rec(1).frames.size(), 2u);
  EXPECT_EQ(rec(1).frames[0].body, "held-1");
  EXPECT_EQ(rec(1).frames[1].body, "held-2");
  EXPECT_EQ(rec(1).frames[0].at, healed_at + 5);
  EXPECT_TRUE(rec(0).downs.empty());

  const int64_t cut_at = loop_.NowMs();
  network_->Partition(1, 2);
  ASSERT_EQ(node(0).Send(2, 0x20, "lost"), SendResult::kQueued);
  loop_.AdvanceBy(299);
  EXPECT_TRUE(rec(0).downs.empty());
  loop_.AdvanceBy(1);
  ASSERT_EQ(rec(0).downs.size(), 1u);
  ASSERT_EQ(rec(1).downs.size(), 1u);
  EXPECT_EQ(rec(0).downs[0], std::make_pair(NodeId{2}, cut_at + 300));
  EXPECT_EQ(node(0).Send(2, 0x20, "x"), SendResult::kNoLink);
  loop_.AdvanceBy(2000);  // redials fail while partitioned
  EXPECT_FALSE(node(0).connected(2));
  network_->Heal(1, 2);
  loop_.AdvanceBy(500);  // at most one backoff_max plus a round trip
  EXPECT_TRUE(node(0).connected(2));
  EXPECT_EQ(rec(1).ups.size(), 2u);
  EXPECT_EQ(rec(1).frames.size(), 2u);  // "lost" was lost with the link
}

TEST_F(SimTransportTest, CrashedNodeIsDownForPeersAfterDeadAfterAndComesBack) {
  AddNode(1);
  AddNode(2);
  Connect(0, 1);
  const int64_t crash_at = loop_.NowMs();
  network_->Crash(2);
  EXPECT_FALSE(node(1).connected(1));
  EXPECT_EQ(node(1).Send(1, 0x20, "from the dead"), SendResult::kNoLink);
  ASSERT_EQ(node(0).Send(2, 0x20, "into the void"), SendResult::kQueued);
  loop_.AdvanceBy(1000);
  ASSERT_EQ(rec(0).downs.size(), 1u);
  EXPECT_EQ(rec(0).downs[0].second, crash_at + 300);
  EXPECT_TRUE(rec(1).downs.empty());   // a crashed node hears nothing
  EXPECT_TRUE(rec(1).frames.empty());
  network_->Restart(2);  // a fresh process: node 1 still dials its address
  loop_.AdvanceBy(500);
  EXPECT_TRUE(node(0).connected(2));
  EXPECT_TRUE(node(1).connected(1));
  EXPECT_EQ(rec(1).ups.size(), 2u);
}

TEST_F(SimTransportTest, RestartBeforeDeadAfterReplacesTheOldLink) {
  AddNode(1);
  AddNode(2);
  Connect(0, 1);
  network_->Crash(1);
  loop_.AdvanceBy(50);
  network_->Restart(1);  // back before node 2 noticed: node 2 sees the old link go now
  ASSERT_EQ(rec(1).downs.size(), 1u);
  node(0).AddPeerAddress(node(1).address());  // the restarted process re-adds its seeds
  loop_.AdvanceBy(1000);
  EXPECT_TRUE(node(0).connected(2));
  EXPECT_TRUE(node(1).connected(1));
}

TEST_F(SimTransportTest, WrongSecretIsRefusedOnBothSides) {
  AddNode(1, "right");
  AddNode(2, "wrong");
  node(0).AddPeerAddress(node(1).address());
  loop_.AdvanceBy(1000);
  EXPECT_FALSE(node(0).connected(2));
  EXPECT_TRUE(rec(0).ups.empty());
  EXPECT_TRUE(rec(1).ups.empty());
  EXPECT_GE(node(0).refused(), 3u);  // it kept redialling with backoff
  EXPECT_EQ(node(0).refused(), node(1).refused());
}

TEST_F(SimTransportTest, BoundedQueueGivesFullThenWritable) {
  AddNode(1);
  AddNode(2);
  Connect(0, 1);
  const std::string body(95, 'x');  // 100 bytes with the header
  int queued = 0;
  while (node(0).Send(2, 0x20, body) == SendResult::kQueued) ++queued;
  EXPECT_EQ(queued, 11);  // accepted while at most 1000 bytes were queued
  EXPECT_EQ(node(0).queued_bytes(2), 1100u);
  loop_.AdvanceBy(5);
  EXPECT_EQ(rec(1).frames.size(), 11u);
  EXPECT_EQ(rec(0).writable, 1);
  EXPECT_EQ(node(0).Send(2, 0x20, body), SendResult::kQueued);
}

TEST_F(SimTransportTest, RemovePeerDropsTheLinkAndStopsDialling) {
  AddNode(1);
  AddNode(2);
  Connect(0, 1);
  node(0).RemovePeer(2);
  EXPECT_EQ(rec(0).downs.size(), 1u);
  EXPECT_EQ(rec(1).downs.size(), 1u);
  loop_.AdvanceBy(2000);
  EXPECT_FALSE(node(0).connected(2));
}

TEST_F(SimTransportTest, SameSeedReplaysTheSameHistory) {
  auto run = [](uint64_t seed) {
    io::ManualClock clock(0);
    io::SimLoop loop(clock);
    SimNetworkConfig config;
    config.delay_ms = 3;
    config.dead_after_ms = 100;
    config.backoff_min_ms = 10;
    config.backoff_max_ms = 500;
    config.seed = seed;
    SimNetwork network(loop, config);
    Recorder r1(loop), r2(loop), r3(loop);
    std::vector<std::string> events;
    {
      SimTransport a(network, 1, "a:1", "s"), b(network, 2, "b:1", "s"), c(network, 3, "c:1", "s");
      a.set_handler(&r1);
      b.set_handler(&r2);
      c.set_handler(&r3);
      network.Partition(1, 2);
      a.AddPeerAddress("b:1");
      a.AddPeerAddress("c:1");
      c.AddPeerAddress("b:1");
      loop.AdvanceBy(1000);
      network.Heal(1, 2);
      network.Crash(3);
      loop.AdvanceBy(1000);
      network.Restart(3);
      c.AddPeerAddress("a:1");
      loop.AdvanceBy(1000);
    }
    for (Recorder* r : {&r1, &r2, &r3}) {
      events.insert(events.end(), r->events.begin(), r->events.end());
      events.push_back("|");
    }
    return events;
  };
  auto first = run(7);
  EXPECT_EQ(first, run(7));
  EXPECT_NE(first, run(8));  // the jitter really depends on the seed
}

}  // namespace
}  // namespace estuary::cluster
