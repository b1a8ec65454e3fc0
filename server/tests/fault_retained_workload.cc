#include "server/tests/fault_retained_workload.h"

#include <algorithm>

#include "server/tests/process_support.h"

namespace estuary::server::testing {
namespace {

constexpr char kTopicPrefix[] = "fault/t";
constexpr char kKeyPrefix[] = "retained/";  // partition::RetainedKey
constexpr char kMarker[] = "fault-marker/m";
constexpr auto kReadWait = std::chrono::milliseconds(30'000);

std::vector<std::string> TopicKeys(int topics) {
  std::vector<std::string> keys;
  for (int t = 0; t < topics; ++t) keys.push_back(std::string(kKeyPrefix) + kTopicPrefix + std::to_string(t));
  return keys;
}

std::string TopicOf(const std::string& key) { return key.substr(sizeof(kKeyPrefix) - 1); }

}  // namespace

RetainedWorkload::RetainedWorkload(int topics) : StreamWorkload(TopicKeys(topics), 1, "fault-publisher-") {}

mqtt::PublishPacket RetainedWorkload::MessageFor(const std::string& key) const {
  mqtt::PublishPacket publish;
  publish.topic = TopicOf(key);
  publish.retain = true;
  return publish;
}

void RetainedWorkload::OnSent(const std::string& key, int64_t sequence) { sent_[TopicOf(key)] = sequence; }

void RetainedWorkload::OnAcknowledged(const std::string& key, int64_t sequence) {
  acknowledged_[TopicOf(key)] = sequence;
}

std::optional<std::map<std::string, std::string>> RetainedWorkload::ReadBack(FaultCluster& cluster, int node) {
  std::optional<std::map<std::string, std::string>> got;
  WaitUntil(
      [&] {
        auto reader = ConnectTo(cluster.node(node), "fault-reader-" + std::to_string(NextConnection()));
        if (!reader) return false;
        got = RetainedUpTo(*reader, {"fault/#", kMarker}, kMarker, std::chrono::milliseconds(10'000));
        return got.has_value();
      },
      kReadWait);
  if (got) got->erase(kMarker);
  return got;
}

bool RetainedWorkload::Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
                              std::string* error) {
  // The end marker, retained after everything else: a reader that has it
  // has had all of fault/# first.
  mqtt::PublishPacket marker;
  marker.topic = kMarker;
  marker.payload = "end";
  marker.retain = true;
  if (!PublishAcknowledged(marker, kReadWait)) {
    if (error) *error = "the end marker was not acknowledged";
    return false;
  }
  for (int node : nodes) {
    auto seen = ReadBack(cluster, node);
    if (!seen) {
      if (error) *error = "node " + std::to_string(node) + " never answered the read-back SUBSCRIBE";
      return false;
    }
    for (const auto& [topic, acked] : acknowledged_) {
      ++counters.checked;
      auto it = seen->find(topic);
      const int64_t value = it == seen->end() ? -1 : SequenceOf(it->second);
      if (value >= acked && value <= sent_[topic]) {
        ++counters.delivered;
      } else {
        ++counters.lost;
        if (counters.losses.size() < 5) {
          counters.losses.push_back("node " + std::to_string(node) + " " + topic + ": read " +
                                    (it == seen->end() ? "nothing" : it->second) + ", last acknowledged s" +
                                    std::to_string(acked));
        }
      }
    }
  }
  return true;
}

}  // namespace estuary::server::testing
