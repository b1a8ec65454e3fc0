#include "server/tests/fault_retained_workload.h"

#include <algorithm>

#include "server/tests/process_support.h"

namespace estuary::server::testing {
namespace {

constexpr char kTopicPrefix[] = "fault/t";
constexpr char kKeyPrefix[] = "retained/";  // partition::RetainedKey
constexpr char kMarker[] = "fault-marker/m";
constexpr auto kReadWait = std::chrono::milliseconds(30'000);

int64_t SequenceOf(const std::string& payload) {
  if (payload.size() < 2 || payload[0] != 's') return -1;
  return std::stoll(payload.substr(1));
}

}  // namespace

RetainedWorkload::RetainedWorkload(int topics) {
  for (int t = 0; t < topics; ++t) all_topics_.push_back(kTopicPrefix + std::to_string(t));
  topics_ = all_topics_;
}

std::vector<std::string> RetainedWorkload::Keys() const {
  std::vector<std::string> keys;
  for (const auto& topic : all_topics_) keys.push_back(kKeyPrefix + topic);
  return keys;
}

void RetainedWorkload::UseKeys(const std::vector<std::string>& keys) {
  topics_.clear();
  for (const auto& key : keys) topics_.push_back(key.substr(sizeof(kKeyPrefix) - 1));
  next_topic_ = 0;
}

bool RetainedWorkload::Connect(FaultCluster& cluster, int node, std::string* error) {
  publisher_.reset();
  outstanding_.reset();
  const bool connected = WaitUntil(
      [&] {
        publisher_ = ConnectTo(cluster.node(node), "fault-publisher-" + std::to_string(++connections_));
        return publisher_ != nullptr;
      },
      kReadWait);
  if (!connected && error) *error = "the publisher could not connect to node " + std::to_string(node);
  return connected;
}

void RetainedWorkload::Send(const std::string& topic) {
  mqtt::PublishPacket publish;
  publish.topic = topic;
  publish.payload = "s" + std::to_string(++sequence_);
  publish.qos = 1;
  publish.retain = true;
  packet_id_ = packet_id_ == 65535 ? 1 : packet_id_ + 1;
  publish.packet_id = packet_id_;
  publisher_->Send(publish);
  outstanding_ = Outstanding{topic, sequence_, packet_id_};
  sent_[topic] = sequence_;
}

bool RetainedWorkload::WarmUp(std::chrono::milliseconds timeout, std::string* error) {
  for (const auto& topic : all_topics_) {
    Send(topic);
    const auto deadline = SteadyClock::now() + timeout;
    Step step = Step::kPending;
    while (step == Step::kPending && SteadyClock::now() < deadline) step = Publish(std::chrono::milliseconds(500));
    if (step != Step::kAcknowledged) {
      if (error) *error = "warm-up: " + topic + " was not acknowledged";
      return false;
    }
  }
  return true;
}

Workload::Step RetainedWorkload::Publish(std::chrono::milliseconds wait) {
  if (!outstanding_) {
    Send(topics_[next_topic_]);
    next_topic_ = (next_topic_ + 1) % topics_.size();
  }
  const auto deadline = SteadyClock::now() + wait;
  while (SteadyClock::now() < deadline) {
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    auto ack = publisher_->ReceiveAs<mqtt::AckPacket>(std::max(remaining, std::chrono::milliseconds(1)));
    if (ack && ack->packet_id == outstanding_->packet_id) {
      acknowledged_[outstanding_->topic] = outstanding_->sequence;
      outstanding_.reset();
      return Step::kAcknowledged;
    }
    if (publisher_->closed()) {
      outstanding_.reset();
      return Step::kBroken;
    }
  }
  return Step::kPending;
}

std::optional<std::map<std::string, std::string>> RetainedWorkload::ReadBack(FaultCluster& cluster, int node) {
  std::optional<std::map<std::string, std::string>> got;
  WaitUntil(
      [&] {
        auto reader = ConnectTo(cluster.node(node), "fault-reader-" + std::to_string(++connections_));
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
  outstanding_.reset();
  mqtt::PublishPacket marker;
  marker.topic = kMarker;
  marker.payload = "end";
  marker.qos = 1;
  marker.retain = true;
  marker.packet_id = packet_id_ = packet_id_ == 65535 ? 1 : packet_id_ + 1;
  publisher_->Send(marker);
  auto ack = publisher_->ReceiveAs<mqtt::AckPacket>(kReadWait);
  if (!ack || ack->packet_id != marker.packet_id) {
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
