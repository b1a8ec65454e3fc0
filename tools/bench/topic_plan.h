#pragma once
// TopicPlan: which topic each publisher publishes to, which filters each
// subscriber subscribes to, and so which subscriber expects which
// publisher's messages (for the lost count).
//
//   one-topic      all publish to PREFIX, all subscribe to PREFIX
//                  (fan-out is one-topic with 1 publisher, N subscribers)
//   per-publisher  publisher i publishes to PREFIX/i; subscribers split the
//                  publishers among them: with S <= P subscriber j takes every
//                  i with i % S == j, with S > P subscriber j takes j % P
//   fan-in         publisher i publishes to PREFIX/i, every subscriber
//                  subscribes to the wildcard PREFIX/+
#include <cstdint>
#include <string>
#include <vector>

namespace estuary::bench {

enum class Pattern { kOneTopic, kPerPublisher, kFanIn };
const char* ToString(Pattern pattern);

class TopicPlan {
 public:
  TopicPlan(Pattern pattern, std::string prefix, uint32_t publishers, uint32_t subscribers);

  std::string PublishTopic(uint32_t publisher) const;
  std::vector<std::string> Filters(uint32_t subscriber) const;
  bool Covers(uint32_t subscriber, uint32_t publisher) const;
  // How many subscribers expect each message of `publisher`.
  uint32_t Coverage(uint32_t publisher) const;

 private:
  Pattern pattern_;
  std::string prefix_;
  uint32_t publishers_;
  uint32_t subscribers_;
};

}  // namespace estuary::bench
