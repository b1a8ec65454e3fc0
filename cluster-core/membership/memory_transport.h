#pragma once
// MemoryNetwork: Transports that connect in memory on one io::Loop, for
// membership tests (and estuaryctl's). Links come up one loop turn after a
// dial, frames arrive 1 ms after Send, in order; nodes crash and restart,
// pairs are cut and healed. Known addresses are redialled every 100 ms.
// A link is refused while either side already has one to the other's id
// (a real link layer refuses a second link claiming a connected node id).
// A dial to an address where no node runs (never started, crashed) is
// reported refused to the dial observer; a dial across a cut is silent.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster-core/links/transport.h"
#include "cluster-core/membership/membership.h"
#include "io/loop.h"
#include "io/scope.h"

namespace estuary::cluster::testing {

class MemoryNetwork;

class MemoryTransport final : public Transport {
 public:
  MemoryTransport(MemoryNetwork& network, NodeId self, std::string address);
  ~MemoryTransport() override;
  NodeId self() const override { return self_; }
  const std::string& address() const { return address_; }
  void AddPeerAddress(const std::string& address) override;
  void RemovePeer(NodeId node) override;
  SendResult Send(NodeId to, uint8_t type, std::string_view body) override;
  bool connected(NodeId node) const override { return links_.count(node) != 0; }
  std::vector<PeerInfo> peers() const override;
  const std::set<std::string>& wanted() const { return wanted_; }
  // Called when a dial is refused because the node id is already linked
  // from another address (the links layer's answer to an id conflict with
  // a live holder, which membership never sees as a link).
  void set_on_refused(std::function<void(const std::string& address, const std::string& reason)> fn) {
    on_refused_ = std::move(fn);
  }
  LinkHandler* handler() const { return handler_; }

 private:
  friend class MemoryNetwork;
  struct Link {
    MemoryTransport* remote = nullptr;
    uint64_t id = 0;
  };
  MemoryNetwork& network_;
  NodeId self_;
  std::string address_;
  std::set<std::string> wanted_;
  std::map<NodeId, Link> links_;
  std::map<NodeId, std::string> addresses_;  // learnt in handshakes
  std::function<void(const std::string&, const std::string&)> on_refused_;
};

class MemoryNetwork {
 public:
  explicit MemoryNetwork(io::Loop& loop);
  ~MemoryNetwork();
  io::Loop& loop() { return loop_; }
  // Breaks every link of the node at `address` (its process died).
  void Crash(const std::string& address);
  // Cuts (or heals) the path between two addresses; a cut breaks the link.
  void Cut(const std::string& a, const std::string& b);
  void Heal(const std::string& a, const std::string& b);
  uint64_t frames_delivered() const { return frames_delivered_; }

 private:
  friend class MemoryTransport;
  void Register(MemoryTransport* transport);
  void Unregister(MemoryTransport* transport);
  void TryDial(MemoryTransport* from, const std::string& address);
  void RefuseDial(MemoryTransport* from, const std::string& address);
  void Break(MemoryTransport* a, MemoryTransport* b);
  void Deliver(MemoryTransport* from, NodeId to, uint8_t type, std::string body);
  void Redial();
  bool IsCut(const std::string& a, const std::string& b) const;
  bool Registered(const MemoryTransport* transport) const;

  io::Loop& loop_;
  std::map<std::string, MemoryTransport*> nodes_;
  std::set<std::pair<std::string, std::string>> cuts_;
  uint64_t next_link_id_ = 1;
  uint64_t frames_delivered_ = 0;
  io::TimerId redial_timer_ = 0;
  io::Scope scope_;  // guards the posts and timers that capture this (io/scope.h); last, so first to go
};

// Forwards a transport's events to a Membership (the ClusterAgent's job in
// estuaryd), for tests that run Membership without an agent.
class MembershipForwarder final : public LinkHandler {
 public:
  explicit MembershipForwarder(Membership& membership) : membership_(membership) {}
  void OnPeerUp(const PeerInfo& peer) override { membership_.OnPeerUp(peer); }
  void OnPeerDown(NodeId node) override { membership_.OnPeerDown(node); }
  void OnFrame(NodeId from, uint8_t type, std::string_view body) override {
    membership_.OnFrame(from, type, body);
  }

 private:
  Membership& membership_;
};

}  // namespace estuary::cluster::testing
