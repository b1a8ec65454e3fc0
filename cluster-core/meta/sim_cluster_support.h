// Test support (not part of estuary_meta): a cluster of nodes on simulated
// time (SimLoop + SimNetwork, seeded, no sleeps), each node a SimTransport,
// a RaftHost and a MetaGroup, started, crashed and restarted by the test.
// meta_group_test.cc uses it as is; partition_host_test.cc adds a
// PartitionHost on top of each node. Everything runs on the one SimLoop.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster-core/links/sim_transport.h"
#include "cluster-core/meta/meta_group.h"
#include "cluster-core/meta/raft_host.h"
#include "io/sim/sim_loop.h"
#include "persistence/memory_engine.h"

namespace estuary::meta {

inline std::string SimAddress(NodeId id) { return "node" + std::to_string(id); }

// A node's link handler: metadata frames (0x40-0x4F) to its raft host, any
// other frame to `other_frames` when the test set it.
class SimDispatch final : public cluster::LinkHandler {
 public:
  explicit SimDispatch(RaftHost& host) : host_(host) {}
  // With links_tell_host, a link's loss and return reach the raft host as
  // the cluster agent passes them on in estuaryd (quiescent groups wake and
  // elect when their leader's link is lost); off, only InformMembership does.
  void OnPeerUp(const cluster::PeerInfo& info) override {
    if (links_tell_host) host_.OnPeerUp(info.node);
  }
  void OnPeerDown(cluster::NodeId node) override {
    if (links_tell_host) host_.OnPeerDown(node);
  }
  bool links_tell_host = false;
  void OnFrame(cluster::NodeId from, uint8_t type, std::string_view body) override {
    if (cluster::kRaftFrames.Contains(type)) {
      host_.OnFrame(from, type, body);
    } else if (other_frames) {
      other_frames(from, type, body);
    }
  }

  std::function<void(cluster::NodeId, uint8_t, std::string_view)> other_frames;

 private:
  RaftHost& host_;
};

// One node. The stores outlive a crash (WipeDisk replaces them); the rest is
// rebuilt by every start. A test's node type derives from this and hides
// StopUpperLayers to drop what it built on the metadata group first.
struct SimNode {
  std::unique_ptr<persistence::MemoryEngine> meta_engine;
  std::unique_ptr<cluster::SimTransport> transport;
  std::unique_ptr<RaftHost> host;
  std::unique_ptr<SimDispatch> dispatch;
  std::unique_ptr<MetaGroup> meta;
  uint64_t boot = 0;
  int starts = 0;
  bool up = false;

  void StopUpperLayers() {}
};

struct SimClusterOptions {
  uint64_t seed = 1;
  uint32_t partitions = 64;
  uint64_t snapshot_every = MetaGroupConfig{}.snapshot_every;
  // Also tell each raft host which peers are up (node-level liveness, as
  // the cluster agent does), for tests that run quiescent groups.
  bool inform_hosts = false;
  // When peers see a crashed node's link go (SimNetworkConfig): 1500 ms
  // models a silent death; a few ms, a killed process whose kernel closes
  // its connections at once.
  uint32_t dead_after_ms = cluster::SimNetworkConfig{}.dead_after_ms;
  // Every node starts with seeds, node 1 too (--bootstrap-expect): nobody
  // founds the cluster until a test calls MetaGroup::Bootstrap.
  bool all_seeded = false;
};

template <typename Node>
class SimCluster {
 public:
  explicit SimCluster(SimClusterOptions options)
      : network_(loop_, cluster::SimNetworkConfig{.delay_ms = 2, .dead_after_ms = options.dead_after_ms,
                                                  .seed = options.seed}),
        options_(options) {}
  ~SimCluster() {
    for (auto& [id, node] : nodes_) Stop(node);
  }
  SimCluster(const SimCluster&) = delete;
  SimCluster& operator=(const SimCluster&) = delete;

  void Crash(NodeId id, bool gone = false) {
    Stop(nodes_.at(id));
    InformMembership(gone);
  }
  // A graceful stop, as estuaryd's SIGTERM does it: the node leaves the
  // metadata group first (MetaGroup::Leave: its MemberGone applied in its
  // own copy, or the timeout), then stops, and the others hear that it left
  // (Membership's kLeft). False if the metadata leave timed out.
  // `linger_ms` more pass before it stops (membership's leave, which the
  // others do not see here); `each_step` runs at every step of both (a
  // test's invariant).
  bool GracefulStop(NodeId id, uint32_t timeout_ms = 2000, int64_t linger_ms = 0,
                    const std::function<void()>& each_step = {}) {
    Node& node = nodes_.at(id);
    auto result = std::make_shared<std::optional<bool>>();
    node.meta->Leave(timeout_ms, [result](bool left) { *result = left; });
    auto step = [&] {
      if (each_step) each_step();
      return result->has_value();
    };
    RunUntil(step, int64_t{timeout_ms} + 1000);
    RunUntil([&] { return !step(); }, linger_ms);
    Crash(id, /*gone=*/true);
    return result->value_or(false);
  }
  void WipeMetaDisk(NodeId id) { nodes_.at(id).meta_engine = std::make_unique<persistence::MemoryEngine>(); }

  // What Membership would tell every node: who is live, and (when asked)
  // that a crashed node is gone.
  void InformMembership(bool crashed_are_gone = false) {
    for (auto& [id, node] : nodes_) {
      if (!node.up) continue;
      for (auto& [other, peer] : nodes_) {
        if (options_.inform_hosts && other != id) {
          peer.up ? node.host->OnPeerUp(other) : node.host->OnPeerDown(other);
        }
        if (peer.up) {
          node.meta->OnMemberLive(other, SimAddress(other), peer.boot);
        } else if (crashed_are_gone) {
          node.meta->OnMemberGone(other);
        }
      }
    }
  }

  template <typename Pred>
  bool RunUntil(Pred pred, int64_t ms) {
    const int64_t deadline = clock_.NowMs() + ms;
    while (!pred() && clock_.NowMs() < deadline) loop_.AdvanceBy(10);
    return pred();
  }
  void RunFor(int64_t ms) { loop_.AdvanceBy(ms); }
  int64_t now_ms() const { return clock_.NowMs(); }
  io::SimLoop& loop() { return loop_; }

  MetaGroup& meta(NodeId id) { return *nodes_.at(id).meta; }
  // The live node leading the metadata group with the highest term.
  std::optional<NodeId> MetaLeader() {
    return LeaderBy([](Node& node) -> const raft::Raft* { return &node.meta->group().raft(); });
  }
  uint64_t boot(NodeId id) { return nodes_.at(id).boot; }
  bool up(NodeId id) { return nodes_.at(id).up; }
  cluster::SimNetwork& network() { return network_; }

 protected:
  // The first half of a start: a new boot id, transport, raft host and
  // metadata group on the node's kept store. The caller then builds its own
  // layers and calls FinishStart. The group's Start result.
  [[nodiscard]] Expected<void, std::string> StartMeta(NodeId id) {
    Node& node = nodes_[id];
    if (!node.meta_engine) node.meta_engine = std::make_unique<persistence::MemoryEngine>();
    node.boot = ++boots_ * 1000 + id;
    node.transport = std::make_unique<cluster::SimTransport>(network_, id, SimAddress(id), "secret");
    node.host = std::make_unique<RaftHost>(loop_, *node.transport, 10);
    node.dispatch = std::make_unique<SimDispatch>(*node.host);
    node.transport->set_handler(node.dispatch.get());
    MetaGroupConfig config;
    config.self = id;
    config.cluster_address = SimAddress(id);
    config.boot_id = node.boot;
    // Like estuary-cluster: node 1 has no seeds; a restarted node is given
    // some (node 1 restarted empty without seeds would found a new cluster).
    config.has_seeds = options_.all_seeded || id != 1 || node.starts > 0;
    config.partitions = options_.partitions;
    config.snapshot_every = options_.snapshot_every;
    config.raft.random_seed = options_.seed * 100 + id * 7 + boots_;
    node.meta = std::make_unique<MetaGroup>(*node.host, *node.meta_engine, config);
    return node.meta->Start();
  }
  void FinishStart(NodeId id) {
    Node& node = nodes_.at(id);
    node.up = true;
    ++node.starts;
    for (auto& [other, peer] : nodes_) {
      if (other != id) node.transport->AddPeerAddress(SimAddress(other));
    }
    InformMembership();
  }

  // The live node whose raft (from `raft_of`, null where it has none) leads
  // with the highest term.
  template <typename RaftOf>
  std::optional<NodeId> LeaderBy(RaftOf raft_of) {
    std::optional<NodeId> best;
    const raft::Raft* best_raft = nullptr;
    for (auto& [id, node] : nodes_) {
      if (!node.up) continue;
      const raft::Raft* r = raft_of(node);
      if (r != nullptr && r->role() == raft::Role::kLeader && (!best || r->term() > best_raft->term())) {
        best = id;
        best_raft = r;
      }
    }
    return best;
  }
  // The sorted voters in that leader's config; empty without a leader.
  template <typename RaftOf>
  std::vector<raft::NodeId> VotersBy(RaftOf raft_of) {
    auto leader = LeaderBy(raft_of);
    if (!leader) return {};
    auto voters = raft_of(nodes_.at(*leader))->config().voters;
    std::sort(voters.begin(), voters.end());
    return voters;
  }

  void Stop(Node& node) {
    if (!node.up) return;
    node.StopUpperLayers();
    node.meta.reset();
    node.host.reset();
    node.dispatch.reset();
    node.transport.reset();  // a crash as the peers see it
    node.up = false;
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  cluster::SimNetwork network_;
  SimClusterOptions options_;
  uint64_t boots_ = 0;
  std::map<NodeId, Node> nodes_;
};

}  // namespace estuary::meta
