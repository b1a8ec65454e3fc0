#pragma once
// Helpers for the cluster tests: Paho clients on given nodes (connected
// together, see PahoClient::StartConnect for why), unique topics, the
// waits with the cluster's deadlines, and a publisher that runs on its own
// thread and counts what was sent and acknowledged.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "conformance/cluster/cluster_process.h"
#include "conformance/cluster/cluster_start.h"
#include "conformance/mqtt/paho_client.h"

namespace estuary::conformance {

using testing::ClusterProcess;
using testing::NodeProcess;

// Deadlines (kConverge and StartCluster are in cluster_start.h): generous
// for a shared 2-core machine; a passing run takes a fraction of them.
inline constexpr std::chrono::seconds kDeliver{15};

inline std::string UniqueName(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// Paho clients (MQTT 3.1.1 unless `version`), one per (node, client id),
// connected together. `clean` = false keeps the session.
inline std::vector<std::unique_ptr<PahoClient>> ConnectClients(
    ClusterProcess& cluster, const std::vector<std::pair<int, std::string>>& where, bool clean = true,
    int version = MQTTVERSION_3_1_1) {
  std::vector<std::unique_ptr<PahoClient>> clients;
  std::vector<paho::token_ptr> tokens;
  for (const auto& [node, id] : where) {
    clients.push_back(std::make_unique<PahoClient>(cluster.node(node).mqtt_uri(), id, version));
    PahoClient::ConnectOptions options;
    options.clean = clean;
    tokens.push_back(clients.back()->StartConnect(options));
  }
  for (const auto& token : tokens) PahoClient::FinishConnect(token);
  return clients;
}

// Publishes QoS `qos` messages "0", "1", ... to `topic` from its own thread
// until Stop(); each Publish waits for its acknowledgement.
class TrafficPublisher {
 public:
  TrafficPublisher(PahoClient& client, std::string topic, int qos)
      : client_(client), topic_(std::move(topic)), qos_(qos) {
    thread_ = std::thread([this] { Run(); });
  }
  ~TrafficPublisher() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int sent() const { return sent_; }
  int acknowledged() const { return acknowledged_; }
  // Waits until `count` more messages than now were acknowledged.
  bool WaitAcknowledged(int more, std::chrono::milliseconds timeout) {
    const int target = acknowledged_ + more;
    const auto deadline = testing::Clock::now() + timeout;
    while (acknowledged_ < target && testing::Clock::now() < deadline) {
      std::unique_lock lock(mutex_);
      changed_.wait_until(lock, deadline, [&] { return acknowledged_ >= target || stop_; });
    }
    return acknowledged_ >= target;
  }
  std::string error() {
    std::lock_guard lock(mutex_);
    return error_;
  }

 private:
  void Run() {
    while (!stop_) {
      const int index = sent_;
      ++sent_;
      try {
        client_.Publish(topic_, std::to_string(index), qos_);
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex_);
        error_ = e.what();
        return;
      }
      {
        std::lock_guard lock(mutex_);
        ++acknowledged_;
      }
      changed_.notify_all();
    }
  }

  PahoClient& client_;
  std::string topic_;
  int qos_;
  std::atomic<bool> stop_{false};
  std::atomic<int> sent_{0};
  std::atomic<int> acknowledged_{0};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string error_;
  std::thread thread_;
};

// Payloads of `messages` as integers, in arrival order.
inline std::vector<int> Indexes(const std::vector<paho::const_message_ptr>& messages) {
  std::vector<int> out;
  for (const auto& message : messages) out.push_back(std::stoi(message->to_string()));
  return out;
}

// True when `indexes` is strictly increasing by one (no loss, duplicate or
// reordering inside the run).
inline bool Contiguous(const std::vector<int>& indexes) {
  for (size_t i = 1; i < indexes.size(); ++i) {
    if (indexes[i] != indexes[i - 1] + 1) return false;
  }
  return true;
}

}  // namespace estuary::conformance
