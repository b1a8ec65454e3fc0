#include "tools/bench/topic_plan.h"

#include <utility>

namespace estuary::bench {

const char* ToString(Pattern pattern) {
  switch (pattern) {
    case Pattern::kOneTopic: return "one-topic";
    case Pattern::kPerPublisher: return "per-publisher";
    case Pattern::kFanIn: return "fan-in";
  }
  return "?";
}

TopicPlan::TopicPlan(Pattern pattern, std::string prefix, uint32_t publishers, uint32_t subscribers)
    : pattern_(pattern), prefix_(std::move(prefix)), publishers_(publishers), subscribers_(subscribers) {}

std::string TopicPlan::PublishTopic(uint32_t publisher) const {
  if (pattern_ == Pattern::kOneTopic) return prefix_;
  return prefix_ + "/" + std::to_string(publisher);
}

std::vector<std::string> TopicPlan::Filters(uint32_t subscriber) const {
  switch (pattern_) {
    case Pattern::kOneTopic: return {prefix_};
    case Pattern::kFanIn: return {prefix_ + "/+"};
    case Pattern::kPerPublisher: break;
  }
  std::vector<std::string> filters;
  for (uint32_t publisher = 0; publisher < publishers_; ++publisher) {
    if (Covers(subscriber, publisher)) filters.push_back(PublishTopic(publisher));
  }
  return filters;
}

bool TopicPlan::Covers(uint32_t subscriber, uint32_t publisher) const {
  if (pattern_ != Pattern::kPerPublisher) return true;
  if (subscribers_ == 0 || publishers_ == 0) return false;
  if (subscribers_ <= publishers_) return publisher % subscribers_ == subscriber;
  return subscriber % publishers_ == publisher;
}

uint32_t TopicPlan::Coverage(uint32_t publisher) const {
  if (pattern_ != Pattern::kPerPublisher) return subscribers_;
  if (subscribers_ == 0 || publishers_ == 0) return 0;
  if (subscribers_ <= publishers_) return 1;
  // Subscribers j < S with j % P == publisher.
  return subscribers_ / publishers_ + (publisher < subscribers_ % publishers_ ? 1 : 0);
}

}  // namespace estuary::bench
