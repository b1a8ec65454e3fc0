// The agent's side of persistent sessions on partitions (docs/partitions.md
// "Sessions on partitions"): the shards' session changes written to the
// partitions of their client ids, and a session read back for a CONNECT
// that takes the client id from another node.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster-core/cluster/cluster_agent.h"
#include "cluster-core/partition/session_machine.h"
#include "cluster-core/store/record_codec.h"

namespace estuary::cluster {

namespace {
// One write entry carries the waiting batches up to about this many bytes
// (at least one batch, whatever its size).
constexpr size_t kMaxSessionWriteBytes = 1u << 20;
constexpr uint32_t kFirstRetryMs = 50;
constexpr uint32_t kMaxRetryMs = 1000;

size_t OpsBytes(const std::vector<partition::SessionOp>& ops) {
  size_t bytes = 0;
  for (const auto& op : ops) bytes += op.key.size() + op.value.size() + 9;
  return bytes;
}
}  // namespace

void ClusterAgent::OnReplicateSessions(uint16_t shard, std::vector<core::store::SessionChange> changes,
                                       std::function<void()> done) {
  if (!partitions_ || changes.empty()) {
    PostToShard(shard, [done = std::move(done)](core::ShardBroker&) { done(); });
    return;
  }
  const uint64_t batch = next_session_batch_++;
  std::map<partition::PartitionId, std::vector<partition::SessionOp>> parts;
  for (auto& change : changes) {
    partition::SessionOp op{static_cast<partition::SessionOp::Kind>(change.kind), std::move(change.key),
                            std::move(change.value)};
    auto client = partition::ClientOfSessionOp(op);
    if (!client) continue;  // not a session key: nothing to replicate
    // The copy that made the change (the shard's changes and its copy
    // announcements come in one order: OnSessionCopyReplaced).
    if (auto fence = copy_fences_.find(*client); fence != copy_fences_.end()) op.fence = fence->second;
    // AMQP durable subscriptions (ids start with a NUL, which no MQTT
    // client id holds) are here too: their links claim their ids first.
    parts[partitions_->PartitionOf(*client)].push_back(std::move(op));
  }
  if (parts.empty()) {
    PostToShard(shard, [done = std::move(done)](core::ShardBroker&) { done(); });
    return;
  }
  session_batches_[batch] = SessionBatch{shard, static_cast<uint32_t>(parts.size()), std::move(done)};
  ++counters_.session_batches_pending;
  for (auto& [partition, ops] : parts) {
    session_queues_[{shard, partition}].waiting.emplace_back(batch, std::move(ops));
    PumpSessionWrites(shard, partition);
  }
}

void ClusterAgent::PumpSessionWrites(uint16_t shard, partition::PartitionId partition) {
  SessionQueue& queue = session_queues_[{shard, partition}];
  if (queue.outstanding || queue.retry_scheduled) return;  // one write at a time
  if (queue.in_flight.empty()) {
    if (queue.waiting.empty()) {
      session_queues_.erase({shard, partition});
      return;
    }
    partition::SessionWrite write{config_.self, boot_id_, {}};
    write.fenced = copy_fence_;
    size_t bytes = 0;
    while (!queue.waiting.empty() && (write.ops.empty() || bytes < kMaxSessionWriteBytes)) {
      auto& [batch, ops] = queue.waiting.front();
      bytes += OpsBytes(ops);
      std::move(ops.begin(), ops.end(), std::back_inserter(write.ops));
      queue.in_flight_batches.push_back(batch);
      queue.waiting.pop_front();
    }
    queue.in_flight = partition::EncodeSessionWrite(write);
    queue.claim_mark = next_claim_;
  }
  queue.outstanding = true;
  ++counters_.session_writes;
  partitions_->Propose(partition, queue.in_flight,
                       scope_.Guard([this, shard, partition](partition::PartitionResult result) {
                         OnSessionWritten(shard, partition, result);
                       }));
}

void ClusterAgent::OnSessionWritten(uint16_t shard, partition::PartitionId partition,
                                    const partition::PartitionResult& result) {
  auto found = session_queues_.find({shard, partition});
  if (found == session_queues_.end()) return;
  SessionQueue& queue = found->second;
  queue.outstanding = false;
  if (result.status != meta::ProposeStatus::kOk) {
    // Made again until it commits: its publishers wait. Applying the same
    // write twice (a timed-out attempt that did commit) leaves the same
    // state, and nothing later of this shard goes to the partition before.
    ++counters_.session_write_retries;
    const uint32_t delay = std::min<uint32_t>(kMaxRetryMs, kFirstRetryMs << std::min<uint32_t>(queue.attempt, 5));
    if (queue.attempt++ % 20 == 0) {
      spdlog::warn("cluster: session changes for partition {} not committed (status {}); retrying in {} ms",
                   partition, static_cast<int>(result.status), delay);
    }
    queue.retry_scheduled = true;
    loop_.AddTimer(delay, scope_.Guard([this, shard, partition] {
      session_queues_[{shard, partition}].retry_scheduled = false;
      PumpSessionWrites(shard, partition);
    }));
    return;
  }
  std::vector<std::string> lost;
  if (result.result) {
    auto outcome = partition::DecodeSessionWriteOutcome(*result.result);
    if (outcome && outcome->stale != 0) {
      // Changes a replaced copy here made before its client id's new claim
      // (the session is served by the copy read back since): dropped.
      counters_.session_writes_stale += outcome->stale;
      spdlog::debug("cluster: {} session change(s) of replaced copies dropped by partition {}", outcome->stale,
                    partition);
    }
    if (auto* refused = outcome ? &outcome->refused : nullptr; refused && !refused->empty()) {
      counters_.session_writes_refused += refused->size();
      spdlog::debug("cluster: session changes of {} client(s) refused (first '{}'): served by another node now",
                    refused->size(), refused->front());
      // The copies here are stale (unless this node claimed the id again
      // since the write was made): dropped, their shared deliveries moved.
      for (const std::string& client : *refused) {
        auto claim = claims_.find(client);
        if (claim != claims_.end() && claim->second >= queue.claim_mark) continue;
        lost.push_back(client);
      }
    }
  }
  queue.in_flight.clear();
  queue.attempt = 0;
  std::vector<uint64_t> batches = std::exchange(queue.in_flight_batches, {});
  if (lost.empty()) {
    for (uint64_t batch : batches) FinishBatchPart(batch);
  } else {
    // A refused write is not safe: what it carried (the deliveries these
    // batches' publishers wait for among them) is in no copy but the one
    // here. The copy's deliveries go to the session's new node, and the
    // batches are done once that node holds them (cluster_handoff.cc).
    auto left = std::make_shared<size_t>(lost.size());
    auto release = scope_.Guard([this, batches, left] {
      if (--*left != 0) return;
      for (uint64_t batch : batches) FinishBatchPart(batch);
    });
    for (const std::string& client : lost) {
      LeaveBehind(client, release, [client, cluster = &port()](core::ShardBroker& broker) {
        cluster->SessionLeftBehind(client, broker.LostToAnotherNode(client));
      });
    }
  }
  PumpSessionWrites(shard, partition);
}

void ClusterAgent::OnSessionCopyReplaced(const std::string& client_id, uint64_t fence) {
  if (fence == 0) {
    copy_fences_.erase(client_id);
  } else {
    copy_fences_.insert_or_assign(client_id, fence);
  }
}

void ClusterAgent::FinishBatchPart(uint64_t batch) {
  auto it = session_batches_.find(batch);
  if (it == session_batches_.end() || --it->second.parts_left != 0) return;
  --counters_.session_batches_pending;
  PostToShard(it->second.shard, [done = std::move(it->second.done)](core::ShardBroker&) { done(); });
  session_batches_.erase(it);
}

void ClusterAgent::LoadSession(const std::string& client_id, std::function<void(ClaimAnswer)> done) {
  ++counters_.session_loads;
  partitions_->Read(
      partitions_->PartitionOf(client_id), partition::EncodeSessionLoad(client_id),
      scope_.Guard([this, client_id, done = std::move(done)](partition::PartitionResult result) {
        ClaimAnswer answer;
        if (result.status == meta::ProposeStatus::kOk) {
          answer.granted = true;
          if (!result.result || result.result->empty()) {
            answer.session.emplace();  // the partition holds nothing for it
          } else {
            answer.session = partition::DecodeSessionLoadResult(*result.result);
            answer.granted = answer.session.has_value();
          }
        }
        if (!answer.granted) {
          ++counters_.session_loads_failed;
          spdlog::warn("cluster: the session of client id '{}' could not be read from its partition (status {}): "
                       "the CONNECT is refused",
                       client_id, static_cast<int>(result.status));
        }
        done(std::move(answer));
      }));
}

}  // namespace estuary::cluster

namespace estuary::cluster {

// `node` is still gone under `verdict`: no later declaration replaced it,
// the metadata group has not admitted it again, and as far as this node can
// tell it is suspect, down or left, or no longer listed (without
// membership, as in unit tests, whoever called knows). A takeover step that
// fires late (a retry timer, a reply) acts only under the verdict it was
// started for (issue 29).
bool ClusterAgent::StillGone(NodeId node, uint64_t verdict) const {
  auto progress = takeovers_.find(node);
  if (progress == takeovers_.end() || progress->second.verdict != verdict || progress->second.back) return false;
  if (meta_ && verdict != 0 && meta_->state().members().count(node) != 0) return false;
  if (!membership_owned_) return true;
  const Member* member = membership_owned_->Find(node);
  return member == nullptr || PeerUnreachable(node);
}

// Task transfer (docs/partitions.md "Sessions on partitions"). Each open
// partition's sessions of the gone node are taken over by one survivor:
// the first replica of the partition's placement that is neither the gone
// node nor unreachable from here. Nodes may disagree for a moment about
// who that is; the conditional claim (only from `gone`) lets one win.
// Every step (a partition's listing, a session's claim and read) counts
// in the node's TakeoverProgress until it ends, whatever its outcome:
// replays for the gone node's sessions wait for that (cluster_replay.cc).
void ClusterAgent::TakeOverSessionsOf(NodeId gone, uint64_t verdict) {
  if (!partitions_ || !meta_) return;
  // One step held across the loop: a partition another survivor takes
  // over ends its step at once, and the count must not reach zero (and
  // release the held replays) before every partition's step is counted.
  // (Found by the fault suite: a replay delivered before the session it
  // was for was adopted here, the one in-flight loss of a kill.)
  TakeoverStep(gone);
  for (const auto& [open_id, open] : meta_->state().open_partitions()) {
    TakeoverStep(gone);
    TakeOverPartition(gone, verdict, open_id, 0);
  }
  TakeoverDone(gone);
}

// One partition's share of TakeOverSessionsOf, retried alone (every second,
// up to 10 times) while its sessions cannot be listed.
void ClusterAgent::TakeOverPartition(NodeId gone, uint64_t verdict, partition::PartitionId id, uint32_t attempt) {
  // Only while the node is still gone as far as this node can tell: an
  // isolated node that declared the others gone must not take their
  // sessions once the cut heals and its retries start to succeed.
  if (!StillGone(gone, verdict)) return TakeoverDone(gone);
  const meta::MetaState& state = meta_->state();
  const auto open = state.open_partitions().find(id);
  if (open == state.open_partitions().end()) return TakeoverDone(gone);
  const meta::Placement& placement = state.placement();
  const std::vector<NodeId>* placed =
      id < placement.assignment.size() ? &placement.assignment[id] : &open->second.replicas;
  NodeId chosen = 0;
  for (NodeId node : *placed) {
    if (node != gone && (node == config_.self || !PeerUnreachable(node))) {
      chosen = node;
      break;
    }
  }
  if (chosen != config_.self) return TakeoverDone(gone);
  partitions_->Read(
      id, partition::EncodeSessionsOwnedBy(gone),
      scope_.Guard([this, gone, verdict, id, attempt](partition::PartitionResult result) {
        std::optional<std::vector<std::string>> owned;
        if (result.status == meta::ProposeStatus::kOk) {
          owned = result.result ? partition::DecodeClientList(*result.result) : std::vector<std::string>{};
        }
        if (!owned) {
          ++counters_.session_takeovers_failed;
          spdlog::warn("cluster: the sessions node {} held in partition {} could not be listed (status {}, attempt {})",
                       gone, id, static_cast<int>(result.status), attempt + 1);
          // The partition's listing again later: claims that applied
          // already do not apply twice (the node no longer owns those ids).
          if (attempt < 10) {
            loop_.AddTimer(1000, scope_.Guard([this, gone, verdict, id, attempt] {
              TakeOverPartition(gone, verdict, id, attempt + 1);
            }));
          } else {
            TakeoverDone(gone);
          }
          return;
        }
        if (!StillGone(gone, verdict)) return TakeoverDone(gone);  // it came back meanwhile
        if (!owned->empty()) {
          spdlog::info("cluster: taking over {} session(s) of node {} from partition {}", owned->size(), gone, id);
        }
        for (const std::string& client : *owned) {
          TakeoverStep(gone);
          TakeOverSession(client, gone, verdict);
        }
        TakeoverDone(gone);
      }));
}

void ClusterAgent::TakeOverSession(const std::string& client_id, NodeId gone, uint64_t verdict, uint32_t attempt) {
  if (!StillGone(gone, verdict)) return TakeoverDone(gone);  // back (or never gone from here): its sessions stay its own
  if (!claim_guard_) return ClaimTakenOver(client_id, gone, verdict, partition::ClientOwner{}, attempt);
  // The owner as it is now: the claim is conditional on exactly that one
  // (node, boot, connection), so a client that reconnected since, even to
  // the same node, keeps its session (issue 29).
  partitions_->Read(partitions_->PartitionOf(client_id), partition::EncodeRegistryOwnerQuery(client_id),
                    scope_.Guard([this, client_id, gone, verdict, attempt](partition::PartitionResult result) {
                      std::optional<std::optional<partition::ClientOwner>> owner;
                      if (result.status == meta::ProposeStatus::kOk && result.result) {
                        owner = partition::DecodeClaimResult(*result.result);
                      }
                      if (!owner) {
                        ++counters_.session_takeovers_failed;
                        if (attempt >= 10) return TakeoverDone(gone);
                        loop_.AddTimer(1000, scope_.Guard([this, client_id, gone, verdict, attempt] {
                          TakeOverSession(client_id, gone, verdict, attempt + 1);
                        }));
                        return;
                      }
                      // Another node's (the client came back elsewhere) or free: nothing to take.
                      if (!owner->has_value() || (*owner)->node != gone) return TakeoverDone(gone);
                      ClaimTakenOver(client_id, gone, verdict, **owner, attempt);
                    }));
}

// `expected` (node 0: unguarded, while a node of an older binary is linked)
// is the owner the claim may replace.
void ClusterAgent::ClaimTakenOver(const std::string& client_id, NodeId gone, uint64_t verdict,
                                  partition::ClientOwner expected, uint32_t attempt) {
  if (!StillGone(gone, verdict)) return TakeoverDone(gone);
  const uint64_t serial = next_claim_++;
  const partition::ClientOwner owner{config_.self, boot_id_, serial};
  partition::ClaimClient claim{client_id, owner, false, gone, expected};
  claim.fenced = copy_fence_;
  const std::string command = partition::EncodeRegistryCommand(claim);
  partitions_->Propose(
      partitions_->PartitionOf(client_id), command,
      scope_.Guard([this, client_id, gone, verdict, serial, attempt,
                    fenced = claim.fenced](partition::PartitionResult result) {
        if (result.status != meta::ProposeStatus::kOk) {
          ++counters_.session_takeovers_failed;
          if (attempt < 10) {
            loop_.AddTimer(1000, scope_.Guard([this, client_id, gone, verdict, attempt] {
              TakeOverSession(client_id, gone, verdict, attempt + 1);
            }));
          } else {
            TakeoverDone(gone);
          }
          return;
        }
        // Empty: the client came back (elsewhere, or renewed its claim), or
        // another survivor was first. Without a result (no longer kept) the
        // read below tells.
        if (result.result && result.result->empty()) return TakeoverDone(gone);
        claims_[client_id] = serial;
        // A takeover never keeps the fence (the copy was another node's):
        // it is this claim's.
        AdoptTakenOver(client_id, gone, verdict, serial, fenced ? serial : 0, 0);
      }));
}

// The claim is ours: the session is read (again, while the partition
// elects a leader) and handed to the client id's shard, unless the client
// came back elsewhere meanwhile (the claim is no longer this one).
void ClusterAgent::AdoptTakenOver(const std::string& client_id, NodeId gone, uint64_t verdict, uint64_t serial,
                                  uint64_t copy_fence, uint32_t attempt) {
  LoadSession(client_id, scope_.Guard([this, client_id, gone, verdict, serial, copy_fence,
                                       attempt](ClaimAnswer answer) {
    auto claim = claims_.find(client_id);
    if (claim == claims_.end() || claim->second != serial) return TakeoverDone(gone);
    if (!answer.granted || !answer.session) {
      ++counters_.session_takeovers_failed;
      if (attempt < 10) {
        loop_.AddTimer(1000, scope_.Guard([this, client_id, gone, verdict, serial, copy_fence, attempt] {
          AdoptTakenOver(client_id, gone, verdict, serial, copy_fence, attempt + 1);
        }));
      } else {
        TakeoverDone(gone);
      }
      return;
    }
    ++counters_.sessions_taken_over;
    const uint16_t shard = core::ShardForClientId(client_id, config_.shard_count);
    PostToShard(shard, [client_id, gone, copy_fence, keys = std::move(*answer.session)](core::ShardBroker& broker) {
      broker.AdoptSession(client_id, keys, /*taken_over=*/true, gone);
      broker.SessionCopyReplaced(client_id, copy_fence);
    });
    TakeoverDone(gone);  // after the post: replays reach the shard behind it
  }));
}

// Sessions a restarted node recovered from its own store may have been
// taken over (task transfer) or resumed elsewhere while it was down. Each
// shard hands over the ids it recovered (their wills held); the registry
// says whether this node still owns each.
void ClusterAgent::CheckRecoveredSessions() {
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    PostToShard(shard, [port = &port()](core::ShardBroker& broker) {
      auto ids = broker.TakeUnconfirmed();
      if (!ids.empty()) port->ConfirmRecovered(broker.config().shard_id, std::move(ids));
    });
  }
}

void ClusterAgent::ConfirmRecoveredSession(uint16_t shard, const std::string& client_id, uint32_t attempt) {
  partitions_->Read(
      partitions_->PartitionOf(client_id), partition::EncodeRegistryOwnerQuery(client_id),
      scope_.Guard([this, shard, client_id, attempt](partition::PartitionResult result) {
        std::optional<std::optional<partition::ClientOwner>> owner;
        if (result.status == meta::ProposeStatus::kOk) {
          // No result: this node's metadata copy does not show the partition
          // open; nothing says the session is another node's: kept.
          owner = result.result ? partition::DecodeClaimResult(*result.result)
                                : std::optional<std::optional<partition::ClientOwner>>(
                                      partition::ClientOwner{config_.self, 0, 0});
        }
        if (!owner) {
          // Asked again while the partition elects; after 30 s the node
          // keeps what it recovered (as without partitions).
          if (attempt < 30) {
            loop_.AddTimer(1000, scope_.Guard([this, shard, client_id, attempt] {
              ConfirmRecoveredSession(shard, client_id, attempt + 1);
            }));
            return;
          }
          owner = std::optional<partition::ClientOwner>(partition::ClientOwner{config_.self, 0, 0});
        }
        const bool ours = owner->has_value() && (*owner)->node == config_.self;
        if (!ours) {
          ++counters_.recovered_sessions_stale;
          spdlog::info("cluster: the session of '{}' recovered here is served by {} now: dropped here", client_id,
                       owner->has_value() ? "node " + std::to_string((*owner)->node) : std::string("nobody"));
        }
        PostToShard(shard, [client_id, ours](core::ShardBroker& broker) { broker.ConfirmRecovered(client_id, ours); });
      }));
}

}  // namespace estuary::cluster
