#include "cluster-core/links/sim_transport.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster-core/links/frame.h"

namespace estuary::cluster {

// ---- SimNetwork --------------------------------------------------------------

SimNetwork::SimNetwork(io::SimLoop& loop, SimNetworkConfig config)
    : loop_(loop), config_(config), random_(config.seed) {}

SimNetwork::~SimNetwork() = default;

void SimNetwork::Register(SimTransport* transport) {
  const NodeId id = transport->self_;
  auto existing = nodes_.find(id);
  if (existing != nodes_.end() && existing->second != transport) {
    existing->second->crashed_ = true;  // a second object with the id: the old process is gone
    existing->second->Reset();
  }
  // A node that comes back under the same id replaces its old links at once.
  std::vector<Pair> stale;
  for (auto& [pair, link] : links_) {
    if (pair.first == id || pair.second == id) stale.push_back(pair);
  }
  nodes_[id] = transport;
  for (const Pair& pair : stale) DropLink(pair.first, pair.second, id);
  addresses_[transport->address_] = id;
}

void SimNetwork::Unregister(SimTransport* transport) {
  const NodeId id = transport->self_;
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second != transport) return;
  if (!transport->crashed_) Crash(id);
  nodes_.erase(it);
  auto address = addresses_.find(transport->address_);
  if (address != addresses_.end() && address->second == id) addresses_.erase(address);
}

SimTransport* SimNetwork::Find(NodeId node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : it->second;
}

int64_t SimNetwork::Delay(NodeId a, NodeId b) const {
  auto it = delays_.find(Key(a, b));
  return it == delays_.end() ? config_.delay_ms : it->second;
}

void SimNetwork::SetDelay(NodeId a, NodeId b, int64_t one_way_ms) { delays_[Key(a, b)] = std::max<int64_t>(0, one_way_ms); }

bool SimNetwork::linked(NodeId a, NodeId b) const { return links_.count(Key(a, b)) != 0; }

SimNetwork::Link* SimNetwork::FindLink(uint64_t id, NodeId a, NodeId b) {
  auto it = links_.find(Key(a, b));
  return it != links_.end() && it->second.id == id ? &it->second : nullptr;
}

// ---- partitions and crashes ------------------------------------------------------

void SimNetwork::Partition(NodeId a, NodeId b) {
  const Pair key = Key(a, b);
  if (partitions_.count(key) != 0) return;
  const uint64_t serial = next_serial_++;
  partitions_[key] = serial;
  auto link = links_.find(key);
  if (link == links_.end()) return;
  // Nothing gets through: both sides stop hearing heartbeats.
  const uint64_t id = link->second.id;
  loop_.AddTimer(config_.dead_after_ms, [this, key, serial, id] {
    auto partition = partitions_.find(key);
    if (partition == partitions_.end() || partition->second != serial) return;  // healed meanwhile
    if (FindLink(id, key.first, key.second) != nullptr) DropLink(key.first, key.second);
  });
}

void SimNetwork::Heal(NodeId a, NodeId b) {
  const Pair key = Key(a, b);
  if (partitions_.erase(key) == 0) return;
  auto it = links_.find(key);
  if (it == links_.end()) return;
  // Held frames leave now, one delay from here, in their order.
  const int64_t earliest = loop_.NowMs() + Delay(a, b);
  for (Channel* channel : {&it->second.up, &it->second.down}) {
    int64_t last = earliest;
    for (InFlight& frame : channel->queue) {
      frame.due_ms = std::max(frame.due_ms, last);
      last = frame.due_ms;
    }
    channel->last_due_ms = std::max(channel->last_due_ms, last);
  }
  SchedulePump(it->second, key.first, key.second);
  SchedulePump(it->second, key.second, key.first);
}

void SimNetwork::HealAll() {
  std::vector<Pair> all;
  for (auto& [pair, serial] : partitions_) all.push_back(pair);
  for (const Pair& pair : all) Heal(pair.first, pair.second);
}

void SimNetwork::Crash(NodeId node) {
  SimTransport* transport = Find(node);
  if (transport == nullptr || transport->crashed_) return;
  transport->crashed_ = true;
  Silence(node);
}

void SimNetwork::Restart(NodeId node) {
  SimTransport* transport = Find(node);
  if (transport == nullptr || !transport->crashed_) return;
  transport->crashed_ = false;
  std::vector<Pair> stale;
  for (auto& [pair, link] : links_) {
    if (pair.first == node || pair.second == node) stale.push_back(pair);
  }
  for (const Pair& pair : stale) DropLink(pair.first, pair.second, node);
}

// The node hears nothing more; its peers notice after dead_after.
void SimNetwork::Silence(NodeId node) {
  if (SimTransport* transport = Find(node)) transport->Reset();
  for (auto& [pair, link] : links_) {
    if (pair.first == node || pair.second == node) {
      DropLinkLater(pair.first, pair.second, config_.dead_after_ms, node);
    }
  }
}

void SimNetwork::DropLinkLater(NodeId a, NodeId b, int64_t after_ms, NodeId quiet) {
  auto it = links_.find(Key(a, b));
  if (it == links_.end()) return;
  const uint64_t id = it->second.id;
  loop_.AddTimer(after_ms, [this, a, b, id, quiet] {
    if (FindLink(id, a, b) != nullptr) DropLink(a, b, quiet);
  });
}

void SimNetwork::DropLink(NodeId a, NodeId b, NodeId quiet) {
  auto it = links_.find(Key(a, b));
  if (it == links_.end()) return;
  frames_dropped_ += it->second.up.queue.size() + it->second.down.queue.size();
  links_.erase(it);
  for (auto [side, other] : {std::pair{a, b}, std::pair{b, a}}) {
    if (side == quiet) continue;
    SimTransport* transport = Find(side);
    if (transport != nullptr && !transport->crashed_) transport->PeerDown(other);
  }
}

// ---- dialling ------------------------------------------------------------------

void SimNetwork::Dial(SimTransport& from, const std::string& address) {
  auto target = addresses_.find(address);
  const int64_t round_trip =
      2 * (target == addresses_.end() ? config_.delay_ms : Delay(from.self_, target->second));
  loop_.AddTimer(round_trip, [this, node = from.self_, address] { CompleteDial(node, address); });
}

void SimNetwork::CompleteDial(NodeId from_id, const std::string& address) {
  SimTransport* from = Find(from_id);
  if (from == nullptr || from->crashed_) return;
  auto dialer = from->dialers_.find(address);
  if (dialer == from->dialers_.end() || !dialer->second.dialling) return;  // removed meanwhile
  dialer->second.dialling = false;
  auto target_id = addresses_.find(address);
  SimTransport* target = target_id == addresses_.end() ? nullptr : Find(target_id->second);
  if (target == nullptr || target->crashed_ || Partitioned(from_id, target->self_)) {
    return from->OnDialResult(address, 0, false);  // refused or timed out
  }
  const NodeId to_id = target->self_;
  if (target == from) {
    ++from->refused_;
    spdlog::warn("links(sim): refused {}: node id {} is our own", address, to_id);
    return from->OnDialResult(address, to_id, false);
  }
  if (from->secret_ != target->secret_) {
    ++from->refused_;
    ++target->refused_;
    spdlog::warn("links(sim): node {} refused {} (node {}): authentication failed (wrong cluster secret?)", to_id,
                 from->address_, from_id);
    spdlog::warn("links(sim): node {}: {} (node {}) closed the link: authentication failed", from_id, address,
                 to_id);
    return from->OnDialResult(address, to_id, false);
  }
  if (linked(from_id, to_id)) return from->OnDialResult(address, to_id, true);  // one link per pair
  Link& link = links_[Key(from_id, to_id)];
  link.id = next_link_id_++;
  from->up_[to_id] = target->address_;
  target->up_[from_id] = from->address_;
  from->OnDialResult(address, to_id, true);
  // Handlers last: either may send at once over the new link.
  const uint64_t id = link.id;
  if (target->handler_ != nullptr) target->handler_->OnPeerUp({from_id, from->address_});
  if (FindLink(id, from_id, to_id) != nullptr && from->handler_ != nullptr && !from->crashed_) {
    from->handler_->OnPeerUp({to_id, target->address_});
  }
}

// ---- frames --------------------------------------------------------------------

SendResult SimNetwork::Send(NodeId from, NodeId to, uint8_t type, std::string_view body) {
  const Pair key = Key(from, to);
  auto it = links_.find(key);
  if (it == links_.end()) return SendResult::kNoLink;
  Channel& channel = it->second.from(from, key.first);
  if (channel.above_high) {
    channel.want_writable = true;
    return SendResult::kFull;
  }
  const int64_t due = std::max(loop_.NowMs() + Delay(from, to), channel.last_due_ms);
  channel.last_due_ms = due;
  channel.queue.push_back({due, type, std::string(body)});
  channel.queued_bytes += wire::kHeaderBytes + body.size();
  if (channel.queued_bytes > config_.queue_high_bytes) channel.above_high = true;
  SchedulePump(it->second, from, to);
  return SendResult::kQueued;
}

void SimNetwork::SchedulePump(Link& link, NodeId from, NodeId to) {
  Channel& channel = link.from(from, Key(from, to).first);
  if (channel.pumping || channel.queue.empty() || Partitioned(from, to)) return;
  channel.pumping = true;
  const int64_t wait = std::max<int64_t>(0, channel.queue.front().due_ms - loop_.NowMs());
  loop_.AddTimer(wait, [this, id = link.id, from, to] { Pump(id, from, to); });
}

void SimNetwork::Pump(uint64_t link_id, NodeId from, NodeId to) {
  const NodeId lower = Key(from, to).first;
  Link* link = FindLink(link_id, from, to);
  if (link == nullptr) return;
  link->from(from, lower).pumping = false;
  if (Partitioned(from, to)) return;  // Heal() pumps again
  while (link != nullptr) {
    Channel& channel = link->from(from, lower);
    if (channel.queue.empty() || channel.queue.front().due_ms > loop_.NowMs()) break;
    InFlight frame = std::move(channel.queue.front());
    channel.queue.pop_front();
    channel.queued_bytes -= wire::kHeaderBytes + frame.body.size();
    bool writable = false;
    if (channel.above_high && channel.queued_bytes < config_.queue_low_bytes) {
      channel.above_high = false;
      writable = channel.want_writable;
      channel.want_writable = false;
    }
    SimTransport* target = Find(to);
    if (target != nullptr && !target->crashed_ && target->up_.count(from) != 0) {
      ++frames_delivered_;
      if (target->handler_ != nullptr) target->handler_->OnFrame(from, frame.type, frame.body);
    } else {
      ++frames_dropped_;
    }
    SimTransport* sender = Find(from);
    if (writable && sender != nullptr && !sender->crashed_ && sender->handler_ != nullptr &&
        FindLink(link_id, from, to) != nullptr) {
      sender->handler_->OnWritable(to);
    }
    link = FindLink(link_id, from, to);  // a handler may have dropped it
  }
  if (link != nullptr) SchedulePump(*link, from, to);
}

// ---- SimTransport --------------------------------------------------------------

SimTransport::SimTransport(SimNetwork& network, NodeId self, std::string address, std::string secret)
    : network_(network), self_(self), address_(std::move(address)), secret_(std::move(secret)) {
  network_.Register(this);
}

SimTransport::~SimTransport() {
  Reset();
  network_.Unregister(this);
}

void SimTransport::Reset() {
  for (auto& [address, dialer] : dialers_) network_.loop().CancelTimer(dialer.timer);
  dialers_.clear();
  up_.clear();
}

void SimTransport::AddPeerAddress(const std::string& address) {
  if (crashed_ || dialers_.count(address) != 0) return;
  dialers_[address] = Dialer{};
  Dial(address);
}

void SimTransport::Dial(const std::string& address) {
  auto it = dialers_.find(address);
  if (crashed_ || it == dialers_.end()) return;
  Dialer& dialer = it->second;
  if (dialer.dialling || dialer.timer != 0 || dialer.node == self_) return;
  if (dialer.node != 0 && connected(dialer.node)) return;
  dialer.dialling = true;
  network_.Dial(*this, address);
}

void SimTransport::OnDialResult(const std::string& address, NodeId node, bool up) {
  auto it = dialers_.find(address);
  if (it == dialers_.end()) return;
  if (node != 0) it->second.node = node;
  if (up) {
    it->second.attempts = 0;
  } else {
    ScheduleRedial(address);
  }
}

void SimTransport::ScheduleRedial(const std::string& address) {
  auto it = dialers_.find(address);
  if (crashed_ || it == dialers_.end()) return;
  Dialer& dialer = it->second;
  if (dialer.dialling || dialer.timer != 0 || dialer.node == self_) return;
  if (dialer.node != 0 && connected(dialer.node)) return;
  const SimNetworkConfig& config = network_.config();
  uint64_t base = config.backoff_min_ms;
  for (uint32_t i = 0; i < dialer.attempts && base < config.backoff_max_ms; ++i) base *= 2;
  base = std::max<uint64_t>(1, std::min<uint64_t>(base, config.backoff_max_ms));
  ++dialer.attempts;
  const uint64_t delay = base / 2 + network_.random_() % (base / 2 + 1);
  dialer.timer = network_.loop().AddTimer(static_cast<int64_t>(delay), [this, address] {
    auto found = dialers_.find(address);
    if (found == dialers_.end()) return;
    found->second.timer = 0;
    Dial(address);
  });
}

void SimTransport::PeerDown(NodeId node) {
  if (up_.erase(node) == 0) return;
  for (auto& [address, dialer] : dialers_) {
    if (dialer.node == node) ScheduleRedial(address);
  }
  if (handler_ != nullptr) handler_->OnPeerDown(node);
}

void SimTransport::RemovePeer(NodeId node) {
  for (auto it = dialers_.begin(); it != dialers_.end();) {
    if (it->second.node == node) {
      network_.loop().CancelTimer(it->second.timer);
      it = dialers_.erase(it);
    } else {
      ++it;
    }
  }
  network_.DropLink(self_, node);
}

SendResult SimTransport::Send(NodeId to, uint8_t type, std::string_view body) {
  if (crashed_ || up_.count(to) == 0) return SendResult::kNoLink;
  if (type < wire::kFirstClusterType) {
    spdlog::error("links(sim): refusing to send link-layer frame type 0x{:02x}", type);
    return SendResult::kNoLink;
  }
  return network_.Send(self_, to, type, body);
}

bool SimTransport::connected(NodeId node) const { return !crashed_ && up_.count(node) != 0; }

std::vector<PeerInfo> SimTransport::peers() const {
  std::vector<PeerInfo> out;
  if (crashed_) return out;
  for (const auto& [node, address] : up_) out.push_back({node, address});
  return out;
}

size_t SimTransport::queued_bytes(NodeId to) const {
  auto it = network_.links_.find(SimNetwork::Key(self_, to));
  if (it == network_.links_.end()) return 0;
  return it->second.from(self_, SimNetwork::Key(self_, to).first).queued_bytes;
}

}  // namespace estuary::cluster
