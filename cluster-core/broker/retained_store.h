#pragma once
// RetainedStore: the last retained message per topic. Every shard holds a
// full replica (retained updates are broadcast to all shards), so a
// SUBSCRIBE is answered from local memory.
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "model/message.h"

namespace estuary::core {

class RetainedStore {
 public:
  // Stores `message` for its topic, or clears the topic when the payload is
  // empty [MQTT-3.3.1-10].
  void Apply(const MessagePtr& message);
  // Calls visit for every retained message whose topic matches `filter`.
  // Filters without wildcards are a single lookup; wildcard filters scan
  // only the topics sharing the filter's literal prefix.
  void Match(std::string_view filter, const std::function<void(const MessagePtr&)>& visit) const;
  // Drops messages whose expiry passed (wall-clock ms).
  size_t ExpireBefore(int64_t now_wall_ms);
  size_t size() const { return messages_.size(); }

 private:
  std::map<std::string, MessagePtr, std::less<>> messages_;
};

}  // namespace estuary::core
