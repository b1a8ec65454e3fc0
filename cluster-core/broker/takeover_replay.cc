// ShardBroker's part of closing the takeover gap (docs/partitions.md, "The
// takeover gap"): forwards a gone node never confirmed come back from their
// publishers' nodes and are offered to the sessions taken from that node.
#include "cluster-core/broker/shard_broker.h"

namespace estuary::core {

void ShardBroker::DeliverReplayed(const MessagePtr& message, uint16_t gone, std::function<void()> done) {
  MatchResult& match = match_scratch_;
  match.Clear();
  router_.Match(message->topic, match);
  DeliverLocal(message, match, gone);
  AfterDurable(std::move(done));
}

}  // namespace estuary::core
