// The shards' retained calls (through the port) handed to the node's
// RetainedService (cluster-core/services/retained/), which owns retained
// messages on partitions.
#include "cluster-core/cluster/cluster_agent.h"

namespace estuary::cluster {

void ClusterAgent::OnRetainedToPartition(const MessagePtr& message, uint16_t origin_shard, uint64_t safe_token) {
  if (!retained_) {  // no partitions (yet): nothing to wait for
    if (safe_token != 0) QueueSafe(origin_shard, safe_token);
    return;
  }
  if (safe_token == 0) {
    retained_->WriteUnacknowledged(message);
    return;
  }
  retained_->Write(message, [this, origin_shard, safe_token] { QueueSafe(origin_shard, safe_token); });
}

void ClusterAgent::OnReadRetained(uint16_t shard, const std::string& filter, core::ClusterPort::RetainedReadDone done) {
  auto answer = [this, shard, done = std::move(done)](std::optional<std::vector<MessagePtr>> messages) mutable {
    PostToShard(shard, [done = std::move(done), messages = std::move(messages)](core::ShardBroker& broker) mutable {
      done(broker, std::move(messages));
    });
  };
  if (!retained_) return answer(std::vector<MessagePtr>{});
  retained_->Read(filter, std::move(answer));
}

}  // namespace estuary::cluster
