// Deliveries left behind by a move (docs/partitions.md, "Deliveries left
// behind by a move"; issue 29).
//
// When a client id is claimed by another node, the partition refuses this
// node's session changes for it from the claim's commit on, and the new
// node reads the session as the partition had it then. What this node's
// copy held beyond that (deliveries enqueued after the claim, or whose
// write was still on its way) is in no other copy. So a copy dropped
// because the session moved (a refused write: LostToAnotherNode; the new
// node's kClientAttached: TakenOverElsewhere) gives its plain QoS 1/2
// deliveries to the agent, which sends them (kSessionHandOff) to the node
// the registry names as the owner now; that node offers them to the
// session, where a session taken from another node offers each message
// once (it remembers what it held and was offered: Session::OfferedBefore),
// and answers once they are durable (kSessionHandOffDone). The publishers
// whose refused writes carried them wait for that answer: a refused write
// is not safe.
#include <spdlog/spdlog.h>

#include "cluster-core/cluster/cluster_agent.h"
#include "cluster-core/partition/client_registry.h"

namespace estuary::cluster {

namespace {
// A chunk's deliveries stay under about this many bytes (at least one).
constexpr size_t kHandOffChunkBytes = 256u << 10;
// A sender asks the registry and sends again after this long without an
// answer, up to kHandOffAttempts times; a "not here" answer is retried
// after kHandOffRetryMs.
constexpr uint32_t kHandOffAnswerMs = 3000;
constexpr uint32_t kHandOffRetryMs = 300;
constexpr uint32_t kHandOffAttempts = 20;
// A receiver whose claim on the id is still reading the session offers a
// hand-off again every kHandOffWaitMs, up to kHandOffWaits times.
constexpr uint32_t kHandOffWaitMs = 100;
constexpr uint32_t kHandOffWaits = 50;

size_t DeliveryBytes(const core::Delivery& delivery) {
  const Message& message = *delivery.message;
  return message.topic.size() + (message.payload ? message.payload->size() : 0) + 64;
}
}  // namespace

void ClusterAgent::LeaveBehind(const std::string& client_id, std::function<void()> waiter,
                               std::function<void(core::ShardBroker&)> work) {
  HandOff& handoff = handoffs_[client_id];
  ++handoff.awaiting;
  if (waiter) handoff.waiters.push_back(std::move(waiter));
  PostToShard(core::ShardForClientId(client_id, config_.shard_count), std::move(work));
}

void ClusterAgent::OnSessionLeftBehind(const std::string& client_id, std::vector<core::Delivery> deliveries) {
  HandOff& handoff = handoffs_[client_id];
  if (handoff.awaiting > 0) --handoff.awaiting;
  if (!deliveries.empty()) {
    spdlog::info("cluster: the session of '{}' moved to another node; the {} deliveries it held here go to it",
                 client_id, deliveries.size());
  }
  StartHandOff(client_id, std::move(deliveries));
}

void ClusterAgent::OnMovedStubDeliveries(uint16_t shard, const std::string& client_id,
                                         std::vector<core::Delivery> deliveries, std::function<void()> done) {
  auto on_shard = [this, shard, done = std::move(done)]() mutable {
    PostToShard(shard, [done = std::move(done)](core::ShardBroker&) { done(); });
  };
  if (deliveries.empty()) return on_shard();
  ++counters_.moved_stub_handoffs;
  // Its own chunks only: a stub matches on while they travel, and its
  // publishers must not wait for the later ones.
  StartHandOff(client_id, std::move(deliveries), std::move(on_shard));
}

// Chunks of the client's deliveries, each sent to the owner the registry
// names; the client's waiters run once no chunk and no shard answer is
// outstanding (at once with none). `chunks_done` (may be empty; not with
// no deliveries) runs once this call's own chunks have ended.
void ClusterAgent::StartHandOff(const std::string& client_id, std::vector<core::Delivery> deliveries,
                                std::function<void()> chunks_done) {
  HandOff& handoff = handoffs_[client_id];
  std::vector<uint64_t> ids;
  std::shared_ptr<size_t> left;
  std::shared_ptr<std::function<void()>> when_done;
  if (chunks_done) {
    left = std::make_shared<size_t>(0);
    when_done = std::make_shared<std::function<void()>>(std::move(chunks_done));
  }
  for (size_t i = 0; i < deliveries.size();) {
    HandOffChunk chunk;
    chunk.client_id = client_id;
    size_t bytes = 0;
    while (i < deliveries.size() && (chunk.deliveries.empty() || bytes < kHandOffChunkBytes)) {
      bytes += DeliveryBytes(deliveries[i]);
      chunk.deliveries.push_back(std::move(deliveries[i++]));
    }
    if (left) {
      ++*left;
      chunk.waiter = [left, when_done] {
        if (--*left == 0) (*when_done)();
      };
    }
    const uint64_t id = next_handoff_++;
    handoff_chunks_.emplace(id, std::move(chunk));
    handoff.chunks.insert(id);
    ids.push_back(id);
  }
  // Not `handoff` below: a chunk may end at once and the entry with it.
  for (uint64_t id : ids) SendHandOff(id);
  auto it = handoffs_.find(client_id);
  if (it != handoffs_.end() && it->second.awaiting == 0 && it->second.chunks.empty()) {
    std::vector<std::function<void()>> waiters = std::move(it->second.waiters);
    handoffs_.erase(it);
    for (auto& waiter : waiters) waiter();
  }
}

void ClusterAgent::SendHandOff(uint64_t id) {
  auto found = handoff_chunks_.find(id);
  if (found == handoff_chunks_.end() || found->second.reading) return;
  HandOffChunk& chunk = found->second;
  if (chunk.attempt >= kHandOffAttempts) {
    ++counters_.session_handoffs_failed;
    spdlog::warn("cluster: {} deliveries of the moved session of '{}' not taken by its new node after {} attempts: "
                 "given up (lost for it)",
                 chunk.deliveries.size(), chunk.client_id, chunk.attempt);
    return EndHandOffChunk(id);
  }
  ++chunk.attempt;
  chunk.reading = true;
  partitions_->Read(
      partitions_->PartitionOf(chunk.client_id), partition::EncodeRegistryOwnerQuery(chunk.client_id),
      scope_.Guard([this, id](partition::PartitionResult result) {
        auto read_for = handoff_chunks_.find(id);
        if (read_for == handoff_chunks_.end()) return;
        HandOffChunk& sending = read_for->second;
        sending.reading = false;
        const uint32_t attempt = sending.attempt;
        auto again_after = [this, id, attempt](uint32_t ms) {
          loop_.AddTimer(ms, scope_.Guard([this, id, attempt] {
            auto still = handoff_chunks_.find(id);
            if (still != handoff_chunks_.end() && still->second.attempt == attempt) SendHandOff(id);
          }));
        };
        std::optional<std::optional<partition::ClientOwner>> owner;
        if (result.status == meta::ProposeStatus::kOk && result.result) {
          owner = partition::DecodeClaimResult(*result.result);
        }
        if (!owner) return again_after(kHandOffRetryMs);  // the partition elects: asked again
        if (!owner->has_value()) {
          // Nobody serves the session: it ended (a clean start, or expiry),
          // and its deliveries with it.
          ++counters_.session_handoffs_unowned;
          return EndHandOffChunk(id);
        }
        const NodeId node = (*owner)->node;
        if (node == config_.self) {
          // Its client came back here meanwhile: offered to the copy here.
          OnSessionHandOff(config_.self, SessionHandOffFrame{id, sending.client_id, sending.deliveries});
          return;
        }
        auto peer = peers_.find(node);
        if (peer != peers_.end() && peer->second.minor_known && peer->second.minor < kMinorSessionHandOff) {
          ++counters_.session_handoffs_failed;
          spdlog::warn("cluster: node {} speaks link minor {} (older than the session hand-off): {} deliveries of "
                       "the moved session of '{}' not handed to it",
                       node, peer->second.minor, sending.deliveries.size(), sending.client_id);
          return EndHandOffChunk(id);
        }
        ++counters_.session_handoffs;
        counters_.session_handoff_deliveries += sending.deliveries.size();
        Send(node, Control(kSessionHandOff, EncodeSessionHandOff(id, sending.client_id, sending.deliveries)));
        again_after(kHandOffAnswerMs);  // no answer (the link lost it): asked and sent again
      }));
}

void ClusterAgent::OnHandOffDone(uint64_t id, bool taken) {
  auto found = handoff_chunks_.find(id);
  if (found == handoff_chunks_.end()) return;  // answered already (a copy sent again)
  if (taken) return EndHandOffChunk(id);
  // The node named owner has no such session (it moved on, or has not
  // read it yet): the registry is asked again.
  const uint32_t attempt = found->second.attempt;
  loop_.AddTimer(kHandOffRetryMs, scope_.Guard([this, id, attempt] {
    auto still = handoff_chunks_.find(id);
    if (still != handoff_chunks_.end() && still->second.attempt == attempt) SendHandOff(id);
  }));
}

// Ends chunk `id` and, when it was its client's last and no shard
// answer is awaited, the hand-off: its waiters run.
void ClusterAgent::EndHandOffChunk(uint64_t id) {
  auto found = handoff_chunks_.find(id);
  if (found == handoff_chunks_.end()) return;
  const std::string client_id = std::move(found->second.client_id);
  std::function<void()> chunk_waiter = std::move(found->second.waiter);
  handoff_chunks_.erase(found);
  if (chunk_waiter) chunk_waiter();
  auto it = handoffs_.find(client_id);
  if (it == handoffs_.end()) return;
  it->second.chunks.erase(id);
  if (it->second.awaiting != 0 || !it->second.chunks.empty()) return;
  std::vector<std::function<void()>> waiters = std::move(it->second.waiters);
  handoffs_.erase(it);
  for (auto& waiter : waiters) waiter();
}

// --- the stubs of moved sessions (broker/moved_stubs.cc) ------------------------------

MovedStubs::Hooks ClusterAgent::MovedStubHooks() {
  MovedStubs::Hooks hooks;
  hooks.read_owner = [this](const std::string& client_id, std::function<void(MovedStubs::OwnerAnswer)> done) {
    if (!partitions_) return done(std::nullopt);
    partitions_->Read(partitions_->PartitionOf(client_id), partition::EncodeRegistryOwnerQuery(client_id),
                      scope_.Guard([done = std::move(done)](partition::PartitionResult result) {
                        std::optional<std::optional<partition::ClientOwner>> owner;
                        if (result.status == meta::ProposeStatus::kOk && result.result) {
                          owner = partition::DecodeClaimResult(*result.result);
                        }
                        if (!owner) return done(std::nullopt);
                        if (!owner->has_value()) return done(std::optional<NodeId>{});
                        done(std::optional<NodeId>{(*owner)->node});
                      }));
  };
  hooks.routes_seen = [this](NodeId node, const std::vector<std::string>& filters) {
    auto held = remote_routes_.find(node);
    if (held == remote_routes_.end()) return filters.empty();
    for (const std::string& filter : filters) {
      if (!held->second.contains({filter, std::string()})) return false;
    }
    return true;
  };
  hooks.end = [this](uint16_t shard, const std::string& client_id, uint64_t stub) {
    PostToShard(shard, [client_id, stub](core::ShardBroker& broker) { broker.EndMovedStub(client_id, stub); });
  };
  return hooks;
}

// --- the receiving side ------------------------------------------------------------

void ClusterAgent::OnSessionHandOff(NodeId from, SessionHandOffFrame frame) {
  const HandOffKey key{from, frame.id};
  if (!handoffs_in_.try_emplace(key, HandOffIn{std::move(frame), 0}).second) return;  // a copy: answered with it
  OfferHandOff(key);
}

void ClusterAgent::OfferHandOff(HandOffKey key) {
  auto it = handoffs_in_.find(key);
  if (it == handoffs_in_.end()) return;
  const SessionHandOffFrame& frame = it->second.frame;
  PostToShard(core::ShardForClientId(frame.client_id, config_.shard_count),
              [client_id = frame.client_id, deliveries = frame.deliveries, key,
               cluster = &port()](core::ShardBroker& broker) mutable {
                const bool here = broker.AcceptHandedOff(client_id, std::move(deliveries), [cluster, key] {
                  cluster->HandOffTaken(key.first, key.second, true);
                });
                if (!here) cluster->HandOffTaken(key.first, key.second, false);
              });
}

void ClusterAgent::OnHandOffTaken(NodeId from, uint64_t id, bool taken) {
  auto it = handoffs_in_.find({from, id});
  if (it == handoffs_in_.end()) return;
  // No such session here yet: while a claim of this node on the id may
  // still be reading it, offered again shortly; otherwise that is the answer.
  if (!taken && ++it->second.waits < kHandOffWaits && claims_.count(it->second.frame.client_id) != 0) {
    loop_.AddTimer(kHandOffWaitMs, scope_.Guard([this, key = it->first] { OfferHandOff(key); }));
    return;
  }
  handoffs_in_.erase(it);
  if (taken) ++counters_.session_handoffs_in;
  if (from == config_.self) return OnHandOffDone(id, taken);
  Send(from, Control(kSessionHandOffDone, EncodeSessionHandOffDone(id, taken)));
}

}  // namespace estuary::cluster
