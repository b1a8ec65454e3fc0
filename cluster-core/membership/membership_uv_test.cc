// Membership over the real link layer: UvTransports on loopback TCP (port
// 0, a cluster secret), one UvLoop on the test thread. Waits on observed
// state with deadlines; prints how long joining and failure detection took.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <utility>

#include "cluster-core/links/uv_transport.h"
#include "cluster-core/membership/membership.h"
#include "cluster-core/membership/memory_transport.h"
#include "io/uv/test_util.h"

namespace estuary::cluster {
namespace {

using io::testing::RunUntil;

using Forwarder = testing::MembershipForwarder;

struct RealNode {
  std::unique_ptr<UvTransport> transport;
  std::unique_ptr<Membership> membership;
  std::unique_ptr<Forwarder> forwarder;
  std::string address;
};

class MembershipUvTest : public ::testing::Test {
 protected:
  ~MembershipUvTest() override {
    for (auto& [id, node] : nodes_) node.transport->Close();
    RunUntil(loop_, [] { return false; }, 50);  // let the closes complete
  }
  RealNode& Start(NodeId id, const std::vector<std::string>& seeds, bool down_on_refused = true) {
    RealNode& node = nodes_[id];
    UvTransportConfig links;
    links.self = id;
    links.secret = "membership-test-secret";
    links.seed = id;
    links.backoff_min_ms = 10;
    links.backoff_max_ms = 200;
    node.transport = std::make_unique<UvTransport>(loop_, links);
    auto port = node.transport->Listen({"127.0.0.1", 0});
    EXPECT_TRUE(port) << port.error();
    node.address = "127.0.0.1:" + std::to_string(*port);
    node.membership = std::make_unique<Membership>(
        loop_, *node.transport, MembershipConfig{.self = id, .down_on_refused = down_on_refused});
    node.membership->set_addresses(node.address, "127.0.0.1:" + std::to_string(8000 + id));
    node.forwarder = std::make_unique<Forwarder>(*node.membership);
    node.transport->set_handler(node.forwarder.get());
    node.transport->set_dial_observer(
        [membership = node.membership.get()](const DialFailure& failure) { membership->OnDialFailed(failure); });
    node.membership->Start(seeds);
    return node;
  }
  bool AllSee(NodeId member, MemberState state, std::initializer_list<NodeId> observers) {
    for (NodeId observer : observers) {
      const Member* seen = nodes_[observer].membership->Find(member);
      if (seen == nullptr || seen->state != state) return false;
    }
    return true;
  }
  // Closes node `id`'s links and listener as a dying process would; returns
  // the ms until the others saw it suspect and down.
  std::pair<int64_t, int64_t> CrashAndTime(NodeId id, std::initializer_list<NodeId> survivors) {
    const int64_t crash = loop_.NowMs();
    nodes_[id].transport->set_handler(nullptr);
    nodes_[id].transport->Close();
    EXPECT_TRUE(RunUntil(loop_, [&] { return AllSee(id, MemberState::kSuspect, survivors) ||
                                             AllSee(id, MemberState::kDown, survivors); }, 10'000));
    const int64_t suspected = loop_.NowMs() - crash;
    EXPECT_TRUE(RunUntil(loop_, [&] { return AllSee(id, MemberState::kDown, survivors); }, 10'000));
    return {suspected, loop_.NowMs() - crash};
  }
  bool FullMesh(std::initializer_list<NodeId> ids) {
    for (NodeId a : ids) {
      for (NodeId b : ids) {
        if (a != b && !AllSee(b, MemberState::kUp, {a})) return false;
      }
    }
    return true;
  }

  io::UvLoop loop_;
  std::map<NodeId, RealNode> nodes_;
};

TEST_F(MembershipUvTest, JoinCrashDetectionAndLeaveOverTcp) {
  const int64_t start = loop_.NowMs();
  Start(1, {});
  const std::string seed = nodes_[1].address;
  Start(2, {seed});
  Start(3, {seed});
  ASSERT_TRUE(RunUntil(loop_, [&] { return FullMesh({1, 2, 3}); }, 10'000));
  EXPECT_TRUE(RunUntil(loop_, [&] { return nodes_[2].transport->connected(3); }, 10'000));  // full mesh
  std::printf("[ figures  ] 3 nodes up everywhere after %lld ms\n",
              static_cast<long long>(loop_.NowMs() - start));

  // A crash: node 3's links close without a word, and nothing listens on
  // its address any more: the redials are refused, so it is down once the
  // probes found nobody reaching it, not after down_after_ms.
  const auto [suspected, down] = CrashAndTime(3, {1, 2});
  std::printf("[ figures  ] crash: suspect after %lld ms, down after %lld ms\n", static_cast<long long>(suspected),
              static_cast<long long>(down));
  EXPECT_GE(suspected, 500);
  EXPECT_GE(down, 500);
  EXPECT_LT(down, 1500);  // about 550 ms; a loaded machine may add a few ticks

  // Graceful leave of node 2.
  bool left = false;
  const int64_t leave = loop_.NowMs();
  nodes_[2].membership->Leave([&] { left = true; });
  ASSERT_TRUE(RunUntil(loop_, [&] { return left && AllSee(2, MemberState::kLeft, {1}); }, 10'000));
  std::printf("[ figures  ] graceful leave acknowledged and seen after %lld ms\n",
              static_cast<long long>(loop_.NowMs() - leave));
  EXPECT_LT(loop_.NowMs() - leave, 2000);  // acked, not timed out
}

// With down_on_refused off (cluster-down-on-refused = false) a crash is
// down only after down_after_ms, refused redials or not.
TEST_F(MembershipUvTest, WithoutTheRefusalRuleACrashIsDownAfterDownAfter) {
  Start(1, {}, /*down_on_refused=*/false);
  const std::string seed = nodes_[1].address;
  Start(2, {seed}, false);
  Start(3, {seed}, false);
  ASSERT_TRUE(RunUntil(loop_, [&] { return FullMesh({1, 2, 3}); }, 10'000));
  const auto [suspected, down] = CrashAndTime(3, {1, 2});
  std::printf("[ figures  ] crash, refusal rule off: suspect after %lld ms, down after %lld ms\n",
              static_cast<long long>(suspected), static_cast<long long>(down));
  EXPECT_GE(suspected, 500);
  EXPECT_GE(down, 3000);
}

}  // namespace
}  // namespace estuary::cluster
