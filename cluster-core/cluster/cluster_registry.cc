// The agent's side of the partitions: starting the partition host and the
// client-id registry's claims and releases (docs/cluster.md "One client id
// per cluster").
#include <spdlog/spdlog.h>

#include "cluster-core/cluster/cluster_agent.h"
#include "cluster-core/cluster/cluster_frames.h"
#include "cluster-core/partition/client_registry.h"
#include "cluster-core/partition/partition_state.h"

namespace estuary::cluster {

Expected<void, std::string> ClusterAgent::EnablePartitions(partition::PartitionHostConfig config,
                                                           persistence::StorageEngine& engine) {
  if (!meta_) return MakeError(std::string("partitions need the metadata group"));
  config.self = config_.self;
  config.boot_id = meta_->config().boot_id;
  boot_id_ = config.boot_id;
  partitions_ = std::make_unique<partition::PartitionHost>(
      *meta_host_, transport_, *meta_, engine, std::move(config),
      [this](partition::PartitionId) {
        auto state = std::make_unique<partition::PartitionState>([&loop = loop_] { return loop.clock().WallMs(); });
        // The leader of a queue's partition pushes what is appended to the
        // queue's consumer (cluster_queues.cc).
        state->set_queue_hooks(partition::QueueApplyHooks{
            [this](std::string_view queue, uint64_t offset) { OnQueueApplied(queue, offset, nullptr, nullptr); },
            [this](std::string_view queue, const std::vector<uint64_t>& offsets) {
              OnQueueApplied(queue, std::nullopt, &offsets, nullptr);
            },
            [this](std::string_view queue, const std::vector<uint64_t>& offsets) {
              OnQueueApplied(queue, std::nullopt, nullptr, &offsets);
            }});
        return state;
      });
  HandleFrames(kPartitionFrames, [host = partitions_.get()](NodeId from, uint8_t type, std::string_view body) {
    host->OnFrame(from, type, body);
  });
  partitions_->Start();
  SetRetainedOnPartitions(true);
  SetSessionsOnPartitions(true);
  retained_ = std::make_unique<services::RetainedService>(loop_, *partitions_, *meta_);
  retained_->Start();
  CheckRecoveredSessions();
  return {};
}

void ClusterAgent::ClaimClientId(const std::string& client_id, bool clean_start,
                                 std::function<void(ClaimAnswer)> done) {
  if (!partitions_) {
    done(ClaimAnswer{true, std::nullopt, 0, std::nullopt});
    return;
  }
  const uint64_t serial = next_claim_++;
  const partition::ClientOwner owner{config_.self, boot_id_, serial};
  partition::ClaimClient claim{client_id, owner, clean_start};
  claim.fenced = copy_fence_;
  const std::string command = partition::EncodeRegistryCommand(claim);
  ++counters_.client_claims;
  partitions_->Propose(
      partitions_->PartitionOf(client_id), command,
      scope_.Guard([this, client_id, clean_start, serial, fenced = claim.fenced,
                    done = std::move(done)](partition::PartitionResult result) {
        if (result.status != meta::ProposeStatus::kOk) {
          ++counters_.client_claims_failed;
          spdlog::warn("cluster: client id '{}' not claimed (status {}): the CONNECT is refused", client_id,
                       static_cast<int>(result.status));
          done(ClaimAnswer{});
          return;
        }
        claims_[client_id] = serial;
        std::optional<partition::ClientOwner> previous;
        std::optional<partition::ClientOwner> fence;
        if (result.result) {
          if (auto decoded = partition::DecodeClaimResultWithFence(*result.result)) {
            previous = decoded->previous;
            fence = decoded->fence;
          }
        } else {
          // The answering replica no longer had the result: tell everyone,
          // as before the registry (a connection that is not there is not
          // closed).
          Broadcast(kClientAttached, EncodeClientIds({client_id}));
        }
        // The previous owner on this node is closed by the shard's attach;
        // one elsewhere is told to close it.
        if (previous && previous->node != config_.self) {
          ++counters_.client_takeovers_out;
          transport_.Send(previous->node, kClientAttached, EncodeClientIds({client_id}));
        }
        // The session continues: unless this process served it last (its
        // shard has it), it is read from the partition. The read comes
        // after the claim's commit, and the partition refuses the previous
        // owner's changes from that commit on, so the copy read is final.
        // (A claim whose result was no longer kept reads it too.)
        const bool served_here = previous && previous->node == config_.self && previous->boot == boot_id_;
        // The copy fence (the registry's rule, ClientRegistry): the copy
        // here goes on under the fence it had; any other copy is this
        // claim's, announced by the shard once it replaced the old one.
        std::optional<uint64_t> copy_fence;
        if (served_here && !clean_start) {
          if (fence && fence->node == config_.self && fence->boot == boot_id_) {
            copy_fences_[client_id] = fence->connection;
          } else if (fenced) {
            copy_fences_.erase(client_id);
          }
        } else {
          copy_fence = fenced ? serial : 0;
        }
        if (!clean_start && (previous || !result.result) && !served_here) {
          const NodeId from = previous && previous->node != config_.self ? previous->node : 0;
          auto load = [this, client_id, from, done = std::move(done)](std::optional<uint64_t> fence_read) mutable {
            if (!fence_read) {
              ++counters_.session_loads_failed;
              spdlog::warn("cluster: the copy fence of client id '{}' could not be read from its partition: the "
                           "CONNECT is refused",
                           client_id);
              done(ClaimAnswer{});
              return;
            }
            LoadSession(client_id, [done = std::move(done), from, fence_read](ClaimAnswer answer) {
              answer.taken_from = from;
              answer.copy_fence = fence_read;
              done(std::move(answer));
            });
          };
          if (!result.result && fenced) {
            // Without the result, whether the claim made a new fence is not
            // known (it kept the old one if this boot served the id last):
            // the registry says.
            partitions_->Read(partitions_->PartitionOf(client_id), partition::EncodeRegistryOwnerQuery(client_id),
                              scope_.Guard([this, load = std::move(load)](partition::PartitionResult read) mutable {
                                std::optional<partition::ClaimResult> decoded;
                                if (read.status == meta::ProposeStatus::kOk && read.result) {
                                  decoded = partition::DecodeClaimResultWithFence(*read.result);
                                }
                                if (!decoded) return load(std::nullopt);
                                const auto& now = decoded->fence;
                                const bool ours = now && now->node == config_.self && now->boot == boot_id_;
                                load(ours ? now->connection : 0);
                              }));
            return;
          }
          load(copy_fence);
          return;
        }
        done(ClaimAnswer{true, std::nullopt, 0, copy_fence});
      }));
}

void ClusterAgent::ReleaseClientId(const std::string& client_id) {
  if (!partitions_) return;
  auto it = claims_.find(client_id);
  if (it == claims_.end()) return;
  const partition::ClientOwner owner{config_.self, boot_id_, it->second};
  claims_.erase(it);
  copy_fences_.erase(client_id);  // (the release ends the fence too)
  partitions_->Propose(partitions_->PartitionOf(client_id),
                       partition::EncodeRegistryCommand(partition::ReleaseClient{client_id, owner}), nullptr);
}

}  // namespace estuary::cluster
