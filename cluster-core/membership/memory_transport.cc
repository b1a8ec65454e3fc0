#include "cluster-core/membership/memory_transport.h"

namespace estuary::cluster::testing {

MemoryTransport::MemoryTransport(MemoryNetwork& network, NodeId self, std::string address)
    : network_(network), self_(self), address_(std::move(address)) {
  network_.Register(this);
}

MemoryTransport::~MemoryTransport() {
  handler_ = nullptr;
  network_.Unregister(this);
}

void MemoryTransport::AddPeerAddress(const std::string& address) {
  if (address == address_ || !wanted_.insert(address).second) return;
  network_.TryDial(this, address);
}

void MemoryTransport::RemovePeer(NodeId node) {
  auto known = addresses_.find(node);
  if (known != addresses_.end()) wanted_.erase(known->second);
  auto it = links_.find(node);
  if (it != links_.end()) network_.Break(this, it->second.remote);
}

SendResult MemoryTransport::Send(NodeId to, uint8_t type, std::string_view body) {
  if (!links_.count(to)) return SendResult::kNoLink;
  network_.Deliver(this, to, type, std::string(body));
  return SendResult::kQueued;
}

std::vector<PeerInfo> MemoryTransport::peers() const {
  std::vector<PeerInfo> out;
  for (const auto& [node, link] : links_) out.push_back({node, link.remote->address()});
  return out;
}

MemoryNetwork::MemoryNetwork(io::Loop& loop) : loop_(loop) { Redial(); }

MemoryNetwork::~MemoryNetwork() {
  loop_.CancelTimer(redial_timer_);
}

void MemoryNetwork::Register(MemoryTransport* transport) { nodes_[transport->address()] = transport; }

void MemoryNetwork::Unregister(MemoryTransport* transport) {
  Crash(transport->address());
  auto it = nodes_.find(transport->address());
  if (it != nodes_.end() && it->second == transport) nodes_.erase(it);
}

bool MemoryNetwork::Registered(const MemoryTransport* transport) const {
  // Compares pointers only: `transport` may have been destroyed.
  for (const auto& [address, node] : nodes_) {
    if (node == transport) return true;
  }
  return false;
}

bool MemoryNetwork::IsCut(const std::string& a, const std::string& b) const {
  return cuts_.count({a, b}) || cuts_.count({b, a});
}

void MemoryNetwork::TryDial(MemoryTransport* from, const std::string& address) {
  if (IsCut(from->address(), address)) return;  // a cut is silent: the dial just times out
  auto it = nodes_.find(address);
  if (it == nodes_.end()) return RefuseDial(from, address);
  MemoryTransport* to = it->second;
  if (to == from || from->links_.count(to->self())) return;
  if (auto held = to->links_.find(from->self()); held != to->links_.end()) {
    // Another transport holds that id's link: refused, with the reason.
    if (held->second.remote != from && from->on_refused_) {
      const std::string reason =
          "node id " + std::to_string(from->self()) + " already used by " + held->second.remote->address();
      loop_.Post(scope_.Guard([this, from, address, reason] {
        if (Registered(from) && from->on_refused_) from->on_refused_(address, reason);
      }));
    }
    return;
  }
  const uint64_t id = next_link_id_++;
  from->links_[to->self()] = {to, id};
  to->links_[from->self()] = {from, id};
  from->addresses_[to->self()] = to->address();
  to->addresses_[from->self()] = from->address();
  // Both ends hear of the link on the next loop turn, if it still exists.
  auto announce = [this, id](MemoryTransport* side, MemoryTransport* other) {
    loop_.Post(scope_.Guard([this, id, side, node = other->self(), address = other->address()] {
      if (!Registered(side)) return;
      auto link = side->links_.find(node);
      if (link == side->links_.end() || link->second.id != id || side->handler() == nullptr) return;
      side->handler()->OnPeerUp({node, address});
    }));
  };
  announce(from, to);
  announce(to, from);
}

// Nothing listens at `address` (never started, or crashed): the dialler
// hears "connection refused", next turn, as from a kernel.
void MemoryNetwork::RefuseDial(MemoryTransport* from, const std::string& address) {
  if (!from->dial_observer_) return;
  NodeId node = 0;
  for (const auto& [known, at] : from->addresses_) {
    if (at == address) node = known;
  }
  DialFailure failure{.address = address, .node = node, .error = DialError::kRefused, .detail = "connection refused"};
  loop_.Post(scope_.Guard([this, from, failure] {
    if (Registered(from)) from->ReportDialFailure(failure);
  }));
}

void MemoryNetwork::Break(MemoryTransport* a, MemoryTransport* b) {
  auto drop = [this](MemoryTransport* side, MemoryTransport* other) {
    auto link = side->links_.find(other->self());
    if (link == side->links_.end() || link->second.remote != other) return;
    side->links_.erase(link);
    loop_.Post(scope_.Guard([this, side, node = other->self()] {
      if (!Registered(side) || side->handler() == nullptr) return;
      side->handler()->OnPeerDown(node);
    }));
  };
  drop(a, b);
  drop(b, a);
}

void MemoryNetwork::Crash(const std::string& address) {
  auto it = nodes_.find(address);
  if (it == nodes_.end()) return;
  MemoryTransport* node = it->second;
  while (!node->links_.empty()) Break(node, node->links_.begin()->second.remote);
}

void MemoryNetwork::Cut(const std::string& a, const std::string& b) {
  cuts_.insert({a, b});
  auto ia = nodes_.find(a);
  auto ib = nodes_.find(b);
  if (ia != nodes_.end() && ib != nodes_.end()) Break(ia->second, ib->second);
}

void MemoryNetwork::Heal(const std::string& a, const std::string& b) {
  cuts_.erase({a, b});
  cuts_.erase({b, a});
}

void MemoryNetwork::Deliver(MemoryTransport* from, NodeId to, uint8_t type, std::string body) {
  const auto link = from->links_.at(to);
  loop_.AddTimer(1, scope_.Guard([this, from, type, body = std::move(body), id = link.id, remote = link.remote,
                                   from_node = from->self()] {
    if (!Registered(remote) || !Registered(from)) return;
    // Delivered only if the same link still exists at the receiving end.
    auto back = remote->links_.find(from_node);
    if (back == remote->links_.end() || back->second.id != id || back->second.remote != from) return;
    ++frames_delivered_;
    if (remote->handler() != nullptr) remote->handler()->OnFrame(from_node, type, body);
  }));
}

void MemoryNetwork::Redial() {
  for (auto& [address, node] : nodes_) {
    for (const std::string& wanted : node->wanted_) TryDial(node, wanted);
  }
  redial_timer_ = loop_.AddTimer(100, scope_.Guard([this] { Redial(); }));
}

}  // namespace estuary::cluster::testing
