#pragma once
// SimNetwork and SimTransport: the Transport on simulated time, so cluster
// logic runs unchanged under the deterministic simulator.
//
// Every SimTransport joins one SimNetwork on one io::SimLoop. A dial takes
// one round trip; a frame arrives after its link's one-way delay, in the
// order sent (a later, shorter delay never overtakes). What the real
// transport does, modelled without bytes:
//  - the handshake: a transport with another secret is refused and logged
//    on both sides, and the dialer backs off (doubling, seeded jitter);
//  - one link per node pair, whoever dials; a known address whose node is
//    already linked is not dialled again;
//  - a bounded queue per direction: bytes sent and not yet delivered; once
//    it exceeded queue_high_bytes Send returns kFull until it drained below
//    queue_low_bytes, when OnWritable follows;
//  - Partition(a, b) holds frames between a and b; Heal() within
//    dead_after_ms delivers them late but in order, otherwise both sides
//    see OnPeerDown at dead_after_ms and redial once healed;
//  - Crash(n) silences n at once (its handler hears nothing more, frames to
//    it are lost); its peers see OnPeerDown after dead_after_ms. Restart(n)
//    brings it back as a fresh process: no links, no addresses.
//
// Everything runs on the SimLoop's thread; handlers are called from its
// timers. Randomness (jitter) comes from the network's seed only.
// Lifetimes: the SimLoop outlives the SimNetwork, which outlives its
// transports and is not destroyed while the loop still runs its timers.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster-core/links/transport.h"
#include "io/sim/sim_loop.h"

namespace estuary::cluster {

struct SimNetworkConfig {
  int64_t delay_ms = 1;  // one-way delay of a link unless SetDelay says otherwise
  uint32_t dead_after_ms = 1500;
  uint32_t backoff_min_ms = 50, backoff_max_ms = 2000;
  size_t queue_low_bytes = 1 << 20, queue_high_bytes = 8 << 20;
  uint64_t seed = 1;
};

class SimTransport;

class SimNetwork {
 public:
  explicit SimNetwork(io::SimLoop& loop, SimNetworkConfig config = {});
  ~SimNetwork();
  SimNetwork(const SimNetwork&) = delete;
  SimNetwork& operator=(const SimNetwork&) = delete;

  io::SimLoop& loop() { return loop_; }
  const SimNetworkConfig& config() const { return config_; }
  // One-way delay between a and b, both directions; frames already in
  // flight keep their time (and their order).
  void SetDelay(NodeId a, NodeId b, int64_t one_way_ms);
  void Partition(NodeId a, NodeId b);
  void Heal(NodeId a, NodeId b);
  void HealAll();
  void Crash(NodeId node);
  void Restart(NodeId node);
  bool linked(NodeId a, NodeId b) const;  // a link exists (it may be dying)
  uint64_t frames_delivered() const { return frames_delivered_; }
  uint64_t frames_dropped() const { return frames_dropped_; }

 private:
  friend class SimTransport;
  using Pair = std::pair<NodeId, NodeId>;  // (lower, higher)
  struct InFlight {
    int64_t due_ms;
    uint8_t type;
    std::string body;
  };
  struct Channel {  // one direction of a link
    std::deque<InFlight> queue;
    size_t queued_bytes = 0;
    int64_t last_due_ms = 0;
    bool pumping = false;
    bool above_high = false;     // from exceeding queue_high_bytes until below queue_low_bytes
    bool want_writable = false;  // Send returned kFull meanwhile
  };
  struct Link {
    uint64_t id = 0;
    Channel up;    // lower -> higher
    Channel down;  // higher -> lower
    Channel& from(NodeId node, NodeId lower) { return node == lower ? up : down; }
    const Channel& from(NodeId node, NodeId lower) const { return node == lower ? up : down; }
  };
  static Pair Key(NodeId a, NodeId b) { return a < b ? Pair{a, b} : Pair{b, a}; }

  void Register(SimTransport* transport);
  void Unregister(SimTransport* transport);
  SimTransport* Find(NodeId node) const;
  int64_t Delay(NodeId a, NodeId b) const;
  bool Partitioned(NodeId a, NodeId b) const { return partitions_.count(Key(a, b)) != 0; }
  void Dial(SimTransport& from, const std::string& address);
  void CompleteDial(NodeId from, const std::string& address);
  SendResult Send(NodeId from, NodeId to, uint8_t type, std::string_view body);
  void Pump(uint64_t link_id, NodeId from, NodeId to);
  void SchedulePump(Link& link, NodeId from, NodeId to);
  void Silence(NodeId node);
  // Removes the link; tells each live side other than `quiet` OnPeerDown.
  void DropLink(NodeId a, NodeId b, NodeId quiet = 0);
  void DropLinkLater(NodeId a, NodeId b, int64_t after_ms, NodeId quiet);
  Link* FindLink(uint64_t id, NodeId a, NodeId b);

  io::SimLoop& loop_;
  SimNetworkConfig config_;
  std::map<NodeId, SimTransport*> nodes_;
  std::map<std::string, NodeId> addresses_;
  std::map<Pair, Link> links_;
  std::map<Pair, uint64_t> partitions_;  // -> partition serial
  std::map<Pair, int64_t> delays_;
  std::mt19937_64 random_;
  uint64_t next_link_id_ = 1;
  uint64_t next_serial_ = 1;
  uint64_t frames_delivered_ = 0;
  uint64_t frames_dropped_ = 0;
};

class SimTransport final : public Transport {
 public:
  SimTransport(SimNetwork& network, NodeId self, std::string address, std::string secret);
  ~SimTransport() override;  // a crash as seen from the peers
  SimTransport(const SimTransport&) = delete;
  SimTransport& operator=(const SimTransport&) = delete;

  NodeId self() const override { return self_; }
  void AddPeerAddress(const std::string& address) override;
  void RemovePeer(NodeId node) override;
  SendResult Send(NodeId to, uint8_t type, std::string_view body) override;
  bool connected(NodeId node) const override;
  std::vector<PeerInfo> peers() const override;

  const std::string& address() const { return address_; }
  bool crashed() const { return crashed_; }
  uint64_t refused() const { return refused_; }
  size_t queued_bytes(NodeId to) const;  // sent to `to`, not yet delivered

 private:
  friend class SimNetwork;
  struct Dialer {
    NodeId node = 0;  // learned on the first successful dial
    uint32_t attempts = 0;
    io::TimerId timer = 0;
    bool dialling = false;
  };
  void Dial(const std::string& address);
  void ScheduleRedial(const std::string& address);
  void OnDialResult(const std::string& address, NodeId node, bool up);
  void PeerUp(NodeId node, const std::string& address);
  void PeerDown(NodeId node);
  void Reset();  // forget dialers and links' view (crash)

  SimNetwork& network_;
  NodeId self_;
  std::string address_;
  std::string secret_;
  bool crashed_ = false;
  std::map<std::string, Dialer> dialers_;
  std::map<NodeId, std::string> up_;  // linked peers and their addresses
  uint64_t refused_ = 0;
};

}  // namespace estuary::cluster
