// Issue 24 point 1: the --bootstrap-expect decision (DecideBootstrap, pure)
// and its driver on a simulated loop (BootstrapGate): deterministic, the
// clock injected.
#include "server/bootstrap_gate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "io/clock.h"
#include "io/sim/sim_loop.h"

namespace estuary::server {
namespace {

const std::vector<std::string> kSeeds = {"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"};

BootstrapView ViewOf(BootstrapNodeId self, std::vector<BootstrapPeer> peers, bool self_formed = false) {
  return BootstrapView{.self = self,
                       .self_address = kSeeds[self - 1],
                       .seeds = kSeeds,
                       .expect = 3,
                       .self_formed = self_formed,
                       .initial = true,
                       .peers = std::move(peers)};
}

BootstrapPeer Peer(BootstrapNodeId node, bool connected, std::optional<bool> formed = std::nullopt) {
  return {node, kSeeds[node - 1], connected, formed};
}

TEST(DecideBootstrapTest, WaitsUntilEveryExpectedNodeIsReachable) {
  auto decision = DecideBootstrap(ViewOf(1, {Peer(2, true), Peer(3, false)}));
  EXPECT_EQ(decision.step, BootstrapStep::kWait);
  EXPECT_NE(decision.why.find("10.0.0.3:7000"), std::string::npos) << decision.why;
  // A member that is not a listed seed does not count.
  auto stranger = DecideBootstrap(ViewOf(1, {Peer(2, true), {9, "10.0.0.9:7000", true, false}}));
  EXPECT_EQ(stranger.step, BootstrapStep::kWait);
}

// Names compare as DNS compares them: without case.
TEST(DecideBootstrapTest, SeedsMatchAnnouncedAddressesWithoutCase) {
  BootstrapView view{.self = 2,
                     .self_address = "Estuary-1.estuary:7000",
                     .seeds = {"estuary-0.estuary:7000", "estuary-1.estuary:7000"},
                     .expect = 2,
                     .self_formed = false,
                     .initial = true,
                     .peers = {{1, "ESTUARY-0.Estuary:7000", true, false}}};
  auto decision = DecideBootstrap(view);
  EXPECT_EQ(decision.step, BootstrapStep::kJoin) << decision.why;
  EXPECT_EQ(decision.founder, 1);
}

TEST(DecideBootstrapTest, AsksThenTheLowestIdFoundsAndTheOthersJoin) {
  auto ask = DecideBootstrap(ViewOf(2, {Peer(1, true), Peer(3, true, false)}));
  EXPECT_EQ(ask.step, BootstrapStep::kAsk);
  EXPECT_EQ(ask.ask, std::vector<BootstrapNodeId>{1});
  auto founder = DecideBootstrap(ViewOf(1, {Peer(2, true, false), Peer(3, true, false)}));
  EXPECT_EQ(founder.step, BootstrapStep::kBootstrap);
  EXPECT_EQ(founder.founder, 1);
  for (BootstrapNodeId self : {2, 3}) {
    std::vector<BootstrapPeer> peers;
    for (BootstrapNodeId other : {1, 2, 3}) {
      if (other != self) peers.push_back(Peer(other, true, false));
    }
    auto joiner = DecideBootstrap(ViewOf(self, peers));
    EXPECT_EQ(joiner.step, BootstrapStep::kJoin) << self;
    EXPECT_EQ(joiner.founder, 1) << self;
  }
}

// Whatever order the views come in, exactly one node of the three founds,
// the same one, once all are reachable (identical seeds, unique ids).
TEST(DecideBootstrapTest, ExactlyOneFounderWhateverTheIdsAndOrder) {
  std::mt19937 random(24);
  for (int round = 0; round < 200; ++round) {
    std::vector<BootstrapNodeId> ids = {1, 2, 3};
    std::vector<BootstrapNodeId> pool(64);
    std::iota(pool.begin(), pool.end(), BootstrapNodeId{1});
    std::shuffle(pool.begin(), pool.end(), random);
    ids.assign(pool.begin(), pool.begin() + 3);
    int founders = 0;
    for (size_t self = 0; self < 3; ++self) {
      BootstrapView view{.self = ids[self],
                         .self_address = kSeeds[self],
                         .seeds = kSeeds,
                         .expect = 3,
                         .self_formed = false,
                         .initial = true,
                         .peers = {}};
      for (size_t other = 0; other < 3; ++other) {
        if (other != self) view.peers.push_back({ids[other], kSeeds[other], true, false});
      }
      std::shuffle(view.peers.begin(), view.peers.end(), random);
      auto decision = DecideBootstrap(view);
      EXPECT_EQ(decision.founder, *std::min_element(ids.begin(), ids.end()));
      founders += decision.step == BootstrapStep::kBootstrap;
    }
    EXPECT_EQ(founders, 1) << "round " << round;
  }
}

// A node outside the seeds (a StatefulSet scaled up with the same
// configuration) only joins, even with the lowest id.
TEST(DecideBootstrapTest, ANodeOutsideTheSeedsNeverFounds) {
  BootstrapView view = ViewOf(1, {Peer(2, true, false), Peer(3, true, false)});
  view.self_address = "10.0.0.9:7000";
  view.initial = false;
  auto decision = DecideBootstrap(view);
  EXPECT_EQ(decision.step, BootstrapStep::kJoin);
  EXPECT_NE(decision.why.find("never founds"), std::string::npos) << decision.why;
  view.self_formed = true;
  EXPECT_EQ(DecideBootstrap(view).step, BootstrapStep::kDone);
}

// A restart with empty state, or anyone already in a cluster: never found.
TEST(DecideBootstrapTest, StateAnywhereMeansJoinNeverFound) {
  EXPECT_EQ(DecideBootstrap(ViewOf(1, {}, /*self_formed=*/true)).step, BootstrapStep::kDone);
  auto joined = DecideBootstrap(ViewOf(1, {Peer(2, true, true), Peer(3, true, false)}));
  EXPECT_EQ(joined.step, BootstrapStep::kJoin);
  EXPECT_EQ(joined.founder, 0);
  // Even a member outside the seeds, and before all are reachable.
  auto foreign = DecideBootstrap(ViewOf(1, {{7, "10.0.0.7:7000", true, true}}));
  EXPECT_EQ(foreign.step, BootstrapStep::kJoin);
  // A formed answer from a peer whose link is down is not evidence either way.
  auto down = DecideBootstrap(ViewOf(1, {Peer(2, false, true), Peer(3, true, false)}));
  EXPECT_EQ(down.step, BootstrapStep::kWait);
}

class BootstrapGateTest : public ::testing::Test {
 protected:
  BootstrapGateTest() {
    hooks_.view = [this] {
      BootstrapView view = ViewOf(self_, {}, formed_);
      for (auto& [node, connected] : connected_) view.peers.push_back(Peer(node, connected));
      return view;
    };
    hooks_.ask = [this](BootstrapNodeId node) { asked_.push_back(node); };
    hooks_.bootstrap = [this]() -> Expected<void, std::string> {
      ++bootstraps_;
      if (fail_bootstrap_) return MakeError(std::string("the group already has state"));
      formed_ = true;
      return {};
    };
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  BootstrapHooks hooks_;
  BootstrapNodeId self_ = 1;
  bool formed_ = false;
  bool fail_bootstrap_ = false;
  std::map<BootstrapNodeId, bool> connected_{{2, false}, {3, false}};
  std::vector<BootstrapNodeId> asked_;
  int bootstraps_ = 0;
};

TEST_F(BootstrapGateTest, FoundsOnceAfterAllAnswerAndStops) {
  BootstrapGate gate(loop_, hooks_);
  gate.Start();
  loop_.AdvanceBy(1000);
  EXPECT_EQ(gate.last().step, BootstrapStep::kWait);
  EXPECT_TRUE(asked_.empty());
  connected_ = {{2, true}, {3, true}};
  loop_.AdvanceBy(BootstrapGate::kTickMs);
  EXPECT_EQ(gate.last().step, BootstrapStep::kAsk);
  EXPECT_EQ(asked_, (std::vector<BootstrapNodeId>{2, 3}));
  gate.OnState(2, false);
  loop_.AdvanceBy(BootstrapGate::kAskAgainMs);  // 3 is silent: asked again after a second, not every tick
  EXPECT_EQ(asked_, (std::vector<BootstrapNodeId>{2, 3, 3}));
  EXPECT_EQ(bootstraps_, 0);
  gate.OnState(3, false);
  loop_.AdvanceBy(BootstrapGate::kTickMs);
  EXPECT_TRUE(gate.bootstrapped());
  EXPECT_EQ(bootstraps_, 1);
  EXPECT_EQ(loop_.pending_timers(), 0u);  // done: no more ticks
}

TEST_F(BootstrapGateTest, AnAnswerIsForgottenWhenItsLinkGoesDown) {
  BootstrapGate gate(loop_, hooks_);
  connected_ = {{2, true}, {3, true}};
  gate.Start();
  gate.OnState(2, false);
  gate.OnState(3, false);
  connected_[3] = false;  // a new link may be a new process, with a store
  loop_.AdvanceBy(BootstrapGate::kTickMs);
  EXPECT_EQ(gate.last().step, BootstrapStep::kWait);
  connected_[3] = true;
  loop_.AdvanceBy(BootstrapGate::kTickMs);
  EXPECT_EQ(gate.last().step, BootstrapStep::kAsk);
  gate.OnState(3, true);  // it came back belonging to a cluster
  loop_.AdvanceBy(BootstrapGate::kTickMs * 10);
  EXPECT_EQ(gate.last().step, BootstrapStep::kJoin);
  EXPECT_EQ(bootstraps_, 0);
}

TEST_F(BootstrapGateTest, AJoinerNeverBootstrapsAndStopsOnceAdded) {
  self_ = 2;
  connected_ = {{1, true}, {3, true}};
  BootstrapGate gate(loop_, hooks_);
  gate.Start();
  gate.OnState(1, false);
  gate.OnState(3, false);
  loop_.AdvanceBy(BootstrapGate::kTickMs * 20);
  EXPECT_EQ(gate.last().step, BootstrapStep::kJoin);
  EXPECT_EQ(gate.last().founder, 1);
  formed_ = true;  // node 1's leader added this node
  loop_.AdvanceBy(BootstrapGate::kTickMs);
  EXPECT_EQ(gate.last().step, BootstrapStep::kDone);
  EXPECT_EQ(bootstraps_, 0);
  EXPECT_EQ(loop_.pending_timers(), 0u);
}

TEST_F(BootstrapGateTest, ARefusedBootstrapIsDecidedAgain) {
  fail_bootstrap_ = true;  // a leader reached the group between the decision and the act
  connected_ = {{2, true}, {3, true}};
  BootstrapGate gate(loop_, hooks_);
  gate.Start();
  gate.OnState(2, false);
  gate.OnState(3, false);
  loop_.AdvanceBy(BootstrapGate::kTickMs);
  EXPECT_FALSE(gate.bootstrapped());
  formed_ = true;
  loop_.AdvanceBy(BootstrapGate::kTickMs);
  EXPECT_EQ(gate.last().step, BootstrapStep::kDone);
  EXPECT_EQ(bootstraps_, 1);
}

}  // namespace
}  // namespace estuary::server
